"""Tests of the vendored UCI Adult data set and its public feature map."""

import gzip
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.utils import Bunch

import skdp.datasets
from skdp.datasets import (
    ADULT_NUMERIC_BINS,
    ADULT_SCHEMA,
    _adult,
    adult_design_matrix,
    adult_feature_names,
    load_adult,
)

FEATURES = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
]
NUMERIC = [
    "age",
    "fnlwgt",
    "education_num",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
]
CATEGORICAL = [name for name in FEATURES if name not in NUMERIC]
N_CATEGORIES = {
    "workclass": 9,
    "education": 16,
    "marital_status": 7,
    "occupation": 15,
    "relationship": 6,
    "race": 5,
    "sex": 2,
    "native_country": 42,
}
N_COLUMNS = len(NUMERIC) + sum(N_CATEGORIES.values())  # 108
SOURCE_SHA256 = "c6c77bfbd8b6c387f5e508860cdc6595f3522e645be92e9d55612bbf046829f9"


def _pythonpath(repo):
    """PYTHONPATH for a child interpreter that must import this skdp."""
    return os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))


@pytest.fixture(scope="module")
def adult():
    """Load the whole data set once for the module."""
    return load_adult()


@pytest.fixture(scope="module")
def design(adult):
    """Encode the whole data set once for the module."""
    return adult_design_matrix(adult.data)


# --- the vendored file -------------------------------------------------------


def test_data_file_is_inside_package():
    """The loader reads a file shipped inside the package."""
    path = Path(str(_adult._data_resource())).resolve()
    package_dir = Path(skdp.datasets.__file__).resolve().parent
    assert path == package_dir / "data" / "adult.csv.gz"
    assert path.is_file()
    assert "/work/shared" not in str(path)


def test_data_file_content_is_the_source_csv():
    """The vendored file decompresses to the exact source CSV."""
    raw = _adult._data_resource().read_bytes()
    assert raw[:2] == b"\x1f\x8b"  # gzip
    assert hashlib.sha256(gzip.decompress(raw)).hexdigest() == SOURCE_SHA256


@pytest.fixture(scope="module")
def fresh_run():
    """Load and encode the data in a fresh interpreter without pandas.

    Every file opened while loading is recorded with an audit hook.
    """
    repo = Path(skdp.datasets.__file__).resolve().parents[2]
    code = (
        "import json, sys\n"
        "sys.modules['pandas'] = None\n"
        "opened = []\n"
        "def hook(event, args):\n"
        "    if event == 'open' and isinstance(args[0], str):\n"
        "        opened.append(args[0])\n"
        "import skdp.datasets as d\n"
        "sys.addaudithook(hook)\n"
        "X, y = d.load_adult(return_X_y=True)\n"
        "shape = d.adult_design_matrix(X).shape\n"
        "print(json.dumps({'opened': opened, 'shape': shape}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=_pythonpath(repo)),
        cwd=str(repo),
        check=True,
        timeout=120,
    )
    return json.loads(result.stdout)


def test_loader_opens_no_file_outside_the_package(fresh_run):
    """Loading opens the package's data file and nothing under /work/shared."""
    opened = [str(Path(p).resolve()) for p in fresh_run["opened"]]
    data_dir = str(Path(skdp.datasets.__file__).resolve().parent / "data")
    assert any(p.startswith(data_dir) for p in opened)
    assert not [p for p in opened if p.startswith("/work/shared")]


def test_import_does_not_need_pandas(fresh_run):
    """Importing, loading and encoding work without pandas."""
    assert fresh_run["shape"] == [48_842, 108]


# --- load_adult ----------------------------------------------------------------


def test_bunch_contents(adult):
    """The Bunch has the documented keys, shapes and dtypes."""
    assert isinstance(adult, Bunch)
    assert adult.data.shape == (48_842, 14)
    assert adult.data.dtype == object
    assert adult.target.shape == (48_842,)
    assert adult.target.dtype == np.int64
    assert adult.feature_names == FEATURES
    assert adult.target_names == ["<=50K", ">50K"]
    assert adult.split.shape == (48_842,)
    assert set(adult.split) == {"train", "test"}
    assert "Becker" in adult.DESCR and "10.24432/C5XW20" in adult.DESCR
    assert "frame" not in adult


def test_first_record(adult):
    """The first record of adult.data is parsed to int and str."""
    expected = [39, "State-gov", 77516, "Bachelors", 13, "Never-married"]
    expected += ["Adm-clerical", "Not-in-family", "White", "Male", 2174, 0, 40]
    expected += ["United-States"]
    assert adult.data[0].tolist() == expected
    assert adult.target[0] == 0
    assert type(adult.data[0, 0]) is int and type(adult.data[0, 1]) is str


@pytest.mark.parametrize(
    ("split", "n_rows", "n_positive"),
    [("all", 48_842, 11_687), ("train", 32_561, 7_841), ("test", 16_281, 3_846)],
)
def test_split_sizes_and_label_balance(split, n_rows, n_positive):
    """Each split has the UCI row count and positive count."""
    bunch = load_adult(split=split)
    assert bunch.data.shape == (n_rows, 14)
    assert bunch.target.shape == (n_rows,)
    assert set(np.unique(bunch.target)) == {0, 1}
    assert int(bunch.target.sum()) == n_positive
    assert 0.23 < bunch.target.mean() < 0.25
    if split != "all":
        assert (bunch.split == split).all()


def test_splits_partition_all_in_order(adult):
    """'all' is 'train' followed by 'test'."""
    train = load_adult(split="train")
    test = load_adult(split="test")
    assert (adult.split[:32_561] == "train").all()
    assert (adult.split[32_561:] == "test").all()
    np.testing.assert_array_equal(adult.data, np.vstack([train.data, test.data]))
    np.testing.assert_array_equal(
        adult.target, np.concatenate([train.target, test.target])
    )


def test_return_X_y(adult):
    """return_X_y gives the data and target of the split."""
    X, y = load_adult(split="test", return_X_y=True)
    assert X.shape == (16_281, 14)
    np.testing.assert_array_equal(y, adult.target[adult.split == "test"])


def test_invalid_split():
    """An unknown split is rejected."""
    with pytest.raises(ValueError, match="split"):
        load_adult(split="validation")


def test_keyword_only():
    """The parameters are keyword-only."""
    with pytest.raises(TypeError):
        load_adult("train")


def test_results_are_independent_copies():
    """Editing a result does not change the next one."""
    first = load_adult()
    first.data[0, 0] = -1
    first.target[0] = 7
    second = load_adult()
    assert second.data[0, 0] == 39
    assert second.target[0] == 0


@pytest.mark.parametrize(
    ("label", "value"),
    [("<=50K", 0), (">50K", 1), ("<=50K.", 0), (">50K.", 1), (" >50K. ", 1)],
)
def test_label_normalisation(label, value):
    """Labels with the test file's trailing '.' are normalised."""
    assert _adult._normalise_label(label) == value


def test_unknown_label_raises():
    """An unexpected label is an error, not a silent 0."""
    with pytest.raises(ValueError, match="income label"):
        _adult._normalise_label("50K")


# --- ADULT_SCHEMA ----------------------------------------------------------------


def test_schema_layout():
    """The schema is a dict of bounds and category lists in feature order."""
    assert isinstance(ADULT_SCHEMA, dict)
    assert list(ADULT_SCHEMA) == FEATURES
    for name in NUMERIC:
        low, high = ADULT_SCHEMA[name]
        assert isinstance(low, int) and isinstance(high, int) and low < high
    for name in CATEGORICAL:
        categories = ADULT_SCHEMA[name]
        assert isinstance(categories, list)
        assert len(categories) == N_CATEGORIES[name]
        assert len(set(categories)) == len(categories)
        assert all(isinstance(c, str) and c == c.strip() for c in categories)
    assert ADULT_SCHEMA["age"] == (17, 90)
    assert ADULT_SCHEMA["education_num"] == (1, 16)
    assert ADULT_SCHEMA["capital_gain"] == (0, 99_999)
    assert ADULT_SCHEMA["capital_loss"] == (0, 4_356)
    assert ADULT_SCHEMA["hours_per_week"] == (1, 99)


def test_missing_level_only_where_documented():
    """'?' is declared exactly for the columns with missing values."""
    with_missing = {name for name in CATEGORICAL if "?" in ADULT_SCHEMA[name]}
    assert with_missing == {"workclass", "occupation", "native_country"}
    for name in with_missing:
        assert ADULT_SCHEMA[name][-1] == "?"


def test_schema_covers_every_value(adult):
    """Every value of the data fits the public schema."""
    for j, name in enumerate(FEATURES):
        column = adult.data[:, j]
        if name in NUMERIC:
            low, high = ADULT_SCHEMA[name]
            values = column.astype(np.int64)
            assert low <= values.min() and values.max() <= high, name
        else:
            assert set(column) <= set(ADULT_SCHEMA[name]), name


def test_every_declared_category_occurs(adult):
    """No declared category is misspelt relative to the data."""
    for j, name in enumerate(FEATURES):
        if name in CATEGORICAL:
            assert set(adult.data[:, j]) == set(ADULT_SCHEMA[name]), name


def test_education_num_codes_education(adult):
    """education_num is a one-to-one code of education."""
    pairs = set(zip(adult.data[:, 3], adult.data[:, 4], strict=True))
    assert len(pairs) == 16
    assert len({education for education, _ in pairs}) == 16


# --- adult_design_matrix -----------------------------------------------------


def test_feature_names():
    """The 108 feature names are unique and follow the schema order."""
    names = adult_feature_names()
    assert len(names) == N_COLUMNS == 108
    assert len(set(names)) == len(names)
    assert names[:3] == ["age", "workclass=Private", "workclass=Self-emp-not-inc"]
    assert "workclass=?" in names and "native_country=?" in names
    for name in NUMERIC:
        assert name in names
    assert adult_feature_names() is not adult_feature_names()


def test_design_matrix_shape_and_range(adult, design):
    """The design matrix is finite float64 in [0, 1]."""
    assert design.shape == (48_842, N_COLUMNS)
    assert design.dtype == np.float64
    assert np.isfinite(design).all()
    assert design.min() >= 0.0 and design.max() <= 1.0


def test_design_matrix_one_hot_blocks(design):
    """Each categorical block is one-hot and the row sums add up."""
    names = np.array(adult_feature_names())
    for name in CATEGORICAL:
        block = design[:, np.char.startswith(names, name + "=")]
        assert block.shape[1] == N_CATEGORIES[name]
        assert set(np.unique(block)) == {0.0, 1.0}
        np.testing.assert_array_equal(block.sum(axis=1), 1.0)
    numeric = design[:, np.isin(names, NUMERIC)]
    row_sums = design.sum(axis=1)
    np.testing.assert_allclose(row_sums, len(CATEGORICAL) + numeric.sum(axis=1))
    assert (row_sums >= 8.0).all() and (row_sums <= 14.0).all()


def test_design_matrix_first_record(adult, design):
    """The first record is encoded as computed by hand."""
    names = adult_feature_names()
    row = dict(zip(names, design[0], strict=True))
    assert row["age"] == pytest.approx((39 - 17) / (90 - 17))
    assert row["education_num"] == pytest.approx((13 - 1) / 15)
    assert row["workclass=State-gov"] == 1.0
    assert row["sex=Male"] == 1.0 and row["sex=Female"] == 0.0
    assert row["native_country=United-States"] == 1.0
    categorical_hits = {n for n, v in row.items() if "=" in n and v == 1.0}
    assert len(categorical_hits) == len(CATEGORICAL)


def test_design_matrix_is_per_record(adult, design):
    """Encoding a subset of the records gives the same rows."""
    rows = np.array([5, 0, 48_841, 17])
    np.testing.assert_array_equal(adult_design_matrix(adult.data[rows]), design[rows])
    assert adult_design_matrix(adult.data[:0]).shape == (0, N_COLUMNS)


def test_binned_design_matrix(adult, design):
    """bins=True appends one-hot public bins that agree with the raw values."""
    binned = adult_design_matrix(adult.data, bins=True)
    names = np.array(adult_feature_names(bins=True))
    assert binned.shape == (48_842, 144) == (48_842, names.size)
    assert len(set(names.tolist())) == names.size
    np.testing.assert_array_equal(binned[:, :N_COLUMNS], design)
    assert np.sqrt((binned**2).sum(axis=1)).max() <= math.sqrt(8 + 6 + 4)
    for name, edges in ADULT_NUMERIC_BINS.items():
        low, high = ADULT_SCHEMA[name]
        assert edges[0] == low and edges[-1] == high + 1  # bins cover the domain
        block = binned[:, np.char.startswith(names, name + "=[")]
        assert block.shape[1] == len(edges) - 1
        np.testing.assert_array_equal(block.sum(axis=1), 1.0)
        values = adult.data[:, FEATURES.index(name)].astype(np.int64)
        k = block.argmax(axis=1)
        lows, highs = np.asarray(edges)[k], np.asarray(edges)[k + 1]
        assert ((lows <= values) & (values < highs)).all()


def test_binned_design_matrix_is_per_record(adult):
    """Bins depend on each record only; out-of-range values land in end bins."""
    rows = np.array([3, 48_841, 0])
    full = adult_design_matrix(adult.data, bins=True)
    np.testing.assert_array_equal(
        adult_design_matrix(adult.data[rows], bins=True), full[rows]
    )
    X = adult.data[:1].copy()
    X[0, FEATURES.index("age")] = 200
    names = adult_feature_names(bins=True)
    row = dict(zip(names, adult_design_matrix(X, bins=True)[0], strict=True))
    assert row["age=[70,91)"] == 1.0 and row["age"] == 1.0


def test_numeric_clipping(adult):
    """Numeric values outside their bounds are clipped to 0 or 1."""
    X = adult.data[:2].copy()
    age, hours = FEATURES.index("age"), FEATURES.index("hours_per_week")
    X[0, age], X[1, age] = 150, 3
    X[0, hours], X[1, hours] = 120.5, -4
    names = adult_feature_names()
    Z = adult_design_matrix(X)
    assert Z[0, names.index("age")] == 1.0 and Z[1, names.index("age")] == 0.0
    assert Z[0, names.index("hours_per_week")] == 1.0
    assert Z[1, names.index("hours_per_week")] == 0.0


def test_unknown_category_raises(adult):
    """An undeclared category names the column and the value."""
    X = adult.data[:3].copy()
    X[1, FEATURES.index("workclass")] = "Astronaut"
    with pytest.raises(ValueError, match=r"'workclass'.*'Astronaut'"):
        adult_design_matrix(X)


def test_untrimmed_or_missing_category_raises(adult):
    """Untrimmed, undeclared '?' and None values are rejected."""
    X = adult.data[:3].copy()
    X[0, FEATURES.index("native_country")] = " United-States"
    with pytest.raises(ValueError, match="native_country"):
        adult_design_matrix(X)
    X = adult.data[:3].copy()
    X[2, FEATURES.index("race")] = "?"  # race has no missing level
    with pytest.raises(ValueError, match=r"'race'.*'\?'"):
        adult_design_matrix(X)
    X[2, FEATURES.index("race")] = None
    with pytest.raises(ValueError, match=r"'race'.*None"):
        adult_design_matrix(X)


def test_bad_numeric_raises(adult):
    """NaN and non-numeric values in a numeric column are rejected."""
    X = adult.data[:3].copy()
    X[0, FEATURES.index("fnlwgt")] = float("nan")
    with pytest.raises(ValueError, match="fnlwgt"):
        adult_design_matrix(X)
    X[0, FEATURES.index("fnlwgt")] = "many"
    with pytest.raises(ValueError, match="fnlwgt"):
        adult_design_matrix(X)


def test_wrong_shape_raises(adult):
    """An array without the 14 columns is rejected."""
    with pytest.raises(ValueError, match="14 columns"):
        adult_design_matrix(adult.data[:, :13])


def test_editing_public_schema_does_not_change_the_map(adult, design):
    """The feature map does not depend on the mutable public dict."""
    categories = ADULT_SCHEMA["sex"]
    saved = list(categories)
    try:
        categories.reverse()
        np.testing.assert_array_equal(adult_design_matrix(adult.data[:50]), design[:50])
    finally:
        categories[:] = saved


# --- pandas ------------------------------------------------------------------


def test_as_frame_round_trip(adult, design):
    """The DataFrame holds the same records and encodes the same way."""
    pd = pytest.importorskip("pandas")
    bunch = load_adult(as_frame=True)
    assert isinstance(bunch.data, pd.DataFrame)
    assert list(bunch.data.columns) == FEATURES
    assert bunch.data.shape == (48_842, 14)
    for name in NUMERIC:
        assert bunch.data[name].dtype == np.int64
    for name in CATEGORICAL:
        dtype = bunch.data[name].dtype
        assert isinstance(dtype, pd.CategoricalDtype)
        assert list(dtype.categories) == ADULT_SCHEMA[name]
    assert isinstance(bunch.target, pd.Series) and bunch.target.name == "income"
    np.testing.assert_array_equal(bunch.target.to_numpy(), adult.target)
    assert list(bunch.frame.columns) == [*FEATURES, "income"]
    np.testing.assert_array_equal(bunch.data.to_numpy(dtype=object), adult.data)
    np.testing.assert_array_equal(adult_design_matrix(bunch.data), design)
    # Extra columns and another column order are accepted by name.
    np.testing.assert_array_equal(
        adult_design_matrix(bunch.frame[[*FEATURES[::-1], "income"]]), design
    )
    X, y = load_adult(split="train", as_frame=True, return_X_y=True)
    assert X.shape == (32_561, 14) and y.shape == (32_561,)


def test_as_frame_missing_column_raises():
    """A DataFrame without a feature column is rejected."""
    pytest.importorskip("pandas")
    X, _ = load_adult(split="test", as_frame=True, return_X_y=True)
    with pytest.raises(ValueError, match="sex"):
        adult_design_matrix(X.drop(columns="sex"))


def test_as_frame_without_pandas(monkeypatch):
    """as_frame=True without pandas gives a clear ImportError."""
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="requires pandas"):
        load_adult(as_frame=True)

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from skdp.datasets import ADULT_SCHEMA, load_adult
from skdp.preprocessing import SchemaEncoder
from skdp.schema import Categorical, Numeric, TableSchema

pd = pytest.importorskip("pandas")

UNKNOWN = "not-declared"


@st.composite
def numeric_specs(draw):
    low = draw(st.floats(-1e6, 1e6, allow_nan=False))
    width = draw(st.floats(1e-3, 1e6, allow_nan=False))
    high = low + width
    bins = draw(st.sampled_from([None, 1, 3, "edges"]))
    if bins == "edges":
        bins = (low, low + width / 3, high)
    return Numeric(low, high, bins=bins, nullable=draw(st.booleans()))


@st.composite
def schemas(draw):
    n = draw(st.integers(1, 5))
    columns = {}
    for j in range(n):
        if draw(st.booleans()):
            columns[f"c{j}"] = draw(numeric_specs())
        else:
            k = draw(st.integers(1, 4))
            categories = tuple(f"v{i}" for i in range(k))
            columns[f"c{j}"] = Categorical(categories, nullable=draw(st.booleans()))
    return TableSchema(columns)


def adversarial_value(draw, spec):
    """Values at and beyond the bounds, unknown categories, missing values."""
    if isinstance(spec, Numeric):
        return draw(
            st.sampled_from(
                [
                    spec.low,
                    spec.high,
                    spec.low - 1e12,
                    spec.high + 1e12,
                    math.nan,
                    (spec.low + spec.high) / 2,
                ]
            )
            | st.floats(allow_nan=False, allow_infinity=False)
        )
    return draw(st.sampled_from([*spec.categories, UNKNOWN, None, math.nan]))


@st.composite
def tables(draw):
    schema = draw(schemas())
    n_rows = draw(st.integers(1, 6))
    rows = [
        [adversarial_value(draw, schema.columns[name]) for name in schema.features]
        for _ in range(n_rows)
    ]
    return schema, pd.DataFrame(rows, columns=schema.features, dtype=object)


def _missing(value):
    return value is None or (isinstance(value, float) and math.isnan(value))


@pytest.mark.parametrize("numeric", ["scale", "bins"])
@pytest.mark.parametrize("handle_unknown", ["error", "ignore", "other"])
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=tables())
def test_row_norm_bound_holds_on_adversarial_rows(data, numeric, handle_unknown):
    schema, frame = data
    encoder = SchemaEncoder(schema, numeric=numeric, handle_unknown=handle_unknown)
    numeric_specs = [s for s in schema.columns.values() if isinstance(s, Numeric)]
    if (
        numeric == "bins"
        and numeric_specs
        and all(s.bins is None for s in numeric_specs)
    ):
        with pytest.raises(ValueError, match="no numeric column declares bins"):
            encoder.fit(frame)
        return
    encoder.fit(frame)
    assert encoder.row_norm_ == pytest.approx(math.sqrt(len(schema.features)))
    assert encoder.row_norm_ == encoder.row_norm_bound()
    # The first declared column whose values the encoder must refuse, if any.
    refused = None
    for name in schema.features:
        spec = schema.columns[name]
        values = frame[name].tolist()
        if not spec.nullable and any(_missing(v) for v in values):
            refused = name
            break
        if (
            isinstance(spec, Categorical)
            and handle_unknown == "error"
            and any(not _missing(v) and v not in spec.categories for v in values)
        ):
            refused = name
            break
    if refused is not None:
        with pytest.raises(ValueError, match=f"Column '{refused}'"):
            encoder.transform(frame)
        return
    out = encoder.transform(frame)
    names = encoder.get_feature_names_out()
    assert out.shape == (len(frame), len(names))
    assert len(set(names)) == len(names)
    assert np.all(np.isfinite(out))
    assert np.all(np.linalg.norm(out, axis=1) <= encoder.row_norm_ * (1 + 1e-12))
    # The same rows as a 2-d object array in the schema's order.
    np.testing.assert_array_equal(encoder.transform(frame.to_numpy()), out)


def test_encoding_of_each_kind():
    schema = TableSchema(
        {
            "age": Numeric(0, 100, bins=[0, 20, 60, 100], nullable=True),
            "sex": Categorical(["F", "M"], nullable=True),
            "x": (-5.0, 5.0),
            "y": [0, 1],
        },
        target="y",
        classes=[0, 1],
    )
    frame = pd.DataFrame(
        {
            "y": [1, 0, 1, 0],
            "x": [5.0, -50.0, 0.0, 2.5],
            "sex": ["M", None, "F", "F"],
            "age": [20.0, np.nan, 150.0, -3.0],
        }
    )
    scaled = SchemaEncoder(schema).fit(frame)
    np.testing.assert_array_equal(
        scaled.transform(frame),
        [
            [-0.6, 0, 0, 1, 0, 1.0],
            [0.0, 1, 0, 0, 1, -1.0],
            [1.0, 0, 1, 0, 0, 0.0],
            [-1.0, 0, 1, 0, 0, 0.5],
        ],
    )
    assert scaled.get_feature_names_out().tolist() == [
        "age",
        "age_missing",
        "sex_F",
        "sex_M",
        "sex_missing",
        "x",
    ]
    assert scaled.classes_.tolist() == [0, 1]
    assert scaled.row_norm_ == pytest.approx(math.sqrt(3))
    binned = SchemaEncoder(schema, numeric="bins").fit(frame)
    np.testing.assert_array_equal(
        binned.transform(frame)[:, :4],
        [[0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0], [1, 0, 0, 0]],
    )
    assert binned.get_feature_names_out()[:4].tolist() == [
        "age_[0, 20)",
        "age_[20, 60)",
        "age_[60, 100)",
        "age_missing",
    ]


def test_bins_asked_for_but_none_declared_is_refused():
    """``numeric="bins"`` with no declared bins would scale every column."""
    schema = TableSchema(
        {"age": Numeric(0, 100), "hours": Numeric(0, 99), "sex": ["F", "M"]}
    )
    frame = pd.DataFrame({"age": [30], "hours": [40], "sex": ["F"]})
    encoder = SchemaEncoder(schema, numeric="bins")
    with pytest.raises(ValueError, match="no numeric column declares bins") as info:
        encoder.fit(frame)
    assert "'age', 'hours'" in str(info.value)
    assert not hasattr(encoder, "schema_")
    # One binned column is enough: the others are scaled, as documented.
    mixed = TableSchema({"age": Numeric(0, 100, bins=4), "hours": Numeric(0, 99)})
    out = SchemaEncoder(mixed, numeric="bins").fit_transform(frame[["age", "hours"]])
    assert out.shape == (1, 5)
    # A schema with no numeric column has nothing to bin.
    only = TableSchema({"sex": ["F", "M"]})
    SchemaEncoder(only, numeric="bins").fit(frame[["sex"]])


def test_unknown_category_policies():
    schema = TableSchema({"c": ["a", "b"]})
    frame = pd.DataFrame({"c": ["a", "z", "b"]})
    with pytest.raises(ValueError, match=r"Column 'c'.*\['z'\]"):
        SchemaEncoder(schema).fit(frame).transform(frame)
    ignore = SchemaEncoder(schema, handle_unknown="ignore").fit_transform(frame)
    np.testing.assert_array_equal(ignore, [[1, 0], [0, 0], [0, 1]])
    other = SchemaEncoder(schema, handle_unknown="other").fit(frame)
    np.testing.assert_array_equal(
        other.transform(frame), [[1, 0, 0], [0, 0, 1], [0, 1, 0]]
    )
    assert other.get_feature_names_out().tolist() == ["c_a", "c_b", "c_other"]


def test_categories_declared_with_another_type_are_named():
    # A new user declared ["0", "1"] for a column of integers: the message
    # read as if 1 and 0 were declared.
    schema = TableSchema({"nonwhite": ["0", "1"]})
    frame = pd.DataFrame({"nonwhite": [1, 0, 1]})
    with pytest.raises(ValueError) as error:
        SchemaEncoder(schema).fit(frame).transform(frame)
    message = str(error.value)
    assert "declared: ['0', '1']" in message
    assert "int values" in message and "declared as str" in message
    plain = TableSchema({"c": ["a", "b"]})
    with pytest.raises(ValueError) as error:
        SchemaEncoder(plain).fit_transform(pd.DataFrame({"c": ["z"]}))
    assert "declared as" not in str(error.value)


def test_a_label_declared_as_a_feature_is_refused():
    # A new user reused a schema declaring the label among the features and
    # fitted on the whole frame: accuracy 1.0, no warning.
    from skdp.linear_model import DPLogisticRegression
    from skdp.pipeline import make_private_pipeline

    frame = pd.DataFrame({"age": [20, 30, 40, 50], "owned": [0, 1, 0, 1]})
    schema = TableSchema({"age": (0, 100), "owned": [0, 1]}, classes=[0, 1])
    encoder = SchemaEncoder(schema)
    with pytest.raises(ValueError, match=r"column 'owned'.*target='owned'"):
        encoder.fit(frame, frame["owned"])
    assert not hasattr(encoder, "schema_")
    pipeline = make_private_pipeline(schema, DPLogisticRegression(epsilon=1.0))
    with pytest.raises(ValueError, match="read its own label"):
        pipeline.fit(frame, frame["owned"])
    # Declared as the target, the same frame fits; an unnamed y is not read,
    # and a label derived from a feature keeps its name, not its values.
    declared = TableSchema({"age": (0, 100), "owned": [0, 1]}, target="owned")
    SchemaEncoder(declared).fit(frame, frame["owned"])
    encoder.fit(frame, frame["owned"].to_numpy())
    encoder.fit(frame, (frame["age"] > 35).astype(int))


def test_clear_errors_name_the_column():
    schema = TableSchema({"age": (0, 100), "sex": ["F", "M"]})
    encoder = SchemaEncoder(schema)
    with pytest.raises(ValueError, match="'sex'"):
        encoder.fit(pd.DataFrame({"age": [1]}))
    assert not hasattr(encoder, "row_norm_")
    with pytest.raises(ValueError, match="2 features"):
        encoder.fit(np.zeros((3, 3)))
    encoder.fit(pd.DataFrame({"age": [1], "sex": ["F"]}))
    with pytest.raises(ValueError, match="Column 'age' has 1 missing.*nullable"):
        encoder.transform(pd.DataFrame({"age": [np.nan], "sex": ["F"]}))
    with pytest.raises(ValueError, match="Column 'sex' has 1 missing"):
        encoder.transform(pd.DataFrame({"age": [3], "sex": [None]}))
    with pytest.raises(ValueError, match="Column 'age' is declared numeric"):
        encoder.transform(pd.DataFrame({"age": ["old"], "sex": ["F"]}))
    with pytest.raises(ValueError, match="Column 'age' holds 1 infinite"):
        encoder.transform(pd.DataFrame({"age": [np.inf], "sex": ["F"]}))
    # Text that reads as a number is text all the same: the table was not
    # converted (before, "5" was read as 5.0 without a word).
    with pytest.raises(ValueError, match="'age' is declared numeric but holds text"):
        encoder.transform(pd.DataFrame({"age": ["5"], "sex": ["F"]}))
    with pytest.raises(ValueError, match="schema must be declared"):
        SchemaEncoder().fit(np.zeros((2, 2)))


def test_fit_reads_only_column_names():
    schema = TableSchema(ADULT_SCHEMA)
    X, _ = load_adult(return_X_y=True, as_frame=True)
    encoder = SchemaEncoder(schema).fit(X.head(0))
    full = SchemaEncoder(schema).fit(X)
    sample = X.sample(500, random_state=0)
    np.testing.assert_array_equal(encoder.transform(sample), full.transform(sample))
    clone(encoder).fit(X.iloc[:, ::-1])  # column order of a frame does not matter
    out = encoder.transform(sample)
    assert out.shape == (500, len(encoder.get_feature_names_out()))
    assert np.linalg.norm(out, axis=1).max() <= encoder.row_norm_


def test_set_output_pandas():
    schema = TableSchema({"age": (0, 100), "sex": ["F", "M"]})
    frame = pd.DataFrame({"age": [10, 90], "sex": ["F", "M"]})
    out = SchemaEncoder(schema).set_output(transform="pandas").fit_transform(frame)
    assert list(out.columns) == ["age", "sex_F", "sex_M"]


@pytest.mark.parametrize(
    "columns, handle_unknown, first, second, name",
    [
        ({"a": ["b_c", "x"], "a_b": ["c", "y"]}, "error", "'a'", "'a_b'", "'a_b_c'"),
        ({"a_b": (0, 1), "a": ["b"]}, "error", "'a_b'", "'a'", "'a_b'"),
        ({"a": ["other", "x"]}, "other", "category 'other'", "undeclared", "'a_other'"),
        (
            {"a": Categorical(["missing", "x"], nullable=True)},
            "error",
            "category 'missing'",
            "missing indicator",
            "'a_missing'",
        ),
    ],
)
def test_repeated_output_names_are_refused_naming_both_columns(
    columns, handle_unknown, first, second, name
):
    # Issue 20: such schemas gave two output columns the same name.
    encoder = SchemaEncoder(TableSchema(columns), handle_unknown=handle_unknown)
    frame = pd.DataFrame({key: [None] for key in columns})
    with pytest.raises(ValueError, match="not unique") as info:
        encoder.fit(frame)
    message = str(info.value)
    assert first in message and second in message and name in message
    assert message.index(first) < message.index(second)
    assert not hasattr(encoder, "schema_")  # refused before any state changes


def test_a_declared_other_is_fine_when_undeclared_values_get_no_output():
    encoder = SchemaEncoder(TableSchema({"a": ["other", "x"]}), handle_unknown="ignore")
    assert encoder.fit().get_feature_names_out().tolist() == ["a_other", "a_x"]


def test_close_bin_edges_far_from_zero_get_distinct_names():
    # Six significant digits read 1000000 and 1000000.00033 alike.
    schema = TableSchema({"x": Numeric(1e6, 1e6 + 0.001, bins=3), "y": ["a", "b"]})
    encoder = SchemaEncoder(schema, numeric="bins").fit()
    names = encoder.get_feature_names_out().tolist()
    assert len(set(names)) == len(names) == 5
    assert names[0] == f"x_[1000000.0, {1e6 + 0.001 / 3!r})"
    wide = SchemaEncoder(TableSchema({"x": Numeric(0, 100, bins=4)}), numeric="bins")
    assert wide.fit().get_feature_names_out()[0] == "x_[0, 25)"


def test_two_numbers_declared_as_a_list_get_a_range_hint():
    import pandas as pd

    encoder = SchemaEncoder(TableSchema({"exp": [0, 60]}))
    with pytest.raises(ValueError, match=r"declare the tuple \(0, 60\)"):
        encoder.fit_transform(pd.DataFrame({"exp": [3, 4, 5]}))
    words = SchemaEncoder(TableSchema({"c": ["a", "b"]}))
    with pytest.raises(ValueError) as info:
        words.fit_transform(pd.DataFrame({"c": ["a", "z"]}))
    assert "tuple" not in str(info.value)


def test_a_bound_in_other_units_warns_naming_the_column():
    import pandas as pd

    from skdp import ClippedValuesWarning

    frame = pd.DataFrame(
        {
            "share": np.linspace(0.0, 100.0, 40),  # a percentage declared as (0, 1)
            "age": np.r_[np.linspace(20, 60, 39), 95.0],  # one outlier of 40
            "c": ["a", "b"] * 20,
        }
    )
    schema = TableSchema({"share": (0.0, 1.0), "age": (18, 90), "c": ["a", "b"]})
    encoder = SchemaEncoder(schema).fit(frame)
    with pytest.warns(ClippedValuesWarning) as record:
        encoder.transform(frame)
    assert len(record) == 1
    message = str(record[0].message)
    assert "'share': 98% above (0, 1)" in message and "'age'" not in message
    wide = pd.DataFrame({"x": np.linspace(-5.0, 15.0, 40)})
    both = SchemaEncoder(TableSchema({"x": (0.0, 10.0)})).fit(wide)
    with pytest.warns(ClippedValuesWarning, match=r"'x': 2\d% below and 2\d% above"):
        both.transform(wide)
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encoder.transform(frame[["age", "c"]].assign(share=0.5))


def test_bounds_much_wider_than_the_values_are_named():
    # A new user declared income in dollars for data in hundreds of dollars:
    # nothing clipped, the column nearly constant, and no warning.
    from skdp.exceptions import WideBoundsWarning
    from skdp.synthetic import DPSyntheticData

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "income": rng.gamma(2.0, 150.0, size=400),
            "gains": np.where(rng.random(400) < 0.95, 0.0, rng.uniform(0, 9e4, 400)),
            "age": rng.integers(20, 60, size=400),
        }
    )
    wide = {"income": (0, 250_000), "gains": (0, 100_000), "age": (18, 65)}
    with pytest.warns(WideBoundsWarning, match=r"'income': values span 0\.\d% of"):
        SchemaEncoder(TableSchema(wide)).fit_transform(frame)
    domain = {"income": (0.0, 250_000.0), "gains": (0.0, 1e5), "age": (18, 65)}
    with pytest.warns(WideBoundsWarning, match="'income'") as caught:
        DPSyntheticData(epsilon=1.0, domain=domain, random_state=0).fit(frame)
    # A zero-inflated column with a spread tail, a few rows or one value: no
    # call.
    wide_calls = [w for w in caught if issubclass(w.category, WideBoundsWarning)]
    assert wide_calls and all("'gains'" not in str(w.message) for w in wide_calls)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WideBoundsWarning)
        SchemaEncoder(TableSchema({**wide, "income": (0, 2_500)})).fit_transform(frame)
        SchemaEncoder(TableSchema(wide)).fit_transform(frame.head(50))
        constant = frame.assign(income=300.0)
        SchemaEncoder(TableSchema(wide)).fit_transform(constant)

"""Input handling, private domain inference and the evaluation helpers."""

import contextlib
import io
import subprocess
import sys
import warnings

import numpy as np
import pytest

from skdp.accounting import GaussianEvent, account
from skdp.synthetic import (
    OTHER,
    DomainWarning,
    DPSyntheticData,
    marginal_error,
    marginal_errors,
    plot_marginal_errors,
    tstr_accuracy,
)
from skdp.synthetic._infer import bin_edges, infer_numeric_bounds

pd = pytest.importorskip("pandas")

FAST = {"max_cells": 2000}


# -- missing values and undeclared categories ----------------------------------


def test_missing_category_round_trip_frame():
    rng = np.random.default_rng(0)
    n = 400
    x = rng.uniform(-2, 2, size=n)
    x[:100] = np.nan
    c = pd.Categorical(rng.choice(["a", "b"], size=n), categories=["a", "b"])
    c[rng.random(n) < 0.3] = np.nan
    X = pd.DataFrame({"x": x, "c": c, "k": rng.integers(0, 3, size=n)})
    domain = {"x": (-3.0, 3.0), "c": ["a", "b"], "k": [0, 1, 2]}
    with pytest.raises(ValueError, match="missing='category'"):
        DPSyntheticData(domain=domain).fit(X)
    model = DPSyntheticData(
        epsilon=5.0, domain=domain, missing="category", random_state=0, **FAST
    ).fit(X)
    # Every column gets the missing level, the int one too: whether pandas
    # typed a column int64 or float64 says whether some row was missing, so
    # the dtype must not decide it.
    assert [s.missing for s in model.columns_] == [True, True, True]
    synth = model.sample()
    assert synth["x"].dtype == X["x"].dtype and synth["c"].dtype == X["c"].dtype
    assert synth["k"].dtype == object  # categories 0, 1, 2 and missing values
    assert 0.15 < synth["x"].isna().mean() < 0.35
    assert 0.15 < synth["c"].isna().mean() < 0.45
    assert synth["k"].isna().mean() < 0.1  # its missing level holds no row


def test_one_row_does_not_switch_integer_binning_or_the_missing_level():
    # The same data typed int64, or float64 because one row holds 2.5 (as
    # read_csv would): the specs come from the domain only.
    rng = np.random.default_rng(0)
    ints = rng.integers(0, 100, size=300)
    floats = ints.astype(float)
    floats[0] = 2.5
    specs = []
    for values in (ints, floats):
        model = DPSyntheticData(
            epsilon=1.0, domain={"v": (0, 100)}, missing="category", random_state=0
        )
        # The curator is told the 2.5 is rounded; the specs do not change.
        rounded = values.dtype.kind == "f"
        with (
            pytest.warns(DomainWarning, match="1 not whole")
            if rounded
            else contextlib.nullcontext()
        ):
            model.fit(pd.DataFrame({"v": values}))
        specs.append(model.columns_[0])
    assert specs[0].integer and specs[1].integer
    assert specs[0].n_levels == specs[1].n_levels
    np.testing.assert_array_equal(specs[0].edges, specs[1].edges)


def test_missing_category_round_trip_object_array():
    X = np.array([["a", 1.0], [None, 2.0], ["b", None], ["a", 3.0]] * 30, dtype=object)
    model = DPSyntheticData(
        domain={0: ["a", "b"], 1: (0.0, 4.0)},
        missing="category",
        random_state=0,
        **FAST,
    ).fit(X)
    synth = model.sample()
    assert synth.dtype == object and synth.shape == X.shape
    assert set(v for v in synth[:, 0]) <= {"a", "b", None}


def test_unknown_categories_go_to_other_with_one_warning():
    X = pd.DataFrame({"c": ["x", "y", "zz", "w"] * 50, "d": ["p", "q"] * 100})
    domain = {"c": ["x", "y"], "d": ["p"]}
    with pytest.raises(ValueError, match="handle_unknown='other'"):
        DPSyntheticData(domain=domain).fit(X)
    model = DPSyntheticData(
        epsilon=5.0, domain=domain, handle_unknown="other", random_state=0, **FAST
    )
    with pytest.warns(DomainWarning) as record:
        model.fit(X)
    assert len(record) == 1
    message = str(record[0].message)
    assert "'c': 100 mapped to 'other'" in message and "'d': 100" in message
    synth = model.sample()
    assert set(synth["c"]) <= {"x", "y", OTHER}
    assert (synth["c"] == OTHER).mean() > 0.3


def _logged_signal(model, frame):
    """The split rule's signal, as ``verbose=1`` logs it."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        model.fit(frame)
    (line,) = [s for s in buffer.getvalue().splitlines() if "signal" in s]
    return line.split("signal ")[1].split(" ")[0]


def test_the_other_level_does_not_starve_the_pairs_of_a_small_table():
    # Eight related 0/1 columns whose signal clears the rule's minimum of 2 by
    # a little: the level 'other' (expected nearly empty) on every column
    # must not count as cells of the rows and send the whole budget to the
    # 1-way marginals.
    rng = np.random.default_rng(0)
    z = rng.integers(0, 2, 150)
    frame = pd.DataFrame(
        {f"c{i}": np.where(rng.random(150) < 0.8, z, 1 - z) for i in range(8)}
    )
    domain = {c: [0, 1] for c in frame}
    fits = {}
    for handle_unknown in ("error", "other"):
        model = DPSyntheticData(
            epsilon=1.0,
            domain=domain,
            handle_unknown=handle_unknown,
            random_state=0,
            verbose=1,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits[handle_unknown] = (_logged_signal(model, frame), model.selected_)
    assert 2.0 < float(fits["error"][0]) < 3.0
    assert fits["other"][0] == fits["error"][0]
    assert any(len(cols) >= 2 for cols in fits["other"][1])


def test_other_level_of_a_categorical_dtype():
    X = pd.DataFrame({"c": pd.Categorical(["x", "y", "z"] * 40)})
    model = DPSyntheticData(
        epsilon=3.0, domain={"c": ["x", "y"]}, handle_unknown="other", random_state=0
    )
    with pytest.warns(DomainWarning):
        synth = model.fit(X).sample()
    # The declared categories and "other" only: the dtype's "z" came from the
    # data and is not released (a review found it was, until 2026-11-24).
    assert list(synth["c"].cat.categories) == ["x", "y", OTHER]


def _same_output_metadata(first, second):
    if hasattr(first, "dtypes"):
        assert list(first.dtypes.astype(str)) == list(second.dtypes.astype(str))
        for key in first.columns:
            if first[key].dtype.name == "category":
                assert list(first[key].cat.categories) == list(
                    second[key].cat.categories
                )
    else:
        assert first.dtype == second.dtype


def test_one_record_does_not_change_what_the_output_looks_like():
    # Neighbours that differ in one undeclared value, mapped to "other": the
    # released table's dtypes and categories must be the same.
    params = {"epsilon": 1.0, "handle_unknown": "other", "random_state": 0}
    values = np.array(["a", "b"] * 50)
    rare = values.copy().astype(object)
    rare[0] = "Alice-SSN-123-45-6789"
    frames = [
        pd.DataFrame({"c": pd.Series(v).astype("category"), "d": values})
        for v in (values, rare)
    ]
    arrays = [np.column_stack([v, values]).astype(str) for v in (values, rare)]
    for pair, domain in (
        (frames, {"c": ["a", "b"], "d": ["a", "b"]}),
        (arrays, {0: ["a", "b"], 1: ["a", "b"]}),
    ):
        samples = []
        for data in pair:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DomainWarning)
                samples.append(
                    DPSyntheticData(domain=domain, **params).fit(data).sample()
                )
        _same_output_metadata(*samples)


def test_declared_categories_are_not_cut_to_the_input_width():
    X = np.array([["a"], ["a"]] * 50)  # dtype <U1
    model = DPSyntheticData(
        epsilon=5.0, domain={0: ["a", "bbbb"]}, handle_unknown="other", random_state=0
    )
    synth = model.fit(X).sample(2000)
    assert set(synth[:, 0]) <= {"a", "bbbb", OTHER}


def test_narrow_integer_dtype_is_widened_to_the_declared_range():
    X = np.full((200, 1), 5, dtype=np.int8)
    model = DPSyntheticData(epsilon=1.0, domain={0: (0, 1000)}, random_state=0)
    synth = model.fit(X).sample(300)
    assert synth.min() >= 0 and synth.max() <= 1000


def test_add_remove_needs_an_explicit_delta_and_a_finite_span():
    X = np.array([["a"], ["b"]] * 20)
    with pytest.raises(ValueError, match="explicit delta"):
        DPSyntheticData(domain={0: ["a", "b"]}, neighbouring="add-remove").fit(X)
    with pytest.raises(ValueError, match="finite span"):
        DPSyntheticData(domain={0: (-1e308, 1e308)}).fit(np.zeros((10, 1)))


@pytest.mark.parametrize("method", ["aim", "tree"])
def test_constant_columns_and_single_row(method):
    X = np.array([[1, 0, 5]])
    domain = {0: [0, 1, 2], 1: [0], 2: (5, 5)}
    synth = DPSyntheticData(domain=domain, method=method).fit(X).sample(20)
    assert synth.shape == (20, 3)
    assert (synth[:, 1] == 0).all() and (synth[:, 2] == 5).all()


def test_integer_bins_decode_into_their_own_bin():
    from skdp.synthetic._domain import _encode_numeric, _numeric_spec, decode_column

    for bounds in [(17, 90, 32), (1, 1_500_000, 32), (0, 4356, 7), (3, 3, 4)]:
        spec = _numeric_spec("a", bounds, 32)  # integer bounds: an integer column
        codes = np.repeat(np.arange(spec.n_values), 50)
        x = decode_column(spec, codes, np.random.default_rng(0))
        assert np.all(x == np.rint(x)) and x.min() >= bounds[0]
        np.testing.assert_array_equal(_encode_numeric(spec, x)[0], codes)


def test_wrong_types_and_empty_input():
    X = pd.DataFrame({"a": ["x", "y"]})
    with pytest.raises(ValueError, match="numeric domain"):
        DPSyntheticData(domain={"a": (0, 1)}).fit(X)
    with pytest.raises(TypeError, match="list of categories"):
        DPSyntheticData(domain={"a": "xy"}).fit(X)
    with pytest.raises(ValueError, match="empty"):
        DPSyntheticData(domain={"a": ["x"]}).fit(X.iloc[:0])
    with pytest.raises(ValueError, match="empty"):
        DPSyntheticData(domain={}).fit(pd.DataFrame(index=range(3)))
    with pytest.raises(ValueError, match="infinite"):
        DPSyntheticData(domain={0: (0.0, 1.0)}).fit(np.array([[0.5], [np.inf]]))


# -- private domain inference ---------------------------------------------------


def test_infer_numeric_bounds_finds_the_range():
    rng = np.random.default_rng(0)
    x = rng.uniform(100, 5000, size=5000)
    x[:10] = np.nan
    (low, high), events = infer_numeric_bounds(x, 2.0, rng, integer=True)
    assert isinstance(low, int) and isinstance(high, int)
    assert 50 <= low <= 100 and 5000 <= high <= 10000
    assert events == [GaussianEvent(2.0)]
    edges = bin_edges()
    assert np.all(np.diff(edges) > 0) and edges[0] < -1e14 and edges[-1] > 1e14


def test_histogram_sensitivity():
    """Replacing one record (or making it missing) moves the counts by sqrt(2)."""
    rng = np.random.default_rng(1)
    edges = bin_edges()
    x = rng.normal(size=30)
    base = np.histogram(x, edges)[0]
    for value in (-1e9, 0.0, 7.5, 1e20):
        y = x.copy()
        y[3] = value
        y = np.clip(y, edges[0], edges[-1])
        assert np.linalg.norm(np.histogram(y, edges)[0] - base) <= np.sqrt(2) + 1e-12
    assert np.linalg.norm(np.histogram(np.delete(x, 3), edges)[0] - base) <= 1


@pytest.mark.parametrize("method", ["aim", "tree"])
def test_infer_domain_is_accounted(method):
    rng = np.random.default_rng(2)
    X = pd.DataFrame(
        {"age": rng.integers(18, 80, size=1000), "c": rng.choice(["a", "b"], size=1000)}
    )
    with pytest.raises(ValueError, match="infer_domain"):
        DPSyntheticData(domain={"c": ["a", "b"]}).fit(X)
    model = DPSyntheticData(
        epsilon=2.0,
        domain={"c": ["a", "b"]},
        infer_domain=0.3,
        method=method,
        random_state=0,
        **({} if method == "tree" else FAST),
    )
    with warnings.catch_warnings():  # the learned range may clip a few values
        warnings.simplefilter("ignore", DomainWarning)
        model.fit(X)
    low, high = model.domain_["age"]
    assert 0 <= low <= 18 and 79 <= high <= 200
    assert model.domain_["c"] == ["a", "b"]
    first = model.events_[0]
    assert isinstance(first, GaussianEvent) and first.count == 1
    spent = model.privacy_spent_
    assert 0.97 * 2.0 <= spent.epsilon <= 2.0
    assert spent.epsilon == pytest.approx(
        account(
            model.events_
            if method == "tree"
            else [first, GaussianEvent(model.noise_multiplier_)],
            model.delta_,
        ).epsilon,
        rel=1e-12,
    )
    synth = model.sample()
    assert synth["age"].between(low, high).all()
    # Categorical columns are never inferred.
    with pytest.raises(ValueError, match="non-numeric columns"):
        DPSyntheticData(domain={"age": (0, 99)}, infer_domain=0.1).fit(X)


# -- evaluation helpers ---------------------------------------------------------


def _shuffled(X, seed=1):
    rng = np.random.default_rng(seed)
    return X.apply(lambda col: rng.permutation(col.to_numpy()))


def _pair_data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.choice(["u", "v", "w"], size=n)
    y = np.where(a == "u", "yes", np.where(rng.random(n) < 0.1, "yes", "no"))
    x = rng.integers(0, 10, size=n)
    X = pd.DataFrame({"a": a, "x": x, "y": y})
    return X, {"a": ["u", "v", "w"], "x": (0, 9), "y": ["no", "yes"]}


def test_marginal_errors_and_fixed_three_way_sets():
    X, domain = _pair_data()
    sets, errors = marginal_errors(X, X, domain, ways=2)
    assert sets == [("a", "x"), ("a", "y"), ("x", "y")]
    assert np.all(errors == 0)
    shuffled = _shuffled(X)
    assert marginal_error(X, shuffled, domain, ways=1) == pytest.approx(0.0)
    assert marginal_error(X, shuffled, domain, ways=2) > 0.1
    # Three-way sets: fixed by default, so two calls compare the same sets.
    assert marginal_error(X, shuffled, domain, ways=3) == marginal_error(
        X, shuffled, domain, ways=3
    )


def test_tstr_accuracy():
    X, domain = _pair_data()
    test, _ = _pair_data(seed=1)
    good = tstr_accuracy(X, test, "y", domain)
    assert good > 0.9
    constant = X.assign(y="no")
    assert tstr_accuracy(constant, test, "y", domain) == pytest.approx(
        (test["y"] == "no").mean()
    )
    with pytest.raises(ValueError, match="not a column"):
        tstr_accuracy(X, test, "zz", domain)


def test_plot_marginal_errors(tmp_path):
    pytest.importorskip("matplotlib")
    X, domain = _pair_data()
    shuffled = _shuffled(X)
    path = tmp_path / "errors.png"
    assert plot_marginal_errors(X, shuffled, domain, path) == path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_needs_matplotlib_with_a_clear_error():
    code = (
        "import sys; sys.modules['matplotlib'] = None; import numpy as np;"
        "from skdp.synthetic import plot_marginal_errors;"
        "X = np.array([[0], [1]]);\n"
        "try:\n    plot_marginal_errors(X, X, {0: [0, 1]}, 'x.png')\n"
        "except ImportError as e:\n    assert 'pip install matplotlib' in str(e)\n"
        "else:\n    raise SystemExit('no error')"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_other_level_on_numeric_and_boolean_columns_samples():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"i": rng.integers(0, 4, 200), "b": rng.random(200) > 0.5})
    domain = {"i": [0, 1, 2], "b": [True]}
    model = DPSyntheticData(
        epsilon=2.0, domain=domain, handle_unknown="other", random_state=0
    )
    with pytest.warns(DomainWarning):
        model.fit(frame)
    for seed in range(5):
        synth = model.sample(300, random_state=seed)
        assert set(synth["i"]) <= {0, 1, 2, OTHER}
        assert set(synth["b"]) <= {True, OTHER}
    on_array = DPSyntheticData(
        epsilon=2.0,
        domain={0: [0, 1, 2], 1: [1]},
        handle_unknown="other",
        random_state=0,
    )
    with pytest.warns(DomainWarning):
        array = on_array.fit(frame.to_numpy(dtype=int)).sample(300)
    assert array.dtype == object
    assert set(array[:, 0]) <= {0, 1, 2, OTHER}


def test_declared_column_not_in_the_table_suggests_the_near_miss():
    # Issue 20: a typo in a domain key got no hint.
    X = pd.DataFrame({"education": ["a", "b"] * 20, "age": [20, 30] * 20})
    domain = {"educaton": ["a", "b"], "age": (17, 90)}
    with pytest.raises(ValueError, match="not in X") as info:
        DPSyntheticData(domain=domain).fit(X)
    assert "did you mean 'education'?" in str(info.value)


def test_workload_column_not_in_the_table_suggests_the_near_miss():
    # Issue 20: a typo in a workload set named the key but no close column.
    X = pd.DataFrame({"education": ["a", "b"] * 20, "age": [20, 30] * 20})
    domain = {"education": ["a", "b"], "age": (17, 90)}
    model = DPSyntheticData(domain=domain, workload=[("educaton", "age")])
    with pytest.raises(ValueError, match="unknown columns") as info:
        model.fit(X)
    assert "did you mean 'education'?" in str(info.value)


def test_other_sentinel_cannot_merge_with_a_declared_other():
    # Issue 25: a real category "other" and the level of undeclared values
    # were one level under handle_unknown="other".
    X = pd.DataFrame({"c": ["x", "other", "zz"] * 40})
    domain = {"c": ["x", "other"]}
    model = DPSyntheticData(
        epsilon=3.0, domain=domain, handle_unknown="other", random_state=0, **FAST
    )
    with pytest.raises(ValueError, match="declares a category 'other'") as info:
        model.fit(X)
    assert "'c'" in str(info.value)
    assert not hasattr(model, "privacy_spent_")
    # Without handle_unknown="other", "other" is an ordinary category.
    declared = DPSyntheticData(epsilon=3.0, domain=domain, random_state=0, **FAST)
    synth = declared.fit(X[X["c"] != "zz"]).sample()
    assert set(synth["c"]) <= {"x", "other"}
    assert declared.columns_[0].n_levels == 2


def test_integer_bounds_on_fractional_values_say_they_are_rounded():
    import warnings

    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"lwage": rng.uniform(4.6, 8.5, 300), "g": rng.choice(["a", "b"], 300)}
    )
    with pytest.warns(DomainWarning, match=r"'lwage': 300 not whole.*\(3\.0, 10\.0\)"):
        DPSyntheticData(epsilon=1.0, domain={"lwage": (3, 10), "g": ["a", "b"]}).fit(
            frame
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error", DomainWarning)
        DPSyntheticData(
            epsilon=1.0, domain={"lwage": (3.0, 10.0), "g": ["a", "b"]}
        ).fit(frame)
        whole = frame.assign(lwage=np.round(frame["lwage"]))
        DPSyntheticData(epsilon=1.0, domain={"lwage": (3, 10), "g": ["a", "b"]}).fit(
            whole
        )


def test_text_in_a_numeric_column_is_refused_even_when_it_reads_as_a_number():
    table = pd.DataFrame({"n": ["1", "16"] * 20, "c": ["x", "y"] * 20})
    model = DPSyntheticData(domain={"n": (0, 20), "c": ["x", "y"]}, **FAST)
    with pytest.raises(ValueError, match="'n' has a numeric domain.*holds text"):
        model.fit(table)
    assert not hasattr(model, "privacy_spent_")

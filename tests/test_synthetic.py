import numpy as np
import pytest
from sklearn.base import clone

from skdp._solvers._tree import TreePlan, fit_tree_model
from skdp.accounting import (
    ExponentialMechanismEvent,
    GaussianEvent,
    account,
)
from skdp.datasets import ADULT_SCHEMA, load_adult
from skdp.synthetic import DomainWarning, DPSyntheticData, marginal_error

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def adult_small():
    X = load_adult(split="train", as_frame=True).data
    rows = np.random.default_rng(0).choice(X.shape[0], 2000, replace=False)
    return X.iloc[np.sort(rows)].reset_index(drop=True)


#: A few Adult columns, enough to exercise every dtype and keep AIM fits fast.
_FEW = ["age", "workclass", "education", "sex", "hours_per_week", "race"]


@pytest.fixture(scope="module")
def adult_few(adult_small):
    return adult_small[_FEW]


_FEW_SCHEMA = {k: ADULT_SCHEMA[k] for k in _FEW}


def _chain_data(n, n_levels=5, keep=0.9, n_columns=4, seed=0):
    """Columns forming a Markov chain: strong pairwise dependence."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, n_columns), dtype=np.int64)
    X[:, 0] = rng.integers(n_levels, size=n)
    for j in range(1, n_columns):
        copy = rng.random(n) < keep
        X[:, j] = np.where(copy, X[:, j - 1], rng.integers(n_levels, size=n))
    domain = {j: list(range(n_levels)) for j in range(n_columns)}
    return X, domain


# -- round trips -------------------------------------------------------------


def test_dataframe_round_trip(adult_small):
    model = DPSyntheticData(epsilon=1.0, domain=ADULT_SCHEMA, random_state=0)
    synth = model.fit(adult_small).sample()
    assert isinstance(synth, pd.DataFrame)
    assert list(synth.columns) == list(adult_small.columns)
    assert synth.shape == adult_small.shape
    assert synth.dtypes.equals(adult_small.dtypes)
    for name, spec in ADULT_SCHEMA.items():
        if isinstance(spec, tuple):
            assert synth[name].between(spec[0], spec[1]).all()
        else:
            assert list(synth[name].cat.categories) == spec
            assert synth[name].notna().all()
    assert list(model.feature_names_in_) == list(adult_small.columns)
    assert model.sample(7).shape == (7, 14)
    assert model.sample(0).shape == (0, 14)


def test_numpy_int_round_trip():
    X, domain = _chain_data(300)
    synth = DPSyntheticData(domain=domain, random_state=0).fit(X).sample(50)
    assert isinstance(synth, np.ndarray)
    assert synth.dtype == X.dtype and synth.shape == (50, 4)
    assert set(np.unique(synth)) <= set(range(5))


def test_numpy_float_and_object_round_trip():
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.normal(size=200), rng.uniform(-5, 5, size=200)])
    model = DPSyntheticData(domain={0: (-2.0, 2.0), 1: (-5.0, 5.0, 8)})
    with pytest.warns(DomainWarning, match="0: [0-9]+ clipped into the range"):
        model.fit(X)
    synth = model.sample()
    assert synth.dtype == np.float64 and synth.shape == (200, 2)
    assert synth[:, 0].min() >= -2.0 and synth[:, 0].max() <= 2.0  # clipped range
    assert model.columns_[1].n_levels == 8

    obj = np.empty((100, 2), dtype=object)
    obj[:, 0] = rng.choice(["a", "b"], size=100)
    obj[:, 1] = rng.integers(0, 10, size=100).tolist()
    synth = DPSyntheticData(domain={0: ["a", "b"], 1: (0, 9)}).fit(obj).sample()
    assert synth.dtype == object
    assert set(synth[:, 0]) <= {"a", "b"}
    assert all(isinstance(v, int) and 0 <= v <= 9 for v in synth[:, 1])


def test_single_row_and_constant_columns():
    X = np.array([[1, 0]])
    synth = DPSyntheticData(domain={0: [0, 1, 2], 1: [0]}).fit(X).sample(5)
    assert synth.shape == (5, 2) and (synth[:, 1] == 0).all()
    X = np.zeros((50, 1))
    synth = DPSyntheticData(domain={0: (0.0, 0.0)}).fit(X).sample()
    assert (synth == 0).all()


# -- determinism ---------------------------------------------------------------


@pytest.mark.parametrize("method", ["aim", "tree"])
def test_determinism_under_seeds(adult_few, method):
    kw = dict(domain=_FEW_SCHEMA, method=method)
    a = DPSyntheticData(random_state=3, **kw).fit(adult_few)
    b = DPSyntheticData(random_state=3, **kw).fit(adult_few)
    pd.testing.assert_frame_equal(a.sample(), b.sample())
    pd.testing.assert_frame_equal(a.sample(), a.sample())
    pd.testing.assert_frame_equal(a.sample(random_state=5), b.sample(random_state=5))
    assert not a.sample(random_state=5).equals(a.sample(random_state=6))
    c = DPSyntheticData(random_state=4, **kw).fit(adult_few)
    assert not a.sample().equals(c.sample())


# -- privacy -------------------------------------------------------------------


@pytest.mark.parametrize("method", ["aim", "tree"])
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 10.0])
@pytest.mark.parametrize("n_columns", [1, 2, 4])
def test_spend_meets_target(epsilon, n_columns, method):
    X, domain = _chain_data(200, n_columns=n_columns)
    model = DPSyntheticData(epsilon=epsilon, domain=domain, method=method)
    model.set_params(random_state=0).fit(X)
    spent = model.privacy_spent_
    assert 0.97 * epsilon <= spent.epsilon <= epsilon
    assert spent.neighbouring == "replace-one"
    assert spent.delta == model.delta_ == min(1e-5, 200**-1.1)


def test_privacy_spent_recomputed_from_events():
    X, domain = _chain_data(300, n_columns=5)
    model = DPSyntheticData(epsilon=2.0, delta=1e-6, domain=domain, method="tree")
    model.fit(X)
    z, d = model.noise_multiplier_, 5
    plan = TreePlan(d)
    # Shares of rho = 1 / (2 z^2): 1-way 20%, selection 10%, 2-way 70%.
    rho = 1 / (2 * z**2)
    z1, z2 = plan.one_way_multiplier(z), plan.two_way_multiplier(z)
    eps_sel = plan.select_epsilon(z)
    assert d / (2 * z1**2) == pytest.approx(0.2 * rho)
    assert (d - 1) * eps_sel**2 / 8 == pytest.approx(0.1 * rho)
    assert (d - 1) / (2 * z2**2) == pytest.approx(0.7 * rho)
    events = [
        GaussianEvent(z1, count=d),
        ExponentialMechanismEvent(eps_sel, count=d - 1, bounded_range=True),
        GaussianEvent(z2, count=d - 1),
    ]
    expected = account(events, 1e-6)
    assert model.privacy_spent_.epsilon == pytest.approx(expected.epsilon, rel=1e-12)
    assert model.privacy_spent_.rdp == pytest.approx(expected.rdp, rel=1e-12)
    # What the solver reports running is the plan.
    codes = X.astype(np.int64)
    fit = fit_tree_model(codes, [5] * d, plan, z, np.random.default_rng(0))
    assert fit.events == events and len(fit.edges) == d - 1


# -- utility -------------------------------------------------------------------


@pytest.mark.parametrize("method", ["aim", "tree"])
def test_error_decreases_with_epsilon(adult_few, method):
    def error(epsilon):
        errs = []
        for seed in range(2):
            model = DPSyntheticData(
                epsilon=epsilon, domain=_FEW_SCHEMA, method=method, random_state=seed
            )
            synth = model.fit(adult_few).sample()
            errs.append(marginal_error(adult_few, synth, _FEW_SCHEMA, ways=2))
        return np.mean(errs)

    low, high = error(0.3), error(10.0)
    assert high < 0.8 * low


@pytest.mark.parametrize("method", ["aim", "tree"])
def test_beats_independent_marginals_on_dependent_data(method):
    X, domain = _chain_data(5000)
    synth = DPSyntheticData(epsilon=10.0, domain=domain, method=method, random_state=0)
    synth = synth.fit(X)
    synth = synth.sample()
    # Baseline: independent columns from the *exact* 1-way marginals (better
    # than any noisy 1-way baseline).
    rng = np.random.default_rng(0)
    independent = np.column_stack([rng.permutation(X[:, j]) for j in range(4)])
    ours = marginal_error(X, synth, domain)
    baseline = marginal_error(X, independent, domain)
    assert baseline > 0.3
    assert ours < 0.25 * baseline


def test_marginal_error_basics():
    X, domain = _chain_data(500)
    assert marginal_error(X, X, domain) == 0.0
    assert marginal_error(X, X[::-1], domain, ways=3) == pytest.approx(0.0)
    other = np.zeros_like(X)
    assert 0 < marginal_error(X, other, domain, ways=1) <= 1
    assert 0 < marginal_error(X, other, domain, ways=3, n_marginals=2) <= 1


# -- errors and sklearn API -----------------------------------------------------


def test_missing_domain_names_the_column():
    X = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    with pytest.raises(ValueError, match="No domain given for column 'b'"):
        DPSyntheticData(domain={"a": (0, 3)}).fit(X)
    with pytest.raises(ValueError, match="No domain given for column 0"):
        DPSyntheticData().fit(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="not in X"):
        DPSyntheticData(domain={"a": (0, 3), "b": ["x", "y"], "c": [1]}).fit(X)


def test_unseen_category_names_column_and_value():
    X = pd.DataFrame({"b": ["x", "z"]})
    with pytest.raises(ValueError, match="Column 'b' holds 'z'"):
        DPSyntheticData(domain={"b": ["x", "y"]}).fit(X)


@pytest.mark.parametrize("container", ["numpy", "frame", "object"])
def test_nan_refused(container):
    X = np.array([[1.0], [np.nan]])
    if container == "frame":
        X = pd.DataFrame({"c": ["x", None]}, dtype="category")
        domain = {"c": ["x"]}
    elif container == "object":
        X = np.array([["x"], [None]], dtype=object)
        domain = {0: ["x"]}
    else:
        domain = {0: (0.0, 2.0)}
    with pytest.raises(ValueError, match="missing values"):
        DPSyntheticData(domain=domain).fit(X)


def test_empty_and_bad_input_refused():
    with pytest.raises(ValueError, match="empty"):
        DPSyntheticData(domain={0: [0]}).fit(np.zeros((0, 1)))
    with pytest.raises(ValueError, match="2-D"):
        DPSyntheticData(domain={0: [0]}).fit(np.zeros(3))
    with pytest.raises(ValueError, match="low <= high"):
        DPSyntheticData(domain={0: (2.0, 1.0)}).fit(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="n_samples"):
        DPSyntheticData(domain={0: [0.0]}).fit(np.zeros((3, 1))).sample(-1)


def test_failed_fit_leaves_estimator_unchanged():
    X, domain = _chain_data(100)
    model = DPSyntheticData(domain=domain, random_state=0).fit(X)
    before = model.sample()
    bad = X.copy()
    bad[0, 0] = 7
    with pytest.raises(ValueError):
        model.fit(bad)
    np.testing.assert_array_equal(model.sample(), before)


def test_clone_and_get_params():
    domain = {0: [0, 1]}
    model = DPSyntheticData(epsilon=2.0, domain=domain, bins=8, random_state=1)
    params = model.get_params()
    assert params == {
        "epsilon": 2.0,
        "delta": None,
        "domain": domain,
        "method": "aim",
        "workload": "2-way",
        "max_cells": 200_000,
        "bins": 8,
        "binning": "adaptive",
        "missing": "error",
        "handle_unknown": "error",
        "infer_domain": None,
        "neighbouring": "replace-one",
        "compress": "auto",
        "n_jobs": None,
        "random_state": 1,
        "verbose": 0,
    }
    copy = clone(model)
    assert copy.get_params()["domain"] == domain
    model.fit(np.array([[0], [1], [1]]))
    assert not hasattr(clone(model), "privacy_spent_")
    with pytest.raises(Exception, match="epsilon"):
        DPSyntheticData(epsilon=-1.0, domain=domain).fit(np.array([[0]]))


def test_pandas_is_imported_lazily():
    import subprocess
    import sys

    # scikit-learn itself imports pandas when it is installed, so hide it.
    code = (
        "import sys; sys.modules['pandas'] = None; import numpy as np;"
        "from skdp.synthetic import DomainWarning, DPSyntheticData, marginal_error;"
        "X = np.array([[0], [1]]); d = {0: [0, 1]};"
        "S = DPSyntheticData(domain=d).fit(X).sample();"
        "marginal_error(X, S, d, ways=1)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

"""DPSaddlePointClassifier on Dask collections: the in-memory fit, up to float sums.

Every fit runs on Dask's synchronous scheduler (one on a small in-process
LocalCluster), so task results can be inspected. Few steps: these tests
check identity and refusals, not fit quality.
"""

import subprocess
import sys

import numpy as np
import pytest

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from dask.callbacks import Callback  # noqa: E402
from dask.utils import key_split  # noqa: E402

from skdp._solvers import _mirror_dask, _saddle_dask  # noqa: E402
from skdp._solvers._gda import _dask as _gda_dask  # noqa: E402
from skdp._solvers._gda._releases import ProjectedRows  # noqa: E402
from skdp._solvers._mirror import MemoryRows  # noqa: E402
from skdp._solvers._saddle import SaddleSolver  # noqa: E402
from skdp._solvers._sgd import _dask as _sgd_dask  # noqa: E402
from skdp.fairness import DPSaddlePointClassifier  # noqa: E402
from skdp.preprocessing import SchemaEncoder  # noqa: E402
from skdp.schema import TableSchema  # noqa: E402

N = 600
GROUPS = ["a", "b", "c"]
#: Uneven row chunks, one of them empty; group "c" is absent from the second.
CHUNKS = (1, 250, 0, 149, 200)
RTOL = 1e-10


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="sync"):
        yield


def _data(n=N, seed=0):
    """Rows, labels and groups; no row of group "c" among rows 1-250."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    g = rng.choice(GROUPS, n, p=[0.6, 0.3, 0.1])
    g[1:251] = np.where(g[1:251] == "c", "a", g[1:251])
    y = (X[:, 0] - 0.5 * X[:, 1] + (g == "c") + rng.normal(size=n) > 0).astype(int)
    return X, y, g


def _chunked(X, y, g=None, chunks=CHUNKS):
    out = [da.from_array(X, chunks=(chunks, 2)), da.from_array(y, chunks=(chunks,))]
    return out + ([] if g is None else [da.from_array(g, chunks=(chunks,))])


def _model(**params):
    base = dict(epsilon=1.0, n_iter=40, groups=GROUPS, classes=[0, 1], random_state=0)
    return DPSaddlePointClassifier(**{**base, **params})


def _fit(model, X, y, g):
    return model.fit(X, y, sensitive_features=g)


def _assert_same_fit(a, b):
    """The same model up to the order of float sums; the same spend, exactly."""
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(b.intercept_, a.intercept_, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(
        b.group_weights_, a.group_weights_, rtol=RTOL, atol=1e-13
    )
    assert a.privacy_spent_ == b.privacy_spent_
    assert a.noise_multiplier_ == b.noise_multiplier_
    assert a.delta_ == b.delta_
    assert a.n_iter_ == b.n_iter_
    assert b.n_features_in_ == a.n_features_in_
    np.testing.assert_array_equal(b.classes_, a.classes_)
    np.testing.assert_array_equal(b.groups_, a.groups_)
    assert a.draw_ranges_ == b.draw_ranges_


CASES = {
    "default": dict(),
    "precondition": dict(precondition=True),
    "add-remove": dict(neighbouring="add-remove", delta=1e-5),
    "no-cap-fixed-steps": dict(weight_cap=None, learning_rate=0.5, eta_p=0.3),
    "no-momentum-no-intercept": dict(momentum=0.0, fit_intercept=False),
    "clip-and-row-norm": dict(max_grad_norm=0.2, row_norm=2.0, max_loss=1.0),
    "mirror": dict(solver="mirror"),
    "mirror-bounds-no-intercept": dict(
        solver="mirror", fit_intercept=False, feature_bound=0.5, l1_radius=5.0
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fit_is_the_in_memory_fit(case):
    X, y, g = _data()
    a = _fit(_model(**CASES[case]), X, y, g)
    b = _fit(_model(**CASES[case]), *_chunked(X, y, g))
    _assert_same_fit(a, b)


@pytest.mark.parametrize("solver", ["gda", "mirror"])
def test_one_group_float32_fit_is_the_in_memory_fit(solver):
    X, y, _ = _data()
    X = X.astype(np.float32)
    a = _model(groups=None, solver=solver).fit(X, y)
    b = _model(groups=None, solver=solver).fit(*_chunked(X, y))
    _assert_same_fit(a, b)


class _Recorder:
    """The fit's generator, recording every draw (and a Gaussian's scale)."""

    def __init__(self, rng):
        self.rng, self.draws, self.scales, self.picks = rng, [], [], []

    def permutation(self, n):
        self.picks.append(self.rng.permutation(n))
        return self.picks[-1].copy()

    def choice(self, *args, **kwargs):
        self.picks.append(self.rng.choice(*args, **kwargs))
        return self.picks[-1].copy()

    def normal(self, loc=0.0, scale=1.0, size=None):
        draw = self.rng.standard_normal(size)
        self.draws.append(np.array(draw, copy=True))
        self.scales.append(scale)
        return loc + scale * draw

    def __getattr__(self, name):
        return getattr(self.rng, name)


class _Recording(DPSaddlePointClassifier):
    def _fit_generator(self):
        self.recorder_ = _Recorder(super()._fit_generator())
        return self.recorder_


def test_the_noise_is_the_in_memory_noise():
    """The same standard draws in the same order, at the same scales.

    A gradient draw's scale follows the adversary's weights (released
    earlier), so it agrees up to the float sums; the counts' and the second
    moment's scales are public and equal.
    """
    X, y, g = _data()
    params = dict(epsilon=1.0, n_iter=40, groups=GROUPS, classes=[0, 1])
    a = _fit(_Recording(random_state=0, precondition=True, **params), X, y, g)
    b = _fit(
        _Recording(random_state=0, precondition=True, **params), *_chunked(X, y, g)
    )
    _assert_same_fit(a, b)
    # counts, the centre, the second moment, then a gradient and a loss draw
    # per step
    assert len(a.recorder_.draws) == 3 + 2 * 40
    assert len(b.recorder_.draws) == len(a.recorder_.draws)
    for first, second in zip(a.recorder_.draws, b.recorder_.draws, strict=True):
        np.testing.assert_array_equal(first, second)
    assert a.recorder_.scales[:3] == b.recorder_.scales[:3]
    np.testing.assert_allclose(b.recorder_.scales, a.recorder_.scales, rtol=RTOL)


def test_the_secret_order_and_the_draws_are_the_in_memory_ones():
    X, y, g = _data()
    params = dict(epsilon=1.0, n_iter=40, groups=GROUPS, classes=[0, 1])
    a = _fit(_Recording(random_state=0, solver="mirror", **params), X, y, g)
    b = _fit(_Recording(random_state=0, solver="mirror", **params), *_chunked(X, y, g))
    _assert_same_fit(a, b)
    # the permutation, then a vertex and a group per step
    assert len(a.recorder_.picks) == 1 + 2 * 40
    for first, second in zip(a.recorder_.picks, b.recorder_.picks, strict=True):
        np.testing.assert_array_equal(first, second)
    for first, second in zip(a.recorder_.draws, b.recorder_.draws, strict=True):
        np.testing.assert_array_equal(first, second)  # the counts' noise


def test_groups_and_labels_given_in_memory_are_cut_like_x():
    X, y, g = _data()
    a = _fit(_model(), X, y, g)
    b = _fit(_model(), _chunked(X, y)[0], y, g)
    _assert_same_fit(a, b)


def test_fit_on_a_local_cluster_is_the_in_memory_fit(monkeypatch):
    distributed = pytest.importorskip("distributed")
    X, y, g = _data()
    used = []
    find = _sgd_dask._active_client
    monkeypatch.setattr(
        _sgd_dask, "_active_client", lambda: used.append(find()) or used[-1]
    )
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
        ) as cluster,
        distributed.Client(cluster),
    ):
        b = _fit(_model(precondition=True), *_chunked(X, y, g))
    assert isinstance(used[0], distributed.Client)  # run on the cluster's workers
    a = _fit(_model(precondition=True), X, y, g)
    _assert_same_fit(a, b)


def test_labels_in_other_partitions_than_x_are_aligned():
    """Unknown partition lengths and another layout: lengths computed, y moved."""
    X, y, g = _data()
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=4)
    features = frame.map_partitions(lambda p: p.to_numpy(), meta=np.empty((0, 4)))
    labels = dd.from_pandas(pd.Series(y), npartitions=3)
    groups = dd.from_pandas(pd.Series(g), npartitions=2)
    a = _fit(_model(), X, y, g)
    b = _fit(_model(), features, labels, groups)
    _assert_same_fit(a, b)


def test_schema_encoder_on_a_dask_frame_feeds_the_fit():
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(
        {
            "age": rng.integers(17, 91, N),
            "hours": rng.integers(1, 100, N),
            "sex": rng.choice(["F", "M"], N),
            "income": rng.choice(["<=50K", ">50K"], N),
        }
    )
    schema = TableSchema({"age": (17, 90), "hours": (1, 99), "sex": ["F", "M"]})
    parts = dd.from_pandas(frame, npartitions=3)
    encoder = SchemaEncoder(schema).fit(parts)  # reads the column names only
    X = parts.map_partitions(encoder.transform, meta=np.empty((0, 4)))
    params = dict(
        classes=["<=50K", ">50K"], groups=["F", "M"], row_norm=encoder.row_norm_
    )
    b = _fit(_model(**params), X, parts["income"], parts["sex"])
    a = _fit(
        _model(**params),
        encoder.transform(frame),
        frame["income"].to_numpy(),
        frame["sex"].to_numpy(),
    )
    _assert_same_fit(a, b)


def test_empty_partitions_change_nothing():
    X, y, g = _data()
    a = _fit(_model(), *_chunked(X, y, g, chunks=(N,)))
    b = _fit(_model(), *_chunked(X, y, g, chunks=(0, N, 0)))
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=RTOL)


# -- only aggregates reach the client ---------------------------------------------


class _Results(Callback):
    """Every task's key and result, grouped by the compute call that ran it."""

    def __init__(self):
        super().__init__(start=self._start, posttask=self._keep)
        self.calls = []

    def _start(self, dsk):
        self.calls.append([])

    def _keep(self, key, result, dsk, state, worker_id):
        self.calls[-1].append((key_split(key), result))


def _check_aggregates_only(calls, model, n_partitions):
    """The first compute holds the partitions; every later task returns sums.

    A summary holds scalars and the group counts, a step task a vector of
    the model's and the groups' length, a moment task a square of the
    model's, the centre's task a vector of the features' length: nothing
    has a row dimension.
    """
    first, *later = calls
    held = [r for name, r in first if name == "prepare_group_partition"]
    assert len(held) == n_partitions
    form = MemoryRows if model.solver == "mirror" else ProjectedRows
    assert all(isinstance(r, form) for r in held)
    n_coef = model.coef_.shape[1] + int(model.fit_intercept)
    n_groups = model.groups_.size
    step = (n_coef + n_groups,) if n_groups > 1 else (n_coef,)
    names = set()
    for call in later:
        for name, result in call:
            names.add(name)
            if name == "summarise_group_partition":
                assert isinstance(result, _saddle_dask.GroupSummary)
                assert np.shape(result.group_counts) == (n_groups,)
            elif name == "partition_step_sums":
                assert isinstance(result, np.ndarray) and result.shape == step
            elif name == "partition_batch_sums":
                shape = (n_coef + n_groups,)
                assert isinstance(result, np.ndarray) and result.shape == shape
            elif name == "partition_row_sum":
                shape = (model.coef_.shape[1],)
                assert isinstance(result, np.ndarray) and result.shape == shape
            else:
                assert name == "partition_second_moment", name
                assert isinstance(result, np.ndarray)
                assert result.shape == (n_coef, n_coef)
    return names


def test_no_task_returns_rows():
    X, y, g = _data()
    watch = _Results()
    with watch:
        model = _fit(_model(precondition=True), *_chunked(X, y, g))
    names = _check_aggregates_only(watch.calls, model, len(CHUNKS))
    assert names == {
        "summarise_group_partition",
        "partition_row_sum",
        "partition_step_sums",
        "partition_second_moment",
    }
    watch = _Results()
    with watch:
        model = _fit(_model(solver="mirror"), *_chunked(X, y, g))
    names = _check_aggregates_only(watch.calls, model, len(CHUNKS))
    assert names == {"summarise_group_partition", "partition_batch_sums"}


def _leaky_step(rows, w, group_weights, clip_norm, max_loss, losses, centring=None):
    return rows.X @ w[:-1]


def _leaky_batch(rows, index, w, row_weights, plan, fit_intercept):
    return rows.X[index] @ w[:-1]


@pytest.mark.parametrize(
    ("module", "name", "leaky", "solver"),
    [
        (_gda_dask, "partition_step_sums", _leaky_step, "gda"),
        (_mirror_dask, "partition_batch_sums", _leaky_batch, "mirror"),
    ],
)
def test_the_row_check_catches_a_partition_that_returns_rows(
    monkeypatch, module, name, leaky, solver
):
    """The check above fails when a partition sends its rows' scores."""
    monkeypatch.setattr(module, name, leaky)
    X, y, g = _data()
    model = _fit(_model(solver=solver), X, y, g)
    watch = _Results()
    with watch, pytest.raises(ValueError):
        _fit(_model(solver=solver), *_chunked(X, y, g, chunks=(N,)))
    with pytest.raises(AssertionError):
        _check_aggregates_only(watch.calls, model, 1)


# -- partitions that differ, and refusals -----------------------------------------


def _with(X, y, g, row, value=None, label=None, group=None):
    X, y, g = X.copy(), y.copy(), g.astype(object)
    if value is not None:
        X[row, 2] = value
    if label is not None:
        y[row] = label
    if group is not None:
        g[row] = group if group != "missing" else None
    return X, y, g


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(value=np.nan), r"Input X contains NaN"),
        (dict(value=np.inf), r"Input X contains infinity"),
        (dict(label=7), r"y has labels outside the declared classes \[0, 1\]"),
        (dict(group="d"), r"labels \['d'\] that are not in the declared groups"),
        (dict(group="missing"), r"sensitive_features contains missing values"),
    ],
)
def test_a_bad_value_in_one_partition_is_refused_before_any_step(change, match):
    X, y, g = _with(*_data(), row=420, **change)  # in the fifth partition
    with pytest.raises(ValueError, match=match):
        _fit(_model(), X, y, g)
    watch = _Results()
    with watch, pytest.raises(ValueError, match=match):
        _fit(_model(), *_chunked(X, y, g))
    ran = {name for call in watch.calls for name, _ in call}
    assert "partition_step_sums" not in ran


def test_a_failed_fit_leaves_the_estimator_as_it_was():
    X, y, g = _data()
    model = _fit(_model(), *_chunked(X, y, g))
    before = (model.coef_.copy(), model.privacy_spent_, model.n_features_in_)
    bad = _with(X, y, g, row=3, group="z")
    with pytest.raises(ValueError, match="not in the declared groups"):
        _fit(model, *_chunked(*bad))
    np.testing.assert_array_equal(model.coef_, before[0])
    assert (model.privacy_spent_, model.n_features_in_) == before[1:]
    fresh = _model()
    with pytest.raises(ValueError, match="not in the declared groups"):
        _fit(fresh, *_chunked(*bad))
    assert not hasattr(fresh, "n_features_in_")


@pytest.mark.parametrize(
    ("inputs", "params", "match"),
    [
        ("ok", dict(classes=None), "declare the public classes"),
        ("ok", dict(classes=[0, 1, 2]), "binary classification only"),
        ("ok", dict(groups=None), "declare the public set of groups"),
        (
            "ok",
            dict(solver="mirror", neighbouring="add-remove", delta=1e-5),
            "supported by solver='gda' only",
        ),
        ("no-groups", dict(), "groups is set but fit got no sensitive_features"),
        ("empty", dict(), r"Found array with 0 sample\(s\)"),
        ("short-groups", dict(), "sensitive_features has 599 entries but X has 600"),
        ("vector", dict(), "X must have 2 dimensions"),
        ("misaligned", dict(), "A partition has 300 rows of X, 200 labels"),
    ],
)
def test_refused_with_a_clear_error(inputs, params, match):
    X, y, g = _data()
    args = {
        "ok": lambda: _chunked(X, y, g),
        "no-groups": lambda: [*_chunked(X, y), None],
        "empty": lambda: _chunked(X[:0], y[:0], g[:0], chunks=(0,)),
        "short-groups": lambda: [*_chunked(X, y), g[:-1]],
        "vector": lambda: [da.from_array(X[:, 0], chunks=100), y, g],
        "misaligned": lambda: [
            dd.from_pandas(pd.DataFrame(X), npartitions=2),
            dd.from_pandas(pd.Series(y[:400]), npartitions=2),
            dd.from_pandas(pd.Series(g[:400]), npartitions=2),
        ],
    }[inputs]()
    watch = _Results()
    with watch, pytest.raises(ValueError, match=match):
        _fit(_model(**params), *args)
    if inputs == "ok":  # refused from the parameters: no partition read
        assert watch.calls == []


class _OtherSolver(DPSaddlePointClassifier):
    _saddle_solvers = {"gda": SaddleSolver()}


def test_a_solver_without_a_dask_run_is_refused_before_any_read():
    watch = _Results()
    with watch, pytest.raises(ValueError, match="has no run on Dask collections"):
        _fit(_OtherSolver(groups=GROUPS, classes=[0, 1]), *_chunked(*_data()))
    assert watch.calls == []


def test_dask_stays_optional_for_in_memory_fits():
    code = (
        "import sys, numpy as np\n"
        "from skdp.fairness import DPSaddlePointClassifier\n"
        "X = np.random.default_rng(0).normal(size=(50, 2)); y = X[:, 0] > 0\n"
        "DPSaddlePointClassifier(n_iter=5, classes=[False, True]).fit(X, y)\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] == 'dask'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"

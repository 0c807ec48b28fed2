"""DPLogisticRegression on Dask arrays: the in-memory fit, up to float sums.

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

from skdp import DPLogisticRegression  # noqa: E402
from skdp._solvers._sgd import _dask  # noqa: E402
from skdp.preprocessing import SchemaEncoder  # noqa: E402
from skdp.schema import TableSchema  # noqa: E402

N = 600
#: Uneven row chunks, one of them empty.
CHUNKS = (1, 250, 0, 149, 200)
RTOL = 1e-10


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="sync"):
        yield


def _data(n=N, n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    score = X[:, 0] - 0.5 * X[:, 1] + rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return X, y


def _chunked(X, y, w=None, chunks=CHUNKS):
    out = [da.from_array(X, chunks=(chunks, 2)), da.from_array(y, chunks=(chunks,))]
    return out + ([] if w is None else [da.from_array(w, chunks=(chunks,))])


def _model(**params):
    base = dict(epsilon=1.0, batch_size=60, epochs=2, classes=[0, 1], random_state=0)
    return DPLogisticRegression(**{**base, **params})


def _assert_same_fit(a, b):
    """The same model up to the order of float sums; the same spend, exactly."""
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(b.intercept_, a.intercept_, rtol=RTOL, atol=1e-13)
    assert a.privacy_spent_ == b.privacy_spent_
    assert a.noise_multiplier_ == b.noise_multiplier_
    assert a.delta_ == b.delta_
    assert a.n_iter_ == b.n_iter_
    assert a.max_grad_norm_ == b.max_grad_norm_
    assert a.learning_rate_ == b.learning_rate_
    assert b.n_features_in_ == a.n_features_in_
    np.testing.assert_array_equal(b.classes_, a.classes_)


CASES = {
    "poisson": dict(batch_sampling="poisson"),
    # A fixed noise: calibrating the allocation accountant takes seconds.
    "balls-and-bins": dict(
        batch_sampling="balls-and-bins",
        epsilon=None,
        noise_multiplier=1.0,
        calibration_share=0.0,
    ),
    "shuffle": dict(batch_sampling="shuffle"),
    "cyclic": dict(batch_sampling="cyclic"),
    "sgld-shuffle": dict(batch_sampling="shuffle", solver="dp-sgld"),
    "add-remove": dict(batch_sampling="poisson", neighbouring="add-remove", delta=1e-5),
    "no-floor-row-norm": dict(
        batch_sampling="poisson", calibration_share=0.0, row_norm=2.0
    ),
    "fixed-noise": dict(batch_sampling="cyclic", epsilon=None, noise_multiplier=1.0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fit_is_the_in_memory_fit(case):
    X, y = _data()
    a = _model(**CASES[case]).fit(X, y)
    b = _model(**CASES[case]).fit(*_chunked(X, y))
    _assert_same_fit(a, b)


def test_multiclass_weighted_float32_fit_is_the_in_memory_fit():
    X, y = _data(n_classes=3)
    X = X.astype(np.float32)
    w = np.random.default_rng(1).uniform(0.2, 1.0, N)
    params = dict(classes=[0, 1, 2], batch_sampling="shuffle")
    a = _model(**params).fit(X, y, sample_weight=w)
    b = _model(**params).fit(*_chunked(X, y), sample_weight=_chunked(X, y, w)[2])
    _assert_same_fit(a, b)


def test_labels_and_weights_given_in_memory_are_cut_like_x():
    X, y = _data()
    w = np.linspace(0.1, 1.0, N)
    a = _model().fit(X, y, sample_weight=w)
    b = _model().fit(_chunked(X, y)[0], y, sample_weight=w)
    _assert_same_fit(a, b)


def test_fit_on_a_local_cluster_is_the_in_memory_fit(monkeypatch):
    distributed = pytest.importorskip("distributed")
    X, y = _data()
    used = []
    find = _dask._active_client
    monkeypatch.setattr(
        _dask, "_active_client", lambda: used.append(find()) or used[-1]
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
        b = _model(batch_sampling="shuffle", epochs=1).fit(*_chunked(X, y))
    assert isinstance(used[0], distributed.Client)  # run on the cluster's workers
    a = _model(batch_sampling="shuffle", epochs=1).fit(X, y)
    _assert_same_fit(a, b)


def test_a_partition_failing_on_a_cluster_raises_its_own_error():
    """An encoder refusing a value in one partition: its message, not a lookup error."""
    distributed = pytest.importorskip("distributed")
    X, y = _data()

    def refuse_in_third(block, block_info=None):
        if block_info[0]["chunk-location"][0] == 2:
            raise ValueError("Column 'sex' holds values that are not declared")
        return block

    features = da.from_array(X, chunks=(CHUNKS, 4)).map_blocks(
        refuse_in_third, dtype=X.dtype
    )
    labels = da.from_array(y, chunks=(CHUNKS,))
    model = _model()
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster),
        pytest.raises(ValueError, match="not declared"),
    ):
        model.fit(features, labels)
    assert not hasattr(model, "coef_")


def test_labels_in_other_partitions_than_x_are_aligned():
    """Unknown partition lengths and another layout: lengths computed, y moved."""
    X, y = _data()
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=4)
    features = frame.map_partitions(lambda p: p.to_numpy(), meta=np.empty((0, 4)))
    labels = dd.from_pandas(pd.Series(y), npartitions=3)
    a = _model().fit(X, y)
    b = _model().fit(features, labels)
    _assert_same_fit(a, b)


def test_schema_encoder_on_a_dask_frame_feeds_the_fit():
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(
        {
            "age": rng.integers(17, 91, N),
            "sex": rng.choice(["F", "M"], N),
            "income": rng.choice(["<=50K", ">50K"], N),
        }
    )
    schema = TableSchema({"age": (17, 90), "sex": ["F", "M"]})
    parts = dd.from_pandas(frame, npartitions=3)
    encoder = SchemaEncoder(schema).fit(parts)  # reads the column names only
    X = parts.map_partitions(encoder.transform, meta=np.empty((0, 3)))
    params = dict(classes=["<=50K", ">50K"], row_norm=encoder.row_norm_)
    b = _model(**params).fit(X, parts["income"])
    a = _model(**params).fit(encoder.transform(frame), frame["income"].to_numpy())
    _assert_same_fit(a, b)


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

    A gradient task returns an array of the model's shape, a floor task a
    vector of the floor's grid, a centre task one vector of the features'
    length, a summary task a PartitionSummary of scalars and class counts:
    nothing has a row dimension.
    """
    first, *later = calls
    held = [r for name, r in first if name == "prepare_partition"]
    assert len(held) == n_partitions
    assert all(isinstance(r, _dask.PartitionRows) for r in held)
    shape = (model.coef_.shape[1] + 1, model.coef_.shape[0])
    grid = len(model._policy.floor_grid)
    names = set()
    for call in later:
        for name, result in call:
            names.add(name)
            if name == "summarise_partition":
                assert isinstance(result, _dask.PartitionSummary)
                assert np.shape(result.class_counts) == (model.classes_.size,)
            elif name == "partition_gradient":
                assert isinstance(result, np.ndarray) and result.shape == shape
            elif name == "partition_row_sum":
                assert isinstance(result, np.ndarray)
                assert result.shape == (model.coef_.shape[1],)
            else:
                assert name == "partition_derivatives", name
                assert isinstance(result, np.ndarray) and result.shape == (grid,)
    return names


def test_no_task_returns_rows():
    X, y = _data()
    watch = _Results()
    with watch:
        model = _model().fit(*_chunked(X, y))
    names = _check_aggregates_only(watch.calls, model, len(CHUNKS))
    assert names == {
        "summarise_partition",
        "partition_row_sum",
        "partition_gradient",
        "partition_derivatives",
    }


def test_the_row_check_catches_a_partition_that_returns_rows(monkeypatch):
    """The check above fails when a partition sends its batch's rows."""

    def leaky(part, index, W, loss, row_norm, centre=None):
        return part.batch(index, row_norm, loss.fit_intercept, 2, centre).rows

    monkeypatch.setattr(_dask, "partition_gradient", leaky)
    X, y = _data()
    model = _model().fit(X, y)
    watch = _Results()
    with watch, pytest.raises(ValueError):
        _model().fit(*_chunked(X, y, chunks=(N,)))
    with pytest.raises(AssertionError):
        _check_aggregates_only(watch.calls, model, 1)


# -- partitions that differ, and refusals -----------------------------------------


def _with(X, y, row, value=None, label=None):
    X, y = X.copy(), y.copy()
    if value is not None:
        X[row, 2] = value
    if label is not None:
        y[row] = label
    return X, y


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(value=np.nan), r"Input X contains NaN or infinity \(1 values\)"),
        (dict(value=np.inf), r"Input X contains NaN or infinity \(1 values\)"),
        (dict(label=7), r"y has labels outside the declared classes \[0, 1\]"),
    ],
)
def test_a_bad_value_in_one_partition_is_refused_before_any_step(change, match):
    X, y = _with(*_data(), row=420, **change)  # in the fifth partition
    with pytest.raises(ValueError, match=match.split(" ")[0] + " X contains|y has"):
        _model().fit(X, y)
    watch = _Results()
    with watch, pytest.raises(ValueError, match=match):
        _model().fit(*_chunked(X, y))
    ran = {name for call in watch.calls for name, _ in call}
    assert "partition_gradient" not in ran


def test_a_failed_fit_leaves_the_estimator_as_it_was():
    X, y = _data()
    model = _model().fit(*_chunked(X, y))
    before = (model.coef_.copy(), model.privacy_spent_, model.n_features_in_)
    bad = _with(X, y, row=3, label=5)
    with pytest.raises(ValueError, match="outside the declared classes"):
        model.fit(*_chunked(*bad))
    np.testing.assert_array_equal(model.coef_, before[0])
    assert (model.privacy_spent_, model.n_features_in_) == before[1:]


@pytest.mark.parametrize(
    ("inputs", "params", "match"),
    [
        ("ok", dict(classes=None), "declare the public classes"),
        ("empty", dict(), r"Found array with 0 sample\(s\)"),
        ("short-y", dict(), "inconsistent numbers of samples"),
        ("weights>1", dict(), r"sample_weight must lie in \[0, 1\]"),
        ("zero-weights", dict(), "All sample weights are zero"),
        ("vector", dict(), "X must have 2 dimensions"),
        ("misaligned", dict(), "A partition has 300 rows of X and 200 labels"),
    ],
)
def test_refused_with_a_clear_error(inputs, params, match):
    X, y = _data()
    args = {
        "ok": lambda: _chunked(X, y),
        "empty": lambda: _chunked(X[:0], y[:0], chunks=(0,)),
        "short-y": lambda: [_chunked(X, y)[0], y[:-1]],
        "weights>1": lambda: _chunked(X, y, np.full(N, 1.5)),
        "zero-weights": lambda: _chunked(X, y, np.zeros(N)),
        "vector": lambda: [da.from_array(X[:, 0], chunks=100), y],
        "misaligned": lambda: [
            dd.from_pandas(pd.DataFrame(X), npartitions=2),
            dd.from_pandas(pd.Series(y[:400]), npartitions=2),
        ],
    }[inputs]()
    with pytest.raises(ValueError, match=match):
        _model(**params).fit(*args)


def test_a_shuffled_plan_checks_the_summed_row_count():
    """The plan is made from the summed count: an empty partition changes nothing."""
    X, y = _data()
    a = _model(batch_sampling="cyclic").fit(*_chunked(X, y, chunks=(N,)))
    b = _model(batch_sampling="cyclic").fit(*_chunked(X, y, chunks=(0, N, 0)))
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=RTOL)


def test_batch_router_reads_slices_of_an_arrangement_and_index_arrays():
    router = _dask.BatchRouter([0, 3, 3, 7], order=None)
    assert router.n_rows == 7
    np.testing.assert_array_equal(router.rows_of(slice(2, 5)), [2, 3, 4])
    router.arrange(np.array([6, 0, 4, 1, 5, 2, 3]))
    np.testing.assert_array_equal(router.rows_of(slice(1, 4)), [0, 4, 1])
    np.testing.assert_array_equal(router.rows_of(np.array([5, 1])), [5, 1])
    split = [(k, local.tolist()) for k, local in router.split(np.array([6, 0, 4, 1]))]
    assert split == [(0, [0, 1]), (2, [1, 3])]


def test_dask_stays_optional_for_in_memory_fits():
    code = (
        "import sys, numpy as np\n"
        "from skdp import DPLogisticRegression\n"
        "X = np.random.default_rng(0).normal(size=(50, 2)); y = X[:, 0] > 0\n"
        "DPLogisticRegression(epsilon=None, noise_multiplier=1.0,\n"
        "    calibration_share=0, classes=[False, True], epochs=1).fit(X, y)\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] == 'dask'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"

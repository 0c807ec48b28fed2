"""DPSyntheticData on Dask collections: the in-memory fit, bit for bit, from counts.

Every fit here runs on Dask's synchronous scheduler (one test on a small
in-process LocalCluster), so task results can be inspected.
"""

import subprocess
import sys
import warnings

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")
da = pytest.importorskip("dask.array")

from dask.callbacks import Callback  # noqa: E402
from dask.utils import key_split  # noqa: E402

from skdp._base import SEED_BOUND, fit_generator  # noqa: E402
from skdp._solvers._aim import AIMPolicy  # noqa: E402
from skdp.schema import Categorical, Numeric  # noqa: E402
from skdp.synthetic import (  # noqa: E402
    DomainWarning,
    DPSyntheticData,
    _dask,
    marginal_error,
)
from skdp.synthetic._estimator import _Sampler  # noqa: E402

#: Few mirror-descent iterations: these tests check identity, not fit quality.
FAST = AIMPolicy(round_iter=10, final_iter=20)
N = 1200

METHODS = {
    "aim": dict(epsilon=1.0),
    "aim-add-remove": dict(epsilon=1.0, delta=1e-5, neighbouring="add-remove"),
    "aim-fixed-3way": dict(epsilon=2.0, binning="fixed", bins=6, workload="3-way"),
    "tree": dict(epsilon=1.0, method="tree"),
}


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="sync"):
        yield


def _frame(n=N, seed=0):
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, n)
    colour = np.where(
        age > 50, rng.choice(["red", "green"], n), rng.choice(["green", "blue"], n)
    )
    return pd.DataFrame(
        {
            "age": age,
            "hours": np.round(rng.uniform(0, 80, n) + (age > 40) * 5, 2),
            "colour": colour,
            "flag": (rng.random(n) < 0.3 + 0.4 * (colour == "red")).astype(int),
        }
    )


DOMAIN = {
    "age": (18, 90),
    "hours": (0.0, 85.0),
    "colour": ["red", "green", "blue"],
    "flag": [0, 1],
}


def _model(params, **extra):
    model = DPSyntheticData(domain=DOMAIN, random_state=0, **{**params, **extra})
    model._aim_policy = FAST
    return model


def _assert_same_fit(a, b):
    """Everything fitted and sampled is the same, bit for bit."""
    assert a.selected_ == b.selected_
    assert a.noise_multiplier_ == b.noise_multiplier_
    assert a.privacy_spent_ == b.privacy_spent_
    assert a.events_ == b.events_
    assert a.delta_ == b.delta_
    assert a.n_samples_fit_ == b.n_samples_fit_
    assert a._sample_seed == b._sample_seed
    _assert_same_table(a.sample(), b.sample())
    _assert_same_table(a.sample(500, random_state=7), b.sample(500, random_state=7))


def _assert_same_table(x, y):
    if isinstance(x, pd.DataFrame):
        pd.testing.assert_frame_equal(x, y, check_exact=True)
    else:
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def _uneven(frame, cuts):
    """Partitions ``frame[cuts[k]:cuts[k + 1]]`` (empty ones allowed)."""
    bounds = list(zip(cuts[:-1], cuts[1:], strict=True))
    return dd.from_map(lambda b: frame.iloc[b[0] : b[1]], bounds)


PARTITIONINGS = {
    "one": [0, N],
    "uneven": [0, 1, 700, 731, N],
    "with-empty": [0, 400, 400, N],
    "many": list(range(0, N, 50)) + [N],
}


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("partitioning", sorted(PARTITIONINGS))
def test_frame_fit_is_the_in_memory_fit(method, partitioning):
    frame = _frame()
    collection = _uneven(frame, PARTITIONINGS[partitioning])
    local = collection.compute()  # the same rows, the same dtypes
    a = _model(METHODS[method]).fit(local)
    b = _model(METHODS[method]).fit(collection)
    _assert_same_fit(a, b)


@pytest.mark.parametrize("method", ["aim", "aim-add-remove", "tree"])
def test_array_fit_is_the_in_memory_fit(method):
    rng = np.random.default_rng(1)
    X = np.column_stack(
        [rng.integers(0, 5, N), rng.integers(0, 3, N), rng.uniform(-1, 1, N)]
    )
    X[:, 1] = np.where(rng.random(N) < 0.7, X[:, 0] % 3, X[:, 1])
    domain = {0: list(range(5)), 1: [0.0, 1.0, 2.0], 2: (-1.0, 1.0)}
    # Rows chunked unevenly and columns split: the fit rechunks the columns.
    chunked = da.from_array(X, chunks=((1, 599, 17, N - 617), (2, 1)))
    params = METHODS[method]
    a = DPSyntheticData(domain=domain, random_state=3, **params).fit(X)
    b = DPSyntheticData(domain=domain, random_state=3, **params).fit(chunked)
    _assert_same_fit(a, b)
    assert isinstance(b.sample(), np.ndarray)


def test_fit_on_a_local_cluster_is_the_in_memory_fit():
    distributed = pytest.importorskip("distributed")
    frame = _frame()
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
        ) as cluster,
        distributed.Client(cluster),
    ):
        b = _model(METHODS["aim"]).fit(dd.from_pandas(frame, npartitions=5))
        sampled = b.sample(npartitions=3).compute()
    a = _model(METHODS["aim"]).fit(dd.from_pandas(frame, npartitions=1).compute())
    _assert_same_fit(a, b)
    with dask.config.set(scheduler="sync"):
        pd.testing.assert_frame_equal(sampled, b.sample(npartitions=3).compute())


# -- only aggregates leave a partition ------------------------------------------


class _Results(Callback):
    """Every task's key and result, as the (local) scheduler computes them."""

    def __init__(self):
        super().__init__(posttask=self._keep)
        self.results = []

    def _keep(self, key, result, dsk, state, worker_id):
        self.results.append((key_split(key), result))


def _check_aggregates_only(results, shapes, n_partitions):
    """Every task returns count tables of ``shapes``, none anything with rows.

    A counting task (read and count fused) returns its counts wrapped in a
    one-item Series or array (an array graph may alias it under a second
    key); a summing task returns counts.
    """
    counted, summed = [], []
    for name, result in results:
        if isinstance(result, (pd.Series, np.ndarray)):
            assert result.dtype == object and result.size == 1, name
            counts = np.asarray(result, dtype=object).ravel()[0]
            counted.append(counts)
        else:
            assert name == "sum_counts", name
            counts = result
            summed.append(counts)
        assert isinstance(counts, _dask.PartitionCounts), name
        assert set(counts.tables) == set(shapes), name
        for s, table in counts.tables.items():
            assert table.shape == shapes[s], (name, s)
        for count, _ in counts.report.values():
            assert np.ndim(count) == 0
    counted = list({id(c): c for c in counted}.values())
    assert len(counted) == n_partitions
    return counted, summed


def _pair_shapes(model):
    sizes = [spec.n_levels for spec in model.columns_]
    d = len(sizes)
    return {(i, j): (sizes[i], sizes[j]) for i in range(d) for j in range(i + 1, d)}


@pytest.mark.parametrize("kind", ["from_map", "from_pandas", "array"])
def test_no_task_returns_rows(kind):
    frame = _frame()
    collection = {
        "from_map": lambda: _uneven(frame, PARTITIONINGS["many"]),
        "from_pandas": lambda: dd.from_pandas(frame, npartitions=24),
        "array": lambda: da.from_array(
            frame[["age", "flag"]].to_numpy(), chunks=(50, 2)
        ),
    }[kind]()
    domain = DOMAIN if kind != "array" else {0: (18, 90), 1: [0, 1]}
    watch = _Results()
    with watch:
        model = DPSyntheticData(domain=domain, random_state=0)
        model._aim_policy = FAST
        model.fit(collection)
    counted, summed = _check_aggregates_only(watch.results, _pair_shapes(model), 24)
    assert sum(r.n_rows for r in counted) == N
    assert summed[-1].n_rows == N  # the tree's root: what the client receives
    assert len(summed) == 4  # 24 partitions, 8 at a time: 3 sums, then 1


def test_the_row_check_catches_a_partition_that_returns_rows(monkeypatch):
    """The check above fails when a partition smuggles its codes out."""
    honest = _dask.count_partition

    def leaky(block, keys, specs, sets, handle_unknown):
        counts = honest(block, keys, specs, sets, handle_unknown)
        rows = np.asarray(block.to_numpy())
        return _dask.PartitionCounts(
            counts.n_rows, {**counts.tables, "rows": rows}, counts.report
        )

    monkeypatch.setattr(_dask, "count_partition", leaky)
    collection = dd.from_pandas(_frame(), npartitions=1)
    watch = _Results()
    with watch:
        model = DPSyntheticData(domain=DOMAIN, method="tree", random_state=0)
        model.fit(collection)
    with pytest.raises(AssertionError):
        _check_aggregates_only(watch.results, _pair_shapes(model), 1)


# -- partitions that differ ------------------------------------------------------


def test_all_partitions_empty_is_the_in_memory_error():
    empty = _frame().iloc[:0]
    with pytest.raises(ValueError, match="X is empty"):
        _model(METHODS["tree"]).fit(dd.from_pandas(empty, npartitions=1))


def test_a_partition_missing_a_column_is_refused_by_name():
    frame = _frame()

    def part(k):
        piece = frame.iloc[k * 300 : (k + 1) * 300]
        return piece.drop(columns="colour") if k == 2 else piece

    collection = dd.from_map(part, range(4))
    with pytest.raises(ValueError, match=r"missing \['colour'\]"):
        _model(METHODS["tree"]).fit(collection)


def test_concatenated_frames_with_different_columns_fill_with_missing():
    """dd.concat fills a column one frame lacks with missing values: the
    in-memory rules for missing values then apply, naming the column."""
    frame = _frame()
    parts = [
        dd.from_pandas(frame.iloc[:600], npartitions=2),
        dd.from_pandas(frame.iloc[600:].drop(columns="hours"), npartitions=1),
    ]
    collection = dd.concat(parts)
    with pytest.raises(ValueError, match="Column 'hours' contains missing values"):
        _model(METHODS["tree"]).fit(collection)
    nullable = {**DOMAIN, "hours": Numeric(0.0, 85.0, nullable=True)}
    a = DPSyntheticData(domain=nullable, method="tree", random_state=0)
    b = DPSyntheticData(domain=nullable, method="tree", random_state=0)
    _assert_same_fit(a.fit(collection.compute()), b.fit(collection))
    assert b.sample()["hours"].isna().any()


def _with_unknown(frame, rows):
    out = frame.copy()
    out.loc[rows, "colour"] = "purple"
    return out


def test_an_unknown_category_in_one_partition_is_the_in_memory_error():
    frame = _with_unknown(_frame(), [1000])
    collection = dd.from_pandas(frame, npartitions=4)
    with pytest.raises(ValueError) as local:
        _model(METHODS["aim"]).fit(frame)
    with pytest.raises(ValueError) as remote:
        _model(METHODS["aim"]).fit(collection)
    assert str(remote.value) == str(local.value)
    assert "'colour'" in str(remote.value) and "'purple'" in str(remote.value)


def test_unknown_categories_and_clipped_values_warn_as_in_memory():
    frame = _with_unknown(_frame(), [3, 1000, 1001])
    frame.loc[[5, 900], "hours"] = 99.0  # beyond the declared 85 in two partitions
    collection = dd.from_pandas(frame, npartitions=4)
    params = dict(METHODS["aim"], handle_unknown="other")
    with pytest.warns(DomainWarning) as local:
        a = _model(params).fit(collection.compute())
    with pytest.warns(DomainWarning) as remote:
        b = _model(params).fit(collection)
    assert [str(w.message) for w in remote] == [str(w.message) for w in local]
    assert "'hours': 2 clipped" in str(remote[0].message)
    assert "'colour': 3 mapped to 'other'" in str(remote[0].message)
    _assert_same_fit(a, b)


def test_unknown_categories_of_a_dask_categorical_column():
    """Categories Dask does not know are read from the declaration."""
    frame = _frame().astype({"colour": "category"})
    collection = dd.from_pandas(frame, npartitions=3)
    collection = collection.astype({"colour": "category"})  # categories unknown
    model = _model(METHODS["tree"]).fit(collection)
    sample = model.sample()
    assert list(sample["colour"].cat.categories) == DOMAIN["colour"]


# -- refused before anything is computed -----------------------------------------


@pytest.mark.parametrize(
    ("X", "params", "match"),
    [
        ("frame", dict(infer_domain=0.1), "infer_domain is not available"),
        ("frame", dict(domain={"age": (18, 90)}), r"No domain given for the columns"),
        ("frame", dict(domain={**DOMAIN, "zip": [1]}), "not in X"),
        ("series", dict(), "must be a dask.dataframe.DataFrame"),
        ("vector", dict(), "must be a dask.dataframe.DataFrame"),
    ],
)
def test_refused_before_any_task_runs(X, params, match):
    frame = _frame()
    collection = {
        "frame": dd.from_pandas(frame, npartitions=2),
        "series": dd.from_pandas(frame["age"], npartitions=2),
        "vector": da.from_array(frame["age"].to_numpy(), chunks=100),
    }[X]
    model = DPSyntheticData(**{"domain": DOMAIN, **params})
    watch = _Results()
    with watch, pytest.raises(ValueError, match=match):
        model.fit(collection)
    assert watch.results == []
    assert not hasattr(model, "privacy_spent_")


def test_a_failed_fit_leaves_the_estimator_as_it_was():
    model = _model(METHODS["tree"]).fit(_frame())
    before = (model.selected_, model.privacy_spent_, model._sample_seed)
    bad = dd.from_pandas(_with_unknown(_frame(), [7]), npartitions=3)
    with pytest.raises(ValueError, match="purple"):
        model.fit(bad)
    assert (model.selected_, model.privacy_spent_, model._sample_seed) == before


# -- sampling partition by partition ---------------------------------------------


def _seeds(model, random_state, k):
    rng = (
        np.random.default_rng(model._sample_seed)
        if random_state is None
        else fit_generator(random_state)
    )
    return rng.integers(SEED_BOUND, size=k)


@pytest.mark.parametrize("random_state", [None, 11])
def test_partition_k_is_the_in_memory_draw_of_its_rows(random_state):
    model = _model(METHODS["aim"]).fit(_frame())
    table = model.sample(1001, random_state=random_state, npartitions=3)
    assert isinstance(table, dd.DataFrame) and table.npartitions == 3
    assert table.divisions == (0, 334, 668, 1000)
    sampler = _Sampler(model._model, model.columns_, model._frame_info, None)
    for k, (n, seed) in enumerate(
        zip([334, 334, 333], _seeds(model, random_state, 3), strict=True)
    ):
        part = table.partitions[k].compute()
        expected = sampler.draw(n, np.random.default_rng(seed))
        np.testing.assert_array_equal(part.to_numpy(), expected.to_numpy())
        assert list(part.index) == list(
            range(table.divisions[k], table.divisions[k] + n)
        )


def test_partitioned_sample_follows_the_model():
    """Rounded per partition instead of over the whole table: the same
    marginals, within the noise of a draw; independent partitions."""
    model = _model(METHODS["aim"]).fit(_frame(4000))
    whole = model.sample(20000)
    parts = model.sample(20000, npartitions=4).compute()
    assert parts.dtypes.equals(whole.dtypes)
    reference = model.sample(200_000, random_state=3)  # close to the model
    assert marginal_error(parts, reference, DOMAIN, ways=1) < 0.002
    assert marginal_error(parts, reference, DOMAIN, ways=2) < 1.25 * marginal_error(
        whole, reference, DOMAIN, ways=2
    )
    first, second = parts.iloc[:5000], parts.iloc[5000:10000]
    assert not np.array_equal(first.to_numpy(), second.to_numpy())
    # Not the in-memory table cut in pieces: the rows themselves differ.
    assert not np.array_equal(whole.to_numpy(), parts.to_numpy())


def test_a_written_table_is_drawn_one_partition_per_task(tmp_path):
    model = _model(METHODS["tree"]).fit(_frame())
    table = model.sample(5000, npartitions=10)
    watch = _Results()
    with watch:
        table.to_csv(str(tmp_path / "part-*.csv"), index=False)
    drawn = [r for name, r in watch.results if name == "draw_block"]
    assert len(drawn) == 10 and max(len(r) for r in drawn) == 500
    largest = max(
        len(r) for _, r in watch.results if isinstance(r, (pd.DataFrame, np.ndarray))
    )
    assert largest == 500  # no task ever held more than one partition
    back = dd.read_csv(str(tmp_path / "part-*.csv")).compute()
    expected = table.compute()
    np.testing.assert_array_equal(back["age"], expected["age"])
    np.testing.assert_array_equal(back["colour"].astype(object), expected["colour"])


def test_sample_to_parquet_round_trips(tmp_path):
    pytest.importorskip("pyarrow")
    model = _model(METHODS["aim"]).fit(dd.from_pandas(_frame(), npartitions=3))
    table = model.sample(npartitions=4)
    table.to_parquet(str(tmp_path / "out.parquet"), write_index=False)
    back = dd.read_parquet(str(tmp_path / "out.parquet")).compute()
    assert len(back) == model.n_samples_fit_
    _assert_same_table(back.reset_index(drop=True), table.compute())


def test_array_sample_partitions_and_arguments():
    X = np.random.default_rng(0).integers(0, 3, size=(300, 2))
    model = DPSyntheticData(domain={0: [0, 1, 2], 1: [0, 1, 2]}, random_state=0)
    model.fit(X)
    table = model.sample(10, npartitions=4)
    assert isinstance(table, da.Array) and table.chunks[0] == (3, 3, 2, 2)
    assert table.compute().dtype == X.dtype and table.compute().shape == (10, 2)
    assert model.sample(0, npartitions=2).compute().shape == (0, 2)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="npartitions"):
            model.sample(10, npartitions=bad)


def test_declared_schema_on_dask_matches_memory():
    frame = _frame()
    frame.loc[[2, 900], "colour"] = None
    domain = {
        "age": Numeric(18, 90, bins=[18, 30, 45, 65, 90]),
        "hours": Numeric(0.0, 85.0),
        "colour": Categorical(["red", "green", "blue"], nullable=True),
        "flag": [0, 1],
    }
    collection = dd.from_pandas(frame, npartitions=3)
    a = DPSyntheticData(domain=domain, random_state=5).fit(collection.compute())
    b = DPSyntheticData(domain=domain, random_state=5).fit(collection)
    _assert_same_fit(a, b)


def test_warnings_are_not_raised_for_a_clean_fit():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _model(METHODS["tree"]).fit(dd.from_pandas(_frame(), npartitions=2))


def test_dask_stays_optional_for_in_memory_fits():
    """Fitting and sampling in memory never imports dask (an optional extra)."""
    code = (
        "import sys, numpy as np\n"
        "from skdp.synthetic import DPSyntheticData\n"
        "X = np.random.default_rng(0).integers(0, 3, size=(200, 2))\n"
        "m = DPSyntheticData(domain={0: [0, 1, 2], 1: [0, 1, 2]}, random_state=0)\n"
        "m.fit(X).sample(5)\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] == 'dask'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_dask_sees_the_size_of_the_counts():
    """The scheduler's memory and transfer figures count the tables' bytes."""
    from dask.sizeof import sizeof

    tables = {(0, 1): np.zeros((30, 40), np.int64), (2,): np.zeros(7, np.int64)}
    counts = _dask.PartitionCounts(5, tables, {})
    assert sizeof(counts) >= (1200 + 7) * 8

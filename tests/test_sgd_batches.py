"""The batch samplers draw what their accountants assume, and the run reads them.

Poisson batches: the independent inclusions of the subsampled-Gaussian
accountant. Balls-and-bins batches: each step's rows of the epoch's
allocation, read by the run (rearranged every epoch, or gathered from a
memmap) bit for bit as a plain loop would.
"""

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats
from test_sgd_run import _reference_gradient

from skdp._solvers._allocation import allocate_epoch
from skdp._solvers._rows import row_projection
from skdp._solvers._sgd import _batches, make_plan, poisson_batch, run_logistic_sgd
from skdp._solvers._sgd._batches import batch_indices


@pytest.mark.parametrize(("n", "q"), [(3, 0.3), (4, 0.05), (2, 0.9)])
def test_subsets_follow_independent_inclusion(n, q):
    """Every subset of rows appears with probability q^|S| (1-q)^(n-|S|)."""
    rng = np.random.default_rng(12345)
    draws = 40_000
    counts = {}
    for _ in range(draws):
        key = tuple(poisson_batch(n, q, rng).tolist())
        counts[key] = counts.get(key, 0) + 1
    subsets = [s for k in range(n + 1) for s in itertools.combinations(range(n), k)]
    assert set(counts) <= set(subsets)
    observed = np.array([counts.get(s, 0) for s in subsets])
    expected = np.array([q ** len(s) * (1 - q) ** (n - len(s)) for s in subsets])
    _, p_value = stats.chisquare(observed, draws * expected)
    assert p_value > 1e-4


def test_rows_sorted_unique_in_range_and_mean_size():
    rng = np.random.default_rng(0)
    n, q = 100_000, 0.01
    sizes = []
    for _ in range(200):
        rows = poisson_batch(n, q, rng)
        assert rows.dtype.kind == "i"
        assert (np.diff(rows) > 0).all()
        assert rows.size == 0 or (rows[0] >= 0 and rows[-1] < n)
        sizes.append(rows.size)
    # Binomial(n, q): mean 1000, std 9.95; the mean of 200 draws has std 0.70.
    assert abs(np.mean(sizes) - n * q) < 5 * 0.70


def test_full_and_tiny_rates():
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(poisson_batch(7, 1.0, rng), np.arange(7))
    assert poisson_batch(5, 1e-12, rng).size == 0


def _allocation_plan(n, n_classes=2, epochs=3, **kw):
    params = dict(
        n_samples=n,
        n_classes=n_classes,
        row_norm=1.5,
        batch_size=64,
        epochs=epochs,
        sampling="balls-and-bins",
        solver="dp-sgd",
        learning_rate="auto",
        lr_schedule="decreasing",
        l2=1e-3,
        l1=0.0,
        clip_norm="auto",
        projection_radius=None,
        tail_fraction=0.3,
    )
    return make_plan(**{**params, **kw})


class _ArrangeRecorder(SimpleNamespace):
    """A rows object that records the orders it is asked to arrange."""

    def arrange(self, order):
        self.orders.append(np.array(order))


def test_balls_and_bins_batches_are_each_steps_allocated_rows():
    # Each epoch hands a fresh allocation's order, drawn from the run's rng,
    # to ``rows.arrange``, then yields each step's slice of it: the step's
    # rows, in increasing index.
    n, epochs = 500, 3
    plan = _allocation_plan(n, epochs=epochs)
    per_epoch = len(plan.batch_sizes)
    rows = _ArrangeRecorder(n_rows=n, order=None, orders=[])
    got = list(batch_indices(plan, np.random.default_rng(5), rows))
    assert [step for step, _ in got] == list(range(plan.n_steps))
    assert len(rows.orders) == epochs
    rng = np.random.default_rng(5)
    for epoch in range(epochs):
        allocation = allocate_epoch(n, per_epoch, rng)
        np.testing.assert_array_equal(rows.orders[epoch], allocation.order)
        for j in range(per_epoch):
            _, index = got[epoch * per_epoch + j]
            assert isinstance(index, slice)
            batch = rows.orders[epoch][index]
            np.testing.assert_array_equal(batch, allocation.batch(j))
            assert np.all(np.diff(batch) > 0)


def _reference_allocation_run(X, codes, plan, z, row_norm, rng, sample_weight):
    """The plain loop: an allocation an epoch, each batch gathered and projected."""
    binary = plan.n_classes == 2
    W = np.zeros((X.shape[1] + 1, 1 if binary else plan.n_classes))
    per_epoch = len(plan.batch_sizes)
    average_from = plan.n_steps - max(1, int(round(plan.tail_fraction * plan.n_steps)))
    W_sum, n_averaged = np.zeros_like(W), 0
    for step in range(plan.n_steps):
        if step % per_epoch == 0:
            allocation = allocate_epoch(X.shape[0], per_epoch, rng)
        idx = allocation.batch(step % per_epoch)
        Xb = np.asarray(X[idx], dtype=float)
        raw = np.sqrt(np.einsum("ij,ij->i", Xb, Xb))
        scale, norm = row_projection(raw, row_norm, True)
        labels = codes[idx]
        Yb = labels[:, None].astype(float) if binary else np.eye(plan.n_classes)[labels]
        weights = None if sample_weight is None else sample_weight[idx]
        grad = _reference_gradient(
            W, Xb, Yb, scale, norm, binary, True, plan.clip_norm, weights
        )
        eta, denom = plan.learning_rates[step], float(plan.expected_batch)
        noise = rng.normal(0.0, z * plan.clip_norm, size=W.shape)
        W = W - eta * ((grad + noise) / denom + plan.l2 * W)
        if step >= average_from:
            W_sum += W
            n_averaged += 1
    return W_sum / n_averaged


def _seeded_run(X, codes, plan, sample_weight):
    """The weights of a run at noise multiplier 0.8, row bound 1.5, seed 3."""
    return run_logistic_sgd(
        X,
        codes,
        plan,
        0.8,
        row_norm=1.5,
        fit_intercept=True,
        rng=np.random.default_rng(3),
        sample_weight=sample_weight,
    ).weights


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("storage", ["array", "float32", "memmap"])
def test_balls_and_bins_run_matches_reference_loop(
    n_classes, weighted, storage, tmp_path
):
    # Bit for bit (tobytes also tells -0.0 from 0.0): the run's per-step
    # gather and looked-up projections change nothing, whatever the storage.
    rng = np.random.default_rng(11)
    n, d = 700, 5
    X = rng.normal(size=(n, d)) * rng.uniform(0.2, 3.0, size=(n, 1))
    if storage == "float32":
        X = X.astype(np.float32)
    elif storage == "memmap":
        X_map = np.memmap(tmp_path / "X.dat", dtype=float, mode="w+", shape=X.shape)
        X_map[:] = X
        X = X_map
    codes = rng.integers(n_classes, size=n).astype(np.uint8)
    sample_weight = rng.uniform(size=n) if weighted else None
    plan = _allocation_plan(n, n_classes=n_classes, epochs=2)
    got = _seeded_run(X, codes, plan, sample_weight)
    expected = _reference_allocation_run(
        X, codes, plan, 0.8, 1.5, np.random.default_rng(3), sample_weight
    )
    assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("sampling", ["cyclic", "shuffle"])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [float, np.float32])
def test_sliced_runs_match_batches_projected_as_read(
    sampling, n_classes, weighted, dtype, monkeypatch
):
    # Cyclic and shuffled runs on an array read projections computed once;
    # bit for bit the run that projects each batch as it reads it.
    rng = np.random.default_rng(5)
    n, d = 600, 4
    X = (rng.normal(size=(n, d)) * rng.uniform(0.2, 3.0, size=(n, 1))).astype(dtype)
    X[7] *= 1e40 if dtype is float else 1.0  # a row the run must tame first
    codes = rng.integers(n_classes, size=n).astype(np.uint8)
    sample_weight = rng.uniform(size=n) if weighted else None
    plan = _allocation_plan(n, n_classes=n_classes, epochs=2, sampling=sampling)

    got = _seeded_run(X, codes, plan, sample_weight)
    monkeypatch.setattr(_batches, "_SlicedRows", _batches._ProjectedAsRead)
    expected = _seeded_run(X, codes, plan, sample_weight)
    assert np.all(np.isfinite(got))
    assert got.tobytes() == expected.tobytes()


def _allocation_data(n, d, n_classes, weighted, dtype=float):
    """Rows of spread norms, labels of ``n_classes`` classes and maybe weights."""
    rng = np.random.default_rng(17)
    X = (rng.normal(size=(n, d)) * rng.uniform(0.2, 3.0, size=(n, 1))).astype(dtype)
    codes = rng.integers(n_classes, size=n).astype(np.uint8)
    sample_weight = rng.uniform(size=n) if weighted else None
    return X, codes, sample_weight


def _block_bytes(block_rows, d):
    """The ``_BLOCK_BYTES`` for blocks of ``block_rows`` float64 rows of ``d``."""
    return block_rows * (8 * d + 32)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(("batch_size", "block_rows"), [(3, 7), (64, 100), (64, 5)])
def test_balls_and_bins_blocks_match_reference_loop(
    n_classes, weighted, batch_size, block_rows, monkeypatch
):
    # Blocks of 7 rows for steps of 3 rows on average (a tenth of them empty,
    # many split by a block's end), of 100 rows for steps of 64 (split
    # steps) and of 5 rows (every step larger than a block): bit for bit
    # the plain loop.
    n, d = 700, 5
    monkeypatch.setattr(_batches, "_BLOCK_BYTES", _block_bytes(block_rows, d))
    X, codes, sample_weight = _allocation_data(n, d, n_classes, weighted)
    plan = _allocation_plan(n, n_classes=n_classes, epochs=2, batch_size=batch_size)
    got = _seeded_run(X, codes, plan, sample_weight)
    expected = _reference_allocation_run(
        X, codes, plan, 0.8, 1.5, np.random.default_rng(3), sample_weight
    )
    assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", [float, np.float32])
@pytest.mark.parametrize("block_rows", [1, 6, 40, 10_000])
def test_arranged_batches_are_the_looked_up_batches(dtype, block_rows, monkeypatch):
    # Step by step, over two epochs whose allocations have empty steps,
    # steps split by a block's end and steps larger than a block: each
    # batch read from the blocks is the batch looked up row by row
    # (:class:`_ProjectedOnce`) from the step's rows.
    n, d, n_classes = 300, 4, 3
    monkeypatch.setattr(_batches, "_BLOCK_BYTES", _block_bytes(block_rows, d))
    X, codes, sample_weight = _allocation_data(n, d, n_classes, True, dtype)
    plan = _allocation_plan(n, n_classes=n_classes, epochs=2, batch_size=4)
    rows = _batches.training_rows(
        X, codes, sample_weight, plan, None, row_norm=1.5, fit_intercept=True
    )
    assert isinstance(rows, _batches._ArrangedRows)
    looked_up = _batches._ProjectedOnce(
        X, codes, sample_weight, None, n_classes, True, row_norm=1.5
    )
    rng = np.random.default_rng(8)
    sizes = []
    for _ in range(2):
        allocation = allocate_epoch(n, len(plan.batch_sizes), rng)
        rows.arrange(allocation.order)
        for j in range(allocation.n_steps):
            got = rows.batch(slice(*allocation.bounds[j : j + 2].tolist()))
            expected = looked_up.batch(allocation.batch(j))
            for a, b in zip(got, expected, strict=True):
                assert (a is None) == (b is None)
                if a is not None:
                    assert a.dtype == b.dtype and a.shape == b.shape
                    assert a.tobytes() == b.tobytes()
        sizes.extend(allocation.batch_sizes.tolist())
    assert 0 in sizes and max(sizes) > 6  # and steps larger than 1 or 6 rows

"""The random allocation (balls-and-bins) sampler draws what its accountant assumes.

``RandomAllocationGaussianEvent`` is valid for a sampler that, in every epoch,
puts each record into one of ``t`` steps uniformly and independently of the
other records and of the other epochs. Each property is checked with fixed
seeds by a statistical test, and each test is also run on a deliberately wrong
sampler that it must reject (``WRONG``), so that no test passes vacuously:
equal-size batches of a permutation (shuffling), one allocation reused every
epoch, rows drawn with replacement, batches left unsorted.
"""

import numpy as np
import pytest
from scipy import stats

from skdp._solvers._allocation import (
    EpochAllocation,
    allocate_epoch,
    allocation_steps,
)

# A statistic the real sampler must pass (fixed seeds: the outcome is
# deterministic; the level only says how surprising a failure would be) and
# one that a wrong sampler must fail by far.
PASS_P = 1e-3
FAIL_P = 1e-8


# --- wrong samplers ------------------------------------------------------------


def _from_labels(labels, n_steps):
    """An EpochAllocation from step labels (stable sort: increasing rows)."""
    bounds = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=n_steps))])
    return EpochAllocation(order=np.argsort(labels, kind="stable"), bounds=bounds)


def _shuffled(n_rows, n_steps, rng):
    """Shuffling: a permutation cut into near-equal batches (sizes not random)."""
    sizes = np.full(n_steps, n_rows // n_steps)
    sizes[: n_rows % n_steps] += 1
    labels = np.empty(n_rows, dtype=np.int64)
    labels[rng.permutation(n_rows)] = np.repeat(np.arange(n_steps), sizes)
    return _from_labels(labels, n_steps)


class _Frozen:
    """One allocation drawn once and reused every epoch (not fresh)."""

    def __init__(self):
        self.cache = {}

    def __call__(self, n_rows, n_steps, rng):
        key = (n_rows, n_steps)
        if key not in self.cache:
            self.cache[key] = allocate_epoch(n_rows, n_steps, rng)
        return self.cache[key]


def _with_replacement(n_rows, n_steps, rng):
    """Rows drawn with replacement into uniform steps (some twice, some never)."""
    rows = np.sort(rng.integers(0, n_rows, size=n_rows))
    labels = rng.integers(0, n_steps, size=n_rows)
    order = np.argsort(labels, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=n_steps))])
    return EpochAllocation(order=rows[order], bounds=bounds)


def _unsorted(n_rows, n_steps, rng):
    """The right batches, each in a random order (not memmap-friendly)."""
    labels = rng.integers(0, n_steps, size=n_rows)
    order = np.lexsort((rng.random(n_rows), labels))
    bounds = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=n_steps))])
    return EpochAllocation(order=order, bounds=bounds)


# --- helpers -------------------------------------------------------------------


def _labels(allocation):
    """Each row's step (the inverse of the allocation's layout)."""
    labels = np.empty(allocation.order.size, dtype=np.int64)
    labels[allocation.order] = np.repeat(
        np.arange(allocation.n_steps), allocation.batch_sizes
    )
    return labels


def _epochs(sampler, n_rows, n_steps, n_epochs, seed):
    rng = np.random.default_rng(seed)
    return [sampler(n_rows, n_steps, rng) for _ in range(n_epochs)]


def _chi2_two_sided(statistic, dof):
    """Two-sided p-value of a chi-square statistic (too good a fit fails too)."""
    upper = stats.chi2.sf(statistic, dof)
    return 2.0 * min(upper, 1.0 - upper)


# --- each property as a check returning a p-value or a verdict ---------------


def _once_per_epoch(sampler):
    """Every row exactly once an epoch: True or False."""
    for allocation in _epochs(sampler, 500, 7, 20, seed=1):
        if not np.array_equal(np.sort(allocation.order), np.arange(500)):
            return False
    return True


def _labels_uniform_p(sampler):
    """Pearson chi-square of each epoch's step counts, summed over epochs.

    Counts of one epoch are multinomial(n, 1/t): their Pearson statistic is
    chi-square(t - 1) in the limit; over independent epochs the sum is
    chi-square(E (t - 1)). Two-sided: equal batch sizes give a statistic of 0.
    """
    n_rows, n_steps, n_epochs = 2000, 10, 300
    expected = n_rows / n_steps
    statistic = 0.0
    for allocation in _epochs(sampler, n_rows, n_steps, n_epochs, seed=2):
        statistic += np.sum((allocation.batch_sizes - expected) ** 2 / expected)
    return _chi2_two_sided(statistic, n_epochs * (n_steps - 1))


def _size_moments_ok(sampler):
    """Batch sizes: mean n/t, variance n p (1 - p), covariance -n p^2.

    Over E epochs and t steps; the tolerance is 5 standard errors of each
    estimate (normal approximations, far from the boundary here).
    """
    n_rows, n_steps, n_epochs = 1000, 8, 4000
    p = 1.0 / n_steps
    sizes = np.array(
        [a.batch_sizes for a in _epochs(sampler, n_rows, n_steps, n_epochs, seed=3)]
    )
    variance = n_rows * p * (1.0 - p)
    covariance = -n_rows * p * p
    total_ok = np.all(sizes.sum(axis=1) == n_rows)
    per_step_mean = sizes.mean(axis=0)
    se_mean = np.sqrt(variance / n_epochs)
    mean_ok = np.all(np.abs(per_step_mean - n_rows * p) <= 5.0 * se_mean)
    var_hat = sizes.var(axis=0, ddof=1).mean()
    var_ok = abs(var_hat - variance) <= 5.0 * variance * np.sqrt(2.0 / (n_epochs - 1))
    cov_hat = np.cov(sizes[:, 0], sizes[:, 1])[0, 1]
    se_cov = np.sqrt((variance**2 + covariance**2) / n_epochs)
    cov_ok = abs(cov_hat - covariance) <= 5.0 * se_cov
    return bool(total_ok and mean_ok and var_ok and cov_ok)


def _pair_independent_p(sampler):
    """Steps of two fixed rows over many epochs: uniform on the t x t table.

    Independent uniform steps make every cell 1/t^2; chi-square with t^2 - 1
    degrees of freedom (goodness of fit, so both marginals and independence).
    """
    n_rows, n_steps, n_epochs = 12, 3, 20_000
    table = np.zeros((n_steps, n_steps))
    for allocation in _epochs(sampler, n_rows, n_steps, n_epochs, seed=4):
        labels = _labels(allocation)
        table[labels[0], labels[7]] += 1
    expected = n_epochs / n_steps**2
    statistic = np.sum((table - expected) ** 2 / expected)
    return stats.chi2.sf(statistic, n_steps**2 - 1)


def _fresh_across_epochs_p(sampler):
    """One row's step in consecutive epochs: uniform on the t x t table."""
    n_rows, n_steps, n_epochs = 30, 4, 8001
    steps = np.array(
        [_labels(a)[5] for a in _epochs(sampler, n_rows, n_steps, n_epochs, seed=5)]
    )
    table = np.zeros((n_steps, n_steps))
    # Disjoint pairs of consecutive epochs: independent observations.
    np.add.at(table, (steps[0:-1:2], steps[1::2]), 1)
    expected = table.sum() / n_steps**2
    statistic = np.sum((table - expected) ** 2 / expected)
    return stats.chi2.sf(statistic, n_steps**2 - 1)


def _increasing_within_steps(sampler):
    for allocation in _epochs(sampler, 3000, 11, 5, seed=6):
        for j in range(allocation.n_steps):
            if np.any(np.diff(allocation.batch(j)) <= 0):
                return False
    return True


CHECKS = {
    "once_per_epoch": lambda s: _once_per_epoch(s),
    "labels_uniform": lambda s: _labels_uniform_p(s) > PASS_P,
    "size_moments": lambda s: _size_moments_ok(s),
    "pair_independent": lambda s: _pair_independent_p(s) > PASS_P,
    "fresh_across_epochs": lambda s: _fresh_across_epochs_p(s) > PASS_P,
    "increasing_within_steps": lambda s: _increasing_within_steps(s),
}

# Each check and a wrong sampler it must reject.
WRONG = [
    ("once_per_epoch", _with_replacement),
    ("labels_uniform", _shuffled),
    ("size_moments", _shuffled),
    ("pair_independent", _shuffled),
    ("fresh_across_epochs", _Frozen()),
    ("increasing_within_steps", _unsorted),
]


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_the_sampler_has_the_claimed_distribution(check):
    assert CHECKS[check](allocate_epoch)


@pytest.mark.parametrize("check, wrong", WRONG, ids=[c for c, _ in WRONG])
def test_each_check_rejects_a_wrong_sampler(check, wrong):
    assert not CHECKS[check](wrong)


def test_the_statistics_reject_by_far():
    """The p-value checks do not sit near their threshold on the wrong samplers."""
    assert _labels_uniform_p(_shuffled) < FAIL_P
    assert _pair_independent_p(_shuffled) < FAIL_P
    assert _fresh_across_epochs_p(_Frozen()) < FAIL_P


# --- layout, determinism, inputs -------------------------------------------------


@pytest.mark.parametrize("n_rows, n_steps", [(0, 3), (1, 1), (5, 9), (1000, 118)])
def test_layout_is_a_permutation_with_cumulative_bounds(n_rows, n_steps):
    allocation = allocate_epoch(n_rows, n_steps, np.random.default_rng(0))
    assert allocation.n_steps == n_steps
    assert allocation.bounds[0] == 0 and allocation.bounds[-1] == n_rows
    assert np.all(allocation.batch_sizes >= 0)
    assert np.array_equal(np.sort(allocation.order), np.arange(n_rows))
    batches = [allocation.batch(j) for j in range(n_steps)]
    joined = np.concatenate(batches) if batches else np.array([])
    assert np.array_equal(joined, allocation.order)
    with pytest.raises(IndexError, match="step"):
        allocation.batch(n_steps)


def test_more_than_65536_steps_use_the_two_digit_sort():
    n_rows, n_steps = 300_000, 70_000
    allocation = allocate_epoch(n_rows, n_steps, np.random.default_rng(7))
    labels = _labels(allocation)
    assert labels.max() >= 1 << 16  # the high digit is used
    assert np.array_equal(np.sort(allocation.order), np.arange(n_rows))
    assert np.all(np.diff(labels[allocation.order]) >= 0)
    same = np.diff(labels[allocation.order]) == 0
    assert np.all(np.diff(allocation.order)[same] > 0)


def test_same_seed_same_allocation_and_both_random_state_types():
    a = allocate_epoch(100, 6, np.random.default_rng(3))
    b = allocate_epoch(100, 6, np.random.default_rng(3))
    assert np.array_equal(a.order, b.order) and np.array_equal(a.bounds, b.bounds)
    rs = allocate_epoch(100, 6, np.random.RandomState(3))
    assert np.array_equal(np.sort(rs.order), np.arange(100))
    rng = np.random.default_rng(3)
    first, second = allocate_epoch(100, 6, rng), allocate_epoch(100, 6, rng)
    assert not np.array_equal(first.order, second.order)


def test_allocation_is_read_only():
    allocation = allocate_epoch(10, 2, np.random.default_rng(0))
    with pytest.raises(ValueError):
        allocation.order[0] = 1
    with pytest.raises(AttributeError):
        allocation.order = np.arange(10)


@pytest.mark.parametrize(
    "args, match",
    [
        ((-1, 3), "n_rows"),
        ((2.5, 3), "n_rows"),
        ((10, 0), "n_steps"),
        ((10, True), "n_steps"),
        ((10, 2**32 + 1), "n_steps"),
    ],
)
def test_bad_inputs_are_refused(args, match):
    with pytest.raises(ValueError, match=match):
        allocate_epoch(*args, np.random.default_rng(0))


def test_rng_must_be_a_numpy_random_state():
    with pytest.raises(TypeError, match="rng"):
        allocate_epoch(10, 2, 0)


def test_bounds_must_cover_the_order():
    with pytest.raises(ValueError, match="bounds"):
        EpochAllocation(order=np.arange(5), bounds=np.array([0, 3]))


def test_allocation_steps_matches_the_number_of_batches():
    assert allocation_steps(30_000, 256) == 118
    assert allocation_steps(256, 256) == 1
    assert allocation_steps(10, 256) == 1
    with pytest.raises(ValueError, match="batch_size"):
        allocation_steps(10, 0)

"""The Poisson batch sampler draws what the subsampled-Gaussian accountant assumes."""

import itertools

import numpy as np
import pytest
from scipy import stats

from skdp._solvers._sgd import poisson_batch


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

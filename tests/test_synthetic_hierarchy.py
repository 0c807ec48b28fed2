"""Numeric 1-way marginals measured on a hierarchy of nested bins (replace-one)."""

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest
from test_synthetic_small import _assert_ran_within, _zcdp

from skdp._solvers._aim import AIMPolicy, _measure_one_way, plan_one_way
from skdp._solvers._compression import Compression, compressed_measurement
from skdp._solvers._measure import (
    CodesCounts,
    bin_hierarchy,
    consistent_estimate,
    count_sensitivity,
    measure_hierarchy,
    nonnegative_estimate,
)
from skdp._solvers._pgm import Measurement
from skdp._solvers._tree import project_to_simplex
from skdp.accounting import (
    GaussianEvent,
)
from skdp.schema import Categorical, Numeric
from skdp.synthetic import DPSyntheticData

REPLACE_ONE = count_sensitivity("replace-one")
#: Few mirror-descent iterations: these tests check the measurements, not the fit.
TREE = AIMPolicy(round_iter=10, final_iter=20, tree_coarsest=2, tree_max_signal=None)


def _design(hierarchy):
    """The stacked 0/1 matrix of every level's cells over the finest ones."""
    return np.vstack([np.eye(int(m.max()) + 1)[m].T for m in hierarchy.levels]).astype(
        float
    )


def test_levels_nest_and_end_on_the_columns_levels():
    """Every level's cells are unions of the next finer level's; a missing
    level (after the ordered ones) is a cell of its own at every level."""
    positions = (np.arange(12) + 0.5) / 12
    h = bin_hierarchy(positions, 13, 2, 2, 1.0)
    assert [int(m.max()) + 1 for m in h.levels] == [3, 5, 9, 13]
    np.testing.assert_array_equal(h.levels[-1], np.arange(13))
    for coarse, fine in itertools.pairwise(h.levels):
        for cell in range(int(fine.max()) + 1):
            assert np.unique(coarse[fine == cell]).size == 1
        assert coarse[12] == coarse.max()  # the missing level alone
        assert np.sum(coarse == coarse[12]) == 1
    assert sum(h.shares) == pytest.approx(1.0)
    assert bin_hierarchy(positions, 12, 16, 2, 1.0) is None


def test_the_hierarchy_is_planned_below_the_signal_threshold_only():
    """A public rule: below ``tree_max_signal`` the numeric columns get a
    hierarchy, above it they are measured once on every bin."""
    sizes = (33, 2)
    positions = [(np.arange(32) + 0.5) / 32, None]
    policy = AIMPolicy()
    low = plan_one_way(2000, 0.05, sizes, positions, REPLACE_ONE.l2, policy)
    high = plan_one_way(2000, 50.0, sizes, positions, REPLACE_ONE.l2, policy)
    assert low.signal < policy.tree_max_signal <= high.signal
    assert low.hierarchies[0] is not None and low.hierarchies[1] is None
    assert [int(m.max()) + 1 for m in low.hierarchies[0].levels] == [9, 17, 33]
    assert high.hierarchies == ()


def test_a_record_moves_each_level_by_one_cell_and_costs_the_columns_budget():
    """Replace-one sensitivity by enumeration: changing one record moves each
    level's counts by at most 2 in L1 and sqrt(2) in L2 (one cell down, one
    up), and the stacked levels, each divided by its noise std, move by at
    most what the levels' Gaussian events are charged for together."""
    sizes = (9, 2)  # eight ordered bins and a missing level; a binary column
    positions = [(np.arange(8) + 0.5) / 8, None]
    policy = dataclasses.replace(TREE, min_signal=0.0, tree_share_ratio=0.5)
    plan = plan_one_way(20, 1.0, sizes, positions, REPLACE_ONE.l2, policy)
    h = plan.hierarchies[0]
    assert h is not None and len(h.levels) == 3 and plan.hierarchies[1] is None
    z = 1.3
    stds = [z / np.sqrt(w) for w in h.shares]  # std per unit of sensitivity
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(s, size=4) for s in sizes])

    def levels(data):
        return h.tables(np.bincount(data[:, 0], minlength=sizes[0]).astype(float))

    base = levels(codes)
    worst_l1 = worst_l2 = worst_whitened = 0.0
    for row in range(codes.shape[0]):
        for record in itertools.product(*(range(s) for s in sizes)):
            other = codes.copy()
            other[row] = record
            moved = [a - b for a, b in zip(levels(other), base, strict=True)]
            for diff in moved:
                assert np.count_nonzero(diff) in (0, 2)
                worst_l1 = max(worst_l1, np.abs(diff).sum())
                worst_l2 = max(worst_l2, np.linalg.norm(diff))
            whitened = np.concatenate(
                [d / (s * REPLACE_ONE.l2) for d, s in zip(moved, stds, strict=True)]
            )
            worst_whitened = max(worst_whitened, float(whitened @ whitened))
    assert worst_l1 == REPLACE_ONE.l1
    assert worst_l2 == pytest.approx(REPLACE_ONE.l2)
    # zCDP of one Gaussian on the stacked levels: (sensitivity / std)^2 / 2,
    # which is the sum the levels' events are charged, the column's budget.
    charged = sum(w / (2 * z**2) for w in h.shares)
    assert worst_whitened / 2 == pytest.approx(charged)
    assert charged == pytest.approx(1 / (2 * z**2))


@pytest.mark.parametrize("total", [None, 60.0])
def test_the_consistent_estimate_is_the_least_squares_solve(total):
    """The two passes give the generalised least-squares estimate (with the sum
    constrained to a known total) and its covariance, solved directly."""
    positions = (np.arange(12) + 0.5) / 12
    h = bin_hierarchy(positions, 13, 2, 2, 0.7)
    stds = [1.0, 2.5, 0.7, 1.9]
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 9, 13).astype(float)
    noisy = measure_hierarchy(counts, h, stds, rng)
    estimate, covariance = consistent_estimate(h, noisy, stds, total)

    a = _design(h)
    w = np.concatenate(
        [
            np.full(int(m.max()) + 1, 1 / s**2)
            for m, s in zip(h.levels, stds, strict=True)
        ]
    )
    y = np.concatenate(noisy)
    gram = a.T @ (w[:, None] * a)
    if total is None:
        direct = np.linalg.lstsq(a * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
        direct_cov = np.linalg.inv(gram)
    else:
        ones = np.ones((13, 1))
        kkt = np.block([[gram, ones], [ones.T, np.zeros((1, 1))]])
        direct = np.linalg.solve(kkt, np.r_[a.T @ (w * y), total])[:13]
        inverse = np.linalg.inv(gram)
        u = inverse @ ones
        direct_cov = inverse - u @ u.T / (ones.T @ u).item()
        assert estimate.sum() == pytest.approx(total)
    np.testing.assert_allclose(estimate, direct, atol=1e-9)
    np.testing.assert_allclose(covariance, direct_cov, atol=1e-12)


def test_the_non_negative_estimate_stays_consistent_and_keeps_the_total():
    """Top-down projections: no negative cell, the total kept, and each cell the
    sum of its children; a coarse cell estimated empty passes no mass down."""
    positions = (np.arange(16) + 0.5) / 16
    h = bin_hierarchy(positions, 16, 4, 2, 1.0)
    counts = np.zeros(16)
    counts[3:7] = [5.0, 20.0, 9.0, 1.0]
    stds = [2.0, 2.0, 2.0]
    noisy = measure_hierarchy(counts, h, stds, np.random.default_rng(7))
    estimate, _ = consistent_estimate(h, noisy, stds, counts.sum())
    assert estimate.min() < 0  # the noise of empty cells
    out = nonnegative_estimate(h, estimate, counts.sum())
    assert out.min() >= 0 and out.sum() == pytest.approx(counts.sum())
    tables = h.tables(out)
    # The coarsest level: the Euclidean projection of its consistent sums.
    np.testing.assert_allclose(
        tables[0], project_to_simplex(h.tables(estimate)[0], counts.sum())
    )
    for level in range(len(h.levels) - 1):
        np.testing.assert_allclose(
            np.bincount(h.parents(level), weights=tables[level + 1]), tables[level]
        )
        empty = np.flatnonzero(tables[level] == 0)
        assert np.all(tables[level + 1][np.isin(h.parents(level), empty)] == 0)


def test_a_run_of_bins_carries_the_variance_of_its_sum():
    """Moved to coarser levels, a correlated estimate's cell has the variance of
    the sum of its cells' noises, not the sum of their variances."""
    cov = np.array([[2.0, -1.0, 0.0], [-1.0, 2.0, 0.0], [0.0, 0.0, 1.0]])
    m = Measurement(
        (0,), np.array([3.0, 4.0, 5.0]), np.sqrt(np.diag(cov)), covariance=cov
    )
    comp = Compression(np.array([0, 0, 1]), np.array([0.5, 0.5, 1.0]))
    moved = compressed_measurement(0, m, comp)
    np.testing.assert_allclose(moved.y, [7.0, 5.0])
    np.testing.assert_allclose(moved.std, [np.sqrt(2.0), 1.0])


def test_the_measured_one_way_marginal_is_the_consistent_estimate():
    """Without noise, the hierarchical column's measurement is its counts."""
    sizes = (9, 2)
    positions = [(np.arange(8) + 0.5) / 8, None]
    policy = dataclasses.replace(TREE, min_signal=0.0)
    plan = plan_one_way(30, 1.0, sizes, positions, REPLACE_ONE.l2, policy)
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(s, size=30) for s in sizes])
    counts = CodesCounts(codes, sizes)
    out = _measure_one_way(
        counts, 1e-9, rng, plan.compressions(sizes), plan.hierarchies
    )
    np.testing.assert_allclose(out[0].y, np.bincount(codes[:, 0], minlength=9))
    assert out[0].covariance is not None and out[1].covariance is None


def _table(n, seed=0):
    rng = np.random.default_rng(seed)
    age = np.clip(np.round(rng.normal(40, 11, n)), 18, 90).astype(int)
    income = np.clip(rng.gamma(2.0, 8.0, n), 0, 200)
    region = rng.choice(["north", "south", "east"], size=n)
    frame = pd.DataFrame({"age": age, "income": income, "region": region})
    domain = {
        "age": Numeric(18, 90),
        "income": Numeric(0.0, 200.0, nullable=True),
        "region": Categorical(["north", "south", "east"]),
    }
    frame.loc[::17, "income"] = np.nan
    return frame, domain


@pytest.mark.parametrize(("n", "epsilon"), [(300, 0.5), (6000, 4.0)])
def test_the_accounting_composes_every_level(n, epsilon):
    """Each level is its own Gaussian event; the events that ran compose to the
    planned budget and the reported spend meets the target."""
    frame, domain = _table(n)
    model = DPSyntheticData(epsilon=epsilon, domain=domain, random_state=0)
    # Equal 1-way shares: every column's levels in one event per level.
    model._aim_policy = dataclasses.replace(
        TREE, tree_coarsest=8, one_way_levels_power=None
    )
    model.fit(frame)
    rho = 1.0 / (2.0 * model.noise_multiplier_**2)
    one_way = [e for e in model.events_ if isinstance(e, GaussianEvent)]
    levels = sum(e.count for e in one_way[:2])
    assert levels == 2 * 3 + 1  # two numeric columns on 8, 16, 32 bins; region
    assert _zcdp(model.events_) == pytest.approx(rho, rel=1e-9)
    assert _zcdp(model.events_) <= rho * (1 + 1e-12)
    spent = model.privacy_spent_
    assert spent.epsilon <= epsilon
    _assert_ran_within(model, spent)


def test_a_seed_gives_the_same_table_in_the_declared_range_and_types():
    """Determinism under a seed; samples in the declared range, integer columns
    as integers, missing values only where declared."""
    frame, domain = _table(400, seed=2)
    samples = []
    for _ in range(2):
        model = DPSyntheticData(epsilon=1.0, domain=domain, random_state=5)
        model._aim_policy = dataclasses.replace(TREE, tree_coarsest=8)
        samples.append(model.fit(frame).sample())
    pd.testing.assert_frame_equal(samples[0], samples[1])
    out = samples[0]
    assert out["age"].dtype == frame["age"].dtype
    assert out["age"].between(18, 90).all()
    income = out["income"].dropna()
    assert income.between(0.0, 200.0).all()
    assert set(out["region"]) <= {"north", "south", "east"}

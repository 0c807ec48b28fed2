"""DPSyntheticData under add/remove: the split rule on a noisy count, its privacy."""

import dataclasses
import itertools
import math

import numpy as np
import pytest
from test_synthetic_small import _assert_ran_within, _panel_like, _specs, _zcdp

from skdp._solvers._aim import AIMPolicy, estimate_total, fit_aim, plan_one_way
from skdp._solvers._measure import CodesCounts, count_sensitivity
from skdp._solvers._pgm import Measurement
from skdp.accounting import GaussianEvent
from skdp.synthetic import DPSyntheticData
from skdp.synthetic._domain import encode_table
from skdp.synthetic._methods import bin_positions

ADD_REMOVE = count_sensitivity("add-remove")
#: Few mirror-descent iterations: these tests check the split, not the fit.
FAST = AIMPolicy(round_iter=10, final_iter=20)


def _codes(n, seed=0):
    frame, domain = _panel_like(n, seed)
    columns, specs = _specs(frame, domain)
    codes = encode_table(columns, specs)
    return codes, specs


def _fit(codes, specs, rho, policy=FAST, seed=0):
    return fit_aim(
        codes,
        [s.n_levels for s in specs],
        rho,
        np.random.default_rng(seed),
        neighbouring="add-remove",
        ordered=[s.n_values if s.edges is not None else 0 for s in specs],
        positions=[bin_positions(s) for s in specs],
        runs_numeric=True,
        policy=policy,
    )


def _count_multiplier(rho, policy=FAST):
    return math.sqrt(1.0 / (2.0 * policy.count_share * rho))


def test_a_tiny_signal_spends_everything_on_a_count_and_the_one_way_marginals():
    """Signal below ``add_remove_min_signal``: a noisy count, then the 1-way
    marginals (numeric columns on their bin hierarchy) take the rest; no
    round runs."""
    codes, specs = _codes(100)
    rho = 0.02
    result = _fit(codes, specs, rho)
    assert result.selected == []
    assert result.events[0] == GaussianEvent(_count_multiplier(rho))
    assert all(isinstance(e, GaussianEvent) for e in result.events)
    # Three numeric columns measured on several levels each.
    assert sum(e.count for e in result.events[1:]) > codes.shape[1]
    assert _zcdp(result.events) == pytest.approx(rho, rel=1e-9)
    assert result.rho_used == pytest.approx(rho, rel=1e-9)
    assert result.rho_used <= rho * (1 + 1e-12)


def _fit_after_count(n_rows, rho, policy=FAST):
    """A fit that ran rounds after its count; (result, columns, rho left)."""
    codes, specs = _codes(n_rows)
    result = _fit(codes, specs, rho, policy)
    assert any(len(s) == 2 for s in result.selected)
    assert result.events[0] == GaussianEvent(_count_multiplier(rho))
    return result, codes.shape[1], (1.0 - FAST.count_share) * rho


def test_a_small_table_measures_one_way_hierarchies_with_half_the_budget():
    """Signal in the band: the 1-way marginals take ``one_way_share`` of what
    the count leaves, numeric columns on their hierarchy; the rounds the
    rest. (Without the rule: every level once, at the first rounds' noise.)
    Equal shares per column here (``add_remove_one_way_power=None``)."""
    rho = 0.05
    equal = dataclasses.replace(FAST, add_remove_one_way_power=None)
    result, d, left = _fit_after_count(400, rho, equal)
    one_way = [e for e in result.events[1:] if isinstance(e, GaussianEvent)]
    one_way = one_way[: len(one_way) - len(result.selected)]
    # Two categorical columns on their levels at the 1-way noise, three
    # numeric ones on several levels each, at larger noise per level.
    z = math.sqrt(d / (2.0 * FAST.one_way_share * left))
    assert GaussianEvent(z, count=2) in one_way
    assert sum(e.count for e in one_way) > d
    assert _zcdp(one_way) == pytest.approx(FAST.one_way_share * left, rel=1e-9)
    assert _zcdp(result.events) == pytest.approx(rho, rel=1e-9)
    assert result.rho_used <= rho * (1 + 1e-12)


def test_the_hierarchy_follows_the_add_remove_threshold_not_replace_ones():
    """Under add/remove ``add_remove_tree_max_signal`` decides whether the
    numeric columns are measured on their hierarchy; ``tree_max_signal``
    (replace-one's) plays no part."""

    def one_way_events(policy):
        result, d, _ = _fit_after_count(400, 0.05, policy)
        one_way = [e for e in result.events[1:] if isinstance(e, GaussianEvent)]
        return sum(e.count for e in one_way[: len(one_way) - len(result.selected)]), d

    on = dataclasses.replace(FAST, tree_max_signal=0.0, add_remove_tree_max_signal=None)
    off = dataclasses.replace(
        FAST, tree_max_signal=None, add_remove_tree_max_signal=0.0
    )
    measured_on, d = one_way_events(on)
    measured_off, _ = one_way_events(off)
    assert measured_on > d  # three numeric columns on several levels each
    assert measured_off == d  # every column measured once


def test_a_large_signal_keeps_the_first_rounds_noise_after_the_count():
    """Signal at or above ``add_remove_max_signal``: after the count, the
    1-way marginals take the first rounds' noise on every level."""
    rho = 2.0
    result, d, left = _fit_after_count(8000, rho)
    rounds = FAST.rounds_per_column * d
    first = math.sqrt(rounds / (2.0 * FAST.measure_share * left))
    assert result.events[1] == GaussianEvent(first, count=d)
    assert _zcdp(result.events) == pytest.approx(rho, rel=1e-9)
    assert result.rho_used <= rho * (1 + 1e-12)


def test_without_the_count_the_rounds_take_their_first_noise():
    """``count_share=None``: no rule under add/remove (the former path)."""
    codes, specs = _codes(400)
    rho = 0.05
    policy = AIMPolicy(round_iter=10, final_iter=20, count_share=None)
    result = _fit(codes, specs, rho, policy)
    rounds = policy.rounds_per_column * len(specs)
    first = math.sqrt(rounds / (2 * policy.measure_share * rho))
    assert result.events[0] == GaussianEvent(first, count=len(specs))
    assert result.selected


def test_the_number_of_rows_is_read_once_by_the_noisy_count():
    """Under add/remove the number of rows is private: the solver reads it
    once, for the Gaussian count; everything else reads that count or the
    noisy marginals."""
    codes, specs = _codes(400)
    sizes = tuple(s.n_levels for s in specs)
    reads = []

    class Watched(CodesCounts):
        @property
        def n_rows(self):
            reads.append(1)
            return self.codes.shape[0]

    result = _fit(Watched(codes, sizes), specs, 0.05)
    assert len(reads) == 1
    assert result.events[0] == GaussianEvent(_count_multiplier(0.05))


def test_the_total_weighs_the_count_by_its_variance():
    count = Measurement((), np.array([110.0]), 2.0)
    one_way = [Measurement((0,), np.array([40.0, 50.0]), 2.0)]
    # Variances 4 (the count) and 8 (two cells): weights 2/3 and 1/3.
    assert estimate_total(one_way, count) == pytest.approx(110 * 2 / 3 + 90 / 3)
    assert estimate_total(one_way) == pytest.approx(90.0)


@pytest.mark.parametrize(("n", "epsilon"), [(300, 1.0), (3000, 1.0)])
def test_the_estimator_reports_at_most_its_target(n, epsilon):
    """The count is one of the events that ran; the reported spend is the
    certified curve, at most the target, and covers every event."""
    frame, domain = _panel_like(n, seed=2)
    model = DPSyntheticData(
        epsilon=epsilon,
        delta=1e-5,
        domain=domain,
        neighbouring="add-remove",
        random_state=3,
    )
    model._aim_policy = FAST
    model.fit(frame)
    rho = 1.0 / (2.0 * model.noise_multiplier_**2)
    assert model.events_[0] == GaussianEvent(_count_multiplier(rho))
    assert _zcdp(model.events_) <= rho * (1 + 1e-12)
    spent = model.privacy_spent_
    assert spent.neighbouring == "add-remove"
    assert 0.97 * epsilon <= spent.epsilon <= epsilon
    _assert_ran_within(model, spent)
    assert model.sample(20).shape == (20, frame.shape[1])


def test_adding_or_removing_a_record_moves_each_hierarchy_level_by_one_cell():
    """Add/remove sensitivity by enumeration: adding or removing one record
    moves each level of a column's bin hierarchy by one in one cell (L1 and
    L2 sensitivity 1), so the levels' events, charged at sensitivity 1, cost
    together the column's budget."""
    sizes = (9, 2)  # eight ordered bins and a missing level; a binary column
    positions = [(np.arange(8) + 0.5) / 8, None]
    policy = AIMPolicy(add_remove_min_signal=0.0, tree_coarsest=2)
    plan = plan_one_way(20, 1.0, sizes, positions, ADD_REMOVE.l2, policy, (0.0, None))
    h = plan.hierarchies[0]
    assert h is not None and len(h.levels) == 3 and plan.hierarchies[1] is None
    z = 1.3
    stds = [z / np.sqrt(w) for w in h.shares]
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(s, size=4) for s in sizes])

    def levels(data):
        return h.tables(np.bincount(data[:, 0], minlength=sizes[0]).astype(float))

    base = levels(codes)
    neighbours = [np.delete(codes, i, axis=0) for i in range(codes.shape[0])]
    neighbours += [
        np.vstack([codes, record])
        for record in itertools.product(*(range(s) for s in sizes))
    ]
    worst_whitened = 0.0
    for other in neighbours:
        moved = [a - b for a, b in zip(levels(other), base, strict=True)]
        for diff in moved:
            assert np.count_nonzero(diff) == 1
            assert np.abs(diff).sum() == ADD_REMOVE.l1 == 1.0
        whitened = np.concatenate([d / s for d, s in zip(moved, stds, strict=True)])
        worst_whitened = max(worst_whitened, float(whitened @ whitened))
    assert worst_whitened / 2 == pytest.approx(1 / (2 * z**2))


def test_coarsened_candidates_take_the_add_remove_runs_where_the_rule_split():
    codes, specs = _codes(400)
    sizes = [s.n_levels for s in specs]
    policy = AIMPolicy(round_iter=10, final_iter=20, add_remove_coarse_levels=3)
    result = _fit(codes, specs, 0.05, policy)  # the band: the rule's split
    coarse = [m for m in result.measurements if m.groups is not None]
    widths = [
        int(g.max()) + 1
        for m in coarse
        for g, v in zip(m.groups, m.clique, strict=True)
        if g is not None and specs[v].edges is not None
    ]
    assert widths and max(widths) <= 3 + 1  # runs, and a missing level at most
    assert all(w < sizes[0] for w in widths)


def _grid_bins(spec, compression, n_bins):
    """The equal-width bin of the declared range holding each ordered level's
    centre (the mean centre of the public bins it merges)."""
    positions = bin_positions(spec)
    merged = compression.mapping[: positions.size]
    centres = np.array(
        [positions[merged == k].mean() for k in range(compression.n_ordered)]
    )
    return np.minimum((centres * n_bins).astype(int), n_bins - 1)


@pytest.mark.parametrize("seed", range(4))
def test_in_the_band_no_round_re_measures_a_one_way_marginal(seed):
    """In the band the 1-way marginals took half the budget: the rounds
    select column sets of two or more columns only."""
    codes, specs = _codes(400)
    result = _fit(codes, specs, 0.05, seed=seed)
    assert result.selected and all(len(s) >= 2 for s in result.selected)


@pytest.mark.parametrize("seed", range(4))
def test_in_the_band_coarsened_columns_read_the_public_grid(seed):
    """A coarsened numeric column groups its levels by the equal-width bins
    of its declared range (``add_remove_coarse_levels`` of them): a group
    never spans two. A record is still in one cell: every model level is in
    exactly one group."""
    codes, specs = _codes(400)
    result = _fit(codes, specs, 0.05, seed=seed)
    target = FAST.add_remove_coarse_levels
    checked = 0
    for m in result.measurements:
        if m.groups is None:
            continue
        for groups, v in zip(m.groups, m.clique, strict=True):
            if groups is None or specs[v].edges is None:
                continue
            compression = result.model.compression[v]
            assert groups.size == compression.n_levels
            bins = _grid_bins(specs[v], compression, target)
            head = groups[: compression.n_ordered]
            assert np.array_equal(np.unique(head), np.arange(head.max() + 1))
            for g in np.unique(head):
                assert np.unique(bins[head == g]).size == 1
            checked += 1
    assert checked


def test_the_former_rounds_stay_a_policy_option():
    """``add_remove_multi_column_rounds=False`` and ``add_remove_coarse_grid=False``:
    1-way candidates and runs of about equal mass, as before."""
    codes, specs = _codes(400)
    policy = AIMPolicy(
        round_iter=10,
        final_iter=20,
        add_remove_multi_column_rounds=False,
        add_remove_coarse_grid=False,
    )
    selected = [_fit(codes, specs, 0.05, policy, seed).selected for seed in range(4)]
    assert any(len(s) == 1 for run in selected for s in run)


def test_in_the_band_each_column_s_one_way_budget_follows_its_levels():
    """In the band, column ``j`` gets a share of the 1-way budget proportional
    to its measured levels to ``add_remove_one_way_power``: its events and its
    measurement's noise say so, and the shares still sum to the 1-way budget."""
    codes, specs = _codes(400)
    rho = 0.05
    result = _fit(codes, specs, rho)
    assert result.selected  # the band: rounds ran after the 1-way marginals
    d = len(specs)
    left = (1.0 - FAST.count_share) * rho
    power = FAST.add_remove_one_way_power
    levels = np.array([s.n_levels for s in specs], dtype=float)
    weights = d * levels**power / np.sum(levels**power)
    z = math.sqrt(d / (2.0 * FAST.one_way_share * left))
    one_way = [e for e in result.events[1:] if isinstance(e, GaussianEvent)]
    one_way = one_way[: len(one_way) - len(result.selected)]
    assert _zcdp(one_way) == pytest.approx(FAST.one_way_share * left, rel=1e-9)
    categorical = [j for j, s in enumerate(specs) if s.edges is None]
    assert len({s.n_levels for s in (specs[j] for j in categorical)}) == 2
    for j in categorical:  # measured once, on their own levels
        zj = z / math.sqrt(weights[j])
        assert GaussianEvent(zj) in one_way or any(
            e.noise_multiplier == pytest.approx(zj) for e in one_way
        )
        assert result.measurements[j].std == pytest.approx(ADD_REMOVE.l2 * zj)
    assert _zcdp(result.events) == pytest.approx(rho, rel=1e-9)
    assert result.rho_used <= rho * (1 + 1e-12)


def test_the_column_weights_are_proportional_to_levels_and_sum_to_the_columns():
    sizes = (3, 12, 2)
    plan = plan_one_way(
        20, 1.0, sizes, None, ADD_REMOVE.l2, FAST, (0.0, None), levels_power=0.5
    )
    weights = np.array(plan.weights)
    assert weights.sum() == pytest.approx(3.0)
    assert weights[1] / weights[0] == pytest.approx(2.0)
    assert weights[0] / weights[2] == pytest.approx(math.sqrt(1.5))
    shares = plan.level_shares(3)
    assert [s[0] for s in shares] == pytest.approx(list(weights))
    # Without a power (replace-one, or the option off): equal shares.
    equal = plan_one_way(20, 1.0, sizes, None, ADD_REMOVE.l2, FAST, (0.0, None))
    assert equal.weights == () and equal.level_shares(3) == [(1.0,)] * 3


def test_replace_one_keeps_equal_one_way_shares():
    """Under replace-one, where the 1-way marginals take the whole budget (a
    small one), the categorical columns' 1-way measurements share one noise
    multiplier, whatever ``one_way_levels_power``."""
    codes, specs = _codes(400)
    result = fit_aim(
        codes,
        [s.n_levels for s in specs],
        0.05,
        np.random.default_rng(0),
        ordered=[s.n_values if s.edges is not None else 0 for s in specs],
        positions=[bin_positions(s) for s in specs],
        runs_numeric=True,
        policy=FAST,
    )
    categorical = [j for j, s in enumerate(specs) if s.edges is None]
    stds = {float(result.measurements[j].std) for j in categorical}
    assert len(stds) == 1


def test_replace_one_one_way_shares_follow_one_way_levels_power():
    """Where the rounds run, replace-one splits its 1-way budget like
    add/remove: a categorical column's noise std is proportional to its
    levels to ``-power / 2``, and the run still spends exactly ``rho``."""
    codes, specs = _codes(400)
    rho, power = 1.0, 0.5
    policy = dataclasses.replace(FAST, one_way_levels_power=power)
    result = fit_aim(
        codes,
        [s.n_levels for s in specs],
        rho,
        np.random.default_rng(0),
        ordered=[s.n_values if s.edges is not None else 0 for s in specs],
        positions=[bin_positions(s) for s in specs],
        runs_numeric=True,
        policy=policy,
    )
    i, j = (k for k, s in enumerate(specs) if s.edges is None)
    assert specs[i].n_levels != specs[j].n_levels
    ratio = result.measurements[i].std / result.measurements[j].std
    levels = specs[j].n_levels / specs[i].n_levels
    assert ratio == pytest.approx(levels ** (power / 2.0))
    assert _zcdp(result.events) == pytest.approx(rho, rel=1e-9)
    assert result.rho_used <= rho * (1 + 1e-12)

"""The lattice PLD machinery shared by the numerical accountants
(``skdp/accounting/_lattice.py``); its soundness end to end is in test_pld.py,
test_pld_scale.py and test_allocation_accounting.py."""

import math

import numpy as np
import pytest

from skdp.accounting._lattice import (
    Lattice,
    Levels,
    level_budgets,
    level_copies,
    merged,
    plan_twice,
)


def test_lattice_conversion_is_exact_on_a_two_point_law():
    # Loss 0 or 1 with probability 1/2: delta(eps) = (1 - e^(eps - 1)) / 2.
    lattice = Lattice(0, np.array([0.5, 0.0, 0.0, 0.0, 0.5]))
    for delta in (0.3, 0.1, 0.01):
        eps = lattice.epsilon(0.25, delta)
        assert eps == pytest.approx(1.0 + math.log(1.0 - 2.0 * delta))


@pytest.mark.parametrize("count", [1, 2, 7, 64, 1000, 117_210])
def test_level_budgets_split_each_total_over_levels_then_copies(count):
    """Each total is split equally over the squaring levels and the final
    combinations (the floating-point one over one more part), and a level's
    share over its copies in the result. (These are planning targets: mass
    sent to +inf and FFT error are counted in full whatever they come to,
    and lower tails moved up cost tightness only.)"""
    copies = level_copies(count)
    assert copies.size == count.bit_length()
    assert copies[0] == count and copies[-1] == 1
    assert np.all(copies == [count >> i for i in range(copies.size)])
    tail, low, floating = 1e-7, 1e-5, 1e-9
    taus, lows, allowances = level_budgets(count, tail, low, floating)
    levels = copies.size
    for budget, total, parts in (
        (taus, tail, levels + 1),
        (lows, low, levels + 1),
        (allowances, floating, levels + 2),
    ):
        assert len(budget) == levels + 1
        shares = np.asarray(budget[:-1]) * copies
        np.testing.assert_allclose(shares[1:], total / parts, rtol=1e-15)
        assert budget[-1] == total / parts
    assert taus[0] * copies[0] == pytest.approx(tail / (levels + 1), rel=1e-15)
    assert lows[0] == low / count
    step_taus, step_lows, _ = level_budgets(
        count, tail, low, floating, first_tail=1e-20, first_low=1e-21
    )
    assert step_taus[0] == 1e-20 and step_lows[0] == 1e-21
    assert step_taus[1:] == taus[1:] and step_lows[1:] == lows[1:]


def test_scaled_levels_scale_only_tails_and_allowances():
    levels = Levels([1, 2], [1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0])
    scaled = levels.scaled(1e-6, 1e-3)
    assert scaled.spacings == levels.spacings and scaled.lows == levels.lows
    assert scaled.taus == [t * 1e-6 for t in levels.taus]
    assert scaled.allowances == [a * 1e-3 for a in levels.allowances]


def test_merged_groups_do_not_depend_on_their_order():
    groups = [(0.1, 2.0, 5), (0.05, 1.0, 3), (0.1, 2.0, 7)]
    assert merged(groups) == [(0.05, 1.0, 3), (0.1, 2.0, 12)]
    assert merged(groups[::-1]) == merged(groups)


def test_plan_twice_replans_far_below_and_keeps_the_smaller():
    asked = []

    def epsilon_at(planned):
        asked.append(planned)
        return 0.1 if planned > 0.5 else 0.09

    assert plan_twice(epsilon_at, 1.0, 1e-3, 0.5) == (0.09, "pld")
    assert asked == [1.0, 0.1]
    assert plan_twice(lambda planned: math.inf, 1.0, 1e-3, 0.5) is None

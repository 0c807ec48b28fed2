"""The budget split of DPSyntheticData on small tables (replace-one) and its privacy."""

import itertools

import numpy as np
import pandas as pd
import pytest

from skdp._solvers._aim import (
    AIMPolicy,
    _measure_one_way,
    _measured_bins,
    plan_one_way,
)
from skdp._solvers._measure import CodesCounts, count_sensitivity
from skdp.accounting import (
    ExponentialMechanismEvent,
    GaussianEvent,
    RDPAccountant,
    account,
)
from skdp.schema import Categorical, Numeric
from skdp.synthetic import DPSyntheticData
from skdp.synthetic._domain import as_table, build_specs, encode_table
from skdp.synthetic._methods import bin_positions

REPLACE_ONE = count_sensitivity("replace-one")
#: Few mirror-descent iterations: these tests check the split, not the fit.
FAST = AIMPolicy(round_iter=10, final_iter=20)


def _panel_like(n, seed=0):
    """A small mixed table like the panel's: two integer, one continuous numeric
    column, a categorical one and a label that depends on them."""
    rng = np.random.default_rng(seed)
    educ = np.clip(np.round(rng.normal(12, 2.5, n)), 0, 20).astype(int)
    age = np.clip(np.round(rng.normal(40, 11, n)), 18, 90).astype(int)
    income = np.clip(rng.gamma(2.0, 8.0 + 2.0 * (educ - 12).clip(0), n), 0, 200)
    region = rng.choice(
        ["north", "south", "east", "west"], size=n, p=[0.4, 0.3, 0.2, 0.1]
    )
    label = (income + rng.normal(0, 10, n) > 20).astype(int)
    frame = pd.DataFrame(
        {"educ": educ, "age": age, "income": income, "region": region, "label": label}
    )
    domain = {
        "educ": Numeric(0, 20),
        "age": Numeric(18, 90),
        "income": Numeric(0.0, 200.0),
        "region": Categorical(["north", "south", "east", "west"]),
        "label": Categorical([0, 1]),
    }
    return frame, domain


def _zcdp(events):
    """The zCDP of Gaussian and bounded-range events, summed."""
    total = 0.0
    for event in events:
        if isinstance(event, GaussianEvent):
            total += event.count / (2 * event.noise_multiplier**2)
        else:
            assert isinstance(event, ExponentialMechanismEvent)
            assert event.bounded_range
            total += event.count * event.epsilon**2 / 8
    return total


def _assert_ran_within(model, spent):
    """Every event the fit ran is inside the certified Rényi curve."""
    ran = RDPAccountant()
    for event in model.events_:
        ran.compose(event)
    assert np.all(
        np.asarray(ran.spent(model.delta_, warn=False).rdp)
        <= np.asarray(spent.rdp) * (1 + 1e-9)
    )


@pytest.mark.parametrize(
    ("n", "epsilon", "rounds"),
    [(300, 0.5, False), (400, 1.0, False), (8000, 4.0, True)],
)
def test_the_rule_falls_back_to_one_way_when_n_epsilon_is_small(n, epsilon, rounds):
    """Small n * epsilon: only the 1-way marginals; large: 2-way rounds too."""
    frame, domain = _panel_like(n)
    model = DPSyntheticData(epsilon=epsilon, domain=domain, random_state=0)
    model._aim_policy = FAST
    model.fit(frame)
    if rounds:
        assert any(len(s) == 2 for s in model.selected_)
    else:
        assert model.selected_ == []
        # Only 1-way measurements (a numeric column's on each level of its
        # hierarchy), with the whole budget.
        assert all(isinstance(e, GaussianEvent) for e in model.events_)
        assert sum(e.count for e in model.events_) > frame.shape[1]
        rho = 1.0 / (2.0 * model.noise_multiplier_**2)
        assert _zcdp(model.events_) == pytest.approx(rho, rel=1e-9)
    assert model.sample(50).shape == (50, frame.shape[1])


@pytest.mark.parametrize(("n", "epsilon"), [(300, 0.5), (8000, 4.0), (2000, 1.0)])
def test_the_split_spends_what_the_accountant_charges(n, epsilon):
    """The events that ran compose to exactly the planned zCDP budget, and the
    reported spend is the calibrated certified curve (at most the target)."""
    frame, domain = _panel_like(n, seed=1)
    model = DPSyntheticData(epsilon=epsilon, domain=domain, random_state=1)
    model._aim_policy = FAST
    model.fit(frame)
    rho = 1.0 / (2.0 * model.noise_multiplier_**2)
    assert _zcdp(model.events_) == pytest.approx(rho, rel=1e-9)
    assert _zcdp(model.events_) <= rho * (1 + 1e-12)
    spent = model.privacy_spent_
    assert 0.97 * epsilon <= spent.epsilon <= epsilon
    planned = account(GaussianEvent(model.noise_multiplier_), model.delta_)
    assert spent.epsilon == pytest.approx(planned.epsilon, rel=1e-12)
    _assert_ran_within(model, spent)


def _specs(frame, domain):
    columns, _ = as_table(frame)
    specs = build_specs(columns, domain, 32)
    return columns, specs


def test_one_way_share_follows_the_signal():
    """The share is 1 below min_signal and one_way_share above it."""
    frame, domain = _panel_like(400)
    _, specs = _specs(frame, domain)
    sizes = [s.n_levels for s in specs]
    positions = [bin_positions(s) for s in specs]
    l2 = REPLACE_ONE.l2
    low = plan_one_way(400, 0.03, sizes, positions, l2, AIMPolicy())
    high = plan_one_way(400, 30.0, sizes, positions, l2, AIMPolicy())
    assert low.signal < AIMPolicy().min_signal <= high.signal
    assert low.share == 1.0 and high.share == AIMPolicy().one_way_share
    assert plan_one_way(
        400, 0.03, sizes, positions, l2, AIMPolicy(min_signal=None)
    ) == (plan_one_way(400, 30.0, sizes, positions, l2, AIMPolicy(min_signal=None)))


def test_measured_bins_are_equal_width_bins_of_the_declared_range():
    """Grouped levels are the codes an encoder with that many bins gives."""
    frame, domain = _panel_like(400)
    columns, fine = _specs(frame, domain)
    fine_codes = encode_table(columns, fine)
    coarse_columns, coarse = as_table(frame)[0], build_specs(columns, domain, 8)
    coarse_codes = encode_table(coarse_columns, coarse)
    policy = AIMPolicy(measured_per_sqrt=1.0)
    for j, spec in enumerate(fine):
        if spec.edges is None:
            continue
        # n / std = 64: 8 bins (sqrt(64) = 8, a power of two).
        head = _measured_bins(bin_positions(spec), 64.0, 1.0, policy, 1.0)
        assert head is not None and head.max() + 1 == coarse[j].n_values
        np.testing.assert_array_equal(head[fine_codes[:, j]], coarse_codes[:, j])
    # Never below min_measured_bins; None when no fewer bins than levels.
    assert _measured_bins(bin_positions(fine[2]), 4.0, 1.0, policy, 1.0).max() + 1 == 8
    assert _measured_bins(bin_positions(fine[2]), 1e6, 1.0, policy, 1.0) is None
    # Off by default: every public bin measured (the signal alone counts bins).
    plan = plan_one_way(
        400,
        30.0,
        [s.n_levels for s in fine],
        [bin_positions(s) for s in fine],
        REPLACE_ONE.l2,
        AIMPolicy(),
    )
    assert plan.groups == () and plan.share == AIMPolicy().one_way_share


def test_a_record_is_in_one_cell_of_every_measured_one_way_marginal():
    """Replace-one sensitivity of the grouped 1-way measurements, by enumeration."""
    # Column 0: six ordered bins and a missing level; column 1: categorical.
    sizes = (7, 3)
    positions = [(np.arange(6) + 0.5) / 6, None]
    policy = AIMPolicy(measured_per_sqrt=1.0, min_measured_bins=2)
    plan = plan_one_way(20, 1.0, sizes, positions, REPLACE_ONE.l2, policy)
    grouped = plan.compressions(sizes)
    assert grouped[0] is not None and grouped[0].n_levels < sizes[0]
    assert grouped[0].mapping[6] == grouped[0].n_levels - 1  # missing on its own
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(s, size=5) for s in sizes])

    def measured(data):
        counts = CodesCounts(data, sizes)
        out = _measure_one_way(counts, 0.0, np.random.default_rng(0), grouped)
        return [m.y for m in out]

    base = measured(codes)
    assert base[0].sum() == codes.shape[0]  # each record in exactly one cell
    worst_l1 = worst_l2 = 0.0
    for row in range(codes.shape[0]):
        for record in itertools.product(*(range(s) for s in sizes)):
            other = codes.copy()
            other[row] = record
            for a, b in zip(measured(other), base, strict=True):
                worst_l1 = max(worst_l1, np.abs(a - b).sum())
                worst_l2 = max(worst_l2, np.linalg.norm(a - b))
    assert worst_l1 <= REPLACE_ONE.l1 + 1e-12
    assert worst_l2 <= REPLACE_ONE.l2 + 1e-12


def _pair_table(n):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, n)
    b = (a + (rng.random(n) < 0.1)) % 3
    c = rng.integers(0, 2, n)
    frame = pd.DataFrame({"a": a.astype(str), "b": b.astype(str), "c": c.astype(str)})
    domain = {"a": ["0", "1", "2"], "b": ["0", "1", "2"], "c": ["0", "1"]}
    return frame, domain


def test_a_fit_that_measured_no_pair_says_its_columns_are_independent():
    import warnings

    from skdp import DPSyntheticData, IndependentColumnsWarning

    frame, domain = _pair_table(4000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IndependentColumnsWarning)
        model = DPSyntheticData(epsilon=5.0, domain=domain, random_state=0)
        model.fit(frame)
    assert any(len(cols) >= 2 for cols in model.selected_)
    with pytest.warns(IndependentColumnsWarning, match="independently"):
        model = DPSyntheticData(epsilon=0.01, domain=domain, random_state=0)
        model.fit(frame.iloc[:200])
    assert model.selected_ == []


def _spiky_table(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "visits": rng.negative_binomial(1, 0.4, n).clip(0, 100),
            "age": rng.integers(18, 90, n),
            "group": rng.choice(["a", "b"], n),
        }
    )
    return frame, {"visits": (0, 100), "age": (0, 100), "group": ["a", "b"]}


def test_a_spike_sharing_its_bin_is_named_and_a_bin_of_its_own_keeps_it():
    import warnings

    from skdp import SpreadSpikeWarning

    frame, domain = _spiky_table()
    with pytest.warns(
        SpreadSpikeWarning, match=r"'visits': 0 is 4\d% of the values"
    ) as record:
        spread = DPSyntheticData(epsilon=1.0, domain=domain, random_state=0).fit(frame)
    # The fix in both forms a user declares a domain in: Python and JSON.
    assert "Numeric(low, high, bins=[edges])" in str(record[0].message)
    assert '"bins": [edges]' in str(record[0].message)
    zeros = (frame["visits"] == 0).mean()
    assert (spread.sample()["visits"] == 0).mean() < 0.75 * zeros

    domain["visits"] = Numeric(0, 100, bins=[0, 1, 2, 3, 5, 10, 20, 100])
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpreadSpikeWarning)  # nor for the ages
        kept = DPSyntheticData(epsilon=1.0, domain=domain, random_state=0).fit(frame)
    assert abs((kept.sample()["visits"] == 0).mean() - zeros) < 0.05

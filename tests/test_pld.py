"""The tight accountants: exact Gaussian DP and the numerical PLD.

Soundness is checked against quadrature of the hockey-stick divergence of one
step's dominating pair, and against dp_accounting's optimistic (lower) and
pessimistic (upper) PLD estimates for many steps; tightness against the same.
"""

import math
import pickle

import numpy as np
import pytest
from scipy import integrate, optimize, stats
from sklearn.datasets import make_classification

from skdp.accounting import (
    ExponentialMechanismEvent,
    GaussianEvent,
    PLDAccountant,
    PoissonGaussianEvent,
    account,
    calibrate_noise_multiplier,
    compose_spent,
)
from skdp.accounting._gdp import gaussian_dp_epsilon
from skdp.fairness import DPSaddlePointClassifier
from skdp.linear_model import DPLogisticRegression


@pytest.mark.parametrize("z", [0.7, 2.0, 10.0, 60.0])
@pytest.mark.parametrize("count", [1, 30, 1000])
@pytest.mark.parametrize("relation", ["replace-one", "add-remove"])
def test_gaussian_composition_is_exact_and_below_renyi(z, count, relation):
    event = GaussianEvent(z, count=count)
    rdp = account(event, 1e-5, neighbouring=relation, warn=False)
    tight = account(event, 1e-5, neighbouring=relation, accountant="pld")
    assert tight.accountant == "gdp"
    assert tight.epsilon == pytest.approx(
        gaussian_dp_epsilon(math.sqrt(count) / z, 1e-5)
    )
    assert tight.epsilon <= rdp.epsilon
    # The Rényi curve is kept: a valid bound that compositions fall back on.
    assert tight.rdp == rdp.rdp


def _both_ways_delta(p, r, eps, lo, hi):
    """Exact delta between densities ``p`` and ``r``, the larger direction."""
    forward, _ = integrate.quad(
        lambda x: max(0.0, p(x) - math.exp(eps) * r(x)), lo, hi, limit=400
    )
    backward, _ = integrate.quad(
        lambda x: max(0.0, r(x) - math.exp(eps) * p(x)), lo, hi, limit=400
    )
    return max(forward, backward)


def _mixture(q, z, shift):
    """Density of ``(1 - q) N(0, z^2) + q N(shift, z^2)``."""
    return lambda x: (1 - q) * stats.norm.pdf(x, 0, z) + q * stats.norm.pdf(x, shift, z)


def _one_step_delta(q, z, eps):
    """Exact delta of one Poisson-subsampled Gaussian step (add/remove)."""
    return _both_ways_delta(
        _mixture(q, z, 1.0), _mixture(0.0, z, 0.0), eps, -14 * z, 1 + 14 * z
    )


@pytest.mark.parametrize("q", [0.01, 0.2, 0.7])
@pytest.mark.parametrize("z", [0.8, 2.0, 5.0])
def test_one_poisson_step_against_quadrature(q, z):
    delta = 1e-5
    event = PoissonGaussianEvent(q, z)
    reference = account(event, delta, neighbouring="add-remove", warn=False).epsilon
    accountant = PLDAccountant(neighbouring="add-remove", rel_slack=5e-3)
    spent = accountant.compose(event).spent(delta)
    eps = spent.epsilon
    assert spent.accountant == "pld"
    # Sound: the true delta at the reported epsilon is within delta.
    assert _one_step_delta(q, z, eps) <= delta * (1 + 1e-6)
    # Tight: within the rounding slack (0.5% of the reference) and a bit more.
    exact = optimize.brentq(
        lambda e: _one_step_delta(q, z, e) - delta, 0.0, reference + 1.0, xtol=1e-10
    )
    assert eps <= exact + 0.006 * reference + 1e-3


def _dp_accounting_pld(q, z, steps, delta, pessimistic):
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    one = pld.from_gaussian_mechanism(
        standard_deviation=z,
        sensitivity=1.0,
        sampling_prob=q,
        pessimistic_estimate=pessimistic,
        value_discretization_interval=2e-5,
    )
    return one.self_compose(steps).get_epsilon_for_delta(delta)


@pytest.mark.parametrize(
    "q, z, steps, delta",
    [
        (256 / 1347, 61.3, 180, 1347**-1.1),  # digits at epsilon 0.1
        (256 / 1347, 8.26, 180, 1347**-1.1),  # digits at epsilon 1
        (0.01, 1.1, 1000, 1e-5),
        (256 / 36631, 3.0, 4290, 1e-5),  # Adult, 30 epochs
        (0.05, 0.9, 100, 1e-6),
    ],
)
def test_many_poisson_steps_between_dp_accounting_bounds(q, z, steps, delta):
    event = PoissonGaussianEvent(q, z, count=steps)
    tight = account(event, delta, neighbouring="add-remove", accountant="pld")
    rdp = account(event, delta, neighbouring="add-remove", warn=False)
    assert tight.accountant == "pld" and tight.epsilon < rdp.epsilon
    lower = _dp_accounting_pld(q, z, steps, delta, pessimistic=False)
    upper = _dp_accounting_pld(q, z, steps, delta, pessimistic=True)
    assert tight.epsilon >= lower
    assert tight.epsilon <= 1.01 * upper + 1e-3


def test_poisson_with_a_gaussian_release():
    # DPLogisticRegression's shape: Poisson steps and one Gaussian release.
    steps = PoissonGaussianEvent(0.01, 1.5, count=500)
    release = GaussianEvent(20.0)
    both = account([steps, release], 1e-5, neighbouring="add-remove", accountant="pld")
    alone = account(steps, 1e-5, neighbouring="add-remove", accountant="pld")
    assert both.accountant == "pld"
    assert alone.epsilon < both.epsilon < alone.epsilon + 0.05


@pytest.mark.parametrize(
    "events, relation",
    [
        # Past the replace-one pair's shape condition the chain is used, and
        # a replace-one Gaussian event's per-record bound is unknown to it.
        (
            [PoissonGaussianEvent(0.95, 2.0, count=20), GaussianEvent(9.0)],
            "replace-one",
        ),
        ([ExponentialMechanismEvent(0.1, count=3), GaussianEvent(5.0)], "add-remove"),
    ],
)
def test_falls_back_to_renyi_where_no_tight_bound_applies(events, relation):
    rdp = account(events, 1e-5, neighbouring=relation, warn=False)
    tight = account(events, 1e-5, neighbouring=relation, accountant="pld", warn=False)
    assert tight.accountant == "rdp" and tight.epsilon == rdp.epsilon
    assert tight.order == rdp.order
    assert tight == rdp  # events are not compared


@pytest.mark.parametrize("target", [0.1, 1.0, 8.0])
def test_calibration_on_the_tight_bound(target):
    def make_events(z):
        return [PoissonGaussianEvent(256 / 5000, z, count=600), GaussianEvent(4 * z)]

    z_rdp, _ = calibrate_noise_multiplier(
        make_events, target, 1e-5, neighbouring="add-remove"
    )
    z, spent = calibrate_noise_multiplier(
        make_events, target, 1e-5, neighbouring="add-remove", accountant="pld"
    )
    assert spent.accountant == "pld"
    assert 0.97 * target <= spent.epsilon <= target
    assert z < z_rdp
    again = account(make_events(z), 1e-5, neighbouring="add-remove", accountant="pld")
    assert again.epsilon <= target


def test_calibration_falls_back_to_renyi():
    # Replace-one past the pair's shape condition (sampling rate 0.95 at
    # these noises): the chain, which cannot take a replace-one Gaussian event.
    def make_events(z):
        return [PoissonGaussianEvent(0.95, z, count=300), GaussianEvent(3 * z)]

    plain = calibrate_noise_multiplier(make_events, 1.0, 1e-5)
    tight = calibrate_noise_multiplier(make_events, 1.0, 1e-5, accountant="pld")
    assert tight[0] == plain[0] and tight[1].epsilon == plain[1].epsilon


def test_spent_keeps_its_events_for_other_deltas_and_compositions():
    event = PoissonGaussianEvent(0.02, 2.0, count=200)
    spent = account(event, 1e-5, neighbouring="add-remove", accountant="pld")
    assert spent.events and "events" not in spent.to_dict()
    other = spent.at_delta(1e-7)
    assert other.epsilon == pytest.approx(
        account(event, 1e-7, neighbouring="add-remove", accountant="pld").epsilon
    )
    twice = compose_spent([spent, spent])
    direct = account([event, event], 1e-5, neighbouring="add-remove", accountant="pld")
    assert twice.epsilon == pytest.approx(direct.epsilon)
    renyi = account(event, 1e-5, neighbouring="add-remove")
    assert twice.epsilon < compose_spent([renyi, renyi]).epsilon
    restored = pickle.loads(pickle.dumps(spent))
    assert restored.epsilon == spent.epsilon and restored.events == spent.events


def test_unknown_accountant_is_refused():
    with pytest.raises(ValueError, match="accountant"):
        account(GaussianEvent(1.0), 1e-5, accountant="prv")
    with pytest.raises(ValueError, match="accountant"):
        calibrate_noise_multiplier(GaussianEvent, 1.0, 1e-5, accountant="x")


def test_estimators_report_the_tight_bound():
    X, y = make_classification(n_samples=600, n_features=4, random_state=0)
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    add_remove = DPLogisticRegression(
        epsilon=1.0, neighbouring="add-remove", delta=1e-5, random_state=0
    ).fit(X, y)
    assert add_remove.privacy_spent_.accountant == "pld"
    assert 0.97 <= add_remove.privacy_spent_.epsilon <= 1.0
    # Less noise than the Rényi calibration of the same plan.
    plan = add_remove._plan(X.shape[0], 2, add_remove.privacy_spent_.delta)
    renyi = account(
        plan.events(add_remove.noise_multiplier_),
        add_remove.privacy_spent_.delta,
        neighbouring="add-remove",
    )
    assert renyi.epsilon > 1.0
    # Replace-one (the default): the antipodal pair, temperature release
    # included.
    replace_one = DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    assert replace_one.privacy_spent_.accountant == "pld"
    assert "antipodal pair" in replace_one.privacy_spent_.bound
    assert 0.97 <= replace_one.privacy_spent_.epsilon <= 1.0
    cyclic = DPLogisticRegression(epsilon=1.0, batch_sampling="cyclic").fit(X, y)
    # Cyclic runs are Gaussian compositions (or last-iterate GDP): exact.
    assert cyclic.privacy_spent_.accountant == "gdp"
    assert 0.97 <= cyclic.privacy_spent_.epsilon <= 1.0
    groups = (X[:, 0] > 0).astype(int)
    fair = DPSaddlePointClassifier(epsilon=1.0, groups=[0, 1], random_state=0)
    fair.fit(X, y, sensitive_features=groups)
    assert fair.privacy_spent_.accountant == "gdp"
    assert 0.97 <= fair.privacy_spent_.epsilon <= 1.0


def test_tiny_delta_and_many_steps_stay_finite():
    # The tail cut-off must not round 1 - tau to 1 (tau ~ 1e-19 here).
    event = PoissonGaussianEvent(1e-3, 1.0, count=100_000)
    rdp = account(event, 1e-10, neighbouring="add-remove", warn=False)
    tight = account(event, 1e-10, neighbouring="add-remove", accountant="pld")
    assert math.isfinite(tight.epsilon) and tight.epsilon <= rdp.epsilon


def _replace_one_step_delta(q, z, eps, shift):
    """Exact delta of one step between ``(1-q) N(0) + q N(1)`` and the record
    replaced by one contributing ``shift`` (``-1``: antipodal; ``0``: none)."""
    return _both_ways_delta(
        _mixture(q, z, 1.0), _mixture(q, z, shift), eps, -1 - 14 * z, 1 + 14 * z
    )


@pytest.mark.parametrize("q", [0.01, 0.2, 0.7])
@pytest.mark.parametrize("z", [0.8, 2.0, 5.0])
def test_replace_one_against_quadrature(q, z):
    delta = 1e-5
    event = PoissonGaussianEvent(q, z)
    rdp = account(event, delta, warn=False)
    tight = account(event, delta, accountant="pld")
    assert tight.epsilon <= rdp.epsilon
    # Sound on the worst pairs we know: the antipodal record, and a record
    # that contributes nothing (the add/remove pair).
    for shift in (-1.0, 0.0):
        assert _replace_one_step_delta(q, z, tight.epsilon, shift) <= delta * (1 + 1e-6)


@pytest.mark.parametrize(
    "q, z, steps, delta",
    [
        (256 / 36631, 4.077, 4290, 1e-5),  # Adult's replace-one default at eps 1
        (256 / 36631, 33.4, 4290, 1e-5),  # and at eps 0.1
        (256 / 1347, 8.264, 180, 1347**-1.1),
        (0.05, 1.2, 100, 1e-5),
    ],
)
def test_replace_one_pair_between_add_remove_and_renyi(q, z, steps, delta):
    event = PoissonGaussianEvent(q, z, count=steps)
    rdp = account(event, delta, warn=False)
    tight = account(event, delta, accountant="pld")
    add_remove = account(event, delta, neighbouring="add-remove", accountant="pld")
    assert tight.accountant == "pld"
    assert tight.bound == "poisson-subsampled-gaussian (replace-one: antipodal pair)"
    assert add_remove.epsilon < tight.epsilon < 0.95 * rdp.epsilon


def test_full_batch_events_are_gaussian_under_both_relations():
    event = PoissonGaussianEvent(1.0, 3.0, count=5)
    for relation, z in (("replace-one", 1.5), ("add-remove", 3.0)):
        spent = account(event, 1e-5, neighbouring=relation, accountant="pld")
        assert spent.accountant == "gdp"
        assert spent.epsilon == pytest.approx(
            gaussian_dp_epsilon(math.sqrt(5) / z, 1e-5)
        )
        assert account(event, 1e-5, neighbouring=relation).bound == "gaussian"


@pytest.mark.parametrize("relation", ["replace-one", "add-remove"])
@pytest.mark.parametrize("target", [0.3, 3.0, 20.0])
def test_report_never_above_what_calibration_certified(relation, target):
    # The report re-accounts the events; it must not exceed the target even
    # where the fine lattice is too large and only the coarse one exists
    # (replace-one at epsilon 20 did, before the report took both).
    def make_events(z):
        return [
            PoissonGaussianEvent(0.2, z, count=300),
            PoissonGaussianEvent(1.0, 4 * z),
        ]

    z, spent = calibrate_noise_multiplier(
        make_events, target, 1e-5, neighbouring=relation, accountant="pld"
    )
    again = account(make_events(z), 1e-5, neighbouring=relation, accountant="pld")
    assert again.epsilon == spent.epsilon <= target


def test_logistic_fit_at_a_large_epsilon_spends_its_target():
    # DPLogisticRegression(epsilon=20) on 2000 rows raised "spent more than
    # its target": the report's fine lattice was too large (Rényi fallback)
    # where the calibration's coarse one had certified the target.
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, size=(2000, 2))
    y = (X[:, 0] > 0).astype(int)
    model = DPLogisticRegression(epsilon=20.0, random_state=0).fit(X, y)
    assert model.privacy_spent_.epsilon <= 20.0


def test_composition_does_not_depend_on_the_order_of_the_spends():
    # Composition is commutative: the tight bound of a multiset of Poisson
    # runs must not change with the order they are listed in (it did, by
    # 2e-6 relative, when each listing built its own lattice plan).
    plans = [
        DPLogisticRegression(batch_size=64, epochs=2, classes=[0, 1]).privacy_plan(n)[1]
        for n in (200, 201, 301)
    ]
    a, b, r = plans
    orders = ([a, b, a, b, r], [r, b, b, a, a], [a, a, b, b, r])
    totals = {compose_spent(spends, delta=1e-5).epsilon for spends in orders}
    assert len(totals) == 1

"""Contract and behaviour tests of skdp.accounting (reference values and exact
numerics live in test_reference_dp_accounting.py and test_soundness.py)."""

import json
import pickle
import warnings

import numpy as np
import pytest

from skdp.accounting import (
    DEFAULT_ORDERS,
    ExponentialMechanismEvent,
    GaussianEvent,
    NoisyIterationEvent,
    PoissonGaussianEvent,
    PrivacySpent,
    RDPAccountant,
    account,
    calibrate_noise_multiplier,
    compose_spent,
    gradient_step_lipschitz,
    last_iterate_coefficient,
    logistic_constants,
    rdp_to_epsilon,
)
from skdp.exceptions import OrderGridWarning

SIZES = [100] * 9 + [37]

EVENTS = [
    GaussianEvent(3.0, count=4),
    PoissonGaussianEvent(0.02, 1.2, count=500),
    ExponentialMechanismEvent(0.1, count=20),
    ExponentialMechanismEvent(0.1, count=20, bounded_range=True),
    NoisyIterationEvent.cyclic_sgd(SIZES, 3, 2.0),
    NoisyIterationEvent.cyclic_sgd(SIZES, 3, 2.0, learning_rate=2.0, lipschitz=0.99),
    NoisyIterationEvent.cyclic_sgd(SIZES, 3, 2.0, lipschitz=0.99, shuffle=True),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_accountant_contract(event):
    """Every event: finite, non-negative, increasing in order where it must,
    additive under composition, epsilon monotone in delta."""
    single = RDPAccountant().compose(event)
    curve = single.rdp
    assert curve.shape == DEFAULT_ORDERS.shape
    assert np.all(np.isfinite(curve)) and np.all(curve >= 0)
    # Rényi divergence is non-decreasing in the order.
    assert np.all(np.diff(curve) >= -1e-12 * np.abs(curve[1:]))
    double = RDPAccountant().compose(event, count=2)
    np.testing.assert_allclose(double.rdp, 2 * curve, rtol=1e-12)
    chained = RDPAccountant().compose(event).compose(event)
    np.testing.assert_allclose(chained.rdp, double.rdp, rtol=1e-12)
    eps = [single.get_epsilon(d, warn=False) for d in (1e-3, 1e-6, 1e-9)]
    assert eps[0] <= eps[1] <= eps[2]
    spent = single.spent(1e-6, warn=False)
    assert isinstance(spent, PrivacySpent)
    assert spent.epsilon == pytest.approx(eps[1])
    assert spent.neighbouring == "replace-one" and spent.accountant == "rdp"
    assert spent.bound and spent.bound != "none"


def test_empty_accountant_spends_nothing():
    assert RDPAccountant().get_epsilon(1e-5) == 0.0


def test_gaussian_replace_vs_add_remove_poisson():
    """Replace-one costs more than add/remove for the same Poisson run."""
    event = PoissonGaussianEvent(0.01, 1.0, count=1000)
    ar = account(event, 1e-5, neighbouring="add-remove").epsilon
    ro = account(event, 1e-5, neighbouring="replace-one").epsilon
    assert ar < ro < 4 * ar


def test_cyclic_refuses_add_remove():
    event = NoisyIterationEvent.cyclic_sgd(SIZES, 1, 1.0)
    with pytest.raises(ValueError, match="replace-one only"):
        account(event, 1e-5, neighbouring="add-remove")


def test_cyclic_composition_matches_closed_form():
    """PRIVACY.md section 2: rho(a) = E a (2 eta C / b)^2 / (2 s^2) = 2 E a / z^2."""
    z, epochs = 1.7, 4
    event = NoisyIterationEvent.cyclic_sgd(SIZES, epochs, z, learning_rate=0.3)
    curve = RDPAccountant().compose(event).rdp
    np.testing.assert_allclose(curve, epochs * 2 * DEFAULT_ORDERS / z**2, rtol=1e-12)


def test_last_iterate_beats_composition_under_contraction_and_not_otherwise():
    _, beta = logistic_constants(1.0)
    lam = 0.05
    eta = 1.0 / (beta + lam)
    lip = gradient_step_lipschitz(eta, beta, lam)
    assert lip < 1
    contracting = NoisyIterationEvent.cyclic_sgd(
        SIZES, 20, 2.0, learning_rate=eta, lipschitz=lip
    )
    spent = account(contracting, 1e-5)
    assert spent.bound == "cyclic-last-iterate"
    plain = account(NoisyIterationEvent.cyclic_sgd(SIZES, 20, 2.0), 1e-5)
    assert spent.epsilon < plain.epsilon / 3
    # An expanding map (weakly convex, L > 1) must not beat composition.
    expanding = NoisyIterationEvent.cyclic_sgd(SIZES, 20, 2.0, lipschitz=1.2)
    assert account(expanding, 1e-5).bound == "cyclic-composition"


def test_last_iterate_stops_growing_with_epochs():
    _, beta = logistic_constants(1.0)
    eta, lam = 2.0, 0.05
    lip = gradient_step_lipschitz(eta, beta, lam)
    eps = [
        account(
            NoisyIterationEvent.cyclic_sgd(
                SIZES, e, 2.0, learning_rate=eta, lipschitz=lip
            ),
            1e-5,
        ).epsilon
        for e in (5, 50, 200)
    ]
    assert eps[1] == pytest.approx(eps[2], rel=1e-3)
    assert eps[0] <= eps[1]


def test_last_iterate_record_in_last_batch_is_a_gaussian_step():
    """A record seen only on the last step is at least one Gaussian step."""
    k = last_iterate_coefficient([0, 0, 1.0], [1.0, 1.0, 2.0], 0.5)
    assert k == pytest.approx(1.0**2 / 2.0**2 / 2)


def test_shuffled_is_no_worse_than_fixed_order():
    kwargs = dict(learning_rate=1.0, lipschitz=0.98)
    fixed = account(NoisyIterationEvent.cyclic_sgd(SIZES, 5, 3.0, **kwargs), 1e-5)
    shuffled = account(
        NoisyIterationEvent.cyclic_sgd(SIZES, 5, 3.0, shuffle=True, **kwargs), 1e-5
    )
    assert shuffled.epsilon <= fixed.epsilon
    assert shuffled.bound.startswith("shuffled")


def test_pure_dp_rdp_never_exceeds_pure_epsilon():
    curve = RDPAccountant().compose(ExponentialMechanismEvent(0.5)).rdp
    assert np.all(curve <= 0.5 + 1e-15)


def test_conversion_warns_at_grid_end_and_validates():
    orders = np.array([2.0, 3.0])
    with pytest.warns(OrderGridWarning):
        rdp_to_epsilon(orders, [1e-6, 2e-6], 1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rdp_to_epsilon(DEFAULT_ORDERS, 2 * DEFAULT_ORDERS / 9.0, 1e-5)
    with pytest.raises(ValueError, match="delta"):
        rdp_to_epsilon(orders, [1.0, 1.0], 0.0)
    with pytest.raises(ValueError, match="negative"):
        rdp_to_epsilon(orders, [-1.0, 1.0], 1e-5)


@pytest.mark.parametrize(
    "bad",
    [
        lambda: GaussianEvent(0.0),
        lambda: GaussianEvent(float("nan")),
        lambda: PoissonGaussianEvent(1.5, 1.0),
        lambda: GaussianEvent(1.0, count=-1),
        lambda: NoisyIterationEvent.cyclic_sgd([], 1, 1.0),
        lambda: NoisyIterationEvent.cyclic_sgd([10], 0, 1.0),
        lambda: NoisyIterationEvent(1.0, [1.0], [1.0, 2.0], [0]),
        lambda: RDPAccountant(neighbouring="swap"),
        lambda: RDPAccountant(orders=[0.5, 2]),
    ],
)
def test_bad_inputs_raise_clear_errors(bad):
    with pytest.raises(ValueError):
        bad()


def test_events_are_immutable():
    event = NoisyIterationEvent.cyclic_sgd(SIZES, 2, 1.0)
    with pytest.raises(ValueError):
        event.noise_scale[0] = 5.0
    with pytest.raises(AttributeError):
        event.noise_multiplier = 3.0


def test_privacy_spent_value_semantics():
    spent = account(PoissonGaussianEvent(0.01, 1.1, count=1000), 1e-5)
    with pytest.raises(AttributeError):
        spent.epsilon = 0.0
    assert "epsilon=" in repr(spent) and "replace-one" in repr(spent)
    assert pickle.loads(pickle.dumps(spent)) == spent
    json.dumps(spent.to_dict())
    assert spent.at_delta(1e-3).epsilon < spent.epsilon
    assert spent.at_delta(spent.delta).epsilon == pytest.approx(spent.epsilon)


def test_compose_spent_is_tighter_than_adding_epsilons_and_exact_on_curves():
    event = PoissonGaussianEvent(0.01, 1.1, count=1000)
    one = account(event, 1e-5)
    three = compose_spent([one, one, one])
    direct = account([(event, 3)], 1e-5)
    assert three.epsilon == pytest.approx(direct.epsilon, rel=1e-12)
    assert three.epsilon < 3 * one.epsilon
    other = account(event, 1e-5, neighbouring="add-remove")
    with pytest.raises(ValueError, match="neighbouring"):
        compose_spent([one, other])
    with pytest.raises(ValueError):
        compose_spent([])


@pytest.mark.parametrize("target", [0.1, 1.0, 8.0])
@pytest.mark.parametrize(
    "family",
    [
        lambda z: PoissonGaussianEvent(0.01, z, count=2000),
        lambda z: NoisyIterationEvent.cyclic_sgd(SIZES, 5, z),
        lambda z: NoisyIterationEvent.cyclic_sgd(
            SIZES, 5, z, learning_rate=1.5, lipschitz=0.97, shuffle=True
        ),
    ],
)
def test_calibration_meets_target_from_below(target, family):
    z, spent = calibrate_noise_multiplier(family, target, 1e-6)
    assert spent.epsilon <= target
    assert spent.epsilon >= 0.97 * target
    assert account(family(z), 1e-6).epsilon == pytest.approx(spent.epsilon)


def test_calibration_rejects_bad_targets():
    with pytest.raises(ValueError):
        calibrate_noise_multiplier(lambda z: GaussianEvent(z), 0.0, 1e-5)
    with pytest.raises(ValueError):
        calibrate_noise_multiplier(lambda z: GaussianEvent(z), float("inf"), 1e-5)

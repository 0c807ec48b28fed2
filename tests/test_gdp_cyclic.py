"""Exact Gaussian-DP conversion of cyclic runs, and long last-iterate runs.

Issue 21, item 4: cyclic composition is a composition of Gaussian mechanisms
and the last-iterate programme's ``K`` is the GDP ``mu^2 / 2`` of Bok, Su and
Altschuler (ICML 2024); both were converted through Rényi DP, and the
programme returned infinity (silently falling back to composition) once the
contraction over the run exceeded ``exp(600)``. Reference values:
``/work/shared/design/references/last_iterate_bok2024.md`` (their Table 1).
"""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from skdp.accounting import (
    NoisyIterationEvent,
    account,
    gradient_step_lipschitz,
    last_iterate_coefficient,
)
from skdp.accounting._gdp import (
    cyclic_mu,
    gaussian_dp_delta,
    gaussian_mixture_dp_epsilon,
)

DELTA = 1e-5
# epochs, lambda, z, GDP mu, epsilon from mu, skdp before (Rényi).
BOK_TABLE_1 = [
    (50, 0.002, 3, 0.9925, 4.339, 4.688),
    (50, 0.004, 3, 0.9889, 4.321, 4.668),
    (100, 0.002, 3, 1.2353, 5.601, 6.042),
    (100, 0.004, 3, 1.2175, 5.506, 5.938),
    (200, 0.002, 3, 1.5930, 7.579, 8.154),
    (200, 0.004, 3, 1.5061, 7.086, 7.625),
    (50, 0.002, 12, 0.2481, 0.919, 1.004),
    (200, 0.004, 12, 0.3765, 1.454, 1.584),
    (50, 0.002, 100, 0.0298, 0.091, 0.101),
    (200, 0.004, 100, 0.0452, 0.143, 0.159),
]


def _bok_event(epochs, lam, z):
    # n = 60000, b = 1500, eta = 0.05, rows of norm <= 5 (smoothness 6.25).
    lipschitz = gradient_step_lipschitz(0.05, 6.25, lam)
    return NoisyIterationEvent.cyclic_sgd(
        [1500] * 40, epochs, z, learning_rate=0.05, lipschitz=lipschitz
    )


def _exact_gdp_epsilon(mu, delta):
    """Independent root of Dong, Roth and Su's Corollary 2.13."""

    def excess(eps):
        return (
            stats.norm.cdf(-eps / mu + mu / 2)
            - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
            - delta
        )

    return optimize.brentq(excess, 0.0, 50.0 + 10 * mu * mu, xtol=1e-14, rtol=1e-14)


@pytest.mark.parametrize("epochs, lam, z, mu, epsilon, before", BOK_TABLE_1)
def test_last_iterate_is_gdp_and_matches_bok_table(epochs, lam, z, mu, epsilon, before):
    event = _bok_event(epochs, lam, z)
    spent = account(event, DELTA, accountant="pld")
    assert spent.accountant == "gdp"
    assert spent.bound == "cyclic-last-iterate"
    # Our programme's mu is the theorem's (to the table's 4 digits)...
    composition = np.sqrt(2 * last_iterate_coefficient_worst(event)) / z
    assert composition == pytest.approx(mu, abs=5e-5)
    # ...the report is its exact GDP epsilon (to 1e-6), the table's value to
    # its printed digits, and below the Rényi conversion it replaces.
    assert spent.epsilon == pytest.approx(_exact_gdp_epsilon(composition, DELTA), 1e-6)
    assert spent.epsilon == pytest.approx(epsilon, abs=5e-4)
    renyi = account(event, DELTA)
    assert renyi.epsilon == pytest.approx(before, abs=5e-4)
    assert spent.epsilon < renyi.epsilon


def last_iterate_coefficient_worst(event):
    """The worst position's last-iterate ``K`` at noise multiplier 1."""
    worst = 0.0
    n_batches = int(event.batch.max()) + 1
    for j in range(n_batches):
        shift = np.where(event.batch == j, event.sensitivity, 0.0)
        k = last_iterate_coefficient(shift, event.noise_scale, event.lipschitz)
        worst = max(worst, k)
    return worst


@pytest.mark.parametrize("epochs", [1, 20])
def test_cyclic_composition_is_exact_gdp(epochs):
    event = NoisyIterationEvent.cyclic_sgd([100] * 10, epochs, 4.0)
    spent = account(event, DELTA, accountant="pld")
    mu = 2.0 * math.sqrt(epochs) / 4.0  # sensitivity 2, noise 4, per epoch
    assert spent.accountant == "gdp" and spent.bound == "cyclic-composition"
    assert spent.epsilon == pytest.approx(_exact_gdp_epsilon(mu, DELTA), 1e-6)
    assert spent.epsilon < account(event, DELTA).epsilon


def test_long_runs_stay_on_the_last_iterate_bound():
    # lambda 1e-2 at the "auto" step 1/(beta + lambda): contraction 0.96 per
    # step, so 200 epochs of 118 batches exceed exp(600) (issue 21).
    eta = 1.0 / (0.25 + 1e-2)
    lipschitz = gradient_step_lipschitz(eta, 0.25, 1e-2)
    spends = []
    for epochs in (100, 200, 400):
        event = NoisyIterationEvent.cyclic_sgd(
            [256] * 118, epochs, 3.0, learning_rate=eta, lipschitz=lipschitz
        )
        spent = account(event, DELTA, accountant="pld")
        assert spent.bound == "cyclic-last-iterate", epochs
        spends.append(spent.epsilon)
    # Old shifts have decayed: the bound no longer grows with the epochs.
    assert spends[2] == pytest.approx(spends[0], rel=1e-9)


def test_long_programme_is_finite_and_feasible():
    # The windowed programme against the plain one where both apply.
    rng = np.random.default_rng(0)
    steps = 4000
    shift = np.where(rng.random(steps) < 0.01, 1.0, 0.0)
    shift[0] = 1.0
    noise = rng.uniform(0.5, 2.0, steps)
    for contraction, expect_window in ((0.9, True), (0.999, False)):
        k = last_iterate_coefficient(shift, noise, contraction)
        assert math.isfinite(k) and k > 0
        last = np.flatnonzero(shift)[-1]
        # At least the last hit's unavoidable share: its shift must be
        # absorbed by the noise from there on.
        w = contraction ** np.arange(steps - 1 - last, -1, -1)
        floor = 0.5 * 1.0 / np.sum((w * noise[last:]) ** 2) * w[0] ** 2
        assert k >= floor * (1 - 1e-9), (contraction, expect_window)


def test_shuffled_order_averages_the_positions():
    eta = 1.0 / (0.25 + 1e-3)
    lipschitz = gradient_step_lipschitz(eta, 0.25, 1e-3)
    kwargs = {"learning_rate": eta, "lipschitz": lipschitz}
    public = NoisyIterationEvent.cyclic_sgd([50] * 20, 5, 2.0, **kwargs)
    secret = NoisyIterationEvent.cyclic_sgd([50] * 20, 5, 2.0, shuffle=True, **kwargs)
    tight = account(secret, DELTA, accountant="pld")
    assert tight.accountant == "gdp"
    assert tight.epsilon <= account(public, DELTA, accountant="pld").epsilon
    assert tight.epsilon <= account(secret, DELTA).epsilon
    # The mixture's delta is the weighted mean of the positions' GDP deltas.
    mus = cyclic_mu(secret)
    weights = secret.batch_weights
    mixed = sum(
        w * gaussian_dp_delta(tight.epsilon, m)
        for m, w in zip(mus, weights, strict=True)
    )
    assert mixed <= DELTA * (1 + 1e-9)
    assert gaussian_mixture_dp_epsilon(mus, weights, DELTA) == tight.epsilon

"""Reference values: our RDP curves and conversions equal dp_accounting's.

PRIVACY.md sections 1 and 7: the Gaussian and Poisson-subsampled Gaussian curves
(add/remove neighbours) and the RDP to (epsilon, delta) conversion must reproduce
Google's ``dp_accounting`` (a test-only dependency) to 1e-6 relative.

Two documented, deliberate differences, both in our favour and both checked:

- dp_accounting stops its fractional-order series after 1000 terms and returns
  ``inf`` there (it happens for q >= 0.1 at orders below 2); ours sums until
  convergence. Where dp_accounting is infinite we check our value against the
  exact divergence by quadrature instead (it must be an upper bound).
- dp_accounting's ``compute_epsilon`` refuses orders <= 1.01 (``inf``); ours
  converts them too. So our epsilon can only be smaller, and it equals
  dp_accounting's on the orders both use.
- Our accountant replaces each event's curve by its suffix minimum over the
  orders (Rényi divergence is non-decreasing in the order), which can only
  lower it; the curve *function* still equals dp_accounting's.
"""

import logging

import numpy as np
import pytest
from _exact import renyi_gaussian_mixtures

from skdp.accounting import (
    DEFAULT_ORDERS,
    GaussianEvent,
    PoissonGaussianEvent,
    RDPAccountant,
    gaussian_rdp,
    poisson_gaussian_rdp,
    rdp_to_epsilon,
)

dp_accounting = pytest.importorskip("dp_accounting")
rdp_lib = pytest.importorskip("dp_accounting.rdp")

RTOL = 1e-6
ATOL = 1e-12
SAMPLING_RATES = [1e-4, 1e-3, 1e-2, 0.1, 0.5, 1.0]
NOISE_MULTIPLIERS = [0.5, 0.8, 1.0, 2.0, 5.0, 20.0]
STEPS = [1, 100, 100_000]
DELTAS = [1e-3, 1e-6, 1e-9]
ORDERS = np.asarray(DEFAULT_ORDERS, dtype=float)
# dp_accounting converts only at orders > 1.01.
CONVERTIBLE = ORDERS > 1.01


@pytest.fixture(autouse=True)
def _quiet_dp_accounting():
    # dp_accounting logs (absl) a warning for each non-convergent order.
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def _reference_accountant(event, steps):
    accountant = rdp_lib.RdpAccountant(
        orders=list(DEFAULT_ORDERS),
        neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    )
    return accountant.compose(event, steps)


def _assert_close(ours, theirs, what):
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL, err_msg=what)


def _epsilon_on_common_orders(rdp, reference_rdp, delta):
    """Our conversion restricted to the orders where dp_accounting converts."""
    usable = CONVERTIBLE & np.isfinite(reference_rdp)
    return rdp_to_epsilon(ORDERS[usable], rdp[usable], delta, warn=False)[0]


@pytest.mark.parametrize("steps", STEPS)
@pytest.mark.parametrize("z", NOISE_MULTIPLIERS)
def test_gaussian_matches_dp_accounting(z, steps):
    ours = RDPAccountant("add-remove").compose(GaussianEvent(z), count=steps)
    reference = _reference_accountant(dp_accounting.GaussianDpEvent(z), steps)
    _assert_close(ours.rdp, reference.rdp, "Gaussian RDP curve")
    _assert_close(ours.rdp, steps * gaussian_rdp(ORDERS, z), "closed form")
    for delta in DELTAS:
        eps_ref = reference.get_epsilon(delta)
        eps = ours.spent(delta, warn=False).epsilon
        assert eps <= eps_ref * (1 + RTOL) + ATOL
        _assert_close(
            _epsilon_on_common_orders(ours.rdp, reference.rdp, delta),
            eps_ref,
            "Gaussian epsilon",
        )


@pytest.mark.parametrize("steps", STEPS)
@pytest.mark.parametrize("z", NOISE_MULTIPLIERS)
@pytest.mark.parametrize("q", SAMPLING_RATES)
def test_poisson_gaussian_matches_dp_accounting(q, z, steps):
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z))
    reference = _reference_accountant(event, steps)
    ref = reference.rdp
    finite = np.isfinite(ref)
    # The curve itself equals dp_accounting's wherever the latter is finite.
    raw = steps * poisson_gaussian_rdp(ORDERS, q, z)
    assert np.all(np.isfinite(raw))
    _assert_close(raw[finite], ref[finite], f"RDP curve, q={q}, z={z}")
    # The accountant may tighten it (suffix minimum: Rényi divergence is
    # non-decreasing in the order), never loosen it.
    ours = RDPAccountant("add-remove").compose(PoissonGaussianEvent(q, z), count=steps)
    rdp = ours.rdp
    assert np.all(rdp <= raw * (1 + 1e-12))
    assert np.all(rdp[finite] <= ref[finite] * (1 + RTOL) + ATOL)
    for delta in DELTAS:
        eps_ref, order_ref = reference.get_epsilon_and_optimal_order(delta)
        spent = ours.spent(delta, warn=False)
        # Ours may only be smaller (more usable orders, tighter curve)...
        assert spent.epsilon <= eps_ref * (1 + RTOL) + ATOL
        # ...and the conversion of the same curve on the same orders agrees.
        eps_common = _epsilon_on_common_orders(raw, ref, delta)
        _assert_close(eps_common, eps_ref, f"epsilon, q={q}, z={z}, delta={delta}")
        index = int(np.flatnonzero(ORDERS == order_ref)[0]) if eps_ref > 0 else None
        if index is not None and spent.order == order_ref and rdp[index] == raw[index]:
            _assert_close(spent.epsilon, eps_ref, "epsilon at the same order")


def test_fractional_orders_where_dp_accounting_diverges_are_sound():
    """Where dp_accounting gives up (inf), ours is finite and >= the exact value."""
    n_checked = 0
    for q in SAMPLING_RATES[:-1]:
        for z in NOISE_MULTIPLIERS:
            event = dp_accounting.PoissonSampledDpEvent(
                q, dp_accounting.GaussianDpEvent(z)
            )
            diverged = ~np.isfinite(_reference_accountant(event, 1).rdp)
            if not diverged.any():
                continue
            raw = poisson_gaussian_rdp(ORDERS, q, z)
            reported = (
                RDPAccountant("add-remove").compose(PoissonGaussianEvent(q, z)).rdp
            )
            mixture, single = ([1 - q, q], [0.0, 1.0]), ([1.0], [0.0])
            for k in np.flatnonzero(diverged):
                assert np.isfinite(raw[k])
                for p, r in ((mixture, single), (single, mixture)):
                    exact = renyi_gaussian_mixtures(ORDERS[k], p, r, z)
                    for bound in (raw[k], reported[k]):
                        assert exact <= bound * (1 + RTOL) + 1e-9, (q, z, k, exact)
                n_checked += 1
    assert n_checked, "dp_accounting converged everywhere: update this test's premise"


def _random_curves(rng):
    """RDP curves of several shapes: Gaussian-like, Poisson, arbitrary."""
    curves = [c * ORDERS for c in 10.0 ** rng.uniform(-7, 1, size=6)]
    for q, z, steps in [(0.01, 1.1, 1000), (0.2, 3.0, 50), (1e-3, 0.7, 10_000)]:
        curves.append(steps * poisson_gaussian_rdp(ORDERS, q, z))
    curves.extend(10.0 ** rng.uniform(-8, 2, size=(6, ORDERS.size)))
    curves.append(np.full(ORDERS.size, 1e-20))  # epsilon 0 by total variation
    return curves


def test_rdp_to_epsilon_matches_compute_epsilon():
    rng = np.random.default_rng(20240611)
    deltas = [*DELTAS, *(10.0 ** rng.uniform(-12, -1, size=5))]
    for curve in _random_curves(rng):
        for delta in deltas:
            eps_ref, order_ref = rdp_lib.compute_epsilon(
                ORDERS[CONVERTIBLE], curve[CONVERTIBLE], delta
            )
            eps, index = rdp_to_epsilon(
                ORDERS[CONVERTIBLE], curve[CONVERTIBLE], delta, warn=False
            )
            _assert_close(eps, eps_ref, f"delta={delta}")
            if eps_ref > 0:
                assert ORDERS[CONVERTIBLE][index] == order_ref
            # On the whole grid (order 1.01 included) ours can only be smaller.
            eps_full, _ = rdp_to_epsilon(ORDERS, curve, delta, warn=False)
            assert eps_full <= eps_ref * (1 + RTOL) + ATOL

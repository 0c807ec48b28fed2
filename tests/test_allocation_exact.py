"""Random allocation against its exact privacy loss on tiny instances.

The mechanism: one epoch of ``t`` steps (``t = 2, 3``); step ``j`` releases
the sum of its batch's scalar contributions plus ``N(0, z^2)``. One record of
contribution ``c`` (``|c| <= 1``, the clip norm) sits among records of
contribution 0, so the released vector is ``N(c e_K, z^2 I_t)`` with ``K``
uniform on the steps: density ``p_c(x) = (1/t) sum_j phi_z(x - c e_j)``.
(Other records of fixed non-zero contributions would add a vector independent
of ``K`` to the output, a post-processing that cannot increase the loss.)

Pairs of neighbouring data sets, and what each tells:

- **add/remove**: ``(c, c') = (1, 0)`` (remove direction: the record is in
  ``D`` and not in ``D'``) and ``(0, 1)`` (add direction). ``(p_1, p_0)`` is
  the dominating pair the accountant uses (Chua et al., "Balls-and-Bins
  Sampling for DP-SGD", AISTATS 2025, arXiv:2412.16802; Feldman and Shenfeld,
  "Privacy amplification by random allocation", arXiv:2502.08202; see
  ``skdp/accounting/_allocation.py``), and this mechanism attains it: the
  exact epsilon below is the worst case, and the accountant's distance to it
  is its true slack.
- **replace-one**: ``(1, -1)``, the record's contribution +1 replaced by -1
  (in the same slot: its step is uniform either way). Any pair of neighbours
  gives a lower bound on the worst case, so an accountant below this pair's
  epsilon would be wrong. It is the worst among the scalar pairs ``(c, c')``
  of a grid on ``[-1, 1]^2`` (checked below, which includes the add/remove
  pairs: a record of contribution 0 is replaced). Whether vector
  contributions or adaptively chosen queries do worse is not settled here, so
  for replace-one the distance reported is an upper bound on the accountant's
  slack, not the slack itself. For ``t = 2`` the pair is exactly Gaussian DP
  with ``mu = sqrt(2) / z`` (the difference of the two steps is symmetric
  under both): a closed-form check.

The reduction. Write ``x = s 1/sqrt(t) + B d`` with ``B`` an orthonormal
basis of the complement of ``1`` (``s`` real, ``d`` in ``R^(t-1)``). Every
``e_j`` has the same component ``1/sqrt(t)`` along ``1/sqrt(t)``, so
``phi(x - c e_j) = phi(s - c/sqrt(t)) phi_(t-1)(d - c u_j)`` with
``u_j = B^T e_j`` and

    p_c(s, d) = phi(s - c/sqrt(t)) a_c(d),  a_c(d) = (1/t) sum_j phi_(t-1)(d - c u_j).

Given ``d``, the hockey-stick integrand over ``s`` is that of two Gaussians
of the same variance:

    int (p_c - e^eps p_c')_+ ds = a_c(d) delta_mu(eps - r(d)),
    r = log(a_c / a_c'),  mu = |c - c'| / (sqrt(t) z),
    delta_mu(e) = Phi(-e/mu + mu/2) - e^e Phi(-e/mu - mu/2)

(Gaussian DP: Dong, Roth and Su 2022, Corollary 2.13; the same computation
holds for every real ``e``). What is left is a ``t - 1``-dimensional integral
over ``d`` (one-dimensional for ``t = 2``), a trapezoid rule on a uniform grid:
the integrand is smooth and decays like a Gaussian, so the rule converges
exponentially fast; it is checked against direct ``t``-dimensional
quadrature of ``(p_c - e^eps p_c')_+``.

Epochs. Fresh allocations make ``E`` epochs the product of ``E`` copies; the
``s`` coordinates of the epochs together form a Gaussian shift of norm
``sqrt(E) mu``, so

    delta_E(eps) = E[ delta_(sqrt(E) mu)(eps - R_1 - ... - R_E) ],

``R_k`` i.i.d. with the law of ``r(d)``, ``d ~ a_c``. That law is put on a
lattice (each atom's mass split between its two
neighbours in proportion, which keeps its mean: second-order error) and
convolved; checked against the direct double sum over pairs of atoms for
``t = 2``.
"""

import functools
import math
import os

import numpy as np
import pytest
from scipy import optimize, special

from skdp.accounting import GaussianSumEvent, RandomAllocationGaussianEvent, account

# Relations, and the contribution pairs (c, c') whose worst case is computed.
PAIRS = {"add-remove": ((1.0, 0.0), (0.0, 1.0)), "replace-one": ((1.0, -1.0),)}
SIGMAS = (0.5, 1.0, 2.0, 5.0)
DELTAS = (1e-3, 1e-5, 1e-7, 1e-9)
SLOW = os.environ.get("SKDP_SLOW_TESTS") == "1"
# (t, relation, sigma, delta) where the PLD accountant itself takes over a
# minute (its lattices at delta 1e-9): run with SKDP_SLOW_TESTS=1.
SLOW_CASES = {(3, "replace-one", 2.0, 1e-9)}
# Grid of d: this many steps per noise std, out to 1 + _REACH noise stds.
_STEPS_PER_STD = {2: 16, 3: 10}
_REACH = 12.0
# Atoms lighter than the heaviest by this log-factor are dropped (mass < 1e-34).
_LOG_WEIGHT_FLOOR = 80.0
# Lattice of the loss for composing epochs: this step times min(1, mu) of one
# epoch (a flatter loss needs a finer lattice). Convolved directly: sums of
# non-negative products, no FFT rounding on the tiny masses of the tail.
_LOSS_STEP = 2e-3

# How far above the exact epsilon the accountant may be (ratio). Add/remove:
# the dominating pair's exact value, so this is the accountant's slack; the
# PLD's 1% rounding slack plus its lattices, and the Rényi conversion's loss.
# Replace-one: against the (1, -1) pair, which the remove-then-add chain and
# the weak triangle inequality do not see (an upper bound on their slack).
TOLERANCE = {
    ("add-remove", "pld"): 1.02,
    ("add-remove", "rdp"): 1.25,
    ("replace-one", "pld"): 1.32,
    ("replace-one", "rdp"): 2.10,
}
# Replace-one cases whose add hop outgrows its lattice caps at these deltas
# (z = 0.5): the hop takes its own Rényi bound (``_allocation_pld.py``, step
# 5) and the chain lands between the two tolerances (1.38-1.40 measured;
# the mechanism's Rényi bound, reported there before, 1.65-1.82).
RENYI_HOP = {(3, "replace-one", 0.5)}
RENYI_HOP_TOLERANCE = 1.41


# --- exact numerics --------------------------------------------------------------


def _log_gdp_delta(mu, e):
    """``log delta_mu(e)`` for real ``e`` (module docstring), stable in the tails."""
    e = np.asarray(e, dtype=float)
    a = -e / mu + mu / 2.0
    log_a, log_b = special.log_ndtr(a), special.log_ndtr(a - mu)
    # e + log Phi(b) - log Phi(a) <= 0; rounding may put it a hair above.
    gap = np.minimum(e + log_b - log_a, 0.0)
    with np.errstate(divide="ignore"):
        return log_a + np.log(-np.expm1(gap))


def _complement_basis(t):
    """Orthonormal basis (columns) of the complement of the all-ones vector."""
    q, _ = np.linalg.qr(np.column_stack([np.ones(t), np.eye(t)[:, : t - 1]]))
    return q[:, 1:]


def _log_a(points, c, t, z):
    """``log a_c(d)`` at ``points`` (shape (m, t - 1))."""
    u = _complement_basis(t)  # row j is u_j = B^T e_j
    sq = np.sum((points[:, None, :] - c * u[None, :, :]) ** 2, axis=-1)
    return (
        special.logsumexp(-sq / (2.0 * z * z), axis=1)
        - math.log(t)
        - 0.5 * (t - 1) * math.log(2.0 * math.pi * z * z)
    )


@functools.lru_cache(maxsize=64)
def _atoms(t, z, c, c2):
    """Trapezoid atoms of ``d ~ a_c``: log weights and the loss ``r(d)``."""
    step = z / _STEPS_PER_STD[t]
    reach = abs(c) + abs(c2) + _REACH * z
    axis = np.arange(-reach, reach + step / 2.0, step)
    grid = np.meshgrid(*([axis] * (t - 1)), indexing="ij")
    points = np.stack(grid, axis=-1).reshape(-1, t - 1)
    log_a, log_a2 = _log_a(points, c, t, z), _log_a(points, c2, t, z)
    log_w = log_a + (t - 1) * math.log(step)
    keep = log_w > log_w.max() - _LOG_WEIGHT_FLOOR
    return log_w[keep], (log_a - log_a2)[keep]


def _mu(t, z, c, c2, epochs=1):
    return math.sqrt(epochs) * abs(c - c2) / (math.sqrt(t) * z)


def _mu_with_floor(t, z, c, c2, epochs, floor):
    """``mu`` of the ``s`` coordinates and of a Gaussian release beside them.

    The release (``floor``: its noise multiplier, e.g. the probability floor
    of ``DPLogisticRegression``) adds ``c + N(0, floor^2)``, independent of
    the allocation: a Gaussian shift of ``|c - c'| / floor`` that joins the
    ``s`` coordinates' (independent Gaussian shifts compose to the root sum
    of squares, Dong, Roth and Su 2022, Corollary 3.3).
    """
    mu = _mu(t, z, c, c2, epochs)
    if floor is None:
        return mu
    return math.hypot(mu, abs(c - c2) / floor)


def _lattice(log_w, r, step):
    """Masses of the atoms split onto a lattice of ``step`` (mean-preserving)."""
    w = np.exp(log_w)
    lo = r.min()
    position = (r - lo) / step
    index = np.floor(position).astype(int)
    frac = position - index
    size = index.max() + 2
    mass = np.bincount(index, w * (1.0 - frac), size) + np.bincount(
        index + 1, w * frac, size
    )
    return lo, mass


@functools.lru_cache(maxsize=64)
def _loss_law(t, z, c, c2, epochs):
    """Law of ``R_1 + ... + R_E`` on the lattice: (values, masses)."""
    step = _LOSS_STEP * min(1.0, _mu(t, z, c, c2))
    lo, mass = _lattice(*_atoms(t, z, c, c2), step)
    total = mass
    for _ in range(epochs - 1):
        total = np.convolve(total, mass)
    values = epochs * lo + step * np.arange(total.size)
    keep = total > 0
    return values[keep], total[keep]


def exact_delta(t, z, pair, epsilon, epochs=1, floor=None):
    """``H_{e^eps}(p_c^E || p_c'^E)`` of ``pair = (c, c')`` over ``epochs``.

    ``floor``: with a Gaussian release of the contribution of that noise
    multiplier (:func:`_mu_with_floor`).
    """
    c, c2 = pair
    mu = _mu_with_floor(t, z, c, c2, epochs, floor)
    if epochs == 1:
        log_w, r = _atoms(t, z, c, c2)
        log_terms = log_w + _log_gdp_delta(mu, epsilon - r)
        return float(np.exp(special.logsumexp(log_terms)))
    values, masses = _loss_law(t, z, c, c2, epochs)
    return float(np.sum(masses * np.exp(_log_gdp_delta(mu, epsilon - values))))


def exact_epsilon(t, z, relation, delta, epochs=1, floor=None):
    """The smallest epsilon at which every pair of ``relation`` meets ``delta``."""
    roots = []
    for pair in PAIRS[relation]:

        def excess(epsilon, pair=pair):
            return math.log(exact_delta(t, z, pair, epsilon, epochs, floor) / delta)

        if excess(0.0) <= 0:
            roots.append(0.0)
            continue
        hi = 1.0
        while excess(hi) > 0:
            hi *= 2.0
        roots.append(optimize.brentq(excess, 0.0, hi, xtol=1e-9, rtol=1e-10))
    return max(roots)


def _accounted(t, z, relation, delta, epochs, accountant):
    event = RandomAllocationGaussianEvent(t, z, epochs)
    return account(
        [event], delta, neighbouring=relation, warn=False, accountant=accountant
    )


# --- the exact numerics are exact -------------------------------------------------


def _direct_deltas(t, z, pairs, epsilon, step):
    """``int (p_c - e^eps p_c')_+`` of each pair, on a ``t``-dimensional grid.

    Summed slice by slice along ``x_1``; the densities of each contribution
    are computed once per slice and shared by the pairs.
    """
    axis = np.arange(-1.0 - 9.0 * z, 1.0 + 9.0 * z + step / 2.0, step)
    rest = np.stack(np.meshgrid(*([axis] * (t - 1)), indexing="ij"), -1)
    rest = rest.reshape(-1, t - 1)
    norm = t * (2.0 * math.pi * z * z) ** (0.5 * t)
    levels = sorted({c for pair in pairs for c in pair})
    totals = dict.fromkeys(pairs, 0.0)
    for x1 in axis:
        x = np.column_stack([np.full(len(rest), x1), rest])
        density = {
            c: sum(
                np.exp(-np.sum((x - c * np.eye(t)[j]) ** 2, axis=1) / (2 * z * z))
                for j in range(t)
            )
            / norm
            for c in levels
        }
        for c, c2 in pairs:
            gap = density[c] - math.exp(epsilon) * density[c2]
            totals[(c, c2)] += np.sum(np.maximum(gap, 0.0))
    return {pair: total * step**t for pair, total in totals.items()}


@pytest.mark.parametrize("t, step, rtol", [(2, 0.01, 2e-5), (3, 0.1, 2e-4)])
def test_reduction_matches_direct_quadrature(t, step, rtol):
    """Trapezoid in ``t`` dimensions (error O(step^2) at the kink) agrees."""
    z, epsilon = 1.0, 1.0
    pairs = ((1.0, 0.0), (0.0, 1.0), (1.0, -1.0))
    direct = _direct_deltas(t, z, pairs, epsilon, step)
    for pair in pairs:
        assert exact_delta(t, z, pair, epsilon) == pytest.approx(direct[pair], rel=rtol)


@pytest.mark.parametrize("z", [0.5, 2.0])
@pytest.mark.parametrize("epochs", [1, 2])
def test_two_steps_replace_one_is_gaussian_dp(z, epochs):
    """``t = 2``, ``(1, -1)``: Gaussian DP with ``mu = sqrt(2 E) / z``."""
    mu = math.sqrt(2.0 * epochs) / z
    for epsilon in (0.5, 2.0, 6.0):
        expected = math.exp(_log_gdp_delta(mu, epsilon))
        got = exact_delta(2, z, (1.0, -1.0), epsilon, epochs)
        assert got == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("z", [0.5, 1.0, 5.0])
@pytest.mark.parametrize("pair", [(1.0, 0.0), (0.0, 1.0)])
def test_composed_lattice_matches_direct_pairs(z, pair):
    """Two epochs, ``t = 2``: the lattice against the double sum over atoms."""
    log_w, r = _atoms(2, z, *pair)
    mu = _mu(2, z, *pair, epochs=2)
    log_ww = log_w[:, None] + log_w[None, :]
    rr = r[:, None] + r[None, :]
    for epsilon in (0.5 / z, 2.0 / z, 4.0 / z):
        direct = np.exp(special.logsumexp(log_ww + _log_gdp_delta(mu, epsilon - rr)))
        lattice = exact_delta(2, z, pair, epsilon, epochs=2)
        assert lattice == pytest.approx(direct, rel=1e-4)


@pytest.mark.parametrize("t", [2, 3])
def test_plus_minus_one_is_the_worst_scalar_replace_one_pair(t):
    z, epsilon = 1.0, 2.0
    levels = np.linspace(-1.0, 1.0, 5)
    worst = exact_delta(t, z, (1.0, -1.0), epsilon)
    for c in levels:
        for c2 in levels:
            if c != c2:
                assert exact_delta(t, z, (c, c2), epsilon) <= worst * (1 + 1e-9)


# --- the accountant against the exact values --------------------------------------


def _fast_deltas(t, relation, z):
    return [d for d in DELTAS if (t, relation, z, d) not in SLOW_CASES]


def _check_against_exact(t, relation, z, epochs, deltas):
    for delta in deltas:
        exact = exact_epsilon(t, z, relation, delta, epochs)
        spent = {
            name: _accounted(t, z, relation, delta, epochs, name)
            for name in ("pld", "rdp")
        }
        assert spent["pld"].epsilon <= spent["rdp"].epsilon
        for spend in spent.values():
            # (a) Never below the truth: at the reported epsilon, every pair
            # of the relation meets delta.
            for pair in PAIRS[relation]:
                assert exact_delta(t, z, pair, spend.epsilon, epochs) <= delta
            assert spend.epsilon >= exact
            # (b) Close: within the tolerance of the bound that won.
            limit = TOLERANCE[(relation, spend.accountant)]
            if spend.accountant == "pld" and (t, relation, z) in RENYI_HOP:
                limit = RENYI_HOP_TOLERANCE
            assert spend.epsilon <= limit * exact, (delta, spend, exact)


@pytest.mark.parametrize("z", SIGMAS)
@pytest.mark.parametrize("relation", sorted(PAIRS))
@pytest.mark.parametrize("t", [2, 3])
def test_one_epoch_never_below_the_exact_epsilon_and_close(t, relation, z):
    _check_against_exact(t, relation, z, 1, _fast_deltas(t, relation, z))


@pytest.mark.parametrize("z", SIGMAS)
@pytest.mark.parametrize("relation", sorted(PAIRS))
@pytest.mark.parametrize("t", [2, 3])
def test_two_epochs_never_below_the_exact_epsilon_and_close(t, relation, z):
    _check_against_exact(t, relation, z, 2, _fast_deltas(t, relation, z))


@pytest.mark.skipif(not SLOW, reason="slow PLD at delta 1e-9: SKDP_SLOW_TESTS=1")
@pytest.mark.parametrize("epochs", [1, 2])
@pytest.mark.parametrize("t, relation, z, delta", sorted(SLOW_CASES))
def test_slow_cases_never_below_the_exact_epsilon_and_close(
    t, relation, z, delta, epochs
):
    _check_against_exact(t, relation, z, epochs, [delta])


# (t, z, floor noise multiplier, epochs, delta): the allocation with a
# Gaussian release, as a default balls-and-bins fit releases its probability
# floor beside its epochs.
FLOOR_CASES = [
    (2, 1.0, 2.0, 1, 1e-5),
    (2, 2.0, 5.0, 2, 1e-7),
    (3, 1.0, 3.0, 1, 1e-5),
]


@pytest.mark.parametrize("relation", sorted(PAIRS))
@pytest.mark.parametrize("t, z, floor, epochs, delta", FLOOR_CASES)
def test_with_a_gaussian_release_never_below_the_exact_epsilon_and_close(
    t, z, floor, epochs, delta, relation
):
    events = [
        RandomAllocationGaussianEvent(t, z, epochs),
        GaussianSumEvent(floor),
    ]
    spent = {
        name: account(events, delta, neighbouring=relation, warn=False, accountant=name)
        for name in ("pld", "rdp")
    }
    exact = exact_epsilon(t, z, relation, delta, epochs, floor)
    # The allocation's PLD composed with the release's, not the Rényi bound.
    assert spent["pld"].accountant == "pld"
    assert spent["pld"].epsilon < spent["rdp"].epsilon
    for pair in PAIRS[relation]:
        assert exact_delta(t, z, pair, spent["pld"].epsilon, epochs, floor) <= delta
    assert exact <= spent["pld"].epsilon <= TOLERANCE[(relation, "pld")] * exact


def _print_table():
    """The accountant's ratio to the exact epsilon on the tested grid."""
    print("t E relation     sigma   delta   exact  pld(name) ratio  rdp ratio")
    for epochs in (1, 2):
        for t in (2, 3):
            for relation in sorted(PAIRS):
                for z in SIGMAS:
                    for delta in DELTAS:
                        exact = exact_epsilon(t, z, relation, delta, epochs)
                        pld = _accounted(t, z, relation, delta, epochs, "pld")
                        rdp = _accounted(t, z, relation, delta, epochs, "rdp")
                        print(
                            f"{t} {epochs} {relation:11s} {z:5g} {delta:7.0e} "
                            f"{exact:8.4f} {pld.epsilon:8.4f}({pld.accountant}) "
                            f"{pld.epsilon / exact:6.4f} {rdp.epsilon:8.4f} "
                            f"{rdp.epsilon / exact:6.4f}"
                        )


if __name__ == "__main__":
    # The table of the report: python tests/test_allocation_exact.py
    _print_table()

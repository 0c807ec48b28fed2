"""Rényi-DP of random allocation (balls-and-bins batches) with Gaussian noise.

The mechanism (:class:`~skdp.accounting.RandomAllocationGaussianEvent`): in
every epoch each record goes to one of ``t`` steps, uniformly and
independently of the others; step ``j`` releases the sum of its batch's
clipped contributions (norm at most 1 in clip-norm units) plus ``N(0, z^2 I)``.

**Dominating pair [S].** Under add/remove, one epoch of this mechanism, run on
adaptively chosen queries, is dominated in both directions by the pair

    P = (1/t) sum_j N(e_j, z^2 I_t)    (the record is there)
    Q = N(0, z^2 I_t)                   (it is not)

(Chua et al., "Balls-and-bins sampling for DP-SGD", AISTATS 2025, Sec. 3:
the dominating pair of adaptive batch linear queries under balls-and-bins;
Feldman and Shenfeld, "Privacy amplification by random allocation", 2025,
reduce the adaptive random allocation of any mechanism to this one). Epochs
use fresh allocations, so their Rényi curves add (Mironov 2017, Prop. 1).
The likelihood ratio is ``P/Q (x) = Ybar = (1/t) sum_j Y_j`` with
``Y_j = exp((x_j - 1/2) / z^2)``; under ``Q`` the ``Y_j`` are i.i.d.
log-normal, ``log Y_j ~ N(-1/(2 z^2), 1/z^2)``, with mean 1.

**Remove direction, exact at integer orders [D].**
``D_a(P || Q) = log E_Q[Ybar^a] / (a - 1)``. Expanding the a-th power of the
sum by the multinomial theorem and using independence,
``E_Q[prod_j Y_j^(a_j)] = prod_j exp(a_j (a_j - 1) / (2 z^2))``, so

    E_Q[Ybar^a] = t^-a sum_{a_1+...+a_t = a} (a; a_1..a_t)
                  prod_j exp(a_j (a_j - 1) / (2 z^2))
                = a! [x^a] (sum_k c_k x^k)^t,  c_k = exp(k (k-1) / (2 z^2)) / (k! t^k)

(the same sum as Feldman and Shenfeld 2025, "Privacy amplification by random
allocation", arXiv:2502.08202, written over partitions there; its number
there is not verified here, and the expansion above is the proof). The
coefficients of the truncated power series are computed
exactly (all terms positive, log space, binary powering: no cancellation).
A fractional order uses the next integer order (Rényi divergence does not
decrease with the order: van Erven and Harremoës 2014, Theorem 3).

**Add direction, by quadrature [D].**
``D_a(Q || P) = log E_Q[Ybar^-m] / m`` with ``m = a - 1``. For ``y > 0``,
``y^-m = Gamma(m)^-1 int_0^inf s^(m-1) exp(-s y) ds``; by Fubini and
independence,

    E_Q[Ybar^-m] = Gamma(m)^-1 int_0^inf s^(m-1) phi(s/t)^t ds,
    phi(u) = E[exp(-u Y)]  (the Laplace transform of one log-normal).

``phi`` is a one-dimensional Gaussian integral (trapezoid rule on a fine grid,
spectrally accurate for this smooth integrand); the outer integral runs on a
grid of ``log s`` over ``[s_lo, s_hi]``. The two pieces outside are bounded,
not dropped: below ``s_lo``, ``phi <= 1`` gives at most
``s_lo^m / Gamma(m + 1)``; above ``s_hi`` the piece equals
``E[Ybar^-m P(Gamma_m > s_hi Ybar)]``, decreasing in ``Ybar``, and
``Ybar >= G = exp(mean_j log Y_j)`` (AM-GM) with ``log G ~ N(-1/(2 z^2),
1/(t z^2))``, so it is at most ``E[G^-m P(Gamma_m > s_hi G)]`` (a
one-dimensional Gaussian integral). Orders below 2 use order 2.
The result is numerically exact (a relative 1e-9 allowance is added for the
quadrature); tests check it against closed forms (``t = 1``) and direct
two-dimensional quadrature (``t = 2``).

**Always valid, used as caps [D].** The record is in exactly one step of the
epoch, so given the (data-independent) allocation the epoch is one Gaussian
mechanism of sensitivity 1: ``a / (2 z^2)`` in both directions (joint
convexity of ``p^a q^(1-a)`` over the allocation). In the add direction,
``log(Q/P) = -log Ybar <= -(1/t) sum_j log Y_j`` (AM-GM), a Gaussian privacy
loss ``N(mu^2/2, mu^2)`` with ``mu^2 = 1/(t z^2)`` shifted by
``(1 - 1/t) / (2 z^2)``, hence ``D_a(Q||P) <= (1 - 1/t)/(2 z^2) + a/(2 t z^2)``.

**Replace-one [D].** The replaced record keeps its slot: its step is uniform
and independent of the data either way. Replacing ``x`` by ``x'`` is removing
``x`` (the remove direction) then adding ``x'`` (the add direction), both from
the data set without the record, on which the same mechanism is defined. The
weak triangle inequality (Mironov 2017, Proposition 11, ``p = q = 2``) gives

    rho(a) <= (a - 1/2)/(a - 1) * rho_remove(2a) + rho_add(2a - 1),

capped by the plain Gaussian bound ``2 a / z^2`` (the step's sum moves by at
most 2 clip norms).
"""

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import special

from ._cache import bounded_cache
from ._neighbouring import Neighbouring
from ._policy import DEFAULT_POLICY
from ._rdp import _as_orders, log_sum_exp, weak_triangle

__all__ = [
    "allocation_rdp",
    "allocation_rdp_add",
    "allocation_rdp_remove",
]

# Highest integer order of the exact remove-direction series, the range the
# public curves promise exact; above it the Gaussian cap (the series costs
# O(order^2 log t); docs/benchmarks.md, "Random allocation accounting").
_MAX_SERIES_ORDER = 512
# Quadrature grids of the add direction: log-normal in standard units, and
# log s of the Laplace integral (its two tails are bounded, not dropped). The
# allowance below rests on their accuracy.
_Z_GRID = np.arange(-12.0, 12.0 + 1e-9, 0.02)
_LOG_S_LO, _LOG_S_HI, _LOG_S_STEP = -30.0, 25.0, 0.01
# Rows of the log s grid evaluated at once (memory only; results do not
# depend on it).
_LOG_S_CHUNK = 256
# Relative allowance added to each quadrature moment (its accuracy is far
# better; see tests/test_allocation_accounting.py).
_QUADRATURE_ALLOWANCE = 1e-9


def _gaussian_cap(orders, z):
    """``a / (2 z^2)``: one Gaussian step of sensitivity 1 an epoch."""
    return orders / (2.0 * z * z)


def _log_series_product(a, b):
    """Log coefficients of the product of two series (log coefficients a, b).

    Truncated at the common length; all coefficients positive, so the
    log-sum-exp is exact up to rounding. Row ``n`` of the lagged matrix holds
    ``b[n - k]`` at column ``k`` (``-inf`` for ``k > n``).
    """
    size = a.size
    padded = np.concatenate([np.full(size - 1, -np.inf), b])
    shifted = sliding_window_view(padded, size)[:, ::-1]
    return log_sum_exp(a[None, :] + shifted, axis=1)


@bounded_cache(DEFAULT_POLICY.allocation_cache_size)
def _log_remove_moments(steps, z):
    """``log E_Q[Ybar^k]`` for ``k = 0 .. _MAX_SERIES_ORDER`` (exact series).

    ``E_Q[Ybar^k] = k! [x^k] (sum_j c_j x^j)^t`` with ``log c_j = j (j-1) /
    (2 z^2) - log j! - j log t`` (module docstring); the power is taken by
    repeated squaring of the truncated series.
    """
    k = np.arange(_MAX_SERIES_ORDER + 1, dtype=float)
    base = (
        k * (k - 1.0) / (2.0 * z * z) - special.gammaln(k + 1.0) - k * math.log(steps)
    )
    result = np.full(k.size, -np.inf)
    result[0] = 0.0
    power = int(steps)
    while power:
        if power & 1:
            result = _log_series_product(result, base)
        power >>= 1
        if power:
            base = _log_series_product(base, base)
    moments = special.gammaln(k + 1.0) + result
    moments.setflags(write=False)
    return moments


def allocation_rdp_remove(orders, steps_per_epoch, noise_multiplier):
    """RDP of one epoch of random allocation, remove direction ``D_a(P || Q)``.

    Exact at integer orders up to 512 (the multinomial expansion of the
    module docstring); a fractional order takes the next integer's value
    (monotonicity in the order), and orders beyond 512 the Gaussian cap
    ``a / (2 z^2)``.

    Parameters
    ----------
    orders : array-like of float
    steps_per_epoch : int
    noise_multiplier : float

    Returns
    -------
    rdp : ndarray of shape (n_orders,)
    """
    orders = _as_orders(orders)
    z = float(noise_multiplier)
    cap = _gaussian_cap(orders, z)
    if steps_per_epoch == 1:
        return cap
    moments = _log_remove_moments(int(steps_per_epoch), z)
    integer = np.ceil(orders - 1e-12)
    inside = integer <= _MAX_SERIES_ORDER
    index = np.where(inside, integer, 2).astype(int)
    exact = moments[index] / (index - 1.0)
    # Rounding allowance: a relative 1e-12 on the moment.
    exact = exact + 1e-12 / (index - 1.0)
    return np.where(inside, np.minimum(exact, _gaussian_cap(integer, z)), cap)


@bounded_cache(DEFAULT_POLICY.allocation_cache_size)
def _add_direction_grid(steps, z):
    """``t log phi(s / t)`` on the grid of ``log s`` (module docstring)."""
    mean, sd = -0.5 / (z * z), 1.0 / z
    y = np.exp(mean + sd * _Z_GRID)
    log_s = np.arange(_LOG_S_LO, _LOG_S_HI + 1e-9, _LOG_S_STEP)
    out = np.empty(log_s.size)
    for start in range(0, log_s.size, _LOG_S_CHUNK):
        u = np.exp(log_s[start : start + _LOG_S_CHUNK]) / steps
        log_phi = _log_laplace(u, y)
        out[start : start + _LOG_S_CHUNK] = steps * log_phi
    out.setflags(write=False)
    log_s.setflags(write=False)
    return log_s, out


#: Below this, ``E[exp(-uY)]`` is summed in the log domain (no underflow).
_TINY_MASS = 1e-250
#: Normal weights of the nodes ``_Z_GRID`` (summing to 1), and their logs.
_WEIGHTS = np.exp(-0.5 * _Z_GRID**2)
_WEIGHTS /= _WEIGHTS.sum()
_LOG_WEIGHTS = np.log(_WEIGHTS)
# Where every ``u`` of a block is known to fall on one side of a switch of
# ``_log_laplace`` (module constants of that test, far from its edges):
# ``u E[Y] <= _SURELY_NEAR_ONE`` gives a computed mean above 1/2 (``exp(-x)
# >= 1 - x``), and ``u min Y >= _SURELY_TINY`` one below ``_TINY_MASS``
# (``exp(-580) < 1e-251``), whatever the rounding of a sum of 1201 terms.
_SURELY_NEAR_ONE = 0.49
_SURELY_TINY = 580.0


def _log_laplace(u, y):
    """``log E[exp(-u Y)]`` for each ``u``, ``Y`` on the nodes ``y``.

    One pass of ``exp(-u y)`` gives the mean ``E[exp(-uY)]``. Each ``u``
    then takes the evaluation of the same quadrature sum that is accurate
    where it is: above a mean of 1/2 (small ``u``), ``log1p`` of
    ``-E[1 - exp(-uY)]`` by ``expm1``; where the mean underflows towards 0,
    a log-sum-exp; elsewhere the log of the mean. A block of ``u`` that is
    surely all on one side skips the pass (it only chooses the evaluation).
    """
    uy = u[:, None] * y[None, :]
    if u.max() * float(y @ _WEIGHTS) * (1.0 + 1e-6) <= _SURELY_NEAR_ONE:
        return np.log1p(np.expm1(-uy) @ _WEIGHTS)
    if u.min() * y.min() >= _SURELY_TINY:
        return _log_mean_tiny(uy)
    mass = np.exp(-uy) @ _WEIGHTS
    out = np.log(np.maximum(mass, _TINY_MASS))
    near_one = mass > 0.5
    if near_one.any():
        out[near_one] = np.log1p(np.expm1(-uy[near_one]) @ _WEIGHTS)
    tiny = mass < _TINY_MASS
    if tiny.any():
        out[tiny] = _log_mean_tiny(uy[tiny])
    return out


def _log_mean_tiny(uy):
    """``log E[exp(-u Y)]`` per row of ``uy`` by a log-sum-exp."""
    terms = _LOG_WEIGHTS[None, :] - uy
    top = terms.max(axis=1)
    return top + np.log(np.exp(terms - top[:, None]).sum(axis=1))


def _log_add_moment(m, steps, z):
    """An upper bound on ``log E_Q[Ybar^-m]`` for ``m >= 1`` (quadrature)."""
    log_s, t_log_phi = _add_direction_grid(steps, z)
    main = (
        log_sum_exp(m * log_s + t_log_phi) + math.log(_LOG_S_STEP) - special.gammaln(m)
    )
    left = m * _LOG_S_LO - special.gammaln(m + 1.0)
    # Right piece: E[G^-m P(Gamma_m > s_hi G)], log G ~ N(mean, sd^2 / t).
    log_g = -0.5 / (z * z) + _Z_GRID / (z * math.sqrt(steps))
    with np.errstate(divide="ignore"):
        log_tail = np.log(special.gammaincc(m, np.exp(_LOG_S_HI + log_g)))
    right = log_sum_exp(_LOG_WEIGHTS - m * log_g + log_tail)
    total = np.logaddexp(np.logaddexp(main, left), right)
    return float(total) + _QUADRATURE_ALLOWANCE


def allocation_rdp_add(orders, steps_per_epoch, noise_multiplier):
    """RDP of one epoch of random allocation, add direction ``D_a(Q || P)``.

    Numerically exact by the Laplace-transform quadrature of the module
    docstring, capped by the Gaussian bound ``a / (2 z^2)`` and the shifted
    Gaussian bound ``(1 - 1/t)/(2 z^2) + a/(2 t z^2)`` (AM-GM). Orders below 2
    use order 2 (monotonicity in the order).

    Parameters
    ----------
    orders, steps_per_epoch, noise_multiplier
        As in :func:`allocation_rdp_remove`.

    Returns
    -------
    rdp : ndarray of shape (n_orders,)
    """
    orders = _as_orders(orders)
    z, t = float(noise_multiplier), int(steps_per_epoch)
    lifted = np.maximum(orders, 2.0)
    cap = np.minimum(
        _gaussian_cap(lifted, z),
        (1.0 - 1.0 / t) / (2.0 * z * z) + lifted / (2.0 * t * z * z),
    )
    if t == 1:
        return np.minimum(cap, _gaussian_cap(orders, z))
    exact = np.array([_log_add_moment(a - 1.0, t, z) / (a - 1.0) for a in lifted])
    return np.minimum(exact, cap)


def allocation_rdp(orders, steps_per_epoch, noise_multiplier, neighbouring):
    """RDP of one epoch of random allocation under ``neighbouring``.

    Add/remove: the larger of the two directions. Replace-one: remove then
    add, by the weak triangle inequality, capped by the plain Gaussian bound
    of the replace-one sensitivity, ``2 a / z^2`` (module docstring). Kept
    for the most recent ``(orders, steps, noise, relation)`` asked (a
    calibration and the fits after it ask the same curves again).

    Parameters
    ----------
    orders : array-like of float
    steps_per_epoch : int
    noise_multiplier : float
    neighbouring : {"replace-one", "add-remove"}

    Returns
    -------
    rdp : ndarray of shape (n_orders,)
    """
    orders = _as_orders(orders)
    relation = Neighbouring.parse(neighbouring)
    curve = _allocation_curve(
        orders, int(steps_per_epoch), float(noise_multiplier), relation
    )
    return curve.copy()


@bounded_cache(
    DEFAULT_POLICY.allocation_cache_size,
    key=lambda orders, t, z, relation: (orders.tobytes(), t, z, relation),
)
def _allocation_curve(orders, t, z, relation):
    """:func:`allocation_rdp` on parsed arguments (cached)."""
    if relation is Neighbouring.ADD_REMOVE:
        curve = np.maximum(
            allocation_rdp_remove(orders, t, z), allocation_rdp_add(orders, t, z)
        )
    else:
        chained = weak_triangle(
            orders,
            lambda at: allocation_rdp_remove(at, t, z),
            lambda at: allocation_rdp_add(at, t, z),
        )
        curve = np.minimum(chained, _gaussian_cap(orders, z / relation.sum_factor))
    curve.setflags(write=False)
    return curve

"""Rényi-DP curves of the basic mechanisms and their conversion to (eps, delta).

Pure numpy/scipy. Every function takes an array of Rényi orders and returns the
RDP curve on those orders. Formulas cite the paper and the result they come from.
"""

import math
import warnings

import numpy as np
from scipy import special

from ..exceptions import OrderGridWarning
from ._neighbouring import Neighbouring

__all__ = [
    "DEFAULT_ORDERS",
    "gaussian_rdp",
    "log_sum_exp",
    "poisson_gaussian_rdp",
    "poisson_gaussian_rdp_replace_one",
    "pure_dp_rdp",
    "rdp_to_epsilon",
]

#: Default grid of Rényi orders: dense where small epsilons want it, sparse
#: towards the large orders that tiny epsilons need.
DEFAULT_ORDERS = np.concatenate(
    [
        [1.01, 1.02, 1.05, 1.1, 1.15, 1.2],
        np.arange(1.25, 10.0 + 1e-9, 0.25),
        np.arange(11.0, 65.0),
        [80.0, 96.0, 128.0, 192.0, 256.0, 384.0, 512.0, 768.0, 1024.0],
        [1536.0, 2048.0, 3072.0, 4096.0, 8192.0, 16384.0, 32768.0, 65536.0],
    ]
)

# Numerical method of the fractional-order series (Mironov, Talwar, Zhang
# 2019, Sec. 3.3): a term exp(30) below the running total, with both series
# decreasing, ends the sum (their stopping rule)...
_SERIES_LOG_TOL = 30.0
# ... the terms are evaluated in vectorised chunks (the result does not depend
# on the chunk) ...
_SERIES_CHUNK = 256
# ... and a series that has not converged by then is reported as infinite.
_SERIES_MAX_TERMS = 100_000


def _as_orders(orders):
    orders = np.asarray(orders, dtype=float)
    if orders.ndim != 1 or orders.size == 0 or np.any(orders <= 1):
        raise ValueError("orders must be a non-empty 1-d array of values > 1.")
    return orders


def gaussian_rdp(orders, noise_multiplier):
    """RDP of the Gaussian mechanism.

    ``rho(a) = a / (2 z^2)`` with ``z`` the noise std divided by the L2
    sensitivity (Mironov 2017, "Rényi differential privacy", Proposition 7).

    Parameters
    ----------
    orders : array-like of float
        Rényi orders, all > 1.
    noise_multiplier : float
        Noise standard deviation divided by the L2 sensitivity under the
        neighbouring relation in force.

    Returns
    -------
    rdp : ndarray of shape (n_orders,)
    """
    orders = _as_orders(orders)
    if noise_multiplier <= 0:
        return np.full_like(orders, np.inf)
    return orders / (2.0 * noise_multiplier**2)


def log_sum_exp(x, axis=None):
    """``log sum exp(x)`` along ``axis`` (every row, or all of a 1-d ``x``).

    The largest term is taken out of the sum (Blanchard, Higham and Higham
    2021, "Accurately computing the log-sum-exp and softmax functions"):
    ``max + log(count) + log1p(sum of the others' exp(x - max) / count)``,
    the same arithmetic as ``scipy.special.logsumexp`` without its general
    checks. A result that is not finite (no finite term) is computed as
    ``log(sum(exp(x)))``.
    """
    top = np.max(x, axis=axis, keepdims=True)
    at_top = x == top
    count = np.sum(at_top, axis=axis, keepdims=True, dtype=x.dtype)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        rest = np.exp(np.where(at_top, -np.inf, x) - top)
        total = np.sum(rest, axis=axis, keepdims=True, dtype=x.dtype)
        total = np.where(total == 0, total, total / count)
        out = np.log1p(total) + np.log(count) + top
        if not np.isfinite(out).all():
            direct = np.log(np.sum(np.exp(x), axis=axis, keepdims=True))
            out = np.where(np.isfinite(out), out, direct)
    return out.reshape(()) if axis is None else np.squeeze(out, axis=axis)


def _log_a_int(q, sigma, alpha):
    """Log A_alpha for integer alpha (Mironov, Talwar, Zhang 2019, Sec. 3.2)."""
    i = np.arange(alpha + 1, dtype=float)
    log_terms = (
        special.gammaln(alpha + 1)
        - special.gammaln(i + 1)
        - special.gammaln(alpha - i + 1)
        + i * math.log(q)
        + (alpha - i) * math.log1p(-q)
        + (i * i - i) / (2.0 * sigma**2)
    )
    return log_sum_exp(log_terms)


def _log_a_frac(q, sigma, alpha):
    """Log A_alpha for fractional alpha (Mironov, Talwar, Zhang 2019, Sec. 3.3).

    A_alpha splits at ``z0`` into two binomial series in erfc terms. The terms
    are summed in absolute value, which can only overestimate A_alpha (the
    conservative choice, also made by dp_accounting), until a term falls
    ``exp(-30)`` below the running total while both series decrease.
    """
    z0 = sigma**2 * math.log(1.0 / q - 1.0) + 0.5
    log_q, log_1mq = math.log(q), math.log1p(-q)
    log_coef_top = special.gammaln(alpha + 1)
    total = -np.inf
    last = (-np.inf, -np.inf)
    for start in range(0, _SERIES_MAX_TERMS, _SERIES_CHUNK):
        i = np.arange(start, start + _SERIES_CHUNK, dtype=float)
        j = alpha - i
        log_coef = log_coef_top - special.gammaln(i + 1) - special.gammaln(j + 1)
        # P(N(i, sigma^2) <= z0) and P(N(j, sigma^2) > z0), in log space.
        log_e0 = special.log_ndtr((z0 - i) / sigma)
        log_e1 = special.log_ndtr((j - z0) / sigma)
        s0 = log_coef + i * log_q + j * log_1mq + (i * i - i) / (2 * sigma**2) + log_e0
        s1 = log_coef + j * log_q + i * log_1mq + (j * j - j) / (2 * sigma**2) + log_e1
        running = np.logaddexp.accumulate(np.logaddexp(s0, s1))
        running = np.logaddexp(running, total)
        prev0 = np.concatenate([[last[0]], s0[:-1]])
        prev1 = np.concatenate([[last[1]], s1[:-1]])
        done = (
            (s0 < prev0)
            & (s1 < prev1)
            & (np.maximum(s0, s1) < running - _SERIES_LOG_TOL)
        )
        if done.any():
            return running[np.argmax(done)]
        total, last = running[-1], (s0[-1], s1[-1])
    return np.inf


def poisson_gaussian_rdp(orders, sampling_rate, noise_multiplier):
    """RDP of the Poisson-subsampled Gaussian mechanism, add/remove neighbours.

    Each record joins the batch independently with probability ``q``; the sum of
    the batch's contributions (each of L2 norm at most 1) gets Gaussian noise of
    std ``z``. ``rho(a) = log(A_a) / (a - 1)`` where, for integer ``a``,
    ``A_a = sum_i C(a, i) q^i (1-q)^(a-i) exp((i^2 - i) / (2 z^2))``
    (Mironov, Talwar, Zhang 2019, "Rényi differential privacy of the sampled
    Gaussian mechanism", Sec. 3.2; fractional ``a``: Sec. 3.3). The bound holds
    in both directions (adding or removing the record), their Theorem 5.

    Parameters
    ----------
    orders : array-like of float
    sampling_rate : float in [0, 1]
    noise_multiplier : float
        Noise std divided by the per-record contribution bound (clip norm).

    Returns
    -------
    rdp : ndarray of shape (n_orders,)
    """
    orders = _as_orders(orders)
    if not 0.0 <= sampling_rate <= 1.0:
        raise ValueError(f"sampling_rate must be in [0, 1], got {sampling_rate}.")
    if noise_multiplier < 0:
        raise ValueError(f"noise_multiplier must be >= 0, got {noise_multiplier}.")
    if sampling_rate == 0:
        return np.zeros_like(orders)
    if noise_multiplier == 0:
        return np.full_like(orders, np.inf)
    if sampling_rate == 1:
        return gaussian_rdp(orders, noise_multiplier)
    out = np.empty_like(orders)
    for k, alpha in enumerate(orders):
        if float(alpha).is_integer():
            log_a = _log_a_int(sampling_rate, noise_multiplier, int(alpha))
        else:
            log_a = _log_a_frac(sampling_rate, noise_multiplier, float(alpha))
        out[k] = log_a / (alpha - 1.0)
    return out


def poisson_gaussian_rdp_replace_one(orders, sampling_rate, noise_multiplier):
    """RDP of the Poisson-subsampled Gaussian mechanism, replace-one neighbours.

    Replacing record x by x' is removing x then adding x'. The weak triangle
    inequality of Rényi divergence (Mironov 2017, Proposition 11 with p = q = 2)
    gives ``rho(a) <= (a - 1/2)/(a - 1) * rho_ar(2a) + rho_ar(2a - 1)``, with
    ``rho_ar`` the add/remove curve, which bounds both directions (Mironov,
    Talwar, Zhang 2019, Theorem 5). Valid and conservative: the add/remove
    relation gives a tighter number for the same run.

    Parameters
    ----------
    orders, sampling_rate, noise_multiplier
        As in :func:`poisson_gaussian_rdp` (the same units: the clip norm).

    Returns
    -------
    rdp : ndarray of shape (n_orders,)
    """
    orders = _as_orders(orders)
    if sampling_rate == 1:
        # Full batch: a plain Gaussian of the replace-one sum sensitivity.
        factor = Neighbouring.REPLACE_ONE.sum_factor
        return gaussian_rdp(orders, noise_multiplier / factor)

    def directions(at):
        return poisson_gaussian_rdp(at, sampling_rate, noise_multiplier)

    return weak_triangle(orders, directions, directions)


def weak_triangle(orders, remove, add):
    """Replace-one RDP from the two directions of add/remove, chained.

    Replacing ``x`` by ``x'`` is removing ``x`` then adding ``x'``; the weak
    triangle inequality of Rényi divergence (Mironov 2017, Proposition 11 with
    ``p = q = 2``) gives ``rho(a) <= (a - 1/2)/(a - 1) * remove(2a) +
    add(2a - 1)``.

    Parameters
    ----------
    orders : ndarray of shape (n_orders,)
    remove, add : callable
        RDP curve of each direction on an array of orders.

    Returns
    -------
    rdp : ndarray of shape (n_orders,)
    """
    return (orders - 0.5) / (orders - 1.0) * remove(2.0 * orders) + add(
        2.0 * orders - 1.0
    )


def pure_dp_rdp(orders, epsilon, *, bounded_range=False):
    """RDP of an ``epsilon``-DP mechanism (e.g. one exponential-mechanism draw).

    ``rho(a) <= min(eps, a eps^2 / 2)`` (Mironov 2017, Proposition 3; Bun and
    Steinke 2016, Proposition 3.3). If the mechanism is ``epsilon``-bounded
    range (the exponential mechanism with score sensitivity ``epsilon / 2`` is),
    it is ``eps^2 / 8``-zCDP (Cesar and Rogers 2021, Lemma 3.2), so
    ``rho(a) <= a eps^2 / 8`` also holds.

    Parameters
    ----------
    orders : array-like of float
    epsilon : float
        The pure-DP parameter (for bounded range: the width of the range).
    bounded_range : bool, default=False
        Whether the bounded-range bound may be used as well.

    Returns
    -------
    rdp : ndarray of shape (n_orders,)
    """
    orders = _as_orders(orders)
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}.")
    rdp = np.minimum(epsilon, orders * epsilon**2 / 2.0)
    if bounded_range:
        rdp = np.minimum(rdp, orders * epsilon**2 / 8.0)
    return rdp


def rdp_to_epsilon(orders, rdp, delta, *, warn=True):
    """Convert an RDP curve to (epsilon, delta)-DP, minimised over the orders.

    ``eps(a) = rho(a) + log((a-1)/a) - (log(delta) + log(a)) / (a-1)``
    (Balle, Barthe, Gaboardi, Hsu, Sato 2020, Theorem 21; Canonne, Kamath,
    Steinke 2020, Proposition 12). If ``delta^2 > 1 - exp(-rho(a))`` the
    Bretagnolle-Huber bound on total variation already gives ``eps = 0``.

    Parameters
    ----------
    orders : array-like of float
    rdp : array-like of float
        RDP curve on ``orders``.
    delta : float in (0, 1)
    warn : bool, default=True
        Warn with :class:`~skdp.exceptions.OrderGridWarning` when the best order
        is the smallest or largest of the grid (a wider grid could do better).

    Returns
    -------
    epsilon : float
    index : int
        Index of the order attaining the minimum.
    """
    orders = _as_orders(orders)
    rdp = np.asarray(rdp, dtype=float)
    if rdp.shape != orders.shape:
        raise ValueError("rdp and orders must have the same shape.")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}.")
    if np.any(rdp < 0):
        raise ValueError("An RDP curve cannot be negative.")
    with np.errstate(over="ignore", invalid="ignore"):
        eps = (
            rdp
            + np.log1p(-1.0 / orders)
            - (math.log(delta) + np.log(orders)) / (orders - 1.0)
        )
        eps = np.where(delta**2 + np.expm1(-rdp) > 0, 0.0, eps)
    eps = np.where(np.isnan(eps), np.inf, eps)
    index = int(np.argmin(eps))
    epsilon = max(0.0, float(eps[index]))
    if warn and np.isfinite(epsilon) and epsilon > 0 and index in (0, orders.size - 1):
        warnings.warn(
            f"The best Rényi order ({orders[index]:g}) is at the end of the order "
            "grid; a wider grid could give a smaller epsilon. The reported "
            "epsilon is still a valid upper bound.",
            OrderGridWarning,
            stacklevel=2,
        )
    return epsilon, index

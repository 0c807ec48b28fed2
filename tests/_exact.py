"""Exact Rényi divergences of small mechanisms, by careful numerics (tests only).

Everything works in log space. Quadratures are trapezoid rules on uniform grids
wide enough that the integrand is negligible (``< max - _TAIL_DROP`` in log
space) at both ends, which is checked, never assumed: for the smooth, rapidly
decaying integrands met here (Gaussian mixtures and their push-forwards) the
trapezoid rule converges exponentially fast in ``1 / step``, so the results are
exact to far better than the ``1e-6`` relative tolerance the soundness tests
allow. The tests check this against closed forms (integer orders of the
subsampled Gaussian, linear-Gaussian chains).

D_a(P || Q) = 1 / (a - 1) * log E_Q[(P / Q)^a] = 1 / (a - 1) * log int p^a q^(1-a).
"""

import math

import numpy as np
from scipy.special import logsumexp

__all__ = [
    "gaussian_renyi",
    "log_mixture_ratio",
    "propagate_log_density",
    "renyi_discrete",
    "renyi_gaussian_mixtures",
    "renyi_on_grid",
]

# The log-integrand must sit this far below its maximum at both grid ends.
_TAIL_DROP = 50.0
# Extra width (in standard deviations) around the region where mass can sit.
_MARGIN = 40.0
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class QuadratureError(RuntimeError):
    """The grid was too narrow: the integrand is not negligible at an end."""


def _check_tails(log_f, what):
    top = np.max(log_f)
    if not np.isfinite(top):
        raise QuadratureError(f"{what}: the log-integrand has no finite maximum.")
    if max(log_f[0], log_f[-1]) > top - _TAIL_DROP:
        raise QuadratureError(f"{what}: the integrand is not negligible at the ends.")


def gaussian_renyi(order, mean_diff, std):
    """D_a between two Gaussians of the same covariance ``std^2 I``."""
    return order * float(np.sum(np.square(mean_diff))) / (2.0 * std**2)


def renyi_discrete(order, log_p, log_q):
    """Exact D_a between two distributions on a finite set (log-probabilities)."""
    log_p = np.asarray(log_p, dtype=float)
    log_q = np.asarray(log_q, dtype=float)
    return float(logsumexp(order * log_p + (1.0 - order) * log_q)) / (order - 1.0)


def log_mixture_ratio(t, weights, means):
    """``log(mix(t) / phi(t))`` for a 1-d mixture of unit-variance Gaussians.

    ``mix = sum_k w_k N(m_k, 1)`` and ``phi = N(0, 1)``, all in standardised
    units (positions and means divided by the common standard deviation). The
    ratio is ``sum_k w_k exp(m_k t - m_k^2 / 2)``: no cancellation of large
    quadratic terms, however far ``t`` is.
    """
    weights = np.asarray(weights, dtype=float)
    means = np.asarray(means, dtype=float)
    keep = weights > 0
    log_w, means = np.log(weights[keep]), means[keep]
    t = np.asarray(t, dtype=float)
    terms = log_w[:, None] + means[:, None] * t[None, :] - 0.5 * means[:, None] ** 2
    return logsumexp(terms, axis=0)


def renyi_gaussian_mixtures(order, p, q, std=1.0):
    """Exact D_a(P || Q) for 1-d Gaussian mixtures with a common variance.

    Parameters
    ----------
    order : float > 1
    p, q : tuple (weights, means)
        The two mixtures ``sum_k w_k N(mu_k, std^2)``.
    std : float
        Common standard deviation of every component.

    Returns
    -------
    float
        ``1/(a-1) log int phi(t) exp(a log(p/phi) + (1-a) log(q/phi)) dt`` with
        ``phi`` the standard normal, computed by the trapezoid rule on a grid
        that covers every tilted component ``a m_i - (a-1) m_j`` by
        ``_MARGIN`` standard deviations and resolves both the analyticity strip
        of the mixtures (width ``pi / span``) and the narrowest tilted peak.
    """
    a = float(order)
    w_p, m_p = (np.asarray(v, dtype=float) for v in p)
    w_q, m_q = (np.asarray(v, dtype=float) for v in q)
    m_p, m_q = m_p / std, m_q / std
    means = np.concatenate([m_p[w_p > 0], m_q[w_q > 0]])
    lo, hi = means.min(), means.max()
    span = hi - lo
    width = (a - 1.0) * span + _MARGIN
    # Resolve the analyticity strip of the mixtures and the curvature of the
    # log-integrand, which lies in [-1 - (a-1) span^2 / 4, -1 + a span^2 / 4].
    step = min(0.1, math.pi / (12.0 * max(span, 1e-12)))
    step = min(step, 0.5 / math.sqrt(1.0 + a * span**2 / 4.0))
    t = np.arange(lo - width, hi + width + step, step)
    log_f = a * log_mixture_ratio(t, w_p, m_p) - 0.5 * t**2 - _LOG_SQRT_2PI
    if a != 1.0:
        log_f = log_f + (1.0 - a) * log_mixture_ratio(t, w_q, m_q)
    _check_tails(log_f, "renyi_gaussian_mixtures")
    log_integral = float(logsumexp(log_f)) + math.log(step)
    return log_integral / (a - 1.0)


def renyi_on_grid(order, log_p, log_q, dx):
    """D_a between two densities tabulated (log) on a uniform grid of step dx."""
    log_f = order * log_p + (1.0 - order) * log_q
    _check_tails(log_f, "renyi_on_grid")
    return (float(logsumexp(log_f)) + math.log(dx)) / (order - 1.0)


def propagate_log_density(x0, maps, noise_std, grid):
    """Log density of ``x_T`` on ``grid`` for a 1-d noisy iteration.

    ``x_t = maps[t](x_{t-1}) + N(0, noise_std[t]^2)`` from the point ``x_0 = x0``.
    Step 1 is an exact Gaussian; every later step integrates the previous
    density against the Gaussian kernel after the map (push-forward and
    convolution in one trapezoid sum over the grid, in log space). Each map is
    called on an array and must be vectorised.

    The grid step should be a fraction (1/4 or less) of the smallest noise std
    and the grid wide enough to hold the mass of every iterate.
    """
    grid = np.asarray(grid, dtype=float)
    dx = grid[1] - grid[0]
    s = float(noise_std[0])
    centre = float(maps[0](np.array([x0], dtype=float))[0])
    log_p = -0.5 * ((grid - centre) / s) ** 2 - math.log(s) - _LOG_SQRT_2PI
    for psi, s in zip(maps[1:], noise_std[1:], strict=True):
        s = float(s)
        moved = psi(grid)
        log_kernel = (
            -0.5 * ((grid[:, None] - moved[None, :]) / s) ** 2
            - math.log(s)
            - _LOG_SQRT_2PI
        )
        log_p = logsumexp(log_kernel + log_p[None, :], axis=1) + math.log(dx)
    return log_p

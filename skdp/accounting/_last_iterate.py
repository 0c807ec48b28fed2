"""Privacy of the last iterate of noisy iterations (shifted Rényi divergence).

Setting: ``x_t = P(psi_t(x_{t-1}) + N(0, s_t^2 I))`` with ``P`` a 1-Lipschitz
projection or prox, ``psi_t`` ``L_t``-Lipschitz, and the two neighbouring runs'
step maps at most ``shift_t`` apart. Only ``x_T`` is released. Then

    D_a(x_T || x'_T) <= (a / 2) * min sum_t c_t^2 / s_t^2
    s.t. h_0 = 0, h_t = L_t h_{t-1} + shift_t - c_t >= 0, h_T = 0.

This is privacy amplification by iteration (Feldman, Mironov, Talwar, Thakurta
2018, "Privacy amplification by iteration", Theorem 22, shift and contraction
reductions) extended to ``L_t``-Lipschitz steps with additive residuals as in the
cyclic DP-SGD seed paper (its Lemma on randomized proximal Lipschitz operators);
docs/accounting.md ("The bounds") states the bound and its conditions, and
``tests/test_soundness.py`` checks it against exact densities on small chains.

Exact solution of the QP. With ``w_t = prod_{u>t} L_u``, ``d_t = w_t c_t``,
``A_t = sum_{u<=t} w_u shift_u`` and ``tau_t = sum_{u<=t} w_u^2 s_u^2``, the
problem is: minimise ``sum_t d_t^2 / (w_t^2 s_t^2)`` over paths
``D_t = sum_{u<=t} d_u`` from ``(0, 0)`` to ``(tau_T, A_T)`` that stay below the
ceiling ``D_t <= A_t``. The cost of a straight piece is ``(dD)^2 / (dtau)``, so
the optimum is the taut string under the ceiling: the lower convex hull of the
ceiling points. Because ``A`` only rises on steps that see the differing
record, only the points just before those steps and the end point matter.
"""

import numpy as np
from scipy.special import logsumexp

from ._cache import bounded_cache
from ._policy import DEFAULT_POLICY

__all__ = [
    "gradient_step_lipschitz",
    "last_iterate_coefficient",
    "logistic_constants",
    "position_coefficients",
]

# Largest spread of log-weights solved in double precision; earlier steps
# (whose shifts have decayed by more) are handled as a carried offset.
_MAX_LOG_WEIGHT_SPREAD = 600.0


def logistic_constants(row_norm, n_classes=2):
    """Gradient norm bound and smoothness of the logistic loss on bounded rows.

    For rows with ``||x|| <= R``: binary logistic loss has per-example gradient
    norm ``<= R`` and Hessian ``<= (R^2 / 4) I``; the multinomial (softmax) loss
    has gradient norm ``<= sqrt(2) R`` (``||p - e_y|| <= sqrt(2)``) and Hessian
    ``<= (R^2 / 2) I`` (the largest eigenvalue of ``diag(p) - p p^T`` is at most
    1/2). See e.g. Böhning 1992, "Multinomial logistic regression algorithm".

    Parameters
    ----------
    row_norm : float
        Bound ``R`` on the L2 norm of every row fed to the loss (including a
        constant intercept column, if any).
    n_classes : int, default=2

    Returns
    -------
    gradient_bound : float
    smoothness : float
    """
    if row_norm < 0:
        raise ValueError(f"row_norm must be >= 0, got {row_norm}.")
    if n_classes < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}.")
    if n_classes == 2:
        return float(row_norm), row_norm**2 / 4.0
    return float(np.sqrt(2.0) * row_norm), row_norm**2 / 2.0


def gradient_step_lipschitz(learning_rate, smoothness, l2=0.0):
    """Lipschitz constant of ``x -> x - eta (grad f(x) + l2 x)``.

    For convex ``f`` with ``0 <= Hess f <= smoothness * I`` the Jacobian's
    eigenvalues lie in ``[1 - eta (smoothness + l2), 1 - eta l2]``, so the map
    is ``max(|1 - eta l2|, |1 - eta (smoothness + l2)|)``-Lipschitz (for any
    ``eta``; it is at most 1 when ``eta <= 2 / (smoothness + l2)``).

    Parameters
    ----------
    learning_rate : float or ndarray
    smoothness : float
    l2 : float, default=0.0

    Returns
    -------
    lipschitz : float or ndarray
    """
    eta = np.asarray(learning_rate, dtype=float)
    out = np.maximum(np.abs(1.0 - eta * l2), np.abs(1.0 - eta * (smoothness + l2)))
    return float(out) if out.ndim == 0 else out


def _lower_hull_energy(tau, ceiling):
    """Energy ``sum (dA)^2 / dtau`` of the taut string under the ceiling.

    Points are ``(tau[i], ceiling[i])``, both non-decreasing, starting at the
    origin; the last point is where the path must end (an equality), the
    others are ceilings. The path is the lower convex hull of the points.
    Returns ``inf`` when the path must rise with no noise left (``dtau == 0``).
    """
    end_tau, end_level = tau[-1], ceiling[-1]
    if np.any((tau[:-1] >= end_tau) & (ceiling[:-1] < end_level)):
        return np.inf
    hull = []
    for x, y in zip(tau, ceiling, strict=True):
        if hull and x <= hull[-1][0]:
            continue  # same tau: the earlier point has the lower ceiling
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            # Drop the middle point unless it lies strictly below the chord.
            if (y2 - y1) * (x - x1) >= (y - y1) * (x2 - x1):
                hull.pop()
            else:
                break
        hull.append((x, y))
    pieces = zip(hull[:-1], hull[1:], strict=True)
    return sum((y2 - y1) ** 2 / (x2 - x1) for (x1, y1), (x2, y2) in pieces)


def last_iterate_coefficient(shift, noise_std, lipschitz):
    """Coefficient ``K`` of the last-iterate bound ``D_a(x_T || x'_T) <= a K``.

    Solves the QP of the module docstring exactly (lower convex hull).

    Parameters
    ----------
    shift : array-like of shape (T,)
        Per-step bound on ``sup_x ||psi_t(x) - psi'_t(x)||`` (0 on steps that do
        not see the differing record).
    noise_std : array-like of shape (T,)
        Standard deviation of the Gaussian noise added at each step.
    lipschitz : array-like of shape (T,) or float
        Lipschitz constant of each step map.

    Returns
    -------
    K : float
        ``(1/2) min sum_t c_t^2 / s_t^2`` (``inf`` if the QP is infeasible).
        When the contraction over the run exceeds ``exp(600)``, the steps
        before the last such window absorb nothing: a feasible point of the
        QP, so still a valid bound, within ``exp(-300)`` relative of the
        optimum.
    """
    shift = np.asarray(shift, dtype=float)
    noise_std = np.broadcast_to(np.asarray(noise_std, dtype=float), shift.shape)
    lipschitz = np.broadcast_to(np.asarray(lipschitz, dtype=float), shift.shape)
    if np.any(shift < 0) or np.any(noise_std < 0) or np.any(lipschitz < 0):
        raise ValueError("shift, noise_std and lipschitz must be >= 0.")
    hits = np.flatnonzero(shift > 0)
    if hits.size == 0:
        return 0.0
    # log w_t = sum_{u > t} log L_u; L is clamped away from 0 (a larger
    # Lipschitz constant is still a valid one).
    log_l = np.log(np.maximum(lipschitz, 1e-300))
    log_w = np.concatenate([np.cumsum(log_l[::-1])[::-1][1:], [0.0]])
    # The QP only involves steps from the first shift on.
    log_w = log_w[hits[0] :]
    shift, noise_std = shift[hits[0] :], noise_std[hits[0] :]
    hits = hits - hits[0]
    # Steps before the window of log-weights spanning at most the limit
    # absorb nothing (a feasible, so valid, choice): their shifts enter as
    # a carried offset (in log space; one that underflows is below 1e-300 of
    # the window's levels, so below their rounding error).
    spread = np.maximum.accumulate(log_w[::-1])[::-1]
    spread = spread - np.minimum.accumulate(log_w[::-1])[::-1]
    start = int(np.argmax(spread <= _MAX_LOG_WEIGHT_SPREAD))
    top = float(log_w[start:].max())
    offset = 0.0
    if start > 0:
        early = shift[:start] > 0
        if early.any():
            logs = log_w[:start][early] + np.log(shift[:start][early])
            offset = float(np.exp(logsumexp(logs) - top))
    log_w, shift, noise_std = log_w[start:], shift[start:], noise_std[start:]
    hits = hits[hits >= start] - start
    w = np.exp(log_w - top)
    tau = np.cumsum((w * noise_std) ** 2)
    level = offset + np.cumsum(w * shift)
    # Ceiling points just before each step that sees the record (the window's
    # start, with the carried offset, for a hit on its first step), then the
    # end.
    before = hits - 1
    tau_pts = np.concatenate(
        [[0.0], np.where(before >= 0, tau[before], 0.0), [tau[-1]]]
    )
    ceil_pts = np.concatenate(
        [[0.0], np.where(before >= 0, level[before], offset), [level[-1]]]
    )
    return 0.5 * _lower_hull_energy(tau_pts, ceil_pts)


@bounded_cache(DEFAULT_POLICY.coefficient_cache_size, key=lambda event: event._key)
def position_coefficients(event):
    """Per batch position, the slopes ``(composition, last-iterate)`` at z = 1.

    For a :class:`~skdp.accounting.NoisyIterationEvent` whose differing record
    sits in batch ``j``: composition over the steps that see it gives
    ``D_a <= a composition[j] / z^2``, and the last-iterate bound (the QP of
    the module docstring, when the step maps' Lipschitz constants are given;
    ``inf`` otherwise) ``D_a <= a last[j] / z^2``. Both scale as ``1 / z^2``
    because the noise of every step scales with ``z``, so the QPs are solved
    once per schedule and cached on its content, not on ``z``.

    Parameters
    ----------
    event : NoisyIterationEvent

    Returns
    -------
    composition, last : ndarray of shape (n_batches,)
        Read-only.
    """
    n_batches = int(event.batch.max()) + 1
    ratio = (event.sensitivity / event.noise_scale) ** 2 / 2.0
    composition = np.bincount(event.batch, weights=ratio, minlength=n_batches)
    last = np.full(n_batches, np.inf)
    if event.lipschitz is not None:
        for j in range(n_batches):
            shift = np.where(event.batch == j, event.sensitivity, 0.0)
            last[j] = last_iterate_coefficient(
                shift, event.noise_scale, event.lipschitz
            )
    composition.setflags(write=False)
    last.setflags(write=False)
    return composition, last

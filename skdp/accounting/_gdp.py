"""Exact Gaussian DP of compositions of Gaussian mechanisms and of cyclic runs.

An adaptive composition of Gaussian mechanisms with ratios ``r_i``
(sensitivity over noise std) is ``mu``-GDP with ``mu = sqrt(sum r_i^2)``
(Dong, Roth, Su 2022, "Gaussian differential privacy", Corollary 3.3), and
``mu``-GDP is exactly the set of (epsilon, delta(epsilon)) with ``delta(eps)
= Phi(-eps/mu + mu/2) - exp(eps) Phi(-eps/mu - mu/2)`` (ibid., Corollary
2.13; Balle and Wang 2018, Theorem 8). This covers
:class:`~skdp.accounting.GaussianEvent`, Gaussian releases of sums
(:class:`~skdp.accounting.GaussianSumEvent`, full-batch steps), and the
cyclic :class:`~skdp.accounting.NoisyIterationEvent`: per position of the
record, its composition bound is a composition of Gaussian mechanisms, and
its last-iterate bound ``D_a <= a K`` comes from the shifted-divergence
programme whose every step (shift reduction, contraction reduction) also
holds for tradeoff functions, giving ``sqrt(2 K)``-GDP (Bok, Su, Altschuler
2024, "Shifted interpolation for differential privacy", Section 3, shifted
interpolation for f-DP, applied to noisy cyclic gradient descent in Section
4: the same chain with Gaussian tradeoff functions in place of Rényi
divergences). The worst position is taken for a public order; for a secret
order the delta curves of the positions are averaged (the hockey-stick
divergence is jointly convex).
"""

import math

import numpy as np
from scipy import special

from ._last_iterate import position_coefficients

__all__ = [
    "cyclic_mu",
    "gaussian_dp_delta",
    "gaussian_dp_epsilon",
    "gaussian_dp_mu",
    "gaussian_mixture_dp_epsilon",
    "gdp_epsilon",
]


def gaussian_dp_delta(epsilon, mu):
    """Delta of ``mu``-GDP at ``epsilon`` (Dong, Roth, Su 2022, Cor. 2.13).

    ``Phi(-eps/mu + mu/2) - exp(eps) Phi(-eps/mu - mu/2)``, the second term in
    log space so that large ``epsilon`` does not overflow.
    """
    epsilon, mu = float(epsilon), float(mu)
    if mu <= 0:
        return 0.0
    if not math.isfinite(mu):
        return 1.0
    first = special.ndtr(-epsilon / mu + mu / 2.0)
    second = math.exp(epsilon + special.log_ndtr(-epsilon / mu - mu / 2.0))
    return max(0.0, first - second)


def _smallest_epsilon(delta_of, delta, scale):
    """Smallest ``eps >= 0`` with ``delta_of(eps) <= delta`` (non-increasing).

    Bracketing from ``scale`` and bisection to a relative 1e-12, keeping the
    upper end (the answer is rounded up).
    """
    if delta_of(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, max(1.0, scale)
    while delta_of(hi) > delta:
        lo, hi = hi, 2.0 * hi
        if hi > 1e12:
            return math.inf
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        if delta_of(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def gaussian_dp_epsilon(mu, delta):
    """Smallest epsilon with ``gaussian_dp_delta(epsilon, mu) <= delta``.

    Exact for ``mu``-GDP (monotone in epsilon; solved by bracketing and
    bisection to a relative 1e-12, rounding up).

    Parameters
    ----------
    mu : float >= 0
    delta : float in (0, 1)

    Returns
    -------
    float
    """
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}.")
    return _smallest_epsilon(lambda e: gaussian_dp_delta(e, mu), delta, mu * mu)


def gaussian_dp_mu(epsilon, delta):
    """The ``mu`` whose Gaussian DP curve passes through ``(epsilon, delta)``.

    ``gaussian_dp_delta(epsilon, mu)`` increases with ``mu``: bisection on
    a bracket, to a relative 1e-12.
    """
    lo, hi = 0.0, 1.0
    while gaussian_dp_delta(epsilon, hi) < delta:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        if gaussian_dp_delta(epsilon, mid) < delta:
            lo = mid
        else:
            hi = mid
    return lo


def gaussian_mixture_dp_epsilon(mus, weights, delta):
    """Smallest epsilon with ``sum_j w_j gaussian_dp_delta(eps, mu_j) <= delta``.

    A mechanism that is ``mu_j``-GDP given a secret index ``j`` drawn with
    probabilities ``w_j`` (independently of the data) has at most that delta:
    the hockey-stick divergence is jointly convex.

    Parameters
    ----------
    mus, weights : array-like of float
    delta : float in (0, 1)

    Returns
    -------
    float
    """
    mus = np.asarray(mus, dtype=float)
    weights = np.asarray(weights, dtype=float)
    keep = (weights > 0) & (mus > 0)
    if not keep.any():
        return 0.0
    mus, weights = mus[keep], weights[keep]

    def delta_of(eps):
        first = special.ndtr(-eps / mus + mus / 2.0)
        second = np.exp(eps + special.log_ndtr(-eps / mus - mus / 2.0))
        return float(weights @ np.maximum(first - second, 0.0))

    return _smallest_epsilon(delta_of, delta, float(np.max(mus) ** 2))


def cyclic_mu(event):
    """GDP ``mu`` of a cyclic run per position of the record, at ``z``.

    The smaller of the composition and last-iterate slopes ``K_j`` (both
    ``D_a <= a K_j``, both from Gaussian tradeoff chains, see the module
    docstring) gives ``mu_j = sqrt(2 K_j)``.
    """
    composition, last = position_coefficients(event)
    slope = np.minimum(composition, last) / event.noise_multiplier**2
    return np.sqrt(2.0 * slope)


def gdp_epsilon(gaussian_mu2, cyclic, delta):
    """Exact GDP epsilon of Gaussian parts and cyclic runs (replace-one).

    Gaussian parts and public-order runs compose into one ``mu`` (their
    ``mu^2`` add; a run counts its worst position). A single shuffled run
    (secret order) is a mixture over the record's position: each position's
    ``mu`` is composed with the rest and the delta curves averaged.

    Parameters
    ----------
    gaussian_mu2 : float
        Sum of ``mu^2`` of the Gaussian releases.
    cyclic : list of (NoisyIterationEvent, int)
    delta : float in (0, 1)

    Returns
    -------
    float
    """
    shuffled = [
        (event, count)
        for event, count in cyclic
        if event.batch_weights is not None and count == 1
    ]
    mu2 = gaussian_mu2
    for event, count in cyclic:
        if len(shuffled) == 1 and (event, count) == shuffled[0]:
            continue
        mu2 += count * float(np.max(cyclic_mu(event)) ** 2)
    if len(shuffled) == 1:
        event = shuffled[0][0]
        mus = cyclic_mu(event)
        weights = event.batch_weights[: mus.size]
        return gaussian_mixture_dp_epsilon(np.sqrt(mus**2 + mu2), weights, delta)
    return gaussian_dp_epsilon(math.sqrt(mu2), delta)

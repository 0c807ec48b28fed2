"""The private centre of the rows, which a run subtracts from every row.

Per-example clipping bounds a record's whole gradient ``r_i [x_i, 1]``. Rows
far from the origin (numeric columns encoded on generous public bounds sit
near one end of ``[-1, 1]``) spend most of that bound on their common
offset, which the intercept already carries, and little on what tells the
classes apart. A run on ``x - c``, for a centre ``c`` near the rows' mean,
fits the same models (the intercept absorbs ``c``: :func:`uncentred`) with
more of the clip on the signal.

The centre is released once, before the run: the sum of the rows, each put
on the ball of a public radius (:func:`~skdp._solvers._rows.clipped_row_sum`),
with Gaussian noise of std ``noise * radius`` (a
:class:`~skdp.accounting.GaussianSumEvent` of multiplier ``noise``, which the
accountant composes with the run's events), divided by the plan's number of
rows (public, or the count released under add/remove), then shrunk towards
the origin by the positive-part James-Stein factor of its known noise (James
and Stein 1961, "Estimation with quadratic loss"), so that a centre the
noise would dominate is hardly used. All that follows the release is
post-processing; a run's events do not depend on the centre.
"""

import math

import numpy as np

from .._rows import feature_norm
from ._plan import UNBOUNDED_ROW_NORM

__all__ = [
    "centre_from_sum",
    "centred",
    "centring_radius",
    "check_centred_intercept",
    "release_run_centre",
    "uncentred",
]


def centring_radius(row_norm, fit_intercept, n_features):
    """The public radius each row is put within for the centre's sum.

    The features' radius of a declared row bound (:func:`feature_norm` of
    the loss's ``row_norm``); without one, ``sqrt(n_features)``, the norm of
    a row whose every feature lies in ``[-1, 1]`` (the encoding of
    :class:`~skdp.preprocessing.SchemaEncoder`). Any radius is private: it
    only sets how much of a row the sum sees, and its noise.
    """
    if row_norm is None or row_norm >= UNBOUNDED_ROW_NORM:
        return math.sqrt(max(n_features, 1))
    return feature_norm(row_norm, fit_intercept)


def check_centred_intercept(fit_intercept):
    """Refuse a centred plan without an intercept (nothing absorbs the centre)."""
    if not fit_intercept:
        raise ValueError(
            "A centred run needs fit_intercept=True: the intercept absorbs the "
            "centre; set centring_share=0 without an intercept."
        )


def release_run_centre(plan, row_sum, n_features, row_norm, fit_intercept, rng, policy):
    """The centre a run releases first, or None if its plan centres nothing.

    Parameters
    ----------
    plan : SGDPlan
        Its ``centring_noise`` (None: no centre) and ``n_samples`` (the
        public number the noisy sum is divided by).
    row_sum : callable
        ``radius -> ndarray of shape (n_features,)``: the sum of the rows,
        each put on the ball of ``radius``
        (:func:`~skdp._solvers._rows.clipped_row_sum`, or its sum over held
        partitions).
    n_features : int
    row_norm : float
        The loss's row bound (``UNBOUNDED_ROW_NORM``: none declared).
    fit_intercept : bool
    rng : numpy.random.Generator
    policy : SGDPolicy
        Its ``centre_shrink``.

    Returns
    -------
    ndarray of shape (n_features,) or None
    """
    if plan.centring_noise is None:
        return None
    check_centred_intercept(fit_intercept)
    radius = centring_radius(row_norm, fit_intercept, n_features)
    return centre_from_sum(
        row_sum(radius),
        plan.n_samples,
        radius,
        plan.centring_noise,
        rng,
        policy.centre_shrink,
    )


def centre_from_sum(row_sum, n_rows, radius, noise, rng, strength=1.0):
    """The released centre, from the sum of the rows put on the ball of ``radius``.

    The noisy mean ``m = (sum + N(0, (noise radius)^2 I)) / n`` times
    ``max(0, 1 - strength d s^2 / ||m||^2)``, with ``s = noise radius / n``
    the known noise std of each coordinate of ``m`` and ``d`` their number,
    then put on the ball of ``radius``, where the mean of the clipped rows
    lies (so that noise never moves the rows further than that).
    """
    std = noise * radius
    mean = (row_sum + rng.normal(0.0, std, size=row_sum.shape)) / n_rows
    per_coordinate = std / n_rows
    energy = float(mean @ mean)
    noise_energy = strength * mean.size * per_coordinate**2
    shrink = max(0.0, 1.0 - noise_energy / max(energy, 1e-300))
    norm = shrink * math.sqrt(energy)
    if norm > radius:
        shrink *= radius / norm
    return shrink * mean


def centred(W, centre):
    """The weights of the same model on centred rows (inverse of :func:`uncentred`)."""
    if centre is None:
        return W
    W = np.array(W, dtype=float)
    W[-1] += centre @ W[:-1]
    return W


def uncentred(W, centre):
    """The weights of the same model on the rows as given (not centred).

    A model ``w . (x - c) + b`` is ``w . x + (b - w . c)``: only the
    intercept's row changes (a centred run has one,
    :func:`check_centred_intercept`).
    """
    if centre is None:
        return W
    W = np.array(W, dtype=float)
    W[-1] -= centre @ W[:-1]
    return W

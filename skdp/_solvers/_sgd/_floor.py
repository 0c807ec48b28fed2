"""The probability floor: the trained model moved towards a private prior.

One Gaussian release, made in two adaptive parts whose squared Gaussian-DP
parameters add up to the release's (Gaussian DP composes exactly, Dong, Roth
and Su 2022, Corollary 3.3): the class counts, which give a private prior,
then the derivative of the training log-loss along the path of logits from
the prior's to the model's, which picks a point on that path.
"""

import functools
import math

import numpy as np
from scipy.special import expit, softmax

from ...accounting import Neighbouring
from .._rows import (
    centred_rows,
    feature_norm,
    row_projection,
    row_scores,
    tame_rows,
)
from ._plan import UNBOUNDED_ROW_NORM
from ._policy import DEFAULT_POLICY

__all__ = [
    "RowSums",
    "anchor_logits",
    "calibrate_from_sums",
    "calibrate_probabilities",
    "fit_temperature",
    "noisy_log_prior",
    "pick_temperature",
    "prior_noise",
    "public_shrinkage",
    "release_log_prior",
    "tail_noise_variance",
    "temperature_bound",
    "temperature_sensitivity",
]


@functools.lru_cache(maxsize=8)
def _loss_change_map(grid):
    """Matrix taking derivatives on ``grid`` to loss changes from temperature 1.

    Row j integrates the derivative from 1 to ``grid[j]`` by trapezoids: a
    linear map of the released vector, so the noise of each change has a
    known standard deviation. ``grid`` is a tuple (a policy's); the matrix
    is read-only.
    """
    grid = np.asarray(grid)
    one = int(np.flatnonzero(grid == 1.0)[0])
    weights = np.zeros((grid.size, grid.size))
    for j in range(grid.size):
        lo, hi, sign = (one, j, 1.0) if j >= one else (j, one, -1.0)
        for m in range(lo, hi):
            step = 0.5 * (grid[m + 1] - grid[m]) * sign
            weights[j, m] += step
            weights[j, m + 1] += step
    weights.setflags(write=False)
    return weights


def temperature_sensitivity(neighbouring):
    """L2 sensitivity of the temperature release, in units of one row's bound.

    Replacing a row swaps one bounded vector for another (2 bounds); adding
    or removing one changes the sum by one vector (1 bound).
    """
    return Neighbouring.parse(neighbouring).sum_factor


def release_log_prior(codes, n_classes, std, rng):
    """Log of a private class prior: Gaussian class counts, shrunk to uniform.

    The counts get Gaussian noise of std ``std`` (one row adds a one-hot
    vector, of norm 1), are floored at 1 and normalised; the result is then
    moved towards the uniform prior by the share of the noisy counts' spread
    that the noise (known) is expected to make up, a positive-part
    James-Stein factor ``max(0, 1 - K std^2 / sum_k (c_k - c / K)^2)``: with
    little budget a noisy count cannot pick a wrong majority class.
    Post-processing of the one release.

    Parameters
    ----------
    codes : ndarray of int
    n_classes : int
    std : float
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_classes,)
    """
    counts = np.bincount(codes, minlength=n_classes)
    return noisy_log_prior(counts, n_classes, std, rng)


def noisy_log_prior(counts, n_classes, std, rng):
    """:func:`release_log_prior` from the class counts (summed anywhere)."""
    counts = np.asarray(counts).astype(float)
    noisy = counts + rng.normal(0.0, std, size=n_classes)
    prior = np.maximum(noisy, 1.0)
    prior /= prior.sum()
    spread = float(np.sum((noisy - noisy.sum() / n_classes) ** 2))
    weight = max(0.0, 1.0 - n_classes * std**2 / max(spread, 1e-300))
    return np.log(weight * prior + (1.0 - weight) / n_classes)


def prior_noise(budget, neighbouring, policy=DEFAULT_POLICY):
    """Noise std of the class counts: ``policy.prior_weight`` of the floor's ``mu^2``.

    The accountant charges the floor as one Gaussian of std ``budget`` on a
    sum that moves by ``s`` row bounds (``s`` = 2 under replace-one, 1
    under add/remove), a Gaussian-DP ``mu = s / budget``. The counts move
    by ``h``, ``sqrt(2)`` or 1
    (:attr:`~skdp.accounting.Neighbouring.histogram_factor`), so the std
    ``budget h / (s sqrt(w))`` gives them ``mu_1^2 = w (s / budget)^2``,
    ``w`` the prior's weight, and the derivatives, with std ``budget / sqrt(1
    - w)`` per unit of their bound, the rest: ``mu_1^2 + mu_2^2 = (s /
    budget)^2`` (Dong, Roth and Su 2022, Corollary 3.3).
    """
    relation = Neighbouring.parse(neighbouring)
    share = relation.histogram_factor / relation.sum_factor
    return budget * share / math.sqrt(policy.prior_weight)


def anchor_logits(log_prior):
    """Logits of the constant prior predictor in the model's output layout."""
    if log_prior.size == 2:
        return np.array([log_prior[1] - log_prior[0]])
    return log_prior - log_prior.mean()


def tail_noise_variance(plan, noise_multiplier, steps=None):
    """Per-coordinate variance of the injected noise left in the released model.

    Each step adds Gaussian noise of std ``plan.noise_std(z, steps)[t]`` to
    every coordinate; only the penalty is taken to contract it (``1 - eta_t
    l2`` a step, the loss as if flat), and the model is the average of the
    last ``tail_fraction`` of the iterates (the last one at 0). Exact for a
    flat loss, larger than the truth where the loss curves. Public: a
    function of the plan, its steps (default: the plan's own) and the noise
    multiplier only.
    """
    steps = plan.steps if steps is None else steps
    std = np.asarray(plan.noise_std(noise_multiplier, steps), dtype=float)
    rates = np.asarray(steps.learning_rates, dtype=float)
    T = std.size
    tail = max(1, int(round(plan.tail_fraction * T)))
    contraction = 1.0 - rates * plan.l2
    weight = np.empty(T)  # weight[i]: how much of step i's noise the output holds
    carry = 0.0
    for i in range(T - 1, -1, -1):
        carry = float(i >= T - tail) + (
            contraction[i + 1] * carry if i + 1 < T else 0.0
        )
        weight[i] = carry / tail
    return float(np.sum((std * weight) ** 2))


def public_shrinkage(
    W,
    energy,
    fit_intercept,
    strength=DEFAULT_POLICY.shrink_strength,
    offset=DEFAULT_POLICY.shrink_offset,
):
    """The share of the coefficients that is not expected to be noise.

    A positive-part James-Stein factor ``kappa = max(0, 1 - strength * (d -
    offset) v / ||coef||^2)``, ``v`` the variance of the injected noise in
    each of the ``d`` coefficients (:func:`tail_noise_variance`, passed as
    ``energy``). With ``offset`` 2 and ``strength`` 1 it is James and Stein's
    (1961) estimator of least expected squared error for ``d >= 3`` noisy
    coordinates; below 3 coefficients nothing is shrunk. Public: a function
    of the released model, the plan and the noise multiplier.

    Returns
    -------
    float in [0, 1]
    """
    coef = W[:-1] if fit_intercept else W
    norm2 = float(np.sum(coef**2))
    dims = max(coef.size - offset, 0.0)
    return max(0.0, 1.0 - strength * energy * dims / max(norm2, 1e-300))


def _anchored(W, anchor, a, fit_intercept):
    """Weights of the logits ``a s + (1 - a) m`` (``m`` the anchor)."""
    W = W * a
    if fit_intercept:
        W[-1] += (1.0 - a) * anchor
    return W


def temperature_bound(n_classes, policy=DEFAULT_POLICY):
    """Bound on the L2 norm of one row's vector of loss derivatives on the grid.

    With the offsets ``d = s - m`` of the model's logits from the anchor
    clipped to ``[-S, S]`` (``S = policy.floor_logit_bound``), the derivative
    in ``a`` of one row's log-loss at the logits ``m + a d`` is ``(p - y) d``
    (binary: at most ``S``) or ``sum_k (p_k - y_k) d_k`` (softmax: at most
    ``||p - y||_1 S <= 2 S``) at every point of ``policy.floor_grid``.
    """
    per_point = policy.floor_logit_bound * (1.0 if n_classes == 2 else 2.0)
    return per_point * np.sqrt(len(policy.floor_grid))


def _temperature_derivatives(
    X,
    codes,
    W,
    anchor,
    row_norm,
    fit_intercept,
    policy=DEFAULT_POLICY,
    chunk=65536,
    centre=None,
):
    """Sum over rows of each row's derivative vector (exact; read in chunks).

    ``centre``: moves every row as it is read, as the run moved it
    (:func:`~skdp._solvers._rows.centred_rows`; a centred run on rows given
    as they are).
    """
    binary = W.shape[1] == 1
    grid = np.asarray(policy.floor_grid)
    bound = policy.floor_logit_bound
    total = np.zeros(grid.size)
    if row_norm is None:
        row_norm = UNBOUNDED_ROW_NORM
    radius = feature_norm(row_norm, fit_intercept)
    for lo in range(0, X.shape[0], chunk):
        Xb = np.asarray(X[lo : lo + chunk], dtype=float)
        if centre is not None:
            Xb = centred_rows(Xb, centre, radius)
        raw = np.sqrt(np.einsum("ij,ij->i", Xb, Xb))
        Xb, raw = tame_rows(Xb, raw, radius)
        scale, _ = row_projection(raw, row_norm, fit_intercept)
        offsets = row_scores(W, Xb, scale, fit_intercept) - anchor
        if not binary:
            offsets -= offsets.mean(axis=1, keepdims=True)
        offsets = np.clip(offsets, -bound, bound)
        labels = codes[lo : lo + chunk]
        if binary:
            d = offsets[:, 0]
            p = expit(anchor[0] + np.multiply.outer(d, grid))  # (b, grid)
            total += ((p - labels[:, None]) * d[:, None]).sum(axis=0)
        else:
            own = offsets[np.arange(labels.size), labels]
            for j, a in enumerate(grid):
                p = softmax(anchor + a * offsets, axis=1)
                total[j] += float(np.sum(np.einsum("ik,ik->i", p, offsets) - own))
    return total


def fit_temperature(
    X,
    codes,
    W,
    anchor,
    std,
    *,
    row_norm,
    fit_intercept,
    rng,
    start=1.0,
    policy=DEFAULT_POLICY,
):
    """A private point ``a`` on the path from the prior to the model.

    Post-hoc temperature scaling (Guo et al. 2017, "On calibration of modern
    neural networks") made private and anchored at the prior: the derivative
    in ``a`` of the training log-loss of the logits ``m + a (s - m)`` (``m``
    the anchor; ``a = 0`` the prior, ``a = 1`` the model) is summed over the
    rows at every point of the public ``policy.floor_grid`` and released once
    with Gaussian noise of std ``std``. The released derivatives are
    integrated along the grid (trapezoids) into the change of loss from the
    grid point nearest ``start`` (a public starting point), whose noise
    standard deviation is known; the grid point minimising that change plus
    ``policy.floor_margin`` noise standard deviations is returned (the
    starting point, unless the data speak clearly).

    Returns
    -------
    float
    """
    derivative = _temperature_derivatives(
        X, codes, W, anchor, row_norm, fit_intercept, policy
    )
    return pick_temperature(derivative, std, rng, start=start, policy=policy)


def pick_temperature(derivative, std, rng, *, start=1.0, policy=DEFAULT_POLICY):
    """:func:`fit_temperature` from the summed derivatives (summed anywhere)."""
    noisy = derivative + rng.normal(0.0, std, size=derivative.shape)
    grid = np.asarray(policy.floor_grid)
    ref = int(np.argmin(np.abs(grid - start)))
    changes = _loss_change_map(policy.floor_grid)
    weights = changes - changes[ref]
    change = weights @ noisy
    noise = std * np.linalg.norm(weights, axis=1)
    return float(grid[int(np.argmin(change + policy.floor_margin * noise))])


def calibrate_probabilities(
    X,
    codes,
    W,
    plan,
    noise_multiplier,
    *,
    row_norm,
    fit_intercept,
    rng,
    steps=None,
    policy=DEFAULT_POLICY,
    centre=None,
):
    """The probability floor: the trained model moved towards a private prior.

    Two releases through one Gaussian budget of ``plan.calibration_noise``
    (per unit of one row's bound; see :meth:`SGDPlan.events`): (1) the class
    counts, with ``policy.prior_weight`` of the budget's ``mu^2``
    (:func:`prior_noise`), give a private prior (:func:`release_log_prior`); (2)
    :func:`fit_temperature`, with the rest, picks a point ``a`` on the path
    ``m + a (s - m)`` from the prior's logits ``m`` to the model's ``s``,
    starting from the share of the coefficients that the injected noise is
    not expected to make up (:func:`public_shrinkage`, public) and leaving it
    only when the training loss says so clearly. Without an intercept the
    anchor is the uniform prediction (logits 0). ``steps``: those the run
    took (default: the plan's own). ``centre``: the rows ``X`` are still to be
    moved by it (a centred run on a memmap); ``W`` is the centred model.
    """
    sums = RowSums(X, codes, centre)
    return calibrate_from_sums(
        sums,
        W,
        plan,
        noise_multiplier,
        row_norm=row_norm,
        fit_intercept=fit_intercept,
        rng=rng,
        steps=steps,
        policy=policy,
    )


class RowSums:
    """The two sums over the rows the floor reads, from rows in memory.

    Any object with these two methods will do
    (:func:`calibrate_from_sums`): a Dask run sums them over partitions.
    """

    def __init__(self, X, codes, centre=None):
        self.X, self.codes, self.centre = X, codes, centre

    def class_counts(self, n_classes):
        """Number of rows of each class."""
        return np.bincount(self.codes, minlength=n_classes)

    def temperature_derivatives(self, W, anchor, row_norm, fit_intercept, policy):
        """Sum over the rows of each row's vector of loss derivatives on the grid."""
        return _temperature_derivatives(
            self.X,
            self.codes,
            W,
            anchor,
            row_norm,
            fit_intercept,
            policy,
            centre=self.centre,
        )


def calibrate_from_sums(
    sums,
    W,
    plan,
    noise_multiplier,
    *,
    row_norm,
    fit_intercept,
    rng,
    steps=None,
    policy=DEFAULT_POLICY,
):
    """:func:`calibrate_probabilities` reading the rows only through ``sums``.

    ``sums`` has ``class_counts(n_classes)`` and
    ``temperature_derivatives(W, anchor, row_norm, fit_intercept, policy)``
    (:class:`RowSums`): the only two reads of the rows, both sums of
    per-row terms, so they may be summed where the rows are.
    """
    n_classes = plan.n_classes
    budget = plan.calibration_noise
    if fit_intercept:
        log_prior = noisy_log_prior(
            sums.class_counts(n_classes),
            n_classes,
            prior_noise(budget, plan.neighbouring, policy),
            rng,
        )
        anchor = anchor_logits(log_prior)
        share = 1.0 - policy.prior_weight
    else:
        anchor = np.zeros(W.shape[1])
        share = 1.0
    energy = tail_noise_variance(plan, noise_multiplier, steps)
    start = public_shrinkage(
        W, energy, fit_intercept, policy.shrink_strength, policy.shrink_offset
    )
    std = budget / math.sqrt(share) * temperature_bound(n_classes, policy)
    derivative = sums.temperature_derivatives(
        W, anchor, row_norm, fit_intercept, policy
    )
    a = pick_temperature(derivative, std, rng, start=start, policy=policy)
    return _anchored(W, anchor, a, fit_intercept)

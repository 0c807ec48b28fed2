"""The run of noisy gradient descent-ascent: first releases, then the steps.

Before the first step the run releases the group counts, then, if planned,
the rows' centre (divided by ``n``, or under add/remove by the released
total count, as every rule that reads ``n``) and, with the preconditioner,
the second-moment matrix of the rows it plays on; every step then releases the
weighted gradient sum, on which the model player steps, and the group loss
sums, on which the adversary steps. The model returned averages the last
iterates (:attr:`GDASchedule.tail_fraction`).

Only the releases read the rows (their sensitivities: :mod:`._plan`);
everything between them (the floor on the noisy counts, the cap on the
adversary's weights, the exponentiated-gradient step on the noisy group
losses, the heavy-ball step, the averaging) is post-processing.
"""

import logging
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from ...accounting import Neighbouring
from .._saddle import SaddleResult, centred_result, noisy_counts
from ._releases import Preconditioner, project_rows, release_preconditioner
from ._schedule import GDASchedule

__all__ = ["play_gda", "project_capped_simplex", "run_gda"]

logger = logging.getLogger("skdp")

#: With ``verbose``, a progress line every this many steps.
_LOG_INTERVAL = 50


@dataclass(frozen=True)
class _Game:
    """What the first releases fix for every step.

    Attributes
    ----------
    schedule : GDASchedule
        At the released size under add/remove.
    denominators : ndarray of shape (n_groups,)
        The noisy group counts, floored.
    caps : ndarray of shape (n_groups,) or None
        Caps of the adversary's weights.
    loss_std : float or None
        Noise std of the loss sums (None with one group).
    preconditioner : Preconditioner or None
    centre : ndarray of shape (n_features,) or None
        The released centre the rows are moved by (None: not centred).
    """

    schedule: GDASchedule
    denominators: np.ndarray
    caps: np.ndarray | None
    loss_std: float | None
    preconditioner: Preconditioner | None
    centre: np.ndarray | None = None


@dataclass
class _Iterates:
    """The players' state between steps.

    Attributes
    ----------
    w : ndarray
        The model (intercept last).
    w_prev : ndarray
        The model one step earlier (the heavy ball's memory).
    p : ndarray
        The adversary's group weights.
    w_sum : ndarray
        Sum of the averaged iterates so far.
    """

    w: np.ndarray
    w_prev: np.ndarray
    p: np.ndarray
    w_sum: np.ndarray


def run_gda(
    rows, problem, schedule, noise_multiplier, *, rng, verbose=0, centring=None
):
    """Noisy gradient descent-ascent on the worst-group logistic loss.

    Parameters and result as :meth:`skdp._solvers._saddle.SaddleSolver.run`;
    ``schedule`` is a :class:`GDASchedule`. The model is the average of the
    last :attr:`GDASchedule.tail_fraction` of the iterates, the group weights
    the adversary's last ``p``. ``centring`` (a
    :class:`~skdp._solvers._saddle.Centring`, or None): the run releases the
    rows' centre after the counts and plays on the centred rows; the model is
    for the rows as given.
    """
    data = project_rows(rows, schedule.plan.row_norm, problem.fit_intercept)
    return play_gda(
        data, schedule, noise_multiplier, rng=rng, verbose=verbose, centring=centring
    )


def play_gda(sums, schedule, noise_multiplier, *, rng, verbose=0, centring=None):
    """The run of :func:`run_gda` on rows that answer its sums.

    Parameters
    ----------
    sums : ProjectedRows or an object with the same questions
        ``n_coef``, ``group_counts``, ``second_moment`` and ``step_sums``
        (:class:`~._releases.ProjectedRows`), and for a centred run
        ``row_sum`` and ``centred``; the partitions of a Dask collection
        answer them where they are held (:mod:`._dask`).
    schedule, noise_multiplier, rng, verbose, centring
        As for :func:`run_gda`.

    Returns
    -------
    SaddleResult
    """
    plan = schedule.plan
    game, sums = _first_releases(sums, schedule, noise_multiplier, rng, centring)
    iterates = _start(sums, game)
    first_averaged = game.schedule.first_averaged_step
    for step in range(plan.n_iter):
        _step(iterates, sums, game, rng)
        if step >= first_averaged:
            iterates.w_sum += iterates.w
        if verbose and (step + 1) % _LOG_INTERVAL == 0:
            logger.info(
                "step %d/%d done (no loss shown: it would read the data unprotected)",
                step + 1,
                plan.n_iter,
            )
    result = SaddleResult(
        coef=iterates.w_sum / (plan.n_iter - first_averaged),
        group_weights=iterates.p,
        events=plan.events(noise_multiplier),
        n_iter=plan.n_iter,
    )
    if game.centre is None:
        return result
    return centred_result(result, game.centre, centring)


def _first_releases(sums, schedule, noise_multiplier, rng, centring=None):
    """Release the group counts and, if planned, the centre and the second moment.

    The counts are released when there are groups or ``n`` is private (else
    they are ``n``); under add/remove the schedule then reads their total,
    and so does the centre (its noisy sum is divided by the schedule's
    ``n``). Returns the :class:`_Game` and the rows the steps read (moved by
    the centre, if any).
    """
    plan = schedule.plan
    stds = plan.noise_stds(noise_multiplier)
    if stds.count is None:
        counts = np.array([float(plan.n_samples)])
    else:
        counts = noisy_counts(sums.group_counts(plan.n_groups), stds.count, rng)
    denominators = np.maximum(counts, schedule.policy.min_count)
    if plan.neighbouring is Neighbouring.ADD_REMOVE:
        schedule = schedule.at_released_size(denominators.sum())
    caps = schedule.group_caps(denominators)
    centre = None
    if centring is not None:
        centre = centring.release(sums.row_sum, schedule.n_samples, rng)
        sums = sums.centred(centre, centring.radius, plan.row_norm)
    preconditioner = None
    if plan.second_moment_share:
        preconditioner = release_preconditioner(
            sums.second_moment(),
            plan.second_moment_std(noise_multiplier),
            schedule.n_samples,
            schedule.policy.precondition_ridge,
            rng,
        )
    game = _Game(schedule, denominators, caps, stds.loss, preconditioner, centre)
    return game, sums


def _start(sums, game):
    """The zero model and the uniform adversary (projected on its caps)."""
    n_groups = game.denominators.size
    w = np.zeros(sums.n_coef)
    p = project_capped_simplex(np.full(n_groups, 1.0 / n_groups), game.caps)
    return _Iterates(w=w, w_prev=w, p=p, w_sum=np.zeros_like(w))


def _step(iterates, sums, game, rng):
    """One step of both players, both from the sums at the current model.

    The row weights ``v_k = p_k / n_k`` come from earlier releases, so the
    gradient sum's sensitivity ``2 C max_k v_k`` is fixed before the rows are
    read.
    """
    plan = game.schedule.plan
    weights = iterates.p / game.denominators
    grouped = game.denominators.size > 1
    grad, loss_sums = sums.step_sums(
        iterates.w, weights, plan.clip_norm, plan.max_loss, losses=grouped
    )
    w_next = _model_step(iterates, grad, weights.max(), game, rng)
    iterates.w_prev = iterates.w
    if grouped:
        iterates.p = _adversary_step(iterates.p, loss_sums, game, rng)
    iterates.w = w_next


def _model_step(iterates, grad, heaviest, game, rng):
    """Release the noisy weighted gradient sum; return the heavy-ball step.

    ``heaviest`` is the largest row weight ``max_k v_k``, which scales the
    noise.
    """
    schedule, w = game.schedule, iterates.w
    grad += rng.normal(0.0, schedule.gradient_std * heaviest, size=grad.shape)
    direction = grad + schedule.l2 * w
    if game.preconditioner is None:
        step_size = schedule.model_step(heaviest)
    else:
        step_size = schedule.preconditioned_step(
            heaviest, game.preconditioner.walk_trace
        )
        direction = game.preconditioner.matrix @ direction
    return w - step_size * direction + schedule.momentum * (w - iterates.w_prev)


def _adversary_step(p, loss_sums, game, rng):
    """Release the noisy group loss sums; return the adversary's new weights.

    An exponentiated-gradient step on the per-row losses, projected onto the
    capped simplex.
    """
    schedule, denominators = game.schedule, game.denominators
    plan = schedule.plan
    noisy_losses = loss_sums + rng.normal(0.0, game.loss_std, size=plan.n_groups)
    log_p = (
        np.log(np.maximum(p, 1e-300))
        + schedule.group_step * noisy_losses / denominators
    )
    return project_capped_simplex(np.exp(log_p - logsumexp(log_p)), game.caps)


def project_capped_simplex(p, caps):
    """KL projection of a probability vector onto ``{q <= caps, sum q = 1}``.

    The projection is ``q_k = min(caps_k, tau p_k)`` with ``tau`` chosen so
    that ``q`` sums to one; entries that hit their cap are fixed and the rest
    rescaled until none exceeds its cap (at most ``len(p)`` rounds). Requires
    ``caps.sum() >= 1``; ``caps=None`` returns ``p``.
    """
    if caps is None:
        return p
    q = p.copy()
    fixed = np.zeros(p.size, dtype=bool)
    for _ in range(p.size):
        free = ~fixed
        q[fixed] = caps[fixed]
        mass = p[free].sum()
        rest = 1.0 - caps[fixed].sum()
        q[free] = p[free] * (rest / mass) if mass > 0 else rest / free.sum()
        over = free & (q > caps)
        if not over.any():
            break
        fixed |= over
    return np.minimum(q, caps)

"""Running a planned DP-SGD or DP-SGLD logistic regression on the data.

:func:`run_logistic_sgd` reads as its steps: check the plan fits the data,
prepare the rows (:func:`~skdp._solvers._sgd._batches.training_rows`), take
the noisy steps (:func:`descend`: one batch, one clipped gradient sum, one
SGD or SGLD update, the prox, the tail average), then the probability floor
(:func:`~skdp._solvers._sgd._floor.calibrate_probabilities`) if planned. A
centred run releases the rows' centre first and runs on the centred rows
(:mod:`~skdp._solvers._sgd._centre`); the model it returns is for the rows
as given.
"""

import logging
from dataclasses import dataclass

import numpy as np

from .._rows import clipped_row_sum
from ._batches import batch_indices, training_rows
from ._centre import centred, release_run_centre, uncentred
from ._floor import calibrate_probabilities
from ._plan import AMPLIFIED, UNBOUNDED_ROW_NORM, SGDSteps
from ._policy import DEFAULT_POLICY
from ._steps import UPDATES, LogisticLoss, clipped_gradient_sum, prox_and_project

__all__ = [
    "SGDResult",
    "check_row_count",
    "descend",
    "in_memory_gradient",
    "initial_weights",
    "run_logistic_sgd",
]

logger = logging.getLogger("skdp")


@dataclass(frozen=True)
class SGDResult:
    """What a run releases and what it cost.

    Attributes
    ----------
    weights : ndarray of shape (n_features + fit_intercept, n_outputs)
        The model: coefficients, then the intercept's row if fitted.
    events : list of privacy events
        The plan's events at the run's noise multiplier.
    steps : SGDSteps
        The step sizes and clip norm the run took.
    """

    weights: np.ndarray
    events: list
    steps: SGDSteps


def run_logistic_sgd(
    X,
    codes,
    plan,
    noise_multiplier,
    *,
    row_norm,
    fit_intercept,
    rng,
    init=None,
    sample_weight=None,
    verbose=0,
    steps=None,
    policy=DEFAULT_POLICY,
):
    """Run DP-SGD or DP-SGLD on the logistic loss; release only the model.

    Parameters
    ----------
    X : ndarray or memmap of shape (n_samples, n_features)
        Read batch by batch. A memmap is never copied whole; an in-memory
        array is copied once in its secret order for a shuffled run (memory
        for a second copy of ``X``, in exchange for contiguous batches).
    codes : ndarray of int, shape (n_samples,)
        Class index of each row (0/1 for binary); one-hot rows are built per
        batch, so memory stays proportional to the batch.
    plan : SGDPlan
        Cyclic and shuffled plans are for ``n_samples`` rows. A Poisson or
        balls-and-bins plan may be for another size (under add/remove, the
        released count): its rate and steps are used as they are, on the rows
        of ``X``.
    noise_multiplier : float
    row_norm : float or None
        Rows (with the intercept column) are projected onto this ball; None:
        rows are used as they are (per-example clipping bounds the steps).
    fit_intercept : bool
    rng : numpy.random.Generator
    init : ndarray or None
        Data-independent starting point (zeros by default).
    sample_weight : ndarray of shape (n_samples,) or None
        Weights in [0, 1], scaling each record's gradient.
    verbose : int
        1: about ten progress lines; 2 or more: one per epoch.
    steps : SGDSteps or None
        The step sizes and clip norm to run with (from
        :func:`~skdp._solvers._sgd.schedule_run`); None: the plan's own. The
        events are the plan's either way.
    policy : SGDPolicy, default=DEFAULT_POLICY
        The constants of the centre's shrinkage and of the probability floor.

    Returns
    -------
    SGDResult
    """
    check_row_count(plan, X.shape[0])
    row_norm = UNBOUNDED_ROW_NORM if row_norm is None else row_norm
    steps = plan.steps if steps is None else steps
    W = initial_weights(plan, X.shape[1], fit_intercept, init)
    centre = release_run_centre(
        plan,
        lambda radius: clipped_row_sum(X, radius),
        X.shape[1],
        row_norm,
        fit_intercept,
        rng,
        policy,
    )
    W = centred(W, centre)
    rows = training_rows(
        X,
        codes,
        sample_weight,
        plan,
        rng,
        row_norm=row_norm,
        fit_intercept=fit_intercept,
        centre=centre,
    )
    W = descend(W, rows, plan, steps, noise_multiplier, fit_intercept, rng, verbose)
    if plan.calibration_noise is not None:
        W = calibrate_probabilities(
            rows.X,
            rows.codes,
            W,
            plan,
            noise_multiplier,
            row_norm=row_norm,
            fit_intercept=fit_intercept,
            rng=rng,
            steps=steps,
            policy=policy,
            centre=rows.centre,
        )
    W = uncentred(W, centre)
    return SGDResult(W, plan.events(noise_multiplier), steps)


def check_row_count(plan, n_rows):
    """Refuse a cyclic or shuffled plan made for other than ``n_rows`` rows."""
    if plan.sampling not in AMPLIFIED and plan.n_samples != n_rows:
        raise ValueError(
            f"The plan is for {plan.n_samples} rows, X has {n_rows}: cyclic "
            "and shuffled batches need the plan of the data's size."
        )


def initial_weights(plan, n_features, fit_intercept, init):
    """The starting point: ``init`` (data-independent) or zeros."""
    n_outputs = 1 if plan.n_classes == 2 else plan.n_classes
    shape = (n_features + int(fit_intercept), n_outputs)
    return np.zeros(shape) if init is None else np.array(init, dtype=float)


@dataclass(frozen=True)
class _StepRule:
    """What every step reads, looked up once.

    Python floats for the step sizes and batch sizes (the same doubles as
    the plan's, without a numpy scalar per step). A Poisson or balls-and-bins
    step divides by the expected batch size, never by the drawn size (no
    data-dependent scale).
    """

    rates: list
    denominators: list
    l2: float
    noise_std: float
    update: object
    prox: bool
    average_from: int

    @classmethod
    def of(cls, plan, steps, noise_multiplier):
        """The rule of ``plan`` run with ``steps`` at ``noise_multiplier``."""
        if plan.sampling in AMPLIFIED:
            denominators = [float(plan.expected_batch)] * len(plan.batch_sizes)
        else:
            denominators = [float(size) for size in plan.batch_sizes]
        tail = max(1, int(round(plan.tail_fraction * plan.n_steps)))
        return cls(
            rates=steps.learning_rates.tolist(),
            denominators=denominators,
            l2=plan.l2,
            noise_std=noise_multiplier * steps.clip_norm,
            update=UPDATES[plan.solver],
            prox=plan.l1 > 0 or plan.projection_radius is not None,
            average_from=plan.n_steps - tail,
        )


@dataclass
class _TailAverage:
    """The running sum of the iterates of the tail, and how many it holds."""

    total: np.ndarray
    count: int = 0

    def add(self, W):
        self.total += W
        self.count += 1

    def mean(self):
        return self.total / self.count


def in_memory_gradient(rows):
    """The clipped gradient sum of a step, read from ``rows`` in memory.

    Returns
    -------
    callable
        ``(W, index, loss) -> ndarray``: the sum over the batch ``index`` of
        ``rows`` (:func:`~skdp._solvers._sgd._batches.training_rows`).
    """

    def gradient(W, index, loss):
        return clipped_gradient_sum(W, rows.batch(index), loss)

    return gradient


def descend(
    W, rows, plan, steps, noise_multiplier, fit_intercept, rng, verbose, gradient=None
):
    """Take every noisy step from ``W``; return the average of the tail.

    ``rows`` draws the batches (:func:`batch_indices` reads its ``n_rows``
    and ``order``, and may call its ``arrange``); ``gradient(W, index,
    loss)`` returns the batch's clipped gradient sum (default:
    :func:`in_memory_gradient` of ``rows``). Every draw from ``rng`` (the
    batches, the noise) is made here, in the same order whoever sums the
    gradients.
    """
    if gradient is None:
        gradient = in_memory_gradient(rows)
    rule = _StepRule.of(plan, steps, noise_multiplier)
    loss = LogisticLoss(plan.n_classes == 2, fit_intercept, steps.clip_norm)
    per_epoch = len(plan.batch_sizes)
    tail = _TailAverage(np.zeros_like(W))
    for step, index in batch_indices(plan, rng, rows):
        eta = rule.rates[step]
        gradient_sum = gradient(W, index, loss)
        denominator = rule.denominators[step % per_epoch]
        W = rule.update(W, gradient_sum, eta, denominator, rule.l2, rule.noise_std, rng)
        if rule.prox:
            W = prox_and_project(W, plan, eta)
        if step >= rule.average_from:
            tail.add(W)
        if (
            verbose
            and (step + 1) % per_epoch == 0
            and _reported((step + 1) // per_epoch, plan.epochs, verbose)
        ):
            logger.info(
                "epoch %d/%d done (no loss shown: it would read the data unprotected)",
                (step + 1) // per_epoch,
                plan.epochs,
            )
    return tail.mean()


def _reported(epoch, epochs, verbose):
    """Whether ``epoch`` (1-based) gets a progress line: about ten at verbose 1."""
    every = 1 if verbose >= 2 else -(-epochs // 10)
    return epoch % every == 0 or epoch == epochs

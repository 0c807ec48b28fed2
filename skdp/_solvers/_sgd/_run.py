"""Running a planned DP-SGD or DP-SGLD logistic regression on the data."""

import logging
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, softmax

from .._rows import feature_norm, row_norms, row_projection, tame_rows
from ._floor import calibrate_probabilities
from ._plan import UNBOUNDED_ROW_NORM, SGDSteps
from ._policy import DEFAULT_POLICY

__all__ = ["SGDResult", "poisson_batch", "run_logistic_sgd"]

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


def _clipped_gradient_sum(W, Xb, Yb, row_scale, row_norm, problem):
    """Sum over the batch of clipped per-example logistic gradients.

    Rows are first projected onto a ball (the per-record map
    ``x -> row_scale * x``, done inside the products rather than on a copy),
    then the intercept column of ones is appended implicitly.
    Per-example gradients are rank one, ``x_i r_i^T`` with residual
    ``r_i = p_i - y_i``, so their norms are ``||x_i|| ||r_i||`` and the clipped
    sum costs two matrix products over the batch: no per-example tensor.

    Parameters
    ----------
    W : ndarray of shape (n_features + fit_intercept, n_outputs)
    Xb : ndarray of shape (b, n_features)
    Yb : ndarray of shape (b, n_outputs)
    row_scale : ndarray of shape (b,)
        ``min(1, feature_norm / ||x_i||)`` (see :func:`row_projection`).
    row_norm : ndarray of shape (b,)
        Norm of each projected row, intercept included.
    problem : dict
        ``binary``, ``fit_intercept``, ``clip_norm`` and optional ``weights``.
    """
    # This runs once per step on small arrays, where each numpy call costs
    # about as much as its arithmetic: the steps are those of :func:`row_scores`
    # and of the plain formulas (``expit(scores) - Yb``, ``min(1, C /
    # max(norm, 1e-300))``), done in place on one residual and one norm array
    # in the same order, so the results are bit-identical to the plain forms.
    fit_intercept = problem["fit_intercept"]
    scale = row_scale[:, None]
    residual = Xb @ (W[:-1] if fit_intercept else W)
    residual *= scale
    if fit_intercept:
        residual += W[-1]
    if problem["binary"]:
        expit(residual, out=residual)
    else:
        residual = softmax(residual, axis=1)
    residual -= Yb
    if problem["weights"] is not None:
        residual *= problem["weights"][:, None]
    if residual.shape[1] == 1:
        norms = np.abs(residual[:, 0])
    else:
        norms = np.sqrt(np.einsum("ij,ij->i", residual, residual))
    norms *= row_norm
    np.maximum(norms, 1e-300, out=norms)
    factor = np.divide(problem["clip_norm"], norms, out=norms)
    np.minimum(factor, 1.0, out=factor)
    residual *= factor[:, None]
    grad = np.empty_like(W)
    if fit_intercept:
        np.matmul(Xb.T, residual * scale, out=grad[:-1])
        np.add.reduce(residual, axis=0, out=grad[-1])
    else:
        np.matmul(Xb.T, residual * scale, out=grad)
    return grad


def _prox_and_project(W, plan, eta):
    """Elastic-net prox and ball projection: 1-Lipschitz, data-free."""
    if plan.l1 > 0:
        W = np.sign(W) * np.maximum(np.abs(W) - eta * plan.l1, 0.0)
    if plan.projection_radius is not None:
        norm = np.linalg.norm(W)
        if norm > plan.projection_radius:
            W = W * (plan.projection_radius / norm)
    return W


def _secret_order(plan, rng):
    """The secret permutation of a shuffled run (drawn once, kept every epoch)."""
    if plan.sampling != "shuffle":
        return None
    n = plan.n_samples
    order = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
    rng.shuffle(order)
    return order


def poisson_batch(n, q, rng):
    """Rows of one Poisson batch: each of ``n`` rows in it with probability ``q``.

    Drawn as a renewal process: the gaps between successive chosen rows are
    independent Geometric(q) variables, which gives exactly the independent
    Bernoulli(q) inclusions the subsampled-Gaussian accountant assumes, in
    O(nq) time and already sorted (no draw of the batch size, no sort), so
    the gather that follows reads memory in increasing order.

    Parameters
    ----------
    n : int
    q : float in (0, 1]
    rng : numpy.random.Generator

    Returns
    -------
    rows : ndarray of int64, increasing, values in [0, n)
    """
    expected = n * q
    # A chunk of gaps holds 6 standard deviations more than the expected
    # batch, so one chunk nearly always covers the n rows; more are drawn
    # (same size, same stream) until one does. ``math.sqrt`` rather than
    # ``np.sqrt``: the same correctly rounded value without a numpy call.
    chunk = int(expected + 6.0 * math.sqrt(expected) + 16)
    rows = rng.geometric(q, size=chunk).cumsum()
    rows -= 1  # positions of the chosen rows: the first gap counts from -1
    last = int(rows[-1])
    if last < n:
        parts = [rows]
        while last < n:
            positions = last + rng.geometric(q, size=chunk).cumsum()
            last = int(positions[-1])
            parts.append(positions)
        rows = np.concatenate(parts)
    return rows[: rows.searchsorted(n)]


def _take_rows(X, rows, buffer):
    """The rows ``X[rows]`` as float64, gathered into a reused buffer.

    Fancy indexing ``X[rows]`` allocates a fresh array for every batch, and
    faulting that memory in costs several times the copy itself (measured:
    a Poisson epoch's gathers at batch 1024 took 4x longer that way than
    with ``np.take`` into one reused buffer). The rows come from
    :func:`poisson_batch` or a secret order, so they are in range and the
    bounds check is skipped.

    Parameters
    ----------
    X : ndarray or memmap of shape (n_samples, n_features)
    rows : ndarray of int
    buffer : list of one ndarray or None
        Holder of the buffer, grown (and replaced) when a batch is larger.

    Returns
    -------
    Xb : ndarray of shape (len(rows), n_features)
        A view of the buffer when ``X`` is float64 (overwritten at the next
        call), else a float64 copy.
    """
    k = len(rows)
    if buffer[0] is None or buffer[0].shape[0] < k:
        buffer[0] = np.empty((int(1.25 * k) + 16, X.shape[1]), dtype=X.dtype)
    # The method rather than ``np.take``: one Python wrapper less per step.
    block = X.take(rows, axis=0, out=buffer[0][:k], mode="clip")
    return block if block.dtype == np.float64 else block.astype(float)


def _batches(plan, rng, order, n_rows):
    """Yield ``(step, rows)`` for every step: an index array or a slice.

    ``order`` is the secret permutation of a shuffled run whose data were not
    permuted up front (a memmap), else None: batches are then contiguous.
    Poisson batches draw each of the ``n_rows`` rows at the plan's rate,
    which under add/remove is set from a released count, not from
    ``n_rows``.
    """
    if plan.sampling == "poisson":
        q = plan.batch_sizes[0] / plan.n_samples
        for step in range(plan.n_steps):
            yield step, poisson_batch(n_rows, q, rng)
        return
    bounds = np.concatenate([[0], np.cumsum(plan.batch_sizes)])
    for epoch in range(plan.epochs):
        for j in range(len(plan.batch_sizes)):
            step = epoch * len(plan.batch_sizes) + j
            if order is None:
                yield step, slice(bounds[j], bounds[j + 1])
            else:
                yield step, np.sort(order[bounds[j] : bounds[j + 1]])


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
    """Run DP-SGD or DP-SGLD on the logistic loss; release only the last iterate.

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
        Cyclic and shuffled plans are for ``n_samples`` rows. A Poisson plan
        may be for another size (under add/remove, the released count): its
        rate and steps are used as they are, on the rows of ``X``.
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
    steps : SGDSteps or None
        The step sizes and clip norm to run with (from
        :func:`~skdp._solvers._sgd.schedule_run`); None: the plan's own. The
        events are the plan's either way.
    policy : SGDPolicy, default=DEFAULT_POLICY
        The probability floor's constants.

    Returns
    -------
    SGDResult
    """
    if plan.sampling != "poisson" and plan.n_samples != X.shape[0]:
        raise ValueError(
            f"The plan is for {plan.n_samples} rows, X has {X.shape[0]}: cyclic "
            "and shuffled batches need the plan of the data's size."
        )
    if row_norm is None:
        row_norm = UNBOUNDED_ROW_NORM
    steps = plan.steps if steps is None else steps
    binary = plan.n_classes == 2
    n_out = 1 if binary else plan.n_classes
    d = X.shape[1] + int(fit_intercept)
    W = np.zeros((d, n_out)) if init is None else np.array(init, dtype=float)
    eye = np.eye(plan.n_classes)
    order = _secret_order(plan, rng)
    if order is not None and not isinstance(X, np.memmap):
        # The secret order is the same every epoch, so one permuted copy per
        # fit (in memory, dropped on return) turns every batch into a
        # contiguous slice instead of a gather per step. Memmaps keep the
        # per-batch gather: copying them would defeat their purpose.
        X, codes = X[order], codes[order]
        if sample_weight is not None:
            sample_weight = sample_weight[order]
        order = None
    noise_sum = noise_multiplier * steps.clip_norm
    radius = feature_norm(row_norm, fit_intercept)
    steps_per_epoch = len(plan.batch_sizes)
    average_from = plan.n_steps - max(1, int(round(plan.tail_fraction * plan.n_steps)))
    W_sum, n_averaged = np.zeros_like(W), 0
    buffer = [None]
    table = None
    if plan.sampling == "poisson" and not isinstance(X, np.memmap):
        # A Poisson run visits each row about once per epoch through a gather;
        # the projection of every row, computed once (float64, one pass) and
        # stored beside its label and weight, is then one small lookup per
        # step instead of a norm, a projection and more gathers. Four columns
        # (32 bytes a row, the weight column unused without weights): numpy
        # gathers 32-byte items faster than 24-byte ones (3.3 against 4.6
        # microseconds for 256 rows of a 1,000,000-row table).
        raw = row_norms(X, exact=True)
        X, raw = tame_rows(X, raw, radius)
        table = np.column_stack(
            [
                *row_projection(raw, row_norm, fit_intercept),
                codes,
                np.zeros(X.shape[0]) if sample_weight is None else sample_weight,
            ]
        )
    # Everything the loop reads every step, looked up once: Python floats for
    # the step sizes and batch sizes (the same doubles as the plan's, without
    # a numpy scalar per step), and one problem dict whose weights change.
    # A Poisson step divides by the expected batch size, never by the drawn
    # size (no data-dependent scale).
    rates = steps.learning_rates.tolist()
    if plan.sampling == "poisson":
        denoms = [float(plan.batch_sizes[0])] * steps_per_epoch
    else:
        denoms = [float(size) for size in plan.batch_sizes]
    l2 = plan.l2
    sgld = plan.solver == "dp-sgld"
    prox = plan.l1 > 0 or plan.projection_radius is not None
    problem = {
        "binary": binary,
        "fit_intercept": fit_intercept,
        "clip_norm": steps.clip_norm,
        "weights": None,
    }
    for step, idx in _batches(plan, rng, order, X.shape[0]):
        eta = rates[step]
        if isinstance(idx, slice):
            Xb = np.asarray(X[idx], dtype=float)
        else:
            Xb = _take_rows(X, idx, buffer)
        if table is not None:
            # One gather of (scale, norm, label, weight) rows, read through
            # column views; the scale alone is copied to a contiguous vector
            # (it is read twice, in broadcast products that run about twice as
            # slow on a strided vector; copying every column costs more than
            # it saves). The label column holds the class index as a float:
            # binary targets are that column itself (the same 0.0 / 1.0 as the
            # cast codes).
            looked_up = table.take(idx, axis=0)
            scale, norm = looked_up[:, 0].copy(), looked_up[:, 1]
            if binary:
                Yb = looked_up[:, 2:3]
            else:
                Yb = eye[looked_up[:, 2].astype(np.intp)]
            if sample_weight is not None:
                problem["weights"] = looked_up[:, 3]
        else:
            labels = codes[idx]
            # Norms of the batch's rows while they sit in cache: no separate
            # pass over the data, and exact float64 norms for the projection.
            raw = np.sqrt(np.einsum("ij,ij->i", Xb, Xb))
            Xb, raw = tame_rows(Xb, raw, radius)
            scale, norm = row_projection(raw, row_norm, fit_intercept)
            Yb = labels[:, None].astype(float) if binary else eye[labels]
            if sample_weight is not None:
                problem["weights"] = sample_weight[idx]
        grad_sum = _clipped_gradient_sum(W, Xb, Yb, scale, norm, problem)
        denom = denoms[step % steps_per_epoch]
        if sgld:
            drift = grad_sum / denom + l2 * W
            std = np.sqrt(2.0 * eta) * noise_sum
            W = W - eta * drift + rng.normal(0.0, std, size=W.shape)
        else:
            # W - eta * ((grad_sum + noise) / denom + l2 W), in place: the same
            # operations in the same order (a sum or product of two numbers
            # does not depend on their order), without a new array for each.
            step_W = rng.normal(0.0, noise_sum, size=W.shape)
            step_W += grad_sum
            step_W /= denom
            step_W += l2 * W
            step_W *= eta
            W = W - step_W
        if prox:
            W = _prox_and_project(W, plan, eta)
        if step >= average_from:
            W_sum += W
            n_averaged += 1
        if verbose and (step + 1) % steps_per_epoch == 0:
            logger.info(
                "epoch %d/%d done (no loss shown: it would read the data unprotected)",
                (step + 1) // steps_per_epoch,
                plan.epochs,
            )
    W = W_sum / n_averaged
    if plan.calibration_noise is not None:
        W = calibrate_probabilities(
            X,
            codes,
            W,
            plan,
            noise_multiplier,
            row_norm=row_norm,
            fit_intercept=fit_intercept,
            rng=rng,
            steps=steps,
            policy=policy,
        )
    return SGDResult(W, plan.events(noise_multiplier), steps)

"""DP-SGD and DP-SGLD on a Dask array: only sums and the model travel.

The rows stay where they are. Each partition is held on the worker that
reads it (:func:`hold_rows`: its block, its class indices and weights, in a
:class:`PartitionRows`, persisted there) and answers four kinds of
question, each with an aggregate:

- :func:`summarise_partition`: its number of rows and of features, how many
  values are not finite, how many labels lie outside the declared classes,
  its class counts and what its weights break (a :class:`PartitionSummary`);
- :func:`partition_row_sum`: the sum of its rows, each put on a public
  ball (a centred run's centre, a vector of the features' length);
- :func:`partition_gradient`: the sum of the clipped per-example gradients
  of the rows of one step's batch that it holds, at the model it is sent
  (an array of the model's shape);
- :func:`partition_derivatives`: its sum of the probability floor's loss
  derivatives (a vector of the floor's grid).

The client keeps everything secret and draws everything random, exactly as
in memory: the batches (:func:`~skdp._solvers._sgd._batches.batch_indices`
run on a :class:`BatchRouter`, which knows the number of rows and the
partitions' offsets, never a value), the noise, the steps
(:func:`~skdp._solvers._sgd._run.descend`), from the same generator in the
same order. Each step sends every partition holding rows of the batch its
local row indices and the model, and adds the partitions' sums. So the run
is the in-memory run of the same rows, up to the order in which the float
sums are added.

Dask is an optional dependency (``pip install "skdp[dask]"``); this module
imports it only when a Dask collection is used.
"""

import sys
from dataclasses import dataclass

import numpy as np

from .._rows import (
    centred_rows,
    clipped_row_sum,
    feature_norm,
    row_projection,
    tame_rows,
)
from ._batches import Batch, secret_order
from ._centre import centred, release_run_centre, uncentred
from ._floor import _temperature_derivatives, calibrate_from_sums
from ._plan import UNBOUNDED_ROW_NORM
from ._policy import DEFAULT_POLICY
from ._run import (
    SGDResult,
    check_row_count,
    descend,
    initial_weights,
)
from ._steps import clipped_gradient_sum

__all__ = [
    "BatchRouter",
    "HeldRows",
    "PartitionRows",
    "PartitionSummary",
    "check_same_width",
    "check_summed_size",
    "hold_blocks",
    "hold_rows",
    "partition_derivatives",
    "partition_gradient",
    "partition_row_sum",
    "prepare_partition",
    "run_logistic_sgd_dask",
    "sum_of_answers",
    "summarise_partition",
]


class PartitionRows:
    """One partition as its worker holds it (never sent to the client).

    Attributes
    ----------
    X : ndarray or memmap of shape (n_rows, n_features)
        float32 or float64 as given (other dtypes as float64); a memmap is
        read batch by batch.
    codes : ndarray of int, shape (n_rows,)
        Class index of each row (a label outside the classes is counted by
        :func:`summarise_partition` and gets an index in range).
    outside : int
        Number of labels outside the declared classes.
    sample_weight : ndarray of shape (n_rows,) or None
    """

    def __init__(self, X, codes, outside, sample_weight):
        self.X, self.codes, self.outside = X, codes, outside
        self.sample_weight = sample_weight

    def __sizeof__(self):
        """Bytes held (what Dask's memory figures count)."""
        weights = 0 if self.sample_weight is None else self.sample_weight.nbytes
        held = 0 if isinstance(self.X, np.memmap) else self.X.nbytes
        return object.__sizeof__(self) + held + self.codes.nbytes + weights

    def batch(self, index, row_norm, fit_intercept, n_classes, centre=None):
        """The :class:`Batch` of the local rows ``index``, as in memory.

        The rows are centred (if ``centre`` is given) and projected onto the
        public ball as :func:`~skdp._solvers._sgd._batches.training_rows`
        does (exact float64 norms, :func:`tame_rows`, :func:`row_projection`).
        """
        rows = np.asarray(self.X.take(index, axis=0), dtype=float)
        if centre is not None:
            rows = centred_rows(rows, centre, feature_norm(row_norm, fit_intercept))
        labels = self.codes[index]
        raw = np.sqrt(np.einsum("ij,ij->i", rows, rows))
        rows, raw = tame_rows(rows, raw, feature_norm(row_norm, fit_intercept))
        scale, norm = row_projection(raw, row_norm, fit_intercept)
        if n_classes == 2:
            targets = labels[:, None].astype(float)
        else:
            targets = np.eye(n_classes)[labels]
        weights = None if self.sample_weight is None else self.sample_weight[index]
        return Batch(rows, targets, scale, norm, weights)


def prepare_partition(X, y, sample_weight, classes):
    """A block of ``X``, its labels and weights as a :class:`PartitionRows`.

    Runs where the block is read. Labels are encoded on the declared
    ``classes``; those outside are counted, not refused here (the client
    refuses the fit from the counts of every partition, before any step).
    """
    X = np.asarray(X) if not isinstance(X, np.memmap) else X
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    y = np.asarray(y).ravel()
    lengths = [len(y)] + ([] if sample_weight is None else [len(sample_weight)])
    if any(n != X.shape[0] for n in lengths):
        raise ValueError(
            f"A partition has {X.shape[0]} rows of X and {lengths[0]} labels"
            + ("" if sample_weight is None else f" and {lengths[1]} weights")
            + ": X, y and sample_weight must have the same partitions."
        )
    position = np.searchsorted(classes, y)
    position = np.minimum(position, classes.size - 1)
    known = classes[position] == y
    codes = np.where(known, position, 0).astype(np.min_scalar_type(classes.size - 1))
    weights = None
    if sample_weight is not None:
        weights = np.asarray(sample_weight, dtype=float).ravel()
    return PartitionRows(X, codes, int(np.count_nonzero(~known)), weights)


@dataclass(frozen=True)
class PartitionSummary:
    """What validation reads of a partition, and of a sum of partitions.

    Attributes
    ----------
    n_rows : int
    n_features : int
    n_labels : int
        Number of labels (must equal ``n_rows``).
    not_finite : int
        Number of entries of ``X`` that are NaN or infinite.
    outside : int
        Number of labels outside the declared classes.
    class_counts : ndarray of int64, shape (n_classes,)
    weights_out_of_range : int
        Number of weights not finite or outside [0, 1] (0 without weights).
    weights_positive : int
        Number of positive weights (``n_rows`` without weights).
    """

    n_rows: int
    n_features: int
    n_labels: int
    not_finite: int
    outside: int
    class_counts: np.ndarray
    weights_out_of_range: int
    weights_positive: int

    def __add__(self, other):
        check_same_width(self, other)
        return PartitionSummary(
            self.n_rows + other.n_rows,
            self.n_features,
            self.n_labels + other.n_labels,
            self.not_finite + other.not_finite,
            self.outside + other.outside,
            self.class_counts + other.class_counts,
            self.weights_out_of_range + other.weights_out_of_range,
            self.weights_positive + other.weights_positive,
        )


def summarise_partition(part, n_classes, chunk=65536):
    """The :class:`PartitionSummary` of a held partition (aggregates only)."""
    X = part.X
    not_finite = 0
    for lo in range(0, X.shape[0], chunk):
        block = np.asarray(X[lo : lo + chunk])
        not_finite += int(block.size - np.count_nonzero(np.isfinite(block)))
    weights = part.sample_weight
    if weights is None:
        out_of_range, positive, n_weights = 0, X.shape[0], X.shape[0]
    else:
        inside = np.isfinite(weights) & (weights >= 0) & (weights <= 1)
        out_of_range = int(np.count_nonzero(~inside))
        positive = int(np.count_nonzero(weights > 0))
        n_weights = weights.size
    if n_weights != X.shape[0]:
        raise ValueError(
            f"A partition has {X.shape[0]} rows of X and {n_weights} sample weights."
        )
    counts = np.bincount(part.codes, minlength=n_classes).astype(np.int64)
    counts[0] -= part.outside  # labels outside the classes are not class 0
    return PartitionSummary(
        n_rows=int(X.shape[0]),
        n_features=int(X.shape[1]),
        n_labels=int(part.codes.size),
        not_finite=not_finite,
        outside=part.outside,
        class_counts=counts,
        weights_out_of_range=out_of_range,
        weights_positive=positive,
    )


def partition_gradient(part, index, W, loss, row_norm, centre=None):
    """The clipped gradient sum over the local rows ``index`` at ``W``.

    An array of the shape of ``W``: the partition's share of the step's
    :func:`~skdp._solvers._sgd._steps.clipped_gradient_sum` (on the rows
    moved by ``centre``, if given).
    """
    n_classes = 2 if W.shape[1] == 1 else W.shape[1]
    batch = part.batch(index, row_norm, loss.fit_intercept, n_classes, centre)
    return clipped_gradient_sum(W, batch, loss)


def partition_derivatives(
    part, W, anchor, row_norm, fit_intercept, policy, centre=None
):
    """The partition's sum of the probability floor's loss derivatives."""
    return _temperature_derivatives(
        part.X,
        part.codes,
        W,
        anchor,
        row_norm,
        fit_intercept,
        policy,
        centre=centre,
    )


def partition_row_sum(part, radius):
    """The partition's sum of its rows, each put on the ball of ``radius``.

    Its share of the centre's release
    (:func:`~skdp._solvers._rows.clipped_row_sum`).
    """
    return clipped_row_sum(part.X, radius)


def _active_client():
    """The ``distributed.Client`` Dask would compute on now, or None.

    None under a local scheduler, including one set with
    ``dask.config.set(scheduler=...)`` while a client exists; never imports
    distributed.
    """
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    import dask

    client = getattr(dask.base.get_scheduler(), "__self__", None)
    return client if isinstance(client, distributed.Client) else None


def check_same_width(summary, other):
    """Refuse two partition summaries of different feature counts."""
    if other.n_features != summary.n_features:
        raise ValueError(
            f"Partitions of X have {summary.n_features} and {other.n_features} "
            "features: every block must hold every column."
        )


def check_summed_size(summary):
    """The in-memory size checks (rows and features), on the partitions' sum.

    The messages are scikit-learn's, as an in-memory fit raises them.
    """
    if summary.n_rows == 0:
        raise ValueError(
            f"Found array with 0 sample(s) (shape=(0, {summary.n_features})) "
            "while a minimum of 1 is required."
        )
    if summary.n_features == 0:
        raise ValueError(
            f"Found array with 0 feature(s) (shape=({summary.n_rows}, 0)) "
            "while a minimum of 1 is required."
        )


def _raise_first_failure(parts):
    """Raise on the client the first error of a held partition's task, as raised.

    A partition that fails where it is read (an encoder refusing an undeclared
    category, a check of the rows) leaves its future in error and held nowhere;
    its own exception, with its message, is what the user must see.
    """
    for part in parts:
        if part.status == "error":
            part.result()


class HeldRows:
    """Partitions held where they are, and a task per partition run on them.

    With an active ``distributed.Client`` each partition is a future on the
    worker that computed it, and each task is submitted beside it; otherwise
    (Dask's local threads or synchronous scheduler, one process) the
    partitions are computed once and each question is a small graph of
    tasks on them, run by the current scheduler.

    Attributes
    ----------
    parts : list
        The held :class:`PartitionRows` (futures on the workers, or the
        objects themselves on a local scheduler).
    summary : PartitionSummary
        Their sum.
    offsets : ndarray of int64, shape (n_partitions + 1,)
        Row offsets of the partitions, in the order of ``X``.
    """

    def __init__(self, parts, client):
        self.parts, self.client = parts, client
        self.summary = None
        self.offsets = None
        self.workers = None
        if client is not None:
            client.wait_for_workers(1)
            from distributed import wait

            wait(parts)
            _raise_first_failure(parts)
            where = client.who_has(parts)
            self.workers = [sorted(where[part.key])[0] for part in parts]

    @property
    def shape(self):
        return (self.summary.n_rows, self.summary.n_features)

    def ask(self, function, questions):
        """``function(part_k, *args)`` for each ``(k, args)``; their results.

        Only the results travel to the client: each is computed where the
        partition is held.
        """
        if self.client is not None:
            futures = [
                self.client.submit(function, self.parts[k], *args, pure=False)
                for k, args in questions
            ]
            return self.client.gather(futures)
        import dask

        # One small graph of literal tasks on the current local scheduler:
        # no tokenizing of the model and indices a step (dask.delayed would).
        name = function.__name__
        graph = {
            f"{name}-{k}": (function, self.parts[k], *args) for k, args in questions
        }
        return dask.base.get_scheduler()(graph, list(graph))

    def ask_sum(self, function, questions):
        """The sum of ``function(part_k, *args)`` over the ``(k, args)`` given.

        On a cluster, one task per worker sums its partitions' answers
        (:func:`sum_of_answers`) and sends one array: a round trip a step
        costs one message per worker, not one per partition.
        """
        if self.client is None:
            answers = self.ask(function, questions)
        else:
            by_worker = {}
            for k, args in questions:
                parts, arguments = by_worker.setdefault(self.workers[k], ([], []))
                parts.append(self.parts[k])
                arguments.append(args)
            futures = [
                self.client.submit(
                    sum_of_answers,
                    function,
                    parts,
                    arguments,
                    workers=[worker],
                    allow_other_workers=True,
                    pure=False,
                )
                for worker, (parts, arguments) in by_worker.items()
            ]
            answers = self.client.gather(futures)
        total = None
        for answer in answers:
            total = answer if total is None else total + answer
        return total

    def summarise(self, n_classes):
        """Sum every partition's :class:`PartitionSummary`; set the offsets."""
        parts = self.ask(
            summarise_partition, [(k, (n_classes,)) for k in range(len(self.parts))]
        )
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        self.summary = total
        self.offsets = np.concatenate([[0], np.cumsum([p.n_rows for p in parts])])
        return total

    def row_sum(self, radius):
        """The rows' clipped sum (:func:`partition_row_sum`) over the partitions."""
        questions = [(k, (radius,)) for k in range(len(self.parts))]
        return self.ask_sum(partition_row_sum, questions)

    def gradient(self, router, row_norm, centre=None):
        """``(W, index, loss) -> sum``: a step's gradient summed over the partitions."""

        def gradient(W, index, loss):
            questions = [
                (k, (local, W, loss, row_norm, centre))
                for k, local in router.split(router.rows_of(index))
            ]
            if not questions:  # an empty batch (balls-and-bins): a zero sum
                return np.zeros_like(W)
            return self.ask_sum(partition_gradient, questions)

        return gradient

    def floor_sums(self, centre=None):
        """The floor's two sums (:class:`~skdp._solvers._sgd._floor.RowSums`)."""
        return _HeldSums(self, centre)


class _HeldSums:
    """The probability floor's sums over held partitions (rows moved by ``centre``)."""

    def __init__(self, held, centre=None):
        self.held, self.centre = held, centre

    def class_counts(self, n_classes):
        return self.held.summary.class_counts

    def temperature_derivatives(self, W, anchor, row_norm, fit_intercept, policy):
        args = (W, anchor, row_norm, fit_intercept, policy, self.centre)
        questions = [(k, args) for k in range(len(self.held.parts))]
        return self.held.ask_sum(partition_derivatives, questions)


def _aligned_blocks(X, y, sample_weight):
    """Delayed blocks of ``X`` (whole rows), ``y`` and the weights, aligned.

    A vector with known chunks is rechunked like the rows of ``X``. With
    unknown chunk sizes (a frame's partitions) a vector with as many blocks
    as ``X`` is taken block for block, and each partition checks that its
    lengths agree; otherwise (a NumPy vector, or a frame whose partitions
    Dask laid out differently, as it may for a read of a few Parquet
    columns) the chunk sizes are computed first (a pass returning only
    lengths) and the vector is rechunked like ``X``.
    """
    import dask.array as da

    X = X.rechunk({1: -1})
    vectors = [
        v if v is None or isinstance(v, da.Array) else np.asarray(v)
        for v in (y, sample_weight)
    ]
    block_for_block = all(
        isinstance(v, da.Array) and v.numblocks[0] == X.numblocks[0]
        for v in vectors
        if v is not None
    )
    if any(np.isnan(X.chunks[0])) and not block_for_block:
        X = X.compute_chunk_sizes()
    blocks = [list(np.ravel(X.to_delayed()))]
    for v in vectors:
        if v is None:
            blocks.append([None] * len(blocks[0]))
            continue
        if not isinstance(v, da.Array):
            v = da.from_array(v, chunks=(X.chunks[0],))
        elif not any(np.isnan(X.chunks[0])):
            if any(np.isnan(v.chunks[0])):
                v = v.compute_chunk_sizes()
            v = v.rechunk((X.chunks[0],))
        blocks.append(list(np.ravel(v.to_delayed())))
    return list(zip(*blocks, strict=True))


def hold_rows(X, y, sample_weight, classes):
    """Read every partition once, hold it where it was read; sum the summaries.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Known chunk sizes; blocks that split the columns are merged first.
    y : dask.array.Array or ndarray of shape (n_samples,)
        Chunked like the rows of ``X`` (rechunked otherwise).
    sample_weight : dask.array.Array, ndarray or None
    classes : ndarray
        The declared classes, sorted.

    Returns
    -------
    HeldRows
        Summarised (:meth:`HeldRows.summarise`): nothing is refused here.
    """
    held = hold_blocks(prepare_partition, _aligned_blocks(X, y, sample_weight), classes)
    held.summarise(classes.size)
    return held


def hold_blocks(prepare, blocks, *args):
    """``prepare(*block, *args)`` for each block, held where it is computed.

    Parameters
    ----------
    prepare : callable
        Module-level (its name keys the tasks); returns what a worker holds.
    blocks : list of tuple
        Aligned delayed blocks (:func:`_aligned_blocks`).
    *args
        Public arguments, the same for every block.

    Returns
    -------
    HeldRows
        Not summarised.
    """
    import dask

    task = dask.delayed(prepare, pure=True)
    parts = [task(*block, *args) for block in blocks]
    client = _active_client()
    if client is not None:
        return HeldRows(client.compute(parts), client)
    return HeldRows(list(dask.compute(*parts)), None)


def sum_of_answers(function, parts, arguments):
    """``sum(function(part, *args))`` over the parts a worker holds."""
    total = None
    for part, args in zip(parts, arguments, strict=True):
        answer = function(part, *args)
        total = answer if total is None else total + answer
    return total


class BatchRouter:
    """What the batches read of the rows, on the client: never a value.

    Plays the rows for :func:`~skdp._solvers._sgd._batches.batch_indices`:
    their number (``n_rows``), the secret order of a shuffled run
    (``order``: batches then come as sorted index arrays) and, for
    balls-and-bins epochs, the arrangement each epoch's slices index
    (:meth:`arrange`). :meth:`split` then sends each row index to the
    partition holding it.
    """

    def __init__(self, offsets, order):
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.order = order
        self._arrangement = None

    @property
    def n_rows(self):
        return int(self.offsets[-1])

    def arrange(self, order):
        """Record the epoch's arrangement of the rows (its slices index it)."""
        self._arrangement = order

    def rows_of(self, index):
        """The row indices of a step: an index array, or a slice of the arrangement."""
        if not isinstance(index, slice):
            return np.asarray(index)
        if self._arrangement is not None:
            return self._arrangement[index]
        return np.arange(index.start, index.stop)

    def split(self, rows):
        """Yield ``(partition, local indices)`` for each partition holding some."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size > 1 and np.any(rows[1:] < rows[:-1]):
            rows = np.sort(rows)
        cuts = np.searchsorted(rows, self.offsets)
        for k in range(self.offsets.size - 1):
            if cuts[k + 1] > cuts[k]:
                yield k, rows[cuts[k] : cuts[k + 1]] - self.offsets[k]


def run_logistic_sgd_dask(
    held,
    plan,
    noise_multiplier,
    *,
    row_norm,
    fit_intercept,
    rng,
    init=None,
    verbose=0,
    steps=None,
    policy=DEFAULT_POLICY,
):
    """:func:`~skdp._solvers._sgd.run_logistic_sgd` on held partitions.

    The same draws from ``rng`` in the same order (the secret order of a
    shuffled run, the batches, the noise, the floor's releases), the same
    steps and the same events; each step's clipped gradient sum and the
    floor's two sums are summed over the partitions
    (:class:`HeldRows`). The model equals the in-memory one up to the order
    of float sums.

    Parameters
    ----------
    held : HeldRows
        Summarised partitions (:func:`hold_rows`).
    plan, noise_multiplier, row_norm, fit_intercept, rng, init, verbose, \
steps, policy
        As for :func:`~skdp._solvers._sgd.run_logistic_sgd`.

    Returns
    -------
    SGDResult
    """
    n_rows, n_features = held.shape
    check_row_count(plan, n_rows)
    row_norm = UNBOUNDED_ROW_NORM if row_norm is None else row_norm
    steps = plan.steps if steps is None else steps
    W = initial_weights(plan, n_features, fit_intercept, init)
    centre = release_run_centre(
        plan, held.row_sum, n_features, row_norm, fit_intercept, rng, policy
    )
    W = centred(W, centre)
    router = BatchRouter(held.offsets, secret_order(plan, rng))
    gradient = held.gradient(router, row_norm, centre)
    W = descend(
        W,
        router,
        plan,
        steps,
        noise_multiplier,
        fit_intercept,
        rng,
        verbose,
        gradient=gradient,
    )
    if plan.calibration_noise is not None:
        W = calibrate_from_sums(
            held.floor_sums(centre),
            W,
            plan,
            noise_multiplier,
            row_norm=row_norm,
            fit_intercept=fit_intercept,
            rng=rng,
            steps=steps,
            policy=policy,
        )
    return SGDResult(uncentred(W, centre), plan.events(noise_multiplier), steps)

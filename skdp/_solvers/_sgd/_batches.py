"""Which rows each step reads, and reading them.

The batches of a run (:func:`batch_indices`: Poisson draws, a fresh
balls-and-bins allocation each epoch, or a cyclic partition of the rows in
their order or in a secret one) and the rows of each batch, projected onto
the public ball and ready for the gradient (:func:`training_rows`).
"""

import math
from typing import NamedTuple

import numpy as np

from .._allocation import allocate_epoch
from .._rows import (
    centred_rows,
    feature_norm,
    row_norms,
    row_projection,
    tame_rows,
)

# Bytes of rows and records a balls-and-bins block gathers: 1 MB stays in
# cache while its steps read it, and ran at least as fast as 0.25 to 4 MB
# (docs/benchmarks.md, "Balls-and-bins batches").
_BLOCK_BYTES = 1 << 20

__all__ = [
    "Batch",
    "batch_indices",
    "poisson_batch",
    "secret_order",
    "training_rows",
]


def secret_order(plan, rng):
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


def batch_indices(plan, rng, rows):
    """Yield ``(step, index)`` for every step: an index array or a slice.

    ``rows`` (from :func:`training_rows`) reads the batches; ``rows.order``
    is the secret permutation of a shuffled run whose data were not permuted
    up front (a memmap), else None: batches are then contiguous. Poisson
    batches draw each of the ``rows.n_rows`` rows at the plan's rate, which
    under add/remove is set from a released count, not from the rows.
    Balls-and-bins epochs allocate the rows to the plan's steps
    (:func:`allocation_batches`). Lazy: a batch is drawn when its step (or
    its epoch) comes.
    """
    n_rows, order = rows.n_rows, rows.order
    if plan.sampling == "balls-and-bins":
        yield from allocation_batches(plan, rng, rows)
        return
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


def allocation_batches(plan, rng, rows):
    """Yield ``(step, slice)`` of balls-and-bins epochs, arranging ``rows`` for each.

    Every epoch draws a fresh allocation of all ``rows.n_rows`` rows to the
    plan's steps an epoch (its number set by the plan, never by the rows:
    under add/remove the plan reads a released count) from the secret
    ``rng``, hands its order to ``rows.arrange`` and yields each step's
    slice of that order (the step's rows, in increasing row index); an empty
    batch is a step too.
    """
    per_epoch = len(plan.batch_sizes)
    for epoch in range(plan.epochs):
        allocation = allocate_epoch(rows.n_rows, per_epoch, rng)
        rows.arrange(allocation.order)
        bounds = allocation.bounds.tolist()
        for j in range(per_epoch):
            yield epoch * per_epoch + j, slice(bounds[j], bounds[j + 1])


class Batch(NamedTuple):
    """The rows of one step, ready for the gradient.

    Attributes
    ----------
    rows : ndarray of shape (b, n_features)
        float64, unprojected (the projection is ``scale``).
    targets : ndarray of shape (b, n_outputs)
        The label (binary) or its one-hot row.
    scale : ndarray of shape (b,)
        ``min(1, feature_norm / ||x_i||)`` (see
        :func:`~skdp._solvers._rows.row_projection`).
    norm : ndarray of shape (b,)
        Norm of each projected row, intercept included.
    weights : ndarray of shape (b,) or None
    """

    rows: np.ndarray
    targets: np.ndarray
    scale: np.ndarray
    norm: np.ndarray
    weights: np.ndarray | None


class _RowGather:
    """Gathers ``X[rows]`` as float64 into one buffer reused across batches.

    Fancy indexing ``X[rows]`` allocates a fresh array for every batch, and
    faulting that memory in costs several times the copy itself
    (docs/benchmarks.md, "DP-SGD epoch speed"). The rows come from
    :func:`poisson_batch`, an allocation or a secret order, so they are in
    range and the bounds check is skipped.
    """

    def __init__(self):
        self._buffer = None

    def take(self, X, rows):
        """``X[rows]`` as float64.

        A view of the buffer when ``X`` is float64 (overwritten by the next
        call), else a float64 copy.
        """
        k = len(rows)
        if self._buffer is None or self._buffer.shape[0] < k:
            self._buffer = np.empty((int(1.25 * k) + 16, X.shape[1]), dtype=X.dtype)
        # The method rather than ``np.take``: one Python wrapper less per step.
        block = X.take(rows, axis=0, out=self._buffer[:k], mode="clip")
        return block if block.dtype == np.float64 else block.astype(float)


class _Rows:
    """The rows a run reads, in the order its batches index them.

    Attributes
    ----------
    X : ndarray or memmap of shape (n_rows, n_features)
    codes : ndarray of int, shape (n_rows,)
    order : ndarray of int or None
        The secret order batches still go through (a shuffled memmap).
    centre : ndarray of shape (n_features,) or None
        The centre each batch's rows are still moved by (a memmap's, whose
        rows are centred as they are read); None: ``X`` is as the run reads
        it.
    """

    def __init__(
        self, X, codes, sample_weight, order, n_classes, fit_intercept, centre=None
    ):
        self.X, self.codes, self.order = X, codes, order
        self.centre = centre
        self.sample_weight = sample_weight
        self.binary = n_classes == 2
        self.one_hot = np.eye(n_classes)
        self.fit_intercept = fit_intercept
        self._gather = _RowGather()

    @property
    def n_rows(self):
        return self.X.shape[0]

    def _features(self, index):
        """The batch's rows as float64: a slice, or gathered."""
        if isinstance(index, slice):
            return np.asarray(self.X[index], dtype=float)
        return self._gather.take(self.X, index)


class _ProjectedAsRead(_Rows):
    """Rows projected batch by batch, their norms taken while they sit in cache."""

    def __init__(self, *args, row_norm, **kwargs):
        super().__init__(*args, **kwargs)
        self.row_norm = row_norm
        self.radius = feature_norm(row_norm, self.fit_intercept)

    def batch(self, index):
        """The :class:`Batch` of the rows ``index`` (index array or slice)."""
        rows = self._features(index)
        if self.centre is not None:
            rows = centred_rows(rows, self.centre, self.radius)
        labels = self.codes[index]
        # Exact float64 norms for the projection, with no separate pass.
        raw = np.sqrt(np.einsum("ij,ij->i", rows, rows))
        rows, raw = tame_rows(rows, raw, self.radius)
        scale, norm = row_projection(raw, self.row_norm, self.fit_intercept)
        targets = labels[:, None].astype(float) if self.binary else self.one_hot[labels]
        weights = None if self.sample_weight is None else self.sample_weight[index]
        return Batch(rows, targets, scale, norm, weights)


class _ProjectedOnce(_Rows):
    """Rows whose projection, label and weight are looked up, computed once.

    A Poisson or balls-and-bins run visits each row about once per epoch
    through a gather; the projection of every row, computed once (float64,
    one pass) and stored beside its label and weight as one record per row,
    is then one small lookup per step instead of a norm, a projection and
    more gathers. Four columns (32 bytes a row, the weight column unused
    without weights): numpy gathers 32-byte items faster than 24-byte ones
    (docs/benchmarks.md, "DP-SGD epoch speed").
    """

    def __init__(
        self,
        X,
        codes,
        sample_weight,
        order,
        n_classes,
        fit_intercept,
        centre=None,
        *,
        row_norm,
    ):
        if centre is not None:
            raise ValueError("Looked-up projections need rows centred up front.")
        raw = row_norms(X, exact=True)
        X, raw = tame_rows(X, raw, feature_norm(row_norm, fit_intercept))
        super().__init__(X, codes, sample_weight, order, n_classes, fit_intercept)
        weight = np.zeros(X.shape[0]) if sample_weight is None else sample_weight
        self.records = np.column_stack(
            [*row_projection(raw, row_norm, fit_intercept), codes, weight]
        )

    def batch(self, index):
        """The :class:`Batch` of the rows ``index`` (an index array)."""
        return self._assemble(self._features(index), self.records.take(index, axis=0))

    def _assemble(self, rows, records):
        """The :class:`Batch` of ``rows`` and their ``records``."""
        # The records are read through column views; the scale alone is
        # copied to a contiguous vector (it is read twice, in broadcast
        # products that run about twice as slow on a strided vector; copying
        # every column costs more than it saves). The label column holds the
        # class index as a float: binary targets are that column itself (the
        # same 0.0 / 1.0 as the cast codes).
        scale, norm = records[:, 0].copy(), records[:, 1]
        if self.binary:
            targets = records[:, 2:3]
        else:
            targets = self.one_hot[records[:, 2].astype(np.intp)]
        weights = None if self.sample_weight is None else records[:, 3]
        return Batch(rows, targets, scale, norm, weights)


class _SlicedRows(_ProjectedOnce):
    """In-memory rows read by contiguous slices, their projections computed once.

    A cyclic or shuffled run on an array in memory (a shuffled one copied in
    its secret order) reads each batch as a slice: the rows and their
    records (:class:`_ProjectedOnce`) are views, so a step computes no norm
    or projection (docs/benchmarks.md, "DP-SGD epoch speed").
    """

    def batch(self, index):
        """The :class:`Batch` of the slice ``index`` of the rows."""
        return self._assemble(self._features(index), self.records[index])


class _ArrangedRows(_ProjectedOnce):
    """In-memory rows and their records, gathered in blocks of an epoch's order.

    Every epoch's order (an allocation: each step's rows contiguous in it)
    is read in consecutive blocks: a block's rows and records
    (:class:`_ProjectedOnce`) are gathered into two small buffers reused
    across blocks and epochs, and each step of the block reads contiguous
    slices of them, still in cache from the gather, and looks nothing up. A
    block spans :data:`_BLOCK_BYTES` of rows from the first step it serves,
    or that whole step if it is larger; the rows of a step split by the
    block's end are moved to the front of the next block rather than
    gathered again. ``X`` and ``codes`` stay in the data's order; no copy of
    ``X`` is made.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        row_bytes = self.X[:1].nbytes + self.records[:1].nbytes
        self._block_size = max(1, _BLOCK_BYTES // row_bytes)
        size = min(self._block_size, self.n_rows)
        self._rows_block = np.empty((size, self.X.shape[1]), dtype=self.X.dtype)
        self._records_block = np.empty_like(self.records[:size])
        self._order = None
        self._start = self._stop = 0

    def arrange(self, order):
        """Read the epoch's slices from ``order`` (a permutation of the rows)."""
        self._order = order
        self._start = self._stop = 0

    def batch(self, index):
        """The :class:`Batch` of the slice ``index`` of the epoch's order."""
        start, stop = index.start, index.stop
        if start < self._start or stop > self._stop:
            self._gather_block(start, stop)
        lo, hi = start - self._start, stop - self._start
        rows = np.asarray(self._rows_block[lo:hi], dtype=float)
        return self._assemble(rows, self._records_block[lo:hi])

    def _gather_block(self, start, stop):
        """Gather the block of the order from ``start``, to ``stop`` at least.

        The block ends a block's worth of rows after ``start`` (at the end
        of the order at most) or at ``stop`` if that is further. Rows of the
        current block from ``start`` on are moved, not gathered again.
        """
        stop = min(max(stop, start + self._block_size), len(self._order))
        size, first = stop - start, start - self._start
        kept = self._stop - start if self._start <= start < self._stop else 0
        self._rows_block = _moved_to_front(self._rows_block, first, kept, size)
        self._records_block = _moved_to_front(self._records_block, first, kept, size)
        # ``order`` is a permutation of the rows: in range, so no bounds check.
        rows = self._order[start + kept : stop]
        self.X.take(rows, axis=0, out=self._rows_block[kept:size], mode="clip")
        self.records.take(rows, axis=0, out=self._records_block[kept:size], mode="clip")
        self._start, self._stop = start, stop


def _moved_to_front(buffer, first, kept, size):
    """``buffer`` with its rows ``first:first + kept`` moved to the front.

    A larger buffer if ``buffer`` holds fewer than ``size`` rows.
    """
    if size > len(buffer):
        grown = np.empty((size, buffer.shape[1]), dtype=buffer.dtype)
        grown[:kept] = buffer[first : first + kept]
        return grown
    if kept and first:
        buffer[:kept] = buffer[first : first + kept]
    return buffer


class _AllocatedMemmapRows(_ProjectedAsRead):
    """A memmap's rows gathered step by step through the epoch's allocation.

    The memmap is never copied: each step's slice of the allocation's order
    (rows in increasing index) is gathered and projected when it comes.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._epoch_order = None

    def arrange(self, order):
        """Keep ``order`` (a permutation) for the epoch's slices."""
        self._epoch_order = order

    def batch(self, index):
        """The :class:`Batch` of the slice ``index`` of the epoch's order."""
        return super().batch(self._epoch_order[index])


def _centred_copy(X, centre, radius, chunk=65536):
    """``centred_rows`` of every row of ``X``, into one new float64 array."""
    out = np.empty(X.shape, dtype=float)
    for lo in range(0, X.shape[0], chunk):
        out[lo : lo + chunk] = centred_rows(X[lo : lo + chunk], centre, radius)
    return out


def training_rows(
    X, codes, sample_weight, plan, rng, *, row_norm, fit_intercept, centre=None
):
    """The rows of a run, in the order its batches index them.

    Draws the secret order of a shuffled run. An in-memory array is then
    copied once in that order (memory for a second copy of ``X``, in
    exchange for contiguous batches); a memmap keeps the per-batch gather
    (copying it would defeat its purpose). A ``centre`` (released,
    :mod:`~skdp._solvers._sgd._centre`) moves every row once it is on the
    public ball (:func:`~skdp._solvers._rows.centred_rows`): an in-memory
    array once, into a float64 copy; a memmap's rows as each batch is read.
    On an in-memory array, each row's projection is computed once: Poisson
    runs look it up (:class:`_ProjectedOnce`), cyclic and shuffled runs read
    it by slices (:class:`_SlicedRows`) and balls-and-bins runs gather the
    rows and those projections in cache-sized blocks of each epoch's
    allocation (:class:`_ArrangedRows`, no copy of ``X``). A memmap's
    batches are projected as they are read
    (:class:`_ProjectedAsRead`; balls-and-bins:
    :class:`_AllocatedMemmapRows`).

    Returns
    -------
    rows
        With ``X`` and ``codes`` (as the batches index them), ``order`` and
        ``batch(index) -> Batch``.
    """
    order = secret_order(plan, rng)
    in_memory = not isinstance(X, np.memmap)
    if order is not None and in_memory:
        X, codes = X[order], codes[order]
        if sample_weight is not None:
            sample_weight = sample_weight[order]
        order = None
    if centre is not None and in_memory:
        X = _centred_copy(X, centre, feature_norm(row_norm, fit_intercept))
        centre = None
    if plan.sampling == "balls-and-bins":
        kind = _ArrangedRows if in_memory else _AllocatedMemmapRows
    elif plan.sampling == "poisson" and in_memory:
        kind = _ProjectedOnce
    elif in_memory:
        kind = _SlicedRows
    else:
        kind = _ProjectedAsRead
    return kind(
        X,
        codes,
        sample_weight,
        order,
        plan.n_classes,
        fit_intercept,
        centre,
        row_norm=row_norm,
    )

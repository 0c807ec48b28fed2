"""Random allocation (balls-and-bins) batches: every record in one step an epoch.

In each epoch every record is placed into exactly one of ``t`` steps, chosen
uniformly at random and independently of every other record and of every
other epoch; step ``j``'s batch is the set of records placed there. Batch
sizes are therefore jointly multinomial ``(n; 1/t, ..., 1/t)`` (mean ``n/t``,
possibly zero), which is what separates this sampler from shuffling, whose
equal-size batches tie the records of an epoch together. This is the
"balls-and-bins" sampling of Chua, Ghazi, Harrison, Leeman, Kamath, Kumar,
Manurangsi, Sinha and Zhang, "Balls-and-Bins Sampling for DP-SGD" (AISTATS
2025, PMLR 258:946-954; arXiv:2412.16802), the ``k = 1`` case of the random
``k``-out-of-``t`` allocation of Feldman and Shenfeld, "Privacy amplification
by random allocation" (arXiv:2502.08202). It is accounted by
:class:`~skdp.accounting.RandomAllocationGaussianEvent` (one event per run,
``epochs`` fresh allocations), under these conditions, which the caller must
meet:

- the allocation is drawn from the run's secret random state and never
  released (neither the order nor the batch sizes);
- a fresh allocation is drawn for every epoch (:func:`allocate_epoch` once
  per epoch);
- every step runs, an empty batch included, and adds its noise to the sum of
  its batch's clipped contributions; the noisy sum is then scaled by a public
  number (the expected batch size ``n / t``), never by the realised size,
  which is a function of the secret allocation (and, under add/remove, of
  whether the record is there);
- under replace-one a record keeps its row index, so its step is drawn the
  same way whichever value the row holds.

Layout. The allocation is returned as one permutation of the rows in which
each step's rows are contiguous and, within a step, in increasing row index,
with the cumulative offsets of the steps: gathering a batch reads the rows of
a memory map in increasing order, as a cyclic or shuffled pass does. The
permutation is a stable sort of the step labels; labels fit 16 bits when
``t <= 2**16`` and numpy's stable sort of 16-bit keys is a radix sort (two
counting-sort passes over bytes), O(n); with more steps the labels are sorted
by two stable passes over 16-bit digits (least significant first), still
O(n).
"""

from dataclasses import dataclass
from numbers import Integral

import numpy as np

__all__ = ["EpochAllocation", "allocate_epoch", "allocation_steps"]

# Labels are sorted by numpy's radix sort, which takes keys of at most 16 bits.
_DIGIT_BITS = 16
_DIGIT_MASK = (1 << _DIGIT_BITS) - 1
# Two 16-bit digits: at most 2**32 steps an epoch.
_MAX_STEPS = 1 << (2 * _DIGIT_BITS)


@dataclass(frozen=True)
class EpochAllocation:
    """One epoch's allocation of rows to steps, as contiguous batches.

    Parameters
    ----------
    order : ndarray of int of shape (n_rows,)
        A permutation of ``range(n_rows)``: step ``j``'s rows are
        ``order[bounds[j]:bounds[j + 1]]``, in increasing row index.
    bounds : ndarray of int64 of shape (n_steps + 1,)
        Cumulative offsets: ``bounds[0] == 0``, ``bounds[-1] == n_rows``,
        non-decreasing (an empty step has ``bounds[j] == bounds[j + 1]``).

    Both arrays are made read-only: an allocation is a value.
    """

    order: np.ndarray
    bounds: np.ndarray

    def __post_init__(self):
        order = np.asarray(self.order)
        bounds = np.asarray(self.bounds)
        if order.ndim != 1 or bounds.ndim != 1 or bounds.size < 2:
            raise ValueError(
                "order must be 1-D and bounds 1-D with n_steps + 1 >= 2 entries."
            )
        if bounds[0] != 0 or bounds[-1] != order.size:
            raise ValueError(
                f"bounds must run from 0 to len(order) = {order.size}, got "
                f"{bounds[0]} to {bounds[-1]}."
            )
        order.setflags(write=False)
        bounds.setflags(write=False)
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "bounds", bounds)

    @property
    def n_steps(self):
        """Number of steps ``t`` of the epoch."""
        return self.bounds.size - 1

    @property
    def batch_sizes(self):
        """Size of each step's batch, shape ``(n_steps,)`` (secret: never release)."""
        return np.diff(self.bounds)

    def batch(self, step):
        """Row indices of step ``step``'s batch, increasing (a read-only view).

        Parameters
        ----------
        step : int in [0, n_steps)

        Returns
        -------
        rows : ndarray of int
        """
        if not 0 <= step < self.n_steps:
            raise IndexError(f"step must be in [0, {self.n_steps}), got {step}.")
        return self.order[self.bounds[step] : self.bounds[step + 1]]


def allocation_steps(n_rows, batch_size):
    """Steps an epoch for an expected batch of at most ``batch_size`` rows.

    ``ceil(n_rows / batch_size)``: the number of batches of a cyclic or
    Poisson pass with the same batch size, so the samplers compare at the
    same number of noisy steps.

    Parameters
    ----------
    n_rows : int >= 1
    batch_size : int >= 1

    Returns
    -------
    n_steps : int
    """
    n_rows = _check_count("n_rows", n_rows, minimum=1)
    batch_size = _check_count("batch_size", batch_size, minimum=1)
    return -(-n_rows // batch_size)


def allocate_epoch(n_rows, n_steps, rng):
    """Draw one epoch's random allocation of ``n_rows`` rows to ``n_steps`` steps.

    Each row's step is uniform on ``range(n_steps)``, independently of the
    other rows (module docstring); call once per epoch, from the run's secret
    random state. O(n_rows + n_steps) time.

    Parameters
    ----------
    n_rows : int >= 0
    n_steps : int in [1, 2**32]
    rng : numpy.random.Generator or numpy.random.RandomState
        The secret random state of the run.

    Returns
    -------
    EpochAllocation
    """
    n_rows = _check_count("n_rows", n_rows, minimum=0)
    n_steps = _check_count("n_steps", n_steps, minimum=1)
    if n_steps > _MAX_STEPS:
        raise ValueError(f"n_steps must be at most 2**32, got {n_steps}.")
    labels = _draw_labels(n_rows, n_steps, rng)
    bounds = np.zeros(n_steps + 1, dtype=np.int64)
    np.cumsum(np.bincount(labels, minlength=n_steps), out=bounds[1:])
    return EpochAllocation(order=_stable_order(labels), bounds=bounds)


def _check_count(name, value, minimum):
    """``value`` as an int, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def _draw_labels(n_rows, n_steps, rng):
    """Each row's step, i.i.d. uniform on ``range(n_steps)`` (16 bits if they fit).

    Drawn as 32-bit integers and narrowed: numpy's bounded 16-bit draws are
    exact too, but slow for step counts far from a power of two.
    """
    if isinstance(rng, np.random.Generator):
        labels = rng.integers(0, n_steps, size=n_rows, dtype=np.uint32)
    elif isinstance(rng, np.random.RandomState):
        labels = rng.randint(0, n_steps, size=n_rows, dtype=np.uint32)
    else:
        raise TypeError(
            "rng must be a numpy.random.Generator or RandomState (the run's "
            f"secret random state, e.g. from sklearn's check_random_state), got "
            f"{type(rng)}."
        )
    if n_steps <= _DIGIT_MASK + 1:
        return labels.astype(np.uint16)
    return labels


def _stable_order(labels):
    """Rows sorted by label, ties in increasing row index, in O(n).

    A stable sort of 16-bit keys is numpy's radix sort; wider labels take two
    stable passes, low digit then high digit (least-significant-digit radix).
    """
    if labels.dtype == np.uint16:
        return np.argsort(labels, kind="stable")
    low = (labels & _DIGIT_MASK).astype(np.uint16)
    order = np.argsort(low, kind="stable")
    high = (labels[order] >> _DIGIT_BITS).astype(np.uint16)
    return order[np.argsort(high, kind="stable")]

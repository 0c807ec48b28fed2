"""Noisy gradient descent-ascent on a Dask collection: only sums travel.

The rows stay where they are. Each partition is projected onto the public
ball where it is read and held there for the run, as a
:class:`~._releases.ProjectedRows` (by the estimator's preparation, through
:func:`skdp._solvers._sgd._dask.hold_blocks`); it then answers the run's
questions with aggregates:

- :func:`summarise_group_partition`: its numbers of rows and features and
  its exact group counts (a :class:`GroupSummary`);
- :func:`partition_second_moment`: its share of ``sum_i a_i a_i^T``
  (``(D, D)``, only with the preconditioner);
- :func:`partition_step_sums`: its share of a step's weighted gradient sum
  and group loss sums at the model it is sent (one vector of length
  ``D + K``).

:class:`HeldGameRows` adds the partitions' answers on the client and plays
the part of :class:`~._releases.ProjectedRows` for
:func:`~._run.play_gda`, which keeps everything secret and draws everything
random there, exactly as in memory: the noise of every release, from the
same generator in the same order, and the steps. So the run is the
in-memory run of the same rows up to the order in which float sums are
added, with the same events. The group counts are integers: their sum, and
so their release, is the in-memory one bit for bit.

Dask is an optional dependency; this module never imports it (the held
partitions do, through :class:`~skdp._solvers._sgd._dask.HeldRows`).
"""

from dataclasses import dataclass

import numpy as np

from ._run import play_gda

__all__ = [
    "GroupSummary",
    "HeldGameRows",
    "partition_second_moment",
    "partition_step_sums",
    "run_gda_dask",
    "summarise_group_partition",
]


@dataclass(frozen=True)
class GroupSummary:
    """What the run reads of a partition's size, and of a sum of partitions.

    Attributes
    ----------
    n_rows : int
    n_features : int
    group_counts : ndarray of int64, shape (n_groups,)
        Exact; released only with noise (:func:`~._run.play_gda`).
    """

    n_rows: int
    n_features: int
    group_counts: np.ndarray

    def __add__(self, other):
        if other.n_features != self.n_features:
            raise ValueError(
                f"Partitions of X have {self.n_features} and {other.n_features} "
                "features: every block must hold every column."
            )
        return GroupSummary(
            self.n_rows + other.n_rows,
            self.n_features,
            self.group_counts + other.group_counts,
        )


def summarise_group_partition(rows, n_groups):
    """The :class:`GroupSummary` of a held partition (aggregates only)."""
    counts = rows.group_counts(n_groups).astype(np.int64)
    return GroupSummary(int(rows.X.shape[0]), int(rows.X.shape[1]), counts)


def partition_second_moment(rows):
    """The partition's ``sum_i a_i a_i^T``, of shape ``(D, D)``."""
    return rows.second_moment()


def partition_step_sums(rows, w, group_weights, clip_norm, max_loss, losses):
    """The partition's share of a step's sums, in one vector.

    Returns
    -------
    ndarray of shape (D + n_groups,) or (D,)
        The weighted gradient sum, then (``losses``) the group loss sums
        (:meth:`~._releases.ProjectedRows.step_sums`).
    """
    gradient, loss_sums = rows.step_sums(
        w, group_weights, clip_norm, max_loss, losses=losses
    )
    return gradient if loss_sums is None else np.concatenate([gradient, loss_sums])


class HeldGameRows:
    """Held partitions answering the run's sums, as ProjectedRows does in memory.

    Parameters
    ----------
    held : skdp._solvers._sgd._dask.HeldRows
        Each partition a :class:`~._releases.ProjectedRows`.
    n_groups : int
    fit_intercept : bool

    Attributes
    ----------
    held : HeldRows
    summary : GroupSummary
        The sum of the partitions' summaries (also ``held.summary``; the
        partitions' row offsets are ``held.offsets``).
    """

    def __init__(self, held, n_groups, fit_intercept):
        self.held, self.fit_intercept = held, fit_intercept
        summaries = held.ask(
            summarise_group_partition,
            [(k, (n_groups,)) for k in range(len(held.parts))],
        )
        total = summaries[0]
        for summary in summaries[1:]:
            total = total + summary
        self.summary = held.summary = total
        held.offsets = np.concatenate([[0], np.cumsum([s.n_rows for s in summaries])])
        #: Partitions with rows: the only ones sent questions.
        self._filled = [k for k, s in enumerate(summaries) if s.n_rows > 0]

    @property
    def n_coef(self):
        """Number of model coefficients (intercept included)."""
        return self.summary.n_features + int(self.fit_intercept)

    def group_counts(self, n_groups):
        """The exact group counts, summed from the summaries."""
        return self.summary.group_counts

    def second_moment(self):
        """``sum_i a_i a_i^T``, summed over the partitions."""
        return self.held.ask_sum(
            partition_second_moment, [(k, ()) for k in self._filled]
        )

    def step_sums(self, w, group_weights, clip_norm, max_loss, losses=True):
        """A step's sums, summed over the partitions: one round trip."""
        args = (w, group_weights, clip_norm, max_loss, losses)
        total = self.held.ask_sum(
            partition_step_sums, [(k, args) for k in self._filled]
        )
        if not losses:
            return total, None
        return total[: self.n_coef], total[self.n_coef :]


def run_gda_dask(rows, schedule, noise_multiplier, *, rng, verbose=0):
    """:func:`~._run.run_gda` on held partitions (a :class:`HeldGameRows`).

    The rows were projected where they are held, as
    :func:`~._releases.project_rows` projects them in memory; the run is
    :func:`~._run.play_gda` on their sums.
    """
    return play_gda(rows, schedule, noise_multiplier, rng=rng, verbose=verbose)

"""The worst-group game on a Dask collection: what both solvers' runs share.

Each partition is checked, encoded and held on the worker that reads it for
the whole run, in the form its solver reads (rows projected onto the public
ball for noisy gradient descent-ascent, :mod:`._gda._dask`; as given for
mirror descent, :mod:`._mirror_dask`), through
:func:`skdp._solvers._sgd._dask.hold_blocks`. Every held partition answers
``group_counts`` and has ``X``; :class:`HeldSaddleRows` sums their
:class:`GroupSummary` (sizes and exact group counts, nothing else) and sends
the run's later questions only to partitions with rows. The client then
plays the in-memory run on the partitions' sums, drawing every random number
from the fit's generator in the in-memory order.

Dask is an optional dependency; this module never imports it (the held
partitions do, through :class:`~skdp._solvers._sgd._dask.HeldRows`).
"""

from dataclasses import dataclass

import numpy as np

from ._sgd._dask import check_same_width

__all__ = ["GroupSummary", "HeldSaddleRows", "summarise_group_partition"]


@dataclass(frozen=True)
class GroupSummary:
    """What a run reads of a partition's size, and of a sum of partitions.

    Attributes
    ----------
    n_rows : int
    n_features : int
    group_counts : ndarray of int64, shape (n_groups,)
        Exact; released only with noise, as in memory.
    """

    n_rows: int
    n_features: int
    group_counts: np.ndarray

    def __add__(self, other):
        check_same_width(self, other)
        return GroupSummary(
            self.n_rows + other.n_rows,
            self.n_features,
            self.group_counts + other.group_counts,
        )


def summarise_group_partition(rows, n_groups):
    """The :class:`GroupSummary` of a held partition (aggregates only)."""
    counts = rows.group_counts(n_groups).astype(np.int64)
    return GroupSummary(int(rows.X.shape[0]), int(rows.X.shape[1]), counts)


class HeldSaddleRows:
    """Held partitions, summarised: the part of the run's rows both solvers share.

    Parameters
    ----------
    held : skdp._solvers._sgd._dask.HeldRows
        Each partition in the form its solver reads.
    n_groups : int
    fit_intercept : bool

    Attributes
    ----------
    held : HeldRows
        With ``summary`` and ``offsets`` (the partitions' row offsets) set.
    summary : GroupSummary
        The sum of the partitions' summaries.
    filled : list of int
        The partitions with rows: the only ones sent the run's questions.
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
        self.filled = [k for k, s in enumerate(summaries) if s.n_rows > 0]

    @staticmethod
    def partition_form(problem):
        """``(function, args)``: a partition's ``SaddleRows`` to its held form."""
        raise NotImplementedError

    #: Whether :meth:`run_centred` plays a centred run on these rows.
    supports_centring = False

    def group_counts(self, n_groups):
        """The exact group counts, summed from the summaries."""
        return self.summary.group_counts

    def run(self, problem, schedule, noise_multiplier, *, rng, verbose=0):
        """The solver's run on these rows (see ``SaddleSolver.run``)."""
        raise NotImplementedError

    def run_centred(
        self, problem, schedule, noise_multiplier, centring, *, rng, verbose=0
    ):
        """The solver's centred run (``SaddleSolver.run_centred``) on these rows.

        ``centring`` None: :meth:`run`. Held rows that cannot play a centred
        run (``supports_centring`` false) refuse one; the estimator refuses
        it before reading a partition.
        """
        if centring is None:
            return self.run(
                problem, schedule, noise_multiplier, rng=rng, verbose=verbose
            )
        raise ValueError(
            f"{type(self).__name__} has no centred run on a Dask collection; "
            "set centring_share=0."
        )

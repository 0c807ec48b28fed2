"""Private mirror descent on a Dask collection: only batch sums travel.

The rows stay where they are: each partition is held, as read, on the worker
that reads it, as a :class:`~._mirror.MemoryRows`
(:class:`skdp._solvers._saddle_dask.HeldSaddleRows`). The client draws the
secret permutation and every vertex from the fit's generator, exactly as in
memory (:func:`~._mirror.play_mirror`); each step it splits the batch's row
indices by the partitions' offsets
(:class:`~skdp._solvers._sgd._dask.BatchRouter`) and sends each partition
holding some its local indices, the running model and the groups' row
weights. The partition answers with :func:`partition_batch_sums`: its share
of the batch's weighted gradient sum and group loss sums, one vector of
length ``D + K``. So the run is the in-memory run of the same rows up to
the order of float sums, with the same events; the batch indices are secret
and travel only inside the cluster.
"""

import numpy as np

from ._mirror import MemoryRows, play_mirror
from ._saddle_dask import HeldSaddleRows
from ._sgd._dask import BatchRouter

__all__ = ["HeldMirrorRows", "partition_batch_sums"]


def partition_batch_sums(rows, index, w, row_weights, plan, fit_intercept):
    """The partition's share of a batch's sums, in one vector.

    Returns
    -------
    ndarray of shape (D + n_groups,)
        :meth:`~._mirror.MemoryRows.batch_sums` of the local rows ``index``.
    """
    gradient, loss_sums = rows.batch_sums(index, w, row_weights, plan, fit_intercept)
    return np.concatenate([gradient, loss_sums])


class HeldMirrorRows(HeldSaddleRows):
    """Held partitions answering the run's sums, as MemoryRows does in memory.

    Parameters
    ----------
    held : skdp._solvers._sgd._dask.HeldRows
        Each partition a :class:`~._mirror.MemoryRows`.
    n_groups : int
    fit_intercept : bool
    """

    def __init__(self, held, n_groups, fit_intercept):
        super().__init__(held, n_groups, fit_intercept)
        self.router = BatchRouter(held.offsets, None)

    @staticmethod
    def partition_form(problem):
        """The rows as given: :class:`~._mirror.MemoryRows`."""
        return MemoryRows, ()

    def batch_sums(self, index, w, row_weights, plan, fit_intercept):
        """A batch's sums, summed over the partitions holding its rows."""
        questions = [
            (k, (local, w, row_weights, plan, fit_intercept))
            for k, local in self.router.split(index)
        ]
        total = self.held.ask_sum(partition_batch_sums, questions)
        return total[: plan.n_features], total[plan.n_features :]

    def run(self, problem, schedule, noise_multiplier, *, rng, verbose=0):
        """:func:`~._mirror.run_mirror` on these rows: :func:`~._mirror.play_mirror`."""
        return play_mirror(
            self,
            schedule,
            noise_multiplier,
            fit_intercept=problem.fit_intercept,
            rng=rng,
            verbose=verbose,
        )

"""Noisy gradient descent-ascent on a Dask collection: only sums travel.

The rows stay where they are. Each partition is projected onto the public
ball where it is read, as :func:`~._releases.project_rows` projects the rows
in memory, and held there for the run as a :class:`~._releases.ProjectedRows`
(:class:`skdp._solvers._saddle_dask.HeldSaddleRows`). It answers the run's
questions with aggregates:

- its numbers of rows and features and its exact group counts (a
  :class:`~skdp._solvers._saddle_dask.GroupSummary`);
- :func:`partition_second_moment`: its share of ``sum_i a_i a_i^T``
  (``(D, D)``, only with the preconditioner);
- :func:`partition_step_sums`: its share of a step's weighted gradient sum
  and group loss sums at the model it is sent (one vector of length
  ``D + K``);
- for a centred run, :func:`~skdp._solvers._sgd._dask.partition_row_sum`:
  its share of the centre's sum (a vector of length ``n_features``); the
  released centre is then sent with every later question, and the
  partition answers for its rows moved by it
  (:meth:`~._releases.ProjectedRows.centred`, recomputed where the rows are
  held, so no centred copy is kept between questions).

:class:`HeldGameRows` adds the partitions' answers on the client and plays
the part of :class:`~._releases.ProjectedRows` for
:func:`~._run.play_gda`, which keeps everything secret and draws everything
random there, exactly as in memory: the noise of every release, from the
same generator in the same order, and the steps. So the run is the
in-memory run of the same rows up to the order in which float sums are
added, with the same events. The group counts are integers: their sum, and
so their release, is the in-memory one bit for bit.
"""

import copy

import numpy as np

from .._rows import loss_row_norm
from .._saddle_dask import HeldSaddleRows
from .._sgd._dask import partition_row_sum
from ._releases import project_rows
from ._run import play_gda

__all__ = ["HeldGameRows", "partition_second_moment", "partition_step_sums"]


def _moved(rows, centring):
    """The partition's rows moved by ``centring = (centre, radius, row_norm)``.

    None: the rows as held.
    """
    return rows if centring is None else rows.centred(*centring)


def partition_second_moment(rows, centring=None):
    """The partition's ``sum_i a_i a_i^T``, of shape ``(D, D)``.

    ``centring``: of its rows moved by the centre (:func:`_moved`).
    """
    return _moved(rows, centring).second_moment()


def partition_step_sums(
    rows, w, group_weights, clip_norm, max_loss, losses, centring=None
):
    """The partition's share of a step's sums, in one vector.

    ``centring``: of its rows moved by the centre (:func:`_moved`).

    Returns
    -------
    ndarray of shape (D + n_groups,) or (D,)
        The weighted gradient sum, then (``losses``) the group loss sums
        (:meth:`~._releases.ProjectedRows.step_sums`).
    """
    gradient, loss_sums = _moved(rows, centring).step_sums(
        w, group_weights, clip_norm, max_loss, losses=losses
    )
    return gradient if loss_sums is None else np.concatenate([gradient, loss_sums])


class HeldGameRows(HeldSaddleRows):
    """Held projected partitions answering the run's sums, as ProjectedRows does.

    Parameters
    ----------
    held : skdp._solvers._sgd._dask.HeldRows
        Each partition a :class:`~._releases.ProjectedRows`.
    n_groups : int
    fit_intercept : bool

    Attributes
    ----------
    centring : tuple or None
        ``(centre, radius, row_norm)`` of a centred run's rows
        (:meth:`centred`), sent with every question; None: the rows as held.
    """

    supports_centring = True
    centring = None

    @staticmethod
    def partition_form(problem):
        """:func:`~._releases.project_rows` on the plan's public ball."""
        row_norm = loss_row_norm(problem.row_norm, problem.fit_intercept)
        return project_rows, (row_norm, problem.fit_intercept)

    @property
    def n_coef(self):
        """Number of model coefficients (intercept included)."""
        return self.summary.n_features + int(self.fit_intercept)

    def row_sum(self, radius):
        """The centre's sum (:meth:`~._releases.ProjectedRows.row_sum`), summed."""
        questions = [(k, (radius,)) for k in self.filled]
        return self.held.ask_sum(partition_row_sum, questions)

    def centred(self, centre, radius, row_norm):
        """These rows moved by ``centre`` (:meth:`~._releases.ProjectedRows.centred`).

        A view that sends ``(centre, radius, row_norm)`` with every question;
        the held partitions are unchanged.
        """
        view = copy.copy(self)
        view.centring = (centre, radius, row_norm)
        return view

    def second_moment(self):
        """``sum_i a_i a_i^T``, summed over the partitions."""
        questions = [(k, (self.centring,)) for k in self.filled]
        return self.held.ask_sum(partition_second_moment, questions)

    def step_sums(self, w, group_weights, clip_norm, max_loss, losses=True):
        """A step's sums, summed over the partitions: one round trip."""
        args = (w, group_weights, clip_norm, max_loss, losses, self.centring)
        total = self.held.ask_sum(partition_step_sums, [(k, args) for k in self.filled])
        if not losses:
            return total, None
        return total[: self.n_coef], total[self.n_coef :]

    def run(self, problem, schedule, noise_multiplier, *, rng, verbose=0):
        """:func:`~._run.run_gda` on these rows: :func:`~._run.play_gda`."""
        return play_gda(self, schedule, noise_multiplier, rng=rng, verbose=verbose)

    def run_centred(
        self, problem, schedule, noise_multiplier, centring, *, rng, verbose=0
    ):
        """The centred :func:`~._run.run_gda` on these rows (``centring``: or None)."""
        return play_gda(
            self,
            schedule,
            noise_multiplier,
            rng=rng,
            verbose=verbose,
            centring=centring,
        )

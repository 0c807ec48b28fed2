"""The worst-group game, as its two private solvers share it.

Both solvers play ``min_w max_{p in simplex} sum_k p_k L_k(w) + l2 / 2
||w||^2`` with ``L_k`` the mean logistic loss of group ``k``: noisy gradient
descent-ascent (:mod:`skdp._solvers._gda`) and private mirror descent with
sampled vertices (:mod:`skdp._solvers._mirror`). This module holds what they
share: the public problem of a fit, the rows, the solver interface and its
result record, and the release both make first, the noisy group counts.

Sensitivity of a sum whose per-record terms never point against each other
(:func:`histogram_sensitivity`): a record's term ``t`` has norm at most ``B``
and ``t . t' >= 0`` for the terms of any two records. Replacing ``t`` by
``t'`` moves the sum by ``||t - t'|| = sqrt(||t||^2 + ||t'||^2 - 2 t . t') <=
sqrt(2) B``; adding or removing it by ``||t|| <= B``. This covers the group
counts (one-hot terms: one count down and one up when the record changes
group, nothing when it does not), per-group sums of non-negative losses, and
the upper triangle (diagonal included) of ``a a^T``, whose inner product with
that of ``a' a'^T`` is ``((a . a')^2 + sum_j a_j^2 a'_j^2) / 2 >= 0``. A sum of
arbitrary terms has ``Neighbouring.sum_sensitivity`` (``2 B`` under
replace-one).

A fit may also release a private centre of the rows first
(:class:`Centring`, with the functions of
:mod:`skdp._solvers._sgd._centre`): the game is then played on the rows
moved by the centre and the model returned for the rows as given (the
intercept absorbs the centre). The base :meth:`SaddleSolver.run_centred`
releases it before the run, dividing by the public ``n``; a solver whose
run releases counts may release it later, from their noisy total.
"""

from dataclasses import dataclass, replace

import numpy as np

from ..accounting import GaussianSumEvent, Neighbouring
from ._rows import centred_rows, clipped_row_sum, loss_row_norm
from ._sgd._centre import (
    centre_from_sum,
    centring_radius,
    check_centred_intercept,
    uncentred,
)

__all__ = [
    "Centring",
    "SaddleProblem",
    "SaddleResult",
    "SaddleRows",
    "SaddleSolver",
    "centred_result",
    "centred_saddle_rows",
    "histogram_sensitivity",
    "noisy_counts",
    "release_group_counts",
]


@dataclass(frozen=True)
class SaddleProblem:
    """The public inputs of one fit: its sizes and the estimator's parameters.

    Attributes
    ----------
    n_samples : int
        ``n``, public under replace-one. Under add/remove the estimator passes
        the true ``n`` and no solver reads it (the rules read a released count).
    n_groups : int
    n_features : int
        Without the intercept.
    fit_intercept : bool
    neighbouring : {"replace-one", "add-remove"}
    n_iter : int
    learning_rate : float or "auto"
        Step of the model player.
    group_step : float or "auto"
        Step of the adversary (the estimator's ``eta_p``).
    momentum : float or "auto"
    weight_cap : float or None
    l2 : float
        Penalty ``l2 / 2 ||w||^2`` (the estimator's ``alpha``).
    precondition : bool
    l1_radius : float
    row_norm : float
        Bound on the L2 norm of a row of ``X`` (intercept column excluded).
    feature_bound : float or None
    clip_norm : float or "auto"
        Per-example gradient clip (the estimator's ``max_grad_norm``).
    max_loss : float
    """

    n_samples: int
    n_groups: int
    n_features: int
    fit_intercept: bool
    neighbouring: str
    n_iter: int
    learning_rate: float | str
    group_step: float | str
    momentum: float | str
    weight_cap: float | None
    l2: float
    precondition: bool
    l1_radius: float
    row_norm: float
    feature_bound: float | None
    clip_norm: float | str
    max_loss: float


@dataclass(frozen=True)
class SaddleRows:
    """The private rows of a fit.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {0, 1}.
    group_codes : ndarray of int, shape (n_samples,)
        Group index of each row, in ``range(n_groups)``.
    """

    X: np.ndarray
    y: np.ndarray
    group_codes: np.ndarray


@dataclass(frozen=True)
class Centring:
    """The public plan of the centre's release, one Gaussian sum.

    The sum of the rows, each put on the ball of ``radius``, with Gaussian
    noise of std ``noise * radius`` (a :class:`GaussianSumEvent` of
    multiplier ``noise``: the sum moves by ``2 radius`` under replace-one,
    ``radius`` under add/remove), divided by a number of rows that is public
    or released, then shrunk by its known noise
    (:func:`~skdp._solvers._sgd._centre.centre_from_sum`).

    Attributes
    ----------
    noise : float
        Noise std over ``radius``.
    radius : float
        The features' radius of the row bound: the ball the rows are put on
        for the sum, and again, once centred, for the run.
    """

    noise: float
    radius: float

    @classmethod
    def of(cls, problem, noise):
        """The centring of ``problem`` at ``noise``; refused without an intercept."""
        check_centred_intercept(problem.fit_intercept)
        bound = loss_row_norm(problem.row_norm, problem.fit_intercept)
        radius = centring_radius(bound, problem.fit_intercept, problem.n_features)
        return cls(noise=float(noise), radius=float(radius))

    @property
    def event(self):
        """The privacy event of the release."""
        return GaussianSumEvent(self.noise)

    def release(self, row_sum, n_rows, rng):
        """The released centre, from ``row_sum(radius)`` and ``n_rows``.

        Parameters
        ----------
        row_sum : callable
            ``radius -> ndarray of shape (n_features,)``, the sum of the rows
            each put on the ball of ``radius``
            (:func:`~skdp._solvers._rows.clipped_row_sum`).
        n_rows : int or float
            Public (``n`` under replace-one) or released (a noisy count).
        rng : numpy.random.Generator

        Returns
        -------
        ndarray of shape (n_features,)
        """
        return centre_from_sum(
            row_sum(self.radius), n_rows, self.radius, self.noise, rng
        )


def centred_saddle_rows(rows, centre, radius):
    """``rows`` (a :class:`SaddleRows`) on the ball of ``radius``, moved by ``-centre``.

    The per-record map of :func:`~skdp._solvers._rows.centred_rows`; the
    solver projects the result again, so the declared bound still holds.
    """
    return SaddleRows(
        X=centred_rows(rows.X, centre, radius), y=rows.y, group_codes=rows.group_codes
    )


def centred_result(result, centre, centring):
    """A run on centred rows as a run on the rows as given.

    The model's intercept absorbs the centre
    (:func:`~skdp._solvers._sgd._centre.uncentred`); the centre's release
    joins the events.
    """
    return replace(
        result,
        coef=uncentred(result.coef, centre),
        events=[*result.events, centring.event],
    )


@dataclass(frozen=True)
class SaddleResult:
    """What a run returns.

    Attributes
    ----------
    coef : ndarray of shape (n_features + fit_intercept,)
        The model, intercept last.
    group_weights : ndarray of shape (n_groups,)
        The adversary's final weights.
    events : list of privacy events
        Every release the run made.
    n_iter : int
        Steps taken.
    draw_ranges : tuple of float or None
        Accounted range of one model draw and one group draw, for solvers that
        release draws; None otherwise.
    """

    coef: np.ndarray
    group_weights: np.ndarray
    events: list
    n_iter: int
    draw_ranges: tuple | None = None


class SaddleSolver:
    """One way to solve the game: plan, schedule, run.

    ``plan`` reads public inputs only and gives the privacy events for any
    noise multiplier; ``schedule`` adds the tuning that may follow the
    calibrated noise and cannot change those events; ``run`` reads the rows.
    """

    #: Whether the accountant warns when its best order is at the grid's end.
    warn_at_grid_edge = True
    #: The budget share ``centring_share="auto"`` gives the centre (0: none):
    #: off unless a solver's benchmarks show it helps (docs/benchmarks.md,
    #: "Worst-group fairness").
    auto_centring_share = 0.0

    def check_neighbouring(self, neighbouring):
        """Refuse a neighbouring relation the solver has no accounting for."""

    def plan(self, problem):
        """The privacy plan of a fit of ``problem`` (public inputs only)."""
        raise NotImplementedError

    def schedule(self, problem, plan, noise_multiplier):
        """Tuning that follows the noise; the plan itself when there is none."""
        return plan

    def run(self, rows, problem, schedule, noise_multiplier, *, rng, verbose=0):
        """Solve the game privately.

        Parameters
        ----------
        rows : SaddleRows
        problem : SaddleProblem
        schedule : object
            From :meth:`schedule`.
        noise_multiplier : float
            The calibrated multiplier the plan's events are for.
        rng : numpy.random.Generator
            The fit's secret randomness.
        verbose : int
            Log progress lines when set.

        Returns
        -------
        SaddleResult
        """
        raise NotImplementedError

    def run_centred(
        self, rows, problem, schedule, noise_multiplier, centring, *, rng, verbose=0
    ):
        """:meth:`run` on rows moved by a private centre; the model for the rows.

        The centre is released first, divided by the public ``n`` (so
        replace-one only: a solver that supports add/remove releases it in its
        run, from a released count), the rows are moved by it
        (:func:`centred_saddle_rows`), the run plays on them and its model is
        mapped back (:func:`centred_result`).

        Parameters
        ----------
        rows, problem, schedule, noise_multiplier, rng, verbose
            As for :meth:`run`.
        centring : Centring or None
            None: :meth:`run` itself.

        Returns
        -------
        SaddleResult
            Its events include the centre's release.
        """
        if centring is None:
            return self.run(
                rows, problem, schedule, noise_multiplier, rng=rng, verbose=verbose
            )
        if Neighbouring.parse(problem.neighbouring) is not Neighbouring.REPLACE_ONE:
            raise ValueError(
                f"{type(self).__name__} centres rows by the public n, which "
                "add-remove keeps private; set centring_share=0."
            )
        centre = centring.release(
            lambda radius: clipped_row_sum(rows.X, radius), problem.n_samples, rng
        )
        result = self.run(
            centred_saddle_rows(rows, centre, centring.radius),
            problem,
            schedule,
            noise_multiplier,
            rng=rng,
            verbose=verbose,
        )
        return centred_result(result, centre, centring)


def histogram_sensitivity(neighbouring, bound):
    """L2 sensitivity of a sum of non-opposed per-record terms of norm ``bound``.

    ``sqrt(2) bound`` under replace-one, ``bound`` under add/remove (see the
    module docstring for the terms this holds for).
    """
    return Neighbouring.parse(neighbouring).histogram_factor * float(bound)


def release_group_counts(group_codes, n_groups, std, n_samples, rng):
    """Group counts with Gaussian noise of std ``std``, or ``[n]`` if ``std`` is None.

    The count vector's sensitivity is ``histogram_sensitivity(relation, 1)``;
    ``std=None`` is for one group with a public ``n`` (nothing is released).
    """
    if std is None:
        return np.array([float(n_samples)])
    return noisy_counts(np.bincount(group_codes, minlength=n_groups), std, rng)


def noisy_counts(counts, std, rng):
    """The exact group ``counts`` with Gaussian noise of std ``std``.

    The release of :func:`release_group_counts`, for counts already summed
    (over a Dask collection's partitions, say).
    """
    return counts + rng.normal(0.0, std, size=counts.shape)

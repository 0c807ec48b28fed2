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
"""

import math
from dataclasses import dataclass

import numpy as np

from ..accounting import Neighbouring

__all__ = [
    "SaddleProblem",
    "SaddleResult",
    "SaddleRows",
    "SaddleSolver",
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


def histogram_sensitivity(neighbouring, bound):
    """L2 sensitivity of a sum of non-opposed per-record terms of norm ``bound``.

    ``sqrt(2) bound`` under replace-one, ``bound`` under add/remove (see the
    module docstring for the terms this holds for).
    """
    relation = Neighbouring.parse(neighbouring)
    factor = math.sqrt(2.0) if relation is Neighbouring.REPLACE_ONE else 1.0
    return factor * float(bound)


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

"""DPSaddlePointClassifier: private minimax-fair (worst-group) logistic regression."""

import warnings
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted

from .._base import PrivateFitMixin, resolve_delta
from .._solvers._gda import GDASolver
from .._solvers._mirror import MirrorSolver
from .._solvers._saddle import Centring, SaddleProblem, SaddleRows
from ..accounting import PrivacyPlan, account, calibrate_noise_multiplier
from ..exceptions import PrivacyLeakWarning, UndeclaredBoundWarning
from ..linear_model._base import LinearClassifierPredictMixin
from ..linear_model._budget import centre_noise
from ..synthetic._dask import is_dask_collection
from ..utils._sklearn import Interval, StrOptions, fit_context, validate_data
from ..utils._validation import (
    MAGNITUDE_LIMIT,
    check_add_remove_delta,
    check_numeric_table,
    resolve_classes,
)
from ._dask import (
    HeldSaddleRows,
    declared_binary_classes,
    held_rows_class,
    held_saddle_rows,
)
from ._labels import as_labels, encode_groups

__all__ = ["DPSaddlePointClassifier"]

#: The bound of rows without a declared ``row_norm``: rows already scaled into
#: the unit ball keep their signal; any other table must declare its bound.
_UNDECLARED_ROW_NORM = 1.0


@dataclass(frozen=True)
class _FitData:
    """A validated fit: the rows, their public problem and the label sets.

    ``rows`` is a :class:`HeldSaddleRows` for a Dask collection (partitions
    held on the workers in the form the solver reads).
    """

    rows: SaddleRows | HeldSaddleRows
    problem: SaddleProblem
    classes: np.ndarray
    groups: np.ndarray


@dataclass(frozen=True)
class _FitPlan:
    """A fit's public plan: the solver's, and the centre's release if any."""

    run: object
    centring: Centring | None

    @property
    def n_samples(self):
        return self.run.n_samples

    def events(self, noise_multiplier):
        """The solver's events at ``noise_multiplier``, then the centre's."""
        events = list(self.run.events(noise_multiplier))
        if self.centring is not None:
            events.append(self.centring.event)
        return events


class DPSaddlePointClassifier(
    PrivateFitMixin, LinearClassifierPredictMixin, ClassifierMixin, BaseEstimator
):
    """Binary logistic regression minimising the worst group's loss, privately.

    Solves ``min_w max_{p in simplex} sum_k p_k L_k(w) + alpha / 2 ||w||^2``
    with ``L_k`` the mean logistic loss of group ``k``.

    ``solver="gda"`` (default): noisy gradient descent-ascent. Every step the
    model player takes a gradient step on the ``p``-weighted loss and the
    adversary an exponentiated-gradient step towards the groups with the
    largest loss, its weights capped at ``weight_cap`` times the group shares.
    Both players see the data only through Gaussian-noised sums. The model is
    the average of the last half of the model iterates (more of them, up to
    all, where the noise is large against ``n``: small data at small
    epsilon); ``group_weights_`` is the adversary's last ``p``.

    ``solver="mirror"``: private stochastic mirror descent with sampled
    vertices (González, Guzmán and Paquette). The model lives in the l1-ball
    of radius ``l1_radius``; both players run entropic mirror descent whose
    weights are never released: every step samples a vertex of the l1-ball
    (``+-l1_radius e_j``) and a group by the exponential mechanism, on a fresh
    disjoint batch (one pass over the data). The model is the average of the
    sampled vertices (at most ``n_iter`` non-zero coefficients);
    ``group_weights_`` are the frequencies of the sampled groups.

    Parameters
    ----------
    epsilon : float, default=1.0
        Target epsilon; the noise is calibrated so that the spend never
        exceeds it.
    delta : float or None, default=None
        Target delta; ``None`` uses ``min(1e-5, n ** -1.1)`` (replace-one
        only: under add/remove ``n`` is private, so set delta yourself).
    groups : array-like or None, default=None
        The public set of group labels. ``None`` reads it from
        ``sensitive_features`` and emits a :class:`~skdp.exceptions.PrivacyLeakWarning`
        (the set of groups present is then not covered by ``privacy_spent_``).
    classes : array-like of two labels or None, default=None
        The public pair of class labels. ``None`` reads it from ``y`` with a
        :class:`~skdp.exceptions.PrivacyLeakWarning`, as for ``groups``.
    solver : {"gda", "mirror"}, default="gda"
        ``"gda"``: noisy full-batch gradient descent-ascent. ``"mirror"``:
        private mirror descent with sampled vertices (sparse models, one
        pass; stable, but well below ``"gda"`` wherever ``"gda"`` is stable:
        see docs/fairness.md).
    n_iter : int, default=1000
        Number of steps. ``"gda"``: each reads every row. ``"mirror"``: one
        pass over ``min(n_iter, n)`` disjoint batches. The default: more
        ``"gda"`` steps helped only at large epsilon (docs/benchmarks.md,
        "Worst-group fairness").
    learning_rate : float in (0, 1e30] or "auto", default="auto"
        Step of the model player. ``"auto"``: the smaller of
        ``4 / (beta + alpha)``, with ``beta`` the worst-case smoothness of the
        loss on rows of norm ``row_norm`` (every iterate is accounted as
        released, so the step is free to exceed the non-expansive limit), and
        the step at which the noise's random walk over ``n_iter`` steps stays
        within a radius of 3 (smaller steps on little data or at small
        epsilon; computed from ``n`` and the noise only), widened up to 6
        where the noise is small (docs/benchmarks.md, "Worst-group fairness").
        A step whose largest row weight ``max_k p_k / n_k`` exceeds
        ``1.5 / n`` (the adversary on a small group, whose rows then carry
        more noise) has the second term scaled by ``1.5 / (n max_k p_k / n_k)``;
        the weights come from earlier releases, so this costs no privacy.
        With ``precondition=True`` (at most 1000 coefficients) the step is
        taken in its geometry: at most 4, with the noise walk measured in
        the released second-moment norm kept within a radius of 1 (same
        shortening for heavy rows).
    eta_p : float or "auto", default="auto"
        Step of the adversary. ``"auto"``: ``sqrt(8 log K / n_iter) / max_loss``.
        ``0`` freezes it at the noisy group shares (the loss releases are
        still made and paid for).
    momentum : float in [0, 1) or "auto", default="auto"
        ``"gda"`` only: heavy-ball momentum ``m`` of the model player,
        ``w' = w - lr d + m (w - w_prev)`` (post-processing of the released
        gradients: no privacy cost). The noise term of the "auto" step is
        scaled by ``1 - m``, so the noise the model receives stays as planned
        and momentum speeds up only runs whose step is limited by the
        smoothness (large n or epsilon). ``"auto"``: 0.9 (docs/benchmarks.md,
        "Worst-group fairness").
    weight_cap : float >= 1 or None, default=3.0
        ``"gda"`` only: the adversary's weight on a group is at most
        ``weight_cap`` times the group's (noisy) share of the rows. The game is
        then the group CVaR at level ``1 / weight_cap``: exactly the worst-group
        loss whenever the worst group holds at least ``1 / weight_cap`` of the
        rows, and otherwise a mix of the worst groups. It bounds the noise of
        the model's steps at ``weight_cap`` times that of private ERM; without
        it (``None``) small groups make the run diverge (see Notes). ``1``:
        private full-batch ERM, though still paying the 15% of the budget
        that goes to the group counts and losses, which the adversary then
        cannot use (``groups=None`` gives ERM with the whole budget).
    alpha : float, default=1e-4
        L2 penalty on all coefficients, intercept included.
    precondition : bool, default=False
        ``"gda"`` only, at most 1000 coefficients: spend 5% of the budget
        (taken from the gradients) on one Gaussian release of the rows'
        second-moment matrix and precondition every step by its inverse,
        ridged by its noise level (see Notes). Not the default: on the
        benchmarks it lowers the worst-group test log-loss on few features
        at small epsilon and on Adult at large epsilon, and raises it
        elsewhere (docs/benchmarks.md, "Worst-group fairness").
    l1_radius : float in (0, 1e30], default=20.0
        ``"mirror"`` only: radius of the l1-ball of the coefficients
        (intercept included). Public. The default: large enough for good models,
        small enough for the draws' range and the optimisation error
        (docs/benchmarks.md, "Worst-group fairness").
    row_norm : float in (0, 1e30] or None, default=None
        Public bound on the L2 norm of each row of ``X``; larger rows are
        scaled down to it (``"gda"``). ``"mirror"`` uses it as the default
        of ``feature_bound``. ``None``: the unit ball, and ``fit`` warns
        (:class:`~skdp.exceptions.UndeclaredBoundWarning`) whatever the
        rows, since whether a row is larger is private. ``SchemaEncoder``'s
        ``row_norm_`` is a valid bound (``make_private_pipeline`` passes it).
    feature_bound : float in (0, 1e30] or None, default=None
        ``"mirror"`` only: public bound on ``|x_ij|``; entries are clipped to
        ``[-G, G]`` with ``G = feature_bound``, or ``max(feature_bound, 1)``
        with an intercept (its column of ones shares the bound). ``None``:
        ``row_norm`` (which bounds every entry of a row of norm ``row_norm``).
    max_grad_norm : float in (0, 1e30] or "auto", default="auto"
        ``"gda"`` only: per-example gradient clip norm; ``"auto"``: 0.6 times
        the largest gradient norm possible on rows of norm ``row_norm`` (the
        clip binds on the largest gradients only: docs/benchmarks.md,
        "Worst-group fairness").
    max_loss : float, default=2.0
        Per-example losses are clipped to ``[0, max_loss]`` before the group
        losses the adversary reads are computed (public bound).
    centring_share : float in [0, 1) or "auto", default="auto"
        Share of the budget set aside for a private centre of the rows,
        released before the first step and subtracted from every row after:
        the sum of the rows, each put within the ball of ``row_norm``, with
        Gaussian noise, divided by the number of rows (under add/remove the
        total of the released group counts, as every rule that reads ``n``)
        and shrunk towards zero by the known noise (positive-part
        James-Stein). The centred rows are put on the ball of ``row_norm``
        again (``"gda"``; ``"mirror"`` clips their entries to
        ``feature_bound``), so the declared bounds still hold. Rows far from
        the origin (columns encoded on generous public bounds) then spend the
        row bound and the clip on what varies between rows rather than on
        their common offset. The model is returned for the rows as given
        (the intercept absorbs the centre). The share is one of the budget in
        Gaussian DP (of ``mu^2``, which Gaussian mechanisms add up); the
        solver's noise is calibrated so that everything together, composed
        by the accountant, meets ``epsilon``. Needs ``fit_intercept=True``.
        With ``"mirror"``, not on Dask collections (see :meth:`fit`).
        ``"auto"``: 0.1 with ``solver="gda"`` (a lower worst-group test
        log-loss on the benchmarks' mean, most at small epsilon), 0 with
        ``"mirror"`` (higher on benefits and Adult) and without an intercept
        (docs/benchmarks.md, "Worst-group fairness").
    fit_intercept : bool, default=True
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
        The neighbouring relation ``privacy_spent_`` holds for (see Notes).
        ``"replace-one"``: one row replaced by another, possibly of another
        group; ``n`` is public. ``"add-remove"`` (``"gda"`` only, with an
        explicit ``delta``): one row added or removed; every release then
        changes by half as much or less, so the noise is halved at the same
        epsilon, and ``n`` stays private (the step rules read the noisy total
        count). An add/remove guarantee at epsilon is a replace-one guarantee
        at about twice epsilon, not the same one: compare methods under the
        same relation.
    random_state : int, RandomState instance or None, default=None
        Seed of the noise. ``None`` draws a fresh one. A fixed seed makes
        refits identical, and anyone who knows it can regenerate the noise
        and undo the privacy: keep a seed secret, as you would the data.
    verbose : int, default=0

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    coef_ : ndarray of shape (1, n_features)
    intercept_ : ndarray of shape (1,)
    groups_ : ndarray of shape (n_groups,)
        Group labels, in the order of ``group_weights_``. Without
        ``sensitive_features``: one implicit group, ``array([None])``.
    group_weights_ : ndarray of shape (n_groups,)
        The adversary's last weights ``p``.
    n_iter_ : int
    noise_multiplier_ : float
        Multiplier ``z`` of the equivalent single Gaussian mechanism (see Notes).
    draw_ranges_ : tuple of float or None
        ``"mirror"`` only: the accounted range (pure-DP parameter) of one
        model-vertex draw and of one group draw; ``None`` for ``"gda"``.
    delta_ : float
    privacy_spent_ : skdp.accounting.PrivacySpent
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string feature names.

    Notes
    -----
    **Privacy.** Unit of privacy: one row of ``(X, y, sensitive_features)``.
    Neighbouring relation: replace-one (a row may change its group too), or
    add/remove with ``neighbouring="add-remove"`` (sensitivities: counts 1,
    gradient sum ``C max_k v_k``, loss sums ``max_loss``, second moment
    ``R^2``; ``n`` is then not public and the counts are released even
    without groups). The rest of this paragraph is for replace-one.
    Public: ``n``, the classes, the set of groups (``groups``), ``row_norm``,
    ``max_loss`` and every parameter; the group *sizes* are not public and are
    released with noise. Released, with Gaussian noise: the group counts once
    (L2 sensitivity ``sqrt(2)``: one count down, one up), then at every step
    the sum of clipped gradients weighted by ``v_k = p_k / n_k`` (the
    adversary's weight over the noisy group count; sensitivity
    ``2C max_k v_k``: ``2C v_g`` when the row stays in its group,
    ``C (v_g + v_g')`` when it moves; the weights come from earlier releases,
    so the noise is set before the step reads the data) and the per-group
    sums of losses clipped to ``[0, max_loss]`` (sensitivity
    ``sqrt(2) max_loss``). Every step reads all rows (no sampling). Accountant:
    Gaussian mechanisms composed adaptively, converted exactly by Gaussian DP
    (``mu = sqrt(sum 1 / z_i^2)``, Dong, Roth, Su 2022; about 8% less noise
    than the Rényi conversion at delta 1e-5). Budget split, as shares of
    ``1 / z^2`` (what both the Rényi curve and ``mu^2`` add up):
    5% to the counts, 10% to the loss sums, 85% to the gradient sums (with
    one group: everything to the gradients, the count is ``n``). With
    ``precondition=True`` 5% of the gradients' share goes to one release of
    the second-moment matrix ``sum_i a_i a_i^T`` of the projected rows
    (sensitivity ``sqrt(2) R^2`` with ``R = sqrt(row_norm^2 + 1)`` with an
    intercept, ``row_norm`` without), whose noisy value, ridged by its
    noise level, preconditions every gradient step. **The centre**
    (``centring_share``, by default for ``"gda"``): after the counts, one
    Gaussian release of the sum of the rows, each put on the ball of
    ``row_norm`` (sensitivity ``2 row_norm``; a
    :class:`~skdp.accounting.GaussianSumEvent`), its noise set so that it
    alone is ``sqrt(share) mu``-GDP with ``mu`` that of the whole target
    (Dong, Roth, Su 2022, Corollaries 2.13 and 3.3); ``z`` is then
    calibrated so that the releases above and this one, composed by the
    accountant, meet ``epsilon``. Dividing it by ``n`` (under add/remove
    by the total of the released counts), shrinking it, moving the rows by
    it, projecting them again and mapping the model back are
    post-processing. The weighting, the adversary's step, the floor of the
    noisy counts at 1 and the averaging are post-processing. Without
    ``sensitive_features`` all rows form one group and the estimator is
    private full-batch gradient descent on the logistic loss (private ERM).
    **Small groups**: a row of a group of ``n_k`` rows weighs ``p_k / n_k`` in
    the model's step, so the noise grows as the adversary moves to a small
    group, and noisy loss estimates move it there at random; without a cap
    (``weight_cap=None``) runs with small groups diverged on the benchmarks
    (docs/benchmarks.md, "Worst-group fairness"). With ``weight_cap`` a group
    holding less than ``1 / weight_cap`` of the rows gets at most
    ``weight_cap`` times its share; noisy counts are floored at 1 and empty
    groups get no weight.
    :meth:`group_report` reads its data without protection (it is for
    evaluation).

    With ``solver="mirror"``: public also ``l1_radius`` and ``feature_bound``.
    Released: the group counts once with Gaussian noise (as above), then every
    step one exponential-mechanism draw of a model vertex and one of a group.
    Each draw is ``r``-DP and ``r``-bounded range with ``r`` the largest range
    of the change of its score vector between neighbours (``4 eta_w R G omega``
    and ``2 eta_p B omega``, ``omega = n / (b_min d_min)``, see
    docs/fairness.md), accounted as ``r^2 / 8``-zCDP (Cesar and Rogers 2021).
    Scores are cumulative, so every draw after the record's batch depends on
    it: all draws are composed (no parallel composition). Budget split: 10%
    counts, 20% group draws, 70% model draws of the curve ``a / (2 z^2)``;
    the steps are set from the released counts so that no draw exceeds its
    accounted range. Groups with fewer than ``n / n_iter`` rows (noisy count)
    are down-weighted to that size; small groups slow both players down.
    With ``centring_share > 0`` (never by default) the centre's release,
    as above, comes first, divided by the public ``n``, and is composed with
    the draws by the accountant; the run's entries are then clipped to
    ``feature_bound`` as usual.
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither"), None],
        "groups": ["array-like", None],
        "classes": ["array-like", None],
        "solver": [StrOptions({"gda", "mirror"})],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [
            Interval(Real, 0, MAGNITUDE_LIMIT, closed="right"),
            StrOptions({"auto"}),
        ],
        "eta_p": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "momentum": [Interval(Real, 0, 1, closed="left"), StrOptions({"auto"})],
        "weight_cap": [Interval(Real, 1, None, closed="left"), None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "precondition": ["boolean"],
        "l1_radius": [Interval(Real, 0, MAGNITUDE_LIMIT, closed="right")],
        "row_norm": [Interval(Real, 0, MAGNITUDE_LIMIT, closed="right"), None],
        "feature_bound": [Interval(Real, 0, MAGNITUDE_LIMIT, closed="right"), None],
        "max_grad_norm": [
            Interval(Real, 0, MAGNITUDE_LIMIT, closed="right"),
            StrOptions({"auto"}),
        ],
        "max_loss": [Interval(Real, 0, None, closed="neither")],
        "centring_share": [
            Interval(Real, 0, 1, closed="left"),
            StrOptions({"auto"}),
        ],
        "fit_intercept": ["boolean"],
        "neighbouring": [StrOptions({"replace-one", "add-remove"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=None,
        groups=None,
        classes=None,
        solver="gda",
        n_iter=1000,
        learning_rate="auto",
        eta_p="auto",
        momentum="auto",
        weight_cap=3.0,
        alpha=1e-4,
        precondition=False,
        l1_radius=20.0,
        row_norm=None,
        feature_bound=None,
        max_grad_norm="auto",
        max_loss=2.0,
        centring_share="auto",
        fit_intercept=True,
        neighbouring="replace-one",
        random_state=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.groups = groups
        self.classes = classes
        self.solver = solver
        self.n_iter = n_iter
        self.learning_rate = learning_rate
        self.eta_p = eta_p
        self.momentum = momentum
        self.weight_cap = weight_cap
        self.alpha = alpha
        self.precondition = precondition
        self.l1_radius = l1_radius
        self.row_norm = row_norm
        self.feature_bound = feature_bound
        self.max_grad_norm = max_grad_norm
        self.max_loss = max_loss
        self.centring_share = centring_share
        self.fit_intercept = fit_intercept
        self.neighbouring = neighbouring
        self.random_state = random_state
        self.verbose = verbose

    #: The solver behind each value of ``solver``; a subclass may map a name to
    #: a solver with another tuning policy (as benchmarks do).
    _saddle_solvers = {"gda": GDASolver(), "mirror": MirrorSolver()}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _saddle_solver(self):
        """The solver object named by ``solver`` (the one place it is read)."""
        return self._saddle_solvers[self.solver]

    def _check_settings(self):
        """Refuse combinations of parameters that have no valid accounting."""
        self._saddle_solver().check_neighbouring(self.neighbouring)
        check_add_remove_delta(self.neighbouring, self.delta)
        if self._centring_share() > 0 and not self.fit_intercept:
            raise ValueError(
                "centring_share needs fit_intercept=True (the intercept absorbs "
                "the centre); set centring_share=0."
            )

    def _centring_share(self):
        """The centre's share of the budget: ``centring_share`` or the solver's."""
        if self.centring_share == "auto":
            if not self.fit_intercept:
                return 0.0
            return float(self._saddle_solver().auto_centring_share)
        return float(self.centring_share)

    def _row_norm(self):
        """The row bound the run uses: ``row_norm``, or the unit ball's."""
        return _UNDECLARED_ROW_NORM if self.row_norm is None else self.row_norm

    def _warn_default_row_bound(self):
        """Say that a fit without ``row_norm`` projects rows onto the unit ball.

        Raised from the parameters alone, never from the rows: whether a row
        exceeds the bound is private. The stack level points at the caller of
        ``fit``.
        """
        if self.row_norm is not None:
            return
        warnings.warn(
            "DPSaddlePointClassifier without row_norm bounds the rows by the unit "
            f"ball (radius {_UNDECLARED_ROW_NORM:g}): rows of larger norm are "
            "scaled down to it, which erases much of the signal of rows encoded "
            "on public bounds (SchemaEncoder's rows reach norm sqrt(n_columns)). "
            "Declare the public bound: row_norm=SchemaEncoder(schema)."
            "row_norm_bound() (a fitted encoder's row_norm_), as "
            "make_private_pipeline does. This warning does not look at the rows "
            "(that would read the private data).",
            UndeclaredBoundWarning,
            stacklevel=6,
        )

    def _declared_groups(self):
        groups = as_labels(self.groups, "groups")
        if groups.size == 0:
            raise ValueError("groups is empty; declare at least one group label.")
        if len(set(groups.tolist())) != groups.size:
            raise ValueError(f"groups has duplicate labels: {groups.tolist()!r}.")
        return groups

    def _problem(self, n_samples, n_groups, n_features):
        """The public inputs of a fit of this size."""
        return SaddleProblem(
            n_samples=n_samples,
            n_groups=n_groups,
            n_features=n_features,
            fit_intercept=self.fit_intercept,
            neighbouring=self.neighbouring,
            n_iter=self.n_iter,
            learning_rate=self.learning_rate,
            group_step=self.eta_p,
            momentum=self.momentum,
            weight_cap=self.weight_cap,
            l2=self.alpha,
            precondition=self.precondition,
            l1_radius=self.l1_radius,
            row_norm=self._row_norm(),
            feature_bound=self.feature_bound,
            clip_norm=self.max_grad_norm,
            max_loss=self.max_loss,
        )

    def _plan(self, n_samples, n_groups, n_features):
        """The privacy plan of a fit of this size (public inputs only).

        The solver's plan, and the centre's release, its noise set by its
        share of the budget at the fit's delta (:func:`centre_noise`).
        """
        problem = self._problem(n_samples, n_groups, n_features)
        run = self._saddle_solver().plan(problem)
        share = self._centring_share()
        centring = None
        if share > 0:
            noise = centre_noise(
                share, self.epsilon, self._delta(run), self.neighbouring
            )
            centring = Centring.of(problem, noise)
        return _FitPlan(run, centring)

    def _delta(self, plan):
        return resolve_delta(self.delta, plan.n_samples)

    def _calibrated(self, plan):
        """``(noise_multiplier, planned spend)`` meeting the target."""
        return calibrate_noise_multiplier(
            plan.events,
            self.epsilon,
            self._delta(plan),
            neighbouring=self.neighbouring,
            accountant="pld",
        )

    def privacy_plan(self, n_samples, n_classes=None, *, n_groups=None, n_features=1):
        """Noise and privacy of a fit on ``n_samples`` rows, without any data.

        Parameters
        ----------
        n_samples : int
        n_classes : int or None, default=None
            Must be 2 (binary only) or None; accepted for
            :func:`skdp.model_selection.search_privacy`.
        n_groups : int or None, default=None
            ``None``: the number of declared ``groups`` (required then).
        n_features : int, default=1
            Number of features; the spend never depends on it (only the
            ``"mirror"`` steps do).

        Returns
        -------
        skdp.accounting.PrivacyPlan
            ``(noise_multiplier, privacy_spent, delta)``.
        """
        self._validate_params()
        self._check_settings()
        if n_samples < 1 or n_classes not in (None, 2):
            raise ValueError(
                "n_samples must be >= 1 and n_classes == 2: only binary "
                "classification is supported."
            )
        if n_groups is None:
            if self.groups is None:
                raise ValueError(
                    "The spend depends on the number of groups: declare `groups` "
                    "(or pass n_groups to privacy_plan; search_privacy needs "
                    "`groups` declared)."
                )
            n_groups = self._declared_groups().size
        plan = self._plan(int(n_samples), int(n_groups), int(n_features))
        z, spent = self._calibrated(plan)
        return PrivacyPlan(z, spent, self._delta(plan))

    def _resolve_groups(self, sensitive_features, n_samples):
        """Return ``(groups, codes)``; warn when the group set is read from data."""
        if sensitive_features is None:
            if self.groups is not None:
                raise ValueError(
                    "groups is set but fit got no sensitive_features; pass "
                    "sensitive_features=... (with metadata routing, request it "
                    "with set_fit_request(sensitive_features=True))."
                )
            return np.array([None], dtype=object), np.zeros(n_samples, dtype=np.intp)
        if self.groups is None:
            labels = as_labels(sensitive_features, "sensitive_features")
            groups = np.unique(labels)
            codes = encode_groups(labels, groups, n_samples)
            warnings.warn(
                "groups=None: the set of groups was read from sensitive_features, "
                "which privacy_spent_ does not cover (a rare group label reveals "
                "that someone has it). Declare the public set with groups=[...].",
                PrivacyLeakWarning,
                stacklevel=4,
            )
            return groups, codes
        groups = self._declared_groups()
        return groups, encode_groups(sensitive_features, groups, n_samples)

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sensitive_features=None):
        """Fit the model privately.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Binary labels.
        sensitive_features : array-like of shape (n_samples,) or None
            Group label of each row, from the public set ``groups``. ``None``:
            one group (private ERM).

        Returns
        -------
        self : DPSaddlePointClassifier

        Notes
        -----
        ``X`` may be a 2-D ``dask.array.Array`` (or a
        ``dask.dataframe.DataFrame`` of numeric columns), with ``y`` and
        ``sensitive_features`` Dask arrays or series from the same
        partitions (or arrays), declared ``classes`` and, with
        ``sensitive_features``, declared ``groups``. The partitions are held
        on the workers, which return only sums (the group counts, each
        step's gradient and group loss sums, the second moment and, for a
        centred ``"gda"`` run, the centre's sum; the released centre is then
        sent with every question, and each partition moves its rows by it
        where they are held); the model is the in-memory one up to the order
        of float sums, with the same noise, draws and events
        (docs/guide/dask.md). ``solver="mirror"`` with ``centring_share > 0``
        is refused on Dask before any partition is read: its batches read
        rows by index, and the centred rows would have to be held on the
        workers.
        """
        if is_dask_collection(X):
            return self._fit_private(self._dask_validated(X, y, sensitive_features))
        return self._fit_private(self._validated(X, y, sensitive_features))

    def _dask_validated(self, X, y, sensitive_features):
        """A Dask fit's inputs: held on the workers, checked where they are read."""
        self._check_settings()
        self._warn_default_row_bound()
        held = held_rows_class(self._saddle_solver())
        if self._centring_share() > 0 and not held.supports_centring:
            raise ValueError(
                f"solver={self.solver!r} has no centred run on a Dask collection "
                "(its batches would need the centred rows held on the workers); "
                "set centring_share=0, or fit in memory."
            )
        classes = declared_binary_classes(self.classes)
        groups = self._dask_groups(sensitive_features)
        # The sizes of this problem are placeholders: held_saddle_rows reads only
        # the public row_norm and fit_intercept.
        rows = held_saddle_rows(
            X,
            y,
            sensitive_features,
            classes=classes,
            groups=groups,
            problem=self._problem(1, groups.size, 1),
            held=held,
        )
        n_samples, n_features = rows.summary.n_rows, rows.summary.n_features
        self.n_features_in_ = n_features
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return _FitData(
            rows=rows,
            problem=self._problem(n_samples, groups.size, n_features),
            classes=classes,
            groups=groups,
        )

    def _dask_groups(self, sensitive_features):
        """The declared groups of a Dask fit; they are never read from the data."""
        if sensitive_features is None:
            return self._resolve_groups(None, 0)[0]
        if self.groups is None:
            raise ValueError(
                "On a Dask collection, declare the public set of groups with "
                "groups=[...]: it is not read from sensitive_features (reading "
                "it would need a pass over the group labels that privacy_spent_ "
                "does not cover)."
            )
        return self._declared_groups()

    def _validated(self, X, y, sensitive_features):
        """Check the inputs against their public sets; no state changes."""
        self._check_settings()
        self._warn_default_row_bound()
        check_numeric_table(X, "DPSaddlePointClassifier")
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        check_classification_targets(y)
        y_type = type_of_target(y, input_name="y")
        if self.classes is None and y_type != "binary":
            raise ValueError(
                "Only binary classification is supported. The type of the target "
                f"is {y_type}."
            )
        classes = resolve_classes(
            y, self.classes, "DPSaddlePointClassifier", binary=True
        )
        labels = (y == classes[1]).astype(int)
        groups, codes = self._resolve_groups(sensitive_features, X.shape[0])
        return _FitData(
            rows=SaddleRows(X=X, y=labels, group_codes=codes),
            problem=self._problem(X.shape[0], groups.size, X.shape[1]),
            classes=classes,
            groups=groups,
        )

    def _plan_fit(self, data, rng):
        problem = data.problem
        return self._plan(problem.n_samples, problem.n_groups, problem.n_features)

    def _calibrate(self, plan):
        return self._calibrated(plan)[0]

    def _schedule(self, plan, noise_multiplier, data):
        schedule = self._saddle_solver().schedule(
            data.problem, plan.run, noise_multiplier
        )
        return schedule, plan.centring

    def _run(self, schedule, noise_multiplier, data, rng):
        schedule, centring = schedule
        if isinstance(data.rows, HeldSaddleRows):
            return data.rows.run_centred(
                data.problem,
                schedule,
                noise_multiplier,
                centring,
                rng=rng,
                verbose=self.verbose,
            )
        return self._saddle_solver().run_centred(
            data.rows,
            data.problem,
            schedule,
            noise_multiplier,
            centring,
            rng=rng,
            verbose=self.verbose,
        )

    def _account(self, plan, result):
        return account(
            result.events,
            self._delta(plan),
            neighbouring=self.neighbouring,
            warn=self._saddle_solver().warn_at_grid_edge,
            accountant="pld",
        )

    def _set_fitted(self, data, plan, noise_multiplier, result, spent, rng):
        w = result.coef
        if self.fit_intercept:
            self.coef_, self.intercept_ = w[None, :-1].copy(), w[-1:].copy()
        else:
            self.coef_, self.intercept_ = w[None, :].copy(), np.zeros(1)
        self.classes_ = data.classes
        self.groups_ = data.groups
        self.group_weights_ = result.group_weights
        self.n_iter_ = result.n_iter
        self.noise_multiplier_ = noise_multiplier
        self.draw_ranges_ = result.draw_ranges
        self.delta_ = self._delta(plan)
        self.privacy_spent_ = spent

    def group_report(self, X, y, sensitive_features=None):
        """Per-group size, log-loss and accuracy on ``(X, y)`` (not private).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Labels among ``classes_``.
        sensitive_features : array-like of shape (n_samples,) or None
            Labels among ``groups_``; ``None`` only for a model fitted without
            groups.

        Returns
        -------
        report : dict
            ``{group: {"n": int, "log_loss": float, "accuracy": float}}`` for
            each group of ``groups_`` present in the data, in that order.
        """
        check_is_fitted(self)
        scores = self.decision_function(X)
        y = np.asarray(y)
        if y.shape != scores.shape:
            raise ValueError(f"y has shape {y.shape}; expected {scores.shape}.")
        known = np.isin(y, self.classes_)
        if not known.all():
            raise ValueError(
                f"y contains labels {np.unique(y[~known]).tolist()[:5]!r} not in "
                f"classes_ {self.classes_.tolist()!r}."
            )
        target = (y == self.classes_[1]).astype(float)
        if sensitive_features is None:
            if self.groups_.size != 1 or self.groups_[0] is not None:
                raise ValueError(
                    "This model was fitted with groups; pass sensitive_features."
                )
            codes = np.zeros(scores.size, dtype=np.intp)
        else:
            codes = encode_groups(sensitive_features, self.groups_, scores.size)
        losses = np.logaddexp(0.0, scores) - target * scores
        correct = (scores > 0) == (target == 1)
        report = {}
        for k, group in enumerate(self.groups_.tolist()):
            mask = codes == k
            if mask.any():
                report[group] = {
                    "n": int(mask.sum()),
                    "log_loss": float(losses[mask].mean()),
                    "accuracy": float(correct[mask].mean()),
                }
        return report

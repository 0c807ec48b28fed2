"""DPLogisticRegression: logistic regression trained by DP-SGD or DP-SGLD."""

import logging
import time
import warnings
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets

from .._base import PrivateFitMixin, resolve_delta
from .._solvers._rows import loss_row_norm
from .._solvers._sgd import (
    AMPLIFIED,
    DEFAULT_POLICY,
    SGDPlan,
    make_plan,
    run_logistic_sgd,
    schedule_run,
)
from .._solvers._sgd._dask import HeldRows, run_logistic_sgd_dask
from ..accounting import PrivacyPlan, account
from ..exceptions import UndeclaredBoundWarning, UnscaledFeaturesWarning
from ..utils._sklearn import Interval, StrOptions, fit_context, validate_data
from ..utils._validation import (
    MAGNITUDE_LIMIT,
    check_add_remove_delta,
    check_numeric_table,
    check_sample_weight,
    resolve_classes,
    user_stacklevel,
)
from . import _budget
from ._base import LinearClassifierPredictMixin
from ._dask import held_fit_inputs, is_dask_collection

__all__ = ["DPLogisticRegression"]

logger = logging.getLogger("skdp")


@dataclass(frozen=True)
class _FitData:
    """A fit's validated inputs."""

    X: np.ndarray  # or HeldRows: partitions held on Dask workers
    codes: np.ndarray | None
    classes: np.ndarray
    sample_weight: np.ndarray | None

    @property
    def n_samples(self):
        return self.X.shape[0]

    def n_params(self, fit_intercept):
        """Number of coefficients of the model (one output for two classes)."""
        n_out = 1 if self.classes.size == 2 else self.classes.size
        return (self.X.shape[1] + int(fit_intercept)) * n_out


@dataclass(frozen=True)
class _FitPlan:
    """A fit's public plan: the solver's plan and the budget it runs on."""

    run: SGDPlan
    budget: _budget.Budget


def _encode_labels(y, classes, chunk=1 << 20):
    """Class index of each label in the smallest integer type, in chunks."""
    codes = np.empty(len(y), dtype=np.min_scalar_type(classes.size - 1))
    for lo in range(0, len(y), chunk):
        codes[lo : lo + chunk] = np.searchsorted(classes, y[lo : lo + chunk])
    return codes


# A column with at least ``_UNSCALED_SHARE`` of its values beyond
# ``_UNSCALED_LIMIT`` in absolute value is not on a public scale: encoded
# columns lie in [-1, 1], standardised ones put about 1% beyond 10 even with
# the heavy tails of a Student t with 2 degrees of freedom; raw amounts and
# counts put far more.
_UNSCALED_LIMIT = 10.0
_UNSCALED_SHARE = 0.05
# Rows that check reads (a memmap is not read whole for a warning).
_SCALE_CHECK_ROWS = 10_000


def _warn_unscaled(X, names=None):
    """Say so when columns of ``X`` are far outside [-1, 1] (its first rows).

    The defaults assume features on a public scale; raw amounts keep the
    privacy guarantee but can make the model and its probabilities poor.
    ``names``: the columns' names (a DataFrame's), else their positions.
    """
    head = np.abs(np.asarray(X[:_SCALE_CHECK_ROWS], dtype=float))
    if head.size == 0:
        return
    beyond = np.count_nonzero(head > _UNSCALED_LIMIT, axis=0)
    far = np.flatnonzero(beyond >= _UNSCALED_SHARE * head.shape[0])
    if far.size == 0:
        return
    labels = [str(names[j]) if names is not None else str(j) for j in far[:10]]
    shown = ", ".join(labels) + (", ..." if far.size > 10 else "")
    largest = float(head[:, far].max())
    warnings.warn(
        f"Columns {shown} of X are far outside [-1, 1] (at least "
        f"{_UNSCALED_SHARE:.0%} of their values beyond {_UNSCALED_LIMIT:g} in "
        f"absolute value, up to {largest:.3g}); DP-SGD's default clip, step "
        "and probability floor assume features on a public scale. Encode the "
        "table from its declaration (make_private_pipeline(TableSchema(...), "
        "...) or SchemaEncoder), or map each column to [-1, 1] by public "
        "bounds. The privacy guarantee holds either way; the accuracy and the "
        "probabilities may not.",
        UnscaledFeaturesWarning,
        stacklevel=user_stacklevel(),
    )


class DPLogisticRegression(
    PrivateFitMixin, LinearClassifierPredictMixin, ClassifierMixin, BaseEstimator
):
    """Logistic regression with differential privacy, by DP-SGD or DP-SGLD.

    Binary or multinomial (softmax). Rows are used as they are, or, given a
    public ``row_norm``, projected onto a ball of that radius (a per-record
    map, free of privacy cost); per-example gradients are clipped; Gaussian
    noise is added at every step. The model is the last iterate, or the
    average of the last iterates where the accountant in force already
    treats every iterate as released. ``epsilon`` and
    ``delta`` are targets: the noise is calibrated in ``fit`` so that the
    reported spend never exceeds them.

    Parameters
    ----------
    epsilon : float or None, default=1.0
        Target epsilon. ``None`` to fix ``noise_multiplier`` instead.
    delta : float or None, default=None
        Target delta; ``None`` uses ``min(1e-5, n ** -1.1)``, well below
        ``1/n`` (replace-one only: under add/remove ``n`` is private, so set
        delta yourself).
    noise_multiplier : float or None, default=None
        Used only when ``epsilon is None``: std of the noise added to the sum of
        clipped per-example gradients divided by the clip norm (DP-SGLD: the
        Langevin ``sigma`` divided by the clip norm).
    solver : {"dp-sgd", "dp-sgld"}, default="dp-sgd"
    batch_sampling : {"poisson", "shuffle", "cyclic", "balls-and-bins"}, \
default="poisson"
        ``"poisson"``: each record joins each batch independently (accounted by
        the subsampled Gaussian; the most accurate in our benchmarks);
        ``"balls-and-bins"`` (random allocation): every epoch each record goes
        to one of the epoch's steps, uniformly and independently of the
        others, a fresh allocation each epoch (Chua et al., "Balls-and-bins
        sampling for DP-SGD", AISTATS 2025; Feldman and Shenfeld, "Privacy
        amplification by random allocation", 2025), with as many steps an
        epoch as Poisson batches and Poisson's "auto" rules, accounted by
        :class:`~skdp.accounting.RandomAllocationGaussianEvent` under either
        relation (``solver="dp-sgd"`` only);
        ``"cyclic"``: batches in the data's order (public); ``"shuffle"``: in a
        secret random order drawn once, then visited cyclically. Cyclic orders
        stream data in fixed batches and are accounted by the last-iterate bound
        with the "auto" settings.
    batch_size : int, default=256
        Batch size (expected size for Poisson); capped at ``n``.
    epochs : int or "auto", default="auto"
        Passes over the data. ``"auto"``: for Poisson batches 30, or
        ``15 * epsilon`` (``30 * epsilon`` under add/remove, whose noise is
        smaller at the same epsilon; at most 120) when that is more (a larger
        budget buys more steps at the same noise); 10 for cyclic and shuffled
        batches (whose last-iterate bound grows with every pass)
        (docs/benchmarks.md, "DPLogisticRegression accuracy").
    learning_rate : float in (0, 1e30] or "auto", default="auto"
        ``"auto"``: ``1 / (beta + alpha)`` with ``beta`` the smoothness of the
        loss on rows of norm ``row_norm`` (every step non-expansive) for cyclic
        and shuffled batches; 64 times that for Poisson batches (whose clip
        norm is small, see ``max_grad_norm``), lowered with a target
        ``epsilon`` below ``epsilon * batch_size / epochs * 32`` times it
        under add/remove (8 under replace-one), i.e. below epsilon 0.23
        (add/remove) or 0.94 (replace-one) with the default batch and
        epochs: with little budget the noise dominates the steps, and
        shorter steps averaged over the tail win. With the "auto" clip, the
        Poisson step is doubled once the calibrated noise per coordinate is
        small, ``z / b`` from 0.017 down to 0.011 (``b`` the batch size): the
        run is then limited by optimisation rather than noise. The travel
        cap and the doubling apply to ``solver="dp-sgd"`` only (DP-SGLD
        keeps 64 times the unit step). Poisson without ``row_norm``: ``2 /
        max_grad_norm``, lowered with a target epsilon below ``epsilon *
        batch_size / epochs * 3 / 16`` times it (replace-one; ``8 / 16``
        under add/remove), the same travel cap with its own constants
        (docs/benchmarks.md, "DPLogisticRegression accuracy" and "Defaults
        chosen on the panel").
    lr_schedule : {"constant", "decreasing"}, default="constant"
        ``"decreasing"``: ``learning_rate / (1 + epoch)``.
    alpha : float, default=1e-4
        L2 penalty ``alpha / 2 ||w||^2`` on all coefficients, intercept included
        (strong convexity is what lets the last-iterate bound stop growing).
    l1_ratio : float, default=0.0
        Share of ``alpha`` put on an L1 penalty, applied by its prox.
    row_norm : float in (0, 1e30] or None, default=None
        Public bound on the L2 norm of each row of ``X``; larger rows are scaled
        down to it (silently: reporting which rows were clipped would leak).
        Public magnitudes are capped at 1e30, beyond which one projected row
        could overflow the run. ``None``: no bound and no projection; with
        Poisson batches per-example clipping alone bounds each step's
        sensitivity, and the "auto" clip and step do not depend on the scale
        of the rows (the default: no geometric parameter to guess;
        docs/benchmarks.md, "Defaults chosen on the panel"). Cyclic and
        shuffled batches set their "auto" step, clip and last-iterate bound
        from a row bound: without one they project rows onto the unit ball
        (``row_norm=1.0``), and ``fit`` warns
        (:class:`~skdp.exceptions.UndeclaredBoundWarning`) whatever the rows,
        since whether a row is larger is private. ``SchemaEncoder``'s
        ``row_norm_`` is a valid bound (``make_private_pipeline`` passes it).
    max_grad_norm : float in (0, 1e30] or "auto", default="auto"
        Per-example gradient clip norm. ``"auto"``, cyclic and shuffled: the
        largest gradient norm possible on rows of norm ``row_norm``, so clipping
        is never active and the last-iterate bound applies; Poisson: 5% of it
        (clipping then scales nearly every gradient to the same norm, which
        lets the noise be small against it), rising to 25% when the
        calibrated noise is small against the clipped step (``z sqrt(p) / b``
        from 0.2 down to 0.05, ``p`` coefficients, batch ``b``), with the
        "auto" step shrunk by the same factor: less clipping bias once the
        budget allows it (docs/benchmarks.md, "DPLogisticRegression
        accuracy"). The rise to 25% is for
        ``solver="dp-sgd"`` only (DP-SGLD keeps 5%). Poisson without
        ``row_norm``: 1, whatever the scale of the rows (docs/benchmarks.md,
        "Defaults chosen on the panel"), growing to 2.5 over the same range
        of the calibrated noise, with an "auto" step shrunk to match
        (docs/benchmarks.md, "The clip without a row bound").
    tail_fraction : float in [0, 1) or "auto", default="auto"
        Return the average of the iterates of this last fraction of the steps
        (0: the last iterate). Averaging forfeits the last-iterate bound, so
        cyclic and shuffled runs that average are accounted by composition.
        ``"auto"``: 0.5 for Poisson batches, 0 otherwise.
    projection_radius : float in (0, 1e30] or None, default=None
        Project the iterate onto a ball of this radius after each step.
    calibration_share : float in [0, 1) or "auto", default="auto"
        Share of ``epsilon`` set aside for the probability floor, so that
        ``predict_proba`` is not worse than the class prior's: a private
        class prior (Gaussian class counts, shrunk towards uniform by their
        known noise), then a private point on the path of logits from the
        prior's to the model's (one Gaussian release of the derivative of
        the training log-loss on a public grid of points), starting from
        the share of the coefficients the training noise is not expected to
        make up (public) and leaving it only when the release shows clearly
        that another point is better. The two releases together spend at
        most ``calibration_share * epsilon``; the training noise is
        calibrated so that everything together meets ``epsilon``. With a
        fitted intercept the move towards the prior can change predicted
        classes (towards the majority class, where the model is mostly
        noise). Needs a target ``epsilon``. ``"auto"``: 0.2 with a target
        epsilon (docs/benchmarks.md, "The probability floor"),
        0 with a fixed ``noise_multiplier``.
    centring_share : float in [0, 1) or "auto", default="auto"
        Share of ``epsilon`` set aside for a private centre of the rows,
        released before training and subtracted from every row during it:
        the sum of the rows, each put within a public radius (the declared
        ``row_norm``'s, else ``sqrt(n_features)``), with Gaussian noise,
        divided by the number of rows and shrunk towards zero by the known
        noise (positive-part James-Stein). Per-example clipping then spends
        the clip on what varies between rows rather than on their common
        offset (columns encoded on generous public bounds sit near one end
        of their range). The model is returned for the rows as given (the
        intercept absorbs the centre). The share is one of the budget in
        Gaussian DP (of ``mu^2``, which Gaussian mechanisms add up); the
        training noise is calibrated so that everything together, composed
        by the accountant, meets ``epsilon``. Needs a
        target ``epsilon`` and ``fit_intercept=True``. ``"auto"``: 0.1 for
        Poisson and balls-and-bins batches with a target epsilon and an
        intercept (docs/benchmarks.md, "The private centre"), 0 otherwise.
    fit_intercept : bool, default=True
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
        ``"add-remove"`` only with Poisson batches, a target ``epsilon`` and
        an explicit ``delta``: ``n`` is then private, and the plan is set
        from a noisy count of the rows (see Notes).
    classes : array-like or None, default=None
        The public set of class labels (the model has an output for each,
        even one absent from ``y``; a label of ``y`` outside it is refused).
        ``None`` reads it from ``y`` and emits a
        :class:`~skdp.exceptions.PrivacyLeakWarning`: the set of labels present
        is then not covered by ``privacy_spent_`` (a label only one person has
        would be revealed).
    random_state : int, RandomState instance or None, default=None
        Seed of the noise. ``None`` draws a fresh one. A fixed seed makes
        refits identical, and anyone who knows it can regenerate the noise
        and undo the privacy: keep a seed secret, as you would the data.
    verbose : int, default=0
        1: log the calibrated noise and about ten progress lines; 2 or more:
        a line per epoch (no loss: it would read the data unprotected).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_ : int
        Number of noisy steps.
    noise_multiplier_ : float
    max_grad_norm_ : float
        The clip norm the run used (``max_grad_norm``, or what ``"auto"``
        resolved to).
    learning_rate_ : float
        The first step's learning rate (``learning_rate``, or what ``"auto"``
        resolved to; ``lr_schedule="decreasing"`` divides it by ``1 + epoch``).
    delta_ : float
    privacy_spent_ : skdp.accounting.PrivacySpent
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string feature names.

    Notes
    -----
    **Privacy.** Unit of privacy: one row of ``(X, y)``. Neighbouring relation:
    replace-one by default (add/remove for Poisson and balls-and-bins batches
    on request). Public:
    the number of rows (replace-one only), the classes (``classes``),
    ``row_norm`` and every parameter.
    Under add/remove ``n`` is private. The fit first releases a count of the
    rows with Gaussian noise (sensitivity 1) spending 2% of ``epsilon`` and
    of ``delta`` (exact Gaussian DP), rounds it (at least 1), and sets the
    whole plan from that released count instead of ``n``: the sampling rate
    ``batch_size / count`` (each of the actual rows is drawn at that rate),
    the number of steps, the "auto" step, clip and epochs, the tail average
    and the noise, calibrated so that the training run (temperature release
    included) is ``(epsilon - eps_count, delta - delta_count)``-DP for that
    plan. Every released value other than the model is then a function of
    the released count and public inputs. Since the training's privacy events
    follow the released count, the two parts are composed by basic
    composition of fixed ``(epsilon, delta)`` pairs, valid when the second
    mechanism is chosen from the first's output (Dwork, Rothblum and Vadhan
    2010): ``privacy_spent_`` reports the target ``(epsilon, delta)``, keeps
    no events, and its Rényi curve is infinite (no curve is known to bound
    the whole), so ``at_delta`` and ``compose_spent`` give infinity. A fixed
    ``noise_multiplier`` has no bound valid for every count and is refused
    under add/remove.
    Accountant: the smallest valid bound, named in ``privacy_spent_``.
    Cyclic and shuffled batches report the smaller of the Rényi-DP
    composition bound (valid for any loss) and the last-iterate bound by shifted
    Rényi divergence (valid when clipping is inactive and only the last iterate
    is returned, which the ``"auto"`` settings guarantee for these samplers);
    shuffled order also averages over the secret position
    of the differing record. Poisson batches use the subsampled Gaussian
    bound, both as a Rényi curve (under replace-one via the weak triangle
    inequality) and as a numerical privacy loss distribution
    (``accountant="pld"``; under replace-one on the pair proved worst for
    a replacement, docs/accounting.md, "The replace-one pair"), the smaller
    reported (Opacus's default accountant is of this kind, add/remove only). Budget
    split: the probability floor's release (``calibration_share``, by default
    a fifth of ``epsilon`` measured alone) is a Gaussian mechanism on sums of
    per-row vectors of bounded norm; the training noise is then calibrated so
    that the training run and that release, composed by the same accountant,
    meet ``epsilon``. The release is made in two adaptive parts, the class
    counts and then the loss derivatives, whose noise splits its inverse
    variance between them: Gaussian DP composes exactly (Dong, Roth and Su
    2022, Corollary 3.3), so the two parts together are the accounted
    Gaussian. Without ``row_norm`` the rows are not projected and the clip
    norm is the sensitivity of a Poisson step (no last-iterate bound). DP-SGLD
    is accounted by the same bounds, never by the DP-SGLD paper's Theorem
    3.1, which is false for minibatches.
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": [Interval(Real, 0, 1, closed="neither"), None],
        "noise_multiplier": [Interval(Real, 0, None, closed="neither"), None],
        "solver": [StrOptions({"dp-sgd", "dp-sgld"})],
        "batch_sampling": [
            StrOptions({"shuffle", "cyclic", "poisson", "balls-and-bins"})
        ],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "epochs": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "learning_rate": [
            Interval(Real, 0, MAGNITUDE_LIMIT, closed="right"),
            StrOptions({"auto"}),
        ],
        "lr_schedule": [StrOptions({"constant", "decreasing"})],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "l1_ratio": [Interval(Real, 0, 1, closed="both")],
        "row_norm": [Interval(Real, 0, MAGNITUDE_LIMIT, closed="right"), None],
        "max_grad_norm": [
            Interval(Real, 0, MAGNITUDE_LIMIT, closed="right"),
            StrOptions({"auto"}),
        ],
        "projection_radius": [Interval(Real, 0, MAGNITUDE_LIMIT, closed="right"), None],
        "tail_fraction": [
            Interval(Real, 0, 1, closed="left"),
            StrOptions({"auto"}),
        ],
        "calibration_share": [
            Interval(Real, 0, 1, closed="left"),
            StrOptions({"auto"}),
        ],
        "centring_share": [
            Interval(Real, 0, 1, closed="left"),
            StrOptions({"auto"}),
        ],
        "fit_intercept": ["boolean"],
        "neighbouring": [StrOptions({"replace-one", "add-remove"})],
        "classes": ["array-like", None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # The constants of the "auto" rules (benchmarks compare variants).
    _policy = DEFAULT_POLICY

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=None,
        noise_multiplier=None,
        solver="dp-sgd",
        batch_sampling="poisson",
        batch_size=DEFAULT_POLICY.batch_size,
        epochs="auto",
        learning_rate="auto",
        lr_schedule="constant",
        alpha=DEFAULT_POLICY.alpha,
        l1_ratio=0.0,
        row_norm=None,
        max_grad_norm="auto",
        projection_radius=None,
        tail_fraction="auto",
        calibration_share="auto",
        centring_share="auto",
        fit_intercept=True,
        neighbouring="replace-one",
        classes=None,
        random_state=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.solver = solver
        self.batch_sampling = batch_sampling
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.lr_schedule = lr_schedule
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.row_norm = row_norm
        self.max_grad_norm = max_grad_norm
        self.projection_radius = projection_radius
        self.tail_fraction = tail_fraction
        self.calibration_share = calibration_share
        self.centring_share = centring_share
        self.fit_intercept = fit_intercept
        self.neighbouring = neighbouring
        self.classes = classes
        self.random_state = random_state
        self.verbose = verbose

    def _check_settings(self):
        if self.epsilon is None and self.noise_multiplier is None:
            raise ValueError(
                "Set a target epsilon, or epsilon=None with a noise_multiplier."
            )
        if self.neighbouring == "add-remove" and self.batch_sampling not in AMPLIFIED:
            raise ValueError(
                "neighbouring='add-remove' needs batch_sampling='poisson' or "
                "'balls-and-bins': with cyclic batches, adding a record shifts "
                "every later batch."
            )
        if self.neighbouring == "add-remove":
            check_add_remove_delta(self.neighbouring, self.delta)
            if self.epsilon is None:
                raise ValueError(
                    "neighbouring='add-remove' needs a target epsilon: the number "
                    "of rows is private, so the plan is set from a noisy count, "
                    "and only a target bounds the run whatever count is "
                    "released (a fixed noise_multiplier does not); set epsilon."
                )
        if self._calibration_share() > 0 and self.epsilon is None:
            raise ValueError(
                "calibration_share needs a target epsilon to take its share of; "
                "set epsilon, or calibration_share=0 with a fixed noise_multiplier."
            )
        if self._centring_share() > 0:
            if self.epsilon is None:
                raise ValueError(
                    "centring_share needs a target epsilon to take its share of; "
                    "set epsilon, or centring_share=0 with a fixed noise_multiplier."
                )
            if not self.fit_intercept:
                raise ValueError(
                    "centring_share needs fit_intercept=True (the intercept "
                    "absorbs the centre); set centring_share=0."
                )
        if self._calibration_share() + self._centring_share() >= 1:
            raise ValueError(
                f"calibration_share ({self._calibration_share():g}) and "
                f"centring_share ({self._centring_share():g}) leave nothing of "
                "epsilon for training: their sum must be below 1."
            )

    def _warn_default_row_bound(self):
        """Say that cyclic or shuffled batches without ``row_norm`` use the default.

        Those plans project every row onto the ball of the policy's
        ``cyclic_row_norm`` (the unit ball), which scales down every row of
        larger norm, such as rows encoded on public bounds. Raised from the
        parameters alone, never from the rows: whether a row exceeds the
        bound is private. The stack level points at the caller of ``fit``.
        """
        if self.row_norm is not None or self.batch_sampling in AMPLIFIED:
            return
        warnings.warn(
            f"batch_sampling={self.batch_sampling!r} without row_norm projects "
            f"every row onto the ball of radius {self._policy.cyclic_row_norm:g}: "
            "rows of larger norm are scaled down to it, which erases much of "
            "the signal of rows encoded on public bounds (SchemaEncoder's rows "
            "reach norm sqrt(n_columns)). Declare the public bound: "
            "row_norm=SchemaEncoder(schema).row_norm_bound() (a fitted "
            "encoder's row_norm_), as make_private_pipeline does; or use "
            "batch_sampling='poisson', which needs none. This warning does not "
            "look at the rows (that would read the private data).",
            UndeclaredBoundWarning,
            stacklevel=6,
        )

    def _row_norm(self):
        """The row bound the run uses: ``row_norm``, None (Poisson: no bound)."""
        if self.row_norm is None and self.batch_sampling not in AMPLIFIED:
            return self._policy.cyclic_row_norm
        return self.row_norm

    def _loss_row_norm(self):
        """Bound on the rows fed to the loss (intercept's column included), or None."""
        return loss_row_norm(self._row_norm(), self.fit_intercept)

    def _calibration_share(self):
        if self.calibration_share == "auto":
            return 0.0 if self.epsilon is None else self._policy.calibration_share
        return float(self.calibration_share)

    def _centring_share(self):
        if self.centring_share == "auto":
            usable = (
                self.epsilon is not None
                and self.fit_intercept
                and self.batch_sampling in AMPLIFIED
            )
            return self._policy.centring_share if usable else 0.0
        return float(self.centring_share)

    def _plan(self, n_samples, n_classes, delta=None):
        """The solver's public plan of a run on ``n_samples`` rows (:func:`make_plan`).

        ``delta`` None: the default for ``n_samples`` rows. The noise of the
        probability floor and of the centre is set by each one's share of
        the budget at ``delta``.
        """
        delta = resolve_delta(self.delta, n_samples) if delta is None else delta
        share = self._calibration_share()
        floor_noise = None
        if share > 0:
            floor_noise = _budget.floor_noise(
                share * self.epsilon, delta, self.neighbouring
            )
        share = self._centring_share()
        centring_noise = None
        if share > 0:
            centring_noise = _budget.centre_noise(
                share, self.epsilon, delta, self.neighbouring
            )
        return make_plan(
            n_samples=n_samples,
            n_classes=n_classes,
            row_norm=self._loss_row_norm(),
            batch_size=self.batch_size,
            epochs=self.epochs,
            sampling=self.batch_sampling,
            solver=self.solver,
            learning_rate=self.learning_rate,
            lr_schedule=self.lr_schedule,
            l2=self.alpha * (1.0 - self.l1_ratio),
            l1=self.alpha * self.l1_ratio,
            clip_norm=self.max_grad_norm,
            projection_radius=self.projection_radius,
            tail_fraction=self.tail_fraction,
            epsilon=self.epsilon,
            calibration_noise=floor_noise,
            centring_noise=centring_noise,
            neighbouring=self.neighbouring,
            policy=self._policy,
        )

    def privacy_plan(self, n_samples, n_classes=None):
        """Noise and privacy of a fit on ``n_samples`` rows, without any data.

        The spend depends only on the parameters and ``n`` (public), never on
        the data, so it can be known before fitting (and summed over a search,
        see :func:`skdp.model_selection.search_privacy`). Under add/remove the
        spend does not depend on ``n`` either, and the noise is that of a fit
        whose released count of rows is ``n_samples``.

        Parameters
        ----------
        n_samples : int
        n_classes : int or None, default=None
            ``None``: the number of declared ``classes``, or 2 without them.

        Returns
        -------
        skdp.accounting.PrivacyPlan
            ``(noise_multiplier, privacy_spent, delta)``.
        """
        self._validate_params()
        self._check_settings()
        if n_classes is None:
            n_classes = 2 if self.classes is None else np.unique(self.classes).size
        if n_samples < 1 or n_classes < 2:
            raise ValueError("n_samples must be >= 1 and n_classes >= 2.")
        plan = self._fit_plan(int(n_samples), int(n_classes))
        noise_multiplier = self._calibrate(plan)
        if plan.budget.epsilon is None:
            run_spent = self._run_spend(plan, plan.run.events(noise_multiplier))
        else:
            run_spent = self._calibration(plan)[1]
        return PrivacyPlan(
            noise_multiplier, plan.budget.spend(run_spent), plan.budget.delta
        )

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the model privately.

        Parameters
        ----------
        X : array-like or memmap of shape (n_samples, n_features)
            A memmap is read batch by batch, never copied whole. Or a 2-D
            ``dask.array.Array`` (or ``dask.dataframe.DataFrame`` of numeric
            columns), with declared ``classes``: the partitions are held on
            the workers, which return only sums (each step's clipped
            gradient sum, validation counts, the floor's sums); the model is
            the in-memory one up to the order of float sums, with the same
            events (docs/guide/dask.md).
        y : array-like of shape (n_samples,)
            With a Dask ``X``: a Dask array or series from the same
            partitions, or an array.
        sample_weight : array-like of shape (n_samples,) or None
            Weights in [0, 1] (they scale a record's gradient down, so the
            privacy guarantee is unchanged); larger weights are refused.

        Returns
        -------
        self : DPLogisticRegression

        Warns
        -----
        UndeclaredBoundWarning
            ``batch_sampling="cyclic"`` or ``"shuffle"`` without ``row_norm``:
            the rows are projected onto the unit ball. Raised from the
            parameters alone, whether or not a row is changed.
        PrivacyLeakWarning
            ``classes=None``: the classes are read from ``y``.
        UnscaledFeaturesWarning
            No ``row_norm`` and columns of ``X`` (an in-memory array) with
            at least 5% of their values beyond 10 in absolute value in its
            first 10,000 rows: the defaults assume features on a public
            scale.
        """
        if is_dask_collection(X):
            return self._fit_private(self._dask_validated(X, y, sample_weight))
        return self._fit_private(self._validated(X, y, sample_weight))

    def _dask_validated(self, X, y, sample_weight):
        """A Dask fit's inputs: held on the workers, checked from their sums."""
        self._check_settings()
        self._warn_default_row_bound()
        held, classes = held_fit_inputs(X, y, sample_weight, self.classes)
        self.n_features_in_ = held.shape[1]
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return _FitData(held, None, classes, None)

    def _validated(self, X, y, sample_weight):
        """The fit's inputs, checked against their public bounds."""
        self._check_settings()
        self._warn_default_row_bound()
        check_numeric_table(X, "DPLogisticRegression")
        X, y = validate_data(
            self, X, y, dtype=[np.float64, np.float32], copy=False, y_numeric=False
        )
        check_classification_targets(y)
        weights = check_sample_weight(sample_weight, X.shape[0])
        classes = resolve_classes(y, self.classes, "DPLogisticRegression")
        if self.row_norm is None:
            _warn_unscaled(X, getattr(self, "feature_names_in_", None))
        return _FitData(X, _encode_labels(y, classes), classes, weights)

    # The steps of the private fit (skdp._base.PrivateFitMixin).

    def _plan_fit(self, data, rng):
        return self._fit_plan(data.n_samples, data.classes.size, rng)

    def _fit_plan(self, n_samples, n_classes, rng=None):
        """The public plan of a fit on ``n_samples`` rows, and its budget.

        Under add/remove ``n`` is private: a count of the rows is released
        with ``rng`` first, and the plan reads it. ``rng`` None (as in
        :meth:`privacy_plan`): the released count is ``n_samples``.
        """
        budget = _budget.split_budget(
            self.epsilon,
            resolve_delta(self.delta, n_samples),
            self.neighbouring,
            self._policy.count_share,
        )
        if budget.count is not None and rng is not None:
            n_samples = _budget.released_size(n_samples, budget.count.std, rng)
        return _FitPlan(self._plan(n_samples, n_classes, budget.delta), budget)

    def _calibrate(self, plan):
        if plan.budget.epsilon is None:
            return float(self.noise_multiplier)
        start = time.perf_counter()
        noise_multiplier = self._calibration(plan)[0]
        logger.info(
            "noise multiplier %.4g, calibrated to the target in %.2f s",
            noise_multiplier,
            time.perf_counter() - start,
        )
        return noise_multiplier

    def _calibration(self, plan):
        """The run's noise multiplier at its target and the spend it plans."""
        budget = plan.budget
        return _budget.calibrate_run(
            plan.run, budget.epsilon, budget.run_delta, self.neighbouring
        )

    def _schedule(self, plan, noise_multiplier, data):
        n_params = data.n_params(self.fit_intercept)
        return schedule_run(plan.run, noise_multiplier, n_params, self._policy)

    def _run(self, schedule, noise_multiplier, data, rng):
        if isinstance(data.X, HeldRows):
            return run_logistic_sgd_dask(
                data.X,
                schedule.plan,
                noise_multiplier,
                steps=schedule.steps,
                row_norm=self._loss_row_norm(),
                fit_intercept=self.fit_intercept,
                rng=rng,
                verbose=self.verbose,
                policy=self._policy,
            )
        return run_logistic_sgd(
            data.X,
            data.codes,
            schedule.plan,
            noise_multiplier,
            steps=schedule.steps,
            row_norm=self._loss_row_norm(),
            fit_intercept=self.fit_intercept,
            rng=rng,
            sample_weight=data.sample_weight,
            verbose=self.verbose,
            policy=self._policy,
        )

    def _account(self, plan, result):
        return plan.budget.spend(self._run_spend(plan, result.events))

    def _run_spend(self, plan, events):
        """The spend of the run's ``events`` alone (the count's not included)."""
        return account(
            events,
            plan.budget.run_delta,
            neighbouring=self.neighbouring,
            accountant="pld",
        )

    def _set_fitted(self, data, plan, noise_multiplier, result, spent, rng):
        W = result.weights
        if self.fit_intercept:
            self.coef_, self.intercept_ = W[:-1].T.copy(), W[-1].copy()
        else:
            self.coef_, self.intercept_ = W.T.copy(), np.zeros(W.shape[1])
        self.classes_ = data.classes
        self.n_iter_ = plan.run.n_steps
        self.noise_multiplier_ = noise_multiplier
        self.max_grad_norm_ = result.steps.clip_norm
        self.learning_rate_ = float(result.steps.learning_rates[0])
        self.delta_ = plan.budget.delta
        self.privacy_spent_ = spent

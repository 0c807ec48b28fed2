"""Private first-order solvers for logistic losses: DP-SGD and DP-SGLD.

Pure functions. A run is described by an :class:`SGDPlan` built from public
quantities only (n, batch sizes, step sizes, bounds); the plan gives the privacy
events of the run for any noise multiplier, so the noise can be calibrated
before any data is touched. :func:`run_logistic_sgd` then runs the plan on the
data and returns the last iterate and the events it caused.
"""

import logging
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, softmax

from ..accounting import (
    NoisyIterationEvent,
    PoissonGaussianEvent,
    gradient_step_lipschitz,
    logistic_constants,
)
from ._rows import (
    feature_norm,
    row_norms,
    row_projection,
    row_scores,
    tame_rows,
)
from ._tuning import log_linear

__all__ = [
    "SGDPlan",
    "auto_clip_fraction",
    "auto_epochs",
    "auto_step_boost",
    "calibrate_probabilities",
    "fit_temperature",
    "make_plan",
    "poisson_batch",
    "public_shrinkage",
    "run_logistic_sgd",
    "temperature_bound",
    "tail_noise_variance",
    "temperature_sensitivity",
]

logger = logging.getLogger("skdp")

# "auto" settings, chosen on benchmarks/bench_logistic.py and
# benchmarks/sweep_logistic.py (docs/benchmarks.md). Cyclic and shuffled
# batches keep the last-iterate bound: step 1 / (beta + l2) (non-expansive),
# clip norm at the gradient bound (clipping never active), last iterate.
# Poisson batches are accounted by the subsampled Gaussian, which holds
# whatever the step, clipping or averaging, so "auto" clips at 5% of the bound
# (nearly every per-example gradient is scaled to the clip norm: normalised
# DP-SGD), takes steps 64 times larger to match, and averages the last half.
_AUTO_LR_FACTOR = {"cyclic": 1.0, "shuffle": 1.0, "poisson": 64.0}
_AUTO_CLIP_FACTOR = {"cyclic": 1.0, "shuffle": 1.0, "poisson": 0.05}
_AUTO_TAIL_FRACTION = {"cyclic": 0.0, "shuffle": 0.0, "poisson": 0.5}
# Epochs: every epoch of a cyclic or shuffled run touches the record once more
# under the last-iterate bound, whose contraction is weak at small l2, so few
# epochs win there (Adult, eps 2: 10 epochs 0.839, 20 0.833, 30 0.818 with a
# secret order). Poisson runs take 30 epochs up to epsilon 2 and, with a larger
# budget, 15 * epsilon up to 120 (more steps at the same noise: digits 0.917 ->
# 0.943 at eps 8; no change on Adult, where 30 epochs already converge).
# Under add/remove (half the sensitivity, so less noise at the same epsilon)
# the budget buys more steps sooner: 30 * epsilon. benchmarks/
# explore_small_eps.py, add/remove, delta n^-1.1, 5 seeds, 30 epochs -> 60 at
# eps 2 / 60 -> 120 at eps 4: digits 0.918 -> 0.934 / 0.940 -> 0.948, breast
# cancer 0.920 -> 0.936 / 0.936 -> 0.936, Adult with bins 0.855 -> 0.855.
# Under replace-one, 60 epochs at eps 1 lost on digits (0.785 -> 0.752).
# Poisson step at a small budget: the 64x step is for a run whose noise is
# small against the clipped gradients. When n * epsilon is small the iterate
# mostly random-walks on the noise, so "auto" caps the total distance the
# steps may cover, (step / (1 / (beta + l2))) * n_steps, at
# _AUTO_TRAVEL[relation] * n * epsilon (replace-one has twice the
# sensitivity, hence less travel: a quarter, measured below), and shrinks the
# step below 64x when that binds. With ceil(n / b) * epochs steps, n cancels:
# the factor is min(64, travel * epsilon * b / epochs) (up to the rounding of
# n / b), so at the default batch 256 and 30 epochs it binds below epsilon
# 0.23 (add/remove) or 0.94 (replace-one) on every data set. Measured with
# benchmarks/explore_small_eps.py, 5 seeds, against the fixed 64x step:
# add/remove (delta n^-1.1) digits 0.379 -> 0.453 at eps 0.1, Adult with bins
# 0.845 -> 0.847; replace-one digits 0.132 -> 0.155 at 0.1, breast cancer
# 0.663 -> 0.681 at 0.1, Adult with bins 0.822 -> 0.831 at 0.1; every other
# cell unchanged. Public inputs only: n, epsilon, the relation, the plan.
# Replace-one travel 16 -> 8 (fifth session; binds below eps 0.94 instead of
# 0.47), benchmarks/bench_logistic.py data, default delta, test accuracy
# (log-loss) at eps 0.1 / 0.5, 16 -> 8: breast cancer (50 seeds) 0.726 ->
# 0.746 (1.17 -> 0.78) / 0.879 -> 0.892 (0.44 -> 0.31); digits (30 seeds)
# 0.199 -> 0.205 (4.24 -> 2.77) / 0.577 -> 0.615 (1.58 -> 1.20); Adult with
# bins (10 seeds) 0.8338 -> 0.8384 (0.54 -> 0.47) / 0.8534 -> 0.8535; Adult
# scaled 0.8270 -> 0.8301 (0.53 -> 0.58) / 0.8376 -> 0.8373. Travel 4 lost
# to 8 on breast cancer and digits (0.721 / 0.878 and 0.201 / 0.605) and, as
# it binds at eps 1, on digits there (0.801 -> 0.797). Add/remove 32 -> 16 at
# eps 0.1 (delta n^-1.1): breast cancer 0.880 -> 0.855, digits 0.459 ->
# 0.461, Adult with bins 0.8472 -> 0.8483: kept at 32.
_AUTO_TRAVEL = {"add-remove": 32.0, "replace-one": 8.0}
# Poisson clip at a large budget: 5% of the bound clips nearly every gradient,
# which keeps the signal as large as it can be against the noise but biases
# the fit towards the rows it classifies badly. Once the noise is small
# against the clipped step, "auto" clips less: the relative noise
# rho = z sqrt(p) / b (norm of the noise on an averaged step over the clip
# norm, p parameters, expected batch b; public, from the calibrated z) sets
# the fraction, 0.05 at rho >= 0.2 rising log-linearly to 0.25 at rho <= 0.05,
# and the step shrinks by the same factor (step times clip norm unchanged).
# benchmarks/bench_logistic.py, add/remove, delta n^-1.1, 3-5 seeds, clip
# 0.05 / 0.25 of the bound (step 64x / 12.8x) at fixed settings: Adult with
# bins (rho 0.04-0.09 from eps 1) 0.855 / 0.858 at eps 1, 0.855 / 0.859 at 4;
# breast cancer (rho 0.12-0.3 from eps 1) 0.934 / 0.929 at 1, 0.943 / 0.936
# at 8; digits (rho >= 0.3) within 0.003 from eps 1.
_AUTO_CLIP_RANGE = (0.05, 0.25)
_AUTO_CLIP_RHO = (0.2, 0.05)
# Poisson step at a small noise per coordinate: with z / b (noise std on one
# coordinate of an averaged step over the clip norm; rho / sqrt(p), public,
# from the calibrated z) small, the run is limited by optimisation rather
# than noise, and "auto" (with the "auto" clip) multiplies the step by 1 at
# z / b >= 0.017 rising log-linearly to 2 at z / b <= 0.011, on top of the
# clip rule above (the clip is unchanged). benchmarks/bench_logistic.py,
# add/remove, delta n^-1.1, fixed 2x step against no boost, paired by seed
# (20 seeds digits, 50 breast cancer, 5 Adult): digits z/b 0.0108 (eps 8)
# 0.9500 -> 0.9558 (+0.0058 +- 0.0009), 0.0067 (eps 16) 0.9501 -> 0.9593,
# 0.0045 (eps 32) 0.9506 -> 0.9611, replace-one 0.0143 (eps 16) 0.9493 ->
# 0.9523; no gain at z/b 0.0185 (digits eps 4: 0.9477 -> 0.9474) or 0.0179
# (breast cancer eps 8: 0.9411 -> 0.9408), losses above: 0.0247 (digits
# replace-one eps 8) 0.9414 -> 0.9382, 0.030-0.047 (breast cancer eps 1-4)
# -0.001 to -0.003; Adult with bins (z/b 0.003-0.015 from eps 0.5) within
# 0.0002. The thresholds are fitted on digits alone (the one data set with
# cells on both sides); breast cancer never reaches 0.017 at eps <= 8.
# Smaller steps, or more epochs at the same travel, did not close digits'
# gap to tuned DP-SGD at eps 0.5-2 (docs/logistic.md).
_AUTO_STEP_NOISE = (0.017, 0.011)
_AUTO_STEP_BOOST_MAX = 2.0
# No row bound (``row_norm=None``, the estimator's default): per-example
# clipping alone bounds a Poisson step's sensitivity, so nothing depends on the
# scale of the rows. "auto" clips at 1 and steps by 2 / clip norm, capped at a
# small budget like the bounded step (travel ``_UNBOUNDED_TRAVEL[relation] * n
# * epsilon`` in units of 1/32 of that step); the noise-dependent clip and step
# rules below are for bounded rows only. Chosen on the panel of public tables
# (docs/benchmarks.md, "Defaults chosen on the panel").
_UNBOUNDED_CLIP = 1.0
_UNBOUNDED_STEP = 2.0
_UNBOUNDED_TRAVEL = {"replace-one": 3.0, "add-remove": 8.0}
# Rows are fed to the loss unprojected; only astronomically large ones are put
# on a ball of this radius first (see :func:`tame_rows`).
UNBOUNDED_ROW_NORM = 1e30
_AUTO_EPOCHS = {"cyclic": 10, "shuffle": 10, "poisson": 30}
_AUTO_EPOCHS_PER_EPSILON = {"replace-one": 15, "add-remove": 30}
_AUTO_EPOCHS_MAX = 120
# Probability floor (``calibration_noise``, :func:`calibrate_probabilities`):
# the logits ``s`` move along the path ``m + a (s - m)`` from the private
# prior's ``m`` (``a = 0``) to the model's (``a = 1``). The derivative of the
# training log-loss in ``a`` on this public grid is released once with
# Gaussian noise; offsets ``s - m`` are clipped to this bound there.
TEMPERATURE_GRID = np.concatenate([[0.0], 2.0 ** (np.arange(-12, 4) / 3.0)])
TEMPERATURE_LOGIT_BOUND = 10.0
# Share of the release's inverse variance spent on the class counts (the rest
# on the derivative), and the strength of the public shrinkage that sets the
# starting point on the path (docs/benchmarks.md, "The probability floor").
_PRIOR_WEIGHT = 0.5
_SHRINK_STRENGTH = 0.5
# Another point of the path is taken only if its integrated noisy loss beats
# the starting point's by this many standard deviations of the noise.
_TEMPERATURE_MARGIN = 2.0


@dataclass(frozen=True)
class SGDPlan:
    """Everything public about a private SGD run.

    Attributes
    ----------
    n_samples : int
    n_classes : int
    batch_sizes : tuple of int
        Cyclic partition of the (possibly permuted) rows; for Poisson sampling,
        the expected batch size repeated once per step of an epoch.
    epochs : int
    sampling : {"cyclic", "shuffle", "poisson"}
    solver : {"dp-sgd", "dp-sgld"}
    learning_rates : ndarray of shape (n_steps,)
    l2 : float
        Penalty ``l2 / 2 ||w||^2`` on all coefficients (intercept included).
    l1 : float
        Penalty ``l1 ||w||_1`` applied by its prox (post-processing, free).
    clip_norm : float
        Per-example gradient clip norm ``C``.
    gradient_bound : float
        Enforced bound ``G`` on per-example gradient norms (rows clipped).
    smoothness : float
    projection_radius : float or None
    tail_fraction : float
        Release the average of the iterates of the last ``tail_fraction`` of
        the steps (0: the last iterate only). Averaging reads every iterate, so
        it forfeits the last-iterate bound: only composition (cyclic) or the
        subsampled Gaussian (Poisson) account such a run.
    calibration_noise : float or None
        Noise std of the one release that fits a temperature to the trained
        model (:func:`fit_temperature`) divided by the bound on one row's
        contribution; None: no temperature. Its sensitivity in those units
        (2 under replace-one, 1 under add/remove) is the accountant's to
        apply: the release is a rate-1 Poisson event (:meth:`events`).
    """

    n_samples: int
    n_classes: int
    batch_sizes: tuple
    epochs: int
    sampling: str
    solver: str
    learning_rates: np.ndarray
    l2: float
    l1: float
    clip_norm: float
    gradient_bound: float
    smoothness: float
    projection_radius: float | None
    tail_fraction: float = 0.0
    calibration_noise: float | None = None

    def cache_key(self):
        """A hashable identity of the plan (for caching its calibration)."""
        return (
            self.n_samples,
            self.n_classes,
            self.batch_sizes,
            self.epochs,
            self.sampling,
            self.solver,
            self.learning_rates.tobytes(),
            self.l2,
            self.l1,
            self.clip_norm,
            self.gradient_bound,
            self.smoothness,
            self.projection_radius,
            self.tail_fraction,
            self.calibration_noise,
        )

    @property
    def n_steps(self):
        """Total number of noisy steps."""
        return len(self.batch_sizes) * self.epochs

    @property
    def clipping_inactive(self):
        """Whether clipping can never change a gradient (C >= G)."""
        return self.clip_norm >= self.gradient_bound

    def noise_std(self, noise_multiplier):
        """Per-step noise std on the displacement, in parameter units."""
        if self.solver == "dp-sgld":
            # Langevin: sqrt(2 eta) sigma with sigma = z * C.
            return (
                np.sqrt(2.0 * self.learning_rates) * noise_multiplier * self.clip_norm
            )
        b = np.tile(np.asarray(self.batch_sizes, dtype=float), self.epochs)
        return self.learning_rates * noise_multiplier * self.clip_norm / b

    def events(self, noise_multiplier):
        """Privacy events of the run at ``noise_multiplier``.

        DP-SGD: noise of std ``z C`` on the sum of clipped gradients. DP-SGLD:
        noise of std ``sqrt(2 eta_t) z C`` on the iterate. The sensitivity of a
        step that sees the record is ``2 eta_t min(C, G) / b_t`` (replace-one).
        A temperature fit adds one Gaussian release over all rows, written as
        a Poisson event of rate 1 (every row in; noise in units of one row's
        bound): the same Gaussian under either relation (sensitivity 2 bounds
        under replace-one, 1 under add/remove), and a form the tight
        accountants can chain under replace-one.
        """
        calibration = (
            []
            if self.calibration_noise is None
            else [PoissonGaussianEvent(1.0, self.calibration_noise)]
        )
        return self._training_events(noise_multiplier) + calibration

    def _training_events(self, noise_multiplier):
        """Events of the noisy steps (see :meth:`events`)."""
        if self.sampling == "poisson":
            q = self.batch_sizes[0] / self.n_samples
            if self.solver == "dp-sgld":
                # Noise on the averaged gradient: std sqrt(2/eta) z C / ... per
                # sum: multiply by the expected batch size.
                ratio = np.sqrt(2.0 / self.learning_rates) * self.batch_sizes[0]
                z_sum = noise_multiplier * ratio.min()
            else:
                z_sum = noise_multiplier
            z_sum *= self.clip_norm / min(self.clip_norm, self.gradient_bound)
            return [PoissonGaussianEvent(q, z_sum, count=self.n_steps)]
        sens_norm = min(self.clip_norm, self.gradient_bound)
        b = np.tile(np.asarray(self.batch_sizes, dtype=float), self.epochs)
        lipschitz = None
        if self.clipping_inactive and self.tail_fraction == 0:
            lipschitz = gradient_step_lipschitz(
                self.learning_rates, self.smoothness, self.l2
            )
        batch = np.tile(np.arange(len(self.batch_sizes)), self.epochs)
        sizes = np.asarray(self.batch_sizes, dtype=float)
        return [
            NoisyIterationEvent(
                noise_multiplier=noise_multiplier,
                noise_scale=self.noise_std(1.0) / sens_norm,
                sensitivity=2.0 * self.learning_rates / b,
                batch=batch,
                lipschitz=lipschitz,
                batch_weights=sizes / sizes.sum()
                if self.sampling == "shuffle"
                else None,
            )
        ]


def auto_epochs(sampling, epsilon=None, neighbouring="replace-one"):
    """Number of epochs of ``epochs="auto"`` (a function of public inputs only).

    Parameters
    ----------
    sampling : {"cyclic", "shuffle", "poisson"}
    epsilon : float or None
        The target epsilon (None when the noise multiplier is fixed instead).
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
        Poisson: ``15 * epsilon`` epochs under replace-one, ``30 * epsilon``
        under add/remove (at least 30, at most 120).

    Returns
    -------
    int
    """
    epochs = _AUTO_EPOCHS[sampling]
    if sampling == "poisson" and epsilon is not None:
        more = int(round(_AUTO_EPOCHS_PER_EPSILON[neighbouring] * epsilon))
        epochs = max(epochs, min(more, _AUTO_EPOCHS_MAX))
    return epochs


def auto_clip_fraction(relative_noise):
    """Poisson ``clip_norm="auto"`` as a fraction of the gradient bound.

    Parameters
    ----------
    relative_noise : float or None
        ``z sqrt(p) / b``: the norm of the noise added to one averaged step,
        over the clip norm (``z`` the calibrated noise multiplier, ``p`` the
        number of parameters, ``b`` the expected batch size). None (unknown):
        the small-budget fraction.

    Returns
    -------
    float
        0.05 when the relative noise is at least 0.2, 0.25 when it is at most
        0.05, log-linear in between. A function of public quantities only.
    """
    return log_linear(relative_noise, *_AUTO_CLIP_RHO, *_AUTO_CLIP_RANGE)


def auto_step_boost(coordinate_noise):
    """Poisson ``learning_rate="auto"`` multiplier at a small noise.

    Parameters
    ----------
    coordinate_noise : float or None
        ``z / b``: the std of the noise on one coordinate of an averaged step,
        over the clip norm (``z`` the calibrated noise multiplier, ``b`` the
        expected batch size). None (unknown): no boost.

    Returns
    -------
    float
        1 (no change) when ``z / b`` is at least 0.017, 2 when it is at most
        0.011, log-linear in between. A function of public quantities only.
    """
    return log_linear(coordinate_noise, *_AUTO_STEP_NOISE, 1.0, _AUTO_STEP_BOOST_MAX)


def make_plan(
    *,
    n_samples,
    n_classes,
    row_norm,
    batch_size,
    epochs,
    sampling,
    solver,
    learning_rate,
    lr_schedule,
    l2,
    l1,
    clip_norm,
    projection_radius,
    tail_fraction="auto",
    epsilon=None,
    calibration_noise=None,
    neighbouring="replace-one",
    noise_multiplier=None,
    n_params=None,
):
    """Build the :class:`SGDPlan` of a run from public quantities.

    ``row_norm`` bounds the rows fed to the loss (intercept column included).
    ``epochs="auto"`` is :func:`auto_epochs` of the sampler, the target
    ``epsilon`` and the relation. With cyclic or shuffled batches,
    ``learning_rate="auto"`` is ``1 / (smoothness + l2)``, inside the limit
    ``2 / (smoothness + l2)`` that keeps each step non-expansive,
    ``clip_norm="auto"`` is the gradient bound (clipping never active) and
    ``tail_fraction="auto"`` is 0 (last iterate): the last-iterate bound
    applies. With Poisson batches the "auto" values are 64 times that step, 5%
    of the bound and the last half of the steps; with a target ``epsilon``
    (DP-SGD) the step is lowered so that step times number of steps stays
    within ``_AUTO_TRAVEL[neighbouring] * n_samples * epsilon`` times
    ``1 / (smoothness + l2)`` (small budgets only). Given the calibrated
    ``noise_multiplier`` and the number of parameters ``n_params``, a Poisson
    DP-SGD plan's "auto" clip is :func:`auto_clip_fraction` of the bound and
    its "auto" step shrinks by the same factor as the clip grows; neither
    changes the privacy events, so the noise calibrated without them stands.

    ``row_norm=None`` plans a run on rows of unknown norm (the estimator's
    default, and what ``skdp account`` describes without ``--row-norm``): no
    gradient bound, so the clip norm is the sensitivity and no last-iterate
    bound applies. Poisson "auto" values are then a clip norm of
    ``_UNBOUNDED_CLIP`` and a step of ``_UNBOUNDED_STEP / clip`` (lowered at
    a small budget, :func:`_unbounded_step`); cyclic and shuffled batches
    need numbers.
    """
    unbounded = row_norm is None
    if unbounded:
        if sampling != "poisson" and "auto" in (learning_rate, clip_norm):
            raise ValueError(
                f"batch_sampling={sampling!r} without a row_norm needs a "
                "learning_rate and a max_grad_norm: its 'auto' step and clip are "
                "set from the row bound. Declare row_norm, give both, or use "
                "batch_sampling='poisson'."
            )
        gradient_bound = smoothness = np.inf
    else:
        gradient_bound, smoothness = logistic_constants(row_norm, n_classes)
    if epochs == "auto":
        epochs = auto_epochs(sampling, epsilon, neighbouring)
    batch_size = int(min(batch_size, n_samples))
    n_batches = -(-n_samples // batch_size)
    if sampling == "poisson":
        sizes = (batch_size,) * n_batches
    else:
        sizes = (batch_size,) * (n_batches - 1) + (
            n_samples - batch_size * (n_batches - 1),
        )
    clip_fraction = _AUTO_CLIP_FACTOR[sampling]
    boost = 1.0
    noise_known = noise_multiplier is not None and n_params is not None
    if sampling == "poisson" and solver == "dp-sgd" and noise_known and not unbounded:
        rho = noise_multiplier * np.sqrt(n_params) / batch_size
        clip_fraction = auto_clip_fraction(rho)
        boost = auto_step_boost(noise_multiplier / batch_size)
    if learning_rate == "auto" and unbounded:
        eta0 = _unbounded_step(
            n_samples, n_batches, epochs, epsilon, neighbouring, solver, clip_norm
        )
    elif learning_rate == "auto":
        factor = _AUTO_LR_FACTOR[sampling]
        if sampling == "poisson" and solver == "dp-sgd" and epsilon is not None:
            travel = _AUTO_TRAVEL[neighbouring] * n_samples * epsilon
            factor = min(factor, travel / (n_batches * epochs))
        if clip_norm == "auto":
            factor *= boost * _AUTO_CLIP_FACTOR[sampling] / clip_fraction
        eta0 = factor / (smoothness + l2)
    else:
        eta0 = float(learning_rate)
    steps = np.arange(n_batches * epochs)
    if lr_schedule == "constant":
        rates = np.full(steps.size, eta0)
    else:  # "decreasing": eta0 / (1 + epoch)
        rates = eta0 / (1.0 + steps // n_batches)
    rates.setflags(write=False)
    if clip_norm == "auto" and unbounded:
        clip = _UNBOUNDED_CLIP
    elif clip_norm == "auto":
        clip = clip_fraction * gradient_bound
    else:
        clip = float(clip_norm)
    if tail_fraction == "auto":
        tail_fraction = _AUTO_TAIL_FRACTION[sampling]
    return SGDPlan(
        n_samples=int(n_samples),
        n_classes=int(n_classes),
        batch_sizes=sizes,
        epochs=int(epochs),
        sampling=sampling,
        solver=solver,
        learning_rates=rates,
        l2=float(l2),
        l1=float(l1),
        clip_norm=clip,
        gradient_bound=gradient_bound,
        smoothness=smoothness,
        projection_radius=projection_radius,
        tail_fraction=float(tail_fraction),
        calibration_noise=None
        if calibration_noise is None
        else float(calibration_noise),
    )


def _unbounded_step(n_samples, n_batches, epochs, epsilon, neighbouring, solver, clip):
    """The "auto" Poisson step without a row bound: ``_UNBOUNDED_STEP / clip``.

    Lowered with a target epsilon (DP-SGD) so that the steps cover at most
    ``_UNBOUNDED_TRAVEL[neighbouring] * n * epsilon`` units of 1/32 of the
    full step, as the bounded "auto" step is (``_AUTO_TRAVEL``, whose full
    step is 64 units). Public inputs only.
    """
    clip = _UNBOUNDED_CLIP if clip == "auto" else float(clip)
    factor = 1.0
    if solver == "dp-sgd" and epsilon is not None:
        travel = _UNBOUNDED_TRAVEL[neighbouring] * n_samples * epsilon
        factor = min(1.0, travel / (n_batches * epochs) / _AUTO_LR_FACTOR["poisson"])
    return _UNBOUNDED_STEP * factor / clip


def _clipped_gradient_sum(W, Xb, Yb, row_scale, row_norm, problem):
    """Sum over the batch of clipped per-example logistic gradients.

    Rows are first projected onto a ball (the per-record map
    ``x -> row_scale * x``, done inside the products rather than on a copy),
    then the intercept column of ones is appended implicitly.
    Per-example gradients are rank one, ``x_i r_i^T`` with residual
    ``r_i = p_i - y_i``, so their norms are ``||x_i|| ||r_i||`` and the clipped
    sum costs two matrix products over the batch: no per-example tensor.

    Parameters
    ----------
    W : ndarray of shape (n_features + fit_intercept, n_outputs)
    Xb : ndarray of shape (b, n_features)
    Yb : ndarray of shape (b, n_outputs)
    row_scale : ndarray of shape (b,)
        ``min(1, feature_norm / ||x_i||)`` (see :func:`row_projection`).
    row_norm : ndarray of shape (b,)
        Norm of each projected row, intercept included.
    problem : dict
        ``binary``, ``fit_intercept``, ``clip_norm`` and optional ``weights``.
    """
    # This runs once per step on small arrays, where each numpy call costs
    # about as much as its arithmetic: the steps are those of :func:`row_scores`
    # and of the plain formulas (``expit(scores) - Yb``, ``min(1, C /
    # max(norm, 1e-300))``), done in place on one residual and one norm array
    # in the same order, so the results are bit-identical to the plain forms.
    fit_intercept = problem["fit_intercept"]
    scale = row_scale[:, None]
    residual = Xb @ (W[:-1] if fit_intercept else W)
    residual *= scale
    if fit_intercept:
        residual += W[-1]
    if problem["binary"]:
        expit(residual, out=residual)
    else:
        residual = softmax(residual, axis=1)
    residual -= Yb
    if problem["weights"] is not None:
        residual *= problem["weights"][:, None]
    if residual.shape[1] == 1:
        norms = np.abs(residual[:, 0])
    else:
        norms = np.sqrt(np.einsum("ij,ij->i", residual, residual))
    norms *= row_norm
    np.maximum(norms, 1e-300, out=norms)
    factor = np.divide(problem["clip_norm"], norms, out=norms)
    np.minimum(factor, 1.0, out=factor)
    residual *= factor[:, None]
    grad = np.empty_like(W)
    if fit_intercept:
        np.matmul(Xb.T, residual * scale, out=grad[:-1])
        np.add.reduce(residual, axis=0, out=grad[-1])
    else:
        np.matmul(Xb.T, residual * scale, out=grad)
    return grad


def _prox_and_project(W, plan, eta):
    """Elastic-net prox and ball projection: 1-Lipschitz, data-free."""
    if plan.l1 > 0:
        W = np.sign(W) * np.maximum(np.abs(W) - eta * plan.l1, 0.0)
    if plan.projection_radius is not None:
        norm = np.linalg.norm(W)
        if norm > plan.projection_radius:
            W = W * (plan.projection_radius / norm)
    return W


def _secret_order(plan, rng):
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


def _loss_change_map(grid):
    """Matrix taking derivatives on ``grid`` to loss changes from temperature 1.

    Row j integrates the derivative from 1 to ``grid[j]`` by trapezoids: a
    linear map of the released vector, so the noise of each change has a
    known standard deviation.
    """
    one = int(np.flatnonzero(grid == 1.0)[0])
    weights = np.zeros((grid.size, grid.size))
    for j in range(grid.size):
        lo, hi, sign = (one, j, 1.0) if j >= one else (j, one, -1.0)
        for m in range(lo, hi):
            step = 0.5 * (grid[m + 1] - grid[m]) * sign
            weights[j, m] += step
            weights[j, m + 1] += step
    return weights


_LOSS_CHANGE = _loss_change_map(TEMPERATURE_GRID)


def temperature_sensitivity(neighbouring):
    """L2 sensitivity of the temperature release, in units of one row's bound.

    Replacing a row swaps one bounded vector for another (2 bounds); adding
    or removing one changes the sum by one vector (1 bound).
    """
    return 2.0 if neighbouring == "replace-one" else 1.0


def release_log_prior(codes, n_classes, std, rng):
    """Log of a private class prior: Gaussian class counts, shrunk to uniform.

    The counts get Gaussian noise of std ``std`` (one row adds a one-hot
    vector, of norm 1), are floored at 1 and normalised; the result is then
    moved towards the uniform prior by the share of the noisy counts' spread
    that the noise (known) is expected to make up, a positive-part
    James-Stein factor ``max(0, 1 - K std^2 / sum_k (c_k - c / K)^2)``: with
    little budget a noisy count cannot pick a wrong majority class.
    Post-processing of the one release.

    Parameters
    ----------
    codes : ndarray of int
    n_classes : int
    std : float
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_classes,)
    """
    counts = np.bincount(codes, minlength=n_classes).astype(float)
    noisy = counts + rng.normal(0.0, std, size=n_classes)
    prior = np.maximum(noisy, 1.0)
    prior /= prior.sum()
    spread = float(np.sum((noisy - noisy.sum() / n_classes) ** 2))
    weight = max(0.0, 1.0 - n_classes * std**2 / max(spread, 1e-300))
    return np.log(weight * prior + (1.0 - weight) / n_classes)


def anchor_logits(log_prior):
    """Logits of the constant prior predictor in the model's output layout."""
    if log_prior.size == 2:
        return np.array([log_prior[1] - log_prior[0]])
    return log_prior - log_prior.mean()


def tail_noise_variance(plan, noise_multiplier):
    """Per-coordinate variance of the injected noise left in the released model.

    Each step adds Gaussian noise of std ``plan.noise_std(z)[t]`` to every
    coordinate; only the penalty is taken to contract it (``1 - eta_t l2`` a
    step, the loss as if flat), and the model is the average of the last
    ``tail_fraction`` of the iterates (the last one at 0). Exact for a flat
    loss, larger than the truth where the loss curves. Public: a function of
    the plan and the noise multiplier only.
    """
    std = np.asarray(plan.noise_std(noise_multiplier), dtype=float)
    rates = np.asarray(plan.learning_rates, dtype=float)
    T = std.size
    tail = max(1, int(round(plan.tail_fraction * T)))
    contraction = 1.0 - rates * plan.l2
    weight = np.empty(T)  # weight[i]: how much of step i's noise the output holds
    carry = 0.0
    for i in range(T - 1, -1, -1):
        carry = float(i >= T - tail) + (
            contraction[i + 1] * carry if i + 1 < T else 0.0
        )
        weight[i] = carry / tail
    return float(np.sum((std * weight) ** 2))


def public_shrinkage(W, energy, fit_intercept, strength=_SHRINK_STRENGTH):
    """The share of the coefficients that is not expected to be noise.

    A positive-part James-Stein factor ``kappa = max(0, 1 - strength * E /
    ||coef||^2)``, ``E`` the expected energy of the injected noise in the
    coefficients (:func:`tail_noise_variance` times their number). Public:
    a function of the released model, the plan and the noise multiplier.

    Returns
    -------
    float in [0, 1]
    """
    coef = W[:-1] if fit_intercept else W
    norm2 = float(np.sum(coef**2))
    return max(0.0, 1.0 - strength * energy * coef.size / max(norm2, 1e-300))


def _anchored(W, anchor, a, fit_intercept):
    """Weights of the logits ``a s + (1 - a) m`` (``m`` the anchor)."""
    W = W * a
    if fit_intercept:
        W[-1] += (1.0 - a) * anchor
    return W


def temperature_bound(n_classes):
    """Bound on the L2 norm of one row's vector of loss derivatives on the grid.

    With the offsets ``d = s - m`` of the model's logits from the anchor
    clipped to ``[-S, S]``, the derivative in ``a`` of one row's log-loss at
    the logits ``m + a d`` is ``(p - y) d`` (binary: at most ``S``) or
    ``sum_k (p_k - y_k) d_k`` (softmax: at most ``||p - y||_1 S <= 2 S``) at
    every grid point.
    """
    per_point = TEMPERATURE_LOGIT_BOUND * (1.0 if n_classes == 2 else 2.0)
    return per_point * np.sqrt(TEMPERATURE_GRID.size)


def _temperature_derivatives(X, codes, W, anchor, row_norm, fit_intercept, chunk=65536):
    """Sum over rows of each row's derivative vector (exact; read in chunks)."""
    binary = W.shape[1] == 1
    grid = TEMPERATURE_GRID
    total = np.zeros(grid.size)
    if row_norm is None:
        row_norm = UNBOUNDED_ROW_NORM
    radius = feature_norm(row_norm, fit_intercept)
    for lo in range(0, X.shape[0], chunk):
        Xb = np.asarray(X[lo : lo + chunk], dtype=float)
        raw = np.sqrt(np.einsum("ij,ij->i", Xb, Xb))
        Xb, raw = tame_rows(Xb, raw, radius)
        scale, _ = row_projection(raw, row_norm, fit_intercept)
        offsets = row_scores(W, Xb, scale, fit_intercept) - anchor
        if not binary:
            offsets -= offsets.mean(axis=1, keepdims=True)
        offsets = np.clip(offsets, -TEMPERATURE_LOGIT_BOUND, TEMPERATURE_LOGIT_BOUND)
        labels = codes[lo : lo + chunk]
        if binary:
            d = offsets[:, 0]
            p = expit(anchor[0] + np.multiply.outer(d, grid))  # (b, grid)
            total += ((p - labels[:, None]) * d[:, None]).sum(axis=0)
        else:
            own = offsets[np.arange(labels.size), labels]
            for j, a in enumerate(grid):
                p = softmax(anchor + a * offsets, axis=1)
                total[j] += float(np.sum(np.einsum("ik,ik->i", p, offsets) - own))
    return total


def fit_temperature(
    X, codes, W, anchor, std, *, row_norm, fit_intercept, rng, start=1.0
):
    """A private point ``a`` on the path from the prior to the model.

    Post-hoc temperature scaling (Guo et al. 2017, "On calibration of modern
    neural networks") made private and anchored at the prior: the derivative
    in ``a`` of the training log-loss of the logits ``m + a (s - m)`` (``m``
    the anchor; ``a = 0`` the prior, ``a = 1`` the model) is summed over the
    rows at every point of the public ``TEMPERATURE_GRID`` and released once
    with Gaussian noise of std ``std``. The released derivatives are
    integrated along the grid (trapezoids) into the change of loss from the
    grid point nearest ``start`` (a public starting point), whose noise
    standard deviation is known; the grid point minimising that change plus
    ``_TEMPERATURE_MARGIN`` noise standard deviations is returned (the
    starting point, unless the data speak clearly).

    Returns
    -------
    float
    """
    derivative = _temperature_derivatives(X, codes, W, anchor, row_norm, fit_intercept)
    noisy = derivative + rng.normal(0.0, std, size=derivative.shape)
    ref = int(np.argmin(np.abs(TEMPERATURE_GRID - start)))
    weights = _LOSS_CHANGE - _LOSS_CHANGE[ref]
    change = weights @ noisy
    noise = std * np.linalg.norm(weights, axis=1)
    return float(TEMPERATURE_GRID[int(np.argmin(change + _TEMPERATURE_MARGIN * noise))])


def calibrate_probabilities(
    X, codes, W, plan, noise_multiplier, *, row_norm, fit_intercept, rng
):
    """The probability floor: the trained model moved towards a private prior.

    Two releases through one Gaussian budget of ``plan.calibration_noise``
    (per unit of one row's bound; see :meth:`SGDPlan.events`): (1) the class
    counts, with ``_PRIOR_WEIGHT`` of the budget's inverse variance, give a
    private prior (:func:`release_log_prior`); (2) :func:`fit_temperature`,
    with the rest, picks a point ``a`` on the path ``m + a (s - m)`` from the
    prior's logits ``m`` to the model's ``s``, starting from the share of
    the coefficients that the injected noise is not expected to make up
    (:func:`public_shrinkage`, public) and leaving it only when the training
    loss says so clearly. Without an intercept the anchor is the uniform
    prediction (logits 0).
    """
    n_classes = plan.n_classes
    budget = plan.calibration_noise
    if fit_intercept:
        log_prior = release_log_prior(
            codes, n_classes, budget / math.sqrt(_PRIOR_WEIGHT), rng
        )
        anchor = anchor_logits(log_prior)
        share = 1.0 - _PRIOR_WEIGHT
    else:
        anchor = np.zeros(W.shape[1])
        share = 1.0
    energy = tail_noise_variance(plan, noise_multiplier)
    start = public_shrinkage(W, energy, fit_intercept)
    std = budget / math.sqrt(share) * temperature_bound(n_classes)
    a = fit_temperature(
        X,
        codes,
        W,
        anchor,
        std,
        row_norm=row_norm,
        fit_intercept=fit_intercept,
        rng=rng,
        start=start,
    )
    return _anchored(W, anchor, a, fit_intercept)


def _take_rows(X, rows, buffer):
    """The rows ``X[rows]`` as float64, gathered into a reused buffer.

    Fancy indexing ``X[rows]`` allocates a fresh array for every batch, and
    faulting that memory in costs several times the copy itself (measured:
    a Poisson epoch's gathers at batch 1024 took 4x longer that way than
    with ``np.take`` into one reused buffer). The rows come from
    :func:`poisson_batch` or a secret order, so they are in range and the
    bounds check is skipped.

    Parameters
    ----------
    X : ndarray or memmap of shape (n_samples, n_features)
    rows : ndarray of int
    buffer : list of one ndarray or None
        Holder of the buffer, grown (and replaced) when a batch is larger.

    Returns
    -------
    Xb : ndarray of shape (len(rows), n_features)
        A view of the buffer when ``X`` is float64 (overwritten at the next
        call), else a float64 copy.
    """
    k = len(rows)
    if buffer[0] is None or buffer[0].shape[0] < k:
        buffer[0] = np.empty((int(1.25 * k) + 16, X.shape[1]), dtype=X.dtype)
    # The method rather than ``np.take``: one Python wrapper less per step.
    block = X.take(rows, axis=0, out=buffer[0][:k], mode="clip")
    return block if block.dtype == np.float64 else block.astype(float)


def _batches(plan, rng, order, n_rows):
    """Yield ``(step, rows)`` for every step: an index array or a slice.

    ``order`` is the secret permutation of a shuffled run whose data were not
    permuted up front (a memmap), else None: batches are then contiguous.
    Poisson batches draw each of the ``n_rows`` rows at the plan's rate,
    which under add/remove is set from a released count, not from
    ``n_rows``.
    """
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


def run_logistic_sgd(
    X,
    codes,
    plan,
    noise_multiplier,
    *,
    row_norm,
    fit_intercept,
    rng,
    init=None,
    sample_weight=None,
    verbose=0,
):
    """Run DP-SGD or DP-SGLD on the logistic loss; release only the last iterate.

    Parameters
    ----------
    X : ndarray or memmap of shape (n_samples, n_features)
        Read batch by batch. A memmap is never copied whole; an in-memory
        array is copied once in its secret order for a shuffled run (memory
        for a second copy of ``X``, in exchange for contiguous batches).
    codes : ndarray of int, shape (n_samples,)
        Class index of each row (0/1 for binary); one-hot rows are built per
        batch, so memory stays proportional to the batch.
    plan : SGDPlan
        Cyclic and shuffled plans are for ``n_samples`` rows. A Poisson plan
        may be for another size (under add/remove, the released count): its
        rate and steps are used as they are, on the rows of ``X``.
    noise_multiplier : float
    row_norm : float or None
        Rows (with the intercept column) are projected onto this ball; None:
        rows are used as they are (per-example clipping bounds the steps).
    fit_intercept : bool
    rng : numpy.random.Generator
    init : ndarray or None
        Data-independent starting point (zeros by default).
    sample_weight : ndarray of shape (n_samples,) or None
        Weights in [0, 1], scaling each record's gradient.
    verbose : int

    Returns
    -------
    W : ndarray of shape (n_features + fit_intercept, n_outputs)
    events : list of privacy events
    """
    if plan.sampling != "poisson" and plan.n_samples != X.shape[0]:
        raise ValueError(
            f"The plan is for {plan.n_samples} rows, X has {X.shape[0]}: cyclic "
            "and shuffled batches need the plan of the data's size."
        )
    if row_norm is None:
        row_norm = UNBOUNDED_ROW_NORM
    binary = plan.n_classes == 2
    n_out = 1 if binary else plan.n_classes
    d = X.shape[1] + int(fit_intercept)
    W = np.zeros((d, n_out)) if init is None else np.array(init, dtype=float)
    eye = np.eye(plan.n_classes)
    order = _secret_order(plan, rng)
    if order is not None and not isinstance(X, np.memmap):
        # The secret order is the same every epoch, so one permuted copy per
        # fit (in memory, dropped on return) turns every batch into a
        # contiguous slice instead of a gather per step. Memmaps keep the
        # per-batch gather: copying them would defeat their purpose.
        X, codes = X[order], codes[order]
        if sample_weight is not None:
            sample_weight = sample_weight[order]
        order = None
    noise_sum = noise_multiplier * plan.clip_norm
    radius = feature_norm(row_norm, fit_intercept)
    steps_per_epoch = len(plan.batch_sizes)
    average_from = plan.n_steps - max(1, int(round(plan.tail_fraction * plan.n_steps)))
    W_sum, n_averaged = np.zeros_like(W), 0
    buffer = [None]
    table = None
    if plan.sampling == "poisson" and not isinstance(X, np.memmap):
        # A Poisson run visits each row about once per epoch through a gather;
        # the projection of every row, computed once (float64, one pass) and
        # stored beside its label and weight, is then one small lookup per
        # step instead of a norm, a projection and more gathers. Four columns
        # (32 bytes a row, the weight column unused without weights): numpy
        # gathers 32-byte items faster than 24-byte ones (3.3 against 4.6
        # microseconds for 256 rows of a 1,000,000-row table).
        raw = row_norms(X, exact=True)
        X, raw = tame_rows(X, raw, radius)
        table = np.column_stack(
            [
                *row_projection(raw, row_norm, fit_intercept),
                codes,
                np.zeros(X.shape[0]) if sample_weight is None else sample_weight,
            ]
        )
    # Everything the loop reads every step, looked up once: Python floats for
    # the step sizes and batch sizes (the same doubles as the plan's, without
    # a numpy scalar per step), and one problem dict whose weights change.
    # A Poisson step divides by the expected batch size, never by the drawn
    # size (no data-dependent scale).
    rates = plan.learning_rates.tolist()
    if plan.sampling == "poisson":
        denoms = [float(plan.batch_sizes[0])] * steps_per_epoch
    else:
        denoms = [float(size) for size in plan.batch_sizes]
    l2 = plan.l2
    sgld = plan.solver == "dp-sgld"
    prox = plan.l1 > 0 or plan.projection_radius is not None
    problem = {
        "binary": binary,
        "fit_intercept": fit_intercept,
        "clip_norm": plan.clip_norm,
        "weights": None,
    }
    for step, idx in _batches(plan, rng, order, X.shape[0]):
        eta = rates[step]
        if isinstance(idx, slice):
            Xb = np.asarray(X[idx], dtype=float)
        else:
            Xb = _take_rows(X, idx, buffer)
        if table is not None:
            # One gather of (scale, norm, label, weight) rows, read through
            # column views; the scale alone is copied to a contiguous vector
            # (it is read twice, in broadcast products that run about twice as
            # slow on a strided vector; copying every column costs more than
            # it saves). The label column holds the class index as a float:
            # binary targets are that column itself (the same 0.0 / 1.0 as the
            # cast codes).
            looked_up = table.take(idx, axis=0)
            scale, norm = looked_up[:, 0].copy(), looked_up[:, 1]
            if binary:
                Yb = looked_up[:, 2:3]
            else:
                Yb = eye[looked_up[:, 2].astype(np.intp)]
            if sample_weight is not None:
                problem["weights"] = looked_up[:, 3]
        else:
            labels = codes[idx]
            # Norms of the batch's rows while they sit in cache: no separate
            # pass over the data, and exact float64 norms for the projection.
            raw = np.sqrt(np.einsum("ij,ij->i", Xb, Xb))
            Xb, raw = tame_rows(Xb, raw, radius)
            scale, norm = row_projection(raw, row_norm, fit_intercept)
            Yb = labels[:, None].astype(float) if binary else eye[labels]
            if sample_weight is not None:
                problem["weights"] = sample_weight[idx]
        grad_sum = _clipped_gradient_sum(W, Xb, Yb, scale, norm, problem)
        denom = denoms[step % steps_per_epoch]
        if sgld:
            drift = grad_sum / denom + l2 * W
            std = np.sqrt(2.0 * eta) * noise_sum
            W = W - eta * drift + rng.normal(0.0, std, size=W.shape)
        else:
            # W - eta * ((grad_sum + noise) / denom + l2 W), in place: the same
            # operations in the same order (a sum or product of two numbers
            # does not depend on their order), without a new array for each.
            step_W = rng.normal(0.0, noise_sum, size=W.shape)
            step_W += grad_sum
            step_W /= denom
            step_W += l2 * W
            step_W *= eta
            W = W - step_W
        if prox:
            W = _prox_and_project(W, plan, eta)
        if step >= average_from:
            W_sum += W
            n_averaged += 1
        if verbose and (step + 1) % steps_per_epoch == 0:
            logger.info(
                "epoch %d/%d done (no loss shown: it would read the data unprotected)",
                (step + 1) // steps_per_epoch,
                plan.epochs,
            )
    W = W_sum / n_averaged
    if plan.calibration_noise is not None:
        W = calibrate_probabilities(
            X,
            codes,
            W,
            plan,
            noise_multiplier,
            row_norm=row_norm,
            fit_intercept=fit_intercept,
            rng=rng,
        )
    return W, plan.events(noise_multiplier)

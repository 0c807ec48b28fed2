"""The public plan of a DP-SGD or DP-SGLD run, and the privacy events it causes."""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...accounting import (
    GaussianSumEvent,
    Neighbouring,
    NoisyIterationEvent,
    PoissonGaussianEvent,
    RandomAllocationGaussianEvent,
    gradient_step_lipschitz,
    logistic_constants,
)
from ._policy import DEFAULT_POLICY

__all__ = [
    "AMPLIFIED",
    "UNBOUNDED_ROW_NORM",
    "SGDPlan",
    "SGDSteps",
    "auto_epochs",
    "make_plan",
    "step_sizes",
]

# Rows are fed to the loss unprojected; only astronomically large ones are put
# on a ball of this radius first (see :func:`~skdp._solvers._rows.tame_rows`).
UNBOUNDED_ROW_NORM = 1e30


#: Samplers accounted by amplification (each record's batch is secret and
#: random): Poisson and balls-and-bins. Their plans may be for another number
#: of rows than the data's (the released count under add/remove), their
#: steps divide by the expected batch and their "auto" rules are alike.
AMPLIFIED = ("poisson", "balls-and-bins")


def follows_budget(sampling, solver):
    """Whether the "auto" step and clip may follow the budget and the noise.

    Poisson and balls-and-bins DP-SGD only. Their events (the subsampled
    Gaussian or random allocation, in units of the clip norm) read neither
    the step sizes nor a clip norm up to the gradient bound, so a step or
    clip set from the calibrated noise leaves them as calibrated.
    """
    return sampling in AMPLIFIED and solver == "dp-sgd"


@dataclass(frozen=True)
class SGDSteps:
    """The optimisation settings of a run: its step sizes and clip norm.

    Attributes
    ----------
    learning_rates : ndarray of shape (n_steps,)
        Read-only.
    clip_norm : float
        Per-example gradient clip norm ``C``.
    """

    learning_rates: np.ndarray
    clip_norm: float


@dataclass(frozen=True)
class SGDPlan:
    """Everything public about a private SGD run: what its events read.

    Attributes
    ----------
    n_samples : int
    n_classes : int
    batch_sizes : tuple of int
        Cyclic partition of the (possibly permuted) rows; for Poisson and
        balls-and-bins sampling, the batch size asked for repeated once per
        step of an epoch (:attr:`expected_batch` is the expected size).
    epochs : int
    sampling : {"cyclic", "shuffle", "poisson", "balls-and-bins"}
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
        model (:func:`~skdp._solvers._sgd.fit_temperature`) divided by the
        bound on one row's contribution; None: no temperature. Its
        sensitivity in those units (2 under replace-one, 1 under add/remove)
        is the accountant's to apply: the release is a rate-1 Poisson event
        (:meth:`events`).
    lr_schedule : {"constant", "decreasing"}
    step_factor : float or None
        The "auto" step in units of ``1 / (smoothness + l2)``; None: a given
        learning rate, or no row bound.
    clip_fraction : float or None
        The "auto" clip as a share of ``gradient_bound``; None: a given clip
        norm, or no row bound.
    quiet_growth : float or None
        Without a row bound, with the "auto" clip and step: the most the
        schedule may multiply the clip by (and divide the step by) once the
        calibrated noise is small (:func:`~skdp._solvers._sgd.schedule_run`);
        None: a given clip or step, or bounded rows.
    centring_noise : float or None
        Noise std of the one release of the rows' centre
        (:func:`~skdp._solvers._sgd._centre.release_run_centre`) divided by the
        radius each row is put within for it; None: rows are not centred.
        Like ``calibration_noise``, a :class:`GaussianSumEvent` of the
        relation's sensitivity (:meth:`events`).
    neighbouring : {"replace-one", "add-remove"}
        The relation the plan was made for. The events do not read it (the
        accountant applies it); the probability floor does, to give its
        class counts the noise their own sensitivity needs.
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
    lr_schedule: str = "constant"
    step_factor: float | None = None
    clip_fraction: float | None = None
    quiet_growth: float | None = None
    centring_noise: float | None = None
    neighbouring: str = "replace-one"

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
            self.lr_schedule,
            self.step_factor,
            self.clip_fraction,
            self.quiet_growth,
            self.centring_noise,
            self.neighbouring,
        )

    @property
    def n_steps(self):
        """Total number of noisy steps."""
        return len(self.batch_sizes) * self.epochs

    @property
    def expected_batch(self):
        """The public number a Poisson or balls-and-bins step's sum is divided by.

        Poisson: the batch size asked for (``q n``); balls-and-bins: ``n / t``
        with ``t`` the steps of an epoch, the expected size of each batch.
        """
        if self.sampling == "balls-and-bins":
            return self.n_samples / len(self.batch_sizes)
        return self.batch_sizes[0]

    @property
    def steps(self):
        """The step sizes and clip norm the plan was made with."""
        return SGDSteps(self.learning_rates, self.clip_norm)

    @property
    def follows_budget(self):
        """Whether a schedule may set steps from the noise (:func:`follows_budget`)."""
        return follows_budget(self.sampling, self.solver)

    @property
    def clipping_inactive(self):
        """Whether clipping can never change a gradient (C >= G)."""
        return self.clip_norm >= self.gradient_bound

    def noise_std(self, noise_multiplier, steps=None):
        """Per-step noise std on the displacement, in parameter units.

        With ``steps`` (default: the plan's own), of a run taking those steps.
        """
        steps = self.steps if steps is None else steps
        if self.solver == "dp-sgld":
            # Langevin: sqrt(2 eta) sigma with sigma = z * C.
            return (
                np.sqrt(2.0 * steps.learning_rates) * noise_multiplier * steps.clip_norm
            )
        if self.sampling == "balls-and-bins":
            b = self.expected_batch
        else:
            b = np.tile(np.asarray(self.batch_sizes, dtype=float), self.epochs)
        return steps.learning_rates * noise_multiplier * steps.clip_norm / b

    def events(self, noise_multiplier):
        """Privacy events of the run at ``noise_multiplier``.

        DP-SGD: noise of std ``z C`` on the sum of clipped gradients. DP-SGLD:
        noise of std ``sqrt(2 eta_t) z C`` on the iterate. The sensitivity of a
        step that sees the record is ``2 eta_t min(C, G) / b_t`` (replace-one).
        A temperature fit adds one Gaussian release of a sum over all rows, a
        :class:`~skdp.accounting.GaussianSumEvent` (noise in units of one
        row's bound; the accountant applies the relation: the sum moves by 2
        bounds under replace-one, 1 under add/remove). A centred run adds the
        centre's release (made before the steps), another
        :class:`GaussianSumEvent` (noise in units of the radius each row is
        put within).
        """
        centring = (
            []
            if self.centring_noise is None
            else [GaussianSumEvent(self.centring_noise)]
        )
        calibration = (
            []
            if self.calibration_noise is None
            else [GaussianSumEvent(self.calibration_noise)]
        )
        return self._training_events(noise_multiplier) + centring + calibration

    def _training_events(self, noise_multiplier):
        """Events of the noisy steps (see :meth:`events`)."""
        if self.sampling == "balls-and-bins":
            # Noise std z C on each step's sum of contributions of norm at most
            # min(C, G): z C / min(C, G) in units of that bound.
            z_sum = noise_multiplier * self.clip_norm
            z_sum /= min(self.clip_norm, self.gradient_bound)
            return [
                RandomAllocationGaussianEvent(len(self.batch_sizes), z_sum, self.epochs)
            ]
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


def auto_epochs(
    sampling, epsilon=None, neighbouring="replace-one", policy=DEFAULT_POLICY
):
    """Number of epochs of ``epochs="auto"`` (a function of public inputs only).

    Parameters
    ----------
    sampling : {"cyclic", "shuffle", "poisson", "balls-and-bins"}
    epsilon : float or None
        The target epsilon (None when the noise multiplier is fixed instead).
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
    policy : SGDPolicy, default=DEFAULT_POLICY
        Poisson: ``policy.poisson_epochs``, or ``epochs_per_epsilon`` of the
        relation times ``epsilon`` when that is more (at most
        ``max_epochs``); balls-and-bins: the same rule with
        ``allocation_epochs`` and ``allocation_epochs_per_epsilon``; cyclic
        and shuffled: ``policy.cyclic_epochs``.

    Returns
    -------
    int
    """
    if sampling not in AMPLIFIED:
        return policy.cyclic_epochs
    epochs = _amplified_rules(sampling, policy).epochs
    if epsilon is not None:
        rate = (
            policy.allocation_epochs_per_epsilon
            if sampling == "balls-and-bins"
            else policy.epochs_per_epsilon
        )
        more = int(round(rate[neighbouring] * epsilon))
        epochs = max(epochs, min(more, policy.max_epochs))
    return epochs


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
    centring_noise=None,
    neighbouring="replace-one",
    policy=DEFAULT_POLICY,
):
    """Build the :class:`SGDPlan` of a run from public quantities.

    ``row_norm`` bounds the rows fed to the loss (intercept column included).
    ``epochs="auto"`` is :func:`auto_epochs` of the sampler, the target
    ``epsilon`` and the relation. With cyclic or shuffled batches,
    ``learning_rate="auto"`` is ``1 / (smoothness + l2)``, inside the limit
    ``2 / (smoothness + l2)`` that keeps each step non-expansive,
    ``clip_norm="auto"`` is the gradient bound (clipping never active) and
    ``tail_fraction="auto"`` is 0 (last iterate): the last-iterate bound
    applies. With Poisson batches the "auto" values are ``policy.poisson_step``
    times that step, ``policy.poisson_clip`` of the bound and the last
    ``policy.poisson_tail`` of the steps (balls-and-bins: the ``allocation_``
    constants, same rules); with a target ``epsilon`` (DP-SGD,
    :func:`follows_budget`) the step is lowered so that step times number of
    steps stays within ``policy.travel[neighbouring] * n_samples * epsilon``
    times ``1 / (smoothness + l2)`` (small budgets only). Once the noise is
    calibrated, :func:`~skdp._solvers._sgd.schedule_run` may set a Poisson
    DP-SGD run's "auto" clip and step from it, leaving the plan (and so its
    events) as it is.

    ``row_norm=None`` plans a run on rows of unknown norm (the estimator's
    default, and what ``skdp account`` describes without ``--row-norm``): no
    gradient bound, so the clip norm is the sensitivity and no last-iterate
    bound applies. Poisson "auto" values are then a clip norm of
    ``policy.unbounded_clip`` and a step of ``policy.unbounded_step / clip``
    (lowered at a small budget, :func:`_unbounded_step`); cyclic and shuffled
    batches need numbers.
    """
    _check_sampler(sampling, solver)
    unbounded = row_norm is None
    gradient_bound, smoothness = _loss_constants(
        row_norm, n_classes, sampling, learning_rate, clip_norm
    )
    if epochs == "auto":
        epochs = auto_epochs(sampling, epsilon, neighbouring, policy)
    sizes = _batch_sizes(n_samples, batch_size, sampling)
    n_steps = len(sizes) * epochs
    rules = _amplified_rules(sampling, policy)
    # The target the "auto" step's travel cap follows (None: no cap).
    budget = epsilon if follows_budget(sampling, solver) else None
    step_factor = None
    if learning_rate != "auto":
        eta0 = float(learning_rate)
    elif unbounded:
        eta0 = _unbounded_step(
            n_samples, n_steps, budget, neighbouring, clip_norm, policy
        )
    else:
        step_factor = 1.0 if rules is None else rules.step
        if budget is not None:
            travel = policy.travel[neighbouring] * n_samples * budget
            step_factor = min(step_factor, travel / n_steps)
        eta0 = step_factor / (smoothness + l2)
    clip, clip_fraction = _clip(clip_norm, unbounded, rules, gradient_bound, policy)
    quiet_growth = None
    if unbounded and rules is not None and clip_norm == learning_rate == "auto":
        quiet_growth = policy.unbounded_quiet_clip
    if tail_fraction == "auto":
        tail_fraction = 0.0 if rules is None else rules.tail
    return SGDPlan(
        n_samples=int(n_samples),
        n_classes=int(n_classes),
        batch_sizes=sizes,
        epochs=int(epochs),
        sampling=sampling,
        solver=solver,
        learning_rates=step_sizes(eta0, len(sizes), epochs, lr_schedule),
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
        lr_schedule=lr_schedule,
        step_factor=step_factor,
        clip_fraction=clip_fraction,
        quiet_growth=quiet_growth,
        centring_noise=None if centring_noise is None else float(centring_noise),
        neighbouring=Neighbouring.parse(neighbouring).value,
    )


def _check_sampler(sampling, solver):
    """Refuse balls-and-bins DP-SGLD: its events assume noise on each step's sum."""
    if sampling == "balls-and-bins" and solver != "dp-sgd":
        raise ValueError(
            f"batch_sampling='balls-and-bins' needs solver='dp-sgd', got "
            f"solver={solver!r}: its accounting (random allocation) is for noise "
            "added to each step's sum of clipped gradients. Use solver='dp-sgd', "
            "or batch_sampling='poisson' for DP-SGLD."
        )


class _Rules(NamedTuple):
    """The "auto" epochs, step factor, clip share and tail of a sampler."""

    epochs: int
    step: float
    clip: float
    tail: float


# The prefix of each amplified sampler's "auto" fields in the policy.
_RULE_PREFIX = {"poisson": "poisson", "balls-and-bins": "allocation"}


def _amplified_rules(sampling, policy):
    """The policy's "auto" rules of an amplified sampler; None for the others."""
    prefix = _RULE_PREFIX.get(sampling)
    if prefix is None:
        return None
    return _Rules(*(getattr(policy, f"{prefix}_{name}") for name in _Rules._fields))


def _loss_constants(row_norm, n_classes, sampling, learning_rate, clip_norm):
    """Gradient bound and smoothness of the loss on rows of norm ``row_norm``.

    Both infinite without a row bound, where only Poisson batches can set an
    "auto" step and clip (from the clip norm, not from the rows).
    """
    if row_norm is not None:
        return logistic_constants(row_norm, n_classes)
    if sampling not in AMPLIFIED and "auto" in (learning_rate, clip_norm):
        raise ValueError(
            f"batch_sampling={sampling!r} without a row_norm needs a "
            "learning_rate and a max_grad_norm: its 'auto' step and clip are "
            "set from the row bound. Declare row_norm, give both, or use "
            "batch_sampling='poisson' or 'balls-and-bins'."
        )
    return np.inf, np.inf


def _batch_sizes(n_samples, batch_size, sampling):
    """Sizes of the batches of an epoch (Poisson: the expected size, repeated).

    ``batch_size`` is capped at ``n_samples``; cyclic and shuffled epochs
    partition the rows, the last batch taking what is left. Balls-and-bins
    epochs have as many steps (:func:`~skdp._solvers._allocation.allocation_steps`)
    and repeat ``batch_size`` as Poisson does (expected size ``n / t``).
    """
    batch_size = int(min(batch_size, n_samples))
    n_batches = -(-n_samples // batch_size)
    if sampling in AMPLIFIED:
        return (batch_size,) * n_batches
    last = n_samples - batch_size * (n_batches - 1)
    return (batch_size,) * (n_batches - 1) + (last,)


def _clip(clip_norm, unbounded, rules, gradient_bound, policy):
    """The clip norm, and the share of the gradient bound an "auto" clip is.

    "auto": the gradient bound itself for cyclic and shuffled batches
    (``rules`` None: clipping never active), the sampler's clip share of it
    for Poisson and balls-and-bins batches, ``policy.unbounded_clip`` without
    a row bound (share None).
    """
    if clip_norm != "auto":
        return float(clip_norm), None
    if unbounded:
        return policy.unbounded_clip, None
    fraction = 1.0 if rules is None else rules.clip
    return fraction * gradient_bound, fraction


def _unbounded_step(n_samples, n_steps, budget, neighbouring, clip, policy):
    """The "auto" Poisson step without a row bound: ``unbounded_step / clip``.

    Lowered with a target epsilon ``budget`` so that the steps cover at most
    ``policy.unbounded_travel[neighbouring] * n * epsilon`` units of 1/32 of
    the full step, as the bounded "auto" step is (``policy.travel``, whose
    full step is ``policy.poisson_step`` units). Public inputs only.
    """
    clip = policy.unbounded_clip if clip == "auto" else float(clip)
    factor = 1.0
    if budget is not None:
        travel = policy.unbounded_travel[neighbouring] * n_samples * budget
        factor = min(1.0, travel / n_steps / policy.poisson_step)
    return policy.unbounded_step * factor / clip


def step_sizes(first, n_batches, epochs, lr_schedule):
    """Step sizes of every step: ``first`` throughout, or divided by ``1 + epoch``.

    Returns
    -------
    ndarray of shape (n_batches * epochs,), read-only
    """
    steps = np.arange(n_batches * epochs)
    if lr_schedule == "constant":
        rates = np.full(steps.size, first)
    else:  # "decreasing": first / (1 + epoch)
        rates = first / (1.0 + steps // n_batches)
    rates.setflags(write=False)
    return rates

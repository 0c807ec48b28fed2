"""The public plan of a DP-SGD or DP-SGLD run, and the privacy events it causes."""

from dataclasses import dataclass

import numpy as np

from ...accounting import (
    NoisyIterationEvent,
    PoissonGaussianEvent,
    gradient_step_lipschitz,
    logistic_constants,
)
from ._policy import DEFAULT_POLICY
from ._schedule import auto_clip_fraction, auto_step_boost

__all__ = ["UNBOUNDED_ROW_NORM", "SGDPlan", "auto_epochs", "make_plan"]

# Rows are fed to the loss unprojected; only astronomically large ones are put
# on a ball of this radius first (see :func:`~skdp._solvers._rows.tame_rows`).
UNBOUNDED_ROW_NORM = 1e30


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
        model (:func:`~skdp._solvers._sgd.fit_temperature`) divided by the
        bound on one row's contribution; None: no temperature. Its
        sensitivity in those units (2 under replace-one, 1 under add/remove)
        is the accountant's to apply: the release is a rate-1 Poisson event
        (:meth:`events`).
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


def auto_epochs(
    sampling, epsilon=None, neighbouring="replace-one", policy=DEFAULT_POLICY
):
    """Number of epochs of ``epochs="auto"`` (a function of public inputs only).

    Parameters
    ----------
    sampling : {"cyclic", "shuffle", "poisson"}
    epsilon : float or None
        The target epsilon (None when the noise multiplier is fixed instead).
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
    policy : SGDPolicy, default=DEFAULT_POLICY
        Poisson: ``policy.poisson_epochs``, or ``epochs_per_epsilon`` of the
        relation times ``epsilon`` when that is more (at most
        ``max_epochs``); cyclic and shuffled: ``policy.cyclic_epochs``.

    Returns
    -------
    int
    """
    if sampling != "poisson":
        return policy.cyclic_epochs
    epochs = policy.poisson_epochs
    if epsilon is not None:
        more = int(round(policy.epochs_per_epsilon[neighbouring] * epsilon))
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
    neighbouring="replace-one",
    noise_multiplier=None,
    n_params=None,
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
    ``policy.poisson_tail`` of the steps; with a target ``epsilon`` (DP-SGD)
    the step is lowered so that step times number of steps stays within
    ``policy.travel[neighbouring] * n_samples * epsilon`` times
    ``1 / (smoothness + l2)`` (small budgets only). Given the calibrated
    ``noise_multiplier`` and the number of parameters ``n_params``, a Poisson
    DP-SGD plan's "auto" clip is :func:`auto_clip_fraction` of the bound and
    its "auto" step shrinks by the same factor as the clip grows; neither
    changes the privacy events, so the noise calibrated without them stands.

    ``row_norm=None`` plans a run on rows of unknown norm (the estimator's
    default, and what ``skdp account`` describes without ``--row-norm``): no
    gradient bound, so the clip norm is the sensitivity and no last-iterate
    bound applies. Poisson "auto" values are then a clip norm of
    ``policy.unbounded_clip`` and a step of ``policy.unbounded_step / clip``
    (lowered at a small budget, :func:`_unbounded_step`); cyclic and shuffled
    batches need numbers.
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
        epochs = auto_epochs(sampling, epsilon, neighbouring, policy)
    batch_size = int(min(batch_size, n_samples))
    n_batches = -(-n_samples // batch_size)
    if sampling == "poisson":
        sizes = (batch_size,) * n_batches
    else:
        sizes = (batch_size,) * (n_batches - 1) + (
            n_samples - batch_size * (n_batches - 1),
        )
    poisson = sampling == "poisson"
    auto_clip = policy.poisson_clip if poisson else 1.0
    clip_fraction = auto_clip
    boost = 1.0
    noise_known = noise_multiplier is not None and n_params is not None
    if poisson and solver == "dp-sgd" and noise_known and not unbounded:
        rho = noise_multiplier * np.sqrt(n_params) / batch_size
        clip_fraction = auto_clip_fraction(rho, policy)
        boost = auto_step_boost(noise_multiplier / batch_size, policy)
    if learning_rate == "auto" and unbounded:
        eta0 = _unbounded_step(
            n_samples,
            n_batches,
            epochs,
            epsilon,
            neighbouring,
            solver,
            clip_norm,
            policy,
        )
    elif learning_rate == "auto":
        factor = policy.poisson_step if poisson else 1.0
        if poisson and solver == "dp-sgd" and epsilon is not None:
            travel = policy.travel[neighbouring] * n_samples * epsilon
            factor = min(factor, travel / (n_batches * epochs))
        if clip_norm == "auto":
            factor *= boost * auto_clip / clip_fraction
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
        clip = policy.unbounded_clip
    elif clip_norm == "auto":
        clip = clip_fraction * gradient_bound
    else:
        clip = float(clip_norm)
    if tail_fraction == "auto":
        tail_fraction = policy.poisson_tail if poisson else 0.0
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


def _unbounded_step(
    n_samples, n_batches, epochs, epsilon, neighbouring, solver, clip, policy
):
    """The "auto" Poisson step without a row bound: ``unbounded_step / clip``.

    Lowered with a target epsilon (DP-SGD) so that the steps cover at most
    ``policy.unbounded_travel[neighbouring] * n * epsilon`` units of 1/32 of
    the full step, as the bounded "auto" step is (``policy.travel``, whose
    full step is ``policy.poisson_step`` units). Public inputs only.
    """
    clip = policy.unbounded_clip if clip == "auto" else float(clip)
    factor = 1.0
    if solver == "dp-sgd" and epsilon is not None:
        travel = policy.unbounded_travel[neighbouring] * n_samples * epsilon
        factor = min(1.0, travel / (n_batches * epochs) / policy.poisson_step)
    return policy.unbounded_step * factor / clip

"""Tuning that follows the calibrated noise: the amplified "auto" clip and step.

A schedule takes a plan and its calibrated noise multiplier and returns the
steps the run takes. It returns optimisation settings only: the plan, whose
events were calibrated and will be accounted, comes out as it went in.
"""

from dataclasses import dataclass

import numpy as np

from .._tuning import log_linear
from ._plan import SGDPlan, SGDSteps, step_sizes
from ._policy import DEFAULT_POLICY

__all__ = [
    "SGDSchedule",
    "auto_clip_fraction",
    "auto_step_boost",
    "quiet_steps",
    "schedule_run",
]


@dataclass(frozen=True)
class SGDSchedule:
    """A plan and the steps its run takes.

    Attributes
    ----------
    plan : SGDPlan
        As planned: its events are those calibrated and accounted.
    steps : SGDSteps
        The plan's own steps, or those set from the calibrated noise where
        the plan's events do not read them (:attr:`SGDPlan.follows_budget`).
    """

    plan: SGDPlan
    steps: SGDSteps


def schedule_run(plan, noise_multiplier, n_params, policy=DEFAULT_POLICY):
    """The steps of a planned run, once its noise multiplier is calibrated.

    A Poisson or balls-and-bins DP-SGD plan with an "auto" clip on bounded rows clips at
    :func:`auto_clip_fraction` of the gradient bound instead, at most the
    bound, so its events, which read neither the steps nor such a clip, are
    those calibrated; with an "auto" step too, the step shrinks by the
    factor the clip grows and :func:`auto_step_boost` lengthens it. Without
    a row bound, "auto" clip and step follow :func:`quiet_steps`. Every
    other plan keeps its own steps.

    Parameters
    ----------
    plan : SGDPlan
    noise_multiplier : float
        The calibrated (public) noise multiplier.
    n_params : int
        Number of parameters of the model (public).
    policy : SGDPolicy, default=DEFAULT_POLICY

    Returns
    -------
    SGDSchedule
    """
    if plan.follows_budget and plan.quiet_growth is not None:
        return SGDSchedule(plan, quiet_steps(plan, noise_multiplier, n_params, policy))
    if not (plan.follows_budget and plan.clip_fraction is not None):
        return SGDSchedule(plan, plan.steps)
    batch = plan.expected_batch
    clip_fraction = auto_clip_fraction(
        noise_multiplier * np.sqrt(n_params) / batch, policy, plan.clip_fraction
    )
    rates = plan.learning_rates
    if plan.step_factor is not None:
        boost = auto_step_boost(noise_multiplier / batch, policy)
        factor = plan.step_factor * (boost * plan.clip_fraction / clip_fraction)
        rates = step_sizes(
            factor / (plan.smoothness + plan.l2),
            len(plan.batch_sizes),
            plan.epochs,
            plan.lr_schedule,
        )
    return SGDSchedule(plan, SGDSteps(rates, clip_fraction * plan.gradient_bound))


def quiet_steps(plan, noise_multiplier, n_params, policy=DEFAULT_POLICY):
    """The "auto" clip and step of a run without a row bound, from its noise.

    Clipping at a fixed norm biases the fit (most of all the probabilities
    of a rare class, whose rows have the largest gradients) where the noise
    no longer needs so small a clip. As :func:`auto_clip_fraction` raises a
    bounded run's clip, the clip is multiplied by a growth that is 1 while
    the relative noise ``z sqrt(p) / b`` is at least ``policy.clip_noise[0]``
    and ``plan.quiet_growth`` once it is at most ``policy.clip_noise[1]``,
    log-linear in between; the step is divided by it, so the travel of the
    steps (step times clip) is unchanged. Public inputs only; the noise
    multiplier, and so the events, stay as calibrated (the noise std is the
    multiplier times the clip).

    Returns
    -------
    SGDSteps
    """
    relative_noise = noise_multiplier * np.sqrt(n_params) / plan.expected_batch
    growth = log_linear(relative_noise, *policy.clip_noise, 1.0, plan.quiet_growth)
    rates = plan.learning_rates / growth
    rates.setflags(write=False)
    return SGDSteps(rates, plan.clip_norm * growth)


def auto_clip_fraction(relative_noise, policy=DEFAULT_POLICY, noisy_clip=None):
    """Poisson or balls-and-bins ``clip_norm="auto"`` as a fraction of the bound.

    Parameters
    ----------
    relative_noise : float or None
        ``z sqrt(p) / b``: the norm of the noise added to one averaged step,
        over the clip norm (``z`` the calibrated noise multiplier, ``p`` the
        number of parameters, ``b`` the expected batch size). None (unknown):
        the small-budget fraction.
    policy : SGDPolicy, default=DEFAULT_POLICY
    noisy_clip : float or None, default=None
        The share at a large noise (the plan's "auto" share); None:
        ``policy.poisson_clip``.

    Returns
    -------
    float
        ``noisy_clip`` when the relative noise is at least
        ``policy.clip_noise[0]``, ``policy.quiet_clip`` when it is at most
        ``policy.clip_noise[1]``, log-linear in between. A function of public
        quantities only.
    """
    noisy_clip = policy.poisson_clip if noisy_clip is None else noisy_clip
    return log_linear(relative_noise, *policy.clip_noise, noisy_clip, policy.quiet_clip)


def auto_step_boost(coordinate_noise, policy=DEFAULT_POLICY):
    """Poisson ``learning_rate="auto"`` multiplier at a small noise.

    Parameters
    ----------
    coordinate_noise : float or None
        ``z / b``: the std of the noise on one coordinate of an averaged step,
        over the clip norm (``z`` the calibrated noise multiplier, ``b`` the
        expected batch size). None (unknown): no boost.
    policy : SGDPolicy, default=DEFAULT_POLICY

    Returns
    -------
    float
        1 (no change) when ``z / b`` is at least ``policy.step_noise[0]``,
        ``policy.step_boost`` when it is at most ``policy.step_noise[1]``,
        log-linear in between. A function of public quantities only.
    """
    return log_linear(coordinate_noise, *policy.step_noise, 1.0, policy.step_boost)

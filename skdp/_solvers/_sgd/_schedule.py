"""Tuning that follows the calibrated noise: the Poisson "auto" clip and step."""

from .._tuning import log_linear
from ._policy import DEFAULT_POLICY

__all__ = ["auto_clip_fraction", "auto_step_boost"]


def auto_clip_fraction(relative_noise, policy=DEFAULT_POLICY):
    """Poisson ``clip_norm="auto"`` as a fraction of the gradient bound.

    Parameters
    ----------
    relative_noise : float or None
        ``z sqrt(p) / b``: the norm of the noise added to one averaged step,
        over the clip norm (``z`` the calibrated noise multiplier, ``p`` the
        number of parameters, ``b`` the expected batch size). None (unknown):
        the small-budget fraction.
    policy : SGDPolicy, default=DEFAULT_POLICY

    Returns
    -------
    float
        ``policy.poisson_clip`` when the relative noise is at least
        ``policy.clip_noise[0]``, ``policy.quiet_clip`` when it is at most
        ``policy.clip_noise[1]``, log-linear in between. A function of public
        quantities only.
    """
    return log_linear(
        relative_noise, *policy.clip_noise, policy.poisson_clip, policy.quiet_clip
    )


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

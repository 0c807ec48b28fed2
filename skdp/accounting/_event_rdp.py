"""The Rényi-DP curve of each kind of event: one rule per event type.

:func:`event_rdp` dispatches on the event's type (``functools.singledispatch``);
each rule returns the curve on the given orders and the name of the bound in
force at each order. Noise is in units of the per-record bound (see
:mod:`skdp.accounting.events`); the rules apply the relation's sensitivity.
"""

import functools

import numpy as np
from scipy.special import logsumexp

from . import events
from ._allocation import allocation_rdp
from ._last_iterate import position_coefficients
from ._neighbouring import Neighbouring
from ._rdp import (
    gaussian_rdp,
    poisson_gaussian_rdp,
    poisson_gaussian_rdp_replace_one,
    pure_dp_rdp,
)

__all__ = ["event_rdp"]

# How a replace-one bound built by chaining remove and add is named.
WEAK_TRIANGLE = "(replace-one by weak triangle)"


@functools.singledispatch
def event_rdp(event, orders, neighbouring):
    """RDP curve of one event and the name of the bound that gave it.

    Parameters
    ----------
    event : GaussianEvent, GaussianSumEvent, PoissonGaussianEvent, \
RandomAllocationGaussianEvent, ExponentialMechanismEvent or NoisyIterationEvent
    orders : ndarray of shape (n_orders,)
    neighbouring : {"replace-one", "add-remove"}

    Returns
    -------
    rdp : ndarray of shape (n_orders,)
    bounds : ndarray of str, shape (n_orders,)
        Which bound is in force at each order.
    """
    raise TypeError(
        f"No RDP accountant rule for events of type {type(event).__name__}."
    )


def _named(curve, name):
    return curve, np.full(curve.shape, name, dtype=object)


@event_rdp.register
def _(event: events.GaussianEvent, orders, neighbouring):
    return _named(
        event.count * gaussian_rdp(orders, event.noise_multiplier), "gaussian"
    )


def _sum_rdp(noise_multiplier, count, orders, neighbouring):
    """``count`` Gaussian releases of a sum, noise in per-record bounds."""
    z = noise_multiplier / Neighbouring.parse(neighbouring).sum_factor
    return _named(count * gaussian_rdp(orders, z), "gaussian")


@event_rdp.register
def _(event: events.GaussianSumEvent, orders, neighbouring):
    return _sum_rdp(event.noise_multiplier, event.count, orders, neighbouring)


@event_rdp.register
def _(event: events.PoissonGaussianEvent, orders, neighbouring):
    if event.sampling_rate >= 1.0:
        # Every record in every step: a Gaussian release of the sum.
        return _sum_rdp(event.noise_multiplier, event.count, orders, neighbouring)
    if Neighbouring.parse(neighbouring) is Neighbouring.ADD_REMOVE:
        curve = poisson_gaussian_rdp(
            orders, event.sampling_rate, event.noise_multiplier
        )
        name = "poisson-subsampled-gaussian"
    else:
        curve = poisson_gaussian_rdp_replace_one(
            orders, event.sampling_rate, event.noise_multiplier
        )
        name = f"poisson-subsampled-gaussian {WEAK_TRIANGLE}"
    return _named(event.count * curve, name)


@event_rdp.register
def _(event: events.RandomAllocationGaussianEvent, orders, neighbouring):
    relation = Neighbouring.parse(neighbouring)
    curve = allocation_rdp(
        orders, event.steps_per_epoch, event.noise_multiplier, relation
    )
    name = "random-allocation"
    if relation is Neighbouring.REPLACE_ONE:
        name += f" {WEAK_TRIANGLE}"
    return _named(event.epochs * curve, name)


@event_rdp.register
def _(event: events.ExponentialMechanismEvent, orders, neighbouring):
    curve = pure_dp_rdp(orders, event.epsilon, bounded_range=event.bounded_range)
    name = "bounded-range" if event.bounded_range else "pure-dp"
    return _named(event.count * curve, name)


@event_rdp.register
def _(event: events.NoisyIterationEvent, orders, neighbouring):
    if Neighbouring.parse(neighbouring) is not Neighbouring.REPLACE_ONE:
        raise ValueError(
            "Cyclic or shuffled batches are accounted under replace-one only: adding "
            "or removing a record shifts every later batch. Use neighbouring="
            "'replace-one', or Poisson sampling for add/remove."
        )
    composition, last = position_coefficients(event)
    z2 = event.noise_multiplier**2
    use_last = last < composition
    slope = np.where(use_last, last, composition) / z2
    order = "shuffled" if event.batch_weights is not None else "cyclic"
    if event.batch_weights is None:
        worst = int(np.argmax(slope))
        name = "last-iterate" if use_last[worst] else "composition"
        return _named(orders * slope[worst], f"{order}-{name}")
    # Secret order: mixture over the record's position (joint convexity of
    # p^a q^(1-a)): exp((a-1) D) <= sum_j w_j exp((a-1) a slope_j).
    weights = event.batch_weights[: slope.size]
    with np.errstate(divide="ignore"):
        log_w = np.log(weights)
    exponent = (orders[:, None] - 1.0) * orders[:, None] * slope[None, :]
    curve = logsumexp(exponent + log_w[None, :], axis=1) / (orders - 1.0)
    curve = np.minimum(curve, orders * slope[weights > 0].max())
    if use_last[weights > 0].all():
        name = "last-iterate"
    elif not use_last[weights > 0].any():
        name = "composition"
    else:
        name = "last-iterate/composition"
    return _named(curve, f"{order}-{name}")

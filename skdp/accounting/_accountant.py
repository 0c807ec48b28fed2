"""The Rényi-DP accountant: events in, RDP curves and (epsilon, delta) out."""

import functools
import math
from collections import OrderedDict

import numpy as np
from scipy.special import logsumexp

from ._last_iterate import last_iterate_coefficient
from ._rdp import (
    DEFAULT_ORDERS,
    gaussian_rdp,
    poisson_gaussian_rdp,
    poisson_gaussian_rdp_replace_one,
    pure_dp_rdp,
    rdp_to_epsilon,
)
from ._spent import PrivacySpent
from .events import (
    ExponentialMechanismEvent,
    GaussianEvent,
    NoisyIterationEvent,
    PoissonGaussianEvent,
)

__all__ = ["NEIGHBOURING_RELATIONS", "RDPAccountant", "event_rdp"]

NEIGHBOURING_RELATIONS = ("replace-one", "add-remove")


def _check_relation(neighbouring):
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise ValueError(
            f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, "
            f"got {neighbouring!r}."
        )
    return neighbouring


@functools.singledispatch
def event_rdp(event, orders, neighbouring):
    """RDP curve of one event and the name of the bound that gave it.

    Parameters
    ----------
    event : GaussianEvent, PoissonGaussianEvent, ExponentialMechanismEvent or
        NoisyIterationEvent
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
def _(event: GaussianEvent, orders, neighbouring):
    return _named(
        event.count * gaussian_rdp(orders, event.noise_multiplier), "gaussian"
    )


@event_rdp.register
def _(event: PoissonGaussianEvent, orders, neighbouring):
    if event.sampling_rate >= 1.0:
        # Every record in every step: a plain Gaussian (sensitivity 2 clip
        # norms under replace-one), named as such.
        z = event.noise_multiplier / (2.0 if neighbouring == "replace-one" else 1.0)
        return _named(event.count * gaussian_rdp(orders, z), "gaussian")
    if neighbouring == "add-remove":
        curve = poisson_gaussian_rdp(
            orders, event.sampling_rate, event.noise_multiplier
        )
        name = "poisson-subsampled-gaussian"
    else:
        curve = poisson_gaussian_rdp_replace_one(
            orders, event.sampling_rate, event.noise_multiplier
        )
        name = "poisson-subsampled-gaussian (replace-one by weak triangle)"
    return _named(event.count * curve, name)


@event_rdp.register
def _(event: ExponentialMechanismEvent, orders, neighbouring):
    curve = pure_dp_rdp(orders, event.epsilon, bounded_range=event.bounded_range)
    name = "bounded-range" if event.bounded_range else "pure-dp"
    return _named(event.count * curve, name)


_COEFFICIENT_CACHE = OrderedDict()
_COEFFICIENT_CACHE_SIZE = 32


def _position_coefficients(event):
    """Per batch position, RDP slopes ``(composition, last-iterate)`` at z = 1.

    Both bounds are ``a * coefficient / z^2``: the noise of every step scales
    with ``z``, so the QP's optimum scales with ``1 / z^2``. Results are cached
    on the unit schedule, so calibration solves the QPs once.
    """
    cached = _COEFFICIENT_CACHE.get(event._key)
    if cached is not None:
        _COEFFICIENT_CACHE.move_to_end(event._key)
        return cached
    n_batches = int(event.batch.max()) + 1
    ratio = (event.sensitivity / event.noise_scale) ** 2 / 2.0
    composition = np.bincount(event.batch, weights=ratio, minlength=n_batches)
    last = np.full(n_batches, np.inf)
    if event.lipschitz is not None:
        for j in range(n_batches):
            shift = np.where(event.batch == j, event.sensitivity, 0.0)
            last[j] = last_iterate_coefficient(
                shift, event.noise_scale, event.lipschitz
            )
    composition.setflags(write=False)
    last.setflags(write=False)
    _COEFFICIENT_CACHE[event._key] = composition, last
    if len(_COEFFICIENT_CACHE) > _COEFFICIENT_CACHE_SIZE:
        _COEFFICIENT_CACHE.popitem(last=False)
    return composition, last


@event_rdp.register
def _(event: NoisyIterationEvent, orders, neighbouring):
    if neighbouring != "replace-one":
        raise ValueError(
            "Cyclic or shuffled batches are accounted under replace-one only: adding "
            "or removing a record shifts every later batch. Use neighbouring="
            "'replace-one', or Poisson sampling for add/remove."
        )
    composition, last = _position_coefficients(event)
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


class RDPAccountant:
    """Rényi-DP accountant over a fixed grid of orders.

    Events compose by adding their RDP curves (Mironov 2017, Proposition 1);
    where an event has several valid bounds, the pointwise smallest is used and
    named. Conversion to (epsilon, delta) is the tight one of
    :func:`rdp_to_epsilon`.

    Parameters
    ----------
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
    orders : array-like of float or None
        Rényi orders; default :data:`DEFAULT_ORDERS`.

    Examples
    --------
    >>> from skdp.accounting import RDPAccountant, PoissonGaussianEvent
    >>> acc = RDPAccountant(neighbouring="add-remove")
    >>> acc.compose(PoissonGaussianEvent(0.01, 1.1), count=1000).spent(1e-5).epsilon
    ... # doctest: +ELLIPSIS
    1.6...
    """

    def __init__(self, neighbouring="replace-one", orders=None):
        self.neighbouring = _check_relation(neighbouring)
        orders = DEFAULT_ORDERS if orders is None else orders
        self.orders = np.unique(np.asarray(orders, dtype=float))
        if self.orders.ndim != 1 or self.orders.size == 0 or self.orders[0] <= 1:
            raise ValueError("orders must be a non-empty 1-d array of values > 1.")
        self._rdp = np.zeros_like(self.orders)
        self._parts = []

    def compose(self, event, count=1):
        """Add ``count`` repetitions of ``event``; returns ``self`` (chainable)."""
        if int(count) != count or count < 0:
            raise ValueError(f"count must be a non-negative integer, got {count}.")
        curve, bounds = event_rdp(event, self.orders, self.neighbouring)
        # Rényi divergence is non-decreasing in the order (van Erven and
        # Harremoës 2014, Theorem 3), so a bound at a larger order also holds at
        # a smaller one: keep the suffix minimum (valid, and tighter where a
        # bound is loose near order 1).
        curve = np.minimum.accumulate(curve[::-1])[::-1]
        self._rdp = self._rdp + count * curve
        self._parts.append((curve * count, bounds))
        return self

    @property
    def rdp(self):
        """The composed RDP curve on ``orders`` (a copy)."""
        return self._rdp.copy()

    def get_epsilon(self, delta, *, warn=True):
        """Epsilon at ``delta`` of everything composed so far."""
        return rdp_to_epsilon(self.orders, self._rdp, delta, warn=warn)[0]

    def spent(self, delta, *, warn=True):
        """The :class:`PrivacySpent` of everything composed so far at ``delta``."""
        epsilon, index = rdp_to_epsilon(self.orders, self._rdp, delta, warn=warn)
        names = []
        for _, bounds in self._parts:
            if bounds[index] not in names:
                names.append(bounds[index])
        return PrivacySpent(
            epsilon=epsilon,
            delta=float(delta),
            accountant="rdp",
            bound=" + ".join(names) if names else "none",
            neighbouring=self.neighbouring,
            order=float(self.orders[index]) if math.isfinite(epsilon) else math.nan,
            orders=tuple(self.orders.tolist()),
            rdp=tuple(self._rdp.tolist()),
        )

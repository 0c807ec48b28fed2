"""PrivacySpent: the immutable privacy report of a fit, and its composition."""

import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ._rdp import rdp_to_epsilon

__all__ = ["PrivacySpent", "compose_spent"]


@dataclass(frozen=True)
class PrivacySpent:
    """What a mechanism spent: a valid (epsilon, delta)-DP upper bound.

    Keeps the whole Rényi curve so that several spends compose tightly
    (:func:`compose_spent`), not only the final epsilon.

    Attributes
    ----------
    epsilon : float
    delta : float
    accountant : str
        The accountant that gave the bound: ``"rdp"`` (Rényi DP), ``"gdp"``
        (exact Gaussian DP of a composition of Gaussian mechanisms) or
        ``"pld"`` (numerical privacy loss distribution); see
        :func:`skdp.accounting.account`.
    bound : str
        Which bound won at the optimal order (e.g. ``"cyclic-last-iterate"``).
    neighbouring : str
        ``"replace-one"`` or ``"add-remove"``.
    order : float
        The Rényi order at which the Rényi conversion was tightest (that of
        the Rényi bound, also when another accountant gave ``epsilon``).
    orders : tuple of float
        The grid of Rényi orders.
    rdp : tuple of float
        The RDP curve on ``orders``: a valid bound whatever ``accountant`` is,
        and what compositions fall back to.
    events : tuple of (event, count)
        What was accounted, kept when the tight accountants were asked for
        (``account(..., accountant="pld")``), so that other deltas and
        compositions can use them too; empty otherwise.
    """

    epsilon: float
    delta: float
    accountant: str
    bound: str
    neighbouring: str
    order: float
    orders: tuple
    rdp: tuple
    events: tuple = field(default=(), repr=False, compare=False)

    def __repr__(self):
        return (
            f"PrivacySpent(epsilon={self.epsilon:.4g}, delta={self.delta:.3g}, "
            f"bound={self.bound!r}, neighbouring={self.neighbouring!r}, "
            f"order={self.order:g}, accountant={self.accountant!r})"
        )

    def at_delta(self, delta):
        """The same spend, converted at another ``delta``."""
        if self.events:
            from ._calibration import account

            return account(
                list(self.events),
                delta,
                neighbouring=self.neighbouring,
                orders=self.orders,
                warn=False,
                accountant="pld",
            )
        epsilon, index = rdp_to_epsilon(self.orders, self.rdp, delta, warn=False)
        return PrivacySpent(
            epsilon=epsilon,
            delta=float(delta),
            accountant=self.accountant,
            bound=self.bound,
            neighbouring=self.neighbouring,
            order=float(self.orders[index]) if math.isfinite(epsilon) else math.nan,
            orders=self.orders,
            rdp=self.rdp,
        )

    def to_dict(self):
        """A JSON-ready dict (without the curve)."""
        out = asdict(self)
        del out["orders"], out["rdp"], out["events"]
        return out


def compose_spent(spents, *, delta=None):
    """Compose several spends (adaptively, in any order) on their Rényi curves.

    When every spend kept its events (``accountant="pld"``), the events are
    also composed by the tight accountants and the smaller bound is reported.

    Parameters
    ----------
    spents : iterable of PrivacySpent
        Same order grid and neighbouring relation.
    delta : float or None
        Delta of the composed report. Default: the largest delta of the parts.

    Returns
    -------
    PrivacySpent
    """
    spents = list(spents)
    if not spents:
        raise ValueError("Nothing to compose: pass at least one PrivacySpent.")
    first = spents[0]
    for other in spents[1:]:
        if other.orders != first.orders:
            raise ValueError("Spends on different order grids cannot be composed.")
        if other.neighbouring != first.neighbouring:
            raise ValueError(
                "Spends under different neighbouring relations cannot be composed: "
                f"{first.neighbouring!r} and {other.neighbouring!r}."
            )
    delta = max(s.delta for s in spents) if delta is None else float(delta)
    rdp = np.sum([s.rdp for s in spents], axis=0)
    bounds = []
    for s in spents:
        if s.bound not in bounds:
            bounds.append(s.bound)
    epsilon, index = rdp_to_epsilon(first.orders, rdp, delta)
    if all(s.events for s in spents):
        from ._calibration import account

        tight = account(
            [pair for s in spents for pair in s.events],
            delta,
            neighbouring=first.neighbouring,
            orders=first.orders,
            warn=False,
            accountant="pld",
        )
        if tight.epsilon < epsilon:
            return replace(tight, bound=" + ".join(bounds))
    return PrivacySpent(
        epsilon=epsilon,
        delta=delta,
        accountant=first.accountant,
        bound=" + ".join(bounds),
        neighbouring=first.neighbouring,
        order=float(first.orders[index]) if math.isfinite(epsilon) else math.nan,
        orders=first.orders,
        rdp=tuple(rdp.tolist()),
    )

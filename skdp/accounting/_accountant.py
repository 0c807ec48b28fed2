"""Accountants (events in, a valid (epsilon, delta) bound out) and their report.

Every accountant is built for a neighbouring relation and a grid of Rényi
orders, composes events (``compose(event, count)``, chainable) and reports a
:class:`PrivacySpent` at a delta. Each keeps the Rényi-DP curve of what it
composed, a valid bound whatever else it reports and what compositions of
reports fall back to; they differ in the conversion to (epsilon, delta):

- :class:`RDPAccountant`: the Rényi conversion (``accountant="rdp"``).
- :class:`GDPAccountant`: exact Gaussian DP, for compositions of Gaussian
  mechanisms and cyclic runs (``_gdp.py``).
- :class:`PLDAccountant`: the privacy loss distribution, exact for Gaussian
  mechanisms and numerical for Poisson steps and random allocation
  (``_pld.py``).
- :class:`TightestAccountant`: the smaller valid bound of the Rényi and PLD
  conversions (``accountant="pld"``).

Names map to accountants in one place, :func:`make_accountant`. The report
lives here too: a tight report keeps its events, and re-converting it at
another delta (:meth:`PrivacySpent.at_delta`) or composing it
(:func:`compose_spent`) asks :class:`TightestAccountant` again.
"""

import abc
import math
from dataclasses import asdict, dataclass, field, replace
from decimal import ROUND_CEILING, Decimal
from typing import NamedTuple

import numpy as np

from ._event_rdp import WEAK_TRIANGLE, event_rdp
from ._neighbouring import Neighbouring
from ._pld import CHAINED_PAIR, PLDComposition
from ._policy import DEFAULT_POLICY
from ._rdp import DEFAULT_ORDERS, rdp_to_epsilon

__all__ = [
    "ACCOUNTANTS",
    "Accountant",
    "GDPAccountant",
    "PLDAccountant",
    "PrivacyPlan",
    "PrivacySpent",
    "RDPAccountant",
    "TightestAccountant",
    "compose_spent",
    "composed",
    "epsilon_text",
    "make_accountant",
]


def epsilon_text(epsilon, digits=4):
    """``epsilon`` to ``digits`` significant digits, rounded up.

    A printed bound must stay a bound: 1.99973 prints as 2 and 2.00004 as
    2.001, never 2. The float's shortest decimal form (its ``repr``) is
    rounded, in decimal, so 0.1 prints as 0.1.
    """
    if not math.isfinite(epsilon) or epsilon == 0:
        return f"{epsilon:g}"
    value = Decimal(repr(float(epsilon)))
    step = Decimal(1).scaleb(value.adjusted() - digits + 1)
    return f"{float(value.quantize(step, rounding=ROUND_CEILING)):.{digits}g}"


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
        """The spend, epsilon rounded up; the Rényi order if its bound won."""
        order = f"order={self.order:g}, " if self.accountant == "rdp" else ""
        return (
            f"PrivacySpent(epsilon={epsilon_text(self.epsilon)}, "
            f"delta={self.delta:.3g}, "
            f"bound={self.bound!r}, neighbouring={self.neighbouring!r}, "
            f"{order}accountant={self.accountant!r})"
        )

    def at_delta(self, delta):
        """The same spend, converted at another ``delta``."""
        if self.events:
            accountant = TightestAccountant(self.neighbouring, self.orders)
            return composed(accountant, self.events).spent(delta, warn=False)
        epsilon, index = rdp_to_epsilon(self.orders, self.rdp, delta, warn=False)
        return PrivacySpent(
            epsilon=epsilon,
            delta=float(delta),
            accountant=self.accountant,
            bound=self.bound,
            neighbouring=self.neighbouring,
            order=_order_at(self.orders, index, epsilon),
            orders=self.orders,
            rdp=self.rdp,
        )

    def to_dict(self):
        """A JSON-ready dict (without the curve)."""
        out = asdict(self)
        del out["orders"], out["rdp"], out["events"]
        return out


def _order_at(orders, index, epsilon):
    """The best order of a conversion (nan when no order gave a finite bound)."""
    return float(orders[index]) if math.isfinite(epsilon) else math.nan


class PrivacyPlan(NamedTuple):
    """What a fit on a given number of rows will spend, known before any data.

    Returned by the estimators' ``privacy_plan(n_samples)`` (and a
    :class:`~skdp.pipeline.PrivatePipeline`'s); a tuple, so
    ``noise, spent, delta = est.privacy_plan(n)`` unpacks it.

    Attributes
    ----------
    noise_multiplier : float
        The calibrated noise multiplier of the model's run.
    privacy_spent : PrivacySpent
        The spend the fitted estimator will report as ``privacy_spent_``.
    delta : float
        The delta that spend is reported at.
    """

    noise_multiplier: float
    privacy_spent: "PrivacySpent"
    delta: float


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
        accountant = TightestAccountant(first.neighbouring, first.orders)
        pairs = [pair for s in spents for pair in s.events]
        tight = composed(accountant, pairs).spent(delta, warn=False)
        if tight.epsilon < epsilon:
            return replace(tight, bound=" + ".join(bounds))
    return PrivacySpent(
        epsilon=epsilon,
        delta=delta,
        accountant=first.accountant,
        bound=" + ".join(bounds),
        neighbouring=first.neighbouring,
        order=_order_at(first.orders, index, epsilon),
        orders=first.orders,
        rdp=tuple(rdp.tolist()),
    )


class Accountant(abc.ABC):
    """What turns privacy events into a valid (epsilon, delta) bound.

    An accountant is built empty for a neighbouring relation and a grid of
    Rényi orders, composes events and reports what they spent. It is the
    contract :func:`~skdp.accounting.account` and
    :func:`~skdp.accounting.calibrate_noise_multiplier` accept (``accountant=``
    an instance: its kind and settings are used on a fresh copy).

    Attributes
    ----------
    neighbouring : Neighbouring
        The relation the reports hold for.
    orders : ndarray of shape (n_orders,)
        The grid of Rényi orders of the reports' curves.
    """

    @abc.abstractmethod
    def compose(self, event, count=1):
        """Add ``count`` repetitions of ``event``; returns ``self`` (chainable).

        Parameters
        ----------
        event : event
            One of :mod:`skdp.accounting.events`.
        count : int, default=1

        Returns
        -------
        self
        """

    @abc.abstractmethod
    def spent(self, delta, *, warn=True):
        """The :class:`PrivacySpent` of everything composed so far at ``delta``.

        Parameters
        ----------
        delta : float in (0, 1)
        warn : bool, default=True
            Warn when the best Rényi order is at the end of the grid.

        Returns
        -------
        PrivacySpent
        """

    @abc.abstractmethod
    def fresh(self):
        """An empty accountant of the same kind, relation, orders and settings.

        Returns
        -------
        Accountant
        """

    def get_epsilon(self, delta, *, warn=True):
        """Epsilon at ``delta`` of everything composed so far.

        Parameters
        ----------
        delta : float in (0, 1)
        warn : bool, default=True

        Returns
        -------
        float
        """
        return self.spent(delta, warn=warn).epsilon

    def calibration_stages(self):
        """Empty accountants whose epsilons calibration searches, in turn.

        Calibration brackets the noise on the first and continues below its
        answer on each later one while that one meets the target (see
        :func:`~skdp.accounting.calibrate_noise_multiplier`). Default: this
        accountant alone.

        Returns
        -------
        tuple of Accountant
        """
        return (self.fresh(),)


def composed(accountant, pairs):
    """``accountant`` after composing every ``(event, count)`` of ``pairs``."""
    for event, count in pairs:
        accountant.compose(event, count)
    return accountant


class RDPAccountant(Accountant):
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
    1.7...
    """

    def __init__(self, neighbouring="replace-one", orders=None):
        self.neighbouring = Neighbouring.parse(neighbouring)
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

    def fresh(self):
        """An empty Rényi accountant on the same relation and orders."""
        return RDPAccountant(self.neighbouring, self.orders)

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
            neighbouring=self.neighbouring.value,
            order=_order_at(self.orders, index, epsilon),
            orders=tuple(self.orders.tolist()),
            rdp=tuple(self._rdp.tolist()),
        )


class _TightAccountant(Accountant):
    """The Rényi record of the events and a tight conversion beside it.

    Subclasses give the conversion (:meth:`_tight`); where it has no bound
    for the events, the report's epsilon is infinite (a valid bound).
    """

    #: Name of the conversion in :attr:`PrivacySpent.accountant`.
    name = None

    def __init__(self, neighbouring="replace-one", orders=None, *, policy=None):
        self._renyi = RDPAccountant(neighbouring, orders)
        self._loss = PLDComposition(self._renyi.neighbouring)
        self._pairs = []
        self.policy = DEFAULT_POLICY if policy is None else policy

    @property
    def neighbouring(self):
        """The relation the reports hold for."""
        return self._renyi.neighbouring

    @property
    def orders(self):
        """The grid of Rényi orders of the reports' curves."""
        return self._renyi.orders

    def compose(self, event, count=1):
        """Add ``count`` repetitions of ``event``; returns ``self`` (chainable)."""
        self._renyi.compose(event, count)
        self._loss.compose(event, count)
        self._pairs.append((event, count))
        return self

    def fresh(self):
        """An empty accountant of the same kind, relation, orders and policy."""
        return type(self)(self.neighbouring, self.orders, policy=self.policy)

    @abc.abstractmethod
    def _tight(self, delta, reference):
        """``(epsilon, name)`` of the conversion at ``delta``, or None."""

    def spent(self, delta, *, warn=True):
        """The report of the tight conversion at ``delta`` (``inf`` if none).

        ``warn`` is accepted for the contract; the Rényi epsilon here only
        plans the conversion, so its end-of-grid warning does not apply.
        """
        renyi = self._renyi.spent(delta, warn=False)
        found = self._tight(delta, renyi.epsilon)
        if found is None:
            return replace(renyi, epsilon=math.inf, accountant=self.name)
        return _with_tight(renyi, *found)


def _with_tight(spent, epsilon, accountant, pair=CHAINED_PAIR):
    """``spent`` reporting a tight ``epsilon``, its bound named accordingly.

    ``pair``: how the PLD bounded replace-one (the chain unless it says).
    """
    bound = spent.bound
    if accountant == "pld":
        bound = bound.replace(WEAK_TRIANGLE, pair)
    return replace(spent, epsilon=epsilon, accountant=accountant, bound=bound)


class GDPAccountant(_TightAccountant):
    """Exact Gaussian DP of compositions of Gaussian mechanisms and cyclic runs.

    Covers :class:`~skdp.accounting.GaussianEvent`,
    :class:`~skdp.accounting.GaussianSumEvent` (and Poisson events of rate
    1), random allocation with one step an epoch, and cyclic or shuffled
    :class:`~skdp.accounting.NoisyIterationEvent` runs under replace-one
    (Dong, Roth and Su 2022; Bok, Su and Altschuler 2024: see
    docs/accounting.md). For any other event the reported epsilon is
    infinite. The report keeps the Rényi curve (``rdp``) for compositions.

    Parameters
    ----------
    neighbouring, orders, policy
        As in :class:`PLDAccountant`.

    Examples
    --------
    >>> from skdp.accounting import GaussianEvent, GDPAccountant
    >>> acc = GDPAccountant().compose(GaussianEvent(2.0), count=4)
    >>> round(acc.spent(1e-5).epsilon, 3)
    4.377
    """

    name = "gdp"

    def _tight(self, delta, reference):
        return self._loss.gaussian_epsilon(delta)


class PLDAccountant(_TightAccountant):
    """The privacy loss distribution: exact or numerical (epsilon, delta).

    Exact Gaussian DP where every event is a Gaussian mechanism or a cyclic
    run (as :class:`GDPAccountant`); the numerical PLD of Poisson-subsampled
    Gaussian steps and of random allocation epochs (either with Gaussian releases),
    under either relation (replace-one chained through the data set without
    the record; docs/accounting.md, "Tighter than Rényi"). The lattice is
    planned from the Rényi epsilon of the same events, and the bound carries
    a rounding slack of about ``rel_slack`` of epsilon. For events outside
    these cases, or a Poisson lattice past its size cap, the reported
    epsilon is infinite (a random allocation direction past its caps takes
    its own Rényi bound instead).

    Parameters
    ----------
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
    orders : array-like of float or None
        Rényi orders of the kept curve; default :data:`DEFAULT_ORDERS`.
    rel_slack : float or None, default=None
        Rounding slack of the numerical PLD as a share of epsilon; None: the
        policy's report slack.
    policy : AccountingPolicy or None, default=None
        Tuning of the numerical accountants (``skdp.accounting._policy``);
        None: the defaults.
    """

    name = "pld"

    def __init__(
        self, neighbouring="replace-one", orders=None, *, rel_slack=None, policy=None
    ):
        super().__init__(neighbouring, orders, policy=policy)
        self.rel_slack = (
            self.policy.pld_report_slack if rel_slack is None else float(rel_slack)
        )

    def fresh(self):
        """An empty accountant of the same relation, orders, slack and policy."""
        return PLDAccountant(
            self.neighbouring, self.orders, rel_slack=self.rel_slack, policy=self.policy
        )

    def _tight(self, delta, reference):
        return self._loss.epsilon(delta, reference, self.rel_slack, self.policy)


class TightestAccountant(_TightAccountant):
    """The smallest valid bound of the Rényi and the PLD conversions.

    What ``accountant="pld"`` names: the Rényi-DP report first, then the
    conversions of :class:`PLDAccountant` where they apply (at the policy's
    search and report slacks), the smaller valid epsilon reported and named
    in :attr:`PrivacySpent.accountant`. The report keeps its events, so that
    :meth:`PrivacySpent.at_delta` and :func:`compose_spent` stay tight.
    Calibration brackets the noise on the Rényi bound and continues below it
    on the PLD while that meets the target.

    Parameters
    ----------
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
    orders : array-like of float or None
        Rényi orders; default :data:`DEFAULT_ORDERS`.
    policy : AccountingPolicy or None, default=None
        Tuning of the numerical accountants (``skdp.accounting._policy``);
        None: the defaults.
    """

    name = "pld"

    def _tight(self, delta, reference):
        """The smallest PLD bound over the search and report slacks.

        The search's slack is among them, computed as the search computes
        it, so the report is never above what calibration certified.
        """
        best = None
        slacks = (self.policy.pld_search_slack, self.policy.pld_report_slack)
        for rel_slack in dict.fromkeys(slacks):
            found = self._loss.epsilon(delta, reference, rel_slack, self.policy)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
            if found is not None and found[1] == "gdp":
                break  # exact: no slack to vary
        return best

    def spent(self, delta, *, warn=True):
        """The smaller of the Rényi and the PLD report at ``delta``, with events.

        Parameters
        ----------
        delta : float in (0, 1)
        warn : bool, default=True
            Warn when the Rényi report stands and its best order is at the end
            of the grid.

        Returns
        -------
        PrivacySpent
        """
        spent = self._renyi.spent(delta, warn=False)
        tight = self._tight(delta, spent.epsilon)
        spent = replace(spent, events=tuple(self._pairs))
        if tight is None or not tight[0] < spent.epsilon:
            if warn:
                # Re-run the conversion for its end-of-grid warning only.
                rdp_to_epsilon(spent.orders, spent.rdp, delta, warn=True)
            return spent
        return _with_tight(spent, *tight)

    def calibration_stages(self):
        """The Rényi accountant, then the PLD at the policy's search slack."""
        search = PLDAccountant(
            self.neighbouring,
            self.orders,
            rel_slack=self.policy.pld_search_slack,
            policy=self.policy,
        )
        return RDPAccountant(self.neighbouring, self.orders), search


#: Accountants by name, as ``account(..., accountant=name)`` takes them.
ACCOUNTANTS = {"rdp": RDPAccountant, "pld": TightestAccountant}


def make_accountant(accountant, neighbouring="replace-one", orders=None):
    """An empty accountant named by ``accountant``, or a fresh copy of one.

    Parameters
    ----------
    accountant : {"rdp", "pld"} or Accountant
        A name of :data:`ACCOUNTANTS`, or an accountant whose kind and
        settings to use (it is not changed).
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
        Must be the accountant's own relation when one is given.
    orders : array-like of float or None
        For a name, the Rényi orders (None: the default grid); for an
        accountant, None or its own orders.

    Returns
    -------
    Accountant
    """
    if isinstance(accountant, Accountant):
        _check_same_setting(accountant, neighbouring, orders)
        return accountant.fresh()
    if not isinstance(accountant, str) or accountant not in ACCOUNTANTS:
        raise ValueError(
            f"accountant must be one of {tuple(ACCOUNTANTS)} or an Accountant, "
            f"got {accountant!r}."
        )
    return ACCOUNTANTS[accountant](neighbouring, orders)


def _check_same_setting(accountant, neighbouring, orders):
    """Refuse a relation or orders other than the given accountant's own."""
    relation = Neighbouring.parse(neighbouring)
    own = Neighbouring.parse(accountant.neighbouring)
    if relation is not own:
        raise ValueError(
            f"The accountant is for neighbouring={own.value!r} "
            f"but neighbouring={relation.value!r} was asked for; build the "
            "accountant for that relation, or pass the relation it was built for."
        )
    if orders is not None and not np.array_equal(
        np.unique(np.asarray(orders, dtype=float)), accountant.orders
    ):
        raise ValueError(
            "orders differ from the accountant's own; build the accountant with "
            "them, or leave orders=None."
        )

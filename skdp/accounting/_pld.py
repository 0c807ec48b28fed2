"""The numerical privacy loss distribution (PLD) accountant.

:class:`PLDComposition` holds what the privacy loss distribution needs of
each composed event (a rule per event type, dispatched like
:func:`~skdp.accounting.event_rdp`) and converts it to an epsilon where a
tight conversion applies:

- **Gaussian mechanisms and cyclic runs** (exact): Gaussian DP, ``_gdp.py``.
- **Poisson-subsampled Gaussian steps** (DP-SGD with Poisson batches),
  possibly with Gaussian releases, under add/remove: the privacy loss
  distribution of the dominating pair of one step, ``P = (1-q) N(0, z^2) +
  q N(1, z^2)`` against ``Q = N(0, z^2)`` (remove) and the reverse pair
  (add), composed by convolution (Koskela, Jälkö, Honkela 2020; Zhu, Dong,
  Wang 2022, Theorem 10 for adaptive composition). The hockey-stick
  divergence of the composition is ``delta(eps) = E[(1 - exp(eps - L))_+]``
  with ``L`` the sum of the steps' privacy losses, and the answer is the
  larger over the two directions. Under replace-one: the pair ``P = (1-q)
  N(0, z^2) + q N(1, z^2)`` against ``(1-q) N(0, z^2) + q N(-1, z^2)``,
  which dominates every step whatever the two records' clipped gradients
  (docs/accounting.md, "The replace-one pair": advanced joint convexity,
  Balle, Barthe and Gaboardi 2018, Theorem 2, then a comonotone coupling
  and a monotone likelihood ratio), one lattice (its loss distribution is
  the same both ways); past its shape condition
  (:func:`replace_pair_is_direct`), the two add/remove directions chained
  through the data set without the record (group privacy, see
  :meth:`PLDComposition.epsilon`).
- **Random allocation epochs**, possibly with Gaussian releases (as for
  Poisson steps): ``_allocation_pld.py``.

How the numerical PLD stays an upper bound (the proof, step by step). Every
lattice is a distribution on ``(offset + k) m h0`` for a global quantum
``h0`` and an integer spacing ``m``, plus a mass at ``+inf``.

1. **Rounding that never lowers the mean.** Each step's loss ``L_t`` is
   rounded at random to the two lattice points around it, up with a
   probability at least ``(L_t - kh) / h``, so that ``E[R_t | L_t] >= L_t``.
   The lattice needs only the per-cell total of that probability, which is
   bounded above in closed form: the remove loss ``l(x)`` is convex in
   ``x``, so it lies below its chord on the cell's ``x``-interval
   ``[a, b]`` and ``E[(L - kh) 1{cell}] <= h E[(X - a) 1{cell}] / (b - a)``;
   the add loss ``-l(x)`` is concave, so by Jensen's inequality
   ``E[L 1{cell}] <= P(cell) (-l(E[X | cell]))``; the replace-one loss
   ``l(x) - l(-x)`` is convex right of 0 and concave left of it, so each
   cell is cut at 0 and each side bounded its way. Both use the first
   moment of a normal on an interval (exact). The same bounds on a grid of
   sub-intervals of each cell (a sum of valid bounds, one a piece) are
   tighter where ``l`` bends within a cell, and the smaller is used; the
   step's mean is then within about 1e-5 of a spacing of the exact one
   (the whole-cell chord alone is 1-4% of a spacing above it, which at a
   million steps is many times the mean of the loss). An allowance for
   floating-point error (1e-8 of the cell's mass, plus the error terms of
   the moment formula) is added to the up-probability.
2. **Coarsening.** Composing ``T`` steps by repeated squaring, the lattice
   of ``2^i`` steps is re-rounded the same way onto a coarser integer
   multiple of ``h0`` as it widens (and two lattices are put on a common
   spacing before they are convolved), so the lattices keep a bounded
   number of points at any ``T``. The rounding errors (every step's and
   every re-rounding's, each copy counted) have non-negative conditional
   means given everything before and each lies in an interval of its
   lattice's spacing ``h_j``, so by the Azuma-Hoeffding inequality
   ``P(sum errors <= -s) <= exp(-2 s^2 / V)`` with ``V = sum h_j^2``,
   carried exactly through every convolution. On the complement,
   ``sum L_t <= R + s`` for the lattice variable ``R``; since ``l ->
   (1 - exp(eps - l))_+`` is increasing and at most 1, ``delta_true(eps) <=
   delta_lattice(eps - s) + eta`` with ``s = sqrt(V log(1/eta) / 2)``.
3. **Tails.** The loss's upper tail beyond a point of small probability is
   moved to ``+inf`` (counted in full in delta); the lower tail is moved
   *up* to the lowest point kept. Both only increase the loss.
4. **Floating point.** Convolutions by FFT add to delta a bound on their L1
   error, ``n_out * 10 * u * log2(n) * ||a||_2 ||b||_2`` (``u`` the unit
   roundoff; a worst-case bound), and negative outputs are set to 0;
   re-roundings add a few ``u`` per point.
5. **Conversion.** ``eps' = min{eps : delta_lattice(eps) <= delta - eta -
   allowance}`` is exact on the lattice (piecewise closed form), and the
   report is ``eps' + s``.

The spacings are planned so that ``s`` is a small fraction (``rel_slack``)
of a first estimate of epsilon (the Rényi one): the price of rigour is that
fraction of epsilon (docs/benchmarks.md, "Accounting at scale").
"""

import functools
import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize, special

from . import _lattice, events
from ._allocation_pld import allocation_epsilon
from ._gdp import gaussian_dp_epsilon, gdp_epsilon
from ._neighbouring import Neighbouring
from ._policy import DEFAULT_POLICY

__all__ = ["CHAINED_PAIR", "DIRECT_PAIR", "PLDComposition"]

# How a report names the replace-one bound the PLD built.
DIRECT_PAIR = "(replace-one: antipodal pair)"
CHAINED_PAIR = "(replace-one: remove, then add)"

# Grid (in standard units) of the central-limit estimate that plans the
# lattices; planning only: any estimate keeps the bound valid.
_CLT_GRID = np.linspace(-12.0, 12.0, 4001)

# Width, in units of z^2, of the sub-intervals of the step lattice's
# refined up-probabilities: a chord of exp(x / z^2) over it overshoots a
# cell's mean by at most 1/12 of it in units of the spacing, so the bias of
# a step is below 1e-4 of a spacing (docs/benchmarks.md, "Accounting at scale").
_SUB_WIDTH = 1e-3
# Most sub-interval grid points of one step lattice (the width grows past it).
_SUB_POINTS = 1 << 18

# Replace-one add hop: planned at delta exp(-eps_1) up to this first-hop
# epsilon; past it, with the policy's fixed budgets (the allowances
# exp(-eps_1) would give make the convolutions quadratic in time).
_MAX_HOP_EXPONENT = 20.0


class PLDComposition:
    """The events composed so far, as the privacy loss distribution sees them.

    Each event adds its part (:meth:`compose`, one rule per event type):
    Gaussian releases add their ``1 / z^2`` (in the relation's units for a
    :class:`~skdp.accounting.GaussianEvent`, in per-record units for a sum),
    Poisson steps and random allocation epochs are kept for their lattices,
    cyclic runs for their exact Gaussian DP. An event type without a rule
    makes the composition unsupported (no tight bound).

    Parameters
    ----------
    neighbouring : {"replace-one", "add-remove"}
    """

    def __init__(self, neighbouring):
        self.relation = Neighbouring.parse(neighbouring)
        # Gaussian parts' 1 / z^2, summed exactly (math.fsum) so that a bound
        # does not depend on the order the events came in.
        self._relation_parts = []
        self._record_parts = []
        self.steps = []
        self.cyclic = []
        self.allocation = []
        self.supported = True

    @property
    def relation_mu2(self):
        """``sum 1 / z^2`` of the Gaussian releases in the relation's units."""
        return math.fsum(self._relation_parts)

    @property
    def record_mu2(self):
        """``sum 1 / z^2`` of the Gaussian releases of sums (per-record units)."""
        return math.fsum(self._record_parts)

    def compose(self, event, count=1):
        """Add ``count`` repetitions of ``event``; returns ``self``."""
        self._add(event, count)
        return self

    @functools.singledispatchmethod
    def _add(self, event, count):
        self.supported = False

    @_add.register
    def _(self, event: events.GaussianEvent, count):
        n = count * event.count
        self._relation_parts.append(n / event.noise_multiplier**2)

    @_add.register
    def _(self, event: events.GaussianSumEvent, count):
        n = count * event.count
        self._record_parts.append(n / event.noise_multiplier**2)

    @_add.register
    def _(self, event: events.PoissonGaussianEvent, count):
        n = count * event.count
        if event.sampling_rate >= 1.0:
            # Every record in: a Gaussian release of the sum.
            self._record_parts.append(n / event.noise_multiplier**2)
        elif event.sampling_rate > 0.0 and n > 0:
            self.steps.append((event.sampling_rate, event.noise_multiplier, n))

    @_add.register
    def _(self, event: events.RandomAllocationGaussianEvent, count):
        epochs = count * event.epochs
        if event.steps_per_epoch == 1:
            # One step an epoch: one Gaussian of per-record sensitivity 1.
            self._record_parts.append(epochs / event.noise_multiplier**2)
        elif epochs > 0:
            self.allocation.append(
                (event.steps_per_epoch, event.noise_multiplier, epochs)
            )

    @_add.register
    def _(self, event: events.NoisyIterationEvent, count):
        if self.relation is not Neighbouring.REPLACE_ONE:
            self.supported = False
        elif count > 0:
            self.cyclic.append((event, int(count)))

    def gaussian_epsilon(self, delta):
        """Exact Gaussian DP epsilon, or None unless every part is Gaussian.

        Gaussian releases and cyclic runs (``_gdp.py``); a release of a sum
        moves by the relation's sum factor times the per-record bound.

        Returns
        -------
        (epsilon, "gdp") or None
        """
        if not self.supported or self.steps or self.allocation:
            return None
        mu2 = self.relation_mu2 + self.relation.sum_factor**2 * self.record_mu2
        return gdp_epsilon(mu2, self.cyclic, delta), "gdp"

    def epsilon(self, delta, reference, rel_slack, policy=DEFAULT_POLICY):
        """Tight epsilon at ``delta``, or None where no tight bound applies.

        Only Gaussian parts: exact Gaussian DP (:meth:`gaussian_epsilon`).
        Poisson-subsampled steps: under add/remove, the larger of the two
        directions' lattice epsilons. Under replace-one, the replace-one
        pair's lattice (module docstring), Gaussian releases composed on it
        (a sum's shift is twice its per-record bound). Past the pair's shape
        condition (:func:`replace_pair_is_direct`), Poisson steps are
        accounted through the data set without the record (replace = remove,
        then add): if the run is ``(eps_1, delta_1)``-DP from ``D`` to ``D -
        x`` (the "remove" direction) and ``(eps_2, delta_2)``-DP from ``D -
        x`` to ``D - x + x'`` (the "add" direction), it is ``(eps_1 + eps_2,
        delta_1 + exp(eps_1) delta_2)``-DP from ``D`` to ``D'`` (group
        privacy; the intermediate data set only needs the mechanism, with the
        same public plan, to be defined on it). Each hop has its own
        Hoeffding failure probability (a share of its delta), and the add hop
        is also ``sum_t -log(1 - q_t)``-DP with delta 0 (its loss is bounded
        above). The split of delta is optimised over a grid; by symmetry of
        the relation the same bound holds from ``D'`` to ``D``. Replace-one
        :class:`~skdp.accounting.GaussianEvent` parts (whose multiplier is
        relative to a replace-one sensitivity, not a per-record bound) are
        not chained: such mixtures keep the Rényi bound. Random allocation
        epochs, with Gaussian releases under the same conditions: the
        lattice PLD of ``_allocation_pld.py`` in both relations; mixed with
        Poisson steps or cyclic runs, None.

        Parameters
        ----------
        delta : float in (0, 1)
        reference : float or None
            A valid epsilon already known (the Rényi one); sets the lattice
            spacings so that the rounding slack is about ``rel_slack`` of it
            (of the lattice's own first answer, when that is far below it).
        rel_slack : float
        policy : AccountingPolicy, default=DEFAULT_POLICY

        Returns
        -------
        (epsilon, name) or (epsilon, name, pair) or None
            ``name`` is ``"gdp"`` (exact, all events Gaussian) or ``"pld"``;
            Poisson steps add ``pair``, how replace-one was bounded
            (:data:`DIRECT_PAIR` or :data:`CHAINED_PAIR`). None if an event
            has no rule, if random allocation comes with Poisson steps or
            cyclic events, if either comes with cyclic events or (under the
            replace-one chain) with replace-one Gaussian events, or if a
            lattice would be too large.
        """
        if not self.supported:
            return None
        if self.allocation:
            return self._allocation_epsilon(delta, reference, rel_slack, policy)
        if not self.steps:
            return self.gaussian_epsilon(delta)
        return self._poisson_epsilon(delta, reference, rel_slack, policy)

    def _allocation_epsilon(self, delta, reference, rel_slack, policy):
        """Random allocation epochs with Gaussian releases, or None.

        The lattices of ``_allocation_pld.py``, the releases composed on
        them in each hop or direction (its step 4), under the same
        conditions as the releases of Poisson steps.
        """
        replace_one = self.relation is Neighbouring.REPLACE_ONE
        if self.steps or self.cyclic or (replace_one and self.relation_mu2 > 0):
            return None
        return allocation_epsilon(
            self.allocation,
            delta,
            self.relation,
            reference,
            rel_slack,
            policy,
            gauss_mu2=self.relation_mu2 + self.record_mu2,
        )

    def _poisson_epsilon(self, delta, reference, rel_slack, policy):
        """Poisson steps with Gaussian releases (the lattices here), or None.

        Returns ``(epsilon, "pld", pair)``, ``pair`` naming the replace-one
        bound (the direct pair or the chain).
        """
        steps = _lattice.merged(self.steps)
        directions = _directions(self.relation, steps)
        chained = directions is None
        if self.cyclic or (chained and self.relation_mu2 > 0):
            return None
        if reference is None or not math.isfinite(reference) or reference <= 0:
            return None
        # A sum moves by the relation's sum factor in the lattice pair's
        # units, by one per-record bound in each hop of the chain.
        factor = 1.0 if chained else self.relation.sum_factor
        gauss_mu2 = self.relation_mu2 + factor**2 * self.record_mu2
        # The Rényi epsilon can be several times the tight one (tiny delta,
        # many steps): plan the lattice for the smaller of it and a multiple
        # of a central-limit estimate (any plan gives a valid bound).
        direction = "remove" if chained else directions[0]
        guess = _clt_epsilon(steps, gauss_mu2, delta, direction)
        planned = min(
            reference, max(policy.clt_factor * guess, policy.min_planned_epsilon)
        )
        # To 8 digits: the Rényi reference's last bits depend on the order the
        # events were composed in, and a bound must not.
        planned = float(f"{planned:.8g}")

        def epsilon_at(planned):
            if chained:
                return _chained_bound(
                    steps, gauss_mu2, delta, planned, rel_slack, policy
                )
            return _lattice_epsilon(
                steps, gauss_mu2, delta, directions, planned, rel_slack, policy
            )

        found = _lattice.plan_twice(
            epsilon_at, planned, policy.min_planned_epsilon, policy.replan_below
        )
        if found is None:
            return None
        return (*found, CHAINED_PAIR if chained else DIRECT_PAIR)


def _clt_epsilon(steps, gauss_mu2, delta, direction="remove"):
    """A central-limit estimate of epsilon (planning only, not a bound).

    The GDP epsilon of ``mu^2 = sum_t Var(L_t)``, the step losses'
    variances (the remove direction's, or the replace-one pair's) by
    quadrature on a grid of ``x``; ``inf`` where a loss on the grid
    overflows (tiny noise).
    """
    mu2 = gauss_mu2
    x_unit = _CLT_GRID
    weights = np.exp(-0.5 * x_unit**2)
    weights /= weights.sum()
    for q, z, count in steps:
        moments = np.zeros(2)
        for weight, mean in ((1.0 - q, 0.0), (q, 1.0)):
            x = mean + z * x_unit
            loss = _loss_above(x, q, z)[0]
            if direction == "replace":
                loss = loss - _loss_above(-x, q, z)[0]
            if not np.all(np.isfinite(loss)):
                return math.inf
            moments += weight * np.array([weights @ loss, weights @ loss**2])
        mu2 += count * max(moments[1] - moments[0] ** 2, 0.0)
    return gaussian_dp_epsilon(math.sqrt(mu2), delta)


@dataclass(frozen=True)
class _Plan:
    """Lattice spacings and budgets of every group of Poisson steps.

    ``levels`` holds one :class:`~._lattice.Levels` a ``(q, z)`` group;
    ``tau_combine`` and ``allowance_combine`` are the tail and floating-point
    budgets of each combination of groups (and of the Gaussian release).
    """

    h0: float
    levels: list
    tau_combine: float
    allowance_combine: float

    def scaled(self, tail, floating):
        """The same plan with every tail and floating-point budget scaled."""
        return replace(
            self,
            levels=[levels.scaled(tail, floating) for levels in self.levels],
            tau_combine=self.tau_combine * tail,
            allowance_combine=self.allowance_combine * floating,
        )

    def relaxed(self, factor):
        """The same plan, its long convolutions allowed ``factor`` times more."""
        return replace(
            self, levels=[replace(levels, relax=factor) for levels in self.levels]
        )


def _plan(steps, slack, eta, tail, floating, policy, directions=("remove", "add")):
    """Lattice spacings (integer multiples of ``h0``) and tail cut-offs.

    Parameters
    ----------
    steps : list of (q, z, count)
    slack : float
        Target Hoeffding slack ``s`` at failure probability ``eta``.
    eta : float
    tail : float
        Target total mass moved to +inf by the cut-offs.
    floating : float
        Target total L1 bound on the FFTs' error.
    policy : AccountingPolicy
    directions : tuple of str, default=("remove", "add")
        The step lattices the plan must fit (``"replace"``: the replace-one
        pair's).

    Returns
    -------
    _Plan
    """
    budget = slack**2 / (0.5 * math.log(1.0 / eta))
    parts = len(steps) + 1
    group_budget = budget * (1.0 - policy.combine_share) / len(steps)
    share = tail / parts
    ideal, budgets = [], []
    for q, z, count in steps:
        step_tau = policy.step_tail_share * share / count
        width = max(
            hi - lo
            for lo, hi, _ in (
                _step_range(q, z, d, step_tau, policy.low_tail / count)
                for d in directions
            )
        )
        if not math.isfinite(width):
            raise _lattice.TooLarge  # a loss beyond floating point (tiny noise)
        ideal.append(
            _lattice.level_spacings(
                count, group_budget, width, policy.max_step_points, policy.level_decay
            )
        )
        budgets.append(
            _lattice.level_budgets(
                count,
                (1.0 - policy.step_tail_share) * share,
                policy.low_tail,
                floating / parts,
                first_tail=step_tau,
            )
        )
    h0 = min(float(levels[0]) for levels in ideal)
    levels = [
        _lattice.Levels(_lattice.integer_spacings(spacings, h0), *budget)
        for spacings, budget in zip(ideal, budgets, strict=True)
    ]
    return _Plan(h0, levels, tail / parts, floating / parts)


def _direction_lattice(steps, gauss_mu2, direction, plan, policy):
    """The composed lattice PLD of one direction."""
    max_points = policy.max_points
    total = None
    for (q, z, count), levels in zip(steps, plan.levels, strict=True):
        m0 = levels.spacings[0]
        step = _step_lattice(
            q,
            z,
            direction,
            m0 * plan.h0,
            levels.taus[0],
            low=levels.lows[0],
            max_points=max_points,
            spacing=m0,
        )
        part = step.power(count, levels, max_points=max_points)
        total = (
            part
            if total is None
            else total.convolve(
                part, plan.tau_combine, plan.allowance_combine, max_points=max_points
            )
        )
    if gauss_mu2 > 0:
        spacing = total.spacing
        release = _lattice.gaussian_lattice(
            math.sqrt(gauss_mu2),
            spacing * plan.h0,
            max_points=max_points,
            spacing=spacing,
        )
        total = total.convolve(
            release, plan.tau_combine, plan.allowance_combine, max_points=max_points
        )
    return total


def _step_range(q, z, direction, tau, low):
    """Range ``[lo, hi]`` of one step's loss kept on the lattice, and ``x_hi``.

    Remove and replace: ``x_hi`` leaves mass ``tau`` of ``x`` (the upper
    tail of the loss, sent to +inf) above it; replace also cuts the lower
    tail (mass at most ``low``, moved up). Add: ``x_hi`` leaves ``low`` (the
    lower tail of the loss, moved up).
    """
    if direction in ("remove", "replace"):

        def survival(x):
            return (1.0 - q) * special.ndtr(-x / z) + q * special.ndtr((1.0 - x) / z)

        edge = z * -special.ndtri(tau)
        if survival(edge) <= tau:
            x_hi = edge
        else:
            x_hi = optimize.brentq(
                lambda x: survival(x) - tau, edge, edge + 1.0, xtol=1e-12
            )
            x_hi = x_hi + 1e-9
    else:
        x_hi = z * -special.ndtri(low)
    if direction == "replace":
        # Below x_lo the mixture has at most the mass of N(0, z^2) below it.
        x_lo = z * special.ndtri(low)
        return float(_replace_loss(x_lo, q, z)), float(_replace_loss(x_hi, q, z)), x_hi
    l_hi = float(np.log1p(q * np.expm1((2.0 * x_hi - 1.0) / (2.0 * z * z))))
    l_inf = math.log1p(-q)  # infimum of l
    if direction == "remove":
        return l_inf, l_hi, x_hi
    return -l_hi, -l_inf, x_hi


def _step_lattice(q, z, direction, h, tau, *, low, max_points, spacing=1):
    """Lattice PLD of one Poisson-subsampled Gaussian step (step 1 above).

    ``direction="remove"``: the loss ``l(x) = log(1 - q + q exp((2x - 1) /
    (2 z^2)))`` with ``x ~ (1 - q) N(0, z^2) + q N(1, z^2)``; ``"add"``: the
    loss ``-l(x)`` with ``x ~ N(0, z^2)``. ``l`` is increasing and convex,
    so a lattice cell of the loss is an interval of ``x`` (``x(t) = z^2
    log1p(expm1(t) / q) + 1/2``) and the cell's up-probability is bounded by
    its chord (remove) or by Jensen's inequality (add), or, when smaller, by
    the same on a grid of sub-intervals of the cell (:func:`_refined_up`).
    The upper tail beyond
    probability ``tau`` goes to +inf, the lower tail (add, probability
    ``low``) up to the lowest point kept. ``h`` is the lattice spacing,
    ``spacing`` the same in units of the global quantum. A lattice of more
    than ``max_points`` points raises :class:`TooLarge`.
    ``direction="replace"``: the replace-one pair (:func:`_replace_step_lattice`).
    """
    if direction == "replace":
        return _replace_step_lattice(
            q, z, h, tau, low=low, max_points=max_points, spacing=spacing
        )
    remove = direction == "remove"
    components = ((1.0 - q, 0.0), (q, 1.0)) if remove else ((1.0, 0.0),)

    def x_of(level):
        """The ``x`` with ``l(x) = level`` (-inf below the infimum of ``l``)."""
        arg = np.expm1(level) / q
        with np.errstate(divide="ignore", invalid="ignore"):
            x = z * z * np.log1p(arg) + 0.5
        return np.where(arg <= -1.0, -np.inf, x)

    pieces = functools.partial(_mixture_pieces, components, z)
    lo, hi, x_hi = _step_range(q, z, direction, tau, low)
    k_lo, k_hi = math.floor(lo / h), math.ceil(hi / h)
    if k_hi - k_lo + 1 > max_points:
        raise _lattice.TooLarge
    levels = np.arange(k_lo, k_hi + 1) * h
    cell_lo, cell_hi = levels[:-1], levels[1:]
    if remove:
        a, b = x_of(cell_lo), x_of(cell_hi)
        mass, moment, error, mass_error = pieces(a, b)
        # The remove loss is convex in x: its chord bounds each cell, and the
        # chords of the cell's sub-intervals more closely.
        up = np.fmin(
            _lattice.chord_up(a, b, mass, moment, error),
            _refined_up(x_of(levels), cell_lo, h, q, z, pieces, remove=True),
        )
    else:
        a, b = x_of(-cell_hi), x_of(-cell_lo)
        mass, moment, error, mass_error = pieces(a, b)
        # Jensen: E[L 1{cell}] <= P(cell) * (-l(E[X | cell])), with E[X | cell]
        # taken at the low end of its error (L decreases in x).
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            # E[X 1{X <= b}] = -z phi(b / z) for X ~ N(0, z^2).
            below = -z / math.sqrt(2.0 * math.pi) * np.exp(-0.5 * (b / z) ** 2)
            mean_x = _lattice.low_cell_mean(a, mass, moment, error, below)
            loss = -np.log1p(q * np.expm1((2.0 * mean_x - 1.0) / (2.0 * z * z)))
            loss_error = (
                8.0 * _lattice.UNIT_ROUNDOFF * (np.abs(cell_lo) + np.abs(cell_hi) + 1.0)
            )
            up = mass * (loss - cell_lo + loss_error) / h
        # The same on the cell's sub-intervals (cells in x run backwards).
        edges = x_of(-levels[::-1])
        up = np.fmin(
            up, _refined_up(edges, cell_lo[::-1], h, q, z, pieces, remove=False)[::-1]
        )
    up = _lattice.finish_up(up, mass, jensen=not remove)
    p = np.zeros(levels.size)
    p[:-1] += mass - up
    p[1:] += up
    if remove:
        inf = float(sum(w * special.ndtr(-(x_hi - mean) / z) for w, mean in components))
    else:
        inf = 0.0
        p[0] += float(special.ndtr(-(x_of(-levels[0]) / z)))
    return _lattice.with_errors(k_lo, p, inf, mass, mass_error, spacing)


def _mixture_pieces(components, z, a, b):
    """Mass, moment ``E[(X - a) 1{a < X <= b}]`` and errors of a normal mixture.

    ``components``: ``(weight, mean)`` pairs, each normal of std ``z``
    (:func:`~._lattice.normal_pieces`, summed).
    """
    mass = moment = error = mass_error = 0.0
    for weight, mean in components:
        m, mo, e, me = _lattice.normal_pieces(a, b, mean, z)
        mass, moment = mass + weight * m, moment + weight * mo
        error, mass_error = error + weight * e, mass_error + weight * me
    return mass, moment, error, mass_error


def _loss_above(x, q, z):
    """``l(x)`` rounded up: the remove loss plus a bound on its float error.

    With ``t = (2x - 1) / (2 z^2)`` and ``y = q expm1(t)``, an error of a few
    ulps in ``t``, ``y`` and ``log1p`` moves ``l = log1p(y)`` by at most a
    few ulps of ``|l| + |t| + |y| / (1 + y)``; 16 ulps each are allowed.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        t = (2.0 * x - 1.0) / (2.0 * z * z)
        y = q * np.expm1(t)
        loss = np.log1p(y)
        margin = (
            16.0
            * _lattice.UNIT_ROUNDOFF
            * (np.abs(loss) + np.abs(t) + np.abs(y) / (1.0 + y) + 1.0)
        )
    return loss, margin


def _refined_up(edges, cell_lo, h, q, z, pieces, *, remove):
    """Up-probabilities of the cells, bounded on sub-intervals of each cell.

    The cells are ``(edges[c], edges[c + 1]]`` in ``x`` (increasing, -inf
    at the start allowed), with lowest loss ``cell_lo[c]``. Each is cut at
    a grid of width ``_SUB_WIDTH z^2`` (:func:`~._lattice.sub_intervals`),
    and ``E[(L - lo) 1{sub-interval}]`` bounded on each piece by the
    smaller of two upper bounds: the loss at the piece's high-loss end
    (``L`` is monotone in ``x``), and the chord through the piece's ends
    (remove: ``l`` is convex, so below its chord; with the ends' losses
    rounded up, the chord only rises) or Jensen's inequality at the low end
    of the piece's conditional mean (add: ``-l`` is concave). Each bound
    takes the piece's mass at the high end of its error; the sum over a
    cell's pieces, over ``h``, bounds its up-probability (step 1 of the
    argument above), with a few ulps for the sum and the division.

    Returns
    -------
    ndarray
        One bound a cell (NaN where none applies; the caller takes the
        smaller of this and its own bound).
    """
    u = _lattice.UNIT_ROUNDOFF
    finite = edges[np.isfinite(edges)]
    if finite.size == 0:
        return np.full(cell_lo.size, np.nan)
    start = min(-12.0 * z, float(finite[0]))
    width = max(_SUB_WIDTH * z * z, (float(finite[-1]) - start) / _SUB_POINTS)
    lower, upper, cell = _lattice.sub_intervals(edges, width, start)
    mass, moment, error, mass_error = pieces(lower, upper)
    mass_hi = mass + mass_error
    lo = cell_lo[cell]
    lo_error = 2.0 * u * np.abs(lo)
    bounded = np.isfinite(lower)
    safe_lower = np.where(bounded, lower, 0.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        l_lower, e_lower = _loss_above(safe_lower, q, z)
        l_upper, e_upper = _loss_above(upper, q, z)
        if remove:
            # L <= l(upper) on the piece; chord from (lower, l) to (upper, l).
            top = l_upper + e_upper
            base = l_lower + e_lower
            slope = np.maximum((top - base) / (upper - lower), 0.0)
            chord = np.maximum(base - lo + lo_error, 0.0) * mass_hi + slope * (
                moment + error
            ) * (1.0 + 8.0 * u)
        else:
            # L = -l(x) <= -l(lower) (or -log(1 - q) on (-inf, upper]).
            top = np.where(
                bounded, -l_lower + e_lower, -math.log1p(-q) * (1.0 + 4.0 * u)
            )
            # Jensen at the low end of E[X | piece]: the true moment is at
            # least moment - error, the true mass at most mass + mass_error.
            shift = np.maximum(moment - error, 0.0) / mass_hi * (1.0 - 4.0 * u)
            # E[X 1{X <= b}] = -z phi(b / z) for X ~ N(0, z^2).
            below = z / math.sqrt(2.0 * math.pi) * np.exp(-0.5 * (upper / z) ** 2)
            low_mass = mass - mass_error
            open_mean = -below * (1.0 + 4.0 * _lattice.FN_RTOL) / low_mass
            mean_x = np.where(bounded, safe_lower + shift, open_mean * (1.0 + 4.0 * u))
            mean_x = mean_x - 2.0 * u * np.abs(mean_x)
            l_mean, e_mean = _loss_above(mean_x, q, z)
            jensen = -l_mean + e_mean
            ok = np.where(bounded, mass_hi > 0, low_mass > 0) & np.isfinite(jensen)
            chord = np.where(
                ok, np.maximum(jensen - lo + lo_error, 0.0) * mass_hi, np.inf
            )
        monotone = np.maximum(top - lo + lo_error, 0.0) * mass_hi
        term = np.fmin(np.where(bounded | (not remove), chord, np.inf), monotone)
    total = np.bincount(cell, weights=term, minlength=cell_lo.size)
    # A sum of k positive terms is within (k - 1) ulps of exact.
    terms = np.bincount(cell, minlength=cell_lo.size)
    up = total / h * (1.0 + 2.0 * u * (terms + 8.0))
    return np.where(np.isfinite(up), up, np.nan)


def replace_pair_is_direct(q, z):
    """Whether the replace-one pair's step lattice applies at ``(q, z)``.

    The replace-one loss ``L(x) = l(x) - l(-x)`` (:func:`_replace_loss`)
    is convex for ``x >= 0`` and concave for ``x <= 0`` when ``log((1 -
    q) / q) >= -1 / (2 z^2)`` (every ``q <= 1/2``): with ``s(t) = q e^t /
    (1 - q + q e^t)``, ``L''(x) = (s'(t_+) - s'(t_-)) / z^4`` at ``t_+- =
    (+-2x - 1) / (2 z^2)``, and ``s' = s (1 - s)`` is symmetric about
    ``log((1 - q) / q)`` and increasing below it, so ``t_+`` is the nearer
    to its peak for ``x > 0``. The lattice's rounding bounds need that
    shape; elsewhere the chain through the data set without the record is
    used.
    """
    return math.log1p(-q) - math.log(q) >= -0.5 / (z * z)


def _replace_loss(x, q, z):
    """The replace-one privacy loss ``L(x) = l(x) - l(-x)``.

    ``log`` of the density ratio of ``(1 - q) N(0, z^2) + q N(1, z^2)``
    to ``(1 - q) N(0, z^2) + q N(-1, z^2)`` at ``x``; increasing and odd.
    """
    return _loss_above(x, q, z)[0] - _loss_above(-x, q, z)[0]


def _replace_loss_above(x, q, z):
    """``L(x)`` and a bound on its floating-point error (as :func:`_loss_above`).

    The two terms' bounds, plus an ulp of each term for the subtraction.
    """
    up, up_error = _loss_above(x, q, z)
    down, down_error = _loss_above(-x, q, z)
    margin = (
        up_error
        + down_error
        + 2.0 * _lattice.UNIT_ROUNDOFF * (np.abs(up) + np.abs(down))
    )
    return up - down, margin


def _replace_x_of(level, q, z):
    """The ``x`` with ``L(x) = level``, in closed form.

    With ``u = exp(x / z^2)`` and ``c = exp(-1 / (2 z^2))``, ``L(x) =
    level`` is the quadratic ``q c u^2 + (1 - q)(1 - y) u - q c y = 0`` in
    ``u`` (``y = exp(level)``), whose positive root is taken in the form
    free of cancellation on each side of ``level = 0`` and in logarithms
    (no overflow at large ``|level|``). The cells only need the ``x``
    edges to a few ulps: the rounding bounds evaluate ``L`` at them.
    """
    level = np.asarray(level, dtype=float)
    log_2qc = math.log(2.0 * q) - 0.5 / (z * z)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        # level >= 0: u = y (w + sqrt(w^2 + 4 q^2 c^2 / y)) / (2 q c),
        # w = (1 - q)(1 - 1/y).
        high = np.maximum(level, 0.0)
        w = -(1.0 - q) * np.expm1(-high)
        ratio = np.exp(2.0 * log_2qc - high)  # 4 q^2 c^2 / y
        log_u_high = high + np.log(w + np.sqrt(w * w + ratio)) - log_2qc
        # level < 0: u = 2 q c y / (b + sqrt(b^2 + 4 q^2 c^2 y)),
        # b = (1 - q)(1 - y) > 0.
        low = np.minimum(level, 0.0)
        b = -(1.0 - q) * np.expm1(low)
        product = np.exp(2.0 * log_2qc + low)  # 4 q^2 c^2 y
        log_u_low = low + log_2qc - np.log(b + np.sqrt(b * b + product))
    # L is odd: L(0) = 0 exactly (the forms above lose it when c underflows).
    log_u = np.where(level > 0.0, log_u_high, np.where(level < 0.0, log_u_low, 0.0))
    return z * z * log_u


def _replace_step_lattice(q, z, h, tau, *, low, max_points, spacing=1):
    """Lattice PLD of one Poisson-subsampled Gaussian step under replace-one.

    The loss :func:`_replace_loss` with ``x ~ (1 - q) N(0, z^2) + q N(1,
    z^2)``: the pair dominates the step whatever the two records' clipped
    gradients (docs/accounting.md, "The replace-one pair"), and its loss
    distribution is the same in both directions (``x -> -x``). ``L`` is
    increasing, so a cell of the loss is an interval of ``x``; its
    up-probability is bounded on sub-intervals (:func:`_replace_refined_up`:
    chords where ``L`` is convex, ``x >= 0``, Jensen's inequality where it
    is concave, ``x <= 0``, as in step 1 of the module's argument). The
    upper tail beyond probability ``tau`` goes to +inf, the lower tail (at
    most ``low``) up to the lowest point kept. Requires
    :func:`replace_pair_is_direct`.
    """
    components = ((1.0 - q, 0.0), (q, 1.0))
    pieces = functools.partial(_mixture_pieces, components, z)
    lo, hi, x_hi = _step_range(q, z, "replace", tau, low)
    k_lo, k_hi = math.floor(lo / h), math.ceil(hi / h)
    if k_hi - k_lo + 1 > max_points:
        raise _lattice.TooLarge
    levels = np.arange(k_lo, k_hi + 1) * h
    edges = _replace_x_of(levels, q, z)
    mass, _, _, mass_error = pieces(edges[:-1], edges[1:])
    up = _replace_refined_up(edges, levels[:-1], h, q, z, pieces)
    up = _lattice.finish_up(up, mass, jensen=True)
    p = np.zeros(levels.size)
    p[:-1] += mass - up
    p[1:] += up
    below = sum(w * special.ndtr((edges[0] - mean) / z) for w, mean in components)
    p[0] += float(below)
    inf = float(sum(w * special.ndtr(-(x_hi - mean) / z) for w, mean in components))
    return _lattice.with_errors(k_lo, p, inf, mass, mass_error, spacing)


def _replace_refined_up(edges, cell_lo, h, q, z, pieces):
    """Up-probabilities of the replace-one cells, bounded on sub-intervals.

    The cells are ``(edges[c], edges[c + 1]]`` in ``x`` (finite,
    increasing), with lowest loss ``cell_lo[c]``; each is cut at a grid of
    width ``_SUB_WIDTH z^2`` and at ``x = 0``, where ``L`` turns from
    concave to convex. On each piece ``E[(L - lo) 1{piece}]`` is bounded by
    the smaller of: the loss at the piece's upper end (``L`` increases);
    on ``x >= 0`` the chord through its ends (``L`` is convex, with the
    ends' losses rounded up the chord only rises); on ``x <= 0`` Jensen's
    inequality at the high end of ``E[X | piece]`` (``L`` is concave and
    increasing). Masses are taken at the high end of their error, as in
    :func:`_refined_up`.

    Returns
    -------
    ndarray
        One bound a cell.
    """
    u = _lattice.UNIT_ROUNDOFF
    start = float(edges[0])
    width = max(_SUB_WIDTH * z * z, (float(edges[-1]) - start) / _SUB_POINTS)
    lower, upper, cell = _lattice.sub_intervals(edges, width, start, cuts=(0.0,))
    mass, moment, error, mass_error = pieces(lower, upper)
    mass_hi = mass + mass_error
    lo = cell_lo[cell]
    lo_error = 2.0 * u * np.abs(lo)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        l_lower, e_lower = _replace_loss_above(lower, q, z)
        l_upper, e_upper = _replace_loss_above(upper, q, z)
        top = l_upper + e_upper
        monotone = np.maximum(top - lo + lo_error, 0.0) * mass_hi
        # Convex pieces: below the chord from (lower, base) to (upper, top).
        base = l_lower + e_lower
        slope = np.maximum((top - base) / (upper - lower), 0.0)
        chord = np.maximum(base - lo + lo_error, 0.0) * mass_hi + slope * (
            moment + error
        ) * (1.0 + 8.0 * u)
        # Concave pieces: E[L | piece] <= L(E[X | piece]), the mean taken at
        # the high end of its error (moment up, mass down).
        low_mass = mass - mass_error
        shift = (moment + error) / low_mass * (1.0 + 4.0 * u)
        mean_x = lower + shift
        mean_x = mean_x + 2.0 * u * np.abs(mean_x)
        l_mean, e_mean = _replace_loss_above(mean_x, q, z)
        jensen = np.where(
            (low_mass > 0) & np.isfinite(l_mean),
            np.maximum(l_mean + e_mean - lo + lo_error, 0.0) * mass_hi,
            np.inf,
        )
        shaped = np.where(lower >= 0.0, chord, np.where(upper <= 0.0, jensen, np.inf))
        term = np.fmin(shaped, monotone)
    total = np.bincount(cell, weights=term, minlength=cell_lo.size)
    # A sum of k positive terms is within (k - 1) ulps of exact.
    terms = np.bincount(cell, minlength=cell_lo.size)
    up = total / h * (1.0 + 2.0 * u * (terms + 8.0))
    return np.where(np.isfinite(up), up, np.nan)


def _directions(relation, steps):
    """The step lattices that bound the steps, or None for the chain.

    Add/remove: the remove and add directions. Replace-one: the replace-one
    pair's lattice where :func:`replace_pair_is_direct` holds for every
    group of steps; else None (:func:`_chained_bound`).
    """
    if relation is Neighbouring.ADD_REMOVE:
        return ("remove", "add")
    if all(replace_pair_is_direct(q, z) for q, z, _ in steps):
        return ("replace",)
    return None


def _lattice_epsilon(steps, gauss_mu2, delta, directions, reference, rel_slack, policy):
    """The lattice bound of the Poisson steps (and Gaussian parts), or inf.

    The larger of the ``directions``' bounds (:func:`_directions`);
    ``gauss_mu2`` in the units of their pair.
    """
    eta = policy.eta_share * delta
    try:
        plan = _plan(
            steps,
            rel_slack * reference,
            eta,
            policy.tail_share * delta,
            policy.fp_share * delta,
            policy,
            directions,
        )
        lattices = [
            _direction_lattice(steps, gauss_mu2, d, plan, policy) for d in directions
        ]
    except _lattice.TooLarge:
        return math.inf
    return max(lattice.bound(plan.h0, delta, eta) for lattice in lattices)


def _chained_bound(steps, gauss_mu2, delta, reference, rel_slack, policy):
    """Replace-one through the data set without the record (remove, then add).

    Each hop has its share of failure probability and slack; see
    :meth:`PLDComposition.epsilon`.
    """
    hops = Neighbouring.REPLACE_ONE.hops
    eta = policy.eta_share * delta / hops
    slack = rel_slack * reference / hops
    try:
        plan = _plan(
            steps,
            slack,
            eta,
            policy.tail_share * delta,
            policy.fp_share * delta,
            policy,
        )
        remove = _direction_lattice(steps, gauss_mu2, "remove", plan, policy)
        scale = _add_hop_scale(remove, plan.h0, delta, policy)
        if scale is None:
            plan = plan.scaled(policy.add_hop_tail_scale, policy.add_hop_fp_scale)
        else:
            floating = min(scale, policy.add_hop_fp_scale)
            plan = plan.scaled(min(scale, policy.add_hop_tail_scale), floating)
            plan = plan.relaxed(scale / floating)
        add = _direction_lattice(steps, gauss_mu2, "add", plan, policy)
    except _lattice.TooLarge:
        return math.inf
    pure = math.inf if gauss_mu2 > 0 else sum(-n * math.log1p(-q) for q, _, n in steps)
    return _lattice.chained_epsilon(
        lambda d, e: remove.bound(plan.h0, d, e),
        lambda d, e: add.bound(plan.h0, d, e),
        delta,
        pure,
        eta_share=policy.eta_share,
        splits=policy.chain_splits,
    )


def _add_hop_scale(remove, h0, delta, policy):
    """Scale of the add hop's budgets (planning only).

    The chain takes the add hop at ``delta_2 = (1 - share) delta exp(-eps_1)``
    (:func:`~._lattice.chained_epsilon`); its budget is planned for the
    first hop's epsilon at ``chain_plan_share`` of delta, as in
    ``_allocation_pld.py``, so it stays a small part of ``delta_2`` near the
    best split without being smaller than it needs (a smaller one sends
    more of each convolution to the direct, quadratic-time part). Any plan
    is valid: a split whose ``delta_2`` the add lattice cannot meet is
    skipped. The tail and floating-point budgets take the smaller of this
    and ``add_hop_tail_scale`` / ``add_hop_fp_scale`` (a smaller tail only
    widens the lattice a little; a smaller allowance favours the direct,
    nearly exact convolution), and this scale is the allowance only of
    convolutions whose direct part would be long. ``None`` past
    ``_MAX_HOP_EXPONENT``: the fixed budgets.
    """
    share = policy.chain_plan_share
    eps_1 = remove.bound(h0, share * delta, share * policy.eta_share * delta)
    if eps_1 > _MAX_HOP_EXPONENT:
        return None
    return policy.add_hop_scale * math.exp(-max(eps_1, 0.0))

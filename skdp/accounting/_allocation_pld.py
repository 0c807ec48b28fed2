"""Numerical privacy loss distribution of random allocation (balls-and-bins).

The dominating pair of one epoch (``_allocation.py``, module docstring):
``P = (1/t) sum_j N(e_j, z^2 I_t)`` against ``Q = N(0, z^2 I_t)``. Its
privacy loss is the log of a sum of independent log-normals (the
decomposition into per-step factors of Feldman and Shenfeld's PLD
follow-up to "Privacy amplification by random allocation", 2025):

- **remove** (``x ~ P``, by symmetry the record in step 1): ``L = log S``,
  ``S = V_1 + sum_{j >= 2} V_j``, ``V_j = exp((x_j - 1/2) / z^2) / t``, so
  ``log(t V_1) ~ N(+1/(2 z^2), 1/z^2)`` and, for ``j >= 2``, ``log(t V_j) ~
  N(-1/(2 z^2), 1/z^2)``, all independent;
- **add** (``x ~ Q``): ``L = -log S``, ``S = sum_j V_j`` with all ``t``
  summands of the second kind.

Epochs use fresh allocations: their losses are independent and add
(adaptive composition of dominating pairs: Zhu, Dong and Wang 2022,
Theorem 10). Replace-one chains remove and add through the data set without
the record, as for Poisson steps (``_pld.pld_epsilon``).

How the bound stays valid: the construction of ``_pld.py`` (same lattice
class, rounding, trimming, convolution and floating-point bookkeeping) is
used twice, first on the *sum* of an epoch, then on the *loss*.

1. **The sum.** Write ``X = S`` (remove) or ``X = -S`` (add), so that a
   larger ``X`` never lowers the loss. Each summand ``sign * V_j`` is rounded
   at random to the lattice with an up-probability at least its position in
   the cell, so ``E[R | X] >= X`` per rounding: ``V`` is convex in the
   underlying normal ``g``, so ``V`` lies below its chord on the cell and
   the up-probability of a cell is bounded by the normal's first moment
   (remove), and ``b - V`` is concave, bounded by Jensen's inequality at
   ``E[g | cell]`` (add). The summands are then composed by repeated squaring
   with re-rounding (``_Lattice.power``). Tails: the one that raises the
   loss goes to ``+inf`` (counted in delta), the other is moved in (the
   loss only grows). By Azuma-Hoeffding, ``X <= X_R + s_S`` except with
   probability ``eta_S``, ``s_S = h0 sqrt(V log(1/eta_S) / 2)``.
2. **The loss.** On that event ``L <= log(X_R + s_S)`` (remove) or ``L <=
   -log(-X_R - s_S)`` (add; ``+inf`` when the argument is not positive):
   the loss is monotone in ``S``, so the shift is applied inside the log
   and nothing is linearised. That loss is rounded at random onto a loss
   lattice (up-probability at least the position, as in
   ``_Lattice.coarsen``), and ``eta_S`` joins the lattice's absolute
   floating-point allowance (``slack``): the true loss is at most the
   lattice's except on an event of that probability, which a mass added
   anywhere (even at ``+inf``) covers.
3. **Epochs and conversion** as for Poisson steps (``_pld.py``, steps 2-5):
   repeated squaring on the loss lattice, Hoeffding slack of the loss
   roundings added to the epsilon.

Where a summand's lattice would be too wide for the point cap (small noise
multipliers: the log-normal's upper tail), the spacing grows and the bound
loosens (it stays valid); the caller reports the smaller of this bound and
the Rényi one.
"""

import math

import numpy as np
from scipy import special

from ._pld import (
    _ETA_SHARE,
    _FN_RTOL,
    _LOW_TAIL,
    _MAX_POINTS,
    _MAX_STEP_POINTS,
    _STEP_TAIL_SHARE,
    _TAIL_SHARE,
    _UNIT_ROUNDOFF,
    _UP_NUDGE,
    _chained_epsilon,
    _Lattice,
    _level_spacings,
    _normal_pieces,
    _TooLarge,
    _with_errors,
)

__all__ = ["allocation_pld_epsilon"]

# Share of the epsilon slack given to the sums' Hoeffding term (the loss
# lattices get the rest).
_SUM_SLACK_SHARE = 0.5
# Share of an epoch's failure probability given to the sums' Hoeffding term.
_SUM_ETA_SHARE = 0.5
# Add direction: mass of each summand's upper tail moved down (it lowers the
# sum, so the loss only grows; a large summand makes the loss very negative,
# so this costs little tightness and shortens the lattice).
_ADD_INNER_TAIL = 1e-3
# Add direction: the sum's slack is planned for sums near exp(-eps / sqrt(E))
# (the loss is -log of the sum; E epochs), the exponent capped at this value.
_ADD_SCALE_CAP = 8.0
# Share of the floating-point budget of the sums' convolutions.
_FP_SHARE = 1e-2
# Largest summand lattice (points); a wider one is built coarser (a larger,
# still valid, slack).
_SUM_STEP_POINTS = 1 << 18
# Largest sum lattice; past it the caller keeps the Rényi bound (at tiny
# deltas the sums' convolutions are direct, quadratic in their length).
_SUM_MAX_POINTS = 1 << 20
# Largest direct convolution (products) of any lattice here: past it the
# caller keeps the Rényi bound (a few seconds each on one core).
_MAX_DIRECT = 1 << 35


def _summand_range(mean, z, t, sign, tau, low):
    """``[v_lo, v_hi]`` of one summand ``V = exp(mean + g / z) / t`` kept.

    The tail that raises the loss (above ``v_hi`` for ``sign = +1``, below
    ``v_lo`` for ``sign = -1``) leaves mass ``tau``; the other leaves
    ``low`` (moved in).
    """
    upper, lower = (tau, low) if sign > 0 else (low, tau)
    g_hi = -special.ndtri(upper)
    g_lo = special.ndtri(lower)
    return (
        math.exp(mean + g_lo / z) / t,
        math.exp(mean + g_hi / z) / t,
    )


def _summand_lattice(mean, z, t, sign, h, tau, low, spacing=1):
    """Lattice of ``sign * V``, ``V = exp(mean + g / z) / t``, ``g ~ N(0, 1)``.

    Step 1 of the module docstring: cells of ``V`` are intervals of ``g``
    (``g = z (log(t V) - mean)``); a cell's up-probability (towards larger
    ``sign * V``) is bounded by the chord (``sign = +1``) or by Jensen's
    inequality (``sign = -1``), with the floating-point allowances of
    ``_pld._step_lattice``.
    """
    v_lo, v_hi = _summand_range(mean, z, t, sign, tau, low)
    k_lo, k_hi = math.floor(v_lo / h), math.ceil(v_hi / h)
    k_lo = max(k_lo, 0)
    if k_hi - k_lo + 1 > _MAX_POINTS:
        raise _TooLarge
    levels = np.arange(k_lo, k_hi + 1) * h
    with np.errstate(divide="ignore"):
        g = z * (np.log(levels * t) - mean)
    g_a, g_b = g[:-1], g[1:]
    mass, moment, error, mass_error = _normal_pieces(g_a, g_b, 0.0, 1.0)
    if sign > 0:
        # Chord: E[(V - a) 1{cell}] <= h E[(g - g_a) 1{cell}] / (g_b - g_a).
        with np.errstate(invalid="ignore", divide="ignore"):
            width = g_b - g_a
            rel = 4.0 * _UNIT_ROUNDOFF * (np.abs(g_a) + np.abs(g_b)) / width
            up = (moment + error) / width * (1.0 + rel)
        up = np.where(np.isfinite(g_a) & (width > 0), up, mass)
    else:
        # Rounding -V up means V down: E[(b - V) 1{cell}] <= P(cell) (b -
        # V(E[g | cell])), E[g | cell] at the low end of its error.
        finite = np.isfinite(g_a)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            shift = (moment - error - 2.0 * _FN_RTOL * np.abs(moment)) / mass
            # E[g 1{g <= g_b}] = -phi(g_b).
            below = -np.exp(-0.5 * g_b**2) / math.sqrt(2.0 * math.pi)
            below_mean = below * (1.0 + 4.0 * _FN_RTOL) / mass
            mean_g = np.where(finite, np.where(finite, g_a, 0.0) + shift, below_mean)
            v_mean = np.exp(mean + mean_g / z) / t
            v_error = 8.0 * _UNIT_ROUNDOFF * (levels[1:] + v_mean)
            up = mass * (levels[1:] - v_mean + v_error) / h
        up = np.where(mass > 0, up, 0.0)
        up = np.where(np.isnan(up), mass, up)
    up = np.clip(up + _UP_NUDGE * mass, 0.0, mass)
    below_lo = float(special.ndtr(g[0]))
    above_hi = float(special.ndtr(-g[-1]))
    p = np.zeros(levels.size)
    if sign > 0:
        p[:-1] += mass - up
        p[1:] += up
        p[0] += below_lo  # moved up to the lowest point
        return _with_errors(k_lo, p, above_hi, mass, mass_error, spacing)
    # Orientation -V: the cell below k is the cell above -k.
    p[1:] += mass - up
    p[:-1] += up
    p = p[::-1].copy()
    p[0] += above_hi  # V above v_hi: -V moved up to the lowest point
    return _with_errors(
        -k_hi, p, below_lo, mass[::-1].copy(), mass_error[::-1].copy(), spacing
    )


class _SumPlan:
    """Spacings and tail cut-offs of one epoch's sum lattice.

    Parameters
    ----------
    t : int
    z : float
    direction : {"remove", "add"}
    slack : float
        Target Hoeffding slack ``s_S`` (in units of ``S``).
    eta : float
        Failure probability of that slack.
    tail : float
        Target mass moved to +inf.
    floating : float
        Target L1 bound of the FFTs' error.
    """

    def __init__(self, t, z, direction, slack, eta, tail, floating):
        self.remove = direction == "remove"
        self.sign = 1.0 if self.remove else -1.0
        self.count = t - 1 if self.remove else t
        count = self.count
        self.null_mean = -0.5 / (z * z)
        self.base_mean = 0.5 / (z * z)
        n_levels = max(count, 1).bit_length()
        copies = np.array([max(1, count >> i) for i in range(n_levels)], float)
        share = tail / 2.0
        self.step_tau = _STEP_TAIL_SHARE * share / max(count, 1)
        self.base_tau = _STEP_TAIL_SHARE * share
        inner = _LOW_TAIL if self.remove else _ADD_INNER_TAIL
        self.step_low = inner / max(count, 1)
        level_share = (1.0 - _STEP_TAIL_SHARE) * share / (n_levels + 1)
        self.taus = [self.step_tau, *(level_share / copies[1:]), level_share]
        low = _LOW_TAIL / (n_levels + 1)
        self.lows = [self.step_low, *(low / copies[1:]), low]
        fp = floating / (n_levels + 2)
        self.allowances = [*(fp / copies), fp]
        budget = slack**2 / (0.5 * math.log(1.0 / eta))
        widths = [
            np.subtract(
                *_summand_range(
                    self.null_mean, z, t, self.sign, self.step_tau, self.step_low
                )[::-1]
            )
        ]
        if self.remove:
            widths.append(
                np.subtract(
                    *_summand_range(
                        self.base_mean, z, t, 1.0, self.base_tau, _LOW_TAIL
                    )[::-1]
                )
            )
        ideal = _level_spacings(max(count, 1), budget, max(widths), _SUM_STEP_POINTS)
        self.h0 = float(ideal[0])
        self.spacings = (
            np.maximum.accumulate(np.maximum(1, np.floor(ideal / self.h0)))
            .astype(np.int64)
            .tolist()
        )


def _sum_lattice(t, z, plan):
    """The lattice of ``X`` (``S`` or ``-S``) of one epoch, on ``plan.h0``."""
    h = plan.h0
    part = None
    if plan.count > 0:
        step = _summand_lattice(
            plan.null_mean, z, t, plan.sign, h, plan.step_tau, plan.step_low
        )
        part = step.power(
            plan.count,
            plan.spacings,
            plan.taus,
            plan.allowances,
            plan.lows,
            _SUM_MAX_POINTS,
            _MAX_DIRECT,
        )
    if plan.remove:
        base = _summand_lattice(plan.base_mean, z, t, 1.0, h, plan.base_tau, _LOW_TAIL)
        part = (
            base
            if part is None
            else part.convolve(
                base,
                plan.taus[-1],
                plan.allowances[-1],
                plan.lows[-1],
                _SUM_MAX_POINTS,
                _MAX_DIRECT,
            )
        )
    return part


def _loss_values(sum_lattice, h0, slack, remove):
    """Upper bounds on the epoch's loss at the sum lattice's points (step 2).

    Returns ``(loss, p, inf)``: ``loss`` may hold ``-inf`` (remove, sum
    not positive: the loss is only moved up from there) or ``+inf`` (add).
    A few ulps are added to every finite loss for the logarithm's error.
    """
    x = (sum_lattice.offset + np.arange(sum_lattice.p.size)) * (
        sum_lattice.spacing * h0
    )
    arg = x + slack if remove else -x - slack
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = np.log(np.where(arg > 0, arg, np.nan))
    if remove:
        loss = np.where(arg > 0, loss, -np.inf)
    else:
        loss = np.where(arg > 0, -loss, np.inf)
    finite = np.isfinite(loss)
    loss[finite] += 8.0 * _UNIT_ROUNDOFF * (np.abs(loss[finite]) + 1.0)
    return loss, sum_lattice.p, sum_lattice.inf


def _round_losses(loss, p, inf, h, spacing, low):
    """Loss lattice on spacing ``h``, rounding each loss up at random.

    The lowest mass ``low`` (and every ``-inf``) is moved up to the lowest
    point kept; ``+inf`` losses join ``inf``.
    """
    finite = np.isfinite(loss)
    inf = inf + float(p[loss == np.inf].sum())
    order = np.argsort(np.where(finite, loss, np.inf))
    cumulative = np.cumsum(p[order])
    cut = int(np.searchsorted(cumulative, low, side="right"))
    floor_loss = loss[order[min(cut, order.size - 1)]]
    if not np.isfinite(floor_loss):
        raise _TooLarge
    kept = np.where(finite, np.maximum(loss, floor_loss), floor_loss)
    kept = np.where(loss == np.inf, floor_loss, kept)
    weights = np.where(loss == np.inf, 0.0, p)
    position = kept / h
    j = np.floor(position)
    # Up with probability at least the position in the cell (the losses
    # already carry an allowance for the division's error).
    allowance = 2.0 * _UNIT_ROUNDOFF * (np.abs(position) + 1.0)
    frac = np.minimum(np.nextafter(position - j + allowance, 2.0), 1.0)
    j0 = int(j.min())
    size = int(j.max()) - j0 + 2
    if size > _MAX_POINTS:
        raise _TooLarge
    index = (j - j0).astype(np.intp)
    out = np.bincount(index, weights=weights * (1.0 - frac), minlength=size)
    out += np.bincount(index + 1, weights=weights * frac, minlength=size)
    return j0, out, inf


class _Group:
    """One (steps, noise) pair of allocation events: its epochs' sum lattices."""

    def __init__(self, t, z, epochs):
        self.t, self.z, self.epochs = t, z, epochs


def _epoch_losses(group, direction, delta, slack, scale):
    """Loss values, masses, inf mass and failure probability of one epoch.

    ``slack`` is the target sum slack ``s_S``; ``scale`` shrinks every tail
    and failure budget (the add hop of replace-one is taken at a far smaller
    delta).
    """
    per_epoch = delta * scale / max(group.epochs, 1)
    eta = _SUM_ETA_SHARE * _ETA_SHARE * per_epoch
    plan = _SumPlan(
        group.t,
        group.z,
        direction,
        slack,
        eta,
        0.5 * _TAIL_SHARE * per_epoch,
        _FP_SHARE * per_epoch,
    )
    lattice = _sum_lattice(group.t, group.z, plan)
    s_sum = lattice.std_slack(plan.h0, eta)
    loss, p, inf = _loss_values(lattice, plan.h0, s_sum, direction == "remove")
    # The sum's floating-point bounds carry over (points only move); its
    # Hoeffding failure joins the absolute allowance (step 2).
    return loss, p, inf, lattice.slack + eta, lattice.rel


def _direction_loss_lattice(groups, direction, delta, reference, rel_slack, scale):
    """The composed loss lattice of all epochs in one direction, and ``h0``."""
    total_epochs = sum(g.epochs for g in groups)
    target = rel_slack * reference
    sum_slack = _SUM_SLACK_SHARE * target / total_epochs
    if direction == "add":
        per_epoch = reference / math.sqrt(total_epochs)
        sum_slack *= math.exp(-min(per_epoch, _ADD_SCALE_CAP))
    loss_slack = (1.0 - _SUM_SLACK_SHARE) * target
    eta = _ETA_SHARE * delta * scale
    budget = loss_slack**2 / (0.5 * math.log(1.0 / eta))
    parts = len(groups) + 1
    pieces, ideal = [], []
    for group in groups:
        loss, p, inf, slack, rel = _epoch_losses(
            group, direction, delta, sum_slack, scale
        )
        finite = np.isfinite(loss) & (p > 0)
        hi = float(loss[finite].max())
        order = np.argsort(np.where(finite, loss, np.inf))
        low_at = np.searchsorted(np.cumsum(p[order]), _LOW_TAIL / group.epochs)
        lo = float(loss[order[min(int(low_at), order.size - 1)]])
        width = max(hi - lo, 1e-12)
        ideal.append(
            _level_spacings(group.epochs, budget / len(groups), width, _MAX_STEP_POINTS)
        )
        pieces.append((loss, p, inf, slack, rel))
    h0 = min(float(levels[0]) for levels in ideal)
    total = None
    tail = _TAIL_SHARE * delta * scale / 2.0
    floating = _FP_SHARE * delta * scale
    for group, levels, (loss, p, inf, slack, rel) in zip(
        groups, ideal, pieces, strict=True
    ):
        spacings = (
            np.maximum.accumulate(np.maximum(1, np.floor(levels / h0)))
            .astype(np.int64)
            .tolist()
        )
        n_levels = group.epochs.bit_length()
        copies = np.array([max(1, group.epochs >> i) for i in range(n_levels)], float)
        share = tail / parts
        taus = [share / (n_levels + 1) / c for c in copies] + [share / (n_levels + 1)]
        low = _LOW_TAIL / (n_levels + 1)
        lows = [_LOW_TAIL / group.epochs, *(low / copies[1:]), low]
        fp = floating / parts / (n_levels + 2)
        allowances = [*(fp / copies), fp]
        m0 = spacings[0]
        j0, out, inf = _round_losses(loss, p, inf, m0 * h0, m0, lows[0])
        # Sums of positive terms after a product: a relative error.
        epoch = _Lattice(
            j0,
            out,
            inf,
            slack,
            spacing=m0,
            var=float(m0) ** 2,
            rel=rel + (p.size + 4.0) * _UNIT_ROUNDOFF,
        ).trim(taus[0], lows[0])
        part = epoch.power(
            group.epochs, spacings, taus, allowances, lows, None, _MAX_DIRECT
        )
        total = (
            part
            if total is None
            else total.convolve(part, tail / parts, floating / parts)
        )
    return total, h0


def allocation_pld_epsilon(groups, delta, replace_one, reference, rel_slack):
    """Epsilon of random allocation epochs by the numerical PLD, or inf.

    Parameters
    ----------
    groups : list of (steps_per_epoch, noise_multiplier, epochs)
    delta : float in (0, 1)
    replace_one : bool
        Chain remove and add through the data set without the record.
    reference : float > 0
        A first estimate of epsilon; the rounding slack is planned as about
        ``rel_slack`` of it.
    rel_slack : float

    Returns
    -------
    float
        A valid epsilon (``inf`` if a lattice would be too large).
    """
    groups = [_Group(int(t), float(z), int(e)) for t, z, e in groups if e > 0]
    if not groups:
        return 0.0
    if any(g.t < 2 for g in groups):
        return math.inf  # one step an epoch is a Gaussian: the GDP route
    try:
        if not replace_one:
            results = []
            for direction in ("remove", "add"):
                lattice, h0 = _direction_loss_lattice(
                    groups, direction, delta, reference, rel_slack, 1.0
                )
                results.append(lattice.bound(h0, delta, _ETA_SHARE * delta))
            return max(results)
        half = rel_slack / 2.0
        remove, h0 = _direction_loss_lattice(
            groups, "remove", delta, reference, half, 0.5
        )
        # The add hop is taken at about delta exp(-eps_1): its tails and
        # allowances are planned for that (any plan is valid).
        eps_1 = remove.bound(h0, 0.5 * delta, 0.5 * _ETA_SHARE * delta)
        scale = 0.25 * math.exp(-min(max(eps_1, 0.0), 50.0))
        add, h0_add = _direction_loss_lattice(
            groups, "add", delta, reference, half, scale
        )
    except _TooLarge:
        return math.inf
    return _chained_two(remove, h0, add, h0_add, delta)


def _chained_two(remove, h0, add, h0_add, delta):
    """``_pld._chained_epsilon`` for two lattices on their own quanta."""

    class _OnQuantum:
        """The add lattice, answering ``bound`` on its own quantum."""

        def __init__(self, lattice, quantum):
            self.lattice, self.quantum = lattice, quantum

        def bound(self, _h0, delta_2, eta):
            return self.lattice.bound(self.quantum, delta_2, eta)

    return _chained_epsilon(
        _OnQuantum(remove, h0), _OnQuantum(add, h0_add), h0, delta, math.inf
    )

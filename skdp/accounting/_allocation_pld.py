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
the record, as for Poisson steps (``_pld.py``).

How the bound stays valid: the construction of ``_pld.py`` (the same
lattices of ``_lattice.py``: rounding, trimming, convolution and
floating-point bookkeeping) is used twice, first on the *sum* of an epoch,
then on the *loss*.

1. **The sum.** Write ``X = S`` (remove) or ``X = -S`` (add), so that a
   larger ``X`` never lowers the loss. Each summand ``sign * V_j`` is rounded
   at random to the lattice with an up-probability at least its position in
   the cell, so ``E[R | X] >= X`` per rounding: ``V`` is convex in the
   underlying normal ``g``, so ``V`` lies below its chord on the cell and
   the up-probability of a cell is bounded by the normal's first moment
   (remove), and ``b - V`` is concave, bounded by Jensen's inequality at
   ``E[g | cell]`` (add). The summands are then composed by repeated squaring
   with re-rounding (``Lattice.power``). Tails: the one that raises the
   loss goes to ``+inf`` (counted in delta), the other is moved in (the
   loss only grows). By Azuma-Hoeffding, ``X <= X_R + s_S`` except with
   probability ``eta_S``, ``s_S = h0 sqrt(V log(1/eta_S) / 2)``.
2. **The loss.** On that event ``L <= log(X_R + s_S)`` (remove) or ``L <=
   -log(-X_R - s_S)`` (add; ``+inf`` when the argument is not positive):
   the loss is monotone in ``S``, so the shift is applied inside the log
   and nothing is linearised. That loss is rounded at random onto a loss
   lattice (up-probability at least the position, as in
   ``Lattice.coarsen``), and ``eta_S`` joins the lattice's absolute
   floating-point allowance (``slack``): the true loss is at most the
   lattice's except on an event of that probability, which a mass added
   anywhere (even at ``+inf``) covers.
3. **Epochs and conversion** as for Poisson steps (``_pld.py``, steps 2-5):
   repeated squaring on the loss lattice, Hoeffding slack of the loss
   roundings added to the epsilon.
4. **Gaussian releases** composed with the epochs (the probability floor of
   ``DPLogisticRegression``: a Gaussian sum of per-record vectors): in each
   direction a Gaussian mechanism of sensitivity-to-noise ratio ``mu`` has
   the privacy loss ``N(mu^2 / 2, mu^2)`` exactly (the Gaussian pair
   ``N(mu, 1)`` against ``N(0, 1)`` in both directions: Dong, Roth and Su
   2022, whose Corollary 2.13 is its hockey-stick curve), a pair composed
   with the epochs' by Zhu, Dong and Wang 2022, Theorem 10. Its
   loss is rounded at random onto the epochs' final spacing with the
   normal's exact cell moments (``_lattice.gaussian_lattice``: the loss is
   linear in the normal, so the up-probability is at least the position in
   the cell, as in step 1 of ``_pld.py``) and convolved; its rounding joins
   the Hoeffding variance like every other. Under replace-one each hop
   (remove, then add) moves the sum by at most one record's bound, so
   ``mu`` is the per-record one in both hops, as for Poisson steps.

5. **A direction past the caps.** Where a direction's lattices would
   outgrow their size caps (small noise and a small delta: the add
   direction's sums need a fine spacing), that direction alone takes its
   Rényi bound: the curve of its ordered pair, ``D_a(P || Q)`` (remove) or
   ``D_a(Q || P)`` (add) of ``_allocation.py`` times the epochs, plus ``a
   mu^2 / 2`` for the Gaussian releases, converted to ``(epsilon, delta)``
   by the conversion of ``_rdp.rdp_to_epsilon``, which bounds the
   hockey-stick divergence of that ordered pair (Balle et al. 2020,
   Theorem 21). Under add/remove the larger direction is reported as
   before; under replace-one the hop is chained with the other as any
   ``(epsilon, delta)`` pair is.

Where a summand's lattice would be too wide for the point cap (small noise
multipliers: the log-normal's upper tail), the spacing grows and the bound
loosens (it stays valid); the caller reports the smaller of this bound and
the Rényi one.
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from . import _lattice
from ._allocation import allocation_rdp_add, allocation_rdp_remove
from ._cache import bounded_cache
from ._neighbouring import Neighbouring
from ._policy import DEFAULT_POLICY
from ._rdp import DEFAULT_ORDERS, rdp_to_epsilon

__all__ = ["allocation_epsilon", "allocation_pld_epsilon"]

# Replace-one add hop: the exponent of its budget scale is capped here, so
# the scale never underflows.
_MAX_HOP_EXPONENT = 50.0


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


def _summand_lattice(mean, z, t, sign, h, tau, low, *, max_points):
    """Lattice of ``sign * V``, ``V = exp(mean + g / z) / t``, ``g ~ N(0, 1)``.

    Step 1 of the module docstring: cells of ``V`` are intervals of ``g``
    (``g = z (log(t V) - mean)``); a cell's up-probability (towards larger
    ``sign * V``) is bounded by the chord (``sign = +1``) or by Jensen's
    inequality (``sign = -1``), with the floating-point allowances of
    ``_pld._step_lattice``. A lattice of more than ``max_points`` points
    raises :class:`TooLarge`.
    """
    v_lo, v_hi = _summand_range(mean, z, t, sign, tau, low)
    k_lo, k_hi = math.floor(v_lo / h), math.ceil(v_hi / h)
    k_lo = max(k_lo, 0)
    if k_hi - k_lo + 1 > max_points:
        raise _lattice.TooLarge
    levels = np.arange(k_lo, k_hi + 1) * h
    with np.errstate(divide="ignore"):
        g = z * (np.log(levels * t) - mean)
    g_a, g_b = g[:-1], g[1:]
    mass, moment, error, mass_error = _lattice.normal_pieces(g_a, g_b, 0.0, 1.0)
    if sign > 0:
        # V is convex in g: its chord bounds each cell.
        up = _lattice.chord_up(g_a, g_b, mass, moment, error)
    else:
        # Rounding -V up means V down: E[(b - V) 1{cell}] <= P(cell) (b -
        # V(E[g | cell])), E[g | cell] at the low end of its error.
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            # E[g 1{g <= g_b}] = -phi(g_b).
            below = -np.exp(-0.5 * g_b**2) / math.sqrt(2.0 * math.pi)
            mean_g = _lattice.low_cell_mean(g_a, mass, moment, error, below)
            v_mean = np.exp(mean + mean_g / z) / t
            v_error = 8.0 * _lattice.UNIT_ROUNDOFF * (levels[1:] + v_mean)
            up = mass * (levels[1:] - v_mean + v_error) / h
    up = _lattice.finish_up(up, mass, jensen=sign < 0)
    below_lo = float(special.ndtr(g[0]))
    above_hi = float(special.ndtr(-g[-1]))
    p = np.zeros(levels.size)
    if sign > 0:
        p[:-1] += mass - up
        p[1:] += up
        p[0] += below_lo  # moved up to the lowest point
        return _lattice.with_errors(k_lo, p, above_hi, mass, mass_error, 1)
    # Orientation -V: the cell below k is the cell above -k.
    p[1:] += mass - up
    p[:-1] += up
    p = p[::-1].copy()
    p[0] += above_hi  # V above v_hi: -V moved up to the lowest point
    return _lattice.with_errors(
        -k_hi, p, below_lo, mass[::-1].copy(), mass_error[::-1].copy(), 1
    )


@dataclass(frozen=True)
class _SumPlan:
    """Spacings and tail cut-offs of one epoch's sum lattice (:func:`_sum_plan`).

    ``count`` summands of mean ``null_mean`` (``t - 1`` for remove, ``t``
    for add), plus, for remove, the record's own summand of mean
    ``base_mean``; ``sign`` orients the lattice (``S`` or ``-S``).
    """

    remove: bool
    sign: float
    count: int
    null_mean: float
    base_mean: float
    step_tau: float
    base_tau: float
    step_low: float
    levels: _lattice.Levels
    h0: float


def _sum_plan(t, z, direction, slack, eta, tail, floating, policy):
    """The :class:`_SumPlan` of one epoch of ``t`` steps in ``direction``.

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
    policy : AccountingPolicy
    """
    remove = direction == "remove"
    sign = 1.0 if remove else -1.0
    count = t - 1 if remove else t
    null_mean, base_mean = -0.5 / (z * z), 0.5 / (z * z)
    share = tail / 2.0
    step_tau = policy.step_tail_share * share / max(count, 1)
    base_tau = policy.step_tail_share * share
    inner = policy.low_tail if remove else policy.add_inner_tail
    step_low = inner / max(count, 1)
    taus, lows, allowances = _lattice.level_budgets(
        max(count, 1),
        (1.0 - policy.step_tail_share) * share,
        policy.low_tail,
        floating,
        first_tail=step_tau,
        first_low=step_low,
    )
    budget = slack**2 / (0.5 * math.log(1.0 / eta))
    ranges = [_summand_range(null_mean, z, t, sign, step_tau, step_low)]
    if remove:
        ranges.append(_summand_range(base_mean, z, t, 1.0, base_tau, policy.low_tail))
    width = max(np.subtract(*bounds[::-1]) for bounds in ranges)
    ideal = _lattice.level_spacings(
        max(count, 1), budget, width, policy.sum_step_points, policy.level_decay
    )
    h0 = float(ideal[0])
    levels = _lattice.Levels(
        _lattice.integer_spacings(ideal, h0), taus, lows, allowances
    )
    return _SumPlan(
        remove,
        sign,
        count,
        null_mean,
        base_mean,
        step_tau,
        base_tau,
        step_low,
        levels,
        h0,
    )


def _sum_lattice(t, z, plan, policy):
    """The lattice of ``X`` (``S`` or ``-S``) of one epoch, on ``plan.h0``."""
    h = plan.h0
    limits = {"max_points": policy.sum_max_points, "max_direct": policy.max_direct}
    part = None
    if plan.count > 0:
        step = _summand_lattice(
            plan.null_mean,
            z,
            t,
            plan.sign,
            h,
            plan.step_tau,
            plan.step_low,
            max_points=policy.max_points,
        )
        part = step.power(plan.count, plan.levels, **limits)
    if plan.remove:
        base = _summand_lattice(
            plan.base_mean,
            z,
            t,
            1.0,
            h,
            plan.base_tau,
            policy.low_tail,
            max_points=policy.max_points,
        )
        part = (
            base
            if part is None
            else part.convolve(
                base,
                plan.levels.taus[-1],
                plan.levels.allowances[-1],
                low_tau=plan.levels.lows[-1],
                **limits,
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
    loss[finite] += 8.0 * _lattice.UNIT_ROUNDOFF * (np.abs(loss[finite]) + 1.0)
    return loss, sum_lattice.p, sum_lattice.inf


def _round_losses(loss, p, inf, h, low, *, max_points):
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
        raise _lattice.TooLarge
    kept = np.where(finite, np.maximum(loss, floor_loss), floor_loss)
    kept = np.where(loss == np.inf, floor_loss, kept)
    weights = np.where(loss == np.inf, 0.0, p)
    position = kept / h
    j = np.floor(position)
    # Up with probability at least the position in the cell (the losses
    # already carry an allowance for the division's error).
    allowance = 2.0 * _lattice.UNIT_ROUNDOFF * (np.abs(position) + 1.0)
    frac = np.minimum(np.nextafter(position - j + allowance, 2.0), 1.0)
    j0 = int(j.min())
    size = int(j.max()) - j0 + 2
    if size > max_points:
        raise _lattice.TooLarge
    index = (j - j0).astype(np.intp)
    out = np.bincount(index, weights=weights * (1.0 - frac), minlength=size)
    out += np.bincount(index + 1, weights=weights * frac, minlength=size)
    return j0, out, inf


def _epoch_losses(group, direction, delta, slack, scale, policy):
    """Loss values, masses, inf mass and failure probability of one epoch.

    ``group`` is ``(t, z, epochs)``; ``slack`` the target sum slack ``s_S``;
    ``scale`` shrinks every tail and failure budget (the add hop of
    replace-one is taken at a far smaller delta).
    """
    t, z, epochs = group
    per_epoch = delta * scale / max(epochs, 1)
    eta = policy.sum_eta_share * policy.eta_share * per_epoch
    plan = _sum_plan(
        t,
        z,
        direction,
        slack,
        eta,
        0.5 * policy.tail_share * per_epoch,
        policy.allocation_fp_share * per_epoch,
        policy,
    )
    lattice = _sum_lattice(t, z, plan, policy)
    s_sum = lattice.std_slack(plan.h0, eta)
    loss, p, inf = _loss_values(lattice, plan.h0, s_sum, direction == "remove")
    # The sum's floating-point bounds carry over (points only move); its
    # Hoeffding failure joins the absolute allowance (step 2).
    return loss, p, inf, lattice.slack + eta, lattice.rel


def _loss_width(loss, p, low):
    """Width of the finite losses kept once a mass ``low`` is cut below."""
    finite = np.isfinite(loss) & (p > 0)
    hi = float(loss[finite].max())
    order = np.argsort(np.where(finite, loss, np.inf))
    low_at = np.searchsorted(np.cumsum(p[order]), low)
    lo = float(loss[order[min(int(low_at), order.size - 1)]])
    return max(hi - lo, 1e-12)


def _direction_loss_lattice(
    groups, direction, delta, reference, rel_slack, scale, policy, gauss_mu2=0.0
):
    """The composed loss lattice of all epochs in one direction, and ``h0``.

    ``gauss_mu2 > 0``: Gaussian releases of that ``mu^2`` composed too (step
    4 of the module docstring), their rounding planned as one combination.
    """
    total_epochs = sum(epochs for _, _, epochs in groups)
    target = rel_slack * reference
    sum_slack = policy.sum_slack_share * target / total_epochs
    if direction == "add":
        per_epoch = reference / math.sqrt(total_epochs)
        sum_slack *= math.exp(-min(per_epoch, policy.add_scale_cap))
    loss_slack = (1.0 - policy.sum_slack_share) * target
    eta = policy.eta_share * delta * scale
    budget = loss_slack**2 / (0.5 * math.log(1.0 / eta))
    parts = len(groups) + 1
    if gauss_mu2 > 0:
        budget *= 1.0 - policy.combine_share
        parts += 1
    pieces, ideal = [], []
    for group in groups:
        epochs = group[2]
        piece = _epoch_losses(group, direction, delta, sum_slack, scale, policy)
        width = _loss_width(piece[0], piece[1], policy.low_tail / epochs)
        ideal.append(
            _lattice.level_spacings(
                epochs,
                budget / len(groups),
                width,
                policy.max_step_points,
                policy.level_decay,
            )
        )
        pieces.append(piece)
    h0 = min(float(levels[0]) for levels in ideal)
    total = None
    tail = policy.tail_share * delta * scale / 2.0
    floating = policy.allocation_fp_share * delta * scale
    for (_, _, epochs), spacings, piece in zip(groups, ideal, pieces, strict=True):
        levels = _lattice.Levels(
            _lattice.integer_spacings(spacings, h0),
            *_lattice.level_budgets(
                epochs, tail / parts, policy.low_tail, floating / parts
            ),
        )
        part = _epoch_lattice(piece, levels, h0, policy).power(
            epochs, levels, max_points=policy.max_points, max_direct=policy.max_direct
        )
        total = (
            part
            if total is None
            else total.convolve(
                part, tail / parts, floating / parts, max_points=policy.max_points
            )
        )
    if gauss_mu2 > 0:
        release = _lattice.gaussian_lattice(
            math.sqrt(gauss_mu2),
            total.spacing * h0,
            max_points=policy.max_points,
            spacing=total.spacing,
        )
        total = total.convolve(
            release, tail / parts, floating / parts, max_points=policy.max_points
        )
    return total, h0


def _epoch_lattice(piece, levels, h0, policy):
    """One epoch's loss lattice, on the first level's spacing."""
    loss, p, inf, slack, rel = piece
    m0 = levels.spacings[0]
    j0, out, inf = _round_losses(
        loss, p, inf, m0 * h0, levels.lows[0], max_points=policy.max_points
    )
    # Sums of positive terms after a product: a relative error.
    return _lattice.Lattice(
        j0,
        out,
        inf,
        slack,
        spacing=m0,
        var=float(m0) ** 2,
        rel=rel + (p.size + 4.0) * _lattice.UNIT_ROUNDOFF,
    ).trim(levels.taus[0], levels.lows[0])


def allocation_pld_epsilon(
    groups,
    delta,
    neighbouring,
    reference,
    rel_slack,
    policy=DEFAULT_POLICY,
    gauss_mu2=0.0,
):
    """Epsilon of random allocation epochs (and Gaussian releases) by the PLD, or inf.

    Parameters
    ----------
    groups : list of (steps_per_epoch, noise_multiplier, epochs)
    delta : float in (0, 1)
    neighbouring : {"replace-one", "add-remove"}
        Replace-one chains remove and add through the data set without the
        record.
    reference : float > 0
        A first estimate of epsilon; the rounding slack is planned as about
        ``rel_slack`` of it.
    rel_slack : float
    policy : AccountingPolicy, default=DEFAULT_POLICY
    gauss_mu2 : float, default=0.0
        ``sum 1 / z^2`` of Gaussian releases composed with the epochs, in
        units of one hop's sensitivity (a record's removal or addition).

    Returns
    -------
    float
        A valid epsilon (``inf`` when an epoch has one step: that is the
        Gaussian route's; a direction whose lattices would be too large
        takes its own Rényi bound, step 5).
    """
    relation = Neighbouring.parse(neighbouring)
    groups = tuple((int(t), float(z), int(e)) for t, z, e in groups if e > 0)
    if not groups and gauss_mu2 <= 0:
        return 0.0
    if not groups or any(t < 2 for t, _, _ in groups):
        return math.inf  # one step an epoch is a Gaussian: the GDP route
    return _pld_epsilon(
        groups,
        float(delta),
        relation,
        float(reference),
        float(rel_slack),
        policy,
        float(gauss_mu2),
    )


@bounded_cache(DEFAULT_POLICY.allocation_cache_size)
def _pld_epsilon(groups, delta, relation, reference, rel_slack, policy, gauss_mu2):
    """:func:`allocation_pld_epsilon` on parsed arguments (cached).

    A calibration reports the bound of its last accepted trial, and every
    fit after it accounts the same events again.
    """
    bound = _chained if relation is Neighbouring.REPLACE_ONE else _larger_direction
    try:
        return bound(
            list(groups),
            delta,
            reference,
            rel_slack / relation.hops,
            policy,
            gauss_mu2,
        )
    except _lattice.TooLarge:
        return math.inf


def _direction_bound(
    groups, direction, delta, reference, rel_slack, scale, policy, gauss_mu2
):
    """``bound(delta, eta)`` of one direction: its lattice, or its Rényi bound.

    Where the lattice would outgrow its caps, the direction's own Rényi
    curve stands in (step 5 of the module docstring); the Hoeffding share
    ``eta`` is then not needed.
    """
    try:
        lattice, h0 = _direction_loss_lattice(
            groups, direction, delta, reference, rel_slack, scale, policy, gauss_mu2
        )
    except _lattice.TooLarge:
        curve = _direction_rdp(groups, direction, gauss_mu2)
        return lambda d, e: rdp_to_epsilon(DEFAULT_ORDERS, curve, d, warn=False)[0]
    return lambda d, e: lattice.bound(h0, d, e)


def _direction_rdp(groups, direction, gauss_mu2):
    """The Rényi curve of one direction of all epochs and Gaussian releases.

    ``D_a(P || Q)`` (remove) or ``D_a(Q || P)`` (add) of one epoch
    (``_allocation.py``), times its epochs (composition: Mironov 2017,
    Proposition 1), plus ``a mu^2 / 2`` for the Gaussian releases in either
    direction (Mironov 2017, Proposition 7).
    """
    rdp_of = allocation_rdp_remove if direction == "remove" else allocation_rdp_add
    curve = DEFAULT_ORDERS * gauss_mu2 / 2.0
    for t, z, epochs in groups:
        curve = curve + epochs * rdp_of(DEFAULT_ORDERS, t, z)
    return curve


def _larger_direction(groups, delta, reference, rel_slack, policy, gauss_mu2):
    """Add/remove: the larger of the two directions' epsilons."""
    results = []
    for direction in ("remove", "add"):
        bound = _direction_bound(
            groups, direction, delta, reference, rel_slack, 1.0, policy, gauss_mu2
        )
        results.append(bound(delta, policy.eta_share * delta))
    return max(results)


def _chained(groups, delta, reference, rel_slack, policy, gauss_mu2):
    """Replace-one: remove, then add, through the data set without the record.

    The first hop is planned at a share of delta; the add hop at about
    ``delta exp(-eps_1)``, its tails and allowances scaled for that (any plan
    is valid).
    """
    share = policy.chain_plan_share
    remove = _direction_bound(
        groups, "remove", delta, reference, rel_slack, share, policy, gauss_mu2
    )
    eps_1 = remove(share * delta, share * policy.eta_share * delta)
    exponent = min(max(eps_1, 0.0), _MAX_HOP_EXPONENT)
    scale = policy.add_hop_scale * math.exp(-exponent)
    add = _direction_bound(
        groups, "add", delta, reference, rel_slack, scale, policy, gauss_mu2
    )
    return _lattice.chained_epsilon(
        remove,
        add,
        delta,
        math.inf,
        eta_share=policy.eta_share,
        splits=policy.chain_splits,
    )


def allocation_epsilon(
    groups, delta, neighbouring, reference, rel_slack, policy, gauss_mu2=0.0
):
    """The tight bound of random allocation epochs (and Gaussian releases), or None.

    The lattice is planned for the Rényi epsilon ``reference``, and again
    for its own first answer when that is far below it. ``gauss_mu2``: as
    in :func:`allocation_pld_epsilon`.

    Returns
    -------
    (epsilon, "pld") or None
    """
    if reference is None or not math.isfinite(reference) or reference <= 0:
        return None
    groups = _lattice.merged(groups)

    def epsilon_at(planned):
        return allocation_pld_epsilon(
            groups, delta, neighbouring, planned, rel_slack, policy, gauss_mu2
        )

    return _lattice.plan_twice(
        epsilon_at,
        reference,
        policy.min_planned_allocation_epsilon,
        policy.replan_below,
    )

"""Calibrate the noise to a target (epsilon, delta)."""

import math
from dataclasses import replace

from ._accountant import RDPAccountant
from ._pld import pld_epsilon
from ._rdp import rdp_to_epsilon

__all__ = ["account", "calibrate_noise_multiplier"]

# Bracketing limits for the noise multiplier and the tolerance of the search.
_Z_MIN, _Z_MAX = 1e-4, 1e6
_TARGET_RTOL = 0.005
_MAX_BISECTIONS = 200
# The numerical PLD's rounding slack, as a share of epsilon, while calibrating
# and in the report: the same, so the report is the bound the search
# certified (docs/benchmarks.md, "Accounting at scale").
_PLD_SEARCH_SLACK = 1e-2
_PLD_REPORT_SLACK = 1e-2
ACCOUNTANTS = ("rdp", "pld")


def _as_pairs(events):
    if isinstance(events, (list, tuple)):
        pairs = []
        for item in events:
            pairs.append(item if isinstance(item, tuple) else (item, 1))
        return pairs
    return [(events, 1)]


def _check_accountant(accountant):
    if accountant not in ACCOUNTANTS:
        raise ValueError(
            f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}."
        )
    return accountant


def account(
    events,
    delta,
    *,
    neighbouring="replace-one",
    orders=None,
    warn=True,
    accountant="rdp",
):
    """Privacy spent by ``events`` at ``delta``.

    Parameters
    ----------
    events : event, or list of events or ``(event, count)`` pairs
    delta : float
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
    orders : array-like or None
    warn : bool, default=True
        Warn when the best order is at the end of the grid.
    accountant : {"rdp", "pld"}, default="rdp"
        ``"rdp"``: the Rényi-DP accountant. ``"pld"``: also the tight
        conversions of :mod:`skdp.accounting._pld` where they apply (exact
        Gaussian DP when every event is Gaussian; the numerical privacy loss
        distribution for Poisson-subsampled Gaussian steps and for random
        allocation epochs, under replace-one chained through the data set
        without the record), reporting the
        smaller of the valid bounds and naming it in ``accountant``. Only
        for events that describe the mechanism exactly: a ``GaussianEvent``
        standing for a zCDP budget (as in
        :class:`~skdp.synthetic.DPSyntheticData`) must use ``"rdp"``.

    Returns
    -------
    PrivacySpent
        With ``accountant="pld"``, it keeps the events, so that
        :meth:`PrivacySpent.at_delta` and :func:`compose_spent` stay tight.
    """
    _check_accountant(accountant)
    pairs = _as_pairs(events)
    rdp = RDPAccountant(neighbouring=neighbouring, orders=orders)
    for event, count in pairs:
        rdp.compose(event, count)
    spent = rdp.spent(delta, warn=warn and accountant == "rdp")
    if accountant == "rdp":
        return spent
    return _tighter(spent, pairs, delta, neighbouring, warn)


def _tight_bound(pairs, delta, neighbouring, reference, slacks):
    """The smallest of the tight bounds at these rounding slacks, or None.

    ``reference`` is the Rényi epsilon of the same events, so that the
    calibration's search (coarse slack) and the report (the smaller of fine
    and coarse) compute the coarse bound identically: the report is never
    above what the search certified.
    """
    best = None
    for rel_slack in dict.fromkeys(slacks):
        found = pld_epsilon(
            pairs, delta, neighbouring, reference=reference, rel_slack=rel_slack
        )
        if found is not None and (best is None or found[0] < best[0]):
            best = found
        if found is not None and found[1] == "gdp":
            break  # exact: no slack to vary
    return best


def _tighter(spent, pairs, delta, neighbouring, warn):
    """``spent`` or the tight bound of ``pairs`` if it is smaller."""
    tight = _tight_bound(
        pairs,
        delta,
        neighbouring,
        spent.epsilon,
        (_PLD_SEARCH_SLACK, _PLD_REPORT_SLACK),
    )
    spent = replace(spent, events=tuple(pairs))
    if tight is None or not tight[0] < spent.epsilon:
        if warn:
            # Re-run the conversion for its end-of-grid warning only.
            rdp_to_epsilon(spent.orders, spent.rdp, delta, warn=True)
        return spent
    return _with_tight(spent, *tight)


# The Rényi name of a replace-one Poisson bound, and what the PLD uses instead.
_WEAK_TRIANGLE = "(replace-one by weak triangle)"
_CHAIN = "(replace-one: remove, then add)"


def _with_tight(spent, epsilon, accountant):
    """``spent`` reporting a tight ``epsilon``, its bound named accordingly."""
    bound = spent.bound
    if accountant == "pld":
        bound = bound.replace(_WEAK_TRIANGLE, _CHAIN)
    return replace(spent, epsilon=epsilon, accountant=accountant, bound=bound)


def calibrate_noise_multiplier(
    make_events,
    target_epsilon,
    delta,
    *,
    neighbouring="replace-one",
    orders=None,
    accountant="rdp",
):
    """Smallest noise multiplier whose spend is at most ``target_epsilon``.

    Brackets the multiplier by doubling or halving, then bisects (on a log
    scale) keeping the upper end, so the returned noise always meets the
    target: ``spent.epsilon <= target_epsilon``, and within 0.5% below it.
    Assumes the spend decreases with the noise, as it does for every event of
    this package.

    Parameters
    ----------
    make_events : callable
        ``make_events(z)`` returns the events of a run with noise multiplier ``z``
        (an event, or a list of events or ``(event, count)`` pairs).
    target_epsilon : float > 0
    delta : float in (0, 1)
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
    orders : array-like or None
    accountant : {"rdp", "pld"}, default="rdp"
        As in :func:`account`. With ``"pld"`` the Rényi calibration comes
        first; where a tight bound applies, the search continues below its
        noise on the tight bound (with a coarser rounding slack, each step
        still a valid bound) and the final spend is the smallest valid one.

    Returns
    -------
    noise_multiplier : float
    spent : PrivacySpent
        The spend at ``noise_multiplier``.

    Raises
    ------
    ValueError
        If no noise multiplier in [1e-4, 1e6] meets the target.
    """
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ValueError(
            f"target_epsilon must be finite and > 0, got {target_epsilon}."
        )

    _check_accountant(accountant)

    def epsilon(z):
        return account(
            make_events(z), delta, neighbouring=neighbouring, orders=orders, warn=False
        ).epsilon

    lo = hi = 1.0
    if epsilon(hi) <= target_epsilon:
        while epsilon(lo) <= target_epsilon:
            hi, lo = lo, lo / 2.0
            if lo < _Z_MIN:
                break
    else:
        while epsilon(hi) > target_epsilon:
            lo, hi = hi, hi * 2.0
            if hi > _Z_MAX:
                raise ValueError(
                    f"No noise multiplier up to {_Z_MAX:g} reaches epsilon="
                    f"{target_epsilon} at delta={delta}; raise the target."
                )
    hi, _ = _bisect(epsilon, lo, hi, epsilon(hi), target_epsilon)
    if accountant == "pld":
        tight = _calibrate_tight(
            make_events, target_epsilon, delta, neighbouring, orders, hi
        )
        if tight is not None:
            return tight
    spent = account(make_events(hi), delta, neighbouring=neighbouring, orders=orders)
    return hi, spent


def _bisect(epsilon, lo, hi, eps_hi, target_epsilon):
    """Bisect ``[lo, hi]`` on a log scale keeping ``epsilon(hi) <= target``.

    Stops once ``epsilon(hi)`` is within ``_TARGET_RTOL`` below the target (or
    the bracket is a float apart); returns ``(hi, epsilon(hi))``.
    """
    for _ in range(_MAX_BISECTIONS):
        if eps_hi >= (1.0 - _TARGET_RTOL) * target_epsilon or hi / lo < 1 + 1e-12:
            break
        mid = math.sqrt(lo * hi)
        eps_mid = epsilon(mid)
        if eps_mid <= target_epsilon:
            hi, eps_hi = mid, eps_mid
        else:
            lo = mid
    return hi, eps_hi


def _calibrate_tight(make_events, target_epsilon, delta, neighbouring, orders, z_rdp):
    """Continue below the Rényi noise ``z_rdp`` on the tight bound, or None."""

    def tight(z):
        pairs = _as_pairs(make_events(z))
        reference = account(
            pairs, delta, neighbouring=neighbouring, orders=orders, warn=False
        ).epsilon
        found = _tight_bound(
            pairs, delta, neighbouring, reference, (_PLD_SEARCH_SLACK,)
        )
        return math.inf if found is None else found[0]

    hi, eps_hi = z_rdp, tight(z_rdp)
    if not eps_hi <= target_epsilon:
        return None
    lo = hi
    while True:
        lo *= 0.8
        eps_lo = tight(lo)
        if eps_lo > target_epsilon:
            break
        hi, eps_hi = lo, eps_lo
        if lo < _Z_MIN:
            break
    hi, eps_hi = _bisect(tight, lo, hi, eps_hi, target_epsilon)
    spent = account(
        make_events(hi),
        delta,
        neighbouring=neighbouring,
        orders=orders,
        accountant="pld",
    )
    # The report is the smaller of the fine and the coarse bound, the coarse
    # one computed exactly as in the search: at most eps_hi <= target.
    return hi, spent

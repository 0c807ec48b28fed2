"""Calibrate the noise to a target (epsilon, delta)."""

import math

from ._accountant import RDPAccountant

__all__ = ["account", "calibrate_noise_multiplier"]

# Bracketing limits for the noise multiplier and the tolerance of the search.
_Z_MIN, _Z_MAX = 1e-4, 1e6
_TARGET_RTOL = 0.005
_MAX_BISECTIONS = 200


def _as_pairs(events):
    if isinstance(events, (list, tuple)):
        pairs = []
        for item in events:
            pairs.append(item if isinstance(item, tuple) else (item, 1))
        return pairs
    return [(events, 1)]


def account(events, delta, *, neighbouring="replace-one", orders=None, warn=True):
    """Privacy spent by ``events`` at ``delta``.

    Parameters
    ----------
    events : event, or list of events or ``(event, count)`` pairs
    delta : float
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
    orders : array-like or None
    warn : bool, default=True
        Warn when the best order is at the end of the grid.

    Returns
    -------
    PrivacySpent
    """
    accountant = RDPAccountant(neighbouring=neighbouring, orders=orders)
    for event, count in _as_pairs(events):
        accountant.compose(event, count)
    return accountant.spent(delta, warn=warn)


def calibrate_noise_multiplier(
    make_events, target_epsilon, delta, *, neighbouring="replace-one", orders=None
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
    eps_hi = epsilon(hi)
    for _ in range(_MAX_BISECTIONS):
        if eps_hi >= (1.0 - _TARGET_RTOL) * target_epsilon or hi / lo < 1 + 1e-12:
            break
        mid = math.sqrt(lo * hi)
        eps_mid = epsilon(mid)
        if eps_mid <= target_epsilon:
            hi, eps_hi = mid, eps_mid
        else:
            lo = mid
    spent = account(make_events(hi), delta, neighbouring=neighbouring, orders=orders)
    return hi, spent

"""Account for events, and calibrate the noise to a target (epsilon, delta)."""

import math

from ._accountant import composed, make_accountant
from ._policy import DEFAULT_POLICY

__all__ = ["account", "calibrate", "calibrate_noise_multiplier"]

# The bisection stops when its bracket is a float apart.
_BRACKET_RTOL = 1e-12


def _as_pairs(events):
    if isinstance(events, (list, tuple)):
        pairs = []
        for item in events:
            pairs.append(item if isinstance(item, tuple) else (item, 1))
        return pairs
    return [(events, 1)]


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
    accountant : {"rdp", "pld"} or Accountant, default="rdp"
        ``"rdp"``: the Rényi-DP accountant (:class:`RDPAccountant`).
        ``"pld"``: also the tight conversions of :class:`PLDAccountant` where
        they apply (exact Gaussian DP when every event is Gaussian; the
        numerical privacy loss distribution for Poisson-subsampled Gaussian
        steps and for random allocation epochs, under replace-one chained
        through the data set without the record), reporting the smaller of
        the valid bounds and naming it in ``accountant``
        (:class:`TightestAccountant`). Only for events that describe the
        mechanism exactly: a ``GaussianEvent`` standing for a zCDP budget (as
        in :class:`~skdp.synthetic.DPSyntheticData`) must use ``"rdp"``. An
        :class:`Accountant` instance: a fresh one of its kind and settings
        (its relation must be ``neighbouring``; ``orders`` None or its own).

    Returns
    -------
    PrivacySpent
        With ``accountant="pld"``, it keeps the events, so that
        :meth:`PrivacySpent.at_delta` and :func:`compose_spent` stay tight.
    """
    accountant = make_accountant(accountant, neighbouring, orders)
    return composed(accountant, _as_pairs(events)).spent(delta, warn=warn)


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
    accountant : {"rdp", "pld"} or Accountant, default="rdp"
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
    accountant = make_accountant(accountant, neighbouring, orders)
    return calibrate(make_events, target_epsilon, delta, accountant)


def calibrate(make_events, target_epsilon, delta, accountant, policy=None):
    """Smallest noise multiplier whose spend by ``accountant`` meets the target.

    The search runs on the accountant's :meth:`Accountant.calibration_stages`:
    it brackets the noise on the first (doubling or halving from 1) and
    bisects; each later stage, if it meets the target at the noise found so
    far, continues below it (steps down by ``policy.descent_factor``, then
    bisection). The spend is the accountant's own report at the final noise
    if a later stage moved it, else the first stage's.

    Parameters
    ----------
    make_events : callable
    target_epsilon : float > 0
    delta : float in (0, 1)
    accountant : Accountant
        An empty accountant (only its kind and settings are used).
    policy : AccountingPolicy or None, default=None
        The search's bracket and tolerance; None: the accountant's policy if
        it has one, else the defaults.

    Returns
    -------
    noise_multiplier : float
    spent : PrivacySpent
    """
    if policy is None:
        policy = getattr(accountant, "policy", DEFAULT_POLICY)
    search = _Search(make_events, target_epsilon, delta, policy)
    first, *later = accountant.calibration_stages()
    z = search.bracket(first)
    reporter = first
    for stage in later:
        below = search.descend(stage, z)
        if below is not None:
            z, reporter = below, accountant
    spent = composed(reporter.fresh(), _as_pairs(make_events(z))).spent(delta)
    return z, spent


class _Search:
    """The noise searches of :func:`calibrate` (epsilon decreases with noise)."""

    def __init__(self, make_events, target_epsilon, delta, policy):
        self.make_events = make_events
        self.target = target_epsilon
        self.delta = delta
        self.policy = policy

    def epsilon(self, stage, z):
        """Epsilon of the run at noise ``z``, by a fresh copy of ``stage``."""
        pairs = _as_pairs(self.make_events(z))
        return composed(stage.fresh(), pairs).get_epsilon(self.delta, warn=False)

    def bracket(self, stage):
        """Bracket from noise 1 by doubling or halving, then bisect."""

        def epsilon(z):
            return self.epsilon(stage, z)

        policy, target = self.policy, self.target
        lo = hi = 1.0
        if epsilon(hi) <= target:
            while epsilon(lo) <= target:
                hi, lo = lo, lo / 2.0
                if lo < policy.min_noise:
                    break
        else:
            while epsilon(hi) > target:
                lo, hi = hi, hi * 2.0
                if hi > policy.max_noise:
                    raise ValueError(
                        f"No noise multiplier up to {policy.max_noise:g} reaches "
                        f"epsilon={target} at delta={self.delta}; raise the target."
                    )
        return self.bisect(epsilon, lo, hi, epsilon(hi))[0]

    def descend(self, stage, z):
        """Continue below ``z`` on ``stage``, or None if it misses the target."""

        def epsilon(z):
            return self.epsilon(stage, z)

        hi, eps_hi = z, epsilon(z)
        if not eps_hi <= self.target:
            return None
        lo = hi
        while True:
            lo *= self.policy.descent_factor
            eps_lo = epsilon(lo)
            if eps_lo > self.target:
                break
            hi, eps_hi = lo, eps_lo
            if lo < self.policy.min_noise:
                break
        return self.bisect(epsilon, lo, hi, eps_hi)[0]

    def bisect(self, epsilon, lo, hi, eps_hi):
        """Bisect ``[lo, hi]`` on a log scale keeping ``epsilon(hi) <= target``.

        Stops once ``epsilon(hi)`` is within ``policy.target_rtol`` below the
        target (or the bracket is a float apart); returns ``(hi,
        epsilon(hi))``.
        """
        target = self.target
        for _ in range(self.policy.max_bisections):
            close = eps_hi >= (1.0 - self.policy.target_rtol) * target
            if close or hi / lo < 1 + _BRACKET_RTOL:
                break
            mid = math.sqrt(lo * hi)
            eps_mid = epsilon(mid)
            if eps_mid <= target:
                hi, eps_hi = mid, eps_mid
            else:
                lo = mid
        return hi, eps_hi

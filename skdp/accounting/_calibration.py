"""Account for events, and calibrate the noise to a target (epsilon, delta)."""

import math

from ._accountant import composed, make_accountant
from ._policy import DEFAULT_POLICY

__all__ = ["account", "calibrate", "calibrate_noise_multiplier"]

# The search stops when its bracket is a float apart.
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

    Searches by secant steps on ``log epsilon`` against ``log noise``, with
    a bracket and halvings as safeguards, keeping the upper end, so the
    returned noise always meets the target: ``spent.epsilon <=
    target_epsilon``, and within 0.5% below it.
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
    it finds the crossing of the first from noise 1; each later stage, if it
    meets the target at the noise found so far, continues below it. Each
    crossing is a safeguarded secant search on ``log epsilon`` against ``log
    noise`` (:meth:`_Search.crossing`). The spend is the accountant's own
    report at the final noise if a later stage moved it, else the first
    stage's.

    Parameters
    ----------
    make_events : callable
    target_epsilon : float > 0
    delta : float in (0, 1)
    accountant : Accountant
        An empty accountant (only its kind and settings are used).
    policy : AccountingPolicy or None, default=None
        The search's limits and tolerance; None: the accountant's policy if
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
    z, slope = search.crossing(first, 1.0, _FIRST_SLOPE)
    reporter = first
    for stage in later:
        below = search.descend(stage, z, slope)
        if below is not None:
            (z, slope), reporter = below, accountant
    spent = composed(reporter.fresh(), _as_pairs(make_events(z))).spent(delta)
    return z, spent


# Slope of log epsilon against log noise assumed before two points are
# known: about -1 for Gaussian compositions at moderate noise.
_FIRST_SLOPE = -1.0
# The slope a secant step trusts, and the largest factor one step moves the
# noise by (a wild slope or an infinite epsilon cannot run the search away).
_SLOPE_RANGE = (-4.0, -0.25)
_MAX_STEP = math.log(32.0)
# Inside a bracket, an interpolated point keeps this share of the bracket
# (in log noise) on each side, so every step shrinks it.
_INTERPOLATION_MARGIN = 0.02


class _Search:
    """The noise searches of :func:`calibrate` (epsilon decreases with noise).

    Every epsilon is computed once per stage and noise (a search that comes
    back to a point reads it).
    """

    def __init__(self, make_events, target_epsilon, delta, policy):
        self.make_events = make_events
        self.target = target_epsilon
        self.delta = delta
        self.policy = policy
        self._known = {}

    def epsilon(self, stage, z):
        """Epsilon of the run at noise ``z``, by a fresh copy of ``stage``."""
        key = (id(stage), z)
        if key not in self._known:
            pairs = _as_pairs(self.make_events(z))
            accountant = composed(stage.fresh(), pairs)
            self._known[key] = accountant.get_epsilon(self.delta, warn=False)
        return self._known[key]

    def descend(self, stage, z, slope):
        """Continue below ``z`` on ``stage``, or None if it misses the target."""
        if not self.epsilon(stage, z) <= self.target:
            return None
        return self.crossing(stage, z, slope)

    def crossing(self, stage, z, slope):
        """Noise where ``stage`` meets the target within ``target_rtol`` below.

        From ``z``, secant steps on ``log epsilon`` against ``log z`` (slope
        from the last two points, else ``slope``; each step at most a factor
        of 32) until the target is bracketed; inside the bracket the same
        secant step where it lands well inside, else false position between
        the bracket's ends, kept off them, and a halving whenever three steps
        did not halve the bracket (so it shrinks geometrically). Every step
        aims at ``target (1 - target_rtol / 2)``. Only noise whose epsilon
        meets the target is returned.

        Returns
        -------
        noise_multiplier : float
        slope : float
            The last secant slope (a hint for a later stage's search).

        Raises
        ------
        ValueError
            If no noise multiplier up to ``policy.max_noise`` meets the target.
        """
        policy, target = self.policy, self.target
        floor = (1.0 - policy.target_rtol) * target
        aim = math.log(target) + math.log1p(-0.5 * policy.target_rtol)
        low = high = previous = None  # (z, epsilon): above / meeting the target
        widths = []  # the bracket's width in log noise, after each step
        for _ in range(policy.max_search_steps):
            eps = self.epsilon(stage, z)
            slope = _secant_slope(previous, (z, eps), slope)
            previous = (z, eps)
            if eps <= target:
                high = (z, eps)
                if eps >= floor or z <= policy.min_noise:
                    break
            else:
                low = (z, eps)
                if z >= policy.max_noise:
                    break
            if low is not None and high is not None:
                widths.append(math.log(high[0] / low[0]))
            if low is None:
                z = max(z * math.exp(_secant_step(eps, aim, slope)), policy.min_noise)
            elif high is None:
                z = min(z * math.exp(_secant_step(eps, aim, slope)), policy.max_noise)
            elif high[0] / low[0] < 1 + _BRACKET_RTOL:
                break
            else:
                halve = len(widths) >= 4 and widths[-1] > 0.5 * widths[-4]
                secant = z * math.exp(_secant_step(eps, aim, slope))
                z = _inside(secant, low, high, aim, halve)
        if high is None:
            raise ValueError(
                f"No noise multiplier up to {policy.max_noise:g} reaches "
                f"epsilon={target} at delta={self.delta}; raise the target."
            )
        return high[0], slope


def _secant_slope(previous, point, slope):
    """Slope of ``log epsilon`` on ``log z`` through two points, else ``slope``."""
    if previous is None:
        return slope
    (z0, e0), (z1, e1) = previous, point
    if z0 == z1 or not (0 < e0 < math.inf and 0 < e1 < math.inf):
        return slope
    secant = math.log(e1 / e0) / math.log(z1 / z0)
    low, high = _SLOPE_RANGE
    return min(max(secant, low), high) if math.isfinite(secant) else slope


def _secant_step(eps, aim, slope):
    """Change of ``log z`` that the slope says reaches ``aim`` from ``eps``."""
    if not eps > 0:
        return -_MAX_STEP
    if not math.isfinite(eps):
        return _MAX_STEP
    step = (math.log(eps) - aim) / -slope
    return min(max(step, -_MAX_STEP), _MAX_STEP)


def _inside(secant, low, high, aim, halve):
    """Next noise inside the bracket ``low < z < high`` (log scale).

    ``secant`` if it lies at least ``_INTERPOLATION_MARGIN`` of the bracket
    from both ends, else false position between the ends (kept that far
    from them); the bracket's middle if ``halve``.
    """
    (z_low, e_low), (z_high, e_high) = low, high
    width = math.log(z_high / z_low)
    share = 0.5
    if not halve:
        share = math.log(secant / z_low) / width
        if not _INTERPOLATION_MARGIN <= share <= 1 - _INTERPOLATION_MARGIN:
            share = 0.5
            if 0 < e_high and math.isfinite(e_low):
                f_low, f_high = math.log(e_low) - aim, math.log(e_high) - aim
                share = f_low / (f_low - f_high)
            share = min(max(share, _INTERPOLATION_MARGIN), 1 - _INTERPOLATION_MARGIN)
    return math.exp(math.log(z_low) + share * width)

"""Tight (epsilon, delta) for Gaussian and Poisson-subsampled Gaussian runs.

The Rényi route (``_rdp.py``) loses 5-20% of epsilon in its conversion to
(epsilon, delta). Two mechanisms of this package have exact or numerically
tight alternatives, used where they apply and reported only when smaller:

- **Compositions of Gaussian mechanisms.** An adaptive composition of Gaussian
  mechanisms with noise multipliers ``z_i`` is ``mu``-GDP with
  ``mu = sqrt(sum 1 / z_i^2)`` (Dong, Roth, Su 2022, "Gaussian differential
  privacy", Corollary 3.3), and ``mu``-GDP is exactly the set of
  (epsilon, delta(epsilon)) with ``delta(eps) = Phi(-eps/mu + mu/2) -
  exp(eps) Phi(-eps/mu - mu/2)`` (ibid., Corollary 2.13; Balle and Wang 2018,
  Theorem 8). No approximation.
- **Poisson-subsampled Gaussian steps** (DP-SGD with Poisson batches),
  possibly with Gaussian releases, under add/remove: the privacy loss distribution
  (PLD) of the dominating pair of one step, ``P = (1-q) N(0, z^2) + q N(1, z^2)``
  against ``Q = N(0, z^2)`` (remove) and the reverse pair (add), composed by
  convolution (Koskela, Jälkö, Honkela 2020; Zhu, Dong, Wang 2022, Theorem 10
  for adaptive composition; Gopi, Lee, Wutschitz 2021 for the rounding
  argument). The hockey-stick divergence of the composition is
  ``delta(eps) = E[(1 - exp(eps - L))_+]`` with ``L`` the sum of the steps'
  privacy losses, and the answer is the larger over the two directions.
  Under replace-one: the two directions chained through the data set without
  the record (group privacy, see :func:`pld_epsilon`).

How the numerical PLD stays an upper bound (the proof, step by step):

1. Each step's loss ``L_t`` is rounded to the lattice ``h Z`` *in the mean*:
   to the neighbouring points ``kh <= L_t <= (k+1)h`` with probabilities that
   keep ``E[rounded | L_t] = L_t``. The rounding errors ``E_t`` are independent
   given the losses, have mean 0 and each lie in an interval of length ``h``,
   so by Hoeffding's inequality ``P(sum E_t <= -s) <= exp(-2 s^2 / (T h^2))``.
   On the complement, ``sum L_t <= sum rounded + s``; since
   ``l -> (1 - exp(eps - l))_+`` is increasing and at most 1,
   ``delta_true(eps) <= delta_lattice(eps - s) + eta`` with
   ``eta = exp(-2 s^2 / (T h^2))``.
2. Tails: the loss's upper tail beyond a point of probability ``tau`` is moved
   to ``+inf`` (counted in full in delta); the lower tail (add direction) is
   moved *up* to the last lattice point kept. Both only increase the loss, so
   both only increase the computed delta. The same two moves trim the
   lattice after every convolution.
3. Convolutions by FFT (``scipy.signal.fftconvolve``) carry rounding error;
   each adds to delta a bound on its L1 error, ``n_out * 10 * u * log2(n) *
   ||a||_2 ||b||_2`` (``u`` the unit roundoff; measured errors are far
   smaller), and negative outputs are set to 0.
4. The lattice conversion ``eps' = min{eps : delta_lattice(eps) <= delta - eta
   - slack}`` is exact on the lattice (piecewise closed form), and the report
   is ``eps' + s``.

The lattice step ``h`` is chosen so that ``s`` is a small fraction
(``rel_slack``) of a first estimate of epsilon (the Rényi one): the price of
rigour is that fraction of epsilon.
"""

import math

import numpy as np
from scipy import special
from scipy.signal import fftconvolve, lfilter

from .events import GaussianEvent, PoissonGaussianEvent

__all__ = ["gaussian_dp_delta", "gaussian_dp_epsilon", "pld_epsilon"]

_UNIT_ROUNDOFF = np.finfo(float).eps / 2.0
# Share of delta given to the Hoeffding term, the truncated tails and the FFT
# rounding allowance (the lattice delta gets the rest).
_ETA_SHARE = 1e-2
_TAIL_SHARE = 1e-3
# Largest lattice (points) the numerical PLD builds; beyond it the caller keeps
# the Rényi bound.
_MAX_POINTS = 1 << 21
# Gauss-Legendre nodes for the within-cell mean of one step's loss.
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(6)


def gaussian_dp_delta(epsilon, mu):
    """Delta of ``mu``-GDP at ``epsilon`` (Dong, Roth, Su 2022, Cor. 2.13).

    ``Phi(-eps/mu + mu/2) - exp(eps) Phi(-eps/mu - mu/2)``, the second term in
    log space so that large ``epsilon`` does not overflow.
    """
    epsilon, mu = float(epsilon), float(mu)
    if mu <= 0:
        return 0.0
    first = special.ndtr(-epsilon / mu + mu / 2.0)
    second = math.exp(epsilon + special.log_ndtr(-epsilon / mu - mu / 2.0))
    return max(0.0, first - second)


def gaussian_dp_epsilon(mu, delta):
    """Smallest epsilon with ``gaussian_dp_delta(epsilon, mu) <= delta``.

    Exact for ``mu``-GDP (monotone in epsilon; solved by bracketing and
    bisection to a relative 1e-12, rounding up).

    Parameters
    ----------
    mu : float >= 0
    delta : float in (0, 1)

    Returns
    -------
    float
    """
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}.")
    if gaussian_dp_delta(0.0, mu) <= delta:
        return 0.0
    lo, hi = 0.0, max(1.0, mu * mu)
    while gaussian_dp_delta(hi, mu) > delta:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        if gaussian_dp_delta(mid, mu) > delta:
            lo = mid
        else:
            hi = mid
    return hi


class _TooLarge(Exception):
    """The lattice outgrew ``_MAX_POINTS``: the caller keeps the Rényi bound."""


class _Lattice:
    """A distribution on ``(offset + arange(len(p))) * h`` plus mass at +inf."""

    __slots__ = ("offset", "p", "inf", "slack")

    def __init__(self, offset, p, inf=0.0, slack=0.0):
        self.offset = int(offset)
        self.p = p
        self.inf = float(inf)
        self.slack = float(slack)  # FFT rounding allowance (an L1 bound)

    @classmethod
    def point(cls):
        return cls(0, np.ones(1))

    def convolve(self, other, tau):
        a, b = self.p, other.p
        n_out = a.size + b.size - 1
        if min(a.size, b.size) < 64:
            p = np.convolve(a, b)
            error = 0.0
        else:
            p = fftconvolve(a, b)
            np.maximum(p, 0.0, out=p)
            error = (
                n_out
                * 10.0
                * _UNIT_ROUNDOFF
                * math.log2(n_out)
                * float(np.linalg.norm(a) * np.linalg.norm(b))
            )
        if n_out > _MAX_POINTS:
            raise _TooLarge
        inf = 1.0 - (1.0 - self.inf) * (1.0 - other.inf)
        out = _Lattice(
            self.offset + other.offset, p, inf, self.slack + other.slack + error
        )
        return out.trim(tau)

    def trim(self, tau):
        """Move at most ``tau`` of the low tail up and ``tau`` of the high to +inf."""
        p = self.p
        low = np.cumsum(p)
        first = int(np.searchsorted(low, tau, side="right"))
        first = min(first, p.size - 1)
        high = np.cumsum(p[::-1])
        drop = int(np.searchsorted(high, tau, side="right"))
        last = max(p.size - drop, first + 1)
        moved_up = float(low[first - 1]) if first > 0 else 0.0
        to_inf = float(p[last:].sum())
        kept = p[first:last].copy()
        kept[0] += moved_up
        return _Lattice(self.offset + first, kept, self.inf + to_inf, self.slack)

    def power(self, count, tau):
        result, base = _Lattice.point(), self
        while count:
            if count & 1:
                result = result.convolve(base, tau)
            count >>= 1
            if count:
                base = base.convolve(base, tau)
        return result

    def bound(self, h, delta, eta, slack):
        """An epsilon whose *true* delta is at most ``delta`` (or inf).

        Steps 1 and 3 of the module's argument: the lattice gets ``delta``
        less Hoeffding's ``eta`` and the FFT allowance, and the rounding
        slack ``s`` is added back to its epsilon.
        """
        budget = delta - eta - self.slack
        if budget <= 0:
            return math.inf
        return self.epsilon(h, budget) + slack

    def epsilon(self, h, delta):
        """Smallest eps with ``inf + sum_k p_k (1 - exp(eps - l_k))_+ <= delta``.

        Exact for this lattice distribution: at a lattice point ``l_j``,
        ``delta(l_j) = inf + P_j - y_j`` with ``P_j = sum_{k >= j} p_k`` and
        ``y_j = sum_{k >= j} p_k exp(-(l_k - l_j))`` (a stable backward
        recursion, ``y_j = p_j + exp(-h) y_{j+1}``); between two points
        ``delta(eps) = inf + P_j - exp(eps - l_j) y_j`` is solved in closed form.
        """
        if self.inf >= delta:
            return math.inf
        p = self.p
        tail = np.cumsum(p[::-1])[::-1]
        y = lfilter([1.0], [1.0, -math.exp(-h)], p[::-1])[::-1]
        deltas = self.inf + tail - y
        ok = np.nonzero(deltas <= delta)[0]
        if ok.size == 0:
            return math.inf
        j = int(ok[0])
        level = (self.offset + j) * h
        excess = self.inf + float(tail[j]) - delta
        if excess <= 0.0 or y[j] <= 0.0:
            return level - h if j else -math.inf
        eps = level + math.log(excess / float(y[j]))
        return min(max(eps, level - h) if j else eps, level)


def _mixture_mass(lo, hi, z, q):
    """``P(lo < X <= hi)`` for ``X ~ (1 - q) N(0, z^2) + q N(1, z^2)``.

    Each normal's mass is taken from the side of its mean that avoids
    cancellation (``ndtr`` differences below the mean, survival differences
    above it).
    """

    def normal_mass(mean):
        a, b = (lo - mean) / z, (hi - mean) / z
        upper = a > 0
        below = special.ndtr(b) - special.ndtr(a)
        above = special.ndtr(-a) - special.ndtr(-b)
        return np.where(upper, above, below)

    out = normal_mass(0.0) if q < 1 else 0.0
    if q > 0:
        out = (1.0 - q) * out + q * normal_mass(1.0)
    return np.maximum(out, 0.0)


def _step_lattice(q, z, direction, h, tau):
    """Mean-rounded lattice PLD of one Poisson-subsampled Gaussian step.

    ``direction="remove"``: the loss ``l(x) = log(1 - q + q exp((2x - 1) /
    (2 z^2)))`` with ``x ~ (1 - q) N(0, z^2) + q N(1, z^2)``; ``"add"``: the
    loss ``-l(x)`` with ``x ~ N(0, z^2)``. ``l`` is increasing, so a lattice
    cell of the loss is an interval of ``x`` (``x(t) = z^2 log1p(expm1(t) / q)
    + 1/2``). Each cell's mass goes to its two end points in the proportion
    that keeps its mean (the within-cell mean by Gauss-Legendre quadrature of
    the cell's survival function); the upper tail beyond probability ``tau``
    goes to +inf, the lower tail (add) up to the lowest point kept.
    """
    mix_q = q if direction == "remove" else 0.0
    sign = 1.0 if direction == "remove" else -1.0

    def x_of(level):
        """The ``x`` with ``l(x) = level`` (-inf below the infimum of ``l``)."""
        arg = np.expm1(level) / q
        with np.errstate(divide="ignore", invalid="ignore"):
            x = z * z * np.log1p(arg) + 0.5
        return np.where(arg <= -1.0, -np.inf, x)

    def mass(a, b):
        """P(a < L <= b) for the loss L of this direction (a <= b)."""
        if sign > 0:
            return _mixture_mass(x_of(a), x_of(b), z, mix_q)
        return _mixture_mass(x_of(-b), x_of(-a), z, mix_q)

    # Range of the loss kept on the lattice.
    x_hi = (1.0 if sign > 0 else 0.0) + z * -special.ndtri(tau)
    l_hi = float(np.log1p(q * np.expm1((2.0 * x_hi - 1.0) / (2.0 * z * z))))
    l_inf = math.log1p(-q)  # infimum of l
    if sign > 0:
        lo, hi = l_inf, l_hi
    else:
        lo, hi = -l_hi, -l_inf
    k_lo, k_hi = math.floor(lo / h), math.ceil(hi / h)
    if k_hi - k_lo + 1 > _MAX_POINTS:
        raise _TooLarge
    levels = np.arange(k_lo, k_hi + 1) * h
    cell_lo, cell_hi = levels[:-1], levels[1:]
    cell_mass = mass(cell_lo, cell_hi)
    # E[(L - cell_lo) 1{cell}] = int_{cell} P(t < L <= cell_hi) dt.
    nodes = cell_lo[:, None] + 0.5 * h * (1.0 + _GL_NODES[None, :])
    partial = (
        0.5
        * h
        * (mass(nodes, np.broadcast_to(cell_hi[:, None], nodes.shape)) @ _GL_WEIGHTS)
    )
    up = np.clip(partial / h, 0.0, cell_mass)
    p = np.zeros(levels.size)
    p[:-1] += cell_mass - up
    p[1:] += up
    if sign > 0:
        inf = float(_mixture_mass(x_hi, np.inf, z, mix_q))
    else:
        inf = 0.0
        p[0] += float(mass(-np.inf, levels[0]))
    return _Lattice(k_lo, p, inf)


def _gaussian_lattice(mu, h):
    """Mean-rounded lattice PLD of a Gaussian mechanism: ``L ~ N(mu^2/2, mu^2)``.

    Closed form: a cell's mass and mean come from the normal CDF and density.
    The lattice spans the mean +- 40 standard deviations (the tails beyond,
    below 1e-300, are moved to the ends: down-tail up, up-tail to +inf).
    """
    mean, sd = 0.5 * mu * mu, mu
    k_lo = math.floor((mean - 40.0 * sd) / h)
    k_hi = math.ceil((mean + 40.0 * sd) / h)
    if k_hi - k_lo + 1 > _MAX_POINTS:
        raise _TooLarge
    levels = np.arange(k_lo, k_hi + 1) * h
    a, b = (levels[:-1] - mean) / sd, (levels[1:] - mean) / sd
    cell_mass = np.maximum(special.ndtr(b) - special.ndtr(a), 0.0)
    # E[(L - lo) 1{cell}] = (mean - lo) * mass + sd * (pdf(a) - pdf(b)).
    pdf = np.exp(-0.5 * np.square(np.concatenate([a[:1], b]))) / math.sqrt(2 * math.pi)
    first = (mean - levels[:-1]) * cell_mass + sd * (pdf[:-1] - pdf[1:])
    up = np.clip(first / h, 0.0, cell_mass)
    p = np.zeros(levels.size)
    p[:-1] += cell_mass - up
    p[1:] += up
    p[0] += float(special.ndtr((levels[0] - mean) / sd))
    inf = float(special.ndtr(-(levels[-1] - mean) / sd))
    return _Lattice(k_lo, p, inf)


def pld_epsilon(pairs, delta, neighbouring, *, reference=None, rel_slack=5e-3):
    """Tight epsilon of ``pairs`` at ``delta``, or None where it does not apply.

    Under add/remove, the larger of the two directions' lattice epsilons.
    Under replace-one, Poisson steps are accounted through the data set
    without the record (replace = remove, then add): if the run is
    ``(eps_1, delta_1)``-DP from ``D`` to ``D - x`` (the "remove" direction)
    and ``(eps_2, delta_2)``-DP from ``D - x`` to ``D - x + x'`` (the "add"
    direction), it is ``(eps_1 + eps_2, delta_1 + exp(eps_1) delta_2)``-DP
    from ``D`` to ``D'`` (group privacy; the intermediate data set only
    needs the mechanism, with the same public plan, to be defined on it).
    The split of delta is optimised over a grid; by symmetry of the relation
    the same bound holds from ``D'`` to ``D``. Replace-one Gaussian events
    (whose multiplier is relative to a replace-one sensitivity, not a
    per-record bound) are not chained: such mixtures keep the Rényi bound.

    Parameters
    ----------
    pairs : list of (event, count)
    delta : float in (0, 1)
    neighbouring : {"replace-one", "add-remove"}
    reference : float or None
        A valid epsilon already known (the Rényi one); sets the lattice step
        so that the rounding slack is ``rel_slack`` of it.
    rel_slack : float, default=5e-3

    Returns
    -------
    (epsilon, name) or None
        ``name`` is ``"gdp"`` (exact, all events Gaussian) or ``"pld"``.
        None if an event is neither Gaussian nor Poisson-subsampled Gaussian,
        if Poisson steps under replace-one come with Gaussian events, or if
        the lattice would be too large.
    """
    steps, relation_mu2, record_mu2 = [], 0.0, 0.0
    for event, count in pairs:
        if not isinstance(event, (GaussianEvent, PoissonGaussianEvent)):
            return None
        n = count * event.count
        if isinstance(event, GaussianEvent):
            relation_mu2 += n / event.noise_multiplier**2
        elif event.sampling_rate >= 1.0:
            # Every record in: per-record sensitivity 1 (clip norm units).
            record_mu2 += n / event.noise_multiplier**2
        elif event.sampling_rate > 0.0 and n > 0:
            steps.append((event.sampling_rate, event.noise_multiplier, n))
    replace_one = neighbouring == "replace-one"
    if not steps:
        # Only Gaussian mechanisms: exact Gaussian DP. Replacing a record
        # moves a full sum by twice its bound.
        mu2 = relation_mu2 + (4.0 if replace_one else 1.0) * record_mu2
        return gaussian_dp_epsilon(math.sqrt(mu2), delta), "gdp"
    if replace_one and relation_mu2 > 0:
        return None
    if reference is None or not math.isfinite(reference) or reference <= 0:
        return None
    n_rounded = sum(n for _, _, n in steps) + (
        1 if relation_mu2 + record_mu2 > 0 else 0
    )
    # Replace-one spends a slack per hop and needs eta below the second hop's
    # delta, which is at least a tenth of delta times exp(-reference).
    # (A share whose second hop is below eta is skipped, so the cap on the
    # exponent only costs tightness at huge epsilons.)
    eta = (
        _ETA_SHARE
        * delta
        * (1e-1 * math.exp(-min(reference, 30.0)) if replace_one else 1.0)
    )
    slack = rel_slack * reference / (2.0 if replace_one else 1.0)
    h = slack / math.sqrt(0.5 * n_rounded * math.log(1.0 / eta))
    tau = _TAIL_SHARE * (eta / _ETA_SHARE) / (4.0 * (n_rounded + 64))
    try:
        lattices = {
            direction: _direction_lattice(
                steps, relation_mu2 + record_mu2, direction, h, tau
            )
            for direction in ("remove", "add")
        }
    except _TooLarge:
        return None
    if replace_one:
        epsilon = _chained_epsilon(lattices, h, delta, eta, slack)
    else:
        epsilon = max(
            lattice.bound(h, delta, eta, slack) for lattice in lattices.values()
        )
    if not math.isfinite(epsilon):
        return None
    return max(0.0, epsilon), "pld"


def _direction_lattice(steps, gauss_mu2, direction, h, tau):
    """The composed lattice PLD of one direction."""
    total = _Lattice.point()
    for q, z, n in steps:
        total = total.convolve(
            _step_lattice(q, z, direction, h, tau).power(n, tau), tau
        )
    if gauss_mu2 > 0:
        total = total.convolve(_gaussian_lattice(math.sqrt(gauss_mu2), h), tau)
    return total


def _chained_epsilon(lattices, h, delta, eta, slack):
    """Replace-one epsilon through the data set without the record.

    ``eps_1 + eps_2`` minimised over the share of delta given to the first
    hop, with ``delta_1 + exp(eps_1) delta_2 = delta`` and each hop's delta
    covering its lattice delta, Hoeffding's ``eta`` and the FFT allowance.
    """
    remove, add = lattices["remove"], lattices["add"]
    best = math.inf
    for share in np.linspace(0.05, 0.95, 19):
        eps_1 = max(0.0, remove.bound(h, share * delta, eta, slack))
        if not math.isfinite(eps_1):
            continue
        delta_2 = (1.0 - share) * delta * math.exp(-eps_1)
        best = min(best, eps_1 + add.bound(h, delta_2, eta, slack))
    return best

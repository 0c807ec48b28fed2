"""Tight (epsilon, delta) for Gaussian and Poisson-subsampled Gaussian runs.

The Rényi route (``_rdp.py``) loses 5-20% of epsilon in its conversion to
(epsilon, delta). Two mechanisms of this package have exact or numerically
tight alternatives, used where they apply and reported only when smaller:

- **Gaussian compositions** (exact). An adaptive composition of Gaussian
  mechanisms with ratios ``r_i`` (sensitivity over noise std) is ``mu``-GDP
  with ``mu = sqrt(sum r_i^2)`` (Dong, Roth, Su 2022, "Gaussian differential
  privacy", Corollary 3.3), and ``mu``-GDP is exactly the set of
  (epsilon, delta(epsilon)) with ``delta(eps) = Phi(-eps/mu + mu/2) -
  exp(eps) Phi(-eps/mu - mu/2)`` (ibid., Corollary 2.13; Balle and Wang 2018,
  Theorem 8). This covers :class:`GaussianEvent`, full-batch steps, and the
  cyclic :class:`NoisyIterationEvent`: per position of the record, its
  composition bound is a composition of Gaussian mechanisms, and its
  last-iterate bound ``D_a <= a K`` comes from the shifted-divergence
  programme whose every step (shift reduction, contraction reduction) also
  holds for tradeoff functions, giving ``sqrt(2 K)``-GDP (Bok, Su,
  Altschuler 2024, "Shifted interpolation for differential privacy",
  Section 3, shifted interpolation for f-DP, applied to noisy cyclic
  gradient descent in Section 4: the same chain with Gaussian tradeoff
  functions in place of Rényi divergences). The worst position is taken for a public
  order; for a secret order the delta curves of the positions are averaged
  (the hockey-stick divergence is jointly convex).
- **Poisson-subsampled Gaussian steps** (DP-SGD with Poisson batches),
  possibly with Gaussian releases, under add/remove: the privacy loss
  distribution (PLD) of the dominating pair of one step, ``P = (1-q) N(0,
  z^2) + q N(1, z^2)`` against ``Q = N(0, z^2)`` (remove) and the reverse
  pair (add), composed by convolution (Koskela, Jälkö, Honkela 2020; Zhu,
  Dong, Wang 2022, Theorem 10 for adaptive composition). The hockey-stick
  divergence of the composition is ``delta(eps) = E[(1 - exp(eps - L))_+]``
  with ``L`` the sum of the steps' privacy losses, and the answer is the
  larger over the two directions. Under replace-one: the two directions
  chained through the data set without the record (group privacy, see
  :func:`pld_epsilon`).

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
   ``E[L 1{cell}] <= P(cell) (-l(E[X | cell]))``. Both use the first
   moment of a normal on an interval (exact). An allowance for
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
   roundoff; measured errors are far smaller), and negative outputs are set
   to 0; re-roundings add a few ``u`` per point.
5. **Conversion.** ``eps' = min{eps : delta_lattice(eps) <= delta - eta -
   allowance}`` is exact on the lattice (piecewise closed form), and the
   report is ``eps' + s``.

The spacings are planned so that ``s`` is a small fraction (``rel_slack``)
of a first estimate of epsilon (the Rényi one): the price of rigour is that
fraction of epsilon (docs/benchmarks.md, "Accounting at scale").
"""

import math

import numpy as np
from scipy import optimize, special
from scipy.fft import irfft, next_fast_len, rfft
from scipy.signal import lfilter

from .events import (
    GaussianEvent,
    NoisyIterationEvent,
    PoissonGaussianEvent,
    RandomAllocationGaussianEvent,
)

__all__ = ["gaussian_dp_delta", "gaussian_dp_epsilon", "pld_epsilon"]

_UNIT_ROUNDOFF = np.finfo(float).eps / 2.0
# Share of delta given to the Hoeffding term and to the truncated tails (the
# lattice delta gets the rest).
_ETA_SHARE = 1e-2
_TAIL_SHARE = 1e-2
# Share of the tail budget given to the single steps, whose long upper tail
# sets the width of the largest lattices.
_STEP_TAIL_SHARE = 0.5
# Mass of the lower tails moved up (free for validity; it only costs
# tightness, about this fraction of delta).
_LOW_TAIL = 1e-5
# Share of delta the plan gives to the FFTs' floating-point error.
_FP_SHARE = 1e-3
# Largest lattice (points) the numerical PLD builds. A step lattice that
# would need more is built coarser (a larger, still valid, slack); past it
# the caller keeps the Rényi bound.
_MAX_POINTS = 1 << 22
_MAX_STEP_POINTS = 1 << 18
# Probabilities below this are set to 0 (with their bound counted).
_TINY = 1e-200
# Relative allowance on each cell's up-probability for floating-point error.
_UP_NUDGE = 1e-8
# Relative accuracy assumed of ndtr / exp in the cell moments (a few ulps,
# taken generously).
_FN_RTOL = 16.0 * _UNIT_ROUNDOFF
# Share of the rounding variance given to the re-roundings that combine
# lattices (results of repeated squaring, event groups, Gaussian releases).
_COMBINE_SHARE = 0.05
# Level i of repeated squaring gets a share of the rounding variance
# proportional to 2^(-i/3): the first levels hold the step's long tail at a
# fine spacing and are the costly ones (docs/benchmarks.md, "Accounting at
# scale").
_LEVEL_DECAY = 2.0 ** (-1.0 / 3.0)


def gaussian_dp_delta(epsilon, mu):
    """Delta of ``mu``-GDP at ``epsilon`` (Dong, Roth, Su 2022, Cor. 2.13).

    ``Phi(-eps/mu + mu/2) - exp(eps) Phi(-eps/mu - mu/2)``, the second term in
    log space so that large ``epsilon`` does not overflow.
    """
    epsilon, mu = float(epsilon), float(mu)
    if mu <= 0:
        return 0.0
    if not math.isfinite(mu):
        return 1.0
    first = special.ndtr(-epsilon / mu + mu / 2.0)
    second = math.exp(epsilon + special.log_ndtr(-epsilon / mu - mu / 2.0))
    return max(0.0, first - second)


def _smallest_epsilon(delta_of, delta, scale):
    """Smallest ``eps >= 0`` with ``delta_of(eps) <= delta`` (non-increasing).

    Bracketing from ``scale`` and bisection to a relative 1e-12, keeping the
    upper end (the answer is rounded up).
    """
    if delta_of(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, max(1.0, scale)
    while delta_of(hi) > delta:
        lo, hi = hi, 2.0 * hi
        if hi > 1e12:
            return math.inf
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        if delta_of(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


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
    return _smallest_epsilon(lambda e: gaussian_dp_delta(e, mu), delta, mu * mu)


def gaussian_mixture_dp_epsilon(mus, weights, delta):
    """Smallest epsilon with ``sum_j w_j gaussian_dp_delta(eps, mu_j) <= delta``.

    A mechanism that is ``mu_j``-GDP given a secret index ``j`` drawn with
    probabilities ``w_j`` (independently of the data) has at most that delta:
    the hockey-stick divergence is jointly convex.

    Parameters
    ----------
    mus, weights : array-like of float
    delta : float in (0, 1)

    Returns
    -------
    float
    """
    mus = np.asarray(mus, dtype=float)
    weights = np.asarray(weights, dtype=float)
    keep = (weights > 0) & (mus > 0)
    if not keep.any():
        return 0.0
    mus, weights = mus[keep], weights[keep]

    def delta_of(eps):
        first = special.ndtr(-eps / mus + mus / 2.0)
        second = np.exp(eps + special.log_ndtr(-eps / mus - mus / 2.0))
        return float(weights @ np.maximum(first - second, 0.0))

    return _smallest_epsilon(delta_of, delta, float(np.max(mus) ** 2))


class _TooLarge(Exception):
    """A lattice outgrew ``_MAX_POINTS``: the caller keeps the Rényi bound."""


def _direct_rel(terms):
    """Relative error bound of a sum of ``terms`` positive products."""
    gamma = (terms + 1) * _UNIT_ROUNDOFF
    return gamma / (1.0 - gamma)


def _fft_error(n_out, a, b):
    """L1 bound on the FFT convolution error of ``a`` and ``b`` (step 4).

    With ``eps_F = 10 log2(n) u`` the relative L2 error of one FFT (Higham
    2002, "Accuracy and stability of numerical algorithms", Theorem 24.2,
    with room for the library's radix), the spectra's products and the
    inverse transform give an L2 error of at most ``2 eps_F (||a||_2
    ||b||_1 + ||a||_1 ||b||_2)`` (``|FFT b| <= ||b||_1`` pointwise), and the
    L1 error of the ``n_out`` outputs is at most ``sqrt(n_out)`` times that.
    """
    eps_f = 10.0 * _UNIT_ROUNDOFF * math.log2(max(n_out, 2))
    norms = float(
        np.linalg.norm(a) * np.abs(b).sum() + np.abs(a).sum() * np.linalg.norm(b)
    )
    return math.sqrt(n_out) * 2.0 * eps_f * norms


def _fft_convolve(a, b, square, allowance, max_direct=None):
    """``a * b`` with an absolute (L1) and a relative error bound.

    Plain FFT when its error bound is within ``allowance``; otherwise the
    window holding all but a small mass of ``a`` (and of ``b``) is convolved
    directly (relative error) and the products involving the rest by FFT,
    the rest shrunk until the bound fits (or the window is whole). A direct
    part of more than ``max_direct`` products raises ``_TooLarge``.
    """
    n_out = a.size + b.size - 1
    error = _fft_error(n_out, a, b)
    if error <= allowance:
        return _fft(a, b, square), error, 0.0
    # The rest's FFT error is about sqrt(n) 2 eps_F 2 ||a||_2 times its mass.
    eps_f = 10.0 * _UNIT_ROUNDOFF * math.log2(n_out)
    scale = math.sqrt(n_out) * 4.0 * eps_f * float(np.linalg.norm(a))
    outside = min(1e-3, 10.0 * allowance / scale)
    while True:
        ia, ib = _bulk_window(a, outside), _bulk_window(b, outside)
        tail_a, tail_b = a.copy(), b.copy()
        tail_a[ia[0] : ia[1]] = 0.0
        tail_b[ib[0] : ib[1]] = 0.0
        bulk_a = np.zeros_like(a)
        bulk_a[ia[0] : ia[1]] = a[ia[0] : ia[1]]
        bulk_b = np.zeros_like(b)
        bulk_b[ib[0] : ib[1]] = b[ib[0] : ib[1]]
        if square:
            error = _fft_error(n_out, tail_a, a + bulk_a)
        else:
            error = _fft_error(n_out, a, tail_b) + _fft_error(n_out, tail_a, bulk_b)
        whole = ia == (0, a.size) and ib == (0, b.size)
        if error <= allowance or whole:
            break
        outside *= 0.1
    if max_direct is not None and (ia[1] - ia[0]) * (ib[1] - ib[0]) > max_direct:
        raise _TooLarge
    p = np.zeros(n_out)
    direct = np.convolve(a[ia[0] : ia[1]], b[ib[0] : ib[1]])
    p[ia[0] + ib[0] : ia[0] + ib[0] + direct.size] = direct
    rel = _direct_rel(min(ia[1] - ia[0], ib[1] - ib[0]))
    if whole:
        return p, 0.0, rel
    if square:
        p += _fft(tail_a, a + bulk_a, False)
    else:
        p += _fft(a, tail_b, False) + _fft(tail_a, bulk_b, False)
    return p, error, rel


def _fft(a, b, square):
    """Linear convolution of ``a`` and ``b`` by real FFTs."""
    n_out = a.size + b.size - 1
    n_fft = next_fast_len(n_out, real=True)
    spectrum = rfft(a, n_fft)
    other = spectrum if square else rfft(b, n_fft)
    return irfft(spectrum * other, n_fft)[:n_out]


def _bulk_window(p, outside):
    """``(i0, i1)``: the window of ``p`` leaving at most ``outside`` of mass out."""
    cumulative = np.cumsum(p)
    total = float(cumulative[-1])
    i0 = int(np.searchsorted(cumulative, 0.5 * outside, side="right"))
    i1 = int(np.searchsorted(cumulative, total - 0.5 * outside, side="left")) + 1
    return min(i0, p.size - 1), max(min(i1, p.size), min(i0, p.size - 1) + 1)


class _Lattice:
    """A distribution on ``(offset + arange(len(p))) * spacing * h0`` and +inf.

    ``spacing`` is an integer multiple of the global quantum ``h0`` (kept by
    the caller); ``var`` the sum of squared rounding ranges (in units of
    ``h0^2``) of every rounding in the lattice's history (step 2 of the
    module's argument). Floating-point error (step 4): the exact
    distribution ``p*`` of the same construction satisfies ``p* <= (p +
    e) / (1 - rel)`` pointwise with ``sum(e) <= slack``.
    """

    __slots__ = ("offset", "spacing", "p", "inf", "slack", "rel", "var")

    def __init__(self, offset, p, inf=0.0, slack=0.0, *, spacing=1, var=0.0, rel=0.0):
        self.offset = int(offset)
        self.spacing = int(spacing)
        self.p = p
        self.inf = float(inf)
        self.slack = float(slack)
        self.rel = float(rel)
        self.var = float(var)

    @classmethod
    def point(cls, spacing=1):
        return cls(0, np.ones(1), spacing=spacing)

    def _like(self, offset, p, inf, **changes):
        fields = {
            "slack": self.slack,
            "spacing": self.spacing,
            "var": self.var,
            "rel": self.rel,
        }
        fields.update(changes)
        return _Lattice(offset, p, inf, fields.pop("slack"), **fields)

    def coarsen(self, spacing):
        """Re-round onto spacing ``spacing`` (in ``h0``) without lowering the mean.

        A point at integer position ``x`` (in ``h0``) between ``j m`` and
        ``(j + 1) m`` goes up with probability ``(x - j m) / m``, rounded up
        in floating point; exact integer positions, so the grid is exact.
        """
        spacing = int(spacing)
        if spacing <= self.spacing:
            if spacing < self.spacing:
                raise ValueError("A lattice is only ever coarsened.")
            return self
        p = self.p
        pos = (self.offset + np.arange(p.size, dtype=np.int64)) * self.spacing
        j = pos // spacing
        r = pos - j * spacing
        frac = np.where(r > 0, np.nextafter(r / spacing, 2.0), 0.0)
        up = p * np.minimum(frac, 1.0)
        down = p - up
        j0 = int(j[0])
        size = int(j[-1]) - j0 + 2
        index = (j - j0).astype(np.intp)
        out = np.bincount(index, weights=down, minlength=size)
        out += np.bincount(index + 1, weights=up, minlength=size)
        if out[-1] == 0.0 and out.size > 1:
            out = out[:-1]
        # Positive sums of at most ratio + 2 terms, after a product and a
        # difference: a relative error.
        terms = self.spacing / spacing + 2.0
        rel = self.rel + (terms + 3.0) * _UNIT_ROUNDOFF
        return self._like(
            j0,
            out,
            self.inf,
            spacing=spacing,
            var=self.var + float(spacing) ** 2,
            rel=rel,
        )

    def convolve(
        self, other, tau, allowance=0.0, low_tau=None, max_points=None, max_direct=None
    ):
        """Distribution of the sum of independent draws, trimmed at ``tau``.

        Short inputs are convolved directly (a positive sum: relative error);
        long ones by FFT, whose absolute error bound (step 4) is kept below
        ``allowance`` by convolving the bulk of the mass directly and only
        the small rest by FFT. More than ``max_points`` (default
        ``_MAX_POINTS``) output points, or a direct part of more than
        ``max_direct`` products (default: no limit), raise ``_TooLarge``.
        """
        spacing = max(self.spacing, other.spacing)
        a_lat, b_lat = self.coarsen(spacing), other.coarsen(spacing)
        a, b = a_lat.p, b_lat.p
        n_out = a.size + b.size - 1
        if n_out > (_MAX_POINTS if max_points is None else max_points):
            raise _TooLarge
        square = a_lat is b_lat
        if min(a.size, b.size) < 64:
            p, error, rel = np.convolve(a, b), 0.0, _direct_rel(min(a.size, b.size))
        else:
            p, error, rel = _fft_convolve(a, b, square, allowance, max_direct)
        np.maximum(p, 0.0, out=p)
        inf = 1.0 - (1.0 - a_lat.inf) * (1.0 - b_lat.inf)
        mass_a, mass_b = float(a.sum()), float(b.sum())
        slack = error + a_lat.slack * (mass_b + b_lat.slack) + b_lat.slack * mass_a
        out = _Lattice(
            a_lat.offset + b_lat.offset,
            p,
            inf,
            slack,
            spacing=spacing,
            var=a_lat.var + b_lat.var,
            rel=a_lat.rel + b_lat.rel + rel,
        )
        return out.trim(tau, low_tau)

    def trim(self, tau, low_tau=None):
        """Move at most ``low_tau`` of the low tail up, ``tau`` of the high to +inf."""
        p = self.p
        low = np.cumsum(p)
        low_tau = tau if low_tau is None else low_tau
        first = int(np.searchsorted(low, low_tau, side="right"))
        first = min(first, p.size - 1)
        high = np.cumsum(p[::-1])
        drop = int(np.searchsorted(high, tau, side="right"))
        last = max(p.size - drop, first + 1)
        moved_up = float(low[first - 1]) if first > 0 else 0.0
        to_inf = float(p[last:].sum())
        kept = p[first:last].copy()
        kept[0] += moved_up
        # Values this small only slow the arithmetic (subnormal products):
        # dropping them changes the mass by less than their count times the
        # cut-off, added to the absolute error bound.
        tiny = kept < _TINY
        slack = self.slack + _TINY * float(np.count_nonzero(tiny))
        kept[tiny] = 0.0
        # The moved masses are positive sums: a relative error.
        rel = self.rel + (2.0 * p.size * _UNIT_ROUNDOFF if first or drop else 0.0)
        return self._like(
            self.offset + first, kept, self.inf + to_inf, rel=rel, slack=slack
        )

    def power(
        self, count, spacings, taus, allowances, lows, max_points=None, max_direct=None
    ):
        """``count``-fold self-composition by repeated squaring.

        The square of level ``i`` is re-rounded to ``spacings[i + 1]`` and
        trimmed at ``taus[i + 1]`` (``lows[i + 1]`` for the lower tail);
        results combine at the last entries.
        """
        result, base, level = None, self, 0
        while count:
            if count & 1:
                if result is None:
                    result = base
                else:
                    result = result.convolve(
                        base, taus[-1], allowances[-1], lows[-1], max_points, max_direct
                    )
            count >>= 1
            if count:
                level += 1
                base = base.convolve(
                    base,
                    taus[level],
                    allowances[level],
                    lows[level],
                    max_points,
                    max_direct,
                )
                base = base.coarsen(spacings[level]).trim(taus[level], lows[level])
        return result

    def std_slack(self, h0, eta):
        """Hoeffding's ``s`` for this lattice's rounding at failure ``eta``."""
        return h0 * math.sqrt(0.5 * self.var * math.log(1.0 / eta))

    def bound(self, h0, delta, eta):
        """An epsilon whose *true* delta is at most ``delta`` (or inf).

        Steps 2, 4 and 5 of the module's argument: the lattice gets ``delta``
        less Hoeffding's ``eta`` and the floating-point allowance, and the
        rounding slack ``s`` is added back to its epsilon; the
        floating-point bounds turn ``delta`` into ``(delta - eta) (1 - rel) -
        slack``.
        """
        budget = (delta - eta) * (1.0 - self.rel) - self.slack
        if budget <= 0 or eta <= 0:
            return math.inf
        return self.epsilon(self.spacing * h0, budget) + self.std_slack(h0, eta)

    def epsilon(self, h, delta):
        """Smallest eps with ``inf + sum_k p_k (1 - exp(eps - l_k))_+ <= delta``.

        Exact for this lattice distribution (``h`` its spacing): at a lattice
        point ``l_j``, ``delta(l_j) = inf + P_j - y_j`` with ``P_j = sum_{k >=
        j} p_k`` and ``y_j = sum_{k >= j} p_k exp(-(l_k - l_j))`` (a stable
        backward recursion, ``y_j = p_j + exp(-h) y_{j+1}``); between two
        points ``delta(eps) = inf + P_j - exp(eps - l_j) y_j`` is solved in
        closed form.
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


def _normal_pieces(a, b, mean, z):
    """Mass and first moment of ``N(mean, z^2)`` on ``(a, b]``, with error bounds.

    Returns ``(mass, moment, error, mass_error)`` with ``moment = E[(X - a)
    1{a < X <= b}]`` (``a`` finite) and ``error``, ``mass_error`` bounds on
    the floating-point errors of ``moment`` and ``mass``. Masses are taken
    from the side of the mean that avoids cancellation.
    """
    lo, hi = (a - mean) / z, (b - mean) / z
    upper = lo > 0
    tail_lo = np.where(upper, special.ndtr(-lo), special.ndtr(lo))
    tail_hi = np.where(upper, special.ndtr(-hi), special.ndtr(hi))
    mass = np.maximum(np.where(upper, tail_lo - tail_hi, tail_hi - tail_lo), 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        pdf_lo = np.where(np.isfinite(lo), np.exp(-0.5 * lo * lo), 0.0)
        pdf_hi = np.where(np.isfinite(hi), np.exp(-0.5 * hi * hi), 0.0)
        scale = z / math.sqrt(2.0 * math.pi)
        # int_a^b (x - a) f(x) dx = z^2 (f(a) - f(b)) + (mean - a) P.
        moment = scale * (pdf_lo - pdf_hi) + (mean - a) * mass
        error = _FN_RTOL * (
            scale * (pdf_lo + pdf_hi) + np.abs(mean - a) * (tail_lo + tail_hi)
        )
    moment = np.where(np.isfinite(lo), moment, np.inf)
    mass_error = _FN_RTOL * (tail_lo + tail_hi)
    return mass, moment, error, mass_error


def _step_range(q, z, direction, tau, low):
    """Range ``[lo, hi]`` of one step's loss kept on the lattice, and ``x_hi``.

    Remove: ``x_hi`` leaves mass ``tau`` of ``x`` (the upper tail of the
    loss, sent to +inf) above it. Add: it leaves ``low`` (the lower tail of
    the loss, moved up).
    """
    if direction == "remove":

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
    l_hi = float(np.log1p(q * np.expm1((2.0 * x_hi - 1.0) / (2.0 * z * z))))
    l_inf = math.log1p(-q)  # infimum of l
    if direction == "remove":
        return l_inf, l_hi, x_hi
    return -l_hi, -l_inf, x_hi


def _step_lattice(q, z, direction, h, tau, spacing=1, low=_LOW_TAIL):
    """Lattice PLD of one Poisson-subsampled Gaussian step (step 1 above).

    ``direction="remove"``: the loss ``l(x) = log(1 - q + q exp((2x - 1) /
    (2 z^2)))`` with ``x ~ (1 - q) N(0, z^2) + q N(1, z^2)``; ``"add"``: the
    loss ``-l(x)`` with ``x ~ N(0, z^2)``. ``l`` is increasing and convex,
    so a lattice cell of the loss is an interval of ``x`` (``x(t) = z^2
    log1p(expm1(t) / q) + 1/2``) and the cell's up-probability is bounded by
    its chord (remove) or by Jensen's inequality (add). The upper tail beyond
    probability ``tau`` goes to +inf, the lower tail (add, probability
    ``low``) up to the lowest point kept. ``h`` is the lattice spacing,
    ``spacing`` the same in units of the global quantum.
    """
    remove = direction == "remove"
    components = ((1.0 - q, 0.0), (q, 1.0)) if remove else ((1.0, 0.0),)

    def x_of(level):
        """The ``x`` with ``l(x) = level`` (-inf below the infimum of ``l``)."""
        arg = np.expm1(level) / q
        with np.errstate(divide="ignore", invalid="ignore"):
            x = z * z * np.log1p(arg) + 0.5
        return np.where(arg <= -1.0, -np.inf, x)

    def pieces(a, b):
        """Mixture mass, moment ``E[(X - a) 1{a < X <= b}]`` and its error."""
        mass = moment = error = mass_error = 0.0
        for weight, mean in components:
            m, mo, e, me = _normal_pieces(a, b, mean, z)
            mass, moment = mass + weight * m, moment + weight * mo
            error, mass_error = error + weight * e, mass_error + weight * me
        return mass, moment, error, mass_error

    lo, hi, x_hi = _step_range(q, z, direction, tau, low)
    k_lo, k_hi = math.floor(lo / h), math.ceil(hi / h)
    if k_hi - k_lo + 1 > _MAX_POINTS:
        raise _TooLarge
    levels = np.arange(k_lo, k_hi + 1) * h
    cell_lo, cell_hi = levels[:-1], levels[1:]
    if remove:
        a, b = x_of(cell_lo), x_of(cell_hi)
        mass, moment, error, mass_error = pieces(a, b)
        # Chord: E[(L - lo) 1{cell}] <= h E[(X - a) 1{cell}] / (b - a).
        with np.errstate(invalid="ignore", divide="ignore"):
            width = b - a
            rel = 4.0 * _UNIT_ROUNDOFF * (np.abs(a) + np.abs(b)) / width
            up = (moment + error) / width * (1.0 + rel)
        up = np.where(np.isfinite(a) & (width > 0), up, mass)
    else:
        a, b = x_of(-cell_hi), x_of(-cell_lo)
        mass, moment, error, mass_error = pieces(a, b)
        # Jensen: E[L 1{cell}] <= P(cell) * (-l(E[X | cell])), with E[X | cell]
        # taken at the low end of its error (L decreases in x).
        finite = np.isfinite(a)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            a_safe = np.where(finite, a, 0.0)
            shift = (moment - error - 2.0 * _FN_RTOL * np.abs(moment)) / mass
            # E[X 1{X <= b}] = -z phi(b / z) for X ~ N(0, z^2).
            below = -z / math.sqrt(2.0 * math.pi) * np.exp(-0.5 * (b / z) ** 2)
            below_mean = below * (1.0 + 4.0 * _FN_RTOL) / mass
            mean_x = np.where(finite, a_safe + shift, below_mean)
            loss = -np.log1p(q * np.expm1((2.0 * mean_x - 1.0) / (2.0 * z * z)))
            loss_error = (
                8.0 * _UNIT_ROUNDOFF * (np.abs(cell_lo) + np.abs(cell_hi) + 1.0)
            )
            up = mass * (loss - cell_lo + loss_error) / h
        up = np.where(mass > 0, up, 0.0)
        up = np.where(np.isnan(up), mass, up)
    up = np.clip(up + _UP_NUDGE * mass, 0.0, mass)
    p = np.zeros(levels.size)
    p[:-1] += mass - up
    p[1:] += up
    if remove:
        inf = float(sum(w * special.ndtr(-(x_hi - mean) / z) for w, mean in components))
    else:
        inf = 0.0
        p[0] += float(special.ndtr(-(x_of(-levels[0]) / z)))
    return _with_errors(k_lo, p, inf, mass, mass_error, spacing)


def _with_errors(k_lo, p, inf, mass, mass_error, spacing):
    """The lattice, its cells' floating-point errors split (step 4).

    A point's error is at most its two cells' mass errors plus a few ulps of
    their masses; where that is below 1e-8 of the point's mass it counts as
    relative, elsewhere (far tails) as absolute.
    """
    error = np.zeros(p.size)
    cell_error = mass_error + 4.0 * _UNIT_ROUNDOFF * mass
    error[:-1] += cell_error
    error[1:] += cell_error
    error[0] += 4.0 * _UNIT_ROUNDOFF * p[0]
    relative = (error <= 1e-8 * p) & (p > 0)
    rel = float(np.max(error[relative] / p[relative], initial=0.0))
    slack = float(error[~relative].sum())
    return _Lattice(
        k_lo, p, inf, slack, spacing=spacing, var=float(spacing) ** 2, rel=rel
    )


def _gaussian_lattice(mu, h, spacing=1):
    """Lattice PLD of a Gaussian mechanism: ``L ~ N(mu^2/2, mu^2)``.

    Closed form: a cell's mass and mean come from the normal CDF and density
    (the mean is exact; the same allowance for floating point as the steps'
    is added). The lattice spans the mean +- 40 standard deviations (the
    tails beyond, below 1e-300, are moved to the ends: down-tail up, up-tail
    to +inf).
    """
    mean, sd = 0.5 * mu * mu, mu
    k_lo = math.floor((mean - 40.0 * sd) / h)
    k_hi = math.ceil((mean + 40.0 * sd) / h)
    if k_hi - k_lo + 1 > _MAX_POINTS:
        raise _TooLarge
    levels = np.arange(k_lo, k_hi + 1) * h
    # L is linear in a standard normal, so a cell's moment is the normal's.
    cell_mass, moment, error, mass_error = _normal_pieces(
        levels[:-1], levels[1:], mean, sd
    )
    up = np.clip((moment + error) / h + _UP_NUDGE * cell_mass, 0.0, cell_mass)
    p = np.zeros(levels.size)
    p[:-1] += cell_mass - up
    p[1:] += up
    p[0] += float(special.ndtr((levels[0] - mean) / sd))
    inf = float(special.ndtr(-(levels[-1] - mean) / sd))
    return _with_errors(k_lo, p, inf, cell_mass, mass_error, spacing)


def _level_spacings(count, budget, width, max_points):
    """Ideal spacings (absolute) of the ``bit_length(count)`` squaring levels.

    Level ``i`` (the lattice of ``2^i`` steps, ``count >> i`` copies of it
    in the result) gets a share of the rounding variance ``budget``
    proportional to ``_LEVEL_DECAY^i``, and the final combinations the
    rest; the step lattice (level 0, ``width`` wide) is kept below
    ``max_points`` points, all levels scaled alike when it needs to be.
    """
    n_levels = count.bit_length()
    copies = np.array([count >> i for i in range(n_levels)], dtype=float)
    weights = _LEVEL_DECAY ** np.arange(n_levels)
    combined = bin(count).count("1") * weights[-1]
    unit = budget / (weights.sum() + combined)
    spacings = np.sqrt(weights * unit / copies)
    # A step too wide for its share: every level scales up alike (the slack
    # grows, the lattices keep their planned sizes).
    spacings *= max(1.0, width / max_points / spacings[0])
    return np.maximum.accumulate(spacings)


class _Plan:
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
    """

    def __init__(self, steps, slack, eta, tail, floating):
        budget = slack**2 / (0.5 * math.log(1.0 / eta))
        self.allowances = []
        parts = len(steps) + 1
        group_budget = budget * (1.0 - _COMBINE_SHARE) / len(steps)
        ideal, self.taus = [], []
        self.lows = []
        for q, z, count in steps:
            n_levels = count.bit_length()
            copies = np.array([max(1, count >> i) for i in range(n_levels)], float)
            share = tail / parts
            step_tau = _STEP_TAIL_SHARE * share / count
            width = max(
                hi - lo
                for lo, hi, _ in (
                    _step_range(q, z, d, step_tau, _LOW_TAIL / count)
                    for d in ("remove", "add")
                )
            )
            ideal.append(_level_spacings(count, group_budget, width, _MAX_STEP_POINTS))
            level_share = (1.0 - _STEP_TAIL_SHARE) * share / (n_levels + 1)
            self.taus.append([step_tau, *(level_share / copies[1:]), level_share])
            low = _LOW_TAIL / (n_levels + 1)
            self.lows.append([_LOW_TAIL / count, *(low / copies[1:]), low])
            share = floating / parts / (n_levels + 2)
            self.allowances.append([*(share / copies), share])
        self.h0 = min(float(levels[0]) for levels in ideal)
        self.spacings = [
            np.maximum.accumulate(np.maximum(1, np.floor(levels / self.h0)))
            .astype(np.int64)
            .tolist()
            for levels in ideal
        ]
        self.tau_combine = tail / parts
        self.allowance_combine = floating / parts


def _direction_lattice(steps, gauss_mu2, direction, plan):
    """The composed lattice PLD of one direction."""
    total = None
    for (q, z, count), spacings, taus, allowances, lows in zip(
        steps, plan.spacings, plan.taus, plan.allowances, plan.lows, strict=True
    ):
        m0 = spacings[0]
        step = _step_lattice(
            q, z, direction, m0 * plan.h0, taus[0], spacing=m0, low=lows[0]
        )
        part = step.power(count, spacings, taus, allowances, lows)
        total = (
            part
            if total is None
            else total.convolve(part, plan.tau_combine, plan.allowance_combine)
        )
    if gauss_mu2 > 0:
        spacing = total.spacing
        release = _gaussian_lattice(
            math.sqrt(gauss_mu2), spacing * plan.h0, spacing=spacing
        )
        total = total.convolve(release, plan.tau_combine, plan.allowance_combine)
    return total


def _cyclic_mu(event):
    """GDP ``mu`` of a cyclic run per position of the record, at ``z``.

    The smaller of the composition and last-iterate slopes ``K_j`` (both
    ``D_a <= a K_j``, both from Gaussian tradeoff chains, see the module
    docstring) gives ``mu_j = sqrt(2 K_j)``.
    """
    from ._accountant import _position_coefficients

    composition, last = _position_coefficients(event)
    slope = np.minimum(composition, last) / event.noise_multiplier**2
    return np.sqrt(2.0 * slope)


def _gdp_epsilon(gaussian_mu2, cyclic, delta):
    """Exact GDP epsilon of Gaussian parts and cyclic runs (replace-one)."""
    shuffled = [
        (event, count)
        for event, count in cyclic
        if event.batch_weights is not None and count == 1
    ]
    mu2 = gaussian_mu2
    for event, count in cyclic:
        if len(shuffled) == 1 and (event, count) == shuffled[0]:
            continue
        mu2 += count * float(np.max(_cyclic_mu(event)) ** 2)
    if len(shuffled) == 1:
        event = shuffled[0][0]
        mus = _cyclic_mu(event)
        weights = event.batch_weights[: mus.size]
        return gaussian_mixture_dp_epsilon(np.sqrt(mus**2 + mu2), weights, delta)
    return gaussian_dp_epsilon(math.sqrt(mu2), delta)


def _merged_steps(steps):
    """Poisson steps of equal ``(rate, noise)`` merged, in a fixed order.

    Composition is commutative, so the bound may depend only on the multiset
    of steps; merging and sorting makes the lattice (and its rounding) the same
    whatever order the events were listed in.
    """
    counts = {}
    for q, z, n in steps:
        counts[(q, z)] = counts.get((q, z), 0) + n
    return [(q, z, n) for (q, z), n in sorted(counts.items())]


def pld_epsilon(pairs, delta, neighbouring, *, reference=None, rel_slack=5e-3):
    """Tight epsilon of ``pairs`` at ``delta``, or None where it does not apply.

    Only Gaussian parts (``GaussianEvent``, full-batch steps, cyclic
    ``NoisyIterationEvent``): exact Gaussian DP. Poisson-subsampled steps:
    under add/remove, the larger of the two directions' lattice epsilons.
    Under replace-one, Poisson steps are accounted through the data set
    without the record (replace = remove, then add): if the run is
    ``(eps_1, delta_1)``-DP from ``D`` to ``D - x`` (the "remove" direction)
    and ``(eps_2, delta_2)``-DP from ``D - x`` to ``D - x + x'`` (the "add"
    direction), it is ``(eps_1 + eps_2, delta_1 + exp(eps_1) delta_2)``-DP
    from ``D`` to ``D'`` (group privacy; the intermediate data set only
    needs the mechanism, with the same public plan, to be defined on it).
    Each hop has its own Hoeffding failure probability (a hundredth of its
    delta), and the add hop is also ``sum_t -log(1 - q_t)``-DP with delta 0
    (its loss is bounded above). The split of delta is optimised over a
    grid; by symmetry of the relation the same bound holds from ``D'`` to
    ``D``. Replace-one Gaussian events (whose multiplier is relative to a
    replace-one sensitivity, not a per-record bound) are not chained: such
    mixtures keep the Rényi bound. Random allocation epochs
    (:class:`RandomAllocationGaussianEvent`), alone: the lattice PLD of
    ``_allocation_pld.py`` in both relations (one step an epoch is a
    Gaussian: exact Gaussian DP); mixed with other events, None.

    Parameters
    ----------
    pairs : list of (event, count)
    delta : float in (0, 1)
    neighbouring : {"replace-one", "add-remove"}
    reference : float or None
        A valid epsilon already known (the Rényi one); sets the lattice
        spacings so that the rounding slack is about ``rel_slack`` of it
        (of the lattice's own first answer, when that is below half of it).
    rel_slack : float, default=5e-3

    Returns
    -------
    (epsilon, name) or None
        ``name`` is ``"gdp"`` (exact, all events Gaussian) or ``"pld"``.
        None if an event is neither Gaussian, Poisson-subsampled Gaussian,
        random allocation nor cyclic, if random allocation comes with other
        events, if Poisson steps under replace-one come with Gaussian
        or cyclic events, or if a lattice would be too large.
    """
    steps, relation_mu2, record_mu2, cyclic = [], 0.0, 0.0, []
    allocation = []
    for event, count in pairs:
        if isinstance(event, RandomAllocationGaussianEvent):
            epochs = count * event.epochs
            if event.steps_per_epoch == 1:
                # One step an epoch: one Gaussian of per-record sensitivity 1.
                record_mu2 += epochs / event.noise_multiplier**2
            elif epochs > 0:
                allocation.append(
                    (event.steps_per_epoch, event.noise_multiplier, epochs)
                )
            continue
        if isinstance(event, NoisyIterationEvent):
            if neighbouring != "replace-one":
                return None
            if count > 0:
                cyclic.append((event, int(count)))
            continue
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
    steps = _merged_steps(steps)
    replace_one = neighbouring == "replace-one"
    if allocation:
        if steps or cyclic or relation_mu2 > 0 or record_mu2 > 0:
            return None
        return _allocation_epsilon(allocation, delta, replace_one, reference, rel_slack)
    if not steps:
        # Only Gaussian mechanisms: exact Gaussian DP. Replacing a record
        # moves a full sum by twice its bound.
        mu2 = relation_mu2 + (4.0 if replace_one else 1.0) * record_mu2
        return _gdp_epsilon(mu2, cyclic, delta), "gdp"
    if cyclic or (replace_one and relation_mu2 > 0):
        return None
    if reference is None or not math.isfinite(reference) or reference <= 0:
        return None
    gauss_mu2 = relation_mu2 + record_mu2
    # The Rényi epsilon can be several times the tight one (tiny delta,
    # many steps): plan the lattice for the smaller of it and twice a
    # central-limit estimate (any plan gives a valid bound).
    guess = _clt_epsilon(steps, gauss_mu2, delta)
    planned = min(reference, max(2.0 * guess, 1e-3))
    epsilon = _lattice_epsilon(steps, gauss_mu2, delta, replace_one, planned, rel_slack)
    if math.isfinite(epsilon) and epsilon < 0.5 * planned:
        # The lattice was planned for a far larger epsilon: plan it again.
        again = _lattice_epsilon(
            steps, gauss_mu2, delta, replace_one, max(epsilon, 1e-3), rel_slack
        )
        epsilon = min(epsilon, again)
    if not math.isfinite(epsilon):
        return None
    return max(0.0, epsilon), "pld"


def _allocation_epsilon(groups, delta, replace_one, reference, rel_slack):
    """``pld_epsilon`` of random allocation epochs alone, or None.

    The lattice is planned for the smaller of the Rényi epsilon and a first
    lattice answer, as for Poisson steps.
    """
    from ._allocation_pld import allocation_pld_epsilon

    if reference is None or not math.isfinite(reference) or reference <= 0:
        return None
    merged = {}
    for t, z, epochs in groups:
        merged[(t, z)] = merged.get((t, z), 0) + epochs
    groups = [(t, z, e) for (t, z), e in sorted(merged.items())]
    epsilon = allocation_pld_epsilon(groups, delta, replace_one, reference, rel_slack)
    if math.isfinite(epsilon) and epsilon < 0.5 * reference:
        again = allocation_pld_epsilon(
            groups, delta, replace_one, max(epsilon, 1e-4), rel_slack
        )
        epsilon = min(epsilon, again)
    if not math.isfinite(epsilon):
        return None
    return max(0.0, epsilon), "pld"


def _clt_epsilon(steps, gauss_mu2, delta):
    """A central-limit estimate of epsilon (planning only, not a bound).

    The GDP epsilon of ``mu^2 = sum_t Var(L_t)``, the remove direction's
    step losses' variances by quadrature on a grid of ``x``.
    """
    mu2 = gauss_mu2
    x_unit = np.linspace(-12.0, 12.0, 4001)
    weights = np.exp(-0.5 * x_unit**2)
    weights /= weights.sum()
    for q, z, count in steps:
        moments = np.zeros(2)
        for weight, mean in ((1.0 - q, 0.0), (q, 1.0)):
            x = mean + z * x_unit
            loss = np.log1p(q * np.expm1((2.0 * x - 1.0) / (2.0 * z * z)))
            moments += weight * np.array([weights @ loss, weights @ loss**2])
        mu2 += count * max(moments[1] - moments[0] ** 2, 0.0)
    return gaussian_dp_epsilon(math.sqrt(mu2), delta)


def _lattice_epsilon(steps, gauss_mu2, delta, replace_one, reference, rel_slack):
    """The lattice bound of the Poisson steps (and Gaussian parts), or inf."""
    eta = _ETA_SHARE * delta * (0.5 if replace_one else 1.0)
    slack = rel_slack * reference / (2.0 if replace_one else 1.0)
    try:
        plan = _Plan(steps, slack, eta, _TAIL_SHARE * delta, _FP_SHARE * delta)
        remove = _direction_lattice(steps, gauss_mu2, "remove", plan)
        if replace_one:
            # The add hop is taken at deltas far below delta.
            plan.taus = [[t * 1e-6 for t in taus] for taus in plan.taus]
            plan.tau_combine *= 1e-6
            plan.allowances = [[t * 1e-3 for t in a] for a in plan.allowances]
            plan.allowance_combine *= 1e-3
        add = _direction_lattice(steps, gauss_mu2, "add", plan)
    except _TooLarge:
        return math.inf
    if not replace_one:
        return max(
            lattice.bound(plan.h0, delta, _ETA_SHARE * delta)
            for lattice in (remove, add)
        )
    pure = math.inf if gauss_mu2 > 0 else sum(-n * math.log1p(-q) for q, _, n in steps)
    return _chained_epsilon(remove, add, plan.h0, delta, pure)


def _chained_epsilon(remove, add, h0, delta, pure_add):
    """Replace-one epsilon through the data set without the record.

    ``eps_1 + eps_2`` minimised over the share of delta given to the first
    hop, with ``delta_1 + exp(eps_1) delta_2 = delta``, each hop's delta
    covering its lattice delta, its own Hoeffding ``eta`` and the
    floating-point allowance; the add hop may instead use its pure bound
    ``pure_add`` (delta 0), leaving all of delta to the first hop.
    """
    best = math.inf
    for share in [*np.linspace(0.05, 0.95, 19), 1.0]:
        delta_1 = share * delta
        eps_1 = max(0.0, remove.bound(h0, delta_1, _ETA_SHARE * delta_1))
        if not math.isfinite(eps_1):
            continue
        eps_2 = pure_add
        if share < 1.0:
            delta_2 = (1.0 - share) * delta * math.exp(-eps_1)
            eps_2 = min(eps_2, add.bound(h0, delta_2, _ETA_SHARE * delta_2))
        best = min(best, eps_1 + max(0.0, eps_2))
    return best

"""The lattice privacy loss distributions shared by the numerical accountants.

A :class:`Lattice` is a distribution on ``(offset + k) m h0`` for a global
quantum ``h0`` and an integer spacing ``m``, plus a mass at ``+inf``, with the
bookkeeping that keeps a bound computed from it valid: the variance of every
random rounding in its history (for the Hoeffding slack), and bounds on its
floating-point error. The argument, step by step, is in the docstring of
``_pld.py`` (Poisson steps); ``_allocation_pld.py`` uses the same lattices
for random allocation. This module holds what both use: the lattice and its
composition, the normal cell moments and rounding rules, the split of the
budgets over the levels of repeated squaring, and the replace-one chain.
"""

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import special
from scipy.fft import irfft, next_fast_len, rfft
from scipy.signal import lfilter

__all__ = [
    "Lattice",
    "Levels",
    "TooLarge",
    "FN_RTOL",
    "UNIT_ROUNDOFF",
    "chained_epsilon",
    "chord_up",
    "finish_up",
    "gaussian_lattice",
    "integer_spacings",
    "level_budgets",
    "level_copies",
    "level_spacings",
    "low_cell_mean",
    "merged",
    "normal_pieces",
    "plan_twice",
    "sub_intervals",
    "with_errors",
]

UNIT_ROUNDOFF = np.finfo(float).eps / 2.0
# Probabilities below this are set to 0 (with their bound counted): they only
# slow the arithmetic (subnormal products).
_TINY = 1e-200
# Relative allowance on each cell's up-probability for floating-point error.
_UP_NUDGE = 1e-8
# Relative accuracy assumed of ndtr / exp in the cell moments (a few ulps,
# taken generously).
_FN_RTOL = 16.0 * UNIT_ROUNDOFF
FN_RTOL = _FN_RTOL
# Convolution method (its error is bounded either way): inputs shorter than
# this are convolved directly, ...
_DIRECT_BELOW = 64
# ... and when a plain FFT's error bound is too large, the directly convolved
# window first leaves out this mass, shrunk by this factor until it fits.
_FIRST_OUTSIDE = 1e-3
_OUTSIDE_SHRINK = 0.1
# A direct part of more products than this (about 0.05 s of direct
# convolution) may use a lattice's relaxed allowance
# (docs/benchmarks.md, "Accounting at scale").
_CHEAP_DIRECT = 1 << 26


class TooLarge(Exception):
    """A lattice outgrew its size cap: the caller keeps the Rényi bound."""


def _direct_rel(terms):
    """Relative error bound of a sum of ``terms`` positive products."""
    gamma = (terms + 1) * UNIT_ROUNDOFF
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
    eps_f = 10.0 * UNIT_ROUNDOFF * math.log2(max(n_out, 2))
    norms = float(
        np.linalg.norm(a) * np.abs(b).sum() + np.abs(a).sum() * np.linalg.norm(b)
    )
    return math.sqrt(n_out) * 2.0 * eps_f * norms


def _fft_convolve(a, b, square, allowance, max_direct=None, relaxed=None):
    """``a * b`` with an absolute (L1) and a relative error bound.

    Plain FFT when its error bound is within ``allowance``; otherwise the
    window holding all but a small mass of ``a`` (and of ``b``) is convolved
    directly (relative error) and the products involving the rest by FFT,
    the rest shrunk until the bound fits (or the window is whole). When that
    direct part would exceed ``_CHEAP_DIRECT`` products and a larger
    allowance ``relaxed`` is given, the same is done within ``relaxed``. A
    direct part of more than ``max_direct`` products raises ``TooLarge``.
    """
    n_out = a.size + b.size - 1
    error = _fft_error(n_out, a, b)
    if error <= allowance:
        return _fft(a, b, square), error, 0.0
    split = _split(a, b, square, allowance, n_out)
    ia, ib = split[0], split[1]
    products = (ia[1] - ia[0]) * (ib[1] - ib[0])
    if relaxed is not None and relaxed > allowance and products > _CHEAP_DIRECT:
        if error <= relaxed:
            return _fft(a, b, square), error, 0.0
        split = _split(a, b, square, relaxed, n_out)
    ia, ib, error, whole, tails = split
    if max_direct is not None and (ia[1] - ia[0]) * (ib[1] - ib[0]) > max_direct:
        raise TooLarge
    p = np.zeros(n_out)
    direct = np.convolve(a[ia[0] : ia[1]], b[ib[0] : ib[1]])
    p[ia[0] + ib[0] : ia[0] + ib[0] + direct.size] = direct
    rel = _direct_rel(min(ia[1] - ia[0], ib[1] - ib[0]))
    if whole:
        return p, 0.0, rel
    tail_a, tail_b, bulk_a, bulk_b = tails
    if square:
        p += _fft(tail_a, a + bulk_a, False)
    else:
        p += _fft(a, tail_b, False) + _fft(tail_a, bulk_b, False)
    return p, error, rel


def _split(a, b, square, allowance, n_out):
    """Bulk windows of ``a`` and ``b`` whose rest's FFT error fits ``allowance``.

    Returns ``(ia, ib, error, whole, (tail_a, tail_b, bulk_a, bulk_b))``:
    the windows, the FFT error bound of the products involving the rest,
    whether the windows are whole, and the split arrays.
    """
    # The rest's FFT error is about sqrt(n) 2 eps_F 2 ||a||_2 times its mass.
    eps_f = 10.0 * UNIT_ROUNDOFF * math.log2(n_out)
    scale = math.sqrt(n_out) * 4.0 * eps_f * float(np.linalg.norm(a))
    outside = min(_FIRST_OUTSIDE, 10.0 * allowance / scale)
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
            return ia, ib, error, whole, (tail_a, tail_b, bulk_a, bulk_b)
        outside *= _OUTSIDE_SHRINK


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


class Lattice:
    """A distribution on ``(offset + arange(len(p))) * spacing * h0`` and +inf.

    ``spacing`` is an integer multiple of the global quantum ``h0`` (kept by
    the caller); ``var`` the sum of squared rounding ranges (in units of
    ``h0^2``) of every rounding in the lattice's history (step 2 of the
    argument in ``_pld.py``). Floating-point error (step 4): the exact
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

    def _like(self, offset, p, inf, **changes):
        fields = {
            "slack": self.slack,
            "spacing": self.spacing,
            "var": self.var,
            "rel": self.rel,
        }
        fields.update(changes)
        return Lattice(offset, p, inf, fields.pop("slack"), **fields)

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
        rel = self.rel + (terms + 3.0) * UNIT_ROUNDOFF
        return self._like(
            j0,
            out,
            self.inf,
            spacing=spacing,
            var=self.var + float(spacing) ** 2,
            rel=rel,
        )

    def convolve(
        self,
        other,
        tau,
        allowance,
        *,
        max_points,
        low_tau=None,
        max_direct=None,
        relaxed=None,
    ):
        """Distribution of the sum of independent draws, trimmed at ``tau``.

        Short inputs are convolved directly (a positive sum: relative error);
        long ones by FFT, whose absolute error bound (step 4) is kept below
        ``allowance`` by convolving the bulk of the mass directly and only
        the small rest by FFT. More than ``max_points`` output points, or a
        direct part of more than ``max_direct`` products (None: no limit),
        raise :class:`TooLarge`. ``relaxed``: a larger allowance for
        convolutions whose direct part would be long (None: none).
        """
        spacing = max(self.spacing, other.spacing)
        a_lat, b_lat = self.coarsen(spacing), other.coarsen(spacing)
        a, b = a_lat.p, b_lat.p
        n_out = a.size + b.size - 1
        if n_out > max_points:
            raise TooLarge
        square = a_lat is b_lat
        if min(a.size, b.size) < _DIRECT_BELOW:
            p, error, rel = np.convolve(a, b), 0.0, _direct_rel(min(a.size, b.size))
        else:
            p, error, rel = _fft_convolve(a, b, square, allowance, max_direct, relaxed)
        np.maximum(p, 0.0, out=p)
        inf = 1.0 - (1.0 - a_lat.inf) * (1.0 - b_lat.inf)
        mass_a, mass_b = float(a.sum()), float(b.sum())
        slack = error + a_lat.slack * (mass_b + b_lat.slack) + b_lat.slack * mass_a
        out = Lattice(
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
        rel = self.rel + (2.0 * p.size * UNIT_ROUNDOFF if first or drop else 0.0)
        return self._like(
            self.offset + first, kept, self.inf + to_inf, rel=rel, slack=slack
        )

    def power(self, count, levels, *, max_points, max_direct=None):
        """``count``-fold self-composition by repeated squaring.

        The square of level ``i`` is re-rounded to ``levels.spacings[i + 1]``
        and trimmed at ``levels.taus[i + 1]`` (``levels.lows[i + 1]`` for the
        lower tail); results combine at the last entries (:class:`Levels`).
        """
        limits = {"max_points": max_points, "max_direct": max_direct}
        result, base, level = None, self, 0
        while count:
            if count & 1:
                if result is None:
                    result = base
                else:
                    result = result.convolve(
                        base,
                        levels.taus[-1],
                        levels.allowances[-1],
                        low_tau=levels.lows[-1],
                        relaxed=levels.relaxed(-1),
                        **limits,
                    )
            count >>= 1
            if count:
                level += 1
                base = base.convolve(
                    base,
                    levels.taus[level],
                    levels.allowances[level],
                    low_tau=levels.lows[level],
                    relaxed=levels.relaxed(level),
                    **limits,
                )
                base = base.coarsen(levels.spacings[level]).trim(
                    levels.taus[level], levels.lows[level]
                )
        return result

    def std_slack(self, h0, eta):
        """Hoeffding's ``s`` for this lattice's rounding at failure ``eta``."""
        return h0 * math.sqrt(0.5 * self.var * math.log(1.0 / eta))

    def bound(self, h0, delta, eta):
        """An epsilon whose *true* delta is at most ``delta`` (or inf).

        Steps 2, 4 and 5 of the argument in ``_pld.py``: the lattice gets ``delta``
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


def normal_pieces(a, b, mean, z):
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


def gaussian_lattice(mu, h, *, max_points, spacing=1):
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
    if k_hi - k_lo + 1 > max_points:
        raise TooLarge
    levels = np.arange(k_lo, k_hi + 1) * h
    # L is linear in a standard normal, so a cell's moment is the normal's.
    cell_mass, moment, error, mass_error = normal_pieces(
        levels[:-1], levels[1:], mean, sd
    )
    up = finish_up((moment + error) / h, cell_mass, jensen=False)
    p = np.zeros(levels.size)
    p[:-1] += cell_mass - up
    p[1:] += up
    p[0] += float(special.ndtr((levels[0] - mean) / sd))
    inf = float(special.ndtr(-(levels[-1] - mean) / sd))
    return with_errors(k_lo, p, inf, cell_mass, mass_error, spacing)


def with_errors(k_lo, p, inf, mass, mass_error, spacing):
    """The lattice, its cells' floating-point errors split (step 4).

    A point's error is at most its two cells' mass errors plus a few ulps of
    their masses; where that is below 1e-8 of the point's mass it counts as
    relative, elsewhere (far tails) as absolute.
    """
    error = np.zeros(p.size)
    cell_error = mass_error + 4.0 * UNIT_ROUNDOFF * mass
    error[:-1] += cell_error
    error[1:] += cell_error
    error[0] += 4.0 * UNIT_ROUNDOFF * p[0]
    relative = (error <= 1e-8 * p) & (p > 0)
    rel = float(np.max(error[relative] / p[relative], initial=0.0))
    slack = float(error[~relative].sum())
    return Lattice(
        k_lo, p, inf, slack, spacing=spacing, var=float(spacing) ** 2, rel=rel
    )


def chord_up(a, b, mass, moment, error):
    """Up-probability of cells where the loss is convex in the normal draw.

    A loss convex in ``x`` lies below its chord on the cell's ``x``-interval
    ``(a, b]``, so ``E[(L - lo) 1{cell}] <= h E[(X - a) 1{cell}] / (b - a)``:
    the up-probability is at most the normal's moment over the width (with
    its error bound and a few ulps for the division). Cells without a finite
    width send all their mass up.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        width = b - a
        rel = 4.0 * UNIT_ROUNDOFF * (np.abs(a) + np.abs(b)) / width
        up = (moment + error) / width * (1.0 + rel)
    return np.where(np.isfinite(a) & (width > 0), up, mass)


def low_cell_mean(a, mass, moment, error, below):
    """``E[X | cell]`` at the low end of its error, for Jensen's inequality.

    ``a`` is the cell's lower end, ``mass``, ``moment`` and ``error`` its
    :func:`normal_pieces`; ``below`` is ``E[X 1{X <= b}]`` for the cells
    open to ``-inf`` (the caller's closed form).
    """
    finite = np.isfinite(a)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        shift = (moment - error - 2.0 * _FN_RTOL * np.abs(moment)) / mass
        below_mean = below * (1.0 + 4.0 * _FN_RTOL) / mass
        return np.where(finite, np.where(finite, a, 0.0) + shift, below_mean)


def finish_up(up, mass, *, jensen):
    """The cells' up-probabilities, nudged up for floating point and clipped.

    ``jensen``: the bound came from Jensen's inequality, undefined on empty
    cells (none go up) and where it overflowed (all go up).
    """
    if jensen:
        up = np.where(mass > 0, up, 0.0)
        up = np.where(np.isnan(up), mass, up)
    return np.clip(up + _UP_NUDGE * mass, 0.0, mass)


@dataclass(frozen=True)
class Levels:
    """Per level of repeated squaring: spacing, tail cut-offs, FFT allowance.

    Entry ``i`` is for the lattice of ``2^i`` copies (``spacings`` has one
    entry a level, in units of ``h0``); the last entry of ``taus`` (upper
    tail to ``+inf``), ``lows`` (lower tail moved up) and ``allowances``
    (floating-point error) is for the final combinations. A convolution
    whose direct part would be long may use ``relax`` times its allowance.
    """

    spacings: list
    taus: list
    lows: list
    allowances: list
    relax: float = 1.0

    def relaxed(self, index):
        """The larger allowance of entry ``index``, or None if not larger."""
        return self.allowances[index] * self.relax if self.relax > 1.0 else None

    def scaled(self, tail, floating):
        """The same levels with the tail and floating-point budgets scaled."""
        taus = [t * tail for t in self.taus]
        return replace(
            self, taus=taus, allowances=[a * floating for a in self.allowances]
        )


def level_copies(count):
    """How many copies of each squaring level's lattice ``count`` holds."""
    n_levels = count.bit_length()
    return np.array([max(1, count >> i) for i in range(n_levels)], float)


def level_budgets(count, tail, low, floating, *, first_tail=None, first_low=None):
    """Tail, lower-tail and floating-point budgets of each squaring level.

    Each total is split equally over the levels and the final combinations
    (the floating-point one over one more part), and a level's share over
    its copies in the result. The single-step lattice (level 0) may be given
    its own tail cut-offs instead.

    Returns
    -------
    taus, lows, allowances : list of float
        One entry a level, then one for the final combinations.
    """
    copies = level_copies(count)
    tail_unit = tail / (copies.size + 1)
    low_unit = low / (copies.size + 1)
    fp_unit = floating / (copies.size + 2)
    first_tail = tail_unit / copies[0] if first_tail is None else first_tail
    first_low = low / copies[0] if first_low is None else first_low
    return (
        [first_tail, *(tail_unit / copies[1:]), tail_unit],
        [first_low, *(low_unit / copies[1:]), low_unit],
        [*(fp_unit / copies), fp_unit],
    )


def integer_spacings(ideal, h0):
    """Ideal spacings as non-decreasing integer multiples of ``h0`` (>= 1)."""
    multiples = np.maximum(1, np.floor(ideal / h0))
    return np.maximum.accumulate(multiples).astype(np.int64).tolist()


def level_spacings(count, budget, width, max_points, decay):
    """Ideal spacings (absolute) of the ``bit_length(count)`` squaring levels.

    Level ``i`` (the lattice of ``2^i`` steps, ``count >> i`` copies of it
    in the result) gets a share of the rounding variance ``budget``
    proportional to ``decay^i``, and the final combinations the rest; the
    step lattice (level 0, ``width`` wide) is kept below ``max_points``
    points, all levels scaled alike when it needs to be.
    """
    copies = level_copies(count)
    weights = decay ** np.arange(copies.size)
    combined = bin(count).count("1") * weights[-1]
    unit = budget / (weights.sum() + combined)
    spacings = np.sqrt(weights * unit / copies)
    # A step too wide for its share: every level scales up alike (the slack
    # grows, the lattices keep their planned sizes).
    spacings *= max(1.0, width / max_points / spacings[0])
    return np.maximum.accumulate(spacings)


def chained_epsilon(remove, add, delta, pure_add, *, eta_share, splits):
    """Replace-one epsilon through the data set without the record.

    ``eps_1 + eps_2`` minimised over the share of delta given to the first
    hop (``splits`` shares from 0.05 to 0.95, and all of it), with
    ``delta_1 + exp(eps_1) delta_2 = delta``, each hop's delta covering its
    lattice delta, its own Hoeffding ``eta`` (``eta_share`` of it) and the
    floating-point allowance; the add hop may instead use its pure bound
    ``pure_add`` (delta 0), leaving all of delta to the first hop.

    Parameters
    ----------
    remove, add : callable
        ``bound(delta, eta)`` of each hop's lattice (:meth:`Lattice.bound`
        on its quantum).
    delta : float
    pure_add : float
        A pure-DP epsilon of the add hop (``inf`` if none).
    eta_share : float
    splits : int

    Returns
    -------
    float
    """
    best = math.inf
    for share in [*np.linspace(0.05, 0.95, splits), 1.0]:
        delta_1 = share * delta
        eps_1 = max(0.0, remove(delta_1, eta_share * delta_1))
        if not math.isfinite(eps_1):
            continue
        eps_2 = pure_add
        if share < 1.0:
            delta_2 = (1.0 - share) * delta * math.exp(-eps_1)
            eps_2 = min(eps_2, add(delta_2, eta_share * delta_2))
        best = min(best, eps_1 + max(0.0, eps_2))
    return best


def plan_twice(epsilon_at, planned, floor, replan_below):
    """A lattice epsilon, planned again when far below what it was planned for.

    ``epsilon_at(planned)`` builds the lattices for a first estimate of
    epsilon (any plan gives a valid bound; a good one a tight bound). If the
    answer is below ``replan_below`` of the estimate, it is asked again at
    that answer (at least ``floor``) and the smaller kept.

    Returns
    -------
    (epsilon, "pld") or None
        None when no lattice fitted its size cap.
    """
    epsilon = epsilon_at(planned)
    if math.isfinite(epsilon) and epsilon < replan_below * planned:
        again = epsilon_at(max(epsilon, floor))
        epsilon = min(epsilon, again)
    if not math.isfinite(epsilon):
        return None
    return max(0.0, epsilon), "pld"


def sub_intervals(edges, width, start, cuts=()):
    """Pieces of the cells ``(edges[c], edges[c + 1]]`` cut at a grid.

    The grid runs from ``start`` by ``width`` up to the last finite edge;
    the pieces' ends are the finite edges, the grid points and ``cuts``
    (exact points where the caller's bounds change form), so the pieces of
    a cell partition it exactly (the first piece is open to ``-inf`` when
    the first cell is).

    Parameters
    ----------
    edges : ndarray
        Non-decreasing cell edges, possibly ``-inf`` at the start.
    width, start : float
    cuts : sequence of float, default=()

    Returns
    -------
    lower, upper : ndarray
        The pieces' ends (``lower`` is ``-inf`` for the first piece).
    cell : ndarray of int
        The cell each piece lies in.
    """
    finite = edges[np.isfinite(edges)]
    stop = float(finite[-1])
    count = max(0, math.floor((stop - start) / width)) + 1
    grid = start + width * np.arange(count)
    extra = np.asarray(cuts, dtype=float)
    points = np.unique(
        np.concatenate([finite, grid[grid <= stop], extra[extra <= stop]])
    )
    lower = np.concatenate([[-np.inf], points[:-1]])
    upper = points
    cell = np.searchsorted(edges, upper, side="left") - 1
    keep = (cell >= 0) & (cell < edges.size - 1)
    return lower[keep], upper[keep], cell[keep]


def merged(groups):
    """Groups ``(a, b, count)`` of equal ``(a, b)`` merged, in a fixed order.

    Composition is commutative, so a bound may depend only on the multiset
    of steps; merging and sorting makes the lattices (and their roundings)
    the same whatever order the events were listed in.
    """
    counts = {}
    for a, b, n in groups:
        counts[(a, b)] = counts.get((a, b), 0) + n
    return [(a, b, n) for (a, b), n in sorted(counts.items())]

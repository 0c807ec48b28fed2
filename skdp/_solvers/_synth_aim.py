"""Adaptive select-measure-estimate rounds on a graphical model (AIM-style).

The mechanism of McKenna, Mullins, Sheldon and Miklau (2022), "AIM: an
adaptive and iterative mechanism for differentially private synthetic data"
(PVLDB 15(11)), Algorithm 1, with zCDP as the internal currency:

1. measure every 1-way marginal with Gaussian noise;
2. each round, select a marginal from the candidates (the downward closure of
   the workload whose addition keeps the junction tree within a size limit
   that grows with the budget used) by the exponential mechanism on its
   workload-weighted L1 error minus the expected L1 norm of the noise about
   to be added (AIM Section 4.2);
3. measure it with Gaussian noise and refit the model's potentials by mirror
   descent on all measurements so far (:mod:`._pgm`);
4. when a measurement barely moved the model (change below the expected L1
   norm of its noise), halve the noise and double the selection budget
   (AIM Section 4.4, annealing); when the budget left would not pay for two
   more rounds, spend all of it on one last round.

Privacy. Under replace-one a count vector moves by 2 in L1 and ``sqrt(2)`` in
L2. A Gaussian measurement with noise multiplier ``z`` (std ``sqrt(2) z``) is
``1 / (2 z^2)``-zCDP; a selection draw with probability proportional to
``exp(eps q_r / (2 Du))``, ``Du = 2 max_r w_r`` bounding how much one record
moves any weighted score, is ``eps``-bounded range, hence ``eps^2 / 8``-zCDP
(Cesar and Rogers 2021, Lemma 3.2). The noise of round ``t`` depends on
earlier released outputs, so the rounds form a privacy filter: the total zCDP
of the run never exceeds the budget ``rho`` whatever happens, and an adaptive
sequence whose RDP at order ``a`` always sums to at most ``a rho`` is
``(a, a rho)``-RDP (Feldman and Zrnic 2021, "Individual privacy accounting via
a Rényi filter", NeurIPS: their composition theorem for adaptively chosen
RDP parameters, applied at each order; Whitehouse, Ramdas,
Rogers and Wu 2023, "Fully-adaptive composition in differential privacy",
ICML, for zCDP). The certified curve is therefore ``a rho``: the curve of a
Gaussian event with multiplier ``1 / sqrt(2 rho)``.

Under add-remove (one record added or removed) a count vector moves by 1 in L1
and L2, so the same noise costs half the zCDP (the relation of the AIM paper
and of private-pgm); the number of rows is then private too, and the model's
total is estimated from the noisy 1-way measurements (post-processing): the
inverse-variance weighted mean of their sums.

Domain compression (the ``compress_domain`` step of McKenna, Miklau and
Sheldon's MST, 2021, Section 4): after the 1-way measurements, the levels of a
column whose noisy count is below ``COMPRESS_BELOW`` noise standard
deviations are merged into one level, when there are at least two of them.
The rounds then count, score and measure marginals on the compressed codes
(fewer cells, so less noise per marginal: Adult's 32-bin numeric columns and
its 42 countries are mostly near-empty cells); the merged cell's 1-way
measurement is the sum of its noisy counts, with their summed variance. A
sampled merged level is expanded to one of its original levels drawn in
proportion to estimates of their counts from the noisy ones (uniformly if
all are zero): for an ordered column (numeric bins), the noisy counts
smoothed over neighbouring bins by a Gaussian kernel of ``SMOOTH_BINS``
levels; for a categorical column, the noisy counts shrunk toward their mean
by the positive-part James-Stein factor ``(1 - std^2 / variance)_+`` (the
empirical-Bayes estimate: it leans toward uniform when the counts' spread is
mostly noise); both clipped at zero. All of this reads only released
measurements: post-processing. The sensitivities are unchanged (a record
still sits in one cell of every marginal).

Coarsened candidates. Besides every column set of the workload's downward
closure, each multi-column set with an ordered (numeric) column is also a
candidate *coarsened*: that column's kept ordered levels cut into about
``COARSE_LEVELS`` runs of adjacent levels (:func:`_coarse_groups`), the table
summed over each run. At low budgets a pair with a 30-level numeric column
has too many cells for its noise: measured on 8 to 16 runs its noise's L1
norm is 2 to 4 times smaller, and the fine detail inside a run comes from the
1-way measurement (the model is still over the full levels; the measurement's
loss compares the model's coarsened marginal with it, see
:func:`._pgm.coarsen`). The groups are public (fixed by the declared domain
and the released 1-way measurements), the score of a coarsened candidate is
its coarsened L1 error minus the noise's expected L1 norm over its (fewer)
cells, with the same workload weight, and the exponential mechanism chooses
among all candidates, fine and coarse. Coarsened candidates are offered only
when the first rounds' noise standard deviation is at least ``COARSE_MIN_STD``
times the number of rows (a public rule: the noise is fixed by the budget and,
under add-remove, the total is the released estimate). Privacy: a record sits
in exactly one cell of a coarsened table too, so its L1 and L2 sensitivities
and the score sensitivity are those of the full table; a round is still one
selection draw and one Gaussian measurement, accounted as before.
"""

import itertools
import logging
import math
import os
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed
from scipy.special import logsumexp

from ..accounting import ExponentialMechanismEvent, GaussianEvent
from ._marginals import COUNT_L2_SENSITIVITY, SCORE_SENSITIVITY, count_table
from ._pgm import (
    Measurement,
    _round_counts,
    build_junction_tree,
    clique_cells,
    coarsen,
    marginal,
    mirror_descent,
)

__all__ = [
    "AIMResult",
    "Compression",
    "compress_column",
    "expand_codes",
    "count_marginals",
    "estimate_total",
    "fit_aim",
    "workload_cliques",
]

logger = logging.getLogger("skdp.synthetic")

#: (count L2 sensitivity, selection-score sensitivity per unit of weight) of a
#: count table under each neighbouring relation.
_SENSITIVITIES = {
    "replace-one": (COUNT_L2_SENSITIVITY, SCORE_SENSITIVITY),
    "add-remove": (1.0, 1.0),
}
#: Levels whose noisy 1-way count is below this many noise standard
#: deviations are merged (domain compression); ``None`` disables it.
COMPRESS_BELOW = 3.0
#: With ``compress="auto"``, domain compression runs only when the 1-way
#: noise standard deviation is at most this share of the rows (released
#: estimate under add-remove): at higher noise the ``COMPRESS_BELOW`` threshold
#: merges levels that hold a real share of the rows, whose split is then
#: guessed (see docs/benchmarks.md, synthetic panel, second round).
COMPRESS_MAX_STD = 1.0 / 200.0
#: Bandwidth, in bins, of the kernel that smooths the noisy counts of an
#: ordered column's merged levels before they are expanded.
SMOOTH_BINS = 1.5
#: AIM's share of each round's budget spent on the measurement (alpha).
MEASURE_SHARE = 0.9
#: Initial number of rounds per column (AIM uses T = 16 d; 4 d measured better
#: on Adult, with more mirror-descent iterations, see docs/synthetic.md).
ROUNDS_PER_COLUMN = 4
#: Expected L1 norm of N(0, s^2) noise per cell, divided by s.
_EXPECTED_ABS = math.sqrt(2.0 / math.pi)
#: Ordered (numeric) columns may also be measured in about this many runs of
#: adjacent levels in multi-column marginals; ``None``: never coarsened.
COARSE_LEVELS = 16
#: Coarsened candidates are offered only when the first rounds' noise standard
#: deviation is at least this share of the number of rows. On Adult they help
#: at every epsilon under replace-one (1.7e-4 at epsilon 10) and up to epsilon
#: 3 under add-remove (3.3e-4), and hurt at 10 under add-remove (1.2e-4).
COARSE_MIN_STD = 1.5e-4
#: Numeric columns are cut into about this * sqrt(n / noise std) runs (at
#: least 2) of adjacent bins of equal estimated mass (see docs/benchmarks.md,
#: synthetic panel).
RUNS_PER_SQRT = 1.5
#: Relative slack of the floating-point budget check.
_BUDGET_RTOL = 1e-9


@dataclass(frozen=True)
class AIMResult:
    """What the rounds released and what they cost.

    Attributes
    ----------
    tree : JunctionTree
    log_marginals : list of ndarray
        Calibrated log-marginals of the tree's cliques.
    measurements : list of Measurement
    selected : list of tuple
        The column sets selected in the adaptive rounds, in order.
    events : list
        Every privacy event that ran (1-way measurements, then per round one
        selection draw and one measurement).
    rho_used : float
        zCDP spent by the events (at most the budget).
    n_rows : float
        The model's total: the number of rows (replace-one, public) or its
        estimate from the noisy 1-way marginals (add-remove).
    compression : list of Compression
        Per column, how its levels were merged (the model's codes are the
        compressed ones; see :func:`expand_codes`).
    """

    tree: object
    log_marginals: list
    measurements: list
    selected: list
    events: list
    rho_used: float
    n_rows: float
    compression: list


@dataclass(frozen=True)
class Compression:
    """How one column's levels map to the model's (compressed) levels.

    Attributes
    ----------
    mapping : ndarray of int, shape (n_levels,)
        Compressed level of each original level.
    probs : ndarray of float, shape (n_levels,)
        Probability of each original level given its compressed level (1 for
        a level kept on its own), used when a sampled level is expanded.
    n_ordered : int
        The first ``n_ordered`` compressed levels are ordered (runs of
        adjacent numeric bins, or single bins), in order.
    """

    mapping: np.ndarray
    probs: np.ndarray
    n_ordered: int = 0

    @property
    def n_levels(self):
        """Number of compressed levels."""
        return int(self.mapping.max()) + 1

    @property
    def merged(self):
        """The original levels that share their compressed level with others."""
        sizes = np.bincount(self.mapping)
        return np.flatnonzero(sizes[self.mapping] > 1)

    @property
    def weights(self):
        """Expansion probabilities of the :attr:`merged` levels."""
        return self.probs[self.merged]


def _identity(size, ordered=0):
    return Compression(np.arange(size), np.ones(size), int(ordered))


def compress_column(noisy_counts, std, below=COMPRESS_BELOW, ordered=0, runs=None):
    """The :class:`Compression` of a column from its noisy 1-way counts.

    With ``runs`` (and ``ordered > 0``), the first ``ordered`` levels (numeric
    bins) are cut into at most ``runs`` runs of adjacent bins holding about
    equal estimated mass (see :func:`ordered_runs`); the other levels stay
    as they are. Otherwise, levels with a noisy count below ``below * std``
    are merged into one new last level when there are at least two of them;
    the ordered ones' expansion weights are smoothed over neighbouring bins,
    the others' shrunk toward their mean (see :func:`_expansion_weights`).
    Post-processing of a released measurement.
    """
    size = noisy_counts.size
    if runs is not None and ordered > 1 and runs < ordered:
        return ordered_runs(noisy_counts, std, ordered, runs)
    rare = (
        noisy_counts < below * std if below is not None else np.zeros(size, dtype=bool)
    )
    if rare.sum() < 2 or rare.all():
        return _identity(size, ordered)
    mapping = np.empty(size, dtype=np.int64)
    kept = np.flatnonzero(~rare)
    mapping[kept] = np.arange(kept.size)
    mapping[rare] = kept.size
    merged = np.flatnonzero(rare)
    probs = np.ones(size)
    probs[merged] = _expansion_weights(
        noisy_counts[merged], std, merged < ordered, merged
    )
    return Compression(mapping, probs, int(np.sum(kept < ordered)))


def ordered_runs(noisy_counts, std, ordered, runs):
    """Runs of adjacent numeric bins with about equal mass (coarse levels).

    The first ``ordered`` noisy counts are smoothed over neighbouring bins
    (Gaussian kernel of ``SMOOTH_BINS``) and clipped at zero; each bin goes
    to the run ``floor(runs * q)``, ``q`` the estimated share of the mass
    below the bin's middle, so the runs are cut at estimated quantiles
    (nearly empty tails join the nearest run instead of taking levels of
    their own). A bin is expanded from its run in proportion to its
    estimate (uniformly within a run estimated empty). Levels after the
    first ``ordered`` (a missing level) keep levels of their own.
    Post-processing of a released measurement.
    """
    size = noisy_counts.size
    estimate = _smoothed(np.asarray(noisy_counts[:ordered], dtype=float))
    total = estimate.sum()
    if total > 0:
        below = (np.cumsum(estimate) - estimate / 2.0) / total
    else:
        below = (np.arange(ordered) + 0.5) / ordered
    run = np.minimum((runs * below).astype(np.int64), runs - 1)
    run = np.unique(run, return_inverse=True)[1]  # drop empty runs
    n_runs = int(run.max()) + 1
    mapping = np.concatenate([run, n_runs + np.arange(size - ordered)])
    mass = np.bincount(run, weights=estimate, minlength=n_runs)
    count = np.bincount(run, minlength=n_runs)
    probs = np.ones(size)
    probs[:ordered] = np.where(
        mass[run] > 0,
        estimate / np.where(mass[run] > 0, mass[run], 1.0),
        1.0 / count[run],
    )
    return Compression(mapping, probs, n_runs)


def _smoothed(counts):
    """Counts averaged over neighbouring bins (``SMOOTH_BINS``), clipped at 0."""
    x = np.arange(counts.size, dtype=float)
    kernel = np.exp(-0.5 * np.square((x[:, None] - x[None, :]) / SMOOTH_BINS))
    return np.clip(kernel @ counts / kernel.sum(axis=1), 0.0, None)


def _expansion_weights(noisy, std, ordered, positions):
    """Probabilities of merged levels from their noisy counts (post-processing).

    ``ordered`` marks the levels that are bins of a numeric column, at
    ``positions``: their counts are averaged with a Gaussian kernel of
    ``SMOOTH_BINS`` bins over the other ordered merged levels. The remaining
    levels' counts are shrunk toward their mean by the positive-part
    James-Stein factor ``(1 - std^2 / variance)_+``. Clipped at zero and
    normalised; uniform if nothing is left.
    """
    estimate = np.asarray(noisy, dtype=float).copy()
    if ordered.sum() >= 2:
        x = positions[ordered].astype(float)
        kernel = np.exp(-0.5 * np.square((x[:, None] - x[None, :]) / SMOOTH_BINS))
        estimate[ordered] = kernel @ estimate[ordered] / kernel.sum(axis=1)
    rest = ~ordered
    if rest.sum() >= 2:
        values = estimate[rest]
        spread = values.var()
        factor = max(0.0, 1.0 - std**2 / spread) if spread > 0 else 0.0
        estimate[rest] = values.mean() + factor * (values - values.mean())
    weights = np.clip(estimate, 0.0, None)
    total = weights.sum()
    return weights / total if total > 0 else np.full(weights.size, 1.0 / weights.size)


def _compressed_measurement(column, measurement, compression):
    """A 1-way measurement moved to the compressed levels (sums, summed variance)."""
    if compression.n_levels == compression.mapping.size:
        return measurement
    y = np.bincount(
        compression.mapping, weights=measurement.y, minlength=compression.n_levels
    )
    members = np.bincount(compression.mapping, minlength=compression.n_levels)
    std = float(measurement.std) * np.sqrt(members)
    return Measurement((column,), y, std)


def expand_codes(codes, compression, rng):
    """Map compressed codes back to original levels (merged levels drawn).

    The rows of a level that merges several original levels get them in
    counts rounded from their expansion probabilities (within one row of
    their expectation, as in :func:`._pgm.sample_codes`), in random order.

    Parameters
    ----------
    codes : ndarray of shape (n_rows, n_columns), int
        Codes over the compressed levels, as sampled from the model.
    compression : list of Compression
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_rows, n_columns)
        Codes over the original levels.
    """
    out = np.empty_like(codes)
    for j, comp in enumerate(compression):
        members = np.bincount(comp.mapping, minlength=comp.n_levels)
        if np.all(members == 1):
            inverse = np.empty(comp.n_levels, dtype=np.int64)
            inverse[comp.mapping] = np.arange(comp.mapping.size)
            out[:, j] = inverse[codes[:, j]]
            continue
        column = np.empty(codes.shape[0], dtype=np.int64)
        for level in range(comp.n_levels):
            hit = np.flatnonzero(codes[:, j] == level)
            originals = np.flatnonzero(comp.mapping == level)
            if originals.size == 1:
                column[hit] = originals[0]
                continue
            counts = _round_counts(comp.probs[originals], hit.size, rng)
            column[hit] = rng.permutation(np.repeat(originals, counts))
        out[:, j] = column
    return out


def workload_cliques(n_columns, workload):
    """Column sets of a workload: ``"1-way"``, ``"2-way"``, ``"3-way"`` or a list."""
    if isinstance(workload, str):
        ways = {"1-way": 1, "2-way": 2, "3-way": 3}[workload]
        return list(itertools.combinations(range(n_columns), min(ways, n_columns)))
    return [tuple(sorted(set(c))) for c in workload]


def _downward_closure(workload):
    closure = set()
    for clique in workload:
        for k in range(1, len(clique) + 1):
            closure.update(itertools.combinations(clique, k))
    return sorted(closure, key=lambda c: (len(c), c))


def _count_chunk(codes, sizes, cliques):
    return [count_table(codes, clique, sizes) for clique in cliques]


def count_marginals(codes, sizes, cliques, n_jobs=None):
    """Exact count tables of ``cliques``, in parallel over column sets.

    The column sets are dealt round-robin into one chunk per worker and counted
    with joblib (any joblib backend, e.g. Dask, can run them).

    Returns
    -------
    counts : dict
        Column set -> count table (axes in the set's order).
    """
    cliques = list(cliques)
    workers = 1 if n_jobs is None else int(n_jobs)
    if workers < 0:
        workers = max(1, (os.cpu_count() or 1) + 1 + workers)
    if workers <= 1 or len(cliques) < 2:
        tables = _count_chunk(codes, sizes, cliques)
        return dict(zip(cliques, tables, strict=True))
    chunks = [cliques[k::workers] for k in range(workers)]
    results = Parallel(n_jobs=workers)(
        delayed(_count_chunk)(codes, sizes, chunk) for chunk in chunks if chunk
    )
    counts = {}
    for chunk, tables in zip([c for c in chunks if c], results, strict=True):
        counts.update(zip(chunk, tables, strict=True))
    return counts


def _coarse_groups(compression, ordered, target):
    """Groups of adjacent ordered levels (about ``target`` of them), or None.

    The column's kept ordered levels (its first compressed levels, in order)
    are cut into runs of ``ceil(count / target)`` adjacent levels; every other
    level is a group of its own. ``None`` when runs would be single levels.
    """
    if target is None or ordered <= 0:
        return None
    n_ordered = compression.n_ordered
    width = math.ceil(n_ordered / target)
    if width < 2:
        return None
    groups = np.empty(compression.n_levels, dtype=np.int64)
    head = np.arange(n_ordered) // width
    groups[:n_ordered] = head
    groups[n_ordered:] = head.max() + 1 + np.arange(compression.n_levels - n_ordered)
    return groups


def _variants(candidates, compression, ordered, target):
    """Candidate measurements ``(column set, groups or None)``.

    Every column set as it is, plus a coarsened version of each multi-column
    set that has an ordered column with coarse groups.
    """
    coarse = [
        _coarse_groups(c, k, target) for c, k in zip(compression, ordered, strict=True)
    ]
    out = [(r, None) for r in candidates]
    for r in candidates:
        if len(r) > 1 and any(coarse[v] is not None for v in r):
            out.append((r, tuple(coarse[v] for v in r)))
    return out


def _cells(clique, sizes, groups):
    """Cells of the (possibly coarsened) table over ``clique``."""
    if groups is None:
        return clique_cells(clique, sizes)
    return math.prod(
        int(sizes[v]) if g is None else int(g.max()) + 1
        for v, g in zip(clique, groups, strict=True)
    )


def _weights(candidates, workload):
    """AIM's weight of a candidate: its total overlap with the workload."""
    sets = [set(w) for w in workload]
    return np.array([sum(len(set(r) & s) for s in sets) for r in candidates], float)


class _Budget:
    """zCDP filter: the noise of the next round, never past the budget ``rho``."""

    def __init__(self, rho, max_rounds):
        self.rho = rho
        self.used = 0.0
        self.z = math.sqrt(max_rounds / (2.0 * MEASURE_SHARE * rho))
        self.eps = math.sqrt(8.0 * (1.0 - MEASURE_SHARE) * rho / max_rounds)

    def round_cost(self):
        return 1.0 / (2.0 * self.z**2) + self.eps**2 / 8.0

    def next_round(self):
        """Noise multiplier, selection epsilon and whether it is the last round."""
        remaining = self.rho - self.used
        last = remaining <= 2.0 * self.round_cost()
        if last:
            # A hair below what is left, so rounding never takes the total
            # past the budget.
            remaining *= 1.0 - 1e-12
            self.z = math.sqrt(1.0 / (2.0 * MEASURE_SHARE * remaining))
            self.eps = math.sqrt(8.0 * (1.0 - MEASURE_SHARE) * remaining)
        self.used += self.round_cost()
        if self.used > self.rho * (1.0 + _BUDGET_RTOL):
            raise RuntimeError("Internal error: a round would exceed the budget.")
        return self.z, self.eps, last


def _select(scores, epsilon, sensitivity, rng):
    """One exponential-mechanism draw (``epsilon``-DP and bounded range)."""
    logits = epsilon * scores / (2.0 * sensitivity)
    probs = np.exp(logits - logsumexp(logits))
    return int(rng.choice(probs.size, p=probs / probs.sum()))


def _allowed(candidates, measured, sizes, limit, current):
    """Candidates whose addition keeps the junction tree within ``limit`` cells."""
    out = []
    for k, r in enumerate(candidates):
        if current.host(r) >= 0:
            out.append(k)
        elif build_junction_tree(measured + [r], sizes).cells() <= limit:
            out.append(k)
    return out


def fit_aim(
    codes,
    sizes,
    rho,
    rng,
    *,
    workload="2-way",
    max_cells=200_000,
    n_jobs=None,
    round_iter=150,
    final_iter=750,
    neighbouring="replace-one",
    compress=False,
    ordered=None,
    names=None,
    runs_numeric=False,
):
    """Run the adaptive rounds under a zCDP budget ``rho``.

    Parameters
    ----------
    codes : ndarray of shape (n_rows, n_columns), int
    sizes : sequence of int
        Number of levels of each column (public).
    rho : float > 0
        zCDP budget under ``neighbouring``.
    rng : numpy.random.Generator
    workload : str or list of tuple, default="2-way"
    max_cells : int, default=200_000
        Largest model (total cells of the junction tree's cliques).
    n_jobs : int or None
        Workers for counting the candidate marginals.
    round_iter, final_iter : int
        Mirror-descent iterations after each round and at the end.
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
        Sets the sensitivities; under ``"add-remove"`` the number of rows is
        not used, only its estimate from the noisy 1-way marginals.
    compress : bool or "auto", default=False
        Merge each column's levels whose noisy 1-way count is below
        ``COMPRESS_BELOW`` noise standard deviations (domain compression).
        ``"auto"``: only when the 1-way noise standard deviation is at most
        ``COMPRESS_MAX_STD`` times the number of rows (or its estimate).
    ordered : sequence of int or None, default=None
        Per column, how many of its first levels are ordered (numeric bins;
        0 for a categorical column); only shapes how merged levels are
        expanded. ``None``: no column is ordered.
    names : sequence or None, default=None
        Column names for the log (``None``: column indices).
    runs_numeric : bool, default=False
        Cut each ordered column's levels into runs of about equal estimated
        mass after the 1-way measurements (:func:`ordered_runs`), about
        ``RUNS_PER_SQRT * sqrt(n_rows / std)`` of them (at least 2).

    Returns
    -------
    AIMResult
    """
    n_rows, n_columns = codes.shape
    sizes = tuple(int(s) for s in sizes)
    workload = workload_cliques(n_columns, workload)
    candidates = _downward_closure(workload)
    weights = _weights(candidates, workload)
    count_sensitivity, score_sensitivity = _SENSITIVITIES[neighbouring]
    sensitivity = score_sensitivity * float(weights.max())
    budget = _Budget(rho, ROUNDS_PER_COLUMN * n_columns)
    # 1. Every 1-way marginal, with the first rounds' noise.
    z = budget.z
    std = count_sensitivity * z
    measurements = [
        Measurement(
            (j,),
            count_table(codes, (j,), sizes) + std * rng.standard_normal(sizes[j]),
            std,
        )
        for j in range(n_columns)
    ]
    if neighbouring == "add-remove":
        n_rows = estimate_total(measurements)
    # Domain compression: post-processing of the 1-way measurements (the gate
    # reads the noise and the number of rows or its released estimate).
    if compress == "auto":
        compress = std <= COMPRESS_MAX_STD * n_rows
    below = COMPRESS_BELOW if compress else None
    ordered = [0] * n_columns if ordered is None else [int(k) for k in ordered]
    # Numeric columns: about RUNS_PER_SQRT sqrt(n / std) runs of adjacent bins
    # (a public rule: the noise and the number of rows or its estimate).
    runs = (
        max(2, int(round(RUNS_PER_SQRT * math.sqrt(n_rows / std))))
        if runs_numeric
        else None
    )
    compression = [
        compress_column(m.y, std, below, k, runs if k else None)
        for m, k in zip(measurements, ordered, strict=True)
    ]
    measurements = [
        _compressed_measurement(j, m, c)
        for j, (m, c) in enumerate(zip(measurements, compression, strict=True))
    ]
    if any(c.n_levels < c.mapping.size for c in compression):
        codes = np.column_stack(
            [c.mapping[codes[:, j]] for j, c in enumerate(compression)]
        )
        sizes = tuple(c.n_levels for c in compression)
    counts = count_marginals(codes, sizes, candidates, n_jobs)
    events = [GaussianEvent(z, count=n_columns)]
    budget.used = n_columns / (2.0 * z**2)
    if budget.used >= budget.rho:
        raise RuntimeError("Internal error: the 1-way step exceeds the budget.")
    measured = [(j,) for j in range(n_columns)]
    tree = build_junction_tree(measured, sizes)
    theta, log_mu = mirror_descent(tree, measurements, n_rows, max_iter=round_iter)
    # Coarsened candidates only at high noise (a public rule: the first
    # rounds' noise and, under add-remove, the released estimate of the total).
    coarse = COARSE_LEVELS if std >= COARSE_MIN_STD * n_rows else None
    variants = _variants(candidates, compression, ordered, coarse)
    index = {r: k for k, r in enumerate(candidates)}
    selected = []
    last = False
    while not last:
        z, eps, last = budget.next_round()
        std = count_sensitivity * z
        limit = max_cells * budget.used / budget.rho
        allowed = set(_allowed(candidates, measured, sizes, limit, tree))
        options = [(r, g) for r, g in variants if index[r] in allowed]
        cache = {}
        scores = np.empty(len(options))
        for i, (r, groups) in enumerate(options):
            if r not in cache:
                cache[r] = n_rows * marginal(tree, log_mu, r)
            error = np.abs(coarsen(counts[r] - cache[r], groups)).sum()
            cells = _cells(r, sizes, groups)
            expected = _EXPECTED_ABS * std * cells
            scores[i] = weights[index[r]] * (error - expected)
        r, groups = options[_select(scores, eps, sensitivity, rng)]
        events.append(ExponentialMechanismEvent(eps, bounded_range=True))
        exact = coarsen(counts[r], groups)
        y = exact + std * rng.standard_normal(exact.shape)
        events.append(GaussianEvent(z))
        before = coarsen(n_rows * marginal(tree, log_mu, r), groups)
        measurements.append(Measurement(r, y, std, groups))
        selected.append(r)
        if r not in measured:
            measured.append(r)
            tree = build_junction_tree(measured, sizes)
        iters = final_iter if last else round_iter
        theta, log_mu = mirror_descent(
            tree, measurements, n_rows, theta, max_iter=iters
        )
        after = coarsen(n_rows * marginal(tree, log_mu, r), groups)
        change = np.abs(after - before).sum()
        # Logged: released quantities only. The error estimate is the L1 gap
        # between the noisy measurement and the model before it (the exact
        # scores read the data and are never shown).
        logger.info(
            "round %d: measured %s%s (noisy L1 error before %.1f), model change "
            "%.1f, zCDP budget (rho) left %.3g of %.3g",
            len(selected),
            tuple(r if names is None else (names[v] for v in r)),
            "" if groups is None else " coarsened",
            float(np.abs(y - before).sum()),
            change,
            0.0 if last else budget.rho - budget.used,
            budget.rho,
        )
        if change <= _EXPECTED_ABS * std * y.size:
            budget.z /= 2.0
            budget.eps *= 2.0
    return AIMResult(
        tree,
        log_mu,
        measurements,
        selected,
        events,
        budget.used,
        float(n_rows),
        compression,
    )


def estimate_total(measurements):
    """Inverse-variance weighted mean of the sums of noisy count vectors.

    The sum of a measurement of ``m`` cells with noise std ``s`` has variance
    ``m s^2``. Post-processing; at least 1.
    """
    sums = np.array([m.y.sum() for m in measurements])
    variances = np.array(
        [np.sum(np.broadcast_to(np.square(m.std), m.y.shape)) for m in measurements]
    )
    weights = 1.0 / variances
    return max(1.0, float(weights @ sums / weights.sum()))

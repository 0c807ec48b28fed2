"""What the marginal-based synthesizers share: count tables and their privacy.

Both synthetic-data solvers (the tree of :mod:`._tree` and the adaptive rounds
of :mod:`._aim`) measure count tables of column sets with Gaussian noise and
select among candidate tables with the exponential mechanism. This module
holds the pieces they have in common:

- :func:`count_table` and :func:`count_marginals`: exact count tables (they
  read the data; what is released is noise added to them);
- the *counts sources* the solvers read their exact tables from:
  :class:`CodesCounts` counts them from a codes matrix in memory,
  :class:`CountedTables` holds integer tables counted elsewhere (summed over
  the partitions of a Dask collection, :mod:`skdp.synthetic._dask`) and
  marginalises them. Counts are integers, so both give the same floats bit
  for bit whatever order the partitions were summed in;
- :func:`count_sensitivity`: how far one record moves any count table, under
  a neighbouring relation (the rule, written once);
- :func:`exponential_draw`: one draw of the exponential mechanism;
- :class:`BinHierarchy`, :func:`measure_hierarchy` and
  :func:`consistent_estimate`: a numeric column's count vector measured on
  nested grids, coarse to fine, and the finest counts made consistent with
  every level by least squares (Hay, Rastogi, Miklau and Suciu 2010).
"""

import math
import os
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed
from scipy.special import logsumexp

from ..accounting import Neighbouring

__all__ = [
    "BinHierarchy",
    "CodesCounts",
    "CountSensitivity",
    "CountedTables",
    "as_counts",
    "bin_hierarchy",
    "consistent_estimate",
    "count_marginals",
    "count_sensitivity",
    "count_table",
    "covering_sets",
    "exponential_draw",
    "integer_counts",
    "measure_hierarchy",
    "nonnegative_estimate",
]


@dataclass(frozen=True)
class CountSensitivity:
    """How far one record moves a count table, in L1 and in L2.

    Attributes
    ----------
    l1 : float
        L1 sensitivity of a count table; also the sensitivity of a selection
        score that is the L1 distance between the table and any released
        (fixed) table, by the triangle inequality, per unit of the score's
        weight.
    l2 : float
        L2 sensitivity of a count table (the Gaussian measurements' unit).
    """

    l1: float
    l2: float


def count_sensitivity(neighbouring):
    """The :class:`CountSensitivity` of every count table under ``neighbouring``.

    A record adds one to exactly one cell of a count table (of any column set,
    and of any coarsening of it), so the table is a sum of per-record one-hot
    terms of norm 1. Its L1 sensitivity is the relation's sum factor
    (:attr:`~skdp.accounting.Neighbouring.sum_factor`): 2 under
    replace-one (a unit moves from one cell to another), 1 under add/remove
    (one cell moves by one). The changed cells move by one each, so the L2
    sensitivity is the square root of the L1 one: ``sqrt(2)`` and 1.
    """
    relation = Neighbouring.parse(neighbouring)
    return CountSensitivity(relation.sum_sensitivity(1.0), relation.histogram_factor)


def integer_counts(codes, columns, sizes):
    """Count table of the column set ``columns`` (axes in its order), as int64.

    ``codes`` holds one integer code per cell in ``range(sizes[column])``;
    ``sizes`` gives the number of levels of every column of ``codes``.
    """
    shape = tuple(sizes[c] for c in columns)
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in columns), shape)
    return np.bincount(flat, minlength=math.prod(shape)).reshape(shape)


def count_table(codes, columns, sizes):
    """Count table of the column set ``columns`` (axes in its order), as floats.

    The :func:`integer_counts` converted to float (exact below ``2 ** 53``).
    """
    return integer_counts(codes, columns, sizes).astype(float)


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


def covering_sets(sets, n_columns):
    """The maximal column sets among ``sets`` and every single column, sorted.

    Counting the tables of these sets is enough to derive, by summing axes, the
    table of any set in ``sets``, of any subset of one, and of every column.
    """
    wanted = {tuple(sorted(s)) for s in sets} | {(j,) for j in range(n_columns)}
    maximal = [s for s in wanted if not any(set(s) < set(t) for t in wanted)]
    return sorted(maximal, key=lambda s: (len(s), s))


def _merge_levels(table, mappings):
    """Sum an integer table's levels into the levels ``mappings`` give, per axis.

    ``mappings`` holds, for each axis, an integer array mapping each level to
    its new level (``None``: kept). Integer sums: exact in any order.
    """
    for axis, mapping in enumerate(mappings):
        if mapping is None:
            continue
        moved = np.moveaxis(table, axis, 0)
        merged = np.zeros((int(mapping.max()) + 1,) + moved.shape[1:], table.dtype)
        np.add.at(merged, mapping, moved)
        table = np.moveaxis(merged, 0, axis)
    return table


@dataclass(frozen=True)
class CodesCounts:
    """Counts source over a codes matrix in memory.

    Attributes
    ----------
    codes : ndarray of shape (n_rows, n_columns), int
    sizes : tuple of int
        Number of levels of each column.
    """

    codes: np.ndarray
    sizes: tuple

    @property
    def n_rows(self):
        """Number of rows."""
        return self.codes.shape[0]

    @property
    def n_columns(self):
        """Number of columns."""
        return self.codes.shape[1]

    def table(self, columns):
        """Exact count table of ``columns`` (axes in that order), as floats."""
        return count_table(self.codes, columns, self.sizes)

    def marginals(self, sets, mappings=None, n_jobs=None):
        """Exact count tables of ``sets`` (see :func:`count_marginals`).

        ``mappings``: per column, the new level of each level (``None``: the
        levels as they are); the tables are then over the new levels.
        """
        if mappings is None:
            return count_marginals(self.codes, self.sizes, sets, n_jobs)
        codes = np.column_stack([m[self.codes[:, j]] for j, m in enumerate(mappings)])
        sizes = tuple(int(m.max()) + 1 for m in mappings)
        return count_marginals(codes, sizes, sets, n_jobs)


@dataclass(frozen=True)
class CountedTables:
    """Counts source over integer tables counted elsewhere.

    Attributes
    ----------
    n_rows : int
    sizes : tuple of int
        Number of levels of each column.
    tables : dict
        Sorted column set -> int64 count table (axes in the set's order); the
        sets must cover every table asked for (see :func:`covering_sets`).
    """

    n_rows: int
    sizes: tuple
    tables: dict

    @property
    def n_columns(self):
        """Number of columns."""
        return len(self.sizes)

    def _integer_table(self, columns):
        wanted = set(columns)
        host = next(s for s in self.tables if wanted <= set(s))
        table = self.tables[host]
        summed = tuple(k for k, v in enumerate(host) if v not in wanted)
        table = table.sum(axis=summed) if summed else table
        kept = [v for v in host if v in wanted]
        return np.transpose(table, [kept.index(v) for v in columns])

    def table(self, columns):
        """Exact count table of ``columns`` (axes in that order), as floats."""
        return self._integer_table(tuple(columns)).astype(float, order="C")

    def marginals(self, sets, mappings=None, n_jobs=None):
        """Exact count tables of ``sets``, over the ``mappings``' levels if given.

        ``n_jobs`` is unused: the tables are already counted.
        """
        out = {}
        for s in sets:
            table = self._integer_table(s)
            if mappings is not None:
                table = _merge_levels(table, [mappings[v] for v in s])
            out[s] = table.astype(float, order="C")
        return out


def as_counts(data, sizes):
    """A counts source: ``data`` itself, or a :class:`CodesCounts` over codes."""
    if hasattr(data, "marginals"):
        return data
    return CodesCounts(np.asarray(data), tuple(int(s) for s in sizes))


def exponential_draw(scores, epsilon, sensitivity, rng):
    """Index drawn with probability proportional to ``exp(eps q / (2 Du))``.

    ``scores`` are the candidates' qualities ``q`` and ``sensitivity`` bounds
    how far one record moves any of them (``Du``): the draw is ``epsilon``-DP
    and ``epsilon``-bounded range (McSherry and Talwar 2007; Cesar and Rogers
    2021, Lemma 3.2, for bounded range), hence ``epsilon^2 / 8``-zCDP.
    """
    logits = epsilon * scores / (2.0 * sensitivity)
    probs = np.exp(logits - logsumexp(logits))
    return int(rng.choice(probs.size, p=probs / probs.sum()))


@dataclass(frozen=True)
class BinHierarchy:
    """Nested groupings of one column's levels, measured coarse to fine.

    Attributes
    ----------
    levels : tuple of ndarray of int
        Per level, coarsest first, the cell of that level holding each of the
        column's levels; every level's cells are unions of the next finer
        level's, and the last level is the column's own levels (``arange``).
    shares : tuple of float
        Share of the column's zCDP budget spent on each level (sum 1).
    """

    levels: tuple
    shares: tuple

    def cells(self, level):
        """Number of cells of ``level``."""
        return int(self.levels[level].max()) + 1

    def parents(self, level):
        """The cell of ``level`` holding each cell of ``level + 1``."""
        out = np.empty(self.cells(level + 1), dtype=np.int64)
        out[self.levels[level + 1]] = self.levels[level]
        return out

    def tables(self, counts):
        """The count vector of every level from the finest one, ``counts``."""
        return [
            np.bincount(m, weights=counts, minlength=int(m.max()) + 1)
            for m in self.levels
        ]


def bin_hierarchy(positions, size, coarsest, branching, share_ratio):
    """The :class:`BinHierarchy` of a numeric column, or None (public).

    Level ``i`` (``i = 0`` the coarsest) cuts the declared range into
    ``coarsest * branching ** i`` equal-width bins, as long as that is fewer
    than the column's ordered levels; an ordered level goes to the bin
    holding its centre (``positions``, fractions of the range), computed
    from the finest such grid by integer division so that the levels nest;
    bins holding no level are dropped. The levels after the ordered ones (a
    missing level) are a cell of their own at every level. The finest level
    is the column's own levels. Level ``i`` gets a share of the budget
    proportional to ``share_ratio ** i``. ``None`` when no grid is coarser
    than the levels.

    Parameters
    ----------
    positions : array-like of float
        Centres of the ordered levels as fractions of the range.
    size : int
        Number of levels of the column (ordered ones first).
    coarsest, branching : int
    share_ratio : float

    Returns
    -------
    BinHierarchy or None
    """
    positions = np.asarray(positions, dtype=float)
    n_ordered = positions.size
    grids = []
    while coarsest * branching ** len(grids) < n_ordered:
        grids.append(coarsest * branching ** len(grids))
    if not grids:
        return None
    finest = np.minimum((positions * grids[-1]).astype(np.int64), grids[-1] - 1)
    levels = []
    for i in range(len(grids)):
        head = finest // branching ** (len(grids) - 1 - i)
        head = np.unique(head, return_inverse=True)[1].astype(np.int64)
        n_bins = int(head.max()) + 1
        if n_bins >= n_ordered or (levels and n_bins <= levels[-1].max() + 1):
            continue
        levels.append(np.concatenate([head, n_bins + np.arange(size - n_ordered)]))
    if not levels:
        return None
    levels.append(np.arange(size, dtype=np.int64))
    weights = share_ratio ** np.arange(len(levels), dtype=float)
    return BinHierarchy(tuple(levels), tuple(float(w) for w in weights / weights.sum()))


def measure_hierarchy(counts, hierarchy, stds, rng):
    """Each level's count vector plus Gaussian noise (std ``stds[level]``).

    A record is in one cell of every level, so each level is a count table of
    the sensitivities :func:`count_sensitivity` gives; each is its own
    Gaussian measurement. Noise is drawn coarsest level first.
    """
    return [
        table + std * rng.standard_normal(table.size)
        for table, std in zip(hierarchy.tables(counts), stds, strict=True)
    ]


def _cells_first(values, like):
    """Per-cell ``values`` shaped to broadcast against ``like`` (cells first)."""
    return np.reshape(values, values.shape + (1,) * (np.ndim(like) - 1))


def _two_pass(hierarchy, noisy, variances, total):
    """The least-squares consistent finest counts from every level (linear).

    Hay, Rastogi, Miklau and Suciu (2010), "Boosting the accuracy of
    differentially private histograms through consistency" (PVLDB 3(1)),
    Section 4, Theorem 3: the two passes, here with a variance per level.
    Upward (finest to coarsest), a cell's estimate from its subtree is the
    inverse-variance weighted mean of its own noisy count ``y_v`` (variance
    ``s_v^2``) and the sum of its children's estimates ``c_v`` (variance
    ``V_v``, the sum of theirs): ``z_v = (y_v / s_v^2 + c_v / V_v) /
    (1 / s_v^2 + 1 / V_v)``, of variance ``1 / (1 / s_v^2 + 1 / V_v)``.
    Downward, a child ``u`` of ``v`` takes the share ``var(z_u) / V_v`` of
    its parent's correction: ``h_u = z_u + var(z_u) / V_v (h_v - c_v)``. The
    coarsest cells start from their own estimates, or, with a known
    ``total``, are corrected in the same way so that they sum to it. This is
    the generalised least-squares estimate (the test compares it with a
    direct solve). ``noisy`` holds one array per level, cells first (any
    trailing axes are solved alike).
    """
    n_levels = len(hierarchy.levels)
    z, var = [None] * n_levels, [None] * n_levels
    sums, sum_var = [None] * n_levels, [None] * n_levels
    z[-1], var[-1] = noisy[-1], variances[-1]
    for level in range(n_levels - 2, -1, -1):
        onehot = np.zeros((hierarchy.cells(level), hierarchy.cells(level + 1)))
        onehot[hierarchy.parents(level), np.arange(onehot.shape[1])] = 1.0
        sums[level], sum_var[level] = onehot @ z[level + 1], onehot @ var[level + 1]
        precision = 1.0 / variances[level] + 1.0 / sum_var[level]
        z[level] = (
            noisy[level] / _cells_first(variances[level], noisy[level])
            + sums[level] / _cells_first(sum_var[level], sums[level])
        ) / _cells_first(precision, noisy[level])
        var[level] = 1.0 / precision
    estimate = z[0]
    if total is not None:
        gap = total - estimate.sum(axis=0)
        estimate = estimate + _cells_first(var[0] / var[0].sum(), estimate) * gap
    for level in range(n_levels - 1):
        parent = hierarchy.parents(level)
        share = var[level + 1] / sum_var[level][parent]
        estimate = (
            z[level + 1]
            + _cells_first(share, z[level + 1]) * (estimate - sums[level])[parent]
        )
    return estimate


def consistent_estimate(hierarchy, noisy, stds, total=None):
    """The finest counts consistent with every level, and their noise covariance.

    Post-processing of the released levels (:func:`_two_pass`, after Hay et
    al. 2010): the generalised least-squares estimate of the finest counts
    from every level's noisy counts (Gaussian noise of std ``stds[level]``),
    constrained to sum to ``total`` when it is given (public: the number of
    rows under replace-one).

    Returns
    -------
    estimate : ndarray
        The finest level's counts.
    covariance : ndarray of shape (cells, cells)
        The covariance of the estimate's noise: the estimate is linear in the
        noise, so it is the two passes applied to each noisy cell's noise
        (``std`` in that cell), times its transpose.
    """
    variances = [np.full(hierarchy.cells(k), float(s) ** 2) for k, s in enumerate(stds)]
    estimate = _two_pass(hierarchy, noisy, variances, total)
    sizes = [hierarchy.cells(k) for k in range(len(stds))]
    starts = np.cumsum([0] + sizes)
    basis = [np.zeros((size, starts[-1])) for size in sizes]
    for k, (size, s) in enumerate(zip(sizes, stds, strict=True)):
        basis[k][np.arange(size), starts[k] + np.arange(size)] = s
    effect = _two_pass(hierarchy, basis, variances, None if total is None else 0.0)
    return estimate, effect @ effect.T


def _simplex(values, total):
    """Euclidean projection of ``values`` onto ``{x >= 0, sum(x) = total}``.

    One threshold subtracted from every cell, then clipped at 0 (Duchi,
    Shalev-Shwartz, Singer and Chandra 2008, Figure 1).
    """
    if total <= 0:
        return np.zeros(values.size)
    ordered = np.sort(values)[::-1]
    cumulative = np.cumsum(ordered) - total
    k = np.nonzero(ordered - cumulative / np.arange(1, values.size + 1) > 0)[0][-1]
    return np.clip(values - cumulative[k] / (k + 1.0), 0.0, None)


def nonnegative_estimate(hierarchy, estimate, total):
    """The consistent estimate made non-negative, level by level, top down.

    Post-processing: the coarsest level's cells (sums of ``estimate``) are
    projected onto the counts summing to ``total``, then each cell's children
    onto the non-negative counts summing to its projected value (the
    Euclidean projection of each, :func:`_simplex`). Every level stays
    consistent; cells estimated below a threshold get no mass, so the noise
    of empty tails does not become mass once clipped.
    """
    values = _simplex(hierarchy.tables(estimate)[0], float(total))
    for level in range(len(hierarchy.levels) - 1):
        finer = hierarchy.tables(estimate)[level + 1]
        parents = hierarchy.parents(level)
        out = np.empty_like(finer)
        for cell in range(values.size):
            children = np.flatnonzero(parents == cell)
            out[children] = _simplex(finer[children], values[cell])
        values = out
    return values

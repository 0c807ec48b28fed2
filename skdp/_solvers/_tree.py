"""The tree method: one spanning tree of 2-way marginals (MST-style), pure functions.

The pattern of McKenna, Miklau and Sheldon (2021), "Winning the NIST contest: a
scalable and general approach to differentially private synthetic data"
(MST): measure the 1-way marginals, select a spanning tree of column pairs with
the exponential mechanism, measure the tree's 2-way marginals, then generate
records from the tree model. Only 1-way and 2-way count tables are ever built,
never the joint histogram.

Privacy, under replace-one (one record swapped for another; the method needs
the public number of rows): a count vector (any marginal) has L2 sensitivity
``sqrt(2)`` (:func:`._measure.count_sensitivity`). The selection score of a
pair, ``|| M_ij(D) - n p_i p_j^T ||_1`` with ``M_ij`` the true 2-way counts and
``p_i, p_j`` the post-processed noisy 1-way marginals (already released, so
fixed), changes by at most ``||M_ij(D) - M_ij(D')||_1 <= 2`` by the triangle
inequality: the count table's L1 sensitivity.
"""

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from ..accounting import ExponentialMechanismEvent, GaussianEvent
from ._measure import as_counts, count_sensitivity, covering_sets, exponential_draw

__all__ = [
    "TreeModel",
    "TreePlan",
    "TreePolicy",
    "TreeResult",
    "count_sets",
    "estimate_tree_model",
    "fit_tree_model",
    "pair_scores",
    "project_to_simplex",
]

#: The method's relation is replace-one: its sensitivities.
_SENSITIVITY = count_sensitivity("replace-one")
#: Column the ancestral sampling starts from (any choice is post-processing).
_ROOT = 0
#: Iterative proportional fitting: maximum sweeps and L1 tolerance.
_RAKE_ITERATIONS, _RAKE_TOL = 200, 1e-10


@dataclass(frozen=True)
class TreePolicy:
    """Tuning of the tree method.

    The split of the budget and the estimate's prior; benchmarks pass variants
    (docs/benchmarks.md, "Synthetic data").
    """

    #: zCDP share of the ``d`` 1-way measurements: the columns' own marginals,
    #: also re-estimated from the tree's tables (docs/benchmarks.md, "Synthetic data").
    one_way_share: float = 0.2
    #: zCDP share of the ``d - 1`` selection draws: a tree needs only the
    #: strongest pairs told apart (docs/benchmarks.md, "Synthetic data").
    select_share: float = 0.1
    #: zCDP share of the ``d - 1`` 2-way measurements: the tables that carry
    #: the dependence the model keeps (docs/benchmarks.md, "Synthetic data").
    two_way_share: float = 0.7
    #: Share of the product of the 1-way estimates mixed into each edge's table:
    #: just enough that no conditional row is empty (docs/benchmarks.md,
    #: "Synthetic data").
    prior_share: float = 1e-3


@dataclass(frozen=True)
class TreePlan:
    """Noise of every step as a function of one global multiplier ``z``.

    With ``rho = 1 / (2 z^2)``, the 1-way, selection and 2-way steps each get a
    fixed share of ``rho`` (a zCDP-style split; the accountant then composes
    the actual RDP curves): ``d`` Gaussian 1-way measurements, ``d - 1``
    exponential-mechanism draws that are ``eps_sel``-bounded range
    (``eps_sel^2 / 8``-zCDP each) and ``d - 1`` Gaussian 2-way measurements.
    With a single column the 1-way step gets the whole budget. Public: the
    number of columns and the policy.
    """

    n_columns: int
    policy: TreePolicy = field(default_factory=TreePolicy)

    @property
    def n_edges(self):
        """Edges of the spanning tree."""
        return self.n_columns - 1

    def shares(self):
        """Budget shares (1-way, selection, 2-way)."""
        if self.n_edges == 0:
            return 1.0, 0.0, 0.0
        policy = self.policy
        return policy.one_way_share, policy.select_share, policy.two_way_share

    def one_way_multiplier(self, z):
        """Noise std / sensitivity of each 1-way measurement."""
        return z * math.sqrt(self.n_columns / self.shares()[0])

    def two_way_multiplier(self, z):
        """Noise std / sensitivity of each 2-way measurement."""
        return z * math.sqrt(self.n_edges / self.shares()[2])

    def select_epsilon(self, z):
        """Bounded-range epsilon of each selection draw."""
        return math.sqrt(8.0 * self.shares()[1] / (2.0 * z**2) / self.n_edges)

    def events(self, z):
        """Privacy events of a run with global multiplier ``z``."""
        events = [GaussianEvent(self.one_way_multiplier(z), count=self.n_columns)]
        if self.n_edges:
            events.append(
                ExponentialMechanismEvent(
                    self.select_epsilon(z), count=self.n_edges, bounded_range=True
                )
            )
            events.append(GaussianEvent(self.two_way_multiplier(z), count=self.n_edges))
        return events


@dataclass(frozen=True)
class TreeModel:
    """A tree-shaped distribution over codes: root marginal and conditionals.

    ``order`` lists ``(parent, child)`` column pairs in breadth-first order from
    ``root``; ``conditionals[k][a, b] = P(child = b | parent = a)``.
    """

    sizes: tuple
    root: int
    root_probs: np.ndarray
    order: tuple
    conditionals: tuple

    def sample(self, n_samples, rng):
        """Ancestral sampling of ``n_samples`` code rows (post-processing)."""
        codes = np.empty((n_samples, len(self.sizes)), dtype=np.int64)
        codes[:, self.root] = rng.choice(
            self.sizes[self.root], n_samples, p=self.root_probs
        )
        for (parent, child), cond in zip(self.order, self.conditionals, strict=True):
            cumulative = np.cumsum(cond, axis=1)
            cumulative[:, -1] = 1.0
            u = rng.random(n_samples)
            rows = cumulative[codes[:, parent]]
            codes[:, child] = np.minimum(
                (rows <= u[:, None]).sum(axis=1), self.sizes[child] - 1
            )
        return codes


@dataclass(frozen=True)
class TreeResult:
    """What the tree method released and what it ran.

    Attributes
    ----------
    model : TreeModel
    edges : list of (i, j)
        The selected tree, in the order drawn (released).
    events : list
        Privacy events of what ran.
    """

    model: TreeModel
    edges: list
    events: list


def project_to_simplex(noisy, total):
    """Euclidean projection of noisy counts onto ``{x >= 0, sum(x) = total}``.

    Subtracts one threshold from every cell and clips at 0 (Duchi, Shalev-Shwartz,
    Singer and Chandra 2008, Figure 1): unlike clipping alone, it does not turn
    the noise of empty cells into spurious mass. ``total`` is the public number
    of rows. Post-processing of released values.
    """
    flat = np.ravel(noisy).astype(float)
    if total <= 0:
        return np.zeros(np.shape(noisy))
    ordered = np.sort(flat)[::-1]
    cumulative = np.cumsum(ordered) - total
    index = np.arange(1, flat.size + 1)
    k = np.nonzero(ordered - cumulative / index > 0)[0][-1]
    threshold = cumulative[k] / (k + 1.0)
    return np.clip(flat - threshold, 0.0, None).reshape(np.shape(noisy))


def _to_probs(noisy, total):
    """Noisy counts to a distribution (projected on the simplex, normalised)."""
    projected = project_to_simplex(noisy, total)
    mass = projected.sum()
    if mass <= 0:
        return np.full(np.shape(noisy), 1.0 / np.size(noisy))
    return projected / mass


def count_sets(n_columns):
    """The column sets whose count tables give every table the method reads.

    Every pair (all are scored), or the single column of a one-column table.
    Public: the number of columns.
    """
    pairs = list(itertools.combinations(range(n_columns), 2))
    return covering_sets(pairs, n_columns)


def pair_scores(codes, sizes, one_way_probs, n_rows):
    """Selection score of every column pair (sensitivity 2 under replace-one).

    Parameters
    ----------
    codes : ndarray of shape (n_rows, n_columns), or a counts source
    sizes : sequence of int
    one_way_probs : list of ndarray
        Released (noisy, post-processed) 1-way distributions.
    n_rows : int
        Public number of rows.

    Returns
    -------
    pairs : list of (i, j)
    scores : ndarray of shape (n_pairs,)
    """
    counts = as_counts(codes, sizes)
    n_columns = len(sizes)
    pairs, scores = [], []
    for i in range(n_columns):
        for j in range(i + 1, n_columns):
            table = counts.table((i, j))
            product = n_rows * np.outer(one_way_probs[i], one_way_probs[j])
            pairs.append((i, j))
            scores.append(np.abs(table - product).sum())
    return pairs, np.asarray(scores, dtype=float)


def _select_tree(pairs, scores, n_columns, epsilon, rng):
    """Kruskal-like private spanning tree: one exponential-mechanism draw per edge.

    Each draw picks among the pairs that join two components with probability
    proportional to ``exp(epsilon * score / (2 * Du))``, which is
    ``epsilon``-DP and ``epsilon``-bounded range (``Du``: the score's
    sensitivity, the count table's L1 one).
    """
    component = np.arange(n_columns)
    edges = []
    pairs = np.asarray(pairs)
    for _ in range(n_columns - 1):
        open_ = component[pairs[:, 0]] != component[pairs[:, 1]]
        drawn = exponential_draw(scores[open_], epsilon, _SENSITIVITY.l1, rng)
        i, j = pairs[open_][drawn]
        edges.append((int(i), int(j)))
        component[component == component[j]] = component[i]
    return edges


def _orient(edges, n_columns, root):
    """Breadth-first (parent, child) order of the tree's edges from ``root``."""
    neighbours = {k: [] for k in range(n_columns)}
    for i, j in edges:
        neighbours[i].append(j)
        neighbours[j].append(i)
    order, seen, frontier = [], {root}, [root]
    while frontier:
        parent = frontier.pop(0)
        for child in sorted(neighbours[parent]):
            if child not in seen:
                seen.add(child)
                order.append((parent, child))
                frontier.append(child)
    return order


def fit_tree_model(codes, sizes, plan, z, rng):
    """Run the private select-measure-estimate pipeline.

    Parameters
    ----------
    codes : ndarray of shape (n_rows, n_columns), int, or a counts source
        A counts source (:mod:`._measure`) must hold the tables of
        :func:`count_sets`.
    sizes : sequence of int
        Number of levels of each column (public).
    plan : TreePlan
    z : float
        Global noise multiplier.
    rng : numpy.random.Generator

    Returns
    -------
    TreeResult
    """
    sizes = tuple(int(s) for s in sizes)
    counts = as_counts(codes, sizes)
    n_rows, n_columns = counts.n_rows, counts.n_columns
    std1 = plan.one_way_multiplier(z) * _SENSITIVITY.l2
    noisy_one_way = _measure_one_way(counts, sizes, std1, rng)
    events = [GaussianEvent(plan.one_way_multiplier(z), count=n_columns)]
    edges = []
    if n_columns > 1:
        eps_sel = plan.select_epsilon(z)
        edges = _private_tree(counts, sizes, noisy_one_way, eps_sel, rng)
        events.append(
            ExponentialMechanismEvent(eps_sel, count=len(edges), bounded_range=True)
        )
    order = _orient(edges, n_columns, _ROOT)
    std2 = plan.two_way_multiplier(z) * _SENSITIVITY.l2 if edges else 0.0
    noisy_tables = _measure_pairs(counts, order, std2, rng)
    if edges:
        events.append(GaussianEvent(plan.two_way_multiplier(z), count=len(order)))
    model = estimate_tree_model(
        noisy_one_way,
        std1**2,
        order,
        noisy_tables,
        std2**2,
        n_rows,
        plan.policy.prior_share,
    )
    return TreeResult(model, edges, events)


def _measure_one_way(counts, sizes, std, rng):
    """Every 1-way count vector plus Gaussian noise of std ``std``."""
    return [
        counts.table((j,)) + std * rng.standard_normal(sizes[j])
        for j in range(counts.n_columns)
    ]


def _private_tree(counts, sizes, noisy_one_way, epsilon, rng):
    """The spanning tree drawn on the pairs' scores against the noisy 1-way."""
    n_rows, n_columns = counts.n_rows, counts.n_columns
    one_way = [_to_probs(noisy, n_rows) for noisy in noisy_one_way]
    pairs, scores = pair_scores(counts, sizes, one_way, n_rows)
    return _select_tree(pairs, scores, n_columns, epsilon, rng)


def _measure_pairs(counts, order, std, rng):
    """The 2-way count table of each ``(parent, child)`` plus Gaussian noise."""
    noisy_tables = []
    for parent, child in order:
        table = counts.table((parent, child))
        noisy_tables.append(table + std * rng.standard_normal(table.shape))
    return noisy_tables


def _combined_one_way(noisy_one_way, var1, order, noisy_tables, var2):
    """Inverse-variance average of every measurement of each 1-way marginal.

    Column ``j`` is measured directly (variance ``var1`` per cell) and as a
    margin of each incident 2-way table (``k * var2``, ``k`` the size of the
    summed-out axis): the weighted least-squares estimate of its counts.
    """
    sums = [noisy / var1 for noisy in noisy_one_way]
    weights = [1.0 / var1] * len(noisy_one_way)
    for (parent, child), table in zip(order, noisy_tables, strict=True):
        for column, margin, k in (
            (parent, table.sum(axis=1), table.shape[1]),
            (child, table.sum(axis=0), table.shape[0]),
        ):
            sums[column] = sums[column] + margin / (k * var2)
            weights[column] = weights[column] + 1.0 / (k * var2)
    return [total / weight for total, weight in zip(sums, weights, strict=True)]


def _rake(table, rows, cols):
    """Iterative proportional fitting of a non-negative table to two margins."""
    for _ in range(_RAKE_ITERATIONS):
        row_sums = table.sum(axis=1)
        table = (
            table
            * np.divide(rows, row_sums, out=np.zeros_like(rows), where=row_sums > 0)[
                :, None
            ]
        )
        col_sums = table.sum(axis=0)
        table = (
            table
            * np.divide(cols, col_sums, out=np.zeros_like(cols), where=col_sums > 0)[
                None, :
            ]
        )
        if np.abs(table.sum(axis=1) - rows).sum() < _RAKE_TOL:
            break
    return table


def estimate_tree_model(
    noisy_one_way, var1, order, noisy_tables, var2, n_rows, prior_share
):
    """Consistent tree model from the noisy measurements (post-processing).

    1-way marginals: weighted least squares over all their measurements,
    projected on the simplex. Each edge's 2-way table: projected on the
    simplex, mixed with a small share (``prior_share``) of the product of
    its 1-way estimates (so no row is empty), then raked to those 1-way
    estimates; its row-normalised table is ``P(child | parent)``. Ancestral
    sampling from the root then reproduces every 1-way estimate and every
    raked tree table: the maximum-entropy distribution with these marginals.
    """
    if order:
        combined = _combined_one_way(noisy_one_way, var1, order, noisy_tables, var2)
    else:
        combined = noisy_one_way
    probs = [_to_probs(counts, n_rows) for counts in combined]
    conditionals = []
    for (parent, child), noisy in zip(order, noisy_tables, strict=True):
        prior = np.outer(probs[parent], probs[child])
        table = (1.0 - prior_share) * _to_probs(noisy, n_rows) + prior_share * prior
        table = _rake(table, probs[parent], probs[child])
        totals = table.sum(axis=1, keepdims=True)
        conditionals.append(
            np.divide(
                table,
                totals,
                out=np.tile(probs[child], (table.shape[0], 1)),
                where=totals > 0,
            )
        )
    return TreeModel(
        sizes=tuple(p.size for p in probs),
        root=_ROOT,
        root_probs=probs[_ROOT],
        order=tuple(order),
        conditionals=tuple(conditionals),
    )

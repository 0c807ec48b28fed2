"""A graphical model over discrete columns: junction tree, inference, sampling.

The factored representation of private-pgm (McKenna, Sheldon and Miklau 2019,
"Graphical-model based estimation and inference for differential privacy",
ICML): a Markov random field whose log-potentials live on the measured column
sets (cliques). Its graph is triangulated (greedy min-fill elimination) into a
junction tree, on which sum-product message passing gives every clique's exact
marginal (Koller and Friedman 2009, Section 10.2, "Clique trees"). The
potentials are fitted to noisy marginals by entropic mirror descent on the
marginal polytope (McKenna et al. 2019, Section 4, Algorithm 1), and records are
sampled clique by clique along the tree. Only clique-sized tables are ever
built, never the joint histogram. Everything here is post-processing of
released measurements: it never sees the data.
"""

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "JunctionTree",
    "Measurement",
    "build_junction_tree",
    "calibrate",
    "clique_cells",
    "coarsen",
    "marginal",
    "mirror_descent",
    "round_counts",
    "sample_codes",
]

#: Mirror descent: growth and shrink factors of the adaptive step size.
_STEP_GROW, _STEP_SHRINK = 1.5, 0.5
#: Mirror descent: relative loss decrease under which the iterations stop.
_MD_RTOL = 1e-7


@dataclass(frozen=True)
class Measurement:
    """A noisy marginal: counts ``y`` over the columns ``clique`` (sorted).

    ``std`` is the standard deviation of the Gaussian noise on each count: a
    float, or an array of ``y``'s shape when cells differ (a merged cell of a
    compressed domain carries the noise of every count merged into it).
    ``groups`` (optional) coarsens the table before it is measured: one entry
    per column of ``clique``, ``None`` or an integer array mapping each of the
    column's levels to a group; ``y`` then has one cell per group on those
    axes (see :func:`coarsen`). ``covariance`` (optional, one column) is the
    noise's covariance when the cells' noises are correlated (an estimate
    from several measurements); ``std`` is then the root of its diagonal,
    which is all the fit reads.
    """

    clique: tuple
    y: np.ndarray
    std: float | np.ndarray
    groups: tuple | None = None
    covariance: np.ndarray | None = None


def coarsen(table, groups):
    """Sum ``table``'s levels into groups along the axes that have a mapping.

    ``groups`` has one entry per axis: ``None`` (kept) or an integer array
    mapping each level of that axis to its group (groups ``0 .. max``).
    """
    if groups is None:
        return table
    for axis, mapping in enumerate(groups):
        if mapping is None:
            continue
        steps = np.diff(mapping)
        if np.all((steps == 0) | (steps == 1)) and mapping[0] == 0:  # runs
            starts = np.flatnonzero(np.r_[True, steps != 0])
            table = np.add.reduceat(table, starts, axis=axis)
            continue
        onehot = np.zeros((mapping.size, int(mapping.max()) + 1))
        onehot[np.arange(mapping.size), mapping] = 1.0
        table = np.moveaxis(np.tensordot(table, onehot, axes=([axis], [0])), -1, axis)
    return table


def _refine(table, groups):
    """Adjoint of :func:`coarsen`: copy each group's value to its levels."""
    if groups is None:
        return table
    for axis, mapping in enumerate(groups):
        if mapping is not None:
            table = np.take(table, mapping, axis=axis)
    return table


@dataclass(frozen=True)
class JunctionTree:
    """Cliques (sorted column tuples) in breadth-first order from clique 0.

    ``parent[k]`` is the parent of clique ``k`` (-1 for the root) and
    ``separator[k]`` the columns it shares with it (empty between the
    components of a disconnected graph).
    """

    sizes: tuple
    cliques: tuple
    parent: tuple
    separator: tuple

    def children(self):
        """Children of every clique."""
        out = [[] for _ in self.cliques]
        for k, p in enumerate(self.parent):
            if p >= 0:
                out[p].append(k)
        return out

    def host(self, columns):
        """Index of the first clique that contains ``columns``, or -1."""
        wanted = set(columns)
        for k, clique in enumerate(self.cliques):
            if wanted <= set(clique):
                return k
        return -1

    def cells(self):
        """Total number of cells of the clique tables (the model's size)."""
        return sum(clique_cells(c, self.sizes) for c in self.cliques)


def clique_cells(clique, sizes):
    """Number of cells of the table over ``clique``."""
    return math.prod(int(sizes[v]) for v in clique)


def _eliminate(n_columns, cliques, sizes):
    """Maximal cliques of a greedy min-fill triangulation of the cliques' graph."""
    neighbours = {v: set() for v in range(n_columns)}
    for clique in cliques:
        for v in clique:
            neighbours[v].update(u for u in clique if u != v)
    remaining = set(range(n_columns))
    found = []
    while remaining:

        def cost(v):
            nb = neighbours[v]
            fill = sum(1 for a in nb for b in nb if a < b and b not in neighbours[a])
            return fill, clique_cells(nb | {v}, sizes), v

        v = min(remaining, key=cost)
        nb = neighbours[v]
        for a in nb:
            neighbours[a].update(nb - {a})
            neighbours[a].discard(v)
        found.append(tuple(sorted(nb | {v})))
        remaining.discard(v)
    maximal = []
    for clique in sorted(set(found), key=lambda c: (-len(c), c)):
        if not any(set(clique) <= set(other) for other in maximal):
            maximal.append(clique)
    return maximal


def build_junction_tree(cliques, sizes):
    """Junction tree of the graph where each of ``cliques`` is fully connected.

    Every column is in some clique (isolated columns become singletons). The
    tree is a maximum-weight spanning tree of the maximal cliques, weighted by
    separator size (Kruskal), which has the running-intersection property for
    a triangulated graph (Koller and Friedman 2009, Theorem 10.6).
    """
    sizes = tuple(int(s) for s in sizes)
    maximal = _eliminate(len(sizes), cliques, sizes)
    m = len(maximal)
    pairs = sorted(
        (
            (len(set(a) & set(b)), i, j)
            for i, a in enumerate(maximal)
            for j, b in enumerate(maximal)
            if i < j
        ),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    component = list(range(m))

    def find(k):
        while component[k] != k:
            component[k] = component[component[k]]
            k = component[k]
        return k

    adjacency = [[] for _ in range(m)]
    for _, i, j in pairs:
        ri, rj = find(i), find(j)
        if ri != rj:
            component[ri] = rj
            adjacency[i].append(j)
            adjacency[j].append(i)
    order, parent_of, seen = [0], {0: -1}, {0}
    for node in order:
        for child in sorted(adjacency[node]):
            if child not in seen:
                seen.add(child)
                parent_of[child] = node
                order.append(child)
    index = {old: new for new, old in enumerate(order)}
    ordered = tuple(maximal[k] for k in order)
    parent = tuple(-1 if parent_of[k] < 0 else index[parent_of[k]] for k in order)
    separator = tuple(
        () if p < 0 else tuple(sorted(set(ordered[k]) & set(ordered[p])))
        for k, p in enumerate(parent)
    )
    return JunctionTree(sizes, ordered, parent, separator)


def _expand(table, sub, clique, sizes):
    """View a table over ``sub`` (sorted, a subset of ``clique``) in its axes."""
    shape = [sizes[v] if v in sub else 1 for v in clique]
    return np.reshape(table, shape)


def _reduce_axes(clique, keep):
    return tuple(k for k, v in enumerate(clique) if v not in keep)


#: Smallest sum of ``exp(table - max(table))`` over a slice that the one-shift
#: path of :func:`_logsumexp` accepts (far above the subnormal range).
_SUM_FLOOR = 1e-280


def _logsumexp(table, axes=None):
    """``log(sum(exp(table)))`` over ``axes`` (finite tables; faster than scipy's).

    Shifts the whole table by its maximum (one scalar) when every slice's sum
    stays far from underflow, else each slice by its own maximum.
    """
    if axes is not None:
        top = float(np.max(table))
        sums = np.sum(np.exp(table - top), axis=axes)
        if np.min(sums) > _SUM_FLOOR:
            return np.log(sums) + top
    peak = np.max(table, axis=axes, keepdims=True)
    out = np.log(np.sum(np.exp(table - peak), axis=axes, keepdims=True)) + peak
    return np.squeeze(out, axis=axes) if axes is not None else float(out.ravel()[0])


def _log_sum(table, axes):
    return _logsumexp(table, axes) if axes else table


def clique_log_potentials(tree, theta):
    """Sum of the measured cliques' log-potentials, per junction-tree clique.

    ``theta`` maps a measured clique (sorted tuple) to its log-potential table.
    """
    sizes = tree.sizes
    tables = [np.zeros([sizes[v] for v in c]) for c in tree.cliques]
    for clique, table in theta.items():
        k = tree.host(clique)
        tables[k] = tables[k] + _expand(table, clique, tree.cliques[k], sizes)
    return tables


def calibrate(tree, potentials):
    """Log-marginals of every clique by two passes of sum-product messages.

    Parameters
    ----------
    tree : JunctionTree
    potentials : list of ndarray
        Log-potential of each clique, axes in the clique's column order.

    Returns
    -------
    log_marginals : list of ndarray
        Normalised (they sum to 1 after ``exp``).
    """
    cliques, sep, sizes = tree.cliques, tree.separator, tree.sizes
    children = tree.children()
    up, partial = [None] * len(cliques), [None] * len(cliques)
    for node in reversed(range(len(cliques))):  # leaves first (BFS order)
        belief = potentials[node]
        for c in children[node]:
            belief = belief + _expand(up[c], sep[c], cliques[node], sizes)
        partial[node] = belief
        if tree.parent[node] >= 0:
            up[node] = _log_sum(belief, _reduce_axes(cliques[node], sep[node]))
    beliefs = [None] * len(cliques)
    for node in range(len(cliques)):
        p = tree.parent[node]
        if p < 0:
            beliefs[node] = partial[node]
            continue
        cavity = beliefs[p] - _expand(up[node], sep[node], cliques[p], sizes)
        down = _log_sum(cavity, _reduce_axes(cliques[p], sep[node]))
        beliefs[node] = partial[node] + _expand(down, sep[node], cliques[node], sizes)
    log_z = _logsumexp(beliefs[0])
    return [b - log_z for b in beliefs]


def _project(log_table, clique, sub):
    """Probability table over ``sub`` from a log-marginal over ``clique``."""
    return np.exp(_log_sum(log_table, _reduce_axes(clique, sub)))


def _steiner_nodes(tree, hosts):
    """Cliques of the smallest subtree joining ``hosts``, and its top clique."""
    marked = set()
    for k in hosts:
        while k >= 0 and k not in marked:
            marked.add(k)
            k = tree.parent[k]
    top = 0
    children = tree.children()
    while top not in hosts:
        inside = [c for c in children[top] if c in marked]
        if len(inside) != 1:
            break
        marked.discard(top)
        top = inside[0]
    return marked, top


def marginal(tree, log_marginals, columns):
    """Exact probability table of ``columns`` (sorted) under the model.

    From one clique if a clique contains them; otherwise by eliminating the
    other columns along the subtree joining their cliques, using the
    factorisation ``p = prod_C p_C / prod_S p_S`` of a calibrated junction
    tree (Koller and Friedman 2009, Proposition 10.3).
    """
    columns = tuple(columns)
    k = tree.host(columns)
    if k >= 0:
        return _project(log_marginals[k], tree.cliques[k], columns)
    sizes, cliques = tree.sizes, tree.cliques
    hosts = [tree.host((v,)) for v in columns]
    nodes, top = _steiner_nodes(tree, set(hosts))
    children = tree.children()
    wanted = set(columns)
    messages = {}
    for node in sorted(nodes, reverse=True):  # children before parents
        variables = cliques[node]
        table = np.exp(log_marginals[node])
        if node != top:  # the clique's conditional given its separator
            s = tree.separator[node]
            sep_table = _project(log_marginals[node], variables, s)
            safe = np.divide(
                1.0, sep_table, out=np.zeros_like(sep_table), where=sep_table > 0
            )
            table = table * _expand(safe, s, variables, sizes)
        factors = [(variables, table)]
        factors += [messages.pop(c) for c in children[node] if c in messages]
        keep = wanted | (set(tree.separator[node]) if node != top else set())
        messages[node] = _contract(factors, keep)
    _, table = messages[top]
    total = table.sum()
    return table / total if total > 0 else np.full(table.shape, 1.0 / table.size)


def _contract(factors, keep):
    """Multiply factors ``(columns, table)`` and sum out all but ``keep``.

    One ``einsum`` call, so the product over the union of the columns is never
    materialised (only the kept columns' table is).
    """
    union = sorted(set().union(*(set(v) for v, _ in factors)))
    label = {v: i for i, v in enumerate(union)}
    out = tuple(v for v in union if v in keep)
    args = []
    for variables, table in factors:
        args += [table, [label[v] for v in variables]]
    args.append([label[v] for v in out])
    return out, np.einsum(*args, optimize=len(factors) > 2)


def _loss_and_gradient(tree, log_marginals, measurements, hosts, n_rows):
    """Weighted squared error of the model's counts, and its gradient per clique.

    ``loss = sum_r ||n mu_r - y_r||^2 / (2 std_r^2)``: the negative Gaussian
    log-likelihood of the measurements (McKenna et al. 2019, Section 3). The
    gradient is taken with respect to each measured clique's probabilities.
    """
    loss, grads, probs, projected = 0.0, {}, {}, {}
    for r, k in zip(measurements, hosts, strict=True):
        mu = projected.get(r.clique)
        if mu is None:  # one exp per host clique, one sum per measured clique
            if k not in probs:
                probs[k] = np.exp(log_marginals[k])
            axes = _reduce_axes(tree.cliques[k], r.clique)
            mu = probs[k].sum(axis=axes) if axes else probs[k]
            projected[r.clique] = mu
        diff = n_rows * coarsen(mu, r.groups) - r.y
        loss += float(np.sum(diff**2 / (2.0 * r.std**2)))
        g = _refine(n_rows * diff / r.std**2, r.groups)
        grads[r.clique] = grads.get(r.clique, 0.0) + g
    return loss, grads


def mirror_descent(tree, measurements, n_rows, theta=None, *, max_iter=200):
    """Fit the log-potentials to the measurements by entropic mirror descent.

    Each step moves every measured clique's log-potential against the loss's
    gradient with respect to its marginal, ``theta_r <- theta_r - eta g_r``,
    i.e. multiplicative weights on the marginal polytope (McKenna et al. 2019,
    Algorithm 1). The step size adapts: grown after a step that lowers the
    loss, halved (and the step undone) after one that does not.

    Parameters
    ----------
    tree : JunctionTree
        Every measurement's clique must lie within one of its cliques.
    measurements : list of Measurement
    n_rows : int
        Public number of rows (the counts' total).
    theta : dict or None
        Warm start: measured clique -> log-potential table.
    max_iter : int

    Returns
    -------
    theta : dict
    log_marginals : list of ndarray
        The calibrated model at ``theta``.
    """
    theta = dict(theta or {})
    for r in measurements:
        if r.clique not in theta:
            theta[r.clique] = np.zeros([tree.sizes[v] for v in r.clique])
    hosts = [tree.host(r.clique) for r in measurements]
    log_mu = calibrate(tree, clique_log_potentials(tree, theta))
    loss, grads = _loss_and_gradient(tree, log_mu, measurements, hosts, n_rows)
    curvature = sum(n_rows**2 / float(np.min(r.std)) ** 2 for r in measurements)
    eta = 1.0 / curvature
    for _ in range(max_iter):
        trial = {c: t - eta * grads.get(c, 0.0) for c, t in theta.items()}
        trial_mu = calibrate(tree, clique_log_potentials(tree, trial))
        trial_loss, trial_grads = _loss_and_gradient(
            tree, trial_mu, measurements, hosts, n_rows
        )
        if trial_loss <= loss:
            converged = loss - trial_loss <= _MD_RTOL * max(loss, 1.0)
            theta, log_mu, loss, grads = trial, trial_mu, trial_loss, trial_grads
            eta *= _STEP_GROW
            if converged:
                break
        else:
            eta *= _STEP_SHRINK
    return theta, log_mu


def round_counts(probs, total, rng):
    """Integer counts summing to ``total``, unbiased for ``total * probs``.

    Each cell gets the integer part of its expected count; the remaining units
    go to distinct cells drawn with probability proportional to the fractional
    parts (so each cell's count is within one of its expectation).
    """
    expected = probs * total
    counts = np.floor(expected).astype(np.int64)
    remainder = int(total - counts.sum())
    if remainder > 0:
        fraction = expected - counts
        fraction = np.clip(fraction, 0.0, None)
        if fraction.sum() <= 0:
            fraction = np.ones_like(fraction)
        extra = rng.choice(
            probs.size, remainder, replace=False, p=fraction / fraction.sum()
        )
        counts[extra] += 1
    return counts


def _sample_conditional(table, given, rng):
    """One code per row from the row ``table[given[i]]``, by rounded counts.

    The rows that share a conditioning value get that row's distribution as
    counts rounded to integers (:func:`round_counts`), in random order: the
    low-variance sampling private-pgm uses to generate records, which keeps
    every conditional within one record of its expectation per group.
    """
    drawn = np.empty(given.size, dtype=np.int64)
    order = np.argsort(given, kind="stable")
    values, starts, group_sizes = np.unique(
        given[order], return_index=True, return_counts=True
    )
    levels = np.arange(table.shape[1])
    for value, start, m in zip(values, starts, group_sizes, strict=True):
        row = table[value]
        total = row.sum()
        row = row / total if total > 0 else np.full(row.size, 1.0 / row.size)
        codes = np.repeat(levels, round_counts(row, int(m), rng))
        drawn[order[start : start + m]] = rng.permutation(codes)
    return drawn


def sample_codes(tree, log_marginals, n_samples, rng):
    """Ancestral sampling of code rows along the junction tree.

    The root clique is drawn from its marginal, then every clique's new
    columns from their conditional given its separator, which draws exactly
    from the model's joint distribution (it factorises over the tree).
    """
    sizes = tree.sizes
    codes = np.zeros((n_samples, len(sizes)), dtype=np.int64)
    for node, clique in enumerate(tree.cliques):
        sep = tree.separator[node] if tree.parent[node] >= 0 else ()
        new = tuple(v for v in clique if v not in sep)
        prob = np.exp(log_marginals[node])
        perm = [clique.index(v) for v in sep + new]
        table = np.transpose(prob, perm).reshape(
            clique_cells(sep, sizes), clique_cells(new, sizes)
        )
        given = (
            np.ravel_multi_index(
                tuple(codes[:, v] for v in sep), [sizes[v] for v in sep]
            )
            if sep
            else np.zeros(n_samples, dtype=np.int64)
        )
        drawn = _sample_conditional(table, given, rng)
        if new:
            unravelled = np.unravel_index(drawn, [sizes[v] for v in new])
            for v, values in zip(new, unravelled, strict=True):
                codes[:, v] = values
    return codes

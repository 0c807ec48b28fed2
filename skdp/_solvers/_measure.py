"""What the marginal-based synthesizers share: count tables and their privacy.

Both synthetic-data solvers (the tree of :mod:`._tree` and the adaptive rounds
of :mod:`._aim`) measure count tables of column sets with Gaussian noise and
select among candidate tables with the exponential mechanism. This module
holds the pieces they have in common:

- :func:`count_table` and :func:`count_marginals`: exact count tables (they
  read the data; what is released is noise added to them);
- :func:`count_sensitivity`: how far one record moves any count table, under
  a neighbouring relation (the rule, written once);
- :func:`exponential_draw`: one draw of the exponential mechanism.
"""

import math
import os
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed
from scipy.special import logsumexp

from ..accounting import Neighbouring

__all__ = [
    "CountSensitivity",
    "count_marginals",
    "count_sensitivity",
    "count_table",
    "exponential_draw",
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
    l1 = Neighbouring.parse(neighbouring).sum_sensitivity(1.0)
    return CountSensitivity(l1, math.sqrt(l1))


def count_table(codes, columns, sizes):
    """Count table of the column set ``columns`` (axes in its order), as floats.

    ``codes`` holds one integer code per cell in ``range(sizes[column])``;
    ``sizes`` gives the number of levels of every column of ``codes``.
    """
    shape = tuple(sizes[c] for c in columns)
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in columns), shape)
    return np.bincount(flat, minlength=math.prod(shape)).reshape(shape).astype(float)


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

"""Utility metrics for synthetic data: distances between low-order marginals."""

import itertools
import math

import numpy as np
from sklearn.utils import check_random_state

from ._domain import as_table, build_specs, encode_table

__all__ = ["marginal_error"]

#: Number of random marginals drawn when ``ways >= 3`` and none is given.
DEFAULT_N_HIGH_ORDER_MARGINALS = 64


def _marginal(codes, columns, sizes):
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in columns), sizes)
    counts = np.bincount(flat, minlength=math.prod(sizes)).astype(float)
    return counts / max(counts.sum(), 1.0)


def marginal_error(
    real, synth, domain, ways=2, n_marginals=None, random_state=None, *, bins=32
):
    """Average total-variation distance between the k-way marginals of two tables.

    Both tables are discretised on the same public domain (as in
    :class:`DPSyntheticData`); for each set of ``ways`` columns the distance is
    ``0.5 * sum |p - q|`` over the cells of the marginal. Only k-way tables are
    built, never the joint histogram. Not private: use it to evaluate.

    Parameters
    ----------
    real, synth : DataFrame or array-like of shape (n_samples, n_features)
        Same columns; row counts may differ.
    domain : mapping
        Public domain (see :class:`DPSyntheticData`).
    ways : int >= 1, default=2
    n_marginals : int or None, default=None
        Number of column sets drawn at random (without replacement). ``None``:
        all of them for ``ways <= 2``, 64 at random for ``ways >= 3``.
    random_state : int, RandomState instance or None, default=None
        Seeds the choice of column sets.
    bins : int, default=32
        Bins of numeric columns without their own ``n_bins``.

    Returns
    -------
    error : float
        Mean total-variation distance, in [0, 1].
    """
    real_cols, _ = as_table(real)
    synth_cols, _ = as_table(synth)
    if [k for k, _, _ in real_cols] != [k for k, _, _ in synth_cols]:
        raise ValueError("real and synth must have the same columns.")
    ways = int(ways)
    if not 1 <= ways <= len(real_cols):
        raise ValueError(f"ways must be in [1, {len(real_cols)}], got {ways}.")
    specs = build_specs(real_cols, domain, bins)
    real_codes = encode_table(real_cols, specs)
    synth_codes = encode_table(synth_cols, build_specs(synth_cols, domain, bins))
    sets = list(itertools.combinations(range(len(specs)), ways))
    if n_marginals is None and ways >= 3:
        n_marginals = DEFAULT_N_HIGH_ORDER_MARGINALS
    if n_marginals is not None and n_marginals < len(sets):
        rng = check_random_state(random_state)
        chosen = rng.choice(len(sets), size=int(n_marginals), replace=False)
        sets = [sets[k] for k in sorted(chosen)]
    errors = []
    for columns in sets:
        sizes = tuple(specs[c].n_levels for c in columns)
        p = _marginal(real_codes, columns, sizes)
        q = _marginal(synth_codes, columns, sizes)
        errors.append(0.5 * np.abs(p - q).sum())
    return float(np.mean(errors))

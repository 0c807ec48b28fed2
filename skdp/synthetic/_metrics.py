"""Utility of synthetic data: marginal distances, train-on-synthetic accuracy, plot.

None of these is private: they read the real data to evaluate a release.
"""

import itertools

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.utils import check_random_state

from .._solvers._measure import count_table
from ._domain import as_table, build_specs, encode_table

__all__ = [
    "marginal_error",
    "marginal_errors",
    "plot_marginal_errors",
    "tstr_accuracy",
]

#: Number of random marginals drawn when ``ways >= 3`` and none is given.
DEFAULT_N_HIGH_ORDER_MARGINALS = 100
#: Seed of the default choice of high-order marginals (a fixed set).
DEFAULT_MARGINAL_SEED = 0


def _codes(table, domain, bins):
    """Columns, specs and codes of a table (missing and undeclared levels kept).

    Undeclared categories share one extra level of their column, which has
    no name (``handle_unknown="count"``): a declared category ``"other"``
    keeps its own.
    """
    columns, _ = as_table(table)
    specs = build_specs(
        columns, domain, bins, missing="category", handle_unknown="count"
    )
    return columns, specs, encode_table(columns, specs, handle_unknown="count")


def _marginal(codes, columns, sizes):
    counts = count_table(codes, columns, sizes).ravel()
    return counts / max(counts.sum(), 1.0)


def _in_real_order(real, synth):
    """``synth`` with its named columns in ``real``'s order.

    Tables with column names are matched by name, so two DataFrames of the
    same columns in another order are compared column by column; columns
    present in only one of them are named in the error.
    """
    if not (hasattr(real, "columns") and hasattr(synth, "columns")):
        return synth
    names, other = [str(c) for c in real.columns], [str(c) for c in synth.columns]
    if names == other:
        return synth
    only_real = [c for c in names if c not in other]
    only_synth = [c for c in other if c not in names]
    if only_real or only_synth:
        raise ValueError(
            "real and synth must have the same columns: only in real "
            f"{only_real}, only in synth {only_synth}."
        )
    return synth[list(real.columns)]


def marginal_errors(
    real,
    synth,
    domain,
    ways=2,
    n_marginals=None,
    random_state=DEFAULT_MARGINAL_SEED,
    *,
    bins=32,
):
    """Total-variation distance of each k-way marginal between two tables.

    Both tables are discretised on the same public domain (as in
    :class:`DPSyntheticData`, with a missing level for columns that can hold
    NaN and an ``"other"`` level for undeclared categories); for each set of
    ``ways`` columns the distance is ``0.5 * sum |p - q|`` over the cells of
    the marginal. Only k-way tables are built, never the joint histogram.

    Parameters
    ----------
    real, synth : DataFrame or array-like of shape (n_samples, n_features)
        Same columns (DataFrames are matched by column name, in any order);
        row counts may differ.
    domain : mapping
        Public domain (see :class:`DPSyntheticData`).
    ways : int >= 1, default=2
    n_marginals : int or None, default=None
        Number of column sets drawn at random (without replacement). ``None``:
        all of them for ``ways <= 2``, 100 at random for ``ways >= 3``.
    random_state : int, RandomState instance or None, default=0
        Seeds the choice of column sets (fixed by default, so that errors of
        different synthetic tables are comparable).
    bins : int, default=32
        Bins of numeric columns without their own ``n_bins``.

    Returns
    -------
    sets : list of tuple
        The column sets (column keys).
    errors : ndarray of shape (n_sets,)
        Total-variation distance of each, in [0, 1].
    """
    synth = _in_real_order(real, synth)
    real_cols, specs, real_codes = _codes(real, domain, bins)
    synth_cols, synth_specs, synth_codes = _codes(synth, domain, bins)
    if [k for k, _, _ in real_cols] != [k for k, _, _ in synth_cols]:
        raise ValueError("real and synth must have the same columns.")
    if [s.n_levels for s in specs] != [s.n_levels for s in synth_specs]:
        raise ValueError(
            "real and synth discretise differently (a column's dtype differs); "
            "give both the same dtypes."
        )
    ways = int(ways)
    if not 1 <= ways <= len(real_cols):
        raise ValueError(f"ways must be in [1, {len(real_cols)}], got {ways}.")
    sets = list(itertools.combinations(range(len(specs)), ways))
    if n_marginals is None and ways >= 3:
        n_marginals = DEFAULT_N_HIGH_ORDER_MARGINALS
    if n_marginals is not None and n_marginals < len(sets):
        rng = check_random_state(random_state)
        chosen = rng.choice(len(sets), size=int(n_marginals), replace=False)
        sets = [sets[k] for k in sorted(chosen)]
    errors = np.empty(len(sets))
    sizes = [spec.n_levels for spec in specs]
    for i, columns in enumerate(sets):
        p = _marginal(real_codes, columns, sizes)
        q = _marginal(synth_codes, columns, sizes)
        errors[i] = 0.5 * np.abs(p - q).sum()
    keys = [spec.key for spec in specs]
    return [tuple(keys[c] for c in s) for s in sets], errors


def marginal_error(
    real,
    synth,
    domain,
    ways=2,
    n_marginals=None,
    random_state=DEFAULT_MARGINAL_SEED,
    *,
    bins=32,
):
    """Average total-variation distance between the k-way marginals of two tables.

    The mean of :func:`marginal_errors` (same parameters): all 1-way or 2-way
    marginals, or 100 fixed random 3-way marginals by default.

    Parameters
    ----------
    real, synth : DataFrame or array-like of shape (n_samples, n_features)
    domain : mapping
    ways : int >= 1, default=2
    n_marginals : int or None, default=None
    random_state : int, RandomState instance or None, default=0
    bins : int, default=32

    Returns
    -------
    error : float
        Mean total-variation distance, in [0, 1].
    """
    _, errors = marginal_errors(
        real, synth, domain, ways, n_marginals, random_state, bins=bins
    )
    return float(np.mean(errors))


def _one_hot(codes, specs, skip):
    blocks = []
    for j, spec in enumerate(specs):
        if j == skip:
            continue
        block = np.zeros((codes.shape[0], spec.n_levels))
        block[np.arange(codes.shape[0]), codes[:, j]] = 1.0
        blocks.append(block)
    return np.hstack(blocks) if blocks else np.ones((codes.shape[0], 1))


def tstr_accuracy(synth, real, target, domain, *, bins=32, max_iter=1000):
    """Train on synthetic, test on real: accuracy of a logistic regression.

    Every column but ``target`` is one-hot encoded on its public domain
    (numeric columns by bin); a (non-private) logistic regression is trained
    on ``synth`` to predict ``target`` and scored on ``real``. If the
    synthetic target has one class, that class is predicted.

    Parameters
    ----------
    synth : DataFrame or array-like
        Training table (synthetic).
    real : DataFrame or array-like
        Test table (real, ideally not the one the synthesizer saw).
    target : hashable
        Key of the target column (a categorical column of ``domain``).
    domain : mapping
    bins : int, default=32
    max_iter : int, default=1000

    Returns
    -------
    accuracy : float
    """
    synth_cols, specs, synth_codes = _codes(synth, domain, bins)
    real_cols, real_specs, real_codes = _codes(real, domain, bins)
    keys = [key for key, _, _ in synth_cols]
    if keys != [key for key, _, _ in real_cols]:
        raise ValueError("synth and real must have the same columns.")
    if target not in keys:
        raise ValueError(f"target {target!r} is not a column (columns: {keys!r}).")
    t = keys.index(target)
    X_train, y_train = _one_hot(synth_codes, specs, t), synth_codes[:, t]
    X_test, y_test = _one_hot(real_codes, real_specs, t), real_codes[:, t]
    if X_train.shape[1] != X_test.shape[1]:
        raise ValueError("synth and real discretise differently; align dtypes.")
    classes = np.unique(y_train)
    if classes.size < 2:
        return float(np.mean(y_test == classes[0]))
    model = LogisticRegression(max_iter=max_iter).fit(X_train, y_train)
    return float(model.score(X_test, y_test))


def plot_marginal_errors(real, synth, domain, path, *, ways=(1, 2, 3), bins=32):
    """Save a PNG of the per-marginal total-variation errors.

    One panel per marginal order: every marginal's error, sorted, with the
    three worst named. Needs matplotlib (imported only here).

    Parameters
    ----------
    real, synth : DataFrame or array-like
    domain : mapping
    path : str or path-like
        Where to write the PNG.
    ways : sequence of int, default=(1, 2, 3)
        Marginal orders to plot (3-way: the 100 fixed random sets).
    bins : int, default=32

    Returns
    -------
    path : str or path-like
        ``path``, for convenience.
    """
    try:  # lazy: matplotlib is an optional dependency
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "plot_marginal_errors needs matplotlib: pip install matplotlib."
        ) from exc
    ways = list(ways)
    fig, axes = plt.subplots(1, len(ways), figsize=(4.5 * len(ways), 3.6))
    axes = np.atleast_1d(axes)
    for ax, k in zip(axes, ways, strict=True):
        sets, errors = marginal_errors(real, synth, domain, k, bins=bins)
        order = np.argsort(errors)[::-1]
        ax.bar(np.arange(errors.size), errors[order], width=1.0, color="tab:blue")
        ax.set_title(f"{k}-way: mean TV {errors.mean():.3f}")
        ax.set_xlabel("marginal (sorted by error)")
        ax.set_ylabel("total-variation distance")
        worst = "\n".join(
            f"{errors[k]:.3f}  " + " + ".join(str(c) for c in sets[k])
            for k in order[:3]
        )
        ax.text(
            0.97,
            0.95,
            "worst:\n" + worst,
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=7,
            family="monospace",
        )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

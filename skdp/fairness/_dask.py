"""DPSaddlePointClassifier's inputs on Dask: prepared where they are read.

:func:`held_game_rows` reads every partition once, in the task that reads
it (:func:`skdp._solvers._sgd._dask.hold_blocks`): :func:`prepare_group_partition`
checks its rows, labels and group labels with the in-memory checks and
messages, and projects its rows onto the public ball as the in-memory run
does (:func:`skdp._solvers._gda._releases.project_rows`); the partition is
held there for the run. Only the partitions' sizes and exact group counts
reach the client (:class:`skdp._solvers._gda._dask.HeldGameRows`); a
partition that breaks a check raises, with its message, before any release.

Only ``solver="gda"`` runs on Dask (:func:`check_dask_solver`).

Dask is an optional dependency; it is imported only for a Dask input.
"""

import numpy as np
from sklearn.utils import check_array

from .._solvers._gda import GDASolver
from .._solvers._gda._dask import HeldGameRows, run_gda_dask
from .._solvers._gda._releases import project_rows
from .._solvers._rows import loss_row_norm
from .._solvers._saddle import SaddleRows
from .._solvers._sgd._dask import _aligned_blocks, hold_blocks
from ..linear_model._dask import _as_array, _check_lengths, _declared_classes
from ._labels import encode_groups

__all__ = [
    "HeldGameRows",
    "check_dask_solver",
    "declared_binary_classes",
    "held_game_rows",
    "prepare_group_partition",
    "run_gda_dask",
]


def check_dask_solver(solver):
    """Refuse a solver that has no Dask run (only noisy GDA has one)."""
    if not isinstance(solver, GDASolver):
        raise ValueError(
            "On a Dask collection only solver='gda' is supported: the mirror "
            "solver's one pass over secret batches is not implemented on Dask "
            "(docs/guide/dask.md). Fit it in memory, or use solver='gda'."
        )


def declared_binary_classes(declared):
    """The two declared classes, sorted; refused when absent or not two."""
    classes = _declared_classes(declared)
    if classes.size != 2:
        raise ValueError(
            "DPSaddlePointClassifier handles binary classification only; got "
            f"{classes.size} classes."
        )
    return classes


def held_game_rows(X, y, sensitive_features, *, classes, groups, problem):
    """The partitions of a Dask fit, checked, projected and held on the workers.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features), or a \
dask.dataframe.DataFrame of numeric columns
    y : dask.array.Array, dask.dataframe.Series or ndarray of shape (n_samples,)
    sensitive_features : same kinds as ``y``, or None
        Chunked like the rows of ``X`` (rechunked otherwise, as ``y``).
    classes : ndarray of shape (2,)
        The declared classes, sorted.
    groups : ndarray of shape (n_groups,)
        The declared group labels (``array([None])``: one group).
    problem : skdp._solvers._saddle.SaddleProblem
        For its public ``row_norm`` and ``fit_intercept`` (the sizes in it
        are not read).

    Returns
    -------
    HeldGameRows
        Summarised; refused (ValueError) without rows or features.
    """
    X = _as_array(X, "X", ndim=2)
    y = _as_array(y, "y", ndim=1)
    if sensitive_features is not None:
        sensitive_features = _as_array(sensitive_features, "sensitive_features", ndim=1)
        _check_group_length(X, sensitive_features)
    _check_lengths(X, y, None)
    row_norm = loss_row_norm(problem.row_norm, problem.fit_intercept)
    held = hold_blocks(
        prepare_group_partition,
        _aligned_blocks(X, y, sensitive_features),
        classes,
        groups,
        row_norm,
        problem.fit_intercept,
    )
    rows = HeldGameRows(held, groups.size, problem.fit_intercept)
    _check_summary(rows.summary)
    return rows


def prepare_group_partition(X, y, sensitive, classes, groups, row_norm, fit_intercept):
    """One partition checked, encoded and projected: a ``ProjectedRows``.

    Runs where the block is read. The checks and messages are the in-memory
    fit's: a NaN or an infinity in ``X``, a label outside ``classes``, a
    missing or undeclared group label each raise here, before any release.
    ``sensitive`` None: one group.
    """
    X = check_array(
        X, dtype=[np.float64, np.float32], ensure_min_samples=0, input_name="X"
    )
    y = np.asarray(y).ravel()
    n = X.shape[0]
    n_groups = n if sensitive is None else np.shape(sensitive)[0]
    if y.shape[0] != n or n_groups != n:
        raise ValueError(
            f"A partition has {n} rows of X, {y.shape[0]} labels and {n_groups} "
            "group labels: X, y and sensitive_features must have the same "
            "partitions."
        )
    if not np.isin(y, classes).all():
        raise ValueError(
            f"y has labels outside the declared classes {classes.tolist()!r}."
        )
    labels = (y == classes[1]).astype(int)
    if sensitive is None:
        codes = np.zeros(n, dtype=np.intp)
    else:
        codes = encode_groups(sensitive, groups, n)
    return project_rows(
        SaddleRows(X=X, y=labels, group_codes=codes), row_norm, fit_intercept
    )


def _check_group_length(X, sensitive_features):
    """Refuse group labels of another length than the rows (where both are known)."""
    n, m = X.shape[0], sensitive_features.shape[0]
    if not (np.isnan(n) or np.isnan(m)) and n != m:
        raise ValueError(
            f"sensitive_features has {m} entries but X has {n} rows; pass one "
            "group label per row."
        )


def _check_summary(summary):
    """The in-memory size checks, on the sum of the partitions' summaries."""
    if summary.n_rows == 0:
        raise ValueError(
            f"Found array with 0 sample(s) (shape=(0, {summary.n_features})) "
            "while a minimum of 1 is required."
        )
    if summary.n_features == 0:
        raise ValueError(
            f"Found array with 0 feature(s) (shape=({summary.n_rows}, 0)) "
            "while a minimum of 1 is required."
        )

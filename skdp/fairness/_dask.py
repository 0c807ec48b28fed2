"""DPSaddlePointClassifier's inputs on Dask: prepared where they are read.

:func:`held_saddle_rows` reads every partition once, in the task that reads
it (:func:`skdp._solvers._sgd._dask.hold_blocks`):
:func:`prepare_group_partition` checks its rows, labels and group labels
with the in-memory checks and messages and puts them in the form the
solver's run reads (projected onto the public ball for ``"gda"``, as given
for ``"mirror"``); the partition is held there for the run. Only the
partitions' sizes and exact group counts reach the client
(:class:`skdp._solvers._saddle_dask.HeldSaddleRows`); a partition that
breaks a check raises, with its message, before any release.

Each solver's held rows are chosen once, from :data:`HELD_ROWS`.

Dask is an optional dependency; it is imported only for a Dask input.
"""

import numpy as np
from sklearn.utils import check_array

from .._solvers._gda import GDASolver
from .._solvers._gda._dask import HeldGameRows
from .._solvers._mirror import MirrorSolver
from .._solvers._mirror_dask import HeldMirrorRows
from .._solvers._saddle import SaddleRows
from .._solvers._saddle_dask import HeldSaddleRows
from .._solvers._sgd._dask import _aligned_blocks, check_summed_size, hold_blocks
from ..linear_model._dask import _as_array, _check_lengths, _declared_classes
from ._labels import encode_groups

__all__ = [
    "HELD_ROWS",
    "HeldSaddleRows",
    "declared_binary_classes",
    "held_rows_class",
    "held_saddle_rows",
    "prepare_group_partition",
]

#: The held rows of each solver's Dask run, by solver type.
HELD_ROWS = {GDASolver: HeldGameRows, MirrorSolver: HeldMirrorRows}


def held_rows_class(solver):
    """The :class:`HeldSaddleRows` subclass of ``solver``; refused without one."""
    for kind, held in HELD_ROWS.items():
        if isinstance(solver, kind):
            return held
    raise ValueError(
        f"The solver {type(solver).__name__} has no run on Dask collections; "
        "fit it in memory."
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


def held_saddle_rows(X, y, sensitive_features, *, classes, groups, problem, held):
    """The partitions of a Dask fit, checked and held on the workers.

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
    held : type
        The solver's :class:`HeldSaddleRows` subclass (:func:`held_rows_class`).

    Returns
    -------
    HeldSaddleRows
        Summarised; refused (ValueError) without rows or features.
    """
    X = _as_array(X, "X", ndim=2)
    y = _as_array(y, "y", ndim=1)
    if sensitive_features is not None:
        sensitive_features = _as_array(sensitive_features, "sensitive_features", ndim=1)
        _check_group_length(X, sensitive_features)
    _check_lengths(X, y, None)
    form, form_args = held.partition_form(problem)
    partitions = hold_blocks(
        prepare_group_partition,
        _aligned_blocks(X, y, sensitive_features),
        classes,
        groups,
        form,
        *form_args,
    )
    rows = held(partitions, groups.size, problem.fit_intercept)
    check_summed_size(rows.summary)
    return rows


def prepare_group_partition(X, y, sensitive, classes, groups, form, *form_args):
    """One partition checked, encoded and put in its held form.

    Runs where the block is read. The checks and messages are the in-memory
    fit's: a NaN or an infinity in ``X``, a label outside ``classes``, a
    missing or undeclared group label each raise here, before any release.
    ``sensitive`` None: one group. Returns ``form(rows, *form_args)`` of the
    partition's ``SaddleRows`` (the solver's
    :meth:`HeldSaddleRows.partition_form`).
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
    return form(SaddleRows(X=X, y=labels, group_codes=codes), *form_args)


def _check_group_length(X, sensitive_features):
    """Refuse group labels of another length than the rows (where both are known)."""
    n, m = X.shape[0], sensitive_features.shape[0]
    if not (np.isnan(n) or np.isnan(m)) and n != m:
        raise ValueError(
            f"sensitive_features has {m} entries but X has {n} rows; pass one "
            "group label per row."
        )

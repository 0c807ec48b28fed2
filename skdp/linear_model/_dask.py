"""DPLogisticRegression's inputs on Dask: checked per partition, from aggregates.

:func:`held_fit_inputs` reads every partition once where it is
(:func:`skdp._solvers._sgd._dask.hold_rows`), holds it there for the run, and
checks the sum of the partitions' summaries against the same public bounds,
with the same messages, as the in-memory validation: nothing but counts
reaches the client, and every error is raised before any step is taken.

Dask is an optional dependency; it is imported only for a Dask input.
"""

import numpy as np

from .._solvers._sgd._dask import check_summed_size, hold_rows
from ..synthetic._dask import is_dask_collection

__all__ = ["held_fit_inputs", "is_dask_collection"]


def held_fit_inputs(X, y, sample_weight, declared_classes):
    """The partitions of a Dask fit, held on the workers, and the classes.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features), or a \
dask.dataframe.DataFrame of numeric columns
    y : dask.array.Array, dask.dataframe.Series or ndarray of shape (n_samples,)
    sample_weight : same kinds as ``y``, or None
    declared_classes : array-like or None
        The estimator's ``classes``: required on Dask.

    Returns
    -------
    held : skdp._solvers._sgd._dask.HeldRows
    classes : ndarray
    """
    classes = _declared_classes(declared_classes)
    X = _as_array(X, "X", ndim=2)
    y = _as_array(y, "y", ndim=1)
    if sample_weight is not None:
        sample_weight = _as_array(sample_weight, "sample_weight", ndim=1)
    _check_lengths(X, y, sample_weight)
    held = hold_rows(X, y, sample_weight, classes)
    _check_summary(held.summary, classes)
    return held, classes


def _declared_classes(declared):
    """The declared classes, sorted; refused when absent (they are not read)."""
    if declared is None:
        raise ValueError(
            "On a Dask collection, declare the public classes with "
            "classes=[...]: they are not read from y (reading them would need "
            "a pass over the labels that privacy_spent_ does not cover)."
        )
    classes = np.unique(np.asarray(declared))
    if np.asarray(declared).ndim != 1 or classes.size < 2:
        raise ValueError(
            f"classes must be a 1-d list of at least two distinct labels, got "
            f"{declared!r}."
        )
    return classes


def _as_array(values, name, *, ndim):
    """A Dask array (or a NumPy one for a label or weight vector) of ``ndim``."""
    import dask.array as da
    import dask.dataframe as dd

    if isinstance(values, (dd.DataFrame, dd.Series)):
        values = values.map_partitions(_partition_values, meta=_meta(values))
    elif not isinstance(values, da.Array):
        if name == "X":
            raise ValueError(
                "On Dask, X must be a dask.array.Array or a dask.dataframe."
                f"DataFrame; got {type(values).__name__}."
            )
        values = np.asarray(values)
    if values.ndim != ndim:
        raise ValueError(
            f"{name} must have {ndim} dimension{'s' if ndim > 1 else ''}; "
            f"got shape {values.shape}."
        )
    return values


def _partition_values(part):
    """A pandas partition's values as a NumPy array (its own dtype)."""
    return part.to_numpy()


def _meta(values):
    """An empty array standing for a frame's or a series' values (dtype a guess)."""
    dtypes = list(values.dtypes) if values.ndim == 2 else [values.dtype]
    numeric = all(isinstance(d, np.dtype) and d.kind in "biuf" for d in dtypes)
    return np.empty((0,) * values.ndim, dtype=float if numeric else object)


def _check_lengths(X, y, sample_weight):
    """Refuse labels or weights of another length than the rows of ``X``.

    Where a length is unknown (a frame's partitions), each partition checks
    its own lengths instead.
    """
    n = X.shape[0]
    if np.isnan(n) or any(
        np.isnan(v.shape[0]) for v in (y, sample_weight) if v is not None
    ):
        return
    if y.shape[0] != n:
        raise ValueError(
            "Found input variables with inconsistent numbers of samples: "
            f"[{n}, {y.shape[0]}]."
        )
    if sample_weight is not None and sample_weight.shape[0] != n:
        raise ValueError(
            f"sample_weight has shape {sample_weight.shape}; expected ({n},)."
        )


def _check_summary(summary, classes):
    """The in-memory checks, on the sum of the partitions' summaries."""
    check_summed_size(summary)
    if summary.not_finite:
        raise ValueError(
            f"Input X contains NaN or infinity ({summary.not_finite} values)."
        )
    if summary.outside:
        raise ValueError(
            f"y has labels outside the declared classes {classes.tolist()!r}."
        )
    if summary.weights_out_of_range:
        raise ValueError(
            "sample_weight must lie in [0, 1]: a larger weight multiplies a record's "
            "influence and breaks the privacy guarantee. Duplicate-free reweighting "
            "can be had by rescaling the weights to at most 1."
        )
    if summary.weights_positive == 0:
        raise ValueError("All sample weights are zero; nothing to fit.")

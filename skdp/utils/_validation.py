"""Validation helpers shared by the estimators."""

import contextlib
import logging
import os
import sys
import warnings

import numpy as np
from sklearn.preprocessing import LabelEncoder

from ..exceptions import PrivacyLeakWarning, WeakDeltaWarning, WideBoundsWarning

__all__ = [
    "MAGNITUDE_LIMIT",
    "check_add_remove_delta",
    "check_delta_against_rows",
    "check_numeric_table",
    "check_sample_weight",
    "default_delta",
    "enable_progress",
    "resolve_classes",
    "user_stacklevel",
]

#: Largest accepted row-norm bound, feature bound, clip norm, step or l1
#: radius. Within it, products of a projected row and any model a run can
#: reach stay finite, so no single record can overflow a run to NaN (which
#: would reveal it with certainty).
MAGNITUDE_LIMIT = 1e30

#: The default delta is min(_DELTA_CAP, n ** -_DELTA_EXPONENT): well below 1/n.
_DELTA_CAP = 1e-5
_DELTA_EXPONENT = 1.1


def default_delta(n_samples):
    """Default delta ``min(1e-5, n ** -1.1)``, well below ``1 / n``."""
    return float(min(_DELTA_CAP, float(n_samples) ** -_DELTA_EXPONENT))


def check_delta_against_rows(delta, n_samples):
    """Warn when a declared ``delta`` is not small against ``1 / n_samples``.

    A mechanism that publishes one record in ``1 / delta`` outright meets
    ``(0, delta)``-DP, so a delta of ``1 / n`` or more allows releasing about
    one record of the table in the clear. Said to whoever runs the fit (a
    :class:`~skdp.exceptions.WeakDeltaWarning`), never released.
    """
    if n_samples >= 1 and delta >= 1.0 / n_samples:
        warnings.warn(
            f"delta={delta:g} is at least 1/n for these {n_samples} rows: a "
            "guarantee that allows publishing about one record in the clear. "
            f"Use a delta well below 1/n (the default is "
            f"min(1e-5, n^-1.1) = {default_delta(n_samples):.3g}).",
            WeakDeltaWarning,
            stacklevel=user_stacklevel(),
        )


#: Share of a numeric column's values beyond its declared bounds that a
#: warning calls out: clipping a few outliers is what a bound is for; a
#: twentieth is rarely meant (a bound in other units).
CLIPPED_SHARE_WARNED = 0.05

#: A numeric column whose present values span less than this share of its
#: declared range is called out (a range many times the data's, often
#: declared in other units), once it has at least ``WIDE_BOUNDS_MIN_ROWS``
#: present values of two or more distinct values: a small sample or a
#: constant column says little about the range.
WIDE_BOUNDS_SPAN_WARNED = 0.05
WIDE_BOUNDS_MIN_ROWS = 100


def span_share(values, low, high):
    """Share of ``(low, high)`` the present values span, or None if unjudged.

    None below ``WIDE_BOUNDS_MIN_ROWS`` values or for a constant column.
    """
    values = np.asarray(values, dtype=float)
    if values.size < WIDE_BOUNDS_MIN_ROWS:
        return None
    lo, hi = float(np.min(values)), float(np.max(values))
    share = (min(hi, high) - max(lo, low)) / (high - low)
    return share if hi > lo and share > 0 else None


def warn_wide_bounds(spans):
    """One :class:`~skdp.exceptions.WideBoundsWarning` for the narrow columns.

    ``spans``: column -> ``(share, low, high)``, the share of the declared
    ``(low, high)`` its present values span (None: not judged, see
    :func:`span_share`); columns below ``WIDE_BOUNDS_SPAN_WARNED`` are named.
    """
    narrow = {
        name: (share, low, high)
        for name, (share, low, high) in spans.items()
        if share is not None and share < WIDE_BOUNDS_SPAN_WARNED
    }
    if not narrow:
        return
    details = "; ".join(
        f"{name!r}: values span {share:.1%} of ({low:g}, {high:g})"
        for name, (share, low, high) in narrow.items()
    )
    warnings.warn(
        f"Declared bounds much wider than the values: {details}. Such a "
        "column is nearly constant to a model, and synthetic values spread "
        "over the whole range; a bound this wide was often declared in other "
        "units (dollars for thousands of dollars): a narrower public range "
        "fits better.",
        WideBoundsWarning,
        stacklevel=user_stacklevel(),
    )


def user_stacklevel():
    """``stacklevel`` for ``warnings.warn`` pointing at the user's own line.

    Counted from the caller of this function (level 1: the line that warns)
    out through every frame of skdp, of scikit-learn (whose ``fit`` wrappers
    and Pipelines call skdp) and of joblib (whose caches and parallel loops
    run a search's fits), to the first frame of other code.
    """
    internal = tuple(
        os.path.dirname(sys.modules[name].__file__) + os.sep
        for name in ("skdp", "sklearn", "joblib")
        if name in sys.modules
    )
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(internal):
        frame, level = frame.f_back, level + 1
    return level


def check_add_remove_delta(neighbouring, delta):
    """Refuse add/remove without an explicit delta.

    The default :func:`default_delta` is computed from ``n``, which add/remove
    keeps private: ``delta_`` would reveal it.
    """
    if neighbouring == "add-remove" and delta is None:
        raise ValueError(
            "neighbouring='add-remove' needs an explicit delta: the default "
            "min(1e-5, n ** -1.1) depends on the number of rows, which "
            "add-remove keeps private (delta_ would reveal it)."
        )


def check_numeric_table(X, name):
    """Refuse a DataFrame with non-numeric columns, saying how to encode it.

    A table of strings or categories must go through its public schema first
    (``make_private_pipeline``), not a numeric conversion that would fail
    with numpy's bare message. Reads the columns' dtypes only.
    """
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(dtypes, "items"):
        return
    text = [column for column, dtype in dtypes.items() if dtype.kind not in "biuf"]
    if text:
        raise ValueError(
            f"{name} takes numeric features; columns {text[:5]!r} are not numeric. "
            "Encode the table from its public declaration: "
            f"make_private_pipeline(TableSchema({{...}}), {name}(...)) "
            "(docs: guide/schema)."
        )


def check_sample_weight(sample_weight, n_samples):
    """Validate weights in [0, 1]; return them as an array, or None.

    A weight in [0, 1] scales a record's gradient down, so the sensitivity
    and smoothness bounds still hold; a weight above 1 would multiply a
    record's influence and is refused.
    """
    if sample_weight is None:
        return None
    weights = np.asarray(sample_weight, dtype=float)
    if weights.shape != (n_samples,):
        raise ValueError(
            f"sample_weight has shape {weights.shape}; expected ({n_samples},)."
        )
    if not np.all(np.isfinite(weights)) or weights.min() < 0 or weights.max() > 1:
        raise ValueError(
            "sample_weight must lie in [0, 1]: a larger weight multiplies a record's "
            "influence and breaks the privacy guarantee. Duplicate-free reweighting "
            "can be had by rescaling the weights to at most 1."
        )
    if not weights.any():
        raise ValueError("All sample weights are zero; nothing to fit.")
    return weights


def _bool_labels_declared_as_numbers(y, classes):
    """Whether ``y`` is boolean and ``classes`` are numbers among 0 and 1."""
    return (
        np.asarray(y).dtype == bool
        and classes.dtype.kind in "iuf"
        and set(classes.tolist()) <= {0, 1}
    )


def resolve_classes(y, declared, name, *, binary=False):
    """The public set of classes: ``declared``, or read from ``y`` with a warning.

    The class set is a public input (docs/guide/privacy_model.md): a label
    that only one person has would be revealed by its presence in
    ``classes_``. Declared
    classes are used as given (sorted, unique), whatever ``y`` holds; a label
    of ``y`` outside them is refused. Without a declaration the set is read
    from ``y`` and a :class:`~skdp.exceptions.PrivacyLeakWarning` says that
    ``privacy_spent_`` does not cover that read.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
    declared : array-like or None
        The estimator's ``classes`` parameter.
    name : str
        The estimator's name, for messages.
    binary : bool
        Exactly two classes are required.

    Returns
    -------
    classes : ndarray, sorted and unique
    """
    if declared is None:
        classes = LabelEncoder().fit(y).classes_
        if classes.size < 2:
            raise ValueError(
                f"y contains only one class ({classes[0]!r}); {name} needs at "
                "least two classes."
            )
        warnings.warn(
            "classes=None: the set of classes was read from y, which "
            "privacy_spent_ does not cover (a label only one person has "
            "reveals them). Declare the public set with classes=[...].",
            PrivacyLeakWarning,
            stacklevel=user_stacklevel(),
        )
    else:
        classes = np.unique(np.asarray(declared))
        if _bool_labels_declared_as_numbers(y, classes):
            classes = classes.astype(bool)
        if np.asarray(declared).ndim != 1 or classes.size < 2:
            raise ValueError(
                f"classes must be a 1-d list of at least two distinct labels, got "
                f"{declared!r}."
            )
        if not np.isin(y, classes).all():
            raise ValueError(
                f"y has labels outside the declared classes {classes.tolist()!r}."
            )
    if binary and classes.size != 2:
        raise ValueError(
            f"{name} handles binary classification only; got {classes.size} classes."
        )
    return classes


@contextlib.contextmanager
def enable_progress(verbose):
    """Route skdp's progress log lines to stderr while ``verbose`` is set."""
    logger = logging.getLogger("skdp")
    if not verbose or logger.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[skdp] %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)

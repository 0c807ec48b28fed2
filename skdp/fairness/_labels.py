"""Group and class labels of a fair fit: one label per row, from public sets.

Shared by the in-memory fit and the preparation of a Dask collection's
partitions (:mod:`._dask`), so that both refuse the same labels with the
same messages.
"""

import numpy as np

__all__ = ["as_labels", "encode_groups"]


def _is_missing(value):
    if value is None:
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):
        return True  # pandas.NA and similar refuse to compare


def as_labels(values, name):
    """1-d array of labels without missing values."""
    labels = np.asarray(values)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels.ravel()
    if labels.ndim != 1:
        raise ValueError(
            f"{name} must be one-dimensional (one group label per row); got an "
            f"array of shape {labels.shape}. Combine several columns into one "
            "label first."
        )
    if labels.dtype.kind == "f":
        missing = bool(np.isnan(labels).any())
    elif labels.dtype.kind == "O":
        missing = any(_is_missing(v) for v in labels)
    else:
        missing = False
    if missing:
        raise ValueError(
            f"{name} contains missing values (NaN or None); give every row a "
            "group label (for instance an explicit 'unknown' group) before fitting."
        )
    return labels


def encode_groups(sensitive_features, groups, n_samples):
    """Group index of every row, given the public group labels ``groups``."""
    labels = as_labels(sensitive_features, "sensitive_features")
    if labels.shape[0] != n_samples:
        raise ValueError(
            f"sensitive_features has {labels.shape[0]} entries but X has "
            f"{n_samples} rows; pass one group label per row."
        )
    index = {label: k for k, label in enumerate(groups.tolist())}
    uniques, inverse = np.unique(labels, return_inverse=True)
    unknown = [u for u in uniques.tolist() if u not in index]
    if unknown:
        raise ValueError(
            f"sensitive_features contains labels {unknown[:5]!r} that are not in "
            f"the declared groups {groups.tolist()!r}; add them to `groups`."
        )
    codes = np.array([index[u] for u in uniques.tolist()], dtype=np.intp)
    return codes[inverse.ravel()]

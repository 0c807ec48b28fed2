"""Public domains of tabular data: parse, encode to codes, decode back.

A domain maps each column to its categories (a ``list``) or to a numeric range
``(low, high)`` or ``(low, high, n_bins)`` (a ``tuple``). It must be public
knowledge, never read from the data. Numeric columns are cut into equal-width
bins on public edges; a code is decoded by a uniform draw within its bin.
"""

import math
import numbers
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ColumnSpec",
    "as_table",
    "build_specs",
    "decode_column",
    "encode_table",
    "rebuild_table",
]


@dataclass(frozen=True)
class ColumnSpec:
    """How one column is discretised (all of it public).

    Attributes
    ----------
    key : hashable
        Column name (DataFrame) or index (array).
    categories : tuple or None
        The categories of a categorical column, in code order.
    edges : ndarray or None
        Bin edges of a numeric column (``n_levels + 1`` values).
    low, high : float or None
        Range a numeric column is clipped to.
    integer : bool
        Whether the numeric column holds integers (bins on half-integers,
        decoded values rounded).
    """

    key: object
    categories: tuple | None = None
    edges: np.ndarray | None = None
    low: float | None = None
    high: float | None = None
    integer: bool = False

    @property
    def n_levels(self):
        """Number of codes of the column."""
        if self.categories is not None:
            return len(self.categories)
        return self.edges.size - 1


def _is_pandas_frame(X):
    return type(X).__module__.split(".")[0] == "pandas" and hasattr(X, "columns")


def as_table(X):
    """Split the input into columns, refusing empty or malformed input.

    Returns
    -------
    columns : list of (key, values ndarray, dtype)
    frame_info : dict or None
        For a DataFrame: its column names, dtypes and index type.
    """
    if _is_pandas_frame(X):
        keys = list(X.columns)
        columns = [(key, X[key], X[key].dtype) for key in keys]
        info = {"columns": X.columns, "dtypes": X.dtypes}
        n_rows = X.shape[0]
    else:
        array = np.asarray(X)
        if array.ndim != 2:
            raise ValueError(
                f"X must be 2-D (rows x columns), got an array of shape "
                f"{array.shape}. Reshape a single column with X.reshape(-1, 1)."
            )
        columns = [(j, array[:, j], array.dtype) for j in range(array.shape[1])]
        info = None
        n_rows = array.shape[0]
    if n_rows == 0 or not columns:
        raise ValueError(
            f"X is empty ({n_rows} rows, {len(columns)} columns); "
            "DPSyntheticData needs at least one row and one column."
        )
    return columns, info


def _is_integer_dtype(dtype):
    return np.issubdtype(np.dtype(dtype), np.integer) if _numpy_dtype(dtype) else False


def _numpy_dtype(dtype):
    try:
        np.dtype(dtype)
    except TypeError:
        return False
    return True


def _numeric_spec(key, spec, dtype, bins):
    if len(spec) not in (2, 3):
        raise ValueError(
            f"Domain of column {key!r} must be (low, high) or (low, high, n_bins), "
            f"got {spec!r}."
        )
    low, high = float(spec[0]), float(spec[1])
    n_bins = int(spec[2]) if len(spec) == 3 else int(bins)
    if not (math.isfinite(low) and math.isfinite(high)) or high < low or n_bins < 1:
        raise ValueError(
            f"Domain of column {key!r} needs finite low <= high and n_bins >= 1, "
            f"got {spec!r}."
        )
    if dtype is not None and _numpy_dtype(dtype) and np.dtype(dtype) != object:
        integer = _is_integer_dtype(dtype)
    else:  # object arrays: integers iff the public bounds are integers
        integer = all(isinstance(v, numbers.Integral) for v in spec[:2])
    if integer:
        n_bins = min(n_bins, int(high - low) + 1)
        edges = np.linspace(low - 0.5, high + 0.5, n_bins + 1)
    else:
        edges = np.linspace(low, high, n_bins + 1)
    return ColumnSpec(key=key, edges=edges, low=low, high=high, integer=integer)


def build_specs(columns, domain, bins):
    """One :class:`ColumnSpec` per column from the public ``domain``."""
    if domain is None:
        domain = {}
    if not hasattr(domain, "keys"):
        raise TypeError("domain must be a mapping column -> categories or range.")
    keys = [key for key, _, _ in columns]
    unknown = [key for key in domain.keys() if key not in keys]
    if unknown:
        raise ValueError(
            f"domain names columns {unknown!r} that are not in X (columns: {keys!r})."
        )
    specs = []
    for key, _values, dtype in columns:
        if key not in domain:
            raise ValueError(
                f"No domain given for column {key!r}. Pass domain={{{key!r}: "
                "[categories]}} or {key!r}: (low, high); the domain must be public "
                "knowledge (inferring it privately from the data is not supported "
                "yet)."
            )
        spec = domain[key]
        if isinstance(spec, tuple):
            specs.append(_numeric_spec(key, spec, dtype, bins))
            continue
        categories = tuple(spec)
        if not categories:
            raise ValueError(f"Domain of column {key!r} lists no categories.")
        if len(set(categories)) != len(categories):
            raise ValueError(f"Domain of column {key!r} repeats a category.")
        if getattr(dtype, "name", None) == "category":
            missing = [c for c in categories if c not in set(dtype.categories)]
            if missing:
                raise ValueError(
                    f"Domain of column {key!r} lists {missing!r}, which the column's "
                    "categorical dtype cannot hold; add them to its categories."
                )
        specs.append(ColumnSpec(key=key, categories=categories))
    return specs


def _as_object_values(values):
    if hasattr(values, "to_numpy"):  # pandas Series (any dtype, categorical too)
        array = values.to_numpy(dtype=object)
        missing = values.isna().to_numpy()
        return array, missing
    array = np.asarray(values)
    if array.dtype.kind in "fc":
        return array, np.isnan(array)
    if array.dtype == object:
        missing = np.array(
            [v is None or (isinstance(v, float) and v != v) for v in array], bool
        )
        return array, missing
    return array, np.zeros(array.shape, bool)


def _encode_categorical(spec, values):
    lookup = {category: code for code, category in enumerate(spec.categories)}
    codes = np.empty(values.shape[0], dtype=np.int64)
    for i, value in enumerate(values):
        code = lookup.get(value)
        if code is None:
            raise ValueError(
                f"Column {spec.key!r} holds {value!r}, which is not in its declared "
                f"categories {list(spec.categories)!r}. Add it to the domain (the "
                "domain must be public) or recode the column before fitting."
            )
        codes[i] = code
    return codes


def _encode_numeric(spec, values):
    try:
        x = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"Column {spec.key!r} has a numeric domain but non-numeric values."
        ) from exc
    x = np.clip(x, spec.low, spec.high)
    codes = np.searchsorted(spec.edges, x, side="right") - 1
    return np.clip(codes, 0, spec.n_levels - 1).astype(np.int64)


def encode_table(columns, specs):
    """Codes of shape (n_rows, n_columns); NaN and unknown categories refused.

    Numeric values outside the declared range are clipped into it.
    """
    n_rows = len(columns[0][1])
    codes = np.empty((n_rows, len(specs)), dtype=np.int64)
    for j, ((key, values, _), spec) in enumerate(zip(columns, specs, strict=True)):
        array, missing = _as_object_values(values)
        if missing.any():
            raise ValueError(
                f"Column {key!r} contains missing values (NaN/None); impute them or "
                "declare an explicit missing-value category before fitting."
            )
        if spec.categories is not None:
            codes[:, j] = _encode_categorical(spec, array)
        else:
            codes[:, j] = _encode_numeric(spec, array)
    return codes


def decode_column(spec, codes, rng):
    """Values of one column from its codes (uniform draw within numeric bins)."""
    if spec.categories is not None:
        categories = np.empty(len(spec.categories), dtype=object)
        categories[:] = list(spec.categories)
        return categories[codes]
    left, right = spec.edges[codes], spec.edges[codes + 1]
    x = left + (right - left) * rng.random(codes.size)
    if spec.integer:
        x = np.rint(x)
    return np.clip(x, spec.low, spec.high)


def rebuild_table(specs, codes, rng, frame_info, dtype):
    """The input's container type (DataFrame or array) from sampled codes."""
    decoded = [decode_column(spec, codes[:, j], rng) for j, spec in enumerate(specs)]
    if frame_info is not None:
        import pandas as pd  # lazy: pandas is optional

        data = {}
        for spec, values in zip(specs, decoded, strict=True):
            col_dtype = frame_info["dtypes"][spec.key]
            if getattr(col_dtype, "name", None) == "category":
                data[spec.key] = pd.Categorical(values, dtype=col_dtype)
            else:
                data[spec.key] = pd.Series(values).astype(col_dtype).array
        frame = pd.DataFrame(data)
        frame.columns = frame_info["columns"]
        return frame
    out = np.empty(codes.shape, dtype=dtype)
    for j, values in enumerate(decoded):
        if np.dtype(dtype).kind == "O" and specs[j].integer:
            values = [int(v) for v in values]
        out[:, j] = values
    return out

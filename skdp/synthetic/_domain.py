"""Public domains of tabular data: parse, encode to codes, decode back.

A domain maps each column to a declaration (:class:`~skdp.schema.Numeric`,
:class:`~skdp.schema.Categorical`) or to a shorthand: its categories (a
``list``) or a numeric range ``(low, high)`` or ``(low, high, n_bins)`` (a
``tuple``); a :class:`~skdp.schema.TableSchema` gives one for every column. It
must be public knowledge, never read from the data. Numeric columns are cut
into bins on public edges (equal-width, or the declared ``bins`` edges); a code
is decoded by a uniform draw within its bin. A column has a missing level only
when its declaration says it may be missing (``nullable=True``), or, for a
shorthand, which cannot say, when ``missing="category"``.
"""

import math
import numbers
from dataclasses import dataclass, replace

import numpy as np

from ..schema import Categorical, Numeric, TableSchema, as_column
from ..schema._schema import did_you_mean
from ..utils._validation import CLIPPED_SHARE_WARNED, span_share

#: The level that undeclared categories are mapped to (``handle_unknown="other"``).
OTHER = "other"

__all__ = [
    "OTHER",
    "ColumnSpec",
    "NamedColumns",
    "as_domain",
    "as_table",
    "build_specs",
    "check_domain_keys",
    "check_not_empty",
    "is_numeric_dtype",
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
    other : bool
        Whether a categorical column has an extra level, :data:`OTHER`, that
        undeclared values are mapped to (code ``n_values``).
    missing : bool
        Whether the column has an extra last level for missing values
        (NaN/None), decoded back to a missing value.
    declared : bool
        Whether the column was declared by a :class:`~skdp.schema.Numeric` or
        :class:`~skdp.schema.Categorical` (whose ``nullable`` decides
        ``missing``) rather than by a shorthand or inferred.
    """

    key: object
    categories: tuple | None = None
    edges: np.ndarray | None = None
    low: float | None = None
    high: float | None = None
    integer: bool = False
    other: bool = False
    missing: bool = False
    declared: bool = False

    @property
    def n_values(self):
        """Number of declared values (categories or bins)."""
        if self.categories is not None:
            return len(self.categories)
        return self.edges.size - 1

    @property
    def n_levels(self):
        """Number of codes of the column (with the other and missing levels)."""
        return self.n_values + int(self.other) + int(self.missing)


@dataclass(frozen=True)
class NamedColumns:
    """A 2-D array whose columns are keyed by ``names`` (the CLI's CSV table).

    Domains, errors and logs then name the columns as the file does; the
    synthetic table comes back as a plain array.
    """

    names: tuple
    array: np.ndarray


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
    elif isinstance(X, NamedColumns):
        array = np.asarray(X.array)
        if array.ndim != 2 or array.shape[1] != len(X.names):
            raise ValueError(
                f"The table has shape {array.shape}, not (rows, {len(X.names)})."
            )
        columns = [(name, array[:, j], array.dtype) for j, name in enumerate(X.names)]
        info = None
        n_rows = array.shape[0]
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
    check_not_empty(n_rows, len(columns))
    return columns, info


def check_not_empty(n_rows, n_columns):
    """Refuse a table without rows or without columns."""
    if n_rows == 0 or n_columns == 0:
        raise ValueError(
            f"X is empty ({n_rows} rows, {n_columns} columns); "
            "DPSyntheticData needs at least one row and one column."
        )


def _numpy_dtype(dtype):
    try:
        np.dtype(dtype)
    except TypeError:
        return False
    return True


def _numeric_spec(key, spec, bins):
    if len(spec) not in (2, 3):
        raise ValueError(
            f"Domain of column {key!r} must be (low, high) or (low, high, n_bins), "
            f"got {spec!r}."
        )
    low, high = float(spec[0]), float(spec[1])
    n_bins = int(spec[2]) if len(spec) == 3 else int(bins)
    if (
        not (math.isfinite(low) and math.isfinite(high) and math.isfinite(high - low))
        or high < low
        or n_bins < 1
    ):
        raise ValueError(
            f"Domain of column {key!r} needs finite low <= high (with a finite "
            f"span high - low) and n_bins >= 1, got {spec!r}."
        )
    # Integers iff the public bounds are integers, whatever the container's
    # dtype: pandas and numpy infer a dtype from the values (one row holding
    # 2.5 turns int64 into float64), so it must not decide the binning.
    integer = all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in spec[:2]
    )
    if integer:
        n_bins = min(n_bins, int(high - low) + 1)
        edges = np.linspace(low - 0.5, high + 0.5, n_bins + 1)
    else:
        edges = np.linspace(low, high, n_bins + 1)
    return ColumnSpec(key=key, edges=edges, low=low, high=high, integer=integer)


def is_numeric_dtype(dtype):
    """Whether a column of this dtype holds numbers (for domain inference)."""
    if getattr(dtype, "name", None) == "category" or not _numpy_dtype(dtype):
        return False
    return np.dtype(dtype).kind in "iuf"


def as_domain(domain):
    """The ``domain`` parameter as a mapping ``column -> declaration``.

    A :class:`~skdp.schema.TableSchema` gives its declarations
    (:meth:`~skdp.schema.TableSchema.domain`); ``None`` gives an empty
    mapping; any other mapping is returned as it is.
    """
    if domain is None:
        return {}
    if isinstance(domain, TableSchema):
        return domain.domain()
    if not hasattr(domain, "keys"):
        raise TypeError(
            "domain must be a TableSchema or a mapping column -> declaration "
            f"(Numeric, Categorical, a list of categories or a range), got {domain!r}."
        )
    return domain


def check_domain_keys(domain, keys):
    """Refuse a domain that names columns the table does not have."""
    unknown = [key for key in domain.keys() if key not in keys]
    if unknown:
        undeclared = [key for key in keys if key not in domain]
        hints = "".join(
            f" Column {key!r} is not in the table{did_you_mean(key, undeclared)}"
            for key in unknown
            if did_you_mean(key, undeclared)
        )
        raise ValueError(
            f"domain names columns {unknown!r} that are not in X (columns: "
            f"{keys!r}).{hints}"
        )


def build_specs(
    columns, domain, bins, *, missing="error", handle_unknown="error", inferred=None
):
    """One :class:`ColumnSpec` per column from the public ``domain``.

    Parameters
    ----------
    columns : list of (key, values, dtype)
    domain : TableSchema, mapping or None
    bins : int
        Equal-width bins of a numeric column whose declaration sets none.
    missing : {"error", "category"}, default="error"
        Which columns get a missing level besides those declared
        ``nullable=True``: ``"category"`` gives one to every column declared by
        a shorthand (a list or a tuple, which cannot say) or inferred; a
        :class:`~skdp.schema.Numeric` or :class:`~skdp.schema.Categorical`
        declared ``nullable=False`` never gets one. A public choice: it depends
        on neither the data nor their dtypes.
    handle_unknown : {"error", "other", "count"}, default="error"
        ``"other"``: every categorical column gets the extra level
        :data:`OTHER` for undeclared values; a column that declares
        :data:`OTHER` itself is refused (the two would be merged, and a
        sampled table could not tell them apart). ``"count"``: the same extra
        level, unnamed, for reading tables only (the utility metrics): a
        declared :data:`OTHER` keeps its own level.
    inferred : mapping or None
        Domains learned privately (see :func:`infer_numeric_bounds`), used for
        the columns that ``domain`` leaves out.
    """
    domain = as_domain(domain)
    inferred = inferred or {}
    check_domain_keys(domain, [key for key, _, _ in columns])
    return [
        _column_spec(key, domain, inferred, dtype, bins, handle_unknown, missing)
        for key, _values, dtype in columns
    ]


def _column_spec(key, domain, inferred, dtype, bins, handle_unknown, missing):
    if key in domain:
        spec = domain[key]
    elif key in inferred:
        spec = inferred[key]
    else:
        raise ValueError(
            f"No domain given for column {key!r}. Pass domain={{{key!r}: "
            f"[categories]}} or {{{key!r}: (low, high)}}, or a TableSchema; the "
            "domain must be public knowledge. For a numeric column, "
            "infer_domain=<share of epsilon> learns its range privately instead."
        )
    if isinstance(spec, (Numeric, Categorical)):
        declared = as_column(key, spec)
        nullable = declared.nullable
        if isinstance(declared, Numeric):
            column = _declared_numeric_spec(key, declared, bins)
        else:
            column = _categorical_spec(key, declared.categories, dtype, handle_unknown)
    else:
        nullable = missing == "category"
        if isinstance(spec, tuple):
            column = _numeric_spec(key, spec, bins)
        elif isinstance(spec, (str, bytes)) or not hasattr(spec, "__iter__"):
            raise TypeError(
                f"Domain of column {key!r} must be Numeric(...), Categorical(...), a "
                f"list of categories or a (low, high[, n_bins]) tuple, got {spec!r}."
            )
        else:
            column = _categorical_spec(key, tuple(spec), dtype, handle_unknown)
    declared = isinstance(spec, (Numeric, Categorical))
    return replace(column, missing=nullable, declared=declared)


def _declared_numeric_spec(key, declared, bins):
    """The spec of a validated :class:`~skdp.schema.Numeric` declaration."""
    low, high, integer = declared.low, declared.high, declared.integer
    if declared.bins is None or isinstance(declared.bins, numbers.Integral):
        n_bins = bins if declared.bins is None else declared.bins
        return _numeric_spec(key, (low, high, int(n_bins)), bins)
    edges = np.asarray(declared.bins, dtype=float)
    if integer:
        # An integer i is in the bin [e_k, e_k+1) iff ceil(e_k) <= i, so the
        # interior edges move to ceil(e) - 0.5; a bin holding no integer goes.
        inner = np.unique(np.ceil(edges[1:-1]) - 0.5)
        inner = inner[(inner > low - 0.5) & (inner < high + 0.5)]
        edges = np.concatenate([[low - 0.5], inner, [high + 0.5]])
    return ColumnSpec(
        key=key, edges=edges, low=float(low), high=float(high), integer=integer
    )


def _categorical_spec(key, categories, dtype, handle_unknown):
    if not categories:
        raise ValueError(f"Domain of column {key!r} lists no categories.")
    if len(set(categories)) != len(categories):
        raise ValueError(f"Domain of column {key!r} repeats a category.")
    other = handle_unknown in ("other", "count")
    if handle_unknown == "other" and OTHER in categories:
        raise ValueError(
            f"Domain of column {key!r} declares a category {OTHER!r}, the level "
            f"that handle_unknown='other' maps undeclared values to: they would "
            f"be merged with the real {OTHER!r} rows. Rename that category "
            "(recode the column and its domain before fitting), or keep "
            "handle_unknown='error'."
        )
    if getattr(dtype, "name", None) == "category":
        absent = [c for c in categories if c not in set(dtype.categories)]
        if absent:
            raise ValueError(
                f"Domain of column {key!r} lists {absent!r}, which the column's "
                "categorical dtype cannot hold; add them to its categories."
            )
    return ColumnSpec(key=key, categories=categories, other=other)


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


def _missing_message(spec):
    """The error for missing values in a column without a missing level."""
    if spec.declared:
        kind = "Categorical" if spec.categories is not None else "Numeric"
        return (
            f"Column {spec.key!r} contains missing values (NaN/None) but its "
            f"declaration says it cannot ({kind}(..., nullable=False)); impute "
            f"them, or declare {kind}(..., nullable=True)."
        )
    return (
        f"Column {spec.key!r} contains missing values (NaN/None); impute them, "
        "declare the column nullable (Numeric(..., nullable=True) or "
        "Categorical(..., nullable=True)), or pass missing='category' (a missing "
        "level on every column declared by a list or a tuple) before fitting."
    )


def _encode_categorical(spec, values, handle_unknown):
    """Codes of a categorical column and how many values were undeclared."""
    lookup = {category: code for code, category in enumerate(spec.categories)}
    if handle_unknown == "other":
        lookup[OTHER] = spec.n_values  # never a declared category (_categorical_spec)
    codes = np.empty(values.shape[0], dtype=np.int64)
    n_unknown = 0
    for i, value in enumerate(values):
        code = lookup.get(value)
        if code is None:
            if handle_unknown == "count":
                codes[i] = spec.n_values
                n_unknown += 1
                continue
            if handle_unknown != "other":
                raise ValueError(
                    f"Column {spec.key!r} holds {value!r}, which is not in its "
                    f"declared categories {list(spec.categories)!r}. Add it to the "
                    "domain (the domain must be public), recode the column before "
                    "fitting, or pass handle_unknown='other' (which gives every "
                    "categorical column an extra level 'other': more cells for "
                    "the same budget, so declaring the value costs less)."
                )
            code = lookup[OTHER]
            n_unknown += 1
        codes[i] = code
    return codes, n_unknown


def _encode_numeric(spec, values, spans=None, spikes=None):
    """Codes of a numeric column and how many values were clipped.

    Text is refused even where it reads as a number (``"5"``). If ``spans``
    is a dict, it receives ``key -> (share, low, high)``, the share of the
    declared range the values span (:func:`~skdp.utils._validation.span_share`);
    if ``spikes`` is a dict, ``key -> (value, share, lo, hi)`` when a single
    value holds at least :data:`SPIKE_SHARE` of the column and shares its
    bin with other values (:func:`spread_spike`).
    """
    if values.dtype.kind in "OSU":
        text = [v for v in values if isinstance(v, str)]
        if text:
            raise ValueError(
                f"Column {spec.key!r} has a numeric domain (low, high) but holds "
                f"text (e.g. {text[:3]!r}); convert it to numbers before fitting, "
                "or declare its categories as a list instead."
            )
    try:
        x = np.asarray(values, dtype=float)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(
            f"Column {spec.key!r} has a numeric domain (low, high) but holds "
            "non-numeric values; declare its categories as a list instead."
        ) from exc
    if not np.all(np.isfinite(x)):
        raise ValueError(f"Column {spec.key!r} holds infinite values.")
    if spans is not None:
        spans[spec.key] = (span_share(x, spec.low, spec.high), spec.low, spec.high)
    n_clipped = int(np.count_nonzero((x < spec.low) | (x > spec.high)))
    x = np.clip(x, spec.low, spec.high)
    codes = np.searchsorted(spec.edges, x, side="right") - 1
    codes = np.clip(codes, 0, spec.n_values - 1).astype(np.int64)
    if spikes is not None:
        spike = spread_spike(spec, x)
        if spike is not None:
            spikes[spec.key] = spike
    return codes, n_clipped


#: A value holding at least this share of a numeric column is a spike: drawn
#: uniformly over a bin it shares with other values, it is spread over them.
SPIKE_SHARE = 0.2
#: Values :func:`spread_spike` reads (a warning needs no more).
_SPIKE_ROWS = 100_000


def spread_spike(spec, x):
    """The column's most frequent value if a spike shares its bin, else None.

    Synthetic values are drawn uniformly within a public bin, so a value
    holding at least :data:`SPIKE_SHARE` of the (first ``_SPIKE_ROWS``)
    values comes back spread over its bin's other values: an integer bin
    holding more than one integer, or any bin of a continuous column.
    For a warning to the curator, never released.

    Returns
    -------
    (value, share, lo, hi) or None
        The value, its share, and its bin's range (an integer bin's first
        and last integers).
    """
    x = x[:_SPIKE_ROWS]
    if x.size == 0:
        return None
    values, counts = np.unique(x, return_counts=True)
    top = int(np.argmax(counts))
    share = counts[top] / x.size
    if share < SPIKE_SHARE:
        return None
    code = int(np.searchsorted(spec.edges, values[top], side="right") - 1)
    code = min(max(code, 0), spec.n_values - 1)
    lo, hi = float(spec.edges[code]), float(spec.edges[code + 1])
    if spec.integer:
        # The bin's first and last integers (its edges are half-integers).
        lo, hi = math.ceil(lo) + 0.0, math.ceil(hi) - 1.0
    if hi <= lo:
        return None
    return float(values[top]), float(share), lo, hi


def encode_table(
    columns, specs, *, handle_unknown="error", report=None, spans=None, spikes=None
):
    """Codes of shape (n_rows, n_columns).

    Missing values go to the missing level (or are refused without one);
    undeclared categories go to :data:`OTHER` (or are refused); numeric values
    outside the declared range are clipped into it. If ``report`` is a dict,
    it receives ``column -> (n_clipped_or_mapped, kind)`` for the columns
    where that happened, and ``spans`` each numeric column's span of its
    range and ``spikes`` each numeric column's spread spike
    (:func:`_encode_numeric`; all for warnings to the curator, never
    released).
    """
    n_rows = len(columns[0][1])
    codes = np.empty((n_rows, len(specs)), dtype=np.int64)
    for j, ((key, values, _), spec) in enumerate(zip(columns, specs, strict=True)):
        array, missing = _as_object_values(values)
        if missing.any() and not spec.missing:
            raise ValueError(_missing_message(spec))
        present = ~missing
        column = np.full(n_rows, spec.n_levels - 1, dtype=np.int64)
        if spec.categories is not None:
            column[present], changed = _encode_categorical(
                spec, array[present], handle_unknown
            )
            kind = "mapped to 'other'"
        else:
            column[present], changed = _encode_numeric(
                spec, array[present], spans, spikes
            )
            kind = _clipped_words(changed, int(present.sum()))
            fractional = _fractional_count(spec, array[present])
            if fractional:
                kind = _with_rounding(kind if changed else None, fractional, spec)
                changed = changed or fractional
        if changed and report is not None:
            report[key] = (changed, kind)
        codes[:, j] = column
    return codes


def _clipped_words(n_clipped, n_present):
    """The report's words for clipped values; a large share hints at units."""
    words = "clipped into the range"
    if n_clipped and n_clipped >= CLIPPED_SHARE_WARNED * n_present:
        words += (
            f" ({n_clipped / n_present:.0%} of its values: was the range "
            "declared in other units?)"
        )
    return words


def _fractional_count(spec, values):
    """How many values of an integer column (integer bounds) are not whole."""
    if not spec.integer or values.size == 0:
        return 0
    numbers = np.asarray(values, dtype=float)
    return int(np.count_nonzero(numbers != np.round(numbers)))


def _with_rounding(clipped, fractional, spec):
    """The report's words for a column whose integer bounds round its values."""
    rounding = (
        "not whole, sampled back as whole numbers (integer bounds "
        f"declare an integer column; write ({spec.low:g}.0, {spec.high:g}.0) for "
        "a continuous one)"
    )
    if clipped is None:
        return rounding
    return f"{clipped}, and {fractional} {rounding}"


def _missing_value(dtype):
    if _numpy_dtype(dtype) and np.dtype(dtype).kind in "fc":
        return np.nan
    return None


def decode_column(spec, codes, rng, dtype=None):
    """Values of one column from its codes (uniform draw within numeric bins)."""
    values = np.empty(codes.size, dtype=object)
    regular = codes < spec.n_values
    if spec.categories is not None:
        categories = np.empty(spec.n_values, dtype=object)
        categories[:] = list(spec.categories)
        values[regular] = categories[codes[regular]]
        if spec.other:
            values[codes == spec.n_values] = OTHER
    else:
        c = codes[regular]
        left, right = spec.edges[c], spec.edges[c + 1]
        if spec.integer:
            # A uniform integer among those the encoder puts in the bin
            # (edges[c] <= i < edges[c + 1]), so decoding never changes a bin.
            first, stop = np.ceil(left), np.ceil(right)
            x = first + np.floor((stop - first) * rng.random(c.size))
            x = np.minimum(x, stop - 1)
        else:
            x = left + (right - left) * rng.random(c.size)
        x = np.clip(x, spec.low, spec.high)
        if not spec.missing:
            return x
        values[regular] = x
    if spec.missing:
        values[codes == spec.n_levels - 1] = _missing_value(dtype)
    return values


def _output_dtype(dtype, specs):
    """The released dtype of columns of input ``dtype`` under ``specs``.

    The input's dtype where the specs' values fit it; otherwise one decided
    by the specs alone: object for strings (their width would be the longest
    input value's), the :data:`OTHER` level and missing values among
    non-numbers; float64 for numbers with a missing level or a continuous
    range in an integer or boolean column; int64 for an integer range too
    wide for a narrow integer dtype.
    """
    if not _numpy_dtype(dtype):
        return dtype  # pandas extension dtypes (string, nullable) hold any level
    dtype = np.dtype(dtype)
    numeric = all(spec.categories is None for spec in specs)
    if dtype.kind in "US" or any(spec.other for spec in specs):
        return np.dtype(object)
    if dtype.kind in "iub":
        if any(spec.missing for spec in specs) or any(
            spec.categories is None and not spec.integer for spec in specs
        ):
            return np.dtype(float) if numeric else np.dtype(object)
        if dtype.kind == "b":
            return dtype
        return _integer_dtype_for(dtype, specs)
    return dtype


def _integer_dtype_for(dtype, specs):
    """``dtype`` if every numeric spec's range fits it, else int64."""
    info = np.iinfo(dtype)
    fits = all(
        spec.categories is not None or (info.min <= spec.low and spec.high <= info.max)
        for spec in specs
    )
    return np.dtype(dtype) if fits else np.dtype(np.int64)


def rebuild_table(specs, codes, rng, frame_info, dtype):
    """The input's container type (DataFrame or array) from sampled codes.

    Everything about the output comes from the public specs, never from what
    the input's container learned from its values: a categorical column's
    categories are the declared ones (plus :data:`OTHER`), not those of the
    input's dtype (``astype("category")`` takes them from the data, so an
    undeclared value would be released by name), and a string array comes back
    as an object array (its width would be that of the longest input value,
    and a declared category longer than it would be cut); the other types
    follow :func:`_output_dtype`.
    """
    if frame_info is not None:
        import pandas as pd  # lazy: pandas is optional

        data = {}
        for j, spec in enumerate(specs):
            col_dtype = frame_info["dtypes"][spec.key]
            values = decode_column(spec, codes[:, j], rng, col_dtype)
            if getattr(col_dtype, "name", None) == "category":
                if spec.categories is not None:
                    levels = [*spec.categories] + ([OTHER] if spec.other else [])
                    public = pd.CategoricalDtype(levels, ordered=col_dtype.ordered)
                    data[spec.key] = pd.Categorical(values, dtype=public)
                else:
                    data[spec.key] = pd.Series(values, dtype=object).array
            else:
                target = _output_dtype(col_dtype, [spec])
                data[spec.key] = pd.Series(values, dtype=object).astype(target).array
        frame = pd.DataFrame(data)
        frame.columns = frame_info["columns"]
        return frame
    dtype = _output_dtype(dtype, specs)
    out = np.empty(codes.shape, dtype=dtype)
    for j, spec in enumerate(specs):
        values = decode_column(spec, codes[:, j], rng, dtype)
        if dtype.kind == "O" and spec.integer:
            values = [v if v is None else int(v) for v in values]
        out[:, j] = values
    return out

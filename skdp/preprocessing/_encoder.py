"""SchemaEncoder: a table's design matrix from its public schema alone."""

import math
import numbers
import warnings
from collections.abc import Mapping

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..exceptions import ClippedValuesWarning
from ..schema import Categorical, Numeric, TableSchema
from ..utils._sklearn import StrOptions, fit_context
from ..utils._validation import (
    CLIPPED_SHARE_WARNED,
    span_share,
    user_stacklevel,
    warn_wide_bounds,
)

__all__ = ["SchemaEncoder"]

# How many offending values an error message lists.
_SHOWN_VALUES = 5
# The output for undeclared categories, as an error about output names says it.
_OTHER_OUTPUT = (
    "its output for undeclared values (handle_unknown='other'; with "
    "handle_unknown='ignore' they have none)"
)


def _warn_clipped(clipped, schema):
    """One :class:`ClippedValuesWarning` for the columns clipped the most.

    ``clipped``: column name -> shares of its present values below and above
    its declared bounds; the columns whose two shares add up to at least
    ``CLIPPED_SHARE_WARNED`` are named with their shares, the side, and
    bounds.
    """
    heavy = {
        name: shares
        for name, shares in clipped.items()
        if sum(shares) >= CLIPPED_SHARE_WARNED
    }
    if not heavy:
        return
    details = "; ".join(
        f"{name!r}: {_sides(*shares)} "
        f"({schema.columns[name].low:g}, {schema.columns[name].high:g})"
        for name, shares in heavy.items()
    )
    warnings.warn(
        f"Values clipped into their declared bounds: {details}. A bound that "
        "cuts off this much of a column was often declared in other units "
        "(a fraction for a percentage, thousands for units); check it.",
        ClippedValuesWarning,
        stacklevel=user_stacklevel(),
    )


def _sides(below, above):
    """``"12% above"``, ``"3% below and 9% above"``: where values left the bounds."""
    parts = [
        f"{share:.0%} {side}"
        for share, side in ((below, "below"), (above, "above"))
        if share > 0
    ]
    return " and ".join(parts)


def _is_frame(X):
    return hasattr(X, "columns") and hasattr(X, "iloc")


def _is_missing(value):
    """``None``, a float NaN or a pandas missing marker (``NA``, ``NaT``)."""
    if value is None:
        return True
    if isinstance(value, float | np.floating):
        return bool(np.isnan(value))
    return type(value).__name__ in ("NAType", "NaTType")


def _as_schema(schema):
    if isinstance(schema, TableSchema):
        return schema
    if isinstance(schema, Mapping):
        return TableSchema(schema)
    raise ValueError(
        "schema must be declared: a TableSchema, or a mapping column -> "
        "declaration, written from public knowledge, never from the data."
    )


def _bin_edges(spec):
    """The public bin edges of a binned numeric column."""
    if isinstance(spec.bins, tuple):
        return np.asarray(spec.bins, dtype=float)
    return np.linspace(spec.low, spec.high, int(spec.bins) + 1)


def _edge_labels(edges):
    """Labels of increasing bin edges: ``{:g}``, or round-trip if that repeats one.

    ``{:g}`` keeps six significant digits, so close edges far from 0 (say
    1000000 and 1000000.5) would read alike; the shortest round-trip form
    (``repr``) tells any two distinct floats apart.
    """
    labels = [f"{edge:g}" for edge in edges]
    if len(set(labels)) < len(labels):
        labels = [repr(float(edge)) for edge in edges]
    return labels


def _check_unique_names(outputs):
    """Refuse output names given twice, naming the two declarations that give them.

    ``outputs`` holds ``(name, column, what)`` for each output column: its
    name, the declared column it comes from and which of that column's
    outputs it is (for the message).
    """
    first = {}
    for name, column, what in outputs:
        if name not in first:
            first[name] = (column, what)
            continue
        column0, what0 = first[name]
        where = (
            f"column {column!r} names two of its outputs {name!r}: {what0} and {what}"
            if column == column0
            else f"column {column0!r} ({what0}) and column {column!r} ({what}) "
            f"both name an output {name!r}"
        )
        raise ValueError(
            f"The schema's output feature names are not unique: {where}. Rename "
            "a column or a category in the schema (output columns are named "
            "<column>_<category>, <column>_other and <column>_missing); "
            "scikit-learn refuses a DataFrame with repeated column names, and "
            "coefficients read by name would be ambiguous."
        )


def _numeric_values(name, column):
    """A column as float, NaN where missing; error naming it if not numeric.

    Text is refused even where it reads as a number (``"5"``): a numeric
    column holding strings is a table that was not converted, and silently
    reading it would hide that.
    """
    dtype = getattr(column, "dtype", None)
    if dtype is None or getattr(dtype, "kind", "O") in "OSU":
        text = [v for v in np.asarray(column, dtype=object) if isinstance(v, str)]
        if text:
            raise ValueError(
                f"Column {name!r} is declared numeric but holds text (e.g. "
                f"{text[:_SHOWN_VALUES]!r}); convert it to numbers before fitting "
                "or declare the column categorical."
            )
    try:
        if hasattr(column, "to_numpy"):
            return column.to_numpy(dtype=float, na_value=np.nan)
        return np.asarray(column, dtype=float)
    except (TypeError, ValueError):
        pass
    values = np.asarray(column, dtype=object)
    out = np.empty(values.shape[0])
    bad = []
    for i, value in enumerate(values):
        if _is_missing(value):
            out[i] = np.nan
            continue
        try:
            out[i] = float(value)
        except (TypeError, ValueError):
            out[i] = np.nan
            bad.append(value)
    if bad:
        raise ValueError(
            f"Column {name!r} is declared numeric but holds non-numeric values "
            f"(e.g. {bad[:_SHOWN_VALUES]!r}); convert them or declare the column "
            "categorical."
        )
    return out


def _range_hint(spec):
    """A hint for two numbers declared as a list: a range was likely meant."""
    values = spec.categories
    numeric = all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values
    )
    if len(values) != 2 or not numeric or not values[0] < values[1]:
        return ""
    return (
        f" A list declares categories; if this column is numeric in the range "
        f"{values[0]!r} to {values[1]!r}, declare the tuple {tuple(values)!r}."
    )


def _check_some_bins(schema):
    """Refuse ``numeric="bins"`` when no numeric feature declares bins.

    Every numeric column would be scaled, not binned, which is not what
    was asked for.
    """
    numeric = [n for n in schema.features if isinstance(schema.columns[n], Numeric)]
    if numeric and all(schema.columns[n].bins is None for n in numeric):
        raise ValueError(
            f'numeric="bins", but no numeric column declares bins ({_shown(numeric)}): '
            "each would be scaled, not binned. Declare public bins on the columns "
            "to bin, e.g. Numeric(0, 100, bins=10) (ten equal-width bins) or "
            'bins=[0, 18, 65, 100] (edges), or use numeric="scale".'
        )


def _check_label_not_a_feature(schema, X, y):
    """Refuse a label that is one of the declared features of ``X``.

    Fitting on a whole frame with the label declared among the features
    gives a model that reads its own label; ``target=`` keeps it out. The
    label is recognised as a pandas Series named like a declared feature of
    the frame ``X`` and holding the same values (a label derived from a
    feature, say ``y = (X["x"] > 0)``, keeps its name but not its values).
    """
    name = getattr(y, "name", None)
    if name is None or not _is_frame_like_series(y) or not _is_frame(X):
        return
    if name not in schema.features or name not in X.columns:
        return
    if np.array_equal(np.asarray(X[name], dtype=object), np.asarray(y, dtype=object)):
        raise ValueError(
            f"The label y is the column {name!r}, which the schema declares as a "
            f"feature: the model would read its own label. Declare "
            f"TableSchema(..., target={name!r}) (the column is then not a "
            "feature), or leave it out of the declared columns."
        )


def _is_frame_like_series(y):
    """Whether ``y`` is a pandas Series (by duck type: pandas is optional)."""
    return hasattr(y, "name") and hasattr(y, "to_numpy") and getattr(y, "ndim", 0) == 1


def _shown(values):
    """The first few of ``values``, for an error message."""
    shown = list(values[:_SHOWN_VALUES])
    more = len(values) - len(shown)
    return f"{shown!r}" + (f" and {more} more" if more > 0 else "")


def _shown_categories(spec):
    """The declared categories, the first few, for an error message."""
    return _shown(spec.categories)


def _type_hint(spec, values):
    """A hint when undeclared values match declared ones as text only.

    ``["0", "1"]`` declared for a column of integers (or the reverse) reads
    as the same values in a message, so the types are named.
    """
    declared = {str(c): c for c in spec.categories}
    for value in values:
        twin = declared.get(str(value))
        if twin is not None and type(twin) is not type(value):
            return (
                f" The column holds {type(value).__name__} values and the "
                f"categories are declared as {type(twin).__name__} "
                f"({twin!r} is not {value!r}): declare them with the column's type."
            )
    return ""


def _category_codes(column, categories):
    """Index of each value in ``categories``; -1 if unknown, -2 if missing."""
    index = {category: i for i, category in enumerate(categories)}
    values = np.asarray(column, dtype=object)
    try:  # pandas is optional: its factorize is only a faster path
        import pandas as pd
    except ImportError:
        pd = None
    if pd is not None:
        inverse, uniques = pd.factorize(values, use_na_sentinel=True)
        lookup = np.array(
            [-2 if _is_missing(u) else index.get(u, -1) for u in uniques] + [-2],
            dtype=np.intp,
        )
        return lookup[inverse]  # the sentinel -1 picks the trailing "missing"
    return np.fromiter(
        (-2 if _is_missing(v) else index.get(v, -1) for v in values),
        dtype=np.intp,
        count=values.shape[0],
    )


class SchemaEncoder(TransformerMixin, BaseEstimator):
    """Encode a table into a design matrix from its declared schema alone.

    Numeric columns are clipped to their declared ``(low, high)`` (a
    :class:`~skdp.exceptions.ClippedValuesWarning` names any column with 5% or
    more of its values beyond them: bounds in other units) and mapped
    linearly to [-1, 1] (or, with ``numeric="bins"``, one-hot on their
    declared public bins); categorical columns are one-hot on their declared
    categories, in the declared order. A nullable column gets one more output,
    its missing indicator: a missing numeric value is encoded as 0 (the middle
    of [-1, 1]) with the indicator at 1, a missing category as all zeros with
    the indicator at 1. Nothing is read from the data but its column names.

    Every declared column contributes at most 1 to the squared norm of an
    output row, so rows have norm at most ``row_norm_ = sqrt(n_columns)``
    whatever the input (values beyond the bounds, unknown categories under
    every policy, missing values), a bound to give a private estimator as its
    ``row_norm``.

    Output columns are named ``<column>_<category>``, ``<column>_[lo, hi)``
    per bin, ``<column>`` for a scaled value, ``<column>_other`` and
    ``<column>_missing`` (:meth:`get_feature_names_out`). Two outputs must
    not share a name: ``fit`` refuses a schema where they would (column
    ``"a"`` with category ``"b_c"`` beside column ``"a_b"`` with category
    ``"c"``; a declared category ``"other"`` under ``handle_unknown="other"``),
    naming both columns, as scikit-learn's ``ColumnTransformer`` refuses
    repeated output names.

    Parameters
    ----------
    schema : TableSchema or mapping
        The public declaration (a mapping is read as ``TableSchema(mapping)``).
        Its ``features`` are encoded, in declaration order; the target and any
        undeclared column of a DataFrame are ignored.
    numeric : {"scale", "bins"}, default="scale"
        ``"scale"``: every numeric column to [-1, 1] on its bounds.
        ``"bins"``: columns declared with ``bins`` are one-hot on those public
        bins (values beyond the bounds fall in the end bins); the others are
        scaled.
    handle_unknown : {"error", "ignore", "other"}, default="error"
        A value of a categorical column that is not a declared category:
        ``"error"`` raises a ``ValueError`` naming the column; ``"ignore"``
        encodes it as all zeros; ``"other"`` adds one output per categorical
        column, set to 1 for such values.

    Attributes
    ----------
    schema_ : TableSchema
        The validated schema.
    row_norm_ : float
        Public bound on the L2 norm of every output row, ``sqrt(n_columns)``
        (from the declaration only).
    classes_ : ndarray or None
        The schema's declared label classes.
    n_features_in_ : int
        Number of declared feature columns.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        The declared feature columns, in the order read from a 2-d array.

    Notes
    -----
    **Privacy.** Free: a per-record map whose parameters are public; ``fit``
    reads only the column names (a DataFrame) or the number of columns (an
    array). Clipping and unknown categories are silent under the
    non-``"error"`` policies (saying which rows were affected would be a
    release); errors about the data (a missing value in a column not declared
    nullable, an unknown category under ``"error"``) are for the data owner.

    Examples
    --------
    >>> from skdp.preprocessing import SchemaEncoder
    >>> from skdp.schema import TableSchema
    >>> schema = TableSchema({"age": (17, 90), "sex": ["F", "M"]})
    >>> enc = SchemaEncoder(schema).fit([[17, "F"]])
    >>> enc.transform([[90, "M"], [17, "F"]])
    array([[ 1.,  0.,  1.],
           [-1.,  1.,  0.]])
    >>> round(enc.row_norm_, 4)
    1.4142
    """

    _parameter_constraints = {
        "schema": [TableSchema, Mapping, None],
        "numeric": [StrOptions({"scale", "bins"})],
        "handle_unknown": [StrOptions({"error", "ignore", "other"})],
    }

    def __init__(self, schema=None, *, numeric="scale", handle_unknown="error"):
        self.schema = schema
        self.numeric = numeric
        self.handle_unknown = handle_unknown

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        tags.requires_fit = True
        return tags

    def _blocks(self, schema):
        """``(name, spec, binned)`` for each feature, in declaration order."""
        return [
            (
                name,
                schema.columns[name],
                isinstance(schema.columns[name], Numeric)
                and self.numeric == "bins"
                and schema.columns[name].bins is not None,
            )
            for name in schema.features
        ]

    def row_norm_bound(self):
        """The public bound on output row norms, from the parameters alone.

        Needs no fit and no data: ``sqrt(n_columns)``, each declared column
        contributing at most 1 to the squared norm.

        Returns
        -------
        float
        """
        self._validate_params()
        return math.sqrt(len(_as_schema(self.schema).features))

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X=None, y=None):
        """Check the declared columns are present; read no value.

        Parameters
        ----------
        X : DataFrame, array-like of shape (n_samples, n_features) or None
            A DataFrame must hold every declared feature (by name); an array
            must have one column per feature, in declaration order. ``None``:
            nothing to check.
        y : array-like or None, default=None
            Read only to refuse a label that is a declared feature of ``X``
            (a pandas Series with its name and values).

        Returns
        -------
        self : SchemaEncoder

        Raises
        ------
        ValueError
            ``numeric="bins"`` and no numeric feature declares ``bins``; a
            declared feature is absent from ``X``; two output columns
            would share a name (see :meth:`get_feature_names_out`), the
            message naming the columns that give it; or ``y`` is a declared
            feature of ``X`` (the label would be a feature).
        """
        schema = _as_schema(self.schema)
        if self.numeric == "bins":
            _check_some_bins(schema)
        _check_unique_names(self._outputs(schema))
        if X is not None:
            self._check_layout(schema, X)
        _check_label_not_a_feature(schema, X, y)
        self.schema_ = schema
        self.row_norm_ = math.sqrt(len(schema.features))
        self.classes_ = None if schema.classes is None else np.asarray(schema.classes)
        self.n_features_in_ = len(schema.features)
        self.feature_names_in_ = np.asarray(schema.features, dtype=object)
        return self

    @staticmethod
    def _check_layout(schema, X):
        if _is_frame(X):
            schema.check_columns(list(X.columns))
            return
        shape = np.shape(X)
        if len(shape) != 2 or shape[1] != len(schema.features):
            raise ValueError(
                f"X has shape {shape}; the schema declares {len(schema.features)} "
                f"features {schema.features!r}: pass a DataFrame with those "
                "columns, or a 2-d array with them in that order."
            )

    def _columns(self, X):
        """Yield each declared feature's values, by name or by position."""
        schema = self.schema_
        self._check_layout(schema, X)
        if _is_frame(X):
            return [X[name] for name in schema.features]
        X = np.asarray(X) if hasattr(X, "dtype") else np.asarray(X, dtype=object)
        return [X[:, j] for j in range(X.shape[1])]

    def transform(self, X):
        """Encode ``X`` by the schema.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_features_out)
            Rows of norm at most ``row_norm_``.

        Raises
        ------
        ValueError
            A declared column is absent; a column not declared nullable holds
            a missing value; a numeric column holds text; a categorical
            column holds an undeclared value under ``handle_unknown="error"``.
            Each message names the column.
        """
        check_is_fitted(self)
        columns = self._columns(X)
        clipped, spans = {}, {}
        blocks = [
            self._encode(name, spec, binned, column, clipped, spans)
            for (name, spec, binned), column in zip(
                self._blocks(self.schema_), columns, strict=True
            )
        ]
        _warn_clipped(clipped, self.schema_)
        warn_wide_bounds(
            {
                name: (
                    share,
                    self.schema_.columns[name].low,
                    self.schema_.columns[name].high,
                )
                for name, share in spans.items()
            }
        )
        n_rows = len(columns[0]) if columns else 0
        if not blocks:
            return np.zeros((n_rows, 0))
        return np.hstack(blocks)

    def _encode(self, name, spec, binned, column, clipped, spans):
        """One column's output block.

        A numeric column's share of values beyond its bounds goes to
        ``clipped``, the share of its range they span to ``spans``.
        """
        if isinstance(spec, Numeric):
            values = _numeric_values(name, column)
            missing = np.isnan(values)
            self._check_missing(name, spec, missing)
            infinite = np.isinf(values)
            if infinite.any():
                raise ValueError(
                    f"Column {name!r} holds {int(infinite.sum())} infinite "
                    "value(s); replace them (a finite value beyond the declared "
                    "range is clipped into it) or mark them missing in a "
                    "nullable column."
                )
            low, high = float(spec.low), float(spec.high)
            present = values[~missing]
            if present.size:
                below = np.count_nonzero(present < low) / present.size
                above = np.count_nonzero(present > high) / present.size
                clipped[name] = (below, above)
                spans[name] = span_share(present, low, high)
            values = np.clip(np.where(missing, low, values), low, high)
            if binned:
                edges = _bin_edges(spec)
                codes = np.searchsorted(edges[1:-1], values, side="right")
                out = np.zeros((values.size, edges.size - 1))
                out[np.arange(values.size), codes] = 1.0
                out[missing] = 0.0
            else:
                out = (2.0 * (values - low) / (high - low) - 1.0)[:, None]
                out[missing] = 0.0
            return self._with_indicator(spec, out, missing)
        codes = _category_codes(column, spec.categories)
        missing = codes == -2
        self._check_missing(name, spec, missing)
        unknown = codes == -1
        if self.handle_unknown == "error" and np.any(unknown):
            values = np.asarray(column, dtype=object)[unknown]
            shown = list(dict.fromkeys(values.tolist()))[:_SHOWN_VALUES]
            raise ValueError(
                f"Column {name!r} holds values that are not declared categories "
                f"(e.g. {shown!r}; declared: {_shown_categories(spec)}); declare "
                f"them in the schema, or pass handle_unknown='ignore' or "
                f"'other' (to SchemaEncoder or make_private_pipeline)."
                f"{_range_hint(spec)}{_type_hint(spec, shown)}"
            )
        width = len(spec.categories) + int(self.handle_unknown == "other")
        out = np.zeros((codes.size, width))
        known = codes >= 0
        out[np.flatnonzero(known), codes[known]] = 1.0
        if self.handle_unknown == "other":
            out[unknown, -1] = 1.0
        return self._with_indicator(spec, out, missing)

    @staticmethod
    def _check_missing(name, spec, missing):
        if not spec.nullable and np.any(missing):
            raise ValueError(
                f"Column {name!r} has {int(np.sum(missing))} missing value(s) but "
                "is not declared nullable: declare it with nullable=True, or "
                "impute it with a public constant first."
            )

    @staticmethod
    def _with_indicator(spec, out, missing):
        if not spec.nullable:
            return out
        return np.hstack([out, missing[:, None].astype(float)])

    def _outputs(self, schema):
        """``(name, column, what)`` of each output column, in output order.

        ``name`` is the output's feature name, ``column`` the declared column
        it comes from and ``what`` which of that column's outputs it is.
        """
        outputs = []
        for name, spec, binned in self._blocks(schema):
            if isinstance(spec, Categorical):
                outputs += [
                    (f"{name}_{category}", name, f"its category {category!r}")
                    for category in spec.categories
                ]
                if self.handle_unknown == "other":
                    outputs.append((f"{name}_other", name, _OTHER_OUTPUT))
            elif binned:
                labels = _edge_labels(_bin_edges(spec))
                outputs += [
                    (f"{name}_[{lo}, {hi})", name, f"its bin [{lo}, {hi})")
                    for lo, hi in zip(labels[:-1], labels[1:], strict=True)
                ]
            else:
                outputs.append((str(name), name, "its scaled value"))
            if spec.nullable:
                outputs.append((f"{name}_missing", name, "its missing indicator"))
        return outputs

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns.

        Parameters
        ----------
        input_features : ignored
            The names come from the schema.

        Returns
        -------
        ndarray of str
            ``name`` for a scaled numeric column, ``name_<category>`` per
            category, ``name_[lo, hi)`` per bin (edges as ``{:g}``, or in
            full where that would read two edges alike), ``name_other`` and
            ``name_missing`` for the unknown and missing outputs. Unique:
            ``fit`` refuses a schema that would repeat a name.
        """
        check_is_fitted(self)
        return np.asarray(
            [name for name, _, _ in self._outputs(self.schema_)], dtype=object
        )

"""Canaries: the neighbouring data sets and the score an audit compares.

Each builder returns ``(X_in, y_in, X_out, y_out, score)``: the data set
holding the canary, its replace-one neighbour, and ``score(fitted) -> float``
(larger meaning "canary in"). The builders read the data freely: an audit is
an evaluation tool, not a private release.
"""

from collections.abc import Mapping

import numpy as np
from sklearn.pipeline import Pipeline

from ..preprocessing import SchemaEncoder
from ..preprocessing._encoder import _as_schema
from ..schema import Numeric
from ._policy import DEFAULT_AUDIT_POLICY

__all__ = [
    "canary_norm",
    "check_groups_declared",
    "linear_canary",
    "schema_canary",
    "schema_encoder_of",
    "synthetic_canary",
    "user_canary",
]


def check_groups_declared(estimator, fit_params):
    """Refuse to audit an estimator that would read its group set from the data.

    Parameters
    ----------
    estimator : estimator
    fit_params : dict

    Raises
    ------
    ValueError
        If the estimator has a ``groups`` parameter left at ``None`` while
        ``sensitive_features`` is passed to ``fit``.
    """
    params = estimator.get_params(deep=False)
    if (
        "groups" in params
        and params["groups"] is None
        and fit_params.get("sensitive_features") is not None
    ):
        raise ValueError(
            "The estimator has groups=None: every fit would read the set of "
            "groups from sensitive_features, which privacy_spent_ does not "
            "cover. Declare the public set with groups=[...] before auditing."
        )


def canary_norm(estimator):
    """The norm of a linear canary: the estimator's ``row_norm``, else 1.

    ``row_norm`` absent or ``None`` (no declared row bound): a unit canary.
    """
    radius = estimator.get_params(deep=False).get("row_norm", 1.0)
    return 1.0 if radius is None else float(radius)


def linear_canary(estimator, X, y):
    """Coefficient attack on a linear classifier, on a fresh feature column.

    Parameters
    ----------
    estimator : estimator
        A classifier exposing ``coef_`` once fitted; its ``row_norm``
        parameter (1 if absent) is the canary's norm.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)

    Returns
    -------
    X_in, y_in, X_out, y_out : ndarray
        ``X`` with an extra all-zero column; the last row is replaced by
        ``row_norm`` (in) or ``-row_norm`` (out) in that column, zero
        elsewhere, labelled ``classes[1]``.
    score : callable
        The fitted model's coefficient on the extra column (row of
        ``classes[1]``; row 0 for a binary model).
    """
    if y is None:
        raise ValueError("canary='auto' needs labels y (a linear classifier).")
    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError("X must be 2-d with at least two rows.")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y has shape {y.shape}; expected ({X.shape[0]},).")
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError("canary='auto' needs at least two classes in y.")
    radius = canary_norm(estimator)
    n = X.shape[0]
    base = np.hstack([X, np.zeros((n, 1))])
    labels = y.copy()
    labels[-1] = classes[1]
    X_in, X_out = base.copy(), base.copy()
    X_in[-1] = 0.0
    X_in[-1, -1] = radius
    X_out[-1] = 0.0
    X_out[-1, -1] = -radius
    row = 0 if classes.size == 2 else 1

    def score(est):
        return est.coef_[row, -1]

    return X_in, labels, X_out, labels, score


def _is_frame(X):
    return type(X).__module__.split(".")[0] == "pandas" and hasattr(X, "columns")


def _column(table, key, position):
    if _is_frame(table):
        return table[key].to_numpy()
    return np.asarray(table)[:, position]


def _measured_sets(est):
    """Column sets whose marginals the fitted model measured (released)."""
    for name in ("selected_", "tree_"):
        sets = getattr(est, name, None)
        if sets:
            return [tuple(columns) for columns in sets]
    return []


def _rarest_and_commonest(values, categories):
    """The category least frequent in ``values`` and the most frequent one."""
    counts = np.array([np.count_nonzero(values == c) for c in categories])
    return categories[int(np.argmin(counts))], categories[int(np.argmax(counts))]


def _categorical_table(X):
    """``X`` as a frame or a 2-d array of at least two rows; ``(X, is_frame)``."""
    frame = _is_frame(X)
    if not frame:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-d, got shape {X.shape}.")
        if X.dtype.kind in "US":
            # Fixed-width strings would truncate a longer canary category.
            X = X.astype(object)
    if X.shape[0] < 2:
        raise ValueError("X must have at least two rows.")
    return X, frame


def _synthetic_canary_pair(X, keys, domain):
    """Each column's rarest category among the other rows, and its commonest."""
    canary, other = [], []
    for position, key in enumerate(keys):
        categories = domain.get(key)
        if not isinstance(categories, list | np.ndarray):
            raise ValueError(
                f"canary='auto' for synthetic data needs a categorical domain "
                f"(a list) for every column; column {key!r} has "
                f"{categories!r}. Pass canary=(record, None) and a score instead."
            )
        values = _column(X, key, position)[:-1]
        rarest, commonest = _rarest_and_commonest(values, categories)
        canary.append(rarest)
        other.append(commonest)
    if canary == other:
        raise ValueError(
            "Every column has a single category: no canary can differ from "
            "its neighbour."
        )
    return canary, other


def _synthetic_score(keys, canary, n_synthetic):
    """``score(fitted)``: the canary's shares in ``n_synthetic`` sampled rows."""
    index = {key: position for position, key in enumerate(keys)}

    def score(est):
        sample = est.sample(int(n_synthetic))
        hits = np.column_stack(
            [
                _column(sample, key, position) == canary[position]
                for position, key in enumerate(keys)
            ]
        )
        total = hits.mean(axis=0).sum()
        for columns in _measured_sets(est):
            if len(columns) > 1 and all(key in index for key in columns):
                positions = [index[key] for key in columns]
                total += np.mean(np.all(hits[:, positions], axis=1))
        return float(total)

    return score


def synthetic_canary(estimator, X, n_synthetic=None, policy=DEFAULT_AUDIT_POLICY):
    """A record in an otherwise empty cell, scored by its synthetic frequency.

    Every column must have a categorical domain (a list) in the estimator's
    ``domain``. In each column the canary takes the category least frequent
    among the other rows (so its whole cell, and usually each of its 1-way
    cells, is empty without it); its neighbour takes the most frequent one.

    Parameters
    ----------
    estimator : estimator
        With a ``domain`` parameter and, once fitted, ``sample(n)`` and
        ``tree_`` (pairs of column keys whose 2-way marginals were measured).
    X : ndarray or DataFrame of shape (n_samples, n_features)
    n_synthetic : int or None, default=None
        Rows sampled from each fitted model; ``None``: the larger of the
        policy's ``synthetic_samples`` and ``synthetic_samples_per_row``
        times ``n_samples``.
    policy : AuditPolicy, default=DEFAULT_AUDIT_POLICY

    Returns
    -------
    X_in, None, X_out, None, score
        ``score(fitted)``: in a sample of ``n_synthetic`` synthetic rows, the
        sum over columns of the share of rows carrying the canary's value,
        plus, for each measured set of columns (``selected_``, else
        ``tree_``), the share carrying the canary's values on all of them.
    """
    domain = estimator.get_params(deep=False).get("domain")
    if not isinstance(domain, Mapping):
        raise ValueError(
            "canary='auto' for synthetic data needs the estimator's public "
            "domain (a mapping column -> list of categories)."
        )
    X, frame = _categorical_table(X)
    n_rows, n_columns = X.shape
    keys = list(X.columns) if frame else list(range(n_columns))
    canary, other = _synthetic_canary_pair(X, keys, domain)
    X_in, X_out = X.copy(), X.copy()
    if frame:
        for position in range(n_columns):
            X_in.iloc[-1, position] = canary[position]
            X_out.iloc[-1, position] = other[position]
    else:
        X_in[-1] = np.asarray(canary, dtype=X.dtype)
        X_out[-1] = np.asarray(other, dtype=X.dtype)
    if n_synthetic is None:
        n_synthetic = max(
            policy.synthetic_samples, policy.synthetic_samples_per_row * n_rows
        )
    return X_in, None, X_out, None, _synthetic_score(keys, canary, n_synthetic)


def _with_last_row(X, record):
    """A copy of the frame ``X`` whose last row is ``record`` (a mapping)."""
    out = X.copy()
    position = len(out) - 1
    for key, value in record.items():
        column = out.columns.get_loc(key)
        integral = isinstance(value, int | np.integer) or (
            isinstance(value, float) and value.is_integer()
        )
        if out.dtypes.iloc[column].kind in "iu" and not integral:
            out[key] = out[key].astype(float)  # a fractional canary value
        out.iloc[position, column] = value
    return out


def _record(record, columns):
    """A mapping column -> value from a dict, a Series or a one-row frame."""
    if _is_frame(record):
        if len(record) != 1:
            raise ValueError("A canary frame must have exactly one row.")
        record = record.iloc[0]
    if hasattr(record, "to_dict"):
        record = record.to_dict()
    if not isinstance(record, Mapping):
        raise ValueError(
            "With a DataFrame, the canary record must be a dict, a Series or a "
            "one-row DataFrame of column -> value."
        )
    unknown = [key for key in record if key not in set(columns)]
    if unknown:
        raise ValueError(f"The canary has columns {unknown!r} that X has not.")
    return dict(record)


def _signed_decision(est, row, classes, label):
    out = np.asarray(est.decision_function(row))
    k = int(np.searchsorted(classes, label))
    if out.ndim == 1 or out.shape[1] == 1:
        return out.ravel()[0] * (1.0 if k == classes.size - 1 else -1.0)
    return out[0, k]


def user_canary(X, y, canary, score):
    """Datasets for a user's canary ``(x, y)``: ``D`` is ``(X, y)``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features) or DataFrame
    y : array-like of shape (n_samples,) or None
    canary : tuple (x, y_c)
        With a DataFrame ``X``, ``x`` is a dict, a Series or a one-row frame
        (column -> value; columns left out keep the last row's values).
    score : callable or None
        ``None`` (supervised only): the decision function at the canary,
        signed towards its label.

    Returns
    -------
    X_in, y_in, X_out, y_out, score
    """
    x_c, y_c = canary
    if _is_frame(X):
        X_in = _with_last_row(X, _record(x_c, X.columns))
        x_row = X_in.iloc[[-1]]
    else:
        X = np.asarray(X, dtype=float)
        x_c = np.asarray(x_c, dtype=float).ravel()
        if X.ndim != 2 or x_c.size != X.shape[1]:
            raise ValueError(
                f"The canary has {x_c.size} features; X has {np.shape(X)[-1]}."
            )
        X_in = X.copy()
        X_in[-1] = x_c
        x_row = x_c[None, :]
    y_in = None
    if y is not None:
        y_in = np.asarray(y).copy()
        y_in[-1] = y_c
    if score is None:
        if y is None:
            raise ValueError("With an unsupervised estimator, pass a score callable.")
        classes = np.unique(np.concatenate([np.asarray(y), np.asarray([y_c])]))

        def score(est):
            return _signed_decision(est, x_row, classes, y_c)

    return X_in, y_in, X, (None if y is None else np.asarray(y)), score


def schema_encoder_of(estimator):
    """The :class:`~skdp.preprocessing.SchemaEncoder` a Pipeline starts with."""
    if isinstance(estimator, Pipeline) and isinstance(
        estimator.steps[0][1], SchemaEncoder
    ):
        return estimator.steps[0][1]
    return None


def schema_canary(estimator, X, y):
    """A canary row of the table itself, built from the Pipeline's schema.

    The canary takes every numeric column at its declared ``high`` and, in
    every categorical column, the category least frequent among the other
    rows; its neighbour takes ``low`` and the most frequent category. Both
    are labelled with the second class. The encoded rows are as far apart as
    the schema allows on numeric columns, and the canary's categories are the
    ones the other rows move least.

    Parameters
    ----------
    estimator : Pipeline
        Its first step a :class:`~skdp.preprocessing.SchemaEncoder`; fitted
        it has ``decision_function``.
    X : DataFrame or array-like of shape (n_samples, n_features)
        A DataFrame with the declared columns, or an array with them in the
        schema's order.
    y : array-like of shape (n_samples,)

    Returns
    -------
    X_in, y_in, X_out, y_out
        ``X`` with its last row replaced by the canary (in) or its neighbour
        (out); the labels with the last one set to the second class.
    score : callable
        ``f(canary) - f(neighbour)`` for the fitted Pipeline's decision
        function ``f`` (the second class's column for several classes): the
        model's weights along the difference of the two encoded rows, which
        the canary's gradient steps push up.
    """
    if y is None:
        raise ValueError("canary='auto' on a schema Pipeline needs labels y.")
    schema = _as_schema(schema_encoder_of(estimator).schema)
    frame = _is_frame(X)
    if frame:
        schema.check_columns(list(X.columns))
    else:
        X = np.asarray(X) if hasattr(X, "dtype") else np.asarray(X, dtype=object)
        X = X.astype(object)
        if X.ndim != 2 or X.shape[1] != len(schema.features):
            raise ValueError(
                f"X has shape {X.shape}; the schema declares "
                f"{len(schema.features)} features."
            )
    y = np.asarray(y)
    if X.shape[0] < 2 or y.shape != (X.shape[0],):
        raise ValueError("X needs at least two rows and one label per row.")
    if schema.classes is not None:
        classes = np.unique(np.asarray(schema.classes))
    else:
        classes = np.unique(y)
    if classes.size < 2:
        raise ValueError("canary='auto' needs at least two classes.")
    canary, other = {}, {}
    for position, name in enumerate(schema.features):
        spec = schema.columns[name]
        if isinstance(spec, Numeric):
            canary[name], other[name] = spec.high, spec.low
            continue
        values = _column(X, name, position)[:-1]
        canary[name], other[name] = _rarest_and_commonest(values, spec.categories)
    if frame:
        X_in, X_out = _with_last_row(X, canary), _with_last_row(X, other)
        row_in, row_out = X_in.iloc[[-1]], X_out.iloc[[-1]]
    else:
        X_in, X_out = X.copy(), X.copy()
        X_in[-1] = [canary[name] for name in schema.features]
        X_out[-1] = [other[name] for name in schema.features]
        row_in, row_out = X_in[-1:], X_out[-1:]
    labels = y.copy()
    labels[-1] = classes[1]
    return X_in, labels, X_out, labels, _decision_gap(row_in, row_out)


def _decision_gap(row_in, row_out):
    """``score(fitted)``: the decision function at ``row_in`` minus at ``row_out``.

    The second class's column for several classes.
    """

    def score(est):
        f_in = np.asarray(est.decision_function(row_in))
        f_out = np.asarray(est.decision_function(row_out))
        if f_in.ndim == 2 and f_in.shape[1] > 1:
            return float(f_in[0, 1] - f_out[0, 1])
        return float(f_in.ravel()[0] - f_out.ravel()[0])

    return score

"""Find the preprocessing steps of a Pipeline that read the private data."""

import warnings

from sklearn.compose import ColumnTransformer
from sklearn.pipeline import FeatureUnion, Pipeline

from ..exceptions import PrivacyLeakWarning

__all__ = [
    "LEAK_WARNING_START",
    "check_pipeline",
    "final_estimator",
    "is_private",
    "warn_leaks",
]

#: How every leak warning of a Pipeline step begins: a search that has said
#: them once silences its fits' repeats by it.
LEAK_WARNING_START = "Pipeline step "

_WHAT_TO_DO = (
    "Declare the public facts instead (skdp.preprocessing.SchemaEncoder, "
    "BoundedScaler, OneHotEncoder(categories=[...])) or use a private step "
    "(DPStandardScaler)."
)

# Whole scikit-learn modules whose transformers are fitted on the data.
_READING_MODULES = {
    "sklearn.decomposition": "components fitted on the data",
    "sklearn.cross_decomposition": "components fitted on the data",
    "sklearn.feature_selection": "scores of the features on the data",
    "sklearn.manifold": "an embedding fitted on the data",
    "sklearn.cluster": "clusters fitted on the data",
    "sklearn.neighbors": "the training rows",
    "sklearn.discriminant_analysis": "class means and covariances",
}


def _categories_reason(step):
    if isinstance(step.categories, str):
        return "the set of categories present in the data"
    if getattr(step, "min_frequency", None) is not None or (
        getattr(step, "max_categories", None) is not None
    ):
        return "the frequency of each category (min_frequency, max_categories)"
    return None


def _imputer_reason(step):
    if step.strategy == "constant" and step.keep_empty_features:
        return None
    if step.strategy == "constant":
        return "which columns are entirely missing (keep_empty_features=False)"
    return f"the {step.strategy} of each column"


def _always(reason):
    return lambda step: reason


# scikit-learn class name -> reason(step) -> str or None (None: reads nothing).
_REASONS = {
    "StandardScaler": lambda s: (
        "the mean and scale of each column" if s.with_mean or s.with_std else None
    ),
    "MinMaxScaler": _always("each column's minimum and maximum (one person's)"),
    "MaxAbsScaler": _always("each column's largest absolute value"),
    "RobustScaler": lambda s: (
        "the median and quantiles of each column"
        if s.with_centering or s.with_scaling
        else None
    ),
    "QuantileTransformer": _always("the quantiles of each column"),
    "PowerTransformer": _always("a transform fitted to each column"),
    "KBinsDiscretizer": _always("bin edges from the data"),
    "SplineTransformer": lambda s: (
        "knots from the data's range or quantiles" if isinstance(s.knots, str) else None
    ),
    "OneHotEncoder": _categories_reason,
    "OrdinalEncoder": _categories_reason,
    "TargetEncoder": _always("the mean label of each category"),
    "KernelCenterer": _always("the mean of the kernel matrix"),
    "SimpleImputer": _imputer_reason,
    "KNNImputer": _always("the training rows (it imputes from neighbours)"),
    "IterativeImputer": _always("regressions fitted on the data"),
    "MissingIndicator": lambda s: (
        None if s.features == "all" else "which columns have missing values"
    ),
    "Nystroem": _always("training rows as its components"),
    "CountVectorizer": lambda s: (
        None if s.vocabulary is not None else "the vocabulary of the data"
    ),
    "TfidfVectorizer": _always("the document frequencies of the data"),
    "TfidfTransformer": lambda s: (
        "the document frequencies of the data" if s.use_idf else None
    ),
    "DictVectorizer": _always("the feature names present in the data"),
}


def leak_reason(step):
    """What a preprocessing step reads from the data when fitted, or ``None``.

    Parameters
    ----------
    step : estimator
        One transformer (not a Pipeline, ColumnTransformer or FeatureUnion).

    Returns
    -------
    str or None
        ``None`` for steps known to read nothing but public parameters, for
        skdp's own steps (free or accounted) and for unknown steps.
    """
    if type(step).__module__.split(".")[0] == "skdp":
        return None
    for cls in type(step).__mro__:
        if cls.__module__.startswith("sklearn.") and cls.__name__ in _REASONS:
            return _REASONS[cls.__name__](step)
    module = type(step).__module__
    for prefix, reason in _READING_MODULES.items():
        if module == prefix or module.startswith(prefix + "."):
            return reason
    return None


def _leaves(est, path, *, fitted=False):
    """``(path, step)`` for every leaf step, nested containers opened.

    ``fitted``: walk what a fitted ColumnTransformer fitted
    (``transformers_``, its remainder included) instead of its parameters.
    ``None`` and strings (``"drop"``, ``"passthrough"``) are not steps.
    """
    if est is None or isinstance(est, str):
        return
    if isinstance(est, Pipeline):
        children = [(name, step) for name, step in est.steps]
    elif isinstance(est, ColumnTransformer) and fitted:
        children = [(name, step) for name, step, _ in getattr(est, "transformers_", ())]
    elif isinstance(est, ColumnTransformer):
        children = [(name, step) for name, step, _ in est.transformers]
        children.append(("remainder", est.remainder))
    elif isinstance(est, FeatureUnion):
        children = list(est.transformer_list)
    else:
        yield path, est
        return
    for name, step in children:
        yield from _leaves(step, (*path, name), fitted=fitted)


def final_estimator(est):
    """The last step of ``est``, nested Pipelines opened; ``est`` otherwise."""
    while isinstance(est, Pipeline):
        est = est.steps[-1][1]
    return est


def is_private(est):
    """Whether ``est`` is one of skdp's private estimators (it reports a spend)."""
    return type(est).__module__.split(".")[0] == "skdp" and (
        "epsilon" in est.get_params(deep=False)
    )


def check_pipeline(pipe, *, warn=True):
    """Find the steps before a private estimator that read the private data.

    A Pipeline is private only if every step that reads the data is: a
    ``StandardScaler`` fitted on the rows before ``DPLogisticRegression``
    releases their exact means through the model, and the model's
    ``privacy_spent_`` does not cover it. This walks every step before the
    final estimator (inside nested Pipelines, ColumnTransformers and
    FeatureUnions) and names those known to read the data when fitted.

    Known free: skdp's own steps (``SchemaEncoder``, ``BoundedScaler``; and
    ``DPStandardScaler``, which reports its own spend), per-record maps
    (``FunctionTransformer``, ``Normalizer``, ``Binarizer``,
    ``PolynomialFeatures``, random projections), encoders with declared
    categories, ``SimpleImputer(strategy="constant", keep_empty_features=True)``.
    Known to read the data: scalers fitted on it (``StandardScaler``,
    ``MinMaxScaler``, ``MaxAbsScaler``, ``RobustScaler``), quantile and power
    transforms, ``KBinsDiscretizer``, encoders with ``categories="auto"`` or
    frequency limits, ``TargetEncoder``, imputers fitted on the data,
    decompositions (``PCA``...), feature selection, and the like. Steps of
    other libraries are not judged.

    Parameters
    ----------
    pipe : Pipeline or estimator
        A Pipeline (or a search object, whose ``estimator`` is checked). Only
        a Pipeline ending in a private skdp estimator is checked; anything
        else gives an empty list.
    warn : bool, default=True
        Emit a :class:`~skdp.exceptions.PrivacyLeakWarning` per finding.

    Returns
    -------
    list of (str, str)
        ``(step, reason)``: the step's parameter path (``"ct__num"`` for the
        transformer ``num`` of the step ``ct``) and what it reads.

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skdp import DPLogisticRegression
    >>> from skdp.pipeline import check_pipeline
    >>> pipe = make_pipeline(StandardScaler(), DPLogisticRegression())
    >>> check_pipeline(pipe, warn=False)
    [('standardscaler', 'the mean and scale of each column')]
    """
    if not isinstance(pipe, Pipeline) and isinstance(
        getattr(pipe, "estimator", None), Pipeline
    ):
        pipe = pipe.estimator
    if not isinstance(pipe, Pipeline) or not is_private(final_estimator(pipe)):
        return []
    findings = []
    for path, step in _leaves(pipe, ()):
        if step is final_estimator(pipe):
            continue
        reason = leak_reason(step)
        if reason is not None:
            findings.append(("__".join(path), reason))
    if warn:
        warn_leaks(findings, type(final_estimator(pipe)).__name__, stacklevel=2)
    return findings


def warn_leaks(findings, model, *, n_fits=None, stacklevel=2):
    """One :class:`~skdp.exceptions.PrivacyLeakWarning` per finding, with what to do.

    Parameters
    ----------
    findings : list of (str, str)
        ``(step, reason)`` as :func:`check_pipeline` returns them.
    model : str
        The private estimator's class name.
    n_fits : int or None, default=None
        ``None``: one fit (a Pipeline's ``fit``). Otherwise the number of
        fits of a search, each of which reads the data so: the warning is
        said once for all of them.
    stacklevel : int, default=2
        As for :func:`warnings.warn` called where ``warn_leaks`` is called.
    """
    for path, reason in findings:
        if n_fits is None:
            where, spent = "", "its privacy_spent_ does not"
        else:
            where = f" in each of the search's {n_fits} fits"
            spent = "the search's total privacy_spent_ does not"
        tail = "" if n_fits is None else " Said once for the whole search."
        warnings.warn(
            f"{LEAK_WARNING_START}{path!r} ({reason}) is fitted on the private data "
            f"before {model}{where}: {spent} cover that read. {_WHAT_TO_DO}{tail}",
            PrivacyLeakWarning,
            stacklevel=stacklevel + 1,
        )

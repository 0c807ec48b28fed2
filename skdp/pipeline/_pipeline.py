"""A DataFrame in, a private model out: the schema drives the whole Pipeline."""

import inspect
import warnings
from collections import Counter

import numpy as np
from sklearn import get_config
from sklearn.base import clone
from sklearn.pipeline import Pipeline

from ..accounting import PrivacyPlan, compose_spent
from ..preprocessing import SchemaEncoder
from ..preprocessing._encoder import _as_schema, _is_frame
from ._leaks import _leaves, check_pipeline, final_estimator
from ._plan import check_candidate, fit_spends

__all__ = ["PrivatePipeline", "make_private_pipeline", "privacy_spent"]


def _default(est, name):
    """The default of ``est``'s constructor parameter ``name``."""
    return inspect.signature(type(est).__init__).parameters[name].default


def _same_set(a, b):
    return set(np.asarray(a).tolist()) == set(np.asarray(b).tolist())


def _public_inputs(schema, encoder, est):
    """``param -> (value, declared by the schema)`` for ``est``'s public inputs.

    ``row_norm``: the encoder's bound, where the estimator's plan reads one
    (:func:`_needs_row_bound`) or where it is set (a plan bounded by
    clipping alone still projects rows onto a given ``row_norm``, so a value
    below the encoder's would shrink every row); ``classes``: the schema's;
    ``groups``: the categories of the sensitive column. Only those ``est``
    has, and only those the schema declares.
    """
    params = est.get_params(deep=False)
    out = {}
    if "row_norm" in params and (
        _needs_row_bound(params) or params["row_norm"] is not None
    ):
        out["row_norm"] = encoder.row_norm_bound()
    if "classes" in params and schema.classes is not None:
        out["classes"] = list(schema.classes)
    if "groups" in params and schema.sensitive is not None:
        out["groups"] = list(schema.columns[schema.sensitive].categories)
    return out


def _needs_row_bound(params):
    """Whether a plan reads the row bound.

    Poisson and balls-and-bins batches are bounded by per-example clipping
    alone, and their "auto" rules are chosen for rows without a declared bound
    (docs/benchmarks.md, "Defaults chosen on the panel"); cyclic and shuffled
    batches, and estimators without a batch sampler, need the bound.
    """
    return params.get("batch_sampling") not in ("poisson", "balls-and-bins")


def _conflict(name, param, value, declared):
    return ValueError(
        f"{name}: {param}={value!r} conflicts with the schema, which implies "
        f"{param}={declared!r}. Leave {param} at its default to take the "
        "schema's value, or change the schema."
    )


def _agrees(param, value, declared):
    if param == "row_norm":
        return np.isclose(float(value), declared, rtol=1e-12, atol=0.0)
    return _same_set(value, declared)


def make_private_pipeline(
    schema, *steps, estimator=None, numeric="scale", handle_unknown="error"
):
    """A Pipeline from a raw table to a private model, driven by one schema.

    The first step is a :class:`~skdp.preprocessing.SchemaEncoder` on
    ``schema``; then clones of ``steps``, as
    :func:`sklearn.pipeline.make_pipeline` takes them, the last one the
    private estimator (``make_private_pipeline(schema, model)``, or
    ``make_private_pipeline(schema, scaler, model)``). The estimator's
    public inputs come from the same declaration: ``classes`` the schema's
    classes and, for an estimator with ``groups``
    (``DPSaddlePointClassifier``), the categories of the schema's sensitive
    column; ``row_norm`` is the encoder's bound (the largest norm an
    encoded row can have) where the estimator's plan reads one (not for
    Poisson batches, bounded by clipping alone: they keep ``None``, and an
    explicit value, which would project the rows, must agree with the
    encoder's) and the estimator follows the encoder directly. A step in
    between changes the rows, so the encoder's bound no longer holds:
    ``row_norm`` is then left as you set it. Nothing is computed by hand or
    read from the data.

    Parameters
    ----------
    schema : TableSchema or mapping
    *steps : estimators
        The steps after the encoder, the private estimator last
        (``DPLogisticRegression``, ``DPSaddlePointClassifier``...); each is
        cloned, yours are not changed. A public input of the estimator
        left at its default takes the schema's value; an explicit value
        that differs from it is refused. Steps that read the private data
        (a ``StandardScaler``...) get a
        :class:`~skdp.exceptions.PrivacyLeakWarning` when the Pipeline is
        fitted.
    estimator : estimator or None, default=None
        The private estimator, by keyword (``make_private_pipeline(schema,
        estimator=model)``): appended after ``steps``.
    numeric, handle_unknown : str
        Passed to the :class:`~skdp.preprocessing.SchemaEncoder`.

    Returns
    -------
    PrivatePipeline
        Steps ``"schemaencoder"`` and each step's lower-cased class name
        (as :func:`sklearn.pipeline.make_pipeline` names them, ``-1``,
        ``-2``... added to repeated names), so a grid over
        ``dplogisticregression__epsilon`` works.

    Raises
    ------
    TypeError
        If no estimator is given.
    ValueError
        If an explicit ``row_norm``, ``classes`` or ``groups`` of the
        estimator conflicts with the schema.

    Examples
    --------
    >>> from skdp import DPLogisticRegression, TableSchema
    >>> from skdp.pipeline import make_private_pipeline
    >>> from skdp.preprocessing import DPStandardScaler
    >>> schema = TableSchema({"age": (17, 90), "sex": ["F", "M"], "y": [0, 1]},
    ...                      target="y", classes=[0, 1])
    >>> pipe = make_private_pipeline(schema, DPLogisticRegression(epsilon=1.0))
    >>> pipe[-1].row_norm, pipe[-1].classes  # Poisson batches: clipping alone
    (None, [0, 1])
    >>> cyclic = DPLogisticRegression(epsilon=1.0, batch_sampling="cyclic")
    >>> round(make_private_pipeline(schema, cyclic)[-1].row_norm, 4)
    1.4142
    >>> scaled = make_private_pipeline(
    ...     schema, DPStandardScaler(bounds=(-1, 1)), DPLogisticRegression()
    ... )
    >>> list(scaled.named_steps)
    ['schemaencoder', 'dpstandardscaler', 'dplogisticregression']
    """
    steps = [*steps] if estimator is None else [*steps, estimator]
    if not steps or isinstance(steps[-1], str) or steps[-1] is None:
        raise TypeError(
            "make_private_pipeline needs the private estimator, last: "
            "make_private_pipeline(schema, [steps, ...,] estimator)."
        )
    table = _as_schema(schema)
    encoder = SchemaEncoder(schema, numeric=numeric, handle_unknown=handle_unknown)
    steps = [
        step if isinstance(step, str) or step is None else clone(step) for step in steps
    ]
    est = steps[-1]
    updates = {}
    current = est.get_params(deep=False)
    inputs = _public_inputs(table, encoder, est)
    if len(steps) > 1:
        inputs.pop("row_norm", None)  # a step in between changes the rows
    for param, declared in inputs.items():
        value = current[param]
        default = _default(est, param)
        if value is None or (value is default or _is_default(value, default)):
            updates[param] = declared
        elif not _agrees(param, value, declared):
            raise _conflict(type(est).__name__, param, value, declared)
    est.set_params(**updates)
    _warn_without_groups(table, est)
    return PrivatePipeline(_named([encoder, *steps]))


def _warn_without_groups(schema, est):
    """Say that a worst-group estimator given no groups fits one group.

    Without a ``sensitive`` column in the schema (or declared ``groups``), a
    ``DPSaddlePointClassifier`` is private ERM unless ``fit`` is given
    ``sensitive_features``; most often the schema forgot the column.
    """
    params = est.get_params(deep=False)
    if "groups" not in params or params["groups"] is not None:
        return
    if schema.sensitive is None:
        warnings.warn(
            f"{type(est).__name__} behind a schema without a sensitive column: "
            "unless fit is given sensitive_features=..., it fits one group "
            "(private ERM). Declare TableSchema(..., sensitive='column') to "
            "take the groups from the table.",
            UserWarning,
            stacklevel=3,
        )


def _named(steps):
    """``(name, step)`` pairs named as :func:`sklearn.pipeline.make_pipeline` does.

    Each step is named by its lower-cased class name (a string step by
    itself); a name given to several steps gets ``-1``, ``-2``... in order.
    """
    names = [
        step.lower() if isinstance(step, str) else type(step).__name__.lower()
        for step in steps
    ]
    counts = Counter(names)
    seen = Counter()
    named = []
    for name, step in zip(names, steps, strict=True):
        if counts[name] > 1:
            seen[name] += 1
            name = f"{name}-{seen[name]}"
        named.append((name, step))
    return named


def _is_default(value, default):
    try:
        return bool(value == default)
    except (TypeError, ValueError):
        return False


def _spends(est):
    """Every fitted ``privacy_spent_`` in ``est``, nested steps opened."""
    for _, step in _leaves(est, (), fitted=True):
        spent = getattr(step, "privacy_spent_", None)
        if spent is not None:
            yield spent


def privacy_spent(estimator):
    """The total spend of a fitted estimator or Pipeline, all its DP steps composed.

    Parameters
    ----------
    estimator : estimator
        Fitted. Each step with a ``privacy_spent_`` (nested Pipelines,
        ColumnTransformers and FeatureUnions opened) counts once.

    Returns
    -------
    skdp.accounting.PrivacySpent or None
        :func:`skdp.accounting.compose_spent` of the steps' spends (all fitted
        on the same rows, so they compose); the only one if there is one;
        ``None`` if no step reports a spend.

    Raises
    ------
    ValueError
        If the steps' spends cannot be composed (different neighbouring
        relations or order grids).
    """
    spents = list(_spends(estimator))
    return _composed(spents) if spents else None


def _composed(spents):
    """The one spend of ``spents``, or all of them composed (same rows)."""
    return spents[0] if len(spents) == 1 else compose_spent(spents)


class PrivatePipeline(Pipeline):
    """A scikit-learn Pipeline that checks its privacy before fitting.

    Built by :func:`make_private_pipeline` (or by hand, like a Pipeline).
    Before anything is fitted, ``fit``:

    - warns (:class:`~skdp.exceptions.PrivacyLeakWarning`) for each step known
      to read the private data before the private estimator
      (:func:`check_pipeline`);
    - when the first step is a :class:`~skdp.preprocessing.SchemaEncoder`:
      checks that the frame has the declared columns and the labels are
      declared classes, and that the last step's public inputs (``row_norm``
      when it follows the encoder directly, ``classes``, ``groups``) agree
      with the schema;
    - passes the schema's sensitive column to the final step as
      ``sensitive_features`` when its ``fit`` takes them and none were given.

    A failed fit leaves every step as it was. Everything else is a plain
    :class:`sklearn.pipeline.Pipeline`: it clones, and works inside
    ``GridSearchCV`` and ``cross_val_score``.

    Parameters
    ----------
    steps, transform_input, memory, verbose
        As for :class:`sklearn.pipeline.Pipeline`.

    Attributes
    ----------
    privacy_spent_ : skdp.accounting.PrivacySpent
        Once fitted: every DP step's spend composed (:func:`privacy_spent`),
        e.g. a ``DPStandardScaler``'s and the model's.
    """

    @property
    def privacy_spent_(self):
        """Every fitted DP step's ``privacy_spent_``, composed."""
        spent = privacy_spent(self)
        if spent is None:
            raise AttributeError("privacy_spent_: no step of the pipeline is fitted.")
        return spent

    def privacy_plan(self, n_samples, n_classes=None):
        """Noise and privacy of a fit on ``n_samples`` rows, without any data.

        Like the final estimator's ``privacy_plan``, for the whole Pipeline:
        every DP step (a ``DPStandardScaler``, the model; nested Pipelines,
        ColumnTransformers and FeatureUnions opened) is fitted on the same
        rows, so their planned spends compose, as ``privacy_spent_`` will
        once fitted.

        Parameters
        ----------
        n_samples : int
        n_classes : int or None, default=None
            Passed to the final estimator's ``privacy_plan``; ``None``: its
            declared ``classes`` (from the schema when built by
            :func:`make_private_pipeline`), or 2 without them.

        Returns
        -------
        skdp.accounting.PrivacyPlan
            The final estimator's ``noise_multiplier``; as ``privacy_spent``,
            every DP step's planned spend composed, and its ``delta``.

        Raises
        ------
        TypeError
            If the final step is not a private estimator with a
            ``privacy_plan``, or a DP step before it has no known plan.
        """
        check_candidate(self)
        spends = fit_spends(self, n_samples, n_classes, worst_classes=False)
        spent = _composed(spends)
        noise_multiplier = final_estimator(self).privacy_plan(n_samples, n_classes)[0]
        return PrivacyPlan(noise_multiplier, spent, spent.delta)

    def _encoder(self):
        first = self.steps[0][1]
        return first if isinstance(first, SchemaEncoder) else None

    def _check_public_inputs(self, X, y):
        encoder = self._encoder()
        if encoder is None:
            return
        encoder._validate_params()
        schema = _as_schema(encoder.schema)
        SchemaEncoder._check_layout(schema, X)
        if y is not None:
            schema.check_labels(y)
        name, est = self.steps[-1]
        if est is None or isinstance(est, str) or est is encoder:
            return
        current = est.get_params(deep=False)
        for param, declared in _public_inputs(schema, encoder, est).items():
            if param == "row_norm" and len(self.steps) != 2:
                continue  # another step changes the rows' norms
            value = current[param]
            if value is None:
                # Undeclared classes or groups: the estimator warns that it
                # reads them from y; an undeclared bound its plan needs: the
                # estimator refuses with its own message.
                continue
            if not _agrees(param, value, declared):
                raise _conflict(f"step {name!r}", param, value, declared)

    def _with_sensitive(self, X, params):
        encoder = self._encoder()
        final = final_estimator(self)
        if encoder is None or final is None or isinstance(final, str):
            return params
        schema = _as_schema(encoder.schema)
        if schema.sensitive is None:
            return params
        if "sensitive_features" not in inspect.signature(final.fit).parameters:
            return params
        routed = get_config().get("enable_metadata_routing", False)
        key = (
            "sensitive_features"
            if routed
            else f"{self.steps[-1][0]}__sensitive_features"
        )
        if key in params:
            return params
        if _is_frame(X):
            groups = X[schema.sensitive].to_numpy()
        else:
            groups = np.asarray(X)[:, schema.features.index(schema.sensitive)]
        return {**params, key: groups}

    def fit(self, X, y=None, **params):
        """Check the declaration and the steps, then fit as a Pipeline.

        Parameters
        ----------
        X : DataFrame or array-like
        y : array-like or None
        **params : dict
            As for :meth:`sklearn.pipeline.Pipeline.fit`.

        Returns
        -------
        self : PrivatePipeline
        """
        self._check_public_inputs(X, y)
        check_pipeline(self)
        params = self._with_sensitive(X, params)
        steps = list(self.steps)
        before = [
            (step, dict(step.__dict__))
            for _, step in steps
            if step is not None and not isinstance(step, str)
        ]
        try:
            super().fit(X, y, **params)
        except BaseException:
            self.steps = steps
            for step, state in before:
                step.__dict__.clear()
                step.__dict__.update(state)
            raise
        return self

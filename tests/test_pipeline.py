import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.decomposition import PCA, TruncatedSVD
from sklearn.experimental import enable_iterative_imputer  # noqa: F401
from sklearn.feature_selection import SelectKBest, VarianceThreshold
from sklearn.impute import IterativeImputer, KNNImputer, MissingIndicator, SimpleImputer
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import (
    Binarizer,
    FunctionTransformer,
    KBinsDiscretizer,
    MaxAbsScaler,
    MinMaxScaler,
    Normalizer,
    OneHotEncoder,
    OrdinalEncoder,
    PolynomialFeatures,
    PowerTransformer,
    QuantileTransformer,
    RobustScaler,
    SplineTransformer,
    StandardScaler,
    TargetEncoder,
)

from skdp import DPLogisticRegression, PrivacyLeakWarning, TableSchema
from skdp.accounting import PrivacyPlan, compose_spent
from skdp.datasets import ADULT_SCHEMA, load_adult
from skdp.fairness import DPSaddlePointClassifier
from skdp.pipeline import (
    PrivatePipeline,
    check_pipeline,
    make_private_pipeline,
    privacy_spent,
)
from skdp.preprocessing import BoundedScaler, DPStandardScaler, SchemaEncoder

pd = pytest.importorskip("pandas")

SCHEMA = TableSchema(ADULT_SCHEMA, classes=[0, 1], sensitive="sex")


@pytest.fixture(scope="module")
def adult():
    X, y = load_adult(split="train", return_X_y=True, as_frame=True)
    index = np.random.default_rng(0).permutation(len(X))[:3000]
    return X.iloc[index].reset_index(drop=True), y.iloc[index].reset_index(drop=True)


def fast_model(**kwargs):
    return DPLogisticRegression(epochs=5, random_state=0, **kwargs)


def test_public_inputs_come_from_the_schema():
    model = fast_model(epsilon=1.0)
    pipe = make_private_pipeline(SCHEMA, model)
    assert isinstance(pipe, PrivatePipeline)
    assert [name for name, _ in pipe.steps] == ["schemaencoder", "dplogisticregression"]
    assert pipe[-1].row_norm is None  # Poisson batches: clipping alone
    assert pipe[-1].classes == [0, 1]
    bins = make_private_pipeline(SCHEMA, fast_model(batch_sampling="balls-and-bins"))
    assert bins[-1].row_norm is None  # the same "auto" rules as Poisson
    cyclic = make_private_pipeline(SCHEMA, fast_model(batch_sampling="cyclic"))
    assert cyclic[-1].row_norm == pytest.approx(np.sqrt(14))
    assert cyclic[-1].row_norm == SchemaEncoder(SCHEMA).row_norm_bound()
    # A Poisson model's explicit bound must agree too: it would project rows.
    with pytest.raises(ValueError, match=r"row_norm=2\.0 conflicts"):
        make_private_pipeline(SCHEMA, fast_model(row_norm=2.0))
    kept = make_private_pipeline(SCHEMA, fast_model(row_norm=np.sqrt(14)))
    assert kept[-1].row_norm == pytest.approx(np.sqrt(14))
    assert model.row_norm is None and model.classes is None  # the user's, untouched
    fair = make_private_pipeline(SCHEMA, DPSaddlePointClassifier())
    assert fair[-1].groups == ["Female", "Male"]
    # An explicit value that agrees is kept; one that conflicts is refused.
    make_private_pipeline(
        SCHEMA,
        fast_model(batch_sampling="cyclic", row_norm=np.sqrt(14), classes=[1, 0]),
    )
    with pytest.raises(ValueError, match=r"row_norm=2\.0 conflicts"):
        make_private_pipeline(SCHEMA, fast_model(batch_sampling="cyclic", row_norm=2.0))
    with pytest.raises(ValueError, match="classes=.*conflicts"):
        make_private_pipeline(SCHEMA, fast_model(classes=[0, 2]))
    with pytest.raises(ValueError, match="groups=.*conflicts"):
        make_private_pipeline(SCHEMA, DPSaddlePointClassifier(groups=["a", "b"]))


def test_dataframe_in_private_model_out(adult):
    X, y = adult
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no leak warning, no classes=None warning
        pipe = make_private_pipeline(SCHEMA, fast_model(epsilon=1.0)).fit(X, y)
    assert pipe.score(X, y) > 0.78
    assert pipe.privacy_spent_.epsilon <= 1.0
    assert pipe.privacy_spent_ == pipe[-1].privacy_spent_
    assert privacy_spent(pipe) == pipe[-1].privacy_spent_
    assert pipe.predict_proba(X.head(3)).shape == (3, 2)


def test_grid_search_and_cross_validation(adult):
    X, y = adult
    pipe = make_private_pipeline(SCHEMA, fast_model(epsilon=1.0))
    search = GridSearchCV(
        pipe, {"dplogisticregression__epsilon": [0.5, 2.0]}, cv=2
    ).fit(X, y)
    best = search.best_estimator_
    assert best[-1].epsilon == search.best_params_["dplogisticregression__epsilon"]
    assert best[-1].row_norm == pipe[-1].row_norm
    assert best.privacy_spent_.epsilon <= best[-1].epsilon
    scores = cross_val_score(pipe, X, y, cv=2)
    assert np.all(scores > 0.7)
    cloned = clone(pipe)
    assert cloned.get_params()["dplogisticregression__row_norm"] == pipe[-1].row_norm


def test_fair_classifier_takes_groups_from_the_schema(adult):
    X, y = adult
    model = DPSaddlePointClassifier(epsilon=1.0, n_iter=50, random_state=0)
    pipe = make_private_pipeline(SCHEMA, model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe.fit(X, y)
    by_hand = clone(pipe[-1]).fit(
        SchemaEncoder(SCHEMA).fit_transform(X), y, sensitive_features=X["sex"]
    )
    np.testing.assert_array_equal(pipe[-1].coef_, by_hand.coef_)
    np.testing.assert_array_equal(pipe[-1].groups_, ["Female", "Male"])
    # Explicit sensitive features win over the schema's column.
    other = np.where(X["sex"] == "Male", "Female", "Male")
    pipe.fit(X, y, dpsaddlepointclassifier__sensitive_features=other)
    assert not np.array_equal(pipe[-1].coef_, by_hand.coef_)


def test_private_scaler_spend_is_composed(adult):
    X, y = adult
    schema = TableSchema({"age": (17, 90), "hours_per_week": (1, 99)}, classes=[0, 1])
    pipe = PrivatePipeline(
        [
            ("encoder", SchemaEncoder(schema)),
            ("scaler", DPStandardScaler((-1.0, 1.0), epsilon=0.5, random_state=0)),
            ("model", fast_model(epsilon=1.0, row_norm=4.0, classes=[0, 1])),
        ]
    ).fit(X, y)
    expected = compose_spent([pipe[1].privacy_spent_, pipe[2].privacy_spent_])
    assert pipe.privacy_spent_.epsilon == pytest.approx(expected.epsilon)
    assert 1.0 < pipe.privacy_spent_.epsilon <= 1.5


def test_privacy_plan_of_a_pipeline_is_what_its_fit_spends(adult):
    X, y = adult
    pipe = make_private_pipeline(SCHEMA, fast_model(epsilon=1.0))
    plan = pipe.privacy_plan(len(X))
    assert isinstance(plan, PrivacyPlan)
    noise, planned, delta = plan
    assert plan == pipe[-1].privacy_plan(len(X))
    assert (plan.noise_multiplier, plan.privacy_spent) == (noise, planned)
    assert delta == planned.delta
    assert not hasattr(pipe[-1], "coef_")  # planned without fitting anything
    pipe.fit(X, y)
    assert planned.epsilon == pytest.approx(pipe.privacy_spent_.epsilon)

    schema = TableSchema({"age": (17, 90), "hours_per_week": (1, 99)}, classes=[0, 1])
    scaled = PrivatePipeline(
        [
            ("encoder", SchemaEncoder(schema)),
            ("scaler", DPStandardScaler((-1.0, 1.0), epsilon=0.5, random_state=0)),
            ("model", fast_model(epsilon=1.0, row_norm=4.0, classes=[0, 1])),
        ]
    )
    _, planned, _ = scaled.privacy_plan(len(X))
    model_only = scaled[-1].privacy_plan(len(X))[1]
    assert planned.epsilon > model_only.epsilon  # the scaler's spend is in it
    scaled.fit(X, y)
    assert planned.epsilon == pytest.approx(scaled.privacy_spent_.epsilon)

    plain = PrivatePipeline([("encoder", SchemaEncoder(schema)), ("lr", PCA())])
    with pytest.raises(TypeError, match="no privacy_plan"):
        plain.privacy_plan(len(X))


def test_bad_input_is_refused_before_any_state_changes(adult):
    X, y = adult
    pipe = make_private_pipeline(SCHEMA, fast_model(epsilon=1.0))
    with pytest.raises(ValueError, match="'age'"):
        pipe.fit(X.drop(columns="age"), y)
    with pytest.raises(ValueError, match=r"Labels \[2\]"):
        pipe.fit(X, np.where(y == 1, 2, 0))
    assert not hasattr(pipe[0], "row_norm_") and not hasattr(pipe[-1], "coef_")
    cyclic = make_private_pipeline(
        SCHEMA, fast_model(epsilon=1.0, batch_sampling="cyclic")
    )
    with pytest.raises(ValueError, match="row_norm=3.0 conflicts"):
        cyclic.set_params(dplogisticregression__row_norm=3.0).fit(X, y)
    assert not hasattr(cyclic[0], "row_norm_")
    # A failure inside the model's fit leaves every step as it was.
    broken = clone(pipe).set_params(dplogisticregression__neighbouring="add-remove")
    broken.set_params(dplogisticregression__batch_sampling="cyclic")
    with pytest.raises(ValueError, match="add-remove"):
        broken.fit(X, y)
    assert not hasattr(broken[0], "row_norm_")


LEAKY = [
    StandardScaler(),
    MinMaxScaler(),
    MaxAbsScaler(),
    RobustScaler(),
    QuantileTransformer(n_quantiles=10),
    PowerTransformer(),
    KBinsDiscretizer(n_bins=3),
    SplineTransformer(),
    OneHotEncoder(),
    OneHotEncoder(categories=[[0, 1]], min_frequency=5),
    OrdinalEncoder(),
    TargetEncoder(),
    SimpleImputer(),
    SimpleImputer(strategy="constant", fill_value=0.0),
    KNNImputer(),
    IterativeImputer(),
    MissingIndicator(),
    PCA(n_components=1),
    TruncatedSVD(n_components=1),
    SelectKBest(k=1),
    VarianceThreshold(),
]
FREE = [
    SchemaEncoder(TableSchema({"a": (0, 1), "b": (0, 1)})),
    BoundedScaler((0.0, 1.0)),
    DPStandardScaler((0.0, 1.0)),
    FunctionTransformer(np.log1p),
    Normalizer(),
    Binarizer(),
    PolynomialFeatures(),
    OneHotEncoder(categories=[[0, 1], [0, 1]]),
    SimpleImputer(strategy="constant", fill_value=0.0, keep_empty_features=True),
    StandardScaler(with_mean=False, with_std=False),
    MissingIndicator(features="all"),
    "passthrough",
]


def _ids(steps):
    return [repr(s) if isinstance(s, str) else type(s).__name__ for s in steps]


@pytest.mark.parametrize("step", LEAKY, ids=_ids(LEAKY))
def test_leak_warning_names_each_data_reading_step(step):
    name = type(step).__name__.lower()
    direct = make_pipeline(step, DPLogisticRegression())
    assert [path for path, _ in check_pipeline(direct, warn=False)] == [name]
    with pytest.warns(PrivacyLeakWarning, match=f"'{name}'"):
        check_pipeline(direct)
    nested = Pipeline(
        [
            (
                "prep",
                ColumnTransformer(
                    [("num", make_pipeline(clone(step)), [0]), ("other", "drop", [1])]
                ),
            ),
            ("union", FeatureUnion([("u", clone(step))])),
            ("model", DPLogisticRegression()),
        ]
    )
    assert [path for path, _ in check_pipeline(nested, warn=False)] == [
        f"prep__num__{name}",
        "union__u",
    ]
    # A non-private final estimator makes no privacy claim to break.
    assert check_pipeline(make_pipeline(clone(step), StandardScaler())) == []


@pytest.mark.parametrize("step", FREE, ids=_ids(FREE))
def test_no_leak_warning_for_free_or_private_steps(step):
    pipe = Pipeline([("step", step), ("model", DPLogisticRegression())])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_pipeline(pipe) == []
        assert check_pipeline(GridSearchCV(pipe, {"model__epsilon": [1.0]})) == []


def test_private_pipeline_warns_at_fit():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(200, 2))
    y = (X[:, 0] > 0.5).astype(int)
    pipe = PrivatePipeline(
        [("scaler", StandardScaler()), ("model", fast_model(classes=[0, 1]))]
    )
    with pytest.warns(PrivacyLeakWarning, match="'scaler'.*DPLogisticRegression"):
        pipe.fit(X, y)


def test_privacy_spent_composes_the_fitted_nested_steps():
    # The fitted clones inside a ColumnTransformer (transformers_) and a
    # FeatureUnion carry the spends, not the unfitted parameters.
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(300, 2))
    y = (X[:, 0] > 0).astype(int)

    def scaler(seed):
        return DPStandardScaler((-1.0, 1.0), epsilon=0.5, random_state=seed)

    pipe = Pipeline(
        [
            ("columns", ColumnTransformer([("num", scaler(0), [0, 1])])),
            ("union", FeatureUnion([("u", scaler(1))])),
            ("model", fast_model(classes=[0, 1], row_norm=4.0)),
        ]
    ).fit(X, y)
    spends = [
        pipe.named_steps["columns"].named_transformers_["num"].privacy_spent_,
        pipe.named_steps["union"].transformer_list[0][1].privacy_spent_,
        pipe[-1].privacy_spent_,
    ]
    assert privacy_spent(pipe) == compose_spent(spends)
    assert privacy_spent(pipe).epsilon > max(s.epsilon for s in spends)


def test_make_private_pipeline_takes_several_steps(adult):
    # Issue 20: only (schema, estimator) was accepted; a usual pipeline has
    # a scaler (or another step) between the encoder and the model.
    X, y = adult
    scaler = DPStandardScaler(bounds=(-1.0, 1.0), epsilon=0.3, random_state=0)
    model = fast_model(epsilon=1.0, batch_sampling="cyclic")
    pipe = make_private_pipeline(SCHEMA, scaler, model)
    assert list(pipe.named_steps) == [
        "schemaencoder",
        "dpstandardscaler",
        "dplogisticregression",
    ]
    assert pipe[1] is not scaler and pipe[-1] is not model  # clones
    assert pipe[-1].classes == [0, 1]  # the schema's, on the last step
    # The encoder's bound does not hold after a step that rescales the rows.
    assert pipe[-1].row_norm is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        pipe.fit(X, y)
    assert pipe.privacy_spent_ == compose_spent(
        [pipe[1].privacy_spent_, pipe[-1].privacy_spent_]
    )
    # Keyword estimator, as before, and after steps; names as make_pipeline's.
    by_keyword = make_private_pipeline(SCHEMA, estimator=fast_model())
    assert list(by_keyword.named_steps) == ["schemaencoder", "dplogisticregression"]
    two = make_private_pipeline(
        SCHEMA, FunctionTransformer(), FunctionTransformer(), estimator=fast_model()
    )
    assert list(two.named_steps)[1:3] == [
        "functiontransformer-1",
        "functiontransformer-2",
    ]
    # The last step's public inputs are checked, not the step after the encoder.
    with pytest.raises(ValueError, match="classes=.*conflicts"):
        make_private_pipeline(SCHEMA, FunctionTransformer(), fast_model(classes=[0, 2]))
    hand_built = PrivatePipeline(
        [
            ("schemaencoder", SchemaEncoder(SCHEMA)),
            ("f", FunctionTransformer()),
            ("model", fast_model(classes=[0, 2])),
        ]
    )
    with pytest.raises(ValueError, match="classes=.*conflicts"):
        hand_built.fit(X, y)
    # A step that reads the data is named when the Pipeline is fitted.
    leaky = make_private_pipeline(SCHEMA, StandardScaler(), fast_model())
    with pytest.warns(PrivacyLeakWarning, match="standardscaler"):
        leaky.fit(X, y)
    with pytest.raises(TypeError, match="needs the private estimator"):
        make_private_pipeline(SCHEMA)


def test_a_worst_group_model_behind_a_schema_without_groups_warns():
    plain = TableSchema({"a": (0, 1), "s": ["x", "y"]}, classes=[0, 1])
    with pytest.warns(UserWarning, match="without a sensitive column"):
        make_private_pipeline(plain, DPSaddlePointClassifier())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_private_pipeline(plain, DPSaddlePointClassifier(groups=["x", "y"]))
        make_private_pipeline(SCHEMA, DPSaddlePointClassifier())
        make_private_pipeline(plain, DPLogisticRegression())

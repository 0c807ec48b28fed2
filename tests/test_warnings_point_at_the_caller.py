"""Warnings of a fit name the user's line and say what is weak."""

import warnings

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skdp import (
    DPLogisticRegression,
    DPSyntheticData,
    PrivacyLeakWarning,
    WeakDeltaWarning,
)

pd = pytest.importorskip("pandas")


def _data(n=300):
    X = np.random.default_rng(0).uniform(-1, 1, size=(n, 3))
    return X, (X[:, 0] > 0).astype(int)


def _caught(fit, category):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [w for w in caught if issubclass(w.category, category)]


@pytest.mark.parametrize("delta", [0.05, 1 / 300])  # 1/n = 1/300
def test_a_delta_of_one_over_n_or_more_is_said_to_be_weak(delta):
    X, y = _data()
    (warning,) = _caught(
        lambda: DPLogisticRegression(delta=delta, classes=[0, 1]).fit(X, y),
        WeakDeltaWarning,
    )
    assert "1/n" in str(warning.message) and warning.filename == __file__
    table = {"x": X[:, 0], "y": y}
    synth = DPSyntheticData(domain={"x": (-1, 1), "y": [0, 1]}, delta=delta)
    assert _caught(lambda: synth.fit(pd.DataFrame(table)), WeakDeltaWarning)


def test_small_and_default_deltas_say_nothing():
    X, y = _data()
    for delta in (None, 1e-5, 1 / 301):
        est = DPLogisticRegression(delta=delta, classes=[0, 1])
        assert not _caught(lambda est=est: est.fit(X, y), WeakDeltaWarning)


def test_undeclared_classes_warn_at_the_users_line_through_a_pipeline():
    X, y = _data()
    for model in (
        DPLogisticRegression(),
        make_pipeline(FunctionTransformer(), DPLogisticRegression()),
    ):
        (warning,) = _caught(lambda model=model: model.fit(X, y), PrivacyLeakWarning)
        assert warning.filename == __file__


def test_clipped_values_warn_at_the_users_line_through_a_private_search():
    from sklearn.model_selection import KFold

    from skdp import ClippedValuesWarning, TableSchema
    from skdp.model_selection import PrivateGridSearchCV
    from skdp.pipeline import make_private_pipeline

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"pay": rng.uniform(0, 90_000, 200), "x": rng.uniform(-1, 1, 200)}
    )
    y = (frame["x"] > 0).astype(int)
    schema = TableSchema({"pay": (0, 90), "x": (-1, 1)}, classes=[0, 1])
    search = PrivateGridSearchCV(
        make_private_pipeline(schema, DPLogisticRegression(random_state=0)),
        {"dplogisticregression__epsilon": [1.0]},
        cv=KFold(2),
    )
    caught = _caught(lambda: search.fit(frame, y), ClippedValuesWarning)
    assert caught and all(w.filename == __file__ for w in caught)


def test_synthetic_data_names_a_range_in_other_units_at_the_users_line():
    from skdp.synthetic import DomainWarning

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"pay": rng.uniform(0, 90_000, 300), "c": ["a", "b"] * 150})
    synth = DPSyntheticData(
        domain={"pay": (0.0, 90.0), "c": ["a", "b"]}, random_state=0
    )
    (warning,) = _caught(lambda: synth.fit(frame), DomainWarning)
    assert "of its values: was the range declared in other units?" in str(
        warning.message
    )
    assert warning.filename == __file__
    # A few clipped outliers are just clipped.
    frame.loc[:5, "pay"] = 95.0
    frame.loc[6:, "pay"] = rng.uniform(0, 90, len(frame) - 6)
    (warning,) = _caught(lambda: synth.fit(frame), DomainWarning)
    assert "'pay': 6 clipped into the range." in str(warning.message)

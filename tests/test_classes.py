"""The class set is a public input: declared by ``classes``, or read with a warning.

PRIVACY.md lists the class labels among the inputs never read from the data
without paying. Reading them from ``y`` lets one record decide ``classes_``
and the model's shape (a label only one person has); a review on 2026-11-24
found that ``DPLogisticRegression`` did so silently.
"""

import warnings

import numpy as np
import pytest

from skdp.exceptions import PrivacyLeakWarning
from skdp.fairness import DPSaddlePointClassifier
from skdp.linear_model import DPLogisticRegression


def _data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 3)) / np.sqrt(3)
    y = (X[:, 0] > 0).astype(int)
    return X, y


def _logistic(**params):
    return DPLogisticRegression(epsilon=1.0, epochs=2, random_state=0, **params)


def _saddle(**params):
    return DPSaddlePointClassifier(epsilon=1.0, n_iter=20, random_state=0, **params)


def test_reading_classes_from_y_warns():
    X, y = _data()
    with pytest.warns(PrivacyLeakWarning, match="classes=None"):
        _logistic().fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="classes=None"):
        _saddle().fit(X, y)


def test_declared_classes_fix_the_model_whatever_y_holds():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        model = _logistic(classes=[2, 0, 1]).fit(X, y)
        # The rare label's presence no longer changes the model's shape.
        y_rare = y.copy()
        y_rare[0] = 2
        rare = _logistic(classes=[2, 0, 1]).fit(X, y_rare)
        # One class present: a model over the declared two, no error.
        single = _logistic(classes=[0, 1]).fit(X, np.zeros_like(y))
        saddle = _saddle(classes=[0, 1]).fit(X, np.ones_like(y))
    np.testing.assert_array_equal(model.classes_, [0, 1, 2])
    assert model.coef_.shape == rare.coef_.shape == (3, 3)
    assert model.predict_proba(X).shape == (len(y), 3)
    assert single.coef_.shape == (1, 3)
    np.testing.assert_array_equal(saddle.classes_, [0, 1])


def test_declared_classes_refuse_other_labels_before_any_change():
    X, y = _data()
    model = _logistic(classes=[0, 1]).fit(X, y)
    coef = model.coef_.copy()
    y_bad = y.copy()
    y_bad[0] = 7
    with pytest.raises(ValueError, match="outside the declared classes"):
        model.fit(X, y_bad)
    np.testing.assert_array_equal(model.coef_, coef)
    with pytest.raises(ValueError, match="outside the declared classes"):
        _saddle(classes=[0, 1]).fit(X, y_bad)
    with pytest.raises(ValueError, match="at least two"):
        _logistic(classes=[1]).fit(X, y)
    with pytest.raises(ValueError, match="binary"):
        _saddle(classes=[0, 1, 2]).fit(X, y)


def test_privacy_plan_follows_the_declared_classes():
    # The plan of a fit with three declared classes, known without data.
    declared = _logistic(classes=["a", "b", "c"], batch_size=64)
    z_declared, spent_declared, _ = declared.privacy_plan(500)
    z_three, spent_three, _ = declared.privacy_plan(500, 3)
    assert (z_declared, spent_declared) == (z_three, spent_three)
    X, y = _data(n=500)
    fitted = declared.fit(X, np.array(["a", "b", "c"])[y])
    assert fitted.privacy_spent_ == spent_declared


@pytest.mark.parametrize("make", [_logistic, _saddle])
def test_boolean_labels_declared_as_zero_and_one_keep_their_type(make):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make(classes=[0, 1]).fit(X, y > 0)
    assert model.classes_.dtype == bool
    assert model.predict(X).dtype == bool

from dataclasses import replace

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    RepeatedKFold,
    StratifiedKFold,
)

from skdp.accounting import compose_spent
from skdp.exceptions import PrivacyLeakWarning
from skdp.linear_model import DPLogisticRegression
from skdp.model_selection import search_privacy


def test_search_privacy_composes_every_fit_and_the_refit():
    est = DPLogisticRegression(batch_size=64, epochs=2)
    grid = {"epsilon": [0.5, 1.0]}
    total = search_privacy(est, grid, n_samples=500, cv=KFold(5))
    # By hand: 2 candidates x 5 folds of 400 rows, plus the costlier refit.
    fits = [
        DPLogisticRegression(batch_size=64, epochs=2, epsilon=e).privacy_plan(400)[1]
        for e in (0.5, 1.0)
        for _ in range(5)
    ]
    refit = DPLogisticRegression(batch_size=64, epochs=2, epsilon=1.0).privacy_plan(
        500
    )[1]
    # Two candidates: the refit is charged as the worst of their Rényi
    # curves, so the total is a composition of curves (no tight accountant).
    curves = [replace(s, events=()) for s in [*fits, refit]]
    expected = compose_spent(curves, delta=total.delta)
    assert total.epsilon == pytest.approx(expected.epsilon, rel=1e-9)
    assert total.epsilon < 5 * 0.5 + 6 * 1.0  # tighter than adding epsilons
    assert total.epsilon > 1.0
    no_refit = search_privacy(est, grid, n_samples=500, cv=KFold(5), refit=False)
    assert no_refit.epsilon < total.epsilon


def test_search_privacy_matches_what_grid_search_fits():
    X, y = make_classification(n_samples=300, n_features=4, random_state=0)
    X /= np.linalg.norm(X, axis=1).max()
    est = DPLogisticRegression(batch_size=64, epochs=2, random_state=0)
    grid = {"epsilon": [0.5, 2.0]}
    search = GridSearchCV(est, grid, cv=KFold(3)).fit(X, y)
    total = search_privacy(est, grid, n_samples=300, cv=KFold(3))
    refit = search.best_estimator_.privacy_spent_
    assert refit.epsilon <= total.epsilon


def test_search_privacy_errors():
    with pytest.raises(TypeError, match="privacy_plan"):
        search_privacy(object(), {"a": [1]}, n_samples=10)
    with pytest.raises(ValueError, match="cv"):
        search_privacy(DPLogisticRegression(), {"epsilon": [1.0]}, n_samples=10, cv=1)


def test_search_privacy_integer_cv_warns_for_classifiers():
    # GridSearchCV(cv=5) on a classifier is StratifiedKFold: its folds follow
    # the labels, which the total does not cover; an int is KFold's total.
    grid = {"epsilon": [1.0]}
    est = DPLogisticRegression(batch_size=64, epochs=2)
    with pytest.warns(PrivacyLeakWarning, match="StratifiedKFold"):
        by_int = search_privacy(est, grid, n_samples=500, cv=5)
    by_kfold = search_privacy(est, grid, n_samples=500, cv=KFold(5, shuffle=True))
    assert by_int.epsilon == by_kfold.epsilon


def test_search_privacy_refuses_data_dependent_folds_and_add_remove():
    grid = {"epsilon": [1.0]}
    est = DPLogisticRegression(batch_size=64, epochs=2)
    with pytest.raises(TypeError, match="StratifiedKFold"):
        search_privacy(est, grid, n_samples=500, cv=StratifiedKFold(5))
    with pytest.raises(ValueError, match="replace-one"):
        search_privacy(
            est, {"neighbouring": ["add-remove"]}, n_samples=500, cv=KFold(5)
        )


def test_search_privacy_repeated_kfold_counts_every_fit():
    grid = {"epsilon": [1.0]}
    est = DPLogisticRegression(batch_size=64, epochs=2)
    once = search_privacy(est, grid, n_samples=500, cv=KFold(5), refit=False)
    twice = search_privacy(
        est,
        grid,
        n_samples=500,
        cv=RepeatedKFold(n_splits=5, n_repeats=2, random_state=0),
        refit=False,
    )
    fit = est.set_params(epsilon=1.0).privacy_plan(400)[1]
    # One candidate: its events stay, so the same tight accountant composes.
    expected = compose_spent([fit] * 10, delta=twice.delta)
    assert twice.epsilon == pytest.approx(expected.epsilon, rel=1e-9)
    assert twice.epsilon > once.epsilon

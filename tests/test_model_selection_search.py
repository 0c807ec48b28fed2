import warnings
from dataclasses import replace

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    RepeatedKFold,
    StratifiedKFold,
    cross_validate,
)

from skdp.accounting import compose_spent
from skdp.exceptions import PrivacyLeakWarning
from skdp.linear_model import DPLogisticRegression
from skdp.model_selection import search_privacy

BINARY = {"classes": [0, 1]}


def test_search_privacy_composes_every_fit_and_the_refit():
    est = DPLogisticRegression(batch_size=64, epochs=2, **BINARY)
    grid = {"epsilon": [0.5, 1.0]}
    total = search_privacy(est, grid, n_samples=500, cv=KFold(5))
    # By hand: a record is in 4 of the 5 folds' training sets (400 rows
    # each) for each of the 2 candidates, plus the costlier refit.
    fits = [
        DPLogisticRegression(batch_size=64, epochs=2, epsilon=e).privacy_plan(400)[1]
        for e in (0.5, 1.0)
        for _ in range(4)
    ]
    refit = DPLogisticRegression(batch_size=64, epochs=2, epsilon=1.0).privacy_plan(
        500
    )[1]
    # Two candidates: the refit is charged as the worst of their Rényi
    # curves, so the total is a composition of curves (no tight accountant).
    curves = [replace(s, events=()) for s in [*fits, refit]]
    expected = compose_spent(curves, delta=total.delta)
    assert total.epsilon == pytest.approx(expected.epsilon, rel=1e-9)
    assert total.epsilon < 4 * 0.5 + 5 * 1.0  # tighter than adding epsilons
    assert total.epsilon > 1.0
    no_refit = search_privacy(est, grid, n_samples=500, cv=KFold(5), refit=False)
    assert no_refit.epsilon < total.epsilon


def test_search_privacy_matches_what_grid_search_fits():
    X, y = make_classification(n_samples=300, n_features=4, random_state=0)
    X /= np.linalg.norm(X, axis=1).max()
    est = DPLogisticRegression(batch_size=64, epochs=2, random_state=0, **BINARY)
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
    est = DPLogisticRegression(batch_size=64, epochs=2, **BINARY)
    with pytest.warns(PrivacyLeakWarning, match="StratifiedKFold"):
        by_int = search_privacy(est, grid, n_samples=500, cv=5)
    by_kfold = search_privacy(est, grid, n_samples=500, cv=KFold(5, shuffle=True))
    assert by_int.epsilon == by_kfold.epsilon


def test_search_privacy_refuses_data_dependent_folds():
    # Add/remove candidates are accounted by group privacy now: see
    # tests/test_model_selection_pipeline.py.
    grid = {"epsilon": [1.0]}
    est = DPLogisticRegression(batch_size=64, epochs=2, **BINARY)
    with pytest.raises(TypeError, match="StratifiedKFold"):
        search_privacy(est, grid, n_samples=500, cv=StratifiedKFold(5))


def test_search_privacy_repeated_kfold_counts_every_fit():
    grid = {"epsilon": [1.0]}
    est = DPLogisticRegression(batch_size=64, epochs=2, **BINARY)
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
    # A record is in 4 of the 5 training sets of each repetition.
    expected = compose_spent([fit] * 8, delta=twice.delta)
    assert twice.epsilon == pytest.approx(expected.epsilon, rel=1e-9)
    assert twice.epsilon > once.epsilon


def _composition_of_the_fits_run(est, X, y, cv):
    """Largest, over records, of the composition of the fits that held it.

    Fits every fold with ``cross_validate`` and the refit on all rows, then,
    record by record, composes the ``privacy_spent_`` of the fitted models
    whose training set held that record (records sharing a test fold share
    the fits; the largest over those groups is the search's guarantee).
    """
    out = cross_validate(est, X, y, cv=cv, return_estimator=True, return_indices=True)
    refit = clone(est).fit(X, y).privacy_spent_
    held = np.zeros((len(out["estimator"]), len(y)), dtype=bool)
    for j, train in enumerate(out["indices"]["train"]):
        held[j, train] = True
    patterns = np.unique(held, axis=1)
    spends = [fitted.privacy_spent_ for fitted in out["estimator"]]
    delta = refit.delta
    totals = [
        compose_spent(
            [s for s, h in zip(spends, p, strict=True) if h] + [refit], delta=delta
        )
        for p in patterns.T
    ]
    return max(t.epsilon for t in totals), delta


@pytest.mark.parametrize("sampling", ["cyclic", "poisson"])
def test_search_privacy_undeclared_classes_covers_multiclass_fits(sampling):
    # Issue 21: with neither classes nor n_classes, the total was planned for
    # two classes, whose gradient bound (1 on these rows) leaves a clip of
    # 1.2 inactive, while the 3-class fits that run (bound sqrt(2)) have it
    # active: 28.2 reported for a cyclic search whose fits compose to 36.8.
    # It now plans for the worst case and says so.
    X, y = make_classification(
        n_samples=300,
        n_features=4,
        n_informative=3,
        n_redundant=0,
        n_classes=3,
        random_state=0,
    )
    X /= np.linalg.norm(X, axis=1).max()
    est = DPLogisticRegression(
        epsilon=None,
        noise_multiplier=3.0,
        max_grad_norm=1.2,
        fit_intercept=False,
        batch_size=60,
        epochs=2,
        batch_sampling=sampling,
        random_state=0,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        total = search_privacy(est, {}, n_samples=300, cv=KFold(5))
    with pytest.warns(PrivacyLeakWarning, match="classes"):
        actual, delta = _composition_of_the_fits_run(est, X, y, KFold(5))
    assert total.delta == delta
    assert total.epsilon >= actual  # 11.4 >= 11.4 cyclic, 5.6 >= 4.6 Poisson
    assert any(
        issubclass(w.category, PrivacyLeakWarning) and "worst case" in str(w.message)
        for w in caught
    )
    # Declaring the three classes accounts exactly the fits that run.
    declared = est.set_params(classes=[0, 1, 2])
    exact = search_privacy(declared, {}, n_samples=300, cv=KFold(5))
    assert exact.epsilon == pytest.approx(
        _composition_of_the_fits_run(declared, X, y, KFold(5))[0], rel=1e-9
    )
    assert exact.epsilon <= total.epsilon


@pytest.mark.parametrize(
    "n, cv",
    [
        (500, KFold(5)),
        (503, KFold(5, shuffle=True, random_state=1)),
        (301, RepeatedKFold(n_splits=3, n_repeats=2, random_state=0)),
    ],
)
def test_search_privacy_charges_the_folds_that_hold_a_record(n, cv):
    # A record sits in k - 1 of the k training sets (per repetition), and a
    # fit without it runs on the same rows under both neighbours: the total
    # is the composition of the fits that held the worst-placed record, plus
    # the refit, computed from the fits GridSearchCV would actually run
    # (before, every fold was charged: 11%, 14% and 21% more here).
    X, y = make_classification(n_samples=n, n_features=4, random_state=0)
    X /= np.linalg.norm(X, axis=1).max()
    est = DPLogisticRegression(batch_size=64, epochs=2, random_state=0, **BINARY)
    total = search_privacy(est, {}, n_samples=n, cv=cv)
    actual, delta = _composition_of_the_fits_run(est, X, y, cv)
    assert total.delta == delta
    assert total.epsilon == pytest.approx(actual, rel=1e-9)


def test_integer_cv_accounts_exactly_what_runs():
    # Issue 20: search_privacy(GridSearchCV(clf, grid, cv=5)) accounted
    # KFold(5) (with a warning) for a search that runs StratifiedKFold(5).
    grid = {"epsilon": [1.0]}
    est = DPLogisticRegression(batch_size=64, epochs=2, **BINARY)
    for cv in (5, None):
        with pytest.raises(TypeError, match=r"StratifiedKFold\(5\).*KFold\(5\)"):
            search_privacy(GridSearchCV(est, grid, cv=cv), n_samples=500)
    # The same folds as a splitter are accounted, and equal an int's total,
    # which is what skdp's own search runs for cv=5.
    from skdp.model_selection import PrivateGridSearchCV

    by_kfold = search_privacy(GridSearchCV(est, grid, cv=KFold(5)), n_samples=500)
    by_private = search_privacy(PrivateGridSearchCV(est, grid, cv=5), n_samples=500)
    with pytest.warns(PrivacyLeakWarning, match="StratifiedKFold"):
        by_int = search_privacy(est, grid, n_samples=500, cv=5)
    assert by_kfold == by_private == by_int
    # PrivateGridSearchCV(cv=5) runs those KFold(5) splits.
    X, y = make_classification(n_samples=500, n_features=4, random_state=0)
    X /= np.linalg.norm(X, axis=1).max()
    est.set_params(random_state=0)
    run = PrivateGridSearchCV(est, grid, cv=5, return_train_score=True).fit(X, y)
    ref = GridSearchCV(est, grid, cv=KFold(5), return_train_score=True).fit(X, y)
    for key in ("split0_test_score", "split4_test_score", "mean_train_score"):
        np.testing.assert_array_equal(run.cv_results_[key], ref.cv_results_[key])

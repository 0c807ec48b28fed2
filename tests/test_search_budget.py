"""epsilon_for_search: the largest per-fit epsilon within a search's budget."""

import math
import re
import warnings
from pathlib import Path

import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdp import DPLogisticRegression
from skdp.exceptions import PrivacyLeakWarning
from skdp.fairness import DPSaddlePointClassifier
from skdp.model_selection import (
    PrivateGridSearchCV,
    SearchEpsilon,
    epsilon_for_search,
    search_privacy,
)
from skdp.model_selection._budget import _RTOL
from skdp.preprocessing import DPStandardScaler

N = 1000


def _logistic(batch_sampling="shuffle"):
    # Shuffled batches: their totals take milliseconds (Poisson's, seconds).
    return DPLogisticRegression(classes=[0, 1], batch_sampling=batch_sampling)


def _poisson_logistic():
    return _logistic("poisson")


def _scaled_logistic(scaler_epsilon=0.2):
    return make_pipeline(DPStandardScaler(epsilon=scaler_epsilon), _logistic())


def _saddle():
    return DPSaddlePointClassifier(groups=["a", "b"], classes=[0, 1], n_iter=50)


def _total(estimator, grid, param, epsilon, **kwargs):
    candidate = clone(estimator).set_params(**{param: epsilon})
    return search_privacy(candidate, grid, n_samples=N, **kwargs).epsilon


CASES = [
    pytest.param(_logistic, {"batch_size": [128, 256]}, 2, 2.0, id="logistic-cv2"),
    pytest.param(_logistic, {}, 3, 1.0, id="logistic-one-candidate-cv3"),
    pytest.param(_poisson_logistic, {}, 2, 2.0, id="poisson-one-candidate-cv2"),
    pytest.param(
        _logistic,
        [{"batch_size": [64]}, {"batch_size": [256], "epochs": [3]}],
        5,
        4.0,
        id="logistic-two-grids-cv5",
    ),
    pytest.param(
        _scaled_logistic,
        {"dplogisticregression__batch_size": [128, 256]},
        3,
        3.0,
        id="scaler-pipeline-cv3",
    ),
    pytest.param(_saddle, {"alpha": [0.01, 0.1]}, 2, 2.0, id="saddle-cv2"),
]


@pytest.mark.parametrize(("make", "grid", "cv", "budget"), CASES)
def test_within_the_budget_and_the_largest(make, grid, cv, budget):
    estimator, cv = make(), KFold(cv)
    before = repr(estimator.get_params(deep=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        found = epsilon_for_search(
            estimator, grid, total_epsilon=budget, n_samples=N, cv=cv
        )
        again = _total(estimator, grid, found.param, found.epsilon, cv=cv)
        above = _total(
            estimator, grid, found.param, found.epsilon * (1 + 2 * _RTOL), cv=cv
        )
    assert isinstance(found, SearchEpsilon)
    assert found.spent.epsilon <= budget and again == found.spent.epsilon
    # The largest, to the precision promised: a little more exceeds the budget.
    assert above > budget
    assert found.spent.epsilon > 0.98 * budget
    assert repr(estimator.get_params(deep=True)) == before


@pytest.mark.filterwarnings("ignore::skdp.exceptions.WeakDeltaWarning")
def test_a_per_fit_epsilon_above_the_budget():
    # A large delta for the total: two fits at epsilon 1 spend less than 1.
    estimator, kwargs = _logistic(), dict(cv=KFold(2), refit=False, delta=0.2)
    assert _total(estimator, {}, "epsilon", 1.0, **kwargs) < 1.0
    found = epsilon_for_search(estimator, total_epsilon=1.0, n_samples=N, **kwargs)
    assert found.epsilon > 1.0 and found.spent.epsilon <= 1.0
    above = found.epsilon * (1 + 2 * _RTOL)
    assert _total(estimator, {}, "epsilon", above, **kwargs) > 1.0


def test_agrees_with_a_brute_force_bisection():
    estimator, grid, budget = _logistic(), {"batch_size": [128, 256]}, 1.5
    found = epsilon_for_search(
        estimator, grid, total_epsilon=budget, n_samples=N, cv=KFold(2)
    )
    lo, hi = budget / 8, budget  # the total of a search exceeds one fit's
    assert _total(estimator, grid, "epsilon", lo, cv=KFold(2)) <= budget
    assert _total(estimator, grid, "epsilon", hi, cv=KFold(2)) > budget
    while hi / lo > 1 + _RTOL:
        mid = math.sqrt(lo * hi)
        if _total(estimator, grid, "epsilon", mid, cv=KFold(2)) <= budget:
            lo = mid
        else:
            hi = mid
    assert found.epsilon == pytest.approx(lo, rel=2 * _RTOL)


def test_the_model_of_a_pipeline_or_an_explicit_epsilon():
    pipe, budget = _scaled_logistic(0.5), 2.0
    grid = {"dplogisticregression__batch_size": [128, 256]}
    scaler = epsilon_for_search(
        pipe,
        grid,
        total_epsilon=budget,
        n_samples=N,
        cv=KFold(2),
        epsilon_param="dpstandardscaler__epsilon",
    )
    assert scaler.param == "dpstandardscaler__epsilon"
    assert scaler.spent.epsilon <= budget
    # The model keeps its epsilon (1.0): the scaler gets what is left.
    assert _total(pipe, grid, scaler.param, scaler.epsilon, cv=KFold(2)) <= budget
    assert _total(pipe, grid, scaler.param, scaler.epsilon * 1.01, cv=KFold(2)) > budget


def test_a_search_object_gives_the_same_epsilon_and_is_not_changed():
    grid = {"batch_size": [128, 256]}
    search = PrivateGridSearchCV(_logistic(), grid, cv=2)
    before = repr(search.get_params(deep=True))
    from_search = epsilon_for_search(search, total_epsilon=2.0, n_samples=N)
    from_parts = epsilon_for_search(
        _logistic(), grid, total_epsilon=2.0, n_samples=N, cv=KFold(2)
    )
    assert from_search == from_parts
    assert repr(search.get_params(deep=True)) == before


@pytest.mark.parametrize(
    "budget", [0, -1.0, math.nan, math.inf, True, "3", None], ids=repr
)
def test_an_invalid_budget_is_refused(budget):
    with pytest.raises(ValueError, match="total_epsilon must be a finite number"):
        epsilon_for_search(_logistic(), total_epsilon=budget, n_samples=N, cv=KFold(2))


@pytest.mark.parametrize(
    ("make", "grid", "param", "match"),
    [
        (_logistic, {"epsilon": [0.5, 1.0]}, None, "The grid sets 'epsilon'"),
        (
            _scaled_logistic,
            [{}, {"dplogisticregression": [_logistic()]}],
            None,
            "The grid sets 'dplogisticregression'",
        ),
        (_logistic, {}, "batch_size", "is not an epsilon"),
        (_scaled_logistic, {}, "scaler__epsilon", "has no parameter"),
    ],
)
def test_a_parameter_it_cannot_set_is_refused(make, grid, param, match):
    estimator = make()
    before = repr(estimator.get_params(deep=True))
    with pytest.raises(ValueError, match=match):
        epsilon_for_search(
            estimator,
            grid,
            total_epsilon=3.0,
            n_samples=N,
            cv=KFold(2),
            epsilon_param=param,
        )
    assert repr(estimator.get_params(deep=True)) == before


def test_a_budget_another_step_already_exceeds_is_refused():
    # The scaler alone, on 2 folds and the refit, spends more than 0.5.
    pipe = _scaled_logistic(1.0)
    before = repr(pipe.get_params(deep=True))
    assert _total(pipe, {}, "dplogisticregression__epsilon", 0.01, cv=KFold(2)) > 0.5
    with pytest.raises(ValueError, match="too small for this search"):
        epsilon_for_search(pipe, total_epsilon=0.5, n_samples=N, cv=KFold(2))
    assert repr(pipe.get_params(deep=True)) == before


def test_each_leak_warning_is_said_once():
    pipe = make_pipeline(StandardScaler(), _logistic())
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        epsilon_for_search(pipe, total_epsilon=2.0, n_samples=N, cv=KFold(2))
    leaks = [w for w in said if issubclass(w.category, PrivacyLeakWarning)]
    assert len(leaks) == 1 and "standardscaler" in str(leaks[0].message)
    assert leaks[0].filename == __file__


GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "model_selection.md"


def test_the_guide_example_runs():
    text = GUIDE.read_text()
    section = text[text.index("## A search within a total budget") :]
    block = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    namespace = {}
    exec(compile(block, str(GUIDE), "exec"), namespace)  # noqa: S102
    found, budget = namespace["found"], namespace["budget"]
    assert found.spent.epsilon <= budget
    search = namespace["search"]
    assert search.estimator.get_params()[found.param] == found.epsilon
    assert search.privacy_spent_.epsilon == found.spent.epsilon


def test_a_plain_grid_search_over_a_classifier_needs_kfold():
    search = GridSearchCV(_logistic(), {"batch_size": [128]}, cv=2)
    with pytest.raises(TypeError, match="StratifiedKFold"):
        epsilon_for_search(search, total_epsilon=2.0, n_samples=N)

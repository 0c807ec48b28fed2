"""Searches over Pipelines, search objects and the private search wrappers."""

import math
import re
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    ParameterSampler,
    RandomizedSearchCV,
    StratifiedKFold,
    cross_validate,
)
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from skdp.accounting import compose_spent
from skdp.accounting._accountant import epsilon_text
from skdp.exceptions import PrivacyLeakWarning
from skdp.linear_model import DPLogisticRegression
from skdp.model_selection import (
    PrivateGridSearchCV,
    PrivateRandomizedSearchCV,
    search_privacy,
)
from skdp.model_selection._pairs import compose_pairs, replace_one_pair
from skdp.pipeline import PrivatePipeline, privacy_spent
from skdp.preprocessing import DPStandardScaler

MODEL = {"batch_size": 64, "epochs": 2, "classes": [0, 1], "random_state": 0}


def _data(n=300, seed=0):
    X, y = make_classification(n_samples=n, n_features=4, random_state=seed)
    return X / np.linalg.norm(X, axis=1).max(), y


def test_prefixed_pipeline_grid_matches_the_final_step():
    # Issue 20: search_privacy refused a Pipeline and its prefixed grid.
    est = DPLogisticRegression(**MODEL)
    bare = search_privacy(
        est, {"epsilon": [0.5, 1.0], "batch_size": [32, 64]}, n_samples=500, cv=KFold(5)
    )
    pipe = make_pipeline(est)
    grid = {"dplogisticregression__epsilon": [0.5, 1.0]}
    grid["dplogisticregression__batch_size"] = [32, 64]
    assert search_privacy(pipe, grid, n_samples=500, cv=KFold(5)) == bare
    # Nested steps and a list of grids enumerate the same candidates.
    nested = Pipeline([("inner", make_pipeline(est))])
    grids = [
        {
            "inner__dplogisticregression__epsilon": [e],
            **{"inner__dplogisticregression__batch_size": [32, 64]},
        }
        for e in (0.5, 1.0)
    ]
    # The same fits in another order: equal up to rounding.
    other = search_privacy(nested, grids, n_samples=500, cv=KFold(5))
    assert other.epsilon == pytest.approx(bare.epsilon, rel=1e-12)
    np.testing.assert_allclose(other.rdp, bare.rdp, rtol=1e-12)
    # The search object: its estimator, grid, folds and refit are read.
    search = GridSearchCV(pipe, grid, cv=KFold(5))
    assert search_privacy(search, n_samples=500) == bare
    no_refit = search_privacy(
        est,
        {"epsilon": [0.5, 1.0], "batch_size": [32, 64]},
        n_samples=500,
        cv=KFold(5),
        refit=False,
    )
    assert search_privacy(search.set_params(refit=False), n_samples=500) == no_refit


def test_search_object_errors():
    pipe = make_pipeline(DPLogisticRegression(**MODEL))
    grid = {"dplogisticregression__epsilon": [0.5]}
    with pytest.raises(TypeError, match="read from the search object"):
        search_privacy(GridSearchCV(pipe, grid), grid, n_samples=100)
    with pytest.raises(ValueError, match="random_state"):
        search_privacy(RandomizedSearchCV(pipe, grid, n_iter=1), n_samples=100)
    with pytest.raises(ValueError, match="epsilon_typo"):
        search_privacy(
            pipe,
            {"dplogisticregression__epsilon_typo": [1.0]},
            n_samples=100,
            cv=KFold(3),
        )
    with pytest.raises(TypeError, match="privacy_plan"):
        search_privacy(
            make_pipeline(DPLogisticRegression(), StandardScaler()),
            {},
            n_samples=100,
            cv=KFold(3),
        )


def test_randomized_search_accounts_its_drawn_candidates():
    pipe = make_pipeline(DPLogisticRegression(**MODEL))
    dists = {"dplogisticregression__epsilon": [0.3, 0.5, 1.0, 2.0]}
    search = RandomizedSearchCV(pipe, dists, n_iter=2, cv=KFold(4), random_state=3)
    drawn = list(ParameterSampler(dists, 2, random_state=3))
    grid = [{k: [v] for k, v in params.items()} for params in drawn]
    assert search_privacy(search, n_samples=400) == search_privacy(
        pipe, grid, n_samples=400, cv=KFold(4)
    )


def test_dp_scaler_in_front_counts_in_the_total():
    X, y = _data()
    X = (X + 1) / 2  # in the scaler's declared [0, 1]
    scaler = DPStandardScaler(bounds=(0.0, 1.0), epsilon=0.3, random_state=0)
    pipe = make_pipeline(scaler, DPLogisticRegression(row_norm=2.0, **MODEL))
    grid = {"dplogisticregression__epsilon": [1.0]}
    total = search_privacy(pipe, grid, n_samples=300, cv=KFold(3))
    model_only = search_privacy(
        pipe[-1], {"epsilon": [1.0]}, n_samples=300, cv=KFold(3)
    )
    assert total.epsilon > model_only.epsilon
    # The composition of the fits actually run (each fold's and the refit's
    # scaler and model spends), for the worst-placed record.
    out = cross_validate(
        pipe.set_params(**{k: v[0] for k, v in grid.items()}),
        X,
        y,
        cv=KFold(3),
        return_estimator=True,
    )
    refit = clone(pipe).fit(X, y)
    assert refit[0].privacy_spent_ == scaler.fit(X).privacy_spent_
    fits = [privacy_spent(fitted) for fitted in out["estimator"]]
    # Equal folds of 100 rows: a record is in two of the three training sets.
    run = compose_spent([fits[0], fits[1], privacy_spent(refit)], delta=total.delta)
    assert total.epsilon == pytest.approx(run.epsilon, rel=1e-9)
    # Two candidates: the refit is the worse composed curve of the two.
    two = search_privacy(
        pipe, {"dplogisticregression__epsilon": [0.5, 1.0]}, n_samples=300, cv=KFold(3)
    )
    assert two.epsilon > total.epsilon


def test_leak_warning_through_the_search():
    pipe = make_pipeline(StandardScaler(), DPLogisticRegression(**MODEL))
    grid = {"dplogisticregression__epsilon": [0.5, 1.0]}
    with pytest.warns(PrivacyLeakWarning, match="standardscaler"):
        search_privacy(pipe, grid, n_samples=300, cv=KFold(3))
    X, y = _data()
    with pytest.warns(PrivacyLeakWarning, match="standardscaler"):
        PrivateGridSearchCV(pipe, grid, cv=3).fit(X, y)


def test_private_grid_search_reports_the_whole_search():
    X, y = _data()
    est = DPLogisticRegression(**MODEL)
    grid = {"epsilon": [0.5, 2.0]}
    search = PrivateGridSearchCV(est, grid, cv=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # KFold: no warning
        search.fit(X, y)
    expected = search_privacy(est, grid, n_samples=300, cv=KFold(3))
    assert search.privacy_spent_ == expected
    assert search_privacy(search, n_samples=300) == expected
    refit = search.best_estimator_.privacy_spent_
    assert search.refit_privacy_spent_ is refit
    assert refit.epsilon <= 2.0 < search.privacy_spent_.epsilon
    text = repr(search)
    assert "search's fits" in text and epsilon_text(expected.epsilon) in text
    assert "does not cover the validation scores" in text
    assert "refit alone" in text
    # KFold folds, not the StratifiedKFold of an integer cv in GridSearchCV.
    plain = GridSearchCV(est, grid, cv=KFold(3)).fit(X, y)
    np.testing.assert_array_equal(
        search.cv_results_["mean_test_score"], plain.cv_results_["mean_test_score"]
    )
    assert search.cv == 3  # the parameter is left as given
    copy = clone(search)
    assert copy.get_params()["cv"] == 3 and not hasattr(copy, "privacy_spent_")
    assert "whole search" not in repr(copy)


def test_private_randomized_search_accounts_what_it_runs():
    X, y = _data()
    dists = {"epsilon": [0.3, 0.5, 1.0, 2.0, 4.0]}
    est = DPLogisticRegression(**MODEL)
    search = PrivateRandomizedSearchCV(
        est, dists, n_iter=2, cv=3, random_state=np.random.RandomState(1)
    )
    search.fit(X, y)
    ran = [{"epsilon": [p["epsilon"]]} for p in search.cv_results_["params"]]
    assert search.privacy_spent_ == search_privacy(est, ran, n_samples=300, cv=KFold(3))
    assert isinstance(search.random_state, np.random.RandomState)


def test_private_search_bad_input_changes_nothing():
    X, y = _data()
    est = DPLogisticRegression(**MODEL)
    search = PrivateGridSearchCV(est, {"epsilon": [0.5]}, cv=3)
    for bad, error in [
        ({"cv": StratifiedKFold(3)}, TypeError),
        ({"param_grid": {"epsilon_typo": [1.0]}}, ValueError),
        ({"estimator": StandardScaler()}, TypeError),
        ({"delta": 2.0}, ValueError),
    ]:
        broken = clone(search).set_params(**bad)
        before = dict(broken.__dict__)
        with pytest.raises(error):
            broken.fit(X, y)
        assert broken.__dict__.keys() == before.keys()
    # A failed fit leaves a fitted search as it was.
    search.fit(X, y)
    state = dict(search.__dict__)
    with pytest.raises(ValueError):
        search.fit(X, np.full(300, 7))  # labels outside the declared classes
    assert search.__dict__.keys() == state.keys()
    assert search.privacy_spent_ is state["privacy_spent_"]
    assert search.best_estimator_ is state["best_estimator_"]


def test_private_search_checks_the_frame_before_any_fit():
    pd = pytest.importorskip("pandas")
    from skdp import TableSchema
    from skdp.pipeline import make_private_pipeline

    schema = TableSchema(
        {"age": (17, 90), "sex": ["F", "M"], "y": [0, 1]}, target="y", classes=[0, 1]
    )
    pipe = make_private_pipeline(schema, DPLogisticRegression(**MODEL))
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"age": rng.integers(17, 91, 300), "sex": rng.choice(["F", "M"], 300)}
    )
    y = (frame["age"] > 40).astype(int).to_numpy()
    grid = {"dplogisticregression__epsilon": [0.5, 1.0]}
    search = PrivateGridSearchCV(pipe, grid, cv=3)
    before = dict(search.__dict__)
    with pytest.raises(ValueError, match="sex"):
        search.fit(frame.drop(columns="sex"), y)
    assert search.__dict__.keys() == before.keys()
    search.fit(frame, y)
    assert search.privacy_spent_ == search_privacy(
        pipe, grid, n_samples=300, cv=KFold(3)
    )


def test_add_remove_fits_are_accounted_by_group_privacy():
    # DPLogisticRegression under add/remove reports a basic composition with
    # no Rényi curve: composing its fits on curves gives infinity. Each fit
    # is (2 e, (1 + e^e) d) under replace-one; the record's fits and the
    # refit add up (basic composition). Before, search_privacy refused.
    est = DPLogisticRegression(neighbouring="add-remove", delta=1e-6, **MODEL)
    fit = est.privacy_plan(400)[1]
    assert math.isinf(compose_spent([fit, fit]).epsilon)
    total = search_privacy(est, {"epsilon": [0.5, 1.0]}, n_samples=500, cv=KFold(5))
    assert total.neighbouring == "replace-one"
    assert total.epsilon == pytest.approx(4 * 1.0 + 4 * 2.0 + 2.0)
    deltas = 4 * (1 + math.exp(0.5)) + 4 * (1 + math.e) + (1 + math.e)
    assert total.delta == pytest.approx(deltas * 1e-6)
    assert math.isinf(total.at_delta(1e-3).epsilon)  # no curve: never a guess
    with pytest.raises(ValueError, match="sum of the fits' deltas"):
        search_privacy(est, {"epsilon": [0.5]}, n_samples=500, cv=KFold(5), delta=1e-6)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_group_privacy_pair_holds_for_the_gaussian_mechanism(sigma, eps):
    # A sum of rows in the unit ball: sensitivity 1 under add/remove, 2 under
    # replace-one. The exact delta(epsilon) of the Gaussian mechanism (Balle
    # and Wang 2018, Theorem 8) at sensitivity 2 must not exceed the pair
    # replace_one_pair derives from the add/remove one.
    def delta(epsilon, sensitivity):
        a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
        return norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b)

    add_remove = replace(_dummy_spent(), epsilon=eps, delta=delta(eps, 1.0))
    e2, d2 = replace_one_pair(add_remove)
    assert e2 == 2 * eps
    assert delta(e2, 2.0) <= d2 * (1 + 1e-12)


def _dummy_spent():
    return DPLogisticRegression(
        neighbouring="add-remove", delta=1e-6, **MODEL
    ).privacy_plan(100)[1]


def test_compose_pairs_basic_and_advanced():
    pairs = [(0.02, 1e-7)] * 50
    eps, delta, rule = compose_pairs(pairs)
    assert (eps, rule) == (pytest.approx(1.0), "basic composition")
    assert delta == pytest.approx(5e-6)
    eps, delta, rule = compose_pairs(pairs, 1e-5)
    # Dwork and Roth 2014, Theorem 3.20 with k = 50, d' = 1e-5 - 50e-7.
    expected = math.sqrt(100 * math.log(1 / 5e-6)) * 0.02 + 50 * 0.02 * math.expm1(0.02)
    assert rule == "advanced composition" and eps == pytest.approx(expected)
    assert eps < 1.0 and delta == 1e-5


GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "model_selection.md"


def _guide_snippet():
    """The guide's DataFrame -> private Pipeline -> search snippet (the README's)."""
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    return blocks[0]


def test_readme_snippet_runs_in_under_ten_lines():
    pytest.importorskip("pandas")
    from skdp.datasets import load_adult

    snippet = _guide_snippet()
    readme = (GUIDE.parents[2] / "README.md").read_text()
    assert f"```python\n{snippet}```" in readme
    assert len([line for line in snippet.splitlines() if line.strip()]) < 10
    # The same code, on a subsample to keep the test fast.
    full = load_adult(split="train", return_X_y=True, as_frame=True)

    def small(*args, **kwargs):
        X, y = full
        return X.iloc[:2000], y[:2000]

    namespace = {"load_adult": small}
    small_snippet = snippet.replace(
        "from skdp.datasets import ADULT_SCHEMA, load_adult",
        "from skdp.datasets import ADULT_SCHEMA",
    )
    assert small_snippet != snippet
    exec(compile(small_snippet, str(GUIDE), "exec"), namespace)  # noqa: S102
    search = namespace["search"]
    assert search.privacy_spent_.epsilon > search.best_estimator_.privacy_spent_.epsilon
    assert search.best_estimator_.score(*small()) > 0.7


def _leak_messages(record):
    return [str(w.message) for w in record if w.category is PrivacyLeakWarning]


def test_a_private_search_says_each_leak_once():
    # Issue 20: inside a search, every fit of a PrivatePipeline repeated the
    # leak warning (8 times here: the search's own, 6 fold fits, the refit).
    X, y = _data()
    pipe = PrivatePipeline(
        make_pipeline(StandardScaler(), DPLogisticRegression(**MODEL)).steps
    )
    grid = {"dplogisticregression__epsilon": [0.5, 1.0]}
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        PrivateGridSearchCV(pipe, grid, cv=3).fit(X, y)
    (message,) = _leak_messages(record)
    assert message.startswith("Pipeline step 'standardscaler'")
    assert "each of the search's 7 fits" in message  # 2 x 3 folds + refit
    assert "DPStandardScaler" in message and "once for the whole search" in message
    # Outside the search the filter is gone: a fit says it again.
    with pytest.warns(PrivacyLeakWarning, match="standardscaler"):
        clone(pipe).fit(X, y)


def test_a_private_search_says_undeclared_classes_once():
    X, y = _data()
    est = DPLogisticRegression(**{**MODEL, "classes": None})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        PrivateGridSearchCV(est, {"epsilon": [0.5, 1.0]}, cv=3).fit(X, y)
    (message,) = _leak_messages(record)
    assert "classes are not declared" in message

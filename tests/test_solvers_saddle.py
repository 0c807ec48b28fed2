"""Tests of what the two saddle-point solvers share (skdp._solvers._saddle)."""

import dataclasses
import math

import numpy as np
import pytest

from skdp._solvers._gda import GDAPolicy, GDASolver
from skdp._solvers._mirror import MirrorPolicy, MirrorSolver
from skdp._solvers._saddle import (
    SaddleProblem,
    SaddleResult,
    SaddleRows,
    histogram_sensitivity,
    release_group_counts,
)
from skdp.fairness import DPSaddlePointClassifier


def problem(**overrides):
    params = dict(
        n_samples=300,
        n_groups=3,
        n_features=2,
        fit_intercept=True,
        neighbouring="replace-one",
        n_iter=20,
        learning_rate="auto",
        group_step="auto",
        momentum="auto",
        weight_cap=3.0,
        l2=1e-4,
        precondition=False,
        l1_radius=5.0,
        row_norm=1.0,
        feature_bound=None,
        clip_norm="auto",
        max_loss=2.0,
    )
    params.update(overrides)
    return SaddleProblem(**params)


def rows(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2)) / np.sqrt(2)
    g = rng.integers(0, 3, size=n)
    return SaddleRows(X=X, y=(X[:, 0] > 0).astype(int), group_codes=g)


def test_histogram_sensitivity():
    # One entry down and one up (replace-one), or one entry (add/remove).
    assert histogram_sensitivity("replace-one", 2.5) == math.sqrt(2.0) * 2.5
    assert histogram_sensitivity("add-remove", 2.5) == 2.5
    with pytest.raises(ValueError, match="neighbouring must be one of"):
        histogram_sensitivity("swap", 1.0)


def test_release_group_counts():
    codes = np.array([0, 2, 2, 1, 2])
    noisy = release_group_counts(codes, 4, 0.5, 5, np.random.default_rng(3))
    noise = np.random.default_rng(3).normal(0.0, 0.5, size=4)
    np.testing.assert_array_equal(noisy, np.array([1, 1, 3, 0]) + noise)
    # No release: the public n, and no randomness drawn.
    rng = np.random.default_rng(3)
    assert release_group_counts(codes, 1, None, 5, rng).tolist() == [5.0]
    assert rng.normal() == np.random.default_rng(3).normal()


@pytest.mark.parametrize("solver", [GDASolver(), MirrorSolver()])
def test_both_solvers_share_one_interface(solver):
    # Same calls, same result record; the events are the plan's, at the
    # noise the run was given.
    prob, data, z = problem(), rows(), 2.0
    plan = solver.plan(prob)
    schedule = solver.schedule(prob, plan, z)
    result = solver.run(data, prob, schedule, z, rng=np.random.default_rng(0))
    assert isinstance(result, SaddleResult)
    assert result.coef.shape == (3,)
    assert result.group_weights.shape == (3,)
    assert result.group_weights.sum() == pytest.approx(1.0)
    assert result.events == plan.events(z)
    assert result.n_iter == plan.n_iter == 20
    if isinstance(solver, MirrorSolver):
        assert result.draw_ranges == plan.draw_ranges(z)
    else:
        assert result.draw_ranges is None


@pytest.mark.parametrize(
    "tuning",
    [
        {"learning_rate": 0.3},
        {"momentum": 0.0},
        {"weight_cap": None},
        {"group_step": 0.0},
    ],
)
def test_schedule_parameters_cannot_change_the_events(tuning):
    # The plan (hence every event) reads no parameter of the schedule.
    solver = GDASolver()
    assert solver.plan(problem(**tuning)) == solver.plan(problem())


def test_policy_shares_add_up_to_one():
    gda, mirror = GDAPolicy(), MirrorPolicy()
    total = gda.count_share + gda.loss_share + gda.gradient_share
    assert total == pytest.approx(1.0)
    total = mirror.count_share + mirror.group_share + mirror.vertex_share
    assert total == pytest.approx(1.0)


@pytest.mark.parametrize(
    "policy, change",
    [
        (GDAPolicy, {"count_share": 0.0}),
        (GDAPolicy, {"precondition_share": 0.9}),
        (MirrorPolicy, {"group_share": 0.0}),
    ],
)
def test_a_policy_without_a_share_is_refused(policy, change):
    # Every release a run makes needs a positive share of the budget.
    with pytest.raises(ValueError, match="share"):
        dataclasses.replace(policy(), **change)


def test_a_policy_variant_changes_the_run_not_the_spend():
    # How benchmarks compare rules: a subclass maps "gda" to a solver with
    # another policy. Its steps differ; its events and spend do not.
    variant_policy = dataclasses.replace(GDAPolicy(), walk_radius=1.0)

    class Variant(DPSaddlePointClassifier):
        _saddle_solvers = {
            **DPSaddlePointClassifier._saddle_solvers,
            "gda": GDASolver(variant_policy),
        }

    data = rows()
    params = dict(epsilon=0.5, groups=[0, 1, 2], n_iter=30, random_state=0)
    fits = [
        cls(**params).fit(data.X, data.y, sensitive_features=data.group_codes)
        for cls in (DPSaddlePointClassifier, Variant)
    ]
    assert fits[0].privacy_spent_ == fits[1].privacy_spent_
    assert fits[0].noise_multiplier_ == fits[1].noise_multiplier_
    assert not np.array_equal(fits[0].coef_, fits[1].coef_)

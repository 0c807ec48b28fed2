"""The plan's "auto" step and the schedule that follows the calibrated noise.

``skdp/_solvers/_sgd/_plan.py`` (the travel cap) and ``_schedule.py``.
"""

import numpy as np
import pytest

from skdp._solvers._sgd import (
    auto_clip_fraction,
    auto_step_boost,
    make_plan,
    run_logistic_sgd,
    schedule_run,
)

# make_plan arguments of a binary Poisson DP-SGD run with every "auto" setting
# (n_samples and epsilon given by each test).
POISSON_PLAN = dict(
    n_classes=2,
    row_norm=2.0,
    batch_size=100,
    epochs="auto",
    sampling="poisson",
    solver="dp-sgd",
    learning_rate="auto",
    lr_schedule="constant",
    l2=1e-4,
    l1=0.0,
    clip_norm="auto",
    projection_radius=None,
)


def test_auto_poisson_step_shrinks_only_at_small_n_times_epsilon():
    # The "auto" Poisson step is 64 / (beta + alpha) unless the steps would
    # travel further than travel * n * epsilon (in units of 1 / (beta +
    # alpha)): a function of public inputs only (n, epsilon, the relation).
    common = POISSON_PLAN
    unit = 1.0 / (2.0**2 / 4.0 + 1e-4)  # 1 / (beta + alpha), binary, R = 2
    # Batches of 256: 8 * n * 2 over 30 * n / 256 steps is above 64: the 64x
    # step (with batches of 100 the cap binds at every epsilon, 8 * 100 / 15).
    large = make_plan(n_samples=100_000, epsilon=2.0, **{**common, "batch_size": 256})
    assert large.learning_rates[0] == pytest.approx(64 * unit)
    # n = 1000, 10 batches x 30 epochs = 300 steps; 8 * 1000 * 0.1 = 800.
    small = make_plan(n_samples=1000, epsilon=0.1, **common)
    assert np.all(small.learning_rates == pytest.approx(800 / 300 * unit))
    # Add/remove: half the sensitivity, four times the travel (measured).
    added = make_plan(n_samples=1000, epsilon=0.1, neighbouring="add-remove", **common)
    assert added.learning_rates[0] == pytest.approx(4 * small.learning_rates[0])
    # A fixed noise multiplier (no target epsilon), cyclic batches, DP-SGLD
    # and an explicit learning rate keep their steps.
    fixed = make_plan(n_samples=1000, epsilon=None, **common)
    assert fixed.learning_rates[0] == pytest.approx(64 * unit)
    cyclic = make_plan(n_samples=1000, epsilon=0.1, **{**common, "sampling": "cyclic"})
    assert cyclic.learning_rates[0] == pytest.approx(unit)
    sgld = make_plan(n_samples=1000, epsilon=0.1, **{**common, "solver": "dp-sgld"})
    assert sgld.learning_rates[0] == pytest.approx(64 * unit)
    given = make_plan(n_samples=1000, epsilon=0.1, **{**common, "learning_rate": 3.0})
    assert given.learning_rates[0] == 3.0


def test_auto_poisson_clip_grows_only_when_the_noise_is_small():
    # Relative noise z sqrt(p) / b: 0.05 of the bound at >= 0.2, 0.25 at
    # <= 0.05, log-linear in between; the step shrinks by the same factor.
    assert auto_clip_fraction(None) == 0.05
    assert auto_clip_fraction(5.0) == auto_clip_fraction(0.2) == 0.05
    assert auto_clip_fraction(0.05) == pytest.approx(0.25)
    assert auto_clip_fraction(1e-6) == pytest.approx(0.25)
    assert auto_clip_fraction(0.1) == pytest.approx(0.05 * 5**0.5)
    common = {**POISSON_PLAN, "n_samples": 100_000, "epochs": 30, "epsilon": 2.0}
    base = make_plan(**common)
    # z sqrt(p) / b = 0.5 * sqrt(4) / 100 = 0.01: the largest clip (and, at
    # z / b = 0.005, twice the step: auto_step_boost).
    quiet = schedule_run(base, 0.5, 4)
    assert quiet.steps.clip_norm == pytest.approx(5 * base.clip_norm)
    assert quiet.steps.learning_rates[0] == pytest.approx(
        2 * base.learning_rates[0] / 5
    )
    assert quiet.plan is base  # the events stay those calibrated
    # Noisy (z sqrt(p) / b = 0.4), given clip, cyclic: unchanged.
    assert schedule_run(base, 20.0, 4).steps.clip_norm == base.clip_norm
    given = make_plan(**{**common, "clip_norm": 0.3})
    assert schedule_run(given, 0.5, 4).steps.clip_norm == 0.3
    assert (
        schedule_run(given, 0.5, 4).steps.learning_rates[0] == (base.learning_rates[0])
    )
    cyclic = make_plan(**{**common, "sampling": "cyclic"})
    assert schedule_run(cyclic, 0.5, 4).steps.clip_norm == cyclic.clip_norm


def test_auto_poisson_step_grows_only_when_the_noise_per_coordinate_is_small():
    # z / b (noise std on one coordinate of an averaged step over the clip
    # norm): the "auto" step is multiplied by 1 at >= 0.017, 2 at <= 0.011,
    # log-linear in between.
    assert auto_step_boost(None) == 1.0
    assert auto_step_boost(0.5) == auto_step_boost(0.017) == 1.0
    assert auto_step_boost(0.011) == auto_step_boost(1e-9) == 2.0
    assert auto_step_boost((0.017 * 0.011) ** 0.5) == pytest.approx(2**0.5)
    common = {**POISSON_PLAN, "n_samples": 100_000, "epochs": 30, "epsilon": 2.0}
    base = make_plan(**common)
    # Noisy, z / b = 2.5 / 100: the step and clip of the plan.
    noisy = schedule_run(base, 2.5, 10_000).steps
    assert noisy.clip_norm == base.clip_norm
    np.testing.assert_array_equal(noisy.learning_rates, base.learning_rates)
    # z / b = 1.1 / 100 (rho = 1.1 > 0.2: clip unchanged): twice the step.
    quiet = schedule_run(base, 1.1, 10_000).steps
    assert quiet.clip_norm == base.clip_norm
    assert quiet.learning_rates[0] == pytest.approx(2 * base.learning_rates[0])
    # A given learning rate or clip, cyclic batches and DP-SGLD keep their
    # steps.
    for other in (
        {"learning_rate": 3.0},
        {"clip_norm": 0.3},
        {"sampling": "cyclic"},
        {"solver": "dp-sgld"},
    ):
        plan = make_plan(**{**common, **other})
        steps = schedule_run(plan, 1.1, 10_000).steps
        assert steps.clip_norm == plan.clip_norm
        np.testing.assert_array_equal(steps.learning_rates, plan.learning_rates)


def test_a_scheduled_run_reports_the_events_of_its_plan():
    # The schedule changes the clip and the step, never the plan: the run's
    # events are those the noise was calibrated for.
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(2000, 4)) / 2.0
    y = (X[:, 0] + 0.3 * rng.normal(size=2000) > 0).astype(int)
    plan = make_plan(n_samples=2000, epsilon=8.0, **{**POISSON_PLAN, "epochs": 2})
    schedule = schedule_run(plan, 0.5, 5)
    assert schedule.plan is plan
    assert schedule.steps.clip_norm > plan.clip_norm
    result = run_logistic_sgd(
        X,
        y,
        schedule.plan,
        0.5,
        steps=schedule.steps,
        row_norm=2.0,
        fit_intercept=True,
        rng=np.random.default_rng(0),
    )
    assert result.events == plan.events(0.5)
    assert result.steps is schedule.steps
    assert result.weights.shape == (5, 1)

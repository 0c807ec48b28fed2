"""DPLogisticRegression under add/remove: the number of rows is private.

Neighbouring data sets differ by one row, so nothing released may depend on
the true ``n`` except through what is accounted: the plan (sampling rate,
steps, step size, clip, noise, delta, the reported spend) must be a function
of public inputs and of the released noisy count alone.
"""

import math

import numpy as np
import pytest
from sklearn.datasets import make_classification

from skdp.accounting import GaussianEvent, account
from skdp.linear_model import DPLogisticRegression, _budget

RELEASED = ("n_iter_", "noise_multiplier_", "max_grad_norm_", "learning_rate_")


def _data(n=513, seed=0, n_classes=2):
    X, y = make_classification(
        n_samples=n,
        n_features=4,
        n_informative=3,
        n_redundant=0,
        n_classes=n_classes,
        random_state=seed,
    )
    return X / np.linalg.norm(X, axis=1).max(), y


def _released(est):
    return tuple(getattr(est, name) for name in RELEASED) + (
        est.delta_,
        est.privacy_spent_,
    )


def _fit(X, y, n, seed, **params):
    params = {"epsilon": 1.0, "delta": 1e-5, "classes": np.unique(y), **params}
    est = DPLogisticRegression(neighbouring="add-remove", random_state=seed, **params)
    return est.fit(X[:n], y[:n])


@pytest.mark.parametrize("count", [40, 300, 512, 5000])
@pytest.mark.parametrize("params", [{}, {"epsilon": 0.1}, {"calibration_share": 0.0}])
def test_plan_is_a_function_of_the_released_count_only(monkeypatch, count, params):
    # Fits of 512 and 513 rows whose noisy counts land on the same value
    # release bit-identical plans (steps, noise, clip, step size, delta,
    # spend): the true n is read only through the count. Before the count,
    # the plan read n itself (60 against 90 steps here, issue 21).
    X, y = _data()
    monkeypatch.setattr(
        _budget,
        "released_size",
        lambda n, std, rng: max(1, round(count + 0.0 * rng.normal(0.0, std))),
    )
    small, large = (_fit(X, y, n, 7, **params) for n in (512, 513))
    assert _released(small) == _released(large)
    if params.get("epsilon", 1.0) >= 1.0:
        # The data do differ (at epsilon 0.1 on 512 rows the probability
        # floor releases the prior for both, so their coefficients agree).
        assert not np.array_equal(small.coef_, large.coef_)


def test_same_seed_neighbours_share_the_plan_without_any_patch():
    # Same seed, n and n + 1 rows: the released counts differ by exactly one,
    # so the number of steps (ceil(count / 256) epochs' worth) agrees unless
    # the count straddles a multiple of 256; the old plan read n and never
    # agreed here (60 against 90 steps).
    X, y = _data()
    steps = [
        [_fit(X, y, n, seed, epochs=1).n_iter_ for n in (512, 513)]
        for seed in range(12)
    ]
    agree = [small == large for small, large in steps]
    assert sum(agree) >= 10


def test_released_count_is_the_accounted_gaussian():
    # The plan reads n + N(0, std^2), rounded (post-processing), with std the
    # noise whose exact Gaussian-DP spend is the count's share of the budget.
    release = _budget.count_release(0.02, 0.02 * 1e-5)
    std, spent = release.std, release.spent
    assert spent.epsilon <= 0.02
    direct = account(
        GaussianEvent(std), 0.02 * 1e-5, neighbouring="add-remove", accountant="pld"
    )
    assert direct.epsilon == pytest.approx(spent.epsilon, rel=1e-9)
    rng = np.random.default_rng(0)
    draws = np.array([_budget.released_size(10_000, std, rng) for _ in range(4000)])
    assert abs(draws.mean() - 10_000) < 4 * std / math.sqrt(draws.size)
    assert draws.std() == pytest.approx(std, rel=0.05)
    assert _budget.released_size(5, 1e6, np.random.default_rng(1)) >= 1


@pytest.mark.parametrize("n_classes", [2, 3])
def test_spend_is_the_count_plus_the_training_target(monkeypatch, n_classes):
    # The count is (eps_c, delta_c)-DP, the training run calibrated on the
    # released count is (epsilon - eps_c, delta - delta_c)-DP whatever the
    # count: basic composition gives (epsilon, delta). The training's own
    # events at the released noise meet their share.
    X, y = _data(n=900, n_classes=n_classes)
    monkeypatch.setattr(_budget, "released_size", lambda n, std, rng: 850)
    est = _fit(X, y, 900, 3)
    spent = est.privacy_spent_
    assert spent.neighbouring == "add-remove"
    assert spent.delta == 1e-5
    assert spent.epsilon == pytest.approx(1.0, abs=1e-12)
    assert "gaussian count" in spent.bound and "basic composition" in spent.bound
    count = _budget.count_release(0.02, 0.02 * 1e-5).spent
    plan = est._plan(850, n_classes, 1e-5)
    training = account(
        plan.events(est.noise_multiplier_),
        1e-5 - count.delta,
        neighbouring="add-remove",
        accountant="pld",
    )
    assert training.epsilon <= 1.0 - count.epsilon
    assert training.epsilon >= 0.97 * (1.0 - count.epsilon)
    # The plan is the one privacy_plan gives for that count, spend included.
    z, planned, delta = est.privacy_plan(850, n_classes)
    assert (z, planned, delta) == (est.noise_multiplier_, spent, 1e-5)
    # No Rényi curve bounds the whole: re-conversions give infinity.
    assert math.isinf(spent.at_delta(1e-6).epsilon)


def test_add_remove_refuses_a_default_delta_or_a_fixed_noise():
    X, y = _data()
    with pytest.raises(ValueError, match="explicit delta"):
        DPLogisticRegression(neighbouring="add-remove").fit(X, y)
    with pytest.raises(ValueError, match="target epsilon"):
        DPLogisticRegression(
            neighbouring="add-remove", epsilon=None, noise_multiplier=2.0, delta=1e-5
        ).fit(X, y)
    est = DPLogisticRegression(neighbouring="add-remove")
    with pytest.raises(ValueError, match="explicit delta"):
        est.privacy_plan(500)
    assert not hasattr(est, "coef_")


def test_a_count_far_from_n_still_runs_and_meets_the_target(monkeypatch):
    # A count far below (1: every row in every batch, one step an epoch) or
    # above n changes the rate the rows are drawn at, not the guarantee.
    X, y = _data()
    for count in (1, 100_000):
        monkeypatch.setattr(
            _budget, "released_size", lambda n, std, rng, count=count: count
        )
        est = _fit(X, y, 513, 0, epochs=2)
        assert np.all(np.isfinite(est.coef_))
        assert est.privacy_spent_.epsilon <= 1.0
        assert est.n_iter_ == 2 * -(-count // min(256, count))

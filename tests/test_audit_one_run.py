"""One-run audit (Steinke, Nasr, Jagielski 2023): exact tail, validity, teeth."""

import math

import numpy as np
import pytest
from _broken import NoiseDividedBy10, unit_rows
from scipy.stats import binom

from skdp.audit import (
    OneRunAuditResult,
    audit_one_run,
    one_run_epsilon_lower,
    one_run_p_value,
)
from skdp.audit._one_run import _p_values
from skdp.fairness import DPSaddlePointClassifier
from skdp.linear_model import DPLogisticRegression

# Strong setting (see test_audit_estimators.py): full batch, no intercept,
# clipping always active on the canaries.
STRONG = {
    "batch_sampling": "cyclic",
    "epochs": 1,
    "batch_size": 2000,
    "fit_intercept": False,
    "max_grad_norm": 0.25,
}


@pytest.fixture(scope="module")
def data():
    return unit_rows(200, 4, seed=0)


def test_p_value_without_delta_is_the_binomial_tail():
    for m, r, v, eps in [(100, 50, 40, 1.0), (1000, 200, 150, 0.5), (10, 10, 3, 2)]:
        q = math.exp(eps) / (1 + math.exp(eps))
        expected = binom.sf(v - 1, r, q)
        assert one_run_p_value(m, r, v, eps, 0.0) == pytest.approx(expected)


def test_p_value_delta_term_by_brute_force():
    m, r, v, eps, delta = 50, 30, 24, 0.7, 1e-3
    q = math.exp(eps) / (1 + math.exp(eps))
    worst = max(
        sum(binom.pmf(j, r, q) for j in range(v - i, v)) / i for i in range(1, v + 1)
    )
    expected = binom.sf(v - 1, r, q) + 2 * m * delta * worst
    assert one_run_p_value(m, r, v, eps, delta) == pytest.approx(expected)
    assert one_run_p_value(m, r, 0, eps, delta) == 1.0


def test_epsilon_lower_all_correct_matches_closed_form():
    # delta = 0, v = r: p-value q^r, so the bound is logit(alpha^(1/r)).
    for r in (20, 100, 1000):
        q = 0.05 ** (1 / r)
        exact = math.log(q / (1 - q))
        bound = one_run_epsilon_lower(r, r, r, 0.0, 0.05)
        assert exact - 0.001 <= bound <= exact
        assert one_run_p_value(r, r, r, bound, 0.0) <= 0.05
    assert one_run_epsilon_lower(100, 100, 50, 1e-5, 0.05) == 0.0


def test_epsilon_lower_is_valid_for_randomised_response():
    # An exactly eps-DP mechanism: each bit kept with prob e^eps / (1 + e^eps).
    # The bound must exceed eps in at most about alpha of the runs.
    rng = np.random.default_rng(0)
    eps, m, runs = 1.0, 200, 300
    keep = math.exp(eps) / (1 + math.exp(eps))
    correct = rng.binomial(m, keep, size=runs)
    exceed = sum(one_run_epsilon_lower(m, m, int(v), 0.0, 0.05) > eps for v in correct)
    assert exceed <= 0.05 * runs + 3 * math.sqrt(0.05 * runs)


@pytest.mark.parametrize("m", [100, 1000, 5000])
@pytest.mark.parametrize("delta", [0.0, 1e-6, 1e-5, 1e-4])
def test_p_value_is_non_decreasing_in_epsilon(m, delta):
    # one_run_epsilon_lower's validity needs the p-value non-decreasing in
    # epsilon between grid points; its delta term is not monotone in general.
    epsilons = np.arange(0.0, 10.0 + 0.005, 0.01)
    for share in (0.05, 0.25, 1.0):
        r = max(1, int(share * m))
        if r > 1000:
            continue
        for frac in (0.55, 0.7, 0.85, 1.0):
            v = int(round(frac * r))
            p = _p_values(m, r, v, epsilons, delta)
            assert np.all(np.diff(p) >= -1e-12), (m, r, v, delta)


def test_validation_of_counts():
    with pytest.raises(ValueError, match="v <= r <= m"):
        one_run_p_value(10, 11, 3, 1.0, 0.0)
    with pytest.raises(ValueError, match="integer"):
        one_run_epsilon_lower(10, 5.0, 3, 0.0, 0.05)
    with pytest.raises(ValueError, match="alpha"):
        one_run_epsilon_lower(10, 5, 3, 0.0, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        one_run_p_value(10, 5, 3, -1.0, 0.0)


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
@pytest.mark.parametrize(
    "settings",
    [
        STRONG,
        {"batch_sampling": "cyclic", "epochs": 2, "batch_size": 100},
        {"batch_sampling": "shuffle", "epochs": 2, "batch_size": 100},
        {"batch_sampling": "poisson", "epochs": 2, "batch_size": 100},
    ],
    ids=["strong", "cyclic", "shuffle", "poisson"],
)
def test_honest_logistic_passes(data, settings, epsilon):
    X, y = data
    est = DPLogisticRegression(epsilon=epsilon, **settings)
    result = audit_one_run(est, X, y, n_canaries=500, random_state=0)
    assert isinstance(result, OneRunAuditResult)
    assert result.epsilon_reported <= epsilon * (1 + 1e-9)
    assert result.epsilon_lower <= result.epsilon_reported


def test_one_run_catches_a_tenth_of_the_noise(data):
    X, y = data
    est = NoiseDividedBy10(epsilon=1.0, **STRONG)
    result = audit_one_run(est, X, y, n_canaries=1000, random_state=0)
    assert result.epsilon_reported == pytest.approx(1.0, abs=0.01)
    assert result.epsilon_lower > 2 * result.epsilon_reported
    assert result.correct_guesses >= 0.95 * result.k_guesses


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_honest_saddle_point_passes(data, epsilon):
    X, y = data
    groups = np.where(np.arange(X.shape[0]) % 4 == 0, "a", "b")
    est = DPSaddlePointClassifier(epsilon=epsilon, groups=["a", "b"], n_iter=20)
    result = audit_one_run(
        est, X, y, n_canaries=300, random_state=0, sensitive_features=groups
    )
    assert result.epsilon_lower <= result.epsilon_reported <= epsilon * (1 + 1e-9)


def test_result_and_reproducibility(data):
    X, y = data
    est = DPLogisticRegression(epsilon=1.0, **STRONG)
    one = audit_one_run(est, X, y, n_canaries=50, k_guesses=[5, 10], random_state=3)
    two = audit_one_run(est, X, y, n_canaries=50, k_guesses=[5, 10], random_state=3)
    np.testing.assert_array_equal(one.scores, two.scores)
    np.testing.assert_array_equal(one.bits, two.bits)
    assert one.candidates == (5, 10) and one.k_guesses in (5, 10)
    assert one.scores.shape == (50,) and set(np.unique(one.bits)) <= {-1.0, 1.0}
    assert 0 <= one.correct_guesses <= one.k_guesses
    assert set(one.to_dict()) >= {"epsilon_lower", "epsilon_reported", "k_guesses"}
    with pytest.raises(ValueError):
        one.scores[0] = 1.0
    other = audit_one_run(est, X, y, n_canaries=50, random_state=4)
    assert not np.array_equal(one.bits, other.bits)


def test_one_run_validation(data):
    X, y = data
    est = DPLogisticRegression(epsilon=1.0, **STRONG)
    with pytest.raises(ValueError, match="n_canaries"):
        audit_one_run(est, X, y, n_canaries=0)
    with pytest.raises(ValueError, match="k_guesses"):
        audit_one_run(est, X, y, n_canaries=10, k_guesses=11)
    with pytest.raises(ValueError, match="alpha"):
        audit_one_run(est, X, y, alpha=0)
    with pytest.raises(ValueError, match="labels"):
        audit_one_run(est, X)
    saddle = DPSaddlePointClassifier(epsilon=1.0, n_iter=5)
    with pytest.raises(ValueError, match="groups="):
        audit_one_run(saddle, X, y, sensitive_features=np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="sensitive_features"):
        audit_one_run(
            DPSaddlePointClassifier(epsilon=1.0, groups=[0], n_iter=5),
            X,
            y,
            sensitive_features=np.zeros(3),
        )


def test_one_run_refuses_add_remove(data):
    # Flipping a canary's sign is a replacement: an add/remove claim cannot be
    # tested that way (a review disproved an honest add/remove mechanism).
    X, y = data
    est = DPLogisticRegression(epsilon=1.0, neighbouring="add-remove", classes=[0, 1])
    with pytest.raises(ValueError, match="replace-one claims only"):
        audit_one_run(est, X, y, n_canaries=20, random_state=0)

"""DPStandardScaler per column: each column's noise follows its own bounds."""

import itertools

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdp import DPLogisticRegression
from skdp.accounting import compose_spent
from skdp.datasets import load_adult
from skdp.preprocessing import DPStandardScaler

pd = pytest.importorskip("pandas")


def exact_gaussian_delta(epsilon, mu):
    """Delta of one Gaussian mechanism at sensitivity / noise = mu (Balle-Wang)."""
    return norm.cdf(-epsilon / mu + mu / 2) - np.exp(epsilon) * norm.cdf(
        -epsilon / mu - mu / 2
    )


def released(row, lower, upper):
    """What one row adds to the released sums, per column: (x - l, (x - l)^2)."""
    shifted = np.clip(row, lower, upper) - lower
    return np.vstack([shifted, shifted**2])


def test_sensitivity_per_column_and_epsilon_match_exact_gaussian():
    lower = np.array([0.0, 0.0, -5.0])
    upper = np.array([1.0, 10_000.0, 5.0])
    X = np.random.default_rng(0).uniform(lower, upper, size=(500, 3))
    scaler = DPStandardScaler((lower, upper), epsilon=0.7, random_state=0).fit(X)
    z = scaler.noise_multiplier_
    # Each column's noise is proportional to its own width (and squared width).
    width = upper - lower
    np.testing.assert_allclose(scaler.noise_std_[0] / width, scaler.noise_std_[0, 0])
    np.testing.assert_allclose(scaler.noise_std_[1] / width**2, scaler.noise_std_[1, 0])
    # Worst case over replacing one row (values on a grid, beyond the bounds
    # too): the change of the released sums in units of their noise.
    grid = [
        np.linspace(lo - w, hi + w, 7)
        for lo, hi, w in zip(lower, upper, width, strict=True)
    ]
    rows = np.array(list(itertools.product(*grid)))
    moves = np.array([released(r, lower, upper) / scaler.noise_std_ for r in rows])
    worst = max(
        np.linalg.norm(moves[i] - moves[j]) for i in range(len(rows)) for j in range(i)
    )
    mu = 1.0 / z
    assert worst == pytest.approx(mu, rel=1e-12)  # attained at opposite corners
    # The reported (epsilon, delta) against the exact Gaussian trade-off.
    spent = scaler.privacy_spent_
    assert spent.epsilon <= 0.7
    assert exact_gaussian_delta(spent.epsilon, worst) <= spent.delta * (1 + 1e-6)
    assert exact_gaussian_delta(0.97 * spent.epsilon, worst) > spent.delta


def test_noise_std_is_the_noise_actually_added():
    lower, upper = np.array([0.0, 0.0]), np.array([1.0, 10_000.0])
    X = np.tile([[0.5, 5_000.0]], (1_000, 1))
    means = np.array(
        [
            DPStandardScaler((lower, upper), epsilon=1.0, random_state=s).fit(X).mean_
            for s in range(400)
        ]
    )
    expected = DPStandardScaler((lower, upper), epsilon=1.0).fit(X).noise_std_[0]
    np.testing.assert_allclose(means.std(axis=0) * 1_000, expected, rtol=0.12)


def test_mixed_ranges_stay_within_one_point_of_exact_standardisation():
    X, y = load_adult(return_X_y=True, as_frame=True)
    columns = [
        (X["age"], 17, 90),
        (X["education_num"], 1, 16),
        (X["hours_per_week"], 1, 99),
        (X["capital_gain"].clip(upper=10_000), 0, 10_000),
        (X["sex"] == "Male", 0, 1),
        (X["marital_status"] == "Married-civ-spouse", 0, 1),
        (X["race"] == "White", 0, 1),
        (X["occupation"] == "Exec-managerial", 0, 1),
        (X["occupation"] == "Prof-specialty", 0, 1),
        (X["workclass"] == "Private", 0, 1),
    ]
    M = np.column_stack([np.asarray(c, dtype=float) for c, _, _ in columns])
    lower = np.array([lo for _, lo, _ in columns], dtype=float)
    upper = np.array([hi for _, _, hi in columns], dtype=float)
    X_train, X_test, y_train, y_test = train_test_split(
        M, y.to_numpy(), test_size=0.25, random_state=0
    )

    def model():
        # Standardised rows of 10 columns: norms mostly below 2 sqrt(10).
        row_norm = 2 * np.sqrt(M.shape[1])
        return DPLogisticRegression(
            epsilon=4.0, row_norm=row_norm, classes=[0, 1], random_state=0
        )

    private = make_pipeline(
        DPStandardScaler((lower, upper), epsilon=1.0, random_state=0), model()
    ).fit(X_train, y_train)
    exact = make_pipeline(StandardScaler(), model()).fit(X_train, y_train)
    total = compose_spent([private[0].privacy_spent_, private[1].privacy_spent_])
    assert total.epsilon <= 5.0
    majority = max(y_test.mean(), 1 - y_test.mean())
    assert exact.score(X_test, y_test) > majority + 0.05
    assert abs(private.score(X_test, y_test) - exact.score(X_test, y_test)) <= 0.01
    # The 0/1 columns keep a scale near their true one (not the 1% floor).
    true_scale = X_train.std(axis=0)
    np.testing.assert_allclose(private[0].scale_[4:], true_scale[4:], rtol=0.1)

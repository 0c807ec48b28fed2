"""The audit catches the false DP-SGLD formula (PRIVACY.md section 4) in action.

The Langevin seed paper's Theorem 3.1 claims
``rho(a) = 4 a L^2 / (lam n^2 sigma^2) (1 - exp(-lam / 2 sum_k eta_k))``
for minibatch SGLD. Its sensitivity step replaces the posterior chance that
the differing record was in the batch by the prior ``m / n``. With one step
on a batch of one record the record is used with probability ``1 / n``, and
when it is, the noise (std ``sqrt(2 eta) sigma``) hides it poorly: an audit
sees it in about one fit in ``n`` and that is enough to beat the claim.
The mechanism below is built here, in the test, only to be caught: skdp never
reports this formula.
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.special import expit
from sklearn.base import BaseEstimator

from skdp.accounting import DEFAULT_ORDERS, rdp_to_epsilon
from skdp.audit import audit


def seed_theorem_epsilon(n, lipschitz, strong_convexity, sigma, steps, delta):
    """Epsilon the seed paper's (false) Theorem 3.1 would report.

    Parameters
    ----------
    n : int
    lipschitz, strong_convexity, sigma : float
    steps : sequence of float
        Step sizes ``eta_k``.
    delta : float

    Returns
    -------
    epsilon : float
    """
    coefficient = (
        4
        * lipschitz**2
        / (strong_convexity * n**2 * sigma**2)
        * (1 - math.exp(-strong_convexity / 2 * sum(steps)))
    )
    orders = np.asarray(DEFAULT_ORDERS, dtype=float)
    epsilon, _ = rdp_to_epsilon(orders, coefficient * orders, delta, warn=False)
    return float(epsilon)


class OneStepSGLDWithSeedClaim(BaseEstimator):
    """One SGLD step on one uniformly drawn record, claiming Theorem 3.1.

    Logistic loss plus ``strong_convexity / 2 ||w||^2`` on rows scaled to norm
    at most ``row_norm`` (so the loss is ``row_norm``-Lipschitz), from
    ``w = 0``: ``w = -eta grad + sqrt(2 eta) sigma Z``.
    """

    def __init__(
        self,
        *,
        learning_rate=0.5,
        strong_convexity=1.0,
        sigma=0.1,
        row_norm=2.0,
        delta=1e-5,
        random_state=None,
    ):
        self.learning_rate = learning_rate
        self.strong_convexity = strong_convexity
        self.sigma = sigma
        self.row_norm = row_norm
        self.delta = delta
        self.random_state = random_state

    def fit(self, X, y):
        """Take the one noisy step and record the claimed spend."""
        X = np.asarray(X, dtype=float)
        n, d = X.shape
        scale = np.maximum(np.linalg.norm(X, axis=1) / self.row_norm, 1.0)
        X = X / scale[:, None]
        rng = np.random.default_rng(self.random_state)
        i = rng.integers(n)
        eta = self.learning_rate
        w = np.zeros(d)
        gradient = (expit(X[i] @ w) - y[i]) * X[i] + self.strong_convexity * w
        w = w - eta * gradient + math.sqrt(2 * eta) * self.sigma * rng.normal(size=d)
        self.coef_ = w[None, :]
        epsilon = seed_theorem_epsilon(
            n, self.row_norm, self.strong_convexity, self.sigma, [eta], self.delta
        )
        self.privacy_spent_ = SimpleNamespace(epsilon=epsilon, delta=self.delta)
        return self


def test_privacy_md_counterexample_numbers():
    # PRIVACY.md section 4: n = 100, m = 1, eta = 0.5, lam = 1, sigma = 0.1,
    # order 2 claims 0.071 (with L = 2, the norm bound used here).
    coefficient = 4 * 2.0**2 / (1.0 * 100**2 * 0.1**2) * (1 - math.exp(-0.25))
    assert 2 * coefficient == pytest.approx(0.071, abs=5e-4)


def test_audit_catches_the_seed_sgld_claim():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(100, 2))
    y = (X[:, 0] > 0).astype(int)
    result = audit(OneStepSGLDWithSeedClaim(), X, y, n_trials=32000, random_state=0)
    assert result.epsilon_reported == pytest.approx(1.08, abs=0.01)
    assert result.epsilon_lower > result.epsilon_reported

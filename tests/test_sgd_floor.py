"""The probability floor (``skdp/_solvers/_sgd/_floor.py``)."""

import numpy as np
import pytest

from skdp._solvers._sgd import anchor_logits, fit_temperature, temperature_bound
from skdp._solvers._sgd._floor import _temperature_derivatives


@pytest.mark.parametrize("n_classes", [2, 3, 10])
def test_temperature_row_contribution_within_its_bound(n_classes):
    """One row's derivative vector never exceeds temperature_bound (privacy)."""
    rng = np.random.default_rng(0)
    n_out = 1 if n_classes == 2 else n_classes
    bound = temperature_bound(n_classes)
    largest = 0.0
    for _ in range(300):
        d = 4
        W = rng.normal(0.0, rng.choice([0.1, 3.0, 100.0]), size=(d + 1, n_out))
        x = rng.normal(size=(1, d))
        code = np.array([rng.integers(n_classes)])
        prior = rng.dirichlet(np.full(n_classes, rng.choice([0.05, 1.0])))
        anchor = anchor_logits(np.log(np.maximum(prior, 1e-300)))
        v = _temperature_derivatives(
            x, code, W, anchor, row_norm=5.0, fit_intercept=True
        )
        # The sum over one row is that row's contribution.
        largest = max(largest, np.linalg.norm(v))
        assert np.linalg.norm(v) <= bound * (1 + 1e-12)
    assert largest > 0.3 * bound  # the bound is not vacuous


def test_temperature_stays_one_when_the_release_is_noise():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    codes = (rng.random(50) < 0.5).astype(int)
    W = rng.normal(size=(4, 1))
    anchor = np.array([0.3])
    picks = [
        fit_temperature(
            X,
            codes,
            W,
            anchor,
            1e6 * temperature_bound(2),
            row_norm=2.0,
            fit_intercept=True,
            rng=np.random.default_rng(seed),
        )
        for seed in range(200)
    ]
    assert np.mean(np.asarray(picks) == 1.0) > 0.9

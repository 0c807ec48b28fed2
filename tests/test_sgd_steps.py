"""One noisy step (``skdp/_solvers/_sgd/_steps.py``)."""

import numpy as np
import pytest
from scipy.special import expit, softmax

from skdp._solvers._sgd._batches import Batch
from skdp._solvers._sgd._steps import LogisticLoss, clipped_gradient_sum


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_clipped_gradient_sum_matches_per_example_loop(n_classes, fit_intercept):
    rng = np.random.default_rng(0)
    Xb = rng.normal(size=(20, 4)) * 2
    n_out = 1 if n_classes == 2 else n_classes
    W = rng.normal(size=(4 + fit_intercept, n_out))
    labels = rng.integers(n_classes, size=20)
    Yb = labels[:, None].astype(float) if n_classes == 2 else np.eye(n_classes)[labels]
    weights = rng.random(20)
    feature_norm, clip = 1.5, 0.7
    norms = np.linalg.norm(Xb, axis=1)
    scale = np.minimum(1.0, feature_norm / norms)
    full = (norms * scale) ** 2 + fit_intercept
    loss = LogisticLoss(n_classes == 2, fit_intercept, clip)
    batch = Batch(Xb, Yb, scale, np.sqrt(full), weights)
    got = clipped_gradient_sum(W, batch, loss)
    expected = np.zeros_like(W)
    for i in range(20):
        x = Xb[i] * scale[i]
        if fit_intercept:
            x = np.append(x, 1.0)
        s = x @ W
        p = expit(s) if n_classes == 2 else softmax(s)
        g = weights[i] * np.outer(x, p - Yb[i])
        expected += g * min(1.0, clip / np.linalg.norm(g))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)

"""
Auditing a privacy claim, and what the scores look like
=======================================================

:func:`skdp.audit.audit` checks a reported epsilon *empirically*: it trains
the estimator many times on two neighbouring data sets (the last row is a
canary, or its mirror image: replace-one), scores every fitted model, and
turns the attack's true and false positive rates into a lower bound on
epsilon that holds with confidence ``1 - alpha`` (Clopper-Pearson).

A lower bound *above* the reported epsilon would prove the claim false. One
below it is only consistent with the claim: an audit with a few hundred fits
cannot certify privacy, it can only catch a broken one. The second audit
below points it at a broken one.
"""

import matplotlib.pyplot as plt
import numpy as np

from skdp import DPLogisticRegression
from skdp.audit import audit

# %%
# A small data set: rows of norm at most 1
# ----------------------------------------
rng = np.random.default_rng(0)
X = rng.normal(size=(200, 5))
X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
y = (X[:, 0] + 0.3 * rng.normal(size=200) > 0).astype(int)

# %%
# An honest estimator
# -------------------
# ``canary="auto"`` appends a feature column that only the canary uses; the
# score of a fitted model is its coefficient on that column (the strongest
# attack on the released model for linear classifiers).
honest = DPLogisticRegression(
    epsilon=2.0, row_norm=1.0, epochs=5, classes=[0, 1], random_state=0
)
result = audit(honest, X, y, n_trials=300, random_state=0)
print(result)

# %%
# The histograms of the scores with and without the canary; the dashed line is
# the test's threshold, chosen on half of the fits and evaluated on the other
# half (so the bound stays valid despite the choice).
result.plot()
plt.tight_layout()

# %%
# A broken claim
# --------------
# The same model with a tenth of the noise it needs, while still *claiming*
# the epsilon of the honest run: ``epsilon=None`` fixes the noise multiplier.
# A wrapper that reports the honest run's spend stands in for a buggy
# accountant.
noise = honest.privacy_plan(len(y))[0]


class UnderNoised(DPLogisticRegression):
    """Runs with a tenth of the calibrated noise but reports the honest spend."""

    def fit(self, X, y):
        super().fit(X, y)
        self.privacy_spent_ = honest.privacy_plan(X.shape[0])[1]
        return self


broken = UnderNoised(
    epsilon=None,
    noise_multiplier=noise / 10,
    row_norm=1.0,
    epochs=5,
    classes=[0, 1],
    random_state=0,
)
caught = audit(broken, X, y, n_trials=300, random_state=0)
print(caught)
disproved = caught.epsilon_lower > caught.epsilon_reported
verdict = "disproved" if disproved else "not caught"
print(
    f"claim of epsilon={caught.epsilon_reported:.3g}: {verdict} "
    f"at {1 - caught.alpha:.0%} confidence"
)
caught.plot()
plt.tight_layout()
plt.show()

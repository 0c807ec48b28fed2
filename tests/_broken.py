"""Deliberately broken estimators and data for checking that audits have teeth.

Shared by the audit tests and ``benchmarks/bench_audit.py`` (which puts this
directory on ``sys.path``), so that every place tests the same broken variant.
"""

from dataclasses import fields, replace

import numpy as np

from skdp._solvers._gda import GDAPlan
from skdp.fairness import DPSaddlePointClassifier
from skdp.linear_model import DPLogisticRegression

# The strong setting: full-batch cyclic DP-SGD on a few rows without intercept,
# clip norm a quarter of the row norm. Clipping is always active on the
# canary, so its two versions move the canary's coefficient by exactly
# +-eta C / b per step, the sensitivity the accountant charges: the attack is
# as strong as it can be and the reported epsilon is close to the true one.
STRONG_ROWS = 10
STRONG = {
    "batch_sampling": "cyclic",
    "epochs": 1,
    "batch_size": STRONG_ROWS,
    "fit_intercept": False,
    "max_grad_norm": 0.25,
}


def unit_rows(n, d, seed=0):
    """Rows uniform in a cube scaled to largest norm 1; label = sign of column 0."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    X /= np.linalg.norm(X, axis=1).max()
    return X, (X[:, 0] > 0).astype(int)


class NoiseDividedBy(DPLogisticRegression):
    """Broken on purpose: noise multiplier z / factor, the spend of z reported.

    ``factor`` is a class attribute so that ``clone`` keeps it; subclasses
    below fix other factors.
    """

    factor = 4.0

    def fit(self, X, y, sample_weight=None):
        """Fit with a fraction of the calibrated noise; report the honest spend."""
        # The run below has no temperature step (fixed noise), so neither does
        # the plan whose spend it reports.
        epsilon, share = self.epsilon, self.calibration_share
        self.calibration_share = 0.0
        try:
            z, spent, _ = self.privacy_plan(np.shape(X)[0], np.unique(y).size)
            self.epsilon, self.noise_multiplier = None, z / self.factor
            super().fit(X, y, sample_weight)
        finally:
            self.epsilon, self.noise_multiplier = epsilon, None
            self.calibration_share = share
        self.privacy_spent_ = spent
        self.noise_multiplier_ = z
        return self


class NoiseDividedBy10(NoiseDividedBy):
    """A tenth of the noise."""

    factor = 10.0


class NoiseDividedBy100(NoiseDividedBy):
    """A hundredth of the noise."""

    factor = 100.0


# The strong setting for DPSaddlePointClassifier: one full-batch step of a
# fixed length on the same rows, no intercept, no groups, the clip active on
# the canary. Under add/remove the count is released too (5% of the budget).
SADDLE_STRONG = {
    "n_iter": 1,
    "learning_rate": 1.0,
    "momentum": 0.0,
    "fit_intercept": False,
    "max_grad_norm": 0.25,
    "classes": [0, 1],
}


class _QuarterGradientSensitivity(GDAPlan):
    """A plan that claims a quarter of the gradient sum's true sensitivity."""

    @property
    def gradient_sensitivity(self):
        return super().gradient_sensitivity / 4.0


class SaddleSensitivityDividedBy4(DPSaddlePointClassifier):
    """Broken on purpose: the gradient noise of a quarter of the sensitivity.

    The plan's events, hence the reported spend, are the honest ones for the
    noise multiplier; the noise std is a quarter of what that multiplier
    needs (the bug a wrong sensitivity would make).
    """

    def _plan(self, n_samples, n_groups, n_features):
        plan = super()._plan(n_samples, n_groups, n_features)
        values = {f.name: getattr(plan.run, f.name) for f in fields(plan.run)}
        return replace(plan, run=_QuarterGradientSensitivity(**values))

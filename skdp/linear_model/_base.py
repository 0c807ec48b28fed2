"""Prediction methods shared by skdp's linear classifiers."""

import numpy as np
from scipy.special import expit, softmax
from sklearn.utils.validation import check_is_fitted

from ..utils._sklearn import validate_data

__all__ = ["LinearClassifierPredictMixin"]


class LinearClassifierPredictMixin:
    """``decision_function``, ``predict*`` from ``coef_``, ``intercept_``, ``classes_``.

    Binary models hold ``coef_`` of shape ``(1, n_features)`` and score the
    positive class ``classes_[1]`` with a 1-d ``decision_function``.
    """

    def decision_function(self, X):
        """Scores: 1-d for binary problems, ``(n, n_classes)`` otherwise."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        scores = X @ self.coef_.T + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict_proba(self, X):
        """Class probabilities, columns in the order of ``classes_``."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            # expit(-s) rather than 1 - expit(s): no cancellation to 0.
            return np.column_stack([expit(-scores), expit(scores)])
        return softmax(scores, axis=1)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (as scikit-learn computes it)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X):
        """Most probable class of each row."""
        scores = self.decision_function(X)
        index = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.classes_[index]

"""Private minimax-fair classifiers."""

from ._saddle import DPSaddlePointClassifier

__all__ = ["DPSaddlePointClassifier"]

"""Validation helpers shared by the estimators."""

import contextlib
import logging
import sys

import numpy as np

__all__ = ["check_sample_weight", "default_delta", "enable_progress"]

#: The default delta is min(_DELTA_CAP, n ** -_DELTA_EXPONENT): well below 1/n.
_DELTA_CAP = 1e-5
_DELTA_EXPONENT = 1.1


def default_delta(n_samples):
    """Default delta ``min(1e-5, n ** -1.1)``, well below ``1 / n``."""
    return float(min(_DELTA_CAP, float(n_samples) ** -_DELTA_EXPONENT))


def check_sample_weight(sample_weight, n_samples):
    """Validate weights in [0, 1]; return them as an array, or None.

    A weight in [0, 1] scales a record's gradient down, so the sensitivity
    and smoothness bounds still hold; a weight above 1 would multiply a
    record's influence and is refused.
    """
    if sample_weight is None:
        return None
    weights = np.asarray(sample_weight, dtype=float)
    if weights.shape != (n_samples,):
        raise ValueError(
            f"sample_weight has shape {weights.shape}; expected ({n_samples},)."
        )
    if not np.all(np.isfinite(weights)) or weights.min() < 0 or weights.max() > 1:
        raise ValueError(
            "sample_weight must lie in [0, 1]: a larger weight multiplies a record's "
            "influence and breaks the privacy guarantee. Duplicate-free reweighting "
            "can be had by rescaling the weights to at most 1."
        )
    if not weights.any():
        raise ValueError("All sample weights are zero; nothing to fit.")
    return weights


@contextlib.contextmanager
def enable_progress(verbose):
    """Route skdp's progress log lines to stderr while ``verbose`` is set."""
    logger = logging.getLogger("skdp")
    if not verbose or logger.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[skdp] %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)

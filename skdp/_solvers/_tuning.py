"""Shapes shared by the solvers' tuning policies."""

import numpy as np

__all__ = ["log_linear"]


def log_linear(noise, start, end, low, high):
    """``low`` at ``noise >= start``, ``high`` at ``noise <= end``, log-linear between.

    The shape of the noise-dependent "auto" rules (``start > end``): a value
    ``low * (high / low) ** t`` with ``t`` the position of ``log noise``
    between ``log start`` (0) and ``log end`` (1), clamped to [0, 1]. ``noise``
    None (unknown): ``low``.
    """
    if noise is None:
        return low
    t = np.log(start / max(noise, 1e-300)) / np.log(start / end)
    return float(low * (high / low) ** min(max(t, 0.0), 1.0))

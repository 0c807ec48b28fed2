"""Differentially private synthetic data.

- :class:`DPSyntheticData`: adaptive select-measure-estimate rounds on a
  graphical model (AIM-style, the default) or one tree of marginals
  (MST-style), sampled back to the input's container.
- :func:`marginal_error`, :func:`marginal_errors`: total-variation distance of
  k-way marginals between two tables; :func:`tstr_accuracy`: train on
  synthetic, test on real; :func:`plot_marginal_errors`: a PNG of the
  per-marginal errors.
"""

from ._domain import OTHER, ColumnSpec
from ._estimator import DomainWarning, DPSyntheticData
from ._metrics import (
    marginal_error,
    marginal_errors,
    plot_marginal_errors,
    tstr_accuracy,
)

__all__ = [
    "OTHER",
    "ColumnSpec",
    "DPSyntheticData",
    "DomainWarning",
    "marginal_error",
    "marginal_errors",
    "plot_marginal_errors",
    "tstr_accuracy",
]

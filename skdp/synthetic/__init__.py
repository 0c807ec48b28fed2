"""Differentially private synthetic data.

- :class:`DPSyntheticData`: select-measure-estimate on a tree of noisy 1-way
  and 2-way marginals (MST-style), sampled back to the input's container.
- :func:`marginal_error`: average total-variation distance of k-way marginals.
"""

from ._domain import ColumnSpec
from ._estimator import DPSyntheticData
from ._metrics import marginal_error

__all__ = ["ColumnSpec", "DPSyntheticData", "marginal_error"]

"""Preprocessing that keeps a Pipeline private end to end.

- :class:`SchemaEncoder`: a table's design matrix from its public schema alone
  (free), with the row-norm bound its output satisfies.
- :class:`BoundedScaler`: features to [0, 1] on declared bounds (free).
- :class:`DPStandardScaler`: standardisation by a private mean and scale.
"""

from ._encoder import SchemaEncoder
from ._scalers import BoundedScaler, DPStandardScaler

__all__ = ["BoundedScaler", "DPStandardScaler", "SchemaEncoder"]

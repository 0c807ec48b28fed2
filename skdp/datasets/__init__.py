"""Data sets vendored with skdp.

The data ship inside the package, so loading them needs no network access.

- :func:`load_adult`: the UCI Adult (Census Income) binary classification data.
- :data:`ADULT_SCHEMA`: its public schema (categories and numeric bounds);
  :data:`ADULT_NUMERIC_BINS`: public bin edges of four numeric features.
- :func:`adult_design_matrix`, :func:`adult_feature_names`: a per-record,
  privacy-free numeric encoding of its features built from that schema.
"""

from ._adult import (
    ADULT_NUMERIC_BINS,
    ADULT_SCHEMA,
    adult_design_matrix,
    adult_feature_names,
    load_adult,
)

__all__ = [
    "ADULT_NUMERIC_BINS",
    "ADULT_SCHEMA",
    "adult_design_matrix",
    "adult_feature_names",
    "load_adult",
]

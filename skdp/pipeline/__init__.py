"""Private Pipelines: one schema from a raw DataFrame to a private model.

- :func:`make_private_pipeline`: a :class:`~skdp.preprocessing.SchemaEncoder`
  and a private estimator whose ``row_norm``, ``classes`` and ``groups`` come
  from the schema.
- :class:`PrivatePipeline`: a scikit-learn Pipeline that checks its privacy
  before fitting and reports its total ``privacy_spent_``.
- :func:`check_pipeline`: the steps before a private estimator that read the
  private data (each gets a :class:`~skdp.exceptions.PrivacyLeakWarning`).
- :func:`privacy_spent`: the composed spend of a fitted Pipeline's DP steps.
"""

from ._leaks import check_pipeline, leak_reason
from ._pipeline import PrivatePipeline, make_private_pipeline, privacy_spent

__all__ = [
    "PrivatePipeline",
    "check_pipeline",
    "leak_reason",
    "make_private_pipeline",
    "privacy_spent",
]

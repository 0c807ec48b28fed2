"""skdp: differentially private learning that stays inside scikit-learn.

Every fitted estimator exposes ``privacy_spent_``, a valid upper bound on the
privacy loss of the mechanism that actually ran (see :mod:`skdp.accounting`).
"""

from . import (
    accounting,
    audit,
    datasets,
    fairness,
    model_selection,
    pipeline,
    preprocessing,
    schema,
    synthetic,
)
from .exceptions import (
    ClippedValuesWarning,
    IndependentColumnsWarning,
    OrderGridWarning,
    PrivacyLeakWarning,
    SpreadSpikeWarning,
    UndeclaredBoundWarning,
    UnscaledFeaturesWarning,
    WeakDeltaWarning,
    WideBoundsWarning,
)
from .fairness import DPSaddlePointClassifier
from .linear_model import DPLogisticRegression
from .schema import TableSchema
from .synthetic import DPSyntheticData

__version__ = "0.1.0.dev0"

__all__ = [
    "ClippedValuesWarning",
    "DPLogisticRegression",
    "DPSaddlePointClassifier",
    "DPSyntheticData",
    "IndependentColumnsWarning",
    "OrderGridWarning",
    "PrivacyLeakWarning",
    "SpreadSpikeWarning",
    "TableSchema",
    "UndeclaredBoundWarning",
    "UnscaledFeaturesWarning",
    "WideBoundsWarning",
    "WeakDeltaWarning",
    "__version__",
    "accounting",
    "audit",
    "datasets",
    "fairness",
    "model_selection",
    "pipeline",
    "preprocessing",
    "schema",
    "synthetic",
]

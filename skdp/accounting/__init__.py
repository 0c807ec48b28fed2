"""Privacy accounting: events, accountants, conversions and calibration.

Pure numpy/scipy. Solvers describe what they ran as *events*
(:class:`GaussianEvent`, :class:`GaussianSumEvent`,
:class:`PoissonGaussianEvent`, :class:`RandomAllocationGaussianEvent`,
:class:`ExponentialMechanismEvent`, :class:`NoisyIterationEvent`); an
:class:`Accountant` (:class:`RDPAccountant`, :class:`GDPAccountant`,
:class:`PLDAccountant`, :class:`TightestAccountant`) turns them into a
:class:`PrivacySpent`; :func:`account` and :func:`calibrate_noise_multiplier`
name the accountant by a string (``"rdp"``, ``"pld"``) or take one.
"""

from ._accountant import (
    Accountant,
    GDPAccountant,
    PLDAccountant,
    PrivacyPlan,
    PrivacySpent,
    RDPAccountant,
    TightestAccountant,
    compose_spent,
)
from ._allocation import allocation_rdp, allocation_rdp_add, allocation_rdp_remove
from ._calibration import account, calibrate_noise_multiplier
from ._event_rdp import event_rdp
from ._last_iterate import (
    gradient_step_lipschitz,
    last_iterate_coefficient,
    logistic_constants,
)
from ._neighbouring import NEIGHBOURING_RELATIONS, Neighbouring
from ._rdp import (
    DEFAULT_ORDERS,
    gaussian_rdp,
    poisson_gaussian_rdp,
    poisson_gaussian_rdp_replace_one,
    pure_dp_rdp,
    rdp_to_epsilon,
)
from .events import (
    ExponentialMechanismEvent,
    GaussianEvent,
    GaussianSumEvent,
    NoisyIterationEvent,
    PoissonGaussianEvent,
    RandomAllocationGaussianEvent,
)

__all__ = [
    "DEFAULT_ORDERS",
    "NEIGHBOURING_RELATIONS",
    "Accountant",
    "ExponentialMechanismEvent",
    "GDPAccountant",
    "GaussianEvent",
    "GaussianSumEvent",
    "Neighbouring",
    "NoisyIterationEvent",
    "PLDAccountant",
    "PoissonGaussianEvent",
    "PrivacyPlan",
    "PrivacySpent",
    "RDPAccountant",
    "RandomAllocationGaussianEvent",
    "TightestAccountant",
    "account",
    "allocation_rdp",
    "allocation_rdp_add",
    "allocation_rdp_remove",
    "calibrate_noise_multiplier",
    "compose_spent",
    "event_rdp",
    "gaussian_rdp",
    "gradient_step_lipschitz",
    "last_iterate_coefficient",
    "logistic_constants",
    "poisson_gaussian_rdp",
    "poisson_gaussian_rdp_replace_one",
    "pure_dp_rdp",
    "rdp_to_epsilon",
]

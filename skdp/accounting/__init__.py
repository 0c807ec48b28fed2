"""Privacy accounting: events, Rényi-DP curves, conversions and calibration.

Pure numpy/scipy. Solvers describe what they ran as *events*
(:class:`GaussianEvent`, :class:`PoissonGaussianEvent`,
:class:`ExponentialMechanismEvent`, :class:`NoisyIterationEvent`); the
:class:`RDPAccountant` turns them into a :class:`PrivacySpent`.
"""

from ._accountant import NEIGHBOURING_RELATIONS, RDPAccountant, event_rdp
from ._allocation import allocation_rdp, allocation_rdp_add, allocation_rdp_remove
from ._calibration import account, calibrate_noise_multiplier
from ._last_iterate import (
    gradient_step_lipschitz,
    last_iterate_coefficient,
    logistic_constants,
)
from ._neighbouring import Neighbouring
from ._rdp import (
    DEFAULT_ORDERS,
    gaussian_rdp,
    poisson_gaussian_rdp,
    poisson_gaussian_rdp_replace_one,
    pure_dp_rdp,
    rdp_to_epsilon,
)
from ._spent import PrivacySpent, compose_spent
from .events import (
    ExponentialMechanismEvent,
    GaussianEvent,
    NoisyIterationEvent,
    PoissonGaussianEvent,
    RandomAllocationGaussianEvent,
)

__all__ = [
    "DEFAULT_ORDERS",
    "NEIGHBOURING_RELATIONS",
    "Neighbouring",
    "ExponentialMechanismEvent",
    "GaussianEvent",
    "NoisyIterationEvent",
    "PoissonGaussianEvent",
    "PrivacySpent",
    "RandomAllocationGaussianEvent",
    "RDPAccountant",
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

"""Private first-order solvers for logistic losses: DP-SGD and DP-SGLD.

Pure functions. A run is described by an :class:`SGDPlan` built from public
quantities only (n, batch sizes, step sizes, bounds); the plan gives the privacy
events of the run for any noise multiplier, so the noise can be calibrated
before any data is touched. :func:`schedule_run` then sets the steps that may
follow the calibrated noise (optimisation settings only: the plan and its
events stay as calibrated), and :func:`run_logistic_sgd` runs them on the data
and returns the model and the plan's events.

Modules: ``_policy`` (the tuning constants), ``_plan`` (the plan and its
events), ``_schedule`` (tuning that follows the calibrated noise),
``_batches`` (which rows each step reads, and reading them), ``_steps`` (one
noisy step), ``_floor`` (the probability floor), ``_run`` (the run).
"""

from ._batches import poisson_batch
from ._floor import (
    anchor_logits,
    calibrate_probabilities,
    fit_temperature,
    public_shrinkage,
    release_log_prior,
    tail_noise_variance,
    temperature_bound,
    temperature_sensitivity,
)
from ._plan import (
    AMPLIFIED,
    UNBOUNDED_ROW_NORM,
    SGDPlan,
    SGDSteps,
    auto_epochs,
    follows_budget,
    make_plan,
    step_sizes,
)
from ._policy import DEFAULT_POLICY, ByRelation, SGDPolicy
from ._run import SGDResult, run_logistic_sgd
from ._schedule import (
    SGDSchedule,
    auto_clip_fraction,
    auto_step_boost,
    schedule_run,
)

__all__ = [
    "AMPLIFIED",
    "DEFAULT_POLICY",
    "UNBOUNDED_ROW_NORM",
    "ByRelation",
    "SGDPlan",
    "SGDPolicy",
    "SGDResult",
    "SGDSchedule",
    "SGDSteps",
    "anchor_logits",
    "auto_clip_fraction",
    "auto_epochs",
    "auto_step_boost",
    "calibrate_probabilities",
    "fit_temperature",
    "follows_budget",
    "make_plan",
    "poisson_batch",
    "public_shrinkage",
    "release_log_prior",
    "run_logistic_sgd",
    "schedule_run",
    "step_sizes",
    "tail_noise_variance",
    "temperature_bound",
    "temperature_sensitivity",
]

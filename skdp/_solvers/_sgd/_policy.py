"""The tuning policy of DP-SGD logistic regression.

Every number behind an "auto" setting of
:class:`~skdp.linear_model.DPLogisticRegression` and of its solver lives in
:class:`SGDPolicy`: the defaults the estimator resolves, and the thresholds
of the rules that follow the budget or the calibrated noise. Privacy holds
for any policy the class accepts: the plan, its events and the bound of
every release are derived from the policy, never assumed. Benchmarks compare
variants made with :func:`dataclasses.replace` (an estimator reads its
policy from its ``_policy`` class attribute); each default names the section
of docs/benchmarks.md that chose it.
"""

from dataclasses import dataclass

import numpy as np

from ...accounting import Neighbouring

__all__ = ["DEFAULT_POLICY", "ByRelation", "SGDPolicy"]


@dataclass(frozen=True)
class ByRelation:
    """One number for each neighbouring relation."""

    replace_one: float
    add_remove: float

    def __getitem__(self, neighbouring):
        """The number of ``neighbouring`` (a :class:`Neighbouring` or its name)."""
        if Neighbouring.parse(neighbouring) is Neighbouring.ADD_REMOVE:
            return self.add_remove
        return self.replace_one


# Points a of the probability floor's path: 0 (the prior) and 2^(k/3), k = -12..3.
_FLOOR_GRID = tuple(np.concatenate([[0.0], 2.0 ** (np.arange(-12, 4) / 3.0)]).tolist())


@dataclass(frozen=True)
class SGDPolicy:
    """The constants of the "auto" rules (see each field's comment).

    Rules, not tuning, stay in the code: cyclic and shuffled runs step by
    ``1 / (smoothness + l2)``, clip at the gradient bound and release the
    last iterate, which is what their last-iterate bound needs.
    """

    #: Poisson noise against the signal hardly depends on the batch: one size fits all
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    batch_size: int = 256
    #: A small L2 penalty: larger ones gained nothing on the panel
    #: (docs/benchmarks.md, "Defaults chosen on the panel").
    alpha: float = 1e-4
    #: Enough for the probability floor to keep the log-loss at the prior's or below
    #: (docs/benchmarks.md, "The probability floor").
    calibration_share: float = 0.2
    #: A tenth of the budget's mu^2 buys a centre that frees the clip for the signal
    #: (docs/benchmarks.md, "The private centre").
    centring_share: float = 0.1
    #: Shrinkage of the noisy centre towards the origin, in units of its noise energy
    #: (docs/benchmarks.md, "The private centre").
    centre_shrink: float = 1.0
    #: A count needs little budget to set the plan within a few rows of n
    #: (docs/benchmarks.md, "Add/remove without reading n").
    count_share: float = 0.02
    #: Cyclic and shuffled batches without a declared row bound keep the unit ball,
    #: and their fit says so (UndeclaredBoundWarning), whatever the rows
    #: (docs/benchmarks.md, "Defaults chosen on the panel").
    cyclic_row_norm: float = 1.0

    #: The last-iterate bound grows with every pass: few epochs win
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    cyclic_epochs: int = 10
    #: Poisson runs converge in 30 epochs at a small budget
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    poisson_epochs: int = 30
    #: A larger budget buys more Poisson steps at the same noise (epochs per epsilon)
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    epochs_per_epsilon: ByRelation = ByRelation(replace_one=15, add_remove=30)
    #: A cap on the epochs a large budget buys (and on the time a fit takes)
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    max_epochs: int = 120

    #: Poisson step in units of 1 / (smoothness + l2), matched to the small clip
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    poisson_step: float = 64.0
    #: Poisson clip as a share of the gradient bound: nearly every gradient clipped
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    poisson_clip: float = 0.05
    #: Averaging the last half of a Poisson run's iterates damps its noise
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    poisson_tail: float = 0.5
    #: Balls-and-bins epochs: as many as a shuffled fit, no accuracy lost on the panel
    #: (docs/benchmarks.md, "Fewer balls-and-bins epochs").
    allocation_epochs: int = 10
    #: Balls-and-bins epochs per epsilon: add/remove needs Poisson's 30 at epsilon 1
    #: (docs/benchmarks.md, "Fewer balls-and-bins epochs").
    allocation_epochs_per_epsilon: ByRelation = ByRelation(
        replace_one=10, add_remove=30
    )
    #: Balls-and-bins step: the same expected batch and clipped steps as Poisson's
    #: (docs/benchmarks.md, "Balls-and-bins batches").
    allocation_step: float = 64.0
    #: Balls-and-bins clip share: its noise per step is about Poisson's, so is its clip
    #: (docs/benchmarks.md, "Balls-and-bins batches").
    allocation_clip: float = 0.05
    #: Balls-and-bins tail: every step is released, so averaging is free, as for Poisson
    #: (docs/benchmarks.md, "Balls-and-bins batches").
    allocation_tail: float = 0.5
    #: Cap on the travel of the steps per row and unit of epsilon: small budgets walk
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    travel: ByRelation = ByRelation(replace_one=8.0, add_remove=32.0)
    #: Poisson clip share once the noise is small against the clipped step
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    quiet_clip: float = 0.25
    #: Relative noise z sqrt(p) / b where the clip starts rising and where it is quiet
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    clip_noise: tuple = (0.2, 0.05)
    #: Noise per coordinate z / b where the step boost starts and where it is full
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    step_noise: tuple = (0.017, 0.011)
    #: Step multiplier at a small noise, where optimisation rather than noise limits
    #: (docs/benchmarks.md, "DPLogisticRegression accuracy").
    step_boost: float = 2.0

    #: Clip norm without a row bound: independent of the scale of the rows
    #: (docs/benchmarks.md, "Defaults chosen on the panel").
    unbounded_clip: float = 1.0
    #: Growth of that clip (step shrunk to match) once the noise is quiet, as bounded
    #: rows' ``quiet_clip``: a fixed clip biases a rare class's probabilities
    #: (docs/benchmarks.md, "The clip without a row bound").
    unbounded_quiet_clip: float = 2.5
    #: Step times clip norm without a row bound (the travel cap lowers it when small)
    #: (docs/benchmarks.md, "Defaults chosen on the panel").
    unbounded_step: float = 2.0
    #: Travel cap without a row bound, in units of 1/32 of the full step
    #: (docs/benchmarks.md, "Defaults chosen on the panel").
    unbounded_travel: ByRelation = ByRelation(replace_one=3.0, add_remove=8.0)

    #: Public points of the floor's path from the prior (0) to the model (1) and past it
    #: (docs/benchmarks.md, "The probability floor").
    floor_grid: tuple = _FLOOR_GRID
    #: Clip of the logits' offsets from the prior: bounds one row's release
    #: (docs/benchmarks.md, "The probability floor").
    floor_logit_bound: float = 10.0
    #: The prior's counts and the path's derivatives share the floor's release evenly
    #: (docs/benchmarks.md, "The probability floor").
    prior_weight: float = 0.5
    #: Shrinkage setting the floor search's start: stronger ones collapsed to the prior,
    #: and no better on the runs' measured noise
    #: (docs/benchmarks.md, "The probability floor", "The floor's noise estimate").
    shrink_strength: float = 0.5
    #: Leave the start only when another point wins by this many noise deviations
    #: (docs/benchmarks.md, "The probability floor").
    floor_margin: float = 2.0
    #: The start shrinks by the noise of d - 2 of the d coefficients, James and Stein's
    #: least-risk constant (docs/benchmarks.md, "Where the floor stops short").
    shrink_offset: float = 2.0

    def __post_init__(self):
        """Refuse clip shares outside (0, 1]: amplified events assume C <= G."""
        for name in ("poisson_clip", "quiet_clip", "allocation_clip"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1] (a share of the bound).")


#: The defaults of :class:`~skdp.linear_model.DPLogisticRegression`.
DEFAULT_POLICY = SGDPolicy()

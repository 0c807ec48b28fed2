"""The tuning policy of noisy gradient descent-ascent.

Public, data-free rules: a policy changes how the budget is split and how the
run steps, never what a release's sensitivity is. Benchmarks compare variants
by passing another :class:`GDAPolicy` (``GDASolver(policy=...)``).
"""

from dataclasses import dataclass

__all__ = ["GDAPolicy"]


@dataclass(frozen=True)
class GDAPolicy:
    """Tuning rules of :func:`~skdp._solvers._gda.run_gda`.

    Budget shares are of the Rényi curve ``a / (2 z^2)`` of one Gaussian
    mechanism with multiplier ``z``; the count, loss and gradient shares add
    up to 1, so a run costs what that one mechanism costs. Run noise: see
    :attr:`GDASchedule.run_noise <skdp._solvers._gda.GDASchedule.run_noise>`.
    """

    #: Counts: read once, only as denominators (docs/benchmarks.md,
    #: "Worst-group fairness").
    count_share: float = 0.05
    #: Loss sums: the adversary needs their ranking, not their values
    #: (docs/benchmarks.md, "Worst-group fairness").
    loss_share: float = 0.1
    #: Gradient sums: the rest, the model's releases (docs/benchmarks.md,
    #: "Worst-group fairness").
    gradient_share: float = 0.85
    #: "auto" clip, times the gradient bound: binds on the largest gradients
    #: only (docs/benchmarks.md, "Worst-group fairness").
    clip_fraction: float = 0.6
    #: "auto" step at most this over ``beta + l2``: every iterate is accounted,
    #: so no contraction is needed (docs/benchmarks.md, "Worst-group fairness").
    smoothness_step_factor: float = 4.0
    #: Radius of the noise's random walk over the run at a large run noise
    #: (docs/benchmarks.md, "Worst-group fairness").
    walk_radius: float = 3.0
    #: ... widened up to this at a small one, removing optimisation bias
    #: (docs/benchmarks.md, "Worst-group fairness").
    walk_radius_max: float = 6.0
    #: Run noise where the widening starts and where it is complete,
    #: log-linear between (docs/benchmarks.md, "Worst-group fairness").
    walk_radius_noise: tuple[float, float] = (2.2e-4, 1.25e-4)
    #: A step's noise stays within this multiple of the planned walk when the
    #: adversary weighs rows more (docs/benchmarks.md, "Worst-group fairness").
    heavy_row_ratio: float = 1.5
    #: Fraction of the last iterates averaged: forgets the unconverged start
    #: (docs/benchmarks.md, "Worst-group fairness").
    tail_fraction: float = 0.5
    #: ... lengthened up to this where the noise, not the optimiser's bias,
    #: dominates (docs/benchmarks.md, "Worst-group fairness").
    tail_fraction_max: float = 1.0
    #: Run noise where the tail is longest and below which it is the base,
    #: log-linear between (docs/benchmarks.md, "Worst-group fairness").
    tail_noise: tuple[float, float] = (4e-3, 1.1e-3)
    #: "auto" heavy-ball momentum: speeds up smoothness-bound runs only
    #: (docs/benchmarks.md, "Worst-group fairness").
    momentum: float = 0.9
    #: With ``precondition=True``, the second-moment release's share, taken
    #: from the gradients (docs/benchmarks.md, "Worst-group fairness").
    precondition_share: float = 0.05
    #: Preconditioner ridge, times the noise's expected spectral norm
    #: (docs/benchmarks.md, "Worst-group fairness").
    precondition_ridge: float = 1.0
    #: Cap of the preconditioned "auto" step (docs/benchmarks.md,
    #: "Worst-group fairness").
    preconditioned_step: float = 4.0
    #: Noise-walk radius in the released second-moment norm
    #: (docs/benchmarks.md, "Worst-group fairness").
    preconditioned_radius: float = 1.0
    #: No preconditioner above this many coefficients: a D x D matrix and its
    #: eigendecomposition (docs/benchmarks.md, "Worst-group fairness").
    precondition_max_params: int = 1000
    #: Floor of the noisy counts used as denominators (docs/benchmarks.md,
    #: "Worst-group fairness").
    min_count: float = 1.0
    #: ``centring_share="auto"``: a tenth of the budget's mu^2 for the rows'
    #: centre, as for private ERM (docs/benchmarks.md, "Worst-group fairness").
    centring_share: float = 0.1

    def __post_init__(self):
        shares = (self.count_share, self.loss_share, self.gradient_share)
        if min(shares) <= 0 or not 0 <= self.precondition_share < self.gradient_share:
            raise ValueError(
                "GDAPolicy: the count, loss and gradient shares must be positive "
                "and the precondition share below the gradient share."
            )
        if not 0 <= self.centring_share < 1:
            raise ValueError("GDAPolicy: the centring share must be in [0, 1).")

"""The tuning of the accountants: one frozen record of their free choices.

Every field is a choice under which every reported epsilon stays a valid
bound, whatever its value: how calibration searches, how the numerical
privacy loss distribution splits its delta and rounding budgets, how large
its lattices may grow, how many results the caches keep. They trade
tightness against time. Parameters on which validity rests (floating-point
allowances, quadrature grids whose error a bound accounts for) are not here:
they stay beside their numerical method.

Accountants and calibration take a policy argument (default
:data:`DEFAULT_POLICY`); a benchmark passes a variant
(``dataclasses.replace(DEFAULT_POLICY, ...)``), never a patched module.
"""

from dataclasses import dataclass

__all__ = ["DEFAULT_POLICY", "AccountingPolicy"]


@dataclass(frozen=True)
class AccountingPolicy:
    """Free choices of calibration and of the numerical accountants.

    Attributes are grouped as below; each carries one line of rationale.
    """

    # -- calibration (docs/benchmarks.md, "Accounting speed") --
    # Smallest noise multiplier tried: below it the noise is negligible.
    min_noise: float = 1e-4
    # Largest noise multiplier tried before calibration gives up.
    max_noise: float = 1e6
    # Calibration stops within this share below the target (a documented promise).
    target_rtol: float = 0.005
    # Cap on search steps (the relative tolerance ends the search far sooner).
    max_search_steps: int = 200

    # -- the tight accountants' rounding slack (docs/benchmarks.md,
    # "Accounting at scale") --
    # Slack as a share of epsilon while calibrating.
    pld_search_slack: float = 1e-2
    # Slack in the report: the same, so the report is what the search certified.
    pld_report_slack: float = 1e-2

    # -- numerical PLD of Poisson steps (docs/benchmarks.md,
    # "Accounting at scale") --
    # Share of delta given to the Hoeffding failure probability.
    eta_share: float = 1e-2
    # Share of delta given to the tails moved to +inf.
    tail_share: float = 1e-2
    # Share of the tail budget given to single steps (their tail sets the width).
    step_tail_share: float = 0.5
    # Mass of the lower tails moved up (costs tightness only, about this of delta).
    low_tail: float = 1e-5
    # Share of delta given to the FFTs' floating-point error.
    fp_share: float = 1e-3
    # Largest lattice built; past it the Rényi bound stands.
    max_points: int = 1 << 22
    # Largest single-step lattice; a wider step is built coarser.
    max_step_points: int = 1 << 18
    # Share of the rounding variance given to the lattices' combinations.
    combine_share: float = 0.05
    # Squaring level i gets rounding variance in proportion to this to the i.
    level_decay: float = 2.0 ** (-1.0 / 3.0)
    # Replace-one add hop: caps on the scales of its tail and floating-point
    # budgets (the scale itself: add_hop_scale below, as for random allocation).
    add_hop_tail_scale: float = 1e-6
    add_hop_fp_scale: float = 1e-3
    # A lattice answer below this share of its planned epsilon is planned again.
    replan_below: float = 0.5
    # The lattice is planned for at most this multiple of a central-limit guess.
    clt_factor: float = 2.0
    # Smallest epsilon a Poisson lattice is planned for.
    min_planned_epsilon: float = 1e-3
    # Shares of delta tried for the first hop of the replace-one chain.
    chain_splits: int = 19

    # -- numerical PLD of random allocation (docs/benchmarks.md,
    # "Random allocation accounting") --
    # Share of the epsilon slack given to the sums' Hoeffding term.
    sum_slack_share: float = 0.5
    # Share of an epoch's failure probability given to the sums.
    sum_eta_share: float = 0.5
    # Add direction: a summand's upper tail mass moved down (the loss only grows).
    add_inner_tail: float = 1e-3
    # Add direction: cap on the exponent that scales the sum's slack.
    add_scale_cap: float = 8.0
    # Share of delta given to the floating-point error (sums and losses alike).
    allocation_fp_share: float = 1e-2
    # Largest summand lattice; a wider one is built coarser.
    sum_step_points: int = 1 << 18
    # Largest sum lattice; past it the Rényi bound stands.
    sum_max_points: int = 1 << 20
    # Largest direct convolution (products), about a second of CPU; past it
    # the Rényi bound stands (docs/benchmarks.md, "The direct-convolution cap").
    max_direct: int = 1 << 31
    # Replace-one chains (Poisson and random allocation): share of delta the
    # first hop (remove) is planned for ...
    chain_plan_share: float = 0.5
    # ... and the add hop's budgets, scaled by this times exp(-eps of the first).
    add_hop_scale: float = 0.25
    # Smallest epsilon an allocation lattice is planned for.
    min_planned_allocation_epsilon: float = 1e-4

    # -- caches (docs/benchmarks.md, "Accounting speed") --
    # Cyclic schedules whose per-position coefficients are kept.
    coefficient_cache_size: int = 32
    # (steps, noise) pairs whose random-allocation moments are kept.
    allocation_cache_size: int = 64


#: The defaults of every accountant and of calibration.
DEFAULT_POLICY = AccountingPolicy()

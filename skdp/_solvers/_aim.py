"""Adaptive select-measure-estimate rounds on a graphical model (AIM-style).

The mechanism of McKenna, Mullins, Sheldon and Miklau (2022), "AIM: an
adaptive and iterative mechanism for differentially private synthetic data"
(PVLDB 15(11)), Algorithm 1, with zCDP as the internal currency:

1. measure every 1-way marginal with Gaussian noise;
2. each round, select a marginal from the candidates (the downward closure of
   the workload whose addition keeps the junction tree within a size limit
   that grows with the budget used) by the exponential mechanism on its
   workload-weighted L1 error minus the expected L1 norm of the noise about
   to be added (AIM Section 4.2);
3. measure it with Gaussian noise and refit the model's potentials by mirror
   descent on all measurements so far (:mod:`._pgm`);
4. when a measurement barely moved the model (change below the expected L1
   norm of its noise), halve the noise and double the selection budget
   (AIM Section 4.4, annealing); when the budget left would not pay for two
   more rounds, spend all of it on one last round.

Privacy. One record moves a count vector by the L1 and L2 sensitivities of
:func:`._measure.count_sensitivity` (2 and ``sqrt(2)`` under replace-one). A
Gaussian measurement with noise multiplier ``z`` (std ``z`` times the L2
sensitivity) is ``1 / (2 z^2)``-zCDP; a selection draw with probability
proportional to ``exp(eps q_r / (2 Du))``, ``Du`` the L1 sensitivity times
``max_r w_r`` bounding how much one record moves any weighted score, is
``eps``-bounded range, hence ``eps^2 / 8``-zCDP (Cesar and Rogers 2021,
Lemma 3.2). The noise of round ``t`` depends on earlier released outputs, so
the rounds form a privacy filter: the total zCDP of the run never exceeds the
budget ``rho`` whatever happens, and an adaptive sequence whose RDP at order
``a`` always sums to at most ``a rho`` is ``(a, a rho)``-RDP (Feldman and
Zrnic 2021, "Individual privacy accounting via a Rényi filter", NeurIPS:
their composition theorem for adaptively chosen RDP parameters, applied at
each order; Whitehouse, Ramdas, Rogers and Wu 2023, "Fully-adaptive
composition in differential privacy", ICML, for zCDP). The certified curve
is therefore ``a rho``: the curve of a Gaussian event with multiplier
``1 / sqrt(2 rho)``.

Under add-remove (one record added or removed) a count vector moves by 1 in L1
and L2, so the same noise costs half the zCDP (the relation of the AIM paper
and of private-pgm); the number of rows is then private too: a Gaussian
count of the rows (a one-cell count table, sensitivity 1) spends
``AIMPolicy.count_share`` of the budget first (:func:`_count_rows`), and the
model's total is estimated from it and the noisy 1-way measurements
(post-processing): the inverse-variance weighted mean of their sums.

Split rule (:func:`plan_one_way`). Before anything else is measured, a
signal (rows per cell of a typical 2-way table over the noise std of 1-way
measurements taking the whole budget; the rows public under replace-one,
their noisy count under add-remove) decides the 1-way marginals' share of
the budget: all of it below ``AIMPolicy.min_signal`` (no round runs),
``AIMPolicy.one_way_share`` above. With ``AIMPolicy.measured_per_sqrt``
set (off by default), numeric columns are measured on fewer equal-width
bins of their range (their levels in the model). With
``AIMPolicy.tree_coarsest`` set (the default), a numeric column measured on
its own levels is measured on a hierarchy of nested equal-width grids
(:func:`._measure.bin_hierarchy`), each level its own Gaussian measurement
with a share of the column's budget, and its 1-way measurement is the
levels' least-squares consistent estimate made non-negative
(:func:`._measure.consistent_estimate`, after Hay, Rastogi, Miklau and
Suciu 2010; :func:`._measure.nonnegative_estimate`). Under add-remove the
levels' consistent estimate is not constrained to a total (the number of
rows is private), and the 1-way budget is shared over the columns in
proportion to their measured levels to ``AIMPolicy.add_remove_one_way_power``
(public: the declared levels); under replace-one, to
``AIMPolicy.one_way_levels_power`` where the rounds run. Privacy: the count
and the 1-way measurements are Gaussian events of count tables (a record in
one cell of each, grouped, hierarchical or not) whose zCDP sums to exactly
their shares; the rounds run in the filter on what is left, so the run's
zCDP is still at most ``rho``.

Domain compression (:mod:`._compression`): after the 1-way measurements, a
column's rare levels may be merged, or a numeric column's bins cut into runs
of about equal estimated mass; the rounds then count, score and measure
marginals on the compressed codes, and the sampled codes are expanded back.
This reads only released measurements: post-processing.

Coarsened candidates. Besides every column set of the workload's downward
closure, each multi-column set with an ordered (numeric) column is also a
candidate *coarsened*: that column's kept ordered levels cut into about
``AIMPolicy.coarse_levels`` runs of adjacent levels (:func:`_coarse_groups`),
the table summed over each run. Fewer cells share the noise, whose expected
L1 norm is proportional to the number of cells; the fine detail inside a run
comes from the 1-way measurement (the model is still over the full levels;
the measurement's loss compares the model's coarsened marginal with it, see
:func:`._pgm.coarsen`). The groups are public (fixed by the declared domain
and the released 1-way measurements), the score of a coarsened candidate is
its coarsened L1 error minus the noise's expected L1 norm over its (fewer)
cells, with the same workload weight, and the exponential mechanism chooses
among all candidates, fine and coarse. Coarsened candidates are offered only
when the first rounds' noise standard deviation is at least
``AIMPolicy.coarse_min_std`` times the number of rows (a public rule: the
noise is fixed by the budget and, under add-remove, the total is the released
estimate). Privacy: a record sits in exactly one cell of a coarsened table
too, so its L1 and L2 sensitivities and the score sensitivity are those of
the full table; a round is still one selection draw and one Gaussian
measurement, accounted as before.
"""

import itertools
import logging
import math
from dataclasses import dataclass, field

import numpy as np

from ..accounting import ExponentialMechanismEvent, GaussianEvent
from ._compression import (
    Compression,
    compress_column,
    compressed_measurement,
    expand_codes,
)
from ._measure import (
    as_counts,
    bin_hierarchy,
    consistent_estimate,
    count_sensitivity,
    covering_sets,
    exponential_draw,
    measure_hierarchy,
    nonnegative_estimate,
)
from ._pgm import (
    JunctionTree,
    Measurement,
    build_junction_tree,
    clique_cells,
    coarsen,
    marginal,
    mirror_descent,
    sample_codes,
)

__all__ = [
    "AIMModel",
    "AIMPolicy",
    "AIMResult",
    "OneWayPlan",
    "count_sets",
    "estimate_total",
    "fit_aim",
    "plan_one_way",
    "workload_cliques",
]

logger = logging.getLogger("skdp.synthetic")

#: Expected L1 norm of N(0, s^2) noise per cell, divided by s.
_EXPECTED_ABS = math.sqrt(2.0 / math.pi)
#: Relative slack of the floating-point budget check.
_BUDGET_RTOL = 1e-9
#: :func:`plan_one_way`'s ``tree_max_signal`` when not given: the policy's.
_FROM_POLICY = object()


@dataclass(frozen=True)
class AIMPolicy:
    """Tuning of the adaptive rounds; benchmarks pass variants.

    Every default was chosen on Adult and on the panel of public tables
    (docs/benchmarks.md, "Synthetic data" and "Synthetic data on the panel").
    """

    #: The budget is first split over this many rounds per column (AIM's
    #: ``T = 16 d`` spreads it thinner) (docs/benchmarks.md, "Synthetic data").
    rounds_per_column: int = 4
    #: Share of a round's budget spent on its measurement, the rest on its
    #: selection: AIM's alpha (docs/benchmarks.md, "Synthetic data").
    measure_share: float = 0.9
    #: Mirror-descent iterations after each round: the refit the next
    #: selection reads (docs/benchmarks.md, "Synthetic data").
    round_iter: int = 150
    #: Mirror-descent iterations after the last round: the selections, not the
    #: last fit, carry the gain (docs/benchmarks.md, "Synthetic data").
    final_iter: int = 750
    #: Levels whose noisy 1-way count is below this many noise standard
    #: deviations are merged (MST's domain compression; None: never)
    #: (docs/benchmarks.md, "Synthetic data").
    compress_below: float | None = 3.0
    #: ``compress="auto"`` compresses only when the 1-way noise std is at most
    #: this share of the rows: above it the threshold merges levels that hold
    #: a real share of them (docs/benchmarks.md, "Synthetic data on the panel").
    compress_max_std: float = 1.0 / 200.0
    #: Bandwidth, in bins, of the kernel smoothing an ordered column's noisy
    #: counts before they are expanded (docs/benchmarks.md, "Synthetic data").
    smooth_bins: float = 1.5
    #: Ordered columns of multi-column candidates may also be measured in about
    #: this many runs of adjacent levels (None: never coarsened)
    #: (docs/benchmarks.md, "Synthetic data").
    coarse_levels: int | None = 16
    #: Under add-remove, where the split rule sets the budget (a signal
    #: below ``add_remove_max_signal``), about this many runs instead: the
    #: small tables' rounds read coarser tables, with fewer cells sharing the
    #: noise (None: never coarsened) (docs/benchmarks.md, "Synthetic data on
    #: the panel").
    add_remove_coarse_levels: int | None = 8
    #: ... and those runs are the equal-width bins of the column's declared
    #: range (the hierarchy's coarsest grid at 8) holding its levels' centres,
    #: not runs of about equal estimated mass: every coarsened table then
    #: reads the same public grid (False: equal mass) (docs/benchmarks.md,
    #: "Synthetic data on the panel").
    add_remove_coarse_grid: bool = True
    #: Under add-remove, where the split rule sets the budget, the rounds
    #: select among the candidates of two or more columns only: a round on a
    #: 1-way marginal, already measured with more budget than a round has,
    #: barely moves the model (False: every candidate) (docs/benchmarks.md,
    #: "Synthetic data on the panel").
    add_remove_multi_column_rounds: bool = True
    #: Coarsened candidates only when the first rounds' noise std is at least
    #: this share of the rows: at lower noise the full tables pay for their
    #: cells (docs/benchmarks.md, "Synthetic data").
    coarse_min_std: float = 1.5e-4
    #: Adaptive binning cuts a numeric column into about this times
    #: ``sqrt(n / noise std)`` runs (at least 2): more runs where the noise is
    #: small against the rows (docs/benchmarks.md, "Synthetic data on the panel").
    runs_per_sqrt: float = 1.5
    #: Below this signal, the rows per cell of a typical 2-way table (the
    #: geometric mean over column pairs; under add-remove the rows' noisy
    #: count, see ``count_share``) divided by the noise std of 1-way
    #: measurements that take the whole budget, every bit of the budget goes
    #: to the 1-way marginals (the rounds would measure noise); None: the
    #: split of the rounds' noise for every table (docs/benchmarks.md,
    #: "Synthetic data on the panel").
    min_signal: float | None = 2.0
    #: Add-remove only (the number of rows is private): share of the zCDP
    #: budget spent on a noisy count of the rows, the ``n`` the split rule
    #: reads: the rule needs only its order of magnitude; None: no rule
    #: under add-remove (the first rounds' noise, every level measured)
    #: (docs/benchmarks.md, "Synthetic data on the panel").
    count_share: float | None = 0.01
    #: Add-remove only: the rule's ``min_signal`` there, lower: on tables
    #: between it and 2 the rounds kept the train-on-synthetic accuracy that
    #: 1-way marginals alone lose (docs/benchmarks.md, "Synthetic data on the
    #: panel").
    add_remove_min_signal: float = 0.5
    #: Add-remove only: at or above this signal the 1-way marginals take the
    #: first rounds' noise on every level, as without the rule: there the
    #: rounds' budget pays more than the 1-way marginals' (None: the rule's
    #: split at any signal); below the signals where the split lost, with
    #: a margin (docs/benchmarks.md, "Like for like against AIM").
    add_remove_max_signal: float | None = 12.0
    #: Under add-remove, where the split rule sets the budget, column ``j``'s
    #: share of the 1-way budget is proportional to its measured levels to
    #: this power, not equal: a column's expected L1 noise grows with its
    #: levels (None: equal shares) (docs/benchmarks.md, "Synthetic data on
    #: the panel").
    add_remove_one_way_power: float | None = 2.0 / 3.0
    #: The same under replace-one, where the rounds run (the signal clears
    #: ``min_signal``): lower 2-way and 3-way TV with as many columns behind
    #: independent marginals; below it, where the 1-way marginals are the
    #: whole model, equal shares keep more columns level with them (None:
    #: equal shares) (docs/benchmarks.md, "Synthetic data on the panel").
    one_way_levels_power: float | None = 1.0 / 3.0
    #: Share of the budget the 1-way marginals take when the signal clears
    #: ``min_signal`` (their noise std ``sqrt(2)`` times that of 1-way-only
    #: measurements) (docs/benchmarks.md, "Synthetic data on the panel").
    one_way_share: float = 0.5
    #: Under the same rule, a numeric column may be measured in about this times
    #: ``sqrt(n / std)`` equal-width bins of its declared range (rounded down to
    #: a power of two, ``std`` the 1-way noise); None, the default: on every
    #: public bin, since a coarse bin is sampled flat over its whole width
    #: (docs/benchmarks.md, "Synthetic data on the panel").
    measured_per_sqrt: float | None = None
    #: The signal counts a numeric column's cells as about this times
    #: ``sqrt(n / std)`` equal-width bins (the same rounding): the resolution its
    #: 2-way tables can be read at, whatever is measured (docs/benchmarks.md,
    #: "Synthetic data on the panel").
    signal_per_sqrt: float = 1.0
    #: ... but never fewer than this many bins: coarser bins spread a mode's
    #: mass over a wide range (docs/benchmarks.md, "Synthetic data on the panel").
    min_measured_bins: int = 8
    #: Under the same rule, a numeric column measured on its public bins is
    #: measured on nested equal-width grids of its range, from this many bins
    #: up (times ``tree_branching`` each level) to its public bins, and the
    #: levels made consistent by least squares: its 1-way estimate is good on
    #: coarse and fine grids at once, where one measurement of every bin sums
    #: the noise of several into each coarse bin (None: its public bins only)
    #: (docs/benchmarks.md, "Synthetic data on the panel").
    tree_coarsest: int | None = 8
    #: ... only where the signal is below this (None: at any signal): above
    #: it the rounds read the finest grid, whose noise the hierarchy raises
    #: (docs/benchmarks.md, "Synthetic data on the panel").
    tree_max_signal: float | None = 10.0
    #: The same under add-remove: the hierarchy wherever the split rule sets
    #: the budget (docs/benchmarks.md, "Like for like against AIM").
    add_remove_tree_max_signal: float | None = 12.0
    #: Each level of that hierarchy has this many times the bins of the one
    #: above it (docs/benchmarks.md, "Synthetic data on the panel").
    tree_branching: int = 2
    #: Level ``i`` (0 the coarsest) takes a share of the column's budget
    #: proportional to this to the power ``i`` (docs/benchmarks.md,
    #: "Synthetic data on the panel").
    tree_share_ratio: float = 1.0
    #: The consistent estimate is made non-negative top down (each cell's
    #: children projected onto non-negative counts of its sum), so empty tails
    #: get no mass (docs/benchmarks.md, "Synthetic data on the panel").
    tree_nonnegative: bool = True
    #: Bandwidth, in bins, of the kernel smoothing a hierarchical column's
    #: estimate before it is expanded: less than ``smooth_bins``, the
    #: consistent estimate being less noisy than one measurement of every bin
    #: (docs/benchmarks.md, "Synthetic data on the panel").
    tree_smooth_bins: float = 0.75


@dataclass(frozen=True)
class AIMModel:
    """The fitted generative model: a graphical model and its levels' expansion.

    Attributes
    ----------
    tree : JunctionTree
        Over the compressed levels.
    log_marginals : list of ndarray
        Calibrated log-marginals of the tree's cliques.
    compression : list of Compression
        Per column, how its levels were merged (see
        :func:`._compression.expand_codes`).
    """

    tree: JunctionTree
    log_marginals: list
    compression: list

    def sample(self, n_samples, rng):
        """``n_samples`` code rows over the original levels (post-processing)."""
        codes = sample_codes(self.tree, self.log_marginals, n_samples, rng)
        return expand_codes(codes, self.compression, rng)


@dataclass(frozen=True)
class AIMResult:
    """What the rounds released and what they cost.

    Attributes
    ----------
    model : AIMModel
    measurements : list of Measurement
    selected : list of tuple
        The column sets selected in the adaptive rounds, in order.
    events : list
        Every privacy event that ran (1-way measurements, then per round one
        selection draw and one measurement).
    rho_used : float
        zCDP spent by the events (at most the budget).
    n_rows : float
        The model's total: the number of rows (replace-one, public) or its
        estimate from the noisy 1-way marginals (add-remove).
    """

    model: AIMModel
    measurements: list
    selected: list
    events: list
    rho_used: float
    n_rows: float


def workload_cliques(n_columns, workload):
    """Column sets of a workload: ``"1-way"``, ``"2-way"``, ``"3-way"`` or a list."""
    if isinstance(workload, str):
        ways = {"1-way": 1, "2-way": 2, "3-way": 3}[workload]
        return list(itertools.combinations(range(n_columns), min(ways, n_columns)))
    return [tuple(sorted(set(c))) for c in workload]


def count_sets(n_columns, workload):
    """The column sets whose count tables give every table the rounds read.

    The rounds read the tables of the workload's downward closure (every 1-way
    table among them, see :func:`fit_aim`); each is a sum of the table of a
    maximal set (:func:`._measure.covering_sets`). Public: the number of
    columns and the workload.
    """
    return covering_sets(workload_cliques(n_columns, workload), n_columns)


def _downward_closure(workload):
    closure = set()
    for clique in workload:
        for k in range(1, len(clique) + 1):
            closure.update(itertools.combinations(clique, k))
    return sorted(closure, key=lambda c: (len(c), c))


def _weights(candidates, workload):
    """AIM's weight of a candidate: its total overlap with the workload."""
    sets = [set(w) for w in workload]
    return np.array([sum(len(set(r) & s) for s in sets) for r in candidates], float)


@dataclass(frozen=True)
class _Candidates:
    """The column sets the rounds may measure and their scores' weights (public).

    ``sets``: the workload's downward closure; ``weights``: AIM's weight of
    each; ``sensitivity``: how far one record moves any weighted score (the
    count tables' L1 sensitivity times the largest weight); ``index``: the
    position of each set.
    """

    sets: list
    weights: np.ndarray
    sensitivity: float
    index: dict

    @classmethod
    def of(cls, n_columns, workload, l1_sensitivity):
        """The candidates of ``workload`` over ``n_columns`` columns."""
        cliques = workload_cliques(n_columns, workload)
        sets = _downward_closure(cliques)
        weights = _weights(sets, cliques)
        sensitivity = l1_sensitivity * float(weights.max())
        return cls(sets, weights, sensitivity, {r: k for k, r in enumerate(sets)})


@dataclass(frozen=True)
class OneWayPlan:
    """How the budget is first spent (public): the 1-way share and measured bins.

    Attributes
    ----------
    share : float or None
        Share of the zCDP budget spent on the 1-way measurements (1: all of
        it, and no round runs); ``None``: the first rounds' noise.
    groups : tuple
        Per column, ``None`` or an int array giving the measured bin of each
        of its ordered levels (empty: every column on its own levels).
    signal : float or None
        The signal the rule read (``None``: no rule).
    hierarchies : tuple
        Per column, ``None`` or the :class:`~._measure.BinHierarchy` its
        1-way marginal is measured on (empty: none).
    weights : tuple
        Per column, its share of the 1-way budget over an equal share
        (``n_columns`` in all; empty: equal shares).
    """

    share: float | None = None
    groups: tuple = ()
    signal: float | None = None
    hierarchies: tuple = ()
    weights: tuple = ()

    def column_weights(self, n_columns):
        """Per column, its 1-way budget over an equal share (sum ``n_columns``)."""
        return self.weights or (1.0,) * n_columns

    def level_shares(self, n_columns):
        """Per column, the shares of an equal 1-way budget per measured level."""
        hierarchies = self.hierarchies or (None,) * n_columns
        return [
            tuple(w * v for v in ((1.0,) if h is None else h.shares))
            for w, h in zip(self.column_weights(n_columns), hierarchies, strict=True)
        ]

    def compressions(self, sizes):
        """Per column, the :class:`~._compression.Compression` of its bins or None.

        The levels after the ordered ones (a missing level) keep levels of
        their own; a measured bin is expanded uniformly over its levels.
        """
        out = [None] * len(sizes)
        for j, head in enumerate(self.groups):
            if head is None:
                continue
            n_bins = int(head.max()) + 1
            mapping = np.concatenate(
                [head, n_bins + np.arange(int(sizes[j]) - head.size)]
            )
            members = np.bincount(mapping)
            out[j] = Compression(mapping, 1.0 / members[mapping], n_bins)
        return out


def plan_one_way(
    n_rows,
    rho,
    sizes,
    positions,
    l2_sensitivity,
    policy,
    signal_bounds=None,
    levels_power=None,
    rare_levels=None,
    power_with_rounds_only=False,
    tree_max_signal=_FROM_POLICY,
):
    """The split of the budget between 1-way marginals and rounds.

    A rule on released or public values: it reads the number of rows (public
    under replace-one; under add-remove its noisy count, see
    :func:`_count_rows`), the budget, the declared levels and the bins'
    positions, never the data.
    ``full`` is the noise std of 1-way measurements taking the whole budget
    (the independent-marginals baseline); the *signal* is ``n_rows / (full
    * c)``, ``c`` the geometric mean over column pairs of their cells (numeric
    columns on their measured bins, :func:`_measured_bins`). Below
    ``policy.min_signal`` the 1-way marginals take the whole budget (no round
    runs: the model is the noisy 1-way marginals); above it they take
    ``policy.one_way_share`` and the rounds the rest. Each numeric column is
    then measured on the bins :func:`_measured_bins` gives at the 1-way
    noise. A numeric column measured on its own levels is measured on the
    nested grids of :func:`._measure.bin_hierarchy` when
    ``policy.tree_coarsest`` is set and the signal is below
    ``tree_max_signal``. ``policy.min_signal`` ``None``: no rule
    (the first rounds' noise, every level measured). ``signal_bounds``
    ``(low, high)`` replaces ``policy.min_signal`` by ``low``; at a signal of
    ``high`` or more (``None``: never) the plan is that of no rule, with the
    signal. With ``levels_power``, column ``j``'s share of the 1-way budget
    is proportional to its measured levels to that power (its events and
    noise scaled to it, the shares summing to the 1-way budget); ``None``:
    equal shares.

    Parameters
    ----------
    n_rows : float
        The number of rows, or its noisy count.
    rho : float
        The zCDP budget of the 1-way marginals and the rounds.
    sizes : sequence of int
    positions : sequence or None
        Per column, ``None`` or the centres of its ordered levels as fractions
        of its range (``None``: no column is measured on coarser bins).
    l2_sensitivity : float
        L2 sensitivity of a count table.
    policy : AIMPolicy
    signal_bounds : tuple or None, default=None
        ``(low, high)``; ``None``: ``(policy.min_signal, None)``.
    levels_power : float or None, default=None
        The power of the columns' measured levels their 1-way shares follow
        (:func:`_column_weights`); ``None``: equal shares.
    rare_levels : sequence of int or None, default=None
        Per column, how many of its levels are expected to hold almost no
        rows (the level undeclared values are mapped to): the signal counts
        the cells of the rows, so it leaves them out; their noise is still
        measured. ``None``: none.
    power_with_rounds_only : bool, default=False
        Apply ``levels_power`` only where the rounds run (the 1-way share
        below 1); where the 1-way marginals take the whole budget, equal
        shares.
    tree_max_signal : float or None, optional
        The hierarchy only below this signal (``None``: at any signal);
        not given: ``policy.tree_max_signal``.

    Returns
    -------
    OneWayPlan
    """
    if policy.min_signal is None:
        return OneWayPlan()
    if tree_max_signal is _FROM_POLICY:
        tree_max_signal = policy.tree_max_signal
    low, high = (policy.min_signal, None) if signal_bounds is None else signal_bounds
    d = len(sizes)
    positions = [None] * d if positions is None else list(positions)
    full = l2_sensitivity * math.sqrt(d / (2.0 * rho))
    rare = [0] * d if rare_levels is None else list(rare_levels)
    levels = [
        _measured_levels(
            size, _measured_bins(pos, n_rows, full, policy, policy.signal_per_sqrt)
        )
        - spare
        for size, pos, spare in zip(sizes, positions, rare, strict=True)
    ]
    pairs = [levels[i] * levels[j] for i, j in itertools.combinations(range(d), 2)]
    signal = n_rows / (full * math.exp(np.mean(np.log(pairs)))) if pairs else 0.0
    if high is not None and signal >= high:
        return OneWayPlan(signal=signal)
    share = 1.0 if signal < low else policy.one_way_share
    std = l2_sensitivity * math.sqrt(d / (2.0 * share * rho))
    groups = tuple(
        _measured_bins(pos, n_rows, std, policy, policy.measured_per_sqrt)
        for pos in positions
    )
    hierarchies = ()
    if policy.tree_coarsest is not None and (
        tree_max_signal is None or signal < tree_max_signal
    ):
        hierarchies = tuple(
            None
            if pos is None or (groups and groups[j] is not None)
            else bin_hierarchy(
                pos,
                sizes[j],
                policy.tree_coarsest,
                policy.tree_branching,
                policy.tree_share_ratio,
            )
            for j, pos in enumerate(positions)
        )
        if all(h is None for h in hierarchies):
            hierarchies = ()
    if power_with_rounds_only and share == 1.0:
        levels_power = None
    weights = _column_weights(
        [_measured_levels(size, g) for size, g in zip(sizes, groups, strict=True)],
        levels_power,
    )
    if all(g is None for g in groups):
        groups = ()
    return OneWayPlan(share, groups, signal, hierarchies, weights)


def _column_weights(levels, power):
    """Each column's 1-way budget over an equal share, from its measured levels.

    Proportional to ``levels ** power`` and summing to the number of
    columns; empty when ``power`` is None (equal shares). Public: the
    declared levels.
    """
    if power is None:
        return ()
    raw = np.asarray(levels, dtype=float) ** power
    return tuple(float(w) for w in raw * (len(levels) / raw.sum()))


def _measured_bins(positions, n_rows, std, policy, per_sqrt):
    """The bin of each ordered level, or None (each level on its own).

    About ``per_sqrt * sqrt(n_rows / std)`` equal-width bins of the declared
    range, rounded down to a power of two and at least
    ``policy.min_measured_bins``; a level goes to the bin holding its centre,
    bins holding no level are dropped. ``None`` when that is no fewer bins
    than levels, or ``per_sqrt`` is None.
    """
    if positions is None or per_sqrt is None:
        return None
    positions = np.asarray(positions, dtype=float)
    target = per_sqrt * math.sqrt(n_rows / std)
    n_bins = max(policy.min_measured_bins, 2 ** math.floor(math.log2(max(target, 1.0))))
    if n_bins >= positions.size:
        return None
    head = _equal_width_bins(positions, n_bins)
    return head if head.max() + 1 < positions.size else None


def _equal_width_bins(positions, n_bins):
    """The bin of each position among ``n_bins`` equal-width bins of [0, 1].

    Positions are fractions of a column's range; bins holding no position
    are dropped, so the bins are numbered 0, 1, ... in order.
    """
    head = np.minimum((positions * n_bins).astype(np.int64), n_bins - 1)
    return np.unique(head, return_inverse=True)[1].astype(np.int64)


def _measured_levels(size, head):
    """Levels of a column measured on ``head``'s bins (None: all its levels)."""
    return size if head is None else size - head.size + int(head.max()) + 1


def _coarse_groups(compression, ordered, target):
    """Groups of adjacent ordered levels (about ``target`` of them), or None.

    The column's kept ordered levels (its first compressed levels, in order)
    are cut into runs of ``ceil(count / target)`` adjacent levels; every other
    level is a group of its own. ``None`` when runs would be single levels.
    """
    if target is None or ordered <= 0:
        return None
    n_ordered = compression.n_ordered
    width = math.ceil(n_ordered / target)
    if width < 2:
        return None
    groups = np.empty(compression.n_levels, dtype=np.int64)
    head = np.arange(n_ordered) // width
    groups[:n_ordered] = head
    groups[n_ordered:] = head.max() + 1 + np.arange(compression.n_levels - n_ordered)
    return groups


def _grid_groups(compression, positions, target):
    """Groups of ordered levels by equal-width bins of the range, or None.

    Each of the column's kept ordered levels goes to the one of ``target``
    equal-width bins of its declared range that holds its centre (the mean
    of the centres of the public bins it merges, ``positions``, as fractions
    of the range); bins holding no level are dropped; every other level is a
    group of its own. ``None`` when every group would be a single level.
    Public: the positions and the compression (post-processing of released
    measurements).
    """
    if target is None or positions is None:
        return None
    positions = np.asarray(positions, dtype=float)
    n_ordered = compression.n_ordered
    if n_ordered <= 0:
        return None
    merged = compression.mapping[: positions.size]
    members = np.bincount(merged, minlength=n_ordered)[:n_ordered]
    centres = np.bincount(merged, weights=positions, minlength=n_ordered)[:n_ordered]
    centres = centres / np.maximum(members, 1)
    head = _equal_width_bins(centres, target)
    if int(head.max()) + 1 >= n_ordered:
        return None
    groups = np.empty(compression.n_levels, dtype=np.int64)
    groups[:n_ordered] = head
    groups[n_ordered:] = head.max() + 1 + np.arange(compression.n_levels - n_ordered)
    return groups


def _variants(
    candidates, compression, ordered, target, positions=None, multi_column=False
):
    """Candidate measurements ``(column set, groups or None)``.

    Every column set as it is (with ``multi_column``, of two or more columns
    only, when there are such sets), plus a coarsened version of each
    multi-column set that has an ordered column with coarse groups: runs of
    adjacent levels (:func:`_coarse_groups`) or, with ``positions`` (per
    column, ``None`` or the centres of its public bins), equal-width bins of
    the declared range (:func:`_grid_groups`).
    """
    if positions is None:
        coarse = [
            _coarse_groups(c, k, target)
            for c, k in zip(compression, ordered, strict=True)
        ]
    else:
        coarse = [
            _grid_groups(c, p, target) if k > 0 else None
            for c, k, p in zip(compression, ordered, positions, strict=True)
        ]
    if multi_column and any(len(r) > 1 for r in candidates):
        candidates = [r for r in candidates if len(r) > 1]
    out = [(r, None) for r in candidates]
    for r in candidates:
        if len(r) > 1 and any(coarse[v] is not None for v in r):
            out.append((r, tuple(coarse[v] for v in r)))
    return out


def _cells(clique, sizes, groups):
    """Cells of the (possibly coarsened) table over ``clique``."""
    if groups is None:
        return clique_cells(clique, sizes)
    return math.prod(
        int(sizes[v]) if g is None else int(g.max()) + 1
        for v, g in zip(clique, groups, strict=True)
    )


@dataclass(frozen=True)
class _Round:
    """One round's noise multiplier, selection epsilon and whether it is the last."""

    z: float
    eps: float
    last: bool


class _Budget:
    """zCDP filter: it decides each round's noise, never past the budget ``rho``.

    ``one_way_share`` ``None``: the budget is split over ``max_rounds`` rounds
    and the 1-way measurements take the first rounds' noise. A share ``s``:
    the 1-way measurements take ``s rho`` (all of it when ``s`` is 1: no
    round runs) and the rest is split over ``max_rounds`` rounds. Each round
    spends ``measure_share`` of its cost on a Gaussian measurement (``1 / (2
    z^2)``) and the rest on a selection draw (``eps^2 / 8``). When what is
    left would not pay for two more rounds, the next round spends all of it
    and is the last (AIM Algorithm 1); :meth:`anneal` halves the noise and
    doubles the selection epsilon (AIM Section 4.4).
    """

    def __init__(self, rho, max_rounds, measure_share, one_way_share=None):
        self.rho = rho
        self.used = 0.0
        self.finished = False
        self._measure_share = measure_share
        self._one_way_share = one_way_share
        rounds = rho
        if one_way_share is not None and one_way_share < 1.0:
            rounds = (1.0 - one_way_share) * rho
        self.z = math.sqrt(max_rounds / (2.0 * measure_share * rounds))
        self.eps = math.sqrt(8.0 * (1.0 - measure_share) * rounds / max_rounds)

    def _round_cost(self):
        return 1.0 / (2.0 * self.z**2) + self.eps**2 / 8.0

    def one_way_z(self, n_columns):
        """Noise multiplier of each of the ``n_columns`` 1-way measurements."""
        if self._one_way_share is None:
            return self.z
        # All of the budget: a hair below it, so rounding never passes it.
        share = min(self._one_way_share, 1.0 - 1e-12)
        return math.sqrt(n_columns / (2.0 * share * self.rho))

    def spend_one_way(self, level_shares):
        """Pay for the 1-way measurements: their events.

        ``level_shares`` gives, per column, the shares of its budget (that of
        one measurement of multiplier :meth:`one_way_z`) spent on each of its
        measured levels; a level with share ``w`` is a Gaussian measurement of
        multiplier ``z / sqrt(w)``, costing ``w / (2 z^2)``. Equal
        multipliers are one event with a count.
        """
        z = self.one_way_z(len(level_shares))
        multipliers = {}
        for shares in level_shares:
            for w in shares:
                zl = z if w == 1.0 else z / math.sqrt(w)
                multipliers[zl] = multipliers.get(zl, 0) + 1
        events = [GaussianEvent(zl, count=k) for zl, k in multipliers.items()]
        self.used = sum(k / (2.0 * zl**2) for zl, k in multipliers.items())
        if self.used >= self.rho:
            raise RuntimeError("Internal error: the 1-way step exceeds the budget.")
        self.finished = self._one_way_share is not None and self._one_way_share >= 1.0
        return events

    def next_round(self):
        """Pay for the next round: its :class:`_Round`."""
        remaining = self.rho - self.used
        last = remaining <= 2.0 * self._round_cost()
        if last:
            # A hair below what is left, so rounding never takes the total
            # past the budget.
            remaining *= 1.0 - 1e-12
            self.z = math.sqrt(1.0 / (2.0 * self._measure_share * remaining))
            self.eps = math.sqrt(8.0 * (1.0 - self._measure_share) * remaining)
        self.used += self._round_cost()
        if self.used > self.rho * (1.0 + _BUDGET_RTOL):
            raise RuntimeError("Internal error: a round would exceed the budget.")
        self.finished = last
        return _Round(self.z, self.eps, last)

    def anneal(self):
        """After a round that barely moved the model: half the noise from now on."""
        self.z /= 2.0
        self.eps *= 2.0

    def model_limit(self, max_cells):
        """Largest model allowed now: ``max_cells`` times the share of ``rho`` used."""
        return max_cells * self.used / self.rho

    def left(self):
        """The zCDP left for later rounds."""
        return 0.0 if self.finished else self.rho - self.used


@dataclass
class _Rounds:
    """The rounds' state: what was measured, the model fitted to it, the events.

    ``counts`` holds the exact count tables of the candidates on the model's
    levels (they read the data); everything else is released or public.
    """

    counts: dict
    sizes: tuple
    n_rows: float
    measurements: list
    measured: list = field(default_factory=list)
    selected: list = field(default_factory=list)
    events: list = field(default_factory=list)
    tree: JunctionTree | None = None
    theta: dict = field(default_factory=dict)
    log_mu: list | None = None

    def add(self, measurement):
        """Record a measurement; grow the junction tree if its set is new."""
        self.measurements.append(measurement)
        r = measurement.clique
        if r not in self.measured:
            self.measured.append(r)
            self.tree = build_junction_tree(self.measured, self.sizes)

    def refit(self, max_iter):
        """Mirror descent on every measurement, warm-started."""
        self.theta, self.log_mu = mirror_descent(
            self.tree, self.measurements, self.n_rows, self.theta, max_iter=max_iter
        )

    def model_counts(self, clique, groups=None):
        """The model's (coarsened) counts of ``clique``."""
        return coarsen(self.n_rows * marginal(self.tree, self.log_mu, clique), groups)


def _allowed(candidates, measured, sizes, limit, current):
    """Candidates whose addition keeps the junction tree within ``limit`` cells."""
    out = []
    for k, r in enumerate(candidates):
        if current.host(r) >= 0:
            out.append(k)
        elif build_junction_tree(measured + [r], sizes).cells() <= limit:
            out.append(k)
    return out


@dataclass(frozen=True)
class _Setup:
    """What every round reads and no round changes (public)."""

    candidates: _Candidates
    variants: list
    count_l2: float
    max_cells: int
    policy: AIMPolicy
    names: list | None


def fit_aim(
    codes,
    sizes,
    rho,
    rng,
    *,
    workload="2-way",
    max_cells=200_000,
    n_jobs=None,
    neighbouring="replace-one",
    compress=False,
    ordered=None,
    names=None,
    runs_numeric=False,
    positions=None,
    rare_levels=None,
    policy=None,
):
    """Run the adaptive rounds under a zCDP budget ``rho``.

    Parameters
    ----------
    codes : ndarray of shape (n_rows, n_columns), int, or a counts source
        The table's codes, or where to read its exact count tables from
        (:class:`._measure.CodesCounts`, :class:`._measure.CountedTables`
        covering :func:`count_sets`).
    sizes : sequence of int
        Number of levels of each column (public).
    rho : float > 0
        zCDP budget under ``neighbouring``.
    rng : numpy.random.Generator
    workload : str or list of tuple, default="2-way"
    max_cells : int, default=200_000
        Largest model (total cells of the junction tree's cliques).
    n_jobs : int or None
        Workers for counting the candidate marginals.
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
        Sets the sensitivities; under ``"add-remove"`` the number of rows is
        read once, for a Gaussian count (``policy.count_share`` of ``rho``);
        the split rule reads that count, the model's total its estimate from
        the count and the noisy 1-way marginals.
    compress : bool or "auto", default=False
        Merge each column's levels whose noisy 1-way count is below
        ``policy.compress_below`` noise standard deviations (domain
        compression). ``"auto"``: only when the 1-way noise standard deviation
        is at most ``policy.compress_max_std`` times the number of rows (or its
        estimate).
    ordered : sequence of int or None, default=None
        Per column, how many of its first levels are ordered (numeric bins;
        0 for a categorical column); only shapes how merged levels are
        expanded. ``None``: no column is ordered.
    names : sequence or None, default=None
        Column names for the log (``None``: column indices).
    runs_numeric : bool, default=False
        Cut each ordered column's levels into runs of about equal estimated
        mass after the 1-way measurements
        (:func:`._compression.ordered_runs`), about ``policy.runs_per_sqrt *
        sqrt(n_rows / std)`` of them (at least 2).
    positions : sequence or None, default=None
        Per column, ``None`` or the centres of its ordered levels as fractions
        of its declared range (public): with ``runs_numeric``, the split rule
        reads them and may measure the column in fewer equal-width bins, or
        on a hierarchy of them (:func:`plan_one_way`).
    rare_levels : sequence of int or None, default=None
        Per column, how many of its levels are expected to hold almost no
        rows (public: the level of undeclared values); the split rule's
        signal leaves them out of the cells it counts (:func:`plan_one_way`).
        ``None``: none.
    policy : AIMPolicy or None, default=None
        The tuning (``None``: the defaults).

    Returns
    -------
    AIMResult
    """
    policy = AIMPolicy() if policy is None else policy
    sizes = tuple(int(s) for s in sizes)
    counts = as_counts(codes, sizes)
    n_columns = counts.n_columns
    ordered = [0] * n_columns if ordered is None else [int(k) for k in ordered]
    sensitivity = count_sensitivity(neighbouring)
    candidates = _Candidates.of(n_columns, workload, sensitivity.l1)
    rows = _count_rows(counts, rho, neighbouring, sensitivity.l2, policy, rng)
    bounds, power = (policy.min_signal, None), policy.one_way_levels_power
    tree_bound = policy.tree_max_signal
    if neighbouring == "add-remove":
        bounds = (policy.add_remove_min_signal, policy.add_remove_max_signal)
        power = policy.add_remove_one_way_power
        tree_bound = policy.add_remove_tree_max_signal
    plan = OneWayPlan()
    if rows is not None:
        plan = plan_one_way(
            rows.planned,
            rho - rows.rho,
            sizes,
            positions if runs_numeric else None,
            sensitivity.l2,
            policy,
            bounds,
            power,
            rare_levels,
            neighbouring == "replace-one",
            tree_bound,
        )
    budget = _Budget(
        rho - (0.0 if rows is None else rows.rho),
        policy.rounds_per_column * n_columns,
        policy.measure_share,
        plan.share,
    )
    _log_plan(plan, bounds, rows)
    # 1. Every 1-way marginal (a grouped column on its measured bins, a
    # hierarchical one on its levels, made consistent).
    std = sensitivity.l2 * budget.one_way_z(n_columns)
    stds = [std / math.sqrt(w) for w in plan.column_weights(n_columns)]
    grouped = plan.compressions(sizes)
    public_rows = counts.n_rows if neighbouring == "replace-one" else None
    one_way = _measure_one_way(
        counts,
        stds,
        rng,
        grouped,
        plan.hierarchies,
        policy.tree_nonnegative,
        public_rows,
    )
    first_events = budget.spend_one_way(plan.level_shares(n_columns))
    if rows is not None:
        first_events = rows.events + first_events
    if public_rows is not None:
        n_rows = public_rows
    else:
        n_rows = estimate_total(one_way, None if rows is None else rows.measured)
    # 2. The model's levels, then its first fit (post-processing).
    compression = _compressions(
        one_way, stds, n_rows, ordered, compress, runs_numeric, policy, grouped
    )
    state = _start(counts, sizes, one_way, compression, candidates, n_rows, n_jobs)
    state.events.extend(first_events)
    state.refit(policy.final_iter if budget.finished else policy.round_iter)
    # 3. The adaptive rounds, until the budget says the last one ran.
    add_remove_split = neighbouring == "add-remove" and plan.share is not None
    setup = _Setup(
        candidates,
        _variants(
            candidates.sets,
            compression,
            ordered,
            _coarse_target(sensitivity.l2 * budget.z, n_rows, policy, add_remove_split),
            positions
            if runs_numeric and add_remove_split and policy.add_remove_coarse_grid
            else None,
            add_remove_split and policy.add_remove_multi_column_rounds,
        ),
        sensitivity.l2,
        max_cells,
        policy,
        names,
    )
    while not budget.finished:
        if _play_round(state, budget, setup, rng):
            budget.anneal()
    model = AIMModel(state.tree, state.log_mu, compression)
    return AIMResult(
        model,
        state.measurements,
        state.selected,
        state.events,
        budget.used + (0.0 if rows is None else rows.rho),
        float(n_rows),
    )


@dataclass(frozen=True)
class _RowCount:
    """The number of rows the split rule reads, and what reading it cost.

    Attributes
    ----------
    planned : float
        The number of rows (replace-one: public), or its noisy count, at
        least 1 (add-remove).
    measured : Measurement or None
        Add-remove: the noisy count as a measurement of one cell (the model's
        total uses it too, :func:`estimate_total`); replace-one: None.
    events : list
        The count's Gaussian event (none under replace-one).
    rho : float
        zCDP spent on the count.
    """

    planned: float
    measured: Measurement | None = None
    events: list = field(default_factory=list)
    rho: float = 0.0


def _count_rows(counts, rho, neighbouring, l2_sensitivity, policy, rng):
    """The :class:`_RowCount` of the split rule, or None (no rule).

    Replace-one: the number of rows, public and free. Add-remove: the number
    of rows is private; a Gaussian count (a record moves it by the L2
    sensitivity of a count table, one cell) spends ``policy.count_share`` of
    ``rho``. None when ``policy.min_signal`` is None, or under add-remove
    when ``policy.count_share`` is None.
    """
    if policy.min_signal is None:
        return None
    if neighbouring == "replace-one":
        return _RowCount(float(counts.n_rows))
    if policy.count_share is None:
        return None
    spent = policy.count_share * rho
    z = math.sqrt(1.0 / (2.0 * spent))
    std = l2_sensitivity * z
    noisy = counts.n_rows + std * rng.standard_normal()
    measured = Measurement((), np.array([noisy]), std)
    return _RowCount(max(1.0, noisy), measured, [GaussianEvent(z)], spent)


def _log_plan(plan, bounds, rows):
    """Log the split: released or public values only (the noisy count)."""
    if rows is not None and rows.measured is not None:
        logger.info(
            "noisy count of the rows %.1f (noise std %.3g), %.3g of the zCDP budget",
            float(rows.measured.y[0]),
            rows.measured.std,
            rows.rho,
        )
    if plan.share is not None:
        logger.info(
            "signal %.3g (min %.3g): share %.3g of the zCDP budget to the 1-way "
            "marginals%s",
            plan.signal,
            bounds[0],
            plan.share,
            " (all of it: the model is their product)" if plan.share >= 1 else "",
        )
    elif plan.signal is not None:
        logger.info(
            "signal %.3g (at least %.3g): the 1-way marginals take the first "
            "rounds' noise",
            plan.signal,
            bounds[1],
        )


def _measure_one_way(
    counts, stds, rng, grouped, hierarchies=(), nonnegative=False, total=None
):
    """Every 1-way count vector plus Gaussian noise of std ``stds[j]``.

    ``stds``: per column, its 1-way noise std (one float: every column's).

    A column with a :class:`~._compression.Compression` in ``grouped`` is
    measured on its groups (the count vector summed over them, one noisy
    cell each; a record is still in one cell): the measurement is then on
    the model's levels of that column. A column with a
    :class:`~._measure.BinHierarchy` in ``hierarchies`` is measured on each
    of its levels (std ``std / sqrt(share)``, a record in one cell of each)
    and its measurement is the consistent estimate of its levels' counts
    (:func:`._measure.consistent_estimate`, summing to ``total``, the number
    of rows where it is public, else unconstrained), with the estimate's
    noise covariance; with ``nonnegative``, that estimate made non-negative
    (:func:`._measure.nonnegative_estimate`, keeping ``total``, or the
    estimate's own sum, at least 0).
    """
    out = []
    for j, std in enumerate(np.broadcast_to(stds, counts.n_columns).tolist()):
        table = counts.table((j,))
        if hierarchies and hierarchies[j] is not None:
            out.append(
                _measure_hierarchy(
                    j, table, hierarchies[j], std, rng, total, nonnegative
                )
            )
            continue
        if grouped[j] is not None:
            table = np.bincount(
                grouped[j].mapping, weights=table, minlength=grouped[j].n_levels
            )
        out.append(
            Measurement((j,), table + std * rng.standard_normal(table.size), std)
        )
    return out


def _measure_hierarchy(column, table, hierarchy, std, rng, total, nonnegative):
    """The consistent 1-way :class:`Measurement` of a hierarchical column.

    ``total``: the number of rows where it is public, else None.
    """
    stds = [std / math.sqrt(w) for w in hierarchy.shares]
    noisy = measure_hierarchy(table, hierarchy, stds, rng)
    estimate, covariance = consistent_estimate(
        hierarchy, noisy, stds, None if total is None else float(total)
    )
    if nonnegative:
        kept = max(0.0, float(estimate.sum())) if total is None else total
        estimate = nonnegative_estimate(hierarchy, estimate, kept)
    spread = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    return Measurement((column,), estimate, spread, covariance=covariance)


def _compressions(
    one_way, stds, n_rows, ordered, compress, runs_numeric, policy, grouped
):
    """Each column's :class:`~._compression.Compression` from its 1-way measurement.

    ``stds``: per column, the noise std of its 1-way measurement (one
    measurement of every level at that column's budget).

    A column measured on groups keeps them (``grouped``); a column whose
    measurement is a hierarchy's consistent estimate (it carries a noise
    covariance) is smoothed over ``policy.tree_smooth_bins`` bins. The rules
    read only public values: the noise (fixed by the budget) and the number
    of rows or, under add-remove, its released estimate.
    """
    return [
        g
        if g is not None
        else _compression(m, std, n_rows, k, compress, runs_numeric, policy)
        for m, std, k, g in zip(one_way, stds, ordered, grouped, strict=True)
    ]


def _compression(measurement, std, n_rows, ordered, compress, runs_numeric, policy):
    """One column's :class:`~._compression.Compression` (see :func:`_compressions`)."""
    if compress == "auto":
        compress = std <= policy.compress_max_std * n_rows
    below = policy.compress_below if compress else None
    runs = None
    if runs_numeric and ordered:
        runs = max(2, int(round(policy.runs_per_sqrt * math.sqrt(n_rows / std))))
    return compress_column(
        measurement.y,
        std,
        below,
        ordered,
        runs,
        bandwidth=policy.smooth_bins
        if measurement.covariance is None
        else policy.tree_smooth_bins,
    )


def _start(counts, sizes, one_way, compression, candidates, n_rows, n_jobs):
    """The rounds' state on the compressed levels, with the 1-way measurements."""
    measurements = [
        m if m.y.size == c.n_levels else compressed_measurement(j, m, c)
        for j, (m, c) in enumerate(zip(one_way, compression, strict=True))
    ]
    mappings = None
    if any(c.n_levels < c.mapping.size for c in compression):
        mappings = [c.mapping for c in compression]
        sizes = tuple(c.n_levels for c in compression)
    tables = counts.marginals(candidates.sets, mappings, n_jobs)
    measured = [(j,) for j in range(len(sizes))]
    tree = build_junction_tree(measured, sizes)
    return _Rounds(tables, sizes, n_rows, measurements, measured, tree=tree)


def _coarse_target(std, n_rows, policy, add_remove_split=False):
    """Runs per coarsened column, or None below the noise gate (a public rule).

    ``policy.coarse_levels``, or ``policy.add_remove_coarse_levels`` where
    the split rule set the budget under add-remove (``add_remove_split``);
    ``n_rows`` is public or the released estimate.
    """
    levels = policy.coarse_levels
    if add_remove_split:
        levels = policy.add_remove_coarse_levels
    return levels if std >= policy.coarse_min_std * n_rows else None


def _play_round(state, budget, setup, rng):
    """Select, measure and refit once; whether the model barely moved."""
    round_ = budget.next_round()
    std = setup.count_l2 * round_.z
    options = _options(state, setup, budget.model_limit(setup.max_cells))
    scores = _scores(state, setup.candidates, options, std)
    drawn = exponential_draw(scores, round_.eps, setup.candidates.sensitivity, rng)
    r, groups = options[drawn]
    state.events.append(ExponentialMechanismEvent(round_.eps, bounded_range=True))
    exact = coarsen(state.counts[r], groups)
    y = exact + std * rng.standard_normal(exact.shape)
    state.events.append(GaussianEvent(round_.z))
    before = state.model_counts(r, groups)
    state.add(Measurement(r, y, std, groups))
    state.selected.append(r)
    policy = setup.policy
    state.refit(policy.final_iter if round_.last else policy.round_iter)
    change = np.abs(state.model_counts(r, groups) - before).sum()
    _log_round(
        state, budget, setup.names, groups, float(np.abs(y - before).sum()), change
    )
    return change <= _EXPECTED_ABS * std * y.size


def _options(state, setup, limit):
    """The variants whose column set keeps the model within ``limit`` cells."""
    candidates = setup.candidates
    allowed = set(
        _allowed(candidates.sets, state.measured, state.sizes, limit, state.tree)
    )
    return [(r, g) for r, g in setup.variants if candidates.index[r] in allowed]


def _scores(state, candidates, options, std):
    """Each option's weighted L1 error minus its noise's expected L1 norm."""
    cache = {}
    scores = np.empty(len(options))
    for i, (r, groups) in enumerate(options):
        if r not in cache:
            cache[r] = state.model_counts(r)
        error = np.abs(coarsen(state.counts[r] - cache[r], groups)).sum()
        expected = _EXPECTED_ABS * std * _cells(r, state.sizes, groups)
        scores[i] = candidates.weights[candidates.index[r]] * (error - expected)
    return scores


def _log_round(state, budget, names, groups, noisy_error, change):
    """Log a round: released quantities only, never the exact scores.

    The error shown is the L1 gap between the noisy measurement and the model
    before it (the exact scores read the data).
    """
    r = state.selected[-1]
    logger.info(
        "round %d: measured %s%s (noisy L1 error before %.1f), model change "
        "%.1f, zCDP budget (rho) left %.3g of %.3g",
        len(state.selected),
        tuple(r if names is None else (names[v] for v in r)),
        "" if groups is None else " coarsened",
        noisy_error,
        change,
        budget.left(),
        budget.rho,
    )


def estimate_total(measurements, count=None):
    """Inverse-variance weighted mean of the sums of noisy count vectors.

    The sum of a measurement of ``m`` cells with noise std ``s`` has variance
    ``m s^2``; ``count``, a noisy count of the rows (a measurement of one
    cell), is one more. Post-processing; at least 1.
    """
    if count is not None:
        measurements = [*measurements, count]
    sums = np.array([m.y.sum() for m in measurements])
    variances = np.array(
        [np.sum(np.broadcast_to(np.square(m.std), m.y.shape)) for m in measurements]
    )
    weights = 1.0 / variances
    return max(1.0, float(weights @ sums / weights.sum()))

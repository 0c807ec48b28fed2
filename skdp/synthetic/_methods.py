"""The two methods of :class:`DPSyntheticData` behind one interface.

A method object is built once per fit from the estimator's parameters (the
one place the ``method`` parameter is read, :data:`METHODS`). Each has

- ``events(plan, z)``: the events its run is accounted for, as a function of
  the noise multiplier ``z`` (so the noise is calibrated before a row is
  read);
- ``count_sets(n_columns)``: the column sets whose exact count tables give
  every table its run reads (public; what a partition of a Dask collection
  counts, :mod:`._dask`);
- ``run(plan, counts, z, rng)``: the pure solver, reading its exact tables
  from a counts source (:mod:`skdp._solvers._measure`), returning a
  :class:`SynthesisResult` whose ``model`` samples with ``model.sample(n,
  rng)``;
- ``attributes(selected)``: the fitted attributes only this method sets.

:func:`calibrate` and :func:`account_for` are the same for both: the domain
inference's events (run while planning) come first, then the method's.
"""

import logging
from dataclasses import dataclass, field

import numpy as np

from .._solvers import _aim, _tree
from .._solvers._aim import AIMPolicy, fit_aim
from .._solvers._tree import TreePlan, TreePolicy, fit_tree_model
from ..accounting import GaussianEvent, account, calibrate_noise_multiplier

__all__ = [
    "METHODS",
    "AIMMethod",
    "SynthesisPlan",
    "SynthesisResult",
    "TreeMethod",
    "account_for",
    "calibrate",
]

logger = logging.getLogger("skdp.synthetic")


@dataclass(frozen=True)
class SynthesisPlan:
    """The public plan of a fit: everything it needs but the data's counts.

    Attributes
    ----------
    specs : list of ColumnSpec
        Public discretisation of each column.
    keys : list
        Column keys, in order.
    inferred : dict
        Column key -> privately learned range.
    domain_events : list
        Events of the domain inference (run while planning).
    epsilon, delta : float
        The target of the whole fit.
    neighbouring : {"replace-one", "add-remove"}
    method : TreeMethod or AIMMethod
    """

    specs: list
    keys: list
    inferred: dict
    domain_events: list
    epsilon: float
    delta: float
    neighbouring: str
    method: object

    @property
    def sizes(self):
        """Number of levels of each column."""
        return [spec.n_levels for spec in self.specs]


@dataclass(frozen=True)
class SynthesisResult:
    """What a method's run released and what it is accounted for.

    Attributes
    ----------
    model : TreeModel or AIMModel
        The fitted generative model: ``model.sample(n, rng)`` gives code rows.
    selected : list of tuple
        Column index sets the method selected (released).
    events : list
        Every event that ran, domain inference first.
    accounted : list
        The events whose composition is the reported spend, domain inference
        first (the events that ran, or a curve that certifies them).
    noise_multiplier : float
    total : float
        The model's number of rows (public, or its private estimate).
    """

    model: object
    selected: list
    events: list
    accounted: list
    noise_multiplier: float
    total: float


def calibrate(plan):
    """The noise multiplier at which the plan's events meet its target."""
    z, _ = calibrate_noise_multiplier(
        lambda z: plan.domain_events + plan.method.events(plan, z),
        plan.epsilon,
        plan.delta,
        neighbouring=plan.neighbouring,
    )
    return z


def account_for(plan, result):
    """The spend of the run: the composition of its accounted events."""
    return account(result.accounted, plan.delta, neighbouring=plan.neighbouring)


@dataclass(frozen=True)
class TreeMethod:
    """One spanning tree of 2-way marginals (:mod:`skdp._solvers._tree`)."""

    policy: TreePolicy = field(default_factory=TreePolicy)

    @classmethod
    def from_estimator(cls, estimator, workload):
        """The method of a :class:`DPSyntheticData` (the workload is unused)."""
        return cls(estimator._tree_policy)

    def _solver_plan(self, plan):
        return TreePlan(len(plan.specs), self.policy)

    def events(self, plan, z):
        """The events of a run with global multiplier ``z``."""
        return self._solver_plan(plan).events(z)

    def count_sets(self, n_columns):
        """Every pair (each is scored): :func:`skdp._solvers._tree.count_sets`."""
        return _tree.count_sets(n_columns)

    def run(self, plan, counts, z, rng):
        """Select, measure and estimate the tree."""
        fit = fit_tree_model(counts, plan.sizes, self._solver_plan(plan), z, rng)
        names = plan.keys
        logger.info(
            "selected tree edges (parent, child) %s",
            [(names[a], names[b]) for a, b in fit.model.order],
        )
        events = plan.domain_events + fit.events
        order = list(fit.model.order)
        return SynthesisResult(fit.model, order, events, events, z, counts.n_rows)

    def attributes(self, selected):
        """``tree_``: the selected (parent, child) column pairs."""
        return {"tree_": list(selected)}


@dataclass(frozen=True)
class AIMMethod:
    """Adaptive rounds on a graphical model (:mod:`skdp._solvers._aim`).

    ``compress`` is the estimator's parameter; ``runs_numeric`` its
    ``binning == "adaptive"``.
    """

    workload: object
    max_cells: int
    n_jobs: int | None
    compress: object
    runs_numeric: bool
    policy: AIMPolicy = field(default_factory=AIMPolicy)

    @classmethod
    def from_estimator(cls, estimator, workload):
        """The method of a :class:`DPSyntheticData` (``workload`` as indices)."""
        return cls(
            workload,
            estimator.max_cells,
            estimator.n_jobs,
            estimator.compress,
            estimator.binning == "adaptive",
            estimator._aim_policy,
        )

    def events(self, plan, z):
        """The certified curve: a Gaussian of multiplier ``z`` (the rounds' filter)."""
        return [GaussianEvent(z)]

    def count_sets(self, n_columns):
        """The workload's sets: :func:`skdp._solvers._aim.count_sets`."""
        return _aim.count_sets(n_columns, self.workload)

    def compress_mode(self, neighbouring):
        """``compress`` for the solver: ``"auto"`` only under add-remove.

        Under replace-one the noise is ``sqrt(2)`` larger and the compression
        threshold merges levels holding a real share of the rows.
        """
        if self.compress == "auto":
            return "auto" if neighbouring == "add-remove" else False
        return bool(self.compress)

    def run(self, plan, counts, z, rng):
        """The rounds under the zCDP budget of a Gaussian of multiplier ``z``."""
        rho = 1.0 / (2.0 * z**2)
        logger.info(
            "target epsilon %g at delta %.3g (%s): zCDP budget rho %.4g",
            plan.epsilon,
            plan.delta,
            plan.neighbouring,
            rho,
        )
        fit = fit_aim(
            counts,
            plan.sizes,
            rho,
            rng,
            workload=self.workload,
            max_cells=self.max_cells,
            n_jobs=self.n_jobs,
            neighbouring=plan.neighbouring,
            ordered=[s.n_values if s.edges is not None else 0 for s in plan.specs],
            compress=self.compress_mode(plan.neighbouring),
            names=plan.keys,
            runs_numeric=self.runs_numeric,
            positions=[bin_positions(s) for s in plan.specs],
            rare_levels=[int(s.other) for s in plan.specs],
            policy=self.policy,
        )
        if fit.rho_used > rho * (1 + 1e-9):
            raise RuntimeError("Internal error: the rounds exceeded their budget.")
        # The filter certifies the budget curve a * rho (see DPSyntheticData).
        certified = plan.domain_events + [GaussianEvent(z)]
        events = plan.domain_events + fit.events
        return SynthesisResult(
            fit.model, fit.selected, events, certified, z, fit.n_rows
        )

    def attributes(self, selected):
        """None beyond the shared ones."""
        return {}


def bin_positions(spec):
    """Centres of a numeric column's bins as fractions of its range (public).

    ``None`` for a categorical column. Bins of the same range cut into ``k``
    equal-width bins hold the levels whose centre is in them: an integer
    column's levels (one per integer) go where its encoder would put them.
    """
    if spec.edges is None:
        return None
    edges = np.asarray(spec.edges, dtype=float)
    span = edges[-1] - edges[0]
    if span <= 0:
        return None
    return ((edges[:-1] + edges[1:]) / 2.0 - edges[0]) / span


#: The methods by the estimator's ``method`` parameter.
METHODS = {"aim": AIMMethod, "tree": TreeMethod}

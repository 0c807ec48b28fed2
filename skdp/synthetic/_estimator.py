"""DPSyntheticData: differentially private synthetic tabular data."""

import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .._base import SEED_BOUND, PrivateFitMixin, fit_generator, resolve_delta
from .._solvers._aim import AIMPolicy
from .._solvers._measure import CodesCounts, CountedTables
from .._solvers._tree import TreePolicy
from ..accounting import account
from ..accounting._accountant import epsilon_text
from ..exceptions import IndependentColumnsWarning, SpreadSpikeWarning
from ..schema import TableSchema
from ..schema._schema import did_you_mean
from ..utils._sklearn import Interval, StrOptions, fit_context
from ..utils._validation import (
    check_add_remove_delta,
    user_stacklevel,
    warn_wide_bounds,
)
from ._dask import (
    PartitionCounts,
    count_on_dask,
    dask_table,
    is_dask_collection,
    sample_collection,
)
from ._domain import (
    as_domain,
    as_table,
    build_specs,
    check_domain_keys,
    check_not_empty,
    encode_table,
    rebuild_table,
)
from ._infer import columns_to_infer, infer_ranges
from ._methods import METHODS, SynthesisPlan, account_for, calibrate

__all__ = ["DPSyntheticData", "DomainWarning"]


class DomainWarning(UserWarning):
    """Values outside the declared domain were clipped or mapped to "other".

    Shown once per fit to whoever runs it; it is not part of the released
    output.
    """


logger = logging.getLogger("skdp.synthetic")


@dataclass(frozen=True)
class _Input:
    """A validated fit input: the table's columns and the public declarations.

    ``counted``: on a Dask collection, the count tables summed over its
    partitions (:func:`._dask.count_on_dask`); the columns then carry no
    values.
    """

    columns: list
    frame_info: dict | None
    keys: list
    workload: object
    delta: float
    domain: dict
    to_infer: list
    counted: PartitionCounts | None = None


@dataclass(frozen=True)
class _Sampler:
    """The fitted model and the public specs that decode its codes to a table."""

    model: object
    specs: list
    frame_info: dict | None
    dtype: object

    def draw(self, n_samples, rng):
        """``n_samples`` records in the fit input's container (post-processing)."""
        codes = self.model.sample(n_samples, rng)
        return rebuild_table(self.specs, codes, rng, self.frame_info, self.dtype)


class DPSyntheticData(PrivateFitMixin, BaseEstimator):
    """Differentially private synthetic data from noisy marginals.

    By default (``method="aim"``) runs adaptive rounds: select a badly
    answered marginal with the exponential mechanism, measure it with
    Gaussian noise, refit a graphical model to all measurements by entropic
    mirror descent; then samples records from the model (the AIM mechanism of
    McKenna et al. 2022 on the private-pgm model of McKenna et al. 2019).
    Returns the input's container and column names; categories and string
    types come from the declared domain (see :meth:`sample`).

    Parameters
    ----------
    epsilon : float > 0, default=1.0
        Target privacy budget: the whole fit (domain inference included)
        spends at most ``(epsilon, delta)``.
    delta : float in (0, 1) or None, default=None
        ``None``: ``min(1e-5, n ** -1.1)`` (replace-one only: under
        add-remove it would reveal ``n``, so a value is required).
    domain : TableSchema, mapping or None, default=None
        Public domain of every column: a :class:`~skdp.schema.TableSchema`
        (its :meth:`~skdp.schema.TableSchema.domain`), or a mapping ``column
        -> declaration``: :class:`~skdp.schema.Numeric` ``(low, high, bins=None,
        nullable=False)``, :class:`~skdp.schema.Categorical` ``(categories,
        nullable=False)``, or a shorthand: a list of categories, or ``(low,
        high)`` / ``(low, high, n_bins)`` (a tuple) for a numeric column. A
        numeric column is an integer one when both bounds are integers
        (declare ``(0.0, 100.0)`` for a continuous one); ``Numeric(bins=...)``
        sets its public binning (a number of equal-width bins or the edges).
        ``nullable=True`` declares that a column may be missing: it gets a
        missing level (see ``missing``). Keys are column names for a DataFrame
        and column indices for an array. Required for every column unless
        ``infer_domain`` is set (an inferred range is an integer one for an
        integer dtype).
    method : {"aim", "tree"}, default="aim"
        ``"aim"``: adaptive rounds of select-measure-estimate on a graphical
        model (McKenna et al. 2022). ``"tree"``: one spanning tree of 2-way
        marginals (MST-style, McKenna, Miklau and Sheldon 2021): much
        faster, less accurate (docs/benchmarks.md, "Synthetic data").
    workload : {"2-way", "3-way"} or list of column sets, default="2-way"
        Marginals the ``"aim"`` rounds target (and the candidates they may
        measure: the sets and their subsets). A list holds tuples of column
        keys.
    max_cells : int >= 1, default=200_000
        Largest graphical model (total cells of its junction tree's cliques)
        the ``"aim"`` rounds may build; bounds memory and time.
    bins : int >= 1, default=32
        Number of equal-width bins of a numeric column without its own
        ``n_bins`` (integer columns use at most one bin per integer).
    binning : {"adaptive", "fixed"}, default="adaptive"
        ``"aim"`` only. ``"adaptive"``: after the 1-way measurements, the
        model's levels of each numeric column are runs of adjacent public
        bins cut at the quantiles of its noisy 1-way counts, about ``1.5 *
        sqrt(n / std)`` runs for ``n`` rows and noise std ``std`` (post-processing:
        no extra budget; nearly empty tails join a run instead of taking
        levels of their own); a bin is drawn within its run in proportion to
        its smoothed noisy count. ``"fixed"``: every public bin is a level,
        always measured.
    missing : {"error", "category"}, default="error"
        Missing values (NaN/None) go to a missing level, sampled back as
        NaN/None, on the columns declared ``nullable=True`` whatever this
        says; elsewhere ``"error"`` refuses them and ``"category"`` gives a
        missing level to every column declared by a shorthand (a list or a
        tuple, which cannot say whether it may be missing) or inferred. A
        ``Numeric`` or ``Categorical`` declared ``nullable=False`` never gets
        one: declare columns one by one to keep missing values off those
        that have none. A column with a missing level comes back as float
        (integer ranges) or object (categories).
    handle_unknown : {"error", "other"}, default="error"
        ``"other"``: every categorical column gets the level ``"other"``,
        which undeclared values are mapped to (one warning per fit says
        how many); a domain that already lists ``"other"`` as a category is
        refused (its rows and the undeclared ones would be merged): rename
        that category. ``"error"``: refuse undeclared values.
    infer_domain : float in (0, 1) or None, default=None
        Share of the budget (in zCDP terms) spent to learn the range of the
        numeric columns missing from ``domain`` (a noisy histogram each).
        Categorical columns must always be declared. ``None``: refuse columns
        without a domain.
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
        The neighbouring relation of the guarantee. ``"add-remove"`` (one row
        added or removed; the relation of AIM and private-pgm) needs
        ``method="aim"`` and a declared domain for every column
        (``infer_domain=None``); a count table then moves by 1 instead of
        ``sqrt(2)``, so the same epsilon buys half the noise variance, and the
        number of rows becomes private: a Gaussian count of the rows (1% of
        the zCDP budget) feeds the budget split (see Notes), and the model's
        total and the default size of :meth:`sample` are estimated from that
        count and the noisy 1-way marginals.
        It also needs an explicit ``delta``: the default ``min(1e-5, n **
        -1.1)`` depends on the number of rows, so ``fit`` refuses
        ``delta=None``.
    compress : bool or "auto", default="auto"
        ``"aim"`` only: after the 1-way measurements, merge the levels of a
        column whose noisy count is below 3 noise standard deviations (MST's
        domain compression; free, see Notes). ``"auto"``: only under
        ``neighbouring="add-remove"``, and only when the 1-way noise standard
        deviation is at most 1/200 of the estimated number of rows (at
        higher noise the threshold merges levels holding a real share of
        the rows). Under replace-one, whose noise is ``sqrt(2)`` larger, the
        threshold would merge real levels (docs/benchmarks.md, "Synthetic
        data" and "Synthetic data on the panel").
    n_jobs : int or None, default=None
        Workers (joblib) counting the marginals of the ``"aim"`` rounds.
    random_state : int, RandomState instance or None, default=None
        Seeds the fit and, through a seed drawn at fit time, :meth:`sample`.
    verbose : int, default=0
        Log each round (marginal chosen, its noisy L1 error under the model
        before the round, model change, budget left): released quantities
        only, never the exact selection scores.

    Attributes
    ----------
    privacy_spent_ : skdp.accounting.PrivacySpent
        What the whole fit spent, under ``neighbouring``.
    events_ : list
        Every privacy event that ran, domain inference first.
    noise_multiplier_ : float
        ``"tree"``: the calibrated global noise multiplier. ``"aim"``: the
        multiplier of the Gaussian whose curve is the rounds' zCDP budget.
    delta_ : float
    selected_ : list of tuple
        ``"aim"``: the column sets measured in the adaptive rounds;
        ``"tree"``: the tree's (parent, child) pairs. Released, free to inspect.
    tree_ : list of (key, key)
        ``"tree"`` only: the selected (parent, child) column pairs.
    domain_ : dict
        The domain used, learned ranges included.
    columns_ : list of ColumnSpec
        Public discretisation of each column.
    n_samples_fit_ : int
        Number of rows seen in fit (public under replace-one); under
        add-remove, its private estimate (the model's total, rounded).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only for DataFrame input with string column names.

    See Also
    --------
    skdp.synthetic.marginal_error : Average total-variation distance between
        the k-way marginals of two tables.

    Notes
    -----
    **Privacy.** The unit of privacy is one row; neighbouring data sets differ
    by replacing one row (replace-one). Public: the domain (categories, numeric
    ranges, number of bins, the missing and other levels), the column names and
    dtypes, and the number of rows. The declared domain, not the dtypes,
    decides whether a numeric column is binned as integers (integer bounds)
    and which columns get a missing level (``nullable`` and ``missing``): a
    dtype that pandas or numpy infers from the values (int64 unless some row holds
    2.5 or a blank) is read from the data. The released table takes its
    categories and string types from the domain too, never from the input's
    dtype (whose categories ``astype("category")`` reads from the data); the
    input's other dtypes are kept where the domain's values fit them. A
    count table's replace-one sensitivity is
    ``sqrt(2)`` in L2 and 2 in L1. With ``neighbouring="add-remove"`` (one row
    added or removed) it is 1 in both, the scores' sensitivity is
    ``max weight``, and the number of rows is private: the model's total is the
    inverse-variance weighted mean of a noisy count of the rows and the sums
    of the noisy 1-way marginals.

    ``method="aim"`` (McKenna, Mullins, Sheldon and Miklau 2022, Algorithm 1):
    the budget is a zCDP level ``rho`` (that of a Gaussian of multiplier
    ``noise_multiplier_``). The 1-way marginals are measured with Gaussian
    noise. Under replace-one (the number of rows ``n`` public) a public rule
    splits the budget first: with ``full`` the noise std of 1-way measurements
    taking all of it, the *signal* ``n / (full * c)``, ``c`` the geometric mean
    of the column pairs' cells, says whether a typical 2-way table holds more
    rows per cell than noise. Below 2 the 1-way marginals take the whole
    budget and no round runs (the model is their product: the noisy
    independent marginals); above it they take half and the rounds the rest
    (docs/benchmarks.md, "Synthetic data on the panel"). Under add-remove,
    ``n`` is private: a Gaussian count of the rows (sensitivity 1) spends 1%
    of the budget first and the rule reads it instead of ``n``, with its own
    thresholds: below 0.5 the 1-way marginals take the rest of the budget,
    from 0.5 to 12 half of it (numeric columns on their bin hierarchy), and
    at 12 or more the first rounds' noise (as without the rule)
    (docs/benchmarks.md, "Like for like against AIM").
    Then each round draws one candidate marginal by the exponential
    mechanism (bounded range, ``eps^2 / 8``-zCDP; score: its workload-weighted
    L1 error minus the noise's expected L1 norm, sensitivity
    ``2 max weight``) and measures it with Gaussian noise (``1 / (2 z^2)``);
    9/10 of each round goes to the measurement. The noise shrinks as the model
    stops improving and the last round spends exactly what is left, so the
    rounds' zCDP never exceeds ``rho``: a Rényi filter (Feldman and Zrnic
    2021, composition with adaptively chosen RDP parameters, at each order),
    whose certified curve ``a rho`` is what
    ``privacy_spent_`` reports (composed with the domain inference).

    ``method="tree"``: the budget ``rho = 1 / (2 z^2)`` of one global noise
    multiplier ``z`` is split in fixed shares: 20% to the ``d`` 1-way
    measurements, 10% to the ``d - 1`` selection draws, 70% to the ``d - 1``
    2-way measurements; the Rényi-DP accountant composes their curves.

    ``infer_domain = s``: the numeric columns without a declared range share
    ``s`` of the zCDP budget, one Gaussian histogram on public bins each
    (sensitivity ``sqrt(2)``; the range runs from the first to the last bin
    whose noisy count clears 4 noise standard deviations, see
    :mod:`skdp.synthetic._infer`); the main budget is then calibrated so that
    everything composed meets the target.
    Everything after the measurements is post-processing, so :meth:`sample`
    costs nothing more however often it is called.

    **Dask collections.** ``fit`` also takes a ``dask.dataframe.DataFrame`` or
    a 2-D ``dask.array.Array`` whose columns all have a declared domain
    (``infer_domain`` is refused there): in one pass, each partition is encoded
    where it is and returns the count tables the method reads, its number of
    rows and its numbers of clipped or mapped values per column; these are
    summed in a tree of tasks and nothing else leaves a partition. The
    mechanisms, their noise and the accounting are those of the in-memory
    fit, which the fit reproduces bit for bit for the same rows and seed
    (integer counts sum exactly in any order); ``n_jobs`` is unused (the
    cluster counts). ``sample(npartitions=k)`` draws a table partition by
    partition. See docs/guide/dask.md.

    **Estimation** (``"aim"``). With ``compress``, after the 1-way
    measurements the levels of a column whose noisy count is below 3 noise
    standard deviations are merged into one level (when there are at least
    two; MST's domain compression, post-processing); the rounds count and
    measure on the merged levels, and a sampled merged level is drawn back
    among its levels in proportion to their noisy counts. When the noise is
    high (the first rounds' standard deviation at least 1.5e-4 of the rows),
    each pair with a numeric column is also a candidate coarsened: that
    column's bins summed into about 16 runs of adjacent bins, so fewer cells
    share the noise (the model keeps every bin; the detail within a run comes
    from the 1-way measurement). A record still sits in one cell of a
    coarsened table, so its sensitivity and the round's cost are unchanged.
    A Markov random
    field over the measured column sets, triangulated into a junction tree;
    its potentials are fitted to all noisy measurements by entropic mirror
    descent (McKenna, Sheldon and Miklau 2019), and records are sampled
    clique by clique along the tree with counts rounded per conditioning
    value. Only clique tables are built, never the joint histogram.

    **Input handling.** Numeric values outside their range are clipped into
    it; undeclared categories are refused, or mapped to ``"other"`` with
    ``handle_unknown="other"``; missing values are kept as a level of the
    columns that may be missing (``nullable=True``, or shorthands under
    ``missing="category"``) and refused elsewhere; clipped and mapped values
    are reported in one warning to whoever runs the fit (the curator; the
    warning is not part of the released output). Empty input, columns of the
    wrong type for their domain and infinite values raise ``ValueError``
    before anything is released (with ``infer_domain``, possibly after the
    private range histograms ran; the fit is then rolled back and nothing is
    kept). A single row or constant columns are fitted like any other data.

    References
    ----------
    McKenna, Mullins, Sheldon and Miklau (2022). AIM: an adaptive and iterative
    mechanism for differentially private synthetic data. PVLDB 15(11).

    McKenna, Sheldon and Miklau (2019). Graphical-model based estimation and
    inference for differential privacy. ICML.

    McKenna, Miklau and Sheldon (2021). Winning the NIST contest: a scalable
    and general approach to differentially private synthetic data. Journal of
    Privacy and Confidentiality 11(3).

    Feldman and Zrnic (2021). Individual privacy accounting via a Rényi
    filter. NeurIPS.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.synthetic import DPSyntheticData
    >>> rng = np.random.default_rng(0)
    >>> X = rng.integers(0, 3, size=(500, 2))
    >>> domain = {0: [0, 1, 2], 1: [0, 1, 2]}
    >>> synth = DPSyntheticData(epsilon=1.0, domain=domain, random_state=0).fit(X)
    >>> synth.sample(10).shape
    (10, 2)
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither"), None],
        "domain": [Mapping, TableSchema, None],
        "method": [StrOptions({"aim", "tree"})],
        "workload": [StrOptions({"2-way", "3-way"}), list, tuple],
        "max_cells": [Interval(Integral, 1, None, closed="left")],
        "bins": [Interval(Integral, 1, None, closed="left")],
        "binning": [StrOptions({"adaptive", "fixed"})],
        "missing": [StrOptions({"error", "category"})],
        "handle_unknown": [StrOptions({"error", "other"})],
        "infer_domain": [Interval(Real, 0, 1, closed="neither"), None],
        "neighbouring": [StrOptions({"replace-one", "add-remove"})],
        "compress": ["boolean", StrOptions({"auto"})],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=None,
        domain=None,
        method="aim",
        workload="2-way",
        max_cells=200_000,
        bins=32,
        binning="adaptive",
        missing="error",
        handle_unknown="error",
        infer_domain=None,
        neighbouring="replace-one",
        compress="auto",
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.domain = domain
        self.method = method
        self.workload = workload
        self.max_cells = max_cells
        self.bins = bins
        self.binning = binning
        self.missing = missing
        self.handle_unknown = handle_unknown
        self.infer_domain = infer_domain
        self.neighbouring = neighbouring
        self.compress = compress
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    #: Tuning of each method; a benchmark sets a variant on an instance.
    _aim_policy = AIMPolicy()
    _tree_policy = TreePolicy()

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the private model.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Or a ``dask.dataframe.DataFrame`` or 2-D ``dask.array.Array``:
            each partition is encoded and counted where it is and only the
            count tables travel (one pass; every column's domain must be
            declared). The fit is the in-memory fit of the same rows, bit for
            bit (docs/guide/dask.md).
        y : None
            Ignored.

        Returns
        -------
        self : DPSyntheticData
        """
        if self.neighbouring == "add-remove" and (
            self.method != "aim" or self.infer_domain is not None
        ):
            raise ValueError(
                "neighbouring='add-remove' is supported with method='aim' and a "
                "declared domain (infer_domain=None); got "
                f"method={self.method!r}, infer_domain={self.infer_domain!r}."
            )
        check_add_remove_delta(self.neighbouring, self.delta)
        if is_dask_collection(X):
            return self._fit_private(self._dask_input(X))
        columns, frame_info = as_table(X)
        keys = [key for key, _, _ in columns]
        workload = _workload_indices(self.workload, keys)
        delta = resolve_delta(self.delta, len(columns[0][1]))
        domain = as_domain(self.domain)
        to_infer = columns_to_infer(columns, domain, self.infer_domain)
        data = _Input(columns, frame_info, keys, workload, delta, domain, to_infer)
        return self._fit_private(data)

    def _dask_input(self, X):
        """Validate a Dask collection and count its tables in one pass."""
        if self.infer_domain is not None:
            raise ValueError(
                "infer_domain is not available on a Dask collection: declare the "
                "range of every numeric column in domain (public bounds), or fit "
                "in memory."
            )
        table = dask_table(X)
        keys = table.keys
        workload = _workload_indices(self.workload, keys)
        domain = as_domain(self.domain)
        check_domain_keys(domain, keys)
        undeclared = [key for key in keys if key not in domain]
        if undeclared:
            raise ValueError(
                f"No domain given for the columns {undeclared!r}. A fit on a Dask "
                "collection needs the public domain of every column (its "
                "categories, or its range): pass domain= or a TableSchema."
            )
        specs = build_specs(
            table.columns,
            domain,
            self.bins,
            missing=self.missing,
            handle_unknown=self.handle_unknown,
        )
        sets = METHODS[self.method].from_estimator(self, workload).count_sets(len(keys))
        counted = count_on_dask(table, specs, sets, self.handle_unknown)
        check_not_empty(counted.n_rows, len(keys))
        delta = resolve_delta(self.delta, counted.n_rows)
        return _Input(
            table.columns, table.frame_info, keys, workload, delta, domain, [], counted
        )

    def _plan_fit(self, data, rng):
        """Learn the missing ranges (private), then the public discretisation."""
        inferred, domain_events = infer_ranges(
            data.columns,
            data.to_infer,
            self.infer_domain,
            self.epsilon,
            data.delta,
            rng,
        )
        if inferred:
            logger.info(
                "learned ranges %s with %g of the zCDP budget (epsilon %.3g at "
                "delta %.3g on its own)",
                inferred,
                self.infer_domain,
                account(domain_events, data.delta).epsilon,
                data.delta,
            )
        specs = build_specs(
            data.columns,
            data.domain,
            self.bins,
            missing=self.missing,
            handle_unknown=self.handle_unknown,
            inferred=inferred,
        )
        return SynthesisPlan(
            specs,
            data.keys,
            inferred,
            domain_events,
            self.epsilon,
            data.delta,
            self.neighbouring,
            METHODS[self.method].from_estimator(self, data.workload),
        )

    def _calibrate(self, plan):
        return calibrate(plan)

    def _run(self, schedule, noise_multiplier, data, rng):
        counts = self._counts(data, schedule)
        return schedule.method.run(schedule, counts, noise_multiplier, rng)

    def _counts(self, data, plan):
        """The counts source of the run; one warning for the values that moved."""
        sizes = tuple(plan.sizes)
        if data.counted is None:
            report, spans, spikes = {}, {}, {}
            codes = encode_table(
                data.columns,
                plan.specs,
                handle_unknown=self.handle_unknown,
                report=report,
                spans=spans,
                spikes=spikes,
            )
            _warn_domain(report, plan)
            warn_wide_bounds(spans)
            _warn_spikes(spikes)
            return CodesCounts(codes, sizes)
        counted = data.counted
        _warn_domain(counted.report, plan)
        return CountedTables(counted.n_rows, sizes, counted.tables)

    def _account(self, plan, result):
        return account_for(plan, result)

    def _set_fitted(self, data, plan, noise_multiplier, result, spent, rng):
        keys = plan.keys
        self.columns_ = plan.specs
        self.domain_ = {
            key: data.domain[key] if key in data.domain else plan.inferred[key]
            for key in keys
        }
        self.selected_ = [tuple(keys[i] for i in r) for r in result.selected]
        for name, value in plan.method.attributes(self.selected_).items():
            setattr(self, name, value)
        self.noise_multiplier_ = noise_multiplier
        self.events_ = result.events
        self.delta_ = plan.delta
        self.privacy_spent_ = spent
        self.n_samples_fit_ = int(round(result.total))
        self.n_features_in_ = len(keys)
        if data.frame_info is not None and all(isinstance(k, str) for k in keys):
            self.feature_names_in_ = np.asarray(keys, dtype=object)
        self._model = result.model
        self._frame_info = data.frame_info
        self._dtype = data.columns[0][2] if data.frame_info is None else None
        self._sample_seed = int(rng.integers(SEED_BOUND))
        _warn_independent(keys, self.selected_, spent)

    def sample(self, n_samples=None, random_state=None, *, npartitions=None):
        """Draw synthetic records (post-processing: no extra privacy cost).

        Parameters
        ----------
        n_samples : int or None, default=None
            ``None``: as many rows as seen in fit.
        random_state : int, RandomState instance or None, default=None
            ``None``: a seed drawn at fit time, so repeated calls return the
            same records; pass a value for other draws.
        npartitions : int >= 1 or None, default=None
            ``None``: the table in memory. A number: a lazy Dask collection
            (``dask.dataframe.DataFrame`` for a DataFrame input, else a
            ``dask.array.Array``) of that many partitions of about equal
            size, each drawn from the model with its own seed where it is
            computed, so ``.to_parquet(...)`` or ``.to_csv(...)`` write a table
            larger than memory partition by partition. Its rows are not those
            of the in-memory table (see Notes); the same seed gives the same
            partitions whatever the scheduler.

        Returns
        -------
        X_synthetic : DataFrame or ndarray of shape (n_samples, n_features)
            Same container and column names as the fit input. Categorical
            columns carry the declared categories (plus ``"other"`` with
            ``handle_unknown="other"``); columns with the ``"other"`` level
            and string arrays come back as objects; integer columns stay
            integers (widened to int64 if the declared range needs it); other
            dtypes are the input's, which must be public (see Notes).

        Notes
        -----
        The in-memory table is drawn with low-variance rounding: the rows that
        share a conditioning value get their conditional distribution as
        counts rounded over all of them, in random order, so each row depends
        on every other and a table drawn in partitions cannot reproduce it.
        Partition ``k`` of ``npartitions`` is the in-memory draw of its own
        ``n_k`` rows with the ``k``-th of ``npartitions`` seeds drawn from
        ``random_state``: the same model, rounded within each partition.
        """
        check_is_fitted(self)
        n = self.n_samples_fit_ if n_samples is None else n_samples
        if isinstance(n, bool) or not isinstance(n, Integral) or n < 0:
            raise ValueError(f"n_samples must be an integer >= 0, got {n_samples!r}.")
        if npartitions is not None and (
            isinstance(npartitions, bool)
            or not isinstance(npartitions, Integral)
            or npartitions < 1
        ):
            raise ValueError(
                f"npartitions must be None or an integer >= 1, got {npartitions!r}."
            )
        if random_state is None:
            rng = np.random.default_rng(self._sample_seed)
        else:
            rng = fit_generator(random_state)
        sampler = _Sampler(self._model, self.columns_, self._frame_info, self._dtype)
        if npartitions is None:
            return sampler.draw(int(n), rng)
        seeds = rng.integers(SEED_BOUND, size=int(npartitions))
        return sample_collection(sampler, int(n), seeds)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.missing == "category"
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        tags.requires_fit = True
        return tags


def _warn_domain(report, plan):
    """One :class:`DomainWarning` for the values clipped or mapped, by column.

    ``report``: column key -> (number of values, what was done), see
    :func:`._domain.encode_table`; listed in column order.
    """
    if not report:
        return
    details = "; ".join(
        f"{k!r}: {n} {kind}"
        + (
            f" (the privately learned range {plan.inferred[k]!r}; declare "
            "the range to keep them)"
            if k in plan.inferred
            else ""
        )
        for k, (n, kind) in sorted(
            report.items(), key=lambda item: plan.keys.index(item[0])
        )
    )
    warnings.warn(
        f"Values outside the domain: {details}.",
        DomainWarning,
        stacklevel=user_stacklevel(),
    )


def _warn_spikes(spikes):
    """One :class:`SpreadSpikeWarning` for the numeric columns whose spike shares a bin.

    ``spikes``: column key -> ``(value, share, lo, hi)``
    (:func:`._domain.spread_spike`), in column order.
    """
    if not spikes:
        return
    details = "; ".join(
        f"{key!r}: {value:g} is {share:.0%} of the values, in a bin spanning "
        f"{lo:g} to {hi:g}"
        for key, (value, share, lo, hi) in spikes.items()
    )
    warnings.warn(
        f"Frequent values share a public bin with other values: {details}. "
        "Synthetic values are drawn uniformly within a bin, so such a value "
        "comes back spread over the bin (a count's zeros as 0 to 3, say). "
        "Declare a bin of its own for it: Numeric(low, high, bins=[edges]) "
        '(in a JSON domain file for skdp synth: {"low": .., "high": .., '
        '"bins": [edges]}) with an edge on each side of the value (for an '
        "integer column, bins=[0, 1, 2, 3, 5, 10, ...] gives 0, 1 and 2 bins "
        "of their own), or one bin per value (bins=high - low + 1).",
        SpreadSpikeWarning,
        stacklevel=user_stacklevel(),
    )


def _warn_independent(keys, selected, spent):
    """Say so when no table of two or more columns was measured (``selected_``)."""
    if len(keys) < 2 or any(len(cols) >= 2 for cols in selected):
        return
    warnings.warn(
        f"No table of two or more columns was measured at epsilon "
        f"{epsilon_text(spent.epsilon)}: the synthetic columns are sampled "
        "independently "
        "of each other, and every relation between them is lost. A larger "
        "epsilon, fewer columns or coarser numeric bins leave budget for pairs.",
        IndependentColumnsWarning,
        stacklevel=user_stacklevel(),
    )


def _workload_indices(workload, keys):
    """A workload string as is; a list of key tuples as sorted index tuples."""
    if isinstance(workload, str):
        return workload
    index = {key: j for j, key in enumerate(keys)}
    out = []
    for clique in workload:
        if isinstance(clique, (str, bytes)) or not hasattr(clique, "__iter__"):
            raise ValueError(
                f"workload must list tuples of column keys, got {clique!r}."
            )
        missing = [key for key in clique if key not in index]
        if missing or not clique:
            pairs = [(key, did_you_mean(key, keys)) for key in missing]
            hints = "".join(
                f" Column {key!r} is not in the table{hint}"
                for key, hint in pairs
                if hint
            )
            raise ValueError(
                f"workload set {clique!r} names no column or unknown columns "
                f"{missing!r} (columns: {keys!r}).{hints}"
            )
        out.append(tuple(sorted({index[key] for key in clique})))
    if not out:
        raise ValueError("workload lists no column sets.")
    return out

"""DPSyntheticData: differentially private synthetic tabular data."""

import logging
from collections.abc import Mapping
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._solvers._marginals import MarginalPlan, fit_tree_model, sample_tree_model
from ..accounting import account, calibrate_noise_multiplier
from ..utils._sklearn import Interval, fit_context
from ..utils._validation import default_delta, enable_progress
from ._domain import as_table, build_specs, encode_table, rebuild_table

__all__ = ["DPSyntheticData"]

logger = logging.getLogger("skdp.synthetic")

_SEED_BOUND = 2**31


def _generator(random_state):
    return np.random.default_rng(check_random_state(random_state).randint(_SEED_BOUND))


class DPSyntheticData(BaseEstimator):
    """Differentially private synthetic data from a tree of noisy marginals.

    Measures every 1-way marginal with Gaussian noise, selects a spanning tree
    of column pairs with the exponential mechanism, measures the tree's 2-way
    marginals with Gaussian noise and samples records from the resulting tree
    model (the MST pattern of McKenna, Miklau and Sheldon 2021). Only 1-way and
    2-way count tables are built, never the joint histogram.

    Parameters
    ----------
    epsilon : float > 0, default=1.0
        Target privacy budget; the noise is calibrated so that the whole fit
        spends at most ``(epsilon, delta)``.
    delta : float in (0, 1) or None, default=None
        ``None``: ``min(1e-5, n ** -1.1)``.
    domain : mapping or None, default=None
        Public domain of every column: ``column -> list of categories`` or
        ``column -> (low, high)`` / ``(low, high, n_bins)`` (a tuple) for a
        numeric column. Keys are column names for a DataFrame and column
        indices for an array. Required for every column.
    bins : int >= 1, default=32
        Number of equal-width bins of a numeric column without its own
        ``n_bins`` (integer columns use at most one bin per integer).
    random_state : int, RandomState instance or None, default=None
        Seeds the fit and, through a seed drawn at fit time, :meth:`sample`.
    verbose : int, default=0
        Log the selected tree when positive.

    Attributes
    ----------
    privacy_spent_ : skdp.accounting.PrivacySpent
        What the fit spent (replace-one).
    noise_multiplier_ : float
        The calibrated global noise multiplier.
    delta_ : float
    tree_ : list of (key, key)
        The selected (parent, child) column pairs, breadth first from the
        first column (released, so free to inspect).
    columns_ : list of ColumnSpec
        Public discretisation of each column.
    n_samples_fit_ : int
        Number of rows seen in fit (public under replace-one).
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
    ranges, number of bins), the column names and dtypes, and the number of
    rows. A count table's replace-one L2 sensitivity is ``sqrt(2)``; the
    selection score of a pair, the L1 distance between its true 2-way counts
    and the product of the released noisy 1-way marginals, moves by at most
    ``Du = 2``, and each of the ``d - 1`` draws (probability proportional to
    ``exp(eps_sel * score / (2 Du))``) is ``eps_sel``-DP and
    ``eps_sel``-bounded range. The budget ``rho = 1 / (2 z^2)`` of one global
    noise multiplier ``z`` is split in fixed shares: 20% to the ``d`` 1-way
    measurements, 10% to the selection draws, 70% to the ``d - 1`` 2-way
    measurements (all of it to the 1-way step if there is one column). The
    Rényi-DP accountant composes the actual curves of all steps and ``z`` is
    calibrated so the total meets ``(epsilon, delta)``. Everything after the
    measurements is post-processing, so :meth:`sample` costs nothing more
    however often it is called.

    **Estimation.** Each column's 1-way marginal is the inverse-variance
    weighted average of its direct measurement and the margins of the tree
    tables that contain it, projected on the simplex of ``n`` counts. Each
    tree table is projected on that simplex (so the noise of empty cells does
    not become mass), mixed with 0.1% of the product of its 1-way estimates and
    raked (iterative proportional fitting) to them; ancestral sampling from
    the first column through ``P(child | parent)`` then draws from the
    maximum-entropy distribution with these marginals.

    Input handling: numeric values outside their range are clipped into it;
    a categorical value outside its declared list, missing values (NaN/None)
    and empty input raise ``ValueError`` before anything is measured. A
    single row or constant columns are fitted like any other data (the
    output is then mostly noise). Inferring a domain privately from the data
    is not supported in this version.

    The model is the maximum-entropy distribution matching the (noisy) tree
    marginals, i.e. the fixed point of mirror descent on those marginals;
    the iterative private game (mirror descent with sampled queries, which
    can add higher-order marginals) is the next step.

    References
    ----------
    McKenna, Miklau and Sheldon (2021). Winning the NIST contest: a scalable
    and general approach to differentially private synthetic data. Journal of
    Privacy and Confidentiality 11(3).

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
        "domain": [Mapping, None],
        "bins": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=None,
        domain=None,
        bins=32,
        random_state=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.domain = domain
        self.bins = bins
        self.random_state = random_state
        self.verbose = verbose

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the private tree model.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : DPSyntheticData
        """
        columns, frame_info = as_table(X)
        specs = build_specs(columns, self.domain, self.bins)
        codes = encode_table(columns, specs)
        n_rows, n_columns = codes.shape
        delta = default_delta(n_rows) if self.delta is None else float(self.delta)
        plan = MarginalPlan(n_columns)
        z, _ = calibrate_noise_multiplier(plan.events, self.epsilon, delta)
        rng = _generator(self.random_state)
        with enable_progress(self.verbose):
            model, edges, events = fit_tree_model(
                codes, [s.n_levels for s in specs], plan, z, rng
            )
        spent = account(events, delta)
        if spent.epsilon > self.epsilon * (1 + 1e-9):
            raise RuntimeError("Internal error: the run spent more than its target.")
        keys = [spec.key for spec in specs]
        self.columns_ = specs
        self.tree_ = [(keys[i], keys[j]) for i, j in model.order]
        self.noise_multiplier_ = z
        self.delta_ = delta
        self.privacy_spent_ = spent
        self.n_samples_fit_ = n_rows
        self.n_features_in_ = n_columns
        if frame_info is not None and all(isinstance(k, str) for k in keys):
            self.feature_names_in_ = np.asarray(keys, dtype=object)
        self._model = model
        self._events = events
        self._frame_info = frame_info
        self._dtype = columns[0][2] if frame_info is None else None
        self._sample_seed = int(rng.integers(_SEED_BOUND))
        return self

    def sample(self, n_samples=None, random_state=None):
        """Draw synthetic records (post-processing: no extra privacy cost).

        Parameters
        ----------
        n_samples : int or None, default=None
            ``None``: as many rows as seen in fit.
        random_state : int, RandomState instance or None, default=None
            ``None``: a seed drawn at fit time, so repeated calls return the
            same records; pass a value for other draws.

        Returns
        -------
        X_synthetic : DataFrame or ndarray of shape (n_samples, n_features)
            Same container as the fit input: same column names and dtypes
            (integers stay integers, categoricals keep their categories).
        """
        check_is_fitted(self)
        n = self.n_samples_fit_ if n_samples is None else n_samples
        if isinstance(n, bool) or not isinstance(n, Integral) or n < 0:
            raise ValueError(f"n_samples must be an integer >= 0, got {n_samples!r}.")
        if random_state is None:
            rng = np.random.default_rng(self._sample_seed)
        else:
            rng = _generator(random_state)
        codes = sample_tree_model(self._model, int(n), rng)
        return rebuild_table(self.columns_, codes, rng, self._frame_info, self._dtype)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        tags.requires_fit = True
        return tags

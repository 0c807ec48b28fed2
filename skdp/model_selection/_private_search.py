"""Searches that report what the whole search spent, not only the refit."""

import contextlib
import numbers
import re
import warnings
from numbers import Real

import numpy as np
from sklearn.model_selection import GridSearchCV, ParameterSampler, RandomizedSearchCV
from sklearn.utils import check_random_state
from sklearn.utils.validation import _num_samples, check_is_fitted

from ..accounting._accountant import epsilon_text
from ..exceptions import PrivacyLeakWarning
from ..pipeline import PrivatePipeline
from ..pipeline._leaks import LEAK_WARNING_START
from ..utils._sklearn import Interval, fit_context
from ._search import _as_grid, private_cv, search_privacy

__all__ = ["PrivateGridSearchCV", "PrivateRandomizedSearchCV"]

_SPEND_NOTE = (
    "privacy_spent_ is the search's training (quote it, not the refit's): every "
    "fit that held a record, plus the refit. It does not cover the validation "
    "scores (cv_results_) or the choice of the winner, computed without noise "
    "(guide: model selection, 'Choosing the winner leaks too'). "
    "best_estimator_.privacy_spent_ is the refit alone"
)


#: The leak warnings that every fit of a search would repeat, and that
#: :func:`~skdp.model_selection.search_privacy` says once for the whole
#: search before it runs: a step that reads the data (a PrivatePipeline's
#: ``fit``), and a class set read from the labels (the estimator's ``fit``;
#: the search's total is then planned for the worst class count).
_SAID_ONCE = (
    re.escape(LEAK_WARNING_START),
    re.escape("classes=None: the set of classes was read from y"),
)

#: A randomized search with a non-integer ``random_state`` draws its seed in
#: [0, 2^31 - 1) before reading any data.
_SEED_BOUND = 2**31 - 1


def _with_delta(constraints):
    """A search's parameter constraints with the total's ``delta`` added."""
    return {**constraints, "delta": [Interval(Real, 0, 1, closed="neither"), None]}


class _PrivateSearchMixin:
    """Account the search before reading any data; report the total.

    A subclass's ``__init__`` lists its parameters (scikit-learn reads them
    from its signature) and hands them to :meth:`_store_params`;
    ``_public_candidates`` says which candidates the search runs.
    """

    # search_privacy reads an integer cv of these searches as KFold(k).
    _int_cv_is_kfold = True

    def _store_params(self, params):
        """Store every constructor parameter as given, and nothing else.

        ``params`` is the constructor's ``locals()``; the names are those of
        its signature, as for :meth:`get_params`.
        """
        for name in self._get_param_names():
            setattr(self, name, params[name])

    def _total(self, n_samples, grid):
        """The search's total, from the public plan alone."""
        return search_privacy(
            self.estimator,
            grid,
            n_samples=n_samples,
            cv=private_cv(self.cv),
            refit=bool(self.refit),
            delta=self.delta,
        )

    def _check_inputs(self, X, y):
        """The Pipeline's own checks (columns, labels), before any fit."""
        if isinstance(self.estimator, PrivatePipeline):
            self.estimator._check_public_inputs(X, y)

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None, **params):
        """Fix the candidates, account the whole search, then run it.

        The candidates are fixed before any data is read (a randomized
        search draws them from its ``random_state``); exactly those are
        accounted and run. A failed fit leaves the search as it was.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or None
        **params : dict
            As for the ``fit`` of the parent scikit-learn search.

        Returns
        -------
        self : object
            The fitted search.
        """
        grid, fixed = self._public_candidates()
        total = self._total(_num_samples(X), grid)
        self._check_inputs(X, y)
        with _swapped(self, cv=private_cv(self.cv), **fixed), _said_once():
            super().fit(X, y, **params)
        self.privacy_spent_ = total
        return self

    def __repr__(self, N_CHAR_MAX=700):
        text = super().__repr__(N_CHAR_MAX)
        spent = self.__dict__.get("privacy_spent_")
        if spent is None:
            return text
        refit = getattr(getattr(self, "best_estimator_", None), "privacy_spent_", None)
        refit_text = (
            "" if refit is None else f" (refit alone: {epsilon_text(refit.epsilon)})"
        )
        return (
            f"{text}\n# search's fits: epsilon={epsilon_text(spent.epsilon)}, "
            f"delta={spent.delta:.3g}{refit_text}. {_SPEND_NOTE}."
        )

    @property
    def refit_privacy_spent_(self):
        """The refitted model's spend alone: part of ``privacy_spent_``."""
        check_is_fitted(self, "privacy_spent_")
        return self.best_estimator_.privacy_spent_


@contextlib.contextmanager
def _said_once():
    """Silence the fits' repeats of the warnings the search has said once.

    scikit-learn hands the warning filters in force to its workers
    (``sklearn.utils.parallel``), so this holds with ``n_jobs`` too.
    """
    with warnings.catch_warnings():
        for message in _SAID_ONCE:
            warnings.filterwarnings(
                "ignore", message=message, category=PrivacyLeakWarning
            )
        yield


@contextlib.contextmanager
def _swapped(est, **values):
    """Set attributes of ``est`` for the duration of a block, then restore them."""
    old = {name: getattr(est, name) for name in values}
    for name, value in values.items():
        setattr(est, name, value)
    try:
        yield
    finally:
        for name, value in old.items():
            setattr(est, name, value)


_COMMON_DOC = """
    Before any data is read, ``fit`` computes the total with
    :func:`~skdp.model_selection.search_privacy` (every DP step of every
    candidate on the ``k - 1`` folds that hold a record, plus the refit),
    refusing a search it cannot bound (a non-private final step, folds that
    follow the data, an unknown private step, a non-finite total). It
    checks a :class:`~skdp.pipeline.PrivatePipeline`'s declared columns and
    labels first, warns (:class:`~skdp.exceptions.PrivacyLeakWarning`) for
    steps that read the data, once for the whole search (its fits do not
    repeat it, nor the warning for undeclared classes), then fits as the
    parent search. A failed fit leaves the search as it was.

    .. warning::
       ``privacy_spent_`` is what the **whole search's fits** spent: quote it.
       ``best_estimator_.privacy_spent_`` (also ``refit_privacy_spent_``)
       is the refitted model's spend alone, one part of the total; the
       repr of a fitted search prints both.

    What the total covers: every model the search trains, as if all were
    released (the refit charged as the most expensive candidate). It does
    not cover the validation scores (``cv_results_``), which read the
    held-out rows without noise, nor the choice of the best candidate from
    them (which decides the refit): a search that releases its scores or
    its choice can cost more, by an amount skdp does not bound (see
    :doc:`/guide/model_selection`).

    An integer ``cv`` (and the default ``None``, 5 folds) means
    ``KFold(k)``, not the ``StratifiedKFold`` of ``GridSearchCV``, whose
    folds follow the private labels. Only ``KFold`` and ``RepeatedKFold``
    are accepted. The total holds for replace-one neighbours; candidates
    with ``neighbouring="add-remove"`` are counted by group privacy (see
    :func:`~skdp.model_selection.search_privacy`).
"""

_COMMON_PARAMS = """
    cv : int, KFold, RepeatedKFold or None, default=None
        ``None``: ``KFold(5)``; an integer ``k``: ``KFold(k)``.
    delta : float or None, default=None
        Delta of the total (see :func:`~skdp.model_selection.search_privacy`).
"""

_COMMON_ATTRS = """
    Attributes
    ----------
    privacy_spent_ : skdp.accounting.PrivacySpent
        The whole search: every fit that held a record and the refit.
    refit_privacy_spent_ : skdp.accounting.PrivacySpent
        ``best_estimator_.privacy_spent_``: the refit alone, included in
        ``privacy_spent_``.
    Every other attribute is the parent search's (``best_estimator_``,
    ``cv_results_``, ``best_params_``...).
"""


class PrivateGridSearchCV(_PrivateSearchMixin, GridSearchCV):
    __doc__ = (
        """A GridSearchCV that reports what the whole search spent.
"""
        + _COMMON_DOC
        + """
    Parameters
    ----------
    estimator, param_grid, scoring, n_jobs, refit, verbose, pre_dispatch, \
error_score, return_train_score
        As for :class:`sklearn.model_selection.GridSearchCV`."""
        + _COMMON_PARAMS
        + _COMMON_ATTRS
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from skdp import DPLogisticRegression
    >>> from skdp.model_selection import PrivateGridSearchCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (600, 2)) / np.sqrt(2)
    >>> y = (X[:, 0] > 0).astype(int)
    >>> est = DPLogisticRegression(classes=[0, 1], random_state=0)
    >>> search = PrivateGridSearchCV(est, {"epsilon": [0.5, 1.0]}, cv=3)
    >>> search = search.fit(X, y)
    >>> bool(search.privacy_spent_.epsilon > search.refit_privacy_spent_.epsilon)
    True
"""
    )

    _parameter_constraints = _with_delta(GridSearchCV._parameter_constraints)

    def __init__(
        self,
        estimator,
        param_grid,
        *,
        scoring=None,
        n_jobs=None,
        refit=True,
        cv=None,
        verbose=0,
        pre_dispatch="2*n_jobs",
        error_score=np.nan,
        return_train_score=False,
        delta=None,
    ):
        self._store_params(locals())

    def _public_candidates(self):
        """The grid, as given; no parameter is fixed for the run."""
        return self.param_grid, {}


class PrivateRandomizedSearchCV(_PrivateSearchMixin, RandomizedSearchCV):
    __doc__ = (
        """A RandomizedSearchCV that reports what the whole search spent.

    The ``n_iter`` candidates are drawn from ``random_state`` before any
    data is read (the draw is public), and exactly those are accounted and
    run.
"""
        + _COMMON_DOC
        + """
    Parameters
    ----------
    estimator, param_distributions, n_iter, scoring, n_jobs, refit, verbose, \
pre_dispatch, random_state, error_score, return_train_score
        As for :class:`sklearn.model_selection.RandomizedSearchCV`."""
        + _COMMON_PARAMS
        + _COMMON_ATTRS
    )

    _parameter_constraints = _with_delta(RandomizedSearchCV._parameter_constraints)

    def __init__(
        self,
        estimator,
        param_distributions,
        *,
        n_iter=10,
        scoring=None,
        n_jobs=None,
        refit=True,
        cv=None,
        verbose=0,
        pre_dispatch="2*n_jobs",
        random_state=None,
        error_score=np.nan,
        return_train_score=False,
        delta=None,
    ):
        self._store_params(locals())

    def _public_candidates(self):
        """The drawn candidates, and the seed that makes the parent draw them."""
        state = self.random_state
        if isinstance(state, numbers.Integral) and not isinstance(state, bool):
            seed = int(state)
        else:
            seed = int(check_random_state(state).randint(_SEED_BOUND))
        # The draw the parent search makes from this seed, fixed before any
        # data is read: exactly these candidates are accounted and run.
        drawn = list(
            ParameterSampler(self.param_distributions, self.n_iter, random_state=seed)
        )
        return _as_grid(drawn), {"random_state": seed}

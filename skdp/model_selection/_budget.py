"""The per-fit epsilon that keeps a whole search within a total budget."""

import itertools
import logging
import math
import numbers
import warnings
from typing import NamedTuple

from scipy.optimize import brentq
from sklearn.base import clone
from sklearn.pipeline import Pipeline

from ..accounting import PrivacySpent
from ..exceptions import PrivacyLeakWarning
from ._search import _search_inputs, search_privacy

__all__ = ["SearchEpsilon", "epsilon_for_search"]

_log = logging.getLogger(__name__)

#: The per-fit epsilon is found to this relative precision: a finer one
#: moves the total by less than the accountants' own rounding.
_RTOL = 1e-3

#: The bracket's first guess is ``total_epsilon`` itself, then moves by this
#: factor per step (a few steps reach any search of a few hundred fits).
_BRACKET_FACTOR = 4.0

#: A per-fit epsilon below ``total_epsilon`` times this fraction adds too
#: much noise to train anything: the budget is then reported as too small.
_SMALLEST_FRACTION = 1e-3

#: Tries of a per-fit epsilon scaled by ``budget / total`` before the
#: bracket steps down by ``_BRACKET_FACTOR``.
_PROPORTIONAL_TRIES = 2

#: Steps up from ``total_epsilon`` before the bracket gives up: a search
#: whose total stays below the budget for every per-fit epsilon up to
#: ``4 ** 12`` times the budget does not depend on it.
_MAX_STEPS_UP = 12


class SearchEpsilon(NamedTuple):
    """What :func:`epsilon_for_search` found.

    A tuple, so ``epsilon, param, spent = epsilon_for_search(...)``
    unpacks it.

    Attributes
    ----------
    epsilon : float
        The per-fit epsilon to set.
    param : str
        The parameter to set it on (``"dplogisticregression__epsilon"``).
    spent : skdp.accounting.PrivacySpent
        The search's total with that epsilon (``search_privacy``'s), at most
        the budget.
    """

    epsilon: float
    param: str
    spent: PrivacySpent


def _check_budget(total_epsilon):
    """The budget as a float, or a ValueError saying what is wrong with it."""
    if (
        not isinstance(total_epsilon, numbers.Real)
        or isinstance(total_epsilon, bool)
        or not math.isfinite(total_epsilon)
        or total_epsilon <= 0
    ):
        raise ValueError(
            f"total_epsilon must be a finite number > 0, got {total_epsilon!r}."
        )
    return float(total_epsilon)


def _model_epsilon(estimator):
    """``"step__...__epsilon"`` of the final estimator, nested Pipelines opened."""
    path = []
    while isinstance(estimator, Pipeline):
        name, estimator = estimator.steps[-1]
        path.append(name)
    return "__".join([*path, "epsilon"])


def _grid_names(grid):
    """Every parameter name a grid (a dict or a list of dicts) sets."""
    grids = [grid] if isinstance(grid, dict) else list(grid)
    return {name for one in grids for name in one}


def _check_param(estimator, grid, param):
    """The epsilon parameter to set: given, or the final estimator's.

    Refused when the estimator has no such parameter, when it is not an
    epsilon, or when the grid sets it or a step that holds it (the grid
    would then override the value found).
    """
    param = _model_epsilon(estimator) if param is None else param
    if param.split("__")[-1] != "epsilon":
        raise ValueError(
            f"epsilon_param={param!r} is not an epsilon: name a private step's "
            "epsilon, e.g. 'dplogisticregression__epsilon'."
        )
    if param not in estimator.get_params(deep=True):
        raise ValueError(
            f"{type(estimator).__name__} has no parameter {param!r}: name a "
            "private step's epsilon as in the grid (prefixed by its step)."
        )
    for name in sorted(_grid_names(grid)):
        if param == name or param.startswith(name + "__"):
            raise ValueError(
                f"The grid sets {name!r}, which fixes {param!r} for its "
                "candidates: the per-fit epsilon is what this function chooses. "
                "Take it out of the grid (or name another epsilon_param)."
            )
    return param


def _search_total(estimator, grid, param, epsilon, search_kwargs):
    """``search_privacy`` of the search with ``param`` set to ``epsilon``."""
    candidate = clone(estimator).set_params(**{param: epsilon})
    return search_privacy(candidate, grid, **search_kwargs)


def _too_small(budget, floor, why):
    """The error for a budget that even the smallest per-fit epsilon exceeds."""
    return ValueError(
        f"total_epsilon={budget:g} is too small for this search: with a per-fit "
        f"epsilon of {floor:.3g}, {why}. "
        "Raise the budget, or search fewer candidates or folds, or lower the "
        "other DP steps' epsilon."
    )


def _bracket(total_at, budget):
    """``(lo, hi)`` with ``total_at(lo) <= budget < total_at(hi)``, or ``hi=None``.

    Starts at ``budget``. Above the budget, it first tries twice to scale
    the per-fit epsilon by ``budget / total`` (a total that grows linearly
    with it is then within the budget), then divides it by
    ``_BRACKET_FACTOR``, down to ``_SMALLEST_FRACTION`` of the budget.
    Below the budget, it multiplies it by ``_BRACKET_FACTOR``; ``hi=None``
    when the total stays within the budget up to the last step up.
    """
    x, total = budget, total_at(budget)
    if total <= budget:
        for _ in range(_MAX_STEPS_UP):
            if total_at(x * _BRACKET_FACTOR) > budget:
                return x, x * _BRACKET_FACTOR
            x *= _BRACKET_FACTOR
        return x, None
    floor = budget * _SMALLEST_FRACTION
    for step in itertools.count():
        hi = x
        scaled = x * budget / total if step < _PROPORTIONAL_TRIES else 0.0
        x = max(min(scaled, x / 1.01), x / _BRACKET_FACTOR, floor)
        try:
            total = total_at(x)
        except ValueError as error:
            # The first total, at the budget, was computed: what fails here is
            # calibrating a fit to this small a per-fit epsilon.
            raise _too_small(budget, x, str(error)) from error
        if total <= budget:
            return x, hi
        if x == floor:
            raise _too_small(budget, floor, f"its total is {total:.3g}")


def epsilon_for_search(
    estimator,
    param_grid=None,
    *,
    total_epsilon,
    n_samples,
    cv=None,
    n_classes=None,
    refit=None,
    delta=None,
    epsilon_param=None,
):
    """The largest per-fit epsilon whose whole search stays within a budget.

    Given a search (as for :func:`search_privacy`: an estimator or Pipeline
    with its grid, or the search object) and a total budget, finds the
    largest ``epsilon`` such that ``search_privacy`` of the search, with
    ``epsilon`` set on every candidate's private step, is at most
    ``total_epsilon``. Nothing is fitted and no data is read: the total
    depends only on public inputs.

    The total grows with the per-fit epsilon, so the epsilon is bracketed
    and then found by Brent's method on the logarithms, to a relative
    precision of ``1e-3``. The value returned is the largest one evaluated
    whose total is within the budget, and the total returned is
    :func:`search_privacy`'s at that value: even where the accountants'
    rounding makes the total not exactly monotone, the search run with the
    returned epsilon spends at most ``total_epsilon``. The
    :class:`~skdp.exceptions.PrivacyLeakWarning` warnings of
    :func:`search_privacy` are said once.

    The epsilon is set on one parameter (``epsilon_param``), by default the
    final estimator's (``"dplogisticregression__epsilon"`` in a Pipeline).
    Other DP steps (a :class:`~skdp.preprocessing.DPStandardScaler` in front)
    keep their own epsilon, and their spends count in the total. The grid
    must not set that parameter, nor replace the step that holds it.

    Parameters
    ----------
    estimator : estimator, Pipeline or search object
        As for :func:`search_privacy`. A search object is not changed:
        set ``estimator__<epsilon_param>`` on it yourself.
    param_grid : dict, list of dicts or None, default=None
        As for :func:`search_privacy` (prefixed names).
    total_epsilon : float
        The budget for the whole search, > 0.
    n_samples : int
        Rows passed to the search.
    cv : int, KFold, RepeatedKFold or None, default=None
        As for :func:`search_privacy` (an integer ``k`` means ``KFold(k)``).
    n_classes : int or None, default=None
        As for :func:`search_privacy`.
    refit : bool or None, default=None
        As for :func:`search_privacy`.
    delta : float or None, default=None
        Delta of the total, as for :func:`search_privacy`.
    epsilon_param : str or None, default=None
        The parameter the per-fit epsilon is set on, named as in the grid
        (``"dpstandardscaler__epsilon"``). ``None``: the final estimator's
        ``epsilon``.

    Returns
    -------
    SearchEpsilon
        A named tuple ``(epsilon, param, spent)``: the per-fit epsilon, the
        parameter to set it on, and the search's total with it (a
        :class:`~skdp.accounting.PrivacySpent`, ``spent.epsilon <=
        total_epsilon``).

    Raises
    ------
    ValueError
        If ``total_epsilon`` is not a finite number > 0; if it is too small
        for the search (even a per-fit epsilon of ``1e-3 * total_epsilon``
        exceeds it, e.g. because another DP step spends more); if the
        search's total does not grow with the per-fit epsilon; if
        ``epsilon_param`` is not an epsilon of the estimator or the grid
        sets it; or as :func:`search_privacy` raises.
    TypeError
        As :func:`search_privacy` raises.

    See Also
    --------
    search_privacy : The total of a search at given parameters.

    Examples
    --------
    >>> from sklearn.model_selection import KFold
    >>> from skdp import DPLogisticRegression
    >>> from skdp.model_selection import epsilon_for_search
    >>> estimator = DPLogisticRegression(classes=[0, 1])
    >>> found = epsilon_for_search(
    ...     estimator, {"batch_size": [128, 256]}, total_epsilon=3.0,
    ...     n_samples=2000, cv=KFold(3))
    >>> found.param, bool(found.spent.epsilon <= 3.0)
    ('epsilon', True)
    """
    budget = _check_budget(total_epsilon)
    estimator, grid, cv, refit, delta = _search_inputs(
        estimator, param_grid, cv, refit, delta
    )
    param = _check_param(estimator, grid, epsilon_param)
    search_kwargs = dict(
        n_samples=n_samples, cv=cv, n_classes=n_classes, refit=refit, delta=delta
    )
    spends, said = {}, {}

    def total_at(epsilon):
        if epsilon not in spends:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", PrivacyLeakWarning)
                spent = _search_total(estimator, grid, param, epsilon, search_kwargs)
            # Each warning once for the whole calibration, not once per total.
            said.update({(w.category, str(w.message)): w.message for w in caught})
            spends[epsilon] = spent
            _log.debug("%s=%.6g: search total %.6g", param, epsilon, spent.epsilon)
        return spends[epsilon].epsilon

    try:
        lo, hi = _bracket(total_at, budget)
        if hi is None:
            raise ValueError(
                f"The search's total stays below total_epsilon={budget:g} for a "
                f"per-fit {param} up to {lo:.3g}: it does not grow with it, so no "
                "largest one exists."
            )
        # The ends by their own values: exp(log(lo)) need not be lo.
        ends = {math.log(lo): lo, math.log(hi): hi}
        brentq(
            lambda x: math.log(total_at(ends.get(x, math.exp(x)))) - math.log(budget),
            math.log(lo),
            math.log(hi),
            xtol=math.log1p(_RTOL),
        )
    finally:
        for message in said.values():
            warnings.warn(message, stacklevel=2)
    # search_privacy's own total at each value tried: the largest value whose
    # total is within the budget, whether or not the totals are monotone.
    epsilon = max(e for e, spent in spends.items() if spent.epsilon <= budget)
    return SearchEpsilon(float(epsilon), param, spends[epsilon])

"""The privacy of hyper-parameter searches.

- :func:`search_privacy`: the total spend of a search, known before any fit.
- :func:`epsilon_for_search`: the largest per-fit epsilon whose search total
  stays within a budget.
- :class:`PrivateGridSearchCV`, :class:`PrivateRandomizedSearchCV`: searches
  whose ``privacy_spent_`` is the whole search's total (not the refit's).
"""

from ._budget import SearchEpsilon, epsilon_for_search
from ._private_search import PrivateGridSearchCV, PrivateRandomizedSearchCV
from ._search import search_privacy

__all__ = [
    "PrivateGridSearchCV",
    "PrivateRandomizedSearchCV",
    "SearchEpsilon",
    "epsilon_for_search",
    "search_privacy",
]

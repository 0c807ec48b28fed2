"""The privacy of hyper-parameter searches.

- :func:`search_privacy`: the total spend of a search, known before any fit.
- :class:`PrivateGridSearchCV`, :class:`PrivateRandomizedSearchCV`: searches
  whose ``privacy_spent_`` is the whole search's total (not the refit's).
"""

from ._private_search import PrivateGridSearchCV, PrivateRandomizedSearchCV
from ._search import search_privacy

__all__ = ["PrivateGridSearchCV", "PrivateRandomizedSearchCV", "search_privacy"]

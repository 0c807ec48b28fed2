"""The privacy of hyper-parameter searches."""

from ._search import search_privacy

__all__ = ["search_privacy"]

"""The one cache of the accounting package: bounded, least recently used out.

Accounting is a pure function of public inputs, and calibration asks the same
questions many times (the same schedule at many noise levels, the same
dominating pair at many orders). Functions whose results are worth keeping
are decorated with :func:`bounded_cache`; their results are shared, so
they must be immutable (read-only arrays, tuples).
"""

import functools
import threading
from collections import OrderedDict

__all__ = ["bounded_cache"]


def bounded_cache(maxsize, key=None):
    """Memoise a pure function, keeping the ``maxsize`` most recently used results.

    Parameters
    ----------
    maxsize : int
        Results kept; the least recently used one is dropped beyond it.
    key : callable or None, default=None
        Maps the function's positional arguments to the cache key. None: the
        arguments themselves (they must be hashable). Records that compare by
        identity (an event holding arrays) pass their content digest instead.

    Returns
    -------
    decorator : callable
        The decorated function has a ``cache_clear()`` method (a cold start,
        for benchmarks).
    """

    def decorate(function):
        store = OrderedDict()
        lock = threading.Lock()

        @functools.wraps(function)
        def cached(*args):
            name = args if key is None else key(*args)
            with lock:
                if name in store:
                    store.move_to_end(name)
                    return store[name]
            value = function(*args)
            with lock:
                store[name] = value
                if len(store) > maxsize:
                    store.popitem(last=False)
            return value

        def cache_clear():
            with lock:
                store.clear()

        cached.cache_clear = cache_clear
        return cached

    return decorate

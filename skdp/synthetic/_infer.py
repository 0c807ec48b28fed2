"""Learning a numeric column's range privately (when the analyst cannot declare it).

A noisy histogram over a fixed, public grid of bins (0 and signed powers of
``sqrt(2)`` from ``2**-10`` to ``2**50``), then the range from the first to
the last bin whose noisy count clears a threshold of ``THRESHOLD_SIGMAS``
noise standard deviations (the approximate-bounds pattern of private
libraries: a histogram on public bins is a Gaussian mechanism, and picking
bins from it is post-processing). Replacing one record moves one count down
and another up, so the L2 sensitivity is ``sqrt(2)``: one
:class:`~skdp.accounting.GaussianEvent` per column. Missing values are not
counted (a record turning missing only removes one count).

An empty bin clears the threshold with probability
``1 - Phi(THRESHOLD_SIGMAS)`` (about 3e-5), so a spurious far-away bound is
rare; values beyond the learned range are clipped into it.
"""

import math
from numbers import Real

import numpy as np

from .._solvers._measure import count_sensitivity
from ..accounting import GaussianEvent, calibrate_noise_multiplier
from ._domain import check_domain_keys, is_numeric_dtype

__all__ = [
    "THRESHOLD_SIGMAS",
    "bin_edges",
    "columns_to_infer",
    "infer_numeric_bounds",
    "infer_ranges",
]

#: Noise standard deviations a bin's noisy count must clear to count as data.
THRESHOLD_SIGMAS = 4.0
#: Magnitudes of the public bin edges: sqrt(2) ** k for k in this range.
_EDGE_EXPONENTS = range(-20, 101)
#: L2 sensitivity of a histogram: a count table (the range is learned only
#: under replace-one, where the number of rows is public).
HISTOGRAM_L2_SENSITIVITY = count_sensitivity("replace-one").l2


def bin_edges():
    """The public, sorted bin edges (fixed, data-independent)."""
    magnitudes = 2.0 ** (np.asarray(_EDGE_EXPONENTS, dtype=float) / 2.0)
    return np.concatenate([-magnitudes[::-1], [0.0], magnitudes])


def infer_numeric_bounds(values, noise_multiplier, rng, *, integer=False):
    """Private ``(low, high)`` of one numeric column from a noisy histogram.

    Parameters
    ----------
    values : array-like of float
        The column; missing values (NaN) are not counted.
    noise_multiplier : float > 0
        Noise standard deviation divided by the sensitivity ``sqrt(2)``.
    rng : numpy.random.Generator
    integer : bool, default=False
        The bounds are the smallest and largest integers the chosen bins can
        hold (never a value no integer in those bins can take).

    Returns
    -------
    bounds : tuple of (float, float)
    events : list of GaussianEvent
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    edges = bin_edges()
    x = np.clip(x, edges[0], edges[-1])
    counts = np.histogram(x, bins=edges)[0]
    std = noise_multiplier * HISTOGRAM_L2_SENSITIVITY
    noisy = counts + std * rng.standard_normal(counts.size)
    above = np.flatnonzero(noisy > THRESHOLD_SIGMAS * std)
    if above.size == 0:  # nothing clears the threshold: the fullest bin
        above = np.array([int(np.argmax(noisy))])
    low, high = float(edges[above[0]]), float(edges[above[-1] + 1])
    if integer:
        # The integers a bin [a, b) can hold run from ceil(a) to ceil(b) - 1:
        # a 0/1 column's bins [0, 2**-10) and [1, sqrt 2) give (0, 1), not
        # (0, 2). A spurious bin holding no integer gives a single value.
        low = int(math.ceil(low))
        high = max(low, int(math.ceil(high)) - 1)
    return (low, high), [GaussianEvent(noise_multiplier)]


def columns_to_infer(columns, domain, share):
    """Columns whose range is learned privately (refusing the impossible).

    ``columns`` are ``(key, values, dtype)`` triples; ``share`` is the
    estimator's ``infer_domain`` (``None``: none is learned).
    """
    check_domain_keys(domain, [key for key, _, _ in columns])
    absent = [
        (key, values, dtype) for key, values, dtype in columns if key not in domain
    ]
    if share is None or not absent:
        return []
    categorical = [
        key for key, values, dtype in absent if not _holds_numbers(values, dtype)
    ]
    if categorical:
        raise ValueError(
            f"No domain given for the non-numeric columns {categorical!r}. "
            "infer_domain only learns numeric ranges; declare their categories "
            "(public knowledge) in domain."
        )
    return [key for key, _, _ in absent]


def _holds_numbers(values, dtype):
    if is_numeric_dtype(dtype):
        return True
    try:
        kind = np.dtype(dtype).kind
    except TypeError:  # pandas extension dtypes (string, category, ...)
        return False
    return kind == "O" and all(isinstance(v, Real) or v is None for v in values)


def infer_ranges(columns, to_infer, share, epsilon, delta, rng):
    """Learn the ranges of ``to_infer`` with a ``share`` of the zCDP budget.

    The budget is that of one Gaussian of the multiplier meeting ``(epsilon,
    delta)``; the columns split ``share`` of it, one histogram each.

    Returns
    -------
    inferred : dict
        Column key -> learned ``(low, high)``.
    events : list of GaussianEvent
        One per learned column, in column order.
    """
    if not to_infer:
        return {}, []
    z_total, _ = calibrate_noise_multiplier(
        lambda z: [GaussianEvent(z)], epsilon, delta
    )
    rho_domain = share / (2.0 * z_total**2)
    # One Gaussian histogram per column, 1 / (2 z^2) zCDP each.
    z_domain = math.sqrt(len(to_infer) / (2.0 * rho_domain))
    inferred, events = {}, []
    for key, values, dtype in columns:
        if key not in to_infer:
            continue
        integer = is_numeric_dtype(dtype) and np.dtype(dtype).kind in "iu"
        array = np.asarray(
            values.to_numpy(dtype=float, na_value=np.nan)
            if hasattr(values, "to_numpy")
            else [np.nan if v is None else v for v in values],
            dtype=float,
        )
        bounds, ran = infer_numeric_bounds(array, z_domain, rng, integer=integer)
        inferred[key] = bounds
        events.extend(ran)
    return inferred, events

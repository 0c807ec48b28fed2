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

import numpy as np

from ..accounting import GaussianEvent

__all__ = ["THRESHOLD_SIGMAS", "bin_edges", "infer_numeric_bounds"]

#: Noise standard deviations a bin's noisy count must clear to count as data.
THRESHOLD_SIGMAS = 4.0
#: Magnitudes of the public bin edges: sqrt(2) ** k for k in this range.
_EDGE_EXPONENTS = range(-20, 101)
#: Replace-one L2 sensitivity of a histogram.
HISTOGRAM_L2_SENSITIVITY = math.sqrt(2.0)


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

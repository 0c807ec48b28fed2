"""Domain compression: a column's levels merged or cut into runs, and back.

After the 1-way measurements of the adaptive rounds (:mod:`._aim`), a column's
levels may be mapped to fewer levels of the model, by reading only released
measurements (post-processing):

- **rare levels merged** (the ``compress_domain`` step of McKenna, Miklau and
  Sheldon's MST, 2021, Section 4): the levels whose noisy count is below a
  number of noise standard deviations are merged into one level, when there
  are at least two of them. Fewer cells share the noise of every later
  marginal. The merged cell's 1-way measurement is the sum of its noisy
  counts, with their summed variance.
- **numeric bins cut into runs** (:func:`ordered_runs`): the bins of an
  ordered (numeric) column grouped into runs of adjacent bins of about equal
  estimated mass.

A sampled merged level is expanded to one of its original levels drawn in
proportion to estimates of their counts from the noisy ones (uniformly if
all are zero): for an ordered column, the noisy counts smoothed over
neighbouring bins by a Gaussian kernel (``bandwidth`` bins); for a
categorical column, the noisy counts shrunk toward their mean by the
positive-part James-Stein factor ``(1 - std^2 / variance)_+`` (the
empirical-Bayes estimate: it leans toward uniform when the counts' spread is
mostly noise); both clipped at zero. The sensitivities are unchanged: a
record still sits in one cell of every marginal.
"""

from dataclasses import dataclass

import numpy as np

from ._pgm import Measurement, round_counts

__all__ = [
    "Compression",
    "compress_column",
    "compressed_measurement",
    "expand_codes",
    "identity_compression",
    "ordered_runs",
]


@dataclass(frozen=True)
class Compression:
    """How one column's levels map to the model's (compressed) levels.

    Attributes
    ----------
    mapping : ndarray of int, shape (n_levels,)
        Compressed level of each original level.
    probs : ndarray of float, shape (n_levels,)
        Probability of each original level given its compressed level (1 for
        a level kept on its own), used when a sampled level is expanded.
    n_ordered : int
        The first ``n_ordered`` compressed levels are ordered (runs of
        adjacent numeric bins, or single bins), in order.
    """

    mapping: np.ndarray
    probs: np.ndarray
    n_ordered: int = 0

    @property
    def n_levels(self):
        """Number of compressed levels."""
        return int(self.mapping.max()) + 1

    @property
    def merged(self):
        """The original levels that share their compressed level with others."""
        sizes = np.bincount(self.mapping)
        return np.flatnonzero(sizes[self.mapping] > 1)

    @property
    def weights(self):
        """Expansion probabilities of the :attr:`merged` levels."""
        return self.probs[self.merged]


def identity_compression(size, ordered=0):
    """The :class:`Compression` that keeps every level of a column."""
    return Compression(np.arange(size), np.ones(size), int(ordered))


def compress_column(noisy_counts, std, below, ordered=0, runs=None, *, bandwidth):
    """The :class:`Compression` of a column from its noisy 1-way counts.

    With ``runs`` (and ``ordered > 0``), the first ``ordered`` levels (numeric
    bins) are cut into at most ``runs`` runs of adjacent bins holding about
    equal estimated mass (see :func:`ordered_runs`); the other levels stay
    as they are. Otherwise, levels with a noisy count below ``below * std``
    are merged into one new last level when there are at least two of them
    (``below`` None: never); the ordered ones' expansion weights are smoothed
    over ``bandwidth`` neighbouring bins, the others' shrunk toward their mean
    (see :func:`_expansion_weights`). Post-processing of a released
    measurement.
    """
    if runs is not None and ordered > 1 and runs < ordered:
        return ordered_runs(noisy_counts, std, ordered, runs, bandwidth=bandwidth)
    return _merge_rare(noisy_counts, std, below, ordered, bandwidth)


def _merge_rare(noisy_counts, std, below, ordered, bandwidth):
    """Levels below ``below`` noise std merged into one last level (if two or more)."""
    size = noisy_counts.size
    rare = (
        noisy_counts < below * std if below is not None else np.zeros(size, dtype=bool)
    )
    if rare.sum() < 2 or rare.all():
        return identity_compression(size, ordered)
    mapping = np.empty(size, dtype=np.int64)
    kept = np.flatnonzero(~rare)
    mapping[kept] = np.arange(kept.size)
    mapping[rare] = kept.size
    merged = np.flatnonzero(rare)
    probs = np.ones(size)
    probs[merged] = _expansion_weights(
        noisy_counts[merged], std, merged < ordered, merged, bandwidth
    )
    return Compression(mapping, probs, int(np.sum(kept < ordered)))


def ordered_runs(noisy_counts, std, ordered, runs, *, bandwidth):
    """Runs of adjacent numeric bins with about equal mass (coarse levels).

    The first ``ordered`` noisy counts are smoothed over neighbouring bins
    (Gaussian kernel of ``bandwidth`` bins) and clipped at zero; each bin goes
    to the run ``floor(runs * q)``, ``q`` the estimated share of the mass
    below the bin's middle, so the runs are cut at estimated quantiles
    (nearly empty tails join the nearest run instead of taking levels of
    their own). A bin is expanded from its run in proportion to its
    estimate (uniformly within a run estimated empty). Levels after the
    first ``ordered`` (a missing level) keep levels of their own.
    Post-processing of a released measurement.
    """
    size = noisy_counts.size
    counts = np.asarray(noisy_counts[:ordered], dtype=float)
    estimate = np.clip(
        _kernel_average(np.arange(ordered, dtype=float), counts, bandwidth), 0.0, None
    )
    total = estimate.sum()
    if total > 0:
        below = (np.cumsum(estimate) - estimate / 2.0) / total
    else:
        below = (np.arange(ordered) + 0.5) / ordered
    run = np.minimum((runs * below).astype(np.int64), runs - 1)
    run = np.unique(run, return_inverse=True)[1]  # drop empty runs
    n_runs = int(run.max()) + 1
    mapping = np.concatenate([run, n_runs + np.arange(size - ordered)])
    mass = np.bincount(run, weights=estimate, minlength=n_runs)
    count = np.bincount(run, minlength=n_runs)
    probs = np.ones(size)
    probs[:ordered] = np.where(
        mass[run] > 0,
        estimate / np.where(mass[run] > 0, mass[run], 1.0),
        1.0 / count[run],
    )
    return Compression(mapping, probs, n_runs)


def _kernel_average(positions, values, bandwidth):
    """``values`` averaged over ``positions`` by a Gaussian kernel of ``bandwidth``."""
    x = positions
    kernel = np.exp(-0.5 * np.square((x[:, None] - x[None, :]) / bandwidth))
    return kernel @ values / kernel.sum(axis=1)


def _expansion_weights(noisy, std, ordered, positions, bandwidth):
    """Probabilities of merged levels from their noisy counts (post-processing).

    ``ordered`` marks the levels that are bins of a numeric column, at
    ``positions``: their counts are averaged with a Gaussian kernel of
    ``bandwidth`` bins over the other ordered merged levels. The remaining
    levels' counts are shrunk toward their mean by the positive-part
    James-Stein factor ``(1 - std^2 / variance)_+``. Clipped at zero and
    normalised; uniform if nothing is left.
    """
    estimate = np.asarray(noisy, dtype=float).copy()
    if ordered.sum() >= 2:
        x = positions[ordered].astype(float)
        estimate[ordered] = _kernel_average(x, estimate[ordered], bandwidth)
    rest = ~ordered
    if rest.sum() >= 2:
        values = estimate[rest]
        spread = values.var()
        factor = max(0.0, 1.0 - std**2 / spread) if spread > 0 else 0.0
        estimate[rest] = values.mean() + factor * (values - values.mean())
    weights = np.clip(estimate, 0.0, None)
    total = weights.sum()
    return weights / total if total > 0 else np.full(weights.size, 1.0 / weights.size)


def compressed_measurement(column, measurement, compression):
    """A 1-way measurement moved to the compressed levels (sums, summed variance).

    With a noise ``covariance``, a merged cell's variance is that of the sum
    of its cells' noises (``g' C g``).
    """
    if compression.n_levels == compression.mapping.size:
        return measurement
    y = np.bincount(
        compression.mapping, weights=measurement.y, minlength=compression.n_levels
    )
    if measurement.covariance is not None:
        onehot = np.zeros((compression.n_levels, compression.mapping.size))
        onehot[compression.mapping, np.arange(compression.mapping.size)] = 1.0
        covariance = onehot @ measurement.covariance @ onehot.T
        std = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
        return Measurement((column,), y, std, covariance=covariance)
    members = np.bincount(compression.mapping, minlength=compression.n_levels)
    std = float(measurement.std) * np.sqrt(members)
    return Measurement((column,), y, std)


def expand_codes(codes, compression, rng):
    """Map compressed codes back to original levels (merged levels drawn).

    The rows of a level that merges several original levels get them in
    counts rounded from their expansion probabilities (within one row of
    their expectation, as in :func:`._pgm.sample_codes`), in random order.

    Parameters
    ----------
    codes : ndarray of shape (n_rows, n_columns), int
        Codes over the compressed levels, as sampled from the model.
    compression : list of Compression
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_rows, n_columns)
        Codes over the original levels.
    """
    out = np.empty_like(codes)
    for j, comp in enumerate(compression):
        members = np.bincount(comp.mapping, minlength=comp.n_levels)
        if np.all(members == 1):
            inverse = np.empty(comp.n_levels, dtype=np.int64)
            inverse[comp.mapping] = np.arange(comp.mapping.size)
            out[:, j] = inverse[codes[:, j]]
            continue
        column = np.empty(codes.shape[0], dtype=np.int64)
        for level in range(comp.n_levels):
            hit = np.flatnonzero(codes[:, j] == level)
            originals = np.flatnonzero(comp.mapping == level)
            if originals.size == 1:
                column[hit] = originals[0]
                continue
            counts = round_counts(comp.probs[originals], hit.size, rng)
            column[hit] = rng.permutation(np.repeat(originals, counts))
        out[:, j] = column
    return out

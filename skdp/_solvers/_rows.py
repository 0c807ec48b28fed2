"""Row geometry shared by the solvers: norms, the public ball, scores.

Every solver bounds a record's influence by putting its row on a public ball
(the per-record map ``x -> min(1, F / ||x||) x``, done inside the products
rather than on a copy) and appending the intercept's column of ones.
"""

import math

import numpy as np

__all__ = [
    "ball_scale",
    "centred_rows",
    "clipped_row_sum",
    "feature_norm",
    "loss_row_norm",
    "row_norms",
    "row_projection",
    "rounded_up_float32",
    "row_scores",
    "tame_rows",
]

# Rows whose norm exceeds this are put on the public ball before any product
# (:func:`tame_rows`). Below it, float32 norms and the products ``X @ w`` of the
# unprojected rows stay far from overflow for any model of norm below 1e270;
# the estimators cap the row-norm bound, the clip and the step at 1e30
# (``MAGNITUDE_LIMIT``), so a projected row is never scaled up.
_EXTREME_NORM = 1e30


def row_projection(raw_norms, row_norm, fit_intercept):
    """Scale and norm of rows projected onto the public ball, intercept included.

    The rows fed to the loss are ``[scale * x, 1]`` (or ``scale * x`` without an
    intercept) with ``||.|| <= row_norm``: the features go onto the ball of
    radius ``sqrt(row_norm^2 - 1)`` (``row_norm`` without an intercept).

    Parameters
    ----------
    raw_norms : ndarray of shape (n,)
        Norms of the raw rows (from :func:`row_norms`, or of one batch).
    row_norm : float
    fit_intercept : bool

    Returns
    -------
    scale : ndarray of shape (n,)
        ``min(1, feature_norm / ||x||)``.
    norm : ndarray of shape (n,)
        Norm of each projected row fed to the loss.
    """
    raw = np.asarray(raw_norms, dtype=float)
    scale = ball_scale(raw, feature_norm(row_norm, fit_intercept))
    norm = raw * scale
    if fit_intercept:
        norm = np.sqrt(norm**2 + 1.0)
    return scale, norm


def ball_scale(norms, radius):
    """``min(1, radius / norm)`` for each norm: the projection onto the ball.

    Only rows beyond the ball are scaled (no division by tiny norms, which
    overflows against the unbounded radius).
    """
    scale = np.ones_like(norms)
    beyond = norms > radius
    scale[beyond] = radius / norms[beyond]
    return scale


def row_norms(X, chunk=65536, exact=False):
    """L2 norm of every row, read in chunks (a memmap is never loaded whole).

    Stored as float32 rounded up (never understating a norm), or as the exact
    float64 norms with ``exact=True``.
    """
    out = np.empty(X.shape[0], dtype=float if exact else np.float32)
    for lo in range(0, X.shape[0], chunk):
        block = np.asarray(X[lo : lo + chunk], dtype=float)
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        out[lo : lo + chunk] = norms if exact else rounded_up_float32(norms)
    return out


def clipped_row_sum(X, radius, chunk=65536):
    """Sum of the rows, each first put on the ball of ``radius``.

    The per-record map ``x -> min(1, radius / ||x||) x`` bounds every term
    by ``radius`` (a row of astronomical norm included: it is divided by its
    largest entry before its norm is taken), so the sum moves by at most
    ``2 radius`` when one row is replaced and ``radius`` when one is added
    or removed. Read in chunks: a memmap is never loaded whole.

    Parameters
    ----------
    X : ndarray or memmap of shape (n_rows, n_features)
        Finite rows.
    radius : float
    chunk : int, default=65536

    Returns
    -------
    ndarray of shape (n_features,)
    """
    total = np.zeros(X.shape[1])
    for lo in range(0, X.shape[0], chunk):
        block = np.asarray(X[lo : lo + chunk], dtype=float)
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        block, norms = tame_rows(block, norms, radius)
        total += ball_scale(norms, radius) @ block
    return total


def centred_rows(X, centre, radius):
    """Rows put on the ball of ``radius``, then moved by ``-centre``.

    The per-record map ``x -> min(1, radius / ||x||) x - c`` of a centred run
    (a float64 copy; ``X`` is never modified): a row beyond the public ball
    counts as its projection, as it does in an uncentred run, and a row of
    astronomical norm is put on the ball first (:func:`tame_rows`). The
    result is projected again where the run projects rows, so the declared
    bound still holds.

    Parameters
    ----------
    X : ndarray of shape (n, n_features)
        Finite rows (a batch, a chunk or the whole data).
    centre : ndarray of shape (n_features,)
    radius : float
        The features' radius of the public ball (:func:`feature_norm`).

    Returns
    -------
    ndarray of shape (n, n_features), float64
    """
    X = np.asarray(X, dtype=float)
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    X, norms = tame_rows(X, norms, radius)
    out = X * ball_scale(norms, radius)[:, None]
    out -= centre
    return out


def rounded_up_float32(norms):
    """Norms stored as float32, rounded up (a norm is never understated)."""
    return np.nextafter(np.asarray(norms).astype(np.float32), np.inf)


def loss_row_norm(row_norm, fit_intercept):
    """Bound on the rows fed to the loss: ``row_norm`` with the intercept's column.

    ``sqrt(row_norm^2 + 1)`` with an intercept (its column of ones),
    ``row_norm`` without; None when no bound is declared.
    """
    if row_norm is None:
        return None
    if fit_intercept:
        return math.sqrt(row_norm**2 + 1.0)
    return float(row_norm)


def feature_norm(row_norm, fit_intercept):
    """Radius of the ball the features go onto (see :func:`row_projection`)."""
    return math.sqrt(row_norm**2 - 1.0) if fit_intercept else float(row_norm)


def tame_rows(X, raw_norms, feature_radius):
    """Rows of astronomical norm projected onto the public ball up front.

    The projection ``x -> min(1, F / ||x||) x`` onto the ball of radius ``F``
    (``feature_radius``) is otherwise applied inside the products, as
    ``(X @ w) * scale``, and norms are taken as the square root of a sum of
    squares. For a finite row with entries near 1e154 or above that sum
    overflows, and with larger entries so does ``X @ w``: the model would turn
    NaN and reveal that one row with certainty. Rows whose norm exceeds
    ``_EXTREME_NORM`` (or overflowed to infinity) are therefore projected first,
    in a float64 copy, with their norm computed after dividing them by their
    largest entry. It is the same per-record map, applied twice (a projection
    is idempotent), so the mechanism and its privacy are unchanged. When no
    row is that large (any real data), ``X`` and the norms are returned as
    they are, without a copy.

    Parameters
    ----------
    X : ndarray of shape (n, n_features)
        Finite rows (a batch or the whole data); never modified.
    raw_norms : ndarray of shape (n,)
        Their norms as computed, possibly ``inf`` where a square overflowed.
    feature_radius : float

    Returns
    -------
    X, raw_norms : the same objects, or float64 copies with the large rows
        projected and their norms recomputed.
    """
    if raw_norms.max(initial=0.0) <= _EXTREME_NORM:
        return X, raw_norms
    large = ~(raw_norms <= _EXTREME_NORM)
    X = np.array(X, dtype=float)
    rows = X[large]
    rows /= np.abs(rows).max(axis=1)[:, None]  # entries in [-1, 1]: no overflow
    rows *= feature_radius / np.sqrt(np.einsum("ij,ij->i", rows, rows))[:, None]
    X[large] = rows
    raw_norms = np.array(raw_norms, dtype=float)
    raw_norms[large] = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    return X, raw_norms


def row_scores(W, X, row_scale, fit_intercept):
    """Scores of the projected rows ``row_scale * x``, intercept column implied.

    ``W`` of shape ``(n_features + fit_intercept,)`` gives one score per row,
    of shape ``(n_features + fit_intercept, k)`` a ``(n, k)`` table.
    """
    coef = W[:-1] if fit_intercept else W
    scale = row_scale if W.ndim == 1 else row_scale[:, None]
    out = (X @ coef) * scale
    if fit_intercept:
        out += W[-1]
    return out

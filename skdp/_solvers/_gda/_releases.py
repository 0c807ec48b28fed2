"""What a gradient descent-ascent run computes from the rows, before its noise.

Each function here reads the private rows; its caller adds the Gaussian noise
whose sensitivity :mod:`._plan` proves. The rows are first put on the public
ball (a per-record map, free of privacy cost).

A run asks the rows three questions, all sums over the rows
(:class:`ProjectedRows` answers them in memory; a Dask collection's
partitions answer them where they are held, :mod:`._dask`): the group counts,
the second-moment matrix, and each step's weighted gradient sum and group
loss sums (:meth:`ProjectedRows.step_sums`). A centred run asks a fourth
first, the sum of the rows put on a ball (:meth:`ProjectedRows.row_sum`), and
then plays on the rows moved by the released centre
(:meth:`ProjectedRows.centred`).
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from .._rows import (
    centred_rows,
    clipped_row_sum,
    feature_norm,
    rounded_up_float32,
    row_norms,
    row_projection,
    row_scores,
    tame_rows,
)
from .._saddle import SaddleRows

__all__ = [
    "Preconditioner",
    "ProjectedRows",
    "group_loss_sums",
    "project_rows",
    "release_preconditioner",
    "second_moment",
    "weighted_gradient",
]


@dataclass(frozen=True)
class ProjectedRows:
    """The rows as the loss sees them: ``[scale_i x_i, 1]``, of norm ``norm_i``.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features)
        The rows, unscaled (the projection is applied inside the products).
    y : ndarray of shape (n_samples,)
        Labels in {0, 1}, as floats.
    codes : ndarray of int, shape (n_samples,)
        Group index of each row.
    scale : ndarray of shape (n_samples,)
        ``min(1, F / ||x_i||)``, the projection onto the public ball.
    norm : ndarray of shape (n_samples,)
        Norm of each projected row, intercept column included.
    fit_intercept : bool
    """

    X: np.ndarray
    y: np.ndarray
    codes: np.ndarray
    scale: np.ndarray
    norm: np.ndarray
    fit_intercept: bool

    @property
    def n_coef(self):
        """Number of model coefficients (intercept included)."""
        return self.X.shape[1] + int(self.fit_intercept)

    def group_counts(self, n_groups):
        """The exact number of rows of each group."""
        return np.bincount(self.codes, minlength=n_groups)

    def row_sum(self, radius):
        """The sum of the rows, each put on the ball of ``radius``.

        The centre's sum (:func:`~skdp._solvers._rows.clipped_row_sum`).
        """
        return clipped_row_sum(self.X, radius)

    def centred(self, centre, radius, row_norm):
        """The rows moved by ``centre``, as the loss sees them.

        Each row is put on the ball of ``radius``, moved by ``-centre``
        (:func:`~skdp._solvers._rows.centred_rows`) and projected again
        (:func:`project_rows` on the ball of ``row_norm``, intercept column
        included), so the declared bound still holds: the rows of a plain
        run on ``centred_rows(X, centre, radius)``.
        """
        rows = SaddleRows(
            X=centred_rows(self.X, centre, radius), y=self.y, group_codes=self.codes
        )
        return project_rows(rows, row_norm, self.fit_intercept)

    def second_moment(self):
        """``sum_i a_i a_i^T`` of the projected rows (:func:`second_moment`)."""
        return second_moment(self.X, self.scale, self.fit_intercept)

    def step_sums(self, w, group_weights, clip_norm, max_loss, losses=True):
        """A step's two sums at the model ``w``, from the same scores.

        Parameters
        ----------
        w : ndarray of shape (n_coef,)
        group_weights : ndarray of shape (n_groups,)
            The row weight ``v_k`` of each group.
        clip_norm, max_loss : float
        losses : bool
            Whether the group loss sums are asked for.

        Returns
        -------
        gradient : ndarray of shape (n_coef,)
            :func:`weighted_gradient`.
        loss_sums : ndarray of shape (n_groups,) or None
            :func:`group_loss_sums`.
        """
        scores = row_scores(w, self.X, self.scale, self.fit_intercept)
        gradient = weighted_gradient(scores, self, group_weights[self.codes], clip_norm)
        if not losses:
            return gradient, None
        return gradient, group_loss_sums(scores, self, max_loss, group_weights.size)


@dataclass(frozen=True)
class Preconditioner:
    """The released geometry: ``P = (S_+ + lam I)^-1`` and ``tr(P S_+ P)``."""

    matrix: np.ndarray
    walk_trace: float


def project_rows(rows, row_norm, fit_intercept):
    """Put ``rows`` (a ``SaddleRows``) on the ball of radius ``row_norm``.

    One pass of exact norms; rows of astronomical norm go onto the ball first
    (no overflow to NaN); the projection reads the norms as float32, rounded
    up.
    """
    X = np.asarray(rows.X, dtype=float)
    X, raw = tame_rows(
        X, row_norms(X, exact=True), feature_norm(row_norm, fit_intercept)
    )
    scale, norm = row_projection(rounded_up_float32(raw), row_norm, fit_intercept)
    return ProjectedRows(
        X=X,
        y=np.asarray(rows.y, dtype=float),
        codes=np.asarray(rows.group_codes, dtype=np.intp),
        scale=scale,
        norm=norm,
        fit_intercept=fit_intercept,
    )


def weighted_gradient(scores, rows, row_weights, clip_norm):
    """``sum_i v_i c_i``: clipped per-example logistic gradients, weighted.

    Per-example gradients ``r_i a_i`` of the projected rows are clipped to
    ``clip_norm``.

    Returns
    -------
    ndarray of shape (rows.n_coef,)
    """
    residual = expit(scores) - rows.y
    factor = np.minimum(
        1.0, clip_norm / np.maximum(rows.norm * np.abs(residual), 1e-300)
    )
    residual = residual * factor * row_weights
    grad = rows.X.T @ (residual * rows.scale)
    return np.append(grad, residual.sum()) if rows.fit_intercept else grad


def group_loss_sums(scores, rows, max_loss, n_groups):
    """Per-group sums of the logistic losses clipped to ``[0, max_loss]``."""
    losses = np.logaddexp(0.0, scores) - rows.y * scores
    return np.bincount(
        rows.codes, weights=np.clip(losses, 0.0, max_loss), minlength=n_groups
    )


def second_moment(X, scale, fit_intercept, chunk=65536):
    """``sum_i a_i a_i^T`` of the projected rows ``a_i = [scale_i x_i, 1]``."""
    D = X.shape[1] + int(fit_intercept)
    total = np.zeros((D, D))
    for lo in range(0, X.shape[0], chunk):
        A = X[lo : lo + chunk] * scale[lo : lo + chunk, None]
        if fit_intercept:
            A = np.column_stack([A, np.ones(A.shape[0])])
        total += A.T @ A
    return total


def release_preconditioner(moment, std, n_samples, ridge, rng):
    """Release ``moment = sum_i a_i a_i^T`` once (Gaussian); its preconditioner.

    The upper triangle (diagonal included) gets i.i.d. noise of std ``std``
    (its sensitivity: :mod:`._plan`) and is mirrored; ``S = (sum + noise) /
    n``; ``P = (S_+ + lam I)^-1`` with ``S_+`` the eigenvalues clipped at 0
    and ``lam`` ``ridge`` times the expected spectral norm of the noise,
    ``2 sqrt(D) std / n`` (public). Everything after the noise is
    post-processing.

    Returns
    -------
    Preconditioner
        ``P`` and ``tr(P S_+ P)``, the noise walk's effective dimension.
    """
    D = moment.shape[0]
    noise = np.triu(rng.normal(0.0, std, size=(D, D)))
    noise = noise + np.triu(noise, 1).T
    S = (moment + noise) / n_samples
    mu, V = np.linalg.eigh(S)
    mu = np.maximum(mu, 0.0)
    lam = ridge * 2.0 * math.sqrt(D) * std / n_samples
    inv = 1.0 / (mu + lam)
    return Preconditioner(matrix=(V * inv) @ V.T, walk_trace=float(np.sum(mu * inv**2)))

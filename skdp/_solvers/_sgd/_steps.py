"""One noisy step: the clipped gradient sum, the SGD or SGLD update, the prox."""

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, softmax

__all__ = [
    "UPDATES",
    "LogisticLoss",
    "clipped_gradient_sum",
    "prox_and_project",
    "sgd_update",
    "sgld_update",
]


@dataclass(frozen=True)
class LogisticLoss:
    """The loss a run differentiates, and the clip of its per-example gradients.

    Attributes
    ----------
    binary : bool
        One output (sigmoid) rather than a softmax over the classes.
    fit_intercept : bool
        Rows carry an implicit column of ones (the last coefficient row).
    clip_norm : float
    """

    binary: bool
    fit_intercept: bool
    clip_norm: float


def clipped_gradient_sum(W, batch, loss):
    """Sum over the batch of clipped per-example logistic gradients.

    Rows are first projected onto a ball (the per-record map
    ``x -> batch.scale * x``, done inside the products rather than on a
    copy), then the intercept column of ones is appended implicitly.
    Per-example gradients are rank one, ``x_i r_i^T`` with residual
    ``r_i = p_i - y_i`` (times the row's weight, if any), so their norms are
    ``||x_i|| ||r_i||`` and the clipped sum costs two matrix products over
    the batch: no per-example tensor.

    Parameters
    ----------
    W : ndarray of shape (n_features + fit_intercept, n_outputs)
    batch : Batch
        The rows, targets, projection scales, projected norms (intercept
        included) and optional weights of the batch
        (:class:`~skdp._solvers._sgd._batches.Batch`).
    loss : LogisticLoss

    Returns
    -------
    ndarray of the shape of ``W``
    """
    # This runs once per step on small arrays, where each numpy call costs
    # about as much as its arithmetic: the steps are those of :func:`row_scores`
    # and of the plain formulas (``expit(scores) - Yb``, ``min(1, C /
    # max(norm, 1e-300))``), done in place on one residual and one norm array
    # in the same order, so the results are bit-identical to the plain forms.
    fit_intercept = loss.fit_intercept
    scale = batch.scale[:, None]
    residual = batch.rows @ (W[:-1] if fit_intercept else W)
    residual *= scale
    if fit_intercept:
        residual += W[-1]
    if loss.binary:
        expit(residual, out=residual)
    else:
        residual = softmax(residual, axis=1)
    residual -= batch.targets
    if batch.weights is not None:
        residual *= batch.weights[:, None]
    if residual.shape[1] == 1:
        norms = np.abs(residual[:, 0])
    else:
        norms = np.sqrt(np.einsum("ij,ij->i", residual, residual))
    norms *= batch.norm
    np.maximum(norms, 1e-300, out=norms)
    factor = np.divide(loss.clip_norm, norms, out=norms)
    np.minimum(factor, 1.0, out=factor)
    residual *= factor[:, None]
    grad = np.empty_like(W)
    if fit_intercept:
        np.matmul(batch.rows.T, residual * scale, out=grad[:-1])
        np.add.reduce(residual, axis=0, out=grad[-1])
    else:
        np.matmul(batch.rows.T, residual * scale, out=grad)
    return grad


def sgd_update(W, gradient_sum, eta, denominator, l2, noise_std, rng):
    """DP-SGD: ``W - eta ((gradient_sum + noise) / denominator + l2 W)``.

    ``noise`` is Gaussian of std ``noise_std`` (``z C``) on every
    coordinate. Computed in place on the noise draw: the same operations in
    the same order (a sum or product of two numbers does not depend on
    their order), without a new array for each.
    """
    step = rng.normal(0.0, noise_std, size=W.shape)
    step += gradient_sum
    step /= denominator
    step += l2 * W
    step *= eta
    return W - step


def sgld_update(W, gradient_sum, eta, denominator, l2, noise_std, rng):
    """DP-SGLD: ``W - eta (gradient_sum / denominator + l2 W) + sqrt(2 eta) noise``.

    ``noise`` is Gaussian of std ``noise_std`` (the Langevin ``sigma = z C``)
    on every coordinate.
    """
    drift = gradient_sum / denominator + l2 * W
    std = np.sqrt(2.0 * eta) * noise_std
    return W - eta * drift + rng.normal(0.0, std, size=W.shape)


#: The update of each solver.
UPDATES = {"dp-sgd": sgd_update, "dp-sgld": sgld_update}


def prox_and_project(W, plan, eta):
    """Elastic-net prox and ball projection: 1-Lipschitz, data-free."""
    if plan.l1 > 0:
        W = np.sign(W) * np.maximum(np.abs(W) - eta * plan.l1, 0.0)
    if plan.projection_radius is not None:
        norm = np.linalg.norm(W)
        if norm > plan.projection_radius:
            W = W * (plan.projection_radius / norm)
    return W

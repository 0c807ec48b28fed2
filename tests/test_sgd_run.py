"""The tuned DP-SGD step loop against a plain reference loop, bit for bit.

``run_logistic_sgd`` (``skdp/_solvers/_sgd/_run.py``) hoists lookups out of
its loop, works in place and looks up a record per row for Poisson batches;
none of that may change a single bit of the fitted model. The reference below
is the straightforward loop (one fresh array per operation, the formulas as
written in the docstrings, the Poisson batch drawn chunk by chunk with
``np.cumsum``), run on the same plan and seed.
"""

import numpy as np
import pytest
from scipy.special import expit, softmax

from skdp._solvers._rows import row_norms, row_projection
from skdp._solvers._sgd import make_plan, run_logistic_sgd
from skdp._solvers._sgd._batches import secret_order


def _reference_poisson_batch(n, q, rng):
    expected = n * q
    chunk = int(expected + 6.0 * np.sqrt(expected) + 16)
    parts, last = [], -1
    while last < n:
        positions = last + np.cumsum(rng.geometric(q, size=chunk))
        last = int(positions[-1])
        parts.append(positions)
    rows = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return rows[: np.searchsorted(rows, n)]


def _reference_gradient(W, Xb, Yb, scale, norm, binary, fit_intercept, clip, weights):
    coef = W[:-1] if fit_intercept else W
    scores = (Xb @ coef) * scale[:, None]
    if fit_intercept:
        scores += W[-1]
    residual = (expit(scores) if binary else softmax(scores, axis=1)) - Yb
    if weights is not None:
        residual *= weights[:, None]
    if residual.shape[1] == 1:
        norms = norm * np.abs(residual[:, 0])
    else:
        norms = norm * np.sqrt(np.einsum("ij,ij->i", residual, residual))
    residual *= np.minimum(1.0, clip / np.maximum(norms, 1e-300))[:, None]
    grad = np.empty_like(W)
    if fit_intercept:
        np.matmul(Xb.T, residual * scale[:, None], out=grad[:-1])
        np.add.reduce(residual, axis=0, out=grad[-1])
    else:
        np.matmul(Xb.T, residual * scale[:, None], out=grad)
    return grad


def _reference_run(X, codes, plan, z, row_norm, fit_intercept, rng, sample_weight):
    binary = plan.n_classes == 2
    d = X.shape[1] + int(fit_intercept)
    W = np.zeros((d, 1 if binary else plan.n_classes))
    order = secret_order(plan, rng)
    if order is not None and not isinstance(X, np.memmap):
        X, codes = X[order], codes[order]
        if sample_weight is not None:
            sample_weight = sample_weight[order]
        order = None
    poisson = plan.sampling == "poisson"
    if poisson and not isinstance(X, np.memmap):
        all_scale, all_norm = row_projection(
            row_norms(X, exact=True), row_norm, fit_intercept
        )
    n, per_epoch = plan.n_samples, len(plan.batch_sizes)
    bounds = np.concatenate([[0], np.cumsum(plan.batch_sizes)])
    average_from = plan.n_steps - max(1, int(round(plan.tail_fraction * plan.n_steps)))
    W_sum, n_averaged = np.zeros_like(W), 0
    for step in range(plan.n_steps):
        j = step % per_epoch
        if poisson:
            idx = _reference_poisson_batch(n, plan.batch_sizes[0] / n, rng)
        elif order is None:
            idx = np.arange(bounds[j], bounds[j + 1])
        else:
            idx = np.sort(order[bounds[j] : bounds[j + 1]])
        Xb = np.asarray(X[idx], dtype=float)
        if poisson and not isinstance(X, np.memmap):
            scale, norm = all_scale[idx], all_norm[idx]
        else:
            raw = np.sqrt(np.einsum("ij,ij->i", Xb, Xb))
            scale, norm = row_projection(raw, row_norm, fit_intercept)
        labels = codes[idx]
        Yb = labels[:, None].astype(float) if binary else np.eye(plan.n_classes)[labels]
        weights = None if sample_weight is None else sample_weight[idx]
        grad = _reference_gradient(
            W, Xb, Yb, scale, norm, binary, fit_intercept, plan.clip_norm, weights
        )
        eta, denom = plan.learning_rates[step], float(plan.batch_sizes[j])
        if plan.solver == "dp-sgd":
            noise = rng.normal(0.0, z * plan.clip_norm, size=W.shape)
            W = W - eta * ((grad + noise) / denom + plan.l2 * W)
        else:
            std = np.sqrt(2.0 * eta) * (z * plan.clip_norm)
            drift = grad / denom + plan.l2 * W
            W = W - eta * drift + rng.normal(0.0, std, size=W.shape)
        if plan.l1 > 0:
            W = np.sign(W) * np.maximum(np.abs(W) - eta * plan.l1, 0.0)
        if plan.projection_radius is not None:
            size = np.linalg.norm(W)
            if size > plan.projection_radius:
                W = W * (plan.projection_radius / size)
        if step >= average_from:
            W_sum += W
            n_averaged += 1
    return W_sum / n_averaged


@pytest.mark.parametrize("sampling", ["cyclic", "shuffle", "poisson"])
@pytest.mark.parametrize("solver", ["dp-sgd", "dp-sgld"])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("storage", ["array", "float32", "memmap"])
def test_run_matches_reference_loop(
    sampling, solver, n_classes, weighted, storage, tmp_path
):
    rng = np.random.default_rng(7)
    n, d, fit_intercept = 700, 5, n_classes == 2
    X = rng.normal(size=(n, d)) * rng.uniform(0.2, 3.0, size=(n, 1))
    if storage == "float32":
        X = X.astype(np.float32)
    elif storage == "memmap":
        X_map = np.memmap(tmp_path / "X.dat", dtype=float, mode="w+", shape=X.shape)
        X_map[:] = X
        X = X_map
    codes = rng.integers(n_classes, size=n).astype(np.uint8)
    sample_weight = rng.uniform(size=n) if weighted else None
    plan = make_plan(
        n_samples=n,
        n_classes=n_classes,
        row_norm=1.5,
        batch_size=64,
        epochs=2,
        sampling=sampling,
        solver=solver,
        learning_rate="auto",
        lr_schedule="decreasing",
        l2=1e-3,
        l1=1e-3 if weighted else 0.0,
        clip_norm="auto",
        projection_radius=0.5 if n_classes == 3 else None,
        tail_fraction=0.3,
    )
    got = run_logistic_sgd(
        X,
        codes,
        plan,
        0.8,
        row_norm=1.5,
        fit_intercept=fit_intercept,
        rng=np.random.default_rng(3),
        sample_weight=sample_weight,
    ).weights
    expected = _reference_run(
        X, codes, plan, 0.8, 1.5, fit_intercept, np.random.default_rng(3), sample_weight
    )
    # Bit for bit (tobytes also tells -0.0 from 0.0).
    assert got.tobytes() == expected.tobytes()

"""A finite row of astronomical norm must be projected, never overflow to NaN.

The estimators accept any finite rows and project each onto the public
``row_norm`` ball (a per-record map). That projection is applied inside the
products, ``(X @ w) * scale``; before ``tame_rows`` a row with entries near
1e154 or above overflowed its squared norm (or ``X @ w``) and turned the whole
model NaN: one record decided the output with certainty, an infinite privacy
loss behind a reported epsilon of about 1. Found by a review on 2026-11-24.

Each test replaces one row by huge ones and checks the fit is finite and is
the fit with that row replaced by its projection (same direction, norm at the
ball's radius): the map the privacy analysis assumes.
"""

import numpy as np
import pytest

from skdp.fairness import DPSaddlePointClassifier
from skdp.linear_model import DPLogisticRegression

ROW_NORM = 2.0  # the features' ball (the intercept's column is added to it)
HUGE = [1e39, 1e155, 1.7e308]


def _data(n=300, d=3, n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, d)) / np.sqrt(d)
    y = (X[:, 0] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    if n_classes > 2:
        y = np.digitize(X[:, 0], np.linspace(-0.5, 0.5, n_classes - 1))
    groups = (X[:, 1] > 0).astype(int)
    return X, y, groups


def _with_row(X, row):
    out = X.copy()
    out[0] = row
    return out


def _projected(direction):
    direction = np.asarray(direction, dtype=float)
    return direction / np.linalg.norm(direction) * ROW_NORM


LOGISTIC_CASES = {
    "poisson": {},
    "cyclic": {"batch_sampling": "cyclic"},
    "shuffle": {"batch_sampling": "shuffle"},
    "sgld": {"solver": "dp-sgld", "batch_sampling": "cyclic"},
    "multinomial": {"n_classes": 3},
}


@pytest.mark.parametrize("case", sorted(LOGISTIC_CASES))
@pytest.mark.parametrize("huge", HUGE)
def test_logistic_projects_huge_rows(case, huge):
    params = dict(LOGISTIC_CASES[case])
    X, y, _ = _data(n_classes=params.pop("n_classes", 2))
    direction = np.array([1.0, -1.0, 0.5])
    fits = []
    for row in (huge * direction, _projected(direction)):
        model = DPLogisticRegression(
            epsilon=1.0, row_norm=ROW_NORM, epochs=2, random_state=0, **params
        ).fit(_with_row(X, row), y)
        fits.append(np.hstack([model.coef_.ravel(), model.intercept_]))
    assert np.all(np.isfinite(fits[0]))
    np.testing.assert_allclose(fits[0], fits[1], rtol=1e-9, atol=1e-12)


def test_logistic_projects_huge_float32_rows_and_memmaps(tmp_path):
    X, y, _ = _data()
    row = np.float32(3e38) * np.ones(3, dtype=np.float32)
    X32 = _with_row(X, row).astype(np.float32)
    path = tmp_path / "x.dat"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=X32.shape)
    mm[:] = X32
    mm.flush()
    for data in (X32, mm):
        for sampling in ("poisson", "cyclic"):
            model = DPLogisticRegression(
                epsilon=1.0,
                row_norm=ROW_NORM,
                epochs=2,
                batch_sampling=sampling,
                random_state=0,
            ).fit(data, y)
            assert np.all(np.isfinite(model.coef_)), (type(data), sampling)
    # The memmap is read, never written.
    np.testing.assert_array_equal(np.asarray(mm), X32)


@pytest.mark.parametrize("huge", HUGE)
def test_saddle_gda_projects_huge_rows(huge):
    X, y, groups = _data()
    direction = np.array([-0.5, 0.25, 1.0])
    fits = []
    for row in (huge * direction, _projected(direction)):
        model = DPSaddlePointClassifier(
            epsilon=1.0,
            groups=[0, 1],
            row_norm=ROW_NORM,
            n_iter=30,
            random_state=0,
        ).fit(_with_row(X, row), y, sensitive_features=groups)
        fits.append(np.hstack([model.coef_.ravel(), model.intercept_]))
    assert np.all(np.isfinite(fits[0]))
    np.testing.assert_allclose(fits[0], fits[1], rtol=1e-9, atol=1e-12)


def test_saddle_mirror_stays_finite_on_huge_rows():
    X, y, groups = _data()
    model = DPSaddlePointClassifier(
        epsilon=1.0,
        solver="mirror",
        groups=[0, 1],
        n_iter=30,
        random_state=0,
    ).fit(_with_row(X, [1.7e308, -1.7e308, 1e300]), y, sensitive_features=groups)
    assert np.all(np.isfinite(model.coef_))


def test_the_user_array_is_not_modified():
    X, y, groups = _data()
    X_huge = _with_row(X, [1e300, 1e300, 1e300])
    before = X_huge.copy()
    DPLogisticRegression(
        epsilon=1.0, row_norm=ROW_NORM, epochs=1, batch_sampling="cyclic"
    ).fit(X_huge, y)
    DPSaddlePointClassifier(
        epsilon=1.0, groups=[0, 1], row_norm=ROW_NORM, n_iter=5
    ).fit(X_huge, y, sensitive_features=groups)
    np.testing.assert_array_equal(X_huge, before)


@pytest.mark.parametrize(
    "params",
    [{"row_norm": 1e31}, {"learning_rate": 1e280}, {"max_grad_norm": 1e31}],
)
def test_astronomical_public_bounds_are_refused_logistic(params):
    # Bounds above 1e30 would let a run overflow on one record's row even
    # after projection (a review found NaN models at row_norm 1e39).
    X, y, _ = _data()
    with pytest.raises(ValueError, match="1e\\+30"):
        DPLogisticRegression(**params).fit(X, y)


@pytest.mark.parametrize(
    "params", [{"row_norm": 1e39}, {"feature_bound": 1e308}, {"l1_radius": 1e31}]
)
def test_astronomical_public_bounds_are_refused_saddle(params):
    X, y, groups = _data()
    model = DPSaddlePointClassifier(groups=[0, 1], **params)
    with pytest.raises(ValueError, match="1e\\+30"):
        model.fit(X, y, sensitive_features=groups)

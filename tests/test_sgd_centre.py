"""The private centre of DP-SGD runs (skdp/_solvers/_sgd/_centre.py)."""

import warnings

import numpy as np
import pytest

from skdp import DPLogisticRegression
from skdp._solvers._rows import centred_rows, clipped_row_sum
from skdp._solvers._sgd import make_plan, run_logistic_sgd
from skdp._solvers._sgd._centre import (
    centre_from_sum,
    centring_radius,
    uncentred,
)
from skdp.accounting import GaussianSumEvent, account
from skdp.linear_model import _budget


def _offset_data(n, seed, offset=0.8, spread=0.05, d=8):
    """Rows near one corner of [-1, 1]^d whose small spread carries the label."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, d))
    y = (Z @ np.linspace(1.0, 0.2, d) + 0.3 * rng.normal(size=n) > 0).astype(int)
    return np.clip(offset + spread * Z, -1.0, 1.0), y


def _plan(n, centring_noise=None, calibration_noise=None):
    return make_plan(
        n_samples=n,
        n_classes=2,
        row_norm=None,
        batch_size=32,
        epochs=3,
        sampling="poisson",
        solver="dp-sgd",
        learning_rate="auto",
        lr_schedule="constant",
        l2=0.0,
        l1=0.0,
        clip_norm="auto",
        projection_radius=None,
        centring_noise=centring_noise,
        calibration_noise=calibration_noise,
    )


def test_a_row_moves_the_clipped_sum_by_at_most_twice_the_radius():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 4)) * 3.0
    radius = 2.0
    base = clipped_row_sum(X, radius)
    for row in (
        np.full(4, 1e200),
        np.zeros(4),
        -X[0] * 50.0,
        np.array([3e38, 0, 0, 0]),
    ):
        other = X.copy()
        other[0] = row
        moved = np.linalg.norm(clipped_row_sum(other, radius) - base)
        assert np.isfinite(moved) and moved <= 2.0 * radius * (1 + 1e-12)
    # Adding a row (add/remove) moves it by at most the radius.
    grown = clipped_row_sum(np.vstack([X, [1e300, 1e300, 0, 0]]), radius)
    assert np.linalg.norm(grown - base) <= radius * (1 + 1e-12)


def test_clipped_sum_is_read_in_chunks_alike():
    X = np.random.default_rng(1).normal(size=(1000, 3))
    np.testing.assert_allclose(
        clipped_row_sum(X, 1.5, chunk=64), clipped_row_sum(X, 1.5), rtol=1e-12
    )


def test_centred_rows_put_rows_on_the_ball_first():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [1e300, 0.0]])
    centre = np.array([0.5, 0.0])
    out = centred_rows(X, centre, radius=1.0)
    np.testing.assert_allclose(out, [[0.1, 0.8], [-0.2, 0.4], [0.5, 0.0]])
    assert X[0, 0] == 3.0  # the input is not modified


def test_the_centre_is_shrunk_when_the_noise_dominates():
    rng = np.random.default_rng(2)
    row_sum = np.zeros(10)  # rows of mean zero, 100 of them
    # Noise std 0.5 a coordinate of the mean: the raw noisy mean's squared
    # error is 10 * 0.25 = 2.5; the shrunk one's far less, and never beyond
    # the radius.
    centres = np.array(
        [centre_from_sum(row_sum, 100, 1.0, 50.0, rng) for _ in range(400)]
    )
    assert np.mean(np.sum(centres**2, axis=1)) < 0.25
    assert np.all(np.linalg.norm(centres, axis=1) <= 1.0 + 1e-12)
    huge = centre_from_sum(row_sum, 100, 1.0, 1e4, rng)
    assert np.linalg.norm(huge) <= 1.0 + 1e-12
    near = centre_from_sum(np.full(10, 5.0), 100, 1.0, 1e-6, rng)
    np.testing.assert_allclose(near, np.full(10, 0.05), rtol=1e-6)


def test_radius_is_the_declared_features_or_sqrt_of_the_width():
    assert centring_radius(None, True, 9) == 3.0
    assert centring_radius(1e30, True, 16) == 4.0
    assert centring_radius(np.sqrt(5.0), True, 100) == pytest.approx(2.0)
    assert centring_radius(2.0, False, 100) == 2.0


def test_a_centred_run_is_the_plain_run_on_centred_rows_mapped_back():
    X, y = _offset_data(400, 0)
    noise = 5.0
    plan = _plan(400, centring_noise=noise)
    run = run_logistic_sgd(
        X, y, plan, 2.0, row_norm=None, fit_intercept=True, rng=np.random.default_rng(7)
    )
    rng = np.random.default_rng(7)
    radius = np.sqrt(X.shape[1])
    centre = centre_from_sum(clipped_row_sum(X, radius), 400, radius, noise, rng)
    plain = run_logistic_sgd(
        centred_rows(X, centre, 1e30),
        y,
        _plan(400),
        2.0,
        row_norm=None,
        fit_intercept=True,
        rng=rng,
    )
    assert np.any(centre != 0)
    np.testing.assert_array_equal(run.weights, uncentred(plain.weights, centre))
    assert run.events == _plan(400).events(2.0) + [GaussianSumEvent(noise)]


@pytest.mark.parametrize("sampling", ["poisson", "balls-and-bins"])
def test_a_memmap_run_equals_the_in_memory_run(tmp_path, sampling):
    X, y = _offset_data(300, 3)
    path = tmp_path / "x.dat"
    mm = np.memmap(path, dtype=np.float64, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    fits = [
        DPLogisticRegression(
            epsilon=1.0, batch_sampling=sampling, classes=[0, 1], random_state=0
        ).fit(data, y)
        for data in (X, np.memmap(path, dtype=np.float64, mode="r", shape=X.shape))
    ]
    assert fits[0]._fit_plan(300, 2).run.centring_noise is not None
    np.testing.assert_allclose(fits[0].coef_, fits[1].coef_, rtol=1e-10)
    np.testing.assert_allclose(fits[0].intercept_, fits[1].intercept_, rtol=1e-10)


@pytest.mark.parametrize("neighbouring", ["replace-one", "add-remove"])
def test_the_centre_is_accounted_and_the_spend_meets_the_target(neighbouring):
    X, y = _offset_data(600, 4)
    est = DPLogisticRegression(
        epsilon=1.0, delta=1e-6, neighbouring=neighbouring, classes=[0, 1]
    )
    z, spent, delta = est.privacy_plan(600)
    plan = est._fit_plan(600, 2).run
    noise = _budget.centre_noise(0.1, 1.0, delta, neighbouring)
    assert plan.centring_noise == noise
    assert GaussianSumEvent(noise) in plan.events(z)
    assert spent.epsilon <= 1.0 + 1e-9
    # Alone, the centre's release is sqrt(0.1) of the budget's Gaussian mu.
    alone = account(GaussianSumEvent(noise), delta, neighbouring=neighbouring)
    assert alone.epsilon < 0.35
    none = DPLogisticRegression(
        epsilon=1.0,
        delta=1e-6,
        neighbouring=neighbouring,
        centring_share=0,
        classes=[0, 1],
    )
    assert none.privacy_plan(600)[0] < z  # the centre is paid by training noise


def test_centring_helps_rows_with_a_common_offset():
    X, y = _offset_data(3000, 5)
    X_test, y_test = _offset_data(3000, 6)
    scores = {}
    for share in ("auto", 0.0):
        scores[share] = np.mean(
            [
                DPLogisticRegression(
                    epsilon=1.0, centring_share=share, classes=[0, 1], random_state=s
                )
                .fit(X, y)
                .score(X_test, y_test)
                for s in range(3)
            ]
        )
    assert scores["auto"] > scores[0.0] + 0.05


def test_auto_centres_amplified_runs_with_a_target_and_an_intercept():
    plans = {
        kwargs: DPLogisticRegression(classes=[0, 1], **dict(kwargs))
        ._fit_plan(500, 2)
        .run.centring_noise
        for kwargs in (
            (),
            (("batch_sampling", "balls-and-bins"),),
            (("batch_sampling", "shuffle"), ("row_norm", 1.0)),
            (("fit_intercept", False),),
            (("epsilon", None), ("noise_multiplier", 2.0)),
        )
    }
    assert [noise is not None for noise in plans.values()] == [
        True,
        True,
        False,
        False,
        False,
    ]


@pytest.mark.parametrize(
    "params, message",
    [
        ({"centring_share": 0.1, "fit_intercept": False}, "fit_intercept"),
        (
            {"centring_share": 0.1, "epsilon": None, "noise_multiplier": 2.0},
            "target epsilon",
        ),
        ({"centring_share": 0.5, "calibration_share": 0.5}, "below 1"),
    ],
)
def test_bad_centring_settings_are_refused_before_any_state_changes(params, message):
    X, y = _offset_data(200, 7)
    est = DPLogisticRegression(classes=[0, 1], **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=message):
            est.fit(X, y)
    assert not hasattr(est, "coef_")

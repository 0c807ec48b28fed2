import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp.accounting import GaussianEvent, account
from skdp.linear_model import DPLogisticRegression
from skdp.preprocessing import BoundedScaler, DPStandardScaler


@parametrize_with_checks(
    [
        BoundedScaler(bounds=(-10.0, 10.0)),
        DPStandardScaler(bounds=(-10.0, 10.0), epsilon=5.0, random_state=0),
    ]
)
def test_sklearn_conformance(estimator, check):
    check(estimator)


def test_bounded_scaler_maps_to_unit_box_and_clips():
    X = np.array([[0.0, 5.0], [10.0, -5.0], [20.0, 0.0]])
    out = BoundedScaler(bounds=([0.0, -5.0], [10.0, 5.0])).fit_transform(X)
    np.testing.assert_allclose(out, [[0.0, 1.0], [1.0, 0.0], [1.0, 0.5]])
    assert BoundedScaler(bounds=(0, 1)).fit(X).row_norm_ == pytest.approx(np.sqrt(2))


def test_bounded_scaler_reads_nothing_from_values():
    rng = np.random.default_rng(0)
    a = BoundedScaler(bounds=(0, 1)).fit(rng.random((50, 3)))
    b = BoundedScaler(bounds=(0, 1)).fit(rng.random((7, 3)) * 100)
    np.testing.assert_array_equal(a.lower_, b.lower_)
    np.testing.assert_array_equal(a.upper_, b.upper_)


@pytest.mark.parametrize(
    "bounds, match",
    [
        (None, "declared"),
        ((1.0, 1.0), "exceed"),
        ((0, np.inf), "finite"),
        (3.0, "bounds"),
    ],
)
def test_bad_bounds(bounds, match):
    with pytest.raises(ValueError, match=match):
        BoundedScaler(bounds=bounds).fit(np.zeros((3, 2)))


def test_dp_standard_scaler_spend_and_accuracy():
    rng = np.random.default_rng(0)
    X = rng.normal(loc=[2.0, -1.0], scale=[1.0, 3.0], size=(50000, 2))
    scaler = DPStandardScaler(bounds=(-10, 10), epsilon=1.0, random_state=0).fit(X)
    spent = scaler.privacy_spent_
    assert 0.97 <= spent.epsilon <= 1.0
    events = [(GaussianEvent(scaler.noise_multiplier_), 1)]
    expected = account(events, spent.delta, accountant="pld")
    assert spent.epsilon == pytest.approx(expected.epsilon)
    # Exact Gaussian DP: less than the Rényi conversion of the same noise.
    assert spent.accountant == "gdp"
    assert spent.epsilon < account(events, spent.delta).epsilon
    np.testing.assert_allclose(scaler.mean_, [2.0, -1.0], atol=0.2)
    np.testing.assert_allclose(scaler.scale_, [1.0, 3.0], rtol=0.2)


def test_pipeline_with_public_bounds_is_private_end_to_end():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3)) * 5
    y = (X[:, 0] > 0).astype(int)
    pipe = make_pipeline(
        BoundedScaler(bounds=(-15, 15)),
        DPLogisticRegression(row_norm=np.sqrt(3), random_state=0),
    ).fit(X, y)
    assert pipe.score(X, y) > 0.8


def test_astronomical_bounds_are_refused():
    # Wider bounds overflow the private scaler's squared sums to NaN.
    X = np.zeros((10, 2))
    for scaler in (
        BoundedScaler(bounds=(-1e200, 1e200)),
        DPStandardScaler(bounds=(0, 1e31)),
    ):
        with pytest.raises(ValueError, match="within"):
            scaler.fit(X)

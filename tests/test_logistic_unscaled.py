"""DPLogisticRegression says when raw amounts reach it with no declared bound."""

import warnings

import numpy as np
import pytest

from skdp import DPLogisticRegression, UnscaledFeaturesWarning


def _rows(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [
            rng.uniform(-1, 1, n),
            rng.standard_t(2, n),  # standardised, heavy tails
            rng.integers(0, 2, n),  # one-hot
        ]
    )
    return X, (X[:, 0] > 0).astype(int)


def _fit(X, y, **params):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DPLogisticRegression(classes=[0, 1], random_state=0, **params).fit(X, y)
    return [w for w in caught if issubclass(w.category, UnscaledFeaturesWarning)]


def test_raw_amounts_are_named_at_the_users_line():
    X, y = _rows()
    dollars = np.random.default_rng(1).uniform(0, 90_000, len(y))
    (warning,) = _fit(np.column_stack([X, dollars]), y)
    message = str(warning.message)
    assert message.startswith("Columns 3 of X are far outside [-1, 1]")
    assert "make_private_pipeline" in message
    assert warning.filename == __file__


@pytest.mark.parametrize("params", [{}, {"batch_sampling": "balls-and-bins"}])
def test_encoded_and_standardised_columns_say_nothing(params):
    X, y = _rows()
    assert not _fit(X, y, **params)


def test_a_declared_row_bound_says_nothing():
    X, y = _rows()
    X = np.column_stack([X, np.full(len(y), 50.0)])
    assert not _fit(X, y, row_norm=60.0)


def test_counts_with_a_small_median_are_named():
    # Visit counts: median about 4, a sixth beyond 10; a median rule misses them.
    X, y = _rows()
    counts = np.random.default_rng(2).negative_binomial(1, 0.15, len(y))
    assert np.median(counts) < 10 and np.mean(counts > 10) >= 0.05
    (warning,) = _fit(np.column_stack([X, counts]), y)
    assert str(warning.message).startswith("Columns 3 of X are far outside")


def test_a_dataframe_s_columns_are_named_by_their_names():
    pd = pytest.importorskip("pandas")
    X, y = _rows()
    frame = pd.DataFrame(X, columns=["share", "z", "flag"])
    frame["visits"] = np.random.default_rng(2).negative_binomial(1, 0.15, len(y))
    (warning,) = _fit(frame, y)
    assert str(warning.message).startswith("Columns visits of X are far outside")

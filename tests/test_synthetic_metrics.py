"""marginal_error on DataFrames: columns matched by name."""

import numpy as np
import pytest

from skdp.synthetic import marginal_error

pd = pytest.importorskip("pandas")

DOMAIN = {"colour": ["red", "blue"], "age": (18, 90)}


def _frame(seed):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"colour": rng.choice(["red", "blue"], 200), "age": rng.integers(18, 90, 200)}
    )


def test_marginal_error_matches_dataframe_columns_by_name():
    real, synth = _frame(0), _frame(1)
    same_order = marginal_error(real, synth, DOMAIN, ways=1)
    assert marginal_error(real, synth[["age", "colour"]], DOMAIN, ways=1) == same_order
    assert marginal_error(real, synth[["age", "colour"]], DOMAIN) == marginal_error(
        real, synth, DOMAIN
    )


def test_marginal_error_names_the_columns_that_differ():
    real, synth = _frame(0), _frame(1).rename(columns={"age": "years"})
    with pytest.raises(ValueError, match=r"only in real \['age'\], only in synth"):
        marginal_error(real, synth, DOMAIN)

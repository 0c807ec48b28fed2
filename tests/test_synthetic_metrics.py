"""marginal_error on DataFrames: columns matched by name."""

import numpy as np
import pytest

from skdp.synthetic import marginal_error, marginal_errors

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


def test_a_declared_category_named_other_keeps_its_own_level():
    domain = {"kind": ["a", "other"], "age": (18, 90)}
    ages = {"age": [30] * 200}
    real = pd.DataFrame({"kind": ["other"] * 100 + ["a"] * 100, **ages})
    synth = pd.DataFrame({"kind": ["a"] * 200, **ages})
    # Half the real rows are "other", none of the synthetic ones: TV 0.5 on
    # that column, 0 on age (before, the metric refused the domain).
    _, errors = marginal_errors(real, synth, domain, ways=1)
    np.testing.assert_allclose(errors, [0.5, 0.0])
    # Undeclared values share one extra level, apart from the declared "other".
    z = pd.DataFrame({"kind": ["z"] * 100 + ["other"] * 100, **ages})
    y = pd.DataFrame({"kind": ["y"] * 100 + ["other"] * 100, **ages})
    only_other = pd.DataFrame({"kind": ["other"] * 200, **ages})
    assert marginal_errors(z, y, domain, ways=1)[1][0] == 0.0
    assert marginal_errors(z, only_other, domain, ways=1)[1][0] == pytest.approx(0.5)

"""The tuning policy of DP-SGD logistic regression (``skdp/_solvers/_sgd``)."""

import dataclasses

import numpy as np
import pytest

from skdp._solvers._sgd import DEFAULT_POLICY, ByRelation, SGDPolicy, auto_epochs
from skdp.accounting import Neighbouring
from skdp.exceptions import UndeclaredBoundWarning
from skdp.linear_model import DPLogisticRegression


def _data(n=400, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d)) / np.sqrt(d)
    return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)


def test_estimator_defaults_come_from_the_policy():
    assert DPLogisticRegression().batch_size == DEFAULT_POLICY.batch_size
    assert DPLogisticRegression._policy is DEFAULT_POLICY


def test_a_policy_variant_reaches_the_fit_without_touching_the_defaults():
    X, y = _data()
    short = dataclasses.replace(DEFAULT_POLICY, poisson_epochs=3)
    variant = type("Variant", (DPLogisticRegression,), {"_policy": short})
    params = dict(epsilon=0.1, batch_size=100, classes=[0, 1], random_state=0)
    fitted = variant(**params).fit(X, y)
    assert fitted.n_iter_ == 3 * 4
    assert fitted.privacy_spent_.epsilon <= 0.1
    assert DPLogisticRegression(**params).fit(X, y).n_iter_ == 30 * 4


def test_the_unit_ball_warning_states_the_policy_radius():
    # The warning says which ball the rows are projected onto: the policy's.
    X, y = _data(n=100)
    wide = dataclasses.replace(DEFAULT_POLICY, cyclic_row_norm=2.5)
    variant = type("Variant", (DPLogisticRegression,), {"_policy": wide})
    model = variant(batch_sampling="cyclic", epochs=1, classes=[0, 1], random_state=0)
    with pytest.warns(UndeclaredBoundWarning, match="ball of radius 2.5"):
        model.fit(X, y)


@pytest.mark.parametrize("field", ["poisson_clip", "quiet_clip"])
@pytest.mark.parametrize("value", [0.0, 1.5])
def test_clip_shares_outside_the_bound_are_refused(field, value):
    # The Poisson events assume a clip norm at most the gradient bound.
    with pytest.raises(ValueError, match=field):
        SGDPolicy(**{field: value})


def test_values_by_relation():
    pair = ByRelation(replace_one=1.0, add_remove=2.0)
    assert pair["replace-one"] == pair[Neighbouring.REPLACE_ONE] == 1.0
    assert pair["add-remove"] == pair[Neighbouring.ADD_REMOVE] == 2.0
    with pytest.raises(ValueError, match="neighbouring"):
        pair["add-one"]


def test_auto_epochs_follow_the_policy():
    assert auto_epochs("cyclic", 8.0) == DEFAULT_POLICY.cyclic_epochs
    assert auto_epochs("poisson", 0.1) == DEFAULT_POLICY.poisson_epochs
    assert auto_epochs("poisson", 100.0) == DEFAULT_POLICY.max_epochs
    more = dataclasses.replace(
        DEFAULT_POLICY, epochs_per_epsilon=ByRelation(replace_one=20, add_remove=40)
    )
    assert auto_epochs("poisson", 2.0, "replace-one", more) == 40
    assert auto_epochs("poisson", 2.0, "add-remove", more) == 80


def test_balls_and_bins_epochs_follow_their_own_rule():
    """Balls-and-bins reads its own floor and rate, never Poisson's."""
    policy = dataclasses.replace(
        DEFAULT_POLICY,
        allocation_epochs=7,
        allocation_epochs_per_epsilon=ByRelation(replace_one=3, add_remove=11),
    )
    assert auto_epochs("balls-and-bins", 0.5, "replace-one", policy) == 7
    assert auto_epochs("balls-and-bins", 4.0, "replace-one", policy) == 12
    assert auto_epochs("balls-and-bins", 2.0, "add-remove", policy) == 22
    assert auto_epochs("balls-and-bins", 100.0, "add-remove", policy) == 120
    assert auto_epochs("poisson", 0.5, "replace-one", policy) == 30

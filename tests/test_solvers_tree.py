"""The tree method (MST-style): its noise, scores, selection and estimate."""

import itertools
import math

import numpy as np
import pytest

from skdp._solvers._measure import count_sensitivity
from skdp._solvers._tree import (
    TreePlan,
    TreePolicy,
    estimate_tree_model,
    fit_tree_model,
    pair_scores,
    project_to_simplex,
)
from skdp.synthetic import DPSyntheticData

#: A pair's selection score moves by at most a count table's L1 sensitivity.
SCORE_SENSITIVITY = count_sensitivity("replace-one").l1


def _chain_data(n, n_levels=5, keep=0.9, n_columns=4, seed=0):
    """Columns forming a Markov chain: strong pairwise dependence."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, n_columns), dtype=np.int64)
    X[:, 0] = rng.integers(n_levels, size=n)
    for j in range(1, n_columns):
        copy = rng.random(n) < keep
        X[:, j] = np.where(copy, X[:, j - 1], rng.integers(n_levels, size=n))
    return X


def test_noise_scale_of_one_way_measurement():
    """The root marginal carries Gaussian noise of std z1 * sqrt(2) on counts."""
    X = np.zeros((1000, 1), dtype=np.int64)
    plan = TreePlan(1)
    z = 0.05
    std = plan.one_way_multiplier(z) * math.sqrt(2)
    draws = []
    for seed in range(400):
        fit = fit_tree_model(X, [2], plan, z, np.random.default_rng(seed))
        draws.append(fit.model.root_probs[1])
    # Counts (1000 + e0, e1) projected on {x >= 0, sum = 1000}: level 1 gets
    # max((e1 - e0) / 2, 0), whose non-zero part has rms std / sqrt(2).
    positive = np.array(draws)[np.array(draws) > 0] * 1000
    assert np.mean(np.array(draws) > 0) == pytest.approx(0.5, abs=0.1)
    assert np.sqrt(np.mean(positive**2)) == pytest.approx(std / np.sqrt(2), rel=0.2)


def test_project_to_simplex():
    rng = np.random.default_rng(0)
    total = 20.0
    for _ in range(50):
        noisy = rng.normal(scale=5.0, size=6) + rng.integers(0, 10, size=6)
        x = project_to_simplex(noisy, total)
        assert x.min() >= 0 and x.sum() == pytest.approx(total)
        # KKT: x = max(noisy - tau, 0) for one tau, i.e. a common shift on the
        # support and noisy <= tau off it.
        tau = (noisy - x)[x > 0]
        np.testing.assert_allclose(tau, tau[0])
        assert np.all(noisy[x == 0] <= tau[0] + 1e-12)
        # No random point of the simplex is closer.
        others = rng.dirichlet(np.ones(6), size=200) * total
        best = np.sum((x - noisy) ** 2)
        assert np.all(np.sum((others - noisy) ** 2, axis=1) >= best - 1e-9)
    on_simplex = np.array([1.0, 0.0, 3.0])
    np.testing.assert_allclose(project_to_simplex(on_simplex, 4.0), on_simplex)


def test_selection_score_sensitivity_brute_force():
    """Max change of any pair's score over all replace-one neighbours <= Du = 2."""
    sizes = (2, 3, 2)
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(s, size=4) for s in sizes])
    probs = [rng.dirichlet(np.ones(s)) for s in sizes]  # released, held fixed
    _, base = pair_scores(codes, sizes, probs, 4)
    worst = 0.0
    for row in range(codes.shape[0]):
        for record in itertools.product(*(range(s) for s in sizes)):
            neighbour = codes.copy()
            neighbour[row] = record
            _, scores = pair_scores(neighbour, sizes, probs, 4)
            worst = max(worst, np.abs(scores - base).max())
    assert worst <= SCORE_SENSITIVITY + 1e-12
    assert worst == pytest.approx(SCORE_SENSITIVITY)  # the bound is attained


def test_estimate_is_exact_without_noise():
    """Fed exact counts, the tree model reproduces the tree's 2-way marginals."""
    X = _chain_data(3000, n_levels=4)
    n = X.shape[0]
    order = [(0, 1), (1, 2), (1, 3)]
    one_way = [np.bincount(X[:, j], minlength=4).astype(float) for j in range(4)]
    tables = []
    for p, c in order:
        tables.append(np.bincount(X[:, p] * 4 + X[:, c], minlength=16).reshape(4, 4))
    model = estimate_tree_model(
        one_way, 1.0, order, tables, 1.0, n, TreePolicy().prior_share
    )
    marginals = {0: model.root_probs}
    for (p, c), cond, table in zip(order, model.conditionals, tables, strict=True):
        joint = marginals[p][:, None] * cond
        marginals[c] = joint.sum(axis=0)
        np.testing.assert_allclose(joint, table / n, atol=2e-3)


def test_estimator_takes_a_tree_policy_variant():
    """The tree's shares come from its policy; calibration follows them."""
    X = _chain_data(300)
    domain = {j: list(range(5)) for j in range(4)}
    model = DPSyntheticData(epsilon=1.0, domain=domain, method="tree", random_state=0)
    model._tree_policy = TreePolicy(one_way_share=0.5, two_way_share=0.4)
    model.fit(X)
    z = model.noise_multiplier_
    assert model.events_[0].noise_multiplier == pytest.approx(z * np.sqrt(4 / 0.5))
    assert model.events_[2].noise_multiplier == pytest.approx(z * np.sqrt(3 / 0.4))
    assert 0.97 <= model.privacy_spent_.epsilon <= 1.0

"""The graphical model: junction tree, exact inference, mirror descent, sampling."""

import itertools

import numpy as np
import pytest

from skdp._solvers._measure import count_marginals
from skdp._solvers._pgm import (
    Measurement,
    _refine,
    build_junction_tree,
    calibrate,
    clique_log_potentials,
    coarsen,
    marginal,
    mirror_descent,
    sample_codes,
)

# -- junction tree and inference ------------------------------------------------


def _random_model(rng, sizes, cliques):
    tree = build_junction_tree(cliques, sizes)
    theta = {c: rng.normal(size=[sizes[v] for v in c]) for c in cliques}
    return tree, theta


def _brute_joint(sizes, theta):
    log_p = np.zeros(sizes)
    for clique, table in theta.items():
        shape = [sizes[v] if v in clique else 1 for v in range(len(sizes))]
        log_p = log_p + table.reshape(shape)
    p = np.exp(log_p - log_p.max())
    return p / p.sum()


def _brute_marginal(joint, columns):
    axes = tuple(v for v in range(joint.ndim) if v not in columns)
    return joint.sum(axis=axes)


CASES = [
    ((2, 3, 2, 3, 2), [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)]),  # a cycle
    ((3, 2, 2, 3), [(0, 1, 2), (2, 3), (1, 3)]),
    ((2, 2, 3, 2, 2), [(0, 1), (2, 3)]),  # disconnected, column 4 alone
]


@pytest.mark.parametrize(("sizes", "cliques"), CASES)
def test_junction_tree_properties(sizes, cliques):
    tree = build_junction_tree(cliques, sizes)
    covered = set().union(*map(set, tree.cliques))
    assert covered == set(range(len(sizes)))
    for c in cliques:
        assert tree.host(c) >= 0  # every measured clique fits in one clique
    # Running intersection: the cliques holding a column form a subtree.
    for v in range(len(sizes)):
        holding = [k for k, c in enumerate(tree.cliques) if v in c]
        tops = [k for k in holding if tree.parent[k] not in holding]
        assert len(tops) == 1


@pytest.mark.parametrize(("sizes", "cliques"), CASES)
def test_calibrate_and_marginal_match_brute_force(sizes, cliques):
    rng = np.random.default_rng(0)
    tree, theta = _random_model(rng, sizes, cliques)
    log_mu = calibrate(tree, clique_log_potentials(tree, theta))
    joint = _brute_joint(sizes, theta)
    for k, clique in enumerate(tree.cliques):
        np.testing.assert_allclose(np.exp(log_mu[k]), _brute_marginal(joint, clique))
    for columns in itertools.chain(
        itertools.combinations(range(len(sizes)), 2),
        itertools.combinations(range(len(sizes)), 3),
    ):
        np.testing.assert_allclose(
            marginal(tree, log_mu, columns),
            _brute_marginal(joint, columns),
            atol=1e-12,
        )


def test_sampling_follows_the_joint():
    sizes, cliques = CASES[0]
    rng = np.random.default_rng(1)
    tree, theta = _random_model(rng, sizes, cliques)
    log_mu = calibrate(tree, clique_log_potentials(tree, theta))
    n = 40_000
    codes = sample_codes(tree, log_mu, n, np.random.default_rng(2))
    joint = _brute_joint(sizes, theta)
    flat = np.ravel_multi_index(tuple(codes.T), sizes)
    freq = np.bincount(flat, minlength=joint.size) / n
    # TV of the full joint (72 cells) within sampling error.
    assert 0.5 * np.abs(freq - joint.ravel()).sum() < 0.03
    # Pairs in no common clique too (0 and 2 are joined only through others).
    pair = np.bincount(codes[:, 0] * sizes[2] + codes[:, 2], minlength=4) / n
    np.testing.assert_allclose(pair, _brute_marginal(joint, (0, 2)).ravel(), atol=0.01)
    # Rounded counts: the root clique's marginal is reproduced to 1 / n.
    root = tree.cliques[0]
    root_freq = (
        np.bincount(
            np.ravel_multi_index(
                tuple(codes[:, v] for v in root), [sizes[v] for v in root]
            ),
            minlength=np.exp(log_mu[0]).size,
        )
        / n
    )
    np.testing.assert_allclose(root_freq, np.exp(log_mu[0]).ravel(), atol=1.5 / n)


def test_mirror_descent_fits_exact_measurements():
    rng = np.random.default_rng(3)
    sizes = (3, 4, 2, 3)
    n = 5000
    codes = np.column_stack([rng.integers(s, size=n) for s in sizes])
    codes[:, 1] = np.where(rng.random(n) < 0.7, codes[:, 0], codes[:, 1])
    codes[:, 3] = np.where(rng.random(n) < 0.6, codes[:, 2], codes[:, 3])
    cliques = [(0, 1), (1, 2), (2, 3)]
    counts = count_marginals(codes, sizes, cliques)
    measurements = [Measurement(c, counts[c], 1.0) for c in cliques]
    tree = build_junction_tree(cliques, sizes)
    _, log_mu = mirror_descent(tree, measurements, n, max_iter=3000)
    for c in cliques:
        np.testing.assert_allclose(
            n * marginal(tree, log_mu, c), counts[c], atol=0.02 * n / counts[c].size
        )


def test_mirror_descent_fits_measurements_with_per_cell_noise():
    tree = build_junction_tree([(0,)], (3,))
    y = np.array([60.0, 30.0, 10.0])
    exact = Measurement((0,), y, np.array([1.0, 1.0, 3.0]))
    _, log_mu = mirror_descent(tree, [exact], 100.0, max_iter=500)
    np.testing.assert_allclose(100.0 * np.exp(log_mu[0]), y, rtol=1e-3)


# -- coarsened measurements ------------------------------------------------------


def test_coarsen_sums_groups_and_refine_is_its_adjoint():
    rng = np.random.default_rng(0)
    table = rng.random((5, 6))
    runs = np.array([0, 0, 1, 1, 1, 2])
    expected = np.stack(
        [table[:, :2].sum(1), table[:, 2:5].sum(1), table[:, 5]], axis=1
    )
    np.testing.assert_allclose(coarsen(table, (None, runs)), expected)
    scattered = np.array([1, 0, 1, 0, 2, 2])  # not runs: the general path
    onehot = np.eye(3)[scattered]
    np.testing.assert_allclose(coarsen(table, (None, scattered)), table @ onehot)
    for groups in [(None, runs), (runs[:5], scattered)]:
        g = rng.random(coarsen(table, groups).shape)
        assert np.sum(coarsen(table, groups) * g) == pytest.approx(
            np.sum(table * _refine(g, groups))
        )


def test_mirror_descent_fits_a_coarsened_measurement():
    sizes = (6, 2)
    groups = (np.array([0, 0, 0, 1, 1, 1]), None)
    one = Measurement((0,), np.array([10.0, 20, 30, 5, 15, 20]), 0.1)
    pair = Measurement((0, 1), np.array([[55.0, 5.0], [10.0, 30.0]]), 0.1, groups)
    tree = build_junction_tree([(0, 1)], sizes)
    _, log_mu = mirror_descent(tree, [one, pair], 100.0, max_iter=3000)
    fitted = 100.0 * marginal(tree, log_mu, (0, 1))
    np.testing.assert_allclose(coarsen(fitted, groups), pair.y, atol=0.05)
    np.testing.assert_allclose(fitted.sum(1), one.y, atol=0.05)

"""The graphical model, the adaptive rounds and their privacy."""

import itertools

import numpy as np
import pytest

from skdp._solvers._marginals import SCORE_SENSITIVITY
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
from skdp._solvers._synth_aim import (
    SMOOTH_BINS,
    _coarse_groups,
    _compressed_measurement,
    _downward_closure,
    _weights,
    compress_column,
    count_marginals,
    estimate_total,
    expand_codes,
    fit_aim,
    workload_cliques,
)
from skdp.accounting import (
    ExponentialMechanismEvent,
    GaussianEvent,
    RDPAccountant,
    account,
)
from skdp.synthetic import DPSyntheticData, marginal_error

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


def test_count_marginals_parallel_equals_serial():
    rng = np.random.default_rng(4)
    sizes = (3, 5, 2, 4)
    codes = np.column_stack([rng.integers(s, size=500) for s in sizes])
    sets = _downward_closure(workload_cliques(4, "3-way"))
    serial = count_marginals(codes, sizes, sets)
    parallel = count_marginals(codes, sizes, sets, n_jobs=2)
    assert serial.keys() == parallel.keys()
    for key in serial:
        np.testing.assert_array_equal(serial[key], parallel[key])
        assert serial[key].sum() == 500


# -- privacy of the rounds ------------------------------------------------------


def _chain(n, n_columns=4, n_levels=4, seed=0):
    rng = np.random.default_rng(seed)
    X = np.empty((n, n_columns), dtype=np.int64)
    X[:, 0] = rng.integers(n_levels, size=n)
    for j in range(1, n_columns):
        keep = rng.random(n) < 0.8
        X[:, j] = np.where(keep, X[:, j - 1], rng.integers(n_levels, size=n))
    return X, {j: list(range(n_levels)) for j in range(n_columns)}


@pytest.mark.parametrize("rho", [0.01, 0.3, 5.0])
def test_rounds_stay_within_the_zcdp_budget(rho):
    """The filter condition: at every order the run's RDP is at most a * rho."""
    X, domain = _chain(400)
    result = fit_aim(
        X, [4] * 4, rho, np.random.default_rng(0), round_iter=10, final_iter=20
    )
    zcdp = 0.0
    for event in result.events:
        if isinstance(event, GaussianEvent):
            zcdp += event.count / (2 * event.noise_multiplier**2)
        else:
            assert isinstance(event, ExponentialMechanismEvent)
            assert event.bounded_range
            zcdp += event.count * event.epsilon**2 / 8
    assert zcdp == pytest.approx(rho, rel=1e-9)  # the last round spends the rest
    assert result.rho_used == pytest.approx(zcdp, rel=1e-12)
    ran = RDPAccountant()
    for event in result.events:
        ran.compose(event)
    budget = RDPAccountant().compose(GaussianEvent((2 * rho) ** -0.5))
    assert np.all(
        ran.spent(1e-6, warn=False).rdp
        <= np.asarray(budget.spent(1e-6, warn=False).rdp) * (1 + 1e-9)
    )
    assert len(result.selected) >= 1


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 10.0])
def test_estimator_spend_is_the_calibrated_budget(epsilon):
    X, domain = _chain(300)
    model = DPSyntheticData(epsilon=epsilon, domain=domain, random_state=0).fit(X)
    spent = model.privacy_spent_
    assert 0.97 * epsilon <= spent.epsilon <= epsilon
    expected = account(GaussianEvent(model.noise_multiplier_), model.delta_)
    assert spent.epsilon == pytest.approx(expected.epsilon, rel=1e-12)
    # Every event that ran is inside the certified curve.
    ran = RDPAccountant()
    for event in model.events_:
        ran.compose(event)
    assert np.all(
        np.asarray(ran.spent(model.delta_, warn=False).rdp)
        <= np.asarray(spent.rdp) * (1 + 1e-9)
    )
    assert model.selected_ and all(set(s) <= set(domain) for s in model.selected_)


SCORE_SIZES = (2, 3, 2)


def _score_function(seed, total):
    """Weighted L1 scores of the 2-way workload against a fixed released model.

    Returns ``(scores, codes, weights)``: ``scores(data)`` is the score vector
    of a 5-record data set's candidates with the model's counts
    ``total * model`` (``total`` released, so fixed across neighbours).
    """
    workload = workload_cliques(3, "2-way")
    candidates = _downward_closure(workload)
    weights = _weights(candidates, workload)
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(s, size=5) for s in SCORE_SIZES])
    model = {r: rng.random([SCORE_SIZES[v] for v in r]) for r in candidates}

    def scores(data):
        counts = count_marginals(data, SCORE_SIZES, candidates)
        return np.array(
            [
                w * np.abs(counts[r] - total * model[r]).sum()
                for r, w in zip(candidates, weights, strict=True)
            ]
        )

    return scores, codes, weights


def test_selection_score_sensitivity_brute_force():
    """One replaced record moves a weighted L1 score by at most 2 max(w)."""
    scores, codes, weights = _score_function(0, 5.0)
    base = scores(codes)
    worst = 0.0
    for row in range(codes.shape[0]):
        for record in itertools.product(*(range(s) for s in SCORE_SIZES)):
            other = codes.copy()
            other[row] = record
            worst = max(worst, np.abs(scores(other) - base).max())
    assert worst <= SCORE_SENSITIVITY * weights.max() + 1e-12


# -- utility --------------------------------------------------------------------


def test_aim_beats_tree_on_dependent_data():
    """Column 2 = column 0 + column 1 (mod 3): invisible to every pair."""
    rng = np.random.default_rng(5)
    n = 4000
    a, b = rng.integers(3, size=n), rng.integers(3, size=n)
    X = np.column_stack([a, b, (a + b) % 3, rng.integers(3, size=n)])
    domain = {j: [0, 1, 2] for j in range(4)}
    errors = {}
    for method in ("aim", "tree"):
        synth = (
            DPSyntheticData(
                epsilon=5.0,
                domain=domain,
                method=method,
                workload="3-way",
                random_state=0,
            )
            .fit(X)
            .sample()
        )
        errors[method] = marginal_error(X, synth, domain, ways=3)
    assert errors["aim"] < 0.5 * errors["tree"]


def test_three_way_workload_and_column_sets():
    X, domain = _chain(500, n_columns=5)
    model = DPSyntheticData(
        epsilon=2.0, domain=domain, workload="3-way", random_state=0
    ).fit(X)
    assert model.sample(10).shape == (10, 5)
    model = DPSyntheticData(
        epsilon=2.0, domain=domain, workload=[(0, 1), (2, 3, 4)], random_state=0
    ).fit(X)
    assert all(set(s) <= {0, 1} or set(s) <= {2, 3, 4} for s in model.selected_)
    with pytest.raises(ValueError, match="unknown columns"):
        DPSyntheticData(domain=domain, workload=[(0, 9)]).fit(X)


def test_n_jobs_gives_the_same_fit():
    X, domain = _chain(300)
    a = DPSyntheticData(domain=domain, random_state=0).fit(X).sample()
    b = DPSyntheticData(domain=domain, random_state=0, n_jobs=2).fit(X).sample()
    np.testing.assert_array_equal(a, b)


def test_verbose_logs_every_round(caplog):
    import logging

    X, domain = _chain(300)
    caplog.set_level(logging.INFO, logger="skdp")
    model = DPSyntheticData(domain=domain, random_state=0, verbose=1).fit(X)
    rounds = [r.getMessage() for r in caplog.records if "round" in r.getMessage()]
    assert len(rounds) == len(model.selected_)
    assert "measured" in rounds[0] and "zCDP budget (rho) left" in rounds[-1]
    assert "(rho) left 0 of" in rounds[-1]  # the last round spends the rest


# -- add-remove -----------------------------------------------------------------


def test_add_remove_selection_score_sensitivity_brute_force():
    """One added or removed record moves a weighted L1 score by at most max(w)."""
    # The model's total is the released estimate of the number of rows, fixed.
    scores, codes, weights = _score_function(1, 5.3)
    base = scores(codes)
    worst = 0.0
    for row in range(codes.shape[0]):
        worst = max(worst, np.abs(scores(np.delete(codes, row, 0)) - base).max())
    for record in itertools.product(*(range(s) for s in SCORE_SIZES)):
        added = np.vstack([codes, record])
        worst = max(worst, np.abs(scores(added) - base).max())
    assert worst == pytest.approx(weights.max())


def test_add_remove_halves_the_noise_variance_and_estimates_the_total():
    X, _ = _chain(3000)
    rho = 0.05
    runs = {
        relation: fit_aim(
            X,
            [4] * 4,
            rho,
            np.random.default_rng(0),
            round_iter=10,
            final_iter=20,
            neighbouring=relation,
        )
        for relation in ("replace-one", "add-remove")
    }
    first = {k: r.measurements[0].std for k, r in runs.items()}
    assert first["replace-one"] == pytest.approx(np.sqrt(2) * first["add-remove"])
    assert runs["replace-one"].n_rows == X.shape[0]
    one_way = runs["add-remove"].measurements[:4]
    total = runs["add-remove"].n_rows
    assert total == pytest.approx(estimate_total(one_way))
    # Four 1-way sums of 4 cells each: std of the mean is about std * 1.
    assert abs(total - X.shape[0]) < 5 * first["add-remove"]


def test_estimate_total_is_unbiased():
    rng = np.random.default_rng(0)
    truth = [np.array([30.0, 50.0, 20.0]), np.array([60.0, 40.0])]
    stds = (4.0, 2.0)
    draws = [
        estimate_total(
            [
                Measurement((j,), c + s * rng.standard_normal(c.size), s)
                for j, (c, s) in enumerate(zip(truth, stds, strict=True))
            ]
        )
        for _ in range(4000)
    ]
    # Inverse-variance weights 1 / (3 * 16) and 1 / (2 * 4): std of the
    # estimate 1 / sqrt(1/48 + 1/8) = 2.62; mean of 4000 within 4 std errors.
    assert abs(np.mean(draws) - 100.0) < 4 * 2.62 / np.sqrt(4000)
    assert np.std(draws) == pytest.approx(2.62, rel=0.05)


def test_estimator_add_remove_spend_and_sample_size():
    X, domain = _chain(2000)
    model = DPSyntheticData(
        epsilon=1.0,
        delta=1e-5,
        domain=domain,
        neighbouring="add-remove",
        random_state=0,
    ).fit(X)
    spent = model.privacy_spent_
    assert spent.neighbouring == "add-remove"
    expected = account(
        GaussianEvent(model.noise_multiplier_), model.delta_, neighbouring="add-remove"
    )
    assert spent.epsilon == pytest.approx(expected.epsilon, rel=1e-12)
    assert 0.97 <= spent.epsilon <= 1.0
    assert abs(model.n_samples_fit_ - X.shape[0]) < 0.05 * X.shape[0]
    assert model.sample().shape == (model.n_samples_fit_, X.shape[1])
    again = DPSyntheticData(
        epsilon=1.0,
        delta=1e-5,
        domain=domain,
        neighbouring="add-remove",
        random_state=0,
    ).fit(X)
    np.testing.assert_array_equal(model.sample(), again.sample())


@pytest.mark.parametrize(
    "params", [{"method": "tree"}, {"infer_domain": 0.1, "domain": None}]
)
def test_add_remove_refuses_what_it_does_not_cover(params):
    X, domain = _chain(200)
    model = DPSyntheticData(domain=domain, neighbouring="add-remove", delta=1e-5)
    model.set_params(**params)
    with pytest.raises(ValueError, match="add-remove"):
        model.fit(X)
    assert not hasattr(model, "privacy_spent_")


# -- domain compression -----------------------------------------------------------


def test_compress_column_merges_only_two_or_more_rare_levels():
    std = 2.0
    comp = compress_column(np.array([50.0, 3.0, -1.0, 40.0, 5.9, 0.5]), std, 3.0)
    # Below 3 std = 6: levels 1, 2, 4, 5 merge into the last compressed level.
    np.testing.assert_array_equal(comp.mapping, [0, 2, 2, 1, 2, 2])
    np.testing.assert_array_equal(comp.merged, [1, 2, 4, 5])
    # Categorical: shrunk toward the mean by the James-Stein factor, clipped.
    noisy = np.array([3.0, -1.0, 5.9, 0.5])
    factor = 1.0 - std**2 / noisy.var()
    shrunk = np.clip(noisy.mean() + factor * (noisy - noisy.mean()), 0.0, None)
    np.testing.assert_allclose(comp.weights, shrunk / shrunk.sum())
    assert comp.n_levels == 3
    one_rare = compress_column(np.array([50.0, 1.0, 40.0]), std, 3.0)
    np.testing.assert_array_equal(one_rare.mapping, [0, 1, 2])
    assert one_rare.merged.size == 0
    all_rare = compress_column(np.array([1.0, 1.0]), std, 3.0)
    assert all_rare.merged.size == 0
    all_negative = compress_column(np.array([30.0, -2.0, -1.0]), std, 3.0)
    np.testing.assert_allclose(all_negative.weights, [0.5, 0.5])


def test_expansion_weights_shrink_noise_to_uniform_and_smooth_ordered_bins():
    # Spread within the noise: a categorical column's merged levels come out
    # uniform, not in proportion to the noise.
    comp = compress_column(np.array([500.0, 4.0, -3.0, 2.0, 9.0]), 10.0, 3.0)
    np.testing.assert_allclose(comp.weights, np.full(4, 0.25))
    # Ordered bins: the same counts averaged over neighbouring bins.
    noisy = np.array([500.0, 30.0, 0.0, 30.0, 0.0])
    comp = compress_column(noisy, 20.0, 3.0, ordered=5)
    x = np.arange(1.0, 5.0)
    kernel = np.exp(-0.5 * np.square((x[:, None] - x[None, :]) / SMOOTH_BINS))
    smooth = kernel @ noisy[1:] / kernel.sum(axis=1)
    np.testing.assert_allclose(comp.weights, smooth / smooth.sum())
    # Only the first ``ordered`` levels are bins (a trailing missing level is not).
    comp = compress_column(np.array([500.0, 30.0, 0.0, 30.0, 0.0]), 20.0, 3.0, 4)
    assert comp.weights[-1] == pytest.approx(0.0)


def test_expansion_weights_estimate_a_smooth_tail_better_than_clipping():
    # A decaying tail of 12 numeric bins measured with noise of the order of
    # its counts: smoothing (ordered) must beat the clipped noisy counts on
    # average over noise draws, in total variation to the true proportions.
    true = 400.0 * np.exp(-np.arange(12) / 4.0)
    std = 60.0
    rng = np.random.default_rng(0)
    gains = []
    for _ in range(200):
        noisy = np.concatenate([[1e5], true + std * rng.standard_normal(12)])
        comp = compress_column(noisy, std, 1e3, ordered=13)
        assert comp.merged.size == 12
        clipped = np.clip(noisy[1:], 0.0, None)
        clipped = clipped / clipped.sum()
        target = true / true.sum()
        gains.append(
            np.abs(clipped - target).sum() - np.abs(comp.weights - target).sum()
        )
    assert np.mean(gains) > 0.02


def test_compressed_measurement_sums_counts_and_variances():
    comp = compress_column(np.array([50.0, 3.0, -1.0, 40.0]), 2.0, 3.0)
    measured = Measurement((0,), np.array([50.0, 3.0, -1.0, 40.0]), 2.0)
    moved = _compressed_measurement(0, measured, comp)
    np.testing.assert_allclose(moved.y, [50.0, 40.0, 2.0])
    np.testing.assert_allclose(moved.std, [2.0, 2.0, 2.0 * np.sqrt(2.0)])
    assert estimate_total([moved]) == pytest.approx(92.0)


def test_expand_codes_inverts_the_mapping_and_draws_merged_levels():
    comp = compress_column(np.array([50.0, 3.0, 9.0, 40.0]), 1.0, 20.0)
    # Levels 1 and 2 (counts 3 and 9 < 20) merge into compressed level 2.
    codes = np.array([[0], [1], [2]] * 4000)
    out = expand_codes(codes, [comp], np.random.default_rng(0))
    assert np.all(out[codes[:, 0] == 0, 0] == 0)
    assert np.all(out[codes[:, 0] == 1, 0] == 3)
    drawn = out[codes[:, 0] == 2, 0]
    assert set(np.unique(drawn)) == {1, 2}
    # Shrunk toward the mean 6 by 1 - 1 / 9: 8.67 / 12.
    assert comp.weights[1] == pytest.approx((6.0 + 3.0 * 8.0 / 9.0) / 12.0)
    assert np.mean(drawn == 2) == pytest.approx(comp.weights[1], abs=0.03)


def test_mirror_descent_fits_measurements_with_per_cell_noise():
    tree = build_junction_tree([(0,)], (3,))
    y = np.array([60.0, 30.0, 10.0])
    exact = Measurement((0,), y, np.array([1.0, 1.0, 3.0]))
    _, log_mu = mirror_descent(tree, [exact], 100.0, max_iter=500)
    np.testing.assert_allclose(100.0 * np.exp(log_mu[0]), y, rtol=1e-3)


def test_rounds_compress_near_empty_levels_and_keep_their_budget():
    rng = np.random.default_rng(0)
    n = 3000
    X = np.column_stack(
        [rng.integers(0, 3, n), rng.integers(0, 3, n), rng.integers(0, 2, n)]
    )
    sizes = [12, 3, 2]  # column 0 declares 12 levels, only 3 occur
    rho = 0.05
    result = fit_aim(
        X,
        sizes,
        rho,
        np.random.default_rng(1),
        round_iter=10,
        final_iter=20,
        compress=True,
    )
    assert result.compression[0].n_levels < 12
    assert set(result.compression[0].merged) >= set(range(4, 12))
    assert result.rho_used == pytest.approx(rho, rel=1e-9)
    model = DPSyntheticData(
        epsilon=1.0,
        domain={0: list(range(12)), 1: [0, 1, 2], 2: [0, 1]},
        compress=True,
        random_state=0,
    ).fit(X)
    synth = model.sample()
    assert synth.shape == X.shape
    # Occurring levels keep about their share; the empty ones stay rare.
    assert np.mean(synth[:, 0] >= 3) < 0.05


def test_compress_auto_follows_the_relation():
    rng = np.random.default_rng(0)
    # Enough rows that the noise is below 1/200 of them (the "auto" gate).
    X = np.column_stack([rng.integers(0, 3, 6000), rng.integers(0, 2, 6000)])
    domain = {0: list(range(12)), 1: [0, 1]}  # levels 3-11 of column 0 empty
    merged = {}
    for relation in ("replace-one", "add-remove"):
        model = DPSyntheticData(
            domain=domain, neighbouring=relation, delta=1e-5, random_state=0
        ).fit(X)
        merged[relation] = model._model[2][0].merged.size
    assert merged["replace-one"] == 0
    assert merged["add-remove"] >= 9
    forced = DPSyntheticData(domain=domain, compress=True, random_state=0).fit(X)
    assert forced._model[2][0].merged.size >= 9


def test_compress_auto_only_when_the_noise_is_small_against_the_rows():
    """``"auto"`` compresses iff the 1-way noise std is at most n / 200.

    At high noise, the 3-std threshold merges levels that hold a real share
    of the rows (here each occurring level holds a sixth of 300 rows).
    """
    rng = np.random.default_rng(0)
    sizes = [12, 2]  # column 0 declares 12 levels, only 6 occur
    rho = 0.05
    merged, std_share = {}, {}
    for n in (300, 20_000):
        X = np.column_stack([rng.integers(0, 6, n), rng.integers(0, 2, n)])
        result = fit_aim(
            X,
            sizes,
            rho,
            np.random.default_rng(1),
            round_iter=10,
            final_iter=20,
            compress="auto",
            neighbouring="add-remove",
        )
        merged[n] = result.compression[0].merged.size
        std_share[n] = result.measurements[0].std / result.n_rows
        assert result.rho_used == pytest.approx(rho, rel=1e-9)
    assert np.max(std_share[300]) > 1 / 200 > np.max(std_share[20_000])
    assert merged[300] == 0  # no level merged at high noise
    assert merged[20_000] >= 6  # the six empty levels merged at low noise


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


def test_coarse_groups_cut_the_kept_ordered_levels_into_runs():
    noisy = np.array([0.0, 50, 60, 70, 80, 90, 100, 110, 0, 0, 40])
    compression = compress_column(noisy, 5.0, 3.0, ordered=10)
    groups = _coarse_groups(compression, 10, 3)
    # 7 kept ordered levels -> runs of 3; level 10 (not ordered) and the
    # merged level (0, 8, 9) stay groups of their own.
    np.testing.assert_array_equal(groups, [0, 0, 0, 1, 1, 1, 2, 3, 4])
    assert _coarse_groups(compression, 0, 3) is None  # categorical
    assert _coarse_groups(compression, 10, 8) is None  # runs of one level


@pytest.mark.parametrize("neighbouring", ["replace-one", "add-remove"])
def test_coarsened_rounds_keep_the_budget_and_the_sensitivity(neighbouring):
    """A coarsened table still moves by one count in one cell per record."""
    rng = np.random.default_rng(0)
    n = 4000
    age = rng.integers(0, 40, n)
    X = np.column_stack(
        [age, (age + rng.integers(0, 4, n)) // 22, rng.integers(0, 2, n)]
    )
    sizes = [40, 2, 2]
    rho = 0.02
    result = fit_aim(
        X,
        sizes,
        rho,
        np.random.default_rng(1),
        round_iter=10,
        final_iter=20,
        neighbouring=neighbouring,
        ordered=[40, 0, 0],
    )
    assert any(m.groups is not None for m in result.measurements)
    assert result.rho_used == pytest.approx(rho, rel=1e-9)
    n_rounds = len(result.selected)
    assert len(result.events) == 1 + 2 * n_rounds
    for m in result.measurements:
        exact = coarsen(count_marginals(X, sizes, [m.clique])[m.clique], m.groups)
        if m.groups is None or len(m.clique) == 1:
            continue
        # Moving one record changes exactly two cells by one (replace-one) or
        # one cell by one (add-remove): the Gaussian's sensitivity.
        moved = X.copy()
        moved[0] = [39 - X[0, 0], 1 - X[0, 1], X[0, 2]]
        other = coarsen(count_marginals(moved, sizes, [m.clique])[m.clique], m.groups)
        assert np.abs(other - exact).sum() <= 2
        assert np.sqrt(np.sum((other - exact) ** 2)) <= np.sqrt(2) + 1e-12
        fewer = coarsen(count_marginals(X[1:], sizes, [m.clique])[m.clique], m.groups)
        assert np.abs(fewer - exact).sum() == 1


def test_coarsened_score_sensitivity_brute_force():
    """Coarsened scores move by at most the full tables' bound per neighbour."""
    sizes = (4, 3)
    groups = (np.array([0, 0, 1, 1]), None)
    rng = np.random.default_rng(2)
    codes = np.column_stack([rng.integers(s, size=5) for s in sizes])
    model = rng.random(sizes) * 5.0
    weight = 3.0

    def score(data):
        counts = count_marginals(data, sizes, [(0, 1)])[(0, 1)]
        return weight * np.abs(coarsen(counts - model, groups)).sum()

    base = score(codes)
    replaced = removed = 0.0
    for row in range(codes.shape[0]):
        removed = max(removed, abs(score(np.delete(codes, row, axis=0)) - base))
        for record in itertools.product(*(range(s) for s in sizes)):
            other = codes.copy()
            other[row] = record
            replaced = max(replaced, abs(score(other) - base))
    assert replaced <= SCORE_SENSITIVITY * weight + 1e-12
    assert removed <= 1.0 * weight + 1e-12


def test_coarsened_candidates_only_at_high_noise():
    rng = np.random.default_rng(0)
    n = 4000
    age = rng.integers(0, 40, n)
    X = np.column_stack([age, (age + rng.integers(0, 4, n)) // 22])
    coarse = {}
    for rho in (0.02, 1e4):  # first rounds' std / n: about 4e-3, then 2e-6
        result = fit_aim(
            X,
            [40, 2],
            rho,
            np.random.default_rng(1),
            round_iter=10,
            final_iter=20,
            ordered=[40, 0],
        )
        coarse[rho] = any(m.groups is not None for m in result.measurements)
    assert coarse == {0.02: True, 1e4: False}

"""The adaptive rounds (AIM) and their privacy."""

import itertools

import numpy as np
import pytest
from test_synthetic_small import _assert_ran_within

from skdp._solvers._aim import (
    AIMPolicy,
    _coarse_groups,
    _downward_closure,
    _weights,
    estimate_total,
    fit_aim,
    workload_cliques,
)
from skdp._solvers._compression import compress_column
from skdp._solvers._measure import count_marginals, count_sensitivity
from skdp._solvers._pgm import Measurement, coarsen
from skdp.accounting import (
    ExponentialMechanismEvent,
    GaussianEvent,
    RDPAccountant,
    account,
)
from skdp.synthetic import DPSyntheticData, marginal_error

#: Few mirror-descent iterations: these tests check privacy, not fit quality.
FAST_POLICY = AIMPolicy(round_iter=10, final_iter=20)
#: The same without the split rule: the 1-way marginals take the first
#: rounds' noise and the rounds run whatever the signal (their mechanics).
ROUNDS_POLICY = AIMPolicy(round_iter=10, final_iter=20, min_signal=None)
#: One record's move of a weighted score, per unit of weight (replace-one).
SCORE_SENSITIVITY = count_sensitivity("replace-one").l1


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
    result = fit_aim(X, [4] * 4, rho, np.random.default_rng(0), policy=ROUNDS_POLICY)
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
    _assert_ran_within(model, spent)
    assert all(set(s) <= set(domain) for s in model.selected_)
    # 300 rows of 4 columns of 4 levels: the rounds run only at the largest
    # budget (below it the split rule gives everything to the 1-way marginals).
    assert bool(model.selected_) == (epsilon >= 10)


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
    model = DPSyntheticData(epsilon=10.0, domain=domain, random_state=0, verbose=1)
    model.fit(X)
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
            policy=ROUNDS_POLICY,
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
        policy=FAST_POLICY,
        compress=True,
    )
    assert result.model.compression[0].n_levels < 12
    assert set(result.model.compression[0].merged) >= set(range(4, 12))
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
        merged[relation] = model._model.compression[0].merged.size
    assert merged["replace-one"] == 0
    assert merged["add-remove"] >= 9
    forced = DPSyntheticData(domain=domain, compress=True, random_state=0).fit(X)
    assert forced._model.compression[0].merged.size >= 9


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
            policy=FAST_POLICY,
            compress="auto",
            neighbouring="add-remove",
        )
        merged[n] = result.model.compression[0].merged.size
        std_share[n] = result.measurements[0].std / result.n_rows
        assert result.rho_used == pytest.approx(rho, rel=1e-9)
    assert np.max(std_share[300]) > 1 / 200 > np.max(std_share[20_000])
    assert merged[300] == 0  # no level merged at high noise
    assert merged[20_000] >= 6  # the six empty levels merged at low noise


def test_coarse_groups_cut_the_kept_ordered_levels_into_runs():
    noisy = np.array([0.0, 50, 60, 70, 80, 90, 100, 110, 0, 0, 40])
    compression = compress_column(
        noisy, 5.0, 3.0, ordered=10, bandwidth=AIMPolicy().smooth_bins
    )
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
        policy=FAST_POLICY,
        neighbouring=neighbouring,
        ordered=[40, 0, 0],
    )
    assert any(m.groups is not None for m in result.measurements)
    assert result.rho_used == pytest.approx(rho, rel=1e-9)
    n_rounds = len(result.selected)
    # The 1-way events (one, or one per column when their shares follow
    # their levels; under add-remove also the rows' noisy count), then two
    # per round.
    one_way = len(result.events) - (neighbouring == "add-remove") - 2 * n_rounds
    assert 1 <= one_way <= len(sizes)
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
            policy=FAST_POLICY,
            ordered=[40, 0],
        )
        coarse[rho] = any(m.groups is not None for m in result.measurements)
    assert coarse == {0.02: True, 1e4: False}


@pytest.mark.parametrize(
    "policy",
    [
        ROUNDS_POLICY,
        AIMPolicy(4, 0.5, 10, 20, min_signal=None),
        AIMPolicy(8, min_signal=None),
    ],
)
def test_the_first_noise_follows_the_policy(policy):
    """Without the split rule, the 1-way noise is the first rounds' noise."""
    X, _ = _chain(300)
    rho = 0.2
    result = fit_aim(X, [4] * 4, rho, np.random.default_rng(0), policy=policy)
    rounds = policy.rounds_per_column * 4
    expected = np.sqrt(rounds / (2 * policy.measure_share * rho))
    assert result.events[0] == GaussianEvent(expected, count=4)
    assert result.rho_used == pytest.approx(rho, rel=1e-9)


def test_estimator_takes_a_policy_variant():
    """A benchmark passes a variant on an instance; the spend still meets the target."""
    X, domain = _chain(300)
    model = DPSyntheticData(epsilon=1.0, domain=domain, random_state=0)
    model._aim_policy = AIMPolicy(
        rounds_per_column=2, round_iter=10, final_iter=20, min_signal=None
    )
    model.fit(X)
    rho = 1 / (2 * model.noise_multiplier_**2)
    first = model.events_[0]
    assert first.noise_multiplier == pytest.approx(np.sqrt(2 * 4 / (2 * 0.9 * rho)))
    assert 0.97 <= model.privacy_spent_.epsilon <= 1.0
    assert DPSyntheticData._aim_policy == AIMPolicy()

"""Tests of DPSaddlePointClassifier and the private gradient descent-ascent solver."""

import itertools
import warnings

import numpy as np
import pytest
import sklearn
from scipy.optimize import minimize
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdp._solvers import _saddle as saddle
from skdp._solvers._rows import row_norms, row_projection, row_scores
from skdp._solvers._saddle import (
    _group_loss_sums,
    _second_moment,
    _weighted_gradient,
    make_saddle_plan,
    project_capped_simplex,
)
from skdp.accounting import DEFAULT_ORDERS, GaussianEvent, account, event_rdp
from skdp.exceptions import PrivacyLeakWarning
from skdp.fairness import DPSaddlePointClassifier
from skdp.linear_model import DPLogisticRegression


@parametrize_with_checks(
    [
        DPSaddlePointClassifier(random_state=0),
        DPSaddlePointClassifier(epsilon=1000.0, fit_intercept=False, random_state=0),
        DPSaddlePointClassifier(neighbouring="add-remove", delta=1e-5, random_state=0),
        DPSaddlePointClassifier(solver="mirror", random_state=0),
        DPSaddlePointClassifier(
            solver="mirror", epsilon=10.0, fit_intercept=False, random_state=0
        ),
    ],
    expected_failed_checks=lambda est: (
        {
            "check_classifiers_train": "one pass of private mirror descent at "
            "epsilon=1 on the check's ~100 rows stays below its 0.83 training "
            "accuracy (batches of one row; docs/fairness.md)"
        }
        if est.solver == "mirror" and est.epsilon <= 1
        else {}
    ),
)
def test_sklearn_conformance(estimator, check):
    check(estimator)


def two_rule_data(n=2000, minority=0.2, seed=0):
    """Group 0 is labelled by x0 > 0, group 1 (a minority) by x1 > 0."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2)) / np.sqrt(2)
    g = (rng.random(n) < minority).astype(int)
    y = np.where(g == 0, X[:, 0] > 0, X[:, 1] > 0).astype(int)
    return X, y, g


def group_losses(scores, y, g, n_groups=2):
    losses = np.logaddexp(0.0, scores) - y * scores
    return np.array([losses[g == k].mean() for k in range(n_groups)])


def nonprivate_minimax(X, y, g, alpha):
    """min_w max_k L_k(w) + alpha/2 ||w||^2 as a smooth constrained problem."""
    A = np.column_stack([X, np.ones(len(X))])

    def gap(v):
        w = v[:-1]
        return v[-1] - group_losses(A @ w, y, g) - alpha / 2 * w @ w

    res = minimize(
        lambda v: v[-1],
        np.r_[np.zeros(A.shape[1]), 1.0],
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": gap}],
        options={"maxiter": 500, "ftol": 1e-12},
    )
    assert res.success
    return res.x[-1]


def saddle_plan(**overrides):
    """A small public plan: "auto" steps and clip, no penalty; overridable."""
    params = dict(
        n_samples=100,
        n_groups=2,
        row_norm=2.0,
        n_iter=40,
        learning_rate="auto",
        eta_p="auto",
        l2=0.0,
        clip_norm="auto",
        max_loss=2.0,
    )
    params.update(overrides)
    return make_saddle_plan(**params)


# --- privacy --------------------------------------------------------------------


@pytest.mark.parametrize(
    "epsilon, n, n_groups, n_iter",
    [(0.3, 500, 2, 50), (1.0, 2000, 2, 100), (4.0, 1000, 3, 200), (1.0, 800, 1, 80)],
)
def test_spend_meets_target(epsilon, n, n_groups, n_iter):
    est = DPSaddlePointClassifier(epsilon=epsilon, n_iter=n_iter)
    z, spent, delta = est.privacy_plan(n, n_groups=n_groups)
    assert 0.97 * epsilon <= spent.epsilon <= epsilon
    assert spent.delta == delta
    assert spent.neighbouring == "replace-one"


def test_fit_spend_equals_plan():
    X, y, g = two_rule_data(n=600)
    est = DPSaddlePointClassifier(epsilon=2.0, groups=[0, 1], n_iter=30, random_state=0)
    est.fit(X, y, sensitive_features=g)
    z, spent, _ = est.privacy_plan(600)
    assert est.noise_multiplier_ == z
    assert est.privacy_spent_.epsilon == pytest.approx(spent.epsilon)
    assert 0.97 * 2.0 <= est.privacy_spent_.epsilon <= 2.0


@pytest.mark.parametrize("neighbouring", ["replace-one", "add-remove"])
@pytest.mark.parametrize("precondition", [False, True])
@pytest.mark.parametrize("n_groups", [1, 2, 5])
def test_budget_split_costs_one_gaussian(n_groups, precondition, neighbouring):
    # Shares add to one: the run costs what one Gaussian with multiplier z costs.
    plan = saddle_plan(
        precondition=precondition,
        n_groups=n_groups,
        row_norm=np.sqrt(2.0),
        n_iter=37,
        neighbouring=neighbouring,
    )
    # Under add/remove n is private: the counts are released even for one group.
    assert plan.releases_counts == (n_groups > 1 or neighbouring == "add-remove")
    assert (plan.shares[0] > 0) == plan.releases_counts
    z = 3.0
    total = sum(event_rdp(e, DEFAULT_ORDERS, "replace-one")[0] for e in plan.events(z))
    single = event_rdp(GaussianEvent(z), DEFAULT_ORDERS, "replace-one")[0]
    np.testing.assert_allclose(total, single, rtol=1e-12)
    assert account(plan.events(z), 1e-5).epsilon == pytest.approx(
        account(GaussianEvent(z), 1e-5).epsilon
    )


@pytest.mark.parametrize("learning_rate", ["auto", 0.3])
@pytest.mark.parametrize("z", [0.01, 2.0, 50.0])
def test_step_shortened_when_rows_weigh_more(learning_rate, z):
    # Where the noise term of the "auto" step binds, the step times the
    # largest row weight (the noise the step puts into the model) never
    # exceeds 1.5 times the planned one, step_size / n; the smoothness term
    # is never exceeded; a fixed step is used as given.
    n = 200
    plan = saddle_plan(
        n_samples=n,
        n_groups=3,
        row_norm=np.sqrt(2.0),
        n_iter=50,
        learning_rate=learning_rate,
        weight_cap=3.0,
    )
    base = plan.step_size(z)
    smooth = 4.0 / plan.smoothness
    for max_weight in [0.5 / n, 1.0 / n, 1.5 / n, 2.0 / n, 3.0 / n, 0.4]:
        step = plan.step_at(z, max_weight)
        if learning_rate != "auto":
            assert step == base == 0.3
            continue
        assert step <= min(base, smooth) + 1e-15
        if max_weight <= 1.5 / n:
            assert step == base
        elif step < smooth:
            assert step * max_weight <= 1.5 * base / n * (1 + 1e-12)
    if learning_rate == "auto" and z == 0.01:
        assert plan.step_at(z, 3.0 / n) == base == smooth  # noise term slack
    if learning_rate == "auto" and z == 50.0:
        assert plan.step_at(z, 3.0 / n) == pytest.approx(base / 2)


def z_at_run_noise(run_noise, n):
    """The noise multiplier whose public run noise 2 z / (sqrt(g) n) is this."""
    return run_noise * np.sqrt(saddle._GRADIENT_SHARE) * n / 2.0


def test_tail_fraction_grows_with_the_run_noise():
    # Half the iterates are averaged at a small run noise, all of them at a
    # large one, monotone in between, whatever the number of steps; the run
    # noise is the public 2 z / (sqrt(gradient share) n).
    n = 10_000
    tails = []
    for run_noise in [1e-6, 1.05e-3, 1.5e-3, 2.5e-3, 4e-3, 1.0]:
        z = z_at_run_noise(run_noise, n)
        plans = [saddle_plan(n_samples=n, n_iter=T) for T in (10, 1000)]
        assert plans[1].run_noise(z) == pytest.approx(run_noise)
        assert plans[0].tail_fraction(z) == pytest.approx(plans[1].tail_fraction(z))
        tails.append(plans[1].tail_fraction(z))
    assert tails[0] == tails[1] == 0.5  # exactly: the earlier runs unchanged
    assert tails[-2] == pytest.approx(1.0) and tails[-1] == 1.0
    assert np.all(np.diff(tails[1:-1]) > 0)


def test_walk_radius_grows_as_the_run_noise_falls():
    # The "auto" step's noise-walk radius is 3 at a large run noise
    # 2 z / (sqrt(gradient share) n), 6 at a small one, monotone in between,
    # and does not depend on the number of steps (the per-step noise grows
    # as sqrt(T), the run noise does not).
    n = 10_000
    radii = []
    for run_noise in [1e-2, 2.2e-4, 1.8e-4, 1.5e-4, 1.25e-4, 1e-6]:
        z = z_at_run_noise(run_noise, n)
        by_steps = {
            T: saddle_plan(n_samples=n, n_iter=T).walk_radius(z) for T in (10, 1000)
        }
        assert by_steps[10] == pytest.approx(by_steps[1000])
        radii.append(by_steps[1000])
    assert radii[0] == radii[1] == pytest.approx(3.0)
    assert radii[-2] == radii[-1] == pytest.approx(6.0)
    assert np.all(np.diff(radii[1:-1]) > 0)
    # The "auto" step uses it: twice the radius, twice the noise term.
    plan = saddle_plan(n_samples=n, n_iter=1000)
    for run_noise, radius in [(1e-2, 3.0), (1e-6, 6.0)]:
        z = z_at_run_noise(run_noise, n)
        noise_term = plan.walk_step(
            z, 1.0 / n, cap=np.inf, radius=radius, dimension=plan.n_params
        )
        assert plan.step_size(z) == pytest.approx(
            min(4.0 / plan.smoothness, noise_term)
        )


_ENUMERATED_XS = [(0.0, 0.0), (1.0, 0.0), (-3.0, 2.0), (0.5, -0.5)]  # one projected
_ENUMERATED_MODELS = [
    np.zeros(3),
    np.array([4.0, -3.0, 1.0]),
    np.array([-8.0, 8.0, -5.0]),
]
_ENUMERATED_WEIGHTINGS = [
    np.array([0.5, 0.5]),
    np.array([1.0, 0.2]),
    np.array([0.1, 0.7]),
]


def _releases(data, w, v, plan, feature_norm):
    """The data-dependent parts of one step on records ``(x, y, group)``:
    the weighted gradient sum per unit of ``max_k v_k``, the loss sums and
    the counts (two groups, intercept, rows projected onto ``feature_norm``)."""
    X = np.array([r[0] for r in data], dtype=float).reshape(-1, 2)
    y = np.array([r[1] for r in data], dtype=float)
    codes = np.array([r[2] for r in data], dtype=np.intp)
    raw = np.linalg.norm(X, axis=1)
    scale = np.minimum(1.0, feature_norm / np.maximum(raw, 1e-300))
    norm = np.sqrt((raw * scale) ** 2 + 1.0)
    scores = row_scores(w, X, scale, True)
    grad = _weighted_gradient(scores, X, y, v[codes], scale, norm, plan, True)
    losses = _group_loss_sums(scores, y, codes, plan)
    return grad / v.max(), losses, np.bincount(codes, minlength=2)


_ENUMERATED_ROW_NORM = 1.0
_ENUMERATED_MAX_LOSS = 1.5


def _enumeration_plan(clip_norm, neighbouring="replace-one"):
    """One-step plan for the enumerated records (intercept column included)."""
    return saddle_plan(
        n_samples=3,
        row_norm=np.sqrt(_ENUMERATED_ROW_NORM**2 + 1.0),
        n_iter=1,
        clip_norm=clip_norm,
        max_loss=_ENUMERATED_MAX_LOSS,
        neighbouring=neighbouring,
    )


def _assert_within_and_attained(worst, bounds, clip_norm):
    """Worst changes within the bounds; counts and, with an active clip,
    gradients attain theirs; the loss sums come within 10% of theirs."""
    assert np.all(worst <= bounds * (1 + 1e-12))
    assert worst[2] == pytest.approx(bounds[2])
    if clip_norm != "auto":
        assert worst[0] == pytest.approx(bounds[0], rel=1e-9)
    assert worst[1] >= 0.9 * bounds[1]


@pytest.mark.parametrize("clip_norm", ["auto", 0.1])
def test_sensitivity_by_enumeration(clip_norm):
    """Every replace-one neighbour of every 3-record data set moves the releases
    by at most the stated L2 sensitivities (and the gradient bound is tight):
    the weighted gradient sum by ``2 C max_k v_k`` for every group weighting
    ``v``, the loss sums by ``sqrt(2) max_loss``, the counts by ``sqrt(2)``."""
    plan = _enumeration_plan(clip_norm)
    records = list(itertools.product(_ENUMERATED_XS, (0, 1), (0, 1)))
    worst = np.zeros(3)
    for w in _ENUMERATED_MODELS:
        for v in _ENUMERATED_WEIGHTINGS:
            for base in itertools.product(records, repeat=2):
                # Releases of (base, r) for every last record r; all pairs r, r2.
                outs = [
                    _releases((*base, r), w, v, plan, _ENUMERATED_ROW_NORM)
                    for r in records
                ]
                for part in range(3):
                    flat = np.array([np.ravel(o[part]) for o in outs], dtype=float)
                    diffs = np.linalg.norm(flat[:, None] - flat[None, :], axis=2)
                    worst[part] = max(worst[part], diffs.max())
    bounds = np.array([plan.gradient_sensitivity, plan.loss_sensitivity, np.sqrt(2)])
    _assert_within_and_attained(worst, bounds, clip_norm)


@pytest.mark.parametrize("clip_norm", ["auto", 0.1])
def test_add_remove_sensitivity_by_enumeration(clip_norm):
    """Adding one record to every data set of 0 to 2 records moves the releases
    by at most the add/remove sensitivities, half the replace-one ones or
    less: the weighted gradient sum by ``C max_k v_k``, the loss sums by
    ``max_loss`` and the counts by 1 (all attained with an active clip)."""
    plan = _enumeration_plan(clip_norm, "add-remove")
    replace_one = _enumeration_plan(clip_norm)
    assert plan.gradient_sensitivity == replace_one.gradient_sensitivity / 2
    assert plan.loss_sensitivity == replace_one.loss_sensitivity / np.sqrt(2)
    assert plan.count_sensitivity == 1.0
    records = list(itertools.product(_ENUMERATED_XS, (0, 1), (0, 1)))
    bases = [()] + [(r,) for r in records] + list(itertools.product(records, repeat=2))
    worst = np.zeros(3)
    for w in _ENUMERATED_MODELS:
        for v in _ENUMERATED_WEIGHTINGS:
            for base in bases:
                before = _releases(base, w, v, plan, _ENUMERATED_ROW_NORM)
                for r in records:
                    after = _releases((*base, r), w, v, plan, _ENUMERATED_ROW_NORM)
                    for part in range(3):
                        change = np.linalg.norm(
                            np.ravel(after[part]) - np.ravel(before[part])
                        )
                        worst[part] = max(worst[part], change)
    bounds = np.array([plan.gradient_sensitivity, plan.loss_sensitivity, 1.0])
    _assert_within_and_attained(worst, bounds, clip_norm)


@pytest.mark.parametrize("neighbouring", ["replace-one", "add-remove"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_second_moment_sensitivity_by_enumeration(fit_intercept, neighbouring):
    """Replacing one record moves the upper triangle (diagonal included) of the
    released ``sum_i a_i a_i^T`` of the projected rows by at most
    ``sqrt(2) R^2`` (attained without an intercept by orthogonal rows of norm
    ``R``); adding one row ``a`` moves it by that of ``a a^T``, of norm at most
    ``R^2`` (attained by a row of norm ``R`` on one axis)."""
    row_norm = np.sqrt(3.0)
    plan = saddle_plan(
        n_samples=3,
        row_norm=row_norm,
        n_iter=1,
        max_loss=1.0,
        precondition=True,
        neighbouring=neighbouring,
    )
    grid = [-3.0, -1.0, 0.0, 0.5, 1.0, 2.0]
    xs = np.array(list(itertools.product(grid, repeat=2)))
    scale, _ = row_projection(row_norms(xs), row_norm, fit_intercept)
    upper = np.triu_indices(2 + int(fit_intercept))
    base = np.array([[1.0, -2.0], [0.5, 0.5]])
    base_scale, _ = row_projection(row_norms(base), row_norm, fit_intercept)
    outs = []
    for x, sc in zip(xs, scale, strict=True):
        moment = _second_moment(
            np.vstack([base, x]), np.r_[base_scale, sc], fit_intercept
        )
        np.testing.assert_allclose(moment, moment.T)
        outs.append(moment[upper])
    outs = np.array(outs)
    if neighbouring == "replace-one":
        worst = np.linalg.norm(outs[:, None] - outs[None, :], axis=2).max()
        expected = np.sqrt(2.0) * row_norm**2
    else:
        before = _second_moment(base, base_scale, fit_intercept)[upper]
        worst = np.linalg.norm(outs - before, axis=1).max()
        expected = row_norm**2
    bound = plan.second_moment_sensitivity
    assert bound == pytest.approx(expected)
    assert worst <= bound * (1 + 1e-12)
    if not fit_intercept:  # (row_norms is not exact to the last bit)
        assert worst == pytest.approx(bound, rel=1e-6)


@pytest.mark.parametrize("n_groups", [1, 2])
def test_add_remove_run_reads_only_the_released_size(n_groups):
    # Under add/remove n is private: the run must not read the plan's n, only
    # the released counts. Plans that differ only in n give the same run.
    X, y, g = two_rule_data(n=400)
    codes = g if n_groups == 2 else np.zeros_like(g)
    runs = []
    for n_placeholder in (1, 400, 10**6):
        plan = saddle_plan(
            n_samples=n_placeholder,
            n_groups=n_groups,
            row_norm=np.sqrt(1.5),
            n_iter=25,
            precondition=True,
            momentum=0.9,
            neighbouring="add-remove",
        )
        w, p, events = saddle.run_saddle_gda(
            X,
            y,
            codes,
            plan,
            3.0,
            row_norm=np.sqrt(1.5),
            fit_intercept=True,
            rng=np.random.default_rng(5),
        )
        runs.append((w, p, events))
    for w, p, events in runs[1:]:
        np.testing.assert_array_equal(w, runs[0][0])
        np.testing.assert_array_equal(p, runs[0][1])
        assert events == runs[0][2]
    # ... whereas under replace-one n is public and the step reads it.
    plans = [
        saddle_plan(n_samples=n, n_groups=n_groups, row_norm=np.sqrt(1.5), n_iter=25)
        for n in (10, 400)
    ]
    assert plans[0].step_size(3.0) < plans[1].step_size(3.0)


def test_add_remove_halves_the_noise_at_the_same_epsilon():
    X, y, g = two_rule_data(n=600)
    fits = {}
    for relation in ("replace-one", "add-remove"):
        est = DPSaddlePointClassifier(
            epsilon=1.0,
            delta=1e-5,
            groups=[0, 1],
            classes=[0, 1],
            n_iter=30,
            neighbouring=relation,
            random_state=0,
        ).fit(X, y, sensitive_features=g)
        assert est.privacy_spent_.neighbouring == relation
        assert 0.97 <= est.privacy_spent_.epsilon <= 1.0
        z, spent, delta = est.privacy_plan(600)
        assert (est.noise_multiplier_, delta) == (z, 1e-5)
        assert spent.neighbouring == relation
        fits[relation] = est
    # Same events, same multiplier; the sensitivities, hence the stds, halve.
    z = fits["add-remove"].noise_multiplier_
    assert z == fits["replace-one"].noise_multiplier_
    stds = {
        relation: saddle_plan(neighbouring=relation).noise_stds(z) for relation in fits
    }
    assert stds["add-remove"][2] == pytest.approx(stds["replace-one"][2] / 2)
    assert stds["add-remove"][1] == pytest.approx(stds["replace-one"][1] / np.sqrt(2))
    assert stds["add-remove"][0] == pytest.approx(stds["replace-one"][0] / np.sqrt(2))


@pytest.mark.parametrize("z", [1e-4, 2.0, 50.0])
def test_preconditioned_step_keeps_walk(z):
    # The preconditioned "auto" step keeps the noise walk lr sqrt(T tr) s / n
    # (second-moment norm, row weights 1 / n) within its radius, never exceeds
    # its cap, and shortens by 1.5 / (n max_k v_k) for heavier rows.
    n, trace = 500, 7.0

    def preconditioned_plan(n_params):
        return saddle_plan(n_samples=n, n_params=n_params, precondition=True)

    plan = preconditioned_plan(3)
    assert plan.precondition_share == saddle._PRECONDITION_SHARE
    _, _, std = plan.noise_stds(z)
    base = saddle._preconditioned_step(plan, z, 1.0 / n, trace)
    assert base <= saddle._PRECONDITIONED_STEP
    walk = base * np.sqrt(plan.n_iter * trace) * std / n
    assert walk <= saddle._PRECONDITIONED_RADIUS * (1 + 1e-12)
    heavy = saddle._preconditioned_step(plan, z, 3.0 / n, trace)
    if base < saddle._PRECONDITIONED_STEP:
        assert heavy == pytest.approx(base / 2)
    if z == 1e-4:
        assert base == heavy == saddle._PRECONDITIONED_STEP
    # Above the size limit, no release and the identity geometry.
    big = preconditioned_plan(saddle._PRECONDITION_MAX_PARAMS + 1)
    assert (
        big.precondition_share == 0.0 and len(big.events(z)) == len(plan.events(z)) - 1
    )


@pytest.mark.parametrize("z", [1e-4, 2.0, 50.0])
@pytest.mark.parametrize("precondition", [False, True])
def test_momentum_shortens_only_the_noise_term(z, precondition):
    # Momentum m lets each step count up to 1 / (1 - m) times: the noise term
    # of the "auto" step is scaled by 1 - m, the smoothness cap is not, and a
    # fixed step is used as given. The privacy events do not change.
    n, trace = 300, 5.0

    def plan_with(momentum, learning_rate="auto"):
        return saddle_plan(
            n_samples=n,
            learning_rate=learning_rate,
            n_params=3,
            precondition=precondition,
            momentum=momentum,
        )

    def step(plan):
        if precondition:
            return saddle._preconditioned_step(plan, z, 1.0 / n, trace)
        return plan.step_size(z)

    plain, heavy = plan_with(0.0), plan_with("auto")
    m = saddle._AUTO_MOMENTUM
    assert heavy.momentum == m > 0
    cap = saddle._PRECONDITIONED_STEP if precondition else 4.0 / plain.smoothness
    noise_term = plain.walk_step(
        z,
        1.0 / n,
        cap=np.inf,
        radius=saddle._PRECONDITIONED_RADIUS
        if precondition
        else saddle._NOISE_WALK_RADIUS,
        dimension=trace if precondition else plain.n_params,
    )
    assert step(plain) == pytest.approx(min(cap, noise_term))
    assert step(heavy) == pytest.approx(min(cap, (1 - m) * noise_term))
    if z == 1e-4:
        assert step(heavy) == step(plain) == cap  # the smoothness binds
    if z == 50.0:
        assert step(heavy) == pytest.approx((1 - m) * step(plain))  # the noise does
    assert plan_with(m, learning_rate=0.3).step_size(z) == 0.3
    assert heavy.events(z) == plain.events(z)


def test_momentum_converges_faster_on_an_ill_conditioned_loss():
    # With almost no noise the step is capped by the worst-case smoothness;
    # a minority labelled by a feature of small range needs a large
    # coefficient, which plain steps reach slowly. Heavy-ball steps get
    # within 0.002 of the exact minimax objective in 200 steps; plain steps
    # stay more than 10 times further. Same noise, same spend.
    X, y, g = two_rule_data(seed=0)
    X = X * np.array([1.0, 0.2])
    exact = nonprivate_minimax(X, y, g, alpha=1e-4)
    gaps, spends = [], []
    for momentum in [0.0, 0.9]:
        fit = DPSaddlePointClassifier(
            epsilon=1e6, groups=[0, 1], n_iter=200, momentum=momentum, random_state=0
        ).fit(X, y, sensitive_features=g)
        w = np.r_[fit.coef_.ravel(), fit.intercept_]
        worst = group_losses(fit.decision_function(X), y, g).max()
        gaps.append(worst + 1e-4 / 2 * w @ w - exact)
        spends.append(fit.privacy_spent_.epsilon)
    assert gaps[1] < 0.002 and gaps[1] < gaps[0] / 10
    assert spends[0] == spends[1]


@pytest.mark.parametrize("n_groups", [1, 3])
def test_preconditioned_fit_spends_its_target(n_groups):
    # precondition=True adds one release and takes its share from the
    # gradients: same noise multiplier, same spend, within the target.
    X, y, g = two_rule_data(n=400)
    g = g if n_groups > 1 else np.zeros_like(g)
    g = np.where(np.arange(g.size) % 7 == 0, 2, g) if n_groups == 3 else g
    groups = list(range(n_groups))
    plain = DPSaddlePointClassifier(epsilon=1.0, groups=groups, n_iter=30)
    pre = DPSaddlePointClassifier(
        epsilon=1.0, groups=groups, n_iter=30, precondition=True, random_state=0
    )
    pre.fit(X, y, sensitive_features=g)
    plain.fit(X, y, sensitive_features=g)
    assert pre.noise_multiplier_ == pytest.approx(plain.noise_multiplier_)
    assert pre.privacy_spent_.epsilon == pytest.approx(plain.privacy_spent_.epsilon)
    assert pre.privacy_spent_.epsilon <= 1.0
    assert np.all(np.isfinite(pre.coef_))


# --- utility --------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_worst_group_loss_beats_erm_and_nears_minimax(seed):
    X, y, g = two_rule_data(seed=seed)
    eps = 20.0
    fair = DPSaddlePointClassifier(epsilon=eps, groups=[0, 1], random_state=seed)
    fair.fit(X, y, sensitive_features=g)
    erm = DPLogisticRegression(epsilon=eps, random_state=seed).fit(X, y)
    worst_fair = group_losses(fair.decision_function(X), y, g).max()
    worst_erm = group_losses(erm.decision_function(X), y, g).max()
    minimax = nonprivate_minimax(X, y, g, alpha=fair.alpha)
    assert worst_fair < worst_erm - 0.2
    assert worst_fair < minimax + 0.05
    # The adversary leans towards neither group at the (balanced) saddle point.
    assert np.all(np.abs(fair.group_weights_ - 0.5) < 0.2)


def test_without_groups_is_private_erm():
    X, y, _ = two_rule_data(n=500)
    est = DPSaddlePointClassifier(epsilon=5.0, random_state=0).fit(X, y)
    assert est.groups_.tolist() == [None]
    assert est.group_weights_.tolist() == [1.0]
    assert est.score(X, y) > 0.7
    assert list(est.group_report(X, y)) == [None]


def test_empty_declared_group_is_handled():
    X, y, g = two_rule_data(n=500)
    est = DPSaddlePointClassifier(epsilon=5.0, groups=[0, 1, 2], random_state=0)
    est.fit(X, y, sensitive_features=g)
    assert est.group_weights_.shape == (3,)
    assert np.all(np.isfinite(est.coef_))
    assert set(est.group_report(X, y, g)) == {0, 1}


# --- public inputs, errors, state -------------------------------------------------


def test_inferred_groups_warn():
    X, y, g = two_rule_data(n=300)
    labels = np.where(g == 1, "b", "a")
    with pytest.warns(PrivacyLeakWarning, match="groups=None"):
        est = DPSaddlePointClassifier(n_iter=10, random_state=0).fit(
            X, y, sensitive_features=labels
        )
    assert est.groups_.tolist() == ["a", "b"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DPSaddlePointClassifier(groups=["b", "a"], classes=[0, 1], n_iter=10).fit(
            X, y, sensitive_features=labels
        )


@pytest.mark.parametrize(
    "kwargs, sf_fn, match",
    [
        ({"groups": [0]}, lambda g: g, r"not in the declared groups"),
        ({"groups": [0, 1]}, lambda g: g[:-1], r"one group label per row"),
        ({"groups": [0, 1]}, lambda g: np.where(g == 1, np.nan, 0.0), r"missing"),
        (
            {"groups": ["a", "b"]},
            lambda g: np.array(["a"] * (g.size - 1) + [None], dtype=object),
            r"missing",
        ),
        ({"groups": [0, 1]}, lambda g: None, r"no sensitive_features"),
        ({"groups": [0, 0, 1]}, lambda g: g, r"duplicate"),
        ({"groups": [0, 1]}, lambda g: np.column_stack([g, g]), r"one-dimensional"),
        # add/remove: an explicit delta (gda), and never the mirror solver.
        ({"neighbouring": "add-remove"}, lambda g: g, r"add-remove"),
        ({"neighbouring": "add-remove", "delta": 1e-6}, lambda g: g, "."),
    ],
)
@pytest.mark.parametrize("solver", ["gda", "mirror"])
def test_errors_leave_state_unchanged(kwargs, sf_fn, match, solver):
    X, y, g = two_rule_data(n=200)
    est = DPSaddlePointClassifier(
        n_iter=10, random_state=0, groups=[0, 1], solver=solver
    )
    est.fit(X, y, sensitive_features=g)
    before = {k: np.copy(v) for k, v in vars(est).items() if k.endswith("_")}
    est.set_params(**kwargs)
    if kwargs.get("delta") and solver == "gda":
        est.fit(X[:100] * 3, y[:100], sensitive_features=sf_fn(g[:100]))  # valid
        return
    with pytest.raises(ValueError, match=match):
        est.fit(X[:100] * 3, y[:100], sensitive_features=sf_fn(g[:100]))
    for key, value in before.items():
        np.testing.assert_array_equal(getattr(est, key), value)


def test_multiclass_refused():
    X, _, g = two_rule_data(n=90)
    y = np.arange(90) % 3
    with pytest.raises(ValueError, match="Only binary classification"):
        DPSaddlePointClassifier(groups=[0, 1]).fit(X, y, sensitive_features=g)


@pytest.mark.parametrize("solver", ["gda", "mirror"])
def test_group_report_values(solver):
    X, y, g = two_rule_data(n=400)
    labels = np.array(["no", "yes"])[y]
    est = DPSaddlePointClassifier(
        epsilon=10.0, groups=[1, 0], random_state=0, solver=solver
    )
    est.fit(X, labels, sensitive_features=g)
    report = est.group_report(X, labels, g)
    assert list(report) == [1, 0]
    scores = est.decision_function(X)
    for k in (0, 1):
        mask = g == k
        proba = est.predict_proba(X[mask])[:, 1]
        expected_loss = -np.mean(
            np.where(y[mask] == 1, np.log(proba), np.log1p(-proba))
        )
        assert report[k]["n"] == mask.sum()
        assert report[k]["log_loss"] == pytest.approx(expected_loss, rel=1e-9)
        assert report[k]["accuracy"] == pytest.approx(
            np.mean(est.predict(X[mask]) == labels[mask])
        )
        assert report[k]["log_loss"] == pytest.approx(
            group_losses(scores, y, g)[k], rel=1e-9
        )
    with pytest.raises(ValueError, match="not in the declared groups"):
        est.group_report(X, labels, g + 5)
    with pytest.raises(ValueError, match="pass sensitive_features"):
        est.group_report(X, labels)


# --- metadata routing ---------------------------------------------------------------


def test_metadata_routing_pipeline_and_search():
    X, y, g = two_rule_data(n=600)
    with sklearn.config_context(enable_metadata_routing=True):
        clf = DPSaddlePointClassifier(
            epsilon=10.0, groups=[0, 1], n_iter=30, random_state=0
        ).set_fit_request(sensitive_features=True)
        pipe = make_pipeline(MaxAbsScaler(), clf).fit(X, y, sensitive_features=g)
        fitted = pipe[-1]
        assert fitted.groups_.tolist() == [0, 1]
        assert fitted.group_weights_[1] != 0.5
        search = GridSearchCV(pipe, {"dpsaddlepointclassifier__n_iter": [10, 30]}, cv=2)
        search.fit(X, y, sensitive_features=g)
        assert search.best_estimator_[-1].groups_.tolist() == [0, 1]
        # Without the keyword routed, the estimator would have seen one group.
        with pytest.raises(ValueError, match="no sensitive_features"):
            make_pipeline(
                MaxAbsScaler(),
                DPSaddlePointClassifier(groups=[0, 1]).set_fit_request(
                    sensitive_features=False
                ),
            ).fit(X, y)


@pytest.mark.parametrize("seed", range(5))
def test_capped_simplex_projection_is_the_kl_projection(seed):
    # The KL projection onto {q <= caps, sum q = 1} minimises KL(q || p); check
    # against a generic constrained solver and the structure q = min(c, tau p).
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(5, 0.3))
    caps = np.minimum(1.0, 3.0 * rng.dirichlet(np.ones(5)))
    q = project_capped_simplex(p, caps)
    assert q.sum() == pytest.approx(1.0)
    assert np.all(q <= caps + 1e-12)
    res = minimize(
        lambda r: np.sum(r * np.log(np.maximum(r, 1e-300) / p)),
        np.full(5, 0.2),
        bounds=[(1e-12, c) for c in caps],
        constraints=[{"type": "eq", "fun": lambda r: r.sum() - 1.0}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    np.testing.assert_allclose(q, res.x, atol=1e-5)
    free = q < caps - 1e-12
    if free.sum() > 1:
        ratios = q[free] / p[free]
        np.testing.assert_allclose(ratios, ratios[0])


def test_weight_cap_bounds_the_adversary():
    X, y, g = two_rule_data(n=2000)
    # Make group 1 a 10% minority and give it noisy labels: it is the worst group.
    keep = (g == 0) | (np.arange(g.size) % 3 == 0)
    X, y, g = X[keep], y[keep], g[keep]
    share = np.mean(g == 1)
    est = DPSaddlePointClassifier(
        epsilon=50.0, groups=[0, 1], n_iter=200, weight_cap=2.0, random_state=0
    ).fit(X, y, sensitive_features=g)
    # Noisy counts at epsilon 50 are within a few rows of the truth.
    assert est.group_weights_[1] <= 2.0 * share * 1.05
    uncapped = DPSaddlePointClassifier(
        epsilon=50.0, groups=[0, 1], n_iter=200, weight_cap=None, random_state=0
    ).fit(X, y, sensitive_features=g)
    assert uncapped.group_weights_[1] > 2.0 * share * 1.05

"""Tests of the private gradient descent-ascent solver (skdp._solvers._gda)."""

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from skdp._solvers._gda import (
    GDAPolicy,
    GDASolver,
    make_gda_plan,
    make_gda_schedule,
    project_capped_simplex,
)
from skdp._solvers._gda._releases import (
    ProjectedRows,
    group_loss_sums,
    second_moment,
    weighted_gradient,
)
from skdp._solvers._rows import row_norms, row_projection, row_scores
from skdp._solvers._saddle import SaddleProblem, SaddleRows
from skdp.accounting import (
    DEFAULT_ORDERS,
    GaussianEvent,
    account,
    event_rdp,
    logistic_constants,
)

POLICY = GDAPolicy()


def two_rule_data(n=2000, minority=0.2, seed=0):
    """Group 0 is labelled by x0 > 0, group 1 (a minority) by x1 > 0."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2)) / np.sqrt(2)
    g = (rng.random(n) < minority).astype(int)
    y = np.where(g == 0, X[:, 0] > 0, X[:, 1] > 0).astype(int)
    return X, y, g


def gda_problem(**overrides):
    """A small public problem: "auto" steps and clip, no penalty; overridable.

    No intercept, so ``row_norm`` bounds the rows fed to the loss and
    ``n_features`` is the number of coefficients.
    """
    params = dict(
        n_samples=100,
        n_groups=2,
        n_features=1,
        fit_intercept=False,
        neighbouring="replace-one",
        n_iter=40,
        learning_rate="auto",
        group_step="auto",
        momentum=0.0,
        weight_cap=None,
        l2=0.0,
        precondition=False,
        l1_radius=20.0,
        row_norm=2.0,
        feature_bound=None,
        clip_norm="auto",
        max_loss=2.0,
    )
    params.update(overrides)
    return SaddleProblem(**params)


def gda_plan(**overrides):
    """The plan of :func:`gda_problem` under the default policy."""
    return make_gda_plan(gda_problem(**overrides), POLICY)


def gda_schedule(noise_multiplier, **overrides):
    """The schedule of :func:`gda_problem` at ``noise_multiplier``."""
    problem = gda_problem(**overrides)
    plan = make_gda_plan(problem, POLICY)
    return make_gda_schedule(problem, plan, noise_multiplier, POLICY)


@pytest.mark.parametrize("neighbouring", ["replace-one", "add-remove"])
@pytest.mark.parametrize("precondition", [False, True])
@pytest.mark.parametrize("n_groups", [1, 2, 5])
def test_budget_split_costs_one_gaussian(n_groups, precondition, neighbouring):
    # Shares add to one: the run costs what one Gaussian with multiplier z costs.
    plan = gda_plan(
        precondition=precondition,
        n_groups=n_groups,
        row_norm=np.sqrt(2.0),
        n_iter=37,
        neighbouring=neighbouring,
    )
    # Under add/remove n is private: the counts are released even for one group.
    assert plan.releases_counts == (n_groups > 1 or neighbouring == "add-remove")
    assert (plan.count_share > 0) == plan.releases_counts
    assert (plan.second_moment_share > 0) == precondition
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
    schedule = gda_schedule(
        z,
        n_samples=n,
        n_groups=3,
        row_norm=np.sqrt(2.0),
        n_iter=50,
        learning_rate=learning_rate,
        weight_cap=3.0,
    )
    base = schedule.model_step(1.0 / n)
    smooth = 4.0 / logistic_constants(np.sqrt(2.0))[1]
    for max_weight in [0.5 / n, 1.0 / n, 1.5 / n, 2.0 / n, 3.0 / n, 0.4]:
        step = schedule.model_step(max_weight)
        if learning_rate != "auto":
            assert step == base == 0.3
            continue
        assert step <= min(base, smooth) + 1e-15
        if max_weight <= 1.5 / n:
            assert step == base
        elif step < smooth:
            assert step * max_weight <= 1.5 * base / n * (1 + 1e-12)
    if learning_rate == "auto" and z == 0.01:
        assert schedule.model_step(3.0 / n) == base == smooth  # noise term slack
    if learning_rate == "auto" and z == 50.0:
        assert schedule.model_step(3.0 / n) == pytest.approx(base / 2)


def z_at_run_noise(run_noise, n):
    """The noise multiplier whose public run noise 2 z / (sqrt(g) n) is this."""
    return run_noise * np.sqrt(POLICY.gradient_share) * n / 2.0


def test_tail_fraction_grows_with_the_run_noise():
    # Half the iterates are averaged at a small run noise, all of them at a
    # large one, monotone in between, whatever the number of steps; the run
    # noise is the public 2 z / (sqrt(gradient share) n).
    n = 10_000
    tails = []
    for run_noise in [1e-6, 1.05e-3, 1.5e-3, 2.5e-3, 4e-3, 1.0]:
        z = z_at_run_noise(run_noise, n)
        schedules = [gda_schedule(z, n_samples=n, n_iter=T) for T in (10, 1000)]
        assert schedules[1].run_noise == pytest.approx(run_noise)
        assert schedules[0].tail_fraction == pytest.approx(schedules[1].tail_fraction)
        tails.append(schedules[1].tail_fraction)
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
            T: gda_schedule(z, n_samples=n, n_iter=T).walk_radius for T in (10, 1000)
        }
        assert by_steps[10] == pytest.approx(by_steps[1000])
        radii.append(by_steps[1000])
    assert radii[0] == radii[1] == pytest.approx(3.0)
    assert radii[-2] == radii[-1] == pytest.approx(6.0)
    assert np.all(np.diff(radii[1:-1]) > 0)
    # The "auto" step uses it: twice the radius, twice the noise term.
    for run_noise, radius in [(1e-2, 3.0), (1e-6, 6.0)]:
        z = z_at_run_noise(run_noise, n)
        schedule = gda_schedule(z, n_samples=n, n_iter=1000)
        noise_term = schedule.noise_walk_step(
            1.0 / n, cap=np.inf, radius=radius, dimension=schedule.plan.n_params
        )
        assert schedule.model_step(1.0 / n) == pytest.approx(
            min(4.0 / logistic_constants(2.0)[1], noise_term)
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
    rows = ProjectedRows(X, y, codes, scale, norm, fit_intercept=True)
    scores = row_scores(w, X, scale, True)
    grad = weighted_gradient(scores, rows, v[codes], plan.clip_norm)
    losses = group_loss_sums(scores, rows, plan.max_loss, plan.n_groups)
    return grad / v.max(), losses, np.bincount(codes, minlength=2)


_ENUMERATED_ROW_NORM = 1.0
_ENUMERATED_MAX_LOSS = 1.5


def _enumeration_plan(clip_norm, neighbouring="replace-one"):
    """One-step plan for the enumerated records (intercept column included)."""
    return gda_plan(
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
    plan = gda_plan(
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
        moment = second_moment(
            np.vstack([base, x]), np.r_[base_scale, sc], fit_intercept
        )
        np.testing.assert_allclose(moment, moment.T)
        outs.append(moment[upper])
    outs = np.array(outs)
    if neighbouring == "replace-one":
        worst = np.linalg.norm(outs[:, None] - outs[None, :], axis=2).max()
        expected = np.sqrt(2.0) * row_norm**2
    else:
        before = second_moment(base, base_scale, fit_intercept)[upper]
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
    rows = SaddleRows(X, y, g if n_groups == 2 else np.zeros_like(g))
    solver = GDASolver()
    runs = []
    for n_placeholder in (1, 400, 10**6):
        problem = gda_problem(
            n_samples=n_placeholder,
            n_groups=n_groups,
            n_features=2,
            fit_intercept=True,
            row_norm=np.sqrt(0.5),
            n_iter=25,
            precondition=True,
            momentum=0.9,
            neighbouring="add-remove",
        )
        plan = solver.plan(problem)
        schedule = solver.schedule(problem, plan, 3.0)
        runs.append(
            solver.run(rows, problem, schedule, 3.0, rng=np.random.default_rng(5))
        )
    for result in runs[1:]:
        np.testing.assert_array_equal(result.coef, runs[0].coef)
        np.testing.assert_array_equal(result.group_weights, runs[0].group_weights)
        assert result.events == runs[0].events
    # ... whereas under replace-one n is public and the step reads it.
    steps = [
        gda_schedule(
            3.0, n_samples=n, n_groups=n_groups, row_norm=np.sqrt(1.5), n_iter=25
        ).model_step(1.0 / n)
        for n in (10, 400)
    ]
    assert steps[0] < steps[1]


@pytest.mark.parametrize("z", [1e-4, 2.0, 50.0])
def test_preconditioned_step_keeps_walk(z):
    # The preconditioned "auto" step keeps the noise walk lr sqrt(T tr) s / n
    # (second-moment norm, row weights 1 / n) within its radius, never exceeds
    # its cap, and shortens by 1.5 / (n max_k v_k) for heavier rows.
    n, trace = 500, 7.0

    def preconditioned(n_params):
        return gda_schedule(z, n_samples=n, n_features=n_params, precondition=True)

    schedule = preconditioned(3)
    plan = schedule.plan
    assert plan.second_moment_share == POLICY.precondition_share == 0.05
    std = plan.noise_stds(z).gradient
    base = schedule.preconditioned_step(1.0 / n, trace)
    assert base <= POLICY.preconditioned_step
    walk = base * np.sqrt(plan.n_iter * trace) * std / n
    assert walk <= POLICY.preconditioned_radius * (1 + 1e-12)
    heavy = schedule.preconditioned_step(3.0 / n, trace)
    if base < POLICY.preconditioned_step:
        assert heavy == pytest.approx(base / 2)
    if z == 1e-4:
        assert base == heavy == POLICY.preconditioned_step
    # Above the size limit, no release and the identity geometry.
    big = preconditioned(POLICY.precondition_max_params + 1).plan
    assert big.second_moment_share == 0.0
    assert len(big.events(z)) == len(plan.events(z)) - 1


@pytest.mark.parametrize("z", [1e-4, 2.0, 50.0])
@pytest.mark.parametrize("precondition", [False, True])
def test_momentum_shortens_only_the_noise_term(z, precondition):
    # Momentum m lets each step count up to 1 / (1 - m) times: the noise term
    # of the "auto" step is scaled by 1 - m, the smoothness cap is not, and a
    # fixed step is used as given. The privacy events do not change.
    n, trace = 300, 5.0

    def schedule_with(momentum, learning_rate="auto"):
        return gda_schedule(
            z,
            n_samples=n,
            learning_rate=learning_rate,
            n_features=3,
            precondition=precondition,
            momentum=momentum,
        )

    def step(schedule):
        if precondition:
            return schedule.preconditioned_step(1.0 / n, trace)
        return schedule.model_step(1.0 / n)

    plain, heavy = schedule_with(0.0), schedule_with("auto")
    m = POLICY.momentum
    assert heavy.momentum == m == 0.9
    smooth = 4.0 / logistic_constants(2.0)[1]
    cap = POLICY.preconditioned_step if precondition else smooth
    noise_term = plain.noise_walk_step(
        1.0 / n,
        cap=np.inf,
        radius=POLICY.preconditioned_radius if precondition else POLICY.walk_radius,
        dimension=trace if precondition else plain.plan.n_params,
    )
    assert step(plain) == pytest.approx(min(cap, noise_term))
    assert step(heavy) == pytest.approx(min(cap, (1 - m) * noise_term))
    if z == 1e-4:
        assert step(heavy) == step(plain) == cap  # the smoothness binds
    if z == 50.0:
        assert step(heavy) == pytest.approx((1 - m) * step(plain))  # the noise does
    assert step(schedule_with(m, learning_rate=0.3)) == 0.3
    # The momentum is schedule, not plan: the releases are the same.
    assert heavy.plan == plain.plan
    assert heavy.plan.events(z) == plain.plan.events(z)


@pytest.mark.parametrize("seed", range(5))
def test_capped_simplex_projection_is_the_kl_projection(seed):
    # The KL projection onto {q <= caps, sum q = 1} minimises KL(q || p); check
    # against a generic constrained solver and the structure q = min(c, tau p).
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

"""Tests of the private mirror-descent solver of DPSaddlePointClassifier.

The privacy tests enumerate replace-one neighbours on a tiny grid of records
and compute the exact output distribution of one and of two steps of the
vertex-sampling mechanism (with the solver's own step and sampling functions),
then check it against what the solver accounts.
"""

import itertools
import math

import numpy as np
import pytest

from skdp._solvers._mirror import (
    _draw_probabilities,
    _mirror_step,
    _running_averages,
    make_mirror_plan,
)
from skdp.accounting import (
    DEFAULT_ORDERS,
    ExponentialMechanismEvent,
    GaussianEvent,
    RDPAccountant,
    event_rdp,
)
from skdp.fairness import DPSaddlePointClassifier
from skdp.linear_model import DPLogisticRegression

ORDERS = np.array([1.25, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 64.0, 256.0])
# Entries beyond the feature bound (1.0) are clipped: -2.5 exercises the clip.
GRID_X = (-2.5, -1.0, -0.3, 0.0, 0.6, 1.0)
RECORDS = [(x, y, g) for x in GRID_X for y in (0, 1) for g in (0, 1)]


def tiny_plan(n_samples, n_iter, max_loss=2.0, l1_radius=3.0):
    return make_mirror_plan(
        n_samples=n_samples,
        n_groups=2,
        n_features=1,
        n_iter=n_iter,
        l1_radius=l1_radius,
        feature_bound=1.0,
        fit_intercept=True,
        max_loss=max_loss,
        l2=0.01,
    )


def renyi(P, Q, orders):
    """Exact Rényi divergences D_a(P || Q) of two distributions on a finite set."""
    P, Q = P.ravel(), Q.ravel()
    keep = P > 0
    out = []
    for a in orders:
        terms = a * np.log(P[keep]) + (1 - a) * np.log(Q[keep])
        out.append(np.logaddexp.reduce(terms) / (a - 1))
    return np.array(out)


def accounted(events):
    acc = RDPAccountant(orders=ORDERS)
    for event in events:
        acc.compose(event)
    return acc.rdp


def batch_of(records):
    X = np.array([[r[0]] for r in records], dtype=float)
    y = np.array([r[1] for r in records], dtype=float)
    g = np.array([r[2] for r in records], dtype=np.intp)
    return X, y, g


def one_step(plan, denominators, steps, scores, averages, records):
    omega = plan.n_samples / (len(records) * denominators)
    new = _mirror_step(
        scores, averages, batch_of(records), omega, steps, plan, fit_intercept=True
    )
    return new, _draw_probabilities(*new)


STATES = [
    # (w, p_bar, prior coefficient scores, prior group scores); large prior
    # scores put almost all mass on one vertex, where the log-ratio nears r.
    (np.zeros(2), np.array([0.5, 0.5]), np.zeros(2), np.zeros(2)),
    (np.array([3.0, 0.0]), np.array([1 - 1e-9, 1e-9]), np.zeros(2), np.zeros(2)),
    (
        np.array([3.0, 0.0]),
        np.array([1 - 1e-9, 1e-9]),
        np.array([0.0, 9.0]),
        np.array([9.0, 0.0]),
    ),
    (
        np.array([3.0, 0.0]),
        np.array([1 - 1e-9, 1e-9]),
        np.array([0.0, -9.0]),
        np.array([-9.0, 0.0]),
    ),
    (
        np.array([-3.0, 0.0]),
        np.array([1e-9, 1 - 1e-9]),
        np.array([0.4, -1.0]),
        np.array([0.7, -0.2]),
    ),
    (
        np.array([1.0, -1.5]),
        np.array([0.3, 0.7]),
        np.array([-2.0, 0.5]),
        np.array([-1.0, 1.0]),
    ),
]


@pytest.mark.parametrize(
    "max_loss, denominators",
    [(2.0, [2.0, 2.0]), (10.0, [2.0, 2.0]), (2.0, [2.0, 3.5]), (2.0, [4.7, 2.2])],
)
def test_one_draw_exact_privacy(max_loss, denominators):
    """One step, every neighbour on the grid: the exact privacy loss of each
    player's draw stays within its accounted range r (pure DP) and its exact
    Rényi divergence within the accounted bounded-range curve a r^2 / 8."""
    plan = tiny_plan(n_samples=6, n_iter=3, max_loss=max_loss)
    denominators = np.array(denominators)
    z = 0.4  # little noise: large ranges, so the check is not vacuous
    r_w, r_p = plan.draw_ranges(z)
    steps = plan.steps(z, denominators.min())
    # The privacy-limited steps are in force (not the non-private caps).
    assert steps[0] * 4 * plan.l1_radius * plan.feature_bound * (
        plan.n_samples / (2 * denominators.min())
    ) == pytest.approx(r_w)
    bound_w = accounted([ExponentialMechanismEvent(r_w, bounded_range=True)])
    bound_p = accounted([ExponentialMechanismEvent(r_p, bounded_range=True)])
    worst = np.zeros(2)  # largest log-ratio seen: vertex draw, group draw
    worst_rdp = np.zeros((2, ORDERS.size))
    for w, p_bar, prior_coef, prior_group in STATES:
        scores = (prior_coef, prior_group)
        for base in RECORDS[::3]:
            outs = [
                one_step(plan, denominators, steps, scores, (w, p_bar), [base, r])
                for r in RECORDS
            ]
            for (_, (pv1, pg1)), (_, (pv2, pg2)) in itertools.product(outs, outs):
                for k, (P, Q) in enumerate(((pv1, pv2), (pg1, pg2))):
                    worst[k] = max(worst[k], np.abs(np.log(P) - np.log(Q)).max())
                    worst_rdp[k] = np.maximum(worst_rdp[k], renyi(P, Q, ORDERS))
    assert worst[0] <= r_w * (1 + 1e-9)
    assert worst[1] <= r_p * (1 + 1e-9)
    assert np.all(worst_rdp[0] <= bound_w * (1 + 1e-9))
    assert np.all(worst_rdp[1] <= bound_p * (1 + 1e-9))
    # The grid comes close to the worst case, so a smaller r would fail (the
    # group draw's bound is attained only when the denominators are equal).
    assert worst[0] >= 0.7 * r_w
    if denominators[0] == denominators[1]:
        assert worst[1] >= 0.7 * r_p


def test_two_step_run_exact_privacy():
    """Two steps, the differing record in the first batch (its worst position):
    the exact Rényi divergence of the joint law of the four draws is within the
    accounted composition of the run's draws (counts held fixed)."""
    plan = tiny_plan(n_samples=4, n_iter=2, max_loss=2.0)
    denominators = np.array([2.0, 2.5])  # noisy counts (released first)
    z = 0.5
    steps = plan.steps(z, denominators.min())
    events = [e for e in plan.events(z) if not isinstance(e, GaussianEvent)]
    bound = accounted(events)

    def joint(records):
        first, second = records[:2], records[2:]
        scores0 = (np.zeros(2), np.zeros(2))
        averages0 = _running_averages(np.zeros(4), np.zeros(2), plan.l1_radius)
        scores1, (pv, pg) = one_step(
            plan, denominators, steps, scores0, averages0, first
        )
        out = np.zeros((4, 2, 4, 2))
        for v, k in itertools.product(range(4), range(2)):
            counts_v, counts_g = np.eye(4)[v], np.eye(2)[k]
            averages1 = _running_averages(counts_v, counts_g, plan.l1_radius)
            _, (pv2, pg2) = one_step(
                plan, denominators, steps, scores1, averages1, second
            )
            out[v, k] = pv[v] * pg[k] * np.outer(pv2, pg2)
        return out

    worst = np.zeros(ORDERS.size)
    subset = RECORDS[::2]
    for base in [(1.0, 0, 0), (-1.0, 1, 1)]:
        rest = [(0.6, 1, 0), (-0.3, 0, 1)]
        outs = [joint([base, r, *rest]) for r in subset]
        for P, Q in itertools.product(outs, outs):
            np.testing.assert_allclose(P.sum(), 1.0)
            worst = np.maximum(worst, renyi(P, Q, ORDERS))
    assert np.all(worst <= bound * (1 + 1e-9))
    assert worst.max() > 0.05 * bound.max()


def test_draws_after_the_record_all_count():
    """A record in the first batch moves every later draw (cumulative scores):
    the second step's draws differ between neighbours even though the second
    batch is the same, which is why every draw is accounted."""
    plan = tiny_plan(n_samples=4, n_iter=2)
    denominators = np.array([2.0, 2.0])
    steps = plan.steps(0.5, 2.0)
    averages = _running_averages(np.zeros(4), np.zeros(2), plan.l1_radius)
    zero = (np.zeros(2), np.zeros(2))
    s_a, _ = one_step(plan, denominators, steps, zero, averages, [(1.0, 0, 0)] * 2)
    s_b, _ = one_step(
        plan, denominators, steps, zero, averages, [(1.0, 0, 0), (-1.0, 0, 1)]
    )
    second = [(0.6, 1, 0), (0.0, 0, 1)]
    _, (pv_a, _) = one_step(plan, denominators, steps, s_a, averages, second)
    _, (pv_b, _) = one_step(plan, denominators, steps, s_b, averages, second)
    assert np.abs(np.log(pv_a) - np.log(pv_b)).max() > 1e-3


@pytest.mark.parametrize(
    "epsilon, n, n_groups, n_iter",
    [(0.5, 1000, 2, 200), (1.0, 5000, 3, 1000), (8.0, 300, 1, 100), (2.0, 50, 2, 90)],
)
def test_mirror_spend_meets_target(epsilon, n, n_groups, n_iter):
    est = DPSaddlePointClassifier(epsilon=epsilon, solver="mirror", n_iter=n_iter)
    z, spent, delta = est.privacy_plan(n, n_groups=n_groups)
    assert 0.97 * epsilon <= spent.epsilon <= epsilon
    assert spent.neighbouring == "replace-one"
    assert "bounded-range" in spent.bound
    plan = tiny_plan(n, n_iter)
    # One pass: at most n steps, every draw counted.
    draws = sum(e.count for e in plan.events(z) if hasattr(e, "bounded_range"))
    assert draws == 2 * min(n_iter, n)


def test_mirror_budget_split_costs_one_gaussian():
    plan = tiny_plan(1000, 200)
    z = 2.0

    total = sum(event_rdp(e, DEFAULT_ORDERS, "replace-one")[0] for e in plan.events(z))
    single = event_rdp(GaussianEvent(z), DEFAULT_ORDERS, "replace-one")[0]
    # Shares add to one on the zCDP part; the pure-DP cap min(r, ...) of the
    # draws only lowers the curve at very large orders.
    assert np.all(total <= single * (1 + 1e-12))
    low = DEFAULT_ORDERS <= 16
    np.testing.assert_allclose(total[low], single[low], rtol=1e-12)


# --- correctness ------------------------------------------------------------------


def two_rule_data(n=2000, minority=0.2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2)) / np.sqrt(2)
    g = (rng.random(n) < minority).astype(int)
    y = np.where(g == 0, X[:, 0] > 0, X[:, 1] > 0).astype(int)
    return X, y, g


def worst_group_loss(scores, y, g):
    losses = np.logaddexp(0.0, scores) - y * scores
    return max(losses[g == k].mean() for k in np.unique(g))


def test_mirror_fit_spend_equals_plan_and_attributes():
    X, y, g = two_rule_data(n=600)
    est = DPSaddlePointClassifier(
        epsilon=2.0, groups=[0, 1], solver="mirror", n_iter=100, random_state=0
    ).fit(X, y, sensitive_features=g)
    z, spent, _ = est.privacy_plan(600, n_features=2)
    assert est.noise_multiplier_ == z
    assert est.privacy_spent_.epsilon == pytest.approx(spent.epsilon)
    assert 0.97 * 2.0 <= est.privacy_spent_.epsilon <= 2.0
    assert est.n_iter_ == 100
    assert est.draw_ranges_ == pytest.approx(tiny_plan(600, 100).draw_ranges(z))
    # Frequencies of the 100 sampled groups.
    assert est.group_weights_.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(
        est.group_weights_ * 100, np.round(est.group_weights_ * 100)
    )


def test_mirror_is_sparse_average_of_vertices():
    X, y, g = two_rule_data(n=400)
    X = np.column_stack([X, np.zeros((400, 30))])  # 30 useless features
    est = DPSaddlePointClassifier(
        epsilon=1.0,
        groups=[0, 1],
        solver="mirror",
        n_iter=12,
        l1_radius=4.0,
        random_state=0,
    ).fit(X, y, sensitive_features=g)
    w = np.r_[est.coef_.ravel(), est.intercept_]
    assert np.count_nonzero(w) <= 12
    assert np.abs(w).sum() <= 4.0 + 1e-12
    # Every coefficient is a multiple of R / T (an average of 12 vertices +-R e_j).
    np.testing.assert_allclose(w * 12 / 4.0, np.round(w * 12 / 4.0), atol=1e-9)


def test_mirror_deterministic_under_random_state():
    X, y, g = two_rule_data(n=500)

    def fit(seed):
        return DPSaddlePointClassifier(
            epsilon=1.0, groups=[0, 1], solver="mirror", n_iter=100, random_state=seed
        ).fit(X, y, sensitive_features=g)

    a, b, c = fit(3), fit(3), fit(4)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.group_weights_, b.group_weights_)
    assert not np.array_equal(
        np.r_[a.coef_.ravel(), a.group_weights_],
        np.r_[c.coef_.ravel(), c.group_weights_],
    )


def test_mirror_without_privacy_pressure_beats_erm_on_worst_group():
    """Huge epsilon (the steps are the non-private Hedge steps): on data where
    the minority group needs another decision boundary, the worst-group loss is
    well below that of (private) ERM, seed after seed."""
    X, y, g = two_rule_data(n=3000)
    erm = DPLogisticRegression(epsilon=1e4, random_state=0).fit(X, y)
    worst_erm = worst_group_loss(erm.decision_function(X), y, g)
    for seed in range(3):
        est = DPSaddlePointClassifier(
            epsilon=1e4,
            groups=[0, 1],
            solver="mirror",
            l1_radius=5.0,
            random_state=seed,
        ).fit(X, y, sensitive_features=g)
        worst = worst_group_loss(est.decision_function(X), y, g)
        assert worst < worst_erm - 0.2
        assert worst < math.log(2.0)  # better than the zero model on every group
        # The adversary sampled the minority group far above its 20% share.
        assert est.group_weights_[1] > 0.3


def test_mirror_n_iter_capped_at_n():
    X, y, g = two_rule_data(n=40)
    est = DPSaddlePointClassifier(
        groups=[0, 1], solver="mirror", n_iter=1000, random_state=0
    ).fit(X, y, sensitive_features=g)
    assert est.n_iter_ == 40
    assert 0.97 <= est.privacy_spent_.epsilon <= 1.0


def test_mirror_one_group_and_empty_group():
    X, y, g = two_rule_data(n=600)
    one = DPSaddlePointClassifier(epsilon=50.0, solver="mirror", random_state=0)
    one.fit(X, y)
    assert one.group_weights_.tolist() == [1.0]
    assert "gaussian" not in one.privacy_spent_.bound  # n is public: no counts
    assert one.score(X, y) > 0.6
    three = DPSaddlePointClassifier(
        epsilon=5.0, groups=[0, 1, 2], solver="mirror", random_state=0
    ).fit(X, y, sensitive_features=g)
    assert three.group_weights_.shape == (3,)
    assert np.all(np.isfinite(three.coef_))
    assert set(three.group_report(X, y, g)) == {0, 1}

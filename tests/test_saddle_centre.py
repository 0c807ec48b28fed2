"""The private centre of DPSaddlePointClassifier (skdp/_solvers/_saddle.py, _gda)."""

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError
from test_solvers_saddle import problem

from skdp._base import fit_generator
from skdp._solvers._gda import GDASolver, run_gda
from skdp._solvers._gda._releases import project_rows
from skdp._solvers._mirror import MirrorSolver
from skdp._solvers._rows import clipped_row_sum, loss_row_norm
from skdp._solvers._saddle import (
    Centring,
    SaddleRows,
    centred_saddle_rows,
)
from skdp._solvers._sgd._centre import uncentred
from skdp.accounting import GaussianSumEvent, account
from skdp.fairness import DPSaddlePointClassifier
from skdp.linear_model._budget import centre_noise

ROW_NORM = 2.0


def _offset_data(n=1200, seed=0, d=4):
    """Rows near one corner of the ball whose small spread carries the label."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, d))
    g = rng.integers(0, 3, size=n)
    score = Z @ np.linspace(1.0, 0.3, d) + 0.5 * (g == 2)
    y = (score + 0.3 * rng.normal(size=n) > 0).astype(int)
    return 0.9 + 0.05 * Z, y, g


def _model(**params):
    base = dict(
        epsilon=1.0,
        groups=[0, 1, 2],
        classes=[0, 1],
        row_norm=ROW_NORM,
        n_iter=200,
        random_state=0,
    )
    return DPSaddlePointClassifier(**{**base, **params})


def _problem(n, n_groups, d, **params):
    base = dict(n_iter=60, l1_radius=20.0, row_norm=ROW_NORM)
    return problem(n_samples=n, n_groups=n_groups, n_features=d, **{**base, **params})


class _SkipAfterFirstDraw:
    """A generator that, after its first ``normal`` draw, skips ``skip`` normals.

    The plain run on centred rows draws the counts, then its steps; the
    centred run draws the counts, the centre (``skip`` normals), then the
    same steps. Generator.normal consumes the same stream whatever its loc
    and scale, so skipping ``skip`` standard normals lines the two up.
    """

    def __init__(self, rng, skip):
        self.rng, self.skip = rng, skip

    def normal(self, *args, **kwargs):
        out = self.rng.normal(*args, **kwargs)
        if self.skip:
            self.rng.normal(size=self.skip)
            self.skip = 0
        return out


@pytest.mark.parametrize("relation", ["replace-one", "add-remove"])
@pytest.mark.parametrize("epsilon", [0.5, 4.0])
def test_the_centre_is_accounted_and_the_target_met(relation, epsilon):
    X, y, g = _offset_data()
    extra = (
        {"neighbouring": relation, "delta": 1e-5} if relation == "add-remove" else {}
    )
    centred = _model(epsilon=epsilon, centring_share=0.2, **extra).fit(
        X, y, sensitive_features=g
    )
    plain = _model(epsilon=epsilon, centring_share=0.0, **extra).fit(
        X, y, sensitive_features=g
    )
    spent = centred.privacy_spent_
    assert spent.neighbouring == relation
    assert 0.97 * epsilon <= spent.epsilon <= epsilon
    # The solver pays for the centre: more noise at the same target.
    assert centred.noise_multiplier_ > plain.noise_multiplier_
    # The spend is the composition of the solver's events and the centre's.
    solver = GDASolver()
    plan = solver.plan(_problem(1200, 3, 4, neighbouring=relation, n_iter=200))
    noise = centre_noise(0.2, epsilon, centred.delta_, relation)
    events = [*plan.events(centred.noise_multiplier_), GaussianSumEvent(noise)]
    again = account(events, centred.delta_, neighbouring=relation, accountant="pld")
    assert again.epsilon == pytest.approx(spent.epsilon, rel=1e-9)
    # Without the centre's event the same noise would claim less.
    alone = account(
        plan.events(centred.noise_multiplier_),
        centred.delta_,
        neighbouring=relation,
        accountant="pld",
    )
    assert alone.epsilon < spent.epsilon


def test_privacy_plan_counts_the_centre():
    model = _model(centring_share=0.3)
    z, spent, delta = model.privacy_plan(1200)
    assert spent.epsilon <= 1.0
    z_plain, _, _ = _model(centring_share=0.0).privacy_plan(1200)
    assert z > z_plain


@pytest.mark.parametrize("groups", [1, 3])
def test_a_centred_gda_run_is_the_plain_run_on_centred_rows_mapped_back(groups):
    X, y, g = _offset_data(n=500, seed=1)
    g = g % groups
    rows = SaddleRows(X=X, y=y, group_codes=g)
    problem = _problem(500, groups, X.shape[1])
    solver = GDASolver()
    plan = solver.plan(problem)
    schedule = solver.schedule(problem, plan, 2.0)
    centring = Centring.of(problem, 3.0)
    assert centring.radius == pytest.approx(ROW_NORM)
    run = solver.run_centred(
        rows, problem, schedule, 2.0, centring, rng=np.random.default_rng(5)
    )
    # The centre the run released: after the counts' draws (none for one
    # group, whose count is the public n).
    rng = np.random.default_rng(5)
    if groups > 1:
        rng.normal(size=groups)
    centre = centring.release(
        lambda radius: clipped_row_sum(X, radius), problem.n_samples, rng
    )
    plain_rng = np.random.default_rng(5)
    if groups > 1:
        plain_rng = _SkipAfterFirstDraw(plain_rng, X.shape[1])
    else:
        plain_rng.normal(size=X.shape[1])
    plain = run_gda(
        centred_saddle_rows(rows, centre, centring.radius),
        problem,
        schedule,
        2.0,
        rng=plain_rng,
    )
    np.testing.assert_array_equal(run.coef, uncentred(plain.coef, centre))
    np.testing.assert_array_equal(run.group_weights, plain.group_weights)
    assert run.events == [*plain.events, centring.event]
    # The model differs from the plain run on the rows as given.
    assert not np.allclose(run.coef, plain.coef)


def test_a_centred_mirror_run_is_the_plain_run_on_centred_rows_mapped_back():
    X, y, g = _offset_data(n=500, seed=2)
    rows = SaddleRows(X=X, y=y, group_codes=g)
    problem = _problem(500, 3, X.shape[1], feature_bound=1.0)
    solver = MirrorSolver()
    plan = solver.plan(problem)
    centring = Centring.of(problem, 3.0)
    run = solver.run_centred(
        rows, problem, plan, 2.0, centring, rng=np.random.default_rng(6)
    )
    rng = np.random.default_rng(6)
    centre = centring.release(
        lambda radius: clipped_row_sum(X, radius), problem.n_samples, rng
    )
    plain = solver.run(
        centred_saddle_rows(rows, centre, centring.radius), problem, plan, 2.0, rng=rng
    )
    np.testing.assert_array_equal(run.coef, uncentred(plain.coef, centre))
    assert run.events == [*plain.events, centring.event]


def test_the_estimator_runs_the_centred_solver_with_the_fits_generator():
    X, y, g = _offset_data(n=600, seed=3)
    model = _model(solver="mirror", centring_share=0.2, random_state=11)
    model.fit(X, y, sensitive_features=g)
    problem = _problem(600, 3, X.shape[1], n_iter=200)
    centring = Centring.of(problem, centre_noise(0.2, 1.0, model.delta_, "replace-one"))
    solver = MirrorSolver()
    result = solver.run_centred(
        SaddleRows(X=X, y=y, group_codes=g),
        problem,
        solver.plan(problem),
        model.noise_multiplier_,
        centring,
        rng=fit_generator(11),
    )
    np.testing.assert_array_equal(model.coef_[0], result.coef[:-1])
    np.testing.assert_array_equal(model.intercept_, result.coef[-1:])


def test_the_declared_bound_holds_after_centring():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 3)) * 3.0  # many rows beyond the ball
    rows = SaddleRows(X=X, y=np.zeros(300), group_codes=np.zeros(300, int))
    bound = loss_row_norm(ROW_NORM, True)
    projected = project_rows(rows, bound, True)
    centred = projected.centred(np.array([1.5, -1.0, 0.5]), ROW_NORM, bound)
    assert np.all(centred.norm <= bound * (1 + 1e-6))
    features = np.linalg.norm(centred.X * centred.scale[:, None], axis=1)
    assert np.all(features <= ROW_NORM * (1 + 1e-6))


@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(centring_share=1.0), InvalidParameterError, "centring_share"),
        (dict(centring_share=-0.1), InvalidParameterError, "centring_share"),
        (dict(centring_share="half"), InvalidParameterError, "centring_share"),
        (
            dict(centring_share=0.1, fit_intercept=False),
            ValueError,
            "fit_intercept=True",
        ),
    ],
)
def test_a_bad_centring_share_is_refused_before_any_state_changes(params, error, match):
    X, y, g = _offset_data(n=300)
    model = _model(n_iter=20).fit(X, y, sensitive_features=g)
    before = {k: v for k, v in vars(model).items() if k.endswith("_")}
    model.set_params(**params)
    with pytest.raises(error, match=match):
        model.fit(X[:200], y[:200], sensitive_features=g[:200])
    after = {k: v for k, v in vars(model).items() if k.endswith("_")}
    assert after.keys() == before.keys()
    for key, value in before.items():
        assert after[key] is value
    with pytest.raises(error, match=match):
        model.privacy_plan(300)


def test_auto_centres_gda_only_and_needs_an_intercept():
    assert _model()._centring_share() == GDASolver().policy.centring_share > 0
    assert _model(solver="mirror")._centring_share() == 0.0
    assert _model(fit_intercept=False)._centring_share() == 0.0


def _worst_group_loss(model, X, y, g):
    report = model.group_report(X, y, g)
    return max(entry["log_loss"] for entry in report.values())


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_centring_helps_on_offset_rows(epsilon):
    """Paired seeds: the centred fit has the lower worst-group loss on each."""
    X, y, g = _offset_data(n=3000, seed=7, d=8)
    losses = {}
    for share in (0.0, "auto"):
        losses[share] = np.array(
            [
                _worst_group_loss(
                    _model(
                        epsilon=epsilon,
                        centring_share=share,
                        row_norm=3.0,
                        random_state=seed,
                    ).fit(X, y, sensitive_features=g),
                    X,
                    y,
                    g,
                )
                for seed in range(3)
            ]
        )
    assert np.all(losses["auto"] < losses[0.0]), losses
    assert np.mean(losses[0.0] - losses["auto"]) > 0.01, losses


def test_under_add_remove_the_centre_is_divided_by_the_released_count(monkeypatch):
    X, y, g = _offset_data(n=800, seed=8)
    seen = {}
    release = Centring.release

    def spy(self, row_sum, n_rows, rng):
        seen["n_rows"] = n_rows
        return release(self, row_sum, n_rows, rng)

    monkeypatch.setattr(Centring, "release", spy)
    _model(neighbouring="add-remove", delta=1e-5, centring_share=0.2, n_iter=20).fit(
        X, y, sensitive_features=g
    )
    assert seen["n_rows"] != 800  # the noisy total, never the private n
    assert abs(seen["n_rows"] - 800) < 200


def test_dask_centred_fit_is_the_in_memory_fit_and_mirror_is_refused():
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    X, y, g = _offset_data(n=600, seed=9)
    chunks = (1, 250, 0, 149, 200)
    inputs = (
        da.from_array(X, chunks=(chunks, 2)),
        da.from_array(y, chunks=(chunks,)),
        da.from_array(g, chunks=(chunks,)),
    )
    with dask.config.set(scheduler="sync"):
        for params in (
            dict(centring_share=0.2),
            dict(centring_share=0.2, precondition=True),
            dict(neighbouring="add-remove", delta=1e-5),
        ):
            memory = _model(n_iter=30, **params).fit(X, y, sensitive_features=g)
            held = _model(n_iter=30, **params).fit(
                inputs[0], inputs[1], sensitive_features=inputs[2]
            )
            np.testing.assert_allclose(held.coef_, memory.coef_, rtol=1e-10)
            np.testing.assert_allclose(
                held.intercept_, memory.intercept_, rtol=1e-10, atol=1e-13
            )
            assert held.privacy_spent_ == memory.privacy_spent_
        model = _model(solver="mirror", centring_share=0.1)
        with pytest.raises(ValueError, match="no centred run on a Dask"):
            model.fit(inputs[0], inputs[1], sensitive_features=inputs[2])
        assert not hasattr(model, "coef_")

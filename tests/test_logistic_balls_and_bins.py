"""DPLogisticRegression(batch_sampling="balls-and-bins"): events, batches, relations.

The run must do what its accounting (random allocation,
:class:`~skdp.accounting.RandomAllocationGaussianEvent`) assumes: every record
in exactly one step an epoch, uniformly and independently, a fresh allocation
each epoch; noise of std ``z C`` on each step's clipped-gradient sum, scaled
by a public number; the number of steps an epoch from the plan (under
add/remove: from the released count, never from the true ``n``).
"""

import json
import math

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.model_selection import KFold

from skdp._cli import main
from skdp._solvers._sgd import _run, make_plan, run_logistic_sgd
from skdp._solvers._sgd._plan import auto_epochs
from skdp.accounting import (
    GaussianSumEvent,
    RandomAllocationGaussianEvent,
    account,
)
from skdp.linear_model import DPLogisticRegression, _budget
from skdp.model_selection import search_privacy

RELEASED = ("n_iter_", "noise_multiplier_", "max_grad_norm_", "learning_rate_")


def _data(n=513, seed=0):
    X, y = make_classification(
        n_samples=n, n_features=4, n_informative=3, n_redundant=0, random_state=seed
    )
    return X / np.linalg.norm(X, axis=1).max(), y


def _plan(n, *, batch_size=64, epochs=3, clip="auto", row_norm=None, **kw):
    params = dict(
        n_samples=n,
        n_classes=2,
        row_norm=row_norm,
        batch_size=batch_size,
        epochs=epochs,
        sampling="balls-and-bins",
        solver="dp-sgd",
        learning_rate="auto",
        lr_schedule="constant",
        l2=1e-4,
        l1=0.0,
        clip_norm=clip,
        projection_radius=None,
    )
    return make_plan(**{**params, **kw})


class _Recorder:
    """Wraps the run's update and gradient sum; records what each step used."""

    def __init__(self, monkeypatch):
        self.ids, self.noise_std, self.denominators = [], set(), set()
        update, gradient_sum = _run.UPDATES["dp-sgd"], _run.clipped_gradient_sum

        def recorded_sum(W, batch, loss):
            self.ids.append(batch.rows[:, 0].astype(int).copy())
            return gradient_sum(W, batch, loss)

        def recorded_update(W, g, eta, denominator, l2, noise_std, rng):
            self.noise_std.add(noise_std)
            self.denominators.add(denominator)
            return update(W, g, eta, denominator, l2, noise_std, rng)

        monkeypatch.setattr(_run, "clipped_gradient_sum", recorded_sum)
        monkeypatch.setitem(_run.UPDATES, "dp-sgd", recorded_update)


def _id_rows(n, seed=0):
    """Rows whose first column is the row's index (read back from each batch)."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.arange(n, dtype=float), rng.normal(size=n)])
    return X, (rng.random(n) < 0.5).astype(int)


def _run_ids(monkeypatch, X, y, plan, seed=0):
    recorder = _Recorder(monkeypatch)
    result = run_logistic_sgd(
        X, y, plan, 1.5, row_norm=None, fit_intercept=True,
        rng=np.random.default_rng(seed),
    )  # fmt: skip
    return recorder, result


def test_run_events_and_noise_are_the_plans(monkeypatch):
    # The run's events are the plan's: one random allocation event of t =
    # ceil(n / b) steps, the noise multiplier in units of the clip norm (as
    # the run adds std z C to each step's sum), and the run divides every
    # sum by the public n / t.
    X, y = _id_rows(300)
    plan = _plan(300, batch_size=64, epochs=4, calibration_noise=3.0)
    recorder, result = _run_ids(monkeypatch, X, y, plan)
    assert result.events == plan.events(1.5)
    assert result.events == [
        RandomAllocationGaussianEvent(5, 1.5, epochs=4),
        GaussianSumEvent(3.0),
    ]
    assert recorder.noise_std == {1.5 * plan.clip_norm}
    assert recorder.denominators == {300 / 5}
    assert len(recorder.ids) == plan.n_steps == 20


def test_event_is_in_units_of_the_smaller_of_clip_and_gradient_bound():
    # A clip above the gradient bound G: contributions are at most G, so the
    # event's multiplier is z C / G (as Poisson's is).
    plan = _plan(300, clip=10.0, row_norm=1.0, learning_rate=0.5)
    assert plan.gradient_bound < 10.0
    (event,) = plan.events(2.0)
    assert event.noise_multiplier == pytest.approx(2.0 * 10.0 / plan.gradient_bound)


@pytest.mark.parametrize("memmap", [False, True])
def test_every_row_once_an_epoch_in_a_fresh_allocation(monkeypatch, tmp_path, memmap):
    n, t, epochs = 240, 4, 150
    X, y = _id_rows(n)
    if memmap:
        path = tmp_path / "X.dat"
        mm = np.memmap(path, dtype=float, mode="w+", shape=X.shape)
        mm[:] = X
        mm.flush()
        X = np.memmap(path, dtype=float, mode="r", shape=X.shape)
    plan = _plan(n, batch_size=n // t, epochs=epochs)
    recorder, _ = _run_ids(monkeypatch, X, y, plan, seed=3)
    steps = np.empty((epochs, n), dtype=int)
    sizes = np.empty((epochs, t), dtype=int)
    for k, ids in enumerate(recorder.ids):
        epoch, j = divmod(k, t)
        # Rows of a step are read in increasing index order.
        assert np.all(np.diff(ids) > 0)
        steps[epoch, ids] = j
        sizes[epoch, j] = ids.size
    # Every row exactly once an epoch.
    assert np.all(sizes.sum(axis=1) == n)
    # Each row's step uniform: chi-square over the t steps, all epochs pooled.
    counts = np.bincount(steps.ravel(), minlength=t)
    expected = epochs * n / t
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 16.3  # 0.999 quantile of chi-square with 3 degrees
    # Batch sizes vary as a multinomial's (shuffling would give none).
    variance = sizes.var(axis=None, ddof=1)
    assert variance == pytest.approx(n / t * (1 - 1 / t), rel=0.15)
    # A fresh allocation each epoch: a row keeps its step with probability 1/t.
    same = (steps[1:] == steps[:-1]).mean()
    standard_error = math.sqrt((1 / t) * (1 - 1 / t) / ((epochs - 1) * n))
    assert abs(same - 1 / t) < 5 * standard_error


def test_the_steps_an_epoch_come_from_the_plan_not_the_rows(monkeypatch):
    # A plan for 1000 rows run on 300 (add/remove: the released count): 16
    # steps an epoch, each dividing by 1000 / 16.
    X, y = _id_rows(300)
    plan = _plan(1000, batch_size=64, epochs=2)
    recorder, _ = _run_ids(monkeypatch, X, y, plan)
    assert len(recorder.ids) == 2 * 16
    assert recorder.denominators == {1000 / 16}
    assert sum(ids.size for ids in recorder.ids[:16]) == 300


@pytest.mark.parametrize("neighbouring", ["replace-one", "add-remove"])
def test_fit_reports_the_accountant_of_its_events(neighbouring):
    X, y = _data()
    est = DPLogisticRegression(
        epsilon=1.0,
        delta=1e-5,
        batch_sampling="balls-and-bins",
        neighbouring=neighbouring,
        classes=[0, 1],
        random_state=0,
    ).fit(X, y)
    z, spent, delta = est.privacy_plan(X.shape[0])
    assert spent.epsilon <= 1.0 + 1e-9
    # The training events, rebuilt from the public parameters alone.
    budget = _budget.split_budget(1.0, 1e-5, neighbouring, 0.02)
    floor = _budget.floor_noise(0.2, budget.delta, neighbouring)
    centre = _budget.centre_noise(0.1, 1.0, budget.delta, neighbouring)
    epochs = auto_epochs("balls-and-bins", 1.0, neighbouring)
    events = [
        RandomAllocationGaussianEvent(math.ceil(513 / 256), z, epochs),
        GaussianSumEvent(centre),
        GaussianSumEvent(floor),
    ]
    training = account(events, budget.run_delta, neighbouring=neighbouring,
                       accountant="pld")  # fmt: skip
    if neighbouring == "replace-one":
        assert est.noise_multiplier_ == z
        assert est.privacy_spent_ == spent
        assert spent.epsilon == training.epsilon
        assert "random-allocation" in spent.bound
    else:
        # The fit's own count is noisy; the plan at a count of n is accounted
        # as the estimator accounts its run.
        assert budget.spend(training).epsilon == spent.epsilon
        assert training.epsilon <= budget.epsilon * (1 + 1e-9)


def test_run_events_at_the_fit_are_those_accounted():
    # The plan the fit ran is the plan privacy_plan calibrates (replace-one).
    X, y = _data()
    est = DPLogisticRegression(
        epsilon=2.0, batch_sampling="balls-and-bins", classes=[0, 1], random_state=1
    )
    z, spent, _ = est.privacy_plan(X.shape[0])
    est.fit(X, y)
    assert est.n_iter_ == math.ceil(513 / 256) * auto_epochs("balls-and-bins", 2.0)
    assert (est.noise_multiplier_, est.privacy_spent_) == (z, spent)


def _fit_add_remove(X, y, n, seed, **params):
    params = {"epsilon": 1.0, "delta": 1e-5, "classes": np.unique(y), **params}
    est = DPLogisticRegression(
        neighbouring="add-remove",
        batch_sampling="balls-and-bins",
        random_state=seed,
        **params,
    )
    return est.fit(X[:n], y[:n])


@pytest.mark.parametrize("count", [40, 300, 512, 5000])
@pytest.mark.parametrize("params", [{}, {"epsilon": 0.1}, {"calibration_share": 0.0}])
def test_add_remove_plan_is_a_function_of_the_released_count(
    monkeypatch, count, params
):
    # As tests/test_logistic_add_remove.py for Poisson: fits on 512 and 513
    # rows whose noisy counts agree release the same plan and spend.
    X, y = _data()
    monkeypatch.setattr(
        _budget,
        "released_size",
        lambda n, std, rng: max(1, round(count + 0.0 * rng.normal(0.0, std))),
    )
    small, large = (_fit_add_remove(X, y, n, 7, **params) for n in (512, 513))

    def released(est):
        return tuple(getattr(est, name) for name in RELEASED) + (
            est.delta_,
            est.privacy_spent_,
        )

    assert released(small) == released(large)
    # Steps an epoch from the count, times the "auto" epochs of the budget.
    epochs = auto_epochs("balls-and-bins", params.get("epsilon", 1.0), "add-remove")
    assert small.n_iter_ == math.ceil(count / 256) * epochs
    if params.get("epsilon", 1.0) >= 1.0:
        assert not np.array_equal(small.coef_, large.coef_)


def test_dp_sgld_is_refused_before_any_state_changes():
    X, y = _data()
    est = DPLogisticRegression(batch_sampling="balls-and-bins", solver="dp-sgld")
    with pytest.raises(ValueError, match="balls-and-bins.*solver='dp-sgd'"):
        est.fit(X, y)
    assert not hasattr(est, "coef_")
    with pytest.raises(ValueError, match="solver='dp-sgd'"):
        est.privacy_plan(1000)


def test_add_remove_needs_a_target_epsilon():
    est = DPLogisticRegression(
        epsilon=None,
        noise_multiplier=1.0,
        calibration_share=0.0,
        delta=1e-6,
        batch_sampling="balls-and-bins",
        neighbouring="add-remove",
    )
    with pytest.raises(ValueError, match="needs a target epsilon"):
        est.privacy_plan(1000)


def test_search_privacy_composes_balls_and_bins_fits():
    est = DPLogisticRegression(
        epsilon=0.5, batch_sampling="balls-and-bins", classes=[0, 1]
    )
    one = est.privacy_plan(2000)[1]
    spent = search_privacy(est, {"alpha": [1e-4, 1e-3]}, n_samples=2000, cv=KFold(2))
    # Two candidates, each fit on a training fold holding the record: more
    # than one fit, at most the basic composition of four.
    assert one.epsilon < spent.epsilon <= 4 * 0.5 * (1 + 1e-9)


@pytest.mark.parametrize("neighbouring", ["replace-one", "add-remove"])
def test_cli_accounts_balls_and_bins(capsys, neighbouring):
    argv = [
        "account", "--n", "30000", "--batch-size", "250", "--epochs", "10",
        "--delta", "1e-5", "--sampling", "balls-and-bins",
        "--neighbouring", neighbouring, "--noise-multiplier", "1.5", "--json",
    ]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    expected = account(
        [RandomAllocationGaussianEvent(120, 1.5, 10)],
        1e-5,
        neighbouring=neighbouring,
        accountant="pld",
    )
    assert out["epsilon"] == expected.epsilon
    assert out["sampling"] == "balls-and-bins"

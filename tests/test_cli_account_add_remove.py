"""``skdp account --neighbouring add-remove`` matches what the estimator reports."""

import json

import pytest

from skdp import DPLogisticRegression
from skdp._cli import main

RUN = ["account", "--n", "10000", "--batch-size", "500", "--epochs", "5"]
ADD_REMOVE = [
    "--delta",
    "1e-5",
    "--sampling",
    "poisson",
    "--neighbouring",
    "add-remove",
]


def _json(capsys, *args):
    assert main([*RUN, *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_target_epsilon_accounts_the_count_release_as_the_estimator(capsys):
    # Before, the run alone was calibrated to the whole target: less noise
    # than the estimator, which spends a share on a noisy count of the rows.
    out = _json(capsys, "--target-epsilon", "1.0", *ADD_REMOVE)
    est = DPLogisticRegression(
        epsilon=1.0,
        delta=1e-5,
        neighbouring="add-remove",
        batch_size=500,
        epochs=5,
        calibration_share=0.0,  # the command plans no temperature step
        centring_share=0.0,  # nor a centre
        max_grad_norm=1.0,  # the command's sensitivity without --row-norm
    )
    z, spent, _ = est.privacy_plan(10_000)  # a released count of 10,000
    assert out["noise_multiplier"] == pytest.approx(z, rel=1e-12)
    assert out["epsilon"] == pytest.approx(spent.epsilon, rel=1e-12)
    assert out["bound"] == spent.bound and "count" in out["bound"]
    assert out["order"] is None
    assert 0 < out["count_release"]["epsilon"] <= 0.02 + 1e-12
    assert "count" in out["add_remove"] and out["notes"] == []


def test_fixed_noise_says_it_accounts_the_run_alone(capsys):
    out = _json(capsys, "--noise-multiplier", "1.2", *ADD_REMOVE)
    assert out["count_release"] is None
    assert "the run alone" in out["add_remove"]
    assert main([*RUN, "--noise-multiplier", "1.2", *ADD_REMOVE]) == 0
    assert "note: add-remove: the run alone" in capsys.readouterr().out

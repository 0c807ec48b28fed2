import json
import subprocess
import sys

import pytest

from skdp._cli import main
from skdp.accounting import (
    NoisyIterationEvent,
    PoissonGaussianEvent,
    account,
    logistic_constants,
)

BASE = ["account", "--n", "10000", "--batch-size", "500", "--epochs", "5"]
# noise multiplier 1.2 on rate-0.05 Poisson batches, add/remove.
POISSON_ADD_REMOVE = (
    "--noise-multiplier",
    "1.2",
    "--delta",
    "1e-5",
    "--sampling",
    "poisson",
    "--neighbouring",
    "add-remove",
)


def run_json(capsys, *extra):
    assert main([*BASE, *extra, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_account_poisson_matches_accountant(capsys):
    out = run_json(capsys, *POISSON_ADD_REMOVE, "--accountant", "rdp")
    expected = account(
        PoissonGaussianEvent(0.05, 1.2, count=100), 1e-5, neighbouring="add-remove"
    )
    assert out["epsilon"] == pytest.approx(expected.epsilon)
    assert {"epsilon", "delta", "noise_multiplier", "order", "bound"} <= set(out)
    assert out["bound"] == "poisson-subsampled-gaussian"
    assert out["accountant"] == "rdp"


def test_account_default_is_the_tightest_valid_bound(capsys):
    # Poisson under add/remove: the numerical PLD wins over the Rényi bound.
    out = run_json(capsys, *POISSON_ADD_REMOVE)
    event = PoissonGaussianEvent(0.05, 1.2, count=100)
    rdp = account(event, 1e-5, neighbouring="add-remove")
    tight = account(event, 1e-5, neighbouring="add-remove", accountant="pld")
    assert out["accountant"] == "pld" and out["order"] is None
    assert out["epsilon"] == pytest.approx(tight.epsilon)
    assert out["epsilon"] < 0.97 * rdp.epsilon


def test_account_poisson_sensitivity_is_the_gradient_bound(capsys):
    # Noise z * C on a sum of gradients bounded by G < C: the multiplier that
    # counts is z * C / G, for Poisson batches as for cyclic ones.
    out = run_json(
        capsys,
        *POISSON_ADD_REMOVE,
        "--clip-norm",
        "5",
        "--learning-rate",
        "0.5",
        "--row-norm",
        "1.5",
    )
    gradient_bound = logistic_constants(1.5, 2)[0]
    assert gradient_bound < 5
    expected = account(
        PoissonGaussianEvent(0.05, 1.2 * 5 / gradient_bound, count=100),
        1e-5,
        neighbouring="add-remove",
        accountant="pld",
    )
    assert out["epsilon"] == pytest.approx(expected.epsilon)
    assert out["notes"] == []


def test_account_cyclic_composition_closed_form(capsys):
    out = run_json(capsys, "--noise-multiplier", "4", "--delta", "1e-5")
    event = NoisyIterationEvent.cyclic_sgd([500] * 20, 5, 4.0)
    expected = account(event, 1e-5, accountant="pld")
    assert out["epsilon"] == pytest.approx(expected.epsilon)
    assert out["bound"] == "cyclic-composition"
    # A composition of Gaussian mechanisms: exact GDP, below the Rényi route.
    assert out["accountant"] == "gdp"
    assert out["epsilon"] < account(event, 1e-5).epsilon


def test_account_last_iterate_competes(capsys):
    common = ["--noise-multiplier", "4", "--delta", "1e-5", "--sampling", "cyclic"]
    plain = run_json(capsys, *common)
    last = run_json(
        capsys,
        *common,
        "--clip-norm",
        "1",
        "--learning-rate",
        "3",
        "--l2",
        "0.01",
        "--row-norm",
        "1",
    )
    assert last["bound"] == "cyclic-last-iterate"
    assert last["epsilon"] < plain["epsilon"]
    active = run_json(
        capsys,
        *common,
        "--clip-norm",
        "0.5",
        "--learning-rate",
        "3",
        "--row-norm",
        "1",
    )
    assert active["bound"] == "cyclic-composition"
    assert any("clipping may be active" in note for note in active["notes"])


def test_account_target_epsilon(capsys):
    out = run_json(
        capsys, "--target-epsilon", "1.0", "--delta", "1e-6", "--sampling", "shuffle"
    )
    assert 0.97 <= out["epsilon"] <= 1.0
    again = run_json(
        capsys,
        "--noise-multiplier",
        repr(out["noise_multiplier"]),
        "--delta",
        "1e-6",
        "--sampling",
        "shuffle",
    )
    assert again["epsilon"] == pytest.approx(out["epsilon"])


def test_account_human_output(capsys):
    # The Rényi route prints its order (cyclic runs are exact GDP by default).
    args = ["--noise-multiplier", "2", "--delta", "1e-5", "--accountant", "rdp"]
    assert main([*BASE, *args]) == 0
    text = capsys.readouterr().out
    assert "epsilon" in text and "bound" in text and "Rényi order" in text


def test_account_errors(capsys):
    code = main(
        [
            *BASE,
            "--noise-multiplier",
            "2",
            "--delta",
            "1e-5",
            "--neighbouring",
            "add-remove",
        ]
    )
    assert code == 2
    assert "replace-one only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*BASE, "--noise-multiplier", "-1", "--delta", "1e-5"])
    with pytest.raises(SystemExit):
        main([*BASE, "--noise-multiplier", "1", "--delta", "2"])
    with pytest.raises(SystemExit):
        main([*BASE, "--delta", "1e-5"])  # neither noise nor target


def test_module_entry_point_runs():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "skdp",
            *BASE,
            "--noise-multiplier",
            "2",
            "--delta",
            "1e-5",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(proc.stdout)["epsilon"] > 0


def test_demo_trains_on_adult_and_reports_privacy(capsys):
    assert main(["demo", "--epsilon", "2"]) == 0
    out = capsys.readouterr().out
    assert "LogisticRegression (non-private)" in out
    rows = [line for line in out.splitlines() if line.startswith("DPLogistic")]
    assert len(rows) == 3
    for row in rows:
        accuracy, epsilon = float(row.split()[2]), float(row.split()[3])
        assert accuracy > 0.8 and epsilon <= 2.0


def test_account_poisson_matches_dp_accounting(capsys):
    dp = pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import RdpAccountant

    from skdp.accounting import DEFAULT_ORDERS

    out = run_json(
        capsys,
        "--noise-multiplier",
        "0.9",
        "--delta",
        "1e-6",
        "--sampling",
        "poisson",
        "--neighbouring",
        "add-remove",
        "--accountant",
        "rdp",
    )
    reference = RdpAccountant(orders=[float(a) for a in DEFAULT_ORDERS if a > 1.01])
    event = dp.PoissonSampledDpEvent(0.05, dp.GaussianDpEvent(0.9))
    reference.compose(event, 100)
    assert out["epsilon"] == pytest.approx(reference.get_epsilon(1e-6), rel=1e-6)


@pytest.mark.parametrize("relation", ["replace-one", "add-remove"])
def test_account_as_fit_reports_what_a_default_fit_reports(capsys, relation):
    """``--as-fit`` is the estimator's privacy_plan, probability floor and (under
    add/remove) noisy count included; without it the command cannot say it."""
    from skdp.linear_model import DPLogisticRegression

    args = ["account", "--as-fit", "--n", "3000", "--target-epsilon", "1"]
    args += ["--delta", "1e-5", "--neighbouring", relation, "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    z, spent, _ = DPLogisticRegression(
        epsilon=1.0, delta=1e-5, neighbouring=relation, classes=[0, 1]
    ).privacy_plan(3000)
    assert out["noise_multiplier"] == z and out["epsilon"] == spent.epsilon
    assert out["bound"] == spent.bound and out["sampling"] == "poisson"
    assert "probability floor included" in out["notes"][0]


def test_account_as_fit_and_plan_errors(capsys):
    base = ["account", "--n", "3000", "--target-epsilon", "1", "--delta", "1e-5"]
    assert main([*base, "--as-fit", "--epochs", "3", "--l2", "0.1"]) == 2
    assert "drop --epochs, --l2" in capsys.readouterr().err
    assert main([*base, "--batch-size", "100"]) == 2
    assert "--epochs required (or --as-fit" in capsys.readouterr().err

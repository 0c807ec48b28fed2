"""How tight and how fast are skdp's privacy audits?

Prints three markdown tables:

1. Multi-fit audits (``skdp.audit.audit``) of every estimator at epsilon 1
   and 4 on vendored Adult rows, plus the "strong" setting (full-batch cyclic
   DP-SGD without intercept on 10 rows, clipping always active on the canary)
   and a broken variant (a quarter of the noise, honest spend reported); under
   add/remove the strong setting is full-batch Poisson (a batch far above any
   released count of rows) with a broken variant whose plan accounts ten
   times the noise it adds.
2. One-run audits (``skdp.audit.audit_one_run``) of the same kinds.
3. Speed: 1,000 fits of DPLogisticRegression on 1,000 Adult rows through
   ``audit`` with n_jobs=1 and n_jobs=2.

CPU seconds are ``time.process_time`` of this process; the audit tables run
with n_jobs=1 so they count every fit. Run with ``nice -n 10``; the load
average is printed before and after, since the machine may be shared.

Usage::

    nice -n 10 python benchmarks/bench_audit.py [--quick]
"""

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from skdp.audit import audit, audit_one_run
from skdp.audit._cli import adult_audit_setup
from skdp.fairness import DPSaddlePointClassifier
from skdp.linear_model import DPLogisticRegression

# The one-step SGLD that reports the seed paper's (false) Theorem 3.1 lives
# with its test; the benchmark audits the same mechanism.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _broken import (  # noqa: E402
    SADDLE_STRONG,
    STRONG,
    STRONG_ROWS,
    NoiseDividedBy,
    NoiseDividedBy10,
    SaddleSensitivityDividedBy4,
    unit_rows,
)
from test_audit import _ClaimsTenTimesTheNoise  # noqa: E402
from test_audit_sgld_claim import OneStepSGLDWithSeedClaim  # noqa: E402

ONE_RUN_STRONG = dict(STRONG, batch_size=100_000)
# The strong setting under add/remove: Poisson batches of rate 1 (every row,
# every step), so the run is a plain Gaussian accounted by exact Gaussian DP.
# The plan reads a noisy count of the rows, so the batch is far above any
# released count (every row in every step whatever the count), and add/remove
# needs an explicit delta (the default is computed from n, which is private).
STRONG_ADD_REMOVE = dict(
    STRONG,
    batch_sampling="poisson",
    neighbouring="add-remove",
    delta=1e-5,
    batch_size=10**9,
    tail_fraction=0.0,
)
ADULT_ROWS = 200
LOGISTIC = {"epochs": 2, "batch_size": 50}


def _cases(quick):
    """(label, build, trials): build(epsilon) -> (estimator, X, y, fit_params)."""
    scale = 5 if quick else 1
    cases = []
    for sampling in ("cyclic", "shuffle", "poisson"):
        for solver in ("dp-sgd", "dp-sgld"):
            trials = (500 if sampling == "poisson" else 1000) // scale

            def build(epsilon, sampling=sampling, solver=solver):
                return adult_audit_setup(
                    "logistic",
                    ADULT_ROWS,
                    epsilon,
                    0,
                    batch_sampling=sampling,
                    solver=solver,
                    **LOGISTIC,
                )

            cases.append((f"logistic {sampling} {solver}", build, trials))

    def poisson_add_remove(epsilon):
        # Add/remove: the neighbour is the data set without the canary row.
        return adult_audit_setup(
            "logistic",
            ADULT_ROWS,
            epsilon,
            0,
            batch_sampling="poisson",
            neighbouring="add-remove",
            delta=1e-5,
            **LOGISTIC,
        )

    def strong_add_remove(epsilon, cls=DPLogisticRegression):
        X, y = unit_rows(STRONG_ROWS, 3, seed=0)
        est = cls(epsilon=epsilon, **STRONG_ADD_REMOVE)
        return est, X, y, {}

    def strong_add_remove_broken(epsilon):
        return strong_add_remove(epsilon, cls=_ClaimsTenTimesTheNoise)

    cases.append(
        ("logistic poisson dp-sgd, add/remove", poisson_add_remove, 500 // scale)
    )
    cases.append(
        (
            "logistic strong setting, add/remove (full-batch Poisson)",
            strong_add_remove,
            4000 // scale,
        )
    )
    cases.append(
        (
            "BROKEN: logistic strong, add/remove, plan accounts 10x its noise",
            strong_add_remove_broken,
            4000 // scale,
        )
    )

    def saddle(epsilon):
        return adult_audit_setup("saddle", ADULT_ROWS, epsilon, 0, n_iter=100)

    def saddle_add_remove(epsilon):
        return adult_audit_setup(
            "saddle",
            ADULT_ROWS,
            epsilon,
            0,
            n_iter=100,
            neighbouring="add-remove",
            delta=1e-5,
        )

    def saddle_strong(epsilon, cls=DPSaddlePointClassifier):
        # One full-batch step on the strong setting's rows, no groups: under
        # add/remove the count (5%) and one gradient sum (95%) are released.
        X, y = unit_rows(STRONG_ROWS, 3, seed=0)
        params = dict(SADDLE_STRONG, delta=1e-5, neighbouring="add-remove")
        return cls(epsilon=epsilon, **params), X, y, {}

    def saddle_strong_broken(epsilon):
        return saddle_strong(epsilon, cls=SaddleSensitivityDividedBy4)

    def saddle_mirror(epsilon):
        return adult_audit_setup(
            "saddle", ADULT_ROWS, epsilon, 0, n_iter=100, solver="mirror"
        )

    def synthetic(epsilon):
        return adult_audit_setup("synthetic", 500, epsilon, 0)

    def strong(epsilon):
        X, y = unit_rows(STRONG_ROWS, 3, seed=0)
        return DPLogisticRegression(epsilon=epsilon, **STRONG), X, y, {}

    def broken(epsilon):
        X, y = unit_rows(STRONG_ROWS, 3, seed=0)
        return NoiseDividedBy(epsilon=epsilon, **STRONG), X, y, {}

    def seed_sgld(epsilon):
        # Claims about 1.08 whatever the target: the row is run once.
        rng = np.random.default_rng(0)
        X = rng.uniform(-1, 1, size=(100, 2))
        return OneStepSGLDWithSeedClaim(), X, (X[:, 0] > 0).astype(int), {}

    cases += [
        ("saddle (sex groups, 100 steps)", saddle, 1000 // scale),
        (
            "saddle (sex groups, 100 steps), add/remove",
            saddle_add_remove,
            1000 // scale,
        ),
        ("saddle strong setting, add/remove", saddle_strong, 4000 // scale),
        (
            "BROKEN: saddle strong, add/remove, gradient sensitivity / 4",
            saddle_strong_broken,
            8000 // scale,
        ),
        ("saddle mirror (sex groups, 100 steps)", saddle_mirror, 1000 // scale),
        ("synthetic (4 categorical columns)", synthetic, 400 // scale),
        ("logistic strong setting", strong, 4000 // scale),
        ("BROKEN: strong setting, noise / 4", broken, 8000 // scale),
        ("BROKEN: 1-step SGLD claiming seed Thm 3.1", seed_sgld, 32000 // scale),
    ]
    return cases


def _row(label, epsilon, result, trials, wall, cpu):
    ratio = result.epsilon_lower / result.epsilon_reported
    flag = " **caught**" if result.epsilon_lower > result.epsilon_reported else ""
    return (
        f"| {label} | {epsilon} | {result.epsilon_reported:.3f} | "
        f"{result.epsilon_lower:.3f}{flag} | {ratio:.2f} | {trials} | "
        f"{wall:.1f} | {cpu:.1f} |"
    )


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def audit_table(quick, match=None):
    """Multi-fit audits of every estimator and setting (labels containing
    ``match`` only, if given)."""
    print(
        "| estimator, setting | target eps | eps reported | eps lower (95%) "
        "| lower / reported | trials | wall s | CPU s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, build, trials in _cases(quick):
        if match is not None and match not in label:
            continue
        for epsilon in (1.0,) if "SGLD claiming" in label else (1.0, 4.0):
            est, X, y, fit_params = build(epsilon)
            result, wall, cpu = _timed(
                lambda est=est, X=X, y=y, fp=fit_params, t=trials: audit(
                    est, X, y, n_trials=t, random_state=0, n_jobs=1, **fp
                )
            )
            target = "n/a" if "SGLD claiming" in label else f"{epsilon:g}"
            print(_row(label, target, result, trials, wall, cpu), flush=True)


def one_run_table(quick):
    """One-run audits: one fit each, many canaries."""
    n_canaries = 500 if quick else 1000
    X, y = unit_rows(200, 4, seed=0)
    rows = [
        ("logistic strong setting", DPLogisticRegression, ONE_RUN_STRONG, {}),
        (
            "logistic cyclic dp-sgd (2 epochs, batch 100)",
            DPLogisticRegression,
            {"batch_sampling": "cyclic", "epochs": 2, "batch_size": 100},
            {},
        ),
        (
            "logistic poisson dp-sgd (2 epochs, batch 100)",
            DPLogisticRegression,
            {"batch_sampling": "poisson", "epochs": 2, "batch_size": 100},
            {},
        ),
        ("BROKEN: strong setting, noise / 10", NoiseDividedBy10, ONE_RUN_STRONG, {}),
        ("BROKEN: strong setting, noise / 4", NoiseDividedBy, ONE_RUN_STRONG, {}),
    ]
    print(
        "| estimator, setting | target eps | eps reported | eps lower (95%) "
        "| correct / guesses | canaries | CPU s |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, cls, params, fit_params in rows:
        for epsilon in (1.0, 4.0):
            est = cls(epsilon=epsilon, **params)
            result, _, cpu = _timed(
                lambda est=est, fp=fit_params: audit_one_run(
                    est, X, y, n_canaries=n_canaries, random_state=0, **fp
                )
            )
            flag = (
                " **caught**" if result.epsilon_lower > result.epsilon_reported else ""
            )
            print(
                f"| {label} | {epsilon} | {result.epsilon_reported:.3f} | "
                f"{result.epsilon_lower:.3f}{flag} | {result.correct_guesses} / "
                f"{result.k_guesses} | {n_canaries} | {cpu:.1f} |",
                flush=True,
            )
    groups = np.where(np.arange(X.shape[0]) % 4 == 0, "a", "b")
    for epsilon in (1.0, 4.0):
        est = DPSaddlePointClassifier(epsilon=epsilon, groups=["a", "b"], n_iter=100)
        result, _, cpu = _timed(
            lambda est=est: audit_one_run(
                est,
                X,
                y,
                n_canaries=n_canaries,
                random_state=0,
                sensitive_features=groups,
            )
        )
        print(
            f"| saddle (2 groups, 100 steps) | {epsilon:g} | "
            f"{result.epsilon_reported:.3f} | {result.epsilon_lower:.3f} | "
            f"{result.correct_guesses} / {result.k_guesses} | {n_canaries} | "
            f"{cpu:.1f} |",
            flush=True,
        )


def speed_table(quick):
    """1,000 fits on 1,000 Adult rows through audit, 1 vs 2 workers."""
    trials = 200 if quick else 1000
    est, X, y, _ = adult_audit_setup("logistic", 1000, 1.0, 0)
    print(
        "| n_jobs | fits | rows | wall s | CPU s (main process) | "
        "eps lower | eps reported |"
    )
    print("|---|---|---|---|---|---|---|")
    walls = {}
    for n_jobs in (1, 2):
        result, wall, cpu = _timed(
            lambda n_jobs=n_jobs: audit(
                est, X, y, n_trials=trials, random_state=0, n_jobs=n_jobs
            )
        )
        walls[n_jobs] = wall
        print(
            f"| {n_jobs} | {trials} | {X.shape[0]} | {wall:.1f} | {cpu:.1f} | "
            f"{result.epsilon_lower:.3f} | {result.epsilon_reported:.3f} |",
            flush=True,
        )
    print(f"\nspeed-up 1 -> 2 workers: {walls[1] / walls[2]:.2f}x")


def main(argv=None):
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials")
    parser.add_argument("--only", choices=["audit", "one-run", "speed"], default=None)
    parser.add_argument(
        "--match", metavar="TEXT", help="multi-fit audits: rows whose label has TEXT"
    )
    args = parser.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}  (cpus: {os.cpu_count()})")
    start = time.perf_counter()
    if args.only in (None, "audit"):
        print("\n### Multi-fit audits\n")
        audit_table(args.quick, args.match)
    if args.only in (None, "one-run"):
        print("\n### One-run audits\n")
        one_run_table(args.quick)
    if args.only in (None, "speed"):
        print("\n### Speed\n")
        speed_table(args.quick)
    minutes = (time.perf_counter() - start) / 60
    print(
        f"\ntotal wall time {minutes:.1f} min; load average at end: {os.getloadavg()}"
    )
    return 0 if math.isfinite(minutes) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Balls-and-bins batches against Poisson batches: test accuracy and fit time.

``DPLogisticRegression`` with its defaults (``batch_sampling="poisson"``)
against the same with ``batch_sampling="balls-and-bins"``, nothing else
changed, on UCI Adult (train file / test file, :func:`skdp.datasets.
adult_design_matrix` with public bins, no ``row_norm``: the defaults' path)
and on tables of :mod:`benchmarks.panel` (75/25 stratified split per seed,
encoded from the public declaration by ``bench_panel.encode``, ``classes``
declared, no ``row_norm``), at each epsilon, both relations, ``delta =
min(1e-5, n ** -1.1)`` passed explicitly. Prints the mean test accuracy over
the seeds, and the wall time of the whole default fit on Adult for Poisson,
balls-and-bins and shuffled batches (the shuffled fit with ``row_norm`` 8,
the demo's bound, which its "auto" rules need): the first fit of each
sampler in the process (it calibrates the noise), then the mean over the
seeds of the later fits (the calibration cached), split into its phases
(the calibration, the rows' setup, the steps and, within them, the
balls-and-bins allocations, the probability floor, the spend's accounting)
and the steps' time per epoch. The first fit's calibration is also given
in CPU seconds of the process, steadier than wall time on a shared machine.

    PYTHONPATH=. nice python benchmarks/bench_balls_and_bins.py \\
        --tables mroz cowles participation --seeds 2
    PYTHONPATH=. nice python benchmarks/bench_balls_and_bins.py --time-only

``--allocation-epochs 10 15`` adds to the time table a balls-and-bins row at
each of these fixed epochs (``epochs=10``, ...; every other setting "auto"),
after the default rows.
"""

import argparse
import contextlib
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_panel import encode  # noqa: E402
from benchmarks.panel import load_panel  # noqa: E402
from skdp._solvers._sgd import _batches, _run  # noqa: E402
from skdp.datasets import adult_design_matrix, load_adult  # noqa: E402
from skdp.exceptions import PrivacyLeakWarning  # noqa: E402
from skdp.linear_model import DPLogisticRegression  # noqa: E402

SAMPLERS = ("poisson", "balls-and-bins")
RELATIONS = ("replace-one", "add-remove")
EPSILONS = (0.3, 1.0, 4.0)
ADULT_ROW_NORM = 8.0


def adult(seed):
    """Adult's train and test files (the split is fixed; ``seed`` is unused)."""
    train, test = load_adult(split="train"), load_adult(split="test")
    X_train = adult_design_matrix(train.data, bins=True)
    X_test = adult_design_matrix(test.data, bins=True)
    return X_train, X_test, np.asarray(train.target), np.asarray(test.target)


def panel_split(name, seed):
    """A panel table's split, encoded from its declaration."""
    (table,) = load_panel([name])
    F_train, F_test, y_train, y_test = table.split(seed)
    return encode(table, F_train)[0], encode(table, F_test)[0], y_train, y_test


def fit_score(data, sampling, epsilon, relation, seed, **params):
    """Test accuracy and fit seconds of one fit."""
    X_train, X_test, y_train, y_test = data
    delta = min(1e-5, X_train.shape[0] ** -1.1)
    est = DPLogisticRegression(
        epsilon=epsilon,
        delta=delta,
        batch_sampling=sampling,
        neighbouring=relation,
        classes=np.unique(np.concatenate([y_train, y_test])),
        random_state=seed,
        **params,
    )
    start = time.perf_counter()
    est.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    return float(np.mean(est.predict(X_test) == y_test)), seconds


def accuracy_table(tables, seeds, epsilons):
    """Print mean accuracy per table, relation and epsilon for each sampler."""
    print("| table | relation | epsilon | Poisson | balls-and-bins | difference |")
    print("|---|---|---|---|---|---|")
    for name in tables:
        splits = [adult(s) if name == "adult" else panel_split(name, s) for s in seeds]
        for relation in RELATIONS:
            for epsilon in epsilons:
                means = []
                for sampling in SAMPLERS:
                    accs = [
                        fit_score(data, sampling, epsilon, relation, seed)[0]
                        for seed, data in zip(seeds, splits, strict=True)
                    ]
                    means.append(np.mean(accs))
                print(
                    f"| {name} | {relation} | {epsilon:g} | {means[0]:.4f} | "
                    f"{means[1]:.4f} | {means[1] - means[0]:+.4f} |",
                    flush=True,
                )


# The phases of a fit: (label, owner, function name).
PHASES = (
    ("calibration", DPLogisticRegression, "_calibrate"),
    ("rows setup", _run, "training_rows"),
    ("steps", _run, "descend"),
    ("allocations", _batches, "allocate_epoch"),
    ("floor", _run, "calibrate_probabilities"),
    ("accounting", DPLogisticRegression, "_account"),
)


@contextlib.contextmanager
def phase_clock(totals, epochs):
    """Add each phase's wall seconds to ``totals`` while the block runs.

    Wraps the functions of :data:`PHASES` (restored on exit); the steps'
    wrapper also records the plan's epochs in ``epochs``.
    """
    saved = [(owner, name, getattr(owner, name)) for _, owner, name in PHASES]

    def clocked(label, function):
        def run(*args, **kwargs):
            if label == "steps":
                epochs.append(args[2].epochs)  # descend(W, rows, plan, ...)
            start, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                totals[label] = totals.get(label, 0.0) + time.perf_counter() - start
                cpu = time.process_time() - cpu
                totals[label + " cpu"] = totals.get(label + " cpu", 0.0) + cpu

        return run

    try:
        for (label, owner, name), (_, _, function) in zip(PHASES, saved, strict=True):
            setattr(owner, name, clocked(label, function))
        yield
    finally:
        for owner, name, function in saved:
            setattr(owner, name, function)


def time_table(seeds, allocation_epochs=()):
    """Print the wall time of the default fit on Adult per sampler, by phase.

    The first fit of each sampler calibrates its noise (unless an earlier
    table of the process did); the later fits, one per seed, find it cached.
    Then balls-and-bins at each of ``allocation_epochs`` fixed epochs.
    """
    data = adult(0)
    labels = [label for label, _, _ in PHASES]
    print(f"\nload average {os.getloadavg()[0]:.2f}")
    print(
        "\n| Adult, epsilon 1, replace-one | first fit (s) | its calibration (s) | "
        "its calibration, CPU (s) | fit (s) | epochs | per epoch (ms) | "
        + " | ".join(f"{label} (s)" for label in labels)
        + " |"
    )
    print("|---" * (7 + len(labels)) + "|")
    rows = [(s, s, {}) for s in ("poisson", "balls-and-bins")]
    rows.append(("shuffle", "shuffle", {"row_norm": ADULT_ROW_NORM}))
    rows += [
        (f"balls-and-bins@{e}", "balls-and-bins", {"epochs": int(e)})
        for e in allocation_epochs
    ]
    for label, sampling, params in rows:
        first_phases = {}
        with phase_clock(first_phases, []):
            first = fit_score(data, sampling, 1.0, "replace-one", 0, **params)[1]
        totals, epochs, seconds = {}, [], []
        with phase_clock(totals, epochs):
            for seed in seeds:
                seconds.append(
                    fit_score(data, sampling, 1.0, "replace-one", seed, **params)[1]
                )
        mean = {label: totals.get(label, 0.0) / len(seeds) for label in labels}
        per_epoch = mean["steps"] / epochs[0] * 1e3
        print(
            f"| {label} | {first:.2f} | {first_phases['calibration']:.2f} | "
            f"{first_phases['calibration cpu']:.2f} | "
            f"{np.mean(seconds):.3f} | {epochs[0]} | "
            f"{per_epoch:.1f} | "
            + " | ".join(f"{mean[label]:.3f}" for label in labels)
            + " |",
            flush=True,
        )
    print(f"load average {os.getloadavg()[0]:.2f}")


def noise_table(n, epsilons):
    """Print the calibrated noise multiplier of the default fit on ``n`` rows.

    With the probability floor (the default) and without it
    (``calibration_share=0``), from ``privacy_plan`` (no data).
    """
    print(f"\n| n = {n} | relation | epsilon | floor | Poisson z | balls-and-bins z |")
    print("|---|---|---|---|---|---|")
    delta = min(1e-5, n**-1.1)
    for relation in RELATIONS:
        for epsilon in epsilons:
            for share in ("auto", 0.0):
                z = [
                    DPLogisticRegression(
                        epsilon=epsilon,
                        delta=delta,
                        batch_sampling=sampling,
                        neighbouring=relation,
                        calibration_share=share,
                    ).privacy_plan(n)[0]
                    for sampling in SAMPLERS
                ]
                floor = "yes" if share == "auto" else "no"
                print(
                    f"| | {relation} | {epsilon:g} | {floor} | {z[0]:.3f} | "
                    f"{z[1]:.3f} |",
                    flush=True,
                )


def main(argv=None):
    """Print the accuracy and time tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", nargs="*", default=["mroz", "cowles", "fair"])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--epsilons", type=float, nargs="*", default=EPSILONS)
    parser.add_argument("--no-adult", action="store_true")
    parser.add_argument(
        "--noise-only", action="store_true", help="only the noise table (Adult's n)"
    )
    parser.add_argument(
        "--time-only", action="store_true", help="only the Adult fit-time table"
    )
    parser.add_argument(
        "--allocation-epochs",
        type=int,
        nargs="*",
        default=[],
        metavar="EPOCHS",
        help="also time balls-and-bins at each of these fixed epochs",
    )
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds))
    tables = ([] if args.no_adult else ["adult"]) + list(args.tables)
    warnings.simplefilter("ignore", PrivacyLeakWarning)
    if args.noise_only:
        noise_table(adult(0)[0].shape[0], args.epsilons)
        return
    if args.time_only:
        time_table(seeds, args.allocation_epochs)
        return
    accuracy_table(tables, seeds, args.epsilons)
    if not args.no_adult:
        time_table(seeds, args.allocation_epochs)


if __name__ == "__main__":
    main()

"""Balls-and-bins batches against Poisson batches: test accuracy and fit time.

``DPLogisticRegression`` with its defaults (``batch_sampling="poisson"``)
against the same with ``batch_sampling="balls-and-bins"``, nothing else
changed, on UCI Adult (train file / test file, :func:`skdp.datasets.
adult_design_matrix` with public bins, no ``row_norm``: the defaults' path)
and on tables of :mod:`benchmarks.panel` (75/25 stratified split per seed,
encoded from the public declaration by ``bench_panel.encode``, ``classes``
declared, no ``row_norm``), at each epsilon, both relations, ``delta =
min(1e-5, n ** -1.1)`` passed explicitly. Prints the mean test accuracy over
the seeds, and the mean wall time of the whole default fit on Adult for
Poisson, balls-and-bins and shuffled batches (the shuffled fit with
``row_norm`` 8, the demo's bound, which its "auto" rules need).

    PYTHONPATH=. nice python benchmarks/bench_balls_and_bins.py \\
        --tables mroz cowles participation --seeds 2
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_panel import encode  # noqa: E402
from benchmarks.panel import load_panel  # noqa: E402
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


def time_table(seeds):
    """Print the mean wall time of the default fit on Adult, per sampler."""
    data = adult(0)
    print("\n| Adult, epsilon 1, replace-one | fit (s) | accuracy |")
    print("|---|---|---|")
    for sampling in ("poisson", "balls-and-bins", "shuffle"):
        params = {"row_norm": ADULT_ROW_NORM} if sampling == "shuffle" else {}
        runs = [
            fit_score(data, sampling, 1.0, "replace-one", s, **params) for s in seeds
        ]
        accuracy, seconds = np.mean(runs, axis=0)
        print(f"| {sampling} | {seconds:.2f} | {accuracy:.4f} |", flush=True)


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
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds))
    tables = ([] if args.no_adult else ["adult"]) + list(args.tables)
    warnings.simplefilter("ignore", PrivacyLeakWarning)
    if args.noise_only:
        noise_table(adult(0)[0].shape[0], args.epsilons)
        return
    accuracy_table(tables, seeds, args.epsilons)
    if not args.no_adult:
        time_table(seeds)


if __name__ == "__main__":
    main()

"""Balls-and-bins against Poisson batches on the whole panel: paired differences.

Every table of :mod:`benchmarks.panel` (Adult on its train/test files, the
others on a 75/25 stratified split per seed, encoded from their public
declarations), at each epsilon, under both relations: the default
``DPLogisticRegression`` with ``batch_sampling="poisson"`` and with
``"balls-and-bins"``, the same seed and split for both. Each fit is written
as one JSON line (``--out``); the summary prints, per epsilon and relation,
the mean paired difference in test accuracy and log loss (balls-and-bins
minus Poisson) over tables and seeds with its standard error (tables x seeds
as independent pairs), and how many tables are at or above Poisson.

    PYTHONPATH=. nice python benchmarks/bench_sampler_panel.py \\
        --epsilons 0.1 0.3 1 3 8 --seeds 3 --out /tmp/sampler_panel.jsonl
    PYTHONPATH=. python benchmarks/bench_sampler_panel.py \\
        --summary /tmp/sampler_panel.jsonl

``--samplers balls-and-bins`` re-runs one sampler only (into another file,
concatenated with the other sampler's lines for ``--summary``).

``--allocation-epochs 10 15`` also fits balls-and-bins at each of these fixed
epochs (``epochs=10``, ...; every other setting "auto"), labelled
``balls-and-bins@10``, ... in the JSON lines (with their ``epochs``). The
summary then adds, for each such method, its paired differences against the
Poisson fit and against the "auto" balls-and-bins fit of the same table,
seed, epsilon and relation, and the mean fit seconds of each method:

    PYTHONPATH=. nice python benchmarks/bench_sampler_panel.py --seeds 3 \\
        --epsilons 0.3 1 4 --samplers --allocation-epochs 10 15 --out FIXED.jsonl
"""

import argparse
import json
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
from sklearn.metrics import log_loss

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_balls_and_bins import adult, panel_split  # noqa: E402
from benchmarks.panel import TABLES  # noqa: E402
from skdp.exceptions import PrivacyLeakWarning  # noqa: E402
from skdp.linear_model import DPLogisticRegression  # noqa: E402

SAMPLERS = ("poisson", "balls-and-bins")
RELATIONS = ("replace-one", "add-remove")


def fixed_label(epochs):
    """The method label of balls-and-bins at ``epochs`` fixed epochs."""
    return f"balls-and-bins@{epochs}"


def one_fit(data, sampling, epsilon, relation, seed, epochs="auto"):
    """Test accuracy, test log loss, noise multiplier and seconds of one fit."""
    X_train, X_test, y_train, y_test = data
    classes = np.unique(np.concatenate([y_train, y_test]))
    est = DPLogisticRegression(
        epsilon=epsilon,
        delta=min(1e-5, X_train.shape[0] ** -1.1),
        batch_sampling=sampling,
        neighbouring=relation,
        classes=classes,
        random_state=seed,
        epochs=epochs,
    )
    start = time.perf_counter()
    est.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    proba = est.predict_proba(X_test)
    return {
        "accuracy": float(np.mean(est.predict(X_test) == y_test)),
        "log_loss": float(log_loss(y_test, proba, labels=est.classes_)),
        "noise_multiplier": float(est.noise_multiplier_),
        "seconds": seconds,
    }


def methods(samplers, allocation_epochs=()):
    """``(label, sampling, epochs)`` of each method to fit.

    The ``samplers`` with their "auto" epochs (labelled by the sampler), then
    balls-and-bins at each of ``allocation_epochs`` (:func:`fixed_label`).
    """
    return [(s, s, "auto") for s in samplers] + [
        (fixed_label(e), "balls-and-bins", int(e)) for e in allocation_epochs
    ]


def run(tables, seeds, epsilons, out, samplers=SAMPLERS, allocation_epochs=()):
    """Fit every cell with each method, one JSON line per fit to ``out``.

    The methods are :func:`methods` of ``samplers`` and ``allocation_epochs``;
    a fixed-epochs fit's line also holds its ``epochs``.
    """
    with open(out, "a") as sink:
        for name in tables:
            for seed in seeds:
                data = adult(seed) if name == "adult" else panel_split(name, seed)
                for relation in RELATIONS:
                    for epsilon in epsilons:
                        for label, sampling, epochs in methods(
                            samplers, allocation_epochs
                        ):
                            record = one_fit(
                                data, sampling, epsilon, relation, seed, epochs
                            )
                            record.update(
                                table=name,
                                seed=seed,
                                relation=relation,
                                epsilon=epsilon,
                                sampling=label,
                            )
                            if epochs != "auto":
                                record["epochs"] = epochs
                            sink.write(json.dumps(record) + "\n")
                            sink.flush()
            print(f"done {name}", flush=True)


def grouped(records):
    """``{(relation, epsilon, table, seed): {method: record}}`` of ``records``."""
    cells = defaultdict(dict)
    for r in records:
        cells[r["relation"], r["epsilon"], r["table"], r["seed"]][r["sampling"]] = r
    return cells


def paired(records, methods=SAMPLERS):
    """The cells of :func:`grouped` that hold every one of ``methods``.

    Each cell keeps only ``methods``' records.
    """
    return {
        k: {m: v[m] for m in methods}
        for k, v in grouped(records).items()
        if all(m in v for m in methods)
    }


def mean_se(values):
    """Mean and standard error of the mean of ``values`` (nan SE for one)."""
    values = np.asarray(values, dtype=float)
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else np.nan
    return values.mean(), se


def fixed_summary(records):
    """Print each fixed-epochs method against Poisson and "auto" balls-and-bins.

    Per relation and epsilon, the mean paired difference in test accuracy
    (method minus baseline) over tables x seeds with its standard error, the
    tables at or above the baseline (mean over their seeds) and the mean
    difference in log loss; then the mean fit seconds of every method per
    epsilon and relation, over the cells that hold it ("-": none).
    """
    labels = sorted(
        {r["sampling"] for r in records if "epochs" in r},
        key=lambda label: int(label.split("@")[1]),
    )
    if not labels:
        return
    print(
        "\n| method | against | relation | epsilon | pairs | accuracy diff (SE) | "
        "tables at or above | log loss diff (SE) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label in labels:
        for base in SAMPLERS:
            cells = defaultdict(list)
            for (relation, epsilon, table, _), cell in paired(
                records, (label, base)
            ).items():
                cells[relation, epsilon].append((table, cell))
            for (relation, epsilon), rows in sorted(cells.items()):
                acc = [c[label]["accuracy"] - c[base]["accuracy"] for _, c in rows]
                loss = [c[label]["log_loss"] - c[base]["log_loss"] for _, c in rows]
                by_table = defaultdict(list)
                for (table, _), d in zip(rows, acc, strict=True):
                    by_table[table].append(d)
                above = sum(np.mean(v) >= 0 for v in by_table.values())
                (a, ase), (lo, lse) = mean_se(acc), mean_se(loss)
                print(
                    f"| {label} | {base} | {relation} | {epsilon:g} | {len(acc)} | "
                    f"{a:+.4f} ({ase:.4f}) | {above}/{len(by_table)} | "
                    f"{lo:+.4f} ({lse:.4f}) |"
                )
    every = (*SAMPLERS, *labels)
    print(
        "\n| relation | epsilon | cells | "
        + " | ".join(f"{m} (s)" for m in every)
        + " |"
    )
    print("|---" * (3 + len(every)) + "|")
    seconds = defaultdict(lambda: defaultdict(list))
    for (relation, epsilon, _, _), cell in grouped(records).items():
        for m in every:
            if m in cell:
                seconds[relation, epsilon][m].append(cell[m]["seconds"])
    for (relation, epsilon), by_method in sorted(seconds.items()):
        means = [f"{np.mean(by_method[m]):.3f}" if by_method[m] else "-" for m in every]
        cells = max(len(v) for v in by_method.values())
        print(f"| {relation} | {epsilon:g} | {cells} | " + " | ".join(means) + " |")


def summary(path):
    """Print the paired differences of the fits in ``path``."""
    records = [json.loads(line) for line in open(path)]
    pairs = paired(records)
    cells = defaultdict(list)
    for (relation, epsilon, table, _), pair in pairs.items():
        cells[relation, epsilon].append((table, pair))
    print(
        "| relation | epsilon | tables | pairs | accuracy diff (SE) | "
        "tables at or above | log loss diff (SE) | noise ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (relation, epsilon), rows in sorted(cells.items()):
        acc = np.array(
            [
                p["balls-and-bins"]["accuracy"] - p["poisson"]["accuracy"]
                for _, p in rows
            ]
        )
        loss = np.array(
            [
                p["balls-and-bins"]["log_loss"] - p["poisson"]["log_loss"]
                for _, p in rows
            ]
        )
        ratio = np.array(
            [
                p["balls-and-bins"]["noise_multiplier"]
                / p["poisson"]["noise_multiplier"]
                for _, p in rows
            ]
        )
        by_table = defaultdict(list)
        for (table, _), d in zip(rows, acc, strict=True):
            by_table[table].append(d)
        at_or_above = sum(np.mean(v) >= 0 for v in by_table.values())
        se = acc.std(ddof=1) / np.sqrt(len(acc)) if len(acc) > 1 else float("nan")
        lse = loss.std(ddof=1) / np.sqrt(len(loss)) if len(loss) > 1 else float("nan")
        print(
            f"| {relation} | {epsilon:g} | {len(by_table)} | {len(acc)} | "
            f"{acc.mean():+.4f} ({se:.4f}) | {at_or_above}/{len(by_table)} | "
            f"{loss.mean():+.4f} ({lse:.4f}) | {np.median(ratio):.3f} |"
        )
    by_table = defaultdict(list)
    for (_, _, table, _), p in pairs.items():
        by_table[table].append(
            p["balls-and-bins"]["accuracy"] - p["poisson"]["accuracy"]
        )
    print("\n| table | pairs | accuracy diff |")
    print("|---|---|---|")
    for table, diffs in sorted(by_table.items(), key=lambda kv: np.mean(kv[1])):
        print(f"| {table} | {len(diffs)} | {np.mean(diffs):+.4f} |")
    fixed_summary(records)


def main(argv=None):
    """Run the fits or print the summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", nargs="*", default=list(TABLES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="seeds first-seed, ..., first-seed + seeds - 1 (to add seeds to a run)",
    )
    parser.add_argument(
        "--epsilons", type=float, nargs="*", default=[0.1, 0.3, 1, 3, 8]
    )
    parser.add_argument("--out", default="sampler_panel.jsonl")
    parser.add_argument(
        "--samplers",
        nargs="*",
        choices=SAMPLERS,
        default=list(SAMPLERS),
        help="fit only these (to re-run one sampler into a new file after a change "
        "that leaves the other's fits as they were; concatenate the files for "
        "--summary)",
    )
    parser.add_argument(
        "--allocation-epochs",
        type=int,
        nargs="*",
        default=[],
        metavar="EPOCHS",
        help="also fit balls-and-bins at each of these fixed epochs (one method "
        "each, compared with Poisson and with 'auto' balls-and-bins)",
    )
    parser.add_argument("--summary", metavar="JSONL", help="only summarise a run")
    args = parser.parse_args(argv)
    if args.summary:
        summary(args.summary)
        return
    warnings.simplefilter("ignore", PrivacyLeakWarning)
    run(
        args.tables,
        list(range(args.first_seed, args.first_seed + args.seeds)),
        args.epsilons,
        args.out,
        args.samplers,
        args.allocation_epochs,
    )
    summary(args.out)


if __name__ == "__main__":
    main()

"""Noise needed against the number of epochs, for each batch sampler.

For n = 30,000 records, batch size 256 (118 steps an epoch), delta = 1e-5 and
a target epsilon of 1 and of 0.1, the noise multiplier (noise std on each
step's sum of clipped gradients, in clip norms) that meets the target after
1 to 100 epochs:

- **poisson**, **shuffle**, **cyclic**: what ``DPLogisticRegression`` would
  use, from ``privacy_plan(30000)`` with ``batch_sampling=...``,
  ``epochs=E``, ``calibration_share=0`` and ``centring_share=0`` (the
  whole epsilon to the training, as for the allocation below) and otherwise
  the defaults (cyclic and shuffled batches: rows projected on the unit
  ball, clipping inactive, the last-iterate bound where it is smaller).
  Shuffle and cyclic batches are replace-one only. Under add/remove the
  plan first spends 2% of epsilon and delta on a noisy count of the rows;
  the column "poisson-event" calibrates the Poisson steps alone at the full
  budget, to compare like with like.
- **allocation** (random allocation, balls-and-bins; not yet an estimator
  option): ``RandomAllocationGaussianEvent(118, z, E)`` calibrated with
  ``calibrate_noise_multiplier(..., accountant="pld")``.

Prints the table and writes ``docs/images/which_sampler.png`` and the CSV
beside it (``--from-csv`` redraws the figure without recomputing).

Usage (``--quick``: epochs 1, 10 and 100, printed, no file written)::

    nice python benchmarks/plot_samplers.py [--quick] [--from-csv]
"""

import argparse
import csv
import math
import time
import warnings
from pathlib import Path

from skdp.accounting import (
    PoissonGaussianEvent,
    RandomAllocationGaussianEvent,
    calibrate_noise_multiplier,
)
from skdp.linear_model import DPLogisticRegression

ROOT = Path(__file__).resolve().parent.parent
PNG = ROOT / "docs" / "images" / "which_sampler.png"
CSV = PNG.with_suffix(".csv")

N, BATCH, DELTA = 30_000, 256, 1e-5
STEPS = math.ceil(N / BATCH)
EPSILONS = (1.0, 0.1)
EPOCHS = (1, 2, 3, 5, 10, 20, 30, 50, 70, 100)
QUICK_EPOCHS = (1, 10, 100)
# (sampler, relation) series, in the table's column order.
SERIES = (
    ("poisson", "replace-one"),
    ("allocation", "replace-one"),
    ("shuffle", "replace-one"),
    ("cyclic", "replace-one"),
    ("poisson", "add-remove"),
    ("poisson-event", "add-remove"),
    ("allocation", "add-remove"),
)
FIELDS = ("epsilon", "sampler", "relation", "epochs", "noise_multiplier", "seconds")


def noise_needed(sampler, relation, epochs, epsilon):
    """The calibrated noise multiplier of one series at one point."""
    if sampler == "allocation":
        z, _ = calibrate_noise_multiplier(
            lambda z: [RandomAllocationGaussianEvent(STEPS, z, epochs)],
            epsilon,
            DELTA,
            neighbouring=relation,
            accountant="pld",
        )
        return z
    if sampler == "poisson-event":
        z, _ = calibrate_noise_multiplier(
            lambda z: [PoissonGaussianEvent(BATCH / N, z, STEPS * epochs)],
            epsilon,
            DELTA,
            neighbouring=relation,
            accountant="pld",
        )
        return z
    model = DPLogisticRegression(
        batch_sampling=sampler,
        batch_size=BATCH,
        epochs=epochs,
        epsilon=epsilon,
        delta=DELTA,
        neighbouring=relation,
        calibration_share=0.0,
        centring_share=0.0,
    )
    z, _, _ = model.privacy_plan(N)
    return z


def measure(epoch_grid):
    rows = []
    for epsilon in EPSILONS:
        for sampler, relation in SERIES:
            for epochs in epoch_grid:
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    z = noise_needed(sampler, relation, epochs, epsilon)
                seconds = time.perf_counter() - start
                rows.append(
                    dict(
                        epsilon=epsilon,
                        sampler=sampler,
                        relation=relation,
                        epochs=epochs,
                        noise_multiplier=z,
                        seconds=seconds,
                    )
                )
                print(
                    f"  eps={epsilon:g} {sampler:13s} {relation:11s} E={epochs:3d}"
                    f" z={z:9.4f} ({seconds:.1f} s)",
                    flush=True,
                )
    return rows


def print_table(rows):
    lookup = {
        (r["epsilon"], r["sampler"], r["relation"], r["epochs"]): r["noise_multiplier"]
        for r in rows
    }
    epoch_grid = sorted({r["epochs"] for r in rows})
    heads = [f"{s}{' R1' if rel == 'replace-one' else ' AR'}" for s, rel in SERIES]
    for epsilon in EPSILONS:
        print(
            f"\nNoise multiplier needed: epsilon = {epsilon:g}, delta = {DELTA:g}, "
            f"n = {N}, batch {BATCH} ({STEPS} steps an epoch); "
            "R1 replace-one, AR add/remove"
        )
        print(f"{'epochs':>6} " + " ".join(f"{h:>16}" for h in heads))
        for epochs in epoch_grid:
            cells = [lookup.get((epsilon, s, rel, epochs)) for s, rel in SERIES]
            print(
                f"{epochs:>6} "
                + " ".join(
                    f"{c:16.3f}" if c is not None else f"{'-':>16}" for c in cells
                )
            )


def _series(rows, epsilon, sampler, relation):
    points = sorted(
        (r["epochs"], r["noise_multiplier"])
        for r in rows
        if r["epsilon"] == epsilon
        and r["sampler"] == sampler
        and r["relation"] == relation
    )
    return [p[0] for p in points], [p[1] for p in points]


def draw(rows, path):
    """Top: the noise needed; bottom: its ratio to Poisson's, same relation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter

    colours = {
        "poisson": "tab:blue",
        "allocation": "tab:green",
        "shuffle": "tab:orange",
        "cyclic": "tab:red",
    }
    labels = {
        "poisson": "Poisson",
        "allocation": "random allocation (balls-and-bins)",
        "shuffle": "shuffle",
        "cyclic": "cyclic",
    }
    fig, axes = plt.subplots(
        2,
        len(EPSILONS),
        figsize=(11, 7.5),
        sharex=True,
        gridspec_kw={"height_ratios": [3, 2]},
    )
    for col, epsilon in enumerate(EPSILONS):
        top, bottom = axes[0, col], axes[1, col]
        for sampler, relation in SERIES:
            if sampler == "poisson-event":
                continue
            x, y = _series(rows, epsilon, sampler, relation)
            if not x:
                continue
            poisson = sampler == "poisson"
            style = dict(
                color=colours[sampler],
                linestyle="-" if relation == "replace-one" else "--",
                linewidth=5 if poisson else 1.5,
                alpha=0.35 if poisson else 1.0,
                marker=None if poisson else "o",
                markersize=3,
                label=f"{labels[sampler]}, {relation}",
            )
            top.plot(x, y, **style)
            _, base = _series(rows, epsilon, "poisson", relation)
            if base and not poisson:
                ratio = [a / b for a, b in zip(y, base, strict=True)]
                bottom.plot(x, ratio, **style)
        top.set_yscale("log")
        top.set_title(f"epsilon = {epsilon:g}, delta = {DELTA:g}")
        bottom.axhline(1.0, color=colours["poisson"], linewidth=5, alpha=0.35)
        bottom.set_yscale("log")
        bottom.set_xscale("log")
        bottom.set_xlabel("epochs")
        bottom.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        bottom.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
        for ax in (top, bottom):
            ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].set_ylabel("noise multiplier needed (lower is better)")
    axes[1, 0].set_ylabel("relative to Poisson, same relation")
    axes[0, 0].legend(fontsize=7, loc="upper left")
    fig.suptitle(
        f"Noise each sampler needs: n = {N}, batch {BATCH} ({STEPS} steps an "
        "epoch); Poisson as planned by DPLogisticRegression",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"\nwrote {path}")


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow(row)
    print(f"wrote {path}")


def read_csv(path):
    with open(path) as f:
        return [
            dict(
                epsilon=float(r["epsilon"]),
                sampler=r["sampler"],
                relation=r["relation"],
                epochs=int(r["epochs"]),
                noise_multiplier=float(r["noise_multiplier"]),
                seconds=float(r["seconds"]),
            )
            for r in csv.DictReader(f)
        ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="epochs 1, 10, 100; print only"
    )
    parser.add_argument("--from-csv", action="store_true", help="redraw only")
    args = parser.parse_args()
    if args.from_csv:
        rows = read_csv(CSV)
    else:
        rows = measure(QUICK_EPOCHS if args.quick else EPOCHS)
    print_table(rows)
    if args.quick:
        return  # a check of the script: the figure and CSV keep the full grid
    if not args.from_csv:
        write_csv(rows, CSV)
    draw(rows, PNG)


if __name__ == "__main__":
    main()

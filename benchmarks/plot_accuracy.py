"""Draw test accuracy against epsilon: skdp's defaults, non-private, incumbent.

The figure of the README and of ``docs/benchmarks.md``, regenerated from
measurements, never drawn by hand:

- **skdp**: ``DPLogisticRegression`` with its default settings, measured here
  with the code of ``benchmarks/bench_logistic.py`` (same data sets, splits,
  public row-norm bounds and seeds ``0 .. seeds-1``), mean test accuracy,
  under the default replace-one relation and under add/remove (the relation
  the incumbents report).
- **non-private**: scikit-learn's ``LogisticRegression()`` on the same
  features, measured here.
- **incumbent**: the best incumbent (Poisson DP-SGD tuned per data set) as
  quoted in issue 6: the issue author's measurements with their own
  preprocessing, *not* measured by this script (``bench_logistic.INCUMBENT``).

The measured figures are written to a CSV beside the PNG so that the picture
can be redrawn (``--from-csv``) and checked against ``docs/benchmarks.md``.

Examples
--------
Measure (5 seeds, about a minute of CPU) and draw::

    python benchmarks/plot_accuracy.py

Redraw from the CSV without measuring::

    python benchmarks/plot_accuracy.py --from-csv
"""

import argparse
import csv
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
IMAGES = ROOT / "docs" / "images"
PNG = IMAGES / "accuracy_vs_epsilon.png"
CSV = IMAGES / "accuracy_vs_epsilon.csv"

SKDP = "skdp DPLogisticRegression, defaults (measured)"
SKDP_AR = "skdp DPLogisticRegression, defaults, add/remove (measured)"
NON_PRIVATE = "non-private LogisticRegression (measured)"
INCUMBENT = "best incumbent, tuned per data set (quoted from issue 6, not measured)"
FIELDS = ("dataset", "series", "epsilon", "accuracy", "std", "seeds")


def measure(seeds, datasets):
    """Rows of the CSV: skdp and non-private measured, incumbent quoted."""
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(ROOT))
    import bench_logistic as bench

    warnings.filterwarnings("ignore", category=RuntimeWarning)
    rows = []
    for dataset in datasets:
        data = bench.load(dataset)
        reference = bench.non_private(data)
        rows.append((dataset, NON_PRIVATE, "", f"{reference:.4f}", "", 1))
        for series, relation in ((SKDP, "replace-one"), (SKDP_AR, "add-remove")):
            for epsilon in bench.EPSILONS:
                start = time.process_time()
                mean, std, _, _ = bench.evaluate(data, {}, epsilon, seeds, relation)
                print(
                    f"{dataset:14s} {relation:11s} eps={epsilon:<4g} acc={mean:.4f} "
                    f"+- {std:.4f} ({time.process_time() - start:.1f} s CPU)",
                    flush=True,
                )
                rows.append(
                    (dataset, series, epsilon, f"{mean:.4f}", f"{std:.4f}", seeds)
                )
        for epsilon, value in bench.INCUMBENT.get(dataset, {}).items():
            rows.append((dataset, INCUMBENT, epsilon, f"{value:.3f}", "", ""))
    return rows


def write_csv(rows, path):
    """Write ``rows`` with the header ``FIELDS``."""
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(FIELDS)
        writer.writerows(rows)


def read_csv(path):
    """Rows of a CSV written by :func:`write_csv`, as dicts."""
    with open(path, newline="") as stream:
        return list(csv.DictReader(stream))


def draw(records, path):
    """One panel per data set: accuracy against epsilon for each series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in records))
    fig, axes = plt.subplots(
        1, len(datasets), figsize=(4.2 * len(datasets), 3.6), squeeze=False
    )
    styles = {
        SKDP: dict(marker="o", color="C0", label="skdp (defaults, replace-one)"),
        SKDP_AR: dict(marker="^", color="C2", label="skdp (defaults, add/remove)"),
        INCUMBENT: dict(marker="s", ls=":", color="C1", label="incumbent (quoted)"),
    }
    for ax, dataset in zip(axes[0], datasets, strict=True):
        mine = [r for r in records if r["dataset"] == dataset]
        ticks = set()
        for series in (SKDP, SKDP_AR, INCUMBENT):
            points = sorted(
                (float(r["epsilon"]), float(r["accuracy"]))
                for r in mine
                if r["series"] == series
            )
            if points:
                eps, acc = zip(*points, strict=True)
                ticks.update(eps)
                ax.plot(eps, acc, **styles[series])
        for r in mine:
            if r["series"] == NON_PRIVATE:
                ax.axhline(
                    float(r["accuracy"]), color="k", ls="--", lw=1, label="non-private"
                )
        ax.set_xscale("log")
        ax.set_xticks(sorted(ticks), [f"{e:g}" for e in sorted(ticks)])
        ax.minorticks_off()
        ax.set_title(dataset)
        ax.set_xlabel("epsilon")
    axes[0][0].set_ylabel("test accuracy")
    axes[0][0].legend(fontsize=8, loc="lower right")
    seeds = {r["seeds"] for r in records if r["series"] == SKDP}
    fig.suptitle(
        f"Test accuracy, mean of {'/'.join(sorted(seeds))} seeds (skdp, measured); "
        "incumbent figures quoted from issue 6 (other preprocessing)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main(argv=None):
    """Measure (or read the CSV) and draw the figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=["adult", "adult_bins", "breast_cancer", "digits"],
    )
    parser.add_argument(
        "--from-csv", action="store_true", help=f"redraw from {CSV.name}"
    )
    parser.add_argument("--csv", type=Path, default=CSV)
    parser.add_argument("--png", type=Path, default=PNG)
    args = parser.parse_args(argv)
    if not args.from_csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        write_csv(measure(args.seeds, args.datasets), args.csv)
        print(f"wrote {args.csv}")
    draw(read_csv(args.csv), args.png)


if __name__ == "__main__":
    main()

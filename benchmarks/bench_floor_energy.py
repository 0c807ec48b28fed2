"""The probability floor's noise estimate against the noise the runs hold.

The floor starts its search from a public James-Stein share of the
coefficients, ``1 - strength (d - 2) v / ||coef||^2``, where ``v`` is the
noise variance per coefficient computed as if the loss were flat
(:func:`~skdp._solvers._sgd.tail_noise_variance`): exact for a flat loss,
too large where the loss curves and contracts the noise. This script
measures, per table of :mod:`benchmarks.panel`, how large:

1. **spread**: on the table's split 0, ``DPLogisticRegression``'s defaults
   (classes declared, no row bound) fitted with ``--runs`` seeds; the
   coefficients the run hands to the floor are read, and their variance
   over the seeds (mean over the coefficients) is set beside the flat
   estimate ``v`` of the same plans;
2. **scores**: the panel's accuracy and log-loss
   (:func:`benchmarks.bench_panel.run_table`, ``defaults-plain``, seeds
   0-2) when the floor's ``v`` is replaced by ``factor`` times the
   measured spread of step 1 (the same table, epsilon and relation), against
   the defaults. The spread reads the data without paying for it: an
   oracle for a perfect noise estimate, not a method.

Examples
--------
Epsilon 1, both relations (about two minutes)::

    PYTHONPATH=. nice python benchmarks/bench_floor_energy.py --epsilon 1 \\
        --relations replace-one add-remove --factors 1 2 1.5
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_panel import (  # noqa: E402
    RELATIONS,
    encode,
    prior_scores,
    run_table,
)
from benchmarks.panel import TABLES, load_panel  # noqa: E402
from skdp._solvers._sgd import _floor  # noqa: E402
from skdp.linear_model import DPLogisticRegression  # noqa: E402


class FloorProbe:
    """Reads what the floor receives; optionally replaces its noise estimate.

    While active, :func:`~skdp._solvers._sgd._floor.calibrate_from_sums` records
    the coefficients and the flat estimate of every fit, and
    :func:`~skdp._solvers._sgd._floor.tail_noise_variance` returns
    ``energy`` when it is set (the floor's only use of it).
    """

    def __init__(self):
        self.coefficients, self.flat, self.energy = [], [], None

    def __enter__(self):
        self._saved = (_floor.calibrate_from_sums, _floor.tail_noise_variance)
        calibrate, variance = self._saved

        def recording(sums, W, plan, noise_multiplier, **kw):
            coef = W[:-1] if kw["fit_intercept"] else W
            self.coefficients.append(coef.ravel().copy())
            self.flat.append(variance(plan, noise_multiplier, kw.get("steps")))
            return calibrate(sums, W, plan, noise_multiplier, **kw)

        def replaced(plan, noise_multiplier, steps=None):
            if self.energy is None:
                return variance(plan, noise_multiplier, steps)
            return self.energy

        _floor.calibrate_from_sums = recording
        _floor.tail_noise_variance = replaced
        return self

    def __exit__(self, *exc):
        _floor.calibrate_from_sums, _floor.tail_noise_variance = self._saved


def measure_spread(name, epsilon, relation, runs):
    """Spread over ``runs`` seeds of the coefficients the floor receives, and v.

    Returns
    -------
    dict
        ``n``, ``d`` (coefficients), ``spread`` (their variance over the
        seeds, mean over the coefficients), ``flat`` (the floor's estimate,
        mean over the runs) and ``norm2`` (mean squared norm of the
        coefficients).
    """
    (table,) = load_panel([name])
    frame, _, y, _ = table.split(0)
    X, _ = encode(table, frame)
    delta = min(1e-5, X.shape[0] ** -1.1)
    with FloorProbe() as probe, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(runs):
            DPLogisticRegression(
                epsilon=epsilon,
                delta=delta,
                neighbouring=relation,
                classes=list(table.classes),
                random_state=seed,
            ).fit(X, y)
    coef = np.array(probe.coefficients)
    return {
        "n": X.shape[0],
        "d": coef.shape[1],
        "spread": float(coef.var(axis=0, ddof=1).mean()),
        "flat": float(np.mean(probe.flat)),
        "norm2": float(np.mean(np.sum(coef**2, axis=1))),
    }


def panel_scores(name, epsilon, relation, energy):
    """``defaults-plain`` on seeds 0-2 with the floor's v set to ``energy``.

    Returns
    -------
    list of (accuracy, log-loss, accuracy - majority rate, log-loss - prior's)
        One per seed.
    """
    with FloorProbe() as probe, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probe.energy = energy
        rows = run_table(
            name, [0, 1, 2], [epsilon], [relation], ["defaults-plain"], False
        )
    (table,) = load_panel([name])
    out = []
    for seed in (0, 1, 2):
        _, _, y_train, y_test = table.split(seed)
        majority, prior = prior_scores(y_train, y_test, np.asarray(table.classes))
        (fit,) = [
            r for r in rows if r["seed"] == seed and r["method"] == "defaults-plain"
        ]
        acc, loss = fit["acc"], fit["logloss"]
        out.append((acc, loss, acc - majority, loss - prior))
    return out


SCORE_HEADER = (
    "| floor's v | accuracy | log-loss | tables with log-loss above the prior's "
    "| tables below the majority rate |\n|---|---|---|---|---|"
)


def summary_line(label, results):
    """Mean accuracy and log-loss, and the tables on the wrong side of the prior."""
    acc, loss = (
        np.mean([fit[k] for per in results.values() for fit in per]) for k in (0, 1)
    )
    means = {t: np.mean(per, axis=0) for t, per in results.items()}
    above = sorted(t for t, m in means.items() if m[3] > 0)
    below = sorted(t for t, m in means.items() if m[2] < 0)
    return (
        f"| {label} | {acc:.4f} | {loss:.4f} | {len(above)}: "
        f"{', '.join(above) or '-'} | {len(below)}: {', '.join(below) or '-'} |"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--relations", nargs="+", choices=RELATIONS, default=RELATIONS)
    parser.add_argument("--tables", nargs="+", choices=TABLES, default=list(TABLES))
    parser.add_argument("--runs", type=int, default=8, help="seeds of the spread")
    parser.add_argument(
        "--factors",
        type=float,
        nargs="*",
        default=[1.0],
        help="v = factor x spread in the scored variants (the policy's strength "
        "multiplies it, so factor 2 at strength 0.5 is James and Stein's)",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    for relation in args.relations:
        spreads = {
            t: measure_spread(t, args.epsilon, relation, args.runs) for t in args.tables
        }
        print(f"\n{relation}, epsilon {args.epsilon}, {args.runs} seeds on split 0\n")
        print("| table | rows | coefficients | spread | flat v | flat / spread |")
        print("|---|---|---|---|---|---|")
        for t, s in spreads.items():
            print(
                f"| {t} | {s['n']} | {s['d']} | {s['spread']:.3f} | "
                f"{s['flat']:.3f} | {s['flat'] / s['spread']:.2f} |"
            )
        ratios = [s["flat"] / s["spread"] for s in spreads.values()]
        print(
            f"\nflat / spread: median {np.median(ratios):.2f}, "
            f"range {min(ratios):.2f} to {max(ratios):.2f}\n"
        )
        print(SCORE_HEADER)
        variants = {"flat (the defaults)": None}
        variants.update({f"{f:g} x spread": f for f in args.factors})
        for label, factor in variants.items():
            results = {
                t: panel_scores(
                    t,
                    args.epsilon,
                    relation,
                    None if factor is None else factor * spreads[t]["spread"],
                )
                for t in args.tables
            }
            print(summary_line(label, results))
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()

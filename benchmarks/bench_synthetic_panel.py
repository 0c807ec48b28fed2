"""DPSyntheticData on the panel of public tables, against AIM, MST and noise.

Every mixed table of ``benchmarks/panel.py`` (numeric and categorical
columns; held-out tables are never in the panel), split 75/25 stratified by
label (split seed 0); the label is one more categorical column. Each
synthesizer is fitted on the 75% part with the panel's public declaration
(``Numeric`` / ``Categorical``, ``nullable`` where declared) and samples as
many rows. All methods are scored on the same codes: numeric columns in 8
equal-width bins of their declared range (``--scoring-bins 8 32``: on each
of several grids, the independent baseline measuring each grid's own bins),
missing values a level of their own. Reported per table: average
total-variation distance over all 2-way marginals and over 100 fixed random
3-way marginals, the worst 1-way TV of any column, train-on-synthetic-test-on-real
accuracy (logistic regression on one-hot bins, tested on the 25% part), CPU
seconds of fit plus sampling (``time.process_time``, fresh process) and peak
resident memory (``ru_maxrss``).

Methods: ``skdp`` (defaults: replace-one), ``skdp-ar`` (add/remove, delta
1e-5: AIM's relation), ``skdp-32`` (the former default binning, 32
equal-width bins as levels, replace-one), ``skdp-8`` (defaults but 8 public
bins, the scoring bins that the incumbents get), ``skdp-ar-8`` (add/remove
on those 8 bins: like for like with ``aim-declared``), ``independent`` (noisy
1-way marginals on the 8-bin scoring codes, Gaussian, replace-one,
calibrated to the same target).
SmartNoise's AIM and MST run in their own venv through
``bench_synthetic_incumbents.py --table NAME`` (``aim``, ``mst``: levels read
from the data by SmartNoise's encoder; with ``--declared``, ``aim-declared``,
``mst-declared``: every declared level); pass their JSON lines with
``--incumbents FILE`` to print them beside.

Usage::

    nice -n 10 python benchmarks/bench_synthetic_panel.py              # all mixed
    nice -n 10 python benchmarks/bench_synthetic_panel.py --tables fair mroz \
        --seeds 0 1 --incumbents /tmp/incumbents.jsonl
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

EPSILON = 1.0
DELTA = 1e-5
SPLIT_SEED = 0
SCORE_BINS = 8
LABEL = "label"
METHODS = ("skdp", "skdp-ar", "skdp-32", "skdp-8", "skdp-ar-8", "independent")


def panel_tables(name, score_bins=SCORE_BINS):
    """``(train, test, fit_domain, score_domain)`` of one panel table.

    ``fit_domain`` is the public declaration (``Numeric`` / ``Categorical``
    with ``nullable``), the label a categorical column of the declared
    classes; ``score_domain`` is the same with ``score_bins`` (default 8)
    equal-width bins per numeric column (shorthands, missing values a level
    of every column).
    """
    from panel import load_panel

    from skdp.schema import Categorical, Numeric

    (table,) = load_panel([name])
    X_train, X_test, y_train, y_test = table.split(seed=SPLIT_SEED)
    train = X_train.reset_index(drop=True).assign(**{LABEL: y_train})
    test = X_test.reset_index(drop=True).assign(**{LABEL: y_test})
    fit_domain, score_domain = {}, {}
    for column, spec in table.columns.items():
        nullable = column in table.nullable
        if isinstance(spec, tuple):
            fit_domain[column] = Numeric(spec[0], spec[1], nullable=nullable)
            score_domain[column] = (spec[0], spec[1], score_bins)
        else:
            fit_domain[column] = Categorical(list(spec), nullable=nullable)
            score_domain[column] = list(spec)
    fit_domain[LABEL] = Categorical(list(table.classes))
    score_domain[LABEL] = list(table.classes)
    return train, test, fit_domain, score_domain


def score_codes(train, score_domain, score_bins=SCORE_BINS):
    """The scoring codes of ``train``: ``(codes, specs, info)``."""
    from skdp.synthetic._domain import as_table, build_specs, encode_table

    columns, info = as_table(train)
    specs = build_specs(columns, score_domain, score_bins, missing="category")
    return encode_table(columns, specs), specs, info


def independent_marginals(train, score_domain, epsilon, seed, score_bins=SCORE_BINS):
    """Noisy independent 1-way marginals on the scoring codes (their own bins)."""
    from bench_synthetic import noisy_independent_marginals

    codes, specs, info = score_codes(train, score_domain, score_bins)
    return noisy_independent_marginals(codes, specs, info, epsilon, seed, DELTA)


def scores(train, test, synth, score_domain, score_bins=SCORE_BINS):
    """2-way, 3-way and worst 1-way TV on the scoring codes, and TSTR."""
    from skdp.synthetic import marginal_error, marginal_errors, tstr_accuracy

    one_way = marginal_errors(train, synth, score_domain, ways=1)[1]
    return {
        "tv1_max": float(one_way.max()),
        "tv1": [float(v) for v in one_way],
        "tv2": marginal_error(train, synth, score_domain, ways=2),
        "tv3": marginal_error(train, synth, score_domain, ways=3),
        "tstr": tstr_accuracy(synth, test, LABEL, score_domain, bins=score_bins),
    }


def run_one(table, method, seed, epsilon=EPSILON, policy=None, scoring_bins=None):
    """Fit and sample one method on one table in this process.

    ``policy``: overrides of the tuning policy (field -> value).
    ``scoring_bins``: the scoring grids (numbers of equal-width bins of each
    numeric column, default ``[8]``); the scores of each are under
    ``"grids"`` (keyed by the number as text), the first grid's also at the
    top level. A synthesizer is fitted once and scored on every grid; the
    independent baseline is run once per grid on that grid's own bins (the
    CPU and memory reported are those of all its runs).
    """
    from bench_synthetic import fit_and_sample, process_cost

    from skdp.synthetic import DPSyntheticData

    grids = list(scoring_bins or [SCORE_BINS])
    tables = {b: panel_tables(table, b) for b in grids}
    train, test, fit_domain, _ = tables[grids[0]]
    start = time.process_time()
    by_grid = {}
    if method == "independent":
        for b in grids:
            synth, spent = independent_marginals(train, tables[b][3], epsilon, seed, b)
            by_grid[b] = scores(train, test, synth, tables[b][3], b)
    else:
        options = {}
        if method.startswith("skdp-ar"):
            options["neighbouring"] = "add-remove"
        if method == "skdp-32":
            options["binning"] = "fixed"
        if method.endswith("-8"):
            options["bins"] = SCORE_BINS
        model = DPSyntheticData(
            epsilon=epsilon,
            delta=DELTA,
            domain=fit_domain,
            random_state=seed,
            **options,
        )
        synth, spent = fit_and_sample(model, train, policy)
    cpu, peak_mb = process_cost(start)
    for b in grids:
        if b not in by_grid:
            by_grid[b] = scores(train, test, synth, tables[b][3], b)
    return {
        "table": table,
        "method": method,
        "epsilon": epsilon,
        "seed": seed,
        "spent": spent,
        "cpu": cpu,
        "peak_mb": peak_mb,
        **by_grid[grids[0]],
        "grids": {str(b): by_grid[b] for b in grids},
    }


def mixed_tables():
    """Names of the panel's mixed tables."""
    from panel import TABLES, load_panel

    return [t.name for t in load_panel(TABLES) if t.mixed]


def _in_subprocess(table, method, seed, policy=None, scoring_bins=None):
    spec = json.dumps(
        {
            "table": table,
            "method": method,
            "seed": seed,
            "policy": policy,
            "scoring_bins": scoring_bins,
        }
    )
    done = subprocess.run(
        [sys.executable, __file__, "--child", spec],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _mean(rows, key):
    return float(np.mean([r[key] for r in rows])) if rows else float("nan")


def report(results):
    """The per-table comparison as text (means over seeds)."""
    methods = [
        m
        for m in (*METHODS, "aim", "mst", "aim-declared", "mst-declared")
        if any(r["method"].split("-patched")[0] == m for r in results)
    ]
    lines = []
    for key, label in (
        ("tv2", "2-way TV"),
        ("tv3", "3-way TV"),
        ("tv1_max", "worst 1-way TV"),
        ("tstr", "TSTR"),
        ("cpu", "CPU s"),
        ("peak_mb", "peak MB"),
    ):
        lines.append(f"{label} (epsilon {EPSILON:g}, mean over seeds)")
        lines.append(f"{'table':<22}" + "".join(f"{m:>12}" for m in methods))
        for table in sorted({r["table"] for r in results}):
            cells = []
            for m in methods:
                rows = [
                    r
                    for r in results
                    if r["table"] == table and r["method"].split("-patched")[0] == m
                ]
                fmt = ".3f" if key.startswith(("tv", "tstr")) else ".0f"
                cells.append(f"{_mean(rows, key):>12{fmt}}" if rows else f"{'-':>12}")
            lines.append(f"{table:<22}" + "".join(cells))
        lines.append("")
    return "\n".join(lines)


def column_shortfalls(results):
    """Columns whose 1-way TV under ``skdp`` exceeds the independent baseline's."""
    lines = []
    for table in sorted({r["table"] for r in results}):
        ours = [r for r in results if r["table"] == table and r["method"] == "skdp"]
        base = [
            r for r in results if r["table"] == table and r["method"] == "independent"
        ]
        if not ours or not base:
            continue
        a = np.mean([r["tv1"] for r in ours], axis=0)
        b = np.mean([r["tv1"] for r in base], axis=0)
        worse = np.flatnonzero(a > b)
        if worse.size:
            pairs = ", ".join(f"#{j}: {a[j]:.3f} vs {b[j]:.3f}" for j in worse)
            lines.append(f"{table}: 1-way worse than independent on {pairs}")
    return "\n".join(lines) or "no column's 1-way TV is worse than independent's"


def at_grid(results, bins):
    """``results`` with the scores of the ``bins`` grid at the top level."""
    out = []
    for r in results:
        grid = r.get("grids", {}).get(str(bins))
        if grid is not None:
            out.append({**r, **grid})
    return out


def main(argv=None):
    """Run the panel benchmark and print the per-table comparison."""
    from bench_synthetic import parse_policy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", default=None)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--incumbents", help="JSON lines of the incumbents' runs")
    parser.add_argument("--results", help="also append every run here (JSON lines)")
    parser.add_argument(
        "--policy",
        nargs="+",
        metavar="FIELD=VALUE",
        help="a variant of the AIM tuning policy (AIMPolicy fields, Python "
        "literals), e.g. rounds_per_column=8",
    )
    parser.add_argument(
        "--scoring-bins",
        nargs="+",
        type=int,
        default=[SCORE_BINS],
        metavar="BINS",
        help="scoring grids: equal-width bins per numeric column (default 8); "
        "with several, every run is scored on each and the baseline measures "
        "each grid's own bins",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        result = run_one(
            spec["table"],
            spec["method"],
            spec["seed"],
            policy=spec["policy"],
            scoring_bins=spec.get("scoring_bins"),
        )
        print(json.dumps(result))
        return 0
    policy = parse_policy(args.policy)
    tables = args.tables or mixed_tables()
    results = []
    for table in tables:
        for method in args.methods:
            for seed in args.seeds:
                result = _in_subprocess(table, method, seed, policy, args.scoring_bins)
                print(json.dumps(result), file=sys.stderr, flush=True)
                if args.results:
                    with open(args.results, "a") as handle:
                        handle.write(json.dumps(result) + "\n")
                results.append(result)
    if args.incumbents:
        with open(args.incumbents) as handle:
            results += [
                r
                for r in map(json.loads, filter(str.strip, handle))
                if r["table"] in tables
            ]
    for bins in args.scoring_bins:
        at = at_grid(results, bins) if len(args.scoring_bins) > 1 else results
        print(
            f"Panel, 75/25 split, delta {DELTA:g}, seeds {args.seeds}, "
            f"scored on {bins} bins:"
        )
        print(report(at))
        print(column_shortfalls(at))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The gap to non-private logistic regression on the panel, table by table.

For each table of :mod:`benchmarks.panel`, at one epsilon and for each
relation, this script fits what :func:`benchmarks.bench_panel.run_table` fits
(the class prior, non-private logistic regression, the per-table-tuned plain
DP-SGD ``sgd-tuned`` and ``DPLogisticRegression``'s defaults,
``defaults-plain``) on the same encoding and split, and then every
configuration of ``GRID``: ``DPLogisticRegression`` (Poisson DP-SGD, no row
bound) with explicit batch size, epochs, step, clip norm, probability-floor
share and private-centre share. Each fit meets the same epsilon, delta and
relation as the defaults.

The **oracle envelope** of a table is the best mean test accuracy (over the
seeds) among the defaults and the configurations of ``GRID``, the
configuration chosen per table and relation *on the test rows*. It is not
private and is biased upwards (a maximum over noisy test accuracies): an
upper bound on what choosing these hyper-parameters of DP-SGD can give at
this epsilon, not a method.

``--noise-free`` adds the grid fitted with a negligible noise multiplier
(``1e-3``; no floor and no centre, which need a target epsilon): the
accuracy of clipped Poisson SGD with these steps and epochs when the privacy noise is
removed, which separates what the budget costs from what the clipped,
few-epoch optimisation itself costs. Its privacy spend is not bounded by the
epsilon above and it is only a diagnostic.

Examples
--------
All tables, seeds 0-2, epsilon 1, both relations::

    PYTHONPATH=. nice python benchmarks/bench_panel_oracle.py --seeds 3 \\
        --jobs 2 --out oracle.jsonl

Summary (per-table table and the grouped table) of stored rows, optionally
of some tables and seeds only (``--tables``, ``--seed-list``)::

    PYTHONPATH=. python benchmarks/bench_panel_oracle.py --load oracle.jsonl \\
        --markdown
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_panel import (  # noqa: E402
    RELATIONS,
    _estimator,
    encode,
    run_table,
    run_tables,
    scores,
    tables_and_seeds,
)
from benchmarks.panel import TABLES, load_panel  # noqa: E402
from skdp.exceptions import PrivacyLeakWarning  # noqa: E402

DEFAULTS = "defaults-plain"
# The gap the issue allows, in accuracy points.
TARGET_POINTS = 0.75
# Seeds a table needs for the held-out check of the oracle's optimism.
HELD_OUT_MIN_SEEDS = 6
# A noise multiplier that leaves the run noise-free in effect.
NEGLIGIBLE_NOISE = 1e-3


def _grid():
    """The configurations of the oracle: name -> estimator parameters.

    A product of batch size (64, 256, 1024; capped at the rows), epochs
    (10, 40) and step (0.5, 2) at clip norm 1, then, at batch 256 and 30
    epochs, a larger step (8), a tighter and a looser clip at the same step
    times clip (2), and the private centre off. All with the probability
    floor off (``calibration_share=0``: the whole budget to training) and
    the estimator's other defaults (tail average of the last half, the
    private centre on, ``alpha=1e-4``).
    """
    grid = {}
    for batch in (64, 256, 1024):
        for epochs in (10, 40):
            for step in (0.5, 2.0):
                grid[f"b{batch}-e{epochs}-lr{step:g}"] = {
                    "batch_size": batch,
                    "epochs": epochs,
                    "learning_rate": step,
                    "max_grad_norm": 1.0,
                }
    base = {"batch_size": 256, "epochs": 30}
    grid["b256-e30-lr8"] = {**base, "learning_rate": 8.0, "max_grad_norm": 1.0}
    grid["b256-e30-c0.1"] = {**base, "learning_rate": 20.0, "max_grad_norm": 0.1}
    grid["b256-e30-c5"] = {**base, "learning_rate": 0.4, "max_grad_norm": 5.0}
    grid["b256-e30-lr2-nocentre"] = {
        **base,
        "learning_rate": 2.0,
        "max_grad_norm": 1.0,
        "centring_share": 0.0,
    }
    for params in grid.values():
        params.setdefault("calibration_share", 0.0)
    return grid


GRID = _grid()


def n_coefficients(n_features, n_classes):
    """Coefficients of the model, intercept included (one logit for two classes)."""
    return (n_features + 1) * (1 if n_classes == 2 else n_classes)


def _fit_score(params, table, X_train, y_train, X_test, y_test, cell):
    """Fit ``DPLogisticRegression(**params)`` for ``cell``; accuracy and log-loss."""
    noise_free = cell["method"].startswith("nonoise:")
    if noise_free:
        params = {**params, "calibration_share": 0.0, "centring_share": 0.0}
    est = _estimator(
        params,
        table,
        None,
        None if noise_free else cell["epsilon"],
        cell["delta"],
        cell["relation"],
        cell["seed"],
    )
    if noise_free:
        est.set_params(noise_multiplier=NEGLIGIBLE_NOISE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        est.fit(X_train, y_train)
    spent = est.privacy_spent_.epsilon
    if not noise_free and spent > cell["epsilon"] * (1 + 1e-9):
        raise RuntimeError(f"{cell['method']} spent more than {cell['epsilon']}")
    return scores(est, X_test, y_test, np.asarray(table.classes))


def run_oracle_table(name, seeds, epsilon, relations, noise_free=False):
    """Baselines, defaults and the grid on one table: a list of result rows."""
    rows = run_table(name, seeds, [epsilon], relations, [DEFAULTS])
    (table,) = load_panel([name])
    for seed in seeds:
        F_train, F_test, y_train, y_test = table.split(seed)
        X_train, _ = encode(table, F_train)
        X_test, _ = encode(table, F_test)
        n = X_train.shape[0]
        base = {
            "table": name,
            "seed": seed,
            "n": n,
            "n_coef": n_coefficients(X_train.shape[1], len(table.classes)),
            "epsilon": epsilon,
            "delta": min(1e-5, n**-1.1),
        }
        methods = [f"grid:{g}" for g in GRID]
        if noise_free:
            methods += [f"nonoise:{g}" for g in GRID]
        for relation in relations:
            for method in methods:
                if method.startswith("nonoise:") and relation != relations[0]:
                    continue  # without noise the relation changes nothing
                cell = {**base, "relation": relation, "method": method}
                t = time.perf_counter()
                params = GRID[method.split(":", 1)[1]]
                acc, loss = _fit_score(
                    params, table, X_train, y_train, X_test, y_test, cell
                )
                secs = time.perf_counter() - t
                rows.append({**cell, "acc": acc, "logloss": loss, "secs": secs})
    n_coef = {r["seed"]: r["n_coef"] for r in rows if "n_coef" in r}
    for r in rows:
        r.setdefault("n_coef", n_coef[r["seed"]])
    return rows


# ---------------------------------------------------------------------------
# Summary


def _acc(rows, seeds, **match):
    """Accuracy per seed (in ``seeds``' order) of the rows matching ``match``."""
    by_seed = {
        r["seed"]: r["acc"]
        for r in rows
        if all(r.get(k) == v for k, v in match.items())
    }
    if any(s not in by_seed for s in seeds):
        return None
    return np.array([by_seed[s] for s in seeds])


def table_gaps(rows, relation):
    """Per table: sizes, the baselines, the defaults' gap and the oracle envelope.

    Accuracies are means over the seeds the table has; the gap is in points
    (non-private minus the method), with the standard error of its paired
    per-seed differences. With at least ``HELD_OUT_MIN_SEEDS`` seeds,
    ``held_out_gap`` is the gap of the configuration chosen on the first
    half of the seeds, measured on the second half (the oracle without its
    selection on the same test rows).
    """
    out = []
    tables = [t for t in TABLES if any(r["table"] == t for r in rows)]
    for t in tables:
        mine = [r for r in rows if r["table"] == t]
        seeds = sorted({r["seed"] for r in mine})
        first = next(r for r in mine if r["seed"] == seeds[0])
        nonpriv = _acc(mine, seeds, method="nonprivate")
        prior = _acc(mine, seeds, method="prior")
        defaults = _acc(mine, seeds, method=DEFAULTS, relation=relation)
        if defaults is None:
            continue
        tuned = _acc(mine, seeds, method="sgd-tuned", relation=relation)
        candidates = {DEFAULTS: defaults}
        noise_free = {}
        for g in GRID:
            acc = _acc(mine, seeds, method=f"grid:{g}", relation=relation)
            if acc is not None:
                candidates[g] = acc
            acc = _acc(mine, seeds, method=f"nonoise:{g}")
            if acc is not None:
                noise_free[g] = acc
        best = max(candidates, key=lambda g: candidates[g].mean())
        gap = 100 * (nonpriv - defaults)
        entry = {
            "table": t,
            "seeds": len(seeds),
            "n": first["n"],
            "n_coef": first["n_coef"],
            "majority": prior.mean(),
            "nonprivate": nonpriv.mean(),
            "defaults": defaults.mean(),
            "gap": gap.mean(),
            "gap_se": gap.std(ddof=1) / np.sqrt(len(seeds)) if len(seeds) > 1 else 0,
            "tuned": None if tuned is None else tuned.mean(),
            "oracle": candidates[best].mean(),
            "oracle_config": best,
            "oracle_gap": 100 * (nonpriv - candidates[best]).mean(),
        }
        if len(seeds) >= HELD_OUT_MIN_SEEDS:
            half = len(seeds) // 2
            pick = max(candidates, key=lambda g: candidates[g][:half].mean())
            held = nonpriv[half:] - candidates[pick][half:]
            entry["held_out_gap"] = 100 * held.mean()
        if noise_free:
            nf = max(noise_free, key=lambda g: noise_free[g].mean())
            entry["noise_free"] = noise_free[nf].mean()
            entry["noise_free_config"] = nf
        out.append(entry)
    return out


def verdict(entry):
    """Where the defaults' gap stands against the target.

    ``within``: at most ``TARGET_POINTS``; ``noise``: beyond it by less than
    two standard errors of the paired gap; ``defaults``: beyond it while the
    oracle envelope is within it (choosing the hyper-parameters could close
    it); ``budget``: the oracle envelope is beyond it too.
    """
    if entry["gap"] <= TARGET_POINTS:
        return "within"
    if entry["gap"] - 2 * entry["gap_se"] <= TARGET_POINTS:
        return "noise"
    if entry["oracle_gap"] <= TARGET_POINTS:
        return "defaults"
    return "budget"


SIZE_GROUPS = ("< 700", "700-5,000", "> 5,000")
RATIO_GROUPS = ("< 0.01", "0.01-0.05", "> 0.05")


def size_group(n):
    """Training-set size group of a table."""
    return "< 700" if n < 700 else ("700-5,000" if n <= 5000 else "> 5,000")


def ratio_group(entry):
    """Coefficients-per-training-row group of a table."""
    ratio = entry["n_coef"] / entry["n"]
    return "< 0.01" if ratio < 0.01 else ("0.01-0.05" if ratio <= 0.05 else "> 0.05")


def _grouped(entries, key, order):
    """Per group: tables, mean gap and oracle gap, share of the panel's gap."""
    total = sum(e["gap"] for e in entries)
    groups = {}
    for e in entries:
        groups.setdefault(key(e), []).append(e)
    out = []
    for g in order:
        members = groups.get(g, [])
        if not members:
            continue
        out.append(
            (
                g,
                len(members),
                np.mean([e["gap"] for e in members]),
                np.mean([e["oracle_gap"] for e in members]),
                sum(e["gap"] for e in members) / len(entries),
                sum(e["gap"] for e in members) / total if total else float("nan"),
            )
        )
    return out


def _fmt(value, spec=".3f"):
    return "-" if value is None else format(value, spec)


def _line(cells, markdown):
    """One row of a table: Markdown, or cells separated by two spaces."""
    if markdown:
        return "| " + " | ".join(cells) + " |"
    return "  ".join(cells)


def summarise(rows, markdown=False, out=print):
    """The per-table table and the grouped tables, per relation."""
    relations = [
        rel for rel in RELATIONS if any(r.get("relation") == rel for r in rows)
    ]
    for relation in relations:
        entries = table_gaps(rows, relation)
        has_nf = all("noise_free" in e for e in entries)
        epsilon = next(r["epsilon"] for r in rows if "epsilon" in r)
        out(f"\n== {relation}, epsilon {epsilon:g} ==\n")
        head = (
            [
                "table",
                "seeds",
                "train rows",
                "coef",
                "coef/row",
                "majority",
                "non-private",
                "defaults",
                "gap (SE)",
                "sgd-tuned",
                "oracle",
                "oracle gap",
                "oracle config",
                "held-out gap",
            ]
            + (["noise-free"] if has_nf else [])
            + ["verdict"]
        )
        out(_line(head, markdown))
        if markdown:
            out("|---" * len(head) + "|")
        for e in entries:
            cells = [
                e["table"],
                str(e["seeds"]),
                f"{e['n']:,}",
                str(e["n_coef"]),
                f"{e['n_coef'] / e['n']:.3f}",
                _fmt(e["majority"]),
                _fmt(e["nonprivate"]),
                _fmt(e["defaults"]),
                f"{e['gap']:+.1f} ({e['gap_se']:.1f})",
                _fmt(e["tuned"]),
                _fmt(e["oracle"]),
                f"{e['oracle_gap']:+.1f}",
                e["oracle_config"],
                _fmt(e.get("held_out_gap"), "+.1f"),
            ]
            if has_nf:
                cells.append(_fmt(e["noise_free"]))
            cells.append(verdict(e))
            out(_line(cells, markdown))
        mean = {
            k: np.mean([e[k] for e in entries])
            for k in ("majority", "nonprivate", "defaults", "gap", "oracle")
        }
        mean["oracle_gap"] = np.mean([e["oracle_gap"] for e in entries])
        tuned = [e["tuned"] for e in entries]
        mean_tuned = None if None in tuned else np.mean(tuned)
        cells = [
            "MEAN",
            "",
            "",
            "",
            "",
            _fmt(mean["majority"], ".4f"),
            _fmt(mean["nonprivate"], ".4f"),
            _fmt(mean["defaults"], ".4f"),
            f"{mean['gap']:+.2f}",
            _fmt(mean_tuned, ".4f"),
            _fmt(mean["oracle"], ".4f"),
            f"{mean['oracle_gap']:+.2f}",
            "",
            "",
        ]
        if has_nf:
            cells.append(_fmt(np.mean([e["noise_free"] for e in entries]), ".4f"))
        cells.append("")
        out(_line(cells, markdown))
        for title, key, order in (
            ("training rows", lambda e: size_group(e["n"]), SIZE_GROUPS),
            ("coefficients per training row", ratio_group, RATIO_GROUPS),
        ):
            out("")
            head = [
                title,
                "tables",
                "mean gap",
                "mean oracle gap",
                "contribution to the panel's mean gap",
                "share",
            ]
            out(_line(head, markdown))
            if markdown:
                out("|---" * len(head) + "|")
            for g, k, gap, ogap, contrib, share in _grouped(entries, key, order):
                cells = [
                    g,
                    str(k),
                    f"{gap:+.1f}",
                    f"{ogap:+.1f}",
                    f"{contrib:+.2f}",
                    f"{share:.0%}",
                ]
                out(_line(cells, markdown))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", nargs="*", default=None, choices=TABLES)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. n-1")
    parser.add_argument("--seed-list", type=int, nargs="*", default=None)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--relations", nargs="*", default=RELATIONS, choices=RELATIONS)
    parser.add_argument(
        "--noise-free",
        action="store_true",
        help="also fit the grid without noise (a diagnostic, not private)",
    )
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default=None, help="append result rows (JSON lines)")
    parser.add_argument("--load", nargs="*", default=None, help="summarise these")
    parser.add_argument("--markdown", action="store_true", help="Markdown tables")
    args = parser.parse_args(argv)

    if args.load:
        rows = [json.loads(line) for p in args.load for line in open(p)]
        if args.tables or args.seed_list is not None:
            rows = [
                r
                for r in rows
                if (not args.tables or r["table"] in args.tables)
                and (args.seed_list is None or r["seed"] in args.seed_list)
            ]
        summarise(rows, markdown=args.markdown)
        return rows
    tables, seeds = tables_and_seeds(args)
    task = dict(
        seeds=seeds,
        epsilon=args.epsilon,
        relations=args.relations,
        noise_free=args.noise_free,
    )
    t0 = time.perf_counter()
    rows = run_tables(run_oracle_table, tables, args.jobs, args.out, **task)
    summarise(rows, markdown=args.markdown)
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return rows


if __name__ == "__main__":
    main()

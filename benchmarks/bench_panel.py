"""DPLogisticRegression on the panel of public tables (issue 20, items 2, 3, 5).

Every table of :mod:`benchmarks.panel` is encoded from its public declaration
alone by :class:`~skdp.preprocessing.SchemaEncoder` (numeric columns clipped to
their declared ``(low, high)`` and mapped to [-1, 1], categoricals one-hot on
their declared categories, unknown values all zeros, a nullable column with one
more output, its missing indicator), so every encoded row has norm at most
``row_norm_ = sqrt(n_columns)``, the public bound the schema implies. Each
table is split 75/25, stratified, by ``PanelTable.split(seed)``,
for several seeds, and every method below is fitted on the training part and
scored on the test part (accuracy and log-loss, predicted probabilities
floored at 1e-15 for the log):

- ``defaults-plain``: ``DPLogisticRegression`` with its defaults on the encoded
  array, no ``row_norm`` given (the path of a user with a plain array);
- ``defaults-schema``: the defaults with ``row_norm`` and ``classes`` from the
  declaration;
- ``nonprivate``: scikit-learn's ``LogisticRegression`` (default ``C=1``) on the
  same encoding;
- ``prior``: the constant predictor of the training split's class frequencies
  (its accuracy is the majority rate);
- ``sgd-tuned``: a plain Poisson DP-SGD (expected batch 256, clip norm 1, no
  row projection, constant step, last iterate, no penalty), its noise
  calibrated by skdp's own accountant (PLD) to the same epsilon, delta and
  relation, with the step in ``SGD_RATES`` and the epochs in ``SGD_EPOCHS``
  chosen per table, seed, epsilon and relation by validation accuracy on a
  stratified 20% of the training part, then refitted on the whole training
  part. The tuning is NOT private (it reads the validation rows without
  paying for it), as incumbents are used and compared; the defaults have no
  such advantage.

Extra configurations (``--configs``, see ``CONFIGS``) are candidate defaults
measured with public parameters of the estimator only.

Privacy parameters: ``epsilon`` in ``--epsilons``; ``delta =
min(1e-5, n ** -1.1)`` with ``n`` the training rows, declared public and passed
explicitly under both relations (``--relations``: ``replace-one``,
``add-remove``).

Examples
--------
Exploration (two tables, one seed)::

    PYTHONPATH=. nice python benchmarks/bench_panel.py --tables mroz fair \\
        --seeds 1 --epsilons 1

Full run (docs/benchmarks.md)::

    PYTHONPATH=. nice python benchmarks/bench_panel.py --seeds 3 --jobs 2 \\
        --out panel.jsonl

Summary of stored results without refitting::

    PYTHONPATH=. python benchmarks/bench_panel.py --load panel.jsonl
"""

import argparse
import dataclasses
import json
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_logistic import with_policy  # noqa: E402
from benchmarks.panel import TABLES, load_panel  # noqa: E402
from skdp._solvers._sgd import (  # noqa: E402
    DEFAULT_POLICY,
    make_plan,
    run_logistic_sgd,
)
from skdp.accounting import calibrate_noise_multiplier  # noqa: E402
from skdp.exceptions import PrivacyLeakWarning  # noqa: E402
from skdp.preprocessing import SchemaEncoder  # noqa: E402
from skdp.schema import Categorical, Numeric, TableSchema  # noqa: E402

EPSILONS = (0.3, 1.0, 4.0)
RELATIONS = ("replace-one", "add-remove")
SGD_BATCH = 256
SGD_CLIP = 1.0
SGD_RATES = (0.1, 0.5, 2.0)
SGD_EPOCHS = (10, 30)
VALIDATION_SHARE = 0.2
PROBA_FLOOR = 1e-15

# Candidate configurations: estimator parameters, with these special keys:
# ``row_norm`` "schema" (the declared bound); ``policy``: fields of the tuning
# policy (:class:`~skdp._solvers._sgd.SGDPolicy`) to replace. ``classes`` is
# the declared list unless given.
CONFIGS = {
    "defaults-plain": {"classes": None},
    "defaults-schema": {"row_norm": "schema"},
}

# Parts of a composed name that set a field of the tuning policy.
_POLICY_PARTS = {
    "s": "unbounded_step",
    "js": "shrink_strength",
    "h": "prior_weight",
    "m": "floor_margin",
}


def config(name):
    """The configuration called ``name``: ``CONFIGS[name]`` or a composed name.

    Composed names start with ``np``: no row bound (the rules of rows of
    unknown norm: clip norm ``unbounded_clip``, 1), a step times clip norm of
    2 and the travel cap of bounded rows (8 under replace-one, 32 under
    add/remove); they add ``-s<step>`` (step times clip norm, before the
    travel cap), ``-a<alpha>``, ``-e<epochs>``, ``-c<calibration share>``,
    ``-k<centring share>``,
    ``-tr<travel>`` and ``-ta<travel>`` (the travel cap's constant under
    replace-one and add/remove), and for the probability floor
    ``-js<strength>`` (of the public shrinkage that sets the search's start),
    ``-h<weight>`` (the prior's share of the release) and ``-m<margin>``
    (noise standard deviations another point must win by).

    ``<config>:<field>=<value>[,<field>=<value>...]`` is ``<config>`` with
    those fields of the tuning policy replaced (numbers), e.g.
    ``defaults-plain:unbounded_quiet_clip=5``.
    """
    if name in CONFIGS:
        return CONFIGS[name]
    if ":" in name:
        return _with_policy_fields(name)
    parts = name.split("-")
    if parts[0] != "np":
        raise ValueError(f"unknown configuration {name!r}")
    cfg = {"policy": {"unbounded_step": 2.0}}
    travel = {}
    for part in parts[1:]:
        key = re.match(r"[a-z]+", part).group()
        value = float(part[len(key) :])
        if key == "a":
            cfg["alpha"] = value
        elif key == "e":
            cfg["epochs"] = int(value)
        elif key == "c":
            cfg["calibration_share"] = value
        elif key == "k":
            cfg["centring_share"] = value
        elif key in _POLICY_PARTS:
            cfg["policy"][_POLICY_PARTS[key]] = value
        elif key in ("tr", "ta"):
            travel["replace_one" if key == "tr" else "add_remove"] = value
        else:
            raise ValueError(f"unknown part {part!r} of {name!r}")
    cfg["policy"]["unbounded_travel"] = dataclasses.replace(
        DEFAULT_POLICY.travel, **travel
    )
    return cfg


def _with_policy_fields(name):
    """``<config>:<field>=<value>,...``: a configuration with policy fields set."""
    base, fields = name.split(":", 1)
    cfg = dict(config(base))
    policy = dict(cfg.get("policy", {}))
    for item in fields.split(","):
        field, value = item.split("=")
        if field not in {f.name for f in dataclasses.fields(DEFAULT_POLICY)}:
            raise ValueError(f"unknown policy field {field!r} in {name!r}")
        policy[field] = float(value)
    cfg["policy"] = policy
    return cfg


# ---------------------------------------------------------------------------
# Encoding on public bounds


def table_schema(table):
    """The panel table's public declaration as a :class:`~skdp.schema.TableSchema`."""
    columns = {}
    for name, spec in table.columns.items():
        nullable = name in table.nullable
        if isinstance(spec, tuple):
            columns[name] = Numeric(spec[0], spec[1], nullable=nullable)
        else:
            columns[name] = Categorical(tuple(spec), nullable=nullable)
    return TableSchema(columns, classes=list(table.classes))


def encode(table, frame):
    """Design matrix of ``frame`` from ``table``'s public declaration alone.

    :class:`~skdp.preprocessing.SchemaEncoder` with unknown categories encoded
    as all zeros (``handle_unknown="ignore"``).

    Returns
    -------
    X : ndarray of shape (n_rows, n_outputs)
    row_bound : float
        The encoder's ``row_norm_``, ``sqrt(n_columns)``.
    """
    encoder = SchemaEncoder(table_schema(table), handle_unknown="ignore")
    X = encoder.fit_transform(frame)
    return np.asarray(X, dtype=float), float(encoder.row_norm_)


# ---------------------------------------------------------------------------
# Scores


def scores(model, X, y, classes):
    """Test accuracy and log-loss (probabilities floored at ``PROBA_FLOOR``)."""
    proba = model.predict_proba(X)
    index = np.searchsorted(classes, y)
    accuracy = float(np.mean(np.asarray(classes)[proba.argmax(axis=1)] == y))
    picked = proba[np.arange(len(y)), index]
    return accuracy, float(-np.mean(np.log(np.maximum(picked, PROBA_FLOOR))))


def prior_scores(y_train, y_test, classes):
    """Accuracy (majority rate) and log-loss of the training class frequencies."""
    counts = np.array([np.sum(y_train == c) for c in classes], dtype=float)
    prior = counts / counts.sum()
    index = np.searchsorted(classes, y_test)
    accuracy = float(np.mean(index == prior.argmax()))
    return accuracy, float(-np.mean(np.log(np.maximum(prior[index], PROBA_FLOOR))))


# ---------------------------------------------------------------------------
# Plain Poisson DP-SGD, tuned per table (not privately)

_SGD_NOISE = {}


def _sgd_plan(n, n_classes, epochs, rate):
    """Plan of a plain DP-SGD run: no row bound, clip norm is the sensitivity."""
    return make_plan(
        n_samples=n,
        n_classes=n_classes,
        row_norm=None,
        batch_size=SGD_BATCH,
        epochs=epochs,
        sampling="poisson",
        solver="dp-sgd",
        learning_rate=rate,
        lr_schedule="constant",
        l2=0.0,
        l1=0.0,
        clip_norm=SGD_CLIP,
        projection_radius=None,
        tail_fraction=0.0,
    )


def _sgd_noise(plan, epsilon, delta, relation):
    """Calibrated noise multiplier of ``plan`` (cached; the step is irrelevant)."""
    key = (plan.n_samples, plan.batch_sizes[0], plan.n_steps, epsilon, delta, relation)
    if key not in _SGD_NOISE:
        _SGD_NOISE[key], _ = calibrate_noise_multiplier(
            plan.events, epsilon, delta, neighbouring=relation, accountant="pld"
        )
    return _SGD_NOISE[key]


class _Linear:
    """Predictions of a weight matrix (intercept last), as a fitted model."""

    def __init__(self, W, classes):
        self.W, self.classes = W, classes

    def predict_proba(self, X):
        logits = X @ self.W[:-1] + self.W[-1]
        if logits.shape[1] == 1:
            logits = np.hstack([np.zeros_like(logits), logits])
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return p / p.sum(axis=1, keepdims=True)


def _sgd_fit(X, codes, classes, epochs, rate, epsilon, delta, relation, rng):
    plan = _sgd_plan(X.shape[0], len(classes), epochs, rate)
    z = _sgd_noise(plan, epsilon, delta, relation)
    result = run_logistic_sgd(
        X, codes, plan, z, row_norm=None, fit_intercept=True, rng=rng
    )
    return _Linear(result.weights, classes)


def sgd_tuned(X, y, classes, epsilon, delta, relation, seed):
    """Plain DP-SGD with step and epochs tuned on a validation split (not private).

    Returns the model refitted on all of ``X`` and the chosen ``(epochs, rate)``.
    """
    codes = np.searchsorted(classes, y)
    X_fit, X_val, c_fit, c_val = train_test_split(
        X, codes, test_size=VALIDATION_SHARE, random_state=seed, stratify=codes
    )
    rng = np.random.default_rng([seed, 7])
    best, choice = -1.0, None
    for epochs in SGD_EPOCHS:
        for rate in SGD_RATES:
            model = _sgd_fit(
                X_fit, c_fit, classes, epochs, rate, epsilon, delta, relation, rng
            )
            accuracy = np.mean(model.predict_proba(X_val).argmax(axis=1) == c_val)
            if accuracy > best:
                best, choice = accuracy, (epochs, rate)
    model = _sgd_fit(X, codes, classes, *choice, epsilon, delta, relation, rng)
    return model, choice


# ---------------------------------------------------------------------------
# One table


def _estimator(config, table, row_bound, epsilon, delta, relation, seed):
    """The estimator of ``config``."""
    params = dict(config)
    params.setdefault("classes", list(table.classes))
    policy = dataclasses.replace(DEFAULT_POLICY, **params.pop("policy", {}))
    if params.pop("row_norm", None) == "schema":
        params["row_norm"] = row_bound
    return with_policy(policy)(
        epsilon=epsilon,
        delta=delta,
        neighbouring=relation,
        random_state=seed,
        **params,
    )


def run_table(name, seeds, epsilons, relations, configs, baselines=True):
    """Every method on one table: a list of result rows (dicts)."""
    (table,) = load_panel([name])
    classes = np.asarray(table.classes)
    rows = []
    for seed in seeds:
        F_train, F_test, y_train, y_test = table.split(seed)
        X_train, row_bound = encode(table, F_train)
        X_test, _ = encode(table, F_test)
        n = X_train.shape[0]
        delta = min(1e-5, n**-1.1)
        base = {"table": name, "seed": seed, "n": n, "row_bound": row_bound}
        if True:
            acc, loss = prior_scores(y_train, y_test, classes)
            rows.append({**base, "method": "prior", "acc": acc, "logloss": loss})
            t = time.perf_counter()
            model = LogisticRegression(max_iter=5000).fit(X_train, y_train)
            acc, loss = scores(model, X_test, y_test, classes)
            rows.append(
                {
                    **base,
                    "method": "nonprivate",
                    "acc": acc,
                    "logloss": loss,
                    "secs": time.perf_counter() - t,
                }
            )
        for relation in relations:
            for epsilon in epsilons:
                cell = {**base, "relation": relation, "epsilon": epsilon}
                if baselines:
                    t = time.perf_counter()
                    model, choice = sgd_tuned(
                        X_train, y_train, classes, epsilon, delta, relation, seed
                    )
                    acc, loss = scores(model, X_test, y_test, classes)
                    rows.append(
                        {
                            **cell,
                            "method": "sgd-tuned",
                            "acc": acc,
                            "logloss": loss,
                            "choice": choice,
                            "secs": time.perf_counter() - t,
                        }
                    )
                for method in configs:
                    t = time.perf_counter()
                    est = _estimator(
                        config(method),
                        table,
                        row_bound,
                        epsilon,
                        delta,
                        relation,
                        seed,
                    )
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", PrivacyLeakWarning)
                        est.fit(X_train, y_train)
                    if est.privacy_spent_.epsilon > epsilon * (1 + 1e-9):
                        raise RuntimeError(f"{method} spent more than {epsilon}")
                    acc, loss = scores(est, X_test, y_test, classes)
                    rows.append(
                        {
                            **cell,
                            "method": method,
                            "acc": acc,
                            "logloss": loss,
                            "spent": est.privacy_spent_.epsilon,
                            "secs": time.perf_counter() - t,
                        }
                    )
    return rows


# ---------------------------------------------------------------------------
# Summary


def _mean(rows, **match):
    vals = [
        (r["acc"], r["logloss"])
        for r in rows
        if all(r.get(k) == v for k, v in match.items())
    ]
    if not vals:
        return None
    return tuple(np.mean(vals, axis=0))


def summarise(rows, methods, out=print):
    """Per table and panel average, for each relation and epsilon."""
    tables = [t for t in TABLES if any(r["table"] == t for r in rows)]
    cells = sorted(
        {(r["relation"], r["epsilon"]) for r in rows if "relation" in r},
        key=lambda c: (RELATIONS.index(c[0]) if c[0] in RELATIONS else 9, c[1]),
    )
    seeds = sorted({r["seed"] for r in rows})
    out(f"tables: {len(tables)}, seeds: {seeds}; cells: accuracy / test log-loss")
    for relation, epsilon in cells:
        present = [
            m
            for m in methods
            if any(r["method"] == m and r.get("epsilon") == epsilon for r in rows)
        ]
        header = f"{'table':<22} {'prior':>11} {'nonprivate':>11}" + "".join(
            f" {m[:15]:>15}" for m in present
        )
        out(f"\n== {relation}, epsilon {epsilon:g} ==")
        out(header)
        totals = {m: [] for m in ["prior", "nonprivate", *present]}
        for t in tables:
            prior = _mean(rows, table=t, method="prior")
            nonpriv = _mean(rows, table=t, method="nonprivate")
            line = (
                f"{t:<22} {prior[0]:.3f}/{prior[1]:.3f} "
                f"{nonpriv[0]:.3f}/{nonpriv[1]:.3f}"
            )
            totals["prior"].append(prior)
            totals["nonprivate"].append(nonpriv)
            for m in present:
                v = _mean(rows, table=t, method=m, relation=relation, epsilon=epsilon)
                if v is None:
                    line += f" {'-':>15}"
                    continue
                totals[m].append(v)
                mark = ""
                if v[0] < prior[0] - 1e-9:
                    mark += "<maj"
                if v[1] > prior[1] + 1e-9:
                    mark += ">pri"
                line += f" {v[0]:.3f}/{v[1]:.3f}{mark:>4}"
            out(line)
        line = f"{'MEAN':<22}"
        for m in ["prior", "nonprivate", *present]:
            if len(totals[m]) == len(tables):
                acc, loss = np.mean(totals[m], axis=0)
                width = 11 if m in ("prior", "nonprivate") else 15
                line += f" {f'{acc:.4f}/{loss:.3f}':>{width}}"
            else:
                line += f" {'(partial)':>15}"
        out(line)


def markdown(rows, methods, out=print):
    """The summary as Markdown tables (docs/benchmarks.md), one per cell.

    Each cell: mean test accuracy / log-loss over the seeds; ``*`` marks an
    accuracy below the majority rate, ``†`` a log-loss above the prior's.
    """
    tables = [t for t in TABLES if any(r["table"] == t for r in rows)]
    cells = sorted(
        {(r["relation"], r["epsilon"]) for r in rows if "relation" in r},
        key=lambda c: (RELATIONS.index(c[0]), c[1]),
    )
    for relation, epsilon in cells:
        out(f"\n#### {relation}, epsilon {epsilon:g}\n")
        out("| table | prior | non-private | " + " | ".join(methods) + " |")
        out("|---" * (3 + len(methods)) + "|")
        totals = {m: [] for m in ["prior", "nonprivate", *methods]}
        for t in tables:
            prior = _mean(rows, table=t, method="prior")
            nonpriv = _mean(rows, table=t, method="nonprivate")
            totals["prior"].append(prior)
            totals["nonprivate"].append(nonpriv)
            line = f"| {t} | {prior[0]:.3f} / {prior[1]:.3f} | "
            line += f"{nonpriv[0]:.3f} / {nonpriv[1]:.3f} |"
            for m in methods:
                v = _mean(rows, table=t, method=m, relation=relation, epsilon=epsilon)
                totals[m].append(v)
                acc = f"{v[0]:.3f}" + ("*" if v[0] < prior[0] - 1e-9 else "")
                loss = f"{v[1]:.3f}" + ("†" if v[1] > prior[1] + 1e-9 else "")
                line += f" {acc} / {loss} |"
            out(line)
        line = "| **mean** |"
        for m in ["prior", "nonprivate", *methods]:
            acc, loss = np.mean(totals[m], axis=0)
            line += f" **{acc:.4f}** / {loss:.3f} |"
        out(line)


def tables_and_seeds(args):
    """The tables to run, largest first (parallel workers finish together), and seeds.

    ``args``: parsed ``--tables``, ``--seeds`` and ``--seed-list``.
    """
    tables = args.tables or list(TABLES)
    seeds = args.seed_list if args.seed_list is not None else list(range(args.seeds))
    tables.sort(key=lambda t: -len(load_panel([t])[0].frame))
    return tables, seeds


def run_tables(run, tables, jobs, out, **task):
    """``run(table, **task)`` on every table (``jobs`` processes), rows flattened.

    The rows are appended to the JSON-lines file ``out`` when one is given.
    """
    if jobs == 1:
        results = [run(t, **task) for t in tables]
    else:
        from joblib import Parallel, delayed

        results = Parallel(n_jobs=jobs)(delayed(run)(t, **task) for t in tables)
    rows = [r for table_rows in results for r in table_rows]
    if out:
        with open(out, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", nargs="*", default=None, choices=TABLES)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. n-1")
    parser.add_argument("--seed-list", type=int, nargs="*", default=None)
    parser.add_argument("--epsilons", type=float, nargs="*", default=EPSILONS)
    parser.add_argument("--relations", nargs="*", default=RELATIONS, choices=RELATIONS)
    parser.add_argument(
        "--configs",
        nargs="*",
        default=["defaults-plain", "defaults-schema"],
        help="names in CONFIGS or composed names (see config())",
    )
    parser.add_argument(
        "--no-baselines",
        action="store_true",
        help="skip the tuned DP-SGD (e.g. to add a config)",
    )
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default=None, help="append result rows (JSON lines)")
    parser.add_argument("--load", nargs="*", default=None, help="summarise these")
    parser.add_argument(
        "--markdown", action="store_true", help="print Markdown tables too"
    )
    args = parser.parse_args(argv)

    if args.load:
        rows = [json.loads(line) for p in args.load for line in open(p)]
        methods = list(dict.fromkeys(r["method"] for r in rows))
        methods = [m for m in methods if m not in ("prior", "nonprivate")]
        summarise(rows, methods)
        if args.markdown:
            markdown(rows, methods)
        return rows
    tables, seeds = tables_and_seeds(args)
    task = dict(
        seeds=seeds,
        epsilons=args.epsilons,
        relations=args.relations,
        configs=args.configs,
        baselines=not args.no_baselines,
    )
    t0 = time.perf_counter()
    rows = run_tables(run_table, tables, args.jobs, args.out, **task)
    methods = (["sgd-tuned"] if task["baselines"] else []) + args.configs
    summarise(rows, methods)
    if args.markdown:
        markdown(rows, methods)
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return rows


if __name__ == "__main__":
    main()

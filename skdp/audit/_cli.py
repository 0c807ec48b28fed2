"""The ``skdp audit`` subcommand: an empirical privacy audit on vendored Adult."""

import json
import math
import time

import numpy as np

from ..datasets import ADULT_SCHEMA, adult_design_matrix, load_adult
from ..fairness import DPSaddlePointClassifier
from ..linear_model import DPLogisticRegression
from ..synthetic import DPSyntheticData
from ..utils._argtypes import positive
from ._audit import audit

__all__ = ["SYNTHETIC_COLUMNS", "adult_audit_setup", "add_audit_parser", "run_audit"]

# Categorical Adult columns the synthetic-data audit models (public domains).
SYNTHETIC_COLUMNS = ("relationship", "race", "sex", "workclass")
_GROUP_COLUMN = "sex"
# The public row bound of adult_design_matrix: one 1 per categorical feature
# (8) and six numeric features in [0, 1].
_ROW_NORM = math.sqrt(14.0)
_LINEAR_OPTIONS = {
    "logistic": ("epochs", "batch_size", "batch_sampling", "solver"),
    "saddle": ("n_iter",),
}


def adult_audit_setup(estimator, rows, epsilon, random_state, **params):
    """Estimator, data and fit parameters of an audit on vendored Adult.

    Parameters
    ----------
    estimator : {"logistic", "saddle", "synthetic"}
    rows : int
        Rows drawn without replacement from the whole data.
    epsilon : float
    random_state : int
        Seeds the choice of rows.
    **params : dict
        Further estimator parameters (``None`` values are ignored).

    Returns
    -------
    estimator : estimator
        Unfitted.
    X : ndarray
    y : ndarray or None
    fit_params : dict
    """
    data, target = load_adult(return_X_y=True)
    rng = np.random.default_rng(random_state)
    rows = min(rows, data.shape[0])
    index = np.sort(rng.choice(data.shape[0], size=rows, replace=False))
    names = list(ADULT_SCHEMA)
    params = {k: v for k, v in params.items() if v is not None}
    if estimator == "synthetic":
        columns = [names.index(name) for name in SYNTHETIC_COLUMNS]
        X = data[index][:, columns]
        domain = {
            j: list(ADULT_SCHEMA[name]) for j, name in enumerate(SYNTHETIC_COLUMNS)
        }
        return DPSyntheticData(epsilon=epsilon, domain=domain, **params), X, None, {}
    X = adult_design_matrix(data[index])
    y = np.asarray(target)[index]
    if estimator == "saddle":
        groups = data[index][:, names.index(_GROUP_COLUMN)]
        est = DPSaddlePointClassifier(
            epsilon=epsilon,
            groups=list(ADULT_SCHEMA[_GROUP_COLUMN]),
            classes=[0, 1],
            row_norm=_ROW_NORM,
            **params,
        )
        return est, X, y, {"sensitive_features": groups}
    if estimator == "logistic":
        est = DPLogisticRegression(
            epsilon=epsilon, row_norm=_ROW_NORM, classes=[0, 1], **params
        )
        return est, X, y, {}
    raise ValueError(f"Unknown estimator {estimator!r}.")


def add_audit_parser(subparsers):
    """Add the ``audit`` subcommand to an argparse ``subparsers`` object.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        As returned by ``parser.add_subparsers()``.

    Returns
    -------
    parser : argparse.ArgumentParser
        The subcommand's parser; its ``func`` default is :func:`run_audit`.
    """
    p = subparsers.add_parser(
        "audit",
        help="empirical lower bound on epsilon by a canary attack",
        description=(
            "Fit the estimator many times on a subsample of the vendored Adult "
            "data with and without a canary record and report a "
            "(1 - alpha)-confidence lower bound on its epsilon (see "
            "skdp.audit.audit), next to the epsilon it reports."
        ),
    )
    p.add_argument(
        "--estimator",
        choices=["logistic", "saddle", "synthetic"],
        default="logistic",
        help=(
            "logistic: DPLogisticRegression; saddle: DPSaddlePointClassifier "
            "with sex as the group; synthetic: DPSyntheticData on "
            f"{', '.join(SYNTHETIC_COLUMNS)}"
        ),
    )
    p.add_argument("--epsilon", type=positive(float), default=1.0)
    p.add_argument("--trials", type=positive(int), default=400)
    p.add_argument("--n-jobs", type=int, default=None)
    p.add_argument("--random-state", type=int, default=0)
    p.add_argument("--alpha", type=positive(float), default=0.05)
    p.add_argument(
        "--rows", type=positive(int), default=1000, help="Adult rows (default 1000)"
    )
    p.add_argument("--epochs", type=positive(int), default=None)
    p.add_argument("--batch-size", type=positive(int), default=None)
    p.add_argument(
        "--batch-sampling",
        choices=["poisson", "balls-and-bins", "shuffle", "cyclic"],
        default=None,
    )
    p.add_argument("--solver", choices=["dp-sgd", "dp-sgld"], default=None)
    p.add_argument(
        "--n-iter",
        type=positive(int),
        default=None,
        help="steps of the saddle-point solver",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_audit)
    return p


def run_audit(args):
    """Run the audit described by parsed ``args`` and print the result.

    Parameters
    ----------
    args : argparse.Namespace
        As parsed by the parser of :func:`add_audit_parser`.

    Returns
    -------
    status : int
        0 on success.
    """
    if not 0 < args.alpha < 1:
        raise ValueError(f"--alpha must be in (0, 1), got {args.alpha}")
    options = {
        name: getattr(args, name) for name in _LINEAR_OPTIONS.get(args.estimator, ())
    }
    estimator, X, y, fit_params = adult_audit_setup(
        args.estimator, args.rows, args.epsilon, args.random_state, **options
    )
    rows = X.shape[0]
    start = time.perf_counter()
    result = audit(
        estimator,
        X,
        y,
        n_trials=args.trials,
        alpha=args.alpha,
        n_jobs=args.n_jobs,
        random_state=args.random_state,
        **fit_params,
    )
    seconds = time.perf_counter() - start
    if args.json:
        out = result.to_dict()
        out.update(estimator=args.estimator, rows=rows, seconds=seconds)
        print(json.dumps(out))
        return 0
    print(f"estimator         {' '.join(repr(estimator).split())}")
    print(f"rows              {rows} of vendored Adult")
    print(f"trials            {result.n_trials}")
    confidence = f"{1 - result.alpha:.0%} confidence"
    print(f"verdict           {result.verdict}")
    print(f"epsilon_lower     {result.epsilon_lower:.4g}  ({confidence})")
    print(f"epsilon_reported  {result.epsilon_reported:.4g}")
    print(f"delta             {result.delta:.3g}")
    print(f"tpr               {result.tpr:.3f}")
    print(f"fpr               {result.fpr:.3f}")
    print(f"time              {seconds:.1f} s")
    return 0

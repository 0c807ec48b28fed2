"""The ``skdp`` command line: ``skdp account`` and ``skdp demo``."""

import argparse
import functools
import json
import math
import sys
import warnings

from ._demo import run_demo
from ._solvers._sgd import AMPLIFIED, DEFAULT_POLICY, make_plan
from .accounting import account, calibrate_noise_multiplier
from .accounting._accountant import epsilon_text
from .audit._cli import add_audit_parser
from .linear_model._budget import split_budget
from .synthetic._cli import add_synth_parser
from .utils._argtypes import positive, probability

__all__ = ["main"]


def _add_account_parser(subparsers):
    p = subparsers.add_parser(
        "account",
        help="privacy spent by a DP-SGD configuration (no data needed)",
        description=(
            "Privacy of DP-SGD on logistic-type losses: n records, batches of "
            "--batch-size, --epochs passes. The noise multiplier is the std of the "
            "noise added to the sum of clipped per-example gradients divided by "
            "the clip norm. With --clip-norm, --learning-rate and --row-norm (and "
            "optionally --l2) for a binary logistic loss on rows of norm at most "
            "--row-norm, the sensitivity is the smaller of the clip norm and "
            "the loss's gradient bound, and the last-iterate bound competes "
            "with composition for cyclic and shuffled batches. The events are "
            "those DPLogisticRegression's solver plans for the same run."
        ),
    )
    p.add_argument("--n", type=positive(int), required=True, help="number of records")
    p.add_argument(
        "--as-fit",
        action="store_true",
        help=(
            "the noise and spend of a default DPLogisticRegression fit on --n "
            "rows at --target-epsilon (its own batch size, epochs, private "
            "centre and probability floor: DPLogisticRegression.privacy_plan); "
            "--batch-size and --epochs are then not given"
        ),
    )
    p.add_argument("--batch-size", type=positive(int), help="required without --as-fit")
    p.add_argument("--epochs", type=positive(int), help="required without --as-fit")
    noise = p.add_mutually_exclusive_group(required=True)
    noise.add_argument("--noise-multiplier", type=positive(float))
    noise.add_argument("--target-epsilon", type=positive(float))
    p.add_argument("--delta", type=probability, required=True)
    p.add_argument(
        "--sampling",
        choices=["cyclic", "shuffle", "poisson", "balls-and-bins"],
        default=None,
        help=(
            "default: cyclic, or with --as-fit the estimator's default "
            "(poisson). balls-and-bins: every epoch each record goes to one of "
            "ceil(n / batch-size) steps, uniformly and independently (random "
            "allocation)"
        ),
    )
    p.add_argument(
        "--neighbouring",
        choices=["replace-one", "add-remove"],
        default="replace-one",
        help=(
            "add-remove with --target-epsilon: as DPLogisticRegression plans "
            "and reports it (a noisy count of the rows, then the run planned "
            "at a released count of --n); with --noise-multiplier: the run "
            "alone at a count of --n"
        ),
    )
    p.add_argument("--clip-norm", type=positive(float))
    p.add_argument("--learning-rate", type=positive(float))
    p.add_argument("--l2", type=float, default=0.0)
    p.add_argument("--row-norm", type=positive(float))
    p.add_argument(
        "--n-classes",
        type=int,
        default=2,
        help="classes of the logistic loss for the last-iterate constants (default 2)",
    )
    p.add_argument(
        "--accountant",
        choices=["rdp", "pld"],
        default="pld",
        help=(
            "pld (default): the smallest valid bound, Rényi DP or, where they "
            "apply, exact Gaussian DP and the numerical privacy loss distribution "
            "of Poisson batches (what DPLogisticRegression reports); rdp: Rényi "
            "DP only"
        ),
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_run_account)


def _account_events(args):
    """Return ``make_events(z)`` of the configuration and notes.

    The events come from the same :class:`~skdp._solvers._sgd.SGDPlan` that
    DPLogisticRegression runs, so the command and the estimator cannot drift
    apart. Without all of ``--clip-norm``, ``--learning-rate`` and
    ``--row-norm`` the loss is treated as unbounded: the clip norm is the
    sensitivity and only composition applies.
    """
    n, b = args.n, args.batch_size
    if b > n:
        raise ValueError(f"--batch-size ({b}) cannot exceed --n ({n}).")
    amplified = args.sampling in AMPLIFIED
    if not amplified and args.neighbouring != "replace-one":
        raise ValueError(
            "cyclic and shuffled batches are accounted under replace-one only (adding "
            "or removing a record shifts every later batch); use --sampling poisson "
            "or balls-and-bins for add-remove."
        )
    if args.l2 < 0:
        raise ValueError("--l2 must be >= 0.")
    notes = []
    extra = (args.clip_norm, args.learning_rate, args.row_norm)
    bounded = all(v is not None for v in extra)
    if not amplified and not bounded and any(v is not None for v in extra):
        notes.append(
            "last-iterate bound needs --clip-norm, --learning-rate and --row-norm"
        )
    plan = make_plan(
        n_samples=n,
        n_classes=args.n_classes,
        row_norm=args.row_norm if bounded else None,
        batch_size=b,
        epochs=args.epochs,
        sampling=args.sampling,
        solver="dp-sgd",
        learning_rate=args.learning_rate if bounded else 1.0,
        lr_schedule="constant",
        l2=args.l2,
        l1=0.0,
        clip_norm=args.clip_norm if bounded else 1.0,
        projection_radius=None,
        tail_fraction=0.0,
        neighbouring=args.neighbouring,
    )
    if bounded and not plan.clipping_inactive and not amplified:
        notes.append(
            f"clip norm {plan.clip_norm:g} < gradient bound {plan.gradient_bound:g}: "
            "clipping may be active, last-iterate bound not applicable"
        )
    return plan.events, notes


def _run_account(args):
    if args.as_fit:
        return _run_account_as_fit(args)
    missing = [flag for flag in ("batch_size", "epochs") if getattr(args, flag) is None]
    if missing:
        flags = " and ".join("--" + flag.replace("_", "-") for flag in missing)
        raise ValueError(f"{flags} required (or --as-fit for a default fit's plan).")
    args.sampling = args.sampling or "cyclic"
    make_events, notes = _account_events(args)
    if args.target_epsilon is None:
        z, spent, count = _spend_at_noise(args, make_events)
    else:
        z, spent, count = _calibrated_spend(args, make_events)
    return _print_account(args, z, spent, count, notes, _add_remove_scope(args, count))


def _run_account_as_fit(args):
    """The account of a default ``DPLogisticRegression`` fit on ``--n`` rows.

    The estimator's own :meth:`~skdp.linear_model.DPLogisticRegression.privacy_plan`
    (its batch size, epochs, private centre, probability floor and, under
    add/remove, its noisy count), so the command reports exactly what such a
    fit reports.
    """
    from .linear_model import DPLogisticRegression

    flags = ("batch_size", "epochs", "noise_multiplier", "clip_norm")
    flags += ("learning_rate", "row_norm", "l2")
    dropped = ["--" + f.replace("_", "-") for f in flags if getattr(args, f)]
    if dropped:
        raise ValueError(
            f"--as-fit takes the estimator's own plan; drop {', '.join(dropped)}."
        )
    estimator = DPLogisticRegression(
        epsilon=args.target_epsilon,
        delta=args.delta,
        batch_sampling=args.sampling or "poisson",
        neighbouring=args.neighbouring,
        classes=list(range(args.n_classes)),
    )
    z, spent, _ = estimator.privacy_plan(args.n, args.n_classes)
    args.sampling = estimator.batch_sampling
    plan = estimator._fit_plan(args.n, args.n_classes).run
    notes = [
        f"as DPLogisticRegression(epsilon={args.target_epsilon:g}, "
        f"delta={args.delta:g}, batch_sampling={args.sampling!r}, "
        f"neighbouring={args.neighbouring!r}) plans a fit on {args.n} rows: "
        f"{plan.epochs} epochs of {len(plan.batch_sizes)} steps, expected batch "
        f"{plan.expected_batch:g}"
        + (", private centre of the rows included" if plan.centring_noise else "")
        + (", probability floor included" if plan.calibration_noise is not None else "")
        + (
            ", after a noisy count of the rows (included)"
            if args.neighbouring == "add-remove"
            else ""
        )
    ]
    return _print_account(args, z, spent, None, notes, None)


def _calibrated_spend(args, make_events):
    """Noise and spend at ``--target-epsilon``, as DPLogisticRegression plans them.

    Under add/remove: a noisy count first (its share of epsilon and delta),
    the run planned from the released count (here ``--n``), basic
    composition of the two (:mod:`skdp.linear_model._budget`).
    """
    budget = split_budget(
        args.target_epsilon, args.delta, args.neighbouring, DEFAULT_POLICY.count_share
    )
    z, training = calibrate_noise_multiplier(
        make_events,
        budget.epsilon,
        budget.run_delta,
        neighbouring=args.neighbouring,
        accountant=args.accountant,
    )
    return z, budget.spend(training), budget.count


def _spend_at_noise(args, make_events):
    """Noise and spend of the run alone at ``--noise-multiplier`` (no count)."""
    z = args.noise_multiplier
    spent = account(
        make_events(z),
        args.delta,
        neighbouring=args.neighbouring,
        accountant=args.accountant,
    )
    return z, spent, None


def _add_remove_scope(args, count):
    """What an add/remove figure covers (None under replace-one)."""
    if args.neighbouring != "add-remove":
        return None
    if count is None:
        return (
            "add-remove: the run alone, planned at a count of --n rows. "
            "DPLogisticRegression(neighbouring='add-remove') first releases "
            "a noisy count of the rows, plans from it and needs a target "
            "epsilon: --target-epsilon accounts both as it reports them"
        )
    return (
        f"add-remove, as DPLogisticRegression reports it: a Gaussian count of "
        f"the rows (noise std {count.std:.4g}; "
        f"epsilon {epsilon_text(count.spent.epsilon)}, "
        f"delta {count.spent.delta:.3g}), then the run planned from the released "
        "count, here --n; the two by basic composition"
    )


def _print_account(args, z, spent, count, notes, scope):
    """Print the account (a table, or one JSON object with ``--json``)."""
    has_order = spent.accountant == "rdp" and math.isfinite(spent.order)
    if args.json:
        result = {
            "epsilon": spent.epsilon,
            "delta": spent.delta,
            "noise_multiplier": z,
            "order": spent.order if has_order else None,
            "bound": spent.bound,
            "neighbouring": spent.neighbouring,
            "sampling": args.sampling,
            "accountant": spent.accountant,
            "count_release": None
            if count is None
            else {"epsilon": count.spent.epsilon, "delta": count.spent.delta},
            "notes": notes,
            "add_remove": scope,
        }
        print(json.dumps(result))
        return 0
    print(f"epsilon          {epsilon_text(spent.epsilon, 6)}")
    print(f"delta            {spent.delta:.3g}")
    print(f"noise multiplier {z:.6g}")
    print(f"accountant       {spent.accountant}")
    if has_order:
        print(f"Rényi order      {spent.order:g}")
    print(f"bound            {spent.bound}")
    print(f"neighbouring     {spent.neighbouring}")
    for note in [*notes, scope] if scope else notes:
        print(f"note: {note}")
    return 0


def _add_demo_parser(subparsers):
    p = subparsers.add_parser(
        "demo",
        help="train a private model on the vendored Adult data",
        description="Train DPLogisticRegression on vendored UCI Adult and compare.",
    )
    p.add_argument("--epsilon", type=positive(float), default=1.0)
    p.add_argument("--random-state", type=int, default=0)
    p.set_defaults(func=_run_demo)


def _run_demo(args):
    return run_demo(epsilon=args.epsilon, random_state=args.random_state)


def build_parser():
    """The argument parser of the ``skdp`` command."""
    parser = argparse.ArgumentParser(
        prog="skdp", description="Differentially private learning for scikit-learn."
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    _add_account_parser(subparsers)
    _add_demo_parser(subparsers)
    add_audit_parser(subparsers)
    add_synth_parser(subparsers)
    return parser


def _show_warning(command, message, category, filename, lineno, file=None, line=None):
    """A warning as a command-line message: its kind and text, no source line."""
    stream = sys.stderr if file is None else file
    print(f"skdp {command}: {category.__name__}: {message}", file=stream)


def main(argv=None):
    """Entry point of the ``skdp`` console script."""
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = functools.partial(_show_warning, args.command)
            return args.func(args)
    except ValueError as exc:
        print(f"skdp {args.command}: error: {exc}", file=sys.stderr)
        return 2

"""The ``skdp`` command line: ``skdp account`` and ``skdp demo``."""

import argparse
import json
import sys
import warnings

from .accounting import (
    NoisyIterationEvent,
    PoissonGaussianEvent,
    account,
    calibrate_noise_multiplier,
    gradient_step_lipschitz,
    logistic_constants,
)
from .audit._cli import add_audit_parser
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
            "--row-norm, the last-iterate bound competes with composition for "
            "cyclic and shuffled batches."
        ),
    )
    p.add_argument("--n", type=positive(int), required=True, help="number of records")
    p.add_argument("--batch-size", type=positive(int), required=True)
    p.add_argument("--epochs", type=positive(int), required=True)
    noise = p.add_mutually_exclusive_group(required=True)
    noise.add_argument("--noise-multiplier", type=positive(float))
    noise.add_argument("--target-epsilon", type=positive(float))
    p.add_argument("--delta", type=probability, required=True)
    p.add_argument(
        "--sampling", choices=["cyclic", "shuffle", "poisson"], default="cyclic"
    )
    p.add_argument(
        "--neighbouring", choices=["replace-one", "add-remove"], default="replace-one"
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
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_run_account)


def _account_events(args):
    """Return ``make_events(z)``, the z scale to report and notes."""
    n, b, epochs = args.n, args.batch_size, args.epochs
    if b > n:
        raise ValueError(f"--batch-size ({b}) cannot exceed --n ({n}).")
    n_batches = -(-n // b)
    notes = []
    if args.sampling == "poisson":
        q, steps = b / n, n_batches * epochs

        def make_events(z):
            return PoissonGaussianEvent(q, z, count=steps)

        return make_events, 1.0, notes
    if args.neighbouring != "replace-one":
        raise ValueError(
            "cyclic and shuffled batches are accounted under replace-one only (adding "
            "or removing a record shifts every later batch); use --sampling poisson "
            "for add-remove."
        )
    sizes = [b] * (n_batches - 1) + [n - b * (n_batches - 1)]
    shuffle = args.sampling == "shuffle"
    extra = (args.clip_norm, args.learning_rate, args.row_norm)
    lipschitz, scale, eta = None, 1.0, args.learning_rate or 1.0
    if all(v is not None for v in extra):
        gradient_bound, smoothness = logistic_constants(args.row_norm, args.n_classes)
        if args.l2 < 0:
            raise ValueError("--l2 must be >= 0.")
        if args.clip_norm >= gradient_bound:
            lipschitz = gradient_step_lipschitz(eta, smoothness, args.l2)
            # Gradients never exceed the bound: sensitivity uses it, not the clip.
            scale = args.clip_norm / gradient_bound
        else:
            notes.append(
                f"clip norm {args.clip_norm:g} < gradient bound {gradient_bound:g}: "
                "clipping may be active, last-iterate bound not applicable"
            )
    elif any(v is not None for v in extra):
        notes.append(
            "last-iterate bound needs --clip-norm, --learning-rate and --row-norm"
        )

    def make_events(z):
        return NoisyIterationEvent.cyclic_sgd(
            sizes,
            epochs,
            z * scale,
            learning_rate=eta,
            lipschitz=lipschitz,
            shuffle=shuffle,
        )

    return make_events, scale, notes


def _run_account(args):
    make_events, _, notes = _account_events(args)
    if args.target_epsilon is not None:
        z, spent = calibrate_noise_multiplier(
            make_events, args.target_epsilon, args.delta, neighbouring=args.neighbouring
        )
    else:
        z = args.noise_multiplier
        spent = account(make_events(z), args.delta, neighbouring=args.neighbouring)
    result = {
        "epsilon": spent.epsilon,
        "delta": spent.delta,
        "noise_multiplier": z,
        "order": spent.order,
        "bound": spent.bound,
        "neighbouring": spent.neighbouring,
        "sampling": args.sampling,
        "accountant": spent.accountant,
        "notes": notes,
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"epsilon          {spent.epsilon:.6g}")
    print(f"delta            {spent.delta:.3g}")
    print(f"noise multiplier {z:.6g}")
    print(f"Rényi order      {spent.order:g}")
    print(f"bound            {spent.bound}")
    print(f"neighbouring     {spent.neighbouring}")
    for note in notes:
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
    from ._demo import run_demo

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


def main(argv=None):
    """Entry point of the ``skdp`` console script."""
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            return args.func(args)
    except ValueError as exc:
        print(f"skdp {args.command}: error: {exc}", file=sys.stderr)
        return 2

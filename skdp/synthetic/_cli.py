"""The ``skdp synth`` subcommand: a private synthetic copy of a CSV file."""

import csv
import json
import sys

import numpy as np

from ..utils._argtypes import positive, probability

__all__ = ["add_synth_parser", "read_domain"]


def read_domain(path, header):
    """Read a JSON domain: ``{"col": [categories]}`` or ``{"col": {"low", "high"}}``.

    Numeric columns are objects with ``low``, ``high`` and optional ``bins``;
    categorical columns are lists of their category strings (as they appear in
    the CSV). Returns a domain keyed by column index, and the set of numeric
    column indices.
    """
    with open(path, encoding="utf-8") as handle:
        raw = json.load(handle)
    if not isinstance(raw, dict):
        raise ValueError("The domain file must hold one JSON object: column -> spec.")
    unknown = sorted(set(raw) - set(header))
    if unknown:
        raise ValueError(f"The domain names columns not in the CSV: {unknown}.")
    domain, numeric = {}, set()
    for j, name in enumerate(header):
        if name not in raw:
            raise ValueError(
                f"Column {name!r} has no domain; declare its categories or its "
                "range in the domain file (it is public, never read from the data)."
            )
        spec = raw[name]
        if isinstance(spec, list):
            domain[j] = [str(v) for v in spec]
        elif isinstance(spec, dict) and {"low", "high"} <= set(spec):
            bounds = (spec["low"], spec["high"])
            domain[j] = bounds + ((int(spec["bins"]),) if "bins" in spec else ())
            numeric.add(j)
        else:
            raise ValueError(
                f"Domain of column {name!r} must be a list of categories or an "
                'object {"low": ..., "high": ...[, "bins": ...]}.'
            )
    return domain, numeric


def _read_csv(path, numeric):
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        raise ValueError(f"{path} is empty.")
    header, body = rows[0], rows[1:]
    table = np.empty((len(body), len(header)), dtype=object)
    for i, row in enumerate(body):
        if len(row) != len(header):
            raise ValueError(
                f"Row {i + 2} of {path} has {len(row)} fields, not {len(header)}."
            )
        for j, value in enumerate(row):
            table[i, j] = float(value) if j in numeric else value
    return header, table


def _run_synth(args):
    from . import DPSyntheticData

    with open(args.input, newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle), None)
    if header is None:
        raise ValueError(f"{args.input} is empty.")
    domain, numeric = read_domain(args.domain, header)
    _, table = _read_csv(args.input, numeric)
    model = DPSyntheticData(
        epsilon=args.epsilon,
        delta=args.delta,
        domain=domain,
        random_state=args.random_state,
    ).fit(table)
    synthetic = model.sample(args.n_samples)
    out = open(args.output, "w", newline="", encoding="utf-8") if args.output else None
    try:
        writer = csv.writer(out or sys.stdout)
        writer.writerow(header)
        writer.writerows(synthetic.tolist())
    finally:
        if out is not None:
            out.close()
    spent = model.privacy_spent_
    print(
        f"skdp synth: {len(synthetic)} rows, epsilon {spent.epsilon:.4g}, delta "
        f"{spent.delta:.3g} ({spent.neighbouring})",
        file=sys.stderr,
    )
    return 0


def add_synth_parser(subparsers):
    """Add the ``synth`` subcommand to an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "synth",
        help="write a private synthetic copy of a CSV file",
        description=(
            "Fit DPSyntheticData on INPUT (a CSV with a header) under the public "
            "domain in DOMAIN (JSON: column -> list of categories, or column -> "
            '{"low": .., "high": .., "bins": ..}) and write a synthetic table.'
        ),
    )
    p.add_argument("input", help="CSV file with a header row")
    p.add_argument("--domain", required=True, help="JSON file with the public domain")
    p.add_argument("--epsilon", type=positive(float), default=1.0)
    p.add_argument("--delta", type=probability, default=None)
    p.add_argument("--n-samples", type=positive(int), default=None)
    p.add_argument("--random-state", type=int, default=None)
    p.add_argument("-o", "--output", help="output CSV (default: standard output)")
    p.set_defaults(func=_run_synth)

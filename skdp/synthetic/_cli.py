"""The ``skdp synth`` subcommand: a private synthetic copy of a CSV file."""

import csv
import json
import sys

import numpy as np

from ..utils._argtypes import positive, probability

__all__ = ["add_synth_parser", "read_domain"]


def read_domain(path, header, *, infer=False):
    """Read a JSON domain: ``{"col": [categories]}`` or ``{"col": {"low", "high"}}``.

    Numeric columns are objects with ``low``, ``high`` and optional ``bins``;
    categorical columns are lists of their category strings (as they appear in
    the CSV). With ``infer``, columns the file leaves out are numeric columns
    whose range is learned privately. Returns a domain keyed by column index,
    and the set of numeric column indices.
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
            if infer:
                numeric.add(j)
                continue
            raise ValueError(
                f"Column {name!r} has no domain; declare its categories or its "
                "range in the domain file (it is public, never read from the "
                "data), or pass --infer-domain to learn a numeric range privately."
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
            table[i, j] = _parse(value, j in numeric, header[j], i + 2)
    return header, table


def _parse(value, numeric, name, line):
    """A CSV field: empty means missing (None); numeric columns hold numbers."""
    if value == "":
        return None
    if not numeric:
        return value
    try:
        number = float(value)
    except ValueError:
        raise ValueError(
            f"Line {line}, column {name!r}: {value!r} is not a number, but the "
            "column's domain is numeric."
        ) from None
    return int(number) if number.is_integer() else number


def _run_synth(args):
    from . import DPSyntheticData

    with open(args.input, newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle), None)
    if header is None:
        raise ValueError(f"{args.input} is empty.")
    infer = args.infer_domain is not None
    domain, numeric = read_domain(args.domain, header, infer=infer)
    _, table = _read_csv(args.input, numeric)
    model = DPSyntheticData(
        epsilon=args.epsilon,
        delta=args.delta,
        domain=domain,
        method=args.method,
        missing=args.missing,
        handle_unknown=args.handle_unknown,
        infer_domain=args.infer_domain,
        neighbouring=args.neighbouring,
        n_jobs=args.n_jobs,
        random_state=args.random_state,
    ).fit(table)
    synthetic = model.sample(args.n_samples)
    out = open(args.output, "w", newline="", encoding="utf-8") if args.output else None
    try:
        writer = csv.writer(out or sys.stdout)
        writer.writerow(header)
        writer.writerows(
            ["" if v is None or v != v else v for v in row]
            for row in synthetic.tolist()
        )
    finally:
        if out is not None:
            out.close()
    spent = model.privacy_spent_
    learned = {header[j]: model.domain_[j] for j in numeric if j not in domain}
    if learned:
        print(
            f"skdp synth: learned numeric ranges {learned} with {args.infer_domain:g} "
            "of the budget (zCDP share; included in the epsilon below)",
            file=sys.stderr,
        )
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
    p.add_argument(
        "--delta",
        type=probability,
        default=None,
        help="target delta (default min(1e-5, n ** -1.1); required with "
        "--neighbouring add-remove, where the default would reveal n)",
    )
    p.add_argument(
        "--method",
        choices=["aim", "tree"],
        default="aim",
        help="aim: adaptive rounds (default); tree: one tree of marginals, faster",
    )
    p.add_argument(
        "--infer-domain",
        type=probability,
        default=None,
        metavar="SHARE",
        help="learn the range of numeric columns missing from DOMAIN privately, "
        "spending this share of the budget (zCDP terms)",
    )
    p.add_argument(
        "--missing",
        choices=["error", "category"],
        default="error",
        help="empty fields: refuse them, or keep them as a level of their column",
    )
    p.add_argument(
        "--handle-unknown",
        choices=["error", "other"],
        default="error",
        help="undeclared categories: refuse them, or map them to 'other'",
    )
    p.add_argument(
        "--neighbouring",
        choices=["replace-one", "add-remove"],
        default="replace-one",
        help="the guarantee's relation: one row replaced (default) or one row "
        "added or removed (aim only; the row count is then private and the "
        "output's default size is its estimate)",
    )
    p.add_argument("--n-jobs", type=int, default=None)
    p.add_argument("--n-samples", type=positive(int), default=None)
    p.add_argument("--random-state", type=int, default=None)
    p.add_argument("-o", "--output", help="output CSV (default: standard output)")
    p.set_defaults(func=_run_synth)

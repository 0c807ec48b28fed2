"""The ``skdp synth`` subcommand: a private synthetic copy of a CSV file."""

import csv
import json
import sys

import numpy as np

from ..accounting import account
from ..schema import Categorical, Numeric, as_column
from ..utils._argtypes import positive, probability
from ._domain import NamedColumns
from ._estimator import DPSyntheticData

__all__ = ["add_synth_parser", "read_domain"]


def read_domain(path, header, *, infer=False):
    """Read a JSON domain, keyed by the CSV's column names.

    A categorical column is a list of its category strings (as they appear in
    the CSV) or ``{"categories": [...], "nullable": bool}``; a numeric column
    is ``{"low": .., "high": ..}`` with optional ``"bins"`` (a number, or the
    public edges from low to high) and ``"nullable"``. A column with a
    ``"nullable"`` key is declared (:class:`~skdp.schema.Numeric` or
    :class:`~skdp.schema.Categorical`): it has a missing level iff it says
    ``true``, whatever ``--missing`` says; the others follow ``--missing``.
    With ``infer``, columns the file leaves out are numeric columns whose
    range is learned privately. Returns the domain and the set of numeric
    column names.
    """
    with open(path, encoding="utf-8") as handle:
        raw = json.load(handle)
    if not isinstance(raw, dict):
        raise ValueError("The domain file must hold one JSON object: column -> spec.")
    unknown = sorted(set(raw) - set(header))
    if unknown:
        raise ValueError(f"The domain names columns not in the CSV: {unknown}.")
    domain, numeric = {}, set()
    for name in header:
        if name not in raw:
            if infer:
                numeric.add(name)
                continue
            raise ValueError(
                f"Column {name!r} has no domain; declare its categories or its "
                "range in the domain file (it is public, never read from the "
                "data), or pass --infer-domain to learn a numeric range privately."
            )
        domain[name] = _column_domain(name, raw[name])
        if isinstance(domain[name], (tuple, Numeric)):
            numeric.add(name)
    return domain, numeric


def _column_domain(name, spec):
    """One column's JSON declaration as a domain value."""
    if isinstance(spec, list):
        return [str(v) for v in spec]
    if isinstance(spec, dict) and "categories" in spec and "low" not in spec:
        categories = spec["categories"]
        if not isinstance(categories, list):
            raise ValueError(f'Column {name!r}: "categories" must be a list.')
        categories = [str(v) for v in categories]
        if "nullable" not in spec:
            return categories
        return as_column(name, Categorical(categories, _flag(name, spec)))
    if isinstance(spec, dict) and {"low", "high"} <= set(spec):
        bins = spec.get("bins")
        if "nullable" not in spec and not isinstance(bins, list):
            bounds = (spec["low"], spec["high"])
            return bounds + ((int(bins),) if bins is not None else ())
        if isinstance(bins, list):
            bins = tuple(bins)
        numeric = Numeric(spec["low"], spec["high"], bins, _flag(name, spec))
        return as_column(name, numeric)
    raise ValueError(
        f"Domain of column {name!r} must be a list of categories, "
        '{"categories": [...], "nullable": ...} or {"low": ..., "high": ...[, '
        f'"bins": ..., "nullable": ...]}}, got {spec!r}.'
    )


def _flag(name, spec):
    value = spec.get("nullable", False)
    if not isinstance(value, bool):
        raise ValueError(f'Column {name!r}: "nullable" must be true or false.')
    return value


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
            table[i, j] = _parse(value, header[j] in numeric, header[j], i + 2)
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


#: DPSyntheticData parameters the subcommand passes on under their own names.
_ESTIMATOR_ARGS = (
    "epsilon",
    "delta",
    "method",
    "bins",
    "binning",
    "missing",
    "handle_unknown",
    "infer_domain",
    "neighbouring",
    "n_jobs",
    "random_state",
)


def _run_synth(args):
    """Fit on the CSV, write the synthetic table, report the spend to stderr."""
    with open(args.input, newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle), None)
    if header is None:
        raise ValueError(f"{args.input} is empty.")
    infer = args.infer_domain is not None
    domain, numeric = read_domain(args.domain, header, infer=infer)
    _, table = _read_csv(args.input, numeric)
    model = DPSyntheticData(
        domain=domain, **{name: getattr(args, name) for name in _ESTIMATOR_ARGS}
    )
    try:
        model.fit(NamedColumns(tuple(header), table))
    except TypeError as exc:  # a malformed declaration: report it as the others
        raise ValueError(str(exc)) from exc
    synthetic = model.sample(args.n_samples)
    _write_csv(args.output, header, synthetic)
    learned = {name: model.domain_[name] for name in header if name not in domain}
    _report(model, learned, args.infer_domain, len(synthetic))
    return 0


def _write_csv(path, header, synthetic):
    """The table as CSV to ``path`` (standard output if None); missing: empty."""
    out = open(path, "w", newline="", encoding="utf-8") if path else None
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


def _report(model, learned, share, n_rows):
    """What the fit spent (and what learning ``learned`` ranges spent alone)."""
    spent = model.privacy_spent_
    if learned:
        inference = model.events_[: len(learned)]  # one histogram per column
        alone = account(inference, spent.delta, neighbouring=spent.neighbouring)
        print(
            f"skdp synth: learned numeric ranges {learned} with {share:g} "
            f"of the budget (zCDP share; epsilon {alone.epsilon:.3g} on its own at "
            "this delta, included in the epsilon below); values beyond a learned "
            "range are clipped into it",
            file=sys.stderr,
        )
    print(
        f"skdp synth: {n_rows} rows, epsilon {spent.epsilon:.4g}, delta "
        f"{spent.delta:.3g} ({spent.neighbouring})",
        file=sys.stderr,
    )


def _add_choice(parser, flag, choices, help):
    """A flag taking one of ``choices``, the first by default."""
    parser.add_argument(flag, choices=choices, default=choices[0], help=help)


def add_synth_parser(subparsers):
    """Add the ``synth`` subcommand to an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "synth",
        help="write a private synthetic copy of a CSV file",
        description=(
            "Fit DPSyntheticData on INPUT (a CSV with a header) under the public "
            "domain in DOMAIN (JSON: column -> list of categories, "
            '{"categories": [..], "nullable": ..}, or {"low": .., "high": .., '
            '"bins": .., "nullable": ..}; bins: a number or the public edges; '
            "nullable: whether the column may be empty) and write a synthetic "
            "table. Errors name the columns as the CSV header does."
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
    _add_choice(
        p,
        "--method",
        ["aim", "tree"],
        "aim: adaptive rounds (default); tree: one tree of marginals, faster",
    )
    p.add_argument(
        "--bins",
        type=positive(int),
        default=32,
        help="public equal-width bins of a numeric column whose declaration "
        "sets none (default 32)",
    )
    _add_choice(
        p,
        "--binning",
        ["adaptive", "fixed"],
        "aim only: adaptive (default) groups each numeric column's bins "
        "into runs cut at the quantiles of its noisy 1-way counts (no extra "
        "budget); fixed keeps every bin as a level",
    )
    p.add_argument(
        "--infer-domain",
        type=probability,
        default=None,
        metavar="SHARE",
        help="learn the range of numeric columns missing from DOMAIN privately, "
        "spending this share of the budget (zCDP terms)",
    )
    _add_choice(
        p,
        "--missing",
        ["error", "category"],
        'empty fields in columns not declared with "nullable": refuse them '
        "(error), or keep them as a level of every such column (category); a "
        'column declared "nullable": false never gets one',
    )
    _add_choice(
        p,
        "--handle-unknown",
        ["error", "other"],
        "undeclared categories: refuse them, or map them to 'other'",
    )
    _add_choice(
        p,
        "--neighbouring",
        ["replace-one", "add-remove"],
        "the guarantee's relation: one row replaced (default) or one row "
        "added or removed (aim only; the row count is then private and the "
        "output's default size is its estimate)",
    )
    p.add_argument("--n-jobs", type=int, default=None)
    p.add_argument("--n-samples", type=positive(int), default=None)
    p.add_argument("--random-state", type=int, default=None)
    p.add_argument("-o", "--output", help="output CSV (default: standard output)")
    p.set_defaults(func=_run_synth)

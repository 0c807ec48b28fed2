"""The ``skdp synth`` subcommand: a private synthetic copy of a CSV file.

INPUT is one CSV file, read in memory; or partitioned data, read and fitted
with Dask (docs/guide/dask.md): a glob of CSV files (``'data/*.csv'``), or
Parquet (a ``.parquet`` / ``.pq`` file or glob, or a directory). The
synthetic table is then written partition by partition.
"""

import contextlib
import csv
import glob
import json
import os
import sys
import warnings

import numpy as np

from ..accounting import account
from ..accounting._accountant import epsilon_text
from ..schema import Categorical, Numeric, as_column
from ..schema._schema import did_you_mean
from ..utils._argtypes import positive, probability
from ._domain import NamedColumns
from ._estimator import DPSyntheticData

__all__ = ["add_synth_parser", "read_domain"]


def read_domain(path, header, *, infer=False, can_infer=True, typed=()):
    """Read a JSON domain, keyed by the CSV's column names.

    A categorical column is a list of its category strings (as they appear in
    the CSV) or ``{"categories": [...], "nullable": bool}``; the categories of
    the columns named in ``typed`` (Parquet columns of integers or booleans
    declared by JSON numbers or booleans, :func:`_typed_columns`) keep their
    JSON type, the others are read as text. A numeric column
    is ``{"low": .., "high": ..}`` with optional ``"bins"`` (a number, or the
    public edges from low to high) and ``"nullable"``. A column with a
    ``"nullable"`` key is declared (:class:`~skdp.schema.Numeric` or
    :class:`~skdp.schema.Categorical`): it has a missing level iff it says
    ``true``, whatever ``--missing`` says; the others follow ``--missing``.
    With ``infer``, columns the file leaves out are numeric columns whose
    range is learned privately. ``can_infer=False`` (partitioned input, where
    ranges cannot be learned) leaves ``--infer-domain`` out of the error for
    an undeclared column. Returns the domain and the set of numeric column
    names.
    """
    with open(path, encoding="utf-8") as handle:
        raw = json.load(handle)
    if not isinstance(raw, dict):
        raise ValueError("The domain file must hold one JSON object: column -> spec.")
    _check_declared_names(raw, header)
    domain, numeric = {}, set()
    for name in header:
        if name not in raw:
            if infer:
                numeric.add(name)
                continue
            hint = (
                ", or pass --infer-domain to learn a numeric range privately"
                if can_infer
                else " (--infer-domain is not available on partitioned input)"
            )
            if _looks_like_an_index(name):
                hint = (
                    "; an unnamed column is often the row index a DataFrame "
                    "wrote (write the CSV with index=False, or drop the column)"
                )
            raise ValueError(
                f"Column {name!r} has no domain; declare its categories or its "
                "range in the domain file (it is public, never read from the "
                f"data){hint}."
            )
        domain[name] = _column_domain(name, raw[name], name in typed)
        if isinstance(domain[name], (tuple, Numeric)):
            numeric.add(name)
    return domain, numeric


def _looks_like_an_index(name):
    """Whether a CSV column name is what pandas writes for an unnamed index."""
    name = str(name).strip()
    return name == "" or name.startswith("Unnamed:")


def _check_declared_names(raw, header):
    """Refuse a domain naming columns the input lacks, with the closest names.

    Each unknown name comes with the header's closest undeclared columns, as
    the schema's errors do: ``"educaton"`` gets ``did you mean 'education'?``.
    """
    unknown = sorted(set(raw) - set(header))
    if not unknown:
        return
    undeclared = [name for name in header if name not in raw]
    pairs = [(name, did_you_mean(name, undeclared)) for name in unknown]
    hints = "".join(
        f" Column {name!r} is not in the CSV{hint}" for name, hint in pairs if hint
    )
    raise ValueError(f"The domain names columns not in the CSV: {unknown}.{hints}")


def _column_domain(name, spec, typed=False):
    """One column's JSON declaration as a domain value.

    Categories are read as text unless ``typed`` (:func:`_typed_columns`).
    """
    if isinstance(spec, list):
        return list(spec) if typed else [str(v) for v in spec]
    if isinstance(spec, dict) and "categories" in spec and "low" not in spec:
        categories = spec["categories"]
        if not isinstance(categories, list):
            raise ValueError(f'Column {name!r}: "categories" must be a list.')
        categories = list(categories) if typed else [str(v) for v in categories]
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
    if _is_partitioned(args.input):
        return _run_synth_on_dask(args)
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


#: INPUT and output names read and written as Parquet.
_PARQUET = (".parquet", ".pq")


def _is_partitioned(path):
    """Whether INPUT names partitioned data: a glob, Parquet or a directory."""
    return (
        any(c in path for c in "*?[") or path.endswith(_PARQUET) or os.path.isdir(path)
    )


def _csv_header(path):
    with open(path, newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle), None)
    if header is None:
        raise ValueError(f"{path} is empty.")
    return header


def _partitioned_header(path):
    """The column names of partitioned INPUT (every CSV file must share them)."""
    if path.endswith(_PARQUET) or os.path.isdir(path):
        import dask.dataframe as dd  # lazy: dask is an optional extra

        return [str(c) for c in dd.read_parquet(path).columns]
    files = sorted(glob.glob(path))
    if not files:
        raise ValueError(f"No file matches {path!r}.")
    header = _csv_header(files[0])
    for name in files[1:]:
        if _csv_header(name) != header:
            raise ValueError(
                f"{name} has the header {_csv_header(name)!r}, not {header!r} as "
                f"{files[0]}: every file must hold the same columns in the same order."
            )
    return header


def _declared_categories(spec):
    """The categories a column's JSON declaration lists, or None if numeric."""
    if isinstance(spec, list):
        return spec
    if isinstance(spec, dict) and "low" not in spec:
        return spec.get("categories")
    return None


def _typed_columns(domain_path, path):
    """Categorical Parquet columns that keep their type.

    Those that hold integers or booleans in the file and are declared by
    JSON numbers or booleans (never by strings). Their synthetic values are
    then written with the input's type; any other categorical column is
    read, matched and written as text, as in a CSV.
    """
    import dask.dataframe as dd  # lazy: dask is an optional extra
    import pandas as pd  # lazy: pandas comes with the dask extra

    if not (path.endswith(_PARQUET) or os.path.isdir(path)):
        return set()
    with open(domain_path, encoding="utf-8") as handle:
        raw = json.load(handle)
    if not isinstance(raw, dict):
        return set()  # read_domain reports it
    typed = set()
    for name, dtype in dd.read_parquet(path).dtypes.items():
        categories = _declared_categories(raw.get(str(name)))
        native = pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_bool_dtype(
            dtype
        )
        if native and isinstance(categories, list) and categories:
            if all(isinstance(v, (int, bool)) for v in categories):
                typed.add(str(name))
    return typed


def _numbers(frame, numeric):
    """The ``numeric`` columns of a partition as floats (empty fields missing)."""
    import pandas as pd  # lazy: pandas comes with the dask extra

    out = frame.copy()
    for name in numeric:
        values = pd.to_numeric(frame[name], errors="coerce").astype(float)
        bad = values.isna() & frame[name].notna()
        if bad.any():
            raise ValueError(
                f"Column {name!r} holds {frame[name][bad].iloc[0]!r}, which is not "
                "a number, but the column's domain is numeric."
            )
        out[name] = values
    return out


def _read_partitioned(path, header, numeric, typed=()):
    """Partitioned INPUT as a Dask DataFrame.

    Categories are read as text, as in a CSV, but for the ``typed`` columns
    (:func:`_typed_columns`), which keep the file's type.
    """
    import dask.dataframe as dd  # lazy: dask is an optional extra

    text = [name for name in header if name not in numeric and name not in typed]
    if path.endswith(_PARQUET) or os.path.isdir(path):
        frame = dd.read_parquet(path)
        frame.columns = header
        return frame.astype({name: "string" for name in text})
    frame = dd.read_csv(
        sorted(glob.glob(path)),
        dtype=dict.fromkeys(header, object),
        keep_default_na=False,
        na_values=[""],
    )
    meta = [(name, float if name in numeric else frame.dtypes[name]) for name in header]
    return frame.map_partitions(_numbers, sorted(numeric), meta=meta)


@contextlib.contextmanager
def _scheduler(address):
    """A ``distributed.Client`` of ``address`` while fitting (None: Dask's default)."""
    if address is None:
        yield
        return
    from distributed import Client  # lazy: dask is an optional extra

    with Client(address):
        yield


def _run_synth_on_dask(args):
    """Fit on partitioned INPUT with Dask; write the table partition by partition."""
    # dask's Parquet reader calls a pandas method that pandas 3.1 deprecates;
    # the caller's catch_warnings (main) scopes this filter to the command.
    warnings.filterwarnings(
        "ignore",
        message="The inplace keyword in DataFrame.reset_index",
        category=DeprecationWarning,
        module="dask",
    )
    if args.infer_domain is not None:
        raise ValueError(
            "--infer-domain is not available on partitioned input (a glob or "
            "Parquet): declare every column in the domain file, or fit one CSV "
            "file in memory."
        )
    header = _partitioned_header(args.input)
    typed = _typed_columns(args.domain, args.input)
    domain, numeric = read_domain(args.domain, header, can_infer=False, typed=typed)
    model = DPSyntheticData(
        domain=domain, **{name: getattr(args, name) for name in _ESTIMATOR_ARGS}
    )
    with _scheduler(args.scheduler):
        frame = _read_partitioned(args.input, header, numeric, typed)
        try:
            model.fit(frame)
        except TypeError as exc:  # a malformed declaration: report it as the others
            raise ValueError(str(exc)) from exc
        synthetic = model.sample(args.n_samples, npartitions=frame.npartitions)
        _write_partitioned(args.output, synthetic, model.columns_)
    n_rows = model.n_samples_fit_ if args.n_samples is None else args.n_samples
    _report(model, {}, args.infer_domain, n_rows)
    return 0


def _integers_as_text(frame, names):
    """Integer columns as nullable integers, so they are written without ``.0``."""
    return frame.astype(dict.fromkeys(names, "Int64"))


def _write_partitioned(path, synthetic, specs):
    """A Dask DataFrame to ``path`` partition by partition (stdout if None).

    ``.parquet`` / ``.pq``: a Parquet directory; a name with ``*``: one CSV
    file per partition; another name: one CSV file, appended partition after
    partition. Missing values are empty fields.
    """
    if path is not None and path.endswith(_PARQUET):
        synthetic.to_parquet(path, write_index=False)
        return
    integers = [spec.key for spec in specs if spec.integer]
    table = synthetic.map_partitions(_integers_as_text, integers)
    if path is None:
        for k in range(table.npartitions):
            part = table.partitions[k].compute()
            part.to_csv(sys.stdout, header=k == 0, index=False, lineterminator="\n")
        return
    table.to_csv(path, index=False, single_file="*" not in path)


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
            f"of the budget (zCDP share; epsilon {epsilon_text(alone.epsilon)} "
            "on its own at "
            "this delta, included in the epsilon below); values beyond a learned "
            "range are clipped into it",
            file=sys.stderr,
        )
    print(
        f"skdp synth: {n_rows} rows, epsilon {epsilon_text(spent.epsilon)}, delta "
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
    p.add_argument(
        "input",
        help="CSV file with a header row; or partitioned data, fitted with Dask: a "
        "quoted glob of CSV files sharing one header, or Parquet (a .parquet or "
        ".pq file or glob, or a directory)",
    )
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
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="partitioned input: the address of a dask.distributed scheduler to "
        "run on (default: Dask's local scheduler)",
    )
    p.add_argument(
        "-o",
        "--output",
        help="output CSV (default: standard output); for partitioned input also a "
        "name with * (one CSV per partition) or a .parquet directory",
    )
    p.set_defaults(func=_run_synth)

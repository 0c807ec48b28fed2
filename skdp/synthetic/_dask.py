"""DPSyntheticData on Dask collections: only count tables leave a partition.

A fit on a :class:`dask.dataframe.DataFrame` or a 2-D :class:`dask.array.Array`
runs one pass over the partitions, where they are: in the task that reads it
(``map_partitions`` / ``map_blocks``, fused with the read, so a partition
never moves between workers), each partition is encoded on the public
discretisation (:func:`._domain.encode_table`, the in-memory encoder) and
returns a :class:`PartitionCounts`, the integer count tables of the column
sets the method reads (``count_sets`` of the method), its number of rows and
how many values were clipped or mapped per column. The partial counts are
summed in a tree of tasks (:data:`SPLIT_EVERY` at a time) and the client
receives one :class:`PartitionCounts`: aggregates only, never a row. Every
table the solvers read is a sum of those tables
(:class:`skdp._solvers._measure.CountedTables`), and integer sums are exact in
any order, so the fit is the in-memory fit of the same rows bit for bit.

:func:`sample_collection` is the way back: a synthetic table drawn partition
by partition where the collection is computed, each partition from the fitted
model with its own seed.

Dask is an optional dependency (``pip install "skdp[dask]"``); this module
imports it only when a Dask collection is used.
"""

import functools
import operator
import sys
from dataclasses import dataclass

import numpy as np

from .._solvers._measure import integer_counts
from ._domain import encode_table

__all__ = [
    "SPLIT_EVERY",
    "DaskTable",
    "PartitionCounts",
    "count_block",
    "count_frame",
    "count_on_dask",
    "count_partition",
    "dask_table",
    "draw_block",
    "is_dask_collection",
    "sample_collection",
    "sum_counts",
]

#: Partial counts summed per task of the tree reduction: Dask's own default
#: for tree reductions (any value gives the same sums: they are integers).
SPLIT_EVERY = 8


def is_dask_collection(X):
    """Whether ``X`` is a Dask collection (never imports dask itself)."""
    dask = sys.modules.get("dask")
    return dask is not None and dask.is_dask_collection(X)


@dataclass(frozen=True)
class DaskTable:
    """A Dask collection's public description and its lazy partitions.

    Attributes
    ----------
    columns : list of (key, None, dtype)
        As :func:`._domain.as_table` gives them, without the values; a
        categorical dtype whose categories Dask does not know is object.
    frame_info : dict or None
        For a DataFrame: its column names and dtypes (the sample's container).
    collection : dask.dataframe.DataFrame or dask.array.Array
        The data; an array's blocks hold every column.
    """

    columns: list
    frame_info: dict | None
    collection: object

    @property
    def keys(self):
        """Column keys, in order."""
        return [key for key, _, _ in self.columns]


def dask_table(X):
    """The :class:`DaskTable` of a Dask DataFrame or 2-D Array (nothing computed)."""
    import dask.array as da
    import dask.dataframe as dd

    if isinstance(X, dd.DataFrame):
        dtypes = X.dtypes
        columns = [(key, None, _public_dtype(dtypes[key])) for key in X.columns]
        info = {"columns": X.columns, "dtypes": dtypes}
    elif isinstance(X, da.Array) and X.ndim == 2:
        X = X.rechunk({1: -1})
        columns = [(j, None, X.dtype) for j in range(X.shape[1])]
        info = None
    else:
        raise ValueError(
            "On Dask, X must be a dask.dataframe.DataFrame or a 2-D dask.array."
            f"Array, got {type(X).__name__}"
            + (f" of shape {X.shape}." if hasattr(X, "shape") else ".")
        )
    if not columns:
        raise ValueError("X has no columns; DPSyntheticData needs at least one.")
    return DaskTable(columns, info, X)


def _public_dtype(dtype):
    """``dtype``, or object for a categorical whose categories Dask does not know."""
    categories = getattr(dtype, "categories", None)
    if categories is not None and "__UNKNOWN_CATEGORIES__" in set(categories):
        return np.dtype(object)
    return dtype


@dataclass(frozen=True)
class PartitionCounts:
    """What a partition returns, and what a sum of partitions is: aggregates only.

    Attributes
    ----------
    n_rows : int
    tables : dict
        Column set -> int64 count table (axes in the set's order).
    report : dict
        Column key -> (number of values clipped or mapped, what was done), for
        the curator's warning (see :func:`._domain.encode_table`).
    """

    n_rows: int
    tables: dict
    report: dict

    def __sizeof__(self):
        """Bytes held, tables included (what Dask's ``sizeof`` reports)."""
        return object.__sizeof__(self) + sum(t.nbytes for t in self.tables.values())

    def __add__(self, other):
        report = dict(self.report)
        for key, (count, kind) in other.report.items():
            report[key] = (report.get(key, (0, kind))[0] + count, kind)
        tables = {s: self.tables[s] + other.tables[s] for s in self.tables}
        return PartitionCounts(self.n_rows + other.n_rows, tables, report)


def _block_columns(block, keys):
    """A partition's ``(key, values, dtype)`` in the collection's column order."""
    if not hasattr(block, "columns"):
        array = np.asarray(block)
        return [(j, array[:, j], array.dtype) for j in keys]
    present = list(block.columns)
    missing = [key for key in keys if key not in present]
    extra = [key for key in present if key not in keys]
    if missing or extra:
        raise ValueError(
            f"A partition has the columns {present!r}, not the collection's "
            f"{list(keys)!r} (missing {missing!r}, extra {extra!r}). Every "
            "partition must hold every column: read the files with an explicit "
            "list of columns, or add the missing ones (as missing values, to a "
            "column declared nullable) before fitting."
        )
    return [(key, block[key], block[key].dtype) for key in keys]


def count_partition(block, keys, specs, sets, handle_unknown):
    """One partition's :class:`PartitionCounts` (runs where the partition is).

    Parameters
    ----------
    block : pandas.DataFrame or ndarray
        The partition.
    keys : list
        The collection's column keys, in order.
    specs : list of ColumnSpec
        The public discretisation.
    sets : list of tuple
        Column index sets whose tables are counted.
    handle_unknown : {"error", "other"}

    Returns
    -------
    PartitionCounts
    """
    report = {}
    codes = encode_table(
        _block_columns(block, keys), specs, handle_unknown=handle_unknown, report=report
    )
    sizes = [spec.n_levels for spec in specs]
    tables = {s: integer_counts(codes, s, sizes) for s in sets}
    return PartitionCounts(int(codes.shape[0]), tables, report)


def count_frame(frame, *args):
    """:func:`count_partition` of a DataFrame partition, in a one-item Series."""
    import pandas as pd  # lazy: comes with dask.dataframe

    return pd.Series([count_partition(frame, *args)], dtype=object)


def count_block(block, *args):
    """:func:`count_partition` of an array block, in a (1, 1) object array."""
    out = np.empty((1, 1), dtype=object)
    out[0, 0] = count_partition(block, *args)
    return out


def _unwrap(part):
    """The :class:`PartitionCounts` of :func:`count_frame` / :func:`count_block`."""
    if isinstance(part, PartitionCounts):
        return part
    return np.asarray(part, dtype=object).ravel()[0]


def sum_counts(*parts):
    """The sum of partial :class:`PartitionCounts` (possibly wrapped)."""
    return functools.reduce(operator.add, map(_unwrap, parts))


def _counted_partitions(table, specs, sets, handle_unknown):
    """A lazy, wrapped :class:`PartitionCounts` per partition (read, then counted)."""
    args = (table.keys, specs, sets, handle_unknown)
    if table.frame_info is not None:
        import pandas as pd  # lazy: comes with dask.dataframe

        meta = pd.Series([], dtype=object)
        counted = table.collection.map_partitions(count_frame, *args, meta=meta)
    else:
        counted = table.collection.map_blocks(
            count_block, *args, dtype=object, chunks=(1, 1)
        )
    return list(np.ravel(counted.to_delayed()))


def count_on_dask(table, specs, sets, handle_unknown):
    """Count every table of ``sets`` in one pass over the partitions.

    Each partition is counted in the task that reads it
    (:func:`count_partition`); the partial counts are summed
    :data:`SPLIT_EVERY` at a time, in a tree, and only the total is returned.
    Runs on the current Dask scheduler (a ``distributed.Client`` when one is
    active).

    Returns
    -------
    PartitionCounts
    """
    import dask

    level = _counted_partitions(table, specs, sets, handle_unknown)
    add = dask.delayed(sum_counts, pure=True)
    while len(level) > 1:
        level = [
            add(*level[k : k + SPLIT_EVERY]) for k in range(0, len(level), SPLIT_EVERY)
        ]
    (total,) = dask.compute(level[0])
    return _unwrap(total)


def _partition_sizes(n_samples, n_partitions):
    """``n_samples`` rows split as evenly as possible (the first get one more)."""
    base, extra = divmod(n_samples, n_partitions)
    return [base + (k < extra) for k in range(n_partitions)]


def draw_block(sampler, n_rows, seed, start):
    """One partition of a synthetic table: ``n_rows`` rows drawn with ``seed``.

    A DataFrame partition is indexed ``start, start + 1, ...``.
    """
    table = sampler.draw(n_rows, np.random.default_rng(seed))
    if hasattr(table, "index"):
        import pandas as pd

        table.index = pd.RangeIndex(start, start + n_rows)
    return table


def sample_collection(sampler, n_samples, seeds):
    """A lazy synthetic table of ``n_samples`` rows, one partition per seed.

    Partition ``k`` holds about ``n_samples / len(seeds)`` rows,
    ``draw_block(sampler, n_k, seeds[k], start_k)``; nothing is drawn until
    the collection is computed or written, and each partition is drawn where
    it is computed, so the table is never held in one place.

    Parameters
    ----------
    sampler : object
        Has ``draw(n, rng)``, returning a pandas DataFrame or a 2-D ndarray.
    n_samples : int
    seeds : sequence of int

    Returns
    -------
    dask.dataframe.DataFrame or dask.array.Array
    """
    import dask

    sizes = _partition_sizes(n_samples, len(seeds))
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    meta = sampler.draw(0, np.random.default_rng(0))
    held = dask.delayed(sampler, pure=True, traverse=False)
    draw = dask.delayed(draw_block, pure=True)
    blocks = [
        draw(held, n, int(seed), int(start))
        for n, seed, start in zip(sizes, seeds, starts, strict=False)
    ]
    if hasattr(meta, "columns"):
        import dask.dataframe as dd

        divisions = None
        if min(sizes) > 0:
            divisions = tuple(int(s) for s in starts[:-1]) + (n_samples - 1,)
        return dd.from_delayed(
            blocks, meta=meta, divisions=divisions, verify_meta=False
        )
    import dask.array as da

    return da.concatenate(
        [
            da.from_delayed(block, shape=(n, meta.shape[1]), dtype=meta.dtype)
            for block, n in zip(blocks, sizes, strict=True)
        ]
    )

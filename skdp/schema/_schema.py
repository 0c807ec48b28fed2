"""Public declarations of a table's columns, labels and groups.

A schema holds only public knowledge: for each column its categories or its
numeric ``(low, high)`` range (optionally public bin edges), whether it may be
missing, the label classes and the sensitive-group column. It is never read
from the data; the data are checked against it.
"""

import difflib
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..utils._validation import MAGNITUDE_LIMIT

__all__ = ["Categorical", "Numeric", "TableSchema", "as_column", "did_you_mean"]

# Undeclared labels an error shows (they are values of the private data).
_SHOWN_LABELS = 5


def did_you_mean(name, names):
    """A hint naming the entries of ``names`` closest to ``name``, or ``""``.

    For an error about a declared column the table does not have: a typo
    (``"educaton"``) gets ``"; did you mean 'education'?"``. Only string
    names are compared (:func:`difflib.get_close_matches`, its default
    cutoff of 0.6), so integer column positions get no hint.

    Parameters
    ----------
    name : hashable
        The declared name that was not found.
    names : iterable of hashable
        The names the table has.

    Returns
    -------
    str
        ``"; did you mean 'a'?"`` or ``"; did you mean 'a' or 'b'?"``, or
        ``""`` when nothing is close.
    """
    if not isinstance(name, str):
        return ""
    strings = [other for other in names if isinstance(other, str)]
    close = difflib.get_close_matches(name, strings, n=3)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(other) for other in close) + "?"


@dataclass(frozen=True)
class Numeric:
    """A numeric column with public bounds.

    Parameters
    ----------
    low, high : float
        Public range, ``low < high``, finite and within +-1e30. Values outside
        are clipped to it. Integer bounds declare an integer column.
    bins : int, sequence of float or None, default=None
        Optional public discretisation: a number of equal-width bins on
        ``[low, high]``, or the bin edges themselves (increasing, from ``low``
        to ``high``). ``None``: the consumer's default.
    nullable : bool, default=False
        Whether the column may be missing (NaN or None).
    """

    low: float
    high: float
    bins: object = None
    nullable: bool = False

    @property
    def integer(self):
        """Whether both public bounds are integers (an integer column)."""
        return all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool)
            for v in (self.low, self.high)
        )


@dataclass(frozen=True)
class Categorical:
    """A categorical column with its public categories.

    Parameters
    ----------
    categories : tuple
        Every category the column may hold, in a fixed public order.
    nullable : bool, default=False
        Whether the column may be missing (NaN or None).
    """

    categories: tuple
    nullable: bool = False


def _checked_numeric(name, spec):
    low, high = spec.low, spec.high
    for value in (low, high):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(
                f"Column {name!r}: bounds must be numbers, got {(low, high)!r}."
            )
    if (
        not (math.isfinite(low) and math.isfinite(high))
        or max(abs(low), abs(high)) > MAGNITUDE_LIMIT
    ):
        raise ValueError(
            f"Column {name!r}: bounds must be finite and within "
            f"+-{MAGNITUDE_LIMIT:g}, got {(low, high)!r}."
        )
    if not low < high:
        raise ValueError(
            f"Column {name!r}: needs low < high, got low={low!r}, high={high!r}."
        )
    bins = spec.bins
    if bins is None:
        return spec
    if isinstance(bins, numbers.Integral) and not isinstance(bins, bool):
        if bins < 1:
            raise ValueError(f"Column {name!r}: bins must be >= 1, got {bins!r}.")
        return spec
    if isinstance(bins, (str, bytes)) or not hasattr(bins, "__iter__"):
        raise TypeError(
            f"Column {name!r}: bins must be an int or a sequence of edges, "
            f"got {bins!r}."
        )
    edges = np.asarray(list(bins), dtype=float)
    if (
        edges.ndim != 1
        or edges.size < 2
        or not np.all(np.isfinite(edges))
        or np.any(np.diff(edges) <= 0)
        or edges[0] != low
        or edges[-1] != high
    ):
        raise ValueError(
            f"Column {name!r}: bin edges must increase strictly from low={low!r} "
            f"to high={high!r}, got {list(bins)!r}."
        )
    return Numeric(low, high, tuple(edges.tolist()), spec.nullable)


def _checked_categorical(name, spec):
    categories = spec.categories
    if isinstance(categories, (str, bytes, Mapping)) or not hasattr(
        categories, "__iter__"
    ):
        raise TypeError(
            f"Column {name!r}: categories must be a list, got {categories!r}."
        )
    categories = tuple(categories)
    if not categories:
        raise ValueError(f"Column {name!r}: the list of categories is empty.")
    if len(set(categories)) != len(categories):
        raise ValueError(f"Column {name!r}: a category is listed twice.")
    return Categorical(categories, spec.nullable)


def as_column(name, spec):
    """Parse one column's declaration into :class:`Numeric` or :class:`Categorical`.

    Parameters
    ----------
    name : hashable
        The column's name (used in error messages).
    spec : Numeric, Categorical, list or tuple
        A spec object, or a shorthand: a ``list`` of categories, or a
        ``(low, high)`` or ``(low, high, bins)`` tuple.

    Returns
    -------
    Numeric or Categorical
        The validated declaration.
    """
    if isinstance(spec, Numeric):
        return _checked_numeric(name, spec)
    if isinstance(spec, Categorical):
        return _checked_categorical(name, spec)
    if isinstance(spec, tuple):
        if any(isinstance(v, str) for v in spec):
            raise TypeError(
                f"Column {name!r}: a tuple declares a numeric range (low, high); "
                f"{spec!r} holds text: declare categories as a list, "
                f"{list(spec)!r}, or as Categorical(...)."
            )
        if len(spec) not in (2, 3):
            raise ValueError(
                f"Column {name!r}: a numeric range is (low, high) or "
                f"(low, high, bins), got {spec!r}."
            )
        return _checked_numeric(name, Numeric(*spec))
    if isinstance(spec, list):
        return _checked_categorical(name, Categorical(tuple(spec)))
    raise TypeError(
        f"Column {name!r}: declare a list of categories, a (low, high) tuple, "
        f"Numeric(...) or Categorical(...), got {spec!r}."
    )


class TableSchema:
    """The public declaration of a table, made once.

    Parameters
    ----------
    columns : mapping
        ``column -> declaration``: :class:`Numeric`, :class:`Categorical`, a
        list of categories or a ``(low, high[, bins])`` tuple.
    target : hashable or None, default=None
        The label column, if ``columns`` or the frames include it; it is not a
        feature.
    classes : sequence or None, default=None
        The public label classes. ``None`` with a ``target`` declared as
        categorical in ``columns``: its categories.
    sensitive : hashable or None, default=None
        The column holding the sensitive groups; it must be a declared
        categorical column, so it is also a feature of the encoded rows
        (docs/guide/schema.md says how to fit without it as a feature).

    Attributes
    ----------
    columns : dict
        Every declared column, validated.
    features : list
        The feature columns, in declaration order (``columns`` less ``target``).
    classes : tuple or None
        The declared classes.
    """

    def __init__(self, columns, *, target=None, classes=None, sensitive=None):
        if not isinstance(columns, Mapping) or not columns:
            raise TypeError(
                "columns must be a non-empty mapping column -> declaration."
            )
        self.columns = {name: as_column(name, spec) for name, spec in columns.items()}
        self.target = target
        self.features = [name for name in self.columns if name != target]
        if not self.features:
            raise ValueError("The schema declares no feature column.")
        self.classes = _declared_classes(classes, target, self.columns.get(target))
        if sensitive is not None and not isinstance(
            self.columns.get(sensitive), Categorical
        ):
            raise ValueError(
                f"sensitive={sensitive!r} must name a declared categorical column."
            )
        self.sensitive = sensitive

    def __repr__(self):
        return (
            f"TableSchema({len(self.features)} features, target={self.target!r}, "
            f"classes={self.classes!r}, sensitive={self.sensitive!r})"
        )

    def domain(self):
        """The feature declarations as a ``DPSyntheticData`` domain.

        Returns
        -------
        dict
            ``column -> Numeric or Categorical`` for every declared column.
        """
        return dict(self.columns)

    def check_columns(self, names):
        """Raise ``ValueError`` naming the features missing from ``names``.

        Each missing feature comes with the table's closest undeclared column
        names, if any: ``column 'educaton' is not in the table; did you mean
        'education'?``.
        """
        names = list(names)
        present = set(names)
        missing = [name for name in self.features if name not in present]
        if missing:
            undeclared = [name for name in names if name not in self.columns]
            found = " ".join(
                f"Column {name!r} is declared in the schema but is not in the "
                f"table{did_you_mean(name, undeclared) or '.'}"
                for name in missing
            )
            label = (
                f" If {missing[0]!r} is the label, declare it with "
                f"TableSchema(..., target={missing[0]!r})."
                if self.target is None and len(missing) == 1
                else ""
            )
            raise ValueError(
                f"{found} Rename the column in the schema or in the table "
                f"(missing: {missing!r}).{label}"
            )

    def check_labels(self, y):
        """Raise ``ValueError`` if a label of ``y`` is not a declared class."""
        if self.classes is None:
            return
        labels = np.asarray(y, dtype=object).ravel()
        missing = [i for i, v in enumerate(labels) if v is None or v != v]
        if missing:
            raise ValueError(
                f"y has {len(missing)} missing label(s) (first at row {missing[0]}): "
                "drop or label those rows before fitting."
            )
        unknown = set(labels.tolist()) - set(self.classes)
        try:
            unknown = sorted(unknown)
        except TypeError:  # labels of mixed types
            unknown = sorted(unknown, key=repr)
        if unknown:
            column = "" if self.target is None else f" of column {self.target!r}"
            shown = unknown[:_SHOWN_LABELS]
            more = len(unknown) - len(shown)
            extra = f" and {more} more" if more else ""
            raise ValueError(
                f"Labels {shown!r}{extra}{column} are not among the declared "
                f"classes {list(self.classes)!r}."
            )


def _declared_classes(classes, target, target_column):
    """The classes: ``classes``, or the categories of a categorical ``target``.

    Both given: they must be the same set of labels.
    """
    if classes is not None:
        classes = _checked_classes(classes)
    if not isinstance(target_column, Categorical):
        return classes
    categories = tuple(target_column.categories)
    if classes is None:
        return _checked_classes(categories)
    if set(classes) != set(categories):
        raise ValueError(
            f"classes={list(classes)!r} differ from the categories declared for "
            f"the target column {target!r}, {list(categories)!r}: declare one set "
            "of labels (classes may be left out; the categories are then used)."
        )
    return classes


def _checked_classes(classes):
    if isinstance(classes, (str, bytes)) or not hasattr(classes, "__iter__"):
        raise TypeError(f"classes must be a list of labels, got {classes!r}.")
    classes = tuple(classes)
    if len(classes) < 2 or len(set(classes)) != len(classes):
        raise ValueError(
            f"classes must list at least two distinct labels, got {list(classes)!r}."
        )
    return classes

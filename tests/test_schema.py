import numpy as np
import pytest

from skdp.schema import Categorical, Numeric, TableSchema, as_column


def test_shorthands_parse_to_specs():
    assert as_column("a", [1, 0]) == Categorical((1, 0))
    assert as_column("b", (0, 10)) == Numeric(0, 10)
    assert as_column("b", (0, 10)).integer
    assert not as_column("c", (0.0, 1.0)).integer
    assert as_column("d", (0, 1, 4)).bins == 4
    edges = as_column("e", Numeric(0, 10, bins=[0, 1, 5, 10])).bins
    assert edges == (0.0, 1.0, 5.0, 10.0)


@pytest.mark.parametrize(
    "spec, match",
    [
        ((5, 5), "low < high"),
        ((6, 5), "low < high"),
        ((0, float("inf")), "finite"),
        ((0, 1e31), "finite"),
        (("a", 1), "as a list"),
        (("white", "black", "other"), r"\['white', 'black', 'other'\]"),
        ((0, "1"), "as a list"),
        ((0, 1, 2, 3), r"\(low, high\)"),
        ((0, 1, 0), "bins must be >= 1"),
        (Numeric(0, 10, bins=[0, 5, 4, 10]), "edges"),
        (Numeric(0, 10, bins=[1, 5, 10]), "edges"),
        ([], "empty"),
        (["x", "x"], "twice"),
        ("abc", "declare"),
        ({"x": 1}, "declare"),
        (Categorical("abc"), "must be a list"),
    ],
)
def test_bad_declarations_name_the_column(spec, match):
    with pytest.raises((ValueError, TypeError), match=match) as info:
        as_column("income", spec)
    assert "'income'" in str(info.value)


def test_schema_features_classes_and_checks():
    schema = TableSchema(
        {"age": (0, 100), "sex": ["F", "M"], "y": [0, 1]},
        target="y",
        classes=[0, 1],
        sensitive="sex",
    )
    assert schema.features == ["age", "sex"]
    assert schema.classes == (0, 1)
    assert set(schema.domain()) == {"age", "sex", "y"}
    schema.check_columns(["sex", "age", "other"])
    with pytest.raises(ValueError, match="'age'"):
        schema.check_columns(["sex"])
    schema.check_labels(np.array([0, 1, 1]))
    with pytest.raises(ValueError, match=r"\[2\]"):
        schema.check_labels(np.array([0, 2]))
    with pytest.raises(ValueError, match="1 missing label"):
        schema.check_labels(np.array([0, np.nan, 1]))
    strings = TableSchema({"a": (0, 1)}, classes=["no", "yes"])
    with pytest.raises(ValueError, match="1 missing label"):
        strings.check_labels(np.array(["no", None, "yes"], dtype=object))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"columns": {}}, "non-empty"),
        ({"columns": [("a", (0, 1))]}, "mapping"),
        ({"columns": {"y": [0, 1]}, "target": "y"}, "no feature"),
        ({"columns": {"a": (0, 1)}, "classes": "ab"}, "list of labels"),
        ({"columns": {"a": (0, 1)}, "classes": [1]}, "two distinct"),
        ({"columns": {"a": (0, 1)}, "sensitive": "a"}, "categorical"),
    ],
)
def test_bad_schema(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        TableSchema(**kwargs)


def test_missing_column_error_suggests_the_near_miss():
    # Issue 20: a typo in a declared column name got no hint.
    schema = TableSchema({"education": ["a", "b"], "age": (0, 9), "sex": ["F", "M"]})
    with pytest.raises(ValueError) as info:
        schema.check_columns(["educaton", "age", "sex"])
    assert (
        "Column 'education' is declared in the schema but is not in the table; "
        "did you mean 'educaton'?" in str(info.value)
    )
    # Declared columns present in the table are not suggested for another.
    with pytest.raises(ValueError) as info:
        schema.check_columns(["age", "sex", "zzz"])
    assert "did you mean" not in str(info.value)
    assert "'education'" in str(info.value)


def test_schema_encoder_names_the_near_miss_of_a_frame():
    pd = pytest.importorskip("pandas")
    from skdp.preprocessing import SchemaEncoder

    schema = TableSchema({"education": ["a", "b"], "age": (0, 9)})
    frame = pd.DataFrame({"educaton": ["a"], "age": [3]})
    with pytest.raises(ValueError, match="did you mean 'educaton'"):
        SchemaEncoder(schema).fit(frame)


def test_classes_default_to_a_categorical_targets_categories():
    schema = TableSchema({"a": (0, 1), "union": ["no", "yes"]}, target="union")
    assert schema.classes == ("no", "yes")
    same = TableSchema(
        {"a": (0, 1), "y": ["no", "yes"]}, target="y", classes=["yes", "no"]
    )
    assert same.classes == ("yes", "no")
    with pytest.raises(ValueError, match=r"classes=\['n', 'y'\] differ .* 'union'"):
        TableSchema(
            {"a": (0, 1), "union": ["no", "yes"]}, target="union", classes=["n", "y"]
        )
    # A numeric or undeclared target leaves classes as given.
    assert TableSchema({"a": (0, 1)}, target="y").classes is None


def test_a_missing_column_may_be_the_undeclared_label():
    schema = TableSchema({"a": (0, 1), "union": ["no", "yes"]})
    with pytest.raises(
        ValueError, match=r"declare it with TableSchema\(\.\.\., target='union'\)"
    ):
        schema.check_columns(["a"])
    with pytest.raises(ValueError) as info:
        TableSchema({"a": (0, 1), "b": (0, 1)}, target="b").check_columns(["c"])
    assert "target=" not in str(info.value)


def test_undeclared_labels_error_shows_a_few_of_them():
    schema = TableSchema({"x": (0, 1)}, classes=[0, 1])
    with pytest.raises(ValueError, match=r"Labels \[2, 3, 4, 5, 6\] and 95 more"):
        schema.check_labels(np.arange(2, 102))
    with pytest.raises(ValueError, match=r"Labels \[2\] are not"):
        schema.check_labels([0, 2])

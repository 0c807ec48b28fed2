"""Per-column declarations: schemas, nullable columns, public bins, dtypes, errors."""

import ast
import json
import logging
import re
import traceback
import warnings
from pathlib import Path

import numpy as np
import pytest

from skdp._cli import main
from skdp.schema import Categorical, Numeric, TableSchema
from skdp.synthetic import DomainWarning, DPSyntheticData, _domain
from skdp.synthetic._infer import infer_numeric_bounds

pd = pytest.importorskip("pandas")

FAST = {"max_cells": 2000}


def _churn_like(n=600, seed=0):
    """A table where only ``charges`` has missing values."""
    rng = np.random.default_rng(seed)
    charges = rng.uniform(20, 120, size=n)
    charges[rng.random(n) < 0.2] = np.nan
    return pd.DataFrame(
        {
            "senior": rng.integers(0, 2, size=n),
            "tenure": rng.integers(0, 73, size=n),
            "contract": rng.choice(["month", "year"], size=n),
            "charges": charges,
        }
    )


SCHEMA = TableSchema(
    {
        "senior": [0, 1],
        "tenure": Numeric(0, 72),
        "contract": Categorical(["month", "year"]),
        "charges": Numeric(0.0, 150.0, nullable=True),
    }
)


@pytest.mark.parametrize("missing", ["error", "category"])
def test_missing_level_only_on_nullable_columns(missing):
    X = _churn_like()
    domain = SCHEMA.domain()
    domain["senior"] = Categorical([0, 1])  # declared: not nullable
    model = DPSyntheticData(
        epsilon=2.0, domain=domain, missing=missing, random_state=0, **FAST
    ).fit(X)
    assert [s.missing for s in model.columns_] == [False, False, False, True]
    synth = model.sample(3000)
    assert synth[["senior", "tenure", "contract"]].notna().all().all()
    assert 0.1 < synth["charges"].isna().mean() < 0.3
    # 0/1 and integer columns stay integers; the nullable float stays float.
    assert synth["senior"].dtype == np.int64 and synth["tenure"].dtype == np.int64
    assert synth["charges"].dtype == np.float64
    assert set(synth["senior"]) <= {0, 1}


def test_missing_category_still_covers_shorthand_columns_only():
    X = _churn_like()
    # A schema declares every column (its shorthands parse to nullable=False).
    model = DPSyntheticData(
        epsilon=2.0, domain=SCHEMA, missing="category", random_state=0, **FAST
    ).fit(X)
    assert [s.missing for s in model.columns_] == [False, False, False, True]
    # In a plain mapping a list or tuple cannot say: missing="category" adds one.
    domain = {"senior": [0, 1], "tenure": (0, 72)}
    domain |= {"contract": Categorical(["month", "year"])}
    domain |= {"charges": Numeric(0.0, 150.0, nullable=True)}
    model = DPSyntheticData(
        epsilon=2.0, domain=domain, missing="category", random_state=0, **FAST
    ).fit(X)
    assert [s.missing for s in model.columns_] == [True, True, False, True]


def test_missing_values_in_a_column_declared_not_nullable():
    X = _churn_like()
    domain = SCHEMA.domain()
    domain["charges"] = Numeric(0.0, 150.0)
    for missing in ("error", "category"):
        model = DPSyntheticData(domain=domain, missing=missing)
        with pytest.raises(ValueError, match="'charges'.*nullable=True"):
            model.fit(X)
        assert not hasattr(model, "columns_")


def test_schema_and_spec_objects_match_the_shorthands():
    X = _churn_like().drop(columns="charges")
    shorthand = {"senior": [0, 1], "tenure": (0, 72), "contract": ["month", "year"]}
    declared = TableSchema(
        {
            "senior": Categorical([0, 1]),
            "tenure": Numeric(0, 72),
            "contract": Categorical(("month", "year")),
        }
    )
    a = DPSyntheticData(domain=shorthand, random_state=3, **FAST).fit(X)
    b = DPSyntheticData(domain=declared, random_state=3, **FAST).fit(X)
    pd.testing.assert_frame_equal(a.sample(), b.sample())
    # Determinism under a seed, with a schema.
    c = DPSyntheticData(domain=declared, random_state=3, **FAST).fit(X)
    pd.testing.assert_frame_equal(b.sample(), c.sample())
    assert b.domain_["tenure"] == Numeric(0, 72)


@pytest.mark.parametrize(
    "declared, expected_edges",
    [
        (Numeric(0.0, 10.0, bins=4), [0.0, 2.5, 5.0, 7.5, 10.0]),
        (Numeric(0.0, 10.0, bins=(0.0, 1.0, 10.0)), [0.0, 1.0, 10.0]),
        # Integer column: interior edges move to ceil(e) - 0.5; the bin
        # [2.2, 2.7) holds no integer and is dropped.
        (Numeric(0, 10, bins=(0, 2.2, 2.7, 5, 10)), [-0.5, 2.5, 4.5, 10.5]),
    ],
)
def test_public_bins_of_a_numeric_declaration(declared, expected_edges):
    spec = _domain._column_spec("x", {"x": declared}, {}, None, 32, "error", "error")
    np.testing.assert_allclose(spec.edges, expected_edges)
    codes = np.repeat(np.arange(spec.n_values), 40)
    x = _domain.decode_column(spec, codes, np.random.default_rng(0))
    np.testing.assert_array_equal(_domain._encode_numeric(spec, x)[0], codes)
    assert x.min() >= declared.low and x.max() <= declared.high
    if declared.integer:
        assert np.all(x == np.rint(x))


# -- inferred domains -----------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_inferred_integer_range_holds_only_possible_values(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, size=2000).astype(float)
    (low, high), _ = infer_numeric_bounds(x, 1.0, rng, integer=True)
    assert (low, high) == (0, 1)
    # {0, 1, 2}: 2 sits in the bin [2, 2 sqrt 2), which holds no 3.
    x = rng.integers(0, 3, size=2000).astype(float)
    assert infer_numeric_bounds(x, 1.0, rng, integer=True)[0] == (0, 2)


def test_inferred_zero_one_columns_stay_zero_one():
    X = _churn_like(2000).drop(columns=["charges"])
    model = DPSyntheticData(
        epsilon=1.0,
        domain={"contract": ["month", "year"]},
        infer_domain=0.2,
        random_state=0,
        **FAST,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DomainWarning)
        model.fit(X)
    assert model.domain_["senior"] == (0, 1)
    synth = model.sample(5000)
    assert set(synth["senior"]) <= {0, 1} and synth["senior"].dtype == np.int64


def test_a_clipped_low_end_of_a_learned_range_is_said():
    rng = np.random.default_rng(0)
    tenure = np.concatenate([np.zeros(5, int), rng.integers(10, 70, size=3000)])
    X = pd.DataFrame({"tenure": tenure})
    model = DPSyntheticData(epsilon=1.0, infer_domain=0.1, random_state=0, **FAST)
    with pytest.warns(DomainWarning, match="'tenure'.*privately learned range"):
        model.fit(X)
    assert model.domain_["tenure"][0] > 0


# -- errors name columns; every message of the domain module renders ------------


def _raise_lines(module):
    """Line numbers of the ``raise`` statements of ``module``."""
    tree = ast.parse(Path(module.__file__).read_text())
    return {node.lineno for node in ast.walk(tree) if isinstance(node, ast.Raise)}


def _bad_inputs():
    """One call per error of ``skdp.synthetic._domain`` (and both missing texts)."""
    frame = pd.DataFrame({"tenure": [1.0, 2.0], "city": ["x", "y"]})
    nan = pd.DataFrame({"tenure": [1.0, np.nan], "city": ["x", "y"]})
    cases = [
        lambda: _domain.as_table(_domain.NamedColumns(("a",), np.zeros((2, 2)))),
        lambda: _domain.as_table(np.zeros(3)),
        lambda: _domain.as_table(np.zeros((0, 2))),
        lambda: _domain._numeric_spec("tenure", (1, 2, 3, 4), 8),
        lambda: _domain._numeric_spec("tenure", (2, 1), 8),
        lambda: _domain.as_domain(["tenure"]),
    ]
    fits = [
        (frame, {"tenure": (0, 9), "town": ["x"]}),
        (frame, {"tenure": (0, 9)}),
        (frame, {"tenure": (0, 9), "city": "xy"}),
        (frame, {"tenure": (0, 9), "city": []}),
        (frame, {"tenure": (0, 9), "city": ["x", "x"]}),
        (frame.astype({"city": "category"}), {"tenure": (0, 9), "city": ["x", "z"]}),
        (frame, {"tenure": (0, 9), "city": ["x"]}),
        (frame, {"tenure": (0, 9), "city": (0, 1)}),
        (frame.assign(tenure=[{1}, {2}]), {"tenure": (0, 9), "city": ["x", "y"]}),
        (frame.assign(tenure=[1.0, np.inf]), {"tenure": (0, 9), "city": ["x", "y"]}),
        (nan, {"tenure": (0, 9), "city": ["x", "y"]}),
        (nan, {"tenure": Numeric(0, 9), "city": ["x", "y"]}),
    ]
    for X, domain in fits:
        cases.append(lambda X=X, domain=domain: DPSyntheticData(domain=domain).fit(X))
    clash = {"tenure": (0, 9), "city": ["x", "other"]}
    cases.append(
        lambda: DPSyntheticData(domain=clash, handle_unknown="other").fit(frame)
    )
    return cases


def test_every_error_of_the_domain_module_renders_and_names_its_column():
    placeholder = re.compile(r"\{[^{}]*\}|\{\{|\}\}")
    raised, messages = set(), []
    for case in _bad_inputs():
        with pytest.raises((ValueError, TypeError)) as info:
            case()
        frames = [
            f
            for f in traceback.extract_tb(info.value.__traceback__)
            if f.filename == _domain.__file__
        ]
        raised.add(frames[-1].lineno)
        messages.append(str(info.value))
    assert raised == _raise_lines(_domain)
    for message in messages:
        assert not placeholder.search(message.replace("{'", "").replace("'}", "")), (
            message
        )
    named = [m for m in messages if re.match("(Column|Domain of column|No domain)", m)]
    assert len(named) >= 11
    assert all(re.search(r"'(tenure|city|town|a)'|\['tenure'\]", m) for m in named)
    no_domain = next(m for m in messages if m.startswith("No domain"))
    assert "{'city': [categories]}" in no_domain and "{key" not in no_domain
    assert any("nullable=False" in m for m in messages)
    assert any("missing='category'" in m for m in messages)


# -- the CLI names columns; verbose names them and labels the budget ------------


def test_cli_errors_name_columns(tmp_path, capsys):
    data = tmp_path / "in.csv"
    data.write_text("age,colour\n" + "".join(f"{20 + i % 9},red\n" for i in range(50)))
    data.write_text(data.read_text() + "30,\n")
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps({"age": {"low": 18, "high": 90}, "colour": ["red"]}))
    assert main(["synth", str(data), "--domain", str(domain)]) == 2
    err = capsys.readouterr().err
    assert "'colour'" in err and "Column 1" not in err
    # Declared nullable in the JSON: a missing level on that column only.
    domain.write_text(
        json.dumps(
            {
                "age": {"low": 18, "high": 90, "bins": [18, 25, 90]},
                "colour": {"categories": ["red"], "nullable": True},
            }
        )
    )
    out = tmp_path / "out.csv"
    args = ["synth", str(data), "--domain", str(domain), "--random-state", "0"]
    assert main([*args, "-o", str(out)]) == 0
    rows = [line.split(",") for line in out.read_text().splitlines()[1:]]
    assert all(r[0] != "" for r in rows)
    domain.write_text(json.dumps({"age": {"low": 18, "high": 90}, "colour": 3}))
    assert main(args) == 2
    assert "'colour'" in capsys.readouterr().err


def test_synth_help_documents_the_declarations(capsys):
    with pytest.raises(SystemExit):
        main(["synth", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "nullable" in text and "--bins" in text and "--binning" in text


def test_verbose_names_columns_and_labels_the_budget(caplog):
    X = _churn_like().drop(columns="charges")
    for method in ("aim", "tree"):
        caplog.clear()
        domain = {k: v for k, v in SCHEMA.domain().items() if k != "charges"}
        with caplog.at_level(logging.INFO, logger="skdp.synthetic"):
            DPSyntheticData(
                domain=domain, method=method, verbose=1, random_state=0, **FAST
            ).fit(X)
        text = caplog.text
        assert "'tenure'" in text or "'contract'" in text, text
        if method == "aim":
            assert "zCDP budget (rho) left" in text

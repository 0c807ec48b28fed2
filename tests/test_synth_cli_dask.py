"""``skdp synth`` on partitioned data: a glob of CSV files or Parquet, with Dask."""

import csv
import json

import numpy as np
import pytest

from skdp._cli import main
from skdp.synthetic import DPSyntheticData
from skdp.synthetic._cli import _read_csv, _read_partitioned, read_domain
from skdp.synthetic._domain import NamedColumns

pd = pytest.importorskip("pandas")
dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")

HEADER = ["age", "colour", "score"]
DOMAIN = {
    "age": {"low": 18, "high": 90},
    "colour": ["red", "green", "blue"],
    "score": {"low": 0, "high": 3.0, "nullable": True},
}


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="sync"):
        yield


def _row(i, part):
    score = "" if i % 3 == 0 else f"{(i % 10) / 3:.6g}"
    return [20 + (7 * i + part) % 50, ["red", "green", "blue"][(i + part) % 3], score]


@pytest.fixture
def parts(tmp_path):
    """Three CSV files of 80, 150 and 1 rows, one table in all."""
    rows = []
    for part, n in enumerate([80, 150, 1]):
        body = [_row(i, part) for i in range(n)]
        rows += body
        with open(tmp_path / f"part{part}.csv", "w", newline="") as handle:
            csv.writer(handle).writerows([HEADER, *body])
    with open(tmp_path / "all.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([HEADER, *rows])
    (tmp_path / "domain.json").write_text(json.dumps(DOMAIN))
    return tmp_path


def _read(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def _synth(tmp, source, *extra):
    args = ["synth", source, "--domain", str(tmp / "domain.json")]
    return main([*args, "--epsilon", "2", "--random-state", "0", *extra])


def _fits(tmp):
    domain, numeric = read_domain(tmp / "domain.json", HEADER)
    header, table = _read_csv(tmp / "all.csv", numeric)
    frame = _read_partitioned(str(tmp / "part*.csv"), HEADER, numeric)
    assert frame.npartitions == 3

    def fit(X):
        return DPSyntheticData(domain=domain, epsilon=2.0, random_state=0).fit(X)

    return fit(NamedColumns(tuple(header), table)), fit(frame)


def test_the_glob_fit_is_the_single_file_fit(parts):
    memory, partitioned = _fits(parts)
    assert memory.selected_ == partitioned.selected_
    assert memory.privacy_spent_ == partitioned.privacy_spent_
    assert memory.n_samples_fit_ == partitioned.n_samples_fit_ == 231
    codes = [
        m._model.sample(500, np.random.default_rng(0)) for m in (memory, partitioned)
    ]
    np.testing.assert_array_equal(*codes)


def test_synth_on_a_glob_writes_one_table(parts, capsys):
    out = parts / "out.csv"
    assert _synth(parts, str(parts / "part*.csv"), "-o", str(out)) == 0
    assert "231 rows, epsilon" in capsys.readouterr().err
    rows = _read(out)
    assert rows[0] == HEADER and len(rows) == 232
    for age, colour, score in rows[1:]:
        assert 18 <= int(age) <= 90 and colour in {"red", "green", "blue"}
        assert score == "" or 0 <= float(score) <= 3
    assert any(r[2] == "" for r in rows[1:])
    again = parts / "again.csv"
    assert _synth(parts, str(parts / "part*.csv"), "-o", str(again)) == 0
    assert again.read_text() == out.read_text()


def test_synth_on_a_glob_to_files_per_partition_and_stdout(parts, capsys):
    assert _synth(parts, str(parts / "part*.csv"), "-o", str(parts / "o-*.csv")) == 0
    written = [_read(parts / f"o-{k}.csv") for k in range(3)]
    assert all(w[0] == HEADER for w in written)
    assert [len(w) - 1 for w in written] == [77, 77, 77]
    capsys.readouterr()
    assert _synth(parts, str(parts / "part*.csv")) == 0
    lines = capsys.readouterr().out.splitlines()
    body = [line for line in lines if line]
    assert body[0] == ",".join(HEADER) and len(body) == 232
    joined = [",".join(r) for w in written for r in w[1:]]
    assert body[1:] == joined  # the same partitions, written to one stream


def test_synth_on_parquet(parts, capsys):
    pytest.importorskip("pyarrow")
    frame = dd.read_csv(str(parts / "part*.csv"), dtype={"colour": object})
    frame.to_parquet(str(parts / "in.parquet"), write_index=False)
    out = parts / "out.parquet"
    assert _synth(parts, str(parts / "in.parquet"), "-o", str(out)) == 0
    assert "231 rows" in capsys.readouterr().err
    back = dd.read_parquet(str(out)).compute()
    assert list(back.columns) == HEADER and len(back) == 231
    assert back["age"].between(18, 90).all()
    assert set(back["colour"]) <= {"red", "green", "blue"}
    assert _synth(parts, str(parts / "in.parquet"), "-o", str(parts / "o.csv")) == 0
    assert len(_read(parts / "o.csv")) == 232


@pytest.mark.parametrize(
    ("change", "extra", "message"),
    [
        ("header", [], "part2.csv has the header"),
        ("text", [], "Column 'age' holds 'old', which is not a number"),
        ("colour", [], "'purple', which is not in its declared categories"),
        (None, ["--infer-domain", "0.1"], "--infer-domain is not available on"),
        ("undeclared", [], "(--infer-domain is not available on partitioned"),
        ("none", [], "No file matches"),
    ],
)
def test_synth_on_a_glob_reports_bad_input(parts, capsys, change, extra, message):
    source = str(parts / "part*.csv")
    if change == "header":
        (parts / "part2.csv").write_text("age,score,colour\n30,1,red\n")
    elif change == "text":
        (parts / "part1.csv").write_text("age,colour,score\nold,red,1\n")
    elif change == "colour":
        (parts / "part0.csv").write_text("age,colour,score\n30,purple,1\n")
    elif change == "none":
        source = str(parts / "nothing*.csv")
    elif change == "undeclared":
        domain = json.loads((parts / "domain.json").read_text())
        domain.pop("score")
        (parts / "domain.json").write_text(json.dumps(domain))
    assert _synth(parts, source, *extra, "-o", str(parts / "out.csv")) == 2
    assert message in capsys.readouterr().err
    assert not (parts / "out.csv").exists()


def test_synth_on_a_scheduler(parts, capsys):
    distributed = pytest.importorskip("distributed")
    out = parts / "out.csv"
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
    ) as cluster:
        args = ["--scheduler", cluster.scheduler_address, "-o", str(out)]
        assert _synth(parts, str(parts / "part*.csv"), *args) == 0
    local = parts / "local.csv"
    assert _synth(parts, str(parts / "part*.csv"), "-o", str(local)) == 0
    assert out.read_text() == local.read_text()


def test_synth_on_parquet_keeps_integer_categories(tmp_path, capsys):
    """An int64 Parquet column declared by JSON integers comes back as integers
    (it came back as text, so every synthetic value differed from the input's);
    declared by strings, it is still matched and written as text."""
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame(
        {"screen": np.resize([14, 15, 17], 90), "age": np.arange(90) % 50 + 20}
    )
    frame.to_parquet(tmp_path / "in.parquet", index=False)
    for declared, expected in (
        ([14, 15, 17], {14, 15, 17}),
        (["14", "15", "17"], {"14", "15", "17"}),
    ):
        domain = {"screen": declared, "age": {"low": 18, "high": 90}}
        (tmp_path / "domain.json").write_text(json.dumps(domain))
        out = tmp_path / f"out{len(expected)}{type(declared[0]).__name__}.parquet"
        assert _synth(tmp_path, str(tmp_path / "in.parquet"), "-o", str(out)) == 0
        back = dd.read_parquet(str(out)).compute()
        assert set(back["screen"]) <= expected and len(back) == 90
        if isinstance(declared[0], int):
            assert pd.api.types.is_integer_dtype(back["screen"])
    capsys.readouterr()

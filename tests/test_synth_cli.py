import csv
import json

import pytest

from skdp._cli import main


@pytest.fixture
def files(tmp_path):
    data = tmp_path / "in.csv"
    with open(data, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["age", "colour"])
        for i in range(300):
            writer.writerow([20 + i % 50, ["red", "green", "blue"][i % 3]])
    domain = tmp_path / "domain.json"
    domain.write_text(
        json.dumps({"age": {"low": 18, "high": 90}, "colour": ["red", "green", "blue"]})
    )
    return data, domain, tmp_path


def test_synth_writes_a_table_in_the_domain(files, capsys):
    data, domain, tmp = files
    out = tmp / "out.csv"
    args = [
        "synth",
        str(data),
        "--domain",
        str(domain),
        "--epsilon",
        "2",
        "--random-state",
        "0",
        "-o",
        str(out),
    ]
    assert main(args) == 0
    assert "epsilon" in capsys.readouterr().err
    with open(out, newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["age", "colour"] and len(rows) == 301
    assert all(
        18 <= int(r[0]) <= 90 and r[1] in {"red", "green", "blue"} for r in rows[1:]
    )
    again = tmp / "again.csv"
    assert main([*args[:-1], str(again)]) == 0
    assert again.read_text() == out.read_text()


def test_synth_refuses_a_missing_domain(files, capsys):
    data, domain, _ = files
    domain.write_text(json.dumps({"age": {"low": 18, "high": 90}}))
    assert main(["synth", str(data), "--domain", str(domain)]) == 2
    assert "colour" in capsys.readouterr().err

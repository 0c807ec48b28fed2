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


def test_synth_suggests_the_near_miss_of_a_misspelt_domain_column(files, capsys):
    # Issue 20: a typo in a domain key named the key but no close column.
    data, domain, _ = files
    domain.write_text(
        json.dumps({"age": {"low": 18, "high": 90}, "color": ["red", "green", "blue"]})
    )
    assert main(["synth", str(data), "--domain", str(domain)]) == 2
    err = capsys.readouterr().err
    assert "not in the CSV: ['color']" in err
    assert "did you mean 'colour'?" in err


def test_synth_gives_no_hint_when_no_column_is_close(files, capsys):
    data, domain, _ = files
    domain.write_text(
        json.dumps({"age": {"low": 18, "high": 90}, "zzz": [1], "colour": ["red"]})
    )
    assert main(["synth", str(data), "--domain", str(domain)]) == 2
    err = capsys.readouterr().err
    assert "not in the CSV: ['zzz']" in err
    assert "did you mean" not in err


def test_synth_infers_a_numeric_range_and_says_what_it_spent(files, capsys):
    data, domain, tmp = files
    domain.write_text(json.dumps({"colour": ["red", "green", "blue"]}))
    out = tmp / "out.csv"
    args = [
        "synth",
        str(data),
        "--domain",
        str(domain),
        "--epsilon",
        "3",
        "--infer-domain",
        "0.2",
        "--method",
        "tree",
        "--random-state",
        "0",
        "-o",
        str(out),
    ]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "learned numeric ranges {'age': (" in err and "0.2 of the budget" in err
    with open(out, newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    low, high = (float(v) for v in err.split("'age': (")[1].split(")")[0].split(","))
    assert 0 <= low <= 25 and 60 <= high <= 200  # ages are 20..69
    assert all(low <= float(r[0]) <= high for r in rows)


def test_synth_missing_fields(files, capsys):
    data, domain, tmp = files
    lines = data.read_text().splitlines()
    lines[1] = ",red"  # an empty age
    data.write_text("\n".join(lines) + "\n")
    assert main(["synth", str(data), "--domain", str(domain)]) == 2
    assert "missing" in capsys.readouterr().err
    out = tmp / "out.csv"
    args = [
        "synth",
        str(data),
        "--domain",
        str(domain),
        "--missing",
        "category",
        "--epsilon",
        "5",
        "--random-state",
        "0",
        "-o",
        str(out),
    ]
    assert main(args) == 0
    with open(out, newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    assert len(rows) == 300 and all(r[0] == "" or 18 <= int(r[0]) <= 90 for r in rows)


def test_synth_refuses_text_in_a_numeric_column(files, capsys):
    data, domain, _ = files
    lines = data.read_text().splitlines()
    lines[1] = "old,red"
    data.write_text("\n".join(lines) + "\n")
    assert main(["synth", str(data), "--domain", str(domain)]) == 2
    assert "'old' is not a number" in capsys.readouterr().err


def test_synth_add_remove_reports_its_relation_and_estimated_size(files, capsys):
    data, domain, tmp = files
    out = tmp / "out.csv"
    args = ["synth", str(data), "--domain", str(domain), "--epsilon", "2"]
    args += ["--neighbouring", "add-remove", "--delta", "1e-5"]
    args += ["--random-state", "0", "-o", str(out)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "(add-remove)" in err
    with open(out, newline="") as handle:
        rows = list(csv.reader(handle))
    # The size is a private estimate of the 300 rows, not the count itself.
    assert abs(len(rows) - 1 - 300) < 60
    assert main([*args[:4], "--neighbouring", "add-remove", "--method", "tree"]) == 2
    assert "add-remove" in capsys.readouterr().err


def test_synth_names_a_written_index_as_the_likely_unnamed_column(files, capsys):
    # A new user's CSV from DataFrame.to_csv() kept its index: a column ''.
    data, domain, tmp = files
    indexed = tmp / "indexed.csv"
    lines = data.read_text().splitlines()
    rows = [f",{lines[0]}"] + [f"{i},{line}" for i, line in enumerate(lines[1:])]
    indexed.write_text("\n".join(rows) + "\n")
    assert main(["synth", str(indexed), "--domain", str(domain)]) == 2
    err = capsys.readouterr().err
    assert "index=False" in err and "--infer-domain" not in err


def test_synth_prints_warnings_as_messages(files, capsys):
    # A bound much narrower than the data: DomainWarning, shown without the
    # Python source line it came from.
    data, domain, tmp = files
    domain.write_text(
        json.dumps({"age": {"low": 18, "high": 30}, "colour": ["red", "green", "blue"]})
    )
    out = tmp / "out.csv"
    args = ["synth", str(data), "--domain", str(domain), "-o", str(out)]
    assert main([*args, "--epsilon", "2", "--random-state", "0"]) == 0
    err = capsys.readouterr().err
    assert "skdp synth: DomainWarning: " in err
    assert "sys.exit" not in err and ".py:" not in err

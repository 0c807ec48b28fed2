"""DPSyntheticData on Dask: a generated Adult-like table larger than the workers.

Three steps (each a subcommand; ``all`` runs them in order):

``generate``
    Writes Adult-like rows (15 columns: 6 integer, 9 categorical, the columns
    and categories of the UCI Adult table) as Parquet files, one partition per
    file, from a seeded generator written here: each row is drawn from a chain
    of conditionals (sex, age -> education -> marital status, relationship,
    occupation -> work class, hours, income -> capital gain and loss), so the
    table has real dependence for the marginals to find. Partition ``k`` is
    drawn with the ``k``-th child of ``SeedSequence(seed)``: the same files on
    any machine.
``dask``
    Fits ``DPSyntheticData`` on ``dd.read_parquet`` of the files on a
    ``LocalCluster`` of ``--workers`` worker processes (one thread each) with
    ``--memory-limit`` per worker, in a fresh cluster per run. Reports the
    fit's wall time, the counting pass's wall time (from the scheduler's task
    stream), each worker's peak resident memory, the bytes moved between
    workers and to the client.
``memory``
    Fits the same estimator in memory (pandas) on the first ``--rows`` rows,
    in a subprocess whose private memory is capped (``RLIMIT_DATA``), and
    checks that the Dask fit of the same rows is identical (selected
    marginals, spend, sampled table). ``--rows`` may list several sizes: the
    largest that fits under the cap is reported.

    PYTHONPATH=. nice python benchmarks/bench_dask_synthetic.py all \\
        --dir /tmp/skdp_adult_like --rows 20000000 --partition-rows 500000
"""

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

EDUCATION = [
    "Preschool",
    "1st-4th",
    "5th-6th",
    "7th-8th",
    "9th",
    "10th",
    "11th",
    "12th",
    "HS-grad",
    "Some-college",
    "Assoc-voc",
    "Assoc-acdm",
    "Bachelors",
    "Masters",
    "Prof-school",
    "Doctorate",
]
#: Adult's shares of each education level (roughly).
EDUCATION_SHARE = [
    0.002,
    0.005,
    0.01,
    0.02,
    0.016,
    0.028,
    0.037,
    0.013,
    0.32,
    0.22,
    0.042,
    0.033,
    0.164,
    0.054,
    0.017,
    0.012,
]
WORKCLASS = [
    "Private",
    "Self-emp-not-inc",
    "Self-emp-inc",
    "Federal-gov",
    "Local-gov",
    "State-gov",
    "Without-pay",
    "Never-worked",
    "?",
]
MARITAL = [
    "Married-civ-spouse",
    "Never-married",
    "Divorced",
    "Separated",
    "Widowed",
    "Married-spouse-absent",
    "Married-AF-spouse",
]
OCCUPATION = [
    "Prof-specialty",
    "Craft-repair",
    "Exec-managerial",
    "Adm-clerical",
    "Sales",
    "Other-service",
    "Machine-op-inspct",
    "?",
    "Transport-moving",
    "Handlers-cleaners",
    "Farming-fishing",
    "Tech-support",
    "Protective-serv",
    "Priv-house-serv",
    "Armed-Forces",
]
RELATIONSHIP = [
    "Husband",
    "Not-in-family",
    "Own-child",
    "Unmarried",
    "Wife",
    "Other-relative",
]
RACE = ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]
RACE_SHARE = [0.855, 0.096, 0.031, 0.01, 0.008]
COUNTRY = [
    "United-States",
    "Mexico",
    "?",
    "Philippines",
    "Germany",
    "Puerto-Rico",
    "Canada",
    "El-Salvador",
    "India",
    "Cuba",
    "England",
    "China",
    "South",
    "Jamaica",
    "Italy",
    "Dominican-Republic",
    "Japan",
    "Guatemala",
    "Poland",
    "Vietnam",
    "Columbia",
    "Haiti",
    "Portugal",
    "Taiwan",
    "Iran",
    "Greece",
    "Nicaragua",
    "Peru",
    "Ecuador",
    "France",
    "Ireland",
    "Hong",
    "Thailand",
    "Cambodia",
    "Trinadad&Tobago",
    "Laos",
    "Outlying-US(Guam-USVI-etc)",
    "Yugoslavia",
    "Scotland",
    "Honduras",
    "Hungary",
    "Holand-Netherlands",
]

#: The declared (public) domain: integer ranges and category lists.
DOMAIN = {
    "age": (17, 90),
    "workclass": WORKCLASS,
    "fnlwgt": (12285, 1490400),
    "education": EDUCATION,
    "education-num": (1, 16),
    "marital-status": MARITAL,
    "occupation": OCCUPATION,
    "relationship": RELATIONSHIP,
    "race": RACE,
    "sex": ["Male", "Female"],
    "capital-gain": (0, 99999),
    "capital-loss": (0, 4356),
    "hours-per-week": (1, 99),
    "native-country": COUNTRY,
    "income": ["<=50K", ">50K"],
}


def _draw(rng, probs):
    """One category index per row from per-row probabilities (n x k)."""
    probs = probs / probs.sum(axis=1, keepdims=True)
    u = rng.random(probs.shape[0])[:, None]
    return np.minimum((np.cumsum(probs, axis=1) < u).sum(axis=1), probs.shape[1] - 1)


def adult_like(n, rng):
    """``n`` Adult-like rows as a pandas DataFrame (columns of DOMAIN)."""
    import pandas as pd

    male = rng.random(n) < 0.67
    age = np.clip(np.round(17 + rng.gamma(3.0, 7.0, n)), 17, 90).astype(np.int64)
    young = age < 25
    base = np.log(np.asarray(EDUCATION_SHARE))
    level = np.arange(len(EDUCATION))
    shift = np.where(young, -0.25, 0.05)[:, None] * np.clip(level - 8, 0, None)
    education = _draw(rng, np.exp(base[None, :] + shift))
    married = rng.random(n) < np.clip(0.05 + 0.012 * (age - 17), 0, 0.62)
    other_status = 1 + _draw(
        rng, np.tile([0.55, 0.23, 0.05, 0.05, 0.02, 0.001], (n, 1))
    )
    marital = np.where(married, 0, other_status)
    marital[(marital == 1) & (age > 45) & (rng.random(n) < 0.5)] = 2
    relationship = np.where(
        married,
        np.where(male, 0, 4),
        np.where(young, 2, _draw(rng, np.tile([0, 0.55, 0.1, 0.3, 0, 0.05], (n, 1)))),
    )
    skilled = np.clip(education - 7, 0, None)
    occupation_logits = np.zeros((n, len(OCCUPATION)))
    occupation_logits[:, 0] += 0.6 * skilled  # professional
    occupation_logits[:, 2] += 0.45 * skilled  # managerial
    occupation_logits[:, 11] += 0.2 * skilled
    occupation_logits[:, 1] += np.where(male, 1.2, -1.0)  # craft
    occupation_logits[:, 3] += np.where(male, -0.6, 1.0)  # clerical
    occupation_logits[:, 13] += np.where(male, -3.0, 0.0)
    occupation_logits[:, 14] -= 4.0
    occupation_logits[:, 7] -= 1.0
    occupation = _draw(rng, np.exp(occupation_logits))
    workclass = _draw(
        rng, np.tile([0.74, 0.08, 0.035, 0.03, 0.065, 0.04, 0.001, 0.001, 0.0], (n, 1))
    )
    workclass[occupation == 7] = 8  # unknown occupation, unknown work class
    hours = np.clip(
        np.round(rng.normal(36 + 5 * male - 10 * young + skilled, 11)), 1, 99
    ).astype(np.int64)
    race = _draw(rng, np.tile(RACE_SHARE, (n, 1)))
    abroad = rng.random(n) < np.where(race == 0, 0.06, 0.3)
    country = np.where(abroad, 1 + _draw(rng, np.ones((n, len(COUNTRY) - 1))), 0)
    score = (
        -8.2
        + 0.33 * (education + 1)
        + 0.035 * np.minimum(age, 60)
        + 0.03 * hours
        + 1.3 * married
        + 0.3 * male
    )
    rich = rng.random(n) < 1.0 / (1.0 + np.exp(-score))
    gain = np.where(
        rng.random(n) < np.where(rich, 0.2, 0.04),
        np.clip(np.round(rng.lognormal(8.3 + 0.8 * rich, 0.9, n)), 1, 99999),
        0,
    ).astype(np.int64)
    loss = np.where(
        rng.random(n) < np.where(rich, 0.1, 0.03),
        np.clip(np.round(rng.normal(1900, 300, n)), 1, 4356),
        0,
    ).astype(np.int64)
    fnlwgt = np.clip(
        np.round(rng.lognormal(12.0 + 0.15 * (race == 1), 0.5, n)), 12285, 1490400
    ).astype(np.int64)
    pick = np.asarray
    return pd.DataFrame(
        {
            "age": age,
            "workclass": pick(WORKCLASS)[workclass],
            "fnlwgt": fnlwgt,
            "education": pick(EDUCATION)[education],
            "education-num": education + 1,
            "marital-status": pick(MARITAL)[marital],
            "occupation": pick(OCCUPATION)[occupation],
            "relationship": pick(RELATIONSHIP)[relationship],
            "race": pick(RACE)[race],
            "sex": np.where(male, "Male", "Female"),
            "capital-gain": gain,
            "capital-loss": loss,
            "hours-per-week": hours,
            "native-country": pick(COUNTRY)[country],
            "income": np.where(rich, ">50K", "<=50K"),
        }
    )


def generate(directory, rows, partition_rows, seed):
    """Write ``rows`` rows as Parquet files of ``partition_rows`` rows each."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    n_parts = -(-rows // partition_rows)
    children = np.random.SeedSequence(seed).spawn(n_parts)
    start = time.perf_counter()
    for k, child in enumerate(children):
        n = min(partition_rows, rows - k * partition_rows)
        frame = adult_like(n, np.random.default_rng(child))
        frame.to_parquet(directory / f"part-{k:05d}.parquet", index=False)
    size = sum(f.stat().st_size for f in directory.glob("*.parquet"))
    return {
        "rows": rows,
        "files": n_parts,
        "MiB on disk": size / 2**20,
        "seconds": time.perf_counter() - start,
    }


def _files(directory, n_files=None):
    files = sorted(str(f) for f in Path(directory).glob("part-*.parquet"))
    return files if n_files is None else files[:n_files]


def _estimator(method, epsilon):
    from skdp.synthetic import DPSyntheticData

    return DPSyntheticData(
        domain=DOMAIN, epsilon=epsilon, method=method, random_state=0
    )


def _fingerprint(model):
    """What the fit released: its choices, spend and a sampled table's digest."""
    table = model.sample(100_000)
    return {
        "selected": [list(map(str, s)) for s in model.selected_],
        "epsilon": model.privacy_spent_.epsilon,
        "n": model.n_samples_fit_,
        "table": hashlib.sha256(table.to_csv().encode()).hexdigest()[:16],
    }


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _worker_stats(dask_worker):
    return {
        "peak MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "sent": dask_worker.transfer_outgoing_bytes_total,
        "received": sum(d["total"] for d in dask_worker.transfer_incoming_log),
    }


def _counted_bytes(model):
    """Bytes of the count tables the client receives (int64 cells)."""
    from skdp.synthetic._methods import METHODS

    sizes = [spec.n_levels for spec in model.columns_]
    keys = list(model.domain_)
    workload = model.workload if isinstance(model.workload, str) else None
    method = METHODS[model.method].from_estimator(model, workload)
    sets = method.count_sets(len(keys))
    return 8 * sum(int(np.prod([sizes[v] for v in s])) for s in sets)


def fit_on_cluster(
    directory, workers, memory_limit, method, epsilon, n_files=None, write=None
):
    """One Dask fit on a fresh LocalCluster; its figures and fingerprint.

    ``write``: a directory the synthetic table (as many rows and partitions as
    the input) is then written to as Parquet, partition by partition.
    """
    import dask.dataframe as dd
    from distributed import Client, LocalCluster, get_task_stream

    files = _files(directory, n_files)
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        frame = dd.read_parquet(files)
        model = _estimator(method, epsilon)
        start = time.perf_counter()
        with get_task_stream(client) as stream:
            model.fit(frame)
        wall = time.perf_counter() - start
        spans = [
            (s["start"], s["stop"])
            for task in stream.data
            for s in task["startstops"]
            if s["action"] == "compute"
        ]
        stats = client.run(_worker_stats)
        load = os.getloadavg()[0]
        written = {}
        if write is not None:
            start = time.perf_counter()
            synthetic = model.sample(npartitions=len(files))
            synthetic.to_parquet(write, write_index=False)
            written = {
                "write s": time.perf_counter() - start,
                "worker peak MiB after write": sorted(
                    round(s["peak MiB"]) for s in client.run(_worker_stats).values()
                ),
                "written rows": len(dd.read_parquet(write)),
            }
    pass_wall = max(stop for _, stop in spans) - min(start for start, _ in spans)
    return {
        "workers": workers,
        "memory limit": memory_limit,
        "files": len(files),
        "tasks": len(stream.data),
        "fit s": wall,
        "pass s": pass_wall,
        "solver s": wall - pass_wall,
        # Summed over tasks: the pass's wall time on one uncontended worker.
        "task s": sum(stop - start for start, stop in spans),
        "load": load,
        "worker peak MiB": sorted(round(s["peak MiB"]) for s in stats.values()),
        # Workers receive only from workers; what they send beyond that went to
        # the client (the total of the counts).
        "between workers B": sum(s["received"] for s in stats.values()),
        "workers sent B": sum(s["sent"] for s in stats.values()),
        "to client B": _counted_bytes(model),
        "client peak MiB": _peak_rss_mib(),
        "fingerprint": _fingerprint(model),
        **written,
    }


def fit_in_memory(directory, n_files, method, epsilon):
    """One in-memory fit of the first ``n_files`` files (run in a subprocess)."""
    import pandas as pd

    start = time.perf_counter()
    frame = pd.concat(
        [pd.read_parquet(f) for f in _files(directory, n_files)], ignore_index=True
    )
    read = time.perf_counter() - start
    model = _estimator(method, epsilon)
    start = time.perf_counter()
    model.fit(frame)
    return {
        "rows": len(frame),
        "read s": read,
        "fit s": time.perf_counter() - start,
        "peak MiB": _peak_rss_mib(),
        "fingerprint": _fingerprint(model),
    }


def capped_call(module, call, cap_mib):
    """``module.call`` (a call's source) in a subprocess capped at ``cap_mib``.

    The cap is on private memory (``RLIMIT_DATA``; 0: none); the call must
    return a JSON-serialisable value. Returns it, or ``{"error": last line
    of stderr}`` if the subprocess failed (for example out of memory).
    """
    code = (
        "import json, resource, sys\n"
        f"cap = {int(cap_mib)} * 2**20\n"
        "if cap:\n"
        "    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))\n"
        "sys.path.insert(0, 'benchmarks')\n"
        f"import {module}\n"
        f"print(json.dumps({module}.{call}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ
    )
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last}
    return json.loads(out.stdout.strip().splitlines()[-1])


def in_memory_subprocess(directory, n_files, method, epsilon, cap_mib):
    """:func:`fit_in_memory` in a subprocess capped at ``cap_mib`` private MiB.

    ``cap_mib`` 0: no cap.
    """
    call = f"fit_in_memory({str(directory)!r}, {n_files}, {method!r}, {epsilon})"
    return capped_call("bench_dask_synthetic", call, cap_mib)


def _print_dask(rows):
    print(
        f"{'workers':>7} {'limit':>6} {'rows':>11} {'fit s':>7} {'pass s':>7} "
        f"{'task s':>7} {'solver s':>8} {'worker peak MiB':>16} "
        f"{'between workers':>16} {'workers sent':>12} {'tables':>8} "
        f"{'client MiB':>10} {'load':>5}"
    )
    for r in rows:
        print(
            f"{r['workers']:>7} {r['memory limit']:>6} {r['fingerprint']['n']:>11,} "
            f"{r['fit s']:>7.1f} {r['pass s']:>7.1f} {r['task s']:>7.1f} "
            f"{r['solver s']:>8.1f} "
            f"{str(r['worker peak MiB']):>16} {r['between workers B']:>16,} "
            f"{r['workers sent B']:>12,} {r['to client B']:>8,} "
            f"{r['client peak MiB']:>10.0f} {r['load']:>5.1f}"
        )
        if "write s" in r:
            print(
                f"{'':>7} wrote {r['written rows']:,} rows in {r['write s']:.1f} s; "
                f"worker peak MiB then {r['worker peak MiB after write']}"
            )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["generate", "dask", "memory", "all"])
    parser.add_argument("--dir", default="/tmp/skdp_adult_like")
    parser.add_argument("--rows", type=int, nargs="+", default=[20_000_000])
    parser.add_argument("--partition-rows", type=int, default=500_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--memory-limit", default="1GiB")
    parser.add_argument("--method", default="aim", choices=["aim", "tree"])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument(
        "--cap-mib",
        type=int,
        default=2048,
        help="in-memory fit's RLIMIT_DATA (0: none)",
    )
    parser.add_argument(
        "--files", type=int, default=None, help="dask step: fit the first files only"
    )
    parser.add_argument(
        "--write", help="dask step: then write the synthetic table here (Parquet)"
    )
    parser.add_argument("--json", help="append every result to this file")
    args = parser.parse_args(argv)
    results = []
    if args.step in ("generate", "all"):
        made = generate(args.dir, max(args.rows), args.partition_rows, args.seed)
        print("generated", json.dumps(made))
        results.append({"generate": made})
    if args.step in ("dask", "all"):
        rows = []
        for workers in args.workers:
            rows.append(
                fit_on_cluster(
                    args.dir,
                    workers,
                    args.memory_limit,
                    args.method,
                    args.epsilon,
                    args.files,
                    None if args.write is None else f"{args.write}-{workers}",
                )
            )
            print(json.dumps(rows[-1]), flush=True)
        _print_dask(rows)
        results.append({"dask": rows})
    if args.step in ("memory", "all"):
        checks = []
        for n_rows in sorted(args.rows):
            n_files = -(-n_rows // args.partition_rows)
            local = in_memory_subprocess(
                args.dir, n_files, args.method, args.epsilon, args.cap_mib
            )
            entry = {"files": n_files, "memory": local}
            if "error" not in local:
                remote = fit_on_cluster(
                    args.dir, 2, args.memory_limit, args.method, args.epsilon, n_files
                )
                entry["dask"] = remote
                entry["identical"] = remote["fingerprint"] == local["fingerprint"]
            print(json.dumps(entry), flush=True)
            checks.append(entry)
        print(
            f"\nin memory, RLIMIT_DATA {args.cap_mib or 'unlimited'} MiB, against "
            "Dask on 2 workers "
            f"of {args.memory_limit}:"
        )
        print(
            f"{'rows':>11} {'read s':>7} {'fit s':>7} {'peak MiB':>9} "
            f"{'dask fit s':>10} {'identical':>9}"
        )
        for c in checks:
            m = c["memory"]
            if "error" in m:
                print(f"{c['files'] * args.partition_rows:>11,} failed: {m['error']}")
                continue
            d = c["dask"]
            print(
                f"{m['rows']:>11,} {m['read s']:>7.1f} {m['fit s']:>7.1f} "
                f"{m['peak MiB']:>9.0f} {d['fit s']:>10.1f} {str(c['identical']):>9}"
            )
        results.append({"memory": checks})
    if args.json:
        with open(args.json, "a") as handle:
            handle.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()

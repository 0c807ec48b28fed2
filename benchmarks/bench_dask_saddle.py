"""DPSaddlePointClassifier on Dask: worst-group fairness on a partitioned table.

The table is that of ``bench_dask_synthetic.py`` (its ``generate`` step
writes the Parquet files: Adult-like rows, 15 columns, 500,000 rows a
file). Each partition is encoded where it is read by the schema encoder of
``bench_dask_logistic.py`` (7 numeric features, float32), with the label
``income`` and the group, ``race`` (5 groups, the smallest under 1% of
the rows), as codes in the same array.

``dask``
    Fits ``DPSaddlePointClassifier`` (``--solver``, ``--n-iter`` steps) on
    ``dd.read_parquet`` of the first ``--rows`` rows, on a fresh
    ``LocalCluster`` of ``--workers`` processes (one thread each,
    ``--memory-limit`` each, spilling off). Reports the fit's wall time, the
    time of the pass that reads, encodes, checks and holds the partitions
    (Dask may read several files into one partition),
    the time per step, each worker's peak resident memory, the bytes the
    workers received from each other, and the bytes of the questions and
    answers between the client and the workers (the arrays' bytes, without
    pickling overhead).
``memory``
    The same fit in memory on the first ``--rows`` rows (read file by file
    into one float32 matrix), in a subprocess whose private memory is
    capped (``RLIMIT_DATA``; ``--cap-mib 0``: none).

``--json`` appends the results; ``compare`` then prints the largest
relative difference of each Dask fit's coefficients from the in-memory fit
of the same rows and solver.

    PYTHONPATH=. nice python benchmarks/bench_dask_synthetic.py generate \\
        --rows 4000000
    PYTHONPATH=. nice python benchmarks/bench_dask_saddle.py dask \\
        --rows 4000000 --workers 2 --json /tmp/saddle.json
    PYTHONPATH=. nice python benchmarks/bench_dask_saddle.py memory \\
        --rows 4000000 --json /tmp/saddle.json
    PYTHONPATH=. python benchmarks/bench_dask_saddle.py compare \\
        --json /tmp/saddle.json
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from bench_dask_logistic import (  # noqa: E402
    CLASSES,
    FEATURES,
    _encoder,
    _files,
    _peak_rss_mib,
    _worker_stats,
    cluster_figures,
    holding_cluster,
)
from bench_dask_synthetic import DOMAIN, capped_call  # noqa: E402

#: The sensitive feature: its declared levels, coded 0..K-1 in the array.
GROUP = "race"
GROUPS = [float(k) for k in range(len(DOMAIN[GROUP]))]
WIDTH = 7  # the encoder's features


def _encode(frame, encoder):
    """A partition's features, its label (1.0 for >50K) and group code: float32."""
    out = np.empty((len(frame), WIDTH + 2), dtype=np.float32)
    out[:, :WIDTH] = encoder.transform(frame[FEATURES])
    out[:, WIDTH] = frame["income"].to_numpy(dtype=object) == CLASSES[1]
    levels = {level: k for k, level in enumerate(DOMAIN[GROUP])}
    out[:, WIDTH + 1] = frame[GROUP].map(levels).to_numpy(dtype=np.float32)
    return out


def _estimator(solver, n_iter, encoder):
    from skdp.fairness import DPSaddlePointClassifier

    return DPSaddlePointClassifier(
        epsilon=1.0,
        delta=1e-9,
        solver=solver,
        n_iter=n_iter,
        groups=GROUPS,
        classes=[0.0, 1.0],
        row_norm=encoder.row_norm_,
        random_state=0,
    )


class _Traffic:
    """Times the holding pass and the steps; counts the bytes of the sums."""

    def __init__(self):
        from skdp._solvers._sgd import _dask
        from skdp.fairness import _saddle

        self.hold_s = self.step_s = 0.0
        self.steps = self.sent = self.received = self.partitions = 0
        hold = _saddle.held_saddle_rows
        ask, ask_sum = _dask.HeldRows.ask, _dask.HeldRows.ask_sum
        traffic = self

        def timed_hold(*args, **kwargs):
            start = time.perf_counter()
            rows = hold(*args, **kwargs)
            traffic.hold_s = time.perf_counter() - start
            traffic.partitions = len(rows.held.parts)
            return rows

        def counted_ask(held, function, questions):
            answers = ask(held, function, questions)
            traffic.received += sum(_nbytes(a) for a in answers)
            return answers

        def counted_ask_sum(held, function, questions):
            start = time.perf_counter()
            total = ask_sum(held, function, questions)
            traffic.step_s += time.perf_counter() - start
            traffic.steps += 1
            traffic.sent += sum(_nbytes(args) for _, args in questions)
            workers = {held.workers[k] for k, _ in questions} if held.workers else {0}
            traffic.received += total.nbytes * len(workers)
            return total

        _saddle.held_saddle_rows = timed_hold
        _dask.HeldRows.ask = counted_ask
        _dask.HeldRows.ask_sum = counted_ask_sum


def _nbytes(value):
    """Bytes of the arrays (and scalars) in a question or an answer."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return sum(_nbytes(getattr(value, f)) for f in value.__dataclass_fields__)
    return 8


def fit_on_cluster(directory, rows, workers, memory_limit, solver, n_iter):
    """One Dask fit on a fresh LocalCluster; its figures and coefficients."""
    import dask.dataframe as dd

    files = _files(directory, rows)
    traffic = _Traffic()
    with holding_cluster(workers, memory_limit) as client:
        frame = dd.read_parquet(files, columns=[*FEATURES, "income", GROUP])
        encoder = _encoder()
        meta = np.empty((0, WIDTH + 2), np.float32)
        table = frame.map_partitions(_encode, encoder, meta=meta)
        X, y, g = table[:, :WIDTH], table[:, WIDTH], table[:, WIDTH + 1]
        model = _estimator(solver, n_iter, encoder)
        start = time.perf_counter()
        model.fit(X, y, sensitive_features=g)
        wall = time.perf_counter() - start
        stats = client.run(_worker_stats)
        load = os.getloadavg()[0]
    return {
        "step": "dask",
        "solver": solver,
        "n_iter": n_iter,
        "rows": rows,
        "workers": workers,
        "memory limit": memory_limit,
        "files": len(files),
        "partitions": traffic.partitions,
        **cluster_figures(traffic, wall, stats, load, model),
    }


def fit_in_memory(directory, rows, solver, n_iter):
    """The same fit in memory on the first ``rows`` rows (run in a subprocess)."""
    import pandas as pd

    encoder = _encoder()
    start = time.perf_counter()
    table = np.empty((rows, WIDTH + 2), dtype=np.float32)
    at = 0
    for f in _files(directory, rows):
        frame = pd.read_parquet(f, columns=[*FEATURES, "income", GROUP])
        table[at : at + len(frame)] = _encode(frame, encoder)
        at += len(frame)
    read = time.perf_counter() - start
    X, y, g = table[:, :WIDTH], table[:, WIDTH], table[:, WIDTH + 1]
    model = _estimator(solver, n_iter, encoder)
    start = time.perf_counter()
    model.fit(X, y, sensitive_features=g)
    return {
        "step": "memory",
        "solver": solver,
        "n_iter": n_iter,
        "rows": rows,
        "read s": read,
        "fit s": time.perf_counter() - start,
        "peak MiB": _peak_rss_mib(),
        "load": os.getloadavg()[0],
        "epsilon": model.privacy_spent_.epsilon,
        "coef": model.coef_.ravel().tolist() + model.intercept_.tolist(),
    }


def in_memory_subprocess(directory, rows, solver, n_iter, cap_mib):
    """:func:`fit_in_memory` in a subprocess capped at ``cap_mib`` MiB (0: none)."""
    call = f"fit_in_memory({str(directory)!r}, {rows}, {solver!r}, {n_iter})"
    result = capped_call("bench_dask_saddle", call, cap_mib)
    return {"rows": rows, "solver": solver, **result} if "error" in result else result


def compare(path):
    """The largest relative coefficient difference of each Dask fit from memory."""
    results = [r for line in open(path) for r in json.loads(line)]
    memory = {
        (r["solver"], r["n_iter"], r["rows"]): r
        for r in results
        if r.get("step") == "memory" and "coef" in r
    }
    for r in results:
        key = (r.get("solver"), r.get("n_iter"), r["rows"])
        if r.get("step") != "dask" or key not in memory:
            continue
        a, b = np.array(memory[key]["coef"]), np.array(r["coef"])
        diff = np.max(np.abs(a - b) / np.maximum(np.abs(a), 1e-300))
        same = memory[key]["epsilon"] == r["epsilon"]
        print(
            f"{r['solver']:>6} {r['rows']:>11,} workers {r['workers']}: largest "
            f"relative difference {diff:.1e}, same epsilon: {same}"
        )


def _print(rows):
    print(
        f"{'solver':>6} {'workers':>7} {'rows':>11} {'fit s':>7} {'hold s':>7} "
        f"{'steps':>6} {'ms/step':>8} {'rest s':>7} {'worker peak MiB':>16} "
        f"{'between workers':>15} {'to workers':>11} {'to client':>10} "
        f"{'client MiB':>10} {'load':>5}"
    )
    for r in rows:
        print(
            f"{r['solver']:>6} {r['workers']:>7} {r['rows']:>11,} "
            f"{r['fit s']:>7.1f} {r['hold s']:>7.1f} {r['steps']:>6} "
            f"{r['ms per step']:>8.1f} {r['rest s']:>7.1f} "
            f"{str(r['worker peak MiB']):>16} {r['between workers B']:>15,} "
            f"{r['client to workers B']:>11,} {r['workers to client B']:>10,} "
            f"{r['client peak MiB']:>10.0f} {r['load']:>5.1f}"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["dask", "memory", "compare"])
    parser.add_argument("--dir", default="/tmp/skdp_adult_like")
    parser.add_argument("--rows", type=int, nargs="+", default=[4_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("--memory-limit", default="1.5GiB")
    parser.add_argument("--solver", nargs="+", default=["gda", "mirror"])
    parser.add_argument("--n-iter", type=int, default=200)
    parser.add_argument("--cap-mib", type=int, default=0)
    parser.add_argument("--json", help="append every result to this file")
    args = parser.parse_args(argv)
    if args.step == "compare":
        compare(args.json)
        return
    results = []
    for rows in args.rows:
        for solver in args.solver:
            if args.step == "memory":
                r = in_memory_subprocess(
                    args.dir, rows, solver, args.n_iter, args.cap_mib
                )
                print(json.dumps(r), flush=True)
                results.append(r)
                continue
            for workers in args.workers:
                r = fit_on_cluster(
                    args.dir, rows, workers, args.memory_limit, solver, args.n_iter
                )
                print(json.dumps(r), flush=True)
                results.append(r)
    if args.step == "dask":
        _print(results)
    if args.json:
        with open(args.json, "a") as handle:
            handle.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()

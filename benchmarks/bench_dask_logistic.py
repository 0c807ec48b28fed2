"""DPLogisticRegression on Dask: an Adult-like table larger than one worker.

The table is that of ``bench_dask_synthetic.py`` (its ``generate`` step
writes the Parquet files: Adult-like rows, 15 columns, 500,000 rows a
file). Each partition is encoded where it is read by a
:class:`~skdp.preprocessing.SchemaEncoder` on a public schema of 7 numeric
features (5 numeric columns scaled to [-1, 1], ``sex`` one-hot) as float32,
with the label ``income`` (1.0 for ``">50K"``) in the same array.

``dask``
    Fits ``DPLogisticRegression`` (Poisson batches, the probability floor
    on) on ``dd.read_parquet`` of the first ``--rows`` rows, on a fresh
    ``LocalCluster`` of ``--workers`` processes (one thread each,
    ``--memory-limit`` each). Reports the fit's wall time, the time of the
    pass that reads, encodes, holds and checks the partitions, the time per
    step, each worker's peak resident memory, the bytes the workers received
    from each other and the bytes of the questions and answers between the
    client and the workers.
``latency``
    The round trip a step pays on an otherwise empty ``LocalCluster`` of
    ``--workers`` processes: one small task per worker (the 8-float model
    in, an 8-float sum out), gathered on the client, ``--repeats`` times;
    best and median, with the load average before and after.
``memory``
    The same fit in memory on the first ``--rows`` rows (read file by file
    into one float32 matrix), in a subprocess whose private memory is capped
    (``RLIMIT_DATA``), and its largest difference from the Dask fit's
    coefficients.

    PYTHONPATH=. nice python benchmarks/bench_dask_synthetic.py generate \\
        --rows 20000000
    PYTHONPATH=. nice python benchmarks/bench_dask_logistic.py dask \\
        --rows 20000000 --workers 1 2
"""

import argparse
import contextlib
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from bench_dask_synthetic import DOMAIN, capped_call  # noqa: E402

#: The public schema of the features: scaled numeric columns and ``sex``.
FEATURES = [
    "age",
    "education-num",
    "hours-per-week",
    "capital-gain",
    "capital-loss",
    "sex",
]
CLASSES = DOMAIN["income"]
#: The label as the fit reads it: 1.0 for CLASSES[1].
LABELS = [0.0, 1.0]
PARTITION_ROWS = 500_000


def _encoder():
    from skdp.preprocessing import SchemaEncoder
    from skdp.schema import TableSchema

    schema = TableSchema({name: DOMAIN[name] for name in FEATURES})
    return SchemaEncoder(schema).fit()


def _encode(frame, encoder):
    """A partition's design matrix and, last, its label (1.0 for >50K): float32.

    One array for both, so that the features and the labels come from the
    same partitions (Dask may lay out a read of the label column alone
    differently, which costs a pass to align).
    """
    out = np.empty((len(frame), len(FEATURES) + 2), dtype=np.float32)
    out[:, :-1] = encoder.transform(frame[FEATURES])
    out[:, -1] = frame["income"].to_numpy(dtype=object) == CLASSES[1]
    return out


def _estimator(batch_size, epochs, encoder):
    from skdp import DPLogisticRegression

    return DPLogisticRegression(
        epsilon=1.0,
        delta=1e-9,
        batch_sampling="poisson",
        batch_size=batch_size,
        epochs=epochs,
        row_norm=encoder.row_norm_,
        classes=LABELS,
        random_state=0,
    )


def _files(directory, rows):
    files = sorted(str(f) for f in Path(directory).glob("part-*.parquet"))
    return files[: -(-rows // PARTITION_ROWS)]


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _worker_stats(dask_worker):
    return {
        "peak MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "received": sum(d["total"] for d in dask_worker.transfer_incoming_log),
    }


class _Timing:
    """Times the holding pass and the steps from the client (no data read)."""

    def __init__(self):
        from skdp._solvers._sgd import _dask
        from skdp.linear_model import _dask as shell

        self.hold_s = self.step_s = 0.0
        self.steps = self.sent = self.received = 0
        hold, gradient = _dask.hold_rows, _dask.HeldRows.gradient
        timing = self

        def timed_hold(*args):
            start = time.perf_counter()
            held = hold(*args)
            timing.hold_s = time.perf_counter() - start
            return held

        def timed_gradient(held, router, row_norm):
            inner = gradient(held, router, row_norm)

            def step(W, index, loss):
                start = time.perf_counter()
                rows = router.rows_of(index)
                total = inner(W, index, loss)
                timing.step_s += time.perf_counter() - start
                timing.steps += 1
                parts = sum(1 for _ in router.split(rows))
                workers = len({held.workers[k] for k, _ in router.split(rows)})
                timing.sent += 8 * rows.size + W.nbytes * parts
                timing.received += W.nbytes * workers
                return total

            return step

        shell.hold_rows = timed_hold
        _dask.HeldRows.gradient = timed_gradient


@contextlib.contextmanager
def holding_cluster(workers, memory_limit):
    """A fresh LocalCluster for fits that hold their partitions; its client.

    Held partitions are read at every step: never spilled to disk, and a
    worker is not paused for holding them (it would stall every step). One
    thread per worker process.
    """
    import dask
    from distributed import Client, LocalCluster

    config = {
        "distributed.worker.memory.target": False,
        "distributed.worker.memory.spill": False,
        "distributed.worker.memory.pause": False,
    }
    with (
        dask.config.set(config),
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def cluster_figures(timing, wall, stats, load, model):
    """The figures of one fit on a cluster, from its timing and workers' stats.

    ``timing`` has the hold pass's and the steps' seconds, the number of
    steps and the bytes sent to and received from the workers.
    """
    return {
        "fit s": wall,
        "hold s": timing.hold_s,
        "steps": timing.steps,
        "ms per step": 1000 * timing.step_s / max(timing.steps, 1),
        "rest s": wall - timing.hold_s - timing.step_s,
        "worker peak MiB": sorted(round(s["peak MiB"]) for s in stats.values()),
        "between workers B": sum(s["received"] for s in stats.values()),
        "client to workers B": timing.sent,
        "workers to client B": timing.received,
        "client peak MiB": _peak_rss_mib(),
        "load": load,
        "epsilon": model.privacy_spent_.epsilon,
        "coef": model.coef_.ravel().tolist() + model.intercept_.tolist(),
    }


def fit_on_cluster(directory, rows, workers, memory_limit, batch_size, epochs):
    """One Dask fit on a fresh LocalCluster; its figures and coefficients."""
    import dask.dataframe as dd

    files = _files(directory, rows)
    timing = _Timing()
    with holding_cluster(workers, memory_limit) as client:
        frame = dd.read_parquet(files, columns=FEATURES + ["income"])
        encoder = _encoder()
        Xy = frame.map_partitions(_encode, encoder, meta=np.empty((0, 8), np.float32))
        X, y = Xy[:, :-1], Xy[:, -1]
        model = _estimator(batch_size, epochs, encoder)
        start = time.perf_counter()
        model.fit(X, y)
        wall = time.perf_counter() - start
        stats = client.run(_worker_stats)
        load = os.getloadavg()[0]
    return {
        "rows": rows,
        "workers": workers,
        "memory limit": memory_limit,
        "partitions": len(files),
        **cluster_figures(timing, wall, stats, load, model),
    }


def _step_answer(model):
    """A worker's answer to a step's question, without the arithmetic."""
    return model + 1.0


def step_latency(workers, repeats):
    """Best and median seconds of a step's round trip on an idle cluster."""
    from distributed import Client, LocalCluster

    load_before = os.getloadavg()[0]
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        client.wait_for_workers(workers)
        addresses = sorted(client.scheduler_info()["workers"])
        model = np.zeros(8)
        times = []
        for _ in range(repeats + 5):  # the first five warm the connections
            start = time.perf_counter()
            futures = [
                client.submit(_step_answer, model, workers=[a], pure=False)
                for a in addresses
            ]
            sum(client.gather(futures))
            times.append(time.perf_counter() - start)
    times = np.array(times[5:])
    return {
        "workers": workers,
        "repeats": repeats,
        "best ms": round(1e3 * times.min(), 2),
        "median ms": round(1e3 * float(np.median(times)), 2),
        "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def fit_in_memory(directory, rows, batch_size, epochs):
    """The same fit in memory on the first ``rows`` rows (run in a subprocess)."""
    import pandas as pd

    encoder = _encoder()
    files = _files(directory, rows)
    start = time.perf_counter()
    X = np.empty((rows, 7), dtype=np.float32)
    y = np.empty(rows, dtype=np.float32)
    at = 0
    for f in files:
        frame = pd.read_parquet(f, columns=FEATURES + ["income"])
        block = _encode(frame, encoder)
        X[at : at + len(frame)], y[at : at + len(frame)] = block[:, :-1], block[:, -1]
        at += len(frame)
    read = time.perf_counter() - start
    model = _estimator(batch_size, epochs, encoder)
    start = time.perf_counter()
    model.fit(X, y)
    return {
        "rows": rows,
        "read s": read,
        "fit s": time.perf_counter() - start,
        "peak MiB": _peak_rss_mib(),
        "coef": model.coef_.ravel().tolist() + model.intercept_.tolist(),
    }


def in_memory_subprocess(directory, rows, batch_size, epochs, cap_mib):
    """:func:`fit_in_memory` in a subprocess capped at ``cap_mib`` MiB (0: none)."""
    call = f"fit_in_memory({str(directory)!r}, {rows}, {batch_size}, {epochs})"
    result = capped_call("bench_dask_logistic", call, cap_mib)
    return {"rows": rows, **result} if "error" in result else result


def _print(rows):
    print(
        f"{'workers':>7} {'limit':>6} {'rows':>11} {'fit s':>7} {'hold s':>7} "
        f"{'steps':>6} {'ms/step':>8} {'rest s':>7} {'worker peak MiB':>16} "
        f"{'between workers':>15} {'to workers':>11} {'to client':>10} "
        f"{'client MiB':>10} {'load':>5}"
    )
    for r in rows:
        print(
            f"{r['workers']:>7} {r['memory limit']:>6} {r['rows']:>11,} "
            f"{r['fit s']:>7.1f} {r['hold s']:>7.1f} {r['steps']:>6} "
            f"{r['ms per step']:>8.1f} {r['rest s']:>7.1f} "
            f"{str(r['worker peak MiB']):>16} {r['between workers B']:>15,} "
            f"{r['client to workers B']:>11,} {r['workers to client B']:>10,} "
            f"{r['client peak MiB']:>10.0f} {r['load']:>5.1f}"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["dask", "memory", "latency"])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--dir", default="/tmp/skdp_adult_like")
    parser.add_argument("--rows", type=int, nargs="+", default=[20_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--memory-limit", default="1GiB")
    parser.add_argument("--batch-size", type=int, default=65536)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--cap-mib", type=int, default=2048)
    parser.add_argument("--json", help="append every result to this file")
    args = parser.parse_args(argv)
    results = []
    if args.step == "dask":
        for rows in args.rows:
            for workers in args.workers:
                r = fit_on_cluster(
                    args.dir,
                    rows,
                    workers,
                    args.memory_limit,
                    args.batch_size,
                    args.epochs,
                )
                print(json.dumps(r), flush=True)
                results.append(r)
        _print(results)
    elif args.step == "latency":
        for workers in args.workers:
            r = step_latency(workers, args.repeats)
            print(json.dumps(r), flush=True)
            results.append(r)
    else:
        for rows in args.rows:
            r = in_memory_subprocess(
                args.dir, rows, args.batch_size, args.epochs, args.cap_mib
            )
            print(json.dumps(r), flush=True)
            results.append(r)
    if args.json:
        with open(args.json, "a") as handle:
            handle.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()

"""Larger than memory: DPLogisticRegression.fit on a 10M x 50 float32 memmap.

Run from the repository root::

    python benchmarks/bench_memmap.py [--dir /tmp/skdp_memmap] [--keep]

What it does:

1. Writes (if absent) ``X.f32``, a raw C-ordered float32 file of
   ``--rows x --features`` (default 10,000,000 x 50, 2.0 GB), chunk by chunk
   with plain file writes (never a whole array in memory, and no writable
   mapping, so the writer's own RSS stays small), and ``y.npy``, int8 labels
   from a fixed linear rule plus Gaussian noise. Every coordinate is drawn
   uniformly in ``[-1, 1] / sqrt(features)``, so every row has L2 norm at
   most 1: ``row_norm=1.0`` is a public bound implied by how the data are
   made, not read from them.
2. For each batch sampling, asks the kernel to drop the file from the page
   cache (``posix_fadvise(DONTNEED)``, so every fit starts cold, as data that
   do not fit in memory would) and starts a *fresh* Python process that opens
   ``np.memmap(..., mode="r")``, fits ``DPLogisticRegression(epsilon=1,
   batch_size=4096, row_norm=1.0, random_state=0)`` on the first
   ``rows - holdout`` rows and reports wall time, memory, the privacy spent
   and the accuracy on the last ``holdout`` rows (a public split by
   position). Before the fit the process caps its private writable memory
   (``RLIMIT_DATA``, ``--data-limit-mb``, default 1024 MiB, about half the
   file): the read-only file mapping does not count against it, but a copy
   of ``X`` would, and would fail with ``MemoryError``.
3. Runs each fit once more (one epoch, ``--trace``) under ``tracemalloc``
   with a line tracer over skdp's and scikit-learn's source files from
   ``DPLogisticRegression.fit`` down, and prints the lines that allocate the
   most: what is still allocated when the line ends, and the transient peak
   while it runs. numpy reports its data buffers to tracemalloc; pages of
   the memmap are not allocations and do not appear.
4. Deletes the data files unless ``--keep``.

Memory, read from ``/proc/self/status`` of the fitting process:

* ``RssAnon``: anonymous memory, i.e. what the process allocated (numpy
  arrays, interpreter, libraries). This is what the fit really costs. Its peak
  is sampled every few milliseconds by a thread (a spike shorter than that can
  be missed; the tracemalloc run gives exact peaks of numpy allocations).
* ``RssFile``: pages of files mapped by the process that are resident, which
  includes every page of the memmap the fit has touched. They are clean page
  cache: the kernel drops them whenever memory is short, so they do not need
  to fit in memory. A fit reads every row, so this grows to the file size
  when memory is plentiful.
* ``VmHWM``: peak of ``RssAnon + RssFile + RssShmem``. It is reset just before
  the fit (``/proc/self/clear_refs``), so it is the peak during the fit.
  ``ru_maxrss`` (``getrusage``) is reported too; it cannot be reset and on
  Linux it can also carry the parent's peak across ``exec``.

Importing numpy, scipy, scikit-learn and skdp, plus ``y`` (one byte a row),
costs the fitting process about 85 MiB of ``RssAnon`` before the fit; the
table shows it as "RssAnon before" and the fit's own part as the difference.
"""

import argparse
import inspect
import json
import linecache
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import sklearn

try:
    import skdp  # noqa: F401
except ImportError:  # a checkout without skdp installed: use the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import skdp
from skdp.linear_model import DPLogisticRegression

MB = 1024.0**2
_SEED = 20240611
_CHUNK_ROWS = 250_000
_STATUS_KEYS = ("VmRSS", "VmHWM", "VmData", "RssAnon", "RssFile", "RssShmem")


# --------------------------------------------------------------------- data


def _true_rule(n_features):
    """Fixed linear rule: margins have std 3 on the data, noise has std 1."""
    rng = np.random.default_rng(_SEED)
    w = rng.standard_normal(n_features)
    # x_j uniform on [-1, 1] / sqrt(d): var(x . w) = ||w||^2 / (3 d).
    w *= 3.0 * math.sqrt(3.0 * n_features) / np.linalg.norm(w)
    return w, 0.3


def _paths(directory, n_rows, n_features):
    stem = f"{n_rows}x{n_features}"
    return directory / f"X_{stem}.f32", directory / f"y_{stem}.npy"


def make_data(directory, n_rows, n_features):
    """Write X (raw float32) and y (int8 .npy) chunk by chunk; return paths."""
    directory.mkdir(parents=True, exist_ok=True)
    x_path, y_path = _paths(directory, n_rows, n_features)
    expected = n_rows * n_features * 4
    if x_path.exists() and x_path.stat().st_size == expected and y_path.exists():
        print(f"reusing {x_path} ({expected / 1e9:.2f} GB)", flush=True)
        return x_path, y_path
    w, b = _true_rule(n_features)
    rng = np.random.default_rng(_SEED + 1)
    y = np.empty(n_rows, dtype=np.int8)  # 10 MB: small next to X
    scale = np.float32(1.0 / math.sqrt(n_features))
    start = time.perf_counter()
    tmp = x_path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        for lo in range(0, n_rows, _CHUNK_ROWS):
            hi = min(lo + _CHUNK_ROWS, n_rows)
            u = rng.random((hi - lo, n_features), dtype=np.float32)
            x = (u * 2.0 - 1.0) * scale  # float32, |x_j| <= 1/sqrt(d)
            margin = x @ w + b + rng.standard_normal(hi - lo)
            y[lo:hi] = margin > 0
            x.tofile(f)
        f.flush()
        os.fsync(f.fileno())
    tmp.rename(x_path)
    np.save(y_path, y)
    print(
        f"wrote {x_path} ({expected / 1e9:.2f} GB) in "
        f"{time.perf_counter() - start:.1f} s",
        flush=True,
    )
    return x_path, y_path


def drop_from_page_cache(path):
    """Ask the kernel to evict the (clean, unmapped) file from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cold_read_seconds(path, block=16 * 1024 * 1024):
    """Seconds to read the file once with plain reads, after evicting it."""
    drop_from_page_cache(path)
    start = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(block)
        while f.readinto(buf):
            pass
    return time.perf_counter() - start


def cached_bytes(path):
    """Bytes of the file in the page cache (util-linux fincore), or None."""
    if shutil.which("fincore") is None:
        return None
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        return int(out.stdout.split()[0])
    except (IndexError, ValueError):
        return None


# ------------------------------------------------------------ memory probes


def read_status():
    """The memory lines of /proc/self/status, in bytes ({} if unavailable)."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in _STATUS_KEYS:
                    out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


def reset_hwm():
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def ru_maxrss_bytes():
    scale = 1 if sys.platform == "darwin" else 1024  # Linux: kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


class StatusSampler(threading.Thread):
    """Poll /proc/self/status and keep the peak of each memory line."""

    def __init__(self, interval=0.005):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = {}
        self._stop_event = threading.Event()

    def _sample(self):
        for key, value in read_status().items():
            self.peak[key] = max(self.peak.get(key, 0), value)

    def run(self):
        while not self._stop_event.is_set():
            self._sample()
            time.sleep(self.interval)

    def stop(self):
        self._stop_event.set()
        self.join()
        self._sample()
        return self.peak


class LineMemoryTracer:
    """Per-line allocation inside one function call, from tracemalloc.

    Tracing starts when a frame running ``root`` (a code object) is entered
    and covers it and every frame below it whose file starts with one of
    ``prefixes``. For every line run, it records what is still allocated
    when the line ends (``retained``) and the peak above the line's start
    while it ran, callees included (``transient``): nested traced frames all
    see the peaks of their callees.
    """

    def __init__(self, root, prefixes):
        self.root = root
        self.prefixes = tuple(prefixes)
        self.root_frame = None
        self.active = {}  # frame -> [key, traced at line start, peak seen]
        self.stats = {}  # (file, line, function) -> [retained, transient, runs]
        self.global_peak = 0
        self.global_peak_line = None

    def _flush(self):
        current, peak = tracemalloc.get_traced_memory()
        if self.active and peak > self.global_peak:
            self.global_peak = peak
            self.global_peak_line = next(reversed(self.active.values()))[0]
        for rec in self.active.values():
            rec[2] = max(rec[2], peak)
        tracemalloc.reset_peak()
        return current

    def _close(self, rec, current):
        key, start, peak = rec
        stat = self.stats.setdefault(key, [0, 0, 0])
        stat[0] = max(stat[0], current - start)
        stat[1] = max(stat[1], peak - start)
        stat[2] += 1

    def global_trace(self, frame, event, arg):
        if event != "call":
            return None
        if self.root_frame is None:
            if frame.f_code is not self.root:
                return None
            self.root_frame = frame
            self._flush()
            self.start = tracemalloc.get_traced_memory()[0]
            self.global_peak = self.start
            return self.local_trace
        if frame.f_code.co_filename.startswith(self.prefixes):
            return self.local_trace
        return None

    def local_trace(self, frame, event, arg):
        if self.root_frame is None:
            return None
        current = self._flush()
        rec = self.active.get(frame)
        code = frame.f_code
        if event == "line":
            key = (code.co_filename, frame.f_lineno, code.co_name)
            if rec is not None:
                self._close(rec, current)
                rec[:] = [key, current, current]
            else:
                self.active[frame] = [key, current, current]
        elif event == "return" and rec is not None:
            self._close(rec, current)
            del self.active[frame]
            if frame is self.root_frame:
                self.root_frame = None  # done: stop tracing
        return self.local_trace

    def __enter__(self):
        sys.settrace(self.global_trace)
        return self

    def __exit__(self, *exc):
        sys.settrace(None)
        self.active.clear()


# ------------------------------------------------------------------- worker


def _estimator(cfg):
    return DPLogisticRegression(
        epsilon=1.0,
        batch_sampling=cfg["sampling"],
        batch_size=4096,
        epochs=cfg["epochs"],
        row_norm=1.0,
        classes=[0, 1],
        random_state=0,
    )


def _holdout_accuracy(clf, X_test, y_test, n_features, chunk=100_000):
    """Accuracy of clf and of the true rule, read in chunks (no big copies)."""
    w, b = _true_rule(n_features)
    hits = rule_hits = 0
    for lo in range(0, X_test.shape[0], chunk):
        xb = np.asarray(X_test[lo : lo + chunk])
        yb = y_test[lo : lo + chunk]
        hits += int(np.sum(clf.predict(xb) == yb))
        rule_hits += int(np.sum(((xb @ w + b) > 0) == yb))
    return hits / X_test.shape[0], rule_hits / X_test.shape[0]


def _trace_fit(clf, X, y, min_mb):
    """Fit under the line tracer; return the lines that allocate the most."""
    prefixes = [
        str(Path(skdp.__file__).resolve().parent),
        str(Path(sklearn.__file__).resolve().parent),
    ]
    tracer = LineMemoryTracer(
        inspect.unwrap(DPLogisticRegression.fit).__code__, prefixes
    )
    tracemalloc.start(1)
    with tracer:
        clf.fit(X, y)
    tracemalloc.stop()
    fit_lines, other_lines = [], []
    for (filename, lineno, func), (kept, extra, runs) in tracer.stats.items():
        row = {
            "where": f"{_short(filename)}:{lineno}",
            "function": func,
            "lineno": lineno,
            "code": linecache.getline(filename, lineno).strip(),
            "retained_mb": kept / MB,
            "transient_mb": extra / MB,
            "runs": runs,
        }
        if func == "fit" and filename.endswith("_logistic.py"):
            fit_lines.append(row)
        elif max(kept, extra) >= min_mb * MB:
            other_lines.append(row)
    fit_lines.sort(key=lambda r: r["lineno"])
    other_lines.sort(key=lambda r: -max(r["retained_mb"], r["transient_mb"]))
    filename, lineno, _ = tracer.global_peak_line
    return {
        "fit_lines": fit_lines,
        "lines": other_lines,
        "traced_peak_mb": (tracer.global_peak - tracer.start) / MB,
        "traced_peak_at": f"{_short(filename)}:{lineno}",
    }


def worker(cfg):
    """Fit in this (fresh) process; return a dict of measurements."""
    base = read_status()
    shape = (cfg["rows"], cfg["features"])
    X = np.memmap(cfg["x_path"], dtype=np.float32, mode="r", shape=shape)
    y = np.load(cfg["y_path"])
    n_train = cfg["rows"] - cfg["holdout"]
    X_train, y_train = X[:n_train], y[:n_train]  # views: no copy
    clf = _estimator(cfg)
    out = {"sampling": cfg["sampling"], "epochs": cfg["epochs"], "n_train": n_train}
    if cfg["mode"] == "trace":
        return out | _trace_fit(clf, X_train, y_train, cfg["trace_min_mb"])
    if cfg["data_limit_mb"]:
        # Caps the process's private writable memory (VmData: heap and
        # anonymous mappings, not the read-only file mapping): a copy of X
        # would raise MemoryError.
        limit = int(cfg["data_limit_mb"] * MB)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    before = read_status()
    hwm_reset = reset_hwm()
    ru_before = resource.getrusage(resource.RUSAGE_SELF)
    sampler = StatusSampler()
    sampler.start()
    start = time.perf_counter()
    clf.fit(X_train, y_train)
    fit_time = time.perf_counter() - start
    peak = sampler.stop()
    after = read_status()
    ru_after = resource.getrusage(resource.RUSAGE_SELF)
    acc, rule_acc = _holdout_accuracy(clf, X[n_train:], y[n_train:], cfg["features"])
    out.update(
        fit_s=fit_time,
        base=base,
        before=before,
        peak=peak,
        after=after,
        hwm_reset=hwm_reset,
        ru_maxrss=ru_maxrss_bytes(),
        major_faults=ru_after.ru_majflt - ru_before.ru_majflt,
        accuracy=acc,
        rule_accuracy=rule_acc,
        epsilon=clf.privacy_spent_.epsilon,
        delta=clf.privacy_spent_.delta,
        bound=clf.privacy_spent_.bound,
        noise_multiplier=clf.noise_multiplier_,
        privacy_spent=repr(clf.privacy_spent_),
    )
    return out


def _short(filename):
    parts = Path(filename).parts
    for root in ("skdp", "sklearn"):
        if root in parts:
            i = len(parts) - 1 - parts[::-1].index(root)
            return "/".join(parts[i:])
    return filename


def run_worker(cfg):
    """Run :func:`worker` in a fresh interpreter and parse its JSON output."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(cfg)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise RuntimeError(f"worker failed for {cfg['sampling']}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------- report


def _mb(x):
    return "-" if x is None else f"{x / MB:,.0f}"


def print_tables(results, file_size, cached_before, data_limit_mb):
    limit = f"{data_limit_mb:,.0f} MiB" if data_limit_mb else "none"
    print(
        f"\nfile: {file_size / 1e9:.2f} GB ({file_size / MB:,.0f} MiB); memory "
        "in MiB, peaks over the fit only (the held-out scoring comes after); "
        f"RLIMIT_DATA during the fit: {limit}\n"
    )
    print(
        "| sampling | epochs | fit (s) | RssAnon before | RssAnon peak "
        "| fit's anon (peak - before) | / file | RssFile before | RssFile peak "
        "| VmHWM (fit) | ru_maxrss | VmData peak |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        before, peak = r["before"], r["peak"]
        anon0, anon1 = before.get("RssAnon"), peak.get("RssAnon")
        delta = None if anon0 is None or anon1 is None else anon1 - anon0
        ratio = "-" if delta is None else f"{delta / file_size:.0%}"
        hwm = r["after"].get("VmHWM") if r["hwm_reset"] else None
        print(
            f"| {r['sampling']} | {r['epochs']} | {r['fit_s']:.1f} "
            f"| {_mb(anon0)} | {_mb(anon1)} | {_mb(delta)} | {ratio} "
            f"| {_mb(before.get('RssFile'))} | {_mb(peak.get('RssFile'))} "
            f"| {_mb(hwm)} | {_mb(r['ru_maxrss'])} | {_mb(peak.get('VmData'))} |"
        )
    print()
    for r in results:
        print(
            f"- {r['sampling']}: file bytes in the page cache when the fit "
            f"started: {_mb(cached_before.get(r['sampling']))} MiB; major page "
            f"faults during the fit: {r['major_faults']:,}"
        )
    print(
        "\n| sampling | held-out accuracy | true rule accuracy | epsilon | delta "
        "| bound | noise multiplier |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['sampling']} | {r['accuracy']:.4f} | {r['rule_accuracy']:.4f} "
            f"| {r['epsilon']:.4f} | {r['delta']:.3g} | {r['bound']} "
            f"| {r['noise_multiplier']:.3f} |"
        )


def _trace_table(rows):
    print("| line | code | retained (MiB) | transient peak (MiB) | runs |")
    print("|---|---|---|---|---|")
    for row in rows:
        code = row["code"].replace("|", "\\|")
        if len(code) > 72:
            code = code[:69] + "..."
        print(
            f"| {row['where']} | `{code}` | {row['retained_mb']:,.1f} "
            f"| {row['transient_mb']:,.1f} | {row['runs']:,} |"
        )


def print_trace(trace, min_mb):
    print(
        f"\n**tracemalloc, {trace['sampling']}, {trace['epochs']} epoch(s), "
        f"n_train={trace['n_train']:,}**: peak of traced allocations "
        f"{trace['traced_peak_mb']:,.0f} MiB above the start of fit, reached in "
        f"{trace['traced_peak_at']}. 'retained': still allocated when the line "
        "ends; 'transient peak': highest point above the line's start while it "
        "runs, callees included.\n"
    )
    print(
        "Lines of `DPLogisticRegression.fit` that allocate >= 0.5 MiB, and the "
        "validation line:\n"
    )
    _trace_table(
        [
            row
            for row in trace["fit_lines"]
            if max(row["retained_mb"], row["transient_mb"]) >= 0.5
            or "validate_data(" in row["code"]
        ]
    )
    print(f"\nLines below it with retained or transient peak >= {min_mb:g} MiB:\n")
    _trace_table(trace["lines"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/skdp_memmap", type=Path)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--holdout", type=int, default=500_000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument(
        "--sampling", default="cyclic,poisson,shuffle", help="comma-separated"
    )
    parser.add_argument(
        "--trace",
        default="cyclic,poisson,shuffle",
        help="comma-separated samplings to re-run under tracemalloc ('' for none)",
    )
    parser.add_argument("--trace-epochs", type=int, default=1)
    parser.add_argument(
        "--data-limit-mb",
        type=float,
        default=1024.0,
        help="RLIMIT_DATA set in the fitting process before fit (0: none)",
    )
    parser.add_argument("--trace-min-mb", type=float, default=16.0)
    parser.add_argument(
        "--warm", action="store_true", help="do not evict the file before each fit"
    )
    parser.add_argument("--keep", action="store_true", help="keep the data files")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(json.loads(args.worker))))
        return

    import scipy

    print(
        f"python {platform.python_version()}, numpy {np.__version__}, scipy "
        f"{scipy.__version__}, scikit-learn {sklearn.__version__}, skdp "
        f"{getattr(skdp, '__version__', '?')}; {os.cpu_count()} cores; "
        f"load average (1 min) {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    x_path, y_path = make_data(args.dir, args.rows, args.features)
    file_size = x_path.stat().st_size
    if not args.warm:
        seconds = cold_read_seconds(x_path)
        print(
            f"one sequential read of the file from a cold cache: {seconds:.1f} s "
            f"({file_size / seconds / 1e9:.2f} GB/s)",
            flush=True,
        )
    common = {
        "x_path": str(x_path),
        "y_path": str(y_path),
        "rows": args.rows,
        "features": args.features,
        "holdout": args.holdout,
        "trace_min_mb": args.trace_min_mb,
        "data_limit_mb": args.data_limit_mb,
    }
    results, traces, cached_before = [], [], {}
    try:
        for sampling in [s for s in args.sampling.split(",") if s]:
            if not args.warm:
                drop_from_page_cache(x_path)
            cached_before[sampling] = cached_bytes(x_path)
            cfg = dict(common, sampling=sampling, epochs=args.epochs, mode="fit")
            r = run_worker(cfg)
            print(
                f"{sampling}: fit {r['fit_s']:.1f} s, RssAnon peak "
                f"{_mb(r['peak'].get('RssAnon'))} MiB, accuracy {r['accuracy']:.4f}, "
                f"{r['privacy_spent']}",
                flush=True,
            )
            results.append(r)
        for sampling in [s for s in args.trace.split(",") if s]:
            cfg = dict(common, sampling=sampling, epochs=args.trace_epochs)
            traces.append(run_worker(dict(cfg, mode="trace")))
        print_tables(results, file_size, cached_before, args.data_limit_mb)
        for trace in traces:
            print_trace(trace, args.trace_min_mb)
        print(f"\nload average (1 min) at the end {os.getloadavg()[0]:.2f}")
    finally:
        if not args.keep:
            for path in (x_path, y_path):
                path.unlink(missing_ok=True)
            try:
                args.dir.rmdir()
            except OSError:
                pass


if __name__ == "__main__":
    main()

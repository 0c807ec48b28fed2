"""Speed of DP-SGD epochs against the floor of two matrix-vector products.

For a linear model, one epoch must at least read the data twice: scores
``X @ w`` and gradient ``X.T @ r``. This script times skdp's solver (cyclic,
shuffled, Poisson and balls-and-bins batches, binary logistic, noise
included) on dense
synthetic float64 data and prints, for each sampler and batch size:

- ``setup``: the per-fit work done once whatever the number of epochs (the
  row norms for the public row-norm projection, for Poisson and
  balls-and-bins batches with each row's projection, label and weight
  stored as one record; for shuffled batches, the copy of the data in its
  secret order; balls-and-bins draws a fresh allocation and gathers the
  rows and records in its order every epoch, which is part of the epoch);
- ``epoch``: the steady-state cost of one more epoch, ``(t(E) - t(1)) / (E - 1)``
  with ``E = --epochs``;
- the ratio of that epoch to the floor, and examples per second.

It then times, for Poisson batches, a bare loop that any numpy
implementation must at least run: gather each step's rows (drawn in
advance, so the sampling is not timed) into a reused buffer with
``np.take`` and compute the batch's two matrix-vector products, nothing
else (no clipping, noise, link function or update). Its ratio to the floor
is a lower bound on what a Poisson epoch can reach with numpy: the random
gather reads every row once, out of order. The same bound for
balls-and-bins epochs: draw the epoch's allocation, gather its order in
blocks of whole steps (the solver's block size) into a reused buffer and
compute each step's two products on its slice of the block.

With ``--opacus`` it also times Opacus (``PrivacyEngine.make_private`` on a
``torch.nn.Linear``, Poisson batches, one thread) on a subset of the rows, on
the same data, and prints its examples per second (best of ``--repeats``
epochs, each on a freshly built model).

    python benchmarks/bench_sgd_speed.py [--n 1000000] [--d 50] [--opacus]
        [--samplers poisson balls-and-bins] [--batches 1024 4096]
"""

import argparse
import os
import time

import numpy as np

from skdp._solvers._allocation import allocate_epoch
from skdp._solvers._sgd import make_plan, poisson_batch, run_logistic_sgd
from skdp._solvers._sgd._batches import _BLOCK_BYTES

SAMPLERS = ("cyclic", "shuffle", "poisson", "balls-and-bins")
BATCHES = (256, 1024, 4096)


def best_of(fn, repeats):
    """Smallest wall time of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def skdp_fit_time(X, y, sampling, batch, epochs, repeats):
    """Best wall time of a solver run of ``epochs`` epochs."""
    plan = make_plan(
        n_samples=X.shape[0],
        n_classes=2,
        row_norm=np.sqrt(2.0),
        batch_size=batch,
        epochs=epochs,
        sampling=sampling,
        solver="dp-sgd",
        learning_rate="auto",
        lr_schedule="constant",
        l2=1e-4,
        l1=0.0,
        clip_norm="auto",
        projection_radius=None,
    )
    return best_of(
        lambda: run_logistic_sgd(
            X,
            y,
            plan,
            1.0,
            row_norm=np.sqrt(2.0),
            fit_intercept=True,
            rng=np.random.default_rng(1),
        ),
        repeats,
    )


def poisson_bound_time(X, batch, repeats, rng):
    """Best wall time of one epoch of the bare Poisson loop (gather + 2 products).

    The batches (about ``n / batch`` of them, each row in with probability
    ``batch / n``) are drawn before the clock starts.
    """
    n, d = X.shape
    q = batch / n
    batches = [poisson_batch(n, q, rng) for _ in range(max(1, round(n / batch)))]
    buffer = np.empty((max(len(rows) for rows in batches), d))
    w = np.zeros(d)

    def epoch():
        for rows in batches:
            rows_x = buffer[: len(rows)]
            np.take(X, rows, axis=0, out=rows_x)
            rows_x.T @ (rows_x @ w)

    return best_of(epoch, repeats)


def step_blocks(bounds, block_rows):
    """``(first, stop)`` steps of each block: whole steps, ``block_rows`` at most.

    A step larger than ``block_rows`` is a block alone.
    """
    blocks, first = [], 0
    n_steps = len(bounds) - 1
    while first < n_steps:
        stop = first + 1
        while stop < n_steps and bounds[stop + 1] - bounds[first] <= block_rows:
            stop += 1
        blocks.append((first, stop))
        first = stop
    return blocks


def allocation_bound_time(X, batch, repeats, rng):
    """Best wall time of one epoch of the bare balls-and-bins loop.

    The epoch's allocation (drawn inside the clock: every epoch draws one),
    its order gathered in blocks of whole steps into a reused buffer, and
    each step's two products on its slice of the block.
    """
    n, d = X.shape
    n_steps = max(1, round(n / batch))
    block_rows = max(1, _BLOCK_BYTES // X[:1].nbytes)
    buffer = np.empty((block_rows, d))
    w = np.zeros(d)

    def epoch():
        nonlocal buffer
        allocation = allocate_epoch(n, n_steps, rng)
        bounds = allocation.bounds.tolist()
        for first, stop in step_blocks(bounds, block_rows):
            lo, hi = bounds[first], bounds[stop]
            if hi - lo > len(buffer):
                buffer = np.empty((hi - lo, d))
            rows = allocation.order[lo:hi]
            np.take(X, rows, axis=0, out=buffer[: hi - lo], mode="clip")
            for j in range(first, stop):
                rows_x = buffer[bounds[j] - lo : bounds[j + 1] - lo]
                rows_x.T @ (rows_x @ w)

    return best_of(epoch, repeats)


def opacus_epoch_time(X, y, batch):
    """Wall time of one Opacus DP-SGD epoch on a linear model (Poisson)."""
    import torch
    from opacus import PrivacyEngine

    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(
        torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    )
    loader = torch.utils.data.DataLoader(data, batch_size=batch)
    model = torch.nn.Linear(X.shape[1], 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model, optimizer, loader = PrivacyEngine().make_private(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    start = time.perf_counter()
    for xb, yb in loader:
        if len(xb) == 0:
            continue
        optimizer.zero_grad()
        loss_fn(model(xb).squeeze(1), yb).backward()
        optimizer.step()
    return time.perf_counter() - start


def main():
    """Print the speed table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--opacus", action="store_true")
    parser.add_argument("--opacus-n", type=int, default=100_000)
    parser.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=SAMPLERS)
    parser.add_argument("--batches", nargs="+", type=int, default=BATCHES)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.n, args.d)) / np.sqrt(args.d)
    y = (X @ rng.normal(size=args.d) > 0).astype(np.int8)
    w, r = np.zeros(args.d), np.zeros(args.n)
    floor = best_of(lambda: (X @ w, X.T @ r), args.repeats)
    print(
        f"n={args.n} d={args.d} float64; floor (X@w + X.T@r): {floor * 1e3:.1f} ms; "
        f"load average at start {os.getloadavg()[0]:.2f}"
    )
    print("| sampling | batch | setup (ms) | epoch (ms) | epoch / floor | examples/s |")
    print("|---|---|---|---|---|---|")
    for sampling in args.samplers:
        for batch in args.batches:
            one = skdp_fit_time(X, y, sampling, batch, 1, args.repeats)
            many = skdp_fit_time(X, y, sampling, batch, args.epochs, args.repeats)
            # Floor the epoch at 1 microsecond: timing noise can make t(E) < t(1).
            epoch = max(many - one, 1e-6) / (args.epochs - 1)
            setup = max(one - epoch, 0.0)
            print(
                f"| {sampling} | {batch} | {setup * 1e3:.0f} | {epoch * 1e3:.0f} | "
                f"{epoch / floor:.1f} | {args.n / epoch / 1e6:.2f} M |"
            )
    lower_bounds = (
        (
            "Poisson lower bound (numpy): gather each batch's rows and the two "
            "products, nothing else",
            poisson_bound_time,
        ),
        (
            "Balls-and-bins lower bound (numpy): draw the allocation, gather "
            "it in blocks and the two products per step, nothing else",
            allocation_bound_time,
        ),
    )
    for title, bound_time in lower_bounds:
        print(f"\n{title}")
        print("| batch | epoch (ms) | epoch / floor |")
        print("|---|---|---|")
        for batch in args.batches:
            bound = bound_time(X, batch, args.repeats, np.random.default_rng(2))
            print(f"| {batch} | {bound * 1e3:.0f} | {bound / floor:.1f} |")
    if args.opacus:
        m = min(args.opacus_n, args.n)
        print(
            f"\nOpacus, one epoch on the first {m} rows (float32, one thread, "
            f"best of {args.repeats}):"
        )
        print("| batch | epoch (s) | examples/s |")
        print("|---|---|---|")
        for batch in args.batches:
            # Best of --repeats, as for skdp (a single run would understate
            # Opacus whenever the machine is busy).
            seconds = min(
                opacus_epoch_time(X[:m], y[:m], batch) for _ in range(args.repeats)
            )
            print(f"| {batch} | {seconds:.2f} | {m / seconds / 1e3:.0f} k |")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""Speed of one DP-SGD epoch against the floor of two matrix-vector products.

For a linear model, one epoch must at least read the data twice: scores
``X @ w`` and gradient ``X.T @ r``. This script times one epoch of skdp's
solver (cyclic, shuffled and Poisson batches, noise included) on dense
synthetic data and prints the ratio to that floor, plus examples per second.

    python benchmarks/bench_sgd_speed.py [--n 1000000] [--d 50]
"""

import argparse
import time

import numpy as np

from skdp._solvers._sgd import make_plan, run_logistic_sgd


def best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.n, args.d)) / np.sqrt(args.d)
    y = (X @ rng.normal(size=args.d) > 0).astype(np.int8)
    w, r = np.zeros(args.d), np.zeros(args.n)
    floor = best_of(lambda: (X @ w, X.T @ r), args.repeats)
    print(f"n={args.n} d={args.d} float64; floor (X@w + X.T@r): {floor * 1e3:.1f} ms")
    print("| sampling | batch | epoch (ms) | / floor | examples/s |")
    print("|---|---|---|---|---|")
    for sampling in ("cyclic", "shuffle", "poisson"):
        for batch in (256, 1024, 4096):
            plan = make_plan(
                n_samples=args.n,
                n_classes=2,
                row_norm=np.sqrt(2.0),
                batch_size=batch,
                epochs=1,
                sampling=sampling,
                solver="dp-sgd",
                learning_rate="auto",
                lr_schedule="constant",
                l2=1e-4,
                l1=0.0,
                clip_norm="auto",
                projection_radius=None,
            )
            seconds = best_of(
                lambda plan=plan: run_logistic_sgd(
                    X,
                    y,
                    plan,
                    1.0,
                    row_norm=np.sqrt(2.0),
                    fit_intercept=True,
                    rng=np.random.default_rng(1),
                ),
                args.repeats,
            )
            print(
                f"| {sampling} | {batch} | {seconds * 1e3:.0f} | "
                f"{seconds / floor:.1f} | {args.n / seconds / 1e6:.2f} M |"
            )


if __name__ == "__main__":
    main()

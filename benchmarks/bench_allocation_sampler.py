"""Time to draw one epoch of random allocation, by the way the rows are sorted.

``allocate_epoch`` sorts the step labels with numpy's stable sort of 16-bit
keys (a radix sort: O(n)). Against it: a stable sort of 64-bit labels
(timsort, O(n log n)), a quicksort of the combined key ``label * n + row``
(O(n log n)), and, for scale, one secret permutation of the rows (what a
shuffled run draws). ``allocate_epoch``'s figure includes drawing the labels
and counting the batches; the sorts' figures sort labels drawn beforehand.
Each figure is the best of ``--repeats`` runs, in ms.

Usage::

    nice python benchmarks/bench_allocation_sampler.py [--repeats 3]
"""

import argparse
import time

import numpy as np

from skdp._solvers._allocation import allocate_epoch

SIZES = (100_000, 1_000_000, 10_000_000)
STEPS = (118, 1000, 40_000)


def best_ms(fn, args, repeats):
    """Best wall time of ``fn(*args)`` over ``repeats`` runs, in ms."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def _stable(labels):
    return np.argsort(labels, kind="stable")


def _keyed(labels, rows):
    return np.argsort(labels * rows.size + rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    heads = ("allocate_epoch", "stable int64", "quicksort key", "permutation")
    print(f"{'n':>10} {'steps':>6} " + " ".join(f"{h:>15}" for h in heads))
    for n in SIZES:
        for t in STEPS:
            labels = rng.integers(0, t, size=n)
            rows = np.arange(n)
            r = args.repeats
            cells = (
                best_ms(allocate_epoch, (n, t, rng), r),
                best_ms(_stable, (labels,), r),
                best_ms(_keyed, (labels, rows), r),
                best_ms(rng.permutation, (n,), r),
            )
            print(f"{n:>10} {t:>6} " + " ".join(f"{c:15.1f}" for c in cells))


if __name__ == "__main__":
    main()

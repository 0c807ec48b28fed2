"""Random allocation (balls-and-bins) accounting against Poisson and the reference.

Prints two tables:

1. epsilon and time on a grid of (noise multiplier, steps per epoch, epochs,
   delta): our random-allocation accountants (Rényi, and ``accountant="pld"``
   which reports the smaller of Rényi and the numerical PLD; add/remove and
   replace-one), the Poisson accountant at rate 1/t (Rényi and PLD), and with
   ``--reference`` the authors' PLD accountant (``pld-accounting``, its upper
   and lower bounds; ``--reference-cache FILE`` reads them from JSON lines
   with keys z, t, epochs, delta, upper, lower, s instead);
2. the noise multiplier needed for a target epsilon at n = 30,000, 120 steps
   an epoch, 10 epochs, delta = 1e-5, for allocation, Poisson and shuffled
   batches (composition over each record's steps, replace-one only), under
   both relations; with ``--reference`` also the reference's (add/remove).

Usage::

    nice python benchmarks/bench_allocation_accounting.py [--reference] [--full]
        [--reference-cache FILE] [--grid-from-cache] [--no-noise]
"""

import argparse
import json
import math
import time

from skdp.accounting import (
    NoisyIterationEvent,
    PoissonGaussianEvent,
    RandomAllocationGaussianEvent,
    account,
    calibrate_noise_multiplier,
)

GRID = [
    (0.8, 10, 1, 1e-5),
    (1.0, 120, 10, 1e-5),
    (2.0, 120, 10, 1e-5),
    (2.0, 1000, 10, 1e-9),
    (5.0, 1000, 10, 1e-9),
    (0.5, 100, 1, 1e-5),
    (10.0, 10_000, 1, 1e-7),
]
FULL_GRID = [
    (z, t, e, d)
    for z in (0.5, 1.0, 2.0, 5.0, 20.0)
    for t in (10, 100, 1000, 10_000)
    for e in (1, 10, 100)
    for d in (1e-5, 1e-9)
]
N_RECORDS, STEPS, EPOCHS, DELTA = 30_000, 120, 10, 1e-5


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _reference_epsilon(z, t, e, delta):
    from PLD_accounting import gaussian_allocation_epsilon_range

    return gaussian_allocation_epsilon_range(
        delta=delta, sigma=z, num_steps=t, num_epochs=e
    )


def _load_cache(path):
    """Reference results keyed by (z, t, epochs, delta)."""
    cache = {}
    if path:
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                key = (row["z"], row["t"], row["epochs"], row["delta"])
                cache[key] = (row["upper"], row["lower"], row["s"])
    return cache


def epsilon_table(grid, reference, cache):
    """Print epsilon and seconds of every accountant on ``grid``."""
    print(
        "| z | t | epochs | delta | alloc RDP a/r | alloc PLD a/r | s "
        "| alloc RDP r-1 | alloc PLD r-1 | s | Poisson PLD a/r "
        "| ref upper | ref lower | ref s | alloc PLD / ref upper |"
    )
    print("|" + "---|" * 15)
    for z, t, e, delta in grid:
        event = RandomAllocationGaussianEvent(t, z, e)
        rdp = [
            account(event, delta, neighbouring=rel, warn=False)
            for rel in ("add-remove", "replace-one")
        ]
        pld, secs = [], []
        for rel in ("add-remove", "replace-one"):
            spent, sec = _timed(
                lambda rel=rel, event=event, delta=delta: account(
                    event, delta, neighbouring=rel, warn=False, accountant="pld"
                )
            )
            pld.append(spent)
            secs.append(sec)
        poisson = PoissonGaussianEvent(1.0 / t, z, t * e)
        p_pld = account(
            poisson, delta, neighbouring="add-remove", warn=False, accountant="pld"
        )
        ref = ("-", "-", "-", "-")
        found = cache.get((z, t, e, delta))
        if found is None and reference:
            (upper, lower), r_secs = _timed(
                lambda z=z, t=t, e=e, delta=delta: _reference_epsilon(z, t, e, delta)
            )
            found = (upper, lower, r_secs)
        if found is not None:
            upper, lower, r_secs = found
            ref = (
                f"{upper:.4g}",
                f"{lower:.4g}",
                f"{r_secs:.1f}",
                f"{pld[0].epsilon / upper:.4f}",
            )
        names = [p.accountant for p in pld]
        print(
            f"| {z:g} | {t} | {e} | {delta:g} | {rdp[0].epsilon:.4g} "
            f"| {pld[0].epsilon:.4g} ({names[0]}) | {secs[0]:.1f} "
            f"| {rdp[1].epsilon:.4g} | {pld[1].epsilon:.4g} ({names[1]}) "
            f"| {secs[1]:.1f} | {p_pld.epsilon:.4g} | {' | '.join(ref)} |",
            flush=True,
        )


def _shuffle_events(z):
    batch = N_RECORDS // STEPS
    return NoisyIterationEvent.cyclic_sgd([batch] * STEPS, EPOCHS, z, shuffle=True)


def _calibrate(make_events, target, relation, accountant="rdp"):
    try:
        z, spent = calibrate_noise_multiplier(
            make_events, target, DELTA, neighbouring=relation, accountant=accountant
        )
    except ValueError:
        return "n/a"
    return f"{z:.3f} ({spent.accountant})"


def _reference_noise(target):
    """Bisection on the reference's upper bound to 0.5% in the noise."""
    lo, hi = 0.3, 50.0
    while hi / lo > 1.005:
        mid = math.sqrt(lo * hi)
        upper, _ = _reference_epsilon(mid, STEPS, EPOCHS, DELTA)
        lo, hi = (lo, mid) if upper <= target else (mid, hi)
    return f"{hi:.3f} (ref PLD)"


def noise_table(reference):
    """Print the noise multiplier each sampler needs for epsilon 1 and 0.1."""
    print(
        f"\nNoise multiplier for a target epsilon (n = {N_RECORDS}, {STEPS} steps "
        f"an epoch, {EPOCHS} epochs, delta = {DELTA:g})\n"
    )
    print(
        "| epsilon | relation | allocation (ours, pld) | Poisson 1/t (pld) | shuffle "
        "(composition) | reference allocation |"
    )
    print("|---|---|---|---|---|---|")
    for target in (1.0, 0.1):
        for relation in ("add-remove", "replace-one"):
            alloc, secs = _timed(
                lambda target=target, relation=relation: _calibrate(
                    lambda z: RandomAllocationGaussianEvent(STEPS, z, EPOCHS),
                    target,
                    relation,
                    accountant="pld",
                )
            )
            poisson = _calibrate(
                lambda z: PoissonGaussianEvent(1.0 / STEPS, z, STEPS * EPOCHS),
                target,
                relation,
                accountant="pld",
            )
            shuffle = _calibrate(_shuffle_events, target, relation)
            ref = "-"
            if reference and relation == "add-remove":
                ref = _reference_noise(target)
            print(
                f"| {target:g} | {relation} | {alloc} [{secs:.0f} s] | {poisson} "
                f"| {shuffle} | {ref} |",
                flush=True,
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--reference-cache", default=None)
    parser.add_argument("--grid-from-cache", action="store_true")
    parser.add_argument("--no-noise", action="store_true")
    args = parser.parse_args()
    cache = _load_cache(args.reference_cache)
    grid = FULL_GRID if args.full else GRID
    if args.grid_from_cache:
        grid = list(cache)
    epsilon_table(grid, args.reference, cache)
    if not args.no_noise:
        noise_table(args.reference)


if __name__ == "__main__":
    main()

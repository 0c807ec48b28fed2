"""Random allocation (balls-and-bins) accounting against Poisson and the reference.

Prints two tables:

1. epsilon and time on a grid of (noise multiplier, steps per epoch, epochs,
   delta): our random-allocation Rényi accountant (add/remove and
   replace-one), the Poisson accountant at rate 1/t (Rényi and PLD), and with
   ``--reference`` the authors' PLD accountant (``pld-accounting``, its upper
   and lower bounds);
2. the noise multiplier needed for a target epsilon at n = 30,000, 120 steps
   an epoch, 10 epochs, delta = 1e-5, for allocation, Poisson and shuffled
   batches (composition over each record's steps, replace-one only), under
   both relations; with ``--reference`` also the reference's (add/remove).

Usage::

    nice python benchmarks/bench_allocation_accounting.py [--reference] [--full]
"""

import argparse
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


def epsilon_table(grid, reference):
    """Print epsilon and seconds of every accountant on ``grid``."""
    print(
        "| z | t | epochs | delta | alloc a/r | alloc r-1 | s | Poisson RDP a/r "
        "| Poisson PLD a/r | s | ref upper | ref lower | s | alloc/ref upper |"
    )
    print("|" + "---|" * 14)
    for z, t, e, delta in grid:
        event = RandomAllocationGaussianEvent(t, z, e)
        (ar, r1), secs = _timed(
            lambda event=event, delta=delta: (
                account(event, delta, neighbouring="add-remove", warn=False),
                account(event, delta, neighbouring="replace-one", warn=False),
            )
        )
        poisson = PoissonGaussianEvent(1.0 / t, z, t * e)
        (p_rdp, p_pld), p_secs = _timed(
            lambda poisson=poisson, delta=delta: (
                account(poisson, delta, neighbouring="add-remove", warn=False),
                account(
                    poisson,
                    delta,
                    neighbouring="add-remove",
                    warn=False,
                    accountant="pld",
                ),
            )
        )
        ref = ("-", "-", "-", "-")
        if reference:
            (upper, lower), r_secs = _timed(
                lambda z=z, t=t, e=e, delta=delta: _reference_epsilon(z, t, e, delta)
            )
            ref = (
                f"{upper:.4g}",
                f"{lower:.4g}",
                f"{r_secs:.1f}",
                f"{ar.epsilon / upper:.3f}",
            )
        print(
            f"| {z:g} | {t} | {e} | {delta:g} | {ar.epsilon:.4g} | {r1.epsilon:.4g} "
            f"| {secs:.1f} | {p_rdp.epsilon:.4g} | {p_pld.epsilon:.4g} "
            f"| {p_secs:.1f} | {' | '.join(ref)} |",
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
        "| epsilon | relation | allocation (ours) | Poisson 1/t | shuffle "
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
    args = parser.parse_args()
    epsilon_table(FULL_GRID if args.full else GRID, args.reference)
    noise_table(args.reference)


if __name__ == "__main__":
    main()

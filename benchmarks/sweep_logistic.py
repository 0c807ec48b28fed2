"""Grid search of DPLogisticRegression's DP-SGD settings, to choose defaults.

For each data set of ``bench_logistic.py`` and each epsilon, fits every
combination of batch size, epochs, step multiple and clip multiple (Poisson
batches) over ``--seeds`` seeds and prints the mean test accuracy as a CSV line
(``dataset,epsilon,batch_size,epochs,lr_mult,clip_mult,accuracy``), then the
best settings per data set and epsilon. Test accuracy is used, so the result
is a benchmark of the settings, not a way to tune a private model (tuning on
private data costs privacy, see docs/guide/model_selection.md).

Example::

    PYTHONPATH=. python benchmarks/sweep_logistic.py --datasets digits --seeds 3
"""

import argparse
import itertools
import warnings

from bench_logistic import DATASETS, EPSILONS, evaluate, load

BATCH_SIZES = (256, 1024, 4096)
EPOCHS = (3, 10, 30)
LR_MULTS = (4.0, 16.0, 64.0)
CLIP_MULTS = (0.05, 0.25)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=BATCH_SIZES)
    parser.add_argument("--epochs", nargs="+", type=int, default=EPOCHS)
    parser.add_argument("--lr-mults", nargs="+", type=float, default=LR_MULTS)
    parser.add_argument("--clip-mults", nargs="+", type=float, default=CLIP_MULTS)
    parser.add_argument(
        "--neighbouring", default="replace-one", choices=["replace-one", "add-remove"]
    )
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    grid = list(
        itertools.product(args.batch_sizes, args.epochs, args.lr_mults, args.clip_mults)
    )
    print("dataset,epsilon,batch_size,epochs,lr_mult,clip_mult,accuracy", flush=True)
    best = {}
    for dataset in args.datasets:
        data = load(dataset)
        for epsilon in args.epsilons:
            for batch_size, epochs, lr_mult, clip_mult in grid:
                config = {
                    "batch_sampling": "poisson",
                    "batch_size": batch_size,
                    "epochs": epochs,
                    "lr_mult": lr_mult,
                    "clip_mult": clip_mult,
                }
                mean, _, _, _ = evaluate(
                    data, config, epsilon, args.seeds, args.neighbouring
                )
                print(
                    f"{dataset},{epsilon:g},{batch_size},{epochs},{lr_mult:g},"
                    f"{clip_mult:g},{mean:.4f}",
                    flush=True,
                )
                key = (dataset, epsilon)
                if mean > best.get(key, (-1.0,))[0]:
                    best[key] = (mean, batch_size, epochs, lr_mult, clip_mult)
    print("\nbest (accuracy, batch_size, epochs, lr_mult, clip_mult):")
    for (dataset, epsilon), row in best.items():
        print(f"{dataset:14s} eps={epsilon:<4g} {row}")


if __name__ == "__main__":
    main()

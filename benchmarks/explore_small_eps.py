"""Grid of DPLogisticRegression settings at small epsilon (issue 6 probes).

Every combination of the ``--grid`` values is fitted over ``--seeds`` seeds on
each data set and epsilon of ``bench_logistic.py``; one CSV line per setting
with the mean test accuracy (and its standard deviation over seeds). Test
accuracy is used, so this benchmarks rules, it does not tune a private model.

``--grid`` entries are ``key=v1,v2,...`` with ``key`` any estimator parameter
or ``lr_mult`` / ``clip_mult`` (multiples of the "auto" step and of the
gradient bound, see ``bench_logistic.estimator_params``). ``--preprocess
center`` maps breast cancer's training min/max to [-1, 1] instead of [0, 1]
and digits' pixels to ``x / 8 - 1`` (same row-norm bounds).

Example::

    PYTHONPATH=.:benchmarks python benchmarks/explore_small_eps.py \\
        --datasets digits --epsilons 0.1 --neighbouring add-remove \\
        --incumbent-delta --grid batch_size=256,1347 epochs=10,30
"""

import argparse
import itertools
import math
import warnings

from bench_logistic import evaluate, load


def _value(text):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def load_variant(name, preprocess):
    """``bench_logistic.load`` with an optional centred feature map."""
    X_train, X_test, y_train, y_test, row_norm = load(name)
    if preprocess == "center":
        if name == "breast_cancer":
            X_train, X_test = 2 * X_train - 1, 2 * X_test - 1
        elif name == "digits":
            X_train, X_test = 2 * X_train - 1, 2 * X_test - 1
        else:
            raise ValueError(f"no centred map for {name!r}")
    elif preprocess != "none":
        raise ValueError(preprocess)
    return X_train, X_test, y_train, y_test, row_norm


def _apply_rules(config, n, epsilon):
    """Resolve rule keys: ``bdiv`` (batch = clip(n // bdiv, 32, 256)) and
    ``travel`` (lr_mult = min(64, travel * n * epsilon / steps))."""
    bdiv = config.pop("bdiv", None)
    if bdiv not in (None, "none"):
        config["batch_size"] = int(min(256, max(32, n // bdiv)))
    travel = config.pop("travel", None)
    smin = config.pop("smin", None)
    b = config.get("batch_size", 256)
    epochs = config.get("epochs", "auto")
    if epochs == "auto":
        epochs = max(30, min(120, round(15 * epsilon)))
    if smin not in (None, "none"):
        epochs = max(epochs, -(-smin // -(-n // min(b, n))))
        config["epochs"] = epochs
    if travel not in (None, "none"):
        if travel == "rel":
            travel = 32 if config.get("neighbouring") == "add-remove" else 16
        steps = -(-n // min(b, n)) * epochs
        config["lr_mult"] = min(64.0, travel * n * epsilon / steps)
        config.setdefault("clip_mult", 0.05)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["digits"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.1])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--grid", nargs="*", default=[])
    parser.add_argument("--preprocess", default="none", choices=["none", "center"])
    parser.add_argument(
        "--neighbouring", default="replace-one", choices=["replace-one", "add-remove"]
    )
    parser.add_argument("--incumbent-delta", action="store_true")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    keys, values = [], []
    for entry in args.grid:
        key, _, text = entry.partition("=")
        keys.append(key)
        values.append([_value(v) for v in text.split(",")])
    delta = "n^-1.1" if args.incumbent_delta else None
    print(f"# {args.neighbouring} delta={delta or 'default'} {args.preprocess}")
    print("dataset,epsilon," + ",".join(keys) + ",accuracy,std", flush=True)
    for dataset in args.datasets:
        data = load_variant(dataset, args.preprocess)
        n = data[0].shape[0]
        for epsilon in args.epsilons:
            for combo in itertools.product(*values):
                config = {
                    "batch_sampling": "poisson",
                    "neighbouring": args.neighbouring,
                }
                for key, value in zip(keys, combo, strict=True):
                    if key == "batch_size" and value == "n":
                        value = n
                    if key == "batch_size" and isinstance(value, float):
                        value = max(1, int(math.ceil(value * n)))  # rate q
                    config[key] = value
                _apply_rules(config, n, epsilon)
                mean, std, _, _ = evaluate(
                    data, config, epsilon, args.seeds, args.neighbouring, delta
                )
                cells = ",".join(str(v) for v in combo)
                print(f"{dataset},{epsilon:g},{cells},{mean:.4f},{std:.4f}", flush=True)


if __name__ == "__main__":
    main()

"""A fixed list of reference fits and their fingerprints.

Every estimator, solver and sampler, both neighbouring relations, binary and
multiclass, and synthetic data with both methods, each on a small seeded table.
A fingerprint records what a fit releases (coefficients, probabilities,
noise, the reported spend as hexadecimal floats; a sampled table's digest),
and ``tests/test_reference_fits.py`` compares floats to a relative 1e-6:
their last bits differ between CPUs (numpy's vectorised ``exp``, ``log`` and
products take other paths on other instruction sets), while a change of
behaviour (another draw, batch, step or bound) moves them far more.

Record the fingerprints again (only when a change of behaviour is intended and
said so in the commit) with::

    python tests/_reference_fits.py
"""

import hashlib
import json
import pathlib
import warnings

import numpy as np

RECORD = pathlib.Path(__file__).parent / "data" / "reference_fits.json"


def _float(x):
    return float(x).hex()


def _values(*arrays):
    """The arrays' values, flattened, as hexadecimal floats."""
    return [_float(v) for a in arrays for v in np.ravel(a)]


def _spent(spent):
    return [_float(spent.epsilon), _float(spent.delta), str(spent.neighbouring)]


def _classification(n_classes, n=600, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d)) / np.sqrt(d)
    W = rng.normal(size=(d, n_classes))
    y = np.argmax(X @ W * 4 + rng.gumbel(size=(n, n_classes)), axis=1)
    return X, y


def _logistic_cases():
    from skdp.linear_model import DPLogisticRegression

    cases = []
    for n_classes in (2, 3):
        for sampling in ("poisson", "shuffle", "cyclic"):
            for solver in ("dp-sgd", "dp-sgld"):
                for relation in ("replace-one", "add-remove"):
                    if solver == "dp-sgld" and sampling == "poisson":
                        continue
                    if relation == "add-remove" and sampling != "poisson":
                        continue
                    params = dict(
                        epsilon=1.0,
                        batch_sampling=sampling,
                        solver=solver,
                        neighbouring=relation,
                        random_state=0,
                        classes=list(range(n_classes)),
                        alpha=1e-3 if solver == "dp-sgld" else 0.0,
                    )
                    if relation == "add-remove":
                        params["delta"] = 1e-5
                    cases.append(
                        (
                            f"logistic-{n_classes}-{sampling}-{solver}-{relation}",
                            DPLogisticRegression,
                            params,
                            n_classes,
                        )
                    )
    extra = [
        ("logistic-row-norm", dict(epsilon=2.0, row_norm=1.0, random_state=1)),
        (
            "logistic-fixed-noise",
            dict(
                epsilon=None,
                noise_multiplier=2.0,
                batch_sampling="shuffle",
                epochs=3,
                calibration_share=0.0,
                random_state=2,
            ),
        ),
        (
            "logistic-no-share",
            dict(
                epsilon=0.5, calibration_share=0.0, fit_intercept=False, random_state=3
            ),
        ),
        (
            "logistic-elastic",
            dict(
                epsilon=4.0,
                alpha=1e-2,
                l1_ratio=0.5,
                lr_schedule="decreasing",
                batch_size=64,
                batch_sampling="cyclic",
                random_state=4,
            ),
        ),
    ]
    for name, params in extra:
        cases.append((name, DPLogisticRegression, params, 2))
    return cases


def _fit_logistic(cls, params, n_classes):
    X, y = _classification(n_classes)
    model = cls(**params).fit(X, y)
    out = {
        "coef": _values(model.coef_, model.intercept_),
        "noise": _float(model.noise_multiplier_),
        "spent": _spent(model.privacy_spent_),
        "n_iter": int(model.n_iter_),
        "proba": _values(model.predict_proba(X[:50])),
    }
    if params.get("epsilon") is not None:
        z, spent, delta = cls(**params).privacy_plan(len(y), n_classes)
        out["plan"] = [_float(z), _spent(spent), _float(delta)]
    return out


def _fairness_cases():
    from skdp.fairness import DPSaddlePointClassifier

    return [
        (
            "saddle-gda",
            DPSaddlePointClassifier,
            dict(epsilon=1.0, groups=[0, 1, 2], random_state=0),
        ),
        (
            "saddle-gda-add-remove",
            DPSaddlePointClassifier,
            dict(
                epsilon=1.0,
                delta=1e-5,
                groups=[0, 1, 2],
                neighbouring="add-remove",
                random_state=1,
            ),
        ),
        (
            "saddle-gda-precondition",
            DPSaddlePointClassifier,
            dict(epsilon=2.0, groups=[0, 1, 2], precondition=True, random_state=2),
        ),
        (
            "saddle-mirror",
            DPSaddlePointClassifier,
            dict(epsilon=1.0, groups=[0, 1, 2], solver="mirror", random_state=3),
        ),
        (
            "saddle-one-group",
            DPSaddlePointClassifier,
            dict(epsilon=1.0, random_state=4),
        ),
    ]


def _fit_fairness(cls, params):
    X, y = _classification(2, n=900, seed=5)
    groups = np.random.default_rng(6).integers(0, 3, size=len(y))
    sensitive = None if params.get("groups") is None else groups
    model = cls(**params).fit(X, y, sensitive_features=sensitive)
    out = {
        "coef": _values(model.coef_, model.intercept_, model.group_weights_),
        "noise": _float(model.noise_multiplier_),
        "spent": _spent(model.privacy_spent_),
    }
    if params.get("groups") is not None:
        z, spent, delta = cls(**params).privacy_plan(len(y), n_features=X.shape[1])
        out["plan"] = [_float(z), _spent(spent), _float(delta)]
    return out


def _table(n=800, seed=7):
    import pandas as pd

    rng = np.random.default_rng(seed)
    age = rng.integers(18, 90, size=n)
    income = np.round(rng.lognormal(10, 1, size=n), 2).clip(0, 500_000)
    colour = rng.choice(["red", "green", "blue"], size=n, p=[0.5, 0.3, 0.2])
    flag = (age + rng.normal(0, 10, size=n) > 50).astype(int)
    frame = pd.DataFrame({"age": age, "income": income, "colour": colour, "flag": flag})
    domain = {
        "age": (18, 90),
        "income": (0.0, 500_000.0),
        "colour": ["red", "green", "blue"],
        "flag": [0, 1],
    }
    return frame, domain


def _synthetic_cases():
    from skdp.synthetic import DPSyntheticData

    return [
        ("synthetic-aim", DPSyntheticData, dict(epsilon=1.0, random_state=0)),
        (
            "synthetic-aim-add-remove",
            DPSyntheticData,
            dict(epsilon=1.0, delta=1e-5, neighbouring="add-remove", random_state=1),
        ),
        (
            "synthetic-aim-fixed-bins",
            DPSyntheticData,
            dict(epsilon=3.0, bins=8, binning="fixed", random_state=2),
        ),
        (
            "synthetic-tree",
            DPSyntheticData,
            dict(epsilon=1.0, method="tree", random_state=3),
        ),
    ]


def _fit_synthetic(cls, params):
    frame, domain = _table()
    model = cls(domain=domain, **params).fit(frame)
    sample = model.sample(300)
    return {
        "table": hashlib.sha256(sample.to_csv().encode()).hexdigest()[:20],
        "noise": _float(model.noise_multiplier_),
        "spent": _spent(model.privacy_spent_),
        "selected": [list(map(str, s)) for s in model.selected_],
    }


def _scaler_cases():
    from skdp.preprocessing import DPStandardScaler

    return [
        (
            "scaler",
            DPStandardScaler,
            dict(epsilon=1.0, bounds=([-1.0] * 5, [1.0] * 5), random_state=0),
        )
    ]


def _fit_scaler(cls, params):
    X, _ = _classification(2)
    model = cls(**params).fit(X)
    return {
        "state": _values(model.mean_, model.scale_),
        "spent": _spent(model.privacy_spent_),
    }


def _fit_search():
    from skdp.linear_model import DPLogisticRegression
    from skdp.model_selection import search_privacy

    grid = {"epsilon": [0.5, 1.0], "batch_sampling": ["poisson", "cyclic"]}
    spent = search_privacy(
        DPLogisticRegression(classes=[0, 1, 2]), grid, n_samples=600, cv=3
    )
    return {"spent": _spent(spent)}


def reference_cases():
    """Return ``[(name, fit)]``: each ``fit()`` returns its fingerprint."""
    cases = []
    for name, cls, params, k in _logistic_cases():
        cases.append((name, lambda c=cls, p=params, k=k: _fit_logistic(c, p, k)))
    for name, cls, params in _fairness_cases():
        cases.append((name, lambda c=cls, p=params: _fit_fairness(c, p)))
    for name, cls, params in _synthetic_cases():
        cases.append((name, lambda c=cls, p=params: _fit_synthetic(c, p)))
    cases.append(("search-privacy", _fit_search))
    for name, cls, params in _scaler_cases():
        cases.append((name, lambda c=cls, p=params: _fit_scaler(c, p)))
    return cases


def _is_hex_float(value):
    return isinstance(value, str) and value.lstrip("-").startswith("0x")


def same(found, recorded, rtol=1e-6):
    """Whether two fingerprints agree: floats to ``rtol``, the rest exactly.

    Returns
    -------
    list of str
        Where they differ (empty if they agree).
    """
    if _is_hex_float(found) and _is_hex_float(recorded):
        a, b = float.fromhex(found), float.fromhex(recorded)
        return [] if np.isclose(a, b, rtol=rtol, atol=1e-12) else [f"{a!r} != {b!r}"]
    if isinstance(found, dict) and isinstance(recorded, dict):
        if sorted(found) != sorted(recorded):
            return [f"keys {sorted(found)} != {sorted(recorded)}"]
        return [f"{k}: {d}" for k in found for d in same(found[k], recorded[k], rtol)]
    if isinstance(found, list) and isinstance(recorded, list):
        if len(found) != len(recorded):
            return [f"length {len(found)} != {len(recorded)}"]
        return [
            f"[{i}] {d}"
            for i, (x, y) in enumerate(zip(found, recorded, strict=True))
            for d in same(x, y, rtol)
        ]
    return [] if found == recorded else [f"{found!r} != {recorded!r}"]


def fingerprint(fit):
    """Run one reference fit with warnings silenced; return its fingerprint."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit()


if __name__ == "__main__":
    record = {name: fingerprint(fit) for name, fit in reference_cases()}
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(record)} reference fits in {RECORD}")

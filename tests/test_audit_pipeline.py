"""Audits of real pipelines: a schema encoder first, a DataFrame in, a verdict out."""

import math
import sys

import numpy as np
import pytest
from _broken import NoiseDividedBy100
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdp import DPLogisticRegression, PrivacyLeakWarning, TableSchema
from skdp.audit import AuditResult, audit
from skdp.datasets import load_adult
from skdp.pipeline import make_private_pipeline
from skdp.preprocessing import SchemaEncoder

pd = pytest.importorskip("pandas")

SCHEMA = TableSchema(
    {
        "age": (17, 90),
        "hours_per_week": (1, 99),
        "sex": ["Female", "Male"],
        "race": ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"],
    },
    classes=[0, 1],
)
# Full-batch cyclic DP-SGD, one pass, clipping always active (as in _broken.py).
STRONG = {
    "batch_sampling": "cyclic",
    "epochs": 1,
    "batch_size": 30,
    "fit_intercept": False,
    "max_grad_norm": 0.25,
}


@pytest.fixture(scope="module")
def adult():
    X, y = load_adult(split="train", return_X_y=True, as_frame=True)
    X = X[SCHEMA.features].iloc[:30].reset_index(drop=True)
    return X, y.iloc[:30].to_numpy()


def result(epsilon_lower, epsilon_reported):
    return AuditResult(
        epsilon_lower=epsilon_lower,
        epsilon_reported=epsilon_reported,
        delta=1e-5,
        tpr=0.9,
        fpr=0.1,
        threshold=0.0,
        scores_in=np.zeros(2),
        scores_out=np.zeros(2),
        n_trials=4,
        alpha=0.05,
    )


def test_result_reads_as_a_verdict():
    ok, bad, none = result(0.4, 1.0), result(2.5, 1.0), result(0.0, math.nan)
    assert ok.verdict == "consistent with the claim"
    assert bad.verdict == "refutes the claim"
    assert none.verdict == "no claim to test"
    assert str(ok).startswith("Audit consistent with the claim: epsilon >= 0.4")
    assert str(bad).startswith("Audit refutes the claim: epsilon >= 2.5")
    assert "verdict='refutes the claim'" in repr(bad)
    assert bad.to_dict()["verdict"] == "refutes the claim"


def test_plot_without_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r'pip install "skdp\[plot\]"'):
        result(0.4, 1.0).plot()


def test_schema_pipeline_on_a_dataframe_passes(adult):
    X, y = adult
    pipe = make_private_pipeline(SCHEMA, DPLogisticRegression(epsilon=1.0, **STRONG))
    out = audit(pipe, X, y, n_trials=200, random_state=0)
    assert out.verdict == "consistent with the claim"
    assert out.epsilon_reported == pytest.approx(1.0, rel=0.05)


def test_schema_pipeline_audit_has_teeth(adult):
    X, y = adult
    pipe = make_private_pipeline(SCHEMA, NoiseDividedBy100(epsilon=1.0, **STRONG))
    out = audit(pipe, X, y, n_trials=200, random_state=0)
    assert out.verdict == "refutes the claim"
    assert out.epsilon_lower > 1.0


def test_plain_pipeline_reports_the_composed_spend(adult):
    X, y = adult
    pipe = make_pipeline(
        SchemaEncoder(SCHEMA),
        DPLogisticRegression(epsilon=1.0, row_norm=2.0, classes=[0, 1], **STRONG),
    )
    out = audit(pipe, X, y, n_trials=8, random_state=0)
    assert out.epsilon_reported == pytest.approx(1.0, rel=0.05)


def test_canary_rows_are_rows_of_the_table(adult):
    X, y = adult
    pipe = make_private_pipeline(SCHEMA, DPLogisticRegression(epsilon=1.0, **STRONG))
    seen = []

    def score(est):
        seen.append(est)
        return 0.0

    audit(
        pipe,
        X,
        y,
        canary=({"age": 90, "sex": "Female"}, 1),
        score=score,
        n_trials=8,
        random_state=0,
    )
    assert len(seen) == 8


def test_add_remove_drops_the_canary_row(adult):
    X, y = adult
    pipe = make_private_pipeline(
        SCHEMA,
        DPLogisticRegression(
            epsilon=1.0, neighbouring="add-remove", delta=1e-5, epochs=2, batch_size=10
        ),
    )
    out = audit(pipe, X, y, n_trials=20, random_state=0)
    assert out.verdict == "consistent with the claim"


def test_audit_warns_about_a_leaking_step(adult):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(40, 2))
    y = (X[:, 0] > 0.5).astype(int)
    pipe = make_pipeline(
        StandardScaler(), DPLogisticRegression(classes=[0, 1], epochs=1)
    )
    with pytest.warns(PrivacyLeakWarning, match="'standardscaler'"):
        audit(pipe, X, y, canary=(X[0], 1), n_trials=8, random_state=0)

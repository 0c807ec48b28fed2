"""The audit's fits run on a dask cluster through joblib, unchanged."""

import numpy as np
import pytest

from skdp.audit import audit
from skdp.linear_model import DPLogisticRegression

distributed = pytest.importorskip("distributed")


def test_audit_on_a_local_dask_cluster_matches_local_run():
    from joblib import parallel_config

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(200, 4)) / 2
    y = (X[:, 0] > 0).astype(int)
    est = DPLogisticRegression(
        epsilon=None, noise_multiplier=2.0, batch_size=50, epochs=1, row_norm=1.0
    )
    local = audit(est, X, y, n_trials=40, random_state=0, n_jobs=1)
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster),
    ):
        with parallel_config(backend="dask"):
            remote = audit(est, X, y, n_trials=40, random_state=0, n_jobs=2)
    np.testing.assert_allclose(remote.scores_in, local.scores_in, rtol=1e-6)
    np.testing.assert_allclose(remote.scores_out, local.scores_out, rtol=1e-6)
    assert remote.epsilon_lower == pytest.approx(local.epsilon_lower)

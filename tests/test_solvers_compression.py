"""Domain compression: rare levels merged, numeric bins cut into runs, and back."""

import itertools

import numpy as np
import pytest

from skdp._solvers._aim import AIMPolicy, _coarse_groups, estimate_total, fit_aim
from skdp._solvers._compression import (
    compress_column,
    compressed_measurement,
    expand_codes,
    ordered_runs,
)
from skdp._solvers._measure import count_table
from skdp._solvers._pgm import Measurement, coarsen
from skdp.schema import Categorical, Numeric
from skdp.synthetic import DPSyntheticData

pd = pytest.importorskip("pandas")

#: The kernel bandwidth (bins) the rounds use.
BANDWIDTH = AIMPolicy().smooth_bins


def test_runs_are_adjacent_bins_cut_at_the_estimated_quantiles():
    rng = np.random.default_rng(0)
    # A skewed column: mass in the first bins, an empty tail, then a missing level.
    counts = np.concatenate([[400, 300, 200, 100, 50, 20], np.zeros(26), [30]])
    noisy = counts + 5.0 * rng.standard_normal(counts.size)
    comp = ordered_runs(noisy, 5.0, ordered=32, runs=4, bandwidth=BANDWIDTH)
    run = comp.mapping[:32]
    assert np.all(np.diff(run) >= 0) and run[0] == 0
    assert comp.n_ordered == run.max() + 1 <= 4
    assert comp.mapping[32] == comp.n_ordered  # the missing level stays apart
    # The empty tail joins the last run instead of taking levels of its own.
    assert np.all(run[10:] == run[-1])
    for level in range(comp.n_levels):
        members = comp.mapping == level
        assert comp.probs[members].sum() == pytest.approx(1.0)
        assert np.all(comp.probs[members] >= 0)
    # Fewer runs than asked is fine; asking for as many as bins changes nothing.
    same = compress_column(noisy, 5.0, None, ordered=32, runs=40, bandwidth=BANDWIDTH)
    np.testing.assert_array_equal(same.mapping, np.arange(33))


def _enumerate_neighbours(codes, sizes):
    """Every replace-one neighbour and every add / remove neighbour of ``codes``."""
    records = list(itertools.product(*(range(s) for s in sizes)))
    for i in range(codes.shape[0]):
        yield "add-remove", np.delete(codes, i, axis=0)
        for record in records:
            other = codes.copy()
            other[i] = record
            yield "replace-one", other
    for record in records:
        yield "add-remove", np.vstack([codes, record])


def test_runs_keep_every_record_in_one_cell_and_the_sensitivity():
    """Counted on runs (and coarsened runs), one record still moves one unit.

    The runs are fixed (post-processing of a released measurement); for every
    neighbour of a small table, every measured marginal on the compressed
    codes moves by at most sqrt(2) (replace-one) or 1 (add/remove) in L2 and
    2 or 1 in L1, and every table sums to the number of rows.
    """
    rng = np.random.default_rng(1)
    sizes = (7, 3)  # 6 ordered bins + a missing level, a 3-level category
    codes = np.column_stack([rng.integers(0, 7, size=12), rng.integers(0, 3, size=12)])
    noisy = np.bincount(codes[:, 0], minlength=7) + rng.standard_normal(7)
    comp = [
        ordered_runs(noisy, 1.0, ordered=6, runs=3, bandwidth=BANDWIDTH),
        compress_column(
            np.bincount(codes[:, 1], minlength=3).astype(float),
            1.0,
            None,
            bandwidth=BANDWIDTH,
        ),
    ]
    small = tuple(c.n_levels for c in comp)
    groups = _coarse_groups(comp[0], 6, 1)  # runs coarsened further, if any

    def tables(table_codes):
        mapped = np.column_stack(
            [c.mapping[table_codes[:, j]] for j, c in enumerate(comp)]
        )
        out = [count_table(mapped, (0,), small), count_table(mapped, (0, 1), small)]
        if groups is not None:
            out.append(coarsen(out[1], (groups, None)))
        return out

    base = tables(codes)
    assert all(t.sum() == codes.shape[0] for t in base)
    worst = {"replace-one": [0.0, 0.0], "add-remove": [0.0, 0.0]}
    for relation, other in _enumerate_neighbours(codes, sizes):
        for a, b in zip(base, tables(other), strict=True):
            assert b.sum() == other.shape[0]
            diff = (a - b).ravel()
            worst[relation][0] = max(worst[relation][0], np.linalg.norm(diff))
            worst[relation][1] = max(worst[relation][1], np.abs(diff).sum())
    assert worst["replace-one"][0] == pytest.approx(np.sqrt(2.0))
    assert worst["replace-one"][1] == pytest.approx(2.0)
    assert worst["add-remove"] == [pytest.approx(1.0), pytest.approx(1.0)]


def test_expanded_codes_stay_in_their_run():
    rng = np.random.default_rng(2)
    noisy = np.array([50.0, 40, 30, 0, 0, 0, 0, 60, 5])
    comp = ordered_runs(noisy, 2.0, ordered=8, runs=3, bandwidth=BANDWIDTH)
    compressed = rng.integers(0, comp.n_levels, size=(500, 1))
    out = expand_codes(compressed, [comp], rng)
    np.testing.assert_array_equal(comp.mapping[out[:, 0]], compressed[:, 0])


def test_fit_aim_with_runs_spends_the_same_budget():
    rng = np.random.default_rng(3)
    codes = np.column_stack(
        [rng.integers(0, 32, size=400), rng.integers(0, 3, size=400)]
    )
    # Without the split rule: the rounds run whatever the signal.
    rounds = AIMPolicy(min_signal=None)
    plain = fit_aim(
        codes, (32, 3), 0.05, np.random.default_rng(0), ordered=[32, 0], policy=rounds
    )
    runs = fit_aim(
        codes,
        (32, 3),
        0.05,
        np.random.default_rng(0),
        ordered=[32, 0],
        runs_numeric=True,
        policy=rounds,
    )
    assert runs.model.compression[0].n_levels < 32
    assert runs.rho_used <= 0.05 * (1 + 1e-9) and plain.rho_used <= 0.05 * (1 + 1e-9)
    assert len(runs.events) >= 2


@pytest.mark.parametrize("binning", ["adaptive", "fixed"])
def test_skewed_numeric_columns_sample_in_range_and_deterministically(binning):
    rng = np.random.default_rng(4)
    n = 1500
    X = pd.DataFrame(
        {
            "amount": np.round(rng.lognormal(3, 1, size=n), 2),
            "count": rng.poisson(2, size=n),
            "kind": rng.choice(["a", "b", "c"], size=n),
        }
    )
    domain = {
        "amount": Numeric(0.0, 5000.0),
        "count": Numeric(0, 100),
        "kind": Categorical(["a", "b", "c"]),
    }

    def fit():
        return DPSyntheticData(
            epsilon=1.0, domain=domain, binning=binning, random_state=7, max_cells=5000
        ).fit(X)

    model = fit()
    synth = model.sample()
    pd.testing.assert_frame_equal(synth, fit().sample())
    assert synth["amount"].between(0.0, 5000.0).all()
    assert synth["count"].dtype == np.int64 and synth["count"].between(0, 100).all()
    levels = model._model.compression[0].n_levels
    assert (levels < 32) if binning == "adaptive" else (levels == 32)
    # Adaptive runs put no noise mass on the empty upper tail of a skewed column.
    if binning == "adaptive":
        assert (synth["amount"] > 2000).mean() < 0.01


# -- domain compression -----------------------------------------------------------


def test_compress_column_merges_only_two_or_more_rare_levels():
    std = 2.0
    comp = compress_column(
        np.array([50.0, 3.0, -1.0, 40.0, 5.9, 0.5]), std, 3.0, bandwidth=BANDWIDTH
    )
    # Below 3 std = 6: levels 1, 2, 4, 5 merge into the last compressed level.
    np.testing.assert_array_equal(comp.mapping, [0, 2, 2, 1, 2, 2])
    np.testing.assert_array_equal(comp.merged, [1, 2, 4, 5])
    # Categorical: shrunk toward the mean by the James-Stein factor, clipped.
    noisy = np.array([3.0, -1.0, 5.9, 0.5])
    factor = 1.0 - std**2 / noisy.var()
    shrunk = np.clip(noisy.mean() + factor * (noisy - noisy.mean()), 0.0, None)
    np.testing.assert_allclose(comp.weights, shrunk / shrunk.sum())
    assert comp.n_levels == 3
    one_rare = compress_column(
        np.array([50.0, 1.0, 40.0]), std, 3.0, bandwidth=BANDWIDTH
    )
    np.testing.assert_array_equal(one_rare.mapping, [0, 1, 2])
    assert one_rare.merged.size == 0
    all_rare = compress_column(np.array([1.0, 1.0]), std, 3.0, bandwidth=BANDWIDTH)
    assert all_rare.merged.size == 0
    all_negative = compress_column(
        np.array([30.0, -2.0, -1.0]), std, 3.0, bandwidth=BANDWIDTH
    )
    np.testing.assert_allclose(all_negative.weights, [0.5, 0.5])


def test_expansion_weights_shrink_noise_to_uniform_and_smooth_ordered_bins():
    # Spread within the noise: a categorical column's merged levels come out
    # uniform, not in proportion to the noise.
    comp = compress_column(
        np.array([500.0, 4.0, -3.0, 2.0, 9.0]), 10.0, 3.0, bandwidth=BANDWIDTH
    )
    np.testing.assert_allclose(comp.weights, np.full(4, 0.25))
    # Ordered bins: the same counts averaged over neighbouring bins.
    noisy = np.array([500.0, 30.0, 0.0, 30.0, 0.0])
    comp = compress_column(noisy, 20.0, 3.0, ordered=5, bandwidth=BANDWIDTH)
    x = np.arange(1.0, 5.0)
    kernel = np.exp(-0.5 * np.square((x[:, None] - x[None, :]) / BANDWIDTH))
    smooth = kernel @ noisy[1:] / kernel.sum(axis=1)
    np.testing.assert_allclose(comp.weights, smooth / smooth.sum())
    # Only the first ``ordered`` levels are bins (a trailing missing level is not).
    comp = compress_column(
        np.array([500.0, 30.0, 0.0, 30.0, 0.0]), 20.0, 3.0, 4, bandwidth=BANDWIDTH
    )
    assert comp.weights[-1] == pytest.approx(0.0)


def test_expansion_weights_estimate_a_smooth_tail_better_than_clipping():
    # A decaying tail of 12 numeric bins measured with noise of the order of
    # its counts: smoothing (ordered) must beat the clipped noisy counts on
    # average over noise draws, in total variation to the true proportions.
    true = 400.0 * np.exp(-np.arange(12) / 4.0)
    std = 60.0
    rng = np.random.default_rng(0)
    gains = []
    for _ in range(200):
        noisy = np.concatenate([[1e5], true + std * rng.standard_normal(12)])
        comp = compress_column(noisy, std, 1e3, ordered=13, bandwidth=BANDWIDTH)
        assert comp.merged.size == 12
        clipped = np.clip(noisy[1:], 0.0, None)
        clipped = clipped / clipped.sum()
        target = true / true.sum()
        gains.append(
            np.abs(clipped - target).sum() - np.abs(comp.weights - target).sum()
        )
    assert np.mean(gains) > 0.02


def test_compressed_measurement_sums_counts_and_variances():
    comp = compress_column(
        np.array([50.0, 3.0, -1.0, 40.0]), 2.0, 3.0, bandwidth=BANDWIDTH
    )
    measured = Measurement((0,), np.array([50.0, 3.0, -1.0, 40.0]), 2.0)
    moved = compressed_measurement(0, measured, comp)
    np.testing.assert_allclose(moved.y, [50.0, 40.0, 2.0])
    np.testing.assert_allclose(moved.std, [2.0, 2.0, 2.0 * np.sqrt(2.0)])
    assert estimate_total([moved]) == pytest.approx(92.0)


def test_expand_codes_inverts_the_mapping_and_draws_merged_levels():
    comp = compress_column(
        np.array([50.0, 3.0, 9.0, 40.0]), 1.0, 20.0, bandwidth=BANDWIDTH
    )
    # Levels 1 and 2 (counts 3 and 9 < 20) merge into compressed level 2.
    codes = np.array([[0], [1], [2]] * 4000)
    out = expand_codes(codes, [comp], np.random.default_rng(0))
    assert np.all(out[codes[:, 0] == 0, 0] == 0)
    assert np.all(out[codes[:, 0] == 1, 0] == 3)
    drawn = out[codes[:, 0] == 2, 0]
    assert set(np.unique(drawn)) == {1, 2}
    # Shrunk toward the mean 6 by 1 - 1 / 9: 8.67 / 12.
    assert comp.weights[1] == pytest.approx((6.0 + 3.0 * 8.0 / 9.0) / 12.0)
    assert np.mean(drawn == 2) == pytest.approx(comp.weights[1], abs=0.03)

"""Count tables, their sensitivity, the counts sources, the exponential draw."""

import itertools
import math

import numpy as np
import pytest

from skdp._solvers._aim import (
    AIMPolicy,
    _downward_closure,
    fit_aim,
    workload_cliques,
)
from skdp._solvers._aim import count_sets as aim_count_sets
from skdp._solvers._measure import (
    CodesCounts,
    CountedTables,
    count_marginals,
    count_sensitivity,
    count_table,
    covering_sets,
    exponential_draw,
    integer_counts,
)
from skdp._solvers._tree import TreePlan, fit_tree_model
from skdp._solvers._tree import count_sets as tree_count_sets


def test_count_marginals_parallel_equals_serial():
    rng = np.random.default_rng(4)
    sizes = (3, 5, 2, 4)
    codes = np.column_stack([rng.integers(s, size=500) for s in sizes])
    sets = _downward_closure(workload_cliques(4, "3-way"))
    serial = count_marginals(codes, sizes, sets)
    parallel = count_marginals(codes, sizes, sets, n_jobs=2)
    assert serial.keys() == parallel.keys()
    for key in serial:
        np.testing.assert_array_equal(serial[key], parallel[key])
        assert serial[key].sum() == 500


def _neighbours(codes, sizes, relation):
    """Every neighbour of ``codes`` under ``relation`` (all records of the domain)."""
    records = np.array(list(itertools.product(*(range(s) for s in sizes))))
    if relation == "replace-one":
        out = []
        for i in range(codes.shape[0]):
            for record in records:
                other = codes.copy()
                other[i] = record
                out.append(other)
        return out
    removed = [np.delete(codes, i, axis=0) for i in range(codes.shape[0])]
    return removed + [np.vstack([codes, record]) for record in records]


@pytest.mark.parametrize(
    ("relation", "l1", "l2"),
    [("replace-one", 2.0, math.sqrt(2.0)), ("add-remove", 1.0, 1.0)],
)
def test_count_sensitivity_is_attained_by_enumeration(relation, l1, l2):
    """Over every neighbour, count tables move by at most (and some by) l1, l2."""
    sizes = (2, 3, 2)
    codes = np.column_stack(
        [np.random.default_rng(0).integers(s, size=5) for s in sizes]
    )
    sensitivity = count_sensitivity(relation)
    assert (sensitivity.l1, sensitivity.l2) == (l1, l2)
    worst_l1 = worst_l2 = 0.0
    for columns in [(0,), (1,), (0, 1), (0, 1, 2)]:
        base = count_table(codes, columns, sizes)
        for other in _neighbours(codes, sizes, relation):
            diff = count_table(other, columns, sizes) - base
            worst_l1 = max(worst_l1, np.abs(diff).sum())
            worst_l2 = max(worst_l2, np.sqrt(np.square(diff).sum()))
    assert worst_l1 == pytest.approx(l1)
    assert worst_l2 == pytest.approx(l2)


def test_count_sensitivity_refuses_an_unknown_relation():
    with pytest.raises(ValueError, match="neighbouring must be one of"):
        count_sensitivity("swap-two")


def test_exponential_draw_follows_the_mechanism():
    """Draws are proportional to exp(eps q / (2 Du))."""
    scores = np.array([0.0, 1.0, 3.0, 2.0])
    epsilon, sensitivity = 1.5, 0.75
    rng = np.random.default_rng(0)
    draws = [exponential_draw(scores, epsilon, sensitivity, rng) for _ in range(20000)]
    weights = np.exp(epsilon * scores / (2 * sensitivity))
    np.testing.assert_allclose(
        np.bincount(draws, minlength=4) / 20000, weights / weights.sum(), atol=0.012
    )
    assert all(isinstance(d, int) for d in draws[:10])


# -- counts sources ---------------------------------------------------------------


def _partial_sums(codes, sizes, sets, cuts):
    """Integer tables of ``sets`` summed over the row blocks ``cuts`` (any order)."""
    tables = {s: 0 for s in sets}
    for start, stop in reversed(list(zip(cuts[:-1], cuts[1:], strict=True))):
        for s in sets:
            tables[s] = tables[s] + integer_counts(codes[start:stop], s, sizes)
    return CountedTables(codes.shape[0], sizes, tables)


def _codes(n=700, sizes=(3, 5, 2, 4), seed=2):
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(s, size=n) for s in sizes])
    codes[:, 1] = np.where(rng.random(n) < 0.6, codes[:, 0], codes[:, 1])
    return codes, sizes


def test_covering_sets_are_the_maximal_sets_and_every_column():
    assert covering_sets([(0, 1), (1,), (2, 1)], 4) == [(3,), (0, 1), (1, 2)]
    assert covering_sets([], 2) == [(0,), (1,)]
    sets = workload_cliques(4, "3-way")
    assert covering_sets(_downward_closure(sets), 4) == sets


def test_counted_tables_are_the_tables_of_the_codes():
    """Summed per block and marginalised, in any axis order, bit for bit."""
    codes, sizes = _codes()
    memory = CodesCounts(codes, sizes)
    counted = _partial_sums(
        codes, sizes, covering_sets([(0, 1, 2), (2, 3)], 4), [0, 1, 1, 350, 700]
    )
    assert counted.n_rows == memory.n_rows and counted.n_columns == 4
    for columns in [(0,), (3,), (1, 0), (0, 2, 1), (3, 2), (2,)]:
        expected = memory.table(columns)
        got = counted.table(columns)
        assert got.dtype == expected.dtype and got.flags.c_contiguous
        np.testing.assert_array_equal(got, expected)
    mappings = [
        np.array([0, 1, 1]),
        np.arange(5),
        np.array([0, 0]),
        np.array([2, 0, 1, 0]),
    ]
    sets = [(0,), (0, 1), (1, 2), (2, 3), (0, 1, 2)]
    want = memory.marginals(sets, mappings)
    got = counted.marginals(sets, mappings)
    for s in sets:
        np.testing.assert_array_equal(got[s], want[s])
        assert got[s].flags.c_contiguous


def test_solvers_fit_the_same_from_counted_tables():
    codes, sizes = _codes(1500)
    codes[:, 3] = np.where(np.arange(1500) % 150 == 0, codes[:, 3], codes[:, 3] % 2)
    cuts = [0, 100, 900, 1500]
    for relation in ("replace-one", "add-remove"):
        counted = _partial_sums(codes, sizes, aim_count_sets(4, "2-way"), cuts)
        runs = [
            fit_aim(
                source,
                sizes,
                0.5,
                np.random.default_rng(0),
                neighbouring=relation,
                compress=True,
                ordered=[3, 0, 0, 4],
                runs_numeric=True,
                policy=AIMPolicy(round_iter=5, final_iter=10),
            )
            for source in (codes, counted)
        ]
        merged = runs[0].model.compression[3]
        assert merged.n_levels < merged.mapping.size  # the rare levels merged
        assert runs[0].selected == runs[1].selected
        assert runs[0].n_rows == runs[1].n_rows
        for a, b in zip(runs[0].measurements, runs[1].measurements, strict=True):
            np.testing.assert_array_equal(a.y, b.y)
        for a, b in zip(
            runs[0].model.log_marginals, runs[1].model.log_marginals, strict=True
        ):
            np.testing.assert_array_equal(a, b)
    counted = _partial_sums(codes, sizes, tree_count_sets(4), cuts)
    plan = TreePlan(4)
    fits = [
        fit_tree_model(source, sizes, plan, 0.3, np.random.default_rng(1))
        for source in (codes, counted)
    ]
    assert fits[0].edges == fits[1].edges
    for a, b in zip(
        fits[0].model.conditionals, fits[1].model.conditionals, strict=True
    ):
        np.testing.assert_array_equal(a, b)

"""Count tables, their sensitivity under each relation, the exponential draw."""

import itertools
import math

import numpy as np
import pytest

from skdp._solvers._aim import _downward_closure, workload_cliques
from skdp._solvers._measure import (
    count_marginals,
    count_sensitivity,
    count_table,
    exponential_draw,
)


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

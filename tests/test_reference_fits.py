"""Reference fits stay the same (see ``tests/_reference_fits.py``)."""

import json

import pytest
from _reference_fits import RECORD, fingerprint, reference_cases, same

_RECORDED = json.loads(RECORD.read_text())
_CASES = dict(reference_cases())


def test_every_case_is_recorded():
    assert sorted(_CASES) == sorted(_RECORDED)


@pytest.mark.parametrize("name", sorted(_CASES))
def test_reference_fit_is_unchanged(name):
    differences = same(fingerprint(_CASES[name]), _RECORDED[name])
    assert not differences, differences[:5]


def test_the_comparison_sees_a_change_of_behaviour():
    """A float moved by 1e-5 relative, a digest or a count that differs."""
    recorded = {"coef": [(0.5).hex()], "n_iter": 3, "table": "ab"}
    assert not same(
        {"coef": [(0.5 * (1 + 1e-9)).hex()], "n_iter": 3, "table": "ab"}, recorded
    )
    assert same(
        {"coef": [(0.5 * (1 + 1e-5)).hex()], "n_iter": 3, "table": "ab"}, recorded
    )
    assert same({"coef": [(0.5).hex()], "n_iter": 4, "table": "ab"}, recorded)
    assert same({"coef": [(0.5).hex()], "n_iter": 3, "table": "ac"}, recorded)

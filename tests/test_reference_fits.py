"""Reference fits stay bit-identical (see ``tests/_reference_fits.py``)."""

import json

import pytest
from _reference_fits import RECORD, fingerprint, reference_cases

_RECORDED = json.loads(RECORD.read_text())
_CASES = dict(reference_cases())


def test_every_case_is_recorded():
    assert sorted(_CASES) == sorted(_RECORDED)


@pytest.mark.parametrize("name", sorted(_CASES))
def test_reference_fit_is_bit_identical(name):
    assert fingerprint(_CASES[name]) == _RECORDED[name]

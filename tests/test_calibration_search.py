"""The noise search of calibration: its result, its safeguards, its cost.

A toy accountant whose epsilon is any function of the noise drives
:func:`skdp.accounting._calibration.calibrate`, so every shape the search
must survive (infinite epsilon, flat steps, slopes far outside the secant's
trusted range, targets met everywhere or nowhere) is checked directly.
"""

import math

import pytest

from skdp.accounting import GaussianEvent, PoissonGaussianEvent, RDPAccountant
from skdp.accounting._calibration import calibrate
from skdp.accounting._policy import DEFAULT_POLICY

DELTA = 1e-5


class _Toy:
    """An accountant whose epsilon at noise ``z`` is ``curve(z)``; it counts calls."""

    def __init__(self, curve, calls=None, later=()):
        self.curve = curve
        self.calls = [] if calls is None else calls
        self.later = later
        self.z = None

    def fresh(self):
        return _Toy(self.curve, self.calls, self.later)

    def calibration_stages(self):
        return (self.fresh(), *self.later)

    def compose(self, z, count):
        self.z = z

    def get_epsilon(self, delta, warn=True):
        self.calls.append(self.z)
        return self.curve(self.z)

    def spent(self, delta, warn=True):
        return self.curve(self.z)


def _search(curve, target=1.0, later=()):
    toy = _Toy(curve, later=later)
    z, spent = calibrate(lambda z: z, target, DELTA, toy)
    return z, spent, toy.calls


@pytest.mark.parametrize(
    "curve, crossing",
    [
        (lambda z: 3.0 / z, 3.0),
        (lambda z: 50.0 / z**2, math.sqrt(50.0)),
        (lambda z: 1e4 / z**6, 1e4 ** (1 / 6)),
        (lambda z: 0.5 / z**0.3, 0.5 ** (1 / 0.3)),
        (lambda z: math.inf if z < 7.0 else 7.0 / z, 7.0),
    ],
    ids=["slope-1", "slope-2", "steep", "shallow", "infinite-below"],
)
def test_the_noise_meets_the_target_within_the_tolerance(curve, crossing):
    z, spent, _ = _search(curve)
    assert spent <= 1.0
    assert spent >= (1.0 - DEFAULT_POLICY.target_rtol) or z <= crossing * (1 + 1e-9)
    assert z >= crossing * (1 - 1e-12)


def test_a_gaussian_composition_takes_a_few_evaluations():
    _, spent, calls = _search(lambda z: 4.0 / z)
    assert spent <= 1.0
    assert len(calls) <= 4


def test_a_step_in_epsilon_ends_at_the_step():
    """No noise reaches the window: the search stops a float's width above the step."""
    z, spent, _ = _search(lambda z: 2.0 if z < 10.0 else 0.1)
    assert spent == 0.1
    assert 10.0 <= z <= 10.0 * (1 + 1e-9)


def test_a_target_met_everywhere_gives_the_smallest_noise():
    z, spent, _ = _search(lambda z: 1e-3)
    assert z == DEFAULT_POLICY.min_noise
    assert spent == 1e-3


def test_a_target_met_nowhere_is_refused():
    with pytest.raises(ValueError, match="No noise multiplier up to"):
        _search(lambda z: 5.0)


def test_a_later_stage_continues_below_and_reports():
    later = _Toy(lambda z: 2.0 / z)
    z, _, _ = _search(lambda z: 3.0 / z, later=(later,))
    assert 2.0 <= z <= 2.0 / (1 - DEFAULT_POLICY.target_rtol)
    assert later.calls


def test_a_later_stage_that_misses_the_target_is_skipped():
    later = _Toy(lambda z: 4.0 / z)
    z, _, _ = _search(lambda z: 3.0 / z, later=(later,))
    assert 3.0 <= z <= 3.0 / (1 - DEFAULT_POLICY.target_rtol)


@pytest.mark.parametrize("target", [0.1, 1.0, 8.0])
def test_renyi_calibration_lands_in_the_window(target):
    def family(z):
        return PoissonGaussianEvent(0.01, z, count=2000)

    z, spent = calibrate(family, target, DELTA, RDPAccountant())
    assert (1 - DEFAULT_POLICY.target_rtol) * target <= spent.epsilon <= target


def test_each_noise_is_accounted_once():
    calls = []

    def family(z):
        calls.append(z)
        return GaussianEvent(z, count=10)

    calibrate(family, 1.0, DELTA, RDPAccountant())
    assert len(calls) - 1 == len(set(calls))  # the report recomputes the last

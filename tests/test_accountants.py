"""The accountant classes, the one name-to-accountant map, events in per-record
units, the one cache, and the package's import structure
(``skdp/accounting/_accountant.py``, ``_calibration.py``, ``events.py``,
``_cache.py``)."""

import ast
import dataclasses
import json
import math
import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from skdp.accounting import (
    DEFAULT_ORDERS,
    NEIGHBOURING_RELATIONS,
    Accountant,
    GaussianEvent,
    GaussianSumEvent,
    GDPAccountant,
    Neighbouring,
    NoisyIterationEvent,
    PLDAccountant,
    PoissonGaussianEvent,
    PrivacySpent,
    RandomAllocationGaussianEvent,
    RDPAccountant,
    TightestAccountant,
    account,
    allocation_rdp,
    calibrate_noise_multiplier,
    compose_spent,
    event_rdp,
)
from skdp.accounting._accountant import ACCOUNTANTS, epsilon_text, make_accountant
from skdp.accounting._calibration import calibrate
from skdp.accounting._gdp import gaussian_dp_epsilon
from skdp.accounting._last_iterate import position_coefficients
from skdp.accounting._policy import DEFAULT_POLICY

DELTA = 1e-5
SIZES = [100] * 9 + [37]
ACCOUNTING = Path(__file__).resolve().parents[1] / "skdp" / "accounting"


def _same(a, b):
    """Two spends agree bit for bit on everything they report."""
    assert a.epsilon == b.epsilon or (math.isnan(a.epsilon) and math.isnan(b.epsilon))
    assert (a.delta, a.accountant, a.bound, a.neighbouring) == (
        b.delta,
        b.accountant,
        b.bound,
        b.neighbouring,
    )
    assert a.order == b.order or (math.isnan(a.order) and math.isnan(b.order))
    assert a.orders == b.orders and a.rdp == b.rdp


# -- one unit convention: a Gaussian release of a sum in per-record units --


@pytest.mark.parametrize("relation", NEIGHBOURING_RELATIONS)
@pytest.mark.parametrize("z, count", [(0.7, 1), (3.0, 4), (40.0, 2)])
def test_gaussian_sum_event_is_the_rate_one_poisson_event(relation, z, count):
    """Bit for bit: every accountant, curve and tight bound."""
    new, old = GaussianSumEvent(z, count=count), PoissonGaussianEvent(1.0, z, count)
    for a, b in zip(
        event_rdp(new, DEFAULT_ORDERS, relation),
        event_rdp(old, DEFAULT_ORDERS, relation),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    for accountant in ("rdp", "pld"):
        for delta in (1e-3, 1e-5, 1e-9):
            _same(
                account(new, delta, neighbouring=relation, accountant=accountant),
                account(old, delta, neighbouring=relation, accountant=accountant),
            )


@pytest.mark.parametrize("relation", NEIGHBOURING_RELATIONS)
def test_temperature_release_beside_poisson_steps_is_unchanged(relation):
    """The solver's temperature release, written either way, with DP-SGD steps:
    the same calibrated noise and the same spend (the chained PLD included)."""

    def events(release):
        def make(z):
            return [PoissonGaussianEvent(0.05, z, count=200), release(30.0)]

        return make

    new = calibrate_noise_multiplier(
        events(GaussianSumEvent), 1.0, DELTA, neighbouring=relation, accountant="pld"
    )
    old = calibrate_noise_multiplier(
        events(lambda z: PoissonGaussianEvent(1.0, z)),
        1.0,
        DELTA,
        neighbouring=relation,
        accountant="pld",
    )
    assert new[0] == old[0]
    _same(new[1], old[1])
    assert new[1].accountant == "pld"


@pytest.mark.parametrize("relation", NEIGHBOURING_RELATIONS)
def test_gaussian_sum_applies_the_relations_sensitivity(relation):
    """Per-record units: the sum moves by 2 bounds under replace-one, 1 under
    add/remove; GaussianEvent keeps its noise relative to the relation."""
    factor = Neighbouring.parse(relation).sum_factor
    spent = account(GaussianSumEvent(6.0), DELTA, neighbouring=relation)
    same = account(GaussianEvent(6.0 / factor), DELTA, neighbouring=relation)
    assert spent.epsilon == same.epsilon
    tight = account(
        GaussianSumEvent(6.0), DELTA, neighbouring=relation, accountant="pld"
    )
    assert tight.accountant == "gdp"
    assert tight.epsilon == gaussian_dp_epsilon(factor / 6.0, DELTA)


def test_gaussian_sum_event_validates_like_the_others():
    with pytest.raises(ValueError, match="noise_multiplier"):
        GaussianSumEvent(0.0)
    with pytest.raises(ValueError, match="count"):
        GaussianSumEvent(1.0, count=-1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        GaussianSumEvent(1.0).noise_multiplier = 2.0


# -- the accountants and the one map of names --


def test_names_map_to_accountants_in_one_place():
    assert set(ACCOUNTANTS) == {"rdp", "pld"}
    assert type(make_accountant("rdp")) is RDPAccountant
    assert type(make_accountant("pld")) is TightestAccountant
    for bad in ("gdp-ish", None, ["rdp"]):
        with pytest.raises(ValueError, match="accountant must be one of"):
            make_accountant(bad)


@pytest.mark.parametrize(
    "kind", [RDPAccountant, GDPAccountant, PLDAccountant, TightestAccountant]
)
def test_every_accountant_keeps_the_contract(kind):
    accountant = kind(neighbouring="add-remove")
    assert isinstance(accountant, Accountant)
    assert accountant.neighbouring is Neighbouring.ADD_REMOVE
    assert accountant.neighbouring == "add-remove"
    event = GaussianEvent(3.0, count=2)
    assert accountant.compose(event).compose(event, count=2) is accountant
    spent = accountant.spent(DELTA)
    assert isinstance(spent, PrivacySpent)
    assert type(spent.neighbouring) is str and spent.neighbouring == "add-remove"
    assert spent.epsilon == accountant.get_epsilon(DELTA)
    # Every report keeps the Rényi curve of what was composed.
    renyi = RDPAccountant(neighbouring="add-remove").compose(event, count=3)
    assert spent.rdp == renyi.spent(DELTA).rdp
    # fresh(): empty, same kind and settings; the original is untouched.
    fresh = accountant.fresh()
    assert type(fresh) is kind and fresh is not accountant
    assert fresh.neighbouring is accountant.neighbouring
    np.testing.assert_array_equal(fresh.orders, accountant.orders)
    assert fresh.get_epsilon(DELTA) == 0.0
    assert accountant.get_epsilon(DELTA) == spent.epsilon
    with pytest.raises(ValueError, match="count"):
        accountant.compose(event, count=-1)


@pytest.mark.parametrize("relation", NEIGHBOURING_RELATIONS)
def test_the_tightest_is_the_smaller_of_renyi_and_pld(relation):
    events = [PoissonGaussianEvent(0.02, 1.2, count=500), GaussianSumEvent(20.0)]
    renyi = account(events, DELTA, neighbouring=relation)
    pld = account(
        events, DELTA, neighbouring=relation, accountant=PLDAccountant(relation)
    )
    tight = account(events, DELTA, neighbouring=relation, accountant="pld")
    assert pld.accountant == "pld" and tight.accountant == "pld"
    assert tight.epsilon == pld.epsilon == min(pld.epsilon, renyi.epsilon)
    assert tight.events and not pld.events and not renyi.events


def test_gdp_accountant_is_exact_on_gaussians_and_infinite_elsewhere():
    gaussians = [GaussianEvent(2.0, count=4), GaussianSumEvent(9.0)]
    gdp = account(gaussians, DELTA, accountant=GDPAccountant())
    assert gdp.accountant == "gdp"
    assert gdp.epsilon == account(gaussians, DELTA, accountant="pld").epsilon
    mu = math.sqrt(4 / 2.0**2 + (2 / 9.0) ** 2)
    assert gdp.epsilon == gaussian_dp_epsilon(mu, DELTA)
    cyclic = NoisyIterationEvent.cyclic_sgd(SIZES, 3, 2.0, lipschitz=0.99)
    assert account(cyclic, DELTA, accountant=GDPAccountant()).accountant == "gdp"
    # No exact GDP for subsampled steps: an infinite (valid) epsilon.
    poisson = PoissonGaussianEvent(0.02, 1.2, count=10)
    spent = account(poisson, DELTA, accountant=GDPAccountant())
    assert spent.epsilon == math.inf and spent.accountant == "gdp"
    allocation = RandomAllocationGaussianEvent(4, 2.0)
    assert GDPAccountant().compose(allocation).get_epsilon(DELTA) == math.inf


@pytest.mark.parametrize(
    "events",
    [
        [PoissonGaussianEvent(0.01, 1.1, count=300)],
        [GaussianEvent(3.0, count=4)],
        [NoisyIterationEvent.cyclic_sgd(SIZES, 3, 2.0, lipschitz=0.99, shuffle=True)],
        [RandomAllocationGaussianEvent(8, 1.5, epochs=2)],
    ],
    ids=["poisson", "gaussian", "shuffled", "allocation"],
)
def test_an_instance_is_its_name(events):
    """``accountant=TightestAccountant()`` is ``accountant="pld"``, bit for bit,
    in account and calibration; the instance passed is never changed."""
    instance = TightestAccountant()
    _same(
        account(events, DELTA, accountant=instance),
        account(events, DELTA, accountant="pld"),
    )
    assert instance.get_epsilon(DELTA) == 0.0
    kind = type(events[0])

    def family(z):
        return [
            kind(**{**dataclasses.asdict(e), "noise_multiplier": z}) for e in events
        ]

    if kind is NoisyIterationEvent:
        return  # its record holds arrays; calibrated in test_accounting.py
    by_name = calibrate_noise_multiplier(family, 2.0, DELTA, accountant="pld")
    by_instance = calibrate_noise_multiplier(family, 2.0, DELTA, accountant=instance)
    assert by_name[0] == by_instance[0]
    _same(by_name[1], by_instance[1])
    by_rdp = calibrate_noise_multiplier(family, 2.0, DELTA, accountant=RDPAccountant())
    assert by_rdp[0] == calibrate_noise_multiplier(family, 2.0, DELTA)[0]


def test_an_instance_must_match_the_relation_and_orders_asked_for():
    add_remove = RDPAccountant(neighbouring="add-remove")
    with pytest.raises(ValueError, match="neighbouring='add-remove'"):
        account(GaussianEvent(2.0), DELTA, accountant=add_remove)
    spent = account(
        GaussianEvent(2.0), DELTA, neighbouring="add-remove", accountant=add_remove
    )
    assert spent.neighbouring == "add-remove"
    with pytest.raises(ValueError, match="orders"):
        account(
            GaussianEvent(2.0),
            DELTA,
            orders=[2.0, 3.0],
            accountant=TightestAccountant(),
        )
    custom = TightestAccountant(orders=[2.0, 3.0, 4.0])
    spent = account(
        GaussianEvent(2.0), DELTA, orders=[4.0, 2.0, 3.0], accountant=custom
    )
    assert spent.orders == (2.0, 3.0, 4.0)


def test_calibration_on_the_gdp_accountant_meets_its_target():
    z, spent = calibrate_noise_multiplier(
        lambda z: GaussianEvent(z, count=3), 1.0, DELTA, accountant=GDPAccountant()
    )
    assert spent.accountant == "gdp"
    assert 0.995 * 1.0 <= spent.epsilon <= 1.0
    assert spent.epsilon == gaussian_dp_epsilon(math.sqrt(3) / z, DELTA)


@pytest.mark.parametrize("target", [1e-4, 1e-3, 3e-3])
def test_a_tiny_epsilon_is_reached_by_the_order_grid_not_by_total_variation(target):
    """Below about 0.01 at delta 1e-5 the conversion needs orders above
    1024: with them the calibration meets the target, instead of falling
    back on the total-variation bound (a spend of 0 bought with tens of
    times the noise the target needs)."""
    z, spent = calibrate_noise_multiplier(
        lambda z: GaussianEvent(z, count=2), target, DELTA, accountant=RDPAccountant()
    )
    assert 0.99 * target <= spent.epsilon <= target
    # Within 5% of the classic zCDP conversion rho + 2 sqrt(rho log(1/delta))
    # (Bun and Steinke 2016, Proposition 1.3), rho = count / (2 z^2), which
    # the conversion used never exceeds at its best order: the grid is fine
    # enough there.
    rho = 2 / (2 * z**2)
    assert spent.epsilon <= 1.05 * 2 * math.sqrt(rho * math.log(1 / DELTA)) + rho
    # A valid bound: at least the exact epsilon of the two Gaussians (sqrt(2) / z-GDP).
    assert gaussian_dp_epsilon(math.sqrt(2) / z, DELTA) <= spent.epsilon


def test_calibration_takes_policy_variants_as_an_argument():
    """A coarser bracket tolerance stops earlier, still below the target."""

    def family(z):
        return PoissonGaussianEvent(0.01, z, count=500)

    loose = dataclasses.replace(DEFAULT_POLICY, target_rtol=0.05)
    z_loose, spent_loose = calibrate(family, 1.0, DELTA, RDPAccountant(), loose)
    z, spent = calibrate(family, 1.0, DELTA, RDPAccountant())
    assert spent_loose.epsilon <= spent.epsilon <= 1.0
    assert spent_loose.epsilon >= 0.95
    assert z_loose >= z
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_POLICY.target_rtol = 0.1


def test_a_coarser_pld_slack_is_still_a_valid_looser_bound():
    event = PoissonGaussianEvent(0.05, 1.0, count=200)
    coarse = dataclasses.replace(DEFAULT_POLICY, pld_report_slack=0.05)
    fine = account(
        event,
        DELTA,
        neighbouring="add-remove",
        accountant=PLDAccountant(neighbouring="add-remove"),
    )
    loose = PLDAccountant(neighbouring="add-remove", policy=coarse)
    assert loose.rel_slack == 0.05
    assert loose.fresh().rel_slack == 0.05 and loose.fresh().policy is coarse
    looser = account(event, DELTA, neighbouring="add-remove", accountant=loose)
    renyi = account(event, DELTA, neighbouring="add-remove")
    assert fine.epsilon < looser.epsilon < renyi.epsilon


# -- the report: unchanged value semantics, no import cycle behind at_delta --


@pytest.mark.parametrize(
    "epsilon, digits, text",
    [
        (1.99973, 4, "2"),
        (2.00004, 4, "2.001"),
        (0.99973, 4, "0.9998"),
        (1.0, 4, "1"),
        (0.1, 4, "0.1"),
        (7.2929, 4, "7.293"),
        (7.2929, 6, "7.2929"),
        (1234.5678, 4, "1235"),
        (3e-9, 4, "3e-09"),
        (0.0, 4, "0"),
        (math.inf, 4, "inf"),
    ],
)
def test_epsilon_is_printed_rounded_up(epsilon, digits, text):
    """A printed epsilon is never below the bound it prints."""
    assert epsilon_text(epsilon, digits) == text
    if math.isfinite(epsilon):
        assert float(text) >= epsilon


def test_privacy_spent_repr_never_rounds_epsilon_down():
    spent = account(PoissonGaussianEvent(0.01, 1.1, count=1000), DELTA)
    above = replace(spent, epsilon=2.00004)
    assert "epsilon=2.001," in repr(above)


def test_privacy_spent_prints_and_serialises_as_before():
    spent = account(PoissonGaussianEvent(0.01, 1.1, count=1000), DELTA)
    assert type(spent.neighbouring) is str
    assert repr(spent) == (
        f"PrivacySpent(epsilon={epsilon_text(spent.epsilon)}, delta=1e-05, "
        f"bound='poisson-subsampled-gaussian (replace-one by weak triangle)', "
        f"neighbouring='replace-one', order={spent.order:g}, accountant='rdp')"
    )
    assert json.loads(json.dumps(spent.to_dict())) == {
        "epsilon": spent.epsilon,
        "delta": 1e-05,
        "accountant": "rdp",
        "bound": "poisson-subsampled-gaussian (replace-one by weak triangle)",
        "neighbouring": "replace-one",
        "order": spent.order,
    }
    tight = account(
        PoissonGaussianEvent(0.01, 1.1, count=1000), DELTA, accountant="pld"
    )
    restored = pickle.loads(pickle.dumps(tight))
    assert restored == tight and restored.events == tight.events
    _same(restored.at_delta(1e-6), tight.at_delta(1e-6))
    _same(
        compose_spent([tight, tight]),
        account(
            [(PoissonGaussianEvent(0.01, 1.1, count=1000), 2)], DELTA, accountant="pld"
        ),
    )


def _imports(path):
    """``(module-level imports, imports inside functions)`` of one module."""
    tree = ast.parse(path.read_text())
    top, inner = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inner += [
                n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)
            ]
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:  # from . import module
                top += [alias.name for alias in node.names]
            else:
                top.append(node.module)
    return top, inner


def test_no_import_inside_a_function_and_no_cycle():
    """Every import of the accounting package is at module top, and its
    modules import each other without a cycle."""
    graph = {}
    for path in sorted(ACCOUNTING.glob("*.py")):
        top, inner = _imports(path)
        assert not inner, f"{path.name} imports inside a function"
        graph[path.stem] = {name for name in top if name}
    state = {}

    def visit(name, trail):
        if state.get(name) == "done":
            return
        assert state.get(name) != "open", f"import cycle: {' -> '.join(trail)}"
        state[name] = "open"
        for other in graph.get(name, ()):
            visit(other, [*trail, other])
        state[name] = "done"

    for name in graph:
        visit(name, [name])


# -- the one cache --


def test_position_coefficients_are_cached_on_content():
    position_coefficients.cache_clear()
    first = NoisyIterationEvent.cyclic_sgd(SIZES, 2, 1.0, lipschitz=0.99)
    again = NoisyIterationEvent.cyclic_sgd(SIZES, 2, 7.0, lipschitz=0.99)
    other = NoisyIterationEvent.cyclic_sgd(SIZES, 3, 1.0, lipschitz=0.99)
    assert first is not again and first != again  # identity equality
    cached = position_coefficients(first)
    assert position_coefficients(again) is cached  # the noise is not in the key
    assert position_coefficients(other) is not cached
    with pytest.raises(ValueError):
        cached[0][0] = 1.0  # shared results are read-only
    position_coefficients.cache_clear()
    assert position_coefficients(first) is not cached


def test_the_relation_rule_is_written_once():
    assert NEIGHBOURING_RELATIONS == ("replace-one", "add-remove")
    assert Neighbouring.REPLACE_ONE.hops == 2 and Neighbouring.ADD_REMOVE.hops == 1
    assert Neighbouring.REPLACE_ONE.sum_factor == 2.0
    assert Neighbouring.ADD_REMOVE.sum_sensitivity(1.5) == 1.5
    for relation in NEIGHBOURING_RELATIONS:
        accountant = RDPAccountant(relation)
        assert accountant.neighbouring is Neighbouring.parse(relation)
    with pytest.raises(ValueError, match="neighbouring must be one of"):
        RDPAccountant("swap")
    with pytest.raises(ValueError, match="neighbouring must be one of"):
        account(GaussianEvent(1.0), DELTA, neighbouring="swap", accountant="pld")
    # The public curve took any other string for replace-one.
    with pytest.raises(ValueError, match="neighbouring must be one of"):
        allocation_rdp(DEFAULT_ORDERS, 4, 1.0, "add/remove")


def test_privacy_spent_shows_the_renyi_order_only_for_a_renyi_bound():
    event = PoissonGaussianEvent(0.01, 1.1, count=1000)
    tight = account(event, DELTA, accountant="pld")
    assert tight.accountant != "rdp" and "order=" not in repr(tight)
    assert "order=" in repr(account(event, DELTA))

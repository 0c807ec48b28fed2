"""How a DPLogisticRegression fit shares and accounts its ``(epsilon, delta)``.

Up to three releases:

- under add/remove, a Gaussian count of the rows, released first with a
  share of epsilon and of delta; the run is then planned from the released
  count instead of ``n`` (which is private);
- the rows' centre, its noise a share of the budget in Gaussian DP
  (:func:`centre_noise`), and the probability floor's Gaussian release,
  its noise set by a share of epsilon measured alone;
- the training run, its noise calibrated so that the run and those
  releases, composed by the accountant, meet the rest of the budget.

The count and the run compose by basic composition (:func:`basic_composition`).
"""

import functools
import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .._base import check_spend
from .._solvers._sgd import temperature_sensitivity
from ..accounting import (
    DEFAULT_ORDERS,
    GaussianEvent,
    PrivacySpent,
    calibrate_noise_multiplier,
)
from ..accounting._gdp import gaussian_dp_mu

__all__ = [
    "Budget",
    "CountRelease",
    "basic_composition",
    "calibrate_run",
    "centre_noise",
    "count_release",
    "floor_noise",
    "released_size",
    "split_budget",
]

# A small share of a small epsilon puts the best order of a lone Gaussian past
# DEFAULT_ORDERS; the share is set on a wider grid (the whole run is still
# accounted, and calibrated, on the default one).
_WIDE_ORDERS = np.concatenate([DEFAULT_ORDERS, 2.0 ** np.arange(11, 21)])


@dataclass(frozen=True)
class CountRelease:
    """The add/remove count of rows: its Gaussian noise std and its spend."""

    std: float
    spent: PrivacySpent


@dataclass(frozen=True)
class Budget:
    """How a fit's ``(epsilon, delta)`` is shared between the count and the run.

    Attributes
    ----------
    delta : float
        The fit's delta (reported as ``delta_``).
    epsilon : float or None
        The run's target epsilon (the floor's release included); None: a
        fixed noise multiplier, no target.
    run_delta : float
        The run's delta.
    count : CountRelease or None
        The count released first under add/remove; None under replace-one.
    """

    delta: float
    epsilon: float | None
    run_delta: float
    count: CountRelease | None = None

    def spend(self, run_spent):
        """The fit's spend: the run's, composed with the count's if any."""
        if self.count is None:
            return run_spent
        return basic_composition(self.count.spent, run_spent, self.epsilon, self.delta)


def split_budget(epsilon, delta, neighbouring, count_share):
    """The :class:`Budget` of a fit at ``(epsilon, delta)``.

    Replace-one: the whole budget to the run (``n`` is public). Add/remove:
    ``count_share`` of epsilon and of delta to a Gaussian count of the rows
    (:func:`count_release`), the rest to the run.
    """
    if neighbouring != "add-remove":
        return Budget(delta=delta, epsilon=epsilon, run_delta=delta)
    count = count_release(count_share * epsilon, count_share * delta)
    return Budget(
        delta=delta,
        epsilon=epsilon - count.spent.epsilon,
        run_delta=delta - count.spent.delta,
        count=count,
    )


@functools.lru_cache(maxsize=256)
def count_release(epsilon, delta):
    """The add/remove count of rows at ``(epsilon, delta)``: noise std and spend.

    A Gaussian mechanism of sensitivity 1 (one row added or removed), its
    noise the smallest that meets ``(epsilon, delta)`` by exact Gaussian DP
    (bracketed on the wide order grid: the share is a small epsilon).

    Returns
    -------
    CountRelease
    """
    std, spent = calibrate_noise_multiplier(
        lambda z: [GaussianEvent(z)],
        epsilon,
        delta,
        neighbouring="add-remove",
        orders=_WIDE_ORDERS,
        accountant="pld",
    )
    return CountRelease(std=std, spent=spent)


def released_size(n_samples, std, rng):
    """The size the plan reads under add/remove: the rounded noisy count, >= 1."""
    return max(1, int(round(n_samples + rng.normal(0.0, std))))


@functools.lru_cache(maxsize=256)
def floor_noise(epsilon, delta, neighbouring):
    """Noise of the probability floor's release spending ``epsilon`` alone.

    In units of the bound on one row's contribution, whose sensitivity is 2
    of them under replace-one and 1 under add/remove. Measured by exact
    Gaussian DP under add/remove and by Rényi DP under replace-one (as
    before the tight accountants: the share is a convention, and either way
    the whole run is calibrated to its target).
    """
    sensitivity = temperature_sensitivity(neighbouring)
    z, _ = calibrate_noise_multiplier(
        lambda z: [GaussianEvent(z)],
        epsilon,
        delta,
        neighbouring=neighbouring,
        orders=_WIDE_ORDERS,
        accountant="pld" if neighbouring == "add-remove" else "rdp",
    )
    return z * sensitivity


@functools.lru_cache(maxsize=256)
def centre_noise(share, epsilon, delta, neighbouring):
    """Noise of the centre's release: ``share`` of the budget in Gaussian DP.

    Gaussian mechanisms compose by adding their squared ``mu`` (Dong, Roth
    and Su 2022, "Gaussian differential privacy", Corollary 3.3), so the
    share is one of ``mu^2``: the release is ``sqrt(share) mu``-GDP, with
    ``mu`` that of a Gaussian mechanism meeting ``(epsilon, delta)`` alone
    (ibid., Corollary 2.13). In units of the bound on one row's term (the
    sum moves by 2 of them under replace-one, 1 under add/remove). This
    only sets the noise: the fit's spend is the accountant's composition of
    every release, calibrated to the target.
    """
    mu = gaussian_dp_mu(epsilon, delta)
    sensitivity = 2.0 if neighbouring == "replace-one" else 1.0
    return sensitivity / (math.sqrt(share) * mu)


_CALIBRATIONS = OrderedDict()
_CALIBRATIONS_KEPT = 256


def calibrate_run(plan, epsilon, delta, neighbouring):
    """The noise multiplier of ``plan`` that meets ``(epsilon, delta)``, and its spend.

    A pure function of public inputs that every fit of a search or an audit
    would otherwise recompute: cached by the plan's
    :meth:`~skdp._solvers._sgd.SGDPlan.cache_key`.
    """
    key = (plan.cache_key(), float(epsilon), float(delta), neighbouring)
    if key not in _CALIBRATIONS:
        _CALIBRATIONS[key] = calibrate_noise_multiplier(
            plan.events, epsilon, delta, neighbouring=neighbouring, accountant="pld"
        )
        if len(_CALIBRATIONS) > _CALIBRATIONS_KEPT:
            _CALIBRATIONS.popitem(last=False)
    _CALIBRATIONS.move_to_end(key)
    return _CALIBRATIONS[key]


def basic_composition(count, training, training_epsilon, delta):
    """Spend of the count release followed by a run planned from its output.

    The run's privacy events (sampling rate, steps, noise) are chosen from the
    released count, so the tight accountants, which compose events fixed in
    advance, do not apply across the two parts. Each part has fixed
    parameters, though: the count is ``(count.epsilon, count.delta)``-DP and,
    whatever count is released, the run is calibrated to be
    ``(training_epsilon, delta - count.delta)``-DP (checked here: a run that
    spent more is refused). Basic composition holds for mechanisms chosen
    adaptively within these fixed parameters (Dwork, Rothblum and Vadhan
    2010, "Boosting and differential privacy", k-fold adaptive composition;
    Dwork and Roth 2014, Theorem 3.16 and Section 3.5.2), so the total is the
    sum of the two pairs. It is stated at the run's target, which bounds the
    run's spend for every released count.

    No Rényi curve is known to bound the whole (the run's curve changes with
    the count): ``rdp`` is infinite and no events are kept, so
    :meth:`~skdp.accounting.PrivacySpent.at_delta` and
    :func:`~skdp.accounting.compose_spent` give infinity rather than a number
    they cannot justify.
    """
    check_spend(training, training_epsilon)
    return PrivacySpent(
        epsilon=float(count.epsilon + training_epsilon),
        delta=float(delta),
        accountant=training.accountant,
        bound=f"gaussian count + {training.bound} (basic composition)",
        neighbouring="add-remove",
        order=math.nan,
        orders=training.orders,
        rdp=(math.inf,) * len(training.orders),
    )

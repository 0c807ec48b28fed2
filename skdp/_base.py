"""The one path every private fit takes.

Each estimator is a thin shell over the same sequence of steps, written once
in :meth:`PrivateFitMixin._fit_private`::

    validate -> plan -> calibrate -> schedule -> run -> account -> check spend

- **validate** (the estimator's ``fit``): inputs checked against their public
  bounds; every error is raised here, before any state changes.
- **plan** (:meth:`~PrivateFitMixin._plan_fit`): from public inputs only
  (parameters, declared bounds, ``n`` under replace-one or a released count
  under add/remove). A plan gives the privacy events of the run for any noise
  multiplier, so the noise is set before a row is read by the solver.
- **calibrate** (:meth:`~PrivateFitMixin._calibrate`): the noise multiplier
  that meets the target (or the fixed one).
- **schedule** (:meth:`~PrivateFitMixin._schedule`): tuning that may follow the
  calibrated noise (steps, clips); it cannot create or change events, which
  the path checks.
- **run** (:meth:`~PrivateFitMixin._run`): a pure solver returning a typed
  result that carries the events it actually ran.
- **account** (:meth:`~PrivateFitMixin._account`): the spend of those events
  (and of any release made while planning).
- **check spend**: a run never reports more than its target.

Then :meth:`~PrivateFitMixin._set_fitted` writes the fitted attributes, all at
once at the end, so a failed fit leaves the estimator as it was (with
:func:`skdp.utils._sklearn.fit_context`).
"""

import math

import numpy as np
from sklearn.utils import check_random_state

from .utils._validation import (
    check_delta_against_rows,
    default_delta,
    enable_progress,
)

__all__ = ["PrivateFitMixin", "check_spend", "fit_generator", "resolve_delta"]

#: Seeds drawn from a ``random_state`` lie in [0, 2^31).
SEED_BOUND = 2**31


def fit_generator(random_state):
    """The fit's generator, seeded from ``random_state`` (int, RandomState, None)."""
    return np.random.default_rng(check_random_state(random_state).randint(SEED_BOUND))


def resolve_delta(delta, n_samples):
    """``delta`` as declared, or the default for ``n_samples`` rows.

    A declared delta of ``1 / n_samples`` or more is used, with a
    :class:`~skdp.exceptions.WeakDeltaWarning`.
    """
    if delta is None:
        return default_delta(n_samples)
    check_delta_against_rows(float(delta), n_samples)
    return float(delta)


def check_spend(spent, target_epsilon):
    """Refuse to release a run whose spend exceeds its target (an internal error).

    ``target_epsilon`` None: a run with a fixed noise multiplier, no target.
    """
    target = math.inf if target_epsilon is None else target_epsilon
    if spent.epsilon > target * (1 + 1e-9):
        raise RuntimeError("Internal error: the run spent more than its target.")


class PrivateFitMixin:
    """The shared private fit path; estimators implement its steps.

    An estimator's ``fit`` validates its inputs into one ``data`` object and
    returns ``self._fit_private(data)``. The hooks receive that object; those
    without a default must be written by the estimator.
    """

    def _fit_private(self, data):
        """Plan, calibrate, schedule, run, account, check, then set attributes."""
        rng = self._fit_generator()
        with enable_progress(getattr(self, "verbose", 0)):
            plan = self._plan_fit(data, rng)
            noise_multiplier = self._calibrate(plan)
            schedule = self._schedule(plan, noise_multiplier, data)
            result = self._run(schedule, noise_multiplier, data, rng)
        spent = self._account(plan, result)
        check_spend(spent, self._target_epsilon(plan))
        self._set_fitted(data, plan, noise_multiplier, result, spent, rng)
        return self

    def _fit_generator(self):
        """The generator of the fit's secret randomness."""
        return fit_generator(self.random_state)

    def _target_epsilon(self, plan):
        """The epsilon the spend is checked against (None: no target)."""
        return self.epsilon

    def _plan_fit(self, data, rng):
        """The public plan of the fit (may release a noisy count with ``rng``)."""
        raise NotImplementedError

    def _calibrate(self, plan):
        """The noise multiplier of the run."""
        raise NotImplementedError

    def _schedule(self, plan, noise_multiplier, data):
        """Tuning that follows the noise; must not change the plan's events."""
        return plan

    def _run(self, schedule, noise_multiplier, data, rng):
        """Run the solver; return a result with an ``events`` attribute."""
        raise NotImplementedError

    def _account(self, plan, result):
        """The spend of the run's events (and of the plan's own releases)."""
        raise NotImplementedError

    def _set_fitted(self, data, plan, noise_multiplier, result, spent, rng):
        """Write the fitted attributes."""
        raise NotImplementedError

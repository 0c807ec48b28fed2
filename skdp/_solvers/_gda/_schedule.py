"""How a gradient descent-ascent run steps: public rules, no release.

Everything here is post-processing of public inputs, the calibrated noise and
earlier releases; it sets the steps, never a release's sensitivity, so it
cannot change the plan's events. The game's stability on small groups rests
on these rules:

- the weight of a row of a small group, ``p_k / n_k``, is large, and so is the
  noise the adversary lets in when it moves to that group; noisy losses push
  it there at random, the noisy steps raise that group's loss, and an
  unconstrained run can diverge. The adversary's weights are therefore capped,
  ``p_k <= weight_cap * n_k / n`` (KL projection of the exponentiated-gradient
  step onto the capped simplex). The game is then the group CVaR of level
  ``1 / weight_cap`` (the uncertainty set of Rockafellar and Uryasev's CVaR,
  used for distributionally robust learning by Duchi and Namkoong, Ann.
  Statist. 2021, section 2): the exact max-loss game whenever the worst group
  holds at least ``1 / weight_cap`` of the rows, and ``max_k v_k <= weight_cap
  / n``, so the model's noise is at most ``weight_cap`` times that of private
  ERM;
- the "auto" step is the smaller of a multiple of ``1 / (beta + l2)`` and the
  step at which the noise's random walk over ``T`` steps, ``lr sqrt(T D) s``
  with ``s`` the per-coordinate noise std of a proportionally weighted mean
  gradient, stays within a public radius (:attr:`GDASchedule.walk_radius`,
  wider at small noise): on little data or at small epsilon the step shrinks
  with the noise. That walk assumes row weights ``1 / n``; a step whose
  largest row weight ``max_k v_k`` exceeds ``h / n`` (``h`` the policy's
  ``heavy_row_ratio``, the adversary on a small group) adds ``n max_k v_k``
  times more noise, so the noise term of its step is scaled by
  ``h / (n max_k v_k)``: the noise each step puts into the model stays at most
  ``h`` times the planned one (the smoothness term is left as is). ``v``
  comes from earlier releases, so the rule is post-processing;
- with the preconditioner the step is taken in its geometry: capped, and the
  noise walk ``lr sqrt(T) P xi`` measured in the released second-moment norm,
  ``lr sqrt(T tr(P S P)) s``, stays within the policy's radius (with the same
  shortening for heavy rows). The noise then goes mostly into the flat
  directions of the data, where it moves the loss least, and the steep ones
  (the intercept and mean direction) get short steps;
- the model player takes heavy-ball steps (Polyak, USSR Comput. Math. Math.
  Phys. 1964): ``w' = w - lr d + m (w - w_prev)``. Momentum ``m`` multiplies
  the weight that the iterate eventually gives each step, noise included, by
  up to ``1 / (1 - m)``, so the noise term of the "auto" step is scaled by
  ``1 - m``: where the noise binds the noise walk is the one planned, and
  where the smoothness binds (little noise: large n or epsilon) the slow
  directions of an ill-conditioned loss move up to ``1 / (1 - m)`` times
  faster;
- the model returned is the average of the last iterates (suffix averaging,
  Rakhlin, Shamir and Sridharan, ICML 2012), which forgets the early,
  unconverged ones; more of them where the noise is large.

Under add/remove ``n`` is private: every rule that reads it (the "auto" step,
the walk radius, the tail, the preconditioner's scale) reads the sum of the
noisy counts instead (post-processing, :meth:`GDASchedule.at_released_size`).
"""

import math
from dataclasses import dataclass, replace

import numpy as np

from ...accounting import logistic_constants
from .._tuning import log_linear
from ._plan import GDAPlan
from ._policy import GDAPolicy

__all__ = ["GDASchedule", "make_gda_schedule"]


@dataclass(frozen=True)
class GDASchedule:
    """The steps of a run, from its plan, the calibrated noise and the policy.

    Attributes
    ----------
    plan : GDAPlan
        The releases (the schedule only reads it).
    n_samples : int
        The ``n`` the rules read: public, or under add/remove the released
        total count (:meth:`at_released_size`).
    gradient_std : float
        Noise std of the weighted gradient sum at row weights of at most 1.
    noise_per_clip : float
        Noise std of the gradient sum in clip norms at row weights of at
        most 1 (``2 z_grad`` under replace-one, ``z_grad`` under add/remove).
    smoothness_step : float
        Cap of the "auto" step, ``policy.smoothness_step_factor / (beta + l2)``.
    learning_rate : float or None
        A fixed step of the model player; None: "auto".
    momentum : float
        Heavy-ball momentum ``m`` of the model player, in ``[0, 1)``.
    group_step : float
        Exponentiated-gradient step of the adversary.
    l2 : float
        Penalty ``l2 / 2 ||w||^2`` on all coefficients (intercept included).
    weight_cap : float or None
        The adversary's weights are capped at ``weight_cap`` times the (noisy)
        group shares; None: no cap (the exact max-loss game).
    policy : GDAPolicy
    """

    plan: GDAPlan
    n_samples: int
    gradient_std: float
    noise_per_clip: float
    smoothness_step: float
    learning_rate: float | None
    momentum: float
    group_step: float
    l2: float
    weight_cap: float | None
    policy: GDAPolicy

    def at_released_size(self, n_released):
        """The schedule with ``n`` replaced by a released (noisy) total count.

        For add/remove, where ``n`` is private: the rules that read ``n``
        then read a released value, which is post-processing.
        """
        return replace(self, n_samples=max(1, int(round(float(n_released)))))

    @property
    def run_noise(self):
        """Public noise level of the run: ``2 z / (sqrt(g) n)`` under replace-one.

        ``z / (sqrt(g) n)`` under add/remove. The std of one coordinate of the
        mean gradient, in clip norms, had the gradients' whole share ``g`` of
        the budget gone into one release; the per-step noise is this times
        ``sqrt(T)``, so it does not depend on the number of steps. The
        noise-dependent rules key on it.
        """
        return self.noise_per_clip / (math.sqrt(self.plan.n_iter) * self.n_samples)

    @property
    def walk_radius(self):
        """Noise-walk radius ``r`` of the "auto" step.

        ``policy.walk_radius`` at a large run noise, up to
        ``policy.walk_radius_max`` at a small one, log-linear in between: a
        smaller noise affords a longer walk, which removes optimisation bias.
        """
        policy = self.policy
        return log_linear(
            self.run_noise,
            *policy.walk_radius_noise,
            policy.walk_radius,
            policy.walk_radius_max,
        )

    @property
    def tail_fraction(self):
        """Fraction of the last iterates averaged into the returned model.

        ``policy.tail_fraction`` at a small run noise, up to
        ``policy.tail_fraction_max`` (every iterate, from the zero start) at a
        large one, log-linear in between: averaging more iterates lowers the
        variance of a noise-dominated model and adds the early iterates'
        bias, which only pays where the noise dominates.
        """
        policy = self.policy
        return log_linear(
            self.run_noise,
            *policy.tail_noise,
            policy.tail_fraction_max,
            policy.tail_fraction,
        )

    @property
    def first_averaged_step(self):
        """Index of the first iterate averaged into the returned model."""
        T = self.plan.n_iter
        return min(int(T * (1.0 - self.tail_fraction)), T - 1)

    def model_step(self, max_row_weight):
        """The model's step at a step whose largest row weight is ``max_row_weight``.

        "auto": ``min(c / (beta + l2), f r / (sqrt(T D) s))`` with ``r`` the
        :attr:`walk_radius` and ``D`` the number of coefficients (see
        :meth:`noise_walk_step` for ``f`` and ``s``). A fixed
        ``learning_rate`` is used as given.
        """
        return self.noise_walk_step(
            max_row_weight,
            cap=self.smoothness_step,
            radius=self.walk_radius,
            dimension=self.plan.n_params,
        )

    def preconditioned_step(self, max_row_weight, walk_trace):
        """The model's step in the preconditioned geometry.

        ``min(c, f r / (sqrt(T tr(P S P)) s))``: the noise walk ``lr sqrt(T)
        P xi`` measured in the released second-moment norm, with the policy's
        cap ``c`` and radius ``r``.
        """
        return self.noise_walk_step(
            max_row_weight,
            cap=self.policy.preconditioned_step,
            radius=self.policy.preconditioned_radius,
            dimension=walk_trace,
        )

    def noise_walk_step(self, max_row_weight, *, cap, radius, dimension):
        """``min(cap, (1 - m) f radius / (sqrt(T dimension) s))``, or the fixed step.

        ``s`` is the noise std of one coordinate of the mean gradient at row
        weights ``1 / n``, ``dimension`` the walk's effective number of
        coordinates, ``f = min(1, h / (n max_row_weight))`` with ``h`` the
        policy's ``heavy_row_ratio``, and ``m`` the momentum (whose steps add
        up to ``1 / (1 - m)`` times the step, noise included).
        """
        if self.learning_rate is not None:
            return self.learning_rate
        n = self.n_samples
        noise = self.gradient_std / n * math.sqrt(self.plan.n_iter * dimension)
        if noise == 0.0:
            return cap
        factor = min(1.0, self.policy.heavy_row_ratio / (n * max_row_weight))
        return min(cap, (1.0 - self.momentum) * factor * radius / noise)

    def group_caps(self, denominators):
        """Caps ``weight_cap * n_k / n`` of the adversary's weights, or None."""
        if self.weight_cap is None or denominators.size == 1:
            return None
        return np.minimum(1.0, self.weight_cap * denominators / denominators.sum())


def make_gda_schedule(problem, plan, noise_multiplier, policy):
    """The :class:`GDASchedule` of ``plan`` at ``noise_multiplier`` under ``policy``.

    ``momentum="auto"`` is ``policy.momentum``; ``group_step="auto"`` is the
    Hedge step ``sqrt(8 log K / T) / max_loss`` for losses in
    ``[0, max_loss]`` (Cesa-Bianchi and Lugosi 2006, Theorem 2.2).
    """
    _, smoothness = logistic_constants(plan.row_norm, 2)
    l2 = float(problem.l2)
    group_step = problem.group_step
    if group_step == "auto":
        log_groups = math.log(max(plan.n_groups, 2))
        group_step = math.sqrt(8.0 * log_groups / plan.n_iter) / plan.max_loss
    momentum = policy.momentum if problem.momentum == "auto" else problem.momentum
    learning_rate = problem.learning_rate
    z_gradient = plan.noise_multipliers(noise_multiplier).gradient
    return GDASchedule(
        plan=plan,
        n_samples=plan.n_samples,
        gradient_std=plan.noise_stds(noise_multiplier).gradient,
        noise_per_clip=plan.neighbouring.sum_factor * z_gradient,
        smoothness_step=policy.smoothness_step_factor / (float(smoothness) + l2),
        learning_rate=None if learning_rate == "auto" else float(learning_rate),
        momentum=float(momentum),
        group_step=float(group_step),
        l2=l2,
        weight_cap=None if problem.weight_cap is None else float(problem.weight_cap),
        policy=policy,
    )

"""Private noisy gradient descent-ascent for the worst-group logistic loss.

Pure functions. The game is ``min_w max_{p in simplex} sum_k p_k L_k(w)
+ l2 / 2 ||w||^2`` with ``L_k`` the mean logistic loss of group ``k``. A run is
described by a :class:`SaddlePlan` built from public quantities only (n, the
number of groups, steps, bounds); the plan gives the privacy events of the run
for any noise multiplier, so the noise is calibrated before the data is read.

What touches the data, and only through Gaussian noise (replace-one, a record
``(x, y, g)`` replaced by ``(x', y', g')``, group labels from a public set):

- the group counts ``n_k``, once: one count down and one up when the record
  changes group, so the L2 sensitivity is ``sqrt(2)`` (0 when it does not);
- every step, the weighted sum of clipped gradients ``sum_i v_{g_i} c(x_i)``
  with per-group weights ``v_k = p_k / n_k`` computed from earlier releases
  only (the adversary's ``p`` and the noisy counts): same group, it moves by
  ``v_g ||c(x) - c(x')|| <= 2 C v_g``; group changes, by
  ``||v_g c(x) - v_g' c(x')|| <= C (v_g + v_g')``. Sensitivity ``2 C max_k v_k``,
  fixed before the step's data is read, so the noise std is ``z_grad`` times
  it (a Gaussian mechanism with multiplier ``z_grad``, adaptively chosen).
  Releasing the weighted sum rather than the ``K`` per-group sums costs
  ``max_k v_k`` instead of ``||v||_2`` in noise: ``sqrt(K)`` times less when
  the weights are proportional to the group sizes;
- every step, the per-group sums of losses clipped to ``[0, B]``: same group,
  one entry moves by at most ``B``; group changes, two entries by at most ``B``
  each: sensitivity ``sqrt(2) B``.

- with ``precondition=True`` (at most 1000 coefficients), once, before the
  first step, the upper triangle (diagonal included) of the second-moment matrix
  ``sum_i a_i a_i^T`` of the projected rows (intercept column included,
  ``||a_i|| <= R``): replacing ``a`` by ``a'`` moves it by ``Delta = a a^T -
  a' a'^T``, whose upper triangle has squared norm ``(||Delta||_F^2 + sum_j
  Delta_jj^2) / 2``; ``||Delta||_F^2 = ||a||^4 + ||a'||^4 - 2 (a . a')^2 <=
  2 R^4`` and ``sum_j Delta_jj^2 <= sum_j a_j^4 + sum_j a'_j^4 <= 2 R^4``, so
  the sensitivity is ``sqrt(2) R^2`` (attained by orthogonal rows of norm
  ``R``). Its noisy release ``S`` gives the preconditioner ``P = (S_+ + lam
  I)^-1`` (post-processing; ``lam`` the noise's expected spectral norm, public)
  applied to every released gradient.

Each release is a Gaussian mechanism (docs/accounting.md); their Rényi curves
add under adaptive composition. Everything else (the floored noisy counts, the
cap on the adversary's weights, the exponentiated-gradient step on the noisy
group losses, averaging the iterates) is post-processing.

Stability (measured on Adult with 6 sex x race groups, smallest 643 rows, and
on scikit-learn's diabetes data, 331 rows): the weight ``p_k / n_k`` of a row
of a small group is large, and so is the noise the adversary lets in when it
moves to that group; noisy losses push it there at random, the noisy steps
raise that group's loss, and the run diverges (worst-group log-loss 8.8 at
epsilon 0.5). These public, data-free rules keep it stable:

- the adversary's weights are capped, ``p_k <= weight_cap * n_k / n``
  (KL projection of the exponentiated-gradient step onto the capped simplex).
  The game is then the group CVaR of level ``1 / weight_cap`` (the uncertainty
  set of Rockafellar and Uryasev's CVaR, used for distributionally robust
  learning by Duchi and Namkoong, Ann. Statist. 2021, section 2): the exact
  max-loss game whenever the worst group holds at least ``1 / weight_cap`` of
  the rows, and ``max_k v_k <= weight_cap / n``, so the model's noise is at
  most ``weight_cap`` times that of private ERM;
- the "auto" step is the smaller of ``4 / (beta + l2)`` and the step at which
  the noise's random walk over ``T`` steps, ``lr sqrt(T D) s`` with ``s`` the
  per-coordinate noise std of a proportionally weighted mean gradient, stays
  within a public radius (3): on little data or at small epsilon the step
  shrinks with the noise. That walk assumes row weights ``1 / n``; a step
  whose largest row weight ``max_k v_k`` exceeds ``1.5 / n`` (the adversary
  on a small group) adds ``n max_k v_k`` times more noise, so the noise term
  of its step is scaled by ``1.5 / (n max_k v_k)``: the noise each step puts
  into the model stays at most 1.5 times the planned one (the smoothness
  term is left as is). ``v`` comes from earlier releases, so the rule is
  post-processing;
- with the preconditioner (off by default: see ``_PRECONDITION_SHARE``), the
  step is taken in its geometry: at most 4, and
  the noise walk ``lr sqrt(T) P xi`` measured in the released second-moment
  norm, ``lr sqrt(T tr(P S P)) s``, stays within a radius of 1 (with the same
  1.5 / (n max_k v_k) shortening). The noise then goes mostly into the flat
  directions of the data, where it moves the loss least, and the steep ones
  (the intercept and mean direction) get short steps;
- the model player takes heavy-ball steps (Polyak, USSR Comput. Math. Math.
  Phys. 1964): ``w' = w - lr d + m (w - w_prev)``. Momentum ``m`` multiplies
  the weight that the iterate eventually gives each step, noise included, by
  up to ``1 / (1 - m)``, so the noise term of the "auto" step is scaled by
  ``1 - m``: where the noise binds the noise walk is the one planned, and
  where the smoothness binds (little noise: large n or epsilon) the slow
  directions of an ill-conditioned loss move up to ``1 / (1 - m)`` times
  faster. Post-processing of the released gradients;
- the model returned is the average of the last half of the iterates (suffix
  averaging, Rakhlin, Shamir and Sridharan, ICML 2012), which forgets the
  early, unconverged iterates.

With one group the counts are ``n`` (public under replace-one) and the adversary
has nothing to choose: only the gradient sums are released (private full-batch
gradient descent).

Add/remove neighbours (``neighbouring="add-remove"``: a record ``(x, y, g)``
added or removed) move every release by half as much or less, since nothing is
subtracted where something is added: the counts by 1 (one entry), the weighted
gradient sum by ``C max_k v_k``, the loss sums by ``max_loss`` (one entry), the
second-moment triangle by ``R^2`` (its squared norm ``(||a a^T||_F^2 + sum_j
a_j^4) / 2 <= R^4``). ``n`` is then private: the counts are released even with
one group, and every rule that reads ``n`` (the "auto" step, the walk radius,
the tail, the preconditioner's scale) reads the sum of the noisy counts
instead (post-processing, :meth:`SaddlePlan.at_released_size`).
"""

import logging
import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import expit, logsumexp

from ..accounting import GaussianEvent, logistic_constants
from ._rows import (
    feature_norm,
    rounded_up_float32,
    row_norms,
    row_projection,
    row_scores,
    tame_rows,
)
from ._tuning import log_linear

__all__ = ["SaddlePlan", "make_saddle_plan", "project_capped_simplex", "run_saddle_gda"]

logger = logging.getLogger("skdp")

# Budget split, as shares of the Rényi curve of one Gaussian with multiplier z:
# the count release, the T loss releases together, the T gradient releases
# together. The shares add up to 1, so the run costs exactly what a single
# Gaussian mechanism with noise multiplier z costs (rho(a) = a / (2 z^2)).
# Measured (worst-group test log-loss, 2 seeds, epsilon 0.5 / 1): Adult
# sex x race 0.4020 / 0.3890 at 0.1 / 0.2 / 0.7, 0.4005 / 0.3875 at
# 0.05 / 0.1 / 0.85 (the counts are read once and only as denominators; the
# adversary needs the ranking of the group losses, not their values).
_COUNT_SHARE = 0.05
_LOSS_SHARE = 0.1
_GRADIENT_SHARE = 0.85
# "auto" model step, at most this multiple of 1 / (smoothness + l2): measured on
# Adult (groups = sex, epsilon = 1): worst-group test log-loss 0.431 at 1x and
# 0.422 at 4x with 1000 steps (0.497 at 1x with 100 steps).
_AUTO_LR_FACTOR = 4.0
# "auto" model step, at most the step whose noise walk over the run stays in
# this radius. Measured (2 seeds, 200 steps, weight cap 3, worst-group test
# log-loss at epsilon 0.5 / 1 / 8): diabetes 0.78 / 0.73 / 0.65 at radius 2,
# 1.02 / 0.92 / 0.68 at 5; Adult sex x race 0.451 / 0.437 / 0.434 at 2 and
# 0.475 / 0.438 / 0.434 at 5. With the per-step cap below (features with
# public bins, 2 seeds at eps 0.5 / 1 on Adult, 5 on benefits): Adult sex x
# race 0.3990 / 0.3860 at radius 3 against 0.4005 / 0.3875 at 2 (cap off),
# benefits 0.705 / 0.650 / 0.621 at eps 0.5 / 1 / 2 against 0.711 / 0.664 /
# 0.631 (radius 2, the previous shares); radius 4 (alpha 1e-3) 0.4005 /
# 0.3857 on Adult sex x race. Radius 3 without the cap (alpha 1e-3):
# benefits 0.764 at eps 0.5 (the adversary's moves to small groups let the
# noise in).
_NOISE_WALK_RADIUS = 3.0
# ... widened where the noise is small. The public run noise
# ``2 z / (sqrt(gradient share) n)`` (std of one coordinate of the mean
# gradient, in clip norms, had the whole gradient share gone into one
# release; it does not depend on the number of steps) sets the radius: 3 at
# run noise >= 2.2e-4, log-linear up to 6 at <= 1.25e-4 (with 1000 steps:
# per-step noise 0.007 and 0.004). On the benchmark that is Adult from
# epsilon 2 (run noise 1.2e-4 at 2, 2.2e-4 at 1) and two-rule from 4 (1.6e-4
# at 4, 0.85e-4 at 8); benefits and diabetes never. Measured (fifth session,
# bench_fairness.py, 5 seeds, worst-group test log-loss at eps 0.5 / 1 / 2 /
# 4 / 8, radius 3 -> 6 everywhere): adult-sex - / 0.3849 -> 0.3829 / 0.3788
# -> 0.3773 / 0.3753 -> 0.3744 / 0.3735 -> 0.3729; adult-sex-race 0.3972 ->
# 0.4098 / 0.3862 -> 0.3900 / 0.3801 -> 0.3788 / 0.3763 -> 0.3754 / 0.3742
# -> 0.3734; two-rule - / 0.5360 -> 0.5381 / 0.5288 -> 0.5290 / 0.5251 ->
# 0.5252 / 0.5242 -> 0.5242; benefits (radius 4 / 6) eps 2 0.6189 -> 0.6250
# / 0.6385, eps 4 0.6109 -> 0.6123 / 0.6154. Where the radius is small the
# run's excess loss is the optimiser's, not the noise's: Adult by sex at
# eps 1, 2 seeds, the same steps without noise 0.3826 against 0.3847 with
# it, and 0.3773 without noise at radius 6; by sex x race 0.3854 / 0.3851.
# The larger walk costs only where the noise is large against the small
# groups' signal (by sex x race at eps 1, radius 6: seeds 0 / 1 at 0.3824 /
# 0.3989, the second through the test loss of a 1,153-row group).
_WALK_RADIUS_NOISE = (2.2e-4, 1.25e-4)
_WALK_RADIUS_MAX = 6.0
# "auto" step of a step whose largest row weight ``max_k v_k`` exceeds this
# multiple of ``1 / n``: scaled by ``ratio / (n max_k v_k)``.
_STEP_NOISE_RATIO = 1.5
# "auto" clip norm, as a fraction of the gradient bound. Measured (2 seeds,
# 1000 steps, weight cap 3; worst-group test log-loss at epsilon 0.5 / 1 / 8):
# Adult sex 0.446 / 0.433 / 0.412 at 1, 0.436 / 0.426 / 0.412 at 0.6,
# 0.441 / 0.432 / 0.422 at 0.4; Adult sex x race 0.453 / 0.440 / 0.414 at 1,
# 0.443 / 0.432 / 0.414 at 0.6; two-rule and diabetes improve too.
_AUTO_CLIP_FRACTION = 0.6
# The model returned averages the iterates of this last fraction of the steps.
# Measured (worst-group test log-loss, Adult with public bins, 2 seeds; benefits
# and two-rule 5 seeds): 0.25 instead of 0.5 helps where the step is limited by
# conditioning (adult-sex 0.3886 against 0.3904 at epsilon 1) and hurts where
# it is limited by noise (benefits 0.725 / 0.675 against 0.711 / 0.664 at
# epsilon 0.5 / 1; two-rule 0.567 against 0.554 at 0.5).
_TAIL_FRACTION = 0.5
# ... lengthened where the noise is large: with the run noise of
# ``SaddlePlan.run_noise``, 0.5 at <= 1.1e-3 rising log-linearly to 1 (every
# iterate averaged, the early ones near the zero start included, which
# shrinks a noise-dominated model) at >= 4e-3. On the benchmark: benefits
# (run noise 4.2e-3 / 2.2e-3 / 1.2e-3 / 6.4e-4 at eps 0.5 / 1 / 2 / 4) and
# diabetes (>= 3.9e-3 at every eps); never Adult (<= 4.2e-4) or two-rule
# (<= 1.0e-3). Measured (sixth session, worst-group test log-loss, fixed
# tail 0.5 -> 0.75 / 1): benefits (20 seeds) eps 0.5 0.7063 -> 0.6880 /
# 0.6680 (accuracy 0.660 -> 0.666 / 0.672), eps 1 0.6432 -> 0.6368 / 0.6312,
# eps 2 0.6179 -> 0.6161 / 0.6160, eps 4 0.6089 -> 0.6086 / 0.6087, eps 8
# 0.6050 -> 0.6053 / 0.6054; two-rule (5 seeds) eps 0.5 / 1 / 2 / 4 0.5475 /
# 0.5360 / 0.5288 / 0.5251 -> 0.5454 / 0.5342 / - / - (0.75) and 0.5515 /
# 0.5375 / 0.5285 / 0.5245 (1); Adult by sex x race eps 0.5 (3 seeds)
# 0.3984 -> 0.4004 / 0.4068, by sex eps 1 (2 seeds) 0.3847 -> 0.3865 (0.75):
# where the optimiser's bias dominates, early iterates add to it.
_TAIL_NOISE = (4e-3, 1.1e-3)
_TAIL_FRACTION_MAX = 1.0
# Heavy-ball momentum of "auto" (see the module docstring). Probe (2 seeds,
# Adult with public bins by sex, worst-group test log-loss): without noise
# (epsilon 1000) 0.3774 at 0, 0.3744 at 0.5, 0.3725 at 0.8, 0.3719 at 0.9,
# 0.3716 at 0.95 (exact minimax 0.3704); epsilon 8 0.3774 at 0, 0.3737 at
# 0.9 and at 0.95; epsilon 0.5 / 2 unchanged (the noise term binds).
# bench_fairness.py, 5 seeds, epsilon 0.5 / 1 / 2 / 4 / 8, 0 -> 0.9: adult-sex
# 0.3938 / 0.3848 / 0.3788 / 0.3776 / 0.3773 -> 0.3938 / 0.3849 / 0.3788 /
# 0.3753 / 0.3735; adult-sex-race 0.3972 / 0.3862 / 0.3801 / 0.3771 / 0.3765
# -> 0.3972 / 0.3862 / 0.3801 / 0.3763 / 0.3742; benefits, two-rule and
# diabetes (noise-bound everywhere) within 0.002, well inside one standard
# deviation (two-rule 0.5467 -> 0.5475 at 0.5, diabetes 0.7845 -> 0.7866).
_AUTO_MOMENTUM = 0.9
# Preconditioner (``_private_preconditioner``, ``precondition=True``): this
# share of the budget releases the second-moment matrix of the rows once
# (taken from the gradients' share); the ridge is this multiple of the noise's
# expected spectral norm; the preconditioned "auto" step is at most
# _PRECONDITIONED_STEP and keeps the noise walk, measured in the released
# second-moment norm, within _PRECONDITIONED_RADIUS. Skipped above
# _PRECONDITION_MAX_PARAMS coefficients (a D x D matrix and its
# eigendecomposition). Off by default: measured with bench_fairness.py (5
# seeds, worst-group test log-loss at eps 0.5 / 1 / 2 / 4 / 8, off -> on):
# adult-sex 0.3938 / 0.3848 / 0.3788 / 0.3776 / 0.3773 -> 0.3958 / 0.3848 /
# 0.3782 / 0.3749 / 0.3731; adult-sex-race 0.3972 / 0.3862 / 0.3801 / 0.3771 /
# 0.3765 -> 0.3994 / 0.3880 / 0.3800 / 0.3765 / 0.3741; benefits 0.6948 /
# 0.6461 / 0.6187 / 0.6108 / 0.6060 -> 0.6465 / 0.6356 / 0.6255 / 0.6169 /
# 0.6104; diabetes 0.7845 / 0.7385 / 0.6900 / 0.6400 / 0.6178 -> 0.7051 /
# 0.6954 / 0.6661 / 0.6202 / 0.5953 (accuracy 0.535 -> 0.486 at eps 0.5).
# Tuning (2 seeds): radius 0.5 benefits eps 0.5 0.6307, adult-sex-race 0.4117;
# radius 2: 0.6997 / 0.4036; ridge 2, or share 0.1 with ridge 0.5: no better.
_PRECONDITION_SHARE = 0.05
_PRECONDITION_RIDGE = 1.0
_PRECONDITIONED_STEP = 4.0
_PRECONDITIONED_RADIUS = 1.0
_PRECONDITION_MAX_PARAMS = 1000
# Floor on the noisy group counts used as denominators (post-processing).
_MIN_COUNT = 1.0
# Sensitivity constants (replace-one, see the module docstring).
_COUNT_SENSITIVITY = math.sqrt(2.0)
_GRADIENT_SENSITIVITY_FACTOR = 2.0
_LOSS_SENSITIVITY_FACTOR = math.sqrt(2.0)
_SECOND_MOMENT_SENSITIVITY_FACTOR = math.sqrt(2.0)
# Under add/remove every one of these factors is 1 (see the module docstring).
_LOG_INTERVAL = 50


@dataclass(frozen=True)
class SaddlePlan:
    """Everything public about a private gradient descent-ascent run.

    Attributes
    ----------
    n_samples : int
    n_groups : int
    n_iter : int
        Number of noisy steps ``T`` (every step reads every row).
    learning_rate : float
        Step of the model player.
    eta_p : float
        Step of the adversary (exponentiated gradient on the group losses).
    l2 : float
        Penalty ``l2 / 2 ||w||^2`` on all coefficients (intercept included).
    clip_norm : float
        Per-example gradient clip norm ``C``.
    gradient_bound : float
        Enforced bound ``G`` on per-example gradient norms (rows projected).
    max_loss : float
        Per-example losses are clipped to ``[0, max_loss]`` before summing.
    n_params : int
        Number of model coefficients (intercept included).
    weight_cap : float or None
        The adversary's weights are capped at ``weight_cap`` times the (noisy)
        group shares; ``None``: no cap (the exact max-loss game).
    learning_rate : float or None
        Step of the model player; ``None``: "auto", see :meth:`step_size`.
    momentum : float
        Heavy-ball momentum ``m`` of the model player, in ``[0, 1)``.
    neighbouring : {"replace-one", "add-remove"}
        The relation the sensitivities are for. Under add/remove ``n`` is
        private and ``n_samples`` is a placeholder until the run replaces it
        by the released total count (:meth:`at_released_size`); the privacy
        events never depend on it.
    """

    n_samples: int
    n_groups: int
    n_iter: int
    eta_p: float
    l2: float
    clip_norm: float
    gradient_bound: float
    max_loss: float
    n_params: int
    smoothness: float
    weight_cap: float | None
    learning_rate: float | None
    row_norm: float = 0.0
    precondition_share: float = 0.0
    momentum: float = 0.0
    neighbouring: str = "replace-one"

    @property
    def releases_counts(self):
        """Whether the run releases the group counts (not ``n`` when public)."""
        return self.n_groups > 1 or self.neighbouring == "add-remove"

    def _sensitivity_factor(self, replace_one):
        """``replace_one`` under replace-one; 1 under add/remove (one record)."""
        return replace_one if self.neighbouring == "replace-one" else 1.0

    def at_released_size(self, n_released):
        """Return the plan with ``n`` replaced by a released (noisy) total count.

        For add/remove, where ``n`` is private: the rules that read ``n``
        then read a released value, which is post-processing.
        """
        return replace(self, n_samples=max(1, int(round(float(n_released)))))

    @property
    def shares(self):
        """Budget shares ``(counts, losses, gradients)`` of the Rényi curve."""
        if self.n_groups == 1:
            count_share = _COUNT_SHARE if self.releases_counts else 0.0
            return count_share, 0.0, 1.0 - count_share - self.precondition_share
        return _COUNT_SHARE, _LOSS_SHARE, _GRADIENT_SHARE - self.precondition_share

    @property
    def second_moment_sensitivity(self):
        """L2 sensitivity of the upper triangle of ``sum_i a_i a_i^T``.

        ``sqrt(2) R^2`` (replace-one) or ``R^2`` (add/remove) for rows ``a_i``
        (intercept column included) of norm at most ``R = row_norm``: see
        :func:`_private_preconditioner`.
        """
        factor = self._sensitivity_factor(_SECOND_MOMENT_SENSITIVITY_FACTOR)
        return factor * self.row_norm**2

    def second_moment_std(self, noise_multiplier):
        """Noise std of each upper-triangle entry of the second-moment release."""
        if not self.precondition_share:
            return None
        z = float(noise_multiplier) / math.sqrt(self.precondition_share)
        return z * self.second_moment_sensitivity

    def noise_multipliers(self, noise_multiplier):
        """Per-release noise multipliers (std / sensitivity), or None if unused.

        A release of share ``f`` made ``m`` times gets ``z sqrt(m / f)``, so
        its ``m`` uses cost ``f`` times the curve ``a / (2 z^2)``.
        """
        z = float(noise_multiplier)
        count_share, loss_share, grad_share = self.shares
        T = self.n_iter
        return (
            z / math.sqrt(count_share) if count_share else None,
            z * math.sqrt(T / loss_share) if loss_share else None,
            z * math.sqrt(T / grad_share),
        )

    def noise_stds(self, noise_multiplier):
        """Noise std of the counts, of each loss sum and of the gradient sum.

        The last is for row weights of at most 1; a step whose largest row
        weight is ``max_k v_k`` scales it by that.
        """
        z_count, z_loss, z_grad = self.noise_multipliers(noise_multiplier)
        return (
            None if z_count is None else z_count * self.count_sensitivity,
            None if z_loss is None else z_loss * self.loss_sensitivity,
            z_grad * self.gradient_sensitivity,
        )

    def step_size(self, noise_multiplier):
        """The model's step: ``learning_rate``, or "auto" at this noise.

        "auto" is ``min(4 / (beta + l2), r / (sqrt(T D) s))`` with ``r`` the
        public noise-walk radius (:meth:`walk_radius`: 3, up to 6 at small
        noise), ``D`` the number of coefficients and ``s``
        the noise std of one coordinate of the mean gradient when every row
        weighs ``1 / n``. Public: it depends on ``n`` and the plan only. A
        step whose row weights are larger is shortened (:meth:`step_at`).
        """
        return self.step_at(noise_multiplier, 1.0 / self.n_samples)

    def step_at(self, noise_multiplier, max_weight):
        """The model's step at a step whose largest row weight is ``max_weight``.

        "auto": ``min(4 / (beta + l2), f r / (sqrt(T D) s))`` with
        ``f = min(1, 1.5 / (n max_weight))``: the noise the step adds to the
        model, proportional to the step times ``max_weight``, stays within
        1.5 times the planned walk (weights ``1 / n``) wherever the noise
        term binds; where the smoothness term binds the step is unchanged. A
        fixed ``learning_rate`` is used as given.
        """
        return self.walk_step(
            noise_multiplier,
            max_weight,
            cap=_AUTO_LR_FACTOR / (self.smoothness + self.l2),
            radius=self.walk_radius(noise_multiplier),
            dimension=self.n_params,
        )

    def walk_radius(self, noise_multiplier):
        """Noise-walk radius ``r`` of the "auto" step at this noise.

        3 while the run noise (:meth:`run_noise`) is at least 2.2e-4, 6 when
        it is at most 1.25e-4, log-linear in between: a smaller noise affords
        a longer walk, which removes optimisation bias. Public: ``n``, ``z``
        and the plan only; independent of the number of steps.
        """
        return log_linear(
            self.run_noise(noise_multiplier),
            *_WALK_RADIUS_NOISE,
            _NOISE_WALK_RADIUS,
            _WALK_RADIUS_MAX,
        )

    def tail_fraction(self, noise_multiplier):
        """Fraction of the last iterates averaged into the returned model.

        0.5 while the run noise (:meth:`run_noise`) is at most 1.1e-3, 1
        (every iterate, from the zero start) when it is at least 4e-3,
        log-linear in between: averaging more iterates lowers the variance of
        a noise-dominated model and adds the early iterates' bias, which only
        pays where the noise dominates. Public, like :meth:`walk_radius`.
        """
        return log_linear(
            self.run_noise(noise_multiplier),
            *_TAIL_NOISE,
            _TAIL_FRACTION_MAX,
            _TAIL_FRACTION,
        )

    def run_noise(self, noise_multiplier):
        """Public noise level of the run: ``2 z / (sqrt(g) n)``.

        The std of one coordinate of the mean gradient, in clip norms, had
        the gradients' whole share ``g`` of the budget gone into one release;
        the per-step noise is this times ``sqrt(T)``, so it does not depend on
        the number of steps. The "auto" rules key on it.
        """
        z_grad = self.noise_multipliers(noise_multiplier)[2]
        return (
            self._sensitivity_factor(_GRADIENT_SENSITIVITY_FACTOR)
            * z_grad
            / (math.sqrt(self.n_iter) * self.n_samples)
        )

    def walk_step(self, noise_multiplier, max_weight, *, cap, radius, dimension):
        """``min(cap, (1 - m) f radius / (sqrt(T dimension) s))``, or the fixed step.

        The rule behind :meth:`step_at` and the preconditioned step: ``s`` the
        noise std of one coordinate of the mean gradient at row weights
        ``1 / n``, ``dimension`` the walk's effective number of coordinates,
        ``f = min(1, 1.5 / (n max_weight))`` and ``m`` the momentum (whose
        steps add up to ``1 / (1 - m)`` times the step, noise included).
        """
        if self.learning_rate is not None:
            return self.learning_rate
        _, _, std_grad = self.noise_stds(noise_multiplier)
        noise = std_grad / self.n_samples * math.sqrt(self.n_iter * dimension)
        if noise == 0.0:
            return cap
        factor = min(1.0, _STEP_NOISE_RATIO / (self.n_samples * max_weight))
        return min(cap, (1.0 - self.momentum) * factor * radius / noise)

    @property
    def count_sensitivity(self):
        """L2 sensitivity of the vector of group counts."""
        return self._sensitivity_factor(_COUNT_SENSITIVITY)

    @property
    def gradient_sensitivity(self):
        """L2 sensitivity of the weighted gradient sum, per unit of ``max_k v_k``."""
        factor = self._sensitivity_factor(_GRADIENT_SENSITIVITY_FACTOR)
        return factor * min(self.clip_norm, self.gradient_bound)

    @property
    def loss_sensitivity(self):
        """L2 sensitivity of the vector of per-group clipped loss sums."""
        return self._sensitivity_factor(_LOSS_SENSITIVITY_FACTOR) * self.max_loss

    def events(self, noise_multiplier):
        """Privacy events of the run at ``noise_multiplier``.

        Each multiplier is std / sensitivity under the plan's relation, so
        the events are the same under both; what differs is the noise std.
        """
        z_count, z_loss, z_grad = self.noise_multipliers(noise_multiplier)
        events = []
        if z_count is not None:
            events.append(GaussianEvent(z_count))
        if z_loss is not None:
            events.append(GaussianEvent(z_loss, count=self.n_iter))
        events.append(GaussianEvent(z_grad, count=self.n_iter))
        if self.precondition_share:
            z_moment = float(noise_multiplier) / math.sqrt(self.precondition_share)
            events.append(GaussianEvent(z_moment))
        return events


def make_saddle_plan(
    *,
    n_samples,
    n_groups,
    row_norm,
    n_iter,
    learning_rate,
    eta_p,
    l2,
    clip_norm,
    max_loss,
    n_params=1,
    weight_cap=None,
    precondition=False,
    momentum=0.0,
    neighbouring="replace-one",
):
    """Build the :class:`SaddlePlan` of a run from public quantities.

    ``row_norm`` bounds the rows fed to the loss (intercept column included).
    ``learning_rate="auto"`` is resolved at run time from the noise (see
    :meth:`SaddlePlan.step_size`; every iterate is accounted as released, so
    no contraction is needed); ``clip_norm="auto"`` is 0.6 times the
    gradient bound (the clip binds on the largest gradients only);
    ``eta_p="auto"`` is the Hedge step ``sqrt(8 log K / T) / max_loss`` for
    losses in ``[0, max_loss]``.
    ``n_params`` (coefficients, intercept included) enters the "auto" step
    and, with ``precondition=True``, whether the second-moment matrix is
    released (at most 1000 coefficients); never the total spend (the shares
    add up to one either way). ``momentum="auto"`` is 0.9.
    ``neighbouring="add-remove"`` halves (or better) every sensitivity and
    makes ``n_samples`` a placeholder (see :class:`SaddlePlan`).
    """
    if neighbouring not in ("replace-one", "add-remove"):
        raise ValueError(
            f"neighbouring must be 'replace-one' or 'add-remove', got {neighbouring!r}."
        )
    gradient_bound, smoothness = logistic_constants(row_norm, 2)
    use = precondition and n_params <= _PRECONDITION_MAX_PARAMS
    precondition_share = _PRECONDITION_SHARE if use else 0.0
    if clip_norm == "auto":
        clip_norm = _AUTO_CLIP_FRACTION * gradient_bound
    if momentum == "auto":
        momentum = _AUTO_MOMENTUM
    if eta_p == "auto":
        eta_p = math.sqrt(8.0 * math.log(max(n_groups, 2)) / n_iter) / max_loss
    return SaddlePlan(
        n_samples=int(n_samples),
        n_groups=int(n_groups),
        n_iter=int(n_iter),
        eta_p=float(eta_p),
        l2=float(l2),
        clip_norm=float(clip_norm),
        gradient_bound=float(gradient_bound),
        max_loss=float(max_loss),
        n_params=int(n_params),
        smoothness=float(smoothness),
        weight_cap=None if weight_cap is None else float(weight_cap),
        learning_rate=None if learning_rate == "auto" else float(learning_rate),
        row_norm=float(row_norm),
        precondition_share=precondition_share,
        momentum=float(momentum),
        neighbouring=neighbouring,
    )


def project_capped_simplex(p, caps):
    """KL projection of a probability vector onto ``{q <= caps, sum q = 1}``.

    The projection is ``q_k = min(caps_k, tau p_k)`` with ``tau`` chosen so
    that ``q`` sums to one; entries that hit their cap are fixed and the rest
    rescaled until none exceeds its cap (at most ``len(p)`` rounds). Requires
    ``caps.sum() >= 1``; ``caps=None`` returns ``p``.
    """
    if caps is None:
        return p
    q = p.copy()
    fixed = np.zeros(p.size, dtype=bool)
    for _ in range(p.size):
        free = ~fixed
        q[fixed] = caps[fixed]
        mass = p[free].sum()
        rest = 1.0 - caps[fixed].sum()
        q[free] = p[free] * (rest / mass) if mass > 0 else rest / free.sum()
        over = free & (q > caps)
        if not over.any():
            break
        fixed |= over
    return np.minimum(q, caps)


def _weighted_gradient(scores, X, y, row_weights, scale, norm, plan, fit_intercept):
    """``sum_i v_i c_i``: clipped per-example logistic gradients, weighted.

    Rows are projected (``x -> scale * x``, a per-record map) with the
    intercept column appended implicitly; per-example gradients ``r_i x_i``
    are clipped to ``plan.clip_norm``.

    Returns
    -------
    ndarray of shape (n_features + fit_intercept,)
    """
    residual = expit(scores) - y
    factor = np.minimum(
        1.0, plan.clip_norm / np.maximum(norm * np.abs(residual), 1e-300)
    )
    residual = residual * factor * row_weights
    grad = X.T @ (residual * scale)
    return np.append(grad, residual.sum()) if fit_intercept else grad


def _group_loss_sums(scores, y, codes, plan):
    """Per-group sums of the logistic losses clipped to ``[0, plan.max_loss]``."""
    losses = np.logaddexp(0.0, scores) - y * scores
    return np.bincount(
        codes, weights=np.clip(losses, 0.0, plan.max_loss), minlength=plan.n_groups
    )


def _second_moment(X, scale, fit_intercept, chunk=65536):
    """``sum_i a_i a_i^T`` of the projected rows ``a_i = [scale_i x_i, 1]``."""
    D = X.shape[1] + int(fit_intercept)
    total = np.zeros((D, D))
    for lo in range(0, X.shape[0], chunk):
        A = X[lo : lo + chunk] * scale[lo : lo + chunk, None]
        if fit_intercept:
            A = np.column_stack([A, np.ones(A.shape[0])])
        total += A.T @ A
    return total


def _private_preconditioner(X, scale, plan, noise_multiplier, fit_intercept, rng):
    """Release ``sum_i a_i a_i^T`` once (Gaussian) and return ``(P, tr(P S P))``.

    ``a_i`` are the projected rows (intercept column included), so
    ``||a_i|| <= R`` and, replacing ``a`` by ``a'``, the upper triangle
    (diagonal included) of ``a a^T - a' a'^T`` has squared norm
    ``(||D||_F^2 + sum_j D_jj^2) / 2 <= (2 R^4 + 2 R^4) / 2``: sensitivity
    ``sqrt(2) R^2``. The upper triangle gets i.i.d. noise and is mirrored;
    ``S = (sum + noise) / n``; ``P = (S_+ + lam I)^-1`` with ``S_+`` the
    eigenvalues clipped at 0 and ``lam`` the ridge factor times the expected
    spectral norm of the noise, ``2 sqrt(D) std / n`` (public).
    """
    n = plan.n_samples
    moment = _second_moment(X, scale, fit_intercept)
    D = moment.shape[0]
    std = plan.second_moment_std(noise_multiplier)
    noise = np.triu(rng.normal(0.0, std, size=(D, D)))
    noise = noise + np.triu(noise, 1).T
    S = (moment + noise) / n
    mu, V = np.linalg.eigh(S)
    mu = np.maximum(mu, 0.0)
    lam = _PRECONDITION_RIDGE * 2.0 * math.sqrt(D) * std / n
    inv = 1.0 / (mu + lam)
    P = (V * inv) @ V.T
    return P, float(np.sum(mu * inv**2))


def _preconditioned_step(plan, noise_multiplier, max_weight, walk_trace):
    """Step in the preconditioned geometry.

    ``min(c, f r / (sqrt(T tr(P S P)) s))``: the noise walk ``lr sqrt(T) P xi``
    measured in the released second-moment norm.
    """
    return plan.walk_step(
        noise_multiplier,
        max_weight,
        cap=_PRECONDITIONED_STEP,
        radius=_PRECONDITIONED_RADIUS,
        dimension=walk_trace,
    )


def run_saddle_gda(
    X,
    y,
    group_codes,
    plan,
    noise_multiplier,
    *,
    row_norm,
    fit_intercept,
    rng,
    verbose=0,
):
    """Noisy gradient descent-ascent on the worst-group logistic loss.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {0, 1}.
    group_codes : ndarray of int, shape (n_samples,)
        Group index of each row, in ``range(plan.n_groups)``.
    plan : SaddlePlan
    noise_multiplier : float
    row_norm : float
        Rows (with the intercept column) are projected onto this ball.
    fit_intercept : bool
    rng : numpy.random.Generator
    verbose : int

    Returns
    -------
    w : ndarray of shape (n_features + fit_intercept,)
        Average of the last ``plan.tail_fraction(noise_multiplier)`` of the
        model iterates (half, or more at a large noise).
    p : ndarray of shape (n_groups,)
        Last adversary weights.
    events : list of privacy events
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    codes = np.asarray(group_codes, dtype=np.intp)
    K = plan.n_groups
    # One pass of exact norms; rows of astronomical norm go onto the ball
    # first (no overflow to NaN); the projection reads the norms as float32,
    # rounded up.
    X, raw = tame_rows(
        X, row_norms(X, exact=True), feature_norm(row_norm, fit_intercept)
    )
    scale, norm = row_projection(rounded_up_float32(raw), row_norm, fit_intercept)
    std_count, std_loss, std_grad = plan.noise_stds(noise_multiplier)

    # Release 1: noisy group counts (n itself when there is one group and n
    # is public).
    if plan.releases_counts:
        counts = np.bincount(codes, minlength=K) + rng.normal(0.0, std_count, size=K)
    else:
        counts = np.array([float(plan.n_samples)])
    denom = np.maximum(counts, _MIN_COUNT)
    if plan.neighbouring == "add-remove":
        # n is private: every rule reads the released total instead.
        plan = plan.at_released_size(denom.sum())
    caps = None
    if plan.weight_cap is not None and K > 1:
        caps = np.minimum(1.0, plan.weight_cap * denom / denom.sum())

    precond = None
    if plan.precondition_share:
        if not math.isclose(plan.row_norm, row_norm):
            raise ValueError("row_norm differs from the plan's (its sensitivity).")
        # Release 1b: the noisy second-moment matrix (see the docstring).
        precond, walk_trace = _private_preconditioner(
            X, scale, plan, noise_multiplier, fit_intercept, rng
        )
    w = np.zeros(X.shape[1] + int(fit_intercept))
    p = project_capped_simplex(np.full(K, 1.0 / K), caps)
    w_sum = np.zeros_like(w)
    w_prev = w
    tail = plan.tail_fraction(noise_multiplier)
    first_averaged = min(int(plan.n_iter * (1.0 - tail)), plan.n_iter - 1)
    for step in range(plan.n_iter):
        scores = row_scores(w, X, scale, fit_intercept)
        # Release 2: the noisy p-weighted gradient sum; its sensitivity is
        # 2 C max_k v_k, fixed by earlier releases (see the module docstring).
        v = p / denom
        grad = _weighted_gradient(
            scores, X, y, v[codes], scale, norm, plan, fit_intercept
        )
        grad += rng.normal(0.0, std_grad * v.max(), size=grad.shape)
        direction = grad + plan.l2 * w
        if precond is None:
            step_size = plan.step_at(noise_multiplier, v.max())
        else:
            step_size = _preconditioned_step(
                plan, noise_multiplier, v.max(), walk_trace
            )
            direction = precond @ direction
        w_next = w - step_size * direction + plan.momentum * (w - w_prev)
        w_prev = w
        if K > 1:
            # Release 3: noisy per-group loss sums; exponentiated-gradient
            # ascent, projected onto the capped simplex.
            loss_sums = _group_loss_sums(scores, y, codes, plan)
            noisy_losses = loss_sums + rng.normal(0.0, std_loss, size=K)
            log_p = np.log(np.maximum(p, 1e-300)) + plan.eta_p * noisy_losses / denom
            p = project_capped_simplex(np.exp(log_p - logsumexp(log_p)), caps)
        w = w_next
        if step >= first_averaged:
            w_sum += w
        if verbose and (step + 1) % _LOG_INTERVAL == 0:
            logger.info(
                "step %d/%d done (no loss shown: it would read the data unprotected)",
                step + 1,
                plan.n_iter,
            )
    w_avg = w_sum / (plan.n_iter - first_averaged)
    return w_avg, p, plan.events(noise_multiplier)

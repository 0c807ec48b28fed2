"""What a gradient descent-ascent run releases, and with which sensitivity.

Replace-one: a record ``(x, y, g)`` replaced by ``(x', y', g')``, group labels
from a public set. Every release is a Gaussian mechanism (docs/accounting.md)
whose noise is fixed before the data it reads; their Rényi curves add under
adaptive composition:

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
  each: sensitivity ``sqrt(2) B``;
- with ``precondition=True`` (a bounded number of coefficients), once, before
  the first step, the upper triangle (diagonal included) of the second-moment
  matrix ``sum_i a_i a_i^T`` of the projected rows (intercept column included,
  ``||a_i|| <= R``): replacing ``a`` by ``a'`` moves it by ``Delta = a a^T -
  a' a'^T``, whose upper triangle has squared norm ``(||Delta||_F^2 + sum_j
  Delta_jj^2) / 2``; ``||Delta||_F^2 = ||a||^4 + ||a'||^4 - 2 (a . a')^2 <=
  2 R^4`` and ``sum_j Delta_jj^2 <= sum_j a_j^4 + sum_j a'_j^4 <= 2 R^4``, so
  the sensitivity is ``sqrt(2) R^2`` (attained by orthogonal rows of norm
  ``R``).

With one group the counts are ``n`` (public under replace-one) and the
adversary has nothing to choose: only the gradient sums are released (private
full-batch gradient descent).

Add/remove neighbours (a record ``(x, y, g)`` added or removed) move every
release by half as much or less, since nothing is subtracted where something
is added: the counts by 1 (one entry), the weighted gradient sum by
``C max_k v_k``, the loss sums by ``max_loss`` (one entry), the second-moment
triangle by ``R^2`` (its squared norm ``(||a a^T||_F^2 + sum_j a_j^4) / 2 <=
R^4``). ``n`` is then private: the counts are released even with one group,
and no rule reads ``n`` (:mod:`._schedule`).

A release of share ``f`` of the budget made ``m`` times gets the multiplier
``z sqrt(m / f)``, so its ``m`` uses cost ``f`` times the curve ``a / (2 z^2)``
of one Gaussian with multiplier ``z``; the shares add up to 1.
"""

import math
from dataclasses import dataclass

from ...accounting import GaussianEvent, Neighbouring, logistic_constants
from .._rows import loss_row_norm
from .._saddle import histogram_sensitivity

__all__ = ["GDAPlan", "ReleaseNoise", "make_gda_plan"]


@dataclass(frozen=True)
class ReleaseNoise:
    """A value for each release: the counts, a loss sum, a gradient sum.

    None for a release the run does not make.
    """

    count: float | None
    loss: float | None
    gradient: float


@dataclass(frozen=True)
class GDAPlan:
    """Everything public about a run's releases.

    Attributes
    ----------
    n_samples : int
        ``n`` under replace-one; under add/remove a placeholder that no
        release reads.
    n_groups : int
    n_iter : int
        Number of noisy steps ``T`` (every step reads every row).
    neighbouring : Neighbouring
        The relation the sensitivities are for.
    clip_norm : float
        Per-example gradient clip norm ``C``.
    gradient_bound : float
        Enforced bound ``G`` on per-example gradient norms (rows projected).
    max_loss : float
        Per-example losses are clipped to ``[0, max_loss]`` before summing.
    row_norm : float
        Bound ``R`` on the rows fed to the loss, intercept column included.
    n_params : int
        Number of model coefficients (intercept included).
    count_share, loss_share, gradient_share, second_moment_share : float
        Budget shares of the releases (0 for a release not made).
    """

    n_samples: int
    n_groups: int
    n_iter: int
    neighbouring: Neighbouring
    clip_norm: float
    gradient_bound: float
    max_loss: float
    row_norm: float
    n_params: int
    count_share: float
    loss_share: float
    gradient_share: float
    second_moment_share: float

    @property
    def releases_counts(self):
        """Whether the run releases the group counts (else they are the public n)."""
        return self.count_share > 0

    @property
    def count_sensitivity(self):
        """L2 sensitivity of the vector of group counts."""
        return histogram_sensitivity(self.neighbouring, 1.0)

    @property
    def gradient_sensitivity(self):
        """L2 sensitivity of the weighted gradient sum, per unit of ``max_k v_k``."""
        bound = min(self.clip_norm, self.gradient_bound)
        return self.neighbouring.sum_sensitivity(bound)

    @property
    def loss_sensitivity(self):
        """L2 sensitivity of the vector of per-group clipped loss sums."""
        return histogram_sensitivity(self.neighbouring, self.max_loss)

    @property
    def second_moment_sensitivity(self):
        """L2 sensitivity of the upper triangle of ``sum_i a_i a_i^T``."""
        return histogram_sensitivity(self.neighbouring, self.row_norm**2)

    def noise_multipliers(self, noise_multiplier):
        """Multiplier (std / sensitivity) of each release, a :class:`ReleaseNoise`."""
        z = float(noise_multiplier)
        T = self.n_iter
        return ReleaseNoise(
            count=z / math.sqrt(self.count_share) if self.count_share else None,
            loss=z * math.sqrt(T / self.loss_share) if self.loss_share else None,
            gradient=z * math.sqrt(T / self.gradient_share),
        )

    def noise_stds(self, noise_multiplier):
        """Noise std of the counts, of each loss sum and of the gradient sum.

        The last is for row weights of at most 1; a step whose largest row
        weight is ``max_k v_k`` scales it by that.
        """
        z = self.noise_multipliers(noise_multiplier)
        return ReleaseNoise(
            count=None if z.count is None else z.count * self.count_sensitivity,
            loss=None if z.loss is None else z.loss * self.loss_sensitivity,
            gradient=z.gradient * self.gradient_sensitivity,
        )

    def second_moment_std(self, noise_multiplier):
        """Noise std of each upper-triangle entry of the second-moment release."""
        if not self.second_moment_share:
            return None
        z = float(noise_multiplier) / math.sqrt(self.second_moment_share)
        return z * self.second_moment_sensitivity

    def events(self, noise_multiplier):
        """Privacy events of the run at ``noise_multiplier``.

        Each multiplier is std / sensitivity under the plan's relation, so
        the events are the same under both; what differs is the noise std.
        """
        z = self.noise_multipliers(noise_multiplier)
        events = []
        if z.count is not None:
            events.append(GaussianEvent(z.count))
        if z.loss is not None:
            events.append(GaussianEvent(z.loss, count=self.n_iter))
        events.append(GaussianEvent(z.gradient, count=self.n_iter))
        if self.second_moment_share:
            z_moment = float(noise_multiplier) / math.sqrt(self.second_moment_share)
            events.append(GaussianEvent(z_moment))
        return events


def make_gda_plan(problem, policy):
    """The :class:`GDAPlan` of ``problem`` (a ``SaddleProblem``) under ``policy``.

    ``clip_norm="auto"`` is ``policy.clip_fraction`` times the gradient bound;
    with ``precondition=True`` the second moment is released when the model
    has at most ``policy.precondition_max_params`` coefficients, its share
    taken from the gradients'.
    """
    relation = Neighbouring.parse(problem.neighbouring)
    row_norm = loss_row_norm(problem.row_norm, problem.fit_intercept)
    gradient_bound, _ = logistic_constants(row_norm, 2)
    n_params = problem.n_features + int(problem.fit_intercept)
    precondition = problem.precondition and n_params <= policy.precondition_max_params
    second_moment_share = policy.precondition_share if precondition else 0.0
    grouped = problem.n_groups > 1
    # Counts are released with groups, or without when n is private.
    releases_counts = grouped or relation is Neighbouring.ADD_REMOVE
    count_share = policy.count_share if releases_counts else 0.0
    loss_share = policy.loss_share if grouped else 0.0
    # Without groups the loss share goes to the gradients.
    gradient_share = policy.gradient_share if grouped else 1.0 - count_share
    gradient_share -= second_moment_share
    clip_norm = problem.clip_norm
    if clip_norm == "auto":
        clip_norm = policy.clip_fraction * gradient_bound
    return GDAPlan(
        n_samples=int(problem.n_samples),
        n_groups=int(problem.n_groups),
        n_iter=int(problem.n_iter),
        neighbouring=relation,
        clip_norm=float(clip_norm),
        gradient_bound=float(gradient_bound),
        max_loss=float(problem.max_loss),
        row_norm=float(row_norm),
        n_params=int(n_params),
        count_share=count_share,
        loss_share=loss_share,
        gradient_share=gradient_share,
        second_moment_share=second_moment_share,
    )

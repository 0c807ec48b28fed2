"""Private noisy gradient descent-ascent for the worst-group logistic loss.

The game is ``min_w max_{p in simplex} sum_k p_k L_k(w) + l2 / 2 ||w||^2``
with ``L_k`` the mean logistic loss of group ``k``. Every step the model
player takes a gradient step on the ``p``-weighted loss and the adversary an
exponentiated-gradient step towards the groups with the largest loss; both see
the data only through Gaussian-noised sums. A fit goes:

- :func:`make_gda_plan` (:mod:`._plan`): the releases, their sensitivities and
  privacy events, from public inputs only, for any noise multiplier;
- :func:`make_gda_schedule` (:mod:`._schedule`): the steps, from the plan, the
  calibrated noise and the :class:`GDAPolicy` (:mod:`._policy`); it cannot
  change the events;
- :func:`run_gda` (:mod:`._run`, with the data-reading sums of
  :mod:`._releases`): the run, returning the model, the adversary's weights
  and the events.

:class:`GDASolver` bundles the three behind the interface both saddle-point
solvers share (:class:`skdp._solvers._saddle.SaddleSolver`).
"""

from dataclasses import dataclass, field

from .._saddle import SaddleSolver
from ._plan import GDAPlan, ReleaseNoise, make_gda_plan
from ._policy import GDAPolicy
from ._run import project_capped_simplex, run_gda
from ._schedule import GDASchedule, make_gda_schedule

__all__ = [
    "GDAPlan",
    "GDAPolicy",
    "GDASchedule",
    "GDASolver",
    "ReleaseNoise",
    "make_gda_plan",
    "make_gda_schedule",
    "project_capped_simplex",
    "run_gda",
]


@dataclass(frozen=True)
class GDASolver(SaddleSolver):
    """Noisy gradient descent-ascent, with its tuning policy."""

    policy: GDAPolicy = field(default_factory=GDAPolicy)

    def plan(self, problem):
        """The :class:`GDAPlan` of ``problem``."""
        return make_gda_plan(problem, self.policy)

    def schedule(self, problem, plan, noise_multiplier):
        """The :class:`GDASchedule` of ``plan`` at ``noise_multiplier``."""
        return make_gda_schedule(problem, plan, noise_multiplier, self.policy)

    @property
    def auto_centring_share(self):
        """The centre's share under ``centring_share="auto"``: the policy's."""
        return self.policy.centring_share

    def run(self, rows, problem, schedule, noise_multiplier, *, rng, verbose=0):
        """See :meth:`SaddleSolver.run`."""
        return run_gda(
            rows, problem, schedule, noise_multiplier, rng=rng, verbose=verbose
        )

    def run_centred(
        self, rows, problem, schedule, noise_multiplier, centring, *, rng, verbose=0
    ):
        """See :meth:`SaddleSolver.run_centred`; the centre follows the counts.

        Released in the run after the group counts and divided by the
        schedule's ``n`` (under add/remove, their released total), so no
        rule reads the private ``n``.
        """
        return run_gda(
            rows,
            problem,
            schedule,
            noise_multiplier,
            rng=rng,
            verbose=verbose,
            centring=centring,
        )

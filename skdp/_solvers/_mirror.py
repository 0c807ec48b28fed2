"""Private stochastic mirror descent with sampled vertices, worst-group logistic loss.

Pure functions. The game is ``min_{w in W} max_{p in simplex} sum_k p_k L_k(w)
+ l2 / 2 ||w||^2`` with ``W`` the l1-ball of radius ``R`` (``l1_radius``) in
the coefficients (intercept included) and ``L_k`` the mean logistic loss of
group ``k``. Both players run entropic mirror descent (Hedge) over the vertices
of their sets: ``+-R e_j`` (``2D`` vertices) for the model, the ``K`` groups for
the adversary. Their weights are never released: every step each player *samples*
vertices with probability proportional to its weights, i.e. ``exp(score)`` with
the cumulative linearised losses as score. This is the exponential mechanism
(González, Guzmán and Paquette, "Mirror descent algorithms with nearly
dimension-independent rates for differentially-private stochastic saddle-point
problems", Algorithm 1 and the proof of Proposition 3.3). Gradients are taken
at the running averages of the sampled vertices (anytime online-to-batch, as in
the same paper's Algorithm 5; Cutkosky 2019), which are released anyway; the
model is the average of all sampled model vertices (sparse: at most ``T m``
non-zeros).

Enforced bounds (per-record maps, free of privacy cost): every entry of ``X`` is
clipped to ``[-G, G]`` (the intercept column is 1, so ``G_eff = max(G, 1)``);
per-example losses are clipped to ``[0, B]`` with ``B <= log(1 + exp(R G_eff))``
(the largest logistic loss on the ball); residuals ``sigmoid(s) - y`` lie in
``(-1, 1)``.

Batches: a permutation drawn from the estimator's rng (independent of the data,
never released) is cut into ``T`` disjoint batches of public sizes ``b_t``
(one pass). Under replace-one the differing record sits in exactly one batch
``s``. The scores are *cumulative*, so batch ``s`` moves the scores of every
draw at steps ``t >= s``: each draw is accounted (no parallel composition),
each with the sensitivity of one use of the record.

Per-draw range (replace-one; derivation in docs/fairness.md, section
"Constants"). Group ``k`` in batch ``t`` is weighted by
``omega_{t,k} = n / (b_t d_k)`` with ``d_k = max(n~_k, n / T)`` and ``n~_k`` the
Gaussian-noised group counts (released first). With ``omega = n / (b_min d_min)``:

- model draw: the score of vertex ``+-R e_j`` is ``-+ eta_w R sum_s g_{s,j}``;
  one record moves ``g_{s,j}`` by at most ``2 G_eff omega``, hence the score
  vector by a difference of range ``4 eta_w R G_eff omega``;
- adversary draw: the score of group ``k`` is ``eta_p sum_s Lhat_{s,k}``;
  same group: one entry moves by at most ``eta_p omega B``; group change: one
  entry up by at most that, one down by at most that: range
  ``2 eta_p B omega``.

Sampling ``i`` with probability ``exp(u_i) / sum_j exp(u_j)`` when the scores
move by ``Delta`` has log-ratio ``Delta_i - log sum_j P'_j exp(Delta_j)``, in
``[Delta_i - max Delta, Delta_i - min Delta]``: the draw is ``r``-DP and
``r``-bounded range with ``r = max Delta - min Delta`` (McSherry and Talwar
2007; Durfee and Rogers 2019), hence ``r^2 / 8``-zCDP (Cesar and Rogers 2021,
Lemma 3.2). The ranges ``r_w``, ``r_p`` are fixed by the plan from the noise
multiplier; the steps are then ``eta = min(r / (range per unit step), eta*)``
with ``eta*`` the non-private Hedge step, so every draw's range is at most its
accounted ``r`` for every value of the released counts.
"""

import logging
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit, logsumexp

from ..accounting import ExponentialMechanismEvent, GaussianEvent, Neighbouring
from ._saddle import (
    SaddleResult,
    SaddleSolver,
    histogram_sensitivity,
    noisy_counts,
)

__all__ = [
    "MirrorPlan",
    "MirrorPolicy",
    "MemoryRows",
    "MirrorSolver",
    "make_mirror_plan",
    "play_mirror",
    "run_mirror",
]

logger = logging.getLogger("skdp")

# Range of a model draw per unit of eta_w R G_eff omega, of an adversary draw
# per unit of eta_p B omega (module docstring).
_VERTEX_RANGE_FACTOR = 4.0
_GROUP_RANGE_FACTOR = 2.0
_LOG_INTERVAL = 200


@dataclass(frozen=True)
class MirrorPolicy:
    """Tuning rules of private mirror descent (public, data-free).

    Budget shares are of the Rényi curve ``a / (2 z^2)`` of one Gaussian with
    multiplier ``z``; they add up to 1.
    """

    #: Group counts: one release, read to weight the groups and set the steps
    #: (docs/benchmarks.md, "Worst-group fairness").
    count_share: float = 0.1
    #: The adversary's draws: among K groups, fewer choices than the model's
    #: 2D vertices (docs/benchmarks.md, "Worst-group fairness").
    group_share: float = 0.2
    #: The model's draws: the largest share, the model is what is returned
    #: (docs/benchmarks.md, "Worst-group fairness").
    vertex_share: float = 0.7
    #: Model vertices drawn per step: more draws narrow every draw's range
    #: (docs/benchmarks.md, "Worst-group fairness").
    vertex_samples: int = 1
    #: Groups drawn per step, likewise (docs/benchmarks.md, "Worst-group
    #: fairness").
    group_samples: int = 1
    #: Non-private cap, times the worst-case Hedge step: larger steps
    #: oscillate (docs/benchmarks.md, "Worst-group fairness").
    hedge_step_factor: float = 1.0

    def __post_init__(self):
        if min(self.count_share, self.group_share, self.vertex_share) <= 0:
            raise ValueError("MirrorPolicy: every budget share must be positive.")


@dataclass(frozen=True)
class MirrorPlan:
    """Everything public about a private mirror-descent run.

    Attributes
    ----------
    n_samples : int
    n_groups : int
    n_iter : int
        Number of steps ``T`` (one pass over ``T`` disjoint batches).
    n_features : int
        Number of coordinates ``D`` of the model (intercept included).
    l1_radius : float
        Radius ``R`` of the l1-ball the model lives in.
    feature_bound : float
        Enforced bound ``G_eff`` on ``|x_ij|`` (intercept column included).
    max_loss : float
        Per-example losses are clipped to ``[0, max_loss]``.
    l2 : float
        Penalty ``l2 / 2 ||w||^2`` (data-independent part of the gradient).
    policy : MirrorPolicy
    """

    n_samples: int
    n_groups: int
    n_iter: int
    n_features: int
    l1_radius: float
    feature_bound: float
    max_loss: float
    l2: float
    policy: MirrorPolicy = field(default_factory=MirrorPolicy)

    @property
    def shares(self):
        """Budget shares ``(counts, group draws, vertex draws)``."""
        if self.n_groups == 1:
            return 0.0, 0.0, 1.0
        policy = self.policy
        return policy.count_share, policy.group_share, policy.vertex_share

    @property
    def batch_sizes(self):
        """Public sizes of the ``T`` disjoint batches (``np.array_split``)."""
        base, extra = divmod(self.n_samples, self.n_iter)
        return np.array([base + 1] * extra + [base] * (self.n_iter - extra))

    def draw_ranges(self, noise_multiplier):
        """Accounted range ``(r_w, r_p)`` of one model draw and one group draw.

        A share ``f`` spread over ``m`` draws of range ``r`` costs
        ``m r^2 / 8`` in zCDP; setting it to ``f / (2 z^2)`` gives
        ``r = 2 sqrt(f / m) / z``.
        """
        z = float(noise_multiplier)
        _, group_share, vertex_share = self.shares
        vertex_draws = self.n_iter * self.policy.vertex_samples
        group_draws = self.n_iter * self.policy.group_samples
        r_w = 2.0 * math.sqrt(vertex_share / vertex_draws) / z
        r_p = 2.0 * math.sqrt(group_share / group_draws) / z
        return r_w, r_p

    def count_noise_multiplier(self, noise_multiplier):
        """Noise multiplier of the group-count release, or None without one."""
        count_share = self.shares[0]
        return noise_multiplier / math.sqrt(count_share) if count_share else None

    def count_std(self, noise_multiplier):
        """Noise std of the group-count release (replace-one), or None."""
        z_count = self.count_noise_multiplier(noise_multiplier)
        if z_count is None:
            return None
        return z_count * histogram_sensitivity(Neighbouring.REPLACE_ONE, 1.0)

    def steps(self, noise_multiplier, min_denominator):
        """Steps ``(eta_w, eta_p)`` whose draws stay within the accounted ranges.

        Parameters
        ----------
        noise_multiplier : float
        min_denominator : float
            ``d_min``, the smallest group denominator (post-processing of the
            released counts, at least ``n / T``).

        Returns
        -------
        eta_w, eta_p : float
        """
        r_w, r_p = self.draw_ranges(noise_multiplier)
        omega = self.n_samples / (self.batch_sizes.min() * min_denominator)
        R, G, B, T = self.l1_radius, self.feature_bound, self.max_loss, self.n_iter
        # Non-private Hedge steps: linear losses of range 2 R G over 2D
        # vertices, of range B over K groups (Cesa-Bianchi and Lugosi 2006,
        # Theorem 2.2: eta = sqrt(8 log N / T) / range).
        eta_w_star = math.sqrt(8.0 * math.log(2 * self.n_features) / T) / (2 * R * G)
        eta_p_star = math.sqrt(8.0 * math.log(max(self.n_groups, 2)) / T) / B
        hedge = self.policy.hedge_step_factor
        eta_w = min(r_w / (_VERTEX_RANGE_FACTOR * R * G * omega), hedge * eta_w_star)
        eta_p = min(r_p / (_GROUP_RANGE_FACTOR * B * omega), hedge * eta_p_star)
        return eta_w, eta_p

    def events(self, noise_multiplier):
        """Privacy events of the run at ``noise_multiplier`` (replace-one)."""
        r_w, r_p = self.draw_ranges(noise_multiplier)
        z_count = self.count_noise_multiplier(noise_multiplier)
        events = []
        if z_count is not None:
            events.append(GaussianEvent(z_count))
            events.append(
                ExponentialMechanismEvent(
                    r_p,
                    count=self.n_iter * self.policy.group_samples,
                    bounded_range=True,
                )
            )
        events.append(
            ExponentialMechanismEvent(
                r_w, count=self.n_iter * self.policy.vertex_samples, bounded_range=True
            )
        )
        return events


def make_mirror_plan(
    *,
    n_samples,
    n_groups,
    n_features,
    n_iter,
    l1_radius,
    feature_bound,
    fit_intercept,
    max_loss,
    l2,
    policy=None,
):
    """Build the :class:`MirrorPlan` of a run from public quantities.

    ``n_iter`` is capped at ``n_samples`` (batches of at least one row);
    ``feature_bound`` becomes ``max(feature_bound, 1)`` with an intercept; the
    loss clip is ``min(max_loss, log(1 + exp(R G_eff)))``. ``n_features``
    excludes the intercept. ``policy`` None: the default :class:`MirrorPolicy`.
    """
    bound = max(float(feature_bound), 1.0) if fit_intercept else float(feature_bound)
    largest_loss = float(np.logaddexp(0.0, l1_radius * bound))
    return MirrorPlan(
        n_samples=int(n_samples),
        n_groups=int(n_groups),
        n_iter=int(min(n_iter, n_samples)),
        n_features=int(n_features) + int(fit_intercept),
        l1_radius=float(l1_radius),
        feature_bound=bound,
        max_loss=min(float(max_loss), largest_loss),
        l2=float(l2),
        policy=MirrorPolicy() if policy is None else policy,
    )


def _draw_probabilities(coef_scores, group_scores):
    """Exponential-mechanism distributions of the two players.

    Parameters
    ----------
    coef_scores : ndarray of shape (D,)
        Score of the vertex ``+R e_j``; the vertex ``-R e_j`` has the opposite.
    group_scores : ndarray of shape (K,)

    Returns
    -------
    vertex_probabilities : ndarray of shape (2 D,)
        Over ``+R e_0, ..., +R e_{D-1}, -R e_0, ..., -R e_{D-1}``.
    group_probabilities : ndarray of shape (K,)
    """
    out = []
    for scores in (np.concatenate([coef_scores, -coef_scores]), group_scores):
        probabilities = np.exp(scores - logsumexp(scores))
        out.append(probabilities / probabilities.sum())
    return out[0], out[1]


def _running_averages(vertex_counts, group_counts, l1_radius):
    """Average sampled model vertex and smoothed group frequencies.

    ``p_bar`` counts a uniform prior as one draw, so it is defined before any
    draw and always lies in the simplex.
    """
    D = vertex_counts.size // 2
    total = vertex_counts.sum()
    if total > 0:
        w = l1_radius * (vertex_counts[:D] - vertex_counts[D:]) / total
    else:
        w = np.zeros(D)
    K = group_counts.size
    p_bar = (group_counts + 1.0 / K) / (group_counts.sum() + 1.0)
    return w, p_bar


def _batch_sums(w, row_weights, Xb, yb, gb, plan, fit_intercept):
    """A batch's two sums at ``w``, each row weighted by its group's weight.

    Entries of ``Xb`` are clipped to ``[-G, G]``; losses to ``[0, B]``.

    Parameters
    ----------
    w : ndarray of shape (D,)
    row_weights : ndarray of shape (K,)
        The weight ``p_bar[k] omega[k]`` of a row of group ``k``.
    Xb, yb, gb : ndarray
        The batch's rows, labels and group indices.
    plan : MirrorPlan
    fit_intercept : bool

    Returns
    -------
    gradient : ndarray of shape (D,)
        ``sum_i row_weights[g_i] (sigmoid(s_i) - y_i) x_i``.
    loss_sums : ndarray of shape (K,)
        ``sum_{i in group k} clip(loss_i)``.
    """
    # In float64: a float32 bound can round above ``feature_bound``.
    Xb = np.clip(np.asarray(Xb, dtype=float), -plan.feature_bound, plan.feature_bound)
    coef = w[:-1] if fit_intercept else w
    scores = Xb @ coef + (w[-1] if fit_intercept else 0.0)
    residual = (expit(scores) - yb) * row_weights[gb]
    gradient = residual @ Xb
    if fit_intercept:
        gradient = np.append(gradient, residual.sum())
    losses = np.clip(np.logaddexp(0.0, scores) - yb * scores, 0.0, plan.max_loss)
    return gradient, np.bincount(gb, weights=losses, minlength=plan.n_groups)


def _batch_estimates(w, p_bar, Xb, yb, gb, omega, plan, fit_intercept):
    """Weighted gradient and group-loss estimates of one batch at ``w``.

    Returns
    -------
    gradient : ndarray of shape (D,)
        ``sum_i p_bar[g_i] omega[g_i] (sigmoid(s_i) - y_i) x_i + l2 w``.
    group_losses : ndarray of shape (K,)
        ``omega[k] * sum_{i in group k} clip(loss_i)``.
    """
    sums = _batch_sums(w, p_bar * omega, Xb, yb, gb, plan, fit_intercept)
    return _estimates(sums, w, omega, plan)


def _estimates(sums, w, omega, plan):
    """:func:`_batch_estimates` from the batch's :func:`_batch_sums`."""
    gradient, loss_sums = sums
    return gradient + plan.l2 * w, omega * loss_sums


def _mirror_step(scores, averages, batch, omega, steps, plan, fit_intercept):
    """Cumulative scores after one mirror (Hedge) step on one batch.

    Parameters
    ----------
    scores : tuple of ndarray
        ``(coef_scores, group_scores)`` before the step.
    averages : tuple of ndarray
        ``(w, p_bar)``, the running averages of the released draws.
    batch : tuple of ndarray
        ``(Xb, yb, gb)``, the rows of the batch.
    omega : ndarray of shape (K,)
        Group weights ``n / (b_t d_k)`` of this batch.
    steps : tuple of float
        ``(eta_w, eta_p)``.
    plan : MirrorPlan
    fit_intercept : bool

    Returns
    -------
    coef_scores, group_scores : ndarray
        New arrays (the inputs are not modified).
    """
    w, p_bar = averages
    estimates = _batch_estimates(w, p_bar, *batch, omega, plan, fit_intercept)
    return _scores_after(scores, estimates, steps, plan)


def _scores_after(scores, estimates, steps, plan):
    """The cumulative scores moved by one batch's estimates."""
    coef_scores, group_scores = scores
    gradient, group_losses = estimates
    return (
        coef_scores - steps[0] * plan.l1_radius * gradient,
        group_scores + steps[1] * group_losses,
    )


class MemoryRows:
    """The rows of a fit in memory, answering the run's sums.

    A Dask collection's partitions answer the same questions where they are
    held (:mod:`skdp._solvers._mirror_dask`).
    """

    def __init__(self, rows):
        self.X = np.asarray(rows.X)
        self.y = np.asarray(rows.y, dtype=float)
        self.codes = rows.group_codes

    def group_counts(self, n_groups):
        """The exact number of rows of each group."""
        return np.bincount(self.codes, minlength=n_groups)

    def batch_sums(self, index, w, row_weights, plan, fit_intercept):
        """:func:`_batch_sums` of the rows ``index`` (sorted)."""
        batch = (self.X[index], self.y[index], self.codes[index])
        return _batch_sums(w, row_weights, *batch, plan, fit_intercept)


def run_mirror(rows, problem, plan, noise_multiplier, *, rng, verbose=0):
    """Private stochastic mirror descent with sampled vertices (one pass).

    Parameters and result as :meth:`skdp._solvers._saddle.SaddleSolver.run`,
    with the :class:`MirrorPlan` as the schedule (the steps follow the
    released counts, inside the run). The model is the average of the
    sampled vertices, the group weights the frequencies of the sampled
    groups.
    """
    return play_mirror(
        MemoryRows(rows),
        plan,
        noise_multiplier,
        fit_intercept=problem.fit_intercept,
        rng=rng,
        verbose=verbose,
    )


def play_mirror(sums, plan, noise_multiplier, *, fit_intercept, rng, verbose=0):
    """The run of :func:`run_mirror` on rows that answer its sums.

    Parameters
    ----------
    sums : MemoryRows or an object with the same questions
        ``group_counts`` and ``batch_sums``; a Dask collection's partitions
        answer them where they are held
        (:class:`skdp._solvers._mirror_dask.HeldMirrorRows`).
    plan, noise_multiplier, rng, verbose
        As for :func:`run_mirror`.
    fit_intercept : bool

    Returns
    -------
    SaddleResult
    """
    n, K, T, D = plan.n_samples, plan.n_groups, plan.n_iter, plan.n_features

    # Release 1: noisy group counts (n itself with one group); the
    # denominators d_k are post-processing, floored at n / T.
    std = plan.count_std(noise_multiplier)
    if std is None:
        counts = np.array([float(n)])
    else:
        counts = noisy_counts(sums.group_counts(K), std, rng)
    denominators = np.maximum(counts, n / T)
    eta_w, eta_p = plan.steps(noise_multiplier, denominators.min())

    # Data-independent batches: a secret permutation cut into T public sizes.
    bounds = np.concatenate([[0], np.cumsum(plan.batch_sizes)])
    order = rng.permutation(n)

    scores = (np.zeros(D), np.zeros(K))
    vertex_counts, group_counts = np.zeros(2 * D), np.zeros(K)
    averages = _running_averages(vertex_counts, group_counts, plan.l1_radius)
    for t in range(T):
        index = np.sort(order[bounds[t] : bounds[t + 1]])
        omega = n / (index.size * denominators)
        w, p_bar = averages
        batch = sums.batch_sums(index, w, p_bar * omega, plan, fit_intercept)
        # Mirror (Hedge) steps on the cumulative scores: never released.
        estimates = _estimates(batch, w, omega, plan)
        scores = _scores_after(scores, estimates, (eta_w, eta_p), plan)
        # Releases 2 and 3: exponential-mechanism draws of vertices.
        vertex_probabilities, group_probabilities = _draw_probabilities(*scores)
        drawn = rng.choice(
            2 * D, size=plan.policy.vertex_samples, p=vertex_probabilities
        )
        np.add.at(vertex_counts, drawn, 1.0)
        if K > 1:
            drawn = rng.choice(K, size=plan.policy.group_samples, p=group_probabilities)
            np.add.at(group_counts, drawn, 1.0)
        # Post-processing: running averages of the draws.
        averages = _running_averages(vertex_counts, group_counts, plan.l1_radius)
        if verbose and (t + 1) % _LOG_INTERVAL == 0:
            logger.info("mirror step %d/%d", t + 1, T)
    p = group_counts / group_counts.sum() if K > 1 else np.ones(1)
    return SaddleResult(
        coef=averages[0],
        group_weights=p,
        events=plan.events(noise_multiplier),
        n_iter=T,
        draw_ranges=plan.draw_ranges(noise_multiplier),
    )


@dataclass(frozen=True)
class MirrorSolver(SaddleSolver):
    """Private mirror descent with sampled vertices, with its tuning policy."""

    policy: MirrorPolicy = field(default_factory=MirrorPolicy)
    # The draws' pure-DP cap can put the best order at the end of the grid on
    # tiny data; the spend is valid and within the target either way.
    warn_at_grid_edge = False

    def check_neighbouring(self, neighbouring):
        """Refuse add/remove: the batches are cut by ``n``, which it keeps private."""
        if neighbouring == "add-remove":
            raise ValueError(
                "neighbouring='add-remove' is supported by solver='gda' only: "
                "'mirror' splits the rows into batches by n, which add-remove "
                "keeps private."
            )

    def plan(self, problem):
        """The :class:`MirrorPlan` of ``problem``.

        ``row_norm`` bounds the features unless ``feature_bound`` is set.
        """
        bound = problem.feature_bound
        return make_mirror_plan(
            n_samples=problem.n_samples,
            n_groups=problem.n_groups,
            n_features=problem.n_features,
            n_iter=problem.n_iter,
            l1_radius=problem.l1_radius,
            feature_bound=problem.row_norm if bound is None else bound,
            fit_intercept=problem.fit_intercept,
            max_loss=problem.max_loss,
            l2=problem.l2,
            policy=self.policy,
        )

    def run(self, rows, problem, schedule, noise_multiplier, *, rng, verbose=0):
        """See :meth:`SaddleSolver.run`; ``schedule`` is the plan."""
        return run_mirror(
            rows, problem, schedule, noise_multiplier, rng=rng, verbose=verbose
        )

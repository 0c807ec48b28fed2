"""One-run audit: many canaries in a single fit (Steinke, Nasr, Jagielski 2023).

Reference: T. Steinke, M. Nasr, M. Jagielski, "Privacy Auditing with One (1)
Training Run", NeurIPS 2023 (arXiv:2305.08846). Their main theorem for
(epsilon, delta)-DP bounds the tail of the number of correct membership
guesses: with ``m`` canaries whose bits ``S_i`` are independent and uniform,
``r`` guesses made from the output alone and ``W`` of them correct,

    P[W >= v] <= P[B >= v] + 2 m delta max_{1 <= i <= v} P[v - i <= B < v] / i,

where ``B ~ Binomial(r, e^epsilon / (1 + e^epsilon))`` (the accuracy of
epsilon-DP randomised response). The right-hand side is a p-value for the
hypothesis "the mechanism is (epsilon, delta)-DP with respect to flipping one
bit"; it is computed here exactly from binomial tails.
"""

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from scipy.stats import binom
from sklearn.base import clone

from ..accounting import Neighbouring
from ._audit import (
    FIT_SEED_BOUND,
    AuditOutcome,
    audit_generator,
    check_reported_relation,
    relation_of,
    seed_every_step,
)
from ._canaries import canary_norm, check_groups_declared
from ._policy import DEFAULT_AUDIT_POLICY

__all__ = [
    "OneRunAuditResult",
    "audit_one_run",
    "one_run_epsilon_lower",
    "one_run_p_value",
]

# The grid on which the p-value is checked, which sets the resolution of the
# reported bound (a grid point, rounded down): a coarse pass up to the
# largest epsilon a one-run audit can show, then a fine pass inside the first
# bracket where the p-value exceeds alpha.
#: Largest epsilon checked (above what 10^6 all-correct guesses can show).
_EPSILON_MAX = 30.0
#: Step of the coarse pass.
_COARSE_STEP = 0.01
#: Step of the fine pass.
_FINE_STEP = 0.0005


@dataclass(frozen=True, eq=False)
class OneRunAuditResult(AuditOutcome):
    """The outcome of :func:`audit_one_run`.

    Attributes
    ----------
    epsilon_lower : float
        Lower bound on the true epsilon (at the reported ``delta``) with
        confidence ``1 - alpha``; 0 when the guesses showed nothing.
    epsilon_reported : float
        ``privacy_spent_.epsilon`` of the one fit (NaN if none).
    delta : float
        The reported delta, used in the bound.
    n_canaries : int
    k_guesses : int
        Number of guesses behind ``epsilon_lower`` (the most confident ones).
    correct_guesses : int
        How many of those were right.
    candidates : tuple of int
        Numbers of guesses tried; each was tested at level
        ``alpha / len(candidates)`` (Bonferroni).
    alpha : float
    scores : ndarray of shape (n_canaries,)
        The fitted model's coefficient on each canary's column.
    bits : ndarray of shape (n_canaries,)
        The secret sign ``S_i`` of each canary (+1 or -1).
    """

    epsilon_lower: float
    epsilon_reported: float
    delta: float
    n_canaries: int
    k_guesses: int
    correct_guesses: int
    candidates: tuple
    alpha: float
    scores: np.ndarray
    bits: np.ndarray

    _SUMMARY = (
        "epsilon_lower",
        "epsilon_reported",
        "delta",
        "n_canaries",
        "k_guesses",
        "correct_guesses",
        "candidates",
        "alpha",
    )

    def __str__(self):
        return (
            f"One-run audit {self.verdict}: epsilon >= {self.epsilon_lower:.3g} "
            f"with {1 - self.alpha:.0%} confidence (delta={self.delta:.3g}); the "
            f"estimator reports epsilon = {self.epsilon_reported:.3g}. "
            f"{self.correct_guesses} of {self.k_guesses} guesses right "
            f"({self.n_canaries} canaries)."
        )

    def __repr__(self):
        return (
            f"OneRunAuditResult(verdict={self.verdict!r}, "
            f"epsilon_lower={self.epsilon_lower:.4g}, "
            f"epsilon_reported={self.epsilon_reported:.4g}, "
            f"delta={self.delta:.3g}, correct={self.correct_guesses}/"
            f"{self.k_guesses}, n_canaries={self.n_canaries}, "
            f"alpha={self.alpha:g})"
        )


def _check_counts(m, r, v):
    for name, value in (("m", m), ("r", r), ("v", v)):
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise ValueError(f"{name} must be an integer, got {value!r}.")
    if not 0 <= v <= r <= m or m < 1:
        raise ValueError(f"Need 0 <= v <= r <= m and m >= 1; got m={m}, r={r}, v={v}.")


def _p_values(m, r, v, epsilons, delta):
    """The p-value of :func:`one_run_p_value` on an array of epsilons."""
    epsilons = np.atleast_1d(np.asarray(epsilons, dtype=float))
    q = 1.0 / (1.0 + np.exp(-epsilons))
    tail = binom.sf(v - 1, r, q)
    if delta == 0 or v == 0:
        return np.minimum(tail, 1.0)
    # pmf of B at v-1, v-2, ..., 0 (rows: epsilons); S_i = P[v-i <= B < v].
    below = np.arange(v - 1, -1, -1)
    window = np.cumsum(binom.pmf(below[None, :], r, q[:, None]), axis=1)
    worst = np.max(window / np.arange(1, v + 1)[None, :], axis=1)
    return np.minimum(tail + 2.0 * m * delta * worst, 1.0)


def one_run_p_value(m, r, v, epsilon, delta):
    """P-value of ``v`` correct guesses out of ``r`` under (epsilon, delta)-DP.

    The bound of Steinke, Nasr and Jagielski (2023, main theorem, approximate
    DP): ``P[B >= v] + 2 m delta max_{1<=i<=v} P[v - i <= B < v] / i`` with
    ``B ~ Binomial(r, e^epsilon / (1 + e^epsilon))``, capped at 1.

    Parameters
    ----------
    m : int
        Number of canaries (each with an independent uniform bit).
    r : int
        Number of guesses made (the others abstain).
    v : int
        Number of correct guesses.
    epsilon : float >= 0
    delta : float in [0, 1]

    Returns
    -------
    p_value : float
    """
    _check_counts(m, r, v)
    if not isinstance(epsilon, Real) or epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}.")
    if not isinstance(delta, Real) or not 0 <= delta <= 1:
        raise ValueError(f"delta must be in [0, 1], got {delta!r}.")
    return float(_p_values(m, r, v, float(epsilon), float(delta))[0])


def one_run_epsilon_lower(m, r, v, delta, alpha):
    """Largest epsilon rejected, with every smaller one, at level ``alpha``.

    Returns the largest grid point ``e`` such that the p-value of
    :func:`one_run_p_value` is at most ``alpha`` at every grid point in
    ``[0, e]``. The grid has step 0.01 and, inside the first bracket where
    the p-value exceeds ``alpha``, 0.0005. If the true epsilon were below
    ``e``, the p-value at the next checked grid point above it would be at
    most ``alpha``, which happens with probability at most ``alpha``. That
    next point is a fine or a coarse one depending on the data, so the
    argument needs the p-value to be non-decreasing in epsilon between
    them (else the two events give ``2 alpha``). Its delta term is not
    monotone in general: ``tests/test_audit_one_run.py`` checks the p-value
    is non-decreasing on a grid of settings.

    Parameters
    ----------
    m, r, v : int
        Canaries, guesses, correct guesses.
    delta : float in [0, 1]
    alpha : float in (0, 1)

    Returns
    -------
    epsilon_lower : float
    """
    _check_counts(m, r, v)
    if not isinstance(delta, Real) or not 0 <= delta <= 1:
        raise ValueError(f"delta must be in [0, 1], got {delta!r}.")
    if not isinstance(alpha, Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}.")
    coarse = np.arange(0.0, _EPSILON_MAX + _COARSE_STEP / 2, _COARSE_STEP)
    failing = np.flatnonzero(_p_values(m, r, v, coarse, float(delta)) > alpha)
    if failing.size == 0:
        return float(coarse[-1])
    first = int(failing[0])
    if first == 0:
        return 0.0
    fine = np.arange(coarse[first - 1], coarse[first], _FINE_STEP)
    bad = np.flatnonzero(_p_values(m, r, v, fine, float(delta)) > alpha)
    last_good = fine.size - 1 if bad.size == 0 else int(bad[0]) - 1
    return float(fine[last_good]) if last_good >= 0 else float(coarse[first - 1])


def _guess_counts(k_guesses, n_canaries, policy=DEFAULT_AUDIT_POLICY):
    """The numbers of guesses to try: ``k_guesses``, or the policy's shares."""
    if k_guesses is None:
        shares = policy.guess_shares
        return tuple(sorted({max(1, int(share * n_canaries)) for share in shares}))
    values = [k_guesses] if isinstance(k_guesses, Integral) else list(k_guesses)
    if not values or any(
        isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= k <= n_canaries
        for k in values
    ):
        raise ValueError(
            "k_guesses must be an integer or a non-empty list of integers in "
            f"[1, n_canaries={n_canaries}], got {k_guesses!r}."
        )
    return tuple(sorted({int(k) for k in values}))


def _canary_data(estimator, X, y, bits, fit_params):
    """The data with one extra column and one extra row per canary."""
    if y is None or not hasattr(estimator, "get_params"):
        raise ValueError(
            "audit_one_run supports classifiers with coef_ (labels y needed); "
            "audit synthetic data with skdp.audit.audit."
        )
    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] < 1 or y.shape != (X.shape[0],):
        raise ValueError(
            f"X must be 2-d with one label per row; got X {X.shape}, y {y.shape}."
        )
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError("audit_one_run needs at least two classes in y.")
    radius = canary_norm(estimator)
    n, d = X.shape
    m = bits.size
    data = np.zeros((n + m, d + m))
    data[:n, :d] = X
    data[n + np.arange(m), d + np.arange(m)] = bits * radius
    labels = np.concatenate([y, np.repeat(classes[1:2], m)])
    params = dict(fit_params)
    groups = params.get("sensitive_features")
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape[:1] != (n,):
            raise ValueError(
                f"sensitive_features has {groups.shape[:1]} entries; X has {n} rows."
            )
        params["sensitive_features"] = np.concatenate(
            [groups, np.repeat(groups[-1:], m, axis=0)]
        )
    row = 0 if classes.size == 2 else 1
    return data, labels, params, d, row


def audit_one_run(
    estimator,
    X,
    y=None,
    *,
    n_canaries=1000,
    k_guesses=None,
    alpha=0.05,
    random_state=None,
    **fit_params,
):
    """One-fit audit: a (1 - alpha)-confidence lower bound on epsilon.

    Appends ``n_canaries`` canaries to the data, each with its own fresh
    feature column (zero for every other row) and a secret uniform bit
    ``S_i``: the canary is ``S_i * row_norm`` in its column, zero elsewhere,
    labelled ``classes[1]``. Flipping one bit replaces one record, so a
    replace-one (epsilon, delta)-DP estimator is (epsilon, delta)-DP in each
    bit. After one fit, the guess for canary ``i`` is the sign of the
    model's coefficient on its column, and only the ``k`` canaries with the
    largest coefficients in absolute value are guessed. The number of
    correct guesses gives the bound by the exact binomial computation of
    Steinke, Nasr and Jagielski (2023), see :func:`one_run_p_value`.

    Parameters
    ----------
    estimator : estimator
        Unfitted linear classifier exposing ``coef_`` once fitted
        (``DPLogisticRegression``, ``DPSaddlePointClassifier``); cloned.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    n_canaries : int, default=1000
    k_guesses : int, sequence of int or None, default=None
        Numbers of guesses to try. Each is tested at level
        ``alpha / len(k_guesses)`` (Bonferroni) and the largest bound is
        kept. ``None``: 5%, 10%, 25%, 50% and 100% of the canaries.
    alpha : float, default=0.05
    random_state : int, numpy Generator, RandomState or None, default=None
        Draws the bits and the fit's seed.
    **fit_params : dict
        Passed to ``fit``. A ``sensitive_features`` array is extended with
        the last row's group for every canary (the group must be declared in
        the estimator's ``groups``).

    Returns
    -------
    OneRunAuditResult

    Notes
    -----
    What it can show: ``epsilon_lower > epsilon_reported`` disproves the
    claim at confidence ``1 - alpha``, from a single fit. What it cannot:
    the bound is weak when epsilon is small or the canaries few. With ``r``
    guesses all correct it can reach only about ``log(r / log(1 / alpha))``
    (5.8 for 1,000 at alpha = 0.05, less after the Bonferroni correction),
    and at epsilon = 1 each canary's sign is guessed only a little better
    than chance (each is as noisy as the canary of a many-fit audit, seen
    once), so the bound stays far below 1. A passing one-run audit is no
    evidence that the accounting is tight. The canaries also change the
    fit: ``n_canaries`` more rows and columns.

    Examples
    --------
    >>> import numpy as np
    >>> from skdp.audit import audit_one_run
    >>> from skdp.linear_model import DPLogisticRegression
    >>> X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(200, 3))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> est = DPLogisticRegression(epsilon=1.0, epochs=2, batch_size=50,
    ...                            batch_sampling="cyclic", row_norm=1.0,
    ...                            classes=[0, 1])
    >>> result = audit_one_run(est, X, y, n_canaries=100, random_state=0)
    >>> result.n_canaries, result.k_guesses in result.candidates
    (100, True)
    >>> result.verdict
    'consistent with the claim'
    """
    _check_one_run_args(n_canaries, alpha)
    candidates = _guess_counts(k_guesses, int(n_canaries))
    check_groups_declared(estimator, fit_params)
    _check_replace_one(estimator)
    rng = audit_generator(random_state)
    bits = rng.choice(np.array([-1.0, 1.0]), size=int(n_canaries))
    scores, spent = _fit_with_canaries(estimator, X, y, bits, fit_params, rng)
    epsilon_reported = math.nan if spent is None else float(spent.epsilon)
    delta = 0.0 if spent is None else float(spent.delta)
    best = _best_guesses(scores, bits, candidates, delta, float(alpha))
    scores.setflags(write=False)
    bits.setflags(write=False)
    return OneRunAuditResult(
        epsilon_lower=best.epsilon_lower,
        epsilon_reported=epsilon_reported,
        delta=delta,
        n_canaries=int(n_canaries),
        k_guesses=best.k,
        correct_guesses=best.correct,
        candidates=candidates,
        alpha=float(alpha),
        scores=scores,
        bits=bits,
    )


def _check_one_run_args(n_canaries, alpha):
    """Refuse a count of canaries or a level the audit cannot use."""
    if isinstance(n_canaries, bool) or not isinstance(n_canaries, Integral):
        raise ValueError(f"n_canaries must be an integer >= 1, got {n_canaries!r}.")
    if n_canaries < 1:
        raise ValueError(f"n_canaries must be an integer >= 1, got {n_canaries!r}.")
    if not isinstance(alpha, Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}.")


def _check_replace_one(estimator):
    """Refuse an add/remove estimator: flipping a canary's sign replaces it."""
    if relation_of(estimator) == Neighbouring.ADD_REMOVE:
        raise ValueError(
            "audit_one_run flips each canary's sign, a replacement: it audits "
            "replace-one claims only. Audit an add/remove estimator with "
            "skdp.audit.audit (which drops the canary row)."
        )


def _fit_with_canaries(estimator, X, y, bits, fit_params, rng):
    """Fit one seeded clone on the data with the canaries.

    Returns each canary column's coefficient and the reported spend.
    """
    data, labels, params, d, row = _canary_data(estimator, X, y, bits, fit_params)
    est = seed_every_step(clone(estimator), int(rng.integers(0, FIT_SEED_BOUND)))
    est.fit(data, labels, **params)
    scores = np.asarray(est.coef_, dtype=float)[row, d:].copy()
    if not np.all(np.isfinite(scores)):
        raise ValueError("The fit gave non-finite coefficients; cannot audit it.")
    spent = getattr(est, "privacy_spent_", None)
    check_reported_relation(
        [getattr(spent, "neighbouring", None)], Neighbouring.REPLACE_ONE
    )
    return scores, spent


@dataclass(frozen=True)
class _Guesses:
    """The best of the numbers of guesses tried."""

    epsilon_lower: float
    k: int
    correct: int


def _best_guesses(scores, bits, candidates, delta, alpha):
    """Guess the sign of the ``k`` largest coefficients, for each ``k``.

    Each ``k`` is tested at level ``alpha / len(candidates)`` (Bonferroni);
    the largest bound is kept (the first ``k`` reaching it).
    """
    order = np.argsort(-np.abs(scores), kind="stable")
    correct = np.where(scores >= 0, 1.0, -1.0) == bits
    level = alpha / len(candidates)
    best = None
    for k in candidates:
        v = int(np.sum(correct[order[:k]]))
        bound = one_run_epsilon_lower(bits.size, k, v, delta, level)
        if best is None or bound > best.epsilon_lower:
            best = _Guesses(bound, k, v)
    return best

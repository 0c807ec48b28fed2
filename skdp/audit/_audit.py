"""Empirical privacy audits: a statistical lower bound on epsilon from canaries."""

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import beta as beta_dist
from sklearn.base import clone

__all__ = ["AuditResult", "audit", "clopper_pearson", "epsilon_from_rates"]


@dataclass(frozen=True, eq=False)
class AuditResult:
    """The outcome of :func:`audit`.

    Attributes
    ----------
    epsilon_lower : float
        A lower bound on the true epsilon of the estimator (at the reported
        ``delta``), valid with confidence ``1 - alpha``; 0 when the attack
        found nothing.
    epsilon_reported : float
        The epsilon the estimator reports (``privacy_spent_.epsilon``; the
        largest over the fits, which all spend the same). NaN if the
        estimator reports none.
    delta : float
        The reported delta, used in the bound.
    tpr : float
        Empirical true positive rate of the chosen test on the evaluation half
        (fits on the data with the canary).
    fpr : float
        Empirical false positive rate of the chosen test on the evaluation half
        (fits on the data without it).
    threshold : float
        Threshold of the test, chosen on the selection half.
    scores_in : ndarray of shape (n_in,)
        Scores of the fits on the data with the canary, all trials.
    scores_out : ndarray of shape (n_out,)
        Scores of the fits on the data without it, all trials.
    n_trials : int
    alpha : float
    direction : {"greater", "less"}
        The test says "canary in" when the score is greater (less) than
        ``threshold``.
    tpr_lower : float
        Clopper-Pearson lower bound on the true positive rate (level
        ``alpha / 2``).
    fpr_upper : float
        Clopper-Pearson upper bound on the false positive rate (level
        ``alpha / 2``).
    """

    epsilon_lower: float
    epsilon_reported: float
    delta: float
    tpr: float
    fpr: float
    threshold: float
    scores_in: np.ndarray
    scores_out: np.ndarray
    n_trials: int
    alpha: float
    direction: str = "greater"
    tpr_lower: float = 0.0
    fpr_upper: float = 1.0

    def __repr__(self):
        return (
            f"AuditResult(epsilon_lower={self.epsilon_lower:.4g}, "
            f"epsilon_reported={self.epsilon_reported:.4g}, "
            f"delta={self.delta:.3g}, tpr={self.tpr:.3g}, fpr={self.fpr:.3g}, "
            f"n_trials={self.n_trials}, alpha={self.alpha:g})"
        )

    def to_dict(self):
        """A JSON-ready dict of the summary (without the scores)."""
        return {
            "epsilon_lower": self.epsilon_lower,
            "epsilon_reported": self.epsilon_reported,
            "delta": self.delta,
            "tpr": self.tpr,
            "fpr": self.fpr,
            "tpr_lower": self.tpr_lower,
            "fpr_upper": self.fpr_upper,
            "threshold": self.threshold,
            "direction": self.direction,
            "n_trials": self.n_trials,
            "alpha": self.alpha,
        }

    def plot(self, ax=None):
        """Draw the histograms of the scores with and without the canary.

        Parameters
        ----------
        ax : matplotlib Axes or None, default=None
            Axes to draw on; ``None`` creates a new figure.

        Returns
        -------
        ax : matplotlib Axes

        Raises
        ------
        ImportError
            If matplotlib is not installed.
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover - depends on the env
            raise ImportError(
                "AuditResult.plot needs matplotlib; install it with "
                "`pip install matplotlib`."
            ) from exc
        if ax is None:
            _, ax = plt.subplots()
        both = np.concatenate([self.scores_in, self.scores_out])
        bins = np.histogram_bin_edges(both, bins="auto")
        ax.hist(self.scores_out, bins=bins, alpha=0.6, label="without canary")
        ax.hist(self.scores_in, bins=bins, alpha=0.6, label="with canary")
        ax.axvline(self.threshold, color="k", linestyle="--", label="threshold")
        ax.set_xlabel("score")
        ax.set_ylabel("fits")
        ax.set_title(
            f"epsilon >= {self.epsilon_lower:.3g} "
            f"(reported {self.epsilon_reported:.3g}, {1 - self.alpha:.0%} conf.)"
        )
        ax.legend()
        return ax


def clopper_pearson(successes, trials, level, *, side):
    """One-sided Clopper-Pearson bound on a binomial proportion.

    Parameters
    ----------
    successes : int or ndarray of int
    trials : int
    level : float
        Probability that the true proportion lies beyond the bound.
    side : {"lower", "upper"}

    Returns
    -------
    bound : float or ndarray
        With probability at least ``1 - level``, the proportion is at least
        (``"lower"``) or at most (``"upper"``) this bound.
    """
    k = np.asarray(successes, dtype=float)
    n = float(trials)
    if side == "lower":
        with np.errstate(invalid="ignore"):
            out = beta_dist.ppf(level, np.maximum(k, 1), n - k + 1)
        return np.where(k > 0, out, 0.0)
    if side == "upper":
        with np.errstate(invalid="ignore"):
            out = beta_dist.ppf(1 - level, k + 1, np.maximum(n - k, 1))
        return np.where(k < n, out, 1.0)
    raise ValueError(f"side must be 'lower' or 'upper', got {side!r}")


def epsilon_from_rates(tpr_lower, fpr_upper, delta):
    """The largest epsilon that (epsilon, delta)-DP forbids at these rates.

    A test with true positive rate ``TPR`` and false positive rate ``FPR``
    against an (epsilon, delta)-DP mechanism satisfies
    ``TPR <= exp(epsilon) FPR + delta`` and
    ``1 - FPR <= exp(epsilon) (1 - TPR) + delta``; so any ``TPR >= tpr_lower``
    and ``FPR <= fpr_upper`` force ``epsilon`` to be at least the returned
    value (both expressions increase in ``TPR`` and decrease in ``FPR``).

    Parameters
    ----------
    tpr_lower, fpr_upper : float or ndarray
    delta : float

    Returns
    -------
    epsilon : float or ndarray
        ``max(0, log((tpr_lower - delta) / fpr_upper),
        log((1 - fpr_upper - delta) / (1 - tpr_lower)))``.
    """
    tpr = np.asarray(tpr_lower, dtype=float)
    fpr = np.asarray(fpr_upper, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(
            (tpr - delta > 0) & (fpr > 0),
            np.log(np.maximum(tpr - delta, 1e-300) / np.maximum(fpr, 1e-300)),
            0.0,
        )
        second = np.where(
            (1 - fpr - delta > 0) & (tpr < 1),
            np.log(np.maximum(1 - fpr - delta, 1e-300) / np.maximum(1 - tpr, 1e-300)),
            0.0,
        )
    out = np.maximum(0.0, np.maximum(first, second))
    return float(out) if out.ndim == 0 else out


def _bounds_at_thresholds(s_in, s_out, thresholds, alpha, delta):
    """Epsilon bounds of the tests ``score > t``, for each ``t``."""
    tp = (s_in[:, None] > thresholds[None, :]).sum(axis=0)
    fp = (s_out[:, None] > thresholds[None, :]).sum(axis=0)
    tpr_lo = clopper_pearson(tp, s_in.size, alpha / 2, side="lower")
    fpr_hi = clopper_pearson(fp, s_out.size, alpha / 2, side="upper")
    eps = epsilon_from_rates(tpr_lo, fpr_hi, delta)
    advantage = tp / s_in.size - fp / s_out.size
    return np.atleast_1d(eps), np.atleast_1d(advantage)


def _choose_test(s_in, s_out, alpha, delta):
    """Direction and threshold that maximise the bound on the selection half."""
    best = None
    pooled = np.unique(np.concatenate([s_in, s_out]))
    if pooled.size > 1:
        mids = (pooled[:-1] + pooled[1:]) / 2
    else:
        mids = pooled.copy()
    for sign in (1.0, -1.0):
        thresholds = np.sort(sign * mids)
        eps, advantage = _bounds_at_thresholds(
            sign * s_in, sign * s_out, thresholds, alpha, delta
        )
        i = int(np.lexsort((advantage, eps))[-1])
        key = (eps[i], advantage[i])
        if best is None or key > best[0]:
            best = (key, sign, sign * thresholds[i])
    _, sign, threshold = best
    return sign, float(threshold)


def _fit_and_score(estimator, X, y, seed, score, fit_params):
    est = clone(estimator)
    if "random_state" in est.get_params(deep=False):
        est.set_params(random_state=int(seed))
    if y is None:
        est.fit(X, **fit_params)
    else:
        est.fit(X, y, **fit_params)
    value = float(score(est))
    spent = getattr(est, "privacy_spent_", None)
    epsilon = math.nan if spent is None else float(spent.epsilon)
    delta = math.nan if spent is None else float(spent.delta)
    return value, epsilon, delta


def _generator(random_state):
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(2**31))
    return np.random.default_rng(random_state)


def _auto_canary(estimator, X, y):
    """Datasets and score of the coefficient attack on a linear classifier."""
    if y is None:
        raise ValueError("canary='auto' needs labels y (a linear classifier).")
    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError("X must be 2-d with at least two rows.")
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError("canary='auto' needs at least two classes in y.")
    params = estimator.get_params(deep=False)
    radius = float(params.get("row_norm", 1.0))
    label = classes[1]
    n, d = X.shape
    base = np.hstack([X, np.zeros((n, 1))])
    y_base = y.copy()
    y_base[-1] = label
    X_in, X_out = base.copy(), base.copy()
    X_in[-1] = 0.0
    X_in[-1, -1] = radius
    X_out[-1] = 0.0
    X_out[-1, -1] = -radius
    k = 0 if classes.size == 2 else 1

    def score(est):
        return est.coef_[k, -1]

    return X_in, y_base, X_out, y_base, score


def _user_canary(estimator, X, y, canary, score):
    x_c, y_c = canary
    X = np.asarray(X, dtype=float)
    x_c = np.asarray(x_c, dtype=float).ravel()
    if X.ndim != 2 or x_c.size != X.shape[1]:
        raise ValueError(
            f"The canary has {x_c.size} features; X has {np.shape(X)[-1]}."
        )
    X_in = X.copy()
    X_in[-1] = x_c
    y_in = None
    if y is not None:
        y_in = np.asarray(y).copy()
        y_in[-1] = y_c
    if score is None:
        if y is None:
            raise ValueError("With an unsupervised estimator, pass a score callable.")
        classes = np.unique(np.concatenate([np.asarray(y), np.asarray([y_c])]))
        k = int(np.searchsorted(classes, y_c))

        def score(est):
            out = np.asarray(est.decision_function(x_c[None, :]))
            if out.ndim == 1 or out.shape[1] == 1:
                return out.ravel()[0] * (1.0 if k == classes.size - 1 else -1.0)
            return out[0, k]

    return X_in, y_in, X, (None if y is None else np.asarray(y)), score


def audit(
    estimator,
    X,
    y=None,
    *,
    canary="auto",
    n_trials=200,
    alpha=0.05,
    n_jobs=None,
    random_state=None,
    score=None,
    **fit_params,
):
    """Audit a private estimator: a (1 - alpha)-confidence lower bound on epsilon.

    Runs the membership experiment under the replace-one relation: half of the
    ``n_trials`` fits are on a data set ``D'`` holding a canary record, half on
    its neighbour ``D`` where that record is replaced, each on a fresh clone
    with its own seed. A test thresholding a score of the fitted model then
    tells ``D'`` from ``D``; its true and false positive rates, bounded by
    Clopper-Pearson, give a lower bound on the epsilon any (epsilon,
    delta)-DP guarantee must have. An epsilon_lower above the reported epsilon
    disproves the estimator's privacy claim (at confidence ``1 - alpha``); one
    below it is only consistent with it.

    Parameters
    ----------
    estimator : estimator
        Unfitted; cloned for every fit. Its ``random_state`` (if any) is set
        per fit from seeds drawn up front.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or None
    canary : "auto" or tuple (x, y), default="auto"
        ``"auto"`` (linear classifiers with ``coef_``): an extra all-zero
        feature column is appended to ``X`` for every record, so no other
        record ever moves that coordinate. In ``D'`` the last row is replaced
        by the canary, zero everywhere but ``row_norm`` (the estimator's, or
        1) in the extra column, labelled ``classes_[1]``; in ``D`` it is
        replaced by the same record with ``-row_norm`` there (a neighbour by
        replacement whose gradient is exactly opposite on that coordinate,
        the largest gap a replaced record can make). The score is the model's
        coefficient on the extra column (``coef_[0, -1]`` for binary
        problems, the row of ``classes_[1]`` otherwise). With white-box access
        to the final model, this is the strongest attack on this model: the
        coordinate carries the canary's gradient steps and the noise only.
        The last row is used so that, with cyclic batches, the canary's step
        is the last one to touch the model. A tuple ``(x, y)``: ``D`` is
        ``(X, y)`` and ``D'`` has its last row replaced by ``(x, y)``.
    n_trials : int, default=200
        Number of fits (at least 8), half on each data set.
    alpha : float, default=0.05
        One minus the confidence of the bound.
    n_jobs : int or None, default=None
        Fits run through :class:`joblib.Parallel`, so any joblib backend
        (e.g. dask, in a ``parallel_config`` context) works unchanged.
    random_state : int, numpy Generator, RandomState or None, default=None
        Seeds of all fits are drawn up front from one numpy Generator built
        from it.
    score : callable or None, default=None
        ``score(fitted_estimator) -> float``, larger meaning "canary in" (the
        test also tries the reverse). Default: the coefficient for
        ``canary="auto"``; for a user canary, the decision function at the
        canary, signed towards its label.
    **fit_params : dict
        Passed to every ``fit``.

    Returns
    -------
    AuditResult

    Notes
    -----
    Validity. The fits of each data set are split in two halves. The test
    (direction and threshold) is chosen on the first halves, maximising the
    bound they give; it is evaluated on the second halves only, independent
    of the choice. There, with ``TPR_lo`` the Clopper-Pearson lower bound on
    the true positive rate and ``FPR_hi`` the upper bound on the false
    positive rate, each at level ``alpha / 2``, both hold together with
    probability at least ``1 - alpha`` and then (epsilon, delta)-DP implies
    ``epsilon >= max(log((TPR_lo - delta) / FPR_hi),
    log((1 - FPR_hi - delta) / (1 - TPR_lo)))``. So ``epsilon_lower`` is a
    (1 - alpha)-confidence lower bound on the smallest epsilon for which the
    estimator is (epsilon, delta)-DP, with ``delta`` the reported one.

    With ``n`` fits per data set the bound cannot exceed about
    ``log(n / 2 / log(2 / alpha))``: 200 trials cap it near 2.6, 400 near 3.3.

    Examples
    --------
    >>> from skdp.audit import audit
    >>> from skdp.linear_model import DPLogisticRegression
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-0.4, 0.4, size=(100, 3))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> est = DPLogisticRegression(epsilon=1.0, epochs=1, batch_size=25,
    ...                            batch_sampling="cyclic")
    >>> result = audit(est, X, y, n_trials=40, random_state=0)
    >>> result.epsilon_lower <= result.epsilon_reported
    True
    """
    if not isinstance(n_trials, Integral) or n_trials < 8:
        raise ValueError(f"n_trials must be an integer >= 8, got {n_trials!r}.")
    if not isinstance(alpha, Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}.")
    if score is not None and not callable(score):
        raise TypeError("score must be a callable taking a fitted estimator.")
    if isinstance(canary, str):
        if canary != "auto":
            raise ValueError(f"canary must be 'auto' or (x, y), got {canary!r}.")
        X_in, y_in, X_out, y_out, auto_score = _auto_canary(estimator, X, y)
    elif isinstance(canary, tuple) and len(canary) == 2:
        X_in, y_in, X_out, y_out, auto_score = _user_canary(
            estimator, X, y, canary, score
        )
    else:
        raise ValueError(f"canary must be 'auto' or (x, y), got {canary!r}.")
    score = auto_score if score is None else score

    n_in = int(n_trials) // 2
    n_out = int(n_trials) - n_in
    seeds = _generator(random_state).integers(0, 2**31 - 1, size=int(n_trials))
    jobs = [
        delayed(_fit_and_score)(estimator, X_in, y_in, seed, score, fit_params)
        for seed in seeds[:n_in]
    ] + [
        delayed(_fit_and_score)(estimator, X_out, y_out, seed, score, fit_params)
        for seed in seeds[n_in:]
    ]
    out = Parallel(n_jobs=n_jobs)(jobs)
    scores = np.array([o[0] for o in out], dtype=float)
    if not np.all(np.isfinite(scores)):
        raise ValueError("Some fits gave a non-finite score; cannot audit them.")
    epsilons = np.array([o[1] for o in out], dtype=float)
    deltas = np.array([o[2] for o in out], dtype=float)
    epsilon_reported = (
        float(np.max(epsilons)) if np.all(np.isfinite(epsilons)) else math.nan
    )
    delta = float(np.max(deltas)) if np.all(np.isfinite(deltas)) else 0.0

    scores_in, scores_out = scores[:n_in], scores[n_in:]
    half_in, half_out = n_in // 2, n_out // 2
    sign, threshold = _choose_test(
        scores_in[:half_in], scores_out[:half_out], alpha, delta
    )
    eval_in, eval_out = sign * scores_in[half_in:], sign * scores_out[half_out:]
    tp = int(np.sum(eval_in > sign * threshold))
    fp = int(np.sum(eval_out > sign * threshold))
    tpr_lo = float(clopper_pearson(tp, eval_in.size, alpha / 2, side="lower"))
    fpr_hi = float(clopper_pearson(fp, eval_out.size, alpha / 2, side="upper"))
    scores_in.setflags(write=False)
    scores_out.setflags(write=False)
    return AuditResult(
        epsilon_lower=epsilon_from_rates(tpr_lo, fpr_hi, delta),
        epsilon_reported=epsilon_reported,
        delta=delta,
        tpr=tp / eval_in.size,
        fpr=fp / eval_out.size,
        threshold=threshold,
        scores_in=scores_in,
        scores_out=scores_out,
        n_trials=int(n_trials),
        alpha=float(alpha),
        direction="greater" if sign > 0 else "less",
        tpr_lower=tpr_lo,
        fpr_upper=fpr_hi,
    )

"""Empirical privacy audits: a statistical lower bound on epsilon from canaries."""

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import beta as beta_dist
from scipy.stats import norm
from sklearn.base import clone

from .._base import SEED_BOUND
from ..accounting import Neighbouring
from ..pipeline import check_pipeline, privacy_spent
from ._canaries import (
    check_groups_declared,
    linear_canary,
    schema_canary,
    schema_encoder_of,
    synthetic_canary,
    user_canary,
)
from ._policy import DEFAULT_AUDIT_POLICY

__all__ = ["AuditResult", "audit", "clopper_pearson", "epsilon_from_rates", "verdict"]

CONSISTENT = "consistent with the claim"
REFUTES = "refutes the claim"
NO_CLAIM = "no claim to test"


def verdict(epsilon_lower, epsilon_reported):
    """What an audit's lower bound says about the reported epsilon.

    Parameters
    ----------
    epsilon_lower : float
        The audit's (1 - alpha)-confidence lower bound on epsilon.
    epsilon_reported : float
        The epsilon the estimator claims (NaN if none).

    Returns
    -------
    str
        ``"refutes the claim"`` if the lower bound exceeds the claim (the
        claim is false, at the audit's confidence), ``"consistent with the
        claim"`` otherwise (never a proof), ``"no claim to test"`` without a
        reported epsilon.
    """
    if math.isnan(epsilon_reported):
        return NO_CLAIM
    return REFUTES if epsilon_lower > epsilon_reported else CONSISTENT


#: Floor on the fitted spread of the scores without the canary, relative to
#: the pooled spread (keeps the normal tail defined for constant scores).
_MIN_SPREAD = 1e-6
#: Seeds given to the audited fits lie in [0, 2^31 - 1).
FIT_SEED_BOUND = 2**31 - 1


class AuditOutcome:
    """What every audit result has: its verdict and a JSON-ready summary.

    A subclass is a dataclass with ``epsilon_lower`` and ``epsilon_reported``
    and names the fields of its summary, in order, in ``_SUMMARY``.
    """

    _SUMMARY = ()

    @property
    def verdict(self):
        """``"consistent with the claim"`` or ``"refutes the claim"``.

        ``"refutes the claim"`` when ``epsilon_lower > epsilon_reported``: at
        confidence ``1 - alpha`` the estimator is not as private as it says.
        ``"consistent with the claim"`` otherwise: the attack found no
        contradiction, which never proves the claim. ``"no claim to test"``
        when the estimator reports no epsilon.
        """
        return verdict(self.epsilon_lower, self.epsilon_reported)

    def to_dict(self):
        """A JSON-ready dict of the summary (without the scores)."""
        out = {"verdict": self.verdict}
        for name in self._SUMMARY:
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True, eq=False)
class AuditResult(AuditOutcome):
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

    _SUMMARY = (
        "epsilon_lower",
        "epsilon_reported",
        "delta",
        "tpr",
        "fpr",
        "tpr_lower",
        "fpr_upper",
        "threshold",
        "direction",
        "n_trials",
        "alpha",
    )

    def __str__(self):
        return (
            f"Audit {self.verdict}: epsilon >= {self.epsilon_lower:.3g} with "
            f"{1 - self.alpha:.0%} confidence (delta={self.delta:.3g}); the "
            f"estimator reports epsilon = {self.epsilon_reported:.3g}. "
            f"{self.n_trials} fits; test TPR {self.tpr:.3f}, FPR {self.fpr:.3f}."
        )

    def __repr__(self):
        return (
            f"AuditResult(verdict={self.verdict!r}, "
            f"epsilon_lower={self.epsilon_lower:.4g}, "
            f"epsilon_reported={self.epsilon_reported:.4g}, "
            f"delta={self.delta:.3g}, tpr={self.tpr:.3g}, fpr={self.fpr:.3g}, "
            f"n_trials={self.n_trials}, alpha={self.alpha:g})"
        )

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
        try:  # matplotlib is optional: imported only when a plot is asked for
            import matplotlib.pyplot as plt
        except ImportError as exc:
            raise ImportError(
                "AuditResult.plot needs matplotlib, which skdp does not install: "
                '`pip install "skdp[plot]"`.'
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


def _count_above(values, thresholds):
    """How many of ``values`` exceed each threshold."""
    ordered = np.sort(values)
    return ordered.size - np.searchsorted(ordered, thresholds, side="right")


def _predicted_bounds(tpr, fpr, n_in, n_out, alpha, delta):
    """Bounds that rates ``tpr``, ``fpr`` would give on ``n_in``, ``n_out`` fits."""
    tpr_lo = clopper_pearson(np.round(tpr * n_in), n_in, alpha / 2, side="lower")
    fpr_hi = clopper_pearson(np.round(fpr * n_out), n_out, alpha / 2, side="upper")
    return np.atleast_1d(epsilon_from_rates(tpr_lo, fpr_hi, delta))


def _choose_test(
    s_in, s_out, alpha, delta, n_in_eval, n_out_eval, policy=DEFAULT_AUDIT_POLICY
):
    """Direction and threshold of the test, chosen on the selection half only.

    Each threshold and direction is rated by the bound the evaluation half
    would give at rates estimated on the selection half, erring towards "no
    leak": the true positive rate is the empirical one shrunk by
    ``policy.tpr_shrink_sd`` binomial standard deviations; the false
    positive rate is the larger of the empirical one raised by
    ``policy.fpr_raise_sd`` standard deviations (plus
    ``policy.fpr_pseudo_count`` pseudo-counts) and the tail of a normal
    distribution fitted to the scores without the canary. The normal tail
    keeps thresholds far in a tail, where few fits were seen by luck, from
    looking better than they are; the empirical true positive rate still
    finds rare but strong tails (a canary seen only in some fits). Reading
    only the selection half keeps the final bound valid.
    """
    pooled = np.unique(np.concatenate([s_in, s_out]))
    mids = (pooled[:-1] + pooled[1:]) / 2 if pooled.size > 1 else pooled.copy()
    spread = np.std(pooled) if pooled.size > 1 else 0.0
    floor = _MIN_SPREAD * spread if spread > 0 else _MIN_SPREAD
    out_mean, out_std = np.mean(s_out), max(np.std(s_out, ddof=1), floor)
    best = None
    for sign in (1.0, -1.0):
        thresholds = np.sort(sign * mids)
        tp = _count_above(sign * s_in, thresholds)
        fp = _count_above(sign * s_out, thresholds)
        tpr = np.maximum(tp - policy.tpr_shrink_sd * np.sqrt(tp), 0.0) / s_in.size
        raised = fp + policy.fpr_raise_sd * np.sqrt(fp) + policy.fpr_pseudo_count
        fpr = np.maximum(
            np.minimum(raised / s_out.size, 1.0),
            norm.sf((thresholds - sign * out_mean) / out_std),
        )
        rating = _predicted_bounds(tpr, fpr, n_in_eval, n_out_eval, alpha, delta)
        advantage = np.atleast_1d(tp / s_in.size - fp / s_out.size)
        i = int(np.lexsort((advantage, rating))[-1])
        key = (rating[i], advantage[i])
        if best is None or key > best[0]:
            best = (key, sign, float(sign * thresholds[i]))
    return best[1], best[2]


def seed_every_step(est, seed):
    """Set every ``random_state`` of ``est`` (nested steps too) from ``seed``.

    A meta-estimator's own parameters do not reach a step's fixed seed: left
    alone, every fit of the audit would draw the same noise.
    """
    names = [
        name
        for name in est.get_params(deep=True)
        if name == "random_state" or name.endswith("__random_state")
    ]
    if names:
        # The estimator's own seed is ``seed`` itself (so audits of a plain
        # estimator draw what they always drew); nested ones are derived.
        rng = np.random.default_rng(int(seed))
        seeds = {
            n: int(seed) if n == "random_state" else int(rng.integers(FIT_SEED_BOUND))
            for n in names
        }
        est.set_params(**seeds)
    return est


def _without_last_row(value, name, n_rows):
    """``value`` without its last row, for a per-row array of ``n_rows`` rows.

    Fit parameters of another length (or none at all) cannot be per-row, so
    an add/remove audit cannot tell which of their entries follow the
    removed canary: refused.
    """
    per_row = (
        hasattr(value, "__getitem__")
        and not isinstance(value, str | bytes | dict)
        and np.ndim(value) > 0
        and len(value) == n_rows
    )
    if not per_row:
        raise ValueError(
            f"an add/remove audit drops the canary row; {name} is not an array "
            f"of {n_rows} rows and cannot follow it."
        )
    if hasattr(value, "iloc"):
        return value.iloc[:-1]
    return value[:-1] if hasattr(value, "shape") else np.asarray(value)[:-1]


def _fit_and_score(estimator, X, y, seed, score, fit_params):
    """Fit a seeded clone; return its score, reported spend and relation."""
    est = seed_every_step(clone(estimator), seed)
    if y is None:
        est.fit(X, **fit_params)
    else:
        est.fit(X, y, **fit_params)
    value = float(score(est))
    spent = privacy_spent(est)
    epsilon = math.nan if spent is None else float(spent.epsilon)
    delta = math.nan if spent is None else float(spent.delta)
    relation = getattr(spent, "neighbouring", None)
    return value, epsilon, delta, relation


def audit_generator(random_state):
    """The audit's numpy Generator, from ``random_state``.

    An int, a Generator or None goes to :func:`numpy.random.default_rng`; a
    RandomState seeds one with a draw below ``SEED_BOUND``.
    """
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(SEED_BOUND))
    return np.random.default_rng(random_state)


def relation_of(estimator):
    """The estimator's neighbouring relation, nested steps included.

    :attr:`Neighbouring.ADD_REMOVE` if any ``neighbouring`` parameter (a
    Pipeline's step's too) says so, else replace-one. The fits' reported
    relation is checked against it afterwards.
    """
    params = estimator.get_params(deep=True)
    relations = {
        value
        for name, value in params.items()
        if name == "neighbouring" or name.endswith("__neighbouring")
    }
    if Neighbouring.ADD_REMOVE in relations:
        return Neighbouring.ADD_REMOVE
    return Neighbouring.REPLACE_ONE


def check_reported_relation(relations, audited):
    """Refuse fits whose reported relation is not the one the data sets pair."""
    reported = {r for r in relations if r is not None}
    if reported and reported != {audited}:
        raise ValueError(
            f"The fits report neighbouring={sorted(reported)!r} but the audit "
            f"paired data sets under {Neighbouring(audited).value!r}: the bound "
            "would test the wrong claim. Set the estimator's neighbouring "
            "parameter where the audit can read it."
        )


def _check_audit_args(n_trials, alpha, score):
    """Refuse a number of trials, a level or a score the audit cannot use."""
    if not isinstance(n_trials, Integral) or n_trials < 8:
        raise ValueError(f"n_trials must be an integer >= 8, got {n_trials!r}.")
    if not isinstance(alpha, Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}.")
    if score is not None and not callable(score):
        raise TypeError("score must be a callable taking a fitted estimator.")


def _canary_sets(estimator, X, y, canary, score):
    """``(X_in, y_in, X_out, y_out, score)`` of the canary the user asked for."""
    if isinstance(canary, str):
        if canary != "auto":
            raise ValueError(f"canary must be 'auto' or (x, y), got {canary!r}.")
        if y is None and hasattr(estimator, "sample"):
            return synthetic_canary(estimator, X)
        if schema_encoder_of(estimator) is not None:
            return schema_canary(estimator, X, y)
        return linear_canary(estimator, X, y)
    if isinstance(canary, tuple) and len(canary) == 2:
        return user_canary(X, y, canary, score)
    raise ValueError(f"canary must be 'auto' or (x, y), got {canary!r}.")


@dataclass(frozen=True)
class _Neighbours:
    """The two data sets an audit tells apart, and the score it reads."""

    X_in: object
    y_in: object
    fit_params_in: dict
    X_out: object
    y_out: object
    fit_params_out: dict
    score: object
    relation: Neighbouring


def _neighbours(estimator, X, y, canary, score, fit_params):
    """The canary's data set and its neighbour under the estimator's relation.

    Under add/remove the neighbour is the data set without the canary (the
    last row of the data set with it), for an automatic or a user's canary
    alike; per-row fit parameters (``sensitive_features``) lose their last
    entry.
    """
    X_in, y_in, X_out, y_out, auto_score = _canary_sets(estimator, X, y, canary, score)
    relation = relation_of(estimator)
    fit_params_out = fit_params
    if relation == Neighbouring.ADD_REMOVE:
        n_rows = len(X_in)
        fit_params_out = {
            name: _without_last_row(value, name, n_rows)
            for name, value in fit_params.items()
        }
        X_out = _without_last_row(X_in, "X", n_rows)
        y_out = None if y_in is None else _without_last_row(y_in, "y", n_rows)
    return _Neighbours(
        X_in,
        y_in,
        fit_params,
        X_out,
        y_out,
        fit_params_out,
        auto_score if score is None else score,
        relation,
    )


def _run_trials(estimator, pair, n_in, seeds, n_jobs):
    """Fit the seeded clones: the first ``n_in`` with the canary, the rest without.

    Returns the scores and the largest reported ``(epsilon, delta)``.
    """
    jobs = [
        delayed(_fit_and_score)(
            estimator, pair.X_in, pair.y_in, seed, pair.score, pair.fit_params_in
        )
        for seed in seeds[:n_in]
    ] + [
        delayed(_fit_and_score)(
            estimator, pair.X_out, pair.y_out, seed, pair.score, pair.fit_params_out
        )
        for seed in seeds[n_in:]
    ]
    out = Parallel(n_jobs=n_jobs)(jobs)
    scores = np.array([o[0] for o in out], dtype=float)
    if not np.all(np.isfinite(scores)):
        raise ValueError("Some fits gave a non-finite score; cannot audit them.")
    epsilons = np.array([o[1] for o in out], dtype=float)
    deltas = np.array([o[2] for o in out], dtype=float)
    check_reported_relation([o[3] for o in out], pair.relation)
    epsilon_reported = (
        float(np.max(epsilons)) if np.all(np.isfinite(epsilons)) else math.nan
    )
    delta = float(np.max(deltas)) if np.all(np.isfinite(deltas)) else 0.0
    return scores, epsilon_reported, delta


@dataclass(frozen=True)
class _HeldOutTest:
    """A test chosen on the selection halves, counted on the evaluation halves."""

    sign: float
    threshold: float
    tp: int
    fp: int
    n_in: int
    n_out: int


def _split_test(scores_in, scores_out, alpha, delta):
    """Choose the test on the first halves, evaluate it on the second ones."""
    n_in, n_out = scores_in.size, scores_out.size
    half_in, half_out = n_in // 2, n_out // 2
    sign, threshold = _choose_test(
        scores_in[:half_in],
        scores_out[:half_out],
        alpha,
        delta,
        n_in - half_in,
        n_out - half_out,
    )
    eval_in, eval_out = sign * scores_in[half_in:], sign * scores_out[half_out:]
    tp = int(np.sum(eval_in > sign * threshold))
    fp = int(np.sum(eval_out > sign * threshold))
    return _HeldOutTest(sign, threshold, tp, fp, eval_in.size, eval_out.size)


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

    Runs the membership experiment under the estimator's relation: half of
    the ``n_trials`` fits are on a data set ``D'`` holding a canary record,
    half on its neighbour ``D`` where that record is replaced (replace-one) or
    removed (an estimator with ``neighbouring="add-remove"``, a nested step's
    included; automatic or user canaries), each on a fresh clone with its own
    seed (every nested ``random_state`` is set). Fits that report another
    relation than the pairing's are refused. A test thresholding a
    score of the fitted model then tells ``D'`` from ``D``; its true and false
    positive rates, bounded by Clopper-Pearson, give a lower bound on the
    epsilon any (epsilon, delta)-DP guarantee must have. An epsilon_lower
    above the reported epsilon disproves the estimator's privacy claim (at
    confidence ``1 - alpha``); one below it is only consistent with it.

    Parameters
    ----------
    estimator : estimator
        Unfitted; cloned for every fit. Its ``random_state`` (if any) is set
        per fit from seeds drawn up front.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or None
    canary : "auto" or tuple (x, y), default="auto"
        ``"auto"`` for a linear classifier (``DPLogisticRegression``,
        ``DPSaddlePointClassifier``: anything with ``coef_``): an extra
        all-zero feature column is appended to ``X`` for every record, so no
        other record ever moves that coordinate. In ``D'`` the last row is
        replaced by the canary, zero everywhere but ``row_norm`` (the
        estimator's, or 1) in the extra column, labelled ``classes_[1]``; in
        ``D`` by the same record with ``-row_norm`` there (a neighbour by
        replacement whose gradient is opposite on that coordinate). The score
        is the model's coefficient on the extra column (``coef_[0, -1]`` for
        binary problems, the row of ``classes_[1]`` otherwise): the coordinate
        carries the canary's gradient steps and the noise only. The last row
        is used so that, with cyclic batches, the canary's step is the last
        one to touch the model; with ``sensitive_features`` (passed in
        ``fit_params``) the canary keeps the last row's group, which must be
        among the estimator's declared ``groups``.
        ``"auto"`` for synthetic data (``y is None`` and the estimator has
        ``sample``; every column with a categorical ``domain``): in each
        column the canary takes the category least frequent among the other
        rows, its neighbour the most frequent one, so the canary's cell is
        empty without it. The score is the canary's frequency in a large
        synthetic sample: the shares of sampled rows carrying its value in
        each column plus those carrying its values on each measured set of
        columns (``selected_``, else ``tree_``).
        ``"auto"`` for a Pipeline whose first step is a
        :class:`~skdp.preprocessing.SchemaEncoder` (``X`` a DataFrame with
        the declared columns, or an array in the schema's order): the canary
        is a row of the table itself, every numeric column at its declared
        ``high`` and every categorical column at its category least frequent
        among the other rows, labelled with the second class; its neighbour
        has every numeric column at ``low`` and the most frequent categories.
        The score is the Pipeline's decision function at the canary minus at
        its neighbour.
        A tuple ``(x, y)``: ``D`` is ``(X, y)`` and ``D'`` has its last row
        replaced by ``(x, y)`` (``y=None`` for unsupervised estimators, which
        then need ``score``); with a DataFrame ``X``, ``x`` is a dict, Series
        or one-row frame of column -> value.
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
        Passed to every ``fit``. Under add/remove the fits without the
        canary get each per-row parameter (``sensitive_features``,
        ``sample_weight``) without its last entry, the canary's; a parameter
        that is not an array of one entry per row is refused there.

    Returns
    -------
    AuditResult
        Its ``verdict`` reads ``"refutes the claim"`` when ``epsilon_lower``
        exceeds the reported epsilon, ``"consistent with the claim"``
        otherwise. The reported epsilon of a Pipeline is every DP step's
        spend composed (:func:`skdp.pipeline.privacy_spent`); a step known to
        read the data before the private estimator gets a
        :class:`~skdp.exceptions.PrivacyLeakWarning`
        (:func:`skdp.pipeline.check_pipeline`).

    Notes
    -----
    Validity. The fits of each data set are split in two halves. The test
    (direction and threshold) is chosen on the first halves only (rated by
    the bound the second halves would give at rates estimated on the first
    halves, erring towards "no leak"); it is evaluated on the second halves
    only, independent of the choice. There, with ``TPR_lo`` the
    Clopper-Pearson lower bound on the true positive rate and ``FPR_hi`` the
    upper bound on the false positive rate, each at level ``alpha / 2``,
    both hold together with probability at least ``1 - alpha`` and then
    (epsilon, delta)-DP implies
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
    ...                            batch_sampling="cyclic", row_norm=1.0)
    >>> result = audit(est, X, y, n_trials=40, random_state=0)
    >>> result.epsilon_lower <= result.epsilon_reported
    True
    """
    _check_audit_args(n_trials, alpha, score)
    check_groups_declared(estimator, fit_params)
    check_pipeline(estimator)
    pair = _neighbours(estimator, X, y, canary, score, fit_params)

    n_in = int(n_trials) // 2
    seeds = audit_generator(random_state).integers(
        0, FIT_SEED_BOUND, size=int(n_trials)
    )
    scores, epsilon_reported, delta = _run_trials(estimator, pair, n_in, seeds, n_jobs)
    scores_in, scores_out = scores[:n_in], scores[n_in:]
    test = _split_test(scores_in, scores_out, alpha, delta)
    tpr_lo = float(clopper_pearson(test.tp, test.n_in, alpha / 2, side="lower"))
    fpr_hi = float(clopper_pearson(test.fp, test.n_out, alpha / 2, side="upper"))
    scores_in.setflags(write=False)
    scores_out.setflags(write=False)
    return AuditResult(
        epsilon_lower=epsilon_from_rates(tpr_lo, fpr_hi, delta),
        epsilon_reported=epsilon_reported,
        delta=delta,
        tpr=test.tp / test.n_in,
        fpr=test.fp / test.n_out,
        threshold=test.threshold,
        scores_in=scores_in,
        scores_out=scores_out,
        n_trials=int(n_trials),
        alpha=float(alpha),
        direction="greater" if test.sign > 0 else "less",
        tpr_lower=tpr_lo,
        fpr_upper=fpr_hi,
    )

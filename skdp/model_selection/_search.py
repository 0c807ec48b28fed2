"""Total privacy of a cross-validated grid search, known before any fit."""

import itertools
import numbers
import warnings
from collections import Counter
from dataclasses import replace

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.model_selection import KFold, ParameterGrid, RepeatedKFold

from ..accounting import compose_spent
from ..exceptions import PrivacyLeakWarning
from ..utils._validation import default_delta

__all__ = ["search_privacy"]


def _fold_sizes(n_samples, cv, estimator):
    """Test-fold sizes of each repetition of the folds ``cv`` makes (sorted).

    Only splitters whose folds do not depend on the data are accounted:
    ``KFold`` (shuffled or not) and ``RepeatedKFold``, or an integer ``k`` for
    ``KFold(k)``. Then replacing one record changes one row of each training
    set that holds it and nothing else, so every fit sees a replace-one
    neighbour (or the same rows). Stratified and group splitters assign rows
    to folds from the labels or groups: changing one record's label moves
    other records between folds, which composing the fits does not cover.
    """
    if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
        if not 2 <= cv <= n_samples:
            raise ValueError(f"cv must be between 2 and n_samples, got {cv}.")
        if is_classifier(estimator):
            warnings.warn(
                f"search_privacy(cv={cv}) accounts the folds of KFold({cv}). "
                f"GridSearchCV and cross_val_score with cv={cv} split a "
                "classifier's rows by StratifiedKFold instead, whose folds follow "
                "the private labels (one changed label moves other rows between "
                "folds), and this total does not cover that: pass "
                f"cv=KFold({cv}) to the search too.",
                PrivacyLeakWarning,
                stacklevel=3,
            )
        cv = KFold(int(cv))
    if not isinstance(cv, (KFold, RepeatedKFold)):
        raise TypeError(
            "cv must be an int, a KFold or a RepeatedKFold: their folds do not "
            f"depend on the data. {type(cv).__name__} is not one of them (its "
            "folds may follow the labels or groups, so that one record moves "
            "others between folds, or are not accounted here)."
        )
    rows = np.zeros((n_samples, 1))  # only the number of rows is read
    tests = [len(test) for _, test in cv.split(rows)]
    repeats = cv.n_repeats if isinstance(cv, RepeatedKFold) else 1
    k = len(tests) // repeats
    return [sorted(tests[r * k : (r + 1) * k]) for r in range(repeats)]


def _record_memberships(n_samples, fold_sizes):
    """Every multiset of training-set sizes one record can be fitted in.

    In each repetition a record is in the test fold of exactly one split and
    in the training sets of the others. Which fold holds which record may be
    secret (shuffled folds), but the fold sizes are public, so the record's
    fits are known up to the size of the fold it is left out of: one option
    per repetition for each distinct fold size. Returns a list of
    ``Counter({training size: number of fits})``, one per distinct option.
    """
    # KFold and RepeatedKFold: every repetition has the same sorted sizes,
    # so only how many times each size is left out matters.
    sizes = fold_sizes[0]
    if any(other != sizes for other in fold_sizes):
        raise ValueError("Internal error: repetitions with different fold sizes.")
    options = []
    for left_out in itertools.combinations_with_replacement(
        sorted(set(sizes)), len(fold_sizes)
    ):
        fits = Counter({n_samples - size: 0 for size in sizes})
        for size in sizes:
            fits[n_samples - size] += len(fold_sizes)
        for size in left_out:
            fits[n_samples - size] -= 1
        options.append(+fits)
    return options


def _worst_class_count_spend(candidate, size):
    """Spend of a fit whose class set is read from its training labels.

    The fit is binary or multiclass depending on the labels; the spend of a
    logistic fit depends on the class count only through that (the
    gradient bound and smoothness of the binary and softmax losses), so the
    pointwise maximum of the Rényi curves planned for 2 and 3 classes bounds
    either (events dropped: the tight accountants compose fixed events). An
    estimator that refuses more than two classes is planned for two.
    """
    binary = candidate.privacy_plan(size, 2)[1]
    try:
        multi = candidate.privacy_plan(size, 3)[1]
    except ValueError:
        return binary
    worst = np.maximum(binary.rdp, multi.rdp)
    return replace(binary, rdp=tuple(worst.tolist()), events=())


def search_privacy(
    estimator, param_grid, *, n_samples, cv=5, n_classes=None, refit=True, delta=None
):
    """Privacy spent by ``GridSearchCV(estimator, param_grid, cv=cv)``'s fits.

    The spend of one fit depends only on its parameters and its number of rows
    (public), never on the data, so the whole search can be accounted without
    fitting anything. Under replace-one, the fits that can tell two
    neighbouring data sets apart are those whose training set holds the
    record that differs; a fit on a training set without it runs on the same
    rows either way and costs nothing. With ``KFold(k)`` a record is in the
    test fold of one split and in the training sets of the ``k - 1`` others
    (with ``RepeatedKFold``, ``k - 1`` per repetition), so each record is
    charged every candidate on those ``k - 1`` folds, plus the refit on all
    rows, composed (adaptively) on their Rényi curves, or by the tight
    accountants when every fit keeps its events (one candidate, estimators
    that report Gaussian-DP or PLD bounds). Folds of ``n`` rows need not be
    of equal size and shuffled folds are secret, so the total is the largest
    over the sizes of the fold a record can be left out of (in each
    repetition): the largest over records, whatever the shuffle.

    The total holds for replace-one neighbours (every candidate must use
    ``neighbouring="replace-one"``: under add/remove the fold boundaries move
    with the number of rows) and for folds that do not depend on the data:
    pass the same ``KFold`` to the search (``GridSearchCV(..., cv=KFold(5))``).
    An integer ``cv`` in ``GridSearchCV`` means ``StratifiedKFold`` for a
    classifier, whose folds follow the private labels; this function then
    warns, as it accounts ``KFold`` folds.

    What this covers and what it does not. Covered: every model the search
    trains (the ``k`` fold models of each candidate and the refit), as if
    all were released, with the refit charged as the most expensive
    candidate. Not covered: the validation scores (``cv_results_``), computed
    without noise on the held-out fold, which holds exactly the rows whose
    fits were not charged, and the choice of the best candidate from them,
    which also decides which candidate is refitted. Papernot and Steinke
    (2022, "Hyperparameter tuning with Rényi differential privacy") bound the
    cost of selection when the number of trials is randomised; skdp does not
    yet implement it. Treat the returned epsilon as the cost of the training
    fits alone, not as a bound for a search that releases its scores or its
    choice: that can cost more, by an amount this function does not bound.

    Parameters
    ----------
    estimator : skdp estimator
        Needs a ``privacy_plan(n_samples, n_classes)`` method (for a Pipeline,
        pass its final step and prefix-free parameter names). A private
        preprocessing step, such as :class:`skdp.preprocessing.DPStandardScaler`,
        is refitted on every fold and for the refit too: its spends are not in
        this total, add them (``k + 1`` fits of its epsilon for ``k`` folds,
        or ``k`` charged per record by the argument above).
        A :class:`~skdp.fairness.DPSaddlePointClassifier` needs its ``groups``
        declared.
    param_grid : dict or list of dicts
        As for :class:`sklearn.model_selection.GridSearchCV`.
    n_samples : int
        Rows passed to the search.
    cv : int, KFold or RepeatedKFold, default=5
        The search's folds. An integer ``k`` means ``KFold(k)``. Every other
        splitter is refused: those whose folds depend on the labels or groups
        (``StratifiedKFold``, ``GroupKFold``, ...), and the others, which are
        not accounted here (``ShuffleSplit``, ...).
    n_classes : int or None, default=None
        ``None``: the estimator's declared ``classes``. Without them each
        fit reads its class set from its training labels, so the total is
        planned for the worst case, every fit binary or multiclass (the
        pointwise maximum of the two Rényi curves, composed by Rényi DP),
        and a :class:`~skdp.exceptions.PrivacyLeakWarning` says so.
    refit : bool, default=True
        Whether the best candidate is refitted on all rows (counted as the
        most expensive candidate, since which one wins is not known before).
    delta : float or None
        Delta of the total; default ``min(1e-5, n ** -1.1)``.

    Returns
    -------
    skdp.accounting.PrivacySpent
    """
    if not hasattr(estimator, "privacy_plan"):
        raise TypeError(
            f"{type(estimator).__name__} has no privacy_plan method; pass the "
            "private estimator (the last step of a Pipeline)."
        )
    fold_sizes = _fold_sizes(int(n_samples), cv, estimator)
    candidates = [
        clone(estimator).set_params(**params) for params in ParameterGrid(param_grid)
    ]
    if not candidates:
        raise ValueError("param_grid has no candidate.")
    for candidate in candidates:
        relation = candidate.get_params().get("neighbouring", "replace-one")
        if relation != "replace-one":
            raise ValueError(
                f"search_privacy accounts replace-one neighbours only, got "
                f"neighbouring={relation!r}: under add/remove the folds' "
                "boundaries move with the number of rows, so a fold's training "
                "set can change by more than the one record."
            )
    undeclared = n_classes is None and any(
        candidate.get_params().get("classes", ()) is None for candidate in candidates
    )
    if undeclared:
        warnings.warn(
            "search_privacy: the estimator's classes are not declared and "
            "n_classes is not given, so each fit reads its class set from its "
            "training labels (not covered by the total). The total is planned "
            "for the worst case, every fit binary or multiclass where the "
            "estimator allows both (the larger Rényi curve of each, composed by "
            "Rényi DP). Declare classes=[...] "
            "(or pass n_classes) for a tighter total.",
            PrivacyLeakWarning,
            stacklevel=2,
        )

    def spend(candidate, size):
        if undeclared and candidate.get_params().get("classes", ()) is None:
            return _worst_class_count_spend(candidate, size)
        return candidate.privacy_plan(size, n_classes)[1]

    delta = default_delta(n_samples) if delta is None else float(delta)
    refit_spend = None
    if refit:
        # Which candidate is refitted is not known in advance: charge the
        # pointwise maximum of their curves.
        # One candidate: its events stay, for the tight accountants.
        refits = [spend(candidate, int(n_samples)) for candidate in candidates]
        worst = np.max([s.rdp for s in refits], axis=0)
        events = refits[0].events if len(refits) == 1 else ()
        refit_spend = replace(refits[0], rdp=tuple(worst.tolist()), events=events)
        refit_spend = replace(refit_spend.at_delta(delta), bound="refit")
    memberships = _record_memberships(int(n_samples), fold_sizes)
    sizes = sorted({size for fits in memberships for size in fits})
    by_size = [{size: spend(c, size) for size in sizes} for c in candidates]
    totals = []
    for fits in memberships:
        spends = [
            spends_of[size]
            for spends_of in by_size
            for size, count in sorted(fits.items())
            for _ in range(count)
        ]
        if refit_spend is not None:
            spends.append(refit_spend)
        totals.append(compose_spent(spends, delta=delta))
    worst = max(totals, key=lambda total: total.epsilon)
    if len(totals) == 1:
        return worst
    # At another delta another record may be the worst: keep the pointwise
    # maximum of the curves, and no events, for at_delta.
    curve = np.max([total.rdp for total in totals], axis=0)
    return replace(worst, rdp=tuple(curve.tolist()), events=())

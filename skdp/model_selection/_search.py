"""Total privacy of a cross-validated grid search, known before any fit."""

import numbers
import warnings
from dataclasses import replace

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.model_selection import KFold, ParameterGrid, RepeatedKFold

from ..accounting import compose_spent
from ..exceptions import PrivacyLeakWarning
from ..utils._validation import default_delta

__all__ = ["search_privacy"]


def _fold_train_sizes(n_samples, cv, estimator):
    """Training-set sizes of the folds ``cv`` makes on ``n_samples`` rows.

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
    return [len(train) for train, _ in cv.split(rows)]


def search_privacy(
    estimator, param_grid, *, n_samples, cv=5, n_classes=None, refit=True, delta=None
):
    """Privacy spent by ``GridSearchCV(estimator, param_grid, cv=cv)``'s fits.

    The spend of one fit depends only on its parameters and its number of rows
    (public), never on the data, so the whole search can be accounted without
    fitting anything: every candidate on every fold, plus the refit on all
    rows, composed on their Rényi curves (a record is in most folds' training
    sets; composing all fits is a valid upper bound). With one candidate whose
    fits keep their events (estimators that report Gaussian-DP or PLD bounds),
    the events are composed by the same tight accountants instead.

    The total holds for replace-one neighbours (every candidate must use
    ``neighbouring="replace-one"``: under add/remove the fold boundaries move
    with the number of rows) and for folds that do not depend on the data:
    pass the same ``KFold`` to the search (``GridSearchCV(..., cv=KFold(5))``).
    An integer ``cv`` in ``GridSearchCV`` means ``StratifiedKFold`` for a
    classifier, whose folds follow the private labels; this function then
    warns, as it accounts ``KFold`` folds.

    What this does not cover: choosing the best candidate by its score on
    private validation folds, and the validation scores themselves, are
    further releases of the data. Papernot and Steinke (2022, "Hyperparameter
    tuning with Rényi differential privacy") bound the cost of selection when
    the number of trials is randomised; skdp does not yet implement it. Treat
    the returned epsilon as a lower bound on what a search that reports its
    best validation score spends, and an upper bound on the training fits.

    Parameters
    ----------
    estimator : skdp estimator
        Needs a ``privacy_plan(n_samples, n_classes)`` method (for a Pipeline,
        pass its final step and prefix-free parameter names). A private
        preprocessing step, such as :class:`skdp.preprocessing.DPStandardScaler`,
        is refitted on every fold and for the refit too: its spends are not in
        this total, add them (``k + 1`` fits of its epsilon for ``k`` folds).
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
        ``None``: the estimator's declared ``classes``, or 2 without them.
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
    train_sizes = _fold_train_sizes(int(n_samples), cv, estimator)
    spends, refits = [], []
    for params in ParameterGrid(param_grid):
        candidate = clone(estimator).set_params(**params)
        relation = candidate.get_params().get("neighbouring", "replace-one")
        if relation != "replace-one":
            raise ValueError(
                f"search_privacy accounts replace-one neighbours only, got "
                f"neighbouring={relation!r}: under add/remove the folds' "
                "boundaries move with the number of rows, so a fold's training "
                "set can change by more than the one record."
            )
        for size in train_sizes:
            spends.append(candidate.privacy_plan(size, n_classes)[1])
        if refit:
            refits.append(candidate.privacy_plan(int(n_samples), n_classes)[1])
    if not spends:
        raise ValueError("param_grid has no candidate.")
    delta = default_delta(n_samples) if delta is None else float(delta)
    if refits:
        # Which candidate is refitted is not known in advance: charge the
        # pointwise maximum of their curves.
        # One candidate: its events stay, for the tight accountants.
        worst = np.max([s.rdp for s in refits], axis=0)
        events = refits[0].events if len(refits) == 1 else ()
        refit = replace(refits[0], rdp=tuple(worst.tolist()), events=events)
        spends.append(replace(refit.at_delta(delta), bound="refit"))
    return compose_spent(spends, delta=delta)

"""Total privacy of a cross-validated grid search, known before any fit."""

from dataclasses import replace

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid

from ..accounting import compose_spent
from ..utils._validation import default_delta

__all__ = ["search_privacy"]


def _kfold_train_sizes(n_samples, n_splits):
    """Training-set sizes of ``KFold(n_splits)`` (and stratified variants)."""
    if not 2 <= n_splits <= n_samples:
        raise ValueError(f"cv must be between 2 and n_samples, got {n_splits}.")
    test_sizes = np.full(n_splits, n_samples // n_splits)
    test_sizes[: n_samples % n_splits] += 1
    return [int(n_samples - t) for t in test_sizes]


def search_privacy(
    estimator, param_grid, *, n_samples, cv=5, n_classes=2, refit=True, delta=None
):
    """Privacy spent by ``GridSearchCV(estimator, param_grid, cv=cv)``'s fits.

    The spend of one fit depends only on its parameters and its number of rows
    (public), never on the data, so the whole search can be accounted without
    fitting anything: every candidate on every fold, plus the refit on all
    rows, composed on their Rényi curves (a record is in most folds' training
    sets; composing all fits is a valid upper bound). With one candidate whose
    fits keep their events (estimators that report Gaussian-DP or PLD bounds),
    the events are composed by the same tight accountants instead.

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
        pass its final step and prefix-free parameter names).
    param_grid : dict or list of dicts
        As for :class:`sklearn.model_selection.GridSearchCV`.
    n_samples : int
        Rows passed to the search.
    cv : int, default=5
        Number of folds (KFold or StratifiedKFold sizes).
    n_classes : int, default=2
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
    train_sizes = _kfold_train_sizes(int(n_samples), int(cv))
    spends, refits = [], []
    for params in ParameterGrid(param_grid):
        candidate = clone(estimator).set_params(**params)
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

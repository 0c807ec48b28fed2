"""Total privacy of a cross-validated grid search, known before any fit."""

import itertools
import math
import numbers
import warnings
from collections import Counter
from dataclasses import replace

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    ParameterGrid,
    ParameterSampler,
    RandomizedSearchCV,
    RepeatedKFold,
)

from .._base import resolve_delta
from ..accounting import Neighbouring, PrivacySpent, compose_spent
from ..exceptions import PrivacyLeakWarning
from ..pipeline import check_pipeline
from ..pipeline._leaks import final_estimator, warn_leaks
from ..pipeline._plan import check_candidate, fit_spends, undeclared_classes
from ._pairs import compose_pairs, replace_one_pair

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


def private_cv(cv):
    """The folds a private search runs: ``None`` or ``k`` mean ``KFold(k)``.

    ``None`` is scikit-learn's default of 5 folds. Any splitter is returned
    as it is (:func:`search_privacy` refuses those it does not account).
    """
    if cv is None:
        return KFold(5)
    if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
        return KFold(int(cv))
    return cv


def _as_grid(candidates):
    """A list of candidate dicts as a grid that enumerates exactly them."""
    return [{name: [value] for name, value in params.items()} for params in candidates]


def _unpack_search(search, param_grid, cv, refit):
    """``(estimator, grid, cv, refit)`` read from a search object.

    ``GridSearchCV``: its ``param_grid``. ``RandomizedSearchCV``: the
    ``n_iter`` candidates its integer ``random_state`` draws (the draw is
    public and data-independent, so exactly those are accounted). skdp's
    private searches run ``KFold(k)`` for an integer ``cv``.
    """
    if not isinstance(search, (GridSearchCV, RandomizedSearchCV)):
        raise TypeError(
            f"{type(search).__name__} is not accounted: pass a GridSearchCV, a "
            "RandomizedSearchCV (or skdp's PrivateGridSearchCV, "
            "PrivateRandomizedSearchCV), a Pipeline or a private estimator. "
            "Successive-halving searches fit on subsets whose sizes follow the "
            "scores."
        )
    given = [
        name
        for name, value in (("param_grid", param_grid), ("cv", cv), ("refit", refit))
        if value is not None
    ]
    if given:
        raise TypeError(
            f"search_privacy got a {type(search).__name__} and {', '.join(given)}: "
            "they are read from the search object; pass either the search alone "
            "or its estimator with them."
        )
    if isinstance(search, GridSearchCV):
        grid = search.param_grid
    else:
        state = search.random_state
        if not isinstance(state, numbers.Integral) or isinstance(state, bool):
            raise ValueError(
                f"{type(search).__name__}(random_state={state!r}) draws its "
                "candidates when it is fitted, so they are not known here: set "
                "random_state to an int (PrivateRandomizedSearchCV.fit fixes "
                "them before reading any data and reports their total)."
            )
        grid = _as_grid(
            ParameterSampler(
                search.param_distributions, search.n_iter, random_state=int(state)
            )
        )
    cv = search.cv
    if getattr(search, "_int_cv_is_kfold", False):
        cv = private_cv(cv)
    else:
        cv = 5 if cv is None else cv
        _refuse_stratified(search, cv)
    return search.estimator, grid, cv, bool(search.refit)


def _refuse_stratified(search, cv):
    """Refuse a scikit-learn search whose integer ``cv`` runs StratifiedKFold.

    ``GridSearchCV(cv=k)`` over a classifier splits by ``StratifiedKFold(k)``
    (:func:`sklearn.model_selection.check_cv`), whose folds follow the
    private labels, so accounting ``KFold(k)`` for it would account folds it
    does not run.
    """
    if not isinstance(cv, numbers.Integral) or isinstance(cv, bool):
        return
    if not is_classifier(search.estimator):
        return
    name = type(search).__name__
    raise TypeError(
        f"{name}(cv={search.cv!r}) splits a classifier's rows by "
        f"StratifiedKFold({cv}), whose folds follow the private labels (one "
        "changed label moves other rows between folds): its fits cannot be "
        f"accounted. Pass cv=KFold({cv}) to the search, or use skdp's "
        f"Private{name}, whose cv={cv} means KFold({cv})."
    )


def _warn_leaks(candidates, n_fits):
    """Each step that reads the private data, said once for the whole search.

    A step that reads the data does so in each of the search's ``n_fits``
    fits; one :class:`~skdp.exceptions.PrivacyLeakWarning` per step and
    private model (:func:`skdp.pipeline._leaks.warn_leaks`) says so, with
    what to do, instead of one per fit.
    """
    said = set()
    for candidate in candidates:
        model = type(final_estimator(candidate)).__name__
        for finding in check_pipeline(candidate, warn=False):
            if (finding, model) not in said:
                said.add((finding, model))
                warn_leaks([finding], model, n_fits=n_fits, stacklevel=3)


def _rdp_total(by_size, memberships, n_samples, refit, delta):
    """The total when every fit keeps a Rényi curve under replace-one.

    The fits of a record, and the refit, are composed adaptively on their
    Rényi curves, or by the tight accountants when all keep their events.
    """
    delta = resolve_delta(delta, n_samples)
    refit_parts = []
    if refit:
        refits = [spends[n_samples] for spends in by_size]
        if len(refits) == 1:
            # One candidate: its events stay, for the tight accountants.
            refit_parts = [replace(s, bound="refit") for s in refits[0]]
        else:
            # Which candidate is refitted is not known in advance: charge the
            # pointwise maximum of their (composed) curves.
            worst = np.max([np.sum([s.rdp for s in r], axis=0) for r in refits], 0)
            first = refits[0][0]
            refit_parts = [
                replace(first, rdp=tuple(worst.tolist()), events=(), bound="refit")
            ]
    totals = []
    for fits in memberships:
        spends = [
            spend
            for spends_of in by_size
            for size, count in sorted(fits.items())
            for _ in range(count)
            for spend in spends_of[size]
        ]
        totals.append(compose_spent([*spends, *refit_parts], delta=delta))
    worst = max(totals, key=lambda total: total.epsilon)
    if len(totals) == 1:
        return worst
    # At another delta another record may be the worst: keep the pointwise
    # maximum of the curves, and no events, for at_delta.
    curve = np.max([total.rdp for total in totals], axis=0)
    return replace(worst, rdp=tuple(curve.tolist()), events=())


def _pair_total(by_size, memberships, n_samples, refit, delta):
    """The total when some fit is known only by an ``(epsilon, delta)`` pair.

    An add/remove fit (its spend holds for add/remove neighbours of its
    training set; ``DPLogisticRegression`` under add/remove reports a basic
    composition with no Rényi curve) counts as ``(2 e, (1 + e^e) d)`` for
    replace-one (:func:`replace_one_pair`); a fit's DP steps add up (basic
    composition); the refit counts as the largest candidate pair; a record's
    fits compose by :func:`compose_pairs`. Reported for replace-one
    neighbours, with an infinite Rényi curve and no events (no curve bounds
    it), so that ``at_delta`` and ``compose_spent`` give infinity rather
    than a number they cannot justify.
    """

    def pair(spends):
        pairs = [replace_one_pair(s) for s in spends]
        return math.fsum(e for e, _ in pairs), math.fsum(d for _, d in pairs)

    refit_pairs = []
    if refit:
        refits = [pair(spends[n_samples]) for spends in by_size]
        refit_pairs = [(max(e for e, _ in refits), max(d for _, d in refits))]
    results = []
    for fits in memberships:
        pairs = [
            pair(spends_of[size])
            for spends_of in by_size
            for size, count in sorted(fits.items())
            for _ in range(count)
        ]
        results.append(compose_pairs([*pairs, *refit_pairs], delta))
    epsilon = max(e for e, _, _ in results)
    total_delta = max(d for _, d, _ in results)
    rules = sorted({rule for _, _, rule in results})
    first = by_size[0][n_samples][0]
    return PrivacySpent(
        epsilon=float(epsilon),
        delta=float(total_delta),
        accountant=first.accountant,
        bound=(
            "fits as (epsilon, delta) pairs, add/remove ones as replace-one by "
            f"group privacy; {' / '.join(rules)}"
        ),
        neighbouring=Neighbouring.REPLACE_ONE.value,
        order=math.nan,
        orders=first.orders,
        rdp=(math.inf,) * len(first.orders),
    )


def _search_inputs(estimator, param_grid, cv, refit, delta):
    """``(estimator, grid, cv, refit, delta)``, defaults applied.

    A search object is unpacked (:func:`_unpack_search`); its own ``delta``
    (skdp's private searches) counts when ``delta`` is ``None``.
    """
    if isinstance(estimator, (GridSearchCV, RandomizedSearchCV)) or (
        hasattr(estimator, "estimator") and hasattr(estimator, "cv")
    ):
        own_delta = getattr(estimator, "delta", None)
        estimator, param_grid, cv, refit = _unpack_search(
            estimator, param_grid, cv, refit
        )
        delta = own_delta if delta is None else delta
    refit = True if refit is None else bool(refit)
    cv = 5 if cv is None else cv
    grid = {} if param_grid is None else param_grid
    return estimator, grid, cv, refit, delta


def _candidates(estimator, grid):
    """Every candidate of ``grid``, each checked."""
    candidates = [clone(estimator).set_params(**p) for p in ParameterGrid(grid)]
    if not candidates:
        raise ValueError("param_grid has no candidate.")
    for candidate in candidates:
        check_candidate(candidate)
    return candidates


def _warn_worst_classes():
    """Say that undeclared classes make the total a worst case over them."""
    warnings.warn(
        "search_privacy: the estimator's classes are not declared and "
        "n_classes is not given, so each fit reads its class set from its "
        "training labels (not covered by the total). The total is planned "
        "for the worst case, every fit binary or multiclass where the "
        "estimator allows both (the larger Rényi curve of each, composed by "
        "Rényi DP). Declare classes=[...] "
        "(or pass n_classes) for a tighter total.",
        PrivacyLeakWarning,
        stacklevel=3,
    )


def _keeps_curves(by_size):
    """Whether every planned fit is replace-one with a finite Rényi curve."""
    spends = [s for spends_of in by_size for fit in spends_of.values() for s in fit]
    return all(
        s.neighbouring == Neighbouring.REPLACE_ONE and np.all(np.isfinite(s.rdp))
        for s in spends
    )


def search_privacy(
    estimator,
    param_grid=None,
    *,
    n_samples,
    cv=None,
    n_classes=None,
    refit=None,
    delta=None,
):
    """Privacy spent by the fits of a cross-validated grid search.

    Accepts the search as users write it: ``search_privacy(pipe, grid, ...)``
    with the grid exactly as for ``GridSearchCV(pipe, grid)`` (prefixed
    names ``"step__param"``, nested steps, a list of grids, steps swapped
    for other estimators), or the search object itself,
    ``search_privacy(GridSearchCV(pipe, grid, cv=KFold(5)), n_samples=n)``,
    whose estimator, grid (or drawn candidates), folds and refit are read.
    Every DP step of each candidate Pipeline is composed, a
    :class:`~skdp.preprocessing.DPStandardScaler` in front as well as the
    model, and the Pipeline is checked for steps that read the private data
    (:func:`skdp.pipeline.check_pipeline`, one
    :class:`~skdp.exceptions.PrivacyLeakWarning` per step, said once for the
    whole search).

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

    The total holds for replace-one neighbours, with ``n`` public, and for
    folds that do not depend on the data: pass the same ``KFold`` to the
    search (``GridSearchCV(..., cv=KFold(5))``). An integer ``cv`` in
    ``GridSearchCV`` means ``StratifiedKFold`` for a classifier, whose folds
    follow the private labels. So, with ``cv=5``: ``search_privacy(est,
    grid, cv=5)`` accounts ``KFold(5)``, exactly what
    ``PrivateGridSearchCV(est, grid, cv=5)`` runs, and warns for a
    classifier (a ``GridSearchCV`` given the same ``cv=5`` would not run
    it); ``search_privacy(GridSearchCV(est, grid, cv=5))`` over a classifier
    is refused, since that search runs ``StratifiedKFold(5)``.
    A search cannot be accounted under add/remove (adding a row moves the
    fold boundaries, so a training set changes by more than that row), but
    candidates with ``neighbouring="add-remove"`` are accepted: a fit that is
    ``(e, d)``-DP under add/remove is ``(2 e, (1 + e^e) d)``-DP under
    replace-one (group privacy), and fits known only by such pairs
    (``DPLogisticRegression`` under add/remove reports a basic composition
    with no Rényi curve) are composed by basic or advanced composition,
    whichever is smaller; see ``delta``.

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
    estimator : estimator, Pipeline or search object
        A private skdp estimator (with a ``privacy_plan(n_samples,
        n_classes)`` method), a Pipeline ending in one (its DP steps are
        ``DPStandardScaler`` or have a ``privacy_plan``), or a
        ``GridSearchCV`` / ``RandomizedSearchCV`` over either (then
        ``param_grid``, ``cv`` and ``refit`` must not be given: they are read
        from it; a randomized search needs an integer ``random_state``, and
        scikit-learn's searches over a classifier a splitter, not an integer
        ``cv``, which would mean ``StratifiedKFold``).
        A :class:`~skdp.fairness.DPSaddlePointClassifier` needs its ``groups``
        declared.
    param_grid : dict, list of dicts or None, default=None
        As for :class:`sklearn.model_selection.GridSearchCV`, with the
        Pipeline's step prefixes. ``None`` with an estimator: the estimator
        alone (one candidate).
    n_samples : int
        Rows passed to the search.
    cv : int, KFold, RepeatedKFold or None, default=None
        The search's folds. ``None`` means 5; an integer ``k`` means
        ``KFold(k)`` (what skdp's private searches run for ``cv=k``; a
        :class:`~skdp.exceptions.PrivacyLeakWarning` for a classifier says
        that scikit-learn's searches would run ``StratifiedKFold(k)``).
        Every other splitter is refused: those whose folds depend on the
        labels or groups (``StratifiedKFold``, ``GroupKFold``, ...), and the
        others, which are not accounted here
        (``ShuffleSplit``, ...).
    n_classes : int or None, default=None
        ``None``: the estimator's declared ``classes``. Without them each
        fit reads its class set from its training labels, so the total is
        planned for the worst case, every fit binary or multiclass (the
        pointwise maximum of the two Rényi curves, composed by Rényi DP),
        and a :class:`~skdp.exceptions.PrivacyLeakWarning` says so.
    refit : bool or None, default=None
        Whether the best candidate is refitted on all rows (counted as the
        most expensive candidate, since which one wins is not known before).
        ``None``: ``True`` (or the search object's ``refit``).
    delta : float or None
        Delta of the total. ``None``: ``min(1e-5, n ** -1.1)`` when every
        fit keeps a Rényi curve; when some fit is known only by an
        ``(epsilon, delta)`` pair, the sum of the fits' deltas (basic
        composition). A larger ``delta`` than that sum lets advanced
        composition spend the difference. A search object's own ``delta``
        (skdp's private searches) is used when this is ``None``.

    Returns
    -------
    skdp.accounting.PrivacySpent
        For replace-one neighbours. Always finite: a search whose total
        cannot be bounded is refused.

    Raises
    ------
    TypeError
        If the estimator (or a DP step of the Pipeline) cannot be planned,
        the folds are not accounted (a scikit-learn search over a classifier
        with an integer ``cv`` included), or a search object comes with
        ``param_grid``, ``cv`` or ``refit``.
    ValueError
        If the grid names a parameter the estimator does not have, has no
        candidate, or the total is not finite.

    Examples
    --------
    >>> from sklearn.model_selection import KFold
    >>> from skdp import DPLogisticRegression, TableSchema
    >>> from skdp.model_selection import search_privacy
    >>> from skdp.pipeline import make_private_pipeline
    >>> schema = TableSchema({"age": (17, 90), "y": [0, 1]}, target="y",
    ...                      classes=[0, 1])
    >>> pipe = make_private_pipeline(schema, DPLogisticRegression())
    >>> grid = {"dplogisticregression__epsilon": [0.5, 1.0]}
    >>> total = search_privacy(pipe, grid, n_samples=10_000, cv=KFold(5))
    >>> 1.0 < total.epsilon < 4 * 0.5 + 4 * 1.0 + 1.0
    True
    """
    estimator, grid, cv, refit, delta = _search_inputs(
        estimator, param_grid, cv, refit, delta
    )
    check_candidate(estimator)
    n_samples = int(n_samples)
    fold_sizes = _fold_sizes(n_samples, cv, estimator)
    candidates = _candidates(estimator, grid)
    n_fits = len(candidates) * sum(map(len, fold_sizes)) + int(refit)
    _warn_leaks([estimator, *candidates], n_fits)
    worst_classes = n_classes is None and any(map(undeclared_classes, candidates))
    if worst_classes:
        _warn_worst_classes()
    memberships = _record_memberships(n_samples, fold_sizes)
    sizes = sorted({size for fits in memberships for size in fits} | {n_samples})
    by_size = [
        {size: fit_spends(c, size, n_classes, worst_classes) for size in sizes}
        for c in candidates
    ]
    combine = _rdp_total if _keeps_curves(by_size) else _pair_total
    total = combine(by_size, memberships, n_samples, refit, delta)
    if not math.isfinite(total.epsilon):
        raise ValueError(
            "The search's total epsilon is not finite (no Rényi order bounds "
            "these fits at this delta): reduce the grid or the folds, or raise "
            "the noise."
        )
    return total

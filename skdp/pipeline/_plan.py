"""The planned spend of one fit of a candidate: every DP step of it, no data."""

from dataclasses import replace

import numpy as np
from sklearn.pipeline import Pipeline

from ..preprocessing import DPStandardScaler
from ._leaks import _leaves, final_estimator, is_private

__all__ = ["check_candidate", "fit_spends", "undeclared_classes"]


def _scaler_spend(scaler, size):
    """Spend of ``DPStandardScaler.fit`` on ``size`` rows (its own calibration).

    One Gaussian mechanism calibrated to ``(epsilon, delta)``, ``delta``
    defaulting to ``min(1e-5, size ** -1.1)``; the spend depends on nothing
    else (not on the number of columns).
    """
    scaler._validate_params()
    return scaler._release_plan(size).calibrate()[1]


def _worst_class_count_spend(step, size):
    """Spend of a fit whose class set is read from its training labels.

    The fit is binary or multiclass depending on the labels; the spend of a
    logistic fit depends on the class count only through that (the
    gradient bound and smoothness of the binary and softmax losses), so the
    pointwise maximum of the Rényi curves planned for 2 and 3 classes bounds
    either (events dropped: the tight accountants compose fixed events). An
    estimator that refuses more than two classes is planned for two.
    """
    binary = step.privacy_plan(size, 2)[1]
    try:
        multi = step.privacy_plan(size, 3)[1]
    except ValueError:
        return binary
    worst = np.maximum(binary.rdp, multi.rdp)
    return replace(binary, rdp=tuple(worst.tolist()), events=())


def _private_steps(candidate):
    """``(path, step)`` of every DP step of ``candidate``, the model last."""
    return [
        (path, step)
        for path, step in _leaves(candidate, ())
        if hasattr(step, "privacy_plan") or is_private(step)
    ]


def check_candidate(candidate):
    """Refuse a candidate whose fits cannot be planned from public inputs.

    Parameters
    ----------
    candidate : estimator or Pipeline

    Raises
    ------
    TypeError
        If the (final) estimator has no ``privacy_plan`` (a non-private
        model reads the data with no bound), or if a DP step before it has
        no known plan.
    """
    final = final_estimator(candidate)
    if not hasattr(final, "privacy_plan"):
        where = (
            f"The final step of the Pipeline, {type(final).__name__},"
            if isinstance(candidate, Pipeline)
            else f"{type(final).__name__}"
        )
        raise TypeError(
            f"{where} has no privacy_plan method: its fits cannot be accounted. "
            "Pass a private skdp estimator (DPLogisticRegression, "
            "DPSaddlePointClassifier), a Pipeline ending in one, or a search "
            "over either."
        )
    for path, step in _private_steps(candidate):
        if not (hasattr(step, "privacy_plan") or isinstance(step, DPStandardScaler)):
            raise TypeError(
                f"Step {'__'.join(path)!r} ({type(step).__name__}) is private but "
                "its spend cannot be planned before fitting; search_privacy "
                "knows DPStandardScaler and estimators with a privacy_plan "
                "method."
            )


def undeclared_classes(candidate):
    """Whether the final estimator reads its class set from the labels."""
    return final_estimator(candidate).get_params().get("classes", ()) is None


def fit_spends(candidate, size, n_classes, worst_classes):
    """The planned spend of each DP step of one fit of ``candidate``.

    Every step of a Pipeline is fitted on the same ``size`` rows (the fold's
    training set), so each DP step spends its own plan on them; nested
    Pipelines, ColumnTransformers and FeatureUnions are opened.

    Parameters
    ----------
    candidate : estimator or Pipeline
        Checked by :func:`check_candidate`.
    size : int
        Rows of the fit.
    n_classes : int or None
        Passed to ``privacy_plan``.
    worst_classes : bool
        Plan an estimator without declared ``classes`` for the worst class
        count (binary or multiclass).

    Returns
    -------
    list of skdp.accounting.PrivacySpent
        One per DP step, in the order of the steps.
    """
    spends = []
    for _, step in _private_steps(candidate):
        if isinstance(step, DPStandardScaler):
            spends.append(_scaler_spend(step, size))
        elif worst_classes and step.get_params().get("classes", ()) is None:
            spends.append(_worst_class_count_spend(step, size))
        else:
            spends.append(step.privacy_plan(size, n_classes)[1])
    return spends

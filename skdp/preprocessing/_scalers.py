"""Scalers: one free (declared public bounds), one private (Gaussian mechanism)."""

import math
from dataclasses import dataclass
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._base import PrivateFitMixin, resolve_delta
from ..accounting import GaussianEvent, account, calibrate_noise_multiplier
from ..utils._sklearn import Interval, fit_context, validate_data
from ..utils._validation import MAGNITUDE_LIMIT

__all__ = ["BoundedScaler", "DPStandardScaler", "ScalerPolicy"]

#: Largest variance of a value in [0, 1]: a noisy variance is clipped to it.
_MAX_UNIT_VARIANCE = 0.25


@dataclass(frozen=True)
class ScalerPolicy:
    """Tuning of :class:`DPStandardScaler` (no effect on its privacy)."""

    #: Floor on a column's scale, as a share of its declared width: a noisy
    #: variance can vanish, and dividing by it would blow the column up (a
    #: safeguard; no benchmark chose the value).
    scale_floor: float = 0.01


DEFAULT_SCALER_POLICY = ScalerPolicy()


def _check_bounds(bounds, n_features):
    """Per-feature ``(lower, upper)`` arrays from scalars or sequences."""
    if bounds is None:
        raise ValueError(
            "bounds must be declared: a (lower, upper) pair of scalars or of "
            "per-feature arrays, taken from public knowledge, never from the data."
        )
    try:
        lower, upper = bounds
    except (TypeError, ValueError):
        raise ValueError("bounds must be a (lower, upper) pair.") from None
    lower = np.broadcast_to(np.asarray(lower, dtype=float), (n_features,)).copy()
    upper = np.broadcast_to(np.asarray(upper, dtype=float), (n_features,)).copy()
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        raise ValueError("bounds must be finite.")
    if np.any(np.abs(lower) > MAGNITUDE_LIMIT) or np.any(
        np.abs(upper) > MAGNITUDE_LIMIT
    ):
        raise ValueError(
            f"bounds must lie within +-{MAGNITUDE_LIMIT:g}: wider ones overflow "
            "the squared sums (the private scaler's output would be NaN)."
        )
    if np.any(upper <= lower):
        raise ValueError("every upper bound must exceed its lower bound.")
    return lower, upper


class BoundedScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Map each feature to [0, 1] by declared public bounds, clipping.

    A per-record map: it reads nothing from the data (``fit`` only checks the
    number of features), so it costs no privacy. The output rows have norm at
    most ``sqrt(n_features)``, a public bound to pass as ``row_norm``.

    Parameters
    ----------
    bounds : tuple (lower, upper)
        Scalars, or arrays of shape (n_features,): public bounds per feature,
        finite and within +-1e30.

    Attributes
    ----------
    lower_, upper_ : ndarray of shape (`n_features_in_`,)
    row_norm_ : float
        Public bound on the norm of transformed rows, ``sqrt(n_features)``.
    n_features_in_ : int

    Notes
    -----
    **Privacy.** Free: the bounds are public parameters and the map acts on
    each record alone. Values outside the bounds are clipped, silently (saying
    which rows were clipped would itself be a release).
    """

    _parameter_constraints = {"bounds": [tuple, list, None]}

    def __init__(self, bounds=None):
        self.bounds = bounds

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Check ``X``'s shape against the bounds; nothing is read from values."""
        X = validate_data(self, X)
        self.lower_, self.upper_ = _check_bounds(self.bounds, X.shape[1])
        self.row_norm_ = math.sqrt(X.shape[1])
        return self

    def transform(self, X):
        """Scale to [0, 1] by the declared bounds, clipping outside values."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return np.clip((X - self.lower_) / (self.upper_ - self.lower_), 0.0, 1.0)


@dataclass(frozen=True)
class _ScalerData:
    """Validated rows and their declared per-feature bounds."""

    X: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


@dataclass(frozen=True)
class _MomentsPlan:
    """One Gaussian release of the normalised sums, calibrated to a target."""

    epsilon: float
    delta: float

    @staticmethod
    def events(noise_multiplier):
        """The events of a release with this noise multiplier."""
        return [(GaussianEvent(noise_multiplier), 1)]

    def calibrate(self):
        """``(noise_multiplier, spent)``: the least noise meeting the target."""
        return calibrate_noise_multiplier(
            self.events, self.epsilon, self.delta, accountant="pld"
        )

    def account(self, events):
        """The spend of ``events`` at the plan's delta (the tight accountant)."""
        return account(events, self.delta, accountant="pld")


@dataclass(frozen=True)
class _Moments:
    """A private release's mean and scale, in the columns' units."""

    mean: np.ndarray
    scale: np.ndarray
    noise_std: np.ndarray
    events: list


def _release_moments(data, noise_multiplier, rng, policy):
    """Release each column's sums of ``u`` and ``u^2`` with Gaussian noise.

    ``u = (x - lower) / (upper - lower)`` lies in [0, 1], so one row moves
    each entry of ``(sum u, sum u^2)`` by at most 1 when it is replaced.
    """
    X, lower, upper = data.X, data.lower, data.upper
    n, d = X.shape
    width = upper - lower
    u = (np.clip(X, lower, upper) - lower) / width
    noise_std = noise_multiplier * math.sqrt(2.0 * d)
    first = u.sum(axis=0) + rng.normal(0.0, noise_std, d)
    second = (u**2).sum(axis=0) + rng.normal(0.0, noise_std, d)
    mean = np.clip(first / n, 0.0, 1.0)
    var = np.clip(second / n - mean**2, 0.0, _MAX_UNIT_VARIANCE)
    return _Moments(
        mean=mean * width + lower,
        scale=np.maximum(np.sqrt(var), policy.scale_floor) * width,
        noise_std=noise_std * np.vstack([width, width**2]),
        events=_MomentsPlan.events(noise_multiplier),
    )


class DPStandardScaler(
    PrivateFitMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator
):
    """Standardise with a mean and scale estimated under differential privacy.

    Values are clipped to the declared bounds. Each column is measured on its
    own declared range: with ``u = (x - lower) / (upper - lower)`` in [0, 1],
    the sums of ``u`` and of ``u^2`` over the rows, for every column, form one
    vector released with Gaussian noise of the same standard deviation on
    every entry, so each column's noise is proportional to its own width (a
    0/1 column beside a 0-10000 one gets noise on the scale of 1, not of
    10000). The noise multiplier is calibrated so that the release spends at
    most ``(epsilon, delta)``. The number of rows is public.

    Parameters
    ----------
    bounds : tuple (lower, upper)
        Public bounds per feature (scalars or arrays), finite and within
        +-1e30.
    epsilon : float, default=0.5
    delta : float or None, default=None
        ``None``: ``min(1e-5, n ** -1.1)``.
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    mean_, scale_ : ndarray of shape (`n_features_in_`,)
    lower_, upper_ : ndarray of shape (`n_features_in_`,)
        The declared bounds.
    noise_multiplier_ : float
        Noise standard deviation over the release's L2 sensitivity
        ``sqrt(2 n_features)``.
    noise_std_ : ndarray of shape (2, `n_features_in_`)
        Standard deviation of the noise on each column's sum of
        ``x - lower`` (row 0) and of ``(x - lower)^2`` (row 1), in the
        column's units: ``noise_multiplier_ * sqrt(2 n_features)`` times the
        column's width (row 0) or squared width (row 1).
    privacy_spent_ : skdp.accounting.PrivacySpent
    n_features_in_ : int

    Notes
    -----
    **Privacy.** Unit: one row of ``X``; replace-one neighbours; public: the
    bounds and ``n``. Sensitivity: replacing a row moves each column's pair
    ``(sum u, sum u^2)`` by at most 1 in each entry (``u``, ``u^2`` in [0, 1]),
    so the whole vector of ``2 n_features`` sums moves by at most
    ``sqrt(2 n_features)`` in L2 norm. Budget split across columns: equal, in
    units of each column's width (one Gaussian mechanism on the normalised
    vector), which minimises the sum over columns of the variances of the
    normalised means. Accountant: that one Gaussian mechanism, converted
    exactly by Gaussian DP (Dong, Roth, Su 2022, Cor. 2.13). Compose this
    spend with the downstream estimator's (:func:`skdp.accounting.compose_spent`,
    or :class:`skdp.pipeline.PrivatePipeline`'s ``privacy_spent_``) for the
    Pipeline's total.
    """

    _parameter_constraints = {
        "bounds": [tuple, list, None],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither"), None],
        "random_state": ["random_state"],
    }

    def __init__(self, bounds=None, *, epsilon=0.5, delta=None, random_state=None):
        self.bounds = bounds
        self.epsilon = epsilon
        self.delta = delta
        self.random_state = random_state

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Estimate mean and scale privately."""
        X = validate_data(self, X)
        lower, upper = _check_bounds(self.bounds, X.shape[1])
        return self._fit_private(_ScalerData(X, lower, upper))

    def _fit_generator(self):
        """The scaler draws its noise from ``random_state``'s own RandomState."""
        return check_random_state(self.random_state)

    def _release_plan(self, n_samples):
        """The plan of a fit on ``n_samples`` rows (public: ``n`` and parameters)."""
        return _MomentsPlan(self.epsilon, resolve_delta(self.delta, n_samples))

    def _plan_fit(self, data, rng):
        return self._release_plan(data.X.shape[0])

    def _calibrate(self, plan):
        return plan.calibrate()[0]

    def _run(self, schedule, noise_multiplier, data, rng):
        return _release_moments(data, noise_multiplier, rng, DEFAULT_SCALER_POLICY)

    def _account(self, plan, result):
        return plan.account(result.events)

    def _set_fitted(self, data, plan, noise_multiplier, result, spent, rng):
        self.scale_ = result.scale
        self.mean_ = result.mean
        self.lower_, self.upper_ = data.lower, data.upper
        self.noise_std_ = result.noise_std
        self.noise_multiplier_ = noise_multiplier
        self.privacy_spent_ = spent

    def transform(self, X):
        """Clip to the bounds, then standardise."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return (np.clip(X, self.lower_, self.upper_) - self.mean_) / self.scale_

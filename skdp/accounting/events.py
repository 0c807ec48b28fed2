"""Privacy events: immutable records of what a mechanism did.

An event says what ran (noise, sampling, step sizes), never what it costs; the
accountant turns events into privacy. Solvers return events next to their model.

**Units.** A mechanism adds noise to a sum of per-record terms, each of norm at
most a public *per-record bound* (a clip norm, a row-norm bound). Events state
their noise in units of that bound: ``noise_multiplier`` is the noise standard
deviation divided by the per-record bound, the same number under either
neighbouring relation. The accountant applies the relation's sensitivity
rule, written once in :class:`~skdp.accounting.Neighbouring` (the sum moves by
2 bounds under replace-one, 1 under add/remove). :class:`GaussianSumEvent`,
:class:`PoissonGaussianEvent` and :class:`RandomAllocationGaussianEvent`
follow this convention. Two events state their cost otherwise, as they always
have: :class:`GaussianEvent` measures its noise against the query's
sensitivity under the accountant's relation (so that it can also stand for a
zCDP budget ``1 / (2 z^2)``), and :class:`ExponentialMechanismEvent` gives its
pure-DP epsilon under that relation. :class:`NoisyIterationEvent` carries its
own per-step replace-one sensitivities.
"""

import hashlib
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "ExponentialMechanismEvent",
    "GaussianEvent",
    "GaussianSumEvent",
    "NoisyIterationEvent",
    "PoissonGaussianEvent",
    "RandomAllocationGaussianEvent",
]


def _check_positive(name, value, *, allow_zero=False):
    value = float(value)
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value}.")
    return value


def _check_count(count):
    if int(count) != count or count < 0:
        raise ValueError(f"count must be a non-negative integer, got {count}.")
    return int(count)


def _frozen_array(values, name, dtype=float):
    array = np.array(values, dtype=dtype)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional.")
    if dtype is float and not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite.")
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class _GaussianRelease:
    """The fields and checks of the unsampled Gaussian events."""

    noise_multiplier: float
    count: int = 1

    def __post_init__(self):
        _check_positive("noise_multiplier", self.noise_multiplier)
        _check_count(self.count)


@dataclass(frozen=True)
class GaussianEvent(_GaussianRelease):
    """Gaussian noise added to a query, ``count`` times.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the query's L2 sensitivity under the
        accountant's neighbouring relation (for a sum of per-record vectors of
        norm at most C: sensitivity C under add/remove, 2C under replace-one).
    count : int, default=1
    """


@dataclass(frozen=True)
class GaussianSumEvent(_GaussianRelease):
    """Gaussian noise added to a sum over every record, ``count`` times.

    Each record contributes a term of L2 norm at most the per-record bound
    ``B``; the sum of all terms (no sampling) gets Gaussian noise of standard
    deviation ``noise_multiplier * B``. The accountant applies the
    neighbouring relation: the sum moves by at most ``2 B`` under replace-one
    and ``B`` under add/remove (:attr:`Neighbouring.sum_factor
    <skdp.accounting.Neighbouring.sum_factor>`). It is accounted exactly as a
    :class:`PoissonGaussianEvent` of sampling rate 1 with the same noise.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation divided by the per-record bound (the units of
        :class:`PoissonGaussianEvent`, whatever the neighbouring relation).
    count : int, default=1
        Number of releases.

    Examples
    --------
    >>> from skdp.accounting import GaussianEvent, GaussianSumEvent, account
    >>> release = GaussianSumEvent(8.0)
    >>> round(account(release, 1e-5, neighbouring="add-remove").epsilon, 3)
    0.478
    >>> replace_one = account(release, 1e-5)  # the sum moves by 2 bounds
    >>> replace_one.epsilon == account(GaussianEvent(4.0), 1e-5).epsilon
    True
    """


@dataclass(frozen=True)
class PoissonGaussianEvent:
    """Steps of Poisson-subsampled Gaussian noise (DP-SGD with Poisson batches).

    Every record joins each step's batch independently with probability
    ``sampling_rate``; the sum of the batch's clipped contributions gets Gaussian
    noise. Every step's output is treated as released.

    Parameters
    ----------
    sampling_rate : float in [0, 1]
        At 1 every record is in every step: a :class:`GaussianSumEvent`.
    noise_multiplier : float
        Noise std on the sum divided by the clip norm (the usual DP-SGD
        convention, whatever the neighbouring relation).
    count : int, default=1
        Number of steps.
    """

    sampling_rate: float
    noise_multiplier: float
    count: int = 1

    def __post_init__(self):
        if not 0.0 <= float(self.sampling_rate) <= 1.0:
            raise ValueError(
                f"sampling_rate must be in [0, 1], got {self.sampling_rate}."
            )
        _check_positive("noise_multiplier", self.noise_multiplier)
        _check_count(self.count)


@dataclass(frozen=True)
class ExponentialMechanismEvent:
    """Draws of the exponential mechanism (or any pure-DP step).

    Sampling ``i`` with probability proportional to ``exp(u(i))``, where one
    record moves every score by at most ``Du``, is ``2 Du``-DP and
    ``2 Du``-bounded range (McSherry and Talwar 2007; Durfee and Rogers 2019).

    Parameters
    ----------
    epsilon : float
        Pure-DP parameter of one draw under the accountant's relation
        (``2 Du`` for the exponential mechanism).
    count : int, default=1
        Number of draws.
    bounded_range : bool, default=False
        Whether each draw is also ``epsilon``-bounded range, which allows the
        tighter ``epsilon^2 / 8``-zCDP bound of Cesar and Rogers (2021).
    """

    epsilon: float
    count: int = 1
    bounded_range: bool = False

    def __post_init__(self):
        _check_positive("epsilon", self.epsilon, allow_zero=True)
        _check_count(self.count)


@dataclass(frozen=True, eq=False)
class NoisyIterationEvent:
    """Noisy iterations over batches visited in a cyclic order; last iterate out.

    Step ``t`` is ``x_t = P(psi_t(x_{t-1}) + N(0, (z * noise_scale[t])^2 I))``
    with batch ``batch[t]`` and ``P`` a fixed 1-Lipschitz projection or prox.
    The batches partition the data (public sizes), so under replace-one the
    differing record sits in exactly one batch and changes only the steps that
    use it, each by at most ``sensitivity[t]``.

    Two bounds apply: composition over the steps that see the record (any loss;
    every iterate treated as released) and, when ``lipschitz`` is given, the
    last-iterate bound by shifted Rényi divergence. Per position of the record
    the smaller one is used; then the worst position is taken (public order) or
    the positions are averaged as a mixture (secret random order).

    Parameters
    ----------
    noise_multiplier : float
        Global scale ``z`` of the noise.
    noise_scale : array-like of shape (T,)
        Noise std of step ``t`` per unit of ``noise_multiplier``.
    sensitivity : array-like of shape (T,)
        Bound on ``sup_x ||psi_t(x) - psi'_t(x)||`` when the record's batch is
        used at step ``t`` (replace-one).
    batch : array-like of int, shape (T,)
        Index of the batch used at step ``t``.
    lipschitz : array-like of shape (T,) or None, default=None
        Lipschitz constant of each step map ``psi_t``, only if it is enforced
        (rows within a public norm, clipping inactive). ``None``: composition.
    batch_weights : array-like of shape (n_batches,) or None, default=None
        ``None`` when the batch order is public (worst case over positions).
        Otherwise the probability that the differing record falls in each
        batch under a secret uniformly random permutation (batch size / n).
    """

    noise_multiplier: float
    noise_scale: np.ndarray
    sensitivity: np.ndarray
    batch: np.ndarray
    lipschitz: np.ndarray | None = None
    batch_weights: np.ndarray | None = None
    _key: bytes = field(init=False, repr=False)

    def __post_init__(self):
        _check_positive("noise_multiplier", self.noise_multiplier)
        set_ = object.__setattr__
        set_(self, "noise_scale", _frozen_array(self.noise_scale, "noise_scale"))
        set_(self, "sensitivity", _frozen_array(self.sensitivity, "sensitivity"))
        set_(self, "batch", _frozen_array(self.batch, "batch", dtype=np.int64))
        n_steps = self.noise_scale.size
        if self.sensitivity.size != n_steps or self.batch.size != n_steps:
            raise ValueError(
                "noise_scale, sensitivity and batch need one entry a step."
            )
        if n_steps == 0:
            raise ValueError("A NoisyIterationEvent needs at least one step.")
        if np.any(self.noise_scale <= 0) or np.any(self.sensitivity < 0):
            raise ValueError("noise_scale must be > 0 and sensitivity >= 0.")
        if np.any(self.batch < 0):
            raise ValueError("batch indices must be >= 0.")
        if self.lipschitz is not None:
            lip = np.broadcast_to(np.asarray(self.lipschitz, dtype=float), (n_steps,))
            lip = _frozen_array(lip, "lipschitz")
            if np.any(lip < 0):
                raise ValueError("lipschitz constants must be >= 0.")
            set_(self, "lipschitz", lip)
        if self.batch_weights is not None:
            weights = _frozen_array(self.batch_weights, "batch_weights")
            if weights.size <= self.batch.max() or np.any(weights < 0):
                raise ValueError("batch_weights needs a weight >= 0 for every batch.")
            if not np.isclose(weights.sum(), 1.0):
                raise ValueError("batch_weights must sum to 1.")
            set_(self, "batch_weights", weights)
        parts = [self.noise_scale, self.sensitivity, self.batch]
        if self.lipschitz is not None:
            parts.append(self.lipschitz)
        digest = hashlib.blake2b(digest_size=32)
        for part in parts:
            digest.update(part.tobytes())
            digest.update(b"|")
        set_(self, "_key", digest.digest())

    @property
    def n_steps(self):
        """Number of steps ``T``."""
        return self.noise_scale.size

    @classmethod
    def cyclic_sgd(
        cls,
        batch_sizes,
        n_epochs,
        noise_multiplier,
        *,
        learning_rate=1.0,
        lipschitz=None,
        shuffle=False,
    ):
        """Event of cyclic DP-SGD with clipped, averaged per-example gradients.

        Each pass visits the batches (sizes ``batch_sizes``, a partition of the
        data) in order. Step ``t`` on batch ``j`` adds Gaussian noise of std
        ``z C`` to the sum of clipped gradients (clip norm ``C``) and divides by
        ``b_j``; the displacement ``eta_t * avg`` then carries noise of std
        ``eta_t z C / b_j`` and moves by at most ``2 eta_t C / b_j`` when one
        record is replaced (docs/accounting.md, "The bounds"). Units of ``C`` cancel, so
        ``C = 1`` here.

        Parameters
        ----------
        batch_sizes : array-like of int
        n_epochs : int
        noise_multiplier : float
            Noise std on the sum of clipped gradients divided by the clip norm.
        learning_rate : float or array-like of shape (n_epochs * n_batches,)
        lipschitz : float, array-like or None
            Lipschitz constant of each step map, if enforced.
        shuffle : bool, default=False
            Whether the batch order is a secret uniformly random permutation.

        Returns
        -------
        event : NoisyIterationEvent
        """
        sizes = np.asarray(batch_sizes, dtype=float)
        if sizes.ndim != 1 or sizes.size == 0 or np.any(sizes < 1):
            raise ValueError("batch_sizes must be a non-empty list of sizes >= 1.")
        if int(n_epochs) != n_epochs or n_epochs < 1:
            raise ValueError(f"n_epochs must be a positive integer, got {n_epochs}.")
        n_steps = sizes.size * int(n_epochs)
        batch = np.tile(np.arange(sizes.size), int(n_epochs))
        eta = np.broadcast_to(np.asarray(learning_rate, dtype=float), (n_steps,))
        if np.any(eta <= 0):
            raise ValueError("learning_rate must be > 0.")
        b = sizes[batch]
        return cls(
            noise_multiplier=noise_multiplier,
            noise_scale=eta / b,
            sensitivity=2.0 * eta / b,
            batch=batch,
            lipschitz=lipschitz,
            batch_weights=sizes / sizes.sum() if shuffle else None,
        )


@dataclass(frozen=True)
class RandomAllocationGaussianEvent:
    """Epochs of random allocation (balls-and-bins) with Gaussian noise.

    In every epoch each record is placed into exactly one of ``steps_per_epoch``
    steps, uniformly at random and independently of the other records (a fresh
    allocation each epoch, drawn from the secret random state and never
    released); each step adds Gaussian noise of std ``noise_multiplier`` times
    the clip norm to the sum of its batch's clipped contributions. Every step's
    output is treated as released.

    Parameters
    ----------
    steps_per_epoch : int >= 1
        Number of steps ``t`` an epoch (the number of bins).
    noise_multiplier : float
        Noise std on each step's sum divided by the clip norm (the usual DP-SGD
        convention, whatever the neighbouring relation).
    epochs : int >= 0, default=1
        Number of epochs, each a fresh allocation.
    """

    steps_per_epoch: int
    noise_multiplier: float
    epochs: int = 1

    def __post_init__(self):
        steps = self.steps_per_epoch
        if isinstance(steps, bool) or int(steps) != steps or steps < 1:
            raise ValueError(
                f"steps_per_epoch must be a positive integer, got {steps}."
            )
        object.__setattr__(self, "steps_per_epoch", int(steps))
        _check_positive("noise_multiplier", self.noise_multiplier)
        epochs = self.epochs
        if isinstance(epochs, bool) or int(epochs) != epochs or epochs < 0:
            raise ValueError(f"epochs must be a non-negative integer, got {epochs}.")
        object.__setattr__(self, "epochs", int(epochs))

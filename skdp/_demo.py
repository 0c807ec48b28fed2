"""``skdp demo``: what private training on UCI Adult costs, end to end."""

from .accounting import (
    NoisyIterationEvent,
    PoissonGaussianEvent,
    account,
    calibrate_noise_multiplier,
    gradient_step_lipschitz,
    logistic_constants,
)
from .datasets import load_adult

__all__ = ["run_demo"]


def run_demo(*, epsilon=1.0, random_state=0):
    """Print the noise each sampler needs for ``epsilon`` on the Adult training set.

    Parameters
    ----------
    epsilon : float, default=1.0
    random_state : int, default=0
        Unused until the estimators land; kept for a stable command line.

    Returns
    -------
    int
        Exit status (0).
    """
    n = len(load_adult(split="train").target)
    delta = n**-1.1
    batch, epochs = 1024, 20
    n_batches = -(-n // batch)
    sizes = [batch] * (n_batches - 1) + [n - batch * (n_batches - 1)]
    _, smoothness = logistic_constants(1.0)
    l2 = 1e-3
    eta = 1.0 / (smoothness + l2)
    lip = gradient_step_lipschitz(eta, smoothness, l2)
    print(f"UCI Adult training split: n = {n}, delta = n^-1.1 = {delta:.3g}")
    print(f"DP-SGD, batches of {batch}, {epochs} epochs, target epsilon {epsilon:g}")
    families = {
        "cyclic (public order)": lambda z: NoisyIterationEvent.cyclic_sgd(
            sizes, epochs, z, learning_rate=eta, lipschitz=lip
        ),
        "shuffled (secret order)": lambda z: NoisyIterationEvent.cyclic_sgd(
            sizes, epochs, z, learning_rate=eta, lipschitz=lip, shuffle=True
        ),
        "poisson": lambda z: PoissonGaussianEvent(
            batch / n, z, count=n_batches * epochs
        ),
    }
    print(f"{'sampler':<26}{'noise mult.':>12}{'epsilon':>10}  bound")
    for name, family in families.items():
        z, spent = calibrate_noise_multiplier(family, epsilon, delta)
        print(f"{name:<26}{z:>12.3f}{spent.epsilon:>10.4f}  {spent.bound}")
    spent = account(families["poisson"](1.0), delta)
    print(f"for reference, poisson at noise 1.0: {spent}")
    return 0

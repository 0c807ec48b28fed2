"""Composing fits known only by an (epsilon, delta) pair, under replace-one."""

import math

from ..accounting import Neighbouring

__all__ = ["compose_pairs", "replace_one_pair"]


def replace_one_pair(spent):
    """``(epsilon, delta)`` of a fit for replace-one neighbours.

    A replace-one neighbour of a training set is two add/remove steps away
    (remove the record, add its replacement), so an ``(e, d)``-DP fit under
    add/remove is ``(2 e, (1 + exp(e)) d)``-DP under replace-one: chaining
    the two steps, ``P[M(D) in S] <= e^e (e^e P[M(D') in S] + d) + d``
    (group privacy for a group of two; Dwork and Roth 2014, Theorem 2.2,
    with the delta term carried through). A replace-one spend is returned
    as it is reported.

    Parameters
    ----------
    spent : skdp.accounting.PrivacySpent

    Returns
    -------
    epsilon, delta : float
    """
    if spent.neighbouring == Neighbouring.ADD_REMOVE:
        return 2.0 * spent.epsilon, (1.0 + math.exp(spent.epsilon)) * spent.delta
    return float(spent.epsilon), float(spent.delta)


def compose_pairs(pairs, delta=None):
    """Adaptive composition of ``(epsilon_i, delta_i)``-DP mechanisms.

    The smaller of two bounds that hold for mechanisms chosen adaptively
    within fixed parameters:

    - basic composition, ``(sum epsilon_i, sum delta_i)`` (Dwork and Roth
      2014, Theorem 3.16);
    - advanced composition, applied with every mechanism counted as
      ``(e, d) = (max epsilon_i, max delta_i)``-DP (which each is): for
      ``k`` of them and any ``d' > 0``, ``(sqrt(2 k ln(1/d')) e +
      k e (e^e - 1), k d + d')`` (Dwork, Rothblum and Vadhan 2010; Dwork and
      Roth 2014, Theorem 3.20), with ``d' = delta - k d``; it applies only
      when ``delta`` leaves room for ``d' > 0``.

    Parameters
    ----------
    pairs : list of (float, float)
    delta : float or None
        Delta of the total; ``None``: ``sum delta_i`` (basic composition only).

    Returns
    -------
    epsilon : float
    delta : float
    rule : str
        ``"basic composition"`` or ``"advanced composition"``.

    Raises
    ------
    ValueError
        If ``delta`` is below ``sum delta_i``, the least any bound here needs.
    """
    epsilons = [float(e) for e, _ in pairs]
    deltas = [float(d) for _, d in pairs]
    basic_delta = math.fsum(deltas)
    total_delta = basic_delta if delta is None else float(delta)
    if total_delta < basic_delta:
        raise ValueError(
            f"delta={total_delta:.3g} is below {basic_delta:.3g}, the sum of the "
            "fits' deltas, which the total cannot be smaller than here; pass a "
            "larger delta or leave it as None."
        )
    epsilon, rule = math.fsum(epsilons), "basic composition"
    k, e, d = len(pairs), max(epsilons), max(deltas)
    slack = total_delta - k * d
    if slack > 0:
        advanced = math.sqrt(2 * k * math.log(1 / slack)) * e + k * e * math.expm1(e)
        if advanced < epsilon:
            epsilon, rule = advanced, "advanced composition"
    return epsilon, total_delta, rule

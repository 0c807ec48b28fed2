"""Empirical privacy audits.

- :func:`audit`: a (1 - alpha)-confidence lower bound on the epsilon of a
  private estimator, from many fits with and without a canary record.
- :class:`AuditResult`: its outcome.
"""

from ._audit import AuditResult, audit, clopper_pearson, epsilon_from_rates

__all__ = ["AuditResult", "audit", "clopper_pearson", "epsilon_from_rates"]

"""Empirical privacy audits.

- :func:`audit`: a (1 - alpha)-confidence lower bound on the epsilon of a
  private estimator, from many fits with and without a canary record.
- :func:`audit_one_run`: the same kind of bound from a single fit with many
  canaries (Steinke, Nasr and Jagielski 2023); weaker, but one fit.
- :class:`AuditResult`, :class:`OneRunAuditResult`: their outcomes, each
  with a :func:`verdict` ("consistent with the claim" / "refutes the claim").
"""

from ._audit import AuditResult, audit, clopper_pearson, epsilon_from_rates, verdict
from ._one_run import (
    OneRunAuditResult,
    audit_one_run,
    one_run_epsilon_lower,
    one_run_p_value,
)

__all__ = [
    "AuditResult",
    "OneRunAuditResult",
    "audit",
    "audit_one_run",
    "clopper_pearson",
    "epsilon_from_rates",
    "one_run_epsilon_lower",
    "one_run_p_value",
    "verdict",
]

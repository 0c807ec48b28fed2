"""Tuning of the audits: how strong the attack is, never whether a bound holds.

Every bound an audit reports is valid whatever these values are: the test is
chosen on one half of the fits and evaluated on the other, and the one-run
guesses are Bonferroni-corrected over the numbers of guesses tried. The
values only decide how close the bound comes to the true epsilon.
"""

from dataclasses import dataclass

__all__ = ["AuditPolicy", "DEFAULT_AUDIT_POLICY"]


@dataclass(frozen=True)
class AuditPolicy:
    """How an audit picks its test, sizes its synthetic samples, and guesses.

    The audits these defaults give: docs/benchmarks.md, "Audits".
    """

    #: A threshold's true positive rate on the selection half is shrunk by this
    #: many binomial standard deviations: a rate seen by luck is not trusted.
    tpr_shrink_sd: float = 1.0
    #: Its false positive rate is raised by this many standard deviations ...
    fpr_raise_sd: float = 1.0
    #: ... plus this many pseudo-counts, so an empty tail is never rated free.
    fpr_pseudo_count: float = 1.0
    #: Synthetic rows sampled to score a synthetic-data canary: at least this
    #: many (a cell's sampled share then has standard error at most 0.005) ...
    synthetic_samples: int = 10_000
    #: ... and at least this many per input row (a cell holding one input row
    #: in n is then expected this many times in the sample).
    synthetic_samples_per_row: int = 20
    #: One-run audits try these shares of the canaries as numbers of guesses
    #: (the most confident ones), each at level alpha / (number of shares).
    guess_shares: tuple = (0.05, 0.1, 0.25, 0.5, 1.0)


DEFAULT_AUDIT_POLICY = AuditPolicy()

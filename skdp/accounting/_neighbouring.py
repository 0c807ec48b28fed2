"""The neighbouring relation of a guarantee, and the sensitivity rule it sets."""

import enum
import math

__all__ = ["NEIGHBOURING_RELATIONS", "Neighbouring"]


class Neighbouring(enum.StrEnum):
    """Which data sets are neighbours.

    ``REPLACE_ONE``: one record replaced by another (``n`` is public).
    ``ADD_REMOVE``: one record added or removed (``n`` is private).

    A member is a ``str`` equal to its value, so ``"replace-one"`` and
    ``Neighbouring.REPLACE_ONE`` are interchangeable wherever a relation is
    accepted.
    """

    REPLACE_ONE = "replace-one"
    ADD_REMOVE = "add-remove"

    @classmethod
    def parse(cls, value):
        """The member named by ``value``; a clear error for anything else."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in cls)
            raise ValueError(
                f"neighbouring must be one of {choices}; got {value!r}."
            ) from None

    @property
    def hops(self):
        """Add/remove steps between two neighbours: 2 under replace-one, else 1.

        Replacing a record is removing it, then adding another; where no
        replace-one pair applies (random allocation, Poisson steps past the
        pair's shape condition) the tight accountants chain the two hops
        through the data set without it.
        """
        return 2 if self is Neighbouring.REPLACE_ONE else 1

    @property
    def sum_factor(self):
        """Sensitivity of a sum of per-record terms, in units of their bound.

        A record's term ``t`` has norm at most ``B``. Replacing it by ``t'``
        moves the sum by ``||t - t'|| <= 2 B``; adding or removing it moves the
        sum by ``||t|| <= B``: one ``B`` a hop, so the factor is 2 under
        replace-one, 1 under add/remove.
        """
        return float(self.hops)

    @property
    def histogram_factor(self):
        """Sensitivity of a histogram (each record counted in one cell).

        Replacing a record moves one count down and another up, by 1 each: an
        L2 norm of ``sqrt(2)``; adding or removing it moves one count by 1.
        Less than :attr:`sum_factor` under replace-one, where a one-hot
        vector's ``2 B`` bound is not reached.
        """
        return math.sqrt(2.0) if self is Neighbouring.REPLACE_ONE else 1.0

    def sum_sensitivity(self, bound):
        """L2 sensitivity of a sum of per-record terms of norm at most ``bound``."""
        return self.sum_factor * float(bound)


#: The neighbouring relations accepted wherever a relation is asked for.
NEIGHBOURING_RELATIONS = tuple(member.value for member in Neighbouring)

"""Warnings and errors raised by skdp."""

__all__ = ["OrderGridWarning", "PrivacyLeakWarning"]


class PrivacyLeakWarning(UserWarning):
    """A value that should be public was read from the private data.

    skdp never reads a public input (class labels, group set, bounds, domains)
    from the data silently. When it has to, for instance because no bound was
    declared, it says so with this warning: the reported ``privacy_spent_`` then
    does not cover that read.
    """


class OrderGridWarning(UserWarning):
    """The best Rényi order sits at the end of the order grid.

    The epsilon is still a valid upper bound, but a wider grid of orders could
    give a smaller one. Pass a wider ``orders`` grid to the accountant.
    """

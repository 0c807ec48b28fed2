"""Warnings and errors raised by skdp."""

__all__ = [
    "ClippedValuesWarning",
    "IndependentColumnsWarning",
    "OrderGridWarning",
    "PrivacyLeakWarning",
    "UndeclaredBoundWarning",
    "SpreadSpikeWarning",
    "UnscaledFeaturesWarning",
    "WideBoundsWarning",
    "WeakDeltaWarning",
]


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


class UndeclaredBoundWarning(UserWarning):
    """A public bound was left undeclared, and a default one changes the data.

    Some plans need a public bound that the user did not give, for instance
    the row-norm bound of cyclic and shuffled DP-SGD. skdp then applies a
    default bound (rows of larger norm are scaled down to it) and says so
    with this warning, whatever the data: checking whether the default
    actually changed a row would read the private data. The privacy
    guarantee holds; the accuracy may not. Declare the bound to silence it.
    """


class WeakDeltaWarning(UserWarning):
    """A declared ``delta`` is not small against one over the number of rows.

    ``(epsilon, delta)``-DP with ``delta >= 1 / n`` is met by a mechanism
    that publishes about one record of the table outright, so such a
    guarantee protects little. The default delta, ``min(1e-5, n^-1.1)``, is
    well below ``1 / n``. Said to whoever runs the fit; never released.
    """


class ClippedValuesWarning(UserWarning):
    """Many values of a numeric column lie beyond its declared bounds.

    They are clipped into the bounds, as documented. A public bound that
    cuts off a few outliers is a sound choice; one that cuts off a large
    share of a column was usually declared in other units (a fraction for a
    percentage, thousands for units), and the column then carries little
    information. Said to whoever runs the transform; never released.
    """


class WideBoundsWarning(UserWarning):
    """A numeric column's values fill a small part of its declared bounds.

    Nothing is clipped, but the column is encoded (and its noise set) for
    the whole declared range: bounds many times wider than the data, often
    declared in other units (dollars for hundreds of dollars), make the
    column nearly constant for the model and spread a synthetic column over
    values the data never take. Said to whoever runs the transform or the
    fit; never released.
    """


class IndependentColumnsWarning(UserWarning):
    """A synthetic-data fit measured no table of two or more columns.

    Its budget went to the one-column marginals only, so the synthetic
    columns are sampled independently of each other: every relation
    between columns is lost. Decided from ``selected_``, which the fit
    releases anyway.
    """


class SpreadSpikeWarning(UserWarning):
    """A value holding a large share of a numeric column shares its public bin.

    Synthetic values are drawn uniformly within a bin, so such a spike (the
    zeros of a count, a round amount) comes back spread over the bin's
    other values, and the column's mean moves with it. Declaring a bin of
    its own for the value keeps it. Said to whoever runs the fit, from the
    data; never released.
    """


class UnscaledFeaturesWarning(UserWarning):
    """Features far outside [-1, 1] reached DP-SGD with no declared row bound.

    The defaults (clip norm, step, probability floor) assume columns on a
    public scale, as :class:`~skdp.preprocessing.SchemaEncoder` makes them
    from a declaration. Raw amounts (dollars, ages, counts) still get the
    privacy guarantee, but the model and its probabilities may be poor.
    Said to whoever runs the fit, from a look at its first rows; never
    released.
    """

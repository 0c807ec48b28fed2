"""
A synthetic Adult and the error of each of its marginals
========================================================

:class:`~skdp.synthetic.DPSyntheticData` learns a private model of a table
and samples a synthetic copy with the same columns and dtypes. Every column's
domain is public and declared: a list of categories or a numeric range.
Sampling is post-processing, free however often it is called.

Quality is measured as in the literature, by the total-variation distance
between the real and the synthetic table's low-order marginals
(:func:`~skdp.synthetic.marginal_error`). Here it is drawn for *every* pair
of columns, so you can see which relations the synthetic data keeps.
"""

import itertools

import matplotlib.pyplot as plt
import numpy as np

from skdp import DPSyntheticData
from skdp.datasets import ADULT_NUMERIC_BINS, ADULT_SCHEMA, load_adult
from skdp.schema import Numeric
from skdp.synthetic import marginal_error

real = load_adult(split="train", as_frame=True).data
# The public domain: categories as lists, numeric ranges as (low, high) tuples.
domain = {c: (v if isinstance(v, list) else tuple(v)) for c, v in ADULT_SCHEMA.items()}
# Zero capital gain or loss and 40 hours a week are public conventions that
# hold many rows: their own bins keep them (values are drawn uniformly within
# a bin; without these, a SpreadSpikeWarning names the three columns).
for c in ("capital_gain", "capital_loss", "hours_per_week"):
    low, high = domain[c]
    domain[c] = Numeric(low, high, bins=[*ADULT_NUMERIC_BINS[c][:-1], high])

model = DPSyntheticData(epsilon=1.0, domain=domain, random_state=0).fit(real)
synthetic = model.sample()
print(model.privacy_spent_)
print(synthetic.head())

# %%
# Error of every 2-way marginal
# -----------------------------
# ``marginal_error`` on a pair of columns is the total-variation distance of
# that pair's joint distribution (numeric columns discretised on the public
# domain). Which column sets the model measured (``model.selected_``) is
# released with it, so it is free to show.
columns = list(real.columns)
k = len(columns)
errors = np.full((k, k), np.nan)
for i, j in itertools.combinations(range(k), 2):
    pair = [columns[i], columns[j]]
    sub_domain = {c: domain[c] for c in pair}
    errors[i, j] = errors[j, i] = marginal_error(
        real[pair], synthetic[pair], sub_domain, ways=2
    )
print(
    f"mean 2-way error {np.nanmean(errors):.3f} "
    f"(= marginal_error over all pairs: "
    f"{marginal_error(real, synthetic, domain, ways=2):.3f})"
)

fig, ax = plt.subplots(figsize=(7, 6))
image = ax.imshow(errors, cmap="viridis")
ax.set_xticks(range(k), columns, rotation=90)
ax.set_yticks(range(k), columns)
index = {c: n for n, c in enumerate(columns)}
measured = {
    pair for cols in model.selected_ for pair in itertools.permutations(cols, 2)
}
for first, second in measured:
    for r, c in ((index[first], index[second]),):
        ax.add_patch(
            plt.Rectangle(
                (c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="white", lw=1.5
            )
        )
fig.colorbar(image, ax=ax, label="total-variation distance")
ax.set_title("2-way marginal error, epsilon = 1\n(framed: pairs the model measured)")
fig.tight_layout()

# %%
# Error against epsilon, and the two methods
# ------------------------------------------
# ``method="aim"`` (the default) spends its budget over adaptive rounds, each
# measuring the marginal that the current model answers worst;
# ``method="tree"`` measures one spanning tree of column pairs, much faster.
# The dashed lines draw every column independently from its *exact* 1-way
# distribution (not private): what keeping the relations between columns is
# worth.
epsilons = [0.1, 0.3, 1.0]
curves = {}
for method in ("aim", "tree"):
    curves[method] = {"2-way": [], "3-way": []}
    for epsilon in epsilons:
        if method == "aim" and epsilon == 1.0:
            sample = synthetic  # the model fitted above
        else:
            fitted = DPSyntheticData(
                epsilon=epsilon, domain=domain, method=method, random_state=0
            ).fit(real)
            sample = fitted.sample()
        curves[method]["2-way"].append(marginal_error(real, sample, domain, ways=2))
        curves[method]["3-way"].append(
            marginal_error(real, sample, domain, ways=3, n_marginals=16, random_state=0)
        )
rng = np.random.default_rng(0)
independent = real.apply(lambda col: col.sample(frac=1.0, random_state=rng).values)
baseline = {
    "2-way": marginal_error(real, independent, domain, ways=2),
    "3-way": marginal_error(
        real, independent, domain, ways=3, n_marginals=16, random_state=0
    ),
}
for method, values in curves.items():
    for ways, errors_ in values.items():
        print(f"{method:4s} {ways}: " + "  ".join(f"{e:.3f}" for e in errors_))

fig, ax = plt.subplots(figsize=(6, 4))
for n, ways in enumerate(("2-way", "3-way")):
    for method, marker in (("aim", "o"), ("tree", "s")):
        ax.plot(
            epsilons,
            curves[method][ways],
            marker=marker,
            color=f"C{n}",
            ls="-" if method == "aim" else ":",
            label=f"{ways}, {method}",
        )
    ax.axhline(
        baseline[ways],
        color=f"C{n}",
        ls="--",
        lw=1,
        label=f"{ways}, independent columns",
    )
ax.set_xscale("log")
ax.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
ax.minorticks_off()
ax.set_xlabel("epsilon (delta = 1e-5)")
ax.set_ylabel("mean total-variation distance")
ax.set_title("Synthetic Adult (32,561 rows; 3-way: 16 random marginals)")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

"""
Grid search over epsilon: a privacy-utility curve
==================================================

``DPLogisticRegression`` is a scikit-learn classifier, so
:class:`~sklearn.model_selection.GridSearchCV` searches over ``epsilon`` like
any other parameter. Two things differ from a non-private search:

* every fit of the search reads the data, so the search as a whole spends
  more than any one model: :class:`~skdp.model_selection.PrivateGridSearchCV`
  adds it up from the public parameters alone, before anything is fitted
  (:func:`skdp.model_selection.search_privacy` gives the same number), and
  reports it as ``privacy_spent_``, beside the refit's own spend;
* choosing the winner by its validation score is a further release
  (Papernot and Steinke 2022), not covered by that total. Here the curve is
  only *drawn*: nothing is chosen on private data.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold

from skdp import DPLogisticRegression
from skdp.datasets import adult_design_matrix, load_adult
from skdp.model_selection import PrivateGridSearchCV, search_privacy

# %%
# Data: a slice of UCI Adult, encoded with its public schema
# ------------------------------------------------------------
# :func:`~skdp.datasets.adult_design_matrix` one-hot encodes the 8 categorical
# columns over their declared categories and maps the 6 numeric columns to
# [0, 1] by declared bounds: a per-record map that costs no privacy. Every
# row then has norm at most ``sqrt(8 + 6)``, a public ``row_norm``.
# A few thousand rows keep this example fast.
train = load_adult(split="train")
test = load_adult(split="test")
rng = np.random.default_rng(0)
rows = rng.choice(len(train.target), size=6000, replace=False)
X = adult_design_matrix(train.data[rows])
y = train.target[rows]
X_test, y_test = adult_design_matrix(test.data), test.target
row_norm = np.sqrt(8 + 6)

# %%
# The search
# ----------
epsilons = [0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 4.0]
estimator = DPLogisticRegression(
    row_norm=row_norm, classes=[0, 1], epochs=10, random_state=0
)
param_grid = {"epsilon": epsilons}
# Folds that do not depend on the data: a plain GridSearchCV with ``cv=3``
# would split a classifier's rows by StratifiedKFold, whose folds follow the
# private labels (one changed label moves other rows between folds), which
# no total covers. PrivateGridSearchCV reads ``cv=3`` as ``KFold(3)``; the
# shuffled folds are given here explicitly.
folds = KFold(3, shuffle=True, random_state=0)
search = PrivateGridSearchCV(estimator, param_grid, cv=folds).fit(X, y)

# %%
# What the whole search spent, known before fitting: a record sits in the
# training sets of 2 of the 3 folds, so it is charged every candidate on
# those 2 folds (14 fits) plus the refit, composed on their Rényi curves.
# ``search_privacy`` computes the same total without fitting anything.
total = search.privacy_spent_
assert total == search_privacy(estimator, param_grid, n_samples=len(y), cv=folds)
print(
    f"the refit alone (epsilon={search.best_params_['epsilon']}): "
    f"{search.best_estimator_.privacy_spent_.epsilon:.3f}"
)
print(
    f"the whole search (14 fits holding a record + the refit): "
    f"epsilon = {total.epsilon:.2f} at delta = {total.delta:.1e}"
)

# %%
# The curve: cross-validated accuracy of each epsilon, and the test accuracy
# of one model per epsilon next to non-private logistic regression (seven
# more fits on the training rows, each spending its own epsilon, outside the
# search's total).
cv_mean = search.cv_results_["mean_test_score"]
cv_std = search.cv_results_["std_test_score"]
test_scores = [
    estimator.set_params(epsilon=e).fit(X, y).score(X_test, y_test) for e in epsilons
]
reference = LogisticRegression(max_iter=2000).fit(X, y).score(X_test, y_test)

fig, ax = plt.subplots(figsize=(6, 4))
ax.errorbar(
    epsilons, cv_mean, yerr=cv_std, marker="o", capsize=3, label="3-fold CV accuracy"
)
ax.plot(epsilons, test_scores, marker="s", label="test accuracy")
ax.axhline(reference, color="k", ls="--", lw=1, label="non-private")
ax.set_xscale("log")
ax.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
ax.minorticks_off()
ax.set_xlabel("epsilon (delta = 1e-5)")
ax.set_ylabel("accuracy")
ax.set_title("Adult, 6,000 training rows")
ax.legend()
fig.tight_layout()
plt.show()

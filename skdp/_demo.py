"""``skdp demo``: private logistic regression on the vendored UCI Adult data."""

import time

import numpy as np
from sklearn.linear_model import LogisticRegression

from .datasets import adult_design_matrix, load_adult
from .linear_model import DPLogisticRegression

__all__ = ["run_demo"]

#: Public row-norm bound of the Adult design matrix with public bins: 8
#: one-hot categorical blocks, 6 numeric columns scaled to [0, 1] by public
#: bounds and 4 one-hot blocks of public numeric bins.
ADULT_ROW_NORM = float(np.sqrt(18.0))


def run_demo(*, epsilon=1.0, random_state=0):
    """Train DPLogisticRegression on Adult (train file) and test on its test file.

    Prints test accuracy and the privacy spent for each batch sampler next to
    a non-private ``LogisticRegression``.

    Parameters
    ----------
    epsilon : float, default=1.0
    random_state : int, default=0

    Returns
    -------
    int
        Exit status (0).
    """
    train, test = load_adult(split="train"), load_adult(split="test")
    X_train = adult_design_matrix(train.data, bins=True)
    X_test = adult_design_matrix(test.data, bins=True)
    y_train, y_test = train.target, test.target
    print(
        f"UCI Adult: {X_train.shape[0]} training rows, {X_test.shape[0]} test rows, "
        f"{X_train.shape[1]} features (one-hot, public-bound scaling, public bins)"
    )
    print(f"{'model':<44}{'accuracy':>9}{'epsilon':>9}{'delta':>10}  bound  (fit s)")
    start = time.perf_counter()
    baseline = LogisticRegression(max_iter=1000).fit(X_train, y_train)
    print(
        f"{'LogisticRegression (non-private)':<44}"
        f"{baseline.score(X_test, y_test):>9.4f}{'inf':>9}{'-':>10}  -  "
        f"({time.perf_counter() - start:.2f})"
    )
    for sampling in ("poisson", "shuffle", "cyclic"):
        model = DPLogisticRegression(
            epsilon=epsilon,
            batch_sampling=sampling,
            # Poisson batches need no row bound (clipping bounds each step);
            # the cyclic orders' last-iterate bound does.
            row_norm=None if sampling == "poisson" else ADULT_ROW_NORM,
            classes=[0, 1],  # public: <=50K and >50K
            random_state=random_state,
        )
        start = time.perf_counter()
        model.fit(X_train, y_train)
        spent = model.privacy_spent_
        print(
            f"{f'DPLogisticRegression ({sampling})':<44}"
            f"{model.score(X_test, y_test):>9.4f}{spent.epsilon:>9.4f}"
            f"{spent.delta:>10.2e}  {spent.bound}  ({time.perf_counter() - start:.2f})"
        )
    return 0

"""
A private Pipeline from a raw DataFrame
=======================================

A Pipeline is private end to end only if every step that reads the data is.
Here every preprocessing step uses *declared* public facts about the columns
(numeric bounds, the list of categories) and reads nothing from the rows, so
the model's ``privacy_spent_`` is the privacy of the whole Pipeline.

The public facts come from :data:`skdp.datasets.ADULT_SCHEMA`, written down
from the data set's documentation, not computed from the data. For your own
data, write them down the same way (a questionnaire's answer options, the
range a sensor can report, a legal top code).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from skdp import DPLogisticRegression
from skdp.datasets import ADULT_SCHEMA, load_adult
from skdp.preprocessing import BoundedScaler

train = load_adult(split="train", as_frame=True)
test = load_adult(split="test", as_frame=True)
frame, y = train.data, train.target
print(frame.head())

# %%
# Declared bounds and categories
# ------------------------------
# Numeric columns map to ``(low, high)`` tuples, categorical ones to lists.
numeric = [c for c, v in ADULT_SCHEMA.items() if isinstance(v, tuple)]
categorical = [c for c, v in ADULT_SCHEMA.items() if isinstance(v, list)]
lower = np.array([ADULT_SCHEMA[c][0] for c in numeric], dtype=float)
upper = np.array([ADULT_SCHEMA[c][1] for c in numeric], dtype=float)

preprocess = ColumnTransformer(
    [
        # Scales to [0, 1] by the declared bounds and clips: free.
        ("numeric", BoundedScaler(bounds=(lower, upper)), numeric),
        # Declared categories: free. With categories="auto" the encoder would
        # read which categories occur, including rare ones: a leak.
        (
            "categorical",
            OneHotEncoder(
                categories=[ADULT_SCHEMA[c] for c in categorical],
                handle_unknown="ignore",
                sparse_output=False,
            ),
            categorical,
        ),
    ]
)

# %%
# After this map every numeric feature lies in [0, 1] and each categorical
# column contributes exactly one 1, so no row has norm above
# ``sqrt(len(numeric) + len(categorical))``: a public ``row_norm``.
row_norm = np.sqrt(len(numeric) + len(categorical))
model = make_pipeline(
    preprocess,
    DPLogisticRegression(
        epsilon=1.0, row_norm=row_norm, classes=[0, 1], random_state=0
    ),
)
model.fit(frame, y)
spent = model[-1].privacy_spent_
print(f"test accuracy {model.score(test.data, test.target):.3f}")
print(spent)

# %%
# The fitted model works on DataFrames and keeps the feature names, so the
# coefficients can be read by name. (Coefficients are post-processing of a
# private model: looking at them is free.)
names = model[:-1].get_feature_names_out()
coef = model[-1].coef_[0]
top = np.argsort(np.abs(coef))[-12:]
fig, ax = plt.subplots(figsize=(6, 4))
ax.barh([names[i].split("__")[1] for i in top], coef[top])
ax.set_xlabel("coefficient (log-odds of income > 50K)")
ax.set_title(f"Largest coefficients, epsilon = {spent.epsilon:.2f}")
fig.tight_layout()
plt.show()

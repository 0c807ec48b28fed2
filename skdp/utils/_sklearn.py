"""The one module that touches scikit-learn's private names.

scikit-learn moves its private helpers between releases; keeping every such
import here means one file to fix when it does.
"""

import functools

from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import validate_data

__all__ = ["Interval", "StrOptions", "fit_context", "validate_data"]


def fit_context(*, prefer_skip_nested_validation):
    """Validate parameters like scikit-learn and undo any change if fit fails.

    Wraps :func:`sklearn.base._fit_context`. If ``fit`` raises, the estimator's
    attributes are restored to what they were before the call, so a failed fit
    leaves the estimator as it was.
    """
    sk_wrapper = _fit_context(
        prefer_skip_nested_validation=prefer_skip_nested_validation
    )

    def decorator(fit_method):
        wrapped = sk_wrapper(fit_method)

        @functools.wraps(fit_method)
        def fit(estimator, *args, **kwargs):
            before = dict(estimator.__dict__)
            try:
                return wrapped(estimator, *args, **kwargs)
            except BaseException:
                estimator.__dict__.clear()
                estimator.__dict__.update(before)
                raise

        return fit

    return decorator

"""Exact Gaussian DP (``skdp/accounting/_gdp.py``): the conversion itself.

Cyclic runs are in test_gdp_cyclic.py; the accountants that use it in
test_accountants.py and test_pld.py.
"""

import math

import pytest
from scipy import integrate, stats

from skdp.accounting._gdp import gaussian_dp_delta, gaussian_dp_epsilon


@pytest.mark.parametrize("mu", [0.05, 0.3, 1.0, 3.0, 8.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
def test_gaussian_dp_epsilon_is_the_smallest(mu, delta):
    eps = gaussian_dp_epsilon(mu, delta)
    assert gaussian_dp_delta(eps, mu) <= delta
    if eps > 0:
        assert gaussian_dp_delta(eps * (1 - 1e-6), mu) > delta


@pytest.mark.parametrize("mu", [0.2, 1.0, 2.5])
@pytest.mark.parametrize("eps", [0.0, 0.5, 2.0])
def test_gaussian_dp_delta_against_quadrature(mu, eps):
    # Hockey-stick divergence of N(mu, 1) against N(0, 1).
    def integrand(x):
        return max(0.0, stats.norm.pdf(x, mu) - math.exp(eps) * stats.norm.pdf(x))

    exact, _ = integrate.quad(integrand, -12, 12 + mu, points=[eps / mu + mu / 2])
    assert gaussian_dp_delta(eps, mu) == pytest.approx(exact, rel=1e-7, abs=1e-13)

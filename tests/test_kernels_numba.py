"""Building blocks of the compiled kernels."""

from __future__ import annotations

import numpy as np

from bgplvm.kernels._fastexp import exp_into


def test_fast_exp_matches_numpy():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-708.0, 709.0, 20000), rng.uniform(-40.0, 5.0, 20000),
                        [0.0, -0.0, 1e-300, -1e-300, 0.5 * np.log(2.0), -708.39, 709.0]])
    out, scratch = np.empty_like(x), np.empty_like(x)
    exp_into(x, out, scratch)
    np.testing.assert_allclose(out, np.exp(x), rtol=4e-16, atol=0.0)


def test_fast_exp_edge_cases():
    x = np.array([np.nan, -np.inf, np.inf, -709.0, -800.0, 709.5, 1e4])
    out, scratch = np.empty_like(x), np.empty_like(x)
    exp_into(x, out, scratch)
    assert np.isnan(out[0])
    np.testing.assert_array_equal(out[1:], [0.0, np.inf, 0.0, 0.0, np.inf, np.inf])


def test_exp_matches_numpy_to_an_ulp_over_the_range():
    """Over the whole finite range and the range the Psi2 exponents live in."""
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-708.0, 709.0, 20000), rng.uniform(-40.0, 5.0, 20000),
                        [0.0, -0.0, 1e-300, -1e-300, 0.5 * np.log(2.0), -708.39, 709.0, 709.08]])
    out, scratch = np.empty_like(x), np.empty_like(x)
    exp_into(x, out, scratch)
    np.testing.assert_allclose(out, np.exp(x), rtol=4e-16, atol=0.0)
    x = np.array([np.nan, -np.inf, np.inf, -709.0, -800.0, 709.5, 1e4, -1e300, 1e300])
    out, scratch = np.empty_like(x), np.empty_like(x)
    exp_into(x, out, scratch)
    assert np.isnan(out[0])
    np.testing.assert_array_equal(out[1:], [0.0, np.inf, 0.0, 0.0, np.inf, np.inf, 0.0, np.inf])

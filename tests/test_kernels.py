"""Kernel matrices, their gradients, parameters and the kernel factory."""

from __future__ import annotations

import numpy as np
import pytest

import reference as ref
from gradcheck import assert_close_gradient, assert_gradient, complex_step_gradient
from model.kernels import RBF
from test_psi_stats import CASES, assert_rel, build, ref_parts


def points(N, Q, seed=0):
    return np.random.default_rng(seed).standard_normal((N, Q))


@pytest.mark.parametrize("case", CASES)
def test_K_matches_reference(case):
    Q = 3
    k = build(case, Q)
    X, X2 = points(7, Q), points(5, Q, seed=1)
    parts = ref_parts(k)
    assert_rel(k.K(X), ref.sum_K(parts, X))
    assert_rel(k.K(X, X2), ref.sum_K(parts, X, X2))
    assert_rel(k.Kdiag(X), sum(ref.Kdiag(kind, p, X) for kind, p in parts))
    np.testing.assert_array_equal(k.K(X), k.K(X).T)


def _K_objective(k, W, X):
    """x = [X, params] -> (sum W * K(X), gradient) from K_gradients."""
    N, Q = X.shape
    names = list(k.params)

    def unpack(x):
        X_ = x[:N * Q].reshape(N, Q)
        out, i = {}, N * Q
        for name in names:
            size = k.params[name].size
            out[name] = x[i:i + size].reshape(k.params[name].shape)
            i += size
        return X_, out

    def f_and_grad(x):
        X_, th = unpack(x)
        k.set_params(**th)
        dX, dth = k.K_gradients(W, X_)
        assert set(dth) == set(names)
        return np.sum(W * k.K(X_)), np.concatenate([dX.ravel()] + [np.ravel(dth[n]) for n in names])

    def f_ref(x):
        X_, th = unpack(x)
        return np.sum(W * ref.sum_K(ref_parts(k, th), X_))

    x0 = np.concatenate([X.ravel()] + [np.ravel(k.params[n]) for n in names])
    return f_and_grad, f_ref, x0


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_K_gradients(case, symmetric):
    N, Q = 5, 3
    k = build(case, Q)
    X = points(N, Q, seed=2)
    W = np.random.default_rng(3).standard_normal((N, N))
    if symmetric:
        W = W + W.T
    X[1] = X[0]  # coincident inputs: a degenerate but common point (Z collapsing)
    f_and_grad, f_ref, x0 = _K_objective(k, W, X)
    g = f_and_grad(x0)[1]
    assert_close_gradient(g, complex_step_gradient(f_ref, x0), rtol=1e-10, atol=0.0)
    assert_gradient(f_and_grad, x0, rtol=1e-6, atol=1e-8)


def test_rbf_parameters():
    k = RBF(3, variance=2.0, lengthscale=0.5)
    assert k.params["variance"].shape == ()
    np.testing.assert_array_equal(k.params["lengthscale"], [0.5, 0.5, 0.5])
    np.testing.assert_allclose(k.ard_weights, [4.0, 4.0, 4.0])
    k.set_params(lengthscale=[1.0, 2.0, 4.0])
    np.testing.assert_allclose(k.ard_weights, [1.0, 0.25, 0.0625])
    with pytest.raises(ValueError):
        k.set_params(lengthscale=[1.0, 2.0])
    with pytest.raises(ValueError):
        RBF(2, lengthscale=[1.0, -1.0])
    with pytest.raises(ValueError):
        k.psi1(np.zeros((2, 2)), np.ones((2, 2)), np.zeros((3, 3)))

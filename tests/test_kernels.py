"""Kernel matrices, their gradients, parameters and the kernel factory."""

from __future__ import annotations

import numpy as np
import pytest

import reference as ref
from gradcheck import assert_close_gradient, assert_gradient, complex_step_gradient
from bgplvm.kernels import RBF
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


# ------------------------------------------------------------------------------------------
# sums, factory
# ------------------------------------------------------------------------------------------
def test_sum_parameter_names_and_routing():
    from bgplvm.kernels import Bias, Sum

    k = Sum([RBF(2), Bias(2), RBF(2, lengthscale=[2.0, 3.0])])
    assert list(k.params) == ["rbf.variance", "rbf.lengthscale", "bias.variance",
                              "rbf_1.variance", "rbf_1.lengthscale"]
    k.set_params(**{"rbf_1.variance": 2.5, "bias.variance": 0.1})
    assert float(k.parts[2].params["variance"]) == 2.5
    assert float(k.params["bias.variance"]) == 0.1
    np.testing.assert_allclose(k.ard_weights, [1.0, 1.0])  # the first RBF part
    with pytest.raises(KeyError):
        k.set_params(**{"rbf_2.variance": 1.0})
    X = points(4, 2)
    _, g = k.K_gradients(np.eye(4), X)
    assert list(g) == list(k.params)
    # nested sums flatten; "+" builds sums
    k2 = RBF(2) + Bias(2) + Bias(2)
    assert list(k2.params) == ["rbf.variance", "rbf.lengthscale", "bias.variance", "bias_1.variance"]


def test_ard_weights_of_sums():
    from bgplvm.kernels import Bias, Linear, White, make_kernel

    assert make_kernel("bias+white", 2).ard_weights is None
    lin = Linear(3, variances=[1.0, 2.0, 3.0])
    np.testing.assert_array_equal((Bias(3) + lin).ard_weights, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal((lin + RBF(3, lengthscale=0.5)).ard_weights, [4.0, 4.0, 4.0])
    assert White(2).ard_weights is None


def test_rbf_plus_rbf_psi_statistics_not_implemented():
    from bgplvm.kernels import make_kernel

    k = make_kernel("rbf+rbf", 2)
    X = points(3, 2)
    assert k.K(X).shape == (3, 3)  # K works
    with pytest.raises(NotImplementedError, match="rbf"):
        k.psi2(X, np.ones_like(X), X)


@pytest.mark.parametrize("spec, types", [
    ("rbf", ["RBF"]),
    ("Linear", ["Linear"]),
    (" RBF + bias ", ["RBF", "Bias"]),
    ("rbf+bias+white", ["RBF", "Bias", "White"]),
    ("rbf + linear + bias + white", ["RBF", "Linear", "Bias", "White"]),
])
def test_make_kernel_parses_strings(spec, types):
    from bgplvm.kernels import Sum, make_kernel

    k = make_kernel(spec, 3)
    parts = k.parts if isinstance(k, Sum) else [k]
    assert [type(p).__name__ for p in parts] == types
    assert all(p.input_dim == 3 for p in parts)
    assert isinstance(k, Sum) == (len(types) > 1)


def test_make_kernel_errors_and_instances():
    from bgplvm.kernels import KERNEL_NAMES, make_kernel

    assert set(KERNEL_NAMES) == {"rbf", "linear", "bias", "white"}
    with pytest.raises(ValueError, match="known names: rbf, linear, bias, white"):
        make_kernel("rbf+matern", 2)
    with pytest.raises(ValueError):
        make_kernel("", 2)
    k = RBF(2)
    assert make_kernel(k, 2) is k
    with pytest.raises(ValueError, match="input_dim"):
        make_kernel(k, 3)


def test_white_semantics():
    from bgplvm.kernels import White

    k = White(2, variance=0.3)
    X = points(3, 2)
    np.testing.assert_array_equal(k.K(X), 0.3 * np.eye(3))
    np.testing.assert_array_equal(k.K(X, X), np.zeros((3, 3)))  # only X2=None counts
    np.testing.assert_array_equal(k.psi0(X, np.ones_like(X)), [0.3, 0.3, 0.3])


def test_warmup_runs():
    from bgplvm.kernels import warmup

    warmup()

"""State-space forms of the time kernels (bgplvm.state_space): the covariance they imply
against the dense kernels, parameter derivatives against central differences, the
reported approximation errors (rbf, periodic), extreme time steps and the API's flags."""

import numpy as np
import pytest

from bgplvm.state_space import (STATE_SPACE_KINDS, NoStateSpaceForm, StateSpace, has_exact_state_space,
                                periodic_coefficients, rbf_max_error, state_space)
from bgplvm.time_kernels import TIME_KERNEL_NAMES, TimeKernel, make_time_kernel

EXACT = ["matern12", "matern32", "matern52", "white", "bias", "matern32+white", "matern32+bias",
         "matern52+white+bias", "matern12+matern52+white"]
ALL = EXACT + ["periodic", "rbf", "rbf+white", "periodic+matern32+bias", "rbf+periodic"]
FIXED_ORDER = {"order": 5}  # rbf and periodic at a fixed order (derivatives, no jumps in J)


def _kernel(spec, seed=0):
    """spec with random, non-default parameters."""
    k = make_time_kernel(spec)
    rng = np.random.default_rng(seed)
    k.set_params(**{n: float(v) * rng.uniform(0.4, 2.5) for n, v in k.params.items()})
    return k


def _ss_covariance(ss: StateSpace, t):
    """K_ss[i, j] = H A(|t_i - t_j|) P_inf H^T (i != j), H P_inf H^T on the diagonal."""
    n = t.shape[0]
    i, j = np.tril_indices(n, -1)
    A = ss.A(np.abs(t[i] - t[j]))
    K = np.zeros((n, n))
    K[i, j] = A @ ss.P_inf @ ss.H @ ss.H
    return K + K.T + np.eye(n) * (ss.H @ ss.P_inf @ ss.H)


def _lengthscales(k):
    return [float(v) for n, v in k.params.items() if n.endswith("lengthscale")] or [1.0]


@pytest.mark.parametrize("spec", EXACT)
@pytest.mark.parametrize("seed", [0, 1])
def test_exact_forms_reproduce_the_dense_kernel(spec, seed):
    rng = np.random.default_rng(10 + seed)
    t = np.r_[rng.uniform(0.0, 6.0, 30), 2.0, 2.0]  # unsorted, uneven, one repeated time stamp
    k = _kernel(spec, seed)
    ss = state_space(k)
    assert ss.exact and ss.max_error == 0.0 and ss.order is None and has_exact_state_space(k)
    K = k.K(t)  # the white part (if any) is on its diagonal already: K(t) = ... + diag(white_diag(t))
    np.testing.assert_allclose(np.diag(K), k.Kdiag(t))
    np.testing.assert_allclose(_ss_covariance(ss, t), K, rtol=0, atol=1e-12 * np.abs(K).max())


def test_matern32_closed_form_and_identity_at_zero():
    k = _kernel("matern32", 3)
    ell = float(k.params["lengthscale"])
    lam, dt = np.sqrt(3.0) / ell, np.array([0.0, 0.37, 2.9])
    A = state_space(k).A(dt)
    ref = np.exp(-lam * dt)[:, None, None] * np.stack(
        [np.stack([1 + lam * dt, dt], -1), np.stack([-lam**2 * dt, 1 - lam * dt], -1)], -2)
    np.testing.assert_allclose(A, ref, rtol=1e-14, atol=1e-15)
    for spec in ("matern12", "matern52", "bias", "periodic", "rbf", "matern32+white"):
        A0 = state_space(_kernel(spec)).A(np.zeros(2))
        expect = np.eye(A0.shape[1])
        if spec == "matern32+white":
            expect[2, 2] = 0.0  # the white state forgets at once
        np.testing.assert_allclose(A0, np.broadcast_to(expect, A0.shape), atol=1e-15)


def _num_derivs(spec, name, dt, options, h_rel=1e-6):
    k = _kernel(spec)
    v = float(k.params[name])
    h = h_rel * v
    out = []
    for x in (v + h, v - h):
        k.set_params(**{name: x})
        ss = state_space(k, **options)
        out.append((ss.A(dt), ss.P_inf))
    return (out[0][0] - out[1][0]) / (2 * h), (out[0][1] - out[1][1]) / (2 * h)


@pytest.mark.parametrize("spec", ["matern12", "matern32", "matern52", "white", "bias", "periodic", "rbf",
                                  "matern32+white+bias", "rbf+periodic"])
def test_derivatives_against_central_differences(spec):
    k = _kernel(spec)
    ell = min(_lengthscales(k))
    dt = ell * np.array([0.0, 1e-3, 0.21, 0.9, 1.7, 4.2, 11.0])
    ss = state_space(k, **FIXED_ORDER)
    dA, dP = ss.dA(dt), ss.dP_inf
    assert list(dA) == list(dP) == list(k.params)
    for name in k.params:
        nA, nP = _num_derivs(spec, name, dt, FIXED_ORDER)
        assert dA[name].shape == nA.shape and dP[name].shape == nP.shape
        for ana, num in ((dA[name], nA), (dP[name], nP)):
            scale = max(np.abs(ana).max(), np.abs(num).max(), 1e-300)
            np.testing.assert_allclose(ana, num, rtol=0, atol=1e-6 * scale, err_msg=f"{spec} d/d{name}")


@pytest.mark.parametrize("ell", [1.0, 0.5, 0.23])
def test_periodic_error_is_the_tail_and_within_tolerance(ell):
    k = make_time_kernel("periodic")
    k.set_params(variance=1.7, lengthscale=ell, period=2.3)
    r = np.r_[0.0, np.linspace(0.0, 3 * 2.3, 3001)[1:]]
    for options in ({}, {"max_error": 1e-9}, {"order": 2}):
        ss = state_space(k, **options)
        observed = np.abs(ss.kernel_values(r) - k.K(np.zeros(1), r)[0]).max()
        assert observed <= ss.max_error * (1 + 1e-9) + 1e-14
        assert observed >= 0.999 * ss.max_error  # the tail is attained at r = 0
        if "order" not in options:
            assert ss.max_error <= options.get("max_error", 1e-6) * 1.7
            # the smallest such order: one harmonic fewer would not do
            assert periodic_coefficients(ell, ss.order - 1)[1] > options.get("max_error", 1e-6)
        assert ss.d == 2 * ss.order + 1 and not ss.exact


def test_rbf_error_reported_and_decreasing_with_order():
    k = make_time_kernel("rbf")
    k.set_params(variance=0.8, lengthscale=1.9)
    r = np.random.default_rng(0).uniform(0.0, 12 * 1.9, 4000)
    errs = {}
    for order in (4, 6, 10):
        ss = state_space(k, order=order)
        assert ss.order == order and ss.d == order and not ss.exact
        np.testing.assert_allclose(ss.H @ ss.P_inf @ ss.H, 0.8, rtol=1e-13)  # renormalised variance
        observed = np.abs(ss.kernel_values(r) - k.K(np.zeros(1), r)[0]).max()
        assert observed <= ss.max_error * (1 + 1e-6) + 1e-14
        np.testing.assert_allclose(ss.max_error, 0.8 * rbf_max_error(order))
        errs[order] = ss.max_error / 0.8
    assert state_space(k).order == 6
    assert errs[6] < 5e-3  # measured 4.26e-3
    assert errs[10] < errs[6] < errs[4] < 0.03


@pytest.mark.parametrize("spec", ALL)
def test_extreme_steps_finite_and_Q_psd(spec):
    k = _kernel(spec, 2)
    ss = state_space(k)
    for ell in _lengthscales(k):
        for dt in (np.array([1e-9 * ell, 1e9 * ell]), ell * np.logspace(-6, 3, 19)):
            A, dA = ss.A(dt), ss.dA(dt)
            Q = ss.Q(A)
            assert A.shape == Q.shape == (dt.shape[0], ss.d, ss.d)
            assert np.all(np.isfinite(A)) and np.all(np.isfinite(Q))
            assert all(np.all(np.isfinite(v)) for v in dA.values())
            np.testing.assert_allclose(Q, np.swapaxes(Q, 1, 2))
            scale = np.abs(np.linalg.eigvalsh(ss.P_inf)).max()
            assert np.linalg.eigvalsh(Q).min() > -1e-12 * scale


def test_many_steps_vectorised_and_through_unique_values():
    k = _kernel("rbf+matern52+white")
    ss = k.state_space()
    dt = np.r_[np.full(50_000, 0.1), np.random.default_rng(0).uniform(0, 3, 1000)]
    A = ss.A(dt)
    np.testing.assert_array_equal(A[:50_000], np.broadcast_to(A[0], (50_000, ss.d, ss.d)))
    np.testing.assert_allclose(A[50_000:], ss.A(dt[50_000:]))
    dA = ss.dA(dt)
    assert all(v.shape == A.shape for v in dA.values())
    np.testing.assert_allclose(ss.A(dt[-3:]), A[-3:])


def test_kinds_flags_and_errors():
    assert set(TIME_KERNEL_NAMES) == set(STATE_SPACE_KINDS)
    for name in TIME_KERNEL_NAMES:
        assert isinstance(state_space(make_time_kernel(name)), StateSpace)
    for spec in ("matern12", "matern32", "matern52", "white", "bias", "matern52+white+bias"):
        assert has_exact_state_space(make_time_kernel(spec))
    for spec in ("rbf", "periodic", "rbf+white", "matern32+periodic", "bias+rbf"):
        k = make_time_kernel(spec)
        assert not has_exact_state_space(k) and not state_space(k).exact

    class Custom(TimeKernel):
        name = "custom"

    with pytest.raises(NoStateSpaceForm, match="custom.*matern32"):
        state_space(Custom(variance=1.0))
    assert issubclass(NoStateSpaceForm, ValueError)
    with pytest.raises(TypeError):
        state_space(make_time_kernel("rbf"), ordr=3)
    with pytest.raises(ValueError, match="order"):
        state_space(make_time_kernel("rbf"), order=0)
    with pytest.raises(ValueError, match="steps"):
        state_space(make_time_kernel("matern32")).A(np.array([-1.0]))
    # per-kind options in a sum; the sum's names and blocks
    k = make_time_kernel("rbf+periodic+white")
    ss = state_space(k, rbf_order=4, periodic_order=3)
    assert ss.d == 4 + 7 + 1 and ss.order == 4
    assert list(ss.dP_inf) == list(k.params)
    np.testing.assert_allclose(ss.max_error, state_space(k.parts[0], order=4).max_error
                               + state_space(k.parts[1], order=3).max_error)
    np.testing.assert_array_equal(ss.H, np.r_[1.0, 0, 0, 0, 1.0, np.tile([1.0, 0.0], 3), 1.0])

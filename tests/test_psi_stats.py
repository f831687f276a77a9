"""Psi statistics and their gradients: every kernel and sum against independent checks.

- naive NumPy references (tests/reference.py), relative 1e-10;
- Gauss-Hermite quadrature of E[k(x, .)] on a tensor grid (Q = 2);
- the S -> 0 limit (psi0 -> Kdiag(mu), Psi1 -> K(mu, Z), Psi2 -> K(Z, mu) K(mu, Z));
- gradients against complex-step derivatives of the reference (exact to rounding) and
  central differences of the compiled statistics (tests/gradcheck.py);
- serial and parallel kernels agree.
"""

from __future__ import annotations

import numpy as np
import pytest

import reference as ref
from gradcheck import assert_close_gradient, assert_gradient, complex_step_gradient
from bgplvm import _numba_config as cfg
from bgplvm.kernels import RBF, Bias, Linear, Sum, White

# ------------------------------------------------------------------------------------------
# cases
# ------------------------------------------------------------------------------------------
_LENGTHSCALES = np.array([0.8, 1.5, 1.1, 0.6])


_VARIANCES = np.array([0.7, 1.2, 0.4, 0.9])


def _part(name: str, Q: int, index: int):
    if name == "rbf":
        return RBF(Q, variance=1.3 + 0.2 * index, lengthscale=_LENGTHSCALES[:Q] * (1 + 0.3 * index))
    if name == "linear":
        return Linear(Q, variances=_VARIANCES[:Q] * (1 + 0.5 * index))
    if name == "bias":
        return Bias(Q, variance=0.6 + 0.3 * index)
    if name == "white":
        return White(Q, variance=0.15 + 0.1 * index)
    raise KeyError(name)


def build(case: str, Q: int):
    """A kernel with non-trivial parameters for each case name ("rbf+bias", ...)."""
    names = case.split("+")
    parts = [_part(n, Q, names[:i].count(n)) for i, n in enumerate(names)]
    return parts[0] if len(parts) == 1 else Sum(parts)


CASES = ["rbf", "linear", "bias", "white", "rbf+bias", "rbf+linear", "linear+bias", "rbf+white",
         "linear+linear", "bias+bias", "linear+rbf+bias+white"]


def ref_parts(kernel, params=None):
    """[(kind, params)] for tests/reference.py; ``params`` overrides the kernel's values
    (names as in ``kernel.params``, possibly complex for the complex step)."""
    params = kernel.params if params is None else params
    if hasattr(kernel, "parts"):
        return [(part.name, {n: params[f"{prefix}.{n}"] for n in part.params})
                for prefix, part in zip(kernel.prefixes, kernel.parts)]
    return [(kernel.name, dict(params))]


def gaussians(N, M, Q, seed=0):
    rng = np.random.default_rng(seed)
    mu = rng.standard_normal((N, Q))
    S = rng.uniform(0.05, 0.6, (N, Q))
    Z = 0.8 * rng.standard_normal((M, Q))
    return mu, S, Z


def weights(N, M, seed=1, symmetric=True):
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(N)
    W1 = rng.standard_normal((N, M))
    W2 = rng.standard_normal((M, M))
    if symmetric:
        W2 = W2 + W2.T
    return w0, W1, W2


def assert_rel(actual, expected, rtol=1e-10):
    """Entry-wise |a - e| <= rtol * max|e| (relative to the array's scale)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = max(np.max(np.abs(expected), initial=0.0), 1e-300)
    err = np.max(np.abs(actual - expected), initial=0.0)
    assert err <= rtol * scale, f"max error {err:.3g} > {rtol:g} * {scale:.3g}"


# ------------------------------------------------------------------------------------------
# flat packing for gradient checks: x = [mu, S, Z, kernel params in dict order]
# ------------------------------------------------------------------------------------------
class Packer:
    def __init__(self, kernel, N, M, Q):
        self.kernel, self.N, self.M, self.Q = kernel, N, M, Q
        self.blocks = [("mu", (N, Q)), ("S", (N, Q)), ("Z", (M, Q))]
        self.blocks += [(k, v.shape) for k, v in kernel.params.items()]

    def pack(self, mu, S, Z, params):
        return np.concatenate([np.ravel(mu), np.ravel(S), np.ravel(Z)]
                              + [np.ravel(params[k]) for k, _ in self.blocks[3:]])

    def unpack(self, x):
        out, i = {}, 0
        for name, shape in self.blocks:
            n = int(np.prod(shape))
            out[name] = x[i:i + n].reshape(shape)
            i += n
        return out

    def names(self):
        return [f"{name}{list(np.unravel_index(j, shape)) if shape else ''}"
                for name, shape in self.blocks for j in range(int(np.prod(shape)))]


def compiled_objective(kernel, packer, w0, W1, W2):
    """(L, dL/dx) from the kernel's own statistics and psi_gradients."""

    def f_and_grad(x):
        v = packer.unpack(x)
        kernel.set_params(**{k: v[k] for k in kernel.params})
        mu, S, Z = v["mu"], v["S"], v["Z"]
        L = (np.sum(w0 * kernel.psi0(mu, S)) + np.sum(W1 * kernel.psi1(mu, S, Z))
             + np.sum(W2 * kernel.psi2(mu, S, Z)))
        dmu, dS, dZ, dth = kernel.psi_gradients(w0, W1, W2, mu, S, Z)
        assert set(dth) == set(kernel.params)
        for k in kernel.params:
            assert dth[k].shape == kernel.params[k].shape, k
        return L, packer.pack(dmu, dS, dZ, dth)

    return f_and_grad


def reference_objective(kernel, packer, w0, W1, W2):
    def f(x):
        v = packer.unpack(x)
        parts = ref_parts(kernel, {k: v[k] for k in kernel.params})
        return ref.objective(parts, v["mu"], v["S"], v["Z"], w0, W1, W2)

    return f


# ------------------------------------------------------------------------------------------
# values
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES)
def test_psi_statistics_match_reference(case):
    N, M, Q = 9, 6, 3
    k = build(case, Q)
    mu, S, Z = gaussians(N, M, Q)
    p0, p1, p2n = ref.sum_psi(ref_parts(k), mu, S, Z)
    assert_rel(k.psi0(mu, S), p0)
    assert_rel(k.psi1(mu, S, Z), p1)
    assert_rel(k.psi2(mu, S, Z), p2n.sum(0))
    assert_rel(k.psi2n(mu, S, Z), p2n)
    # the covariance of k(x_n, Z) under q(x_n), used by covFstar
    assert_rel(k.psi2n_centred(mu, S, Z), p2n - p1[:, :, None] * p1[:, None, :])
    P2 = k.psi2(mu, S, Z)
    np.testing.assert_array_equal(P2, P2.T)


def gauss_hermite_psi(kernel, mu, S, Z, n_nodes=40):
    """psi0, Psi1, Psi2 by a tensor-product Gauss-Hermite rule (any Q, small n_nodes^Q)."""
    t, w = np.polynomial.hermite.hermgauss(n_nodes)
    Q = mu.shape[1]
    grids = np.meshgrid(*([t] * Q), indexing="ij")
    T = np.stack([g.ravel() for g in grids], axis=1)            # (G, Q)
    Wt = np.prod(np.meshgrid(*([w] * Q), indexing="ij"), axis=0).ravel() / np.pi ** (Q / 2)
    N, M = mu.shape[0], Z.shape[0]
    psi0, Psi1, Psi2 = np.empty(N), np.empty((N, M)), np.zeros((M, M))
    for n in range(N):
        X = mu[n] + np.sqrt(2.0 * S[n]) * T                     # nodes of N(mu_n, S_n)
        Kxz = kernel.K(X, Z)                                     # (G, M)
        psi0[n] = Wt @ kernel.Kdiag(X)
        Psi1[n] = Wt @ Kxz
        Psi2 += Kxz.T @ (Wt[:, None] * Kxz)
    return psi0, Psi1, Psi2


@pytest.mark.parametrize("case", CASES)
def test_psi_statistics_match_quadrature(case):
    N, M, Q = 4, 5, 2
    k = build(case, Q)
    mu, S, Z = gaussians(N, M, Q, seed=3)
    q0, q1, q2 = gauss_hermite_psi(k, mu, S, Z)
    assert_rel(k.psi0(mu, S), q0, 1e-9)
    assert_rel(k.psi1(mu, S, Z), q1, 1e-9)
    assert_rel(k.psi2(mu, S, Z), q2, 1e-9)


@pytest.mark.parametrize("case", CASES)
def test_zero_variance_limit(case):
    """S -> 0: psi0 -> Kdiag(mu) (white noise included: psi0 is <k(x, x)>, and k(x, x)
    holds the white variance), Psi1 -> K(mu, Z), Psi2 -> K(Z, mu) K(mu, Z) (white noise
    contributes nothing: K(mu, Z) with a second argument has no white part)."""
    N, M, Q = 6, 4, 3
    k = build(case, Q)
    mu, _, Z = gaussians(N, M, Q)
    S = np.full((N, Q), 1e-12)
    Kmz = k.K(mu, Z)
    assert_rel(k.psi0(mu, S), k.Kdiag(mu), 1e-9)
    assert_rel(k.psi1(mu, S, Z), Kmz, 1e-9)
    assert_rel(k.psi2(mu, S, Z), Kmz.T @ Kmz, 1e-9)
    assert_rel(k.psi2n(mu, S, Z), Kmz[:, :, None] * Kmz[:, None, :], 1e-9)


def _jacobian_KxZ(kernel, mu, Z):
    """(N, M, Q) d k(x, z_m) / d x at x = mu_n, analytically for every part."""
    out = np.zeros((mu.shape[0], Z.shape[0], mu.shape[1]))
    for part in getattr(kernel, "parts", [kernel]):
        if isinstance(part, RBF):
            diff = mu[:, None, :] - Z[None, :, :]
            out -= part.alpha * diff * part.K(mu, Z)[:, :, None]
        elif isinstance(part, Linear):
            out += (Z * part.variances)[None, :, :]
    return out


@pytest.mark.parametrize("case", CASES)
def test_centred_psi2n_keeps_its_digits_as_S_goes_to_0(case):
    """At S = 1e-12 the covariance of k(x, Z) is J diag(S) J^T (J the Jacobian at the mean)
    up to O(S^2): computed as Psi2^n minus psi1 psi1^T it had only rounding error left
    (relative error ~1e-4 here), the centred form keeps it to 1e-6."""
    N, M, Q = 5, 6, 3
    k = build(case, Q)
    mu, _, Z = gaussians(N, M, Q)
    S = np.full((N, Q), 1e-12) * np.array([1.0, 3.0, 0.5])
    J = _jacobian_KxZ(k, mu, Z)
    expected = np.einsum("nmq,nq,nkq->nmk", J, S, J)
    got = k.psi2n_centred(mu, S, Z)
    if not expected.any():  # bias, white: nothing varies
        assert not got.any()
        return
    assert_rel(got, expected, 1e-6)


def test_centred_psi2n_of_an_inducing_input_far_from_the_points_is_finite():
    """An inducing input parked far from q(x_n) (|z| = 110 where alpha = 0.76, as a fitted
    walk model had it): psi1 underflows to 0 while the log ratio exceeds 709, and
    psi1 psi1 expm1(ratio) was 0 x inf = NaN (its forecast variances were not finite).
    The product is now taken in logs there; it equals Psi2^n - psi1 psi1^T, ~0."""
    k = RBF(2, variance=2.0, lengthscale=np.array([1 / np.sqrt(0.76), 1.0]))
    rng = np.random.default_rng(0)
    mu, S = rng.standard_normal((40, 2)), np.full((40, 2), 1.0)
    S[:5] = 50.0
    Z = np.r_[rng.standard_normal((6, 2)), [[110.0, 0.0], [-90.0, 3.0]]]
    got = k.psi2n_centred(mu, S, Z)
    p1 = k.psi1(mu, S, Z)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, k.psi2n(mu, S, Z) - p1[:, :, None] * p1[:, None, :], rtol=0, atol=1e-14)


# ------------------------------------------------------------------------------------------
# gradients
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_psi_gradients_match_complex_step(case, symmetric):
    """psi_gradients equals the complex-step derivative of the naive reference objective
    L = sum w0 psi0 + sum W1 Psi1 + sum W2 Psi2 (also for a non-symmetric W2)."""
    N, M, Q = 5, 4, 3
    k = build(case, Q)
    mu, S, Z = gaussians(N, M, Q, seed=2)
    w0, W1, W2 = weights(N, M, symmetric=symmetric)
    pk = Packer(k, N, M, Q)
    x = pk.pack(mu, S, Z, k.params)
    L, g = compiled_objective(k, pk, w0, W1, W2)(x)
    fref = reference_objective(k, pk, w0, W1, W2)
    np.testing.assert_allclose(L, fref(x), rtol=1e-11)
    assert_close_gradient(g, complex_step_gradient(fref, x), rtol=1e-10, atol=0.0, names=pk.names())


@pytest.mark.parametrize("case", CASES)
def test_psi_gradients_central_differences(case):
    N, M, Q = 4, 3, 2
    k = build(case, Q)
    mu, S, Z = gaussians(N, M, Q, seed=4)
    w0, W1, W2 = weights(N, M, seed=5)
    pk = Packer(k, N, M, Q)
    assert_gradient(compiled_objective(k, pk, w0, W1, W2), pk.pack(mu, S, Z, k.params),
                    rtol=1e-6, atol=1e-8, eps=1e-6, names=pk.names())


@pytest.mark.parametrize("case", CASES)
def test_gradients_finite_at_degenerate_points(case):
    """An inducing input exactly at a mean, tiny and exactly zero variances."""
    N, M, Q = 4, 3, 2
    k = build(case, Q)
    mu, S, Z = gaussians(N, M, Q, seed=6)
    Z[0] = mu[0]
    Z[1] = mu[1]
    S[0] = 1e-10
    S[1] = 0.0
    w0, W1, W2 = weights(N, M, seed=7)
    pk = Packer(k, N, M, Q)
    x = pk.pack(mu, S, Z, k.params)
    L, g = compiled_objective(k, pk, w0, W1, W2)(x)
    assert np.isfinite(L) and np.all(np.isfinite(g))
    fref = reference_objective(k, pk, w0, W1, W2)
    assert_close_gradient(g, complex_step_gradient(fref, x), rtol=1e-10, atol=0.0, names=pk.names())


# ------------------------------------------------------------------------------------------
# serial vs parallel
# ------------------------------------------------------------------------------------------
def test_parallel_blocks_cover_every_point():
    """More blocks than threads and uneven blocks still sum every point exactly once."""
    from bgplvm.kernels import _rbf_numba as nb

    N, M, Q = 11, 4, 2
    k = build("rbf", Q)
    mu, S, Z = gaussians(N, M, Q, seed=10)
    w0, W1, W2 = weights(N, M, seed=11)
    args = (mu, S, Z, k.sf2, k.alpha)
    psi2_one = nb.psi2(*args, 1)
    g_one = nb.psi_gradients(w0, W1, W2, *args, True, True, 1)
    assert_rel(psi2_one, ref.sum_psi(ref_parts(k), mu, S, Z)[2].sum(0))
    for nchunks in (3, 11):
        assert_rel(nb.psi2(*args, nchunks), psi2_one, 1e-12)
        g = nb.psi_gradients(w0, W1, W2, *args, True, True, nchunks)
        for a, b in zip(g, g_one):
            assert_rel(a, b, 1e-12)


@pytest.mark.parametrize("case", CASES)
def test_results_do_not_depend_on_the_thread_count(case):
    """Blocks are fixed by the number of points, not by the threads that run them: one
    thread and all threads give the same bits (fits do not depend on the machine's load)."""
    N, M, Q = 151, 6, 3  # above MIN_PARALLEL_POINTS, not a multiple of the number of blocks
    k = build(case, Q)
    mu, S, Z = gaussians(N, M, Q, seed=18)
    w0, W1, W2 = weights(N, M, seed=19)
    results = []
    for par in (False, True):
        with cfg.parallel_mode(par):
            results.append([k.K(mu, Z), k.K(Z), k.psi0(mu, S), k.psi1(mu, S, Z), k.psi2(mu, S, Z),
                            k.psi2n(mu, S, Z), *k.psi_gradients(w0, W1, W2, mu, S, Z)])
    for a, b in zip(*results):
        if isinstance(a, dict):
            for key in a:
                np.testing.assert_array_equal(a[key], b[key])
        else:
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("layout", ["unit", "far points", "offset", "short lengthscales"])
def test_rbf_chunks_match_reference(layout):
    """Several chunks of points (N not a multiple of the chunk or of 4), far points, all
    inputs far from the origin, short lengthscales: Psi2 and the gradients of the RBF kernel
    against the reference (Psi2 is computed from a factored exponent, see _rbf_numba)."""
    from bgplvm.kernels import _rbf_numba as nb

    N, M, Q = 2 * nb.CHUNK + 7, 7, 3
    mu, S, Z = gaussians(N, M, Q, seed=15)
    ell = np.array([0.8, 1.5, 1.1])
    if layout == "far points":
        mu[:4] *= 8.0
    elif layout == "offset":
        mu, Z = mu + 40.0, Z + 40.0
    elif layout == "short lengthscales":
        ell = ell / 6.0
    k = RBF(Q, variance=1.4, lengthscale=ell)
    w0, W1, W2 = weights(N, M, seed=16, symmetric=False)
    assert_rel(k.psi2(mu, S, Z), ref.sum_psi(ref_parts(k), mu, S, Z)[2].sum(0))
    pk = Packer(k, N, M, Q)
    x = pk.pack(mu, S, Z, k.params)
    g_one = nb.psi_gradients(w0, W1, W2, mu, S, Z, k.sf2, k.alpha, True, True, 1)
    for nchunks in (2, 3):
        g = nb.psi_gradients(w0, W1, W2, mu, S, Z, k.sf2, k.alpha, True, True, nchunks)
        for a, b in zip(g, g_one):
            assert_rel(a, b, 1e-12)
        assert_rel(nb.psi2(mu, S, Z, k.sf2, k.alpha, nchunks), nb.psi2(mu, S, Z, k.sf2, k.alpha, 1), 1e-12)
    _, g = compiled_objective(k, pk, w0, W1, W2)(x)
    g_ref = complex_step_gradient(reference_objective(k, pk, w0, W1, W2), x)
    assert_close_gradient(g, g_ref, rtol=1e-10, atol=0.0, names=pk.names())


@pytest.mark.parametrize("zero", ["W1", "W2"])
@pytest.mark.parametrize("case", ["rbf", "linear", "rbf+linear+bias"])
def test_psi_gradients_with_zero_weight_blocks(case, zero):
    """The shortcuts taken when dL_dPsi1 or dL_dPsi2 is all zero."""
    N, M, Q = 6, 4, 2
    k = build(case, Q)
    mu, S, Z = gaussians(N, M, Q, seed=12)
    w0, W1, W2 = weights(N, M, seed=13)
    if zero == "W1":
        W1 = np.zeros_like(W1)
    else:
        W2 = np.zeros_like(W2)
    pk = Packer(k, N, M, Q)
    x = pk.pack(mu, S, Z, k.params)
    _, g = compiled_objective(k, pk, w0, W1, W2)(x)
    fref = reference_objective(k, pk, w0, W1, W2)
    assert_close_gradient(g, complex_step_gradient(fref, x), rtol=1e-10, atol=0.0, names=pk.names())


# ------------------------------------------------------------------------------------------
# per-point Psi2 weights (test time): psi_gradients_n
# ------------------------------------------------------------------------------------------
def weights_n(N, M, seed=21, symmetric=True):
    rng = np.random.default_rng(seed)
    W2n = rng.standard_normal((N, M, M))
    if symmetric:
        W2n = W2n + np.transpose(W2n, (0, 2, 1))
    return W2n


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_psi_gradients_n_match_complex_step(case, symmetric):
    """psi_gradients_n equals the complex-step derivative (w.r.t. mu, S) of the naive
    reference L = sum w0 psi0 + sum W1 Psi1 + sum_n sum W2n[n] Psi2^n."""
    N, M, Q = 5, 4, 3
    k = build(case, Q)
    mu, S, Z = gaussians(N, M, Q, seed=22)
    w0, W1, _ = weights(N, M, seed=23)
    W2n = weights_n(N, M, symmetric=symmetric)
    parts = ref_parts(k)

    def f(x):
        m, s = x[:N * Q].reshape(N, Q), x[N * Q:].reshape(N, Q)
        p0, p1, p2 = ref.sum_psi(parts, m, s, Z)
        return np.sum(w0 * p0) + np.sum(W1 * p1) + np.sum(W2n * p2)

    dmu, dS = k.psi_gradients_n(w0, W1, W2n, mu, S, Z)
    assert dmu.shape == dS.shape == (N, Q)
    g_ref = complex_step_gradient(f, np.concatenate([mu.ravel(), S.ravel()]))
    assert_close_gradient(np.concatenate([dmu.ravel(), dS.ravel()]), g_ref, rtol=1e-10, atol=0.0)


@pytest.mark.parametrize("case", CASES)
def test_psi_gradients_n_equal_per_point_psi_gradients(case):
    """Row n of psi_gradients_n is psi_gradients of the single point n with dL_dPsi2 = W2n[n]."""
    N, M, Q = 6, 5, 3
    k = build(case, Q)
    mu, S, Z = gaussians(N, M, Q, seed=24)
    w0, W1, _ = weights(N, M, seed=25)
    W2n = weights_n(N, M, seed=26, symmetric=False)
    dmu, dS = k.psi_gradients_n(w0, W1, W2n, mu, S, Z)
    for n in range(N):
        gmu, gS, _, _ = k.psi_gradients(w0[n:n + 1], W1[n:n + 1], W2n[n], mu[n:n + 1], S[n:n + 1], Z)
        assert_rel(dmu[n], gmu[0], 1e-11)
        assert_rel(dS[n], gS[0], 1e-11)


@pytest.mark.parametrize("case", ["rbf", "linear", "rbf+linear+bias", "linear+linear"])
def test_psi_gradients_n_serial_and_parallel_agree(case):
    N, M, Q = 37, 6, 3
    k = build(case, Q)
    mu, S, Z = gaussians(N, M, Q, seed=27)
    w0, W1, _ = weights(N, M, seed=28)
    W2n = weights_n(N, M, seed=29)
    out = []
    for par in (False, True):
        with cfg.parallel_mode(par):
            out.append(k.psi_gradients_n(w0, W1, W2n, mu, S, Z))
    for a, b in zip(*out):
        assert_rel(a, b, 1e-12)


def test_psi_gradients_n_rejects_wrong_shapes():
    k = build("rbf", 2)
    mu, S, Z = gaussians(3, 4, 2)
    with pytest.raises(ValueError, match="dL_dPsi2n"):
        k.psi_gradients_n(np.zeros(3), np.zeros((3, 4)), np.zeros((4, 4)), mu, S, Z)

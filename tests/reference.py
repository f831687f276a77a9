"""Naive NumPy references for the kernels: straightforward broadcasting of the formulas.

Written independently of ``model/kernels`` (no shared code) and complex-step safe (only
+, *, /, exp, sqrt, integer powers), so ``gradcheck.complex_step_gradient`` turns them
into reference gradients exact to rounding. Memory is O(N M^2 Q): small sizes only.

A kernel is described by ``(kind, params)`` with kind in {"rbf", "linear", "bias",
"white"} and params the kernel's dict ("variance", "lengthscale", "variances").
"""

from __future__ import annotations

import numpy as np


# --- kernel matrices ---------------------------------------------------------------------
def K(kind, p, X, X2=None):
    same = X2 is None
    X2 = X if same else X2
    N, N2 = X.shape[0], X2.shape[0]
    if kind == "rbf":
        alpha = 1.0 / p["lengthscale"] ** 2
        r2 = np.sum(alpha * (X[:, None, :] - X2[None, :, :]) ** 2, axis=-1)
        return p["variance"] * np.exp(-0.5 * r2)
    if kind == "linear":
        return (X * p["variances"]) @ X2.T
    if kind == "bias":
        return p["variance"] * np.ones((N, N2))
    if kind == "white":
        return p["variance"] * np.eye(N) if same else np.zeros((N, N2))
    raise ValueError(kind)


def Kdiag(kind, p, X):
    if kind == "linear":
        return np.sum(p["variances"] * X**2, axis=1)
    if kind in ("rbf", "bias", "white"):
        return p["variance"] * np.ones(X.shape[0])
    raise ValueError(kind)


# --- psi statistics of one kernel ------------------------------------------------------
def psi0(kind, p, mu, S):
    if kind == "linear":
        return np.sum(p["variances"] * (mu**2 + S), axis=1)
    return p["variance"] * np.ones(mu.shape[0])


def psi1(kind, p, mu, S, Z):
    N, M = mu.shape[0], Z.shape[0]
    if kind == "rbf":
        alpha = 1.0 / p["lengthscale"] ** 2
        den = alpha * S + 1.0                                      # (N, Q)
        u2 = (mu[:, None, :] - Z[None, :, :]) ** 2                  # (N, M, Q)
        ex = np.exp(-0.5 * np.sum(alpha * u2 / den[:, None, :], axis=-1))
        return p["variance"] * ex / np.prod(np.sqrt(den), axis=1)[:, None]
    if kind == "linear":
        return mu @ (Z * p["variances"]).T
    if kind == "bias":
        return p["variance"] * np.ones((N, M))
    if kind == "white":
        return np.zeros((N, M))
    raise ValueError(kind)


def psi2n(kind, p, mu, S, Z):
    """(N, M, M) per-point Psi2^n."""
    N, M = mu.shape[0], Z.shape[0]
    if kind == "rbf":
        alpha = 1.0 / p["lengthscale"] ** 2
        den = 2.0 * alpha * S + 1.0                                 # (N, Q)
        zbar = 0.5 * (Z[:, None, :] + Z[None, :, :])                # (M, M, Q)
        dz2 = (Z[:, None, :] - Z[None, :, :]) ** 2                  # (M, M, Q)
        t2 = (mu[:, None, None, :] - zbar[None]) ** 2               # (N, M, M, Q)
        ex = np.exp(-np.sum(alpha * dz2, axis=-1)[None] / 4.0
                    - np.sum(alpha * t2 / den[:, None, None, :], axis=-1))
        return p["variance"] ** 2 * ex / np.prod(np.sqrt(den), axis=1)[:, None, None]
    if kind == "linear":
        A = Z * p["variances"]                                      # (M, Q)
        a = mu @ A.T                                                # (N, M)
        return a[:, :, None] * a[:, None, :] + np.einsum("mq,nq,kq->nmk", A, S, A)
    if kind == "bias":
        return p["variance"] ** 2 * np.ones((N, M, M))
    if kind == "white":
        return np.zeros((N, M, M))
    raise ValueError(kind)


# --- cross terms of a sum ------------------------------------------------------------------
def cross_n(kind_i, p_i, kind_j, p_j, mu, S, Z):
    """(N, M, M) E[k_i(z_m, x) k_j(x, z_m') + k_j(z_m, x) k_i(x, z_m')] per point."""
    kinds = {kind_i, kind_j}
    N, M = mu.shape[0], Z.shape[0]
    if "white" in kinds:
        return np.zeros((N, M, M))
    if kind_i == "bias" or kind_j == "bias":
        (kb, pb), (ko, po) = ((kind_i, p_i), (kind_j, p_j)) if kind_i == "bias" else ((kind_j, p_j), (kind_i, p_i))
        P1 = psi1(ko, po, mu, S, Z)
        return pb["variance"] * (P1[:, :, None] + P1[:, None, :])
    if kinds == {"rbf", "linear"}:
        pr, pl = (p_i, p_j) if kind_i == "rbf" else (p_j, p_i)
        alpha = 1.0 / pr["lengthscale"] ** 2
        P1 = psi1("rbf", pr, mu, S, Z)                              # (N, M)
        den = 1.0 + alpha * S                                       # (N, Q)
        mhat = (mu[:, None, :] + (alpha * S)[:, None, :] * Z[None]) / den[:, None, :]  # (N, M, Q)
        C = P1[:, :, None] * np.einsum("nmq,kq->nmk", mhat, Z * pl["variances"])
        return C + np.transpose(C, (0, 2, 1))
    if kind_i == "linear" and kind_j == "linear":
        A, B = Z * p_i["variances"], Z * p_j["variances"]
        a, b = mu @ A.T, mu @ B.T
        C = a[:, :, None] * b[:, None, :] + np.einsum("mq,nq,kq->nmk", A, S, B)
        return C + np.transpose(C, (0, 2, 1))
    raise NotImplementedError(f"no closed-form cross term for {kind_i} x {kind_j}")


# --- sums ----------------------------------------------------------------------------------
def sum_psi(parts, mu, S, Z):
    """(psi0 (N,), Psi1 (N, M), Psi2n (N, M, M)) of sum_i k_i, parts = [(kind, params)]."""
    p0 = sum(psi0(k, p, mu, S) for k, p in parts)
    p1 = sum(psi1(k, p, mu, S, Z) for k, p in parts)
    p2 = sum(psi2n(k, p, mu, S, Z) for k, p in parts)
    for i in range(len(parts)):
        for j in range(i + 1, len(parts)):
            p2 = p2 + cross_n(*parts[i], *parts[j], mu, S, Z)
    return p0, p1, p2


def sum_K(parts, X, X2=None):
    return sum(K(k, p, X, X2) for k, p in parts)


def objective(parts, mu, S, Z, w0, W1, W2):
    """L = sum_n w0_n psi0_n + sum W1 * Psi1 + sum W2 * Psi2 (GPy's gradient-test objective)."""
    p0, p1, p2 = sum_psi(parts, mu, S, Z)
    return np.sum(w0 * p0) + np.sum(W1 * p1) + np.sum(W2[None] * p2)

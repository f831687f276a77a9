"""Sum of kernels, with the exact cross terms of Psi2.

Psi2 of k = sum_i k_i is sum_i Psi2_i plus, for every pair i < j,
E[k_i(z_m, x) k_j(x, z_m') + k_j(z_m, x) k_i(x, z_m')], in closed form for:

- white x anything: 0 (Psi1_white = 0 and white noise is independent of the other parts);
- bias x anything:  v_b (Psi1_j[n, m] + Psi1_j[n, m']);
- rbf x linear:     C + C^T with C = H A^T (see ``_cross_numba``; exact on shared dims);
- linear x linear:  A_i C A_j^T + A_j C A_i^T, C = sum_n E[x_n x_n^T].

rbf x rbf is not implemented (psi statistics raise NotImplementedError; K works).
psi0 and Psi1 are plain sums.
"""

from __future__ import annotations

import numpy as np

from . import _cross_numba as _cx
from ._util import as_gaussians, as_points, psi_gradient_inputs, psi_gradient_n_inputs, run_blocks
from .base import Kernel
from .bias import Bias, White
from .linear import Linear
from .rbf import RBF


class Sum(Kernel):
    """k = sum of ``parts``; parameters flattened as "<prefix>.<name>".

    The prefix is the part's name, numbered from its second occurrence: "rbf", "bias",
    "rbf_1", ... (e.g. "rbf.variance", "rbf.lengthscale", "bias.variance"). ``params``,
    ``psi_gradients`` and ``K_gradients`` all use these keys, in the same order. Nested
    sums are flattened. ``ard_weights`` are those of the first RBF part, else of the first
    linear part, else None.
    """

    name = "sum"

    def __init__(self, parts):
        flat: list[Kernel] = []
        for p in parts:
            flat.extend(p.parts if isinstance(p, Sum) else [p])
        if not flat:
            raise ValueError("Sum needs at least one part")
        dims = {p.input_dim for p in flat}
        if len(dims) != 1:
            raise ValueError(f"all parts of a sum need the same input_dim, got {sorted(dims)}")
        self.input_dim = dims.pop()
        self.parts: list[Kernel] = flat
        counts: dict[str, int] = {}
        self.prefixes: list[str] = []
        for p in flat:
            c = counts.get(p.name, 0)
            counts[p.name] = c + 1
            self.prefixes.append(p.name if c == 0 else f"{p.name}_{c}")

    # --- parameters -------------------------------------------------------------------
    @property
    def params(self) -> dict[str, np.ndarray]:
        return {f"{pre}.{k}": v for pre, part in zip(self.prefixes, self.parts)
                for k, v in part.params.items()}

    @params.setter
    def params(self, value) -> None:  # Kernel.__init__ compatibility; parts hold the values
        if value:
            raise AttributeError("set the parameters of a Sum with set_params")

    def set_params(self, **values) -> None:
        known = self.params
        by_part: list[dict] = [{} for _ in self.parts]
        for key, v in values.items():
            if key not in known:
                raise KeyError(f"Sum has no parameter {key!r}; has {list(known)}")
            prefix, name = key.split(".", 1)
            by_part[self.prefixes.index(prefix)][name] = v
        for part, vals in zip(self.parts, by_part):
            if vals:
                part.set_params(**vals)

    def _prefixed(self, i: int, d: dict) -> dict:
        return {f"{self.prefixes[i]}.{k}": v for k, v in d.items()}

    @property
    def ard_weights(self):
        for cls in (RBF, Linear):
            for p in self.parts:
                if isinstance(p, cls):
                    return p.ard_weights
        return None

    def __repr__(self) -> str:
        return " + ".join(repr(p) for p in self.parts)

    # --- deterministic inputs ---------------------------------------------------------
    def K(self, X, X2=None):
        return sum(p.K(X, X2) for p in self.parts)

    def Kdiag(self, X):
        return sum(p.Kdiag(X) for p in self.parts)

    def K_gradients(self, dL_dK, X):
        dX = np.zeros_like(as_points(X, self.input_dim))
        grads = {}
        for i, p in enumerate(self.parts):
            dXi, gi = p.K_gradients(dL_dK, X)
            dX += dXi
            grads.update(self._prefixed(i, gi))
        return dX, grads

    # --- psi statistics ---------------------------------------------------------------
    def psi0(self, mu, S):
        return sum(p.psi0(mu, S) for p in self.parts)

    def psi1(self, mu, S, Z):
        return sum(p.psi1(mu, S, Z) for p in self.parts)

    def _pairs(self):
        """Pairs (i, j), i < j, whose cross term is not zero, with their kind."""
        out = []
        for i in range(len(self.parts)):
            for j in range(i + 1, len(self.parts)):
                a, b = self.parts[i], self.parts[j]
                if isinstance(a, White) or isinstance(b, White):
                    continue
                if isinstance(a, Bias) or isinstance(b, Bias):
                    out.append(("bias", i, j) if isinstance(a, Bias) else ("bias", j, i))
                elif isinstance(a, RBF) and isinstance(b, Linear):
                    out.append(("rbf_linear", i, j))
                elif isinstance(a, Linear) and isinstance(b, RBF):
                    out.append(("rbf_linear", j, i))
                elif isinstance(a, Linear) and isinstance(b, Linear):
                    out.append(("linear_linear", i, j))
                else:
                    raise NotImplementedError(
                        f"no closed-form Psi2 cross term for {a.name} + {b.name}; supported: "
                        "white or bias with anything, rbf + linear, linear + linear")
        return out

    def psi2(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        pairs = self._pairs()
        out = sum(p.psi2(mu, S, Z) for p in self.parts)
        for kind, i, j in pairs:
            a, b = self.parts[i], self.parts[j]
            if kind == "bias":
                s = b.psi1(mu, S, Z).sum(0)
                C = a.variance * np.broadcast_to(s, out.shape)
            elif kind == "rbf_linear":
                H = run_blocks(_cx.rbf_moment, mu.shape[0], mu, S, Z, a.sf2, a.alpha)
                C = H @ (Z * b.variances).T
            else:  # linear_linear
                C = (Z * a.variances) @ a.second_moment(mu, S) @ (Z * b.variances).T
            out = out + (C + C.T)  # exactly symmetric
        return out

    def psi2n(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        pairs = self._pairs()
        out = sum(p.psi2n(mu, S, Z) for p in self.parts)
        for kind, i, j in pairs:
            a, b = self.parts[i], self.parts[j]
            if kind == "bias":
                P1 = b.psi1(mu, S, Z)
                out = out + a.variance * (P1[:, :, None] + P1[:, None, :])
            elif kind == "rbf_linear":
                A = np.ascontiguousarray(Z * b.variances)
                out = out + run_blocks(_cx.cross_n, mu.shape[0], mu, S, Z, a.sf2, a.alpha, A)
            else:
                Ai, Aj = Z * a.variances, Z * b.variances
                ai, aj = mu @ Ai.T, mu @ Aj.T
                C = ai[:, :, None] * aj[:, None, :] + np.einsum("mq,nq,kq->nmk", Ai, S, Aj)
                out = out + C + np.transpose(C, (0, 2, 1))
        return out

    def psi2n_centred(self, mu, S, Z):
        """See :meth:`Kernel.psi2n_centred`: the parts' own, plus each cross pair's
        Psi2 term less psi1_i psi1_j^T (+ transpose): zero with a bias (a constant does not
        covary), A_i diag(S_n) A_j^T for two linear parts, Cov(k_rbf(x, Z), x) A^T for rbf x
        linear (the tilted Gaussian's mean shift: nothing large is subtracted)."""
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        out = sum(p.psi2n_centred(mu, S, Z) for p in self.parts)
        for kind, i, j in self._pairs():
            a, b = self.parts[i], self.parts[j]
            if kind == "bias":
                continue
            if kind == "rbf_linear":
                # Cov(k_rbf(x, z_m), x_q) = psi1_m s_q (z_mq - mu_q) / (1 + s_q), s = alpha S
                s = a.alpha * S  # (N, Q)
                H = a.psi1(mu, S, Z)[:, :, None] * ((s / (1.0 + s))[:, None, :] * (Z[None] - mu[:, None, :]))
                C = H @ (Z * b.variances).T
            else:
                C = np.einsum("mq,nq,kq->nmk", Z * a.variances, S, Z * b.variances)
            out = out + C + np.transpose(C, (0, 2, 1))
        return out

    def psi_gradients(self, dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z):
        """See :meth:`Kernel.psi_gradients`; exact for any (M, M) dL_dPsi2.

        The bias cross terms are folded into the other part's dL_dPsi1 (Psi2 gains
        v_b (Psi1_j[n, m] + Psi1_j[n, m']), i.e. dL/dPsi1_j += v_b (W2 1 + W2^T 1)^T).
        """
        dL_dpsi0, dL_dPsi1, W2, mu, S, Z = psi_gradient_inputs(
            self, dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z)
        N = mu.shape[0]
        Ws = W2 + W2.T
        pairs = self._pairs()
        dmu, dS, dZ = np.zeros_like(mu), np.zeros_like(S), np.zeros_like(Z)
        grads = {k: np.zeros_like(v) for k, v in self.params.items()}
        W1 = [dL_dPsi1] * len(self.parts)
        wsum = Ws.sum(0)  # (M,) row + column sums of W2
        for kind, i, j in pairs:
            a, b = self.parts[i], self.parts[j]
            if kind == "bias":  # a is the bias
                W1[j] = W1[j] + a.variance * wsum[None, :]
                grads[f"{self.prefixes[i]}.variance"] += b.psi1(mu, S, Z).sum(0) @ wsum
            elif kind == "rbf_linear":  # a rbf, b linear
                WsZ = Ws @ Z
                V = np.ascontiguousarray(WsZ * b.variances)
                gmu, gS, gZ, gsf2, galpha, H = run_blocks(_cx.grad, N, mu, S, Z, a.sf2, a.alpha, V)
                dmu += gmu
                dS += gS
                dZ += gZ + Ws @ (H * b.variances)
                for key, g in a._theta_grads(gsf2, galpha).items():
                    grads[f"{self.prefixes[i]}.{key}"] += g
                grads[f"{self.prefixes[j]}.variances"] += np.sum(H * WsZ, axis=0)
            else:  # linear_linear: L_x = sum Ws * (A_i C A_j^T)
                Ai, Aj = Z * a.variances, Z * b.variances
                C = a.second_moment(mu, S)
                G = Ai.T @ Ws @ Aj  # dL_x/dC
                dmu += mu @ (G + G.T)
                dS += np.diag(G)[None, :]
                dAi, dAj = Ws @ Aj @ C, Ws @ Ai @ C
                dZ += dAi * a.variances + dAj * b.variances
                grads[f"{self.prefixes[i]}.variances"] += np.sum(dAi * Z, axis=0)
                grads[f"{self.prefixes[j]}.variances"] += np.sum(dAj * Z, axis=0)
        for i, p in enumerate(self.parts):
            gmu, gS, gZ, gth = p.psi_gradients(dL_dpsi0, W1[i], W2, mu, S, Z)
            dmu += gmu
            dS += gS
            dZ += gZ
            for key, g in gth.items():
                grads[f"{self.prefixes[i]}.{key}"] += g
        return dmu, dS, dZ, grads

    def psi_gradients_n(self, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z):
        """See :meth:`Kernel.psi_gradients_n`: ``psi_gradients`` with a weight W2n[n] per point.

        Cross terms per point, with Ws_n = W2n[n] + W2n[n]^T: bias folds v_b (row sums of
        Ws_n) into the other part's dL_dPsi1[n]; rbf x linear uses V_n = (Ws_n Z) diag(b)
        (``_cross_numba.grad_n``); linear x linear G_n = A_i^T Ws_n A_j gives
        dmu_n = (G_n + G_n^T) mu_n, dS_n = diag(G_n).
        """
        dL_dpsi0, dL_dPsi1, W2n, mu, S, Z = psi_gradient_n_inputs(
            self, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z)
        N = mu.shape[0]
        Ws = W2n + np.transpose(W2n, (0, 2, 1))  # (N, M, M)
        dmu, dS = np.zeros_like(mu), np.zeros_like(S)
        W1 = [dL_dPsi1] * len(self.parts)
        for kind, i, j in self._pairs():
            a, b = self.parts[i], self.parts[j]
            if kind == "bias":  # a is the bias
                W1[j] = W1[j] + a.variance * Ws.sum(1)
            elif kind == "rbf_linear":  # a rbf, b linear
                Vn = np.ascontiguousarray((Ws @ Z) * b.variances)  # (N, M, Q)
                gmu, gS = run_blocks(_cx.grad_n, N, mu, S, Z, a.sf2, a.alpha, Vn)
                dmu += gmu
                dS += gS
            else:  # linear_linear
                Ai, Aj = Z * a.variances, Z * b.variances
                G = np.einsum("mq,nmk,kr->nqr", Ai, Ws, Aj)  # (N, Q, Q)
                dmu += np.einsum("nqr,nr->nq", G + np.transpose(G, (0, 2, 1)), mu)
                dS += np.einsum("nqq->nq", G)
        for i, p in enumerate(self.parts):
            gmu, gS = p.psi_gradients_n(dL_dpsi0, W1[i], W2n, mu, S, Z)
            dmu += gmu
            dS += gS
        return dmu, dS

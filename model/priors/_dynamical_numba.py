"""Compiled forward and backward passes of one block of the dynamical prior
(``dynamical._block_forward`` / ``_block_backward``; the mathematics is in that module's
docstring).

Each block's work is one call here: the O(Q n^2) element-wise parts as loops (NumPy's
broadcasting made (Q, n, n) temporaries that cost as much as the factorisations on CMU's
34-113-frame blocks), the Cholesky factorisations and inverses with LAPACK's potrf / potri
and the one large product with BLAS's syrk. LAPACK and BLAS are SciPy's, called through
their Cython entry points (``scipy.linalg.cython_lapack`` / ``cython_blas``) as external
symbols, so that the calls hold neither Python's GIL nor a wrapper's per-call overhead: the
prior's thread pool then runs blocks truly in parallel (SciPy's Python-level LAPACK
wrappers keep the GIL). The functions cache like every other kernel: the symbols are
registered by name when this module is imported.

Shapes: Q latent dimensions, n frames of the block; arrays contiguous float64, C order. A
C-order symmetric (n, n) matrix is its own Fortran-order transpose, so LAPACK's "U"
(upper, Fortran) works on the C array's lower triangle.
"""

from __future__ import annotations

import math

import llvmlite.binding as _llvm
import numpy as np
from numba import njit, types
from numba.extending import get_cython_function_address

from .._numba_config import STRICT_SERIAL_OPTIONS as _SERIAL

for _module, _name in (("scipy.linalg.cython_lapack", "dpotrf"),
                       ("scipy.linalg.cython_lapack", "dpotri"),
                       ("scipy.linalg.cython_blas", "dsyrk")):
    _llvm.add_symbol("bgplvm_" + _name, get_cython_function_address(_module, _name))

_P = types.voidptr
#: dpotrf / dpotri(uplo, n, a, lda, info)
_dpotrf = types.ExternalFunction("bgplvm_dpotrf", types.void(_P, _P, _P, _P, _P))
_dpotri = types.ExternalFunction("bgplvm_dpotri", types.void(_P, _P, _P, _P, _P))
#: dsyrk(uplo, trans, n, k, alpha, a, lda, beta, c, ldc)
_dsyrk = types.ExternalFunction("bgplvm_dsyrk", types.void(_P, _P, _P, _P, _P, _P, _P, _P, _P, _P))

_U = ord("U")
_N = ord("N")


@njit(**_SERIAL)
def block_forward(K, d, A, logdet, diag):
    """A_q = I + D_q K D_q (D_q = diag(d[q])), then its inverse in place, for q = 1..Q.

    K (n, n), d (Q, n) in;  A (Q, n, n) out: A_q^{-1} (both triangles);  logdet (Q,) out:
    log|A_q|;  diag (Q, n) out: the diagonal of A_q^{-1}. Returns 0, or the LAPACK info
    (potrf's > 0: not positive definite; potri's as its negative) of the first failure."""
    Q, n = d.shape
    uplo = np.full(1, _U, dtype=np.uint8)
    nn = np.full(1, n, dtype=np.int32)
    info = np.zeros(1, dtype=np.int32)
    for q in range(Q):
        a = A[q]
        for i in range(n):
            di = d[q, i]
            for j in range(i + 1):  # lower triangle only: LAPACK reads no more
                a[i, j] = di * K[i, j] * d[q, j]
            a[i, i] += 1.0
        _dpotrf(uplo.ctypes, nn.ctypes, a.ctypes, nn.ctypes, info.ctypes)  # A = U^T U
        if info[0] != 0:
            return info[0]
        s = 0.0
        for i in range(n):
            s += math.log(a[i, i])
        logdet[q] = 2.0 * s
        _dpotri(uplo.ctypes, nn.ctypes, a.ctypes, nn.ctypes, info.ctypes)
        if info[0] != 0:
            return -info[0]
        for i in range(n):
            diag[q, i] = a[i, i]
            for j in range(i):
                a[j, i] = a[i, j]
    return 0


@njit(**_SERIAL)
def _backward_rows(Abar, d, lam, h, dlam, rows, C):
    """The O(Q n^2) parts of the backward pass. Writes
        dlam[q, i] = -(1/lam_qi) sum_j ((I - Abar_q)_ij)^2 h_qj             (Q, n)
        C          = -1/2 sum_q D_q Abar_q D_q                              (n, n)
        rows       (Q n, n): row (q, j) is sqrt|h_qj| (D_q Abar_q)[:, j], those with
                   h_qj >= 0 first,
    so that sum_q D_q Abar_q diag(h_q) Abar_q D_q = R+^T R+ - R-^T R-. Returns the number of
    rows with h >= 0."""
    Q, n, _ = Abar.shape
    C[:, :] = 0.0
    npos = 0
    for q in range(Q):
        for j in range(n):
            if h[q, j] >= 0.0:
                npos += 1
    ip, im = 0, npos
    for q in range(Q):
        for i in range(n):
            s = 0.0
            for j in range(n):
                a = -Abar[q, i, j]
                if i == j:
                    a += 1.0
                s += a * a * h[q, j]
            dlam[q, i] = -s / lam[q, i]
        for j in range(n):
            hj = h[q, j]
            if hj >= 0.0:
                r = ip
                ip += 1
            else:
                r = im
                im += 1
            w = math.sqrt(abs(hj))
            dj = d[q, j]
            for i in range(n):
                a = Abar[q, j, i]
                rows[r, i] = w * d[q, i] * a
                C[j, i] -= 0.5 * dj * a * d[q, i]
    return npos


@njit(**_SERIAL)
def _syrk_lower(R, alpha, beta, G):
    """G's lower triangle := alpha R^T R + beta G (R (k, n) C order, G (n, n))."""
    k, n = R.shape
    if k == 0:
        return
    uplo = np.full(1, _U, dtype=np.uint8)
    trans = np.full(1, _N, dtype=np.uint8)
    nn = np.full(1, n, dtype=np.int32)
    kk = np.full(1, k, dtype=np.int32)
    al = np.full(1, alpha)
    be = np.full(1, beta)
    # R C-order (k, n) is the Fortran (n, k) matrix R^T: R^T (R^T)^T = R^T R
    _dsyrk(uplo.ctypes, trans.ctypes, nn.ctypes, kk.ctypes, al.ctypes, R.ctypes, nn.ctypes,
           be.ctypes, G.ctypes, nn.ctypes)


@njit(**_SERIAL)
def block_backward(K, mb, gmu, Abar, d, lam, h, dmb, dlam, dK, rows):
    """Gradients of one block (``dynamical._block_backward``).

    K (n, n); mb, gmu (n, Q); Abar (Q, n, n) = A_q^{-1}; d = sqrt(lam), lam, h (Q, n) in.
    dmb (n, Q) = K (gmu - mb);  dlam (Q, n);  dK (n, n) = sum_q [D Abar diag(h) Abar D
    - 1/2 D Abar D] + gmu mb^T - 1/2 mb mb^T out;  rows (Q n, n) workspace."""
    n, Q = mb.shape
    npos = _backward_rows(Abar, d, lam, h, dlam, rows, dK)
    G = np.zeros((n, n))
    _syrk_lower(rows[:npos], 1.0, 0.0, G)
    _syrk_lower(rows[npos:], -1.0, 1.0, G)
    for i in range(n):
        for j in range(i + 1):
            g = G[i, j]
            dK[i, j] += g
            if j != i:
                dK[j, i] += g
    for i in range(n):
        for j in range(n):
            s = 0.0
            for q in range(Q):
                s += gmu[i, q] * mb[j, q] - 0.5 * mb[i, q] * mb[j, q]
            dK[i, j] += s
    for i in range(n):
        for q in range(Q):
            dmb[i, q] = 0.0
        for j in range(n):
            kij = K[i, j]
            for q in range(Q):
                dmb[i, q] += kij * (gmu[j, q] - mb[j, q])

"""Compiled Psi2 of the RBF kernel summed per group of rows (missing training outputs).

With missing outputs (``bgplvm.missing``) the rows fall into R observation patterns (the
sets of outputs they observe) and the outputs into G groups (the sets of rows observing
them). A group's Psi2 is the sum of Psi2^n over the patterns that observe it:

    Psi2_g = sum_r inc[g, r] Psi2_r,    Psi2_r = sum_{n in pattern r} Psi2^n

``psi2_patterns`` gives every Psi2_r (as pair sums, (R, P), P = M(M+1)/2) in one pass over
the rows, sorted by pattern so that each pattern is a contiguous run: a block of rows
accumulates into the patterns it spans only, and the blocks are added in block order.
The group sums are then one GEMM (G, R) @ (R, P). No subtraction: every Psi2_g is a sum of
positive terms, as accurate as the complete-data Psi2 (the bound is sensitive to Psi2: a
group's Psi2 taken as Psi2 minus its missing rows moved it by 1e-9 relative on oil).

The gradient needs no kernel of its own: row n takes the pair weights of its pattern,
sum_g inc[g, r] w_g (``_rbf_numba.psi_gradients_w``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._numba_config import PARALLEL_OPTIONS as _PARALLEL
from .._numba_config import SERIAL_OPTIONS as _SERIAL
from ._fastexp import exp_into
from ._rbf_numba import CHUNK, _psi2_chunk_log, factored_tables


@njit(**_SERIAL)
def _psi2_pattern_rows(n0, n1, seg, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, acc):
    """Rows n0 <= n < n1 (sorted by pattern): acc[seg[n] - seg[n0]] += Psi2^n (pairs)."""
    Q = mu.shape[1]
    P = ZpT.shape[1]
    M = ZhT.shape[1]
    CH = CHUNK
    Ah = np.empty((CH, 2 * Q + 1))
    Gam = np.empty((CH, Q))
    d2 = np.empty((CH, Q))
    H = np.empty((CH, M))
    Xbuf = np.empty(CH * P)
    Ebuf = np.empty(CH * P)
    scratch = np.empty(CH * P)
    base = seg[n0]
    for c0 in range(n0, n1, CH):
        k = min(CH, n1 - c0)
        _psi2_chunk_log(c0, k, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, Ah, Gam, d2, H,
                        Xbuf[:k * P].reshape((k, P)))
        exp_into(Xbuf[:k * P], Ebuf[:k * P], scratch[:k * P])
        for j in range(k):
            a = acc[seg[c0 + j] - base]
            for p in range(P):
                a[p] += Ebuf[j * P + p]


@njit(**_PARALLEL)
def _psi2_pattern_blocks(N, nchunks, seg, off, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, buf):
    """The only parallel code: one block of rows per iteration (see psi2_patterns)."""
    P = ZpT.shape[1]
    for c in prange(nchunks):
        n0, n1 = c * N // nchunks, (c + 1) * N // nchunks
        if n1 > n0:
            span = off[c + 1] - off[c]
            _psi2_pattern_rows(n0, n1, seg, mu, S, shift, ZhT, ZpT, starts, sf2, alpha,
                               buf[off[c] * P:off[c + 1] * P].reshape((span, P)))


@njit(**_SERIAL)
def psi2_patterns(mu, S, Z, sf2, alpha, seg, R, nchunks):
    """(R, P) pair sums of Psi2^n over each pattern's rows; mu, S (N, Q) sorted by pattern,
    seg (N,) their non-decreasing pattern ids in 0..R-1."""
    N = mu.shape[0]
    shift, ZhT, ZpT, starts = factored_tables(Z)
    P = ZpT.shape[1]
    off = np.zeros(nchunks + 1, np.int64)
    for c in range(nchunks):
        n0, n1 = c * N // nchunks, (c + 1) * N // nchunks
        off[c + 1] = off[c] + (seg[n1 - 1] - seg[n0] + 1 if n1 > n0 else 0)
    buf = np.zeros(off[nchunks] * P)
    _psi2_pattern_blocks(N, nchunks, seg, off, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, buf)
    out = np.zeros((R, P))
    for c in range(nchunks):  # block order: the same sums whatever the threads
        n0, n1 = c * N // nchunks, (c + 1) * N // nchunks
        if n1 > n0:
            base = seg[n0]
            for r in range(off[c + 1] - off[c]):
                o = (off[c] + r) * P
                for p in range(P):
                    out[base + r, p] += buf[o + p]
    return out

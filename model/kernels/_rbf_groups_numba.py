"""Compiled Psi2 of the RBF kernel summed per group of rows (missing training outputs).

With missing outputs (``bgplvm.missing``) the rows fall into R observation patterns (the
sets of outputs they observe) and the outputs into G groups (the sets of rows observing
them). A group's Psi2 is the sum of Psi2^n over the patterns that observe it:

    Psi2_g = sum_r inc[g, r] Psi2_r,    Psi2_r = sum_{n in pattern r} Psi2^n

``psi2_groups`` sums them in one pass over the rows, sorted by pattern so that each
pattern is a contiguous run: a run is summed in a (P,) buffer (P = M(M+1)/2 pairs; a
row alone is not), then added to accumulators by **subsets**: the groups are cut into C = ceil(G / B) chunks of
B = ``SUBSET_BITS`` consecutive groups, and a run goes to ONE accumulator per chunk, the
one of the subset of the chunk's groups its pattern observes (``sub[r, c]``, a B-bit
mask; none when 0). At the end each group's Psi2_g is the sum of the 2^(B-1) subset
accumulators of its chunk that contain it. Per run that is C additions of P values
instead of one per observed group (oil at 30 % missing at random: 3 instead of 8.4 of
the 12 groups; Frey's 35 blocks: 9 instead of 32), for (C, 2^B, P) accumulators per
thread; a block of rows per thread, the blocks added in block order. No (R, P) array (an
earlier form kept every pattern's sum and took the group sums by a GEMM: moving those
R x P values through memory cost 3-4x the pass itself at R = 650 patterns) and no
subtraction: every Psi2_g is a sum of positive terms, as accurate as the complete-data
Psi2 (the bound is sensitive to Psi2: a group's Psi2 taken as Psi2 minus its missing
rows moved it by 1e-9 relative on oil).

The gradient needs no kernel of its own: row n takes the pair weights of its pattern,
sum_g inc[g, r] w_g, as the sum over the chunks of the subset sums of w_g
(``_rbf_numba.psi_gradients_w``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._numba_config import PARALLEL_OPTIONS as _PARALLEL
from .._numba_config import SERIAL_OPTIONS as _SERIAL
from ._fastexp import exp_into
from ._rbf_numba import CHUNK, SUBSET_BITS, _psi2_chunk_log, factored_tables


@njit(**_SERIAL)
def _add(v, o, r, sub, acc):
    """acc[c, sub[r, c]] += v[o:o + P] for every chunk c of groups that pattern r observes."""
    P = acc.shape[2]
    for c in range(sub.shape[1]):
        m = sub[r, c]
        if m == 0:
            continue
        a = acc[c, m]
        for p in range(P):
            a[p] += v[o + p]


@njit(**_SERIAL)
def _psi2_group_rows(n0, n1, seg, sub, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, acc):
    """Rows n0 <= n < n1 (sorted by pattern): a run of two or more rows of one pattern is
    summed in ``run`` (P,) first, a row alone goes straight to the subset accumulators
    acc (C, 2^B, P) of its pattern (``_add``)."""
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
    run = np.zeros(P)
    in_run = False
    for c0 in range(n0, n1, CH):
        k = min(CH, n1 - c0)
        _psi2_chunk_log(c0, k, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, Ah, Gam, d2, H,
                        Xbuf[:k * P].reshape((k, P)))
        exp_into(Xbuf[:k * P], Ebuf[:k * P], scratch[:k * P])
        for j in range(k):
            n = c0 + j
            r = seg[n]
            last = n + 1 == n1 or seg[n + 1] != r  # the last row of its run
            if last and not in_run:
                _add(Ebuf, j * P, r, sub, acc)
                continue
            o = j * P
            for p in range(P):
                run[p] += Ebuf[o + p]
            in_run = True
            if last:
                _add(run, 0, r, sub, acc)
                run[:] = 0.0
                in_run = False


@njit(**_PARALLEL)
def _psi2_group_blocks(N, nchunks, seg, sub, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, acc):
    """The only parallel code: one block of rows per iteration (see psi2_groups)."""
    for c in prange(nchunks):
        n0, n1 = c * N // nchunks, (c + 1) * N // nchunks
        if n1 > n0:
            _psi2_group_rows(n0, n1, seg, sub, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, acc[c])


@njit(**_SERIAL)
def psi2_groups(mu, S, Z, sf2, alpha, seg, sub, G, nchunks):
    """(G, P) pair sums of Psi2^n over the rows of each group; mu, S (N, Q) sorted by
    pattern, seg (N,) their non-decreasing pattern ids; pattern r observes group
    g = c B + i where bit i of sub[r, c] is set (sub (R, C), B = SUBSET_BITS)."""
    N = mu.shape[0]
    B = SUBSET_BITS
    shift, ZhT, ZpT, starts = factored_tables(Z)
    P = ZpT.shape[1]
    C = sub.shape[1]
    acc = np.zeros((nchunks, C, 1 << B, P))
    _psi2_group_blocks(N, nchunks, seg, sub, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, acc)
    tot = acc[0].copy()
    for c in range(1, nchunks):  # block order: the same sums whatever the threads
        tot += acc[c]
    out = np.zeros((G, P))
    for g in range(G):
        c, i = g // B, g % B
        for m in range(1, 1 << B):
            if (m >> i) & 1:
                out[g] += tot[c, m]
    return out

"""One set of outputs spread over the blocks of rows: Y of a single-view model, or one view
of an MRD model (``mrd.py``), both sides of the map-reduce.

- ``BlockOutputs`` (on a worker): a block's rows of these outputs, centred; per evaluation
  its sums given q(X) over the rows and this set's kernel and inducing inputs (``sums``:
  ``bound.DataSums``' or, with missing values, ``missing.GroupSums``' share of the block),
  and back from the driver's ``SumsGrads`` the psi statistics' gradients (``gradients``).
- ``OutputSums`` (on the driver): what does not change over a fit (column means, counts,
  groups of columns observed on the same rows, tr(Yc^T Yc)), and ``bound``, the reduction:
  the blocks' sums added and ``bound.bound_from_sums`` (``missing.grouped_bound_from_sums``)
  run on them. ``gradients`` turns its result into the global gradient of these outputs'
  kernel, inducing inputs and noise.

A model of several views holds one of each per view, with the same q(X).
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..bound import DataSums, bound_from_sums
from ..missing import GroupSums, grouped_bound_from_sums


class BlockOutputs:
    """Rows Y (n, D) of one set of outputs (NaN = missing) on a worker."""

    def __init__(self, Y: np.ndarray):
        self.Y = np.ascontiguousarray(np.asarray(Y, dtype=np.float64))
        self.n, self.D = self.Y.shape
        self.Yc: np.ndarray | None = None
        self.groups: dict | None = None  # missing values: the block's patterns (``centre``)

    def describe(self) -> dict:
        """D; per column the observed count, sum and a hash of which rows observe it
        (columns observed on the same rows of every block form a group; None: all observed)."""
        obs = ~np.isnan(self.Y)
        bits = np.packbits(obs, axis=0)
        return dict(D=self.D, count=obs.sum(0), colsum=np.where(obs, self.Y, 0.0).sum(0),
                    hashes=[hashlib.sha1(bits[:, j].tobytes()).hexdigest() for j in range(self.D)]
                    if not obs.all() else None)

    def centre(self, Y_mean: np.ndarray, groups: dict | None = None) -> dict:
        """Centre the rows (0 at missing entries); returns Yc^T Yc (D, D), each column's sum
        of squares and, with missing values (``groups``: each column's group "of" (D,), "G",
        the column order "perm" grouping them), each group's rows in this block "Ng" (G,) and
        tr(Yc Yc^T) over its entries "trYYT" (G,). A row observing nothing (a view of an MRD
        model the row misses) is in no group: it adds nothing."""
        obs = ~np.isnan(self.Y)
        self.Yc = np.ascontiguousarray(np.where(obs, self.Y - Y_mean, 0.0))
        out = dict(YtY=self.Yc.T @ self.Yc, colsq=np.sum(self.Yc * self.Yc, 0))
        self.groups = None
        if groups is not None:
            of, G, perm = np.asarray(groups["of"]), int(groups["G"]), np.asarray(groups["perm"])
            first = np.array([np.flatnonzero(of == g)[0] for g in range(G)])
            pats, seg = np.unique(obs, axis=0, return_inverse=True)
            inc = np.ascontiguousarray(pats[:, first].T, dtype=np.float64)  # (G, R)
            seg = np.ascontiguousarray(seg.ravel(), dtype=np.int64)
            counts = np.bincount(seg, minlength=inc.shape[1]).astype(np.float64)
            Dg = np.bincount(of, minlength=G).astype(np.float64)
            self.groups = dict(seg=seg, inc=inc, Yp=np.ascontiguousarray(self.Yc[:, perm]), row_D=(Dg @ inc)[seg])
            out.update(Ng=inc @ counts, trYYT=np.bincount(of, weights=out["colsq"], minlength=G))
        return out

    def sums(self, kernel, mu: np.ndarray, S: np.ndarray, Z: np.ndarray) -> dict:
        """The block's sums given q(X) = N(mu, diag S) (n, Q) and Z (M, Q): psi0_sum,
        E = Psi1^T Yc (M, D) and Psi2 (M, M); with missing values per group of columns
        psi0g (G,), E (M, D) in group order and Psi2g (G, M, M)."""
        gr = self.groups
        if gr is None:
            return dict(psi0_sum=float(np.sum(kernel.psi0(mu, S))), E=kernel.psi1(mu, S, Z).T @ self.Yc,
                        Psi2=kernel.psi2(mu, S, Z))
        seg, inc = gr["seg"], gr["inc"]
        psi0 = kernel.psi0(mu, S)
        return dict(psi0g=inc @ np.bincount(seg, weights=psi0, minlength=inc.shape[1]),
                    E=kernel.psi1(mu, S, Z).T @ gr["Yp"], Psi2g=kernel.psi2_groups(mu, S, Z, seg, inc))

    def gradients(self, kernel, t, beta: float, mu: np.ndarray, S: np.ndarray, Z: np.ndarray) -> tuple:
        """(dmu, dS (n, Q), dZ (M, Q), dtheta {name: array}) of the block's rows from the
        driver's ``bound.SumsGrads`` (``missing.GroupSumsGrads`` with missing values) ``t``."""
        gr = self.groups
        if gr is None:
            dPsi1 = beta**2 * (self.Yc @ t.GE.T)
            return kernel.psi_gradients(np.full(self.n, t.dpsi0), dPsi1, t.dL_dPsi2, mu, S, Z)
        dPsi1 = beta**2 * (gr["Yp"] @ t.GE.T)
        return kernel.psi_gradients_groups(-0.5 * beta * gr["row_D"], dPsi1, t.dL_dPsi2, gr["seg"], gr["inc"],
                                           mu, S, Z)


def column_groups(info: list[dict], D: int) -> dict:
    """Columns observed on the same rows (``missing.MissingOutputs``' groups), from the
    blocks' hashes of each column's observed rows (``BlockOutputs.describe``): each column's
    group "of" (D,), "G", and "perm", the columns in group order."""
    keys = [tuple("all" if i["hashes"] is None else i["hashes"][j] for i in info) for j in range(D)]
    first: dict = {}
    of = np.array([first.setdefault(k, len(first)) for k in keys], dtype=np.int64)
    return dict(of=of, G=len(first), perm=np.argsort(of, kind="stable"))


def columns_of(info: dict, a: int, b: int) -> dict:
    """A block's ``describe`` restricted to its columns a:b (one view of several side by side)."""
    return dict(D=b - a, count=info["count"][a:b], colsum=info["colsum"][a:b],
                hashes=None if info["hashes"] is None else info["hashes"][a:b])


class OutputSums:
    """The driver's side of one set of outputs over N rows in blocks (module docstring).

    info : the blocks' ``describe`` of these columns. Attributes: N, D; count (D,) observed
    entries per column; mean (D,) their means; missing_fraction; groups (``column_groups``,
    None for complete data); after ``centred``: YtY (D, D), colsq (D,), trYYT and per group
    Ng, Dg, trYYT_g (G,) and foff (G + 1,), the groups' column offsets in E.
    """

    def __init__(self, N: int, info: list[dict]):
        self.N, self.D = int(N), int(info[0]["D"])
        self.count = sum(i["count"] for i in info)
        self.mean = sum(i["colsum"] for i in info) / np.maximum(self.count, 1)
        self.missing_fraction = float(1.0 - self.count.sum() / (self.N * self.D))
        self.groups = column_groups(info, self.D) if self.missing_fraction else None
        if self.groups is not None:
            self.Dg = np.bincount(self.groups["of"], minlength=self.groups["G"]).astype(np.float64)
            self.foff = np.concatenate([[0], np.cumsum(self.Dg)]).astype(np.int64)

    def thin_columns(self) -> np.ndarray:
        """Columns observed on fewer than 2 rows (too little to learn them from)."""
        return np.flatnonzero(self.count < 2)

    def centred(self, cent: list[dict]) -> None:
        """Take the blocks' ``BlockOutputs.centre`` results."""
        self.YtY = sum(c["YtY"] for c in cent)
        self.colsq = sum(c["colsq"] for c in cent)
        self.trYYT = float(self.colsq.sum())
        if self.groups is not None:
            self.Ng = sum(c["Ng"] for c in cent)
            self.trYYT_g = sum(c["trYYT"] for c in cent)

    def data_variance(self) -> float:
        """The mean variance of the columns over their observed entries (1 when 0)."""
        var = float(np.mean(self.colsq / np.maximum(self.count, 1)))
        return var if var > 0 else 1.0

    def sums(self, fw: list[dict]):
        """The blocks' ``BlockOutputs.sums`` added: ``DataSums`` or ``GroupSums``."""
        if self.groups is not None:
            return GroupSums(psi0g=sum(r["psi0g"] for r in fw), E=sum(r["E"] for r in fw),
                             Psi2g=sum(r["Psi2g"] for r in fw), foff=self.foff, Ng=self.Ng, Dg=self.Dg,
                             trYYT=self.trYYT_g)
        return DataSums(N=self.N, D=self.D, psi0_sum=sum(r["psi0_sum"] for r in fw), E=sum(r["E"] for r in fw),
                        Psi2=sum(r["Psi2"] for r in fw), trYYT=self.trYYT)

    def bound(self, Kuu: np.ndarray, fw: list[dict], beta: float, grad: bool = True):
        """F_hat of these outputs and its gradients w.r.t. the sums (``SumsGrads`` or
        ``GroupSumsGrads``) from the blocks' sums ``fw``; Kuu (M, M) their kernel at Z."""
        if self.groups is not None:
            return grouped_bound_from_sums(Kuu, self.sums(fw), beta, grad=grad)
        return bound_from_sums(Kuu, self.sums(fw), beta, grad=grad)


def gradients(kernel, Z: np.ndarray, beta: float, t, dZ: list, dtheta: list[dict]) -> dict:
    """dF/d (Z (M, Q), noise variance, the kernel's parameters "kernel.<name>") of one set of
    outputs: the blocks' parts ``dZ`` and ``dtheta`` (``BlockOutputs.gradients``) added to
    Kuu's (``t.dL_dKuu``) and the noise's from ``t.dL_dbeta``."""
    dZ_K, dth_K = kernel.K_gradients(t.dL_dKuu, Z)
    out = {"Z": sum(dZ) + dZ_K, "noise_variance": -beta**2 * t.dL_dbeta}
    out.update({"kernel." + n: sum(d[n] for d in dtheta) + dth_K[n] for n in kernel.params})
    return out

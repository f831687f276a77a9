"""``oil-missing``: a Bayesian GP-LVM fitted on oil training data with missing entries.

Issue 33, point 6. The 1000 training rows of the three-phase oil flow data (12 readings)
lose entries in four settings, each with a fixed seed (``seed`` of the run + the setting's
offset): (a) 10 %, 30 %, 50 % of the entries missing completely at random (every entry
hidden with that probability; a row that lost all 12 readings gets one random reading
back, so the fraction is a little under the nominal one); (b) **blocks**: the rows in file
order form 20 blocks of 50 consecutive rows, and each block loses a random third of the
readings (4 of the 12, drawn per block), on all its rows: whole readings missing over
stretches of rows, 1/3 of the entries in all.

For each setting a ``BayesianGPLVM(Y, latent_dim=10, num_inducing=50)`` is fitted with the
default ``fit()`` (3000 iterations) on the observed entries and ``impute()`` fills the
hidden ones (meanFstar at q(x_n)). Reported: the RMSE of the hidden entries (data units)
beside the column mean of the observed entries, k-nearest-neighbour imputation and, when
``.bench-venv`` (``bench/setup_gpy.sh``) exists, GPy 1.15's missing-data model
(``oil_missing_gpy``, a subprocess); and the leave-one-out 1-NN class error in the two
latent dimensions with the largest ARD weights, with the complete-data fit as reference.

k-NN: the distance between two rows is the mean squared difference over the readings both
observe, after scaling every reading by its observed standard deviation; a hidden entry is
the mean of its k nearest rows that observe that reading. k (1..20) is chosen by
cross-validation on the observed entries: 10 % of them are hidden once more (at random,
every row keeping at least one) and the k with the smallest RMSE there is used. The best k
on the hidden entries themselves is reported too, marked as an oracle (it looks at the
answer).

Initialisation (issue 33, point 2): the default start is the PCA of the mean-filled data
(``model/init.py``, as GPy). The alternative here fills the missing entries by
probabilistic PCA fitted by EM on the observed entries (q = 10, ``PPCA_ITERS`` iterations
from the mean-filled PCA) and runs the same ``init_params`` on the filled data, so the
two starts differ only in the fill. Compared: the bound after 300 iterations and after the
full fit, on the 30 % random and the block settings.

The paper (Damianou, Titsias & Lawrence 2016) has no experiment with missing training
outputs: its oil figure is of complete data, and its missing-output experiments are at
test time (``oil-test``, ``cmu35``, ``video``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from . import gpy_worker
from .report import Context, Result, Table

Q, M = 10, 50
FRACTIONS = (0.1, 0.3, 0.5)
N_BLOCKS, BLOCK_MISSING = 20, 4  # 20 blocks of consecutive rows, 4 of 12 readings hidden in each
K_MAX = 20
CV_FRACTION = 0.1
PPCA_ITERS = 20
EARLY = 300  # the init comparison's early bound
GPY_ITERS = 1000  # paramz's default max_iters for m.optimize()
GPY_TIMEOUT = 1200.0  # one GPy fit
GPY_BUDGET = float(os.environ.get("BGPLVM_OIL_MISSING_GPY_BUDGET", 3600))  # all GPy fits of a run
#: no GPy fit runs past this many seconds after the run's start (a shared machine's deadline)
RUN_DEADLINE = float(os.environ.get("BGPLVM_OIL_MISSING_DEADLINE", "inf"))
COLOURS = {"ours": "#1f77b4", "GPy": "#ff7f0e", "k-NN": "#2ca02c", "mean": "#7f7f7f"}


# --- data and masks ---------------------------------------------------------------------------
def _load(ctx: Context):
    from bgplvm.datasets import load

    kw = dict(mirror=ctx.mirror, progress=ctx.verbose) if ctx.mirror else dict(progress=ctx.verbose)
    ds = load("oil", split="train", **kw)
    return np.asarray(ds.Y, dtype=float), np.asarray(ds.labels)


def random_mask(shape, fraction: float, seed: int) -> np.ndarray:
    """(N, D) bool, True = hidden: every entry with probability ``fraction``; a row with all
    entries hidden gets one random entry back."""
    rng = np.random.default_rng(seed)
    hidden = rng.random(shape) < fraction
    for i in np.flatnonzero(hidden.all(1)):
        hidden[i, rng.integers(shape[1])] = False
    return hidden


def block_mask(shape, n_blocks: int, n_missing: int, seed: int) -> np.ndarray:
    """(N, D) bool, True = hidden: rows in file order cut into ``n_blocks`` blocks of
    consecutive rows (np.array_split), each hiding the same random ``n_missing`` columns."""
    rng = np.random.default_rng(seed)
    hidden = np.zeros(shape, dtype=bool)
    for rows in np.array_split(np.arange(shape[0]), n_blocks):
        hidden[np.ix_(rows, rng.permutation(shape[1])[:n_missing])] = True
    return hidden


def settings(quick: bool) -> list[dict]:
    s = [dict(key=f"random{int(100 * f)}", label=f"{int(100 * f)} % at random", kind="random", fraction=f,
              offset=1 + i) for i, f in enumerate(FRACTIONS)]
    s.append(dict(key="blocks", label=f"{N_BLOCKS} blocks x {BLOCK_MISSING} of 12 readings", kind="blocks",
                  fraction=BLOCK_MISSING / 12, offset=10))
    return [s[1], s[3]] if quick else s


def make_mask(st: dict, shape, seed: int) -> np.ndarray:
    if st["kind"] == "random":
        return random_mask(shape, st["fraction"], seed + st["offset"])
    return block_mask(shape, N_BLOCKS, BLOCK_MISSING, seed + st["offset"])


# --- baselines ----------------------------------------------------------------------------------
def column_mean_impute(Y: np.ndarray, hidden: np.ndarray) -> np.ndarray:
    mu = np.nanmean(np.where(hidden, np.nan, Y), axis=0)
    return np.where(hidden, mu, Y)


def knn_predictions(Y: np.ndarray, hidden: np.ndarray, targets: np.ndarray, k_max: int) -> np.ndarray:
    """(n_targets, k_max): for each target entry (row, col) (rows of ``targets``), the mean
    of its k nearest rows' values in that column, k = 1..k_max. Rows are compared over the
    columns both observe (mean squared difference of the columns scaled by their observed
    standard deviation); donors are the other rows observing the column."""
    obs = ~hidden
    W = obs.astype(float)
    sd = np.nanstd(np.where(hidden, np.nan, Y), axis=0)
    Z = np.where(obs, (Y - np.nanmean(np.where(hidden, np.nan, Y), 0)) / np.where(sd > 0, sd, 1.0), 0.0)
    Z2 = Z ** 2
    num = Z2 @ W.T + W @ Z2.T - 2.0 * Z @ Z.T
    cnt = W @ W.T
    d = np.where(cnt > 0, np.maximum(num, 0.0) / np.maximum(cnt, 1.0), np.inf)
    np.fill_diagonal(d, np.inf)
    out = np.full((len(targets), k_max), np.nan)
    rows = targets[:, 0]
    for i in np.unique(rows):
        order = np.argsort(d[i], kind="stable")
        order = order[np.isfinite(d[i, order])]
        for t in np.flatnonzero(rows == i):
            c = targets[t, 1]
            donors = order[obs[order, c]][:k_max]
            v = np.cumsum(Y[donors, c]) / np.arange(1, donors.size + 1)
            out[t, :donors.size] = v
            out[t, donors.size:] = v[-1] if donors.size else np.nan
    return out


def knn_impute(Y: np.ndarray, hidden: np.ndarray, seed: int, k_max: int = K_MAX) -> dict:
    """k-NN imputation with k chosen by cross-validation on held-out observed entries;
    also the RMSE for every k on the hidden entries (the oracle's choice)."""
    rng = np.random.default_rng(seed)
    obs_idx = np.argwhere(~hidden)
    pick = rng.random(len(obs_idx)) < CV_FRACTION
    held = np.zeros(hidden.shape, dtype=bool)
    held[tuple(obs_idx[pick].T)] = True
    for i in np.flatnonzero((hidden | held).all(1)):  # every row keeps an observed entry
        held[i, np.flatnonzero(held[i])[0]] = False
    cv_targets = np.argwhere(held)
    p_cv = knn_predictions(Y, hidden | held, cv_targets, k_max)
    cv_rmse = np.sqrt(np.mean((p_cv - Y[tuple(cv_targets.T)][:, None]) ** 2, axis=0))
    k_cv = int(np.argmin(cv_rmse)) + 1
    targets = np.argwhere(hidden)
    p = knn_predictions(Y, hidden, targets, k_max)
    rmse_k = np.sqrt(np.mean((p - Y[tuple(targets.T)][:, None]) ** 2, axis=0))
    imputed = Y.copy()
    imputed[tuple(targets.T)] = p[:, k_cv - 1]
    return dict(k_cv=k_cv, cv_rmse=cv_rmse.tolist(), cv_entries=int(held.sum()), rmse_by_k=rmse_k.tolist(),
                rmse=float(rmse_k[k_cv - 1]), k_oracle=int(np.argmin(rmse_k)) + 1,
                rmse_oracle=float(rmse_k.min()), imputed=imputed)


def ppca_fill(Yc: np.ndarray, observed: np.ndarray, q: int, iters: int) -> tuple[np.ndarray, list[float]]:
    """Probabilistic PCA with missing data by EM (Tipping & Bishop's model, the E-step over
    each row's observed entries), started from the mean-filled PCA. ``Yc`` is centred with
    the observed means, 0 where missing. Returns (Yc with the missing entries replaced by
    W E[x_n] + mu, the observed-data log likelihood per iteration)."""
    N, D = Yc.shape
    q = min(q, D - 1)
    W_ = observed.astype(float)
    U, s, Vt = np.linalg.svd(Yc, full_matrices=False)
    W = Vt[:q].T * s[:q] / np.sqrt(N)
    mu = np.zeros(D)
    s2 = float(max(np.sum(s[q:] ** 2) / (N * (D - q)), 1e-6))
    Iq = np.eye(q)
    ll = []
    for _ in range(iters):
        R = np.where(observed, Yc - mu, 0.0)
        Minv = np.linalg.inv(Iq + np.einsum("nd,di,dj->nij", W_, W, W) / s2)  # (N, q, q)
        X = np.einsum("nij,nj->ni", Minv, R @ W) / s2  # E[x_n | y_n,O]
        # observed-data log likelihood (for the record): log N(y_O; mu_O, W_O W_O^T + s2 I)
        ll.append(_ppca_loglik(R, W_, W, s2, Minv))
        Exx = Minv + X[:, :, None] * X[:, None, :]
        for d in range(D):
            o = observed[:, d]
            A = Exx[o].sum(0)
            W[d] = np.linalg.solve(A, X[o].T @ (Yc[o, d] - mu[d]))
            mu[d] = np.mean(Yc[o, d] - X[o] @ W[d])
        resid = np.where(observed, Yc - mu - X @ W.T, 0.0)
        tr = np.einsum("di,nij,dj->nd", W, Minv, W)
        s2 = float(np.sum(W_ * (resid ** 2 + tr)) / W_.sum())
    R = np.where(observed, Yc - mu, 0.0)
    Minv = np.linalg.inv(Iq + np.einsum("nd,di,dj->nij", W_, W, W) / s2)
    X = np.einsum("nij,nj->ni", Minv, R @ W) / s2
    return np.where(observed, Yc, X @ W.T + mu), ll


def _ppca_loglik(R, W_, W, s2, Minv) -> float:
    """sum_n log N(r_n,O; 0, W_O W_O^T + s2 I) by the matrix inversion and determinant lemmas."""
    n_obs = W_.sum(1)
    a = np.sum(R ** 2, 1) / s2
    b = R @ W / s2
    quad = a - np.einsum("ni,nij,nj->n", b, Minv, b)
    logdet = n_obs * np.log(s2) - np.linalg.slogdet(Minv)[1]
    return float(-0.5 * np.sum(quad + logdet + n_obs * np.log(2 * np.pi)))


# --- latent 1-NN --------------------------------------------------------------------------------
def loo_1nn_errors(X: np.ndarray, labels: np.ndarray) -> int:
    """Leave-one-out 1-nearest-neighbour errors (Euclidean)."""
    d2 = np.sum(X ** 2, 1)[:, None] - 2.0 * X @ X.T + np.sum(X ** 2, 1)[None, :]
    np.fill_diagonal(d2, np.inf)
    return int(np.sum(labels[np.argmin(d2, 1)] != labels))


def top2_errors(latent: np.ndarray, ard: np.ndarray, labels: np.ndarray) -> tuple[int, list[int]]:
    top = np.argsort(-np.asarray(ard))[:2]
    return loo_1nn_errors(latent[:, top], labels), [int(t) for t in top]


# --- fits ---------------------------------------------------------------------------------------
def _ppca_model_class():
    from bgplvm import BayesianGPLVM
    from bgplvm.init import init_params

    class PPCAStartGPLVM(BayesianGPLVM):
        """The same model, started from the PCA of the PPCA-filled data (experiment only)."""

        ppca_iters = PPCA_ITERS

        def _initial_state(self, Q, M, rng):
            obs = self._missing.observed
            filled, ll = ppca_fill(self._Yc, obs, Q, self.ppca_iters)
            self.ppca_loglik = ll
            self.ppca_filled = filled
            return init_params(filled, Q, M, rng, observed=obs)

    return PPCAStartGPLVM


def fit_ours(cls, Y, seed, iters, ctx, label, m_ind=M):
    t = time.perf_counter()
    early = {}
    at = early_iteration(iters)

    def cb(p):
        if p.iteration == at:
            early["bound"] = float(p.bound)

    m = cls(Y, latent_dim=Q, num_inducing=m_ind, seed=seed)
    m.fit(max_iters=iters, progress=False, callback=cb) if iters is not None else m.fit(progress=False, callback=cb)
    fit_s = time.perf_counter() - t
    ctx.log(f"  {label}: bound {m.elbo():.1f} ({m.fit_info['iterations']} iterations, {m.fit_info['reason']}, "
            f"bound at {at}: {early.get('bound', float('nan')):.1f}) in {fit_s:.0f} s")
    return m, dict(bound=float(m.elbo()), bound_early=early.get("bound"), fit_s=fit_s,
                   iterations=int(m.fit_info["iterations"]), reason=m.fit_info["reason"],
                   held_iterations=m.fit_info.get("held_iterations"))


def early_iteration(iters) -> int:
    """The iteration of the init comparison's early bound (``EARLY``; half a --quick fit)."""
    return EARLY if iters is None else min(EARLY, iters // 2)


def gpy_python() -> Path | None:
    """``.bench-venv``'s python (``gpy_worker.gpy_python``; ``BGPLVM_OIL_MISSING_GPY=0`` skips GPy)."""
    return gpy_worker.gpy_python("BGPLVM_OIL_MISSING_GPY")


def fit_gpy(python: Path, Ymiss: np.ndarray, seed: int, iters: int, timeout: float) -> dict:
    """Run ``oil_missing_gpy`` in GPy's venv; its result dict (+ arrays) or {"error": ...}."""
    res, arrays = gpy_worker.run(python, Path(__file__).with_name("oil_missing_gpy.py"), dict(Y=Ymiss),
                                 dict(Q=Q, M=M, max_iters=iters, seed=seed), timeout)
    if arrays is not None:
        res.update(mean=arrays["mean"], latent_mean=arrays["latent_mean"], ard=arrays["ard"])
    return res


# --- figure -------------------------------------------------------------------------------------
def rmse_figure(path, rows: list[dict], complete_err: int, n: int = 1000) -> None:
    """Left: RMSE of the hidden entries against the fraction missing (random settings as
    lines, the block setting as rings at 1/3). Right: latent LOO 1-NN errors likewise."""
    from . import lineplots as lp
    from .report import atomic_write_bytes

    rnd = [r for r in rows if r["kind"] == "random"]
    blk = [r for r in rows if r["kind"] == "blocks"]
    methods = [("ours", "rmse_ours"), ("k-NN", "rmse_knn"), ("mean", "rmse_mean"), ("GPy", "rmse_gpy")]
    c = lp.canvas(1120, 580)
    vals = [r[k] for r in rows for _, k in methods if r.get(k) is not None]
    ax = lp.Axes(c, (80, 50, 420, 340), (0.0, 0.6), lp.padded(0.0, max(vals)))
    ax.clip()
    for name, k in methods:
        xs = [r["fraction"] for r in rnd if r.get(k) is not None]
        ys = [r[k] for r in rnd if r.get(k) is not None]
        if xs:
            lp.line(ax, xs, ys, COLOURS[name])
            for x, y in ax.pts(np.c_[xs, ys]):
                c.circle(x, y, 3.2, fill=COLOURS[name])
        for r in blk:
            if r.get(k) is not None:
                (x, y), = ax.pts(np.array([[r["fraction"], r[k]]]))
                c.circle(x, y, 5.0, stroke=COLOURS[name], width=1.6)
    ax.unclip()
    ax.frame(title="imputation RMSE of the hidden entries", xlabel="fraction of entries missing",
             ylabel="RMSE (data units)")
    legend = [(n, COLOURS[n]) for n, k in methods if any(r.get(k) is not None for r in rows)]
    ax.legend(legend + [("rings: blocks", "#444444")], x=ax.x, y=ax.y + ax.h + 50)
    errs = [("ours", "errors_ours"), ("GPy", "errors_gpy")]
    ev = [r[k] for r in rows for _, k in errs if r.get(k) is not None] + [complete_err]
    ax2 = lp.Axes(c, (620, 50, 420, 340), (-0.02, 0.6), lp.padded(0.0, max(ev) + 1))
    ax2.clip()
    lp.line(ax2, [-0.02, 0.6], [complete_err, complete_err], "#999999", width=1.0)
    for name, k in errs:
        xs = [0.0] * (name == "ours") + [r["fraction"] for r in rnd if r.get(k) is not None]
        ys = [complete_err] * (name == "ours") + [r[k] for r in rnd if r.get(k) is not None]
        if len(xs) > (name == "ours"):
            lp.line(ax2, xs, ys, COLOURS[name])
            for x, y in ax2.pts(np.c_[xs, ys]):
                c.circle(x, y, 3.2, fill=COLOURS[name])
        for r in blk:
            if r.get(k) is not None:
                (x, y), = ax2.pts(np.array([[r["fraction"], r[k]]]))
                c.circle(x, y, 5.0, stroke=COLOURS[name], width=1.6)
    ax2.unclip()
    ax2.frame(title=f"latent LOO 1-NN errors (top-2 ARD dims, of {n})", xlabel="fraction of entries missing",
              ylabel="errors")
    ax2.legend([(n, COLOURS[n]) for n, k in errs if any(r.get(k) is not None for r in rows)]
               + [("grey line: ours, complete data", "#999999")], x=ax2.x, y=ax2.y + ax2.h + 50)
    atomic_write_bytes(path, c.to_bytes())


# --- the run ------------------------------------------------------------------------------------
def run(ctx: Context) -> Result:
    import bgplvm
    from bgplvm import BayesianGPLVM

    t_all = time.perf_counter()
    Y, lab = _load(ctx)
    iters, m_ind = None, M  # the default fit()
    if ctx.quick:  # a smoke run: 200 rows, M = 10, 40 iterations, no GPy
        Y, lab, iters, m_ind = Y[:200], lab[:200], 40, 10
    return _run(ctx, Y, lab, iters, m_ind, GPY_ITERS, GPY_TIMEOUT, GPY_BUDGET, t_all, bgplvm, BayesianGPLVM)


def _run(ctx, Y, lab, iters, m_ind, gpy_iters, gpy_timeout, gpy_budget, t_all, bgplvm, BayesianGPLVM) -> Result:
    bgplvm.warmup()
    python = None if ctx.quick else gpy_python()
    gpy_note = ("not run (GPy not installed: no .bench-venv; `bash bench/setup_gpy.sh` makes it)"
                if python is None and not ctx.quick else "not run (--quick)" if ctx.quick else None)
    N = Y.shape[0]
    ctx.log(f"oil-missing: {N} rows, Q={Q}, M={m_ind}, {'default fit' if iters is None else f'{iters} iterations'}; "
            f"GPy: {python or gpy_note}")

    m_full, info_full = fit_ours(BayesianGPLVM, Y, ctx.seed, iters, ctx, "complete data", m_ind)
    err_full, top_full = top2_errors(m_full.latent_mean, m_full.ard_weights, lab)
    ctx.log(f"  complete data: {err_full} LOO 1-NN errors in dims {top_full}")

    rows, init_rows = [], []
    PPCAStart = _ppca_model_class()
    for st in settings(ctx.quick):
        hidden = make_mask(st, Y.shape, ctx.seed)
        Ym = np.where(hidden, np.nan, Y)
        frac = float(hidden.mean())
        ctx.log(f"setting {st['label']}: {int(hidden.sum())} entries hidden ({100 * frac:.1f} %)")
        rmse = lambda R: float(np.sqrt(np.mean((R[hidden] - Y[hidden]) ** 2)))  # noqa: E731
        m, info = fit_ours(BayesianGPLVM, Ym, ctx.seed, iters, ctx, "ours (mean-filled PCA start)", m_ind)
        mean, var = m.impute()
        z = (Y[hidden] - mean[hidden]) / np.sqrt(var[hidden])
        err, top = top2_errors(m.latent_mean, m.ard_weights, lab)
        knn = knn_impute(Y, hidden, ctx.seed + st["offset"] + 100, k_max=K_MAX if not ctx.quick else 5)
        row = dict(key=st["key"], label=st["label"], kind=st["kind"], fraction=frac, n_hidden=int(hidden.sum()),
                   rmse_ours=rmse(mean), coverage95_ours=float(np.mean(np.abs(z) < 1.96)),
                   rmse_mean=rmse(column_mean_impute(Y, hidden)), rmse_knn=knn["rmse"], k_cv=knn["k_cv"],
                   rmse_knn_oracle=knn["rmse_oracle"], k_oracle=knn["k_oracle"],
                   knn_rmse_by_k=knn["rmse_by_k"], knn_cv_rmse_by_k=knn["cv_rmse"], knn_cv_entries=knn["cv_entries"],
                   errors_ours=err, top2_ours=top, ard_ours=m.ard_weights.tolist(),
                   dims_on_ours=int(np.sum(m.ard_weights > 0.05 * m.ard_weights.max())), fit_ours=info,
                   rmse_gpy=None, errors_gpy=None, gpy=gpy_note)
        ctx.log(f"  RMSE ours {row['rmse_ours']:.4f}, k-NN {row['rmse_knn']:.4f} (k={knn['k_cv']} by CV; "
                f"oracle k={knn['k_oracle']}: {knn['rmse_oracle']:.4f}), mean {row['rmse_mean']:.4f}; "
                f"1-NN errors {err} (dims {top})")
        if st["key"] in ("random30", "blocks"):
            mp, infop = fit_ours(PPCAStart, Ym, ctx.seed, iters, ctx, "ours (PPCA-filled start)", m_ind)
            mean_p, _ = mp.impute()
            Yc_fill = mp.ppca_filled + mp.Y_mean
            errp, _ = top2_errors(mp.latent_mean, mp.ard_weights, lab)
            init_rows.append(dict(key=st["key"], label=st["label"], mean_filled=info, ppca=infop,
                                  rmse_ours_mean_filled=row["rmse_ours"], rmse_ours_ppca=rmse(mean_p),
                                  errors_mean_filled=err, errors_ppca=errp,
                                  rmse_ppca_fill=rmse(np.where(hidden, Yc_fill, Y)),
                                  ppca_loglik=[float(v) for v in mp.ppca_loglik]))
        rows.append(row)

    # GPy after all of ours (its fits are the slow ones): 30 % and blocks first, each while the budget lasts
    t_gpy = time.perf_counter()
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["key"] not in ("random30", "blocks"), i))
    for st, row in ((settings(ctx.quick)[i], rows[i]) for i in order):
        if python is None:
            break
        left = min(gpy_budget - (time.perf_counter() - t_gpy), RUN_DEADLINE - (time.perf_counter() - t_all))
        if left < 120:
            row["gpy"] = "not run (the run's time budget for GPy was spent)"
            continue
        hidden = make_mask(st, Y.shape, ctx.seed)
        Ym = np.where(hidden, np.nan, Y)
        rmse = lambda R: float(np.sqrt(np.mean((R[hidden] - Y[hidden]) ** 2)))  # noqa: E731
        ctx.log(f"GPy, {st['label']}: BayesianGPLVMMiniBatch(missing_data=True), optimize(max_iters={gpy_iters}) ...")
        g = fit_gpy(python, Ym, ctx.seed, gpy_iters, min(gpy_timeout, left))
        if "error" in g:
            row["gpy"] = (f"not finished ({g['error']}; the run's GPy budget {gpy_budget:.0f} s)"
                          if g["error"].startswith("timeout") else f"failed: {g['error']}")
            if g["error"].startswith("timeout"):
                row["gpy"] = "not finished in the run's time budget for GPy"
            ctx.log(f"  GPy {row['gpy']}")
        else:
            gm = np.where(hidden, g.pop("mean"), Y)
            gerr, gtop = top2_errors(g.pop("latent_mean"), g["ard"], lab)
            row.update(rmse_gpy=rmse(gm), errors_gpy=gerr, top2_gpy=gtop, ard_gpy=g.pop("ard").tolist(), gpy=g)
            ctx.log(f"  GPy: RMSE {row['rmse_gpy']:.4f}, 1-NN errors {gerr} (dims {gtop}), bound {g['bound']:.1f} "
                    f"in {g['fit_s']:.0f} s")

    fig = "oil_missing_rmse.png"
    rmse_figure(ctx.figure_path("oil-missing", fig), rows, err_full, N)
    return _result(ctx, m_ind, rows, init_rows, info_full, err_full, top_full, m_full, iters, gpy_iters, python,
                   gpy_note, N, fig, time.perf_counter() - t_all)


def _fmt(v, nd=4):
    return None if v is None else round(float(v), nd)


def _result(ctx, m_ind, rows, init_rows, info_full, err_full, top_full, m_full, iters, gpy_iters, python, gpy_note, N,
            fig, wall) -> Result:
    gpy_col = lambda r: _fmt(r["rmse_gpy"]) if r["rmse_gpy"] is not None else (  # noqa: E731
        r["gpy"] if isinstance(r["gpy"], str) else "-")
    t1 = Table(
        title=f"Imputation RMSE of the hidden training entries (oil, {N} rows x 12 readings; data units)",
        columns=["missing pattern", "hidden entries (%)", "GP-LVM impute() (ours)", "GPy 1.15 missing_data",
                 "k-NN (k by CV)", "k-NN, oracle k (looks at the answer)", "column mean"],
        rows=[[r["label"], round(100 * r["fraction"], 2), _fmt(r["rmse_ours"]), gpy_col(r),
               f"{r['rmse_knn']:.4f} (k={r['k_cv']})", f"{r['rmse_knn_oracle']:.4f} (k={r['k_oracle']})",
               _fmt(r["rmse_mean"])] for r in rows],
        note=("k-NN: rows compared over the readings both observe (scaled by their observed sd), the mean of "
              f"the k nearest rows observing the reading; k in 1..{K_MAX} chosen by hiding {int(100 * CV_FRACTION)} % "
              "of the observed entries at random and taking the best k there. The oracle column takes the k "
              "best on the hidden entries themselves: not a method, a bound on what the choice of k could give. "
              "Ours: " + "; ".join(f"{r['label']}: {100 * r['coverage95_ours']:.1f} %" for r in rows)
              + " of the hidden entries fall within the predictive mean +- 1.96 sd (covFstar + noise)."))
    gpy_err = lambda r: r["errors_gpy"] if r["errors_gpy"] is not None else (  # noqa: E731
        r["gpy"] if isinstance(r["gpy"], str) else "-")
    t2 = Table(
        title=f"Leave-one-out 1-NN class errors in the two latent dimensions with the largest ARD weights (of {N})",
        columns=["training data", "ours: errors", "ours: dims (ARD order)", "ours: bound", "GPy 1.15: errors"],
        rows=[["complete (reference)", err_full, str(top_full), round(info_full["bound"], 1), "-"]]
        + [[r["label"], r["errors_ours"], str(r["top2_ours"]), round(r["fit_ours"]["bound"], 1), gpy_err(r)]
           for r in rows],
        note=("The bound of a fit with missing entries is over the observed entries only: not comparable "
              "across rows. The paper's oil figure (complete data) has 1 error; the paper has no result "
              "with missing training data."))
    t3 = Table(
        title=f"Initialisation with missing entries: bound after {early_iteration(iters)} iterations and after the full fit",
        columns=["missing pattern", "start", f"bound at {early_iteration(iters)}", "final bound", "iterations (reason)",
                 "RMSE hidden", "1-NN errors"],
        rows=[row for r in init_rows for row in (
            [r["label"], "mean-filled PCA (default, as GPy)", _fmt(r["mean_filled"]["bound_early"], 1),
             round(r["mean_filled"]["bound"], 1), f"{r['mean_filled']['iterations']} ({r['mean_filled']['reason']})",
             _fmt(r["rmse_ours_mean_filled"]), r["errors_mean_filled"]],
            [r["label"], f"PPCA-filled PCA (EM, q={Q}, {PPCA_ITERS} iterations)", _fmt(r["ppca"]["bound_early"], 1),
             round(r["ppca"]["bound"], 1), f"{r['ppca']['iterations']} ({r['ppca']['reason']})",
             _fmt(r["rmse_ours_ppca"]), r["errors_ppca"]])],
        note=_init_verdict(init_rows, early_iteration(iters)))
    notes = [
        f"Missing patterns (seed {ctx.seed} + offset): 10/30/50 % at random: every entry hidden with that "
        "probability (offsets 1, 2, 3; a row that lost all 12 readings gets one back); blocks: rows in file order "
        f"cut into {N_BLOCKS} blocks of consecutive rows, each hiding the same random {BLOCK_MISSING} of the 12 "
        "readings on all its rows (offset 10; the oil rows are not ordered by class).",
        "Ours: `BayesianGPLVM(Y, latent_dim=10, num_inducing=50, seed=seed).fit()` (the default fit), "
        "`impute()`: meanFstar at q(x_n) for the hidden entries; the bound is over the observed entries.",
        ("GPy: `GPy.models.bayesian_gplvm_minibatch.BayesianGPLVMMiniBatch(Y, 10, num_inducing=50, "
         f"missing_data=True)`, `m.optimize(max_iters={gpy_iters})` (paramz L-BFGS-B, its default max_iters), "
         "imputation `m.predict(m.X)[0]` at q(X), run in `.bench-venv` as a subprocess "
         "(`reproduce/oil_missing_gpy.py`).") if python is not None else
        f"GPy: {gpy_note}. GPy is never a dependency of bgplvm; when `.bench-venv` exists the run fits "
        "`BayesianGPLVMMiniBatch(..., missing_data=True)` there as a subprocess.",
        "The paper has no number for missing training data (its missing-output experiments are at test "
        "time: oil-test, cmu35, video); the complete-data fit is the reference row.",
    ]
    numbers = dict(complete=dict(errors=err_full, top2=top_full, ard=m_full.ard_weights.tolist(), **info_full),
                   settings=rows, init_comparison=init_rows)
    return Result(
        name="oil-missing",
        title="Oil training data with missing entries: imputation and latent space (issue 33)",
        paper_section="none: the paper has no experiment with missing training outputs (oil figure, complete data)",
        tables=[t1, t2, t3], numbers=numbers,
        settings=dict(latent_dim=Q, num_inducing=m_ind, kernel="rbf", fit_iters="default fit()" if iters is None else iters,
                      seed=ctx.seed, n_train=N, fractions=list(FRACTIONS), n_blocks=N_BLOCKS,
                      block_missing=BLOCK_MISSING, k_max=K_MAX, cv_fraction=CV_FRACTION, ppca_iters=PPCA_ITERS,
                      early_iteration=early_iteration(iters), gpy_max_iters=gpy_iters if python is not None else None,
                      gpy_python=str(python) if python is not None else None),
        figures=[fig], notes=notes, wall_time_s=wall)


def _init_verdict(init_rows: list[dict], at: int) -> str:
    """The init table's sentence: which start is ahead at ``at`` iterations and at the end."""
    if not init_rows:
        return ""
    parts, early_ppca, final_ppca, n = [], 0, 0, len(init_rows)
    for r in init_rows:
        a, b = r["mean_filled"], r["ppca"]
        de = (b["bound_early"] if b["bound_early"] is not None else np.nan) - (
            a["bound_early"] if a["bound_early"] is not None else np.nan)
        df = b["bound"] - a["bound"]
        early_ppca += bool(de > 0)
        final_ppca += bool(df > 0)
        parts.append(f"{r['label']}: PPCA minus mean-filled {de:+.1f} at {at} iterations, {df:+.1f} "
                     f"({100 * df / abs(a['bound']):+.2f} %) at the end")

    def who(k):
        return ("the PPCA-filled start" if k == n else "the mean-filled start (the default)" if k == 0 else None)

    e, f = who(early_ppca), who(final_ppca)
    if e and e == f:
        head = f"{e[0].upper() + e[1:]} starts better: ahead at {at} iterations and after the full fit in every setting"
    elif e:
        head = (f"{e[0].upper() + e[1:]} starts better (ahead at {at} iterations in every setting); after the "
                f"full fit " + (f"{f} ends higher in every setting" if f else
                               f"the PPCA-filled start ends higher in {final_ppca} of {n} settings"))
    else:
        head = "Neither start is ahead in every setting"
    return (f"{head} ({'; '.join(parts)}). The PPCA-filled start replaces only the fill of the missing "
            "entries before the same PCA initialisation (model/init.py unchanged); one seed per setting (the "
            "spread over seeds was not measured).")

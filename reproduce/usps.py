"""``usps``: the generative classifier of section "Class Conditional Density Estimation".

Ten Bayesian GP-LVMs (Q = 10, M = 50), one per digit, each fitted on its training rows
of USPS (7291 train / 2007 test, 16x16); a test digit is labelled by the highest
class-conditional density log p(y* | Y_c) ~ F(q(X_c), q(x*)) - F(q(X_c))
(eq:predictive1) with a uniform prior. Paper (Table "table:usps"): 95 errors (4.73 %);
its 1-vs-all logistic regression baseline 283 (14.10 %). Our own baselines, written here
with numpy/scipy: 1-nearest neighbour on the pixels and multinomial (softmax) logistic
regression with an L2 penalty chosen on a held-out part of the training set.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from .report import Context, Result, Table

PAPER_ERRORS = 95
PAPER_ERROR_PCT = 4.73
PAPER_LR_ERRORS = 283
PAPER_LR_PCT = 14.10
Q, M = 10, 50
FIT_ITERS = 2000


def _load(ctx: Context):
    from bgplvm_datasets import load

    kw = dict(mirror=ctx.mirror, progress=ctx.verbose) if ctx.mirror else dict(progress=ctx.verbose)
    tr, te = load("usps", split="train", **kw), load("usps", split="test", **kw)
    return tr.Y, tr.labels, te.Y, te.labels


def nearest_neighbour(Ytr, ltr, Yte, chunk: int = 500) -> np.ndarray:
    """1-NN labels under the Euclidean distance."""
    sq = np.sum(Ytr * Ytr, axis=1)
    out = np.empty(Yte.shape[0], dtype=ltr.dtype)
    for a in range(0, Yte.shape[0], chunk):
        d = sq[None, :] - 2.0 * Yte[a:a + chunk] @ Ytr.T
        out[a:a + chunk] = ltr[np.argmin(d, axis=1)]
    return out


def softmax_regression(Ytr, ltr, lam: float, max_iter: int = 500):
    """Multinomial logistic regression, mean cross-entropy + lam/2 |W|^2 (bias unpenalised),
    L-BFGS-B on the exact gradient. Returns (W (D+1, K), classes)."""
    classes = np.unique(ltr)
    X = np.hstack([Ytr, np.ones((Ytr.shape[0], 1))])
    T = (ltr[:, None] == classes[None, :]).astype(np.float64)
    N, D1 = X.shape
    K = classes.size
    mask = np.ones((D1, K))
    mask[-1] = 0.0

    def f(w):
        W = w.reshape(D1, K)
        A = X @ W
        lse = logsumexp(A, axis=1, keepdims=True)
        loss = -np.sum(T * (A - lse)) / N + 0.5 * lam * np.sum(mask * W * W)
        G = X.T @ (np.exp(A - lse) - T) / N + lam * mask * W
        return loss, G.ravel()

    res = minimize(f, np.zeros(D1 * K), jac=True, method="L-BFGS-B", options=dict(maxiter=max_iter))
    return res.x.reshape(D1, K), classes


def softmax_predict(W, classes, Y):
    return classes[np.argmax(np.hstack([Y, np.ones((Y.shape[0], 1))]) @ W, axis=1)]


def softmax_baseline(Ytr, ltr, Yte, seed: int = 0):
    """Penalty from {1e-4, ..., 1e-1} by accuracy on a random 20 % of the training rows,
    then refitted on all of them."""
    rng = np.random.default_rng(seed)
    val = rng.random(Ytr.shape[0]) < 0.2
    best = None
    for lam in (1e-4, 1e-3, 1e-2, 1e-1):
        W, cl = softmax_regression(Ytr[~val], ltr[~val], lam)
        acc = np.mean(softmax_predict(W, cl, Ytr[val]) == ltr[val])
        if best is None or acc > best[0]:
            best = (acc, lam)
    W, cl = softmax_regression(Ytr, ltr, best[1])
    return softmax_predict(W, cl, Yte), best[1]


def run(ctx: Context) -> Result:
    from model import GPLVMClassifier

    import model

    t_all = time.perf_counter()
    model.warmup()  # compile (or load) every Numba kernel before anything is timed
    Ytr, ltr, Yte, lte = _load(ctx)
    settings = dict(latent_dim=Q, num_inducing=M, kernel="rbf", fit_iters=FIT_ITERS, seed=ctx.seed,
                    n_train=int(Ytr.shape[0]), n_test=int(Yte.shape[0]),
                    inference="infer_latent: batched L-BFGS from the nearest training row, n_init=1")
    if ctx.quick:  # 60 training rows per class, 300 test rows, short fits
        rng = np.random.default_rng(ctx.seed)
        keep = np.concatenate([rng.permutation(np.flatnonzero(ltr == c))[:60] for c in np.unique(ltr)])
        Ytr, ltr = Ytr[keep], ltr[keep]
        sub = rng.permutation(Yte.shape[0])[:300]
        Yte, lte = Yte[sub], lte[sub]
        settings.update(fit_iters=150, n_train=int(Ytr.shape[0]), n_test=int(Yte.shape[0]))
    n_test = Yte.shape[0]

    ctx.log(f"usps: {Ytr.shape[0]} training rows, {n_test} test rows; fitting 10 models "
            f"(Q={Q}, M={M}, {settings['fit_iters']} iterations each)")
    t = time.perf_counter()
    clf = GPLVMClassifier(latent_dim=Q, num_inducing=M, kernel="rbf",
                          max_iters=settings["fit_iters"], seed=ctx.seed, progress=False)
    clf.fit(Ytr, ltr)
    t_fit = time.perf_counter() - t
    ctx.log(f"  fitted in {t_fit:.0f} s; bounds " + ", ".join(f"{m.elbo():.0f}" for m in clf.models_))
    t = time.perf_counter()
    L = np.column_stack([m.log_density(Yte) for m in clf.models_])
    t_pred = time.perf_counter() - t
    pred = clf.classes_[np.argmax(L, axis=1)]
    errors = int(np.sum(pred != lte))
    ctx.log(f"  predicted in {t_pred:.0f} s: {errors} errors ({100 * errors / n_test:.2f} %)")

    t = time.perf_counter()
    nn = nearest_neighbour(Ytr, ltr, Yte)
    t_nn = time.perf_counter() - t
    t = time.perf_counter()
    lr, lam = softmax_baseline(Ytr, ltr, Yte, ctx.seed)
    t_lr = time.perf_counter() - t
    err_nn, err_lr = int(np.sum(nn != lte)), int(np.sum(lr != lte))
    ctx.log(f"  1-NN {err_nn} errors, softmax regression (lambda={lam:g}) {err_lr} errors")

    classes = clf.classes_
    confusion = np.zeros((classes.size, classes.size), dtype=int)
    for a, b in zip(lte, pred):
        confusion[np.searchsorted(classes, a), np.searchsorted(classes, b)] += 1
    pct = lambda e: 100.0 * e / n_test  # noqa: E731
    wall = time.perf_counter() - t_all
    table = Table(
        title=f"USPS test error ({n_test} test digits)",
        columns=["method", "# misclassified", "error (%)", "paper # misclassified", "paper error (%)"],
        rows=[["variational GP-LVM, 10 class models (ours)", errors, round(pct(errors), 2), PAPER_ERRORS, PAPER_ERROR_PCT],
              ["1-vs-all logistic regression (paper's baseline)", None, None, PAPER_LR_ERRORS, PAPER_LR_PCT],
              [f"softmax logistic regression, L2 {lam:g} (ours)", err_lr, round(pct(err_lr), 2), None, None],
              ["1-nearest neighbour, pixels (ours)", err_nn, round(pct(err_nn), 2), None, None]],
        note=(f"Wall time: fit {t_fit:.0f} s (10 models), class densities of all test digits "
              f"{t_pred:.0f} s, whole run {wall:.0f} s (2-core machine, shared)."))
    conf = Table(title="Confusion matrix of the GP-LVM classifier (rows: true digit, columns: predicted)",
                 columns=["true \\ pred"] + [str(c) for c in classes],
                 rows=[[str(c)] + confusion[i].tolist() for i, c in enumerate(classes)])
    return Result(
        name="usps", title="USPS digits: one GP-LVM per class, label by class-conditional density",
        paper_section="Class Conditional Density Estimation (sec:classification, Table table:usps)",
        tables=[table, conf],
        numbers=dict(errors=errors, error_pct=pct(errors), paper_errors=PAPER_ERRORS,
                     paper_error_pct=PAPER_ERROR_PCT, paper_lr_errors=PAPER_LR_ERRORS,
                     paper_lr_pct=PAPER_LR_PCT, nn_errors=err_nn, softmax_errors=err_lr,
                     softmax_lambda=lam, fit_s=t_fit, predict_s=t_pred, nn_s=t_nn, softmax_s=t_lr,
                     wall_s=wall, bounds=[float(m.elbo()) for m in clf.models_],
                     noise_variances=[m.noise_variance for m in clf.models_],
                     active_dims=[int(np.sum(m.ard_weights > 1e-3 * m.ard_weights.max())) for m in clf.models_],
                     confusion=confusion.tolist()),
        settings=settings,
        notes=["Target of issue 9: at most 5 % error.",
               "The paper's data set is the same 7291/2007 split; its preprocessing of the "
               "pixels (GPmat's usps files) differs from the [0, 1] version used here "
               "(reproduce/../datasets: usps PROVENANCE)."],
        wall_time_s=wall)

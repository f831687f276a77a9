"""``usps``: the generative classifier of section "Class Conditional Density Estimation".

Ten Bayesian GP-LVMs (Q = 10, M = 50), one per digit, each fitted on its training rows
of USPS (7291 train / 2007 test, 16x16); a test digit is labelled by the highest
class-conditional density log p(y* | Y_c) ~ F(q(X_c), q(x*)) - F(q(X_c))
(eq:predictive1) with a uniform prior. Paper (Table "table:usps"): 95 errors (4.73 %);
its 1-vs-all logistic regression baseline 283 (14.10 %). Our own baselines, written here
with numpy/scipy: 1-nearest neighbour on the pixels and multinomial (softmax) logistic
regression with an L2 penalty chosen on a held-out part of the training set.

The pixels. The paper's files (GPmat's ``usps_train.mat`` / ``usps_test.mat``, read by
vargplvm's ``lvmLoadData('usps')``) are not the [0, 1] digits our loader fetches: they are
the same digits blurred. Regressing GPmat's test file (``usps/gpmat/usps_test.mat`` in the
data mirror; its training half is missing from every public copy) on our test digits
mapped to [-1, 1] gives a 3x3 filter of 0.053 / 0.122 / 0.238 (corner / edge / centre, sum
0.94) with RMSE 0.018, the rounding of its 1/16 grey levels: the binomial filter
[1, 2, 1]^T [1, 2, 1] / 16 times 15/16, background -1 beyond the border, rounded to 1/16.
That reproduces 86 % of GPmat's test pixels exactly (RMSE 0.024 over all). ``gpmat_pixels``
applies it to both our halves, so the class models see the paper's data; the table also
keeps the run on the [0, 1] pixels.
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
#: what we tried against the gap to the paper's 95 errors (measured on the paper's pixels
#: with this command's settings; the scripts are not part of the command)
TRIED_NOTE = (
    "What did not close the gap to the paper's 95 errors (measured 2026-11-24 at commit 3b157ed, "
    "where this command made 115): the paper's kernel {rbfard2, white} (114 errors); 1,000 fit "
    "iterations, as the paper's demUspsVargplvm1 (115); no first phase with the noise held (113); "
    "starting q(x*) from the best of 5 or 10 nearest training rows, or 1,000 test iterations (no "
    "change); GPmat's own test file instead of our transform of the test digits (121); the "
    "all-at-once option of vargplvm's vargplvmProbabilityCompute, which optimises the q(x*) of all "
    "2,007 test digits jointly in one bound (100 iterations) before scoring each digit at its own "
    "q(x*) (190). Measured 2026-11-25 (c663816): the paper's optimiser itself, netlab's scaled "
    "conjugate gradients for 1,000 iterations from vargplvm's start noise 1e-3 (118; the digit-1 "
    "model still ended at a noise variance of 5.5e-4). Measured 2026-11-25 (964a4ca): other "
    "starts (seeds 0-3: PCA start, q(X) variances, inducing inputs) make 115, 118, 110 and 117 "
    "errors; keeping each class's model of the highest bound among the four makes 111, and the "
    "four models' densities averaged (a mixture) 112, so the gap is not the spread over starts.")
#: a class model whose noise variance is this many times below every other one's is named
#: as the likely source of its class's errors
NOISE_RATIO = 5.0


def gap_note(confusion: np.ndarray, noise: list[float], classes) -> str:
    """Where this run's errors are, from its confusion matrix and the class models' noise
    variances (computed, so it stays true when the fits change)."""
    wrong = confusion.sum(1) - np.diag(confusion)
    out = ("Where the errors are (test digits labelled otherwise, by true digit): "
           + ", ".join(f"{c}: {int(w)}" for c, w in zip(classes, wrong)) + ".")
    i = int(np.argmin(noise))
    others = [v for j, v in enumerate(noise) if j != i]
    if not others or wrong[i] == 0 or min(others) < NOISE_RATIO * noise[i]:
        return out
    row = confusion[i].copy()
    row[i] = 0
    order = [j for j in np.argsort(-row, kind="stable") if row[j] > 0]
    top = ", ".join(f"{int(row[j])} as {classes[j]}" for j in order[:3])
    rest = int(row[order[3:]].sum()) if len(order) > 3 else 0
    c = classes[i]
    return (out + f" The digit-{c} model learns the smallest noise variance, {noise[i]:.2g}, against "
            f"{min(others):.2g}-{max(others):.2g} for the other {len(others)}, so a test {c} unlike the "
            f"training {c}s is likely to get a very low density: {int(wrong[i])} of the "
            f"{int(confusion[i].sum())} test {c}s are labelled otherwise (most often {top}"
            + (f"; {rest} more" if rest else "") + ").")


def _load(ctx: Context):
    from bgplvm.datasets import load

    kw = dict(mirror=ctx.mirror, progress=ctx.verbose) if ctx.mirror else dict(progress=ctx.verbose)
    tr, te = load("usps", split="train", **kw), load("usps", split="test", **kw)
    return tr.Y, tr.labels, te.Y, te.labels


#: GPmat's grey levels: multiples of 1/16 in [-15/16, 15/16]
GPMAT_LEVELS = 16


def gpmat_pixels(Y01: np.ndarray) -> np.ndarray:
    """(n, 256) digits in [0, 1] (ink 1) -> GPmat's version (module docstring): [-1, 1],
    3x3 binomial blur with background -1 beyond the border, times 15/16, rounded to 1/16."""
    Y01 = np.asarray(Y01, dtype=np.float64)
    n = Y01.shape[0]
    P = np.pad(2.0 * Y01.reshape(n, 16, 16) - 1.0, ((0, 0), (1, 1), (1, 1)), constant_values=-1.0)
    w = np.array([1.0, 2.0, 1.0]) / 4.0
    blurred = sum(w[a] * w[b] * P[:, a:a + 16, b:b + 16] for a in range(3) for b in range(3))
    return np.round(blurred.reshape(n, 256) * (15.0 / 16.0) * GPMAT_LEVELS) / GPMAT_LEVELS


def gpmat_agreement(Yte01: np.ndarray, mirror: str | None) -> dict | None:
    """How well ``gpmat_pixels`` of our test digits matches GPmat's own test file, when the
    mirror holds it (``usps/gpmat/usps_test.mat``; same digits, same order): the fraction
    of pixels equal and the RMSE. None without the file."""
    from pathlib import Path

    path = Path(mirror or "") / "usps" / "gpmat" / "usps_test.mat"
    if not mirror or not path.is_file():
        return None
    from scipy.io import loadmat

    ref = loadmat(path)["ALL_DATA"]
    ours = gpmat_pixels(Yte01)
    if ref.shape != ours.shape:
        return None
    return dict(exact=float(np.mean(np.abs(ours - ref) < 1e-9)),
                rmse=float(np.sqrt(np.mean((ours - ref) ** 2))))


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


#: the two pixel versions each model and baseline runs on (module docstring)
PIXELS = {"gpmat": "the paper's pixels (GPmat: blurred, 1/16 levels)", "raw": "[0, 1] pixels"}


def _classify(Ytr, ltr, Yte, lte, fit_iters: int, ctx: Context, what: str) -> dict:
    """Fit the ten class models and label the test digits; errors, predictions, times."""
    from bgplvm import GPLVMClassifier

    ctx.log(f"usps ({what}): {Ytr.shape[0]} training rows, {Yte.shape[0]} test rows; fitting "
            f"10 models (Q={Q}, M={M}, {fit_iters} iterations each)")
    t = time.perf_counter()
    clf = GPLVMClassifier(latent_dim=Q, num_inducing=M, kernel="rbf", max_iters=fit_iters,
                          seed=ctx.seed, progress=False).fit(Ytr, ltr)
    t_fit = time.perf_counter() - t
    ctx.log(f"  fitted in {t_fit:.0f} s; bounds " + ", ".join(f"{m.elbo():.0f}" for m in clf.models_))
    t = time.perf_counter()
    L = np.column_stack([m.log_density(Yte) for m in clf.models_])
    t_pred = time.perf_counter() - t
    pred = clf.classes_[np.argmax(L, axis=1)]
    errors = int(np.sum(pred != lte))
    ctx.log(f"  predicted in {t_pred:.0f} s: {errors} errors ({100 * errors / Yte.shape[0]:.2f} %)")
    return dict(clf=clf, pred=pred, errors=errors, fit_s=t_fit, predict_s=t_pred)


def _baselines(Ytr, ltr, Yte, lte, ctx: Context, what: str) -> dict:
    t = time.perf_counter()
    err_nn = int(np.sum(nearest_neighbour(Ytr, ltr, Yte) != lte))
    t_nn = time.perf_counter() - t
    t = time.perf_counter()
    lr, lam = softmax_baseline(Ytr, ltr, Yte, ctx.seed)
    t_lr = time.perf_counter() - t
    err_lr = int(np.sum(lr != lte))
    ctx.log(f"  ({what}) 1-NN {err_nn} errors, softmax regression (lambda={lam:g}) {err_lr} errors")
    return dict(nn_errors=err_nn, nn_s=t_nn, softmax_errors=err_lr, softmax_lambda=lam, softmax_s=t_lr)


def run(ctx: Context) -> Result:
    import bgplvm

    t_all = time.perf_counter()
    bgplvm.warmup()  # compile (or load) every Numba kernel before anything is timed
    Ytr, ltr, Yte, lte = _load(ctx)
    agreement = gpmat_agreement(Yte, ctx.mirror)
    settings = dict(latent_dim=Q, num_inducing=M, kernel="rbf", fit_iters=FIT_ITERS, seed=ctx.seed,
                    n_train=int(Ytr.shape[0]), n_test=int(Yte.shape[0]),
                    inference="infer_latent: batched L-BFGS from the nearest training row, n_init=1",
                    pixels=PIXELS)
    if ctx.quick:  # 60 training rows per class, 300 test rows, short fits
        rng = np.random.default_rng(ctx.seed)
        keep = np.concatenate([rng.permutation(np.flatnonzero(ltr == c))[:60] for c in np.unique(ltr)])
        Ytr, ltr = Ytr[keep], ltr[keep]
        sub = rng.permutation(Yte.shape[0])[:300]
        Yte, lte = Yte[sub], lte[sub]
        settings.update(fit_iters=150, n_train=int(Ytr.shape[0]), n_test=int(Yte.shape[0]))
    n_test = Yte.shape[0]
    data = {"gpmat": (gpmat_pixels(Ytr), gpmat_pixels(Yte)), "raw": (Ytr, Yte)}
    runs = {k: {**_classify(A, ltr, B, lte, settings["fit_iters"], ctx, PIXELS[k]),
                **_baselines(A, ltr, B, lte, ctx, PIXELS[k])} for k, (A, B) in data.items()}
    main = runs["gpmat"]
    clf, pred, errors = main["clf"], main["pred"], main["errors"]

    classes = clf.classes_
    confusion = np.zeros((classes.size, classes.size), dtype=int)
    for a, b in zip(lte, pred):
        confusion[np.searchsorted(classes, a), np.searchsorted(classes, b)] += 1
    pct = lambda e: 100.0 * e / n_test  # noqa: E731
    wall = time.perf_counter() - t_all
    rows = []
    for k, r in runs.items():
        first = k == "gpmat"
        rows.append([f"variational GP-LVM, 10 class models, {PIXELS[k]} (ours)", r["errors"],
                     round(pct(r["errors"]), 2), PAPER_ERRORS if first else None,
                     PAPER_ERROR_PCT if first else None])
    rows.append(["1-vs-all logistic regression (paper's baseline)", None, None, PAPER_LR_ERRORS, PAPER_LR_PCT])
    for k, r in runs.items():
        rows.append([f"softmax logistic regression, L2 {r['softmax_lambda']:g}, {PIXELS[k]} (ours)",
                     r["softmax_errors"], round(pct(r["softmax_errors"]), 2), None, None])
    for k, r in runs.items():
        rows.append([f"1-nearest neighbour, {PIXELS[k]} (ours)", r["nn_errors"],
                     round(pct(r["nn_errors"]), 2), None, None])
    times = "; ".join(f"{PIXELS[k]}: fit {r['fit_s']:.0f} s (10 models), class densities of all "
                      f"test digits {r['predict_s']:.0f} s" for k, r in runs.items())
    table = Table(
        title=f"USPS test error ({n_test} test digits)",
        columns=["method", "# misclassified", "error (%)", "paper # misclassified", "paper error (%)"],
        rows=rows,
        note=f"Wall time: {times}; whole run {wall:.0f} s (2-core machine, shared).")
    conf = Table(title="Confusion matrix of the GP-LVM classifier on the paper's pixels "
                       "(rows: true digit, columns: predicted)",
                 columns=["true \\ pred"] + [str(c) for c in classes],
                 rows=[[str(c)] + confusion[i].tolist() for i, c in enumerate(classes)])
    if agreement is None:
        check = ("GPmat's test file is not in the data mirror here, so the pixel transform was "
                 "not checked against it in this run.")
    else:
        check = (f"Checked in this run against GPmat's test file: {100 * agreement['exact']:.1f} % "
                 f"of the pixels equal, RMSE {agreement['rmse']:.4f} (grey levels 1/16 apart).")
    per_run = {k: {n: v for n, v in r.items() if n not in ("clf", "pred")} for k, r in runs.items()}
    return Result(
        name="usps", title="USPS digits: one GP-LVM per class, label by class-conditional density",
        paper_section="Class Conditional Density Estimation (sec:classification, Table table:usps)",
        tables=[table, conf],
        numbers=dict(errors=errors, error_pct=pct(errors), paper_errors=PAPER_ERRORS,
                     paper_error_pct=PAPER_ERROR_PCT, paper_lr_errors=PAPER_LR_ERRORS,
                     paper_lr_pct=PAPER_LR_PCT, runs=per_run, gpmat_agreement=agreement,
                     wall_s=wall, bounds=[float(m.elbo()) for m in clf.models_],
                     noise_variances=[m.noise_variance for m in clf.models_],
                     active_dims=[int(np.sum(m.ard_weights > 1e-3 * m.ard_weights.max())) for m in clf.models_],
                     confusion=confusion.tolist()),
        settings=settings,
        notes=["Target of issue 9: at most 5 % error.",
               "The paper's pixels: its files (GPmat's usps_*.mat) hold the same 7291/2007 digits "
               "blurred with a 3x3 binomial filter, scaled by 15/16 and rounded to 1/16; we apply "
               "that transform to the [0, 1] digits we fetch (GPmat's training file is missing "
               "from every public copy). How it was found: reproduce/usps.py's docstring. " + check,
               gap_note(confusion, [m.noise_variance for m in clf.models_], classes), TRIED_NOTE],
        wall_time_s=wall)

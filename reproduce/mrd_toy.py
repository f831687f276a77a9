"""``bgplvm reproduce mrd-toy``: does MRD find which latent dimensions its views share?

Three views of one 4-D latent space with a known segmentation
(``bgplvm.datasets.synthetic.mrd_views``, as GPy's ``mrd_simulation``): x0 shared by all
three views, x1 by a and b, x2 private to a, x3 private to c; the views are 8, 5 and 40
columns wide (the widest must not swamp the others). ``MRD`` with Q = 6 (two dimensions
more than needed), M = 20, fitted for ``ITERS`` iterations from ``SEEDS`` seeds (the data
drawn anew with each), in each combination of its choices: inducing inputs per view or
shared, and q(X) started by PCA of the views each scaled to unit total variance or of the
first view alone. A fit *recovers* the segmentation when ``segmentation()`` (relative ARD
weight > 0.1) gives exactly one dimension shared by a, b and c, one by a and b, one private
to a, one private to c, and nothing else switched on. The table gives, per choice, the fits
that recovered it, the median bound and the median fit time; the defaults of ``MRD`` are the
choice with the most recoveries (then the higher bound) once the pose data agree
(``MRD``'s docstring says which are in use).

Across views (``across_views``): with ``ACROSS_ROWS`` rows drawn and split at random
(``ACROSS_FIT`` fitted, the rest held out; the rows follow a path in the latent space, so a
contiguous split would hold out latent configurations no training row has), each view is
predicted from the other two on the held-out rows (``MRD.reconstruct``): the coverage of
its nominal 95 % intervals as fitted and after ``MRD.calibrate`` (which never sees the
held-out rows), its RMSE against the training column mean's, and k-NN's on the calibration's
held-out training rows (the predictions warn when it is lower).
"""

from __future__ import annotations

import time

import numpy as np

from .report import Context, Result, Table

SEEDS = 10
ITERS = 1000
QUICK_ITERS, QUICK_SEEDS = 60, 2
LATENT_DIM, NUM_INDUCING = 6, 20
N_ROWS = 100
ACROSS_ROWS, ACROSS_FIT, ACROSS_SEEDS = 300, 200, 6
CHOICES = [(inducing, init) for inducing in ("per_view", "shared") for init in ("scaled_pca", "first_view")]


def truth() -> dict:
    """The segmentation of ``mrd_views`` as ``Segmentation.as_dict`` counts it: {(views): number of dims}."""
    from bgplvm.datasets.synthetic import MRD_VIEW_DIMS

    users = {}
    for view, dims in MRD_VIEW_DIMS.items():
        for q in dims:
            users.setdefault(q, []).append(view)
    out = {}
    for who in users.values():
        out[tuple(sorted(who))] = out.get(tuple(sorted(who)), 0) + 1
    return out


def found(seg) -> dict:
    """{(views): number of dims} of a fitted ``Segmentation``."""
    out = {tuple(sorted(k)): len(v) for k, v in seg.shared.items()}
    out.update({(n,): len(v) for n, v in seg.private.items() if v})
    return out


def run(ctx: Context) -> Result:
    from bgplvm import MRD
    from bgplvm.datasets.synthetic import mrd_views

    iters, n_seeds = (QUICK_ITERS, QUICK_SEEDS) if ctx.quick else (ITERS, SEEDS)
    want = truth()
    rows, numbers = [], {}
    for inducing, init in CHOICES:
        fits = []
        for seed in range(n_seeds):
            views, _ = mrd_views(N_ROWS, seed=ctx.seed + seed)
            t0 = time.perf_counter()
            m = MRD(views, latent_dim=LATENT_DIM, num_inducing=NUM_INDUCING, seed=seed, inducing=inducing, init=init)
            m.fit(max_iters=iters, progress=False)
            seg = m.segmentation()
            got = found(seg)
            fits.append(dict(seed=seed, bound=float(m.elbo()), seconds=time.perf_counter() - t0,
                             recovered=got == want, found={"+".join(k): v for k, v in got.items()},
                             segmentation=seg.as_dict()))
            ctx.log(f"mrd-toy {inducing}/{init} seed {seed}: bound {m.elbo():.1f}, "
                    f"{'recovered' if got == want else 'found ' + str(fits[-1]['found'])}")
        numbers[f"{inducing}/{init}"] = fits
        rows.append([inducing, init, f"{sum(f['recovered'] for f in fits)} of {n_seeds}",
                     float(np.median([f["bound"] for f in fits])), float(np.median([f["seconds"] for f in fits]))])
    best = max(rows, key=lambda r: (int(r[2].split()[0]), r[3]))
    table = Table(title=f"Segmentation recovered (x0: a+b+c, x1: a+b, x2: a, x3: c) from {n_seeds} seeds, "
                        f"Q = {LATENT_DIM}, M = {NUM_INDUCING}, {iters} iterations",
                  columns=["inducing inputs", "start of q(X)", "recovered", "median bound", "median fit (s)"],
                  rows=rows, note="Relative ARD weight > 0.1 switches a dimension on for a view "
                                  "(MRD.segmentation's default threshold).")
    notes = [f"Most recoveries (then the higher median bound): inducing={best[0]!r}, init={best[1]!r}."]
    across, across_numbers = across_views(ctx, iters, n_seeds if ctx.quick else ACROSS_SEEDS)
    return Result(name="mrd-toy", title="MRD: shared and private latent dimensions recovered",
                  paper_section="none (Damianou, Ek, Titsias & Lawrence, ICML 2012; issue 45)",
                  tables=[table, across], numbers=dict(fits=numbers, truth={"+".join(k): v for k, v in want.items()},
                                                       best=dict(inducing=best[0], init=best[1]),
                                                       across=across_numbers),
                  settings=dict(seeds=n_seeds, iters=iters, latent_dim=LATENT_DIM, num_inducing=NUM_INDUCING,
                                rows=N_ROWS, dims=[8, 5, 40]), notes=notes)


def across_views(ctx: Context, iters: int, n_seeds: int) -> tuple[Table, list]:
    """Each view predicted from the other two on held-out rows, before and after
    ``MRD.calibrate`` (module docstring)."""
    import warnings

    from bgplvm import MRD
    from bgplvm.datasets.synthetic import mrd_views
    from bgplvm.metrics import gaussian_scores

    rows, numbers = [], []
    for seed in range(n_seeds):
        views, _ = mrd_views(ACROSS_ROWS, seed=ctx.seed + seed)
        perm = np.random.default_rng(ctx.seed + 100 + seed).permutation(ACROSS_ROWS)
        train = {n: Y[perm[:ACROSS_FIT]] for n, Y in views.items()}
        test = {n: Y[perm[ACROSS_FIT:]] for n, Y in views.items()}
        m = MRD(train, latent_dim=LATENT_DIM, num_inducing=NUM_INDUCING, seed=seed).fit(max_iters=iters,
                                                                                        progress=False)
        cal = m.calibrate(rows=ACROSS_FIT)
        for t in m.view_names:
            obs = {n: test[n] for n in m.view_names if n != t}
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                mean, var = m.reconstruct(obs, target=t)
            var0 = m.reconstruct(obs, target=t, calibrated=False)[1]
            c = cal.targets[t].calibration
            rmse = lambda p: float(np.sqrt(np.mean((p - test[t]) ** 2)))  # noqa: E731
            f = dict(seed=seed, target=t, observed="+".join(n for n in m.view_names if n != t),
                     before=gaussian_scores(mean, var0, test[t]).coverage[0.95],
                     after=gaussian_scores(mean, var, test[t]).coverage[0.95], rmse=rmse(mean),
                     column_mean_rmse=rmse(np.broadcast_to(m.views[t].mean, test[t].shape)),
                     held_out_model_rmse=c.model_rmse, held_out_knn_rmse=c.knn_rmse,
                     calibration_after=c.after["coverage"]["0.95"],
                     warned=any("simple baseline" in str(w.message) for w in caught))
            numbers.append(f)
            rows.append([seed, f"{t} from {f['observed']}", 100 * f["before"], 100 * f["after"], f["rmse"],
                         f["column_mean_rmse"], c.model_rmse, c.knn_rmse, "yes" if f["warned"] else "no"])
            ctx.log(f"mrd-toy across views seed {seed}, {t}: 95 % {100 * f['before']:.1f} -> {100 * f['after']:.1f}")
    table = Table(title=f"Each view from the other two on {ACROSS_ROWS - ACROSS_FIT} held-out rows ({ACROSS_FIT} "
                        f"fitted, split at random), Q = {LATENT_DIM}, M = {NUM_INDUCING}, {iters} iterations",
                  columns=["seed", "predicted", "95 % as fitted", "95 % calibrated", "RMSE", "column mean RMSE",
                           "held-out training RMSE", "k-NN there", "warns"],
                  rows=rows, note="Calibrated: MRD.calibrate(rows=200) on the fitted rows only (each view from the "
                                  "others, the views' q(u) without the fold's rows); 'warns': the predictions say a "
                                  "simple baseline did better on the held-out training rows.")
    return table, numbers

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
    return Result(name="mrd-toy", title="MRD: shared and private latent dimensions recovered",
                  paper_section="none (Damianou, Ek, Titsias & Lawrence, ICML 2012; issue 45)",
                  tables=[table], numbers=dict(fits=numbers, truth={"+".join(k): v for k, v in want.items()},
                                               best=dict(inducing=best[0], init=best[1])),
                  settings=dict(seeds=n_seeds, iters=iters, latent_dim=LATENT_DIM, num_inducing=NUM_INDUCING,
                                rows=N_ROWS, dims=[8, 5, 40]), notes=notes)

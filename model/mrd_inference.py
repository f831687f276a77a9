"""Across views: q(x*) of new rows from whichever of their views are observed (``MRD``).

The test-time bound of a new row (eq:predictive1, app:partialtestBound) is, for a model of
several views, the sum over the views it observes of each view's test bound (that view's
training statistics with the row's observed entries added), minus KL(q(x*) || p(x*)) once:

    F(q(x*)) = sum_{v observed} Delta_v(q(x*)) - KL(q(x*) || N(0, I)).

``ViewsBound`` sums the views' ``testbound.TestBound`` gains, and ``testbound.optimise_rows``
maximises it as it does for one view. A row starts from the q(x_n) of the best (by this
objective) of its nearest training rows in each observed view. The other views are then
predicted at q(x*) by their own mappings (meanFstar / covFstar: ``MRD.predict_views``).

A silhouette can fit several poses: ``MRD.infer_candidates`` optimises from each start
separately and keeps the distinct optima of each row, ranked by their bounds.

Dimensions that none of the observed views switches on are not determined by them: q(x*)
stays at its prior N(0, 1) there (``undetermined="prior"``, the default), and a view that
depends on them is predicted towards its mean. The training q(X) is no such product,
though: on the pose / silhouette frames the pose's main dimension is 70 % predictable
(R^2 of a 5-NN regression over the training latent means) from the silhouette's dimensions,
and the pose predicted at q(x*) erred 4.36 per body point against 3.16 for the nearest
training silhouette's pose (600 training frames, 300 held out). ``undetermined="nearest"``
takes those dimensions (mean and variance) from the q(x_n) of the training row that
started the row's optimisation (its nearest in the observed views), as svargplvm's pose
demo takes them from a nearest training point: 3.12 there (``fill_undetermined``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .testbound import LatentFit, TestBound, check_test_outputs, nearest_rows, optimise_rows


class ViewsBound:
    """sum_v Delta_v of each row over the views it observes (module docstring), in the form
    ``testbound.optimise_rows`` takes (``evaluate_rows``).

    parts : [(TestBound of the rows observing view v, local (n*,) each row's index in it or -1)].
    """

    def __init__(self, parts: list[tuple[TestBound, np.ndarray]], n: int):
        self.parts, self.n = parts, n

    def evaluate_rows(self, mu, S, rows, grad: bool = True):
        k, Q = mu.shape
        gain = np.zeros(k)
        dmu, dS = (np.zeros((k, Q)), np.zeros((k, Q))) if grad else (None, None)
        for tb, local in self.parts:
            loc = local[rows]
            sel = np.flatnonzero(loc >= 0)
            if not sel.size:
                continue
            g, dm, ds = tb.evaluate_rows(mu[sel], S[sel], loc[sel], grad)
            gain[sel] += g
            if grad:
                dmu[sel] += dm
                dS[sel] += ds
        return gain, dmu, dS


def check_observed(m, observed: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{view: (Ys (n*, D_v) with 0 at missing entries, mask (n*, D_v))} of the observed
    views, all with the same rows; every row must observe something in some view."""
    if not isinstance(observed, dict) or not observed:
        raise TypeError("observed must be a dict of view name -> (n*, D_v) array (NaN = missing), e.g. "
                        f"{{{m.view_names[0]!r}: Y_star}}")
    unknown = [n for n in observed if n not in m.views]
    if unknown:
        raise ValueError(f"unknown view(s) {unknown} in observed; the views are {m.view_names}")
    out = {}
    for n, Y in observed.items():
        out[n] = check_test_outputs(Y, m.views[n].shape[1], name=f"observed[{n!r}]", allow_empty_rows=True)
    rows = {n: v[0].shape[0] for n, v in out.items()}
    if len(set(rows.values())) > 1:
        raise ValueError(f"the observed views must have the same rows, got {rows}")
    seen = np.any([mask.any(axis=1) for _, mask in out.values()], axis=0)
    if not seen.all():
        empty = np.flatnonzero(~seen)
        raise ValueError(f"rows {empty[:10].tolist()} observe nothing in any view: there is nothing to infer "
                         "them from")
    return out


def views_bound(m, obs: dict, stats: dict | None = None) -> tuple[ViewsBound, np.ndarray]:
    """(the ``ViewsBound`` of the observed views, candidates (n*, k) training rows: each
    observed view's nearest row to each row, the row's first observed view standing in
    where it observes a view not at all). ``stats``: {view: (TrainingStats, the training
    rows they hold (indices into q(X)))} in place of the views' own (all rows), e.g. a
    calibration fold's."""
    n = next(iter(obs.values()))[0].shape[0]
    parts, cands = [], []
    for name, (Ys, mask) in obs.items():
        rows = np.flatnonzero(mask.any(axis=1))
        local = np.full(n, -1, dtype=np.int64)
        local[rows] = np.arange(rows.size)
        st, held = (m._view_model(name)._test_stats(), None) if stats is None else stats[name]
        parts.append((TestBound(st, Ys[rows], mask[rows]), local))
        nn = np.full(n, -1, dtype=np.int64)
        near = nearest_rows(st, Ys[rows], mask[rows], k=1)[:, 0]
        nn[rows] = near if held is None else held[near]
        cands.append(nn)
    cand = np.array(cands).T  # (n*, V_obs), -1 where a row misses that view
    first = cand[np.arange(n), np.argmax(cand >= 0, axis=1)]
    cand = np.where(cand >= 0, cand, first[:, None])
    return ViewsBound(parts, n), cand


def infer_views(m, observed: dict, max_iters: int = 200, starts=None) -> LatentFit:
    """q(x*) of new rows from their observed views (module docstring); ``starts`` (n*, k)
    training rows to start from (default: each observed view's nearest)."""
    obs = check_observed(m, observed)
    bound, cand = views_bound(m, obs)
    cand = cand if starts is None else starts
    mu, S = m.latent_mean, m.latent_variance
    return optimise_rows(bound, mu, S, cand, max_iters, 1e-3, 1e-9, 1e-7, True)


#: what q(x*) holds in the dimensions no observed view switches on (module docstring)
UNDETERMINED = ("prior", "nearest")


def fill_undetermined(m, observed: dict, fit: LatentFit, undetermined: str = "prior",
                      threshold: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(mu, S) (n*, Q) of ``fit`` with, for ``undetermined="nearest"``, the dimensions that
    no view of ``observed`` switches on (``MRD.segmentation(threshold)``) replaced by the
    q(x_n) of each row's starting training row (``fit.init_rows``); unchanged for "prior"."""
    if undetermined not in UNDETERMINED:
        raise ValueError(f"undetermined must be one of {UNDETERMINED}, got {undetermined!r}")
    if undetermined == "prior":
        return fit.mu, fit.S
    seg = m.segmentation() if threshold is None else m.segmentation(threshold)
    on = np.zeros(m.latent_dim, dtype=bool)
    for name in observed:
        on[seg.on[name]] = True
    rows = fit.init_rows
    return np.where(on, fit.mu, m.latent_mean[rows]), np.where(on, fit.S, m.latent_variance[rows])


@dataclass
class Candidates:
    """The distinct local optima of q(x*) of each row (``MRD.infer_candidates``), best
    first: mu, S (n*, K, Q) and log_density (n*, K), -inf (and NaN moments) past a row's
    ``count`` (n*,) distinct optima."""

    mu: np.ndarray
    S: np.ndarray
    log_density: np.ndarray
    count: np.ndarray


def infer_candidates(m, observed: dict, n_starts: int = 10, max_iters: int = 200,
                     distinct: float = 1.0) -> Candidates:
    """Each row optimised from each of its ``n_starts`` starting points separately: the
    nearest training rows in its observed views (in turn over the views); the optima closer
    than ``distinct`` posterior standard deviations (in every latent dimension) to a better
    one are dropped."""
    obs = check_observed(m, observed)
    bound, _ = views_bound(m, obs)
    n = bound.n
    per_view = []
    for name, (Ys, mask) in obs.items():
        rows = np.flatnonzero(mask.any(axis=1))
        k = min(n_starts, m.views[name].shape[0])
        nn = np.full((n, k), -1, dtype=np.int64)
        nn[rows] = nearest_rows(m._view_model(name)._test_stats(), Ys[rows], mask[rows], k=k)
        per_view.append(nn)
    order = np.stack(per_view, axis=2).reshape(n, -1)  # nearest of each view first, then second ...
    starts = np.empty((n, n_starts), dtype=np.int64)
    for i in range(n):
        seen = [r for r in dict.fromkeys(order[i].tolist()) if r >= 0]
        seen += seen[-1:] * (n_starts - len(seen))  # fewer rows than starts: repeat the last
        starts[i] = seen[:n_starts]
    mu_t, S_t = m.latent_mean, m.latent_variance
    fits = [optimise_rows(bound, mu_t, S_t, starts[:, [c]], max_iters, 1e-3, 1e-9, 1e-7, True)
            for c in range(n_starts)]
    return _distinct(fits, distinct)


def _distinct(fits: list[LatentFit], distinct: float) -> Candidates:
    n, Q = fits[0].mu.shape
    K = len(fits)
    mu = np.full((n, K, Q), np.nan)
    S = np.full((n, K, Q), np.nan)
    ld = np.full((n, K), -np.inf)
    count = np.zeros(n, dtype=np.int64)
    all_ld = np.stack([f.log_density for f in fits], axis=1)  # (n, K)
    for i in range(n):
        for c in np.argsort(-all_ld[i]):
            f = fits[c]
            near = [np.all(np.abs(f.mu[i] - mu[i, j]) < distinct * np.sqrt(np.maximum(S[i, j], f.S[i])))
                    for j in range(count[i])]
            if any(near):
                continue
            j = count[i]
            mu[i, j], S[i, j], ld[i, j] = f.mu[i], f.S[i], f.log_density[i]
            count[i] += 1
    return Candidates(mu=mu, S=S, log_density=ld, count=count)

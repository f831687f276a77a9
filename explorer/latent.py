"""Pure helpers of the latent space (no state, no Panel): which ARD dimensions are
switched off, the two to show, the box around the latent means, the predictive-variance
grid, and the note for a model that found no structure."""

from __future__ import annotations

import numpy as np

from bgplvm.io import ACTIVE_FRACTION

#: An ARD weight at or below this fraction of the largest one counts as "switched off"
#: (its lengthscale is > 4.5x the shortest: the mapping barely varies along it); the same
#: threshold as ``bgplvm summary``.
ARD_OFF_FRACTION = ACTIVE_FRACTION


def ard_off_mask(alpha: np.ndarray) -> np.ndarray:
    """(Q,) bool: dimensions whose ARD weight alpha_q is negligible (switched off)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    top = float(np.max(alpha)) if alpha.size else 0.0
    return alpha <= ARD_OFF_FRACTION * top


def top_two_dims(alpha: np.ndarray) -> tuple[int, int]:
    """Indices of the two largest ARD weights (x first); (0, 0) when Q == 1."""
    order = np.argsort(-np.asarray(alpha, dtype=np.float64), kind="stable")
    if order.size == 1:
        return int(order[0]), int(order[0])
    return int(order[0]), int(order[1])


def latent_bounds(mu: np.ndarray, S: np.ndarray | None, dims: tuple[int, int],
                  pad: float = 0.12) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) box around the latent means of ``dims``, padded by ``pad`` of
    its size (and by two posterior standard deviations), never degenerate."""
    out = []
    for d in dims:
        lo, hi = float(np.min(mu[:, d])), float(np.max(mu[:, d]))
        if S is not None:
            sd = float(np.sqrt(np.median(S[:, d])))
            lo, hi = min(lo, float(np.min(mu[:, d])) - 2 * sd), max(hi, float(np.max(mu[:, d])) + 2 * sd)
        span = hi - lo
        if not np.isfinite(span) or span < 1e-9:
            span = max(abs(lo), 1.0)
        out.append((lo - pad * span, hi + pad * span))
    (x0, x1), (y0, y1) = out
    return x0, y0, x1, y1


#: a model whose signal sd is below this share of its noise sd has found no structure
NOISE_ONLY_SNR = 0.1


def noise_only_note(model) -> str:
    """" Note: ..." when ``model`` explains its data as noise (the latent view is then flat:
    every latent mean at the prior's, one predictive variance everywhere), else ""."""
    sf2, noise = float(model.kernel_variance), float(model.noise_variance)
    if not (noise > 0 and np.sqrt(sf2 / noise) < NOISE_ONLY_SNR):
        return ""
    return (f" Note: this model found almost no structure: it explains the data as noise (signal-to-noise "
            f"sd ratio {np.sqrt(sf2 / noise):.2g}), so every latent point sits at the prior mean and the latent "
            "view is flat. More rows, a longer fit or fewer latent dimensions may help.")


def grid_points(fixed: np.ndarray, dims: tuple[int, int], bounds, res: int) -> np.ndarray:
    """(res*res, Q) latent points: a res x res grid over ``bounds`` in ``dims``, the
    other coordinates at ``fixed``. Row-major with y varying slowest (image order)."""
    x0, y0, x1, y1 = bounds
    xs = np.linspace(x0, x1, res)
    ys = np.linspace(y0, y1, res)
    X = np.empty((res * res, fixed.size))
    X[:] = fixed
    gx, gy = np.meshgrid(xs, ys)
    X[:, dims[0]] = gx.ravel()
    X[:, dims[1]] = gy.ravel()
    return X


def variance_grid(model, fixed: np.ndarray, dims: tuple[int, int], bounds, res: int = 200) -> np.ndarray:
    """(res, res) predictive variance of f over the grid, row 0 at y = bounds' y0."""
    X = grid_points(np.asarray(fixed, dtype=np.float64), dims, bounds, res)
    return np.asarray(model.predictive_variance(X), dtype=np.float64).reshape(res, res)


def segmentation_roles(seg, Q: int) -> dict[int, str]:
    """{q: "shared by a + b" / "private to a" / "off"} of a multi-view model's
    ``Segmentation`` (``bgplvm.MRD.segmentation``)."""
    out = {q: "off" for q in range(Q)}
    for views, dims in seg.shared.items():
        out.update({int(q): "shared by " + " + ".join(views) for q in dims})
    for view, dims in seg.private.items():
        out.update({int(q): f"private to {view}" for q in dims})
    return out


def segmentation_text(seg) -> str:
    """One line of a ``Segmentation``: "shared by a + b: 0, 3; private to a: 1; off: 2"."""
    dims = lambda d: ", ".join(str(int(q)) for q in d)  # noqa: E731
    parts = [f"shared by {' + '.join(k)}: {dims(v)}" for k, v in seg.shared.items() if len(v)]
    parts += [f"private to {k}: {dims(v)}" for k, v in seg.private.items() if len(v)]
    if len(seg.off):
        parts.append(f"off: {dims(seg.off)}")
    return "; ".join(parts) or "no dimension switched on"

"""Sequences in time: what the player plays, computed in one batched call per sequence.

Pure functions (numpy in, numpy out; no Panel, no Bokeh). For a training sequence s of a
dynamical model, the frames are q(X*) at the sequence's own time stamps followed by
``horizon`` time steps past its end (qxstar: the GP conditional of the time prior; past
the end q(X*) relaxes to the prior and its variance grows), and the outputs there from the
uncertain-input moments (meanFstar / covFstar): a latent point that is uncertain gives an
output whose uncertainty differs per dimension. For a static model the frames are q(x_n)
of the sequence's rows in time order, and there is nothing to forecast from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .projection import rotation

#: Posterior samples per frame for the per-joint spread of renderers that are not linear
#: in the output (forward kinematics); the same draws for every frame (common random
#: numbers), so the spread moves smoothly in time instead of flickering.
SPREAD_SAMPLES = 32


@dataclass(frozen=True)
class Playback:
    """Frames of one sequence, ready to be drawn.

    t (T,) time stamps; the first ``n_train`` are the sequence's training times, the rest
    forecasts. mu, S (T, Q): q(x*) per frame. mean, var (T, D): predictive mean and variance
    of f (noise excluded; ``noise_variance`` is the model's). rows (n_train,): the data rows
    of the training frames (-1: none). For an inferred stretch (observe and infer),
    ``truth`` (T, D) is drawn beside it as a ghost and ``hidden`` are the inferred columns.
    A ``preview`` is the data itself before any model (``data_playback``): var is zero and
    mu (T, 2) holds the rows' coordinates on the data's first two principal axes.
    """

    sequence: object
    label: str
    t: np.ndarray
    n_train: int
    mu: np.ndarray
    S: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    rows: np.ndarray
    noise_variance: float
    dynamical: bool
    truth: np.ndarray | None = None
    hidden: np.ndarray | None = None
    preview: bool = False

    @property
    def T(self) -> int:
        return int(self.t.shape[0])

    @property
    def is_forecast(self) -> np.ndarray:
        f = np.zeros(self.T, dtype=bool)
        f[self.n_train:] = True
        return f


def is_dynamical(model) -> bool:
    return getattr(getattr(model, "prior", None), "kind", "") == "dynamical"


def sequence_ids(ds, model=None) -> list:
    """Sequence ids in order of first appearance (the model's own when it is dynamical)."""
    if model is not None and is_dynamical(model):
        return list(model.prior.sequence_ids.tolist())
    if ds is None or ds.sequence is None:
        return []
    seq = np.asarray(ds.sequence)
    _, first = np.unique(seq, return_index=True)
    return [seq[i].item() for i in sorted(first)]


def sequence_label(ds, s) -> str:
    """A short name: the trial name and motion when the data set has them."""
    meta = getattr(ds, "meta", None) or {}
    trials = meta.get("trials")
    name = f"sequence {s}"
    if trials is not None and isinstance(s, (int, np.integer)) and 0 <= int(s) < len(trials):
        name = f"{trials[int(s)]}"
    if ds is not None and ds.labels is not None and ds.sequence is not None:
        rows = np.flatnonzero(np.asarray(ds.sequence) == s)
        if rows.size and ds.label_names is not None:
            lab = int(ds.labels[rows[0]])
            if 0 <= lab < len(ds.label_names):
                name += f" ({ds.label_names[lab]})"
    return name


def sequence_names(ds) -> dict:
    """{sequence id: name} for a colour key: the trial names when the data set has them
    (uploaded motion capture showed "sequence 0/1/2" beside its list of 35_01, ...)."""
    if ds is None or ds.sequence is None or not (ds.meta or {}).get("trials"):
        return {}
    return {s: sequence_label(ds, s) for s in dict.fromkeys(np.asarray(ds.sequence).tolist())}


def sequence_rows(model, ds, s) -> np.ndarray:
    """Row indices of sequence s in time order."""
    if is_dynamical(model):
        return np.asarray(model.prior.rows_of(s))
    rows = np.flatnonzero(np.asarray(ds.sequence) == s)
    if ds.times is not None:
        rows = rows[np.argsort(np.asarray(ds.times)[rows], kind="stable")]
    return rows


def seconds(ds, t: np.ndarray) -> np.ndarray:
    """Time stamps as shown (axes, readouts): in seconds of the recording. A data set whose
    stamps are on another clock says so in its metadata -- CMU 35 keeps the paper's code's
    0.05 per frame (``time_step``) for frames recorded at 30 Hz (``frame_rate_hz``), so
    its stamps run 1.5x the seconds they span; the model keeps its own units."""
    meta = getattr(ds, "meta", None) or {}
    step, hz = meta.get("time_step"), meta.get("frame_rate_hz")
    scale = 1.0 / (float(hz) * float(step)) if step and hz else 1.0
    return np.asarray(t, dtype=np.float64) * scale


def time_unit(ds) -> str:
    """The unit the data set's time stamps are shown in ("s" unless it says otherwise)."""
    return str((getattr(ds, "meta", None) or {}).get("time_unit", "s"))


def frame_rate(ds) -> float:
    """Frames per second at which the data set's sequences play (the player and the GIF
    alike): its recorded rate, else its stated playback rate, else 30 for stamps in seconds
    and 15 for frame counts."""
    meta = getattr(ds, "meta", None) or {}
    for k in ("frame_rate_hz", "fps"):
        if meta.get(k):
            return float(meta[k])
    return 30.0 if time_unit(ds) == "s" else 15.0


def gif_durations(n: int, fps: float) -> list[int]:
    """Display times (ms) of ``n`` GIF frames at ``fps``: GIF counts in hundredths of a
    second, so 30 frames/s (33.3 ms) is played as 30, 30, 40 ms in turn (one fixed 30 ms
    ran 11 % fast); at most 50 frames/s (browsers slow shorter delays down)."""
    step = 1000.0 / min(float(fps), 50.0)
    edges = np.round(np.arange(n + 1) * step / 10.0) * 10.0
    return np.diff(edges).astype(int).tolist()


def time_text(t: float, unit: str) -> str:
    """A time as the readouts write it: '2.33 s', '115 frame' (frames are whole)."""
    return f"{t:.0f} {unit}" if unit == "frame" else f"{t:.2f} {unit}"


def time_step(t: np.ndarray) -> float:
    d = np.diff(np.asarray(t, dtype=np.float64))
    d = d[d > 0]
    return float(np.median(d)) if d.size else 1.0


def playback(model, ds, s, horizon: int = 0) -> Playback:
    """The frames of training sequence ``s`` plus ``horizon`` forecast steps (dynamical
    models only; ignored otherwise), in one batched prediction."""
    rows = sequence_rows(model, ds, s)
    if rows.size == 0:
        raise ValueError(f"sequence {s!r} has no rows")
    dyn = is_dynamical(model)
    if dyn:
        t_train = np.asarray(model.t)[rows]
        dt = time_step(t_train)
        H = max(int(horizon), 0)
        t = np.concatenate([t_train, t_train[-1] + dt * np.arange(1, H + 1)])
        mu, S = model.latent_at(t, sequence=s)
    else:
        times = np.asarray(ds.times)[rows] if ds.times is not None else np.arange(rows.size, dtype=float)
        t = np.asarray(times, dtype=np.float64)
        mu = np.asarray(model.latent_mean)[rows]
        S = np.asarray(model.latent_variance)[rows]
    mean, var = model.predict(mu, S, include_noise=False)
    return Playback(sequence=s, label=sequence_label(ds, s), t=t, n_train=int(rows.size),
                    mu=np.asarray(mu), S=np.asarray(S), mean=np.asarray(mean),
                    var=np.maximum(np.asarray(var), 0.0), rows=rows,
                    noise_variance=float(model.noise_variance), dynamical=dyn)


def principal_coords(Y: np.ndarray, k: int = 2) -> np.ndarray:
    """(N, k) coordinates of the centred rows of Y on its first k principal axes (zeros
    where Y has fewer), each axis's sign chosen so that its largest loading is positive
    (the same picture on every call)."""
    Yc = np.asarray(Y, dtype=np.float64)
    Yc = np.nan_to_num(Yc - np.nanmean(Yc, axis=0))  # missing values: filled with the column mean
    out = np.zeros((Yc.shape[0], k))
    if min(Yc.shape) > 1000:
        # the leading k only (ARPACK, from a fixed start): a full SVD of a 2000 x 3000 upload
        # took 2.4 s of the session's time, this 0.34 s (below ~1000 the full SVD is faster)
        from scipy.sparse.linalg import svds

        _, s, Vt = svds(Yc, k=k, v0=np.ones(min(Yc.shape)), random_state=0)
        Vt = Vt[np.argsort(-s)]
    else:
        _, _, Vt = np.linalg.svd(Yc, full_matrices=False)
    for j in range(min(k, Vt.shape[0])):
        v = Vt[j] * np.sign(Vt[j][np.argmax(np.abs(Vt[j]))])
        out[:, j] = Yc @ v
    return out


def data_playback(ds, s, coords: np.ndarray) -> Playback:
    """Sequence ``s`` of the data set as recorded, for a look before any model is
    trained: its rows in time order, no variance, and ``coords`` (N, 2) of every row
    (``principal_coords``) as the two coordinates drawn against time."""
    rows = sequence_rows(None, ds, s)
    if rows.size == 0:
        raise ValueError(f"sequence {s!r} has no rows")
    t = np.asarray(ds.times, dtype=np.float64)[rows] if ds.times is not None else np.arange(rows.size, dtype=float)
    mean = np.asarray(ds.Y, dtype=np.float64)[rows]
    mu = np.asarray(coords, dtype=np.float64)[rows]
    return Playback(sequence=s, label=sequence_label(ds, s), t=t, n_train=int(rows.size), mu=mu,
                    S=np.zeros_like(mu), mean=mean, var=np.zeros_like(mean), rows=rows, noise_variance=0.0,
                    dynamical=False, preview=True)


# --------------------------------------------------------------------------- outputs
def pose_positions(renderer, Y: np.ndarray) -> np.ndarray:
    """(n, D) rows -> (n, J, 3) points, z up (batched when the renderer can)."""
    Y = np.atleast_2d(np.asarray(Y, dtype=np.float64))
    many = getattr(renderer, "positions_many", None)
    if many is not None:
        return np.asarray(many(Y))
    return np.stack([renderer.positions(y) for y in Y])


def joint_spread(renderer, mean: np.ndarray, var: np.ndarray, n_samples: int = SPREAD_SAMPLES,
                 seed: int = 0) -> np.ndarray:
    """(T, J) one-standard-deviation spread of each joint's position per frame.

    Exact for marker renderers (positions are a reshape of the output, so a joint's
    variance is the mean of its three coordinates' variances); otherwise estimated from
    ``n_samples`` output draws pushed through the renderer, with the same standard-normal
    draws for every frame.
    """
    from bgplvm.datasets.record import StickFigureRenderer

    mean = np.atleast_2d(np.asarray(mean, dtype=np.float64))
    var = np.maximum(np.atleast_2d(np.asarray(var, dtype=np.float64)), 0.0)
    T, D = mean.shape
    if not var.any():  # the data itself (a preview): no spread to sample
        return np.zeros((T, pose_positions(renderer, mean[:1]).shape[1]))
    if isinstance(renderer, StickFigureRenderer):
        return np.sqrt(np.stack([renderer.positions(v).mean(axis=1) for v in var]))
    z = np.random.default_rng(seed).standard_normal((n_samples, D))
    draws = mean[:, None, :] + np.sqrt(var)[:, None, :] * z[None]  # (T, n, D)
    P = pose_positions(renderer, draws.reshape(T * n_samples, D)).reshape(T, n_samples, -1, 3)
    return np.sqrt(P.var(axis=1).mean(axis=2))


def pose_spread(renderer, mean: np.ndarray, var: np.ndarray, n_samples: int = 16) -> np.ndarray:
    """(J,) spread (one standard deviation) of each joint's position: exact for marker
    renderers, else from ``n_samples`` output draws with fixed draws (no flicker), pushed
    through the renderer in one batched call (``joint_spread``)."""
    return joint_spread(renderer, np.asarray(mean)[None], np.asarray(var)[None], n_samples=n_samples)[0]


def centre_poses(P: np.ndarray, zc: float) -> np.ndarray:
    """(T, J, 3) -> each pose centred on its ground-plane mean, heights shifted by zc."""
    C = np.array(P, dtype=np.float64, copy=True)
    C[..., :2] -= C[..., :2].mean(axis=-2, keepdims=True)
    C[..., 2] -= zc
    return C


def pose_extent(renderer, Y: np.ndarray, max_rows: int = 300) -> tuple[float, float]:
    """(zc, R): the height the poses are centred on and the radius that holds every
    (ground-centred) training pose, from up to ``max_rows`` rows of Y."""
    sub = np.asarray(Y)[:: max(1, len(Y) // max_rows)]
    Ps = pose_positions(renderer, sub)
    zc = 0.5 * (float(Ps[..., 2].min()) + float(Ps[..., 2].max()))
    C = centre_poses(Ps, zc)
    return zc, float(np.sqrt((C ** 2).sum(-1)).max()) * 1.08 + 1e-9


def pose_frames(renderer, mean: np.ndarray, var: np.ndarray, azimuth: float, elevation: float,
                zc: float = 0.0) -> dict:
    """Screen arrays of T generated poses: ``uv`` (T, J, 2) joints and ``spread`` (T, J)
    (one sd; drawn as 2-sd discs), projected at the view angle."""
    P = centre_poses(pose_positions(renderer, mean), zc)
    R = rotation(azimuth, elevation)
    uv = P @ R.T
    return {"uv": uv, "spread": joint_spread(renderer, mean, var)}


def image_range(ds) -> tuple[float, float]:
    """(vmin, vmax) of a data set's images: its renderer's declared range, else the data's."""
    r = ds.renderer
    if getattr(r, "vmin", None) is not None and getattr(r, "vmax", None) is not None:
        return float(r.vmin), float(r.vmax)
    return float(np.nanmin(ds.Y)), float(np.nanmax(ds.Y))


#: decades of sd an sd image's (log) colour scale spans below its top
SD_DECADES = 2.0


def sd_range(model) -> tuple[float, float]:
    """(low, high) of every per-pixel sd colour scale (screen and exports alike), a log
    scale as the latent view's variance background: high is the prior sd of f over the
    training latent means, sqrt(max_n k(mu_n, mu_n)) -- for a stationary kernel the sd far
    from the data (all of its parts: RBF, bias, white), for a linear one the largest in the
    data's region (its prior grows without bound outside) -- and low ``SD_DECADES`` decades
    below. An sd image brightens as the model gets less sure; on a linear scale from 0 the
    sd near the data was black (USPS: 0.25 on a scale to 4.7)."""
    high = float(np.sqrt(np.max(model.kernel.Kdiag(np.asarray(model.latent_mean)))))
    return high * 10.0 ** -SD_DECADES, high


def f_sd(model, var_y: np.ndarray) -> np.ndarray:
    """sd of f from a predictive variance of y (noise included): what every sd image
    shows, so that the generated image's sd is the model's uncertainty as the played and
    inferred ones are (their moments exclude the noise). A calibrated model's variances
    are scaled whole (``BayesianGPLVM.calibrate``), its noise part too."""
    noise = np.full(np.shape(var_y)[-1], float(model.noise_variance))
    calibrated = getattr(model, "_calibrated", None)
    if calibrated is not None:
        noise = calibrated(noise[None, :])[0]
    return np.sqrt(np.maximum(np.asarray(var_y) - noise, 0.0))


def gallery_rows(ds, n: int = 40, cols: int = 8) -> tuple[np.ndarray, int]:
    """Up to ``n`` row indices that show what an image data set holds, and the tiles per
    row of a mosaic of them: with labels the same number of each class in class order (the
    first rows of each), whole classes to a row of tiles; else rows evenly spaced through
    the set, ``cols`` to a row."""
    N = int(ds.N)
    if ds.labels is not None:
        labels = np.asarray(ds.labels)
        classes = np.unique(labels)
        per = max(1, n // max(1, len(classes)))
        rows = np.concatenate([np.flatnonzero(labels == c)[:per] for c in classes])[:n]
        return rows, (per * max(1, cols // per) if per <= cols else cols)
    return np.unique(np.linspace(0, N - 1, min(n, N)).round().astype(int)), cols


def mosaic(renderer, Y: np.ndarray, cols: int = 8) -> np.ndarray:
    """Rows of Y (k, D) drawn as upright images side by side, ``cols`` to a row of tiles,
    one NaN pixel between tiles (drawn transparent): (rows * (H + 1) - 1, cols * (W + 1) - 1)."""
    tiles = [renderer.image(y) for y in np.atleast_2d(Y)]
    H, W = tiles[0].shape
    cols = max(1, min(int(cols), len(tiles)))
    nrow = -(-len(tiles) // cols)
    out = np.full((nrow * (H + 1) - 1, cols * (W + 1) - 1), np.nan)
    for k, im in enumerate(tiles):
        r, c = divmod(k, cols)
        out[r * (H + 1):r * (H + 1) + H, c * (W + 1):c * (W + 1) + W] = im
    return out


def image_frames(renderer, mean: np.ndarray, var: np.ndarray) -> dict:
    """``img`` and ``sd`` (T, H, W): upright mean frames and per-pixel standard deviations."""
    mean = np.atleast_2d(mean)
    sd = np.sqrt(np.maximum(np.atleast_2d(var), 0.0))
    return {"img": np.stack([renderer.image(m) for m in mean]),
            "sd": np.stack([renderer.image(v) for v in sd])}

"""Observe and infer: hide part of frames the model has not seen, infer q(x*) from the rest,
reconstruct the hidden part with its uncertainty and compare with the truth.

Pure functions (numpy and the model in, records out; no Panel). Where the test frames come
from:

* the data set's own **test split** (CMU 35: trial 35_29, a new sequence: time prior of a
  new sequence, ``sequence=None``);
* **held-out frames** after a model's training window (the Frey video asset is fitted to
  frames 0-299; frames 300-399 continue its one sequence: ``sequence`` = that sequence, so
  q(X*) is coupled to its latent path through the time prior);
* otherwise the **training rows** themselves (still a fair test of filling in: the hidden
  values are not used).

Inference: a dynamical model optimises q(X*) of all frames of the stretch jointly under the
time prior (``DynamicalGPLVM.infer_sequence``), a static one each frame on its own
(``BayesianGPLVM.infer_latent``). The reconstruction is meanFstar / covFstar at q(X*)
(uncertain inputs: the variance differs per output), with observed entries passed through;
for a dynamical model q(u) also conditions on the stretch's observed entries, as
``DynamicalGPLVM.reconstruct`` does (``DynamicalGPLVM.fill_missing``).
A nearest-neighbour fill (the training row closest in the observed entries) is the
baseline the error readout compares with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from . import masks as M
from .sequences import Playback, is_dynamical

#: Optimiser iterations for q(X*) (the model's default is 500; a page should answer fast).
INFER_ITERS = 150


def noun(ds) -> str:
    """What a row of ``ds`` is called on the page: "frame" for data in time, else "point"
    (oil, digits: the tab spoke of frames and test trials)."""
    return "frame" if ds is not None and ds.times is not None else "point"


def count(n: int, what: str) -> str:
    """'1 point', '3 frames'."""
    return f"{n} {what}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class Source:
    """Frames to test on: Y (n, D), their times, and how they relate to training."""

    name: str
    label: str
    Y: np.ndarray
    t: np.ndarray | None
    sequence: object = None  # training sequence they continue (dynamical), None: a new one
    rows: np.ndarray | None = None  # training rows they are (None: unseen frames)
    first: int = 0  # the data set's frame number of row 0 (held-out frames continue the numbering)


@dataclass(frozen=True)
class Inference:
    """The result of one observe-and-infer run over frames [start, start + n)."""

    source: str
    start: int
    cols: np.ndarray  # hidden output columns (the same in every frame)
    truth: np.ndarray  # (n, D)
    observed: np.ndarray  # (n, D) bool
    t: np.ndarray  # (n,)
    mu: np.ndarray  # (n, Q)
    S: np.ndarray  # (n, Q)
    mean: np.ndarray  # (n, D) reconstruction: observed entries passed through
    var: np.ndarray  # (n, D) predictive variance of f at the hidden entries (0 where observed)
    error: dict
    nn_error: dict
    iterations: int
    seconds: float
    method: str
    first: int = 0  # the source's frame number of its row 0
    noun: str = "frame"  # what a row is called (``noun``)
    extra: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.truth.shape[0])

    @property
    def frames(self) -> str:
        """Which frames, as the data set numbers them: 'held-out frames 370-399'."""
        what = {"test trial": f"test {self.noun}s"}.get(self.source, self.source)
        a = self.first + self.start
        return f"{what} {a}-{a + self.n - 1}"


def sources_for(model, ds, test_ds=None, heldout: tuple | None = None) -> dict[str, Source]:
    """The test frames available for this model and data set, by name."""
    out = {}
    if test_ds is not None and test_ds.D == ds.D:
        trials = (test_ds.meta or {}).get("trials")
        label = (f"test trial {trials[0]} ({test_ds.N} frames, not trained on)" if trials
                 else f"test set ({test_ds.N} {noun(ds)}s, not trained on)")
        out["test trial"] = Source("test trial", label, test_ds.Y, test_ds.times)
    if heldout is not None:
        Y, t, seq, label, first = heldout
        out["held-out frames"] = Source("held-out frames", label, Y, t, sequence=seq, first=first)
    out["training rows"] = Source("training rows", f"training rows ({ds.N}; their values are still hidden "
                                  "from the inference)", ds.Y, ds.times, rows=np.arange(ds.N))
    return out


def masked(Y: np.ndarray, cols) -> np.ndarray:
    Ym = np.array(Y, dtype=np.float64, copy=True)
    Ym[:, np.asarray(cols, dtype=int)] = np.nan
    return Ym


def nearest_neighbour_fill(Y_train: np.ndarray, Ym: np.ndarray, exclude=None) -> np.ndarray:
    """Each row's hidden entries from the training row nearest in its observed entries;
    ``exclude[i]`` (a training row index, or -1) is left out for row i (a training frame
    must not be its own neighbour). Training data with missing values: the distance is the
    mean squared difference over the entries both observe, and each hidden entry comes
    from the nearest row that observes it."""
    obs = ~np.isnan(Ym)
    has = ~np.isnan(Y_train)
    complete = bool(has.all())
    Yt = np.where(has, Y_train, 0.0)
    out = Ym.copy()
    for i in range(Ym.shape[0]):
        o = obs[i]
        both = has[:, o]
        d = (both * (Yt[:, o] - Ym[i, o]) ** 2).sum(1) / np.maximum(both.sum(1), 1)
        d[~both.any(1)] = np.inf
        if exclude is not None and exclude[i] >= 0:
            d[exclude[i]] = np.inf
        if complete:
            out[i, ~o] = Y_train[int(np.argmin(d)), ~o]
            continue
        order = np.argsort(d, kind="stable")
        for j in np.flatnonzero(~o):  # the nearest row that observes j
            out[i, j] = Y_train[order[np.argmax(has[order, j])], j]
    return out


def infer(model, ds, src: Source, start: int, n: int, cols, max_iters: int = INFER_ITERS,
          callback=None) -> Inference:
    """Hide ``cols`` in frames [start, start + n) of ``src`` and infer them."""
    cols = np.unique(np.asarray(cols, dtype=int))
    if cols.size == 0:
        raise ValueError("nothing is hidden: choose a body part, a region, or click joints to hide")
    if cols.size >= ds.D:
        raise ValueError(f"everything is hidden: leave some of the {noun(ds)} observed to infer from")
    N = src.Y.shape[0]
    start = int(min(max(start, 0), N - 1))
    n = int(min(max(n, 1), N - start))
    truth = src.Y[start:start + n]
    Ym = masked(truth, cols)
    t0 = time.perf_counter()
    if is_dynamical(model):
        if src.t is None:
            raise ValueError("this data set has no time stamps for the dynamical model")
        t = np.asarray(src.t[start:start + n], dtype=np.float64)
        if src.rows is not None:  # training frames: a new sequence at their own times
            t = t - t[0]
        fit = model.infer_sequence(Ym, t, sequence=src.sequence, max_iters=max_iters, callback=callback)
        mu, S, iters = fit.mu, fit.S, fit.iterations
        method = "dynamical: q(X*) of the whole stretch under the time prior" + (
            f", coupled to training sequence {src.sequence}" if src.sequence is not None else ", a new sequence") + (
            "; q(u) also conditioned on the stretch's observed entries")
    else:
        if not hasattr(model, "infer_latent"):
            raise ValueError("inference for a static model needs BayesianGPLVM.infer_latent, which this "
                             "version of bgplvm does not have yet; use a dynamical model")
        t = np.asarray(src.t[start:start + n], dtype=np.float64) if src.t is not None else np.arange(n, dtype=float)
        mu, S = model.infer_latent(Ym, max_iters=max_iters)
        iters = max_iters
        method = f"static: q(x*) of each {noun(ds)} on its own"
    observed = ~np.isnan(Ym)
    if is_dynamical(model):  # as DynamicalGPLVM.reconstruct predicts
        mean_f, var_f = model.fill_missing(fit, Ym, include_noise=False)
    else:
        mean_f, var_f = model.predict(mu, S, include_noise=False)
    mean = np.where(observed, truth, mean_f)
    var = np.where(observed, 0.0, var_f)
    err = M.reconstruction_error(ds, mean, truth, cols)
    own = src.rows[start:start + n] if src.rows is not None else None
    nn = M.reconstruction_error(ds, nearest_neighbour_fill(ds.Y, Ym, own), truth, cols)
    return Inference(source=src.name, start=start, cols=cols, truth=truth, observed=observed, t=t,
                     mu=np.asarray(mu), S=np.asarray(S), mean=mean, var=np.maximum(var, 0.0), error=err,
                     nn_error=nn, iterations=int(iters), seconds=time.perf_counter() - t0, method=method,
                     first=src.first, noun=noun(ds))


def as_playback(inf: Inference, label: str, noise_variance: float) -> Playback:
    """An inferred stretch as something the player plays (the truth rides along as a ghost)."""
    return Playback(sequence=f"inferred:{inf.source}:{inf.start}", label=label, t=inf.t, n_train=inf.n,
                    mu=inf.mu, S=inf.S, mean=inf.mean, var=inf.var, rows=np.full(inf.n, -1),
                    noise_variance=noise_variance, dynamical=False, truth=inf.truth, hidden=inf.cols)

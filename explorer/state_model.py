"""The model part of the explorer's state: the model shown, installing one (trained here,
pre-trained or uploaded), saving it, and its summary.

``ModelState`` is one of the parts ``ExplorerState`` (state.py) is composed of. A new
model resets what the other parts derived from the old one: the axes and cursor
(``state_latent``), the sequence played (``state_playback``), the inference
(``state_inference``) and the next training's settings (``state_training``).
"""

from __future__ import annotations

import io

import numpy as np
import param

from bgplvm.datasets import Dataset

from . import sequences as seqs
from .latent import ard_off_mask, noise_only_note, segmentation_text, top_two_dims
from .loading import data_meta, dataset_for_model
from .state_training import TIME_KERNELS
from .state_views import is_multi_view
from .user_input import UserError, check_upload
from .userdata import drawing_of


class ModelState(param.Parameterized):
    """The model being explored and its version (bumped whenever it changes)."""

    model = param.Parameter(default=None, doc="The BayesianGPLVM being explored (or None)")
    model_version = param.Integer(default=0, doc="Bumped whenever the model changes")

    @property
    def has_model(self) -> bool:
        return self.model is not None

    def load_model_bytes(self, filename: str, data: bytes) -> None:
        """Open an uploaded saved model (and the data set it names, when available)."""
        from bgplvm import BayesianGPLVM, ModelFileError

        check_upload(data, filename)
        buf = io.BytesIO(data)
        buf.name = filename  # the loader's messages name their source: the upload, not "<_io.BytesIO ...>"
        try:
            m = BayesianGPLVM.load(buf)
        except Exception as e:
            raise UserError(f"{filename}: not a bgplvm model file ({e})" if not isinstance(e, ModelFileError)
                            else str(e)) from None
        if is_multi_view(m):
            self.set_views_model(m)
            self.info = (f"Opened model {filename}: {len(m.view_names)} views of one latent space "
                         f"({', '.join(m.view_names)}); drawn: {self.view_name}.")
            return
        self.set_model(m, dataset_for_model(m))
        self.info = f"Opened model {filename}." + noise_only_note(m)

    def set_model(self, model, dataset: Dataset | None = None, trained_here: bool = False) -> None:
        """Install a (trained) model; resets the axes to its two most relevant dims. The Train
        section's message and curve stay only for the model this page's training made
        (``trained_here``): another model opened or loaded clears them. A multi-view model
        (``bgplvm.MRD``) is drawn one view at a time (``state_views``)."""
        if is_multi_view(model):
            self.set_views_model(model, dataset)
            return
        self._forget_views()
        ds = dataset if dataset is not None else self.dataset
        if ds is None or np.asarray(model.Y).shape != ds.Y.shape:
            ds = dataset_for_model(model)
        Q = int(model.latent_dim)
        x, y = top_two_dims(model.ard_weights)
        mu = np.asarray(model.latent_mean)
        new_data = ds is not self.dataset
        with param.parameterized.batch_call_watchers(self):
            self.dataset = ds
            self.dataset_name = ds.name
            self.asset_name = ""
            self.model = model
            self.param.x_dim.bounds = (0, Q - 1)
            self.param.y_dim.bounds = (0, Q - 1)
            self.x_dim, self.y_dim = x, y
            self.fixed = mu.mean(axis=0)
            self.cursor = (float(mu[:, x].mean()), float(mu[:, y].mean()))
            self.pinned = False
            self.selected_index = -1
            self._pred_cache.clear()
            self._play_cache.clear()
            # the next training's settings (a saved model may be bigger than the page offers)
            self.latent_dim = int(np.clip(Q, *self.param.latent_dim.bounds))
            self.num_inducing = int(np.clip(model.num_inducing, *self.param.num_inducing.bounds))
            self.prior = "dynamical" if seqs.is_dynamical(model) else "static"
            tk = getattr(getattr(getattr(model, "prior", None), "time_kernel", None), "spec", None)
            if tk in TIME_KERNELS:
                self.time_kernel = tk
            self._reset_sequence()
            if not trained_here:
                self.train_status = ""
                self.bound_history = []
            self.inference = None
            self.play_mode = "sequence"
            self.infer_status = ""
            self.model_version += 1
            self._cancel_inference()
            self._reset_inference_choice(new_data)

    def save_model_bytes(self) -> io.BytesIO:
        if self.model is None:
            raise UserError("no model to save yet: train or open one first")
        if self.mrd is not None:
            return self._save_views_bytes()
        meta = dict(getattr(self.model, "metadata", None) or {}, dataset=self.dataset_name)
        drawing = drawing_of(self.dataset) if self.dataset is not None else None
        if drawing:
            meta["drawing"] = drawing
            meta.pop("data", None)
        else:
            meta.pop("drawing", None)
            meta["data"] = data_meta(self.dataset) if self.dataset is not None else {}
        self.model.metadata = meta
        buf = io.BytesIO()
        self.model.save(buf)
        buf.seek(0)
        return buf

    def _save_views_bytes(self) -> io.BytesIO:
        """The multi-view model, naming the data set its views came from."""
        src = self._source_dataset
        self.mrd.metadata = dict(self.mrd.metadata or {}, **({"dataset": src.name} if src is not None else {}))
        buf = io.BytesIO()
        self.mrd.save(buf)
        buf.seek(0)
        return buf

    def summary(self) -> dict:
        """Bound, noise variance, signal-to-noise and sizes of the current model."""
        m = self.model
        if m is None:
            return {}
        sf2 = float(m.kernel_variance)
        noise = float(m.noise_variance)
        off = ard_off_mask(m.ard_weights)
        return dict(bound=float((self.mrd if self.mrd is not None else m).elbo()), noise_variance=noise, kernel_variance=sf2,
                    snr=float(np.sqrt(sf2 / noise)) if noise > 0 else float("inf"),
                    N=int(np.asarray(m.Y).shape[0]), D=int(np.asarray(m.Y).shape[1]),
                    Q=int(m.latent_dim), M=int(m.num_inducing),
                    active=int((~off).sum()), kernel=str(getattr(m, "kernel", "") or ""),
                    missing=float(getattr(m, "missing_fraction", 0.0)),
                    time_prior=_time_prior_line(m),
                    calibration=_calibration_line(self.mrd if self.mrd is not None else m),
                    views=self._views_line())

    def _views_line(self) -> str:
        """The multi-view model's views and segmentation ("" for a single-view model)."""
        if self.mrd is None:
            return ""
        return (f"{len(self.view_names)} views ({', '.join(self.view_names)}), drawn: {self.view_name}; "
                + segmentation_text(self.mrd.segmentation()))


def _calibration_line(m) -> str:
    """How the model's intervals were calibrated ("" when they are not)."""
    cal = getattr(m, "calibration", None)
    if cal is not None:  # a multi-view model's: one line per view calibrated from the others
        return cal.describe().replace("\n", "; ")
    if hasattr(m, "calibrate") and not getattr(m, "_not_calibrated_because", ""):
        return "as fitted (not calibrated: m.calibrate() learns how far to trust them)"
    return ""


def _time_prior_line(m) -> str:
    """The dynamical prior's time kernel and form ("" for other models), e.g.
    "Matern32Time(...), state_space (exact, state dimension 2)"."""
    prior = getattr(m, "prior", None)
    if getattr(prior, "kind", None) != "dynamical":
        return ""
    from bgplvm.io import time_prior_text

    return f"{prior.time_kernel!r}; {time_prior_text(prior)}"

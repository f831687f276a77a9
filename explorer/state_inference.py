"""The observe-and-infer part of the explorer's state: which frames to infer from and
what of them to hide (a body part, an image region, clicked joints), the inference running
in a background thread and its result (``poll_inference`` copies it into parameters on
the session's thread).

``InferenceState`` is one of the parts ``ExplorerState`` (state.py) is composed of.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import param

from . import inference as inf
from . import masks as M
from . import sequences as seqs
from .inference import count
from .loading import load_cached, load_cached_split
from .user_input import UserError


class InferenceState(param.Parameterized):
    """The frames to infer, the mask hiding part of them, and the inference."""

    infer_source = param.String(default="", doc="Where the test frames come from (a key of infer_sources())")
    infer_frame = param.Integer(default=70, bounds=(0, None), doc="First frame of the stretch to infer")
    infer_length = param.Integer(default=1, bounds=(1, 200), doc="Frames in the stretch (1: one frame)")
    mask_part = param.String(default="legs", doc="What to hide: a body part, a region, or 'joints I click'")
    mask_joints = param.List(default=[], doc="Joints hidden by clicking them")
    mask_fraction = param.Number(default=0.5, bounds=(0.05, 0.95), doc="Share of pixels for 'random pixels'")
    inference = param.Parameter(default=None, doc="The last explorer.inference.Inference (or None)")
    infer_status = param.String(default="")
    infer_running = param.Boolean(default=False)

    def __init__(self, **params):
        super().__init__(**params)
        self._sources_cache: tuple = (None, {})
        self._infer_job: dict | None = None

    def infer_sources(self) -> dict:
        """{name: inference.Source} of the frames observe-and-infer can use (cached per model)."""
        if self.model is None or self.dataset is None:
            return {}
        key, cached = self._sources_cache
        # the data set can change under a model (same model_version)
        if key is not None and key[0] == self.model_version and key[1] is self.dataset:
            return cached
        ds = self.dataset
        test = None
        try:
            from bgplvm.datasets import info as ds_info

            meta = ds.meta or {}
            # a shipped data set's test split, not for a subset or an upload that shares its name
            if "test" in ds_info(ds.name).splits and not meta.get("rows") and not meta.get("uploaded"):
                test = load_cached_split(ds.name, "test")
        except Exception:  # no test split here (or its files are unavailable): other sources
            test = None
        heldout = None
        rows = (ds.meta or {}).get("rows")
        if rows and self.is_dynamical:
            try:
                full = load_cached(ds.name)
                a, b = rows
                c = min(full.N, b + 100)
                if c > b:
                    seq = seqs.sequence_ids(ds, self.model)[0]
                    heldout = (full.Y[b:c], full.times[b:c] - full.times[a], seq,
                               f"held-out frames {b}-{c - 1} (after the training window; continue its sequence)", b)
            except Exception:
                heldout = None
        out = inf.sources_for(self.model, ds, test, heldout)
        self._sources_cache = ((self.model_version, self.dataset), out)
        return out

    def _reset_inference_choice(self, new_data: bool = False) -> None:
        """Keep the test frames chosen where the new model still offers them; with new data
        start again from its first source (its test set where it has one) at the default
        frame (70: in the CMU test trial's second half, where the paper hides legs or body)."""
        srcs = self.infer_sources()
        if srcs and (new_data or self.infer_source not in srcs):
            self.infer_source = next(iter(srcs))
        if new_data:  # and as many rows as the page starts with (6 digits were 6 CMU frames)
            self.infer_frame = self.param.infer_frame.default
            self.infer_length = self.param.infer_length.default
        opts = self.mask_options()
        if opts and self.mask_part not in opts:
            self.mask_part = opts[0]
        self.mask_joints = []
        src = srcs.get(self.infer_source)
        if src is not None:
            self.infer_frame = min(self.infer_frame, src.Y.shape[0] - 1)

    def mask_options(self) -> list[str]:
        ds = self.dataset
        kind = getattr(getattr(ds, "renderer", None), "kind", "vector") if ds is not None else "vector"
        if kind == "pose":
            names = getattr(ds.renderer, "names", None)
            # the parts the skeleton's point names place (unnamed points: click them)
            opts = [p for p in M.PARTS if names is not None and M.part_joints(names, p).any()]
            if ds.D == 59 and not hasattr(ds.renderer, "kept") and hasattr(ds.renderer, "skeleton"):
                opts += list(M.CMU_PROTOCOLS)
            return opts + ["joints I click"]
        if kind == "image":
            return list(M.REGIONS)
        return ["first half of the columns", "second half of the columns", "random columns"]

    def hidden_columns(self) -> np.ndarray:
        """The output columns the current mask hides (may be empty)."""
        ds = self.dataset
        if ds is None:
            return np.zeros(0, dtype=int)
        part = self.mask_part
        kind = getattr(ds.renderer, "kind", "vector")
        if part == "joints I click":
            return M.columns_of_joints(ds, self.mask_joints)
        if kind == "image":
            return M.region_columns(ds.renderer, part, self.mask_fraction)
        if kind == "pose":
            return M.part_columns(ds, part)
        D = ds.D
        if part == "first half of the columns":
            return np.arange(D // 2)
        if part == "second half of the columns":
            return np.arange(D // 2, D)
        return np.sort(np.random.default_rng(0).choice(D, max(1, int(round(self.mask_fraction * D))), replace=False))

    def toggle_joint(self, j: int) -> None:
        """A click on joint j of the observed figure hides it (or shows it again)."""
        joints = [int(v) for v in self.mask_joints]
        j = int(j)
        joints = [v for v in joints if v != j] if j in joints else joints + [j]
        with param.parameterized.batch_call_watchers(self):
            self.mask_joints = sorted(joints)
            self.mask_part = "joints I click"

    def infer_frames(self):
        """(source, first frame, number of frames) of the stretch to infer: at most
        ``stretch_room`` frames (a stretch of training rows stays in its sequence)."""
        src = self.infer_sources().get(self.infer_source)
        if src is None:
            return None
        a = int(min(self.infer_frame, src.Y.shape[0] - 1))
        n = int(min(self.infer_length, self.stretch_room(src, a)))
        return src, a, n

    def stretch_room(self, src, a: int) -> int:
        """How many frames a stretch starting at frame ``a`` of ``src`` can have: to the end
        of the source, and for training rows to the end of a's sequence (in time order): a
        stretch across two sequences is not a stretch in time (the dynamical model refused
        its unsorted times; a static one played it backwards)."""
        N = src.Y.shape[0]
        end = N
        if src.rows is not None and self.dataset is not None and self.dataset.sequence is not None:
            seq = np.asarray(self.dataset.sequence)[src.rows]
            t = np.asarray(src.t) if src.t is not None else None
            end = a + 1
            while end < N and seq[end] == seq[a] and (t is None or t[end] > t[end - 1]):
                end += 1
        return max(1, end - a)

    def start_inference(self) -> None:
        """Infer the hidden part of the chosen frame(s) in a background thread (the page
        polls ``poll_inference``)."""
        if self.model is None:
            raise UserError("no model yet: train or open one first")
        if self._infer_job is not None and not self._infer_job["done"].is_set():
            raise UserError("an inference is already running")
        got = self.infer_frames()
        if got is None:
            raise UserError(f"no test {inf.noun(self.dataset)}s for this data set")
        src, a, n = got
        cols = self.hidden_columns()
        if cols.size == 0:
            raise UserError("Nothing is hidden: choose a body part (or region), or click joints on the figure "
                            "to hide them, then press Infer.")
        if cols.size >= self.dataset.D:
            raise UserError(f"Everything is hidden: leave part of the {inf.noun(self.dataset)} observed to infer "
                            "from.")
        model, ds = self.model, self.dataset
        job = {"done": threading.Event(), "result": None, "error": None, "iter": 0, "n": n, "t0": time.perf_counter(),
               "noun": inf.noun(ds)}

        def progress(p):
            job["iter"] = int(p.iteration)
            return job.get("cancel", False)

        def run():
            try:
                job["result"] = inf.infer(model, ds, src, a, n, cols, callback=progress)
            except (ValueError, np.linalg.LinAlgError) as e:
                job["error"] = str(e)
            except Exception as e:  # noqa: BLE001 - reported in the page
                job["error"] = f"{type(e).__name__}: {e}"
            finally:
                job["done"].set()

        self._infer_job = job
        threading.Thread(target=run, daemon=True, name="bgplvm-infer").start()
        with param.parameterized.batch_call_watchers(self):
            self.infer_running = True
            self.error = ""
            self.infer_status = f"Inferring q(x*) for {inf.count(n, job['noun'])} from what is left..."

    def stop_inference(self) -> None:
        """The Stop button of Observe & infer: the running inference is stopped and dropped
        at once (a dynamical model's optimiser ends at its next iteration; a static model's
        ``infer_latent`` cannot be interrupted and finishes unseen in its thread). The
        previous result, if any, stays; Infer can be pressed again."""
        job = self._infer_job
        if job is None or job["done"].is_set():
            return  # finished meanwhile: the next poll reports it
        done = f"{count(job['iter'], 'iteration')}, " if job["iter"] else ""  # a static model reports none
        with param.parameterized.batch_call_watchers(self):
            self._cancel_inference()
            # also on the page's top line: the tab's readout says "press Infer" instead when
            # the frames or mask were changed since the last result
            self.infer_status = self.info = (
                f"Inference stopped after {done}{_duration(time.perf_counter() - job['t0'])}: nothing inferred "
                f"for the {count(job['n'], job['noun'])}. Press Infer to start again.")

    def _cancel_inference(self) -> None:
        """Stop and forget a running inference (the model it works on has been replaced)."""
        job, self._infer_job = self._infer_job, None
        if job is not None:
            job["cancel"] = True
            self.infer_running = False

    def poll_inference(self) -> bool:
        """Copy an inference's progress / result into parameters; True while it runs."""
        job = self._infer_job
        if job is None:
            return False
        if not job["done"].is_set():
            self.infer_status = (f"Inferring q(x*) for {count(job['n'], job['noun'])}: iteration {job['iter']}, "
                                 f"{time.perf_counter() - job['t0']:.1f} s...")
            return True
        self._infer_job = None
        with param.parameterized.batch_call_watchers(self):
            self.infer_running = False
            if job["error"]:
                self.infer_status = "Inference failed."
                self.error = f"Inference failed: {job['error']}"
                return False
            r = job["result"]
            self.inference = r
            e, nn = r.error, r.nn_error
            unit = "\u00b0" if e["unit"] == "deg" else ""
            self.infer_status = (f"{e['name']}: {e['value']:.3g}{unit} (nearest neighbour: {nn['value']:.3g}{unit}) "
                                 f"over {e['n']} hidden values; {count(r.n, r.noun)}, {_duration(r.seconds)}.")
            if r.n > 1 and r.noun == "frame":
                self.play_mode = "inferred"
        return False


def _duration(seconds: float) -> str:
    """'0.35 s', '12 ms' (a fast inference read '0.0 s')."""
    if seconds < 0.001:
        return "<1 ms"
    return f"{1000 * seconds:.0f} ms" if seconds < 0.1 else f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"

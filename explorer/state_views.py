"""The multi-view part of the explorer's state: a ``bgplvm.MRD`` (several views of one latent
space) opened in the page.

The page draws one view at a time as its *primary* view: ``model`` is then that view's
single-view model at the shared q(X) (``MRD.view``), so that the latent view, the player,
the export and the single-view inference work unchanged. This part keeps the multi-view
model itself (``mrd``), each view's data set (how it is drawn), generates every view at the
latent point (``generate_views``) and infers the other views from one observed view
(``infer_from_view``): a silhouette can fit several poses, so the distinct local optima of
q(x*) are kept, best bound first, to step through (``candidate``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import param

from bgplvm.datasets import Dataset
from bgplvm.datasets.record import VectorRenderer

from .loading import load_cached, load_cached_split
from .user_input import UserError

#: starts of the cross-view inference (nearest training rows in the observed view)
N_STARTS = 8


def is_multi_view(model) -> bool:
    return hasattr(model, "view_names")


def _drawn_as(ds: Dataset | None, Y: np.ndarray, name: str):
    """How ``ds`` draws view ``name`` (its ``view_renderers`` entry, or its renderer when the
    view is its Y), or None."""
    if ds is None:
        return None
    if ds.views and name in ds.views and np.shape(ds.views[name]) == Y.shape:
        return (ds.view_renderers or {}).get(name)
    if ds.Y.shape == Y.shape and np.array_equal(ds.Y, Y, equal_nan=True):
        return ds.renderer
    return None


def view_datasets(mrd, ds: Dataset | None) -> dict[str, Dataset]:
    """{view: Dataset of that view} drawn as ``ds`` draws it (its ``view_renderers``, or its
    renderer for the view that is its Y), else as vectors. Each is named "<data set>
    (<view>)": a view is not the shipped data set (its test split is another view's)."""
    out = {}
    base = ds.name if ds is not None else "model data"
    for name in mrd.view_names:
        Y = np.asarray(mrd.views[name].Y)
        r = _drawn_as(ds, Y, name)
        meta = {"title": f"{base}: view {name!r}", "view_of": base, "view": name,
                **{k: ds.meta[k] for k in ("fps", "time_unit") if ds is not None and k in (ds.meta or {})}}
        # a dynamical model's sequences and time stamps (the player plays and forecasts them)
        times = getattr(mrd, "t", None)
        out[name] = Dataset(name=f"{base} ({name})", Y=Y, renderer=r if r is not None else VectorRenderer(),
                            labels=ds.labels if r is not None else None,
                            label_names=ds.label_names if r is not None else None, meta=meta,
                            sequence=getattr(mrd, "sequences", None) if times is not None else None, times=times)
    return out


def dataset_for_views(mrd) -> Dataset | None:
    """The shipped data set a saved multi-view model names (metadata "dataset"), when it
    loads here; else None (the views are drawn as vectors)."""
    name = (getattr(mrd, "metadata", None) or {}).get("dataset")
    if not name:
        return None
    try:
        return load_cached(name)
    except Exception:  # noqa: BLE001 - unavailable here: vectors
        return None


def primary_view(mrd, datasets: dict[str, Dataset]) -> str:
    """The view drawn first: the first one drawn as a pose or an image (a figure says more
    than a vector), else the first view."""
    for name in mrd.view_names:
        if getattr(datasets[name].renderer, "kind", "vector") != "vector":
            return name
    return mrd.view_names[0]


@dataclasses.dataclass
class ViewFrames:
    """Rows of every view to observe one view of: the data set's test split where it has
    one with the same views, else the training rows (``label`` says which)."""

    views: dict
    label: str

    @property
    def N(self) -> int:
        return len(next(iter(self.views.values())))


def frames_for(mrd, ds: Dataset | None) -> ViewFrames:
    if ds is not None and ds.views:
        try:
            test = load_cached_split(ds.name, "test")
            if test.views and all(np.shape(test.views.get(n, ()))[1:] == (mrd.views[n].shape[1],)
                                  for n in mrd.view_names):
                return ViewFrames({n: np.asarray(test.views[n]) for n in mrd.view_names},
                                  f"test frames of {ds.name} (not in the model)")
        except Exception:  # noqa: BLE001 - no test split here: the training rows
            pass
    return ViewFrames({n: np.asarray(mrd.views[n].Y) for n in mrd.view_names},
                      "training rows (already in the model)")


class ViewsState(param.Parameterized):
    """A multi-view model, its views and the inference of some views from another."""

    mrd = param.Parameter(default=None, doc="The multi-view model (bgplvm.MRD) or None")
    view_name = param.String(default="", doc="The view drawn as the primary one")
    observed_view = param.String(default="", doc="The view observe-a-view shows (the others are inferred)")
    view_frame = param.Integer(default=0, bounds=(0, None), doc="Row of view_frames observed")
    candidate = param.Integer(default=0, bounds=(0, None), doc="Candidate q(x*) shown (0: best bound)")
    candidates_version = param.Integer(default=0, doc="Bumped when new candidates arrive")

    def __init__(self, **params):
        super().__init__(**params)
        self._view_datasets: dict[str, Dataset] = {}
        self._source_dataset: Dataset | None = None
        self._frames: ViewFrames | None = None
        self.view_candidates = None  # mrd_inference.Candidates of the observed frame

    # ---- opening a multi-view model
    @property
    def view_names(self) -> list[str]:
        return list(self.mrd.view_names) if self.mrd is not None else []

    @property
    def view_datasets(self) -> dict[str, Dataset]:
        return self._view_datasets

    def set_views_model(self, mrd, dataset: Dataset | None = None, view: str | None = None) -> None:
        """Install a multi-view model: ``model`` becomes the single-view model of ``view``
        (default ``primary_view``) at its q(X), drawn as ``dataset`` draws that view."""
        if mrd is not self.mrd:
            self._source_dataset = dataset if dataset is not None else dataset_for_views(mrd)
            self._view_datasets = view_datasets(mrd, self._source_dataset)
            self._frames = None
        name = view or primary_view(mrd, self._view_datasets)
        if name not in mrd.view_names:
            raise UserError(f"no view {name!r}; the views are {', '.join(mrd.view_names)}")
        with param.parameterized.batch_call_watchers(self):
            self.mrd = mrd
            self.view_name = name
            if self.observed_view not in mrd.view_names or self.observed_view == name:
                others = [n for n in mrd.view_names if n != name]
                self.observed_view = others[0] if others else name
            self._clear_candidates()
            self._install(mrd.view(name), self._view_datasets[name])

    def _install(self, model, ds) -> None:
        """``set_model`` of one view, keeping the multi-view model."""
        self._keep_views = True
        try:
            self.set_model(model, ds)
        finally:
            self._keep_views = False

    def _forget_views(self) -> None:
        """A single-view model replaces the multi-view one."""
        if self.mrd is not None and not getattr(self, "_keep_views", False):
            self.mrd = None
            self.view_name = ""
            self._view_datasets = {}
            self._frames = None
            self._clear_candidates()

    def show_view(self, name: str) -> None:
        """Draw view ``name`` as the primary one (the latent point stays where it is)."""
        if self.mrd is None or name == self.view_name:
            return
        cursor, fixed, dims = self.cursor, self.fixed, (self.x_dim, self.y_dim)
        self.set_views_model(self.mrd, view=name)
        with param.parameterized.batch_call_watchers(self):
            self.x_dim, self.y_dim = dims
            self.fixed, self.cursor = fixed, cursor

    # ---- every view at the latent point
    def generate_views(self, names=None, x=None, y=None) -> dict:
        """{view: (mean (D_v,), var (D_v,))} of every view (or of ``names``) at the latent
        point (noise included)."""
        vec = self.latent_vector(x, y)
        if vec is None or self.mrd is None:
            return {}
        return {n: tuple(np.asarray(a)[0] for a in self.mrd.view(n).predict(vec[None, :]))
                for n in (self.view_names if names is None else names)}

    # ---- observe one view, infer the others
    @property
    def view_frames(self) -> ViewFrames | None:
        if self.mrd is None:
            return None
        if self._frames is None:
            self._frames = frames_for(self.mrd, self._source_dataset)
        return self._frames

    def infer_from_view(self) -> None:
        """The distinct optima of q(x*) of frame ``view_frame`` from its ``observed_view``
        alone, best bound first; shows the best (``show_candidate``)."""
        if self.mrd is None:
            raise UserError("open a multi-view model first")
        fr = self.view_frames
        n = int(self.view_frame)
        if not 0 <= n < fr.N:
            raise UserError(f"frame {n} is not among the {fr.N} {fr.label}")
        y = fr.views[self.observed_view][n:n + 1]
        if np.isnan(y).all():
            raise UserError(f"frame {n} has no {self.observed_view} (all its values are missing): choose another "
                            "frame, or observe another view")
        c = self.mrd.infer_candidates({self.observed_view: y}, n_starts=N_STARTS)
        self.view_candidates = c
        with param.parameterized.batch_call_watchers(self):
            self.candidate = 0
            self.candidates_version += 1
        self.show_candidate(0)

    @property
    def n_candidates(self) -> int:
        c = self.view_candidates
        return int(c.count[0]) if c is not None else 0

    def show_candidate(self, k: int) -> None:
        """Put the latent point at candidate ``k``'s mean (all dimensions)."""
        if not 0 <= k < self.n_candidates:
            return
        mu = self.view_candidates.mu[0, k]
        with param.parameterized.batch_call_watchers(self):
            self.candidate = int(k)
            self.pinned = True
            self.fixed = mu.copy()
            self.cursor = (float(mu[self.x_dim]), float(mu[self.y_dim]))

    def candidate_text(self) -> str:
        """"candidate 1 of 3: log density -12.3 (best)"-style line ("" with none)."""
        k, K = self.candidate, self.n_candidates
        if K == 0:
            return ""
        ld = self.view_candidates.log_density[0]
        rel = "best" if k == 0 else f"{ld[k] - ld[0]:+.3g} from the best"
        return f"candidate {k + 1} of {K}: log density {ld[k]:.4g} ({rel})"

    def _clear_candidates(self) -> None:
        self.view_candidates = None
        self.candidate = 0
        self.candidates_version += 1

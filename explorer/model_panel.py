"""The model panel of the sidebar: 1. Data (data sets, pre-trained models, uploads of
arrays, motion capture and saved models) and 2. Train (settings, Train / Stop, the live
bound curve), and saving the model."""

from __future__ import annotations

import panel as pn
import param
from panel.io.document import unlocked

from . import plots
from .state import ExplorerState
from .user_input import MAX_UPLOAD_MB, UserError
from .userdata import one_per_name
from .widgets import checkbox, guarded, number_input

#: (FileDropper reports them one at a time: each report had re-read the whole set)
UPLOAD_SETTLE_MS = 1200
#: bytes per upload chunk (FileDropper's default, 10 MB, sends most files in one piece)
UPLOAD_CHUNK = 512 * 1024

#: A drop area lists a file once: a file dropped again (or from a folder, "dir/walk.amc")
#: replaces the item of that name in the area's list (FilePond listed both, while the server
#: keeps one: ``userdata.one_per_name``). FilePond announces each added file on its element
#: ("FilePond:addfile", bubbling out of Panel's shadow roots); the older item leaves the list
#: without telling the server (``revert: false``), whose copy the new upload replaces.
ONE_PER_NAME_JS = """
if (!window._bgplvm_one_per_name) {
  window._bgplvm_one_per_name = true;
  const own = (item) => String((item.file && item.file._relativePath) || item.filename).split(/[\\\\/]/).pop();
  document.addEventListener("FilePond:addfile", (e) => {
    const {pond, file, error} = e.detail || {};
    if (error || !pond || !file) return;
    for (const other of pond.getFiles())
      if (other.id !== file.id && own(other) === own(file)) pond.removeFile(other.id, {revert: false});
  });
}
"""


def one_listing_per_name(doc) -> None:
    """Install ONE_PER_NAME_JS in the page of ``doc`` (a Bokeh document) once it is ready."""
    from bokeh.events import DocumentReady
    from bokeh.models import CustomJS

    doc.js_on_event(DocumentReady, CustomJS(code=ONE_PER_NAME_JS))


class LiveBoundCurve(pn.viewable.Viewer):
    """The bound against iteration of a fit in progress, drawn once and then extended in
    place: each progress poll streams only the new points into the plot's data source
    and moves its axis ranges, instead of re-rendering the HoloViews element (tens of ms
    of the server's one interpreter, four times a second, which every other session's
    mouse moves waited behind)."""

    visible = param.Boolean(default=False)

    def __init__(self, **params):
        super().__init__(**params)
        self._source = self._plot = None
        self._n = 0
        self._pane = pn.pane.HoloViews(
            plots.bound_curve([]).opts(width=250, height=170, toolbar=None, hooks=[self._grab]),
            linked_axes=False, visible=self.param.visible)

    def _grab(self, plot, element):
        from bokeh.models import NumeralTickFormatter

        self._source, self._plot = plot.handles["source"], plot.state
        self._plot.yaxis.formatter = NumeralTickFormatter(format="0,0")  # not "3.000e+5"
        self._n = 0

    def update(self, history) -> None:
        src = self._source
        if src is None:
            return
        if len(history) < self._n:  # a new fit: start over
            self._n = 0
        new = history[self._n:]
        if not new:
            return
        cols = {"iteration": [it for it, _, _ in new], "bound": [b for _, b, _ in new]}
        with unlocked():
            if self._n == 0:
                src.data = cols
            else:
                src.stream(cols)
            self._n = len(history)
            self._set_ranges(history)

    def _set_ranges(self, history) -> None:
        """x: the iterations so far; y: the bounds after the first tenth of the fit, whose
        first values (millions below the final bound) would flatten everything else."""
        first, last = history[0][0], history[-1][0]
        tail = [b for _, b, _ in history[len(history) // 10:]]
        lo, hi = min(tail), max(tail)
        pad = 0.05 * (hi - lo) or 1.0
        self._plot.x_range.start, self._plot.x_range.end = first, max(last, first + 1)
        self._plot.y_range.start, self._plot.y_range.end = lo - pad, hi + pad

    def __panel__(self):
        return self._pane


class ModelPanel(pn.viewable.Viewer):
    """Data set / upload / saved model, training settings, Train/Stop with live
    progress, model summary and Save."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, dataset_options: dict | None = None, **params):
        super().__init__(**params)
        s = self.state
        opts = dataset_options or {}
        self._ds_select = pn.widgets.Select(label="Data set", options=opts,
                                            value=s.dataset_name if s.dataset_name in opts.values() else None,
                                            width=250)
        self._ds_load = pn.widgets.Button(label="Load data set", width=120)
        self._ds_load.on_click(self._load_dataset)
        from bgplvm.assets import ASSETS

        self._assets = {a.title: a.name for a in ASSETS.values()}
        self._datasets = dict(opts)
        self._asset_select = pn.widgets.Select(label="Pre-trained model", width=250, css_classes=["asset-select"],
                                               options=dict(self._assets))
        self._asset_open = pn.widgets.Button(label="Open model", width=120)
        self._asset_open.on_click(self._open_asset)
        s.param.watch(self._follow_choices, ["asset_name", "dataset_name", "model_version"])
        # FileDropper checks the size in the browser (so a huge file never reaches the
        # server) and uploads in chunks; the server checks size and type again. (No
        # accepted_filetypes: browsers report no MIME type for .npy, which FilePond rejects.)
        self._renewal: dict[str, object] = {}
        self._upload_slot = pn.Column(margin=0)
        self._model_upload_slot = pn.Column(margin=0)
        self._new_droppers(array=True, model=True)
        self._kind = pn.widgets.RadioButtonGroup.from_param(s.param.upload_kind, width=250,
                                                            css_classes=["upload-kind"])
        def refuse(text):
            s.error = text

        self._H = number_input(s, "image_height", "height H", refuse, width=70)
        self._W = number_input(s, "image_width", "width W", refuse, width=70)
        self._order = pn.widgets.Select.from_param(s.param.image_order, label="pixels", width=70,
                                                   options={"rows": "C", "columns": "F"})
        self._frames = checkbox(s, "rows_are_frames", "rows are frames in time order")
        self._fps = number_input(s, "upload_fps", "frames/s", refuse, width=70)
        self._sub = number_input(s, "mocap_subsample", "AMC: every k-th", refuse, width=110)
        self._Q = number_input(s, "latent_dim", "latent dims Q", refuse, width=70)
        self._M = number_input(s, "num_inducing", "inducing M", refuse, width=70)
        self._iters = number_input(s, "max_iters", "iterations", refuse, width=70, step=50,
                                   css_classes=["iters-input"])
        self._kernel = pn.widgets.Select.from_param(s.param.kernel, label="kernel", width=250)
        self._prior = pn.widgets.RadioButtonGroup.from_param(s.param.prior, width=250, css_classes=["prior-choice"])
        self._time_kernel = pn.widgets.Select.from_param(s.param.time_kernel, label="time kernel (dynamical prior)",
                                                         width=250)
        self._train = pn.widgets.Button(label="Train", color="primary", width=120)
        self._stop = pn.widgets.Button(label="Stop", color="danger", width=120, disabled=True)
        self._train.on_click(self._start)
        self._stop.on_click(lambda e: self.state.stop_training())
        self._progress = pn.indicators.Progress(value=0, max=100, width=250, visible=False, bar_color="primary")
        self._status = pn.pane.Markdown("", width=250, styles={"font-size": "12px"}, css_classes=["train-status"])
        self._curve = LiveBoundCurve()
        self._summary = pn.pane.Markdown("", width=250, styles={"font-size": "12px"}, css_classes=["summary"])
        self._save = pn.widgets.FileDownload(callback=self._save_bytes, filename="model.npz",
                                             label="Save model (download)", width=250, color="success")
        self._cb = None
        self._prior_note = pn.pane.Markdown("", styles={"font-size": "12px"}, margin=(5, 10, 0, 10))
        s.param.watch(self._on_training, ["training"])
        s.param.watch(self._prior_choice, ["dataset"])
        self._prior_choice()
        s.param.watch(self._on_progress, ["bound_history", "train_status"])
        s.param.watch(self._on_model, ["model_version", "dataset_name"])
        self._on_model()
        self._follow_choices()

    #: what the two selects show for a model or data that are not among their choices
    OWN_MODEL = "(your own model: trained or opened)"
    NO_MODEL = "(none open: choose one)"
    OWN_DATA = "(your own data)"

    def _follow_choices(self, *events):
        """The Pre-trained model and Data set selects name what is open: a shipped asset or
        data set, else an entry saying it is the user's own (they kept naming the previous
        one after an upload or a fit)."""
        s = self.state
        own = s.model is not None and not s.asset_name
        if s.model is None:  # it named the last pre-trained model over other data, as if open
            self._asset_select.options = {self.NO_MODEL: "", **self._assets}
            self._asset_select.value = ""
        else:
            self._asset_select.options = {**self._assets, self.OWN_MODEL: ""} if own else dict(self._assets)
            self._asset_select.value = "" if own else s.asset_name
        mine = bool(s.dataset_name) and s.dataset_name not in self._datasets.values()
        self._ds_select.options = {**self._datasets, self.OWN_DATA: ""} if mine else dict(self._datasets)
        if mine:
            self._ds_select.value = ""
        elif s.dataset_name:
            self._ds_select.value = s.dataset_name

    # ---- data
    @guarded
    def _load_dataset(self, event=None):
        name = self._ds_select.value
        if not name:
            raise UserError("choose a data set first")
        self._ds_load.loading = True
        try:
            self.state.load_dataset(name)
        finally:
            self._ds_load.loading = False

    @guarded
    def _open_asset(self, event=None):
        if not self._asset_select.value:
            raise UserError("choose a pre-trained model to open")
        self._asset_open.loading = True
        try:
            self.state.open_asset(self._asset_select.value)
        finally:
            self._asset_open.loading = False

    @staticmethod
    def _one_file(value) -> tuple[str, bytes] | None:
        if not value:
            return None
        name, data = list(value.items())[-1]
        return name, data.encode() if isinstance(data, str) else data

    def _new_droppers(self, array: bool = False, model: bool = False) -> None:
        """Fresh, empty drop areas. A FileDropper's file list cannot be cleared from the
        server, so a finished upload (read, or refused with a message) gets a new widget:
        no stale 'Upload complete' on a refused file, and the next file dropped is the one
        read even when it has the name of an earlier one. The area grows with its list
        (min_height, not height) so a file in flight never covers the controls below."""
        def dropper(multiple, css, on_value, slot):
            # small chunks: a file still arriving is then in the widget's buffer between
            # chunks, which _renew checks before replacing the widget
            # image previews only: FilePond's pdf-preview plugin reads a file view's item every
            # frame, also once the item is gone (a duplicate taken off the list, a replaced
            # drop area): "Cannot read properties of null (reading 'file')". (previews=[] does
            # not do it: Panel 1.9 leaves an empty list unsent, and the browser's default
            # ["image", "pdf"] applies; the image plugin checks for a removed item.)
            w = pn.widgets.FileDropper(max_file_size=f"{MAX_UPLOAD_MB}MB", multiple=multiple, width=250,
                                       min_height=90, layout="compact", css_classes=[css],
                                       chunk_size=UPLOAD_CHUNK, previews=["image"])
            w.param.watch(on_value, "value")
            slot.objects = [w]
            return w

        if array:
            self._upload = dropper(True, "upload-array", self._on_upload, self._upload_slot)
        if model:
            self._model_upload = dropper(False, "upload-model", self._on_model_upload, self._model_upload_slot)

    @guarded
    def _on_upload(self, event):
        # each file once, the latest of a name (a file dropped again replaces its value)
        files = {n: (d.encode() if isinstance(d, str) else d) for n, d in one_per_name(event.new or {}).items()}
        mocap = {n: d for n, d in files.items() if n.lower().endswith((".asf", ".amc"))}
        if mocap and list(files)[-1] in mocap:
            # a skeleton and its motions arrive one by one (the value grows a file at a
            # time, ~1 s apart for CMU's 300 KB motions): read them once the drop has
            # settled, not once per file
            self.state.info = f"Receiving motion capture: {', '.join(mocap)}..."
            self._settle("mocap", lambda: self._read_mocap(files, mocap))
        elif files:
            self._settle("mocap", None)  # a mocap read still waiting is overtaken
            self._read_files(files)

    @guarded
    def _read_mocap(self, files: dict, mocap: dict) -> None:
        # more motions may follow a set that loaded: the list is kept (and grows) unless
        # the files are refused
        read = self._read_upload(self.state.load_upload_files, mocap)
        if read is None:
            self._renew("array")
        self._say_unread(read, [n for n in files if n not in mocap])

    def _settle(self, key: str, fn, ms: int = UPLOAD_SETTLE_MS, widget=None) -> None:
        """Run ``fn`` ``ms`` after the last call with this key, and not while a file is still
        arriving in ``widget`` (the array drop area by default; Panel keeps a file's chunks
        in ``_file_buffer``). None: cancel the waiting one. At once without a browser session
        (tests, notebooks' static render: nothing to wait for)."""
        token = self._renewal[key] = object()
        if fn is None:
            return
        doc = pn.state.curdoc
        if doc is None or doc.session_context is None:
            fn()
            return

        def go():
            if self._renewal.get(key) is not token:
                return  # a newer call schedules its own
            if getattr(widget or self._upload, "_file_buffer", None):
                doc.add_timeout_callback(go, ms)  # a file is on its way
                return
            fn()

        doc.add_timeout_callback(go, ms)

    def _read_files(self, files: dict) -> None:
        """One array or image file: the last one dropped (the others are named)."""
        if files:
            read = self._read_upload(self.state.load_upload, *list(files.items())[-1])
            self._renew("array")
            self._say_unread(read, list(files)[:-1])

    def _say_unread(self, read, unread: list[str]) -> None:
        if read is not None and unread:  # files dropped together with others were ignored without a word
            self.state.info += (f" Not read: {', '.join(unread)} (motion capture is one .asf with its .amc "
                                "files; any other file is read when it is dropped on its own).")

    @guarded
    def _on_model_upload(self, event):
        f = self._one_file(event.new)
        if f is not None:
            self._read_upload(self.state.load_model_bytes, *f)
            self._renew("model")

    def _renew(self, which: str, ms: int = 1500) -> None:
        """A fresh drop area ``ms`` after a finished upload: FilePond animates the finished
        file for a while, and a widget replaced at once made it write to its destroyed list
        (a page error). Not while another file is arriving in the old one, and not for an
        upload that a newer one has followed (``_settle``)."""
        old = self._upload if which == "array" else self._model_upload
        self._settle(which, lambda: self._new_droppers(array=which == "array", model=which == "model"),
                     ms, widget=old)

    @guarded
    def _read_upload(self, load, *args):
        """``load``'s result (True for one that returns nothing); None when it was refused
        (the message is in ``state.error``)."""
        out = load(*args)
        return True if out is None else out

    # ---- training
    @guarded
    def _start(self, event=None):
        if self.state.training:  # a second click of a double click: the fit has started
            return
        self.state.start_training()
        if self._cb is None:
            self._cb = pn.state.add_periodic_callback(self._poll, period=250)

    @guarded
    def _poll(self):
        running = self.state.poll()
        if not running and self._cb is not None:
            self._cb.stop()
            self._cb = None

    def _on_training(self, *events):
        t = self.state.training
        self._train.disabled = t
        self._stop.disabled = not t
        self._progress.visible = t
        self._curve.visible = t or bool(self.state.bound_history)
        # the upload's own settings too: changed while training they were shown but not
        # applied (the data set cannot change under a fit)
        for w in (self._ds_load, self._upload, self._model_upload, self._Q, self._M, self._iters, self._kernel,
                  self._time_kernel, self._asset_open, self._kind, self._H, self._W, self._order,
                  self._frames, self._fps, self._sub):
            w.disabled = t
        self._prior_choice()

    def _prior_choice(self, *events):
        """The prior is a choice only for data with time stamps: without them dynamical
        could be picked and failed at Train ("a dynamical model needs time stamps")."""
        ds = self.state.dataset
        timed = ds is not None and ds.times is not None
        self._prior.disabled = self.state.training or not timed
        self._prior_note.object = ("**Latent prior** (dynamical: a GP over time, for sequences" +
                                   ("):" if timed or ds is None else "; this data set has no time stamps):"))

    def _on_progress(self, *events):
        h = self.state.bound_history
        self._curve.update(h)
        if h:
            self._progress.value = int(min(100, 100 * h[-1][0] / max(1, self.state.max_iters)))
        # a model opened or data loaded clears the history: the last fit's curve goes too
        self._curve.visible = self.state.training or bool(h)
        self._status.object = self.state.train_status

    def _on_model(self, *events):
        info = self.state.summary()
        if not info:
            self._summary.object = "*No model yet.*"
            self._save.disabled = True
            return
        self._save.disabled = False
        self._save.filename = f"bgplvm-{self.state.dataset_name or 'model'}-Q{info['Q']}.npz"
        self._summary.object = (
            f"- **data**: {self.state.dataset_name} ({info['N']} x {info['D']}"
            + (f", {100 * info['missing']:.1f}% missing" if info.get("missing") else "") + ")\n"
            f"- **lower bound**: {info['bound']:,.2f}\n"
            f"- **noise variance**: {info['noise_variance']:.4g}\n"
            f"- **signal variance**: {info['kernel_variance']:.4g}\n"
            f"- **signal-to-noise** (sd ratio): {info['snr']:.3g}\n"
            f"- **latent dims**: {info['Q']} ({info['active']} active), **M** = {info['M']}\n"
            f"- **kernel**: {info['kernel'] or '?'}\n"
            + (f"- **time prior**: {info['time_prior']}\n" if info.get("time_prior") else "")
            + (f"- **intervals**: {info['calibration']}\n" if info.get("calibration") else "")
            + (f"- **views**: {info['views']}\n" if info.get("views") else ""))

    def _save_bytes(self):
        try:
            return self.state.save_model_bytes()
        except UserError as e:
            self.state.error = str(e)
            return None

    def __panel__(self):
        data = pn.Card(
            self._asset_select, self._asset_open,
            self._ds_select, self._ds_load,
            pn.pane.Markdown(f"**Or upload your own** (at most {MAX_UPLOAD_MB} MB): an array (.npy, .npz, .csv; "
                             "N rows x D columns; an .npz may add time stamps `t` and sequence ids `sequence`), "
                             "or motion capture: one .asf skeleton with its .amc motions.",
                             styles={"font-size": "12px"}, margin=(5, 10, 0, 10)),
            self._upload_slot,
            pn.pane.Markdown("An array's rows are drawn as:", styles={"font-size": "12px"}, margin=(0, 10)),
            self._kind,
            pn.Row(self._H, self._W, self._order,
                   visible=pn.bind(lambda k: k == "image sequence", self.state.param.upload_kind)),
            self._frames, pn.Row(self._fps, self._sub),
            pn.pane.Markdown("**Or open a saved model** (.npz from *Save model*):",
                             styles={"font-size": "12px"}, margin=(5, 10, 0, 10)),
            self._model_upload_slot,
            title="1. Data", width=280)
        train = pn.Card(
            pn.Row(self._Q, self._M, self._iters), self._kernel,
            self._prior_note,
            self._prior, pn.Row(self._time_kernel, visible=pn.bind(lambda p: p == "dynamical", self.state.param.prior)),
            pn.Row(self._train, self._stop),
            self._progress, self._status, self._curve, title="2. Train", width=280)
        summary = pn.Card(self._summary, self._save, title="3. Model", width=280)
        return pn.Column(data, train, summary, width=290)

"""The explorer inside a notebook: ``m.explore()`` (any fitted model) or ``explore(m)``.

Returns an ``Explorer``, a Panel ``Viewer`` holding the page of ``app.create_app`` (the
served app's code) for the model: it renders inline in JupyterLab, Jupyter Notebook and VS
Code (after ``pn.extension()``, which ``explore`` calls; ``pip install bgplvm[notebook]``
installs JupyterLab and jupyter_bokeh, the ipywidgets bridge VS Code needs), and ``.show()`` / ``.servable()``
work as for any Panel object. ``Explorer.state`` is the page's ``ExplorerState``: drive it
from Python (``ex.state.cursor = (0.5, -1)``, ``ex.state.generate()``).

The outputs are drawn as the model's data set draws them: ``dataset=`` a
``bgplvm.datasets.Dataset`` (poses, frames, vectors), or ``image_shape=(height, width)`` for
rows that are images, else the data set the model's file names when it loads here, else
vectors. The model layer reaches this through the ``bgplvm.viewers`` entry point (it never
imports the explorer).
"""

from __future__ import annotations

import numpy as np
import panel as pn
import param

from bgplvm.datasets import Dataset
from bgplvm.datasets.record import ImageRenderer


def _dataset_for(model, dataset: Dataset | None, image_shape) -> Dataset | None:
    """The data set the page draws ``model``'s outputs with (None: the model's own choice)."""
    if dataset is not None and image_shape is not None:
        raise ValueError("give dataset= or image_shape=, not both")
    if image_shape is None:
        return dataset
    h, w = (int(v) for v in image_shape)
    if hasattr(model, "view_names"):
        raise ValueError("image_shape= is for a single-view model: give a multi-view model its dataset=")
    Y = np.asarray(model.Y)
    if h * w != Y.shape[1]:
        raise ValueError(f"image_shape {h} x {w} = {h * w} pixels, but the model's rows have {Y.shape[1]} values")
    name = (getattr(model, "metadata", None) or {}).get("dataset") or "model data"
    return Dataset(name=name, Y=Y, renderer=ImageRenderer(height=h, width=w), meta={"title": f"{name} (images)"})


class Explorer(pn.viewable.Viewer):
    """The explorer's page for one model, as a Panel object (module docstring)."""

    state = param.Parameter(doc="The page's ExplorerState (drive it from Python)")

    def __init__(self, model, dataset: Dataset | None = None, image_shape=None, **params):
        from .state import ExplorerState

        ds = _dataset_for(model, dataset, image_shape)
        state = ExplorerState()
        state.set_model(model, ds)
        super().__init__(state=state, **params)
        self._page = None

    def __panel__(self):
        if self._page is None:
            from .app import create_app

            self._page = create_app(self.state)
        return self._page


def explore(model, dataset: Dataset | None = None, image_shape=None) -> Explorer:
    """``Explorer`` of ``model`` (module docstring), with Panel's notebook extension loaded."""
    from .app import extensions

    extensions()
    return Explorer(model, dataset=dataset, image_shape=image_shape)

"""The explorer in a notebook (issue 46, point 3): ``m.explore()`` returns a Panel Viewer of
the served page's code, driven here from Python, rendered into a Bokeh document as a
notebook cell renders it."""

from __future__ import annotations

import numpy as np
import panel as pn
import pytest
from bokeh.document import Document

from bgplvm import BayesianGPLVM
from bgplvm.datasets import load
from bgplvm.explorer.notebook import Explorer, explore


@pytest.fixture(scope="module")
def walk_model():
    ds = load("synth_walk")
    sel = np.arange(0, ds.N, 4)
    m = BayesianGPLVM(ds.Y[sel], latent_dim=3, num_inducing=10, seed=0).fit(max_iters=30, progress=False)
    m.metadata = {"dataset": "synth_walk"}
    return m, ds.renderer, sel


def test_explore_is_a_viewer_of_the_page_driven_from_python(walk_model):
    m, renderer, sel = walk_model
    ex = m.explore()
    assert isinstance(ex, Explorer) and isinstance(ex, pn.viewable.Viewer)
    s = ex.state
    np.testing.assert_allclose(s.model.latent_mean, m.latent_mean)
    s.cursor = (0.3, -0.2)
    mean, var = s.generate()
    ref = m.predict(s.latent_vector()[None, :])
    np.testing.assert_allclose(mean, ref[0][0], rtol=1e-12)
    # rendered as a notebook cell is: the page's Bokeh models in a document
    root = pn.panel(ex).get_root(Document())
    titles = {getattr(getattr(b, "title", None), "text", None) for b in root.references()}
    assert {"Latent space: synth_walk", "Generated at (0.30, -0.20)"} <= titles
    assert ex.__panel__() is ex.__panel__()  # one page per explorer


def test_outputs_drawn_as_given(walk_model):
    from bgplvm.datasets import Dataset

    m, renderer, sel = walk_model
    ds = Dataset(name="walk", Y=np.asarray(m.Y), renderer=renderer)
    assert explore(m, dataset=ds).state.dataset.renderer.kind == "pose"
    frames = BayesianGPLVM(np.random.default_rng(0).random((30, 12)), latent_dim=2, num_inducing=5)
    ex = explore(frames, image_shape=(3, 4))
    assert ex.state.dataset.renderer.kind == "image" and ex.state.dataset.renderer.image(frames.Y[0]).shape == (3, 4)
    with pytest.raises(ValueError, match="image_shape 3 x 5 = 15 pixels, but the model's rows have 12 values"):
        explore(frames, image_shape=(3, 5))
    with pytest.raises(ValueError, match="not both"):
        explore(frames, dataset=ds, image_shape=(3, 4))


def test_a_multi_view_model_explores_too():
    from views_model import walk_mrd

    ex = walk_mrd(iters=20).explore()
    assert ex.state.mrd is not None and ex.state.view_names == ["pose", "image"]


def test_a_model_on_dask_explores_as_its_in_process_model(client):
    """``explore`` has one contract: a distributed model's page is that of the in-process
    model it equals (``to_model``), multi-view ones included."""
    pytest.importorskip("distributed", reason="needs dask[distributed] (the test extra installs it)")
    from bgplvm import MRD
    from bgplvm.distributed import DistributedGPLVM

    Y = load("synth_walk").Y[::3]
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=8, seed=0).fit(max_iters=10, progress=False)
    with DistributedGPLVM.from_model(m, client=client, chunks=2) as dm:
        ex = dm.explore()
        assert isinstance(ex, Explorer) and ex.state.model.elbo() == pytest.approx(m.elbo(), rel=1e-12)
    views = {"a": Y[:, :10], "b": Y[:, 10:]}
    with MRD(views, 2, 6, seed=0, client=client) as dm:
        ex = dm.explore()
        assert ex.state.mrd is not None and ex.state.view_names == ["a", "b"]

"""The explorer on a large model (explorer/density.py): above ``RASTER_ABOVE`` points the
latent view draws a Datashader image, the exported figures an image of the same counts, and
nothing sent to the page or written to a figure grows with N. The threshold is lowered
here so that the walk (80 rows) counts as large; tests/browser/test_large_model_browser.py
opens a model of 1e5 rows in the page."""

from __future__ import annotations

import numpy as np
import pytest
import holoviews as hv

from bgplvm import BayesianGPLVM
from bgplvm.explorer import density, export, plots
from bgplvm.explorer.state import ExplorerState

pytest.importorskip("datashader", reason="the explorer draws large models with datashader (a dependency)")


@pytest.fixture
def large(monkeypatch, walk):
    monkeypatch.setattr(density, "RASTER_ABOVE", 50)
    m = BayesianGPLVM(walk.Y, latent_dim=3, num_inducing=10, seed=0)
    s = ExplorerState()
    s.set_dataset(walk)
    s.set_model(m, walk)
    return s


def _sources(fig):
    return [r.data_source for r in fig.renderers if hasattr(r, "data_source")]


def test_the_latent_view_draws_a_density_image_for_every_colouring(large, walk):
    from bgplvm.explorer.latent_view import LatentView

    hv.extension("bokeh")
    lv = LatentView(state=large)
    assert lv._unc.disabled and lv._traj.disabled and lv._large_note.visible
    assert f"{walk.N:,} points: drawn as a density image" in lv._large_note.object
    kinds = {}
    for mode in lv._color.options:
        large.color_by = mode
        large.error = ""
        lv._rebuild()
        assert large.error == "", (mode, large.error)
        fig = hv.render(lv._pane.object)
        # no glyph source of one row per point: the points arrive as an image
        assert max(len(next(iter(s.data.values()), [])) for s in _sources(fig) if s.data) < walk.N
        images = [r.glyph for r in fig.renderers if type(r.glyph).__name__ in ("Image", "ImageStack")]
        assert len(images) >= 2, mode  # the variance background and the points
        kinds[large.color_mode()] = type(images[-1]).__name__
        if large.color_mode() == "label":  # an ImageStack draws no legend: the view adds the classes' key
            legend = [str(item.label.value) for lg in fig.legend for item in lg.items]
            assert legend == sorted(walk.label_names), legend  # the scatter key's (natural) order
    assert kinds == {"label": "ImageStack", "sequence": "ImageStack", "time": "Image", "none": "Image"}


def test_categories_name_and_order_classes_as_the_scatter_does(walk):
    codes, names = density.categories("label", walk.labels, walk.label_names)
    table = plots.point_table(np.zeros((walk.N, 2)), (0, 1), walk.labels, walk.label_names, color_mode="label")
    assert names == list(plots.group_colors(table["group"]))  # the scatter's colour key order
    assert [names[c] for c in codes] == list(table["group"])
    codes, names = density.categories("sequence", sequence=np.array([10, 2, 2, 10]), sequence_names={2: "b"})
    assert names == ["b", "sequence 10"] and codes.tolist() == [1, 0, 0, 1]
    assert density.categories("none", walk.labels) is None


def test_density_image_counts_points_and_mixes_class_colours():
    x = np.array([0.05, 0.05, 0.05, 0.95])
    y = np.array([0.95, 0.95, 0.95, 0.05])
    img = density.density_rgba(x, y, (0, 0, 1, 1), (10, 10), codes=np.array([0, 1, 1, 0]))
    assert img.shape == (10, 10, 4)
    assert img[0, 0, 3] == 255 and img[9, 9, 3] > 0  # the fullest pixel opaque, row 0 at the top
    assert (img[..., 3] > 0).sum() == 2  # every other pixel transparent
    blue, orange = density._hex_rgb(plots.CATEGORY[:2])
    np.testing.assert_allclose(img[0, 0, :3], np.round((blue + 2 * orange) / 3), atol=1)
    np.testing.assert_allclose(img[9, 9, :3], blue, atol=1)
    t = density.density_rgba(x, y, (0, 0, 1, 1), (10, 10), values=np.array([0.0, 0, 0, 1]),
                             values_palette=np.linspace([0, 0, 0], [255, 255, 255], 256))
    assert t[0, 0, 0] == 0 and t[9, 9, 0] == 255


def test_exported_figures_of_a_large_model_draw_the_density(large, monkeypatch):
    """The exported latent view is an image of the counts, not a circle per point: an SVG
    of the same size whatever N (it had one <circle> per point)."""
    svg = export.latent_figure(large, "svg").decode()
    png = export.latent_figure(large, "png")
    assert png[:4] == b"\x89PNG"
    monkeypatch.setattr(density, "RASTER_ABOVE", 10**9)  # the same model drawn point by point
    small = export.latent_figure(large, "svg").decode()
    N = large.model.Y.shape[0]
    assert svg.count("<circle") == small.count("<circle") - N  # the legend's and the selection's remain
    assert svg.count("<image") == small.count("<image") + 1  # the points' image


def test_state_reads_q_x_once_per_model_version(large):
    mu, S = large.latent()
    assert large.latent()[0] is mu
    np.testing.assert_array_equal(mu, large.model.latent_mean)
    large.model_version += 1
    assert large.latent()[0] is not mu


def test_a_large_dynamical_model_draws_its_density_and_still_plays(monkeypatch, walk):
    """A dynamical model above the threshold: the latent view is the density image, and the
    player still sends the chosen sequence's frames and draws its path, q(x) band and
    moving marker into that view."""
    from bokeh.document import Document

    from bgplvm import DynamicalGPLVM
    from bgplvm.explorer.latent_view import LatentView
    from bgplvm.explorer.player import PlayerView

    hv.extension("bokeh")
    monkeypatch.setattr(density, "RASTER_ABOVE", 50)
    m = DynamicalGPLVM(walk.Y, walk.times, latent_dim=3, num_inducing=10, sequences=walk.sequence, seed=0)
    m.fit(max_iters=20, progress=False)
    s = ExplorerState()
    s.set_model(m, walk)
    pv = PlayerView(state=s)
    lv = LatentView(state=s, decorators=[pv.attach_latent])
    doc = Document()
    for p in (lv._pane, pv._out_pane, pv._time_pane):
        p.get_root(doc)
    assert lv._large_note.visible and lv._traj.disabled
    fig = list(lv._pane._plots.values())[0][0].state
    assert any(type(r.glyph).__name__ in ("Image", "ImageStack") for r in fig.renderers)
    assert {pv.path_src, pv.ellipse_src, pv.marker} <= {getattr(r, "data_source", None) for r in fig.renderers}
    pb = s.playback()
    assert pb.dynamical and len(pv.traj.data["t"]) == pb.T  # the sequence and its forecast
    assert pb.is_forecast.any()

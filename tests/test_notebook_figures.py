"""The guide's static figures (bgplvm.explorer.notebook_figures) and its iteration helper
(bgplvm.docs_utils.reduce_in_tests)."""

import io

import numpy as np
import pytest
from PIL import Image

from bgplvm.docs_utils import reduce_in_tests
from bgplvm.explorer.notebook_figures import PNG, ard_bars, image_row, latent_scatter, line_band


def _size(png: bytes) -> tuple[int, int]:
    im = Image.open(io.BytesIO(png))
    im.load()
    assert im.format == "PNG"
    return im.size


def test_figures_are_pngs_a_notebook_shows():
    rng = np.random.default_rng(0)
    X, labels = rng.standard_normal((200, 4)), rng.integers(0, 3, 200)
    figs = [ard_bars(rng.random(4)),
            latent_scatter(X, labels, ["a", "b", "c"], ard=[0.1, 2.0, 0.3, 1.0], variance=0.01 + 0 * X),
            latent_scatter(X[:, :1]),  # one latent dimension: drawn against 0
            line_band(np.arange(50), np.sin(np.arange(50) / 5), 0.1 * np.ones(50), truth=np.full(50, np.nan),
                      marker=30, title="t"),
            image_row(rng.random((3, 12)), (3, 4), titles=["x", "y", "z"])]
    for png in figs:
        assert isinstance(png, PNG) and png._repr_png_() == bytes(png)
        w, h = _size(png)
        assert w > 100 and h > 100
        assert repr(png).startswith(f"<PNG {w} x {h} px")


def test_latent_scatter_picks_the_two_most_relevant_dimensions():
    # the same points drawn with dims given explicitly and chosen by ARD weight
    X = np.random.default_rng(1).standard_normal((50, 3))
    assert latent_scatter(X, ard=[0.1, 5.0, 3.0]) == latent_scatter(X, dims=(1, 2))


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="finite"):
        ard_bars([1.0, np.nan])
    with pytest.raises(ValueError, match="shape"):
        line_band([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least one"):
        image_row([], (2, 2))


def test_reduce_in_tests(monkeypatch):
    monkeypatch.delenv("BGPLVM_DOCS_QUICK", raising=False)
    assert reduce_in_tests(3000, test_n=50) == 3000
    monkeypatch.setenv("BGPLVM_DOCS_QUICK", "0")
    assert reduce_in_tests(3000, test_n=50) == 3000
    monkeypatch.setenv("BGPLVM_DOCS_QUICK", "1")
    assert reduce_in_tests(3000, test_n=50) == 50
    assert reduce_in_tests(10, test_n=50) == 10
    assert reduce_in_tests(3000) == 2

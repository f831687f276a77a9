"""Pre-trained models are matched to their data by what survives rounding: the raw files'
sha256 (which the loaders verify), the shape, and column sums to a tolerance. The rows are
computed from the raw files with np.sin / np.arcsin / ..., whose last bits follow the CPU's
SIMD paths, so a hash of the rows refused the CMU page on other machines."""

from __future__ import annotations

import dataclasses
import io
import json

import numpy as np
import pytest

import bgplvm.assets as A
from bgplvm import BayesianGPLVM
from mirror import needs_data


def _ulps(Y: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Y with every entry moved by up to ``k`` ulps, at random (what another CPU's rounding does)."""
    rng = np.random.default_rng(seed)
    out = Y.copy()
    steps = rng.integers(-k, k + 1, Y.shape)
    for _ in range(k):
        out = np.where(steps > 0, np.nextafter(out, np.inf), np.where(steps < 0, np.nextafter(out, -np.inf), out))
        steps = steps - np.sign(steps)
    return out


@pytest.fixture(scope="module")
def stripped(tmp_path_factory):
    """A small fitted model saved without its data, with the data check of its rows."""
    rng = np.random.default_rng(1)
    Y = np.sin(rng.standard_normal((40, 2)) @ rng.standard_normal((2, 6)))
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=6, seed=0)
    m.fit(max_iters=20, progress=False)
    buf = io.BytesIO()
    m.save(buf)
    src = {"raw.dat": "ab" * 32}
    rec = {"asset": "t", "dataset": "t", "data_check": A.data_check(Y, src)}
    path = tmp_path_factory.mktemp("asset") / "m.npz"
    path.write_bytes(A.strip_data(buf.getvalue(), rec))
    return path, Y, src, m


def test_rows_rounded_differently_still_match(stripped):
    path, Y, src, m = stripped
    Yr = _ulps(Y, 4)
    assert not np.array_equal(Yr, Y) and A.sha256_rows(Yr) != A.sha256_rows(Y)
    got = A.load_model_file(path, Yr, src)
    np.testing.assert_array_equal(got.Y, Yr)
    assert got.elbo() == pytest.approx(m.elbo(), rel=1e-9)


@pytest.mark.parametrize("change, why", [
    (lambda Y: Y + 1e-6 * (np.arange(Y.size).reshape(Y.shape) == 7), "values differ"),
    (lambda Y: Y[np.r_[1, 0, 2:len(Y)]], "values differ"),         # two rows swapped
    (lambda Y: Y[:-1], "shape"),                                     # a row dropped
    (lambda Y: np.where(np.arange(Y.size).reshape(Y.shape) == 3, np.nan, Y), "values differ"),
])
def test_other_rows_are_refused_saying_what_differs(stripped, change, why):
    path, Y, src, _ = stripped
    with pytest.raises(A.AssetUnavailable, match=f"fitted to other data .*{why}"):
        A.load_model_file(path, change(Y), src)


def test_other_raw_files_are_refused(stripped):
    path, Y, _, _ = stripped
    with pytest.raises(A.AssetUnavailable, match=r"raw files differ \(raw.dat\)"):
        A.load_model_file(path, Y, {"raw.dat": "cd" * 32})


def test_shipped_real_data_assets_record_a_data_check():
    for name, spec in A.ASSETS.items():
        if spec.embedded_data:
            continue
        rec = json.loads(spec.record_path.read_text())
        chk = rec["data_check"]
        assert chk["shape"] == [rec["N"], rec["D"]] and len(chk["column_sums"]) == rec["D"]
        assert chk["source_sha256"], name  # the raw files the loaders verify
        with np.load(spec.path) as z:
            inner = json.loads(z["asset.json"].tobytes().decode())
        assert inner["data_check"] == chk, name  # the file and its record agree


@needs_data("cmu35")
def test_cmu_rows_a_few_ulps_off_still_open_the_cmu_page(monkeypatch):
    """The default page on a machine whose np.sin rounds otherwise: the CMU model opens."""
    import bgplvm.datasets as D
    from bgplvm.explorer import app

    real = D.load

    def rounded_elsewhere(name, *a, **k):
        ds = real(name, *a, **k)
        return ds if name != "cmu35" else dataclasses.replace(ds, Y=_ulps(ds.Y, 3))

    monkeypatch.setattr(D, "load", rounded_elsewhere)
    m, ds = A.load_asset("cmu35")
    assert A.sha256_rows(ds.Y) != json.loads(A.get_spec("cmu35").record_path.read_text())["data_sha256"]
    np.testing.assert_array_equal(m.Y, ds.Y)
    monkeypatch.setattr(app, "_load_asset", A.load_asset)
    state = app.initial_state()
    assert state.asset_name == "cmu35" and state.dataset_name == "cmu35"
    assert "not available" not in state.info

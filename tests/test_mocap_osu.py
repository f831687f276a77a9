"""OSU ACCAD marker motion capture: parsing, gap filling, the 'osu_run1' record."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from bgplvm.datasets.mocap import osu
from bgplvm.datasets.mocap.errors import MocapParseError
from mirror import find_mirror


_root = find_mirror("osu_mocap/run1TXT.ZIP")
OSU = _root / "osu_mocap" if _root else None
pytestmark = pytest.mark.skipif(
    OSU is None, reason="OSU mocap files not found: set BGPLVM_DATA_MIRROR or put shared/datasets beside the repo")


def _paths(motion):
    return {f"{motion}TXT.ZIP": OSU / f"{motion}TXT.ZIP", "connections.txt": OSU / "connections.txt"}


@pytest.fixture(scope="module")
def run1():
    return osu.build("osu_run1", _paths("run1"))


def _raw_run1():
    """The text file read with numpy directly: (frames, columns) with NaN for -9999.99."""
    with zipfile.ZipFile(OSU / "run1TXT.ZIP") as zf:
        text = zf.read("Aug210106.txt").decode()
    header = text.splitlines()[0].split("\t")
    S = np.loadtxt(io.StringIO(text), skiprows=1)
    S[S == -9999.99] = np.nan
    return header, S


def test_run1_record(run1):
    n_lines = sum(1 for ln in (OSU / "connections.txt").read_text().splitlines() if ln.strip())
    assert run1.name == "osu_run1"
    assert run1.Y.shape == (55, 123)  # 217 frames, every 4th; 41 markers
    assert len(run1.renderer.connections) == n_lines == 22
    assert run1.renderer.kind == "pose" and len(run1.renderer.names) == 41
    np.testing.assert_array_equal(run1.sequence, 0)
    np.testing.assert_allclose(run1.times[:3], [0.0, 0.0333, 0.0667])
    assert run1.meta["dropped_markers"] == [] and run1.meta["filled"]["STRN"] == 55


def test_run1_values_match_raw_file(run1):
    header, S = _raw_run1()
    np.testing.assert_array_equal(run1.times, S[::4, 1])
    X = S[::4, 2:].reshape(-1, 41, 3)
    names = [h.split(":")[1] for h in header[2::3]]
    assert list(run1.renderer.names) == names
    complete = ~np.isnan(S[:, 2:].reshape(len(S), 41, 3)).any(axis=(0, 2))
    P = np.stack([run1.renderer.positions(y) for y in run1.Y])  # (55, 41, 3)
    # markers seen in every frame: (raw - frame centroid) / 400; the centroid includes the
    # filled markers, so compare marker differences, which do not depend on it
    i, j = np.flatnonzero(complete)[[0, 5]]
    np.testing.assert_allclose(P[:, i] - P[:, j], (X[:, i] - X[:, j]) / 400, atol=1e-12)
    np.testing.assert_allclose(P.mean(axis=1), 0, atol=1e-12)


def test_run1_is_upright(run1):
    names = list(run1.renderer.names)
    head = [names.index(n) for n in ("LFHD", "RFHD", "LBHD", "RBHD")]
    feet = [names.index(n) for n in ("LHEE", "RHEE", "LMT5", "RMT5")]
    for y in run1.Y:
        P = run1.renderer.positions(y)
        assert P[head, 2].min() > P[feet, 2].max() + 0.5 * 1000 / 400  # units of 0.4 m
        assert P[head, 2].min() - P[feet, 2].min() > 1.1 * 1000 / 400  # lowest foot: > 1.1 m


def test_fill_missing():
    X = np.arange(30, dtype=float).reshape(5, 2, 3)
    X[1:3, 0] = np.nan
    X[[0, 4], 1, 2] = np.nan
    F, keep, n = osu.fill_missing(X)
    assert keep.all() and list(n) == [2, 2]
    np.testing.assert_allclose(F[:, 0], np.arange(30, dtype=float).reshape(5, 2, 3)[:, 0])  # linear in time
    np.testing.assert_allclose(F[[0, 4], 1, 2], [F[1, 1, 2], F[3, 1, 2]])  # held at the ends
    X[:4, 1] = np.nan
    assert list(osu.fill_missing(X)[1]) == [True, False]
    # a body moving along x; a marker lost for the first 3 frames keeps its offset
    t = np.arange(8.0)[:, None]
    body = np.stack([np.c_[10 * t, 0 * t, 0 * t + 1], np.c_[10 * t, 0 * t + 2, 0 * t + 1],
                     np.c_[10 * t + 1, 0 * t + 1, 0 * t + 5]], axis=1)  # (8, 3, 3)
    lost = body.copy()
    lost[:3, 2] = np.nan
    F, keep, n = osu.fill_missing(lost)
    assert keep.all() and list(n) == [0, 0, 3]
    np.testing.assert_allclose(F, body)


def test_other_motions_and_options():
    ds = osu.build("sprint", _paths("sprint"), subsample=1, centre=False, scale=1.0)
    assert ds.name == "osu_sprint" and ds.Y.shape == (265, 123)
    z = ds.Y[:, 82:]  # blocks layout: z coordinates last, in mm
    assert 0 < z.min() and z.max() < 2000


def test_corrupt_files_raise_naming_the_file(tmp_path):
    # camper_04TXT.ZIP in the mirror is an HTML "page not found" saved under a .ZIP name
    with pytest.raises(MocapParseError, match="camper_04TXT.ZIP"):
        osu.build("camper_04", _paths("camper_04"))
    data = (OSU / "run1TXT.ZIP").read_bytes()
    bad = tmp_path / "run1TXT.ZIP"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(MocapParseError, match="run1TXT.ZIP"):
        osu.build("run1", {"run1TXT.ZIP": bad, "connections.txt": OSU / "connections.txt"})
    # a valid zip whose text is cut off in the middle of a row
    with zipfile.ZipFile(OSU / "run1TXT.ZIP") as zf:
        text = zf.read("Aug210106.txt")
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("Aug210106.txt", text[: len(text) // 2])
    with pytest.raises(MocapParseError, match=r"run1TXT.ZIP/Aug210106.txt: line \d+"):
        osu.build("run1", {"run1TXT.ZIP": bad, "connections.txt": OSU / "connections.txt"})
    conn = tmp_path / "connections.txt"
    conn.write_text("LFHD, RFHD\nLFHD RFHD\n")
    with pytest.raises(MocapParseError, match="connections.txt: line 2"):
        osu.read_connections(conn)
    import bgplvm.datasets

    assert issubclass(MocapParseError, ValueError) and issubclass(MocapParseError, bgplvm.datasets.DatasetError)

"""load_array (user data) and the `bgplvm datasets` CLI."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import bgplvm.datasets as bd
from bgplvm.datasets import cli
from bgplvm.datasets.errors import DatasetError


# --------------------------------------------------------------------------- load_array
def test_npy_npz_csv_roundtrip(tmp_path):
    Y = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    np.save(tmp_path / "a.npy", Y)
    np.savez(tmp_path / "one.npz", data=Y)
    np.savez(tmp_path / "many.npz", Y=Y, labels=np.arange(4))
    np.savetxt(tmp_path / "a.csv", Y, delimiter=",", header="x,y,z", comments="")
    np.savetxt(tmp_path / "a.txt", Y)
    for name in ("a.npy", "one.npz", "many.npz", "a.csv", "a.txt"):
        A = bd.load_array(tmp_path / name)
        assert A.dtype == np.float64 and A.flags.c_contiguous
        np.testing.assert_allclose(A, Y, rtol=1e-6, err_msg=name)
    with pytest.raises(DatasetError, match="1-D"):
        bd.load_array(tmp_path / "many.npz", key="labels")
    np.save(tmp_path / "ints.npy", np.arange(6).reshape(3, 2))
    assert bd.load_array(tmp_path / "ints.npy").dtype == np.float64


def test_csv_header_needs_every_cell_a_name(tmp_path):
    """Only a first line of names is skipped: a first data row with an empty or mistyped
    cell is an error (it was dropped silently); a delimiter ending every line is no column."""
    for text, match in (("1,,3\n4,5,6\n7,8,9\n", "NaN|empty|missing"), ("1,NA,3\n4,5,6\n", "'NA'")):
        (tmp_path / "a.csv").write_text(text)
        with pytest.raises(DatasetError, match=match):
            bd.load_array(tmp_path / "a.csv")
    (tmp_path / "b.csv").write_text("x,y,z\n1,2,3\n4,5,6\n")
    np.testing.assert_array_equal(bd.load_array(tmp_path / "b.csv"), [[1, 2, 3], [4, 5, 6]])
    (tmp_path / "c.csv").write_text("1,2,3,\n4,5,6,\n")
    np.testing.assert_array_equal(bd.load_array(tmp_path / "c.csv"), [[1, 2, 3], [4, 5, 6]])


def test_tab_separated_empty_cells_and_header_width(tmp_path):
    """An empty cell of a tab-separated file is a cell (NaN: an error), not a gap that moved
    the row's later values one column left (whitespace splitting dropped it silently); a
    header naming more or fewer columns than the data rows have is an error."""
    (tmp_path / "a.tsv").write_text("x\ty\tz\n1\t\t3\n4\t5\t6\n")
    with pytest.raises(DatasetError, match=r"NaN or infinite.*row 0, column 1"):
        bd.load_array(tmp_path / "a.tsv")
    (tmp_path / "b.txt").write_text("x\ty\tz\n1\t2\t3\n4\t5\t6\n")
    np.testing.assert_array_equal(bd.load_array(tmp_path / "b.txt"), [[1, 2, 3], [4, 5, 6]])
    (tmp_path / "c.tsv").write_text("1\t2\t\n4\t5\t\n")  # a tab ending every line: no column
    np.testing.assert_array_equal(bd.load_array(tmp_path / "c.tsv"), [[1, 2], [4, 5]])
    (tmp_path / "d.txt").write_text("1 2  3\n4 5 6\n")  # spaces: any run of them separates
    np.testing.assert_array_equal(bd.load_array(tmp_path / "d.txt"), [[1, 2, 3], [4, 5, 6]])
    (tmp_path / "e.csv").write_text("a,b,c\n1,2\n3,4\n")
    with pytest.raises(DatasetError, match="first line names 3 columns but the data rows have 2"):
        bd.load_array(tmp_path / "e.csv")


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda p: np.save(p / "x.npy", np.arange(5.0)), r"2-D.*shape \(5,\).*reshape it to \(N, 1\)"),
        (lambda p: np.save(p / "x.npy", np.zeros((2, 3, 4))), r"2-D.*flatten"),
        (lambda p: np.save(p / "x.npy", np.array([[1.0, np.nan], [0, 1]])), r"NaN or infinite.*row 0, column 1"),
        (lambda p: np.save(p / "x.npy", np.array([[1.0, np.inf]])), r"NaN or infinite"),
        (lambda p: np.save(p / "x.npy", np.array([["a", "b"]])), r"real numbers"),
        (lambda p: np.save(p / "x.npy", np.array([[1, None]], dtype=object), allow_pickle=True), r"Python objects"),
        (lambda p: np.save(p / "x.npy", np.zeros((0, 3))), r"empty"),
        (lambda p: (p / "x.csv").write_text("a,b\n1,2\n\n3,oops\n"),
         r"non-numeric value 'oops' in data row 2 \(line 4 of the file\)"),
        (lambda p: (p / "x.csv").write_text("1,2\n3\n"), r"different numbers of columns"),
        (lambda p: (p / "x.csv").write_text("1,2\n3,\n"), r"NaN or infinite"),
        (lambda p: (p / "x.csv").write_text(""), r"empty"),
        (lambda p: np.savez(p / "x.npz", a=np.eye(2), b=np.eye(2)), r"several arrays.*key="),
        (lambda p: (p / "x.npy").write_bytes(b"not numpy"), r"x.npy is not a NumPy .npy.*extension .csv"),
        (lambda p: (p / "x.npy").write_text("1,2\n3,4\n"), r"not a NumPy .npy"),  # a table named .npy
        (lambda p: (p / "x.npz").write_bytes(b"\x93NUMPY"), r"not a NumPy .npz"),
        (lambda p: (p / "x.npy").write_bytes(b"\x93NUMPY\x01"), r"could not read"),  # header, then junk
        (lambda p: (p / "x.xlsx").write_bytes(b""), r"unsupported file type"),
    ],
)
def test_bad_user_files_give_clear_errors(tmp_path, make, match):
    make(tmp_path)
    (path,) = list(tmp_path.iterdir())
    with pytest.raises(DatasetError, match=match) as e:
        bd.load_array(path)
    assert str(path) in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        bd.load_array(tmp_path / "nope.npy")
    with pytest.raises(DatasetError, match="no array 'Z'"):
        np.savez(tmp_path / "k.npz", Y=np.eye(2))
        bd.load_array(tmp_path / "k.npz", key="Z")


# --------------------------------------------------------------------------- CLI
def _shared() -> Path | None:
    for c in (os.environ.get("BGPLVM_DATA_MIRROR"), Path(__file__).resolve().parents[2] / "shared" / "datasets"):
        if c and (Path(c) / "oil" / "DataTrn.txt").is_file():
            return Path(c)
    return None


def _run(argv):
    out = io.StringIO()
    rc = cli.main(argv, out=out)
    return rc, out.getvalue()


def test_cli_list(tmp_path, monkeypatch):
    monkeypatch.delenv("BGPLVM_DATA_MIRROR", raising=False)
    rc, out = _run(["list", "--cache-dir", str(tmp_path)])
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["name", "kind", "rows", "size", "status"]
    row = {ln.split()[0]: ln for ln in lines[1:] if ln.strip()}
    assert "embedded" in row["synth_walk"] and "BSD-3-Clause" in row["synth_walk"]
    assert " - " in row["oil"] and "1000" in row["oil"] and "kB" in row["oil"]
    assert "CC BY-NC-SA 3.0" in row["osu_run1"]
    assert str(tmp_path) in out


def test_cli_fetch_with_mirror_then_list_shows_cached(tmp_path, monkeypatch, capsys):
    shared = _shared()
    if shared is None:
        pytest.skip("../shared/datasets (the offline mirror) not found")
    mirror = tmp_path / "mirror"
    shutil.copytree(shared / "oil", mirror / "oil")
    cache = tmp_path / "cache"
    rc, out = _run(["fetch", "oil", "--mirror", str(mirror), "--cache-dir", str(cache), "--quiet"])
    assert rc == 0 and out.count("oil: ") == 6 and str(cache) in out
    rc, out = _run(["list", "--cache-dir", str(cache)])
    assert "cached" in next(ln for ln in out.splitlines() if ln.startswith("oil "))


def test_cli_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("BGPLVM_DATA_MIRROR", raising=False)
    rc, _ = _run(["fetch", "nosuch", "--cache-dir", str(tmp_path)])
    assert rc == 1 and "Known data sets" in capsys.readouterr().err
    rc, _ = _run(["fetch", "oil", "--mirror", str(tmp_path / "missing"), "--cache-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1 and "oil" in err and "not a directory" in err
    assert _run(["frobnicate"])[0] == 2
    capsys.readouterr()

"""Fetching: cache, mirror, network (a local http.server), verification and errors.

Every test uses a tmp cache directory and, where it needs real files, a tmp mirror
populated from ../shared/datasets (the real oil files: small). No test touches the
internet: "offline" URLs point at a closed port on 127.0.0.1.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import os
import shutil
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

import bgplvm.datasets as bd
from mirror import find_mirror
from bgplvm.datasets import download, registry
from bgplvm.datasets.errors import ChecksumError, DownloadError, ParseError, UnknownDatasetError


SHARED = find_mirror("oil/DataTrn.txt")
needs_shared = pytest.mark.skipif(SHARED is None, reason="../shared/datasets (the offline mirror) not found")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    """No test may see the user's mirror/cache settings or write to ~/.cache."""
    monkeypatch.delenv("BGPLVM_DATA_MIRROR", raising=False)
    monkeypatch.delenv("BGPLVM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def oil_mirror(tmp_path) -> Path:
    """A private copy of the oil folder of the shared mirror (so tests may damage it)."""
    if SHARED is None:
        pytest.skip("../shared/datasets (the offline mirror) not found")
    m = tmp_path / "mirror"
    shutil.copytree(SHARED / "oil", m / "oil")
    return m


def _files_under(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file()) if d.exists() else []


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _with_urls(monkeypatch, name: str, make_urls) -> registry.DatasetSpec:
    """Point data set ``name``'s files at other URLs: make_urls(FileSpec) -> tuple."""
    spec = registry.REGISTRY[name]
    files = tuple(dataclasses.replace(f, urls=make_urls(f)) for f in spec.files)
    new = dataclasses.replace(spec, files=files)
    monkeypatch.setitem(registry.REGISTRY, name, new)
    return new


class _Server:
    """http.server on 127.0.0.1 serving ``root``; ``truncate`` names files to cut short
    (full Content-Length announced, half the bytes sent, connection closed)."""

    def __init__(self, root: Path):
        self.root, self.truncate, self.requests = root, set(), []
        outer = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(outer.root), **kw)

            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.requests.append(self.path)
                name = self.path.rsplit("/", 1)[-1]
                if name in outer.truncate:
                    data = (outer.root / self.path.lstrip("/")).read_bytes()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                super().do_GET()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(oil_mirror):
    s = _Server(oil_mirror.parent / "www")
    shutil.copytree(oil_mirror / "oil", s.root / "three_phase_oil_flow")
    yield s
    s.close()


# --------------------------------------------------------------------------- mirror + cache
def test_mirror_fills_cache_then_cache_is_used(oil_mirror, tmp_path):
    cache = tmp_path / "cache"
    paths = bd.fetch("oil", mirror=oil_mirror, cache_dir=cache, progress=False)
    assert set(paths) == {f.name for f in registry.REGISTRY["oil"].files}
    for f in registry.REGISTRY["oil"].files:
        p = paths[f.name]
        assert p == cache / "oil" / f.name
        assert hashlib.sha256(p.read_bytes()).hexdigest() == f.sha256
    assert not [p for p in _files_under(cache) if p.name.endswith(".part")]
    # Second time: everything is cached, so neither mirror nor network is needed.
    shutil.rmtree(oil_mirror)
    ds = bd.load("oil", mirror=oil_mirror, cache_dir=cache)
    assert ds.Y.shape == (1000, 12)
    assert bd.info("oil", cache_dir=cache).cached


def test_mirror_as_file_url_and_env_vars(oil_mirror, tmp_path, monkeypatch):
    cache = tmp_path / "c1"
    bd.fetch("oil", mirror=oil_mirror.as_uri(), cache_dir=cache, progress=False)
    assert len(_files_under(cache)) == 6
    # Environment variables are used when no parameter is given ...
    monkeypatch.setenv("BGPLVM_DATA_MIRROR", str(oil_mirror))
    monkeypatch.setenv("BGPLVM_CACHE_DIR", str(tmp_path / "c2"))
    assert bd.load("oil", split="test").Y.shape == (1000, 12)
    assert len(_files_under(tmp_path / "c2")) == 6
    # ... and parameters override them.
    bd.fetch("oil", cache_dir=tmp_path / "c3", progress=False)
    assert len(_files_under(tmp_path / "c3")) == 6
    with pytest.raises(DownloadError, match="not a directory"):
        bd.fetch("oil", mirror=tmp_path / "no_such_mirror", cache_dir=tmp_path / "c4")


def test_file_missing_from_mirror(oil_mirror, tmp_path):
    (oil_mirror / "oil" / "DataVdnLbls.txt").unlink()
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError) as e:
        bd.load("oil", split="validation", mirror=oil_mirror, cache_dir=cache)
    msg = str(e.value)
    assert "no such file in the mirror" in msg and "oil/DataVdnLbls.txt" in msg and str(oil_mirror) in msg
    assert not (cache / "oil" / "DataVdnLbls.txt").exists()


def test_default_cache_dir_respects_xdg(monkeypatch, tmp_path):
    assert bd.cache_root() == tmp_path / "xdg" / "bgplvm" / "datasets"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert bd.cache_root() == Path.home() / ".cache" / "bgplvm" / "datasets"
    monkeypatch.setenv("BGPLVM_CACHE_DIR", str(tmp_path / "env"))
    assert bd.cache_root() == tmp_path / "env"
    assert bd.cache_root(tmp_path / "param") == tmp_path / "param"


def test_embedded_needs_no_cache_or_network(tmp_path):
    paths = bd.fetch("synth_walk", cache_dir=tmp_path / "cache", mirror=tmp_path / "nothing")
    assert paths["synth_walk.npz"].is_file()
    assert not (tmp_path / "cache").exists()
    assert bd.load(bd.DEFAULT_DATASET).name == "synth_walk"


# --------------------------------------------------------------------------- network (local http server)
def test_download_from_url(server, monkeypatch, tmp_path, capsys):
    _with_urls(monkeypatch, "oil", lambda f: (f"{server.url}/three_phase_oil_flow/{f.name}",))
    cache = tmp_path / "cache"
    ds = bd.load("oil", split="validation", cache_dir=cache)  # progress=True, but stderr is no TTY
    assert ds.Y.shape == (1000, 12)
    assert len(server.requests) == 6
    assert capsys.readouterr().err == ""
    bd.load("oil", cache_dir=cache)  # cached: no new requests
    assert len(server.requests) == 6


def test_http_mirror_url(server, tmp_path):
    # an http(s) mirror uses the <folder>/<file> layout of ../shared/datasets
    shutil.copytree(server.root / "three_phase_oil_flow", server.root / "oil")
    paths = bd.fetch("oil", mirror=server.url, cache_dir=tmp_path / "cache", progress=False)
    assert all(p.is_file() for p in paths.values())
    assert all(r.startswith("/oil/") for r in server.requests)


def test_second_url_is_tried_when_first_fails(server, monkeypatch, tmp_path):
    _with_urls(monkeypatch, "oil", lambda f: (f"{server.url}/missing/{f.name}", f"{server.url}/three_phase_oil_flow/{f.name}"))
    paths = bd.fetch("oil", cache_dir=tmp_path / "cache", progress=False)
    assert len(paths) == 6
    assert sum(r.startswith("/missing/") for r in server.requests) == 6


def test_truncated_http_download_leaves_nothing(server, monkeypatch, tmp_path):
    _with_urls(monkeypatch, "oil", lambda f: (f"{server.url}/three_phase_oil_flow/{f.name}",))
    server.truncate.add("DataTrn.txt")
    cache = tmp_path / "cache"
    with pytest.raises((ChecksumError, DownloadError)) as e:
        bd.load("oil", cache_dir=cache)
    assert "DataTrn.txt" in str(e.value) and "oil" in str(e.value)
    assert _files_under(cache) == []


def test_offline_without_cache_explains_mirror(monkeypatch, tmp_path):
    port = _closed_port()
    spec = _with_urls(monkeypatch, "oil", lambda f: (f"http://127.0.0.1:{port}/oil/{f.name}",))
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError) as e:
        bd.load("oil", cache_dir=cache)
    msg = str(e.value)
    assert "'oil'" in msg
    assert spec.files[0].urls[0] in msg
    assert "BGPLVM_DATA_MIRROR" in msg and "--mirror" in msg
    assert str(cache / "oil" / "DataTrn.txt") in msg
    assert _files_under(cache) == []
    # the registry's real URLs are public https URLs
    for s in registry.REGISTRY.values():
        for f in s.files:
            assert s.embedded or (f.urls and all(u.startswith(("https://", "http://")) for u in f.urls))


def test_interrupted_download_leaves_no_partial_file(oil_mirror, monkeypatch, tmp_path):
    real_open = download._open_source

    class Interrupting(io.RawIOBase):
        def __init__(self, inner):
            self.inner, self.n = inner, 0

        def read(self, n=-1):
            self.n += 1
            if self.n > 1:
                raise KeyboardInterrupt
            return self.inner.read(100)

        def close(self):
            self.inner.close()

    def fake_open(src):
        stream, length = real_open(src)
        return Interrupting(stream), length

    monkeypatch.setattr(download, "_open_source", fake_open)
    cache = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):
        bd.fetch("oil", mirror=oil_mirror, cache_dir=cache, progress=False)
    assert _files_under(cache) == []
    # A temp file left by a killed process is cleaned up once it is old.
    monkeypatch.setattr(download, "_open_source", real_open)
    stale = cache / "oil" / ".DataTrn.txt.abc123.part"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(b"partial")
    os.utime(stale, (0, 0))
    bd.fetch("oil", mirror=oil_mirror, cache_dir=cache, progress=False)
    assert not stale.exists() and len(_files_under(cache)) == 6


# --------------------------------------------------------------------------- verification
def test_checksum_mismatch_removes_the_bad_file(oil_mirror, tmp_path):
    bad = oil_mirror / "oil" / "DataTrnLbls.txt"
    data = bytearray(bad.read_bytes())
    data[20] = ord("7") if data[20] != ord("7") else ord("8")  # same size, different content
    bad.write_bytes(bytes(data))
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError) as e:
        bd.load("oil", mirror=oil_mirror, cache_dir=cache)
    msg = str(e.value)
    assert "DataTrnLbls.txt" in msg and "sha256" in msg and "removed" in msg
    assert not (cache / "oil" / "DataTrnLbls.txt").exists()
    assert not [p for p in _files_under(cache) if p.name.endswith(".part")]


def test_truncated_mirror_file_is_rejected(oil_mirror, tmp_path):
    f = oil_mirror / "oil" / "DataTst.txt"
    f.write_bytes(f.read_bytes()[:1000])
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError, match=r"truncated.*removed|removed"):
        bd.load("oil", split="test", mirror=oil_mirror, cache_dir=cache)
    assert not (cache / "oil" / "DataTst.txt").exists()
    assert not [p for p in _files_under(cache) if p.name.endswith(".part")]


def test_oversized_source_is_cut_off_at_the_expected_size(oil_mirror, tmp_path, monkeypatch):
    """A source longer than the registry's size is rejected as soon as it passes that size
    (it used to be saved in full first, then called 'truncated')."""
    f = oil_mirror / "oil" / "DataTst.txt"
    f.write_bytes(f.read_bytes() * 3)
    monkeypatch.setattr(download, "_CHUNK", 4096)
    written = []
    real_fdopen = os.fdopen

    def spy(fd, *a, **k):  # bytes written per temp file
        fh = real_fdopen(fd, *a, **k)
        real_write = fh.write
        written.append(0)
        i = len(written) - 1

        def write(b):
            written[i] += len(b)
            return real_write(b)

        fh.write = write
        return fh

    monkeypatch.setattr(download.os, "fdopen", spy)
    with pytest.raises(ChecksumError, match="more than the expected"):
        bd.load("oil", split="test", mirror=oil_mirror, cache_dir=tmp_path / "cache")
    size = next(x.size for x in download.get_spec("oil").files if x.name == "DataTst.txt")
    assert size - 4096 < written[-1] <= size  # the oversized file stopped at the expected size
    assert not [p for p in _files_under(tmp_path / "cache") if p.name.endswith(".part")]


def test_corrupt_cached_file_is_removed_and_refetched(oil_mirror, tmp_path):
    cache = tmp_path / "cache"
    bd.fetch("oil", mirror=oil_mirror, cache_dir=cache, progress=False)
    cached = cache / "oil" / "DataTrn.txt"
    cached.write_bytes(cached.read_bytes()[:-10])
    with pytest.warns(UserWarning, match="corrupt"):
        ds = bd.load("oil", mirror=oil_mirror, cache_dir=cache)
    assert ds.Y.shape == (1000, 12)
    # Corrupt again, and now no source: the error says the bad copy was removed.
    cached.write_bytes(b"garbage")
    with pytest.warns(UserWarning), pytest.raises(DownloadError, match="was removed"):
        bd.load("oil", mirror=tmp_path / "empty_mirror_dir_missing", cache_dir=cache)
    assert not cached.exists()


def test_corrupt_copy_replaced_meanwhile_by_another_process_is_kept(oil_mirror, tmp_path, monkeypatch):
    """A process that found a corrupt cached copy and then fails to fetch removes that copy
    only if it is still the same file: a verified copy another process has put in its place
    meanwhile stays (it used to be deleted, failing the other process's load). A copy that
    cannot be removed is named in the error with what to do."""
    cache = tmp_path / "cache"
    good = bd.fetch("oil", mirror=oil_mirror, cache_dir=cache, progress=False)["DataTrn.txt"]
    f = next(x for x in download.get_spec("oil").files if x.name == "DataTrn.txt")
    good_bytes = good.read_bytes()
    good.write_bytes(b"x" * len(good_bytes))  # same size, wrong content
    bad = download._cached_state(good, f)
    assert bad is not None and bad is not True
    other = tmp_path / "other.part"  # the other process's verified copy, renamed into place
    other.write_bytes(good_bytes)
    os.replace(other, good)
    download._drop_corrupt(good, bad)
    assert good.read_bytes() == good_bytes and download._cached_state(good, f) is True
    good.write_bytes(b"garbage")
    bad = download._cached_state(good, f)

    def refuse(self, *a, **k):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "unlink", refuse)
    note = download._drop_corrupt(good, bad)
    assert "could not be removed" in note and "BGPLVM_CACHE_DIR" in note and good.exists()


def test_cache_problems_are_blamed_on_the_cache_and_files_are_readable(oil_mirror, tmp_path):
    """An unusable cache folder is reported as such (not as a bad mirror), and cached
    files get ordinary permissions (not mkstemp's 0o600)."""
    (tmp_path / "afile").write_text("x")
    with pytest.raises(DownloadError, match="cannot write to the data cache"):
        bd.fetch("oil", mirror=oil_mirror, cache_dir=tmp_path / "afile", progress=False)
    paths = bd.fetch("oil", mirror=oil_mirror, cache_dir=tmp_path / "cache", progress=False)
    umask = os.umask(0)
    os.umask(umask)
    assert all(p.stat().st_mode & 0o777 == 0o666 & ~umask for p in paths.values())


def test_parse_error_names_the_file(oil_mirror, monkeypatch, tmp_path):
    """A file that passes its checksum but cannot be parsed (here: the registry is told
    to expect a corrupt file) gives a ParseError naming that file."""
    target = oil_mirror / "oil" / "DataTrn.txt"
    target.write_bytes(b"0.1 0.2 not-a-number\n" * 10)
    raw = target.read_bytes()
    spec = registry.REGISTRY["oil"]
    files = tuple(
        dataclasses.replace(f, sha256=hashlib.sha256(raw).hexdigest(), size=len(raw)) if f.name == "DataTrn.txt" else f
        for f in spec.files
    )
    monkeypatch.setitem(registry.REGISTRY, "oil", dataclasses.replace(spec, files=files))
    with pytest.raises(ParseError) as e:
        bd.load("oil", mirror=oil_mirror, cache_dir=tmp_path / "cache")
    assert "DataTrn.txt" in str(e.value) and "'oil'" in str(e.value)
    # it passed its checksum: downloading it again would fetch the same bytes
    assert "passed its size and sha256 check" in str(e.value) and "download it again" not in str(e.value)


@needs_shared
@pytest.mark.parametrize("name,fname", [("frey_faces", "frey_rawface.mat"), ("usps", "usps.h5"),
                                        ("digits", "digits.npy"), ("cmu35", "cmu35WalkJog.mat"),
                                        ("osu_run1", "run1TXT.ZIP")])
def test_parse_error_for_binary_formats(name, fname, monkeypatch, tmp_path):
    """A truncated binary file that the registry accepted -> ParseError naming the file."""
    spec = registry.REGISTRY[name]
    mirror = tmp_path / "mirror"
    for f in spec.files:
        (mirror / f.folder).mkdir(parents=True, exist_ok=True)
        src = (SHARED / f.folder / f.name).read_bytes()
        (mirror / f.folder / f.name).write_bytes(src[: len(src) // 3] if f.name == fname else src)
    files = tuple(
        dataclasses.replace(f, size=(mirror / f.folder / f.name).stat().st_size,
                            sha256=hashlib.sha256((mirror / f.folder / f.name).read_bytes()).hexdigest())
        for f in spec.files
    )
    monkeypatch.setitem(registry.REGISTRY, name, dataclasses.replace(spec, files=files))
    with pytest.raises(ParseError) as e:
        bd.load(name, mirror=mirror, cache_dir=tmp_path / "cache")
    assert fname in str(e.value) and repr(name) in str(e.value)


# --------------------------------------------------------------------------- names
def test_unknown_name_lists_known_names():
    with pytest.raises(UnknownDatasetError) as e:
        bd.load("oill")
    for name in ("oil", "cmu35", "frey_faces", "usps", "synth_walk"):
        assert name in str(e.value)
    assert isinstance(e.value, ValueError) and isinstance(e.value, bd.DatasetError)


def test_unknown_split_lists_splits():
    with pytest.raises(bd.DatasetError, match="train, test, validation"):
        bd.load("oil", split="dev")


def test_progress_bar_draws_on_a_tty():
    class TTY(io.StringIO):
        def isatty(self):
            return True

    out = TTY()
    bar = download._Progress("oil: DataTrn.txt", 2000, True, stream=out)
    bar.update(1000)
    bar.update(1000)
    bar.close()
    assert "100.0%" in out.getvalue() and "oil: DataTrn.txt" in out.getvalue()
    quiet = TTY()
    bar = download._Progress("x", 10, False, stream=quiet)
    bar.update(10)
    bar.close()
    assert quiet.getvalue() == ""


def test_list_datasets_records(tmp_path):
    infos = {i.name: i for i in bd.list_datasets(cache_dir=tmp_path)}
    assert set(infos) == set(registry.REGISTRY)
    assert {"oil", "cmu35", "osu_run1", "frey_faces", "digits", "usps", "synth_walk", "synth_video"} <= set(infos)
    assert infos["synth_walk"].embedded and infos["synth_walk"].cached
    assert not infos["oil"].cached and not infos["oil"].embedded
    assert infos["usps"].kind == "image" and infos["cmu35"].kind == "pose" and infos["oil"].kind == "vector"
    assert infos["usps"].n_rows == 7291 and infos["usps"].size_bytes == 2913522
    assert 0 < infos["synth_video"].size_bytes < 300_000 and 0 < infos["synth_walk"].size_bytes < 300_000
    assert all(i.licence for i in infos.values())


@needs_shared
def test_registry_matches_the_mirror_files():
    """Sizes and checksums in the registry are those of the files in ../shared/datasets."""
    for spec in registry.REGISTRY.values():
        if spec.embedded:
            continue
        for f in spec.files:
            p = SHARED / f.folder / f.name
            assert p.stat().st_size == f.size, p
            assert hashlib.sha256(p.read_bytes()).hexdigest() == f.sha256, p
    assert np.all([len(f.sha256) == 64 for s in registry.REGISTRY.values() for f in s.files if not s.embedded])

"""Fetching files into the user cache: mirror or URL -> temp file -> verify -> rename.

Where a file comes from, in order:

1. the cache: ``<cache_dir>/<folder>/<file>`` if its size and sha256 are right (a cached
   copy that fails the check is deleted and fetched again);
2. the offline mirror, when one is given (``mirror=`` or ``$BGPLVM_DATA_MIRROR``): a
   directory, a ``file://`` URL or an ``http(s)://`` base URL with the same
   ``<folder>/<file>`` layout as ``../shared/datasets``. With a mirror the network URLs
   are NOT tried: a mirror means "use this, not the internet";
3. the file's public URLs, in registry order.

Every copy -- mirror or network -- is streamed into a temporary file next to its
destination while its sha256 is computed, checked against the registry, and only then
renamed into place (``os.replace`` is atomic on one file system). An interrupted or
corrupt download therefore never leaves a file under the final name; a bad temporary
file is removed before the error is raised.

Cache directory: ``cache_dir=`` or ``$BGPLVM_CACHE_DIR`` or
``$XDG_CACHE_HOME/bgplvm/datasets`` or ``~/.cache/bgplvm/datasets``.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from pathlib import Path

from .errors import ChecksumError, DownloadError, UnknownDatasetError
from .registry import REGISTRY, DatasetSpec, FileSpec

ENV_CACHE = "BGPLVM_CACHE_DIR"
ENV_MIRROR = "BGPLVM_DATA_MIRROR"
EMBEDDED_DIR = Path(__file__).resolve().parent / "embedded"

_CHUNK = 1 << 16
_TIMEOUT_S = 30.0  # per network read; GitHub raw files answer well within this
_USER_AGENT = "bgplvm-datasets/0.1 (+https://github.com/; urllib)"


# --------------------------------------------------------------------------- lookup
def get_spec(name: str) -> DatasetSpec:
    """The registry entry for ``name``; an unknown name lists the known ones."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(REGISTRY))
        raise UnknownDatasetError(
            f"unknown data set {name!r}. Known data sets: {known}. "
            f"(`bgplvm datasets list` shows them with sizes and licences; for your own "
            f"data use load_array(path) with a .npy, .npz or .csv file.)"
        ) from None


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache directory (not created here)."""
    if cache_dir is not None and str(cache_dir) != "":
        return Path(cache_dir).expanduser()
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "bgplvm" / "datasets"


def resolve_mirror(mirror: str | os.PathLike | bool | None = None) -> str | None:
    """The mirror to use: the ``mirror`` argument, else ``$BGPLVM_DATA_MIRROR``.

    ``mirror=False`` or ``""`` means "no mirror, even if the variable is set".
    Returns a directory path or an http(s) base URL (``file://`` URLs become paths),
    or None.
    """
    if mirror is False or (isinstance(mirror, str) and mirror == ""):
        return None
    m = os.fspath(mirror) if mirror is not None else os.environ.get(ENV_MIRROR) or None
    if m is None:
        return None
    if m.startswith("file:"):
        return urllib.request.url2pathname(urllib.parse.urlparse(m).path)
    return m


def _is_url(s: str) -> bool:
    return s.startswith(("http://", "https://"))


def file_path(spec: DatasetSpec, f: FileSpec, cache_dir=None) -> Path:
    """Where file ``f`` of ``spec`` lives locally (the package for embedded data)."""
    if spec.embedded:
        return EMBEDDED_DIR / f.name
    return cache_root(cache_dir) / f.folder / f.name


def is_cached(name: str, cache_dir=None) -> bool:
    """True when every file of the data set is present locally with the right size
    (embedded data sets always are). Cheap: no hashing; ``fetch`` hashes."""
    spec = get_spec(name)
    return all(
        (p := file_path(spec, f, cache_dir)).is_file() and (spec.embedded or p.stat().st_size == f.size)
        for f in spec.files
    )


def is_available(name: str, mirror=None, cache_dir=None) -> bool:
    """True when ``load(name)`` needs no network: the data set is cached (or embedded), or
    every file of it is in the offline mirror folder (``mirror`` / ``$BGPLVM_DATA_MIRROR``;
    a URL mirror is not checked here: False). Cheap: sizes, no hashing."""
    if is_cached(name, cache_dir):
        return True
    m = resolve_mirror(mirror)
    if m is None or _is_url(m):
        return False
    spec = get_spec(name)
    return all((Path(m).expanduser() / f.folder / f.name).is_file() for f in spec.files)


# --------------------------------------------------------------------------- progress
class _Progress:
    """A small console progress bar on stderr; silent unless enabled and a TTY."""

    def __init__(self, label: str, total: int | None, enabled: bool, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = bool(enabled) and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.label, self.total, self.done, self._last = label, total, 0, 0.0

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and now - self._last > 0.1:
            self._last = now
            self._draw()

    def _draw(self, end: str = "") -> None:
        mb = self.done / 1e6
        if self.total:
            frac = min(self.done / self.total, 1.0)
            bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
            text = f"\r{self.label} [{bar}] {100 * frac:5.1f}% {mb:6.2f}/{self.total / 1e6:.2f} MB"
        else:
            text = f"\r{self.label} {mb:6.2f} MB"
        self.stream.write(text + end)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(end="\n")


# --------------------------------------------------------------------------- copying
def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def _open_source(src: str):
    """(binary stream, length or None) for a local path or an http(s)/file URL."""
    if _is_url(src) or src.startswith("file:"):
        req = urllib.request.Request(src, headers={"User-Agent": _USER_AGENT})
        resp = urllib.request.urlopen(req, timeout=_TIMEOUT_S)  # noqa: S310 (fixed schemes)
        length = resp.headers.get("Content-Length")
        return resp, (int(length) if length and length.isdigit() else None)
    fh = open(src, "rb")
    return fh, os.fstat(fh.fileno()).st_size


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


#: what ``open`` gives a new file (0o666 less the umask)
_NEW_FILE_MODE = _new_file_mode()


def _copy_verified(src: str, dest: Path, f: FileSpec, label: str, progress: bool) -> None:
    """Stream ``src`` into a temp file beside ``dest``, verify size and sha256, rename.

    Raises ChecksumError (temp file removed) on a mismatch; any other exception
    (network error, interruption) also removes the temp file and propagates.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), _NEW_FILE_MODE)  # mkstemp's 0o600 would stay after the rename
            stream, length = _open_source(src)
            bar = _Progress(label, length or f.size, progress)
            got = 0
            with stream:
                while block := stream.read(_CHUNK):
                    got += len(block)
                    if got > f.size:  # not the registry's file: stop instead of saving it all
                        bar.close()
                        raise ChecksumError(
                            f"checksum mismatch for {f.relpath} from {src}: more than the "
                            f"expected {f.size} bytes (a different or changed file). Nothing "
                            f"was written to {dest}.")
                    out.write(block)
                    h.update(block)
                    bar.update(len(block))
            bar.close()
        got_size, got_sha = tmp.stat().st_size, h.hexdigest()
        if got_size != f.size or got_sha != f.sha256:
            why = (
                f"got {got_size} bytes, expected {f.size} (truncated or incomplete download?)"
                if got_size != f.size
                else f"sha256 {got_sha} != expected {f.sha256} (same size: the content differs)"
            )
            raise ChecksumError(
                f"checksum mismatch for {f.relpath} from {src}: {why}. The bad copy was "
                f"removed; nothing was written to {dest}."
            )
        os.replace(tmp, dest)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise


def _remove_stale_parts(dest: Path, max_age_s: float = 3600.0) -> None:
    """Delete temp files of ``dest`` left by a killed process (a download in progress
    in another process keeps touching its file, so only old ones go)."""
    if not dest.parent.is_dir():
        return
    now = time.time()
    for p in dest.parent.glob(f".{dest.name}.*.part"):
        try:
            if now - p.stat().st_mtime > max_age_s:
                p.unlink()
        except OSError:
            pass


def _check_cache_folder(folder: Path) -> None:
    """The cache folder exists and takes files, else a DownloadError about the cache (not
    about the data's source, which is fine)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise DownloadError(f"cannot write to the data cache {folder}: {type(e).__name__}: {e}. "
                            f"Choose a writable folder with cache_dir=/--cache-dir or "
                            f"{ENV_CACHE}.") from None


def _sources(f: FileSpec, mirror: str | None) -> list[str]:
    if mirror is None:
        return list(f.urls)
    if _is_url(mirror):
        return [mirror.rstrip("/") + "/" + urllib.parse.quote(f.relpath)]
    return [str(Path(mirror).expanduser() / f.folder / f.name)]


def _fetch_file(spec: DatasetSpec, f: FileSpec, mirror: str | None, cache_dir, progress: bool) -> Path:
    dest = file_path(spec, f, cache_dir)
    bad = _cached_state(dest, f)
    if bad is True:
        return dest
    if bad is not None:
        # a corrupt copy is not removed now: another process may be replacing it with a
        # good one this very moment (the verified copy below replaces it atomically too)
        warnings.warn(f"cached file {dest} is corrupt; fetching it again", stacklevel=3)

    if mirror is not None and not _is_url(mirror) and not Path(mirror).expanduser().is_dir():
        raise DownloadError(
            f"data set {spec.name!r}: the mirror {mirror!r} is not a directory. Set "
            f"{ENV_MIRROR} (or mirror=/--mirror) to a folder laid out like "
            f"../shared/datasets (e.g. it must contain {f.relpath}), or unset it to download "
            f"from {f.urls[0]}.{_drop_corrupt(dest, bad)}"
        )

    _check_cache_folder(dest.parent)
    _remove_stale_parts(dest)
    attempts: list[str] = []
    mismatch = False
    for src in _sources(f, mirror):
        try:
            _copy_verified(src, dest, f, label=f"{spec.name}: {f.name}", progress=progress)
            return dest
        except ChecksumError as e:
            mismatch = True
            attempts.append(str(e))
        except FileNotFoundError:
            attempts.append(f"{src}: no such file in the mirror")
        except urllib.error.HTTPError as e:
            attempts.append(f"{src}: HTTP {e.code} {e.reason}")
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            attempts.append(f"{src}: {type(e).__name__}: {reason}")

    tried = "\n  ".join(attempts)
    if mirror is not None:
        hint = (
            f"The mirror {mirror!r} ({ENV_MIRROR} or mirror=/--mirror) was used instead of "
            f"the network. Make sure it holds a good copy of {f.relpath}, or unset it to "
            f"download from {f.urls[0]}."
        )
    else:
        hint = (
            f"If you are offline, use a local copy of the data: set {ENV_MIRROR}=/path/to/datasets "
            f"(a folder containing {f.relpath}) or pass mirror=... (CLI: "
            f"`bgplvm datasets fetch {spec.name} --mirror DIR`), or download {f.urls[0]} "
            f"yourself to {dest}."
        )
    if mismatch:
        hint = (
            "A short file usually means the connection was interrupted: run the command "
            "again. If the content differs at the same size, the source has changed and no "
            "longer matches the registry's sha256. " + hint
        )
    cls = ChecksumError if mismatch else DownloadError
    raise cls(
        f"could not fetch file {f.name} of data set {spec.name!r}; tried:\n  {tried}\n"
        f"Nothing is cached at {dest}.{_drop_corrupt(dest, bad)} {hint}"
    )


def _cached_state(dest: Path, f: FileSpec):
    """True: ``dest`` holds a verified copy; None: nothing there; else the ``os.stat`` of a
    copy that failed its size / sha256 check (``_drop_corrupt`` removes that file only)."""
    try:
        st = dest.stat()
        if st.st_size == f.size and sha256_of(dest) == f.sha256:
            return True
        return st
    except OSError:  # not cached, removed while we looked, or an unusable cache folder
        return None  # (which _check_cache_folder then reports)


def _drop_corrupt(dest: Path, bad) -> str:
    """After a failed fetch: remove the corrupt copy seen by ``_cached_state`` if it is still
    the same file (not a good copy another process has put there since). A sentence for the
    error message."""
    if bad is None or bad is True:
        return ""
    try:
        st = dest.stat()
        if (st.st_ino, st.st_size, st.st_mtime_ns) == (bad.st_ino, bad.st_size, bad.st_mtime_ns):
            dest.unlink()
        return f" (A cached copy at {dest} failed its size/sha256 check and was removed.)"
    except FileNotFoundError:
        return f" (A cached copy at {dest} failed its size/sha256 check and was removed.)"
    except OSError as e:
        return (f" (A cached copy at {dest} failed its size/sha256 check and could not be "
                f"removed: {type(e).__name__}: {e}. Delete it, or choose a writable cache "
                f"folder with cache_dir=/--cache-dir or {ENV_CACHE}.)")


def fetch(name: str, mirror=None, cache_dir=None, progress: bool = True) -> dict[str, Path]:
    """Make every file of data set ``name`` available locally; return {file name: Path}.

    Files already in the cache are verified (size + sha256) and reused; missing ones
    come from the mirror (``mirror=`` or ``$BGPLVM_DATA_MIRROR``) if one is set, else
    from their public URLs. Embedded data sets return their paths inside the package.
    ``progress`` shows a bar on stderr when stderr is a terminal.
    """
    spec = get_spec(name)
    if spec.embedded:
        return {f.name: EMBEDDED_DIR / f.name for f in spec.files}
    m = resolve_mirror(mirror)
    return {f.name: _fetch_file(spec, f, m, cache_dir, progress) for f in spec.files}

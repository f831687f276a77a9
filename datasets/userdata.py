"""User data: ``load_array(path)`` reads a numeric (N, D) matrix from .npy, .npz,
.csv (or whitespace/tab separated .txt/.tsv) and validates it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .errors import DatasetError

SUPPORTED = (".npy", ".npz", ".csv", ".txt", ".tsv", ".dat")


def _read_text(path: Path, delimiter: str | None) -> np.ndarray:
    with open(path, encoding="utf-8-sig") as fh:
        kept = [(k + 1, ln) for k, ln in enumerate(fh.read().splitlines())
                if ln.strip() and not ln.lstrip().startswith("#")]
    lineno = [k for k, _ in kept]  # the file's line numbers, for messages
    lines = [ln for _, ln in kept]
    if not lines:
        raise DatasetError(f"{path} is empty: expected one row of numbers per line.")
    if delimiter is None and any("\t" in ln for ln in lines):
        # tab separated: split on each tab, so that an empty cell is a cell (NaN, an error
        # below), not a gap that shifts the row's later values one column to the left
        delimiter = "\t"

    def trim(ln: str) -> str:
        return ln.rstrip(" \r") if delimiter == "\t" else ln.rstrip()

    if delimiter is not None and all(trim(ln).endswith(delimiter) for ln in lines):
        lines = [trim(ln)[:-1] for ln in lines]  # every line ends with the delimiter: no last column
    # a header row of column names: every cell a non-empty non-number (a data row with one
    # bad or empty cell is an error below, not a header to skip)
    header = lines[0].split(delimiter)
    skip = int(all(c.strip() and _not_float(c) for c in header))
    rows = []
    for i, ln in enumerate(lines[skip:], start=skip):
        cells = ln.split(delimiter)
        try:
            rows.append([float(c) if c.strip() else np.nan for c in cells])
        except ValueError:
            bad = next(c for c in cells if _not_float(c))
            raise DatasetError(
                f"{path}: non-numeric value {bad.strip()!r} in data row {i + 1 - skip} (line {lineno[i]} of "
                f"the file). Only numbers can be read (an optional first line of column names is skipped)."
            ) from None
    widths = {len(r) for r in rows}
    if len(widths) > 1:
        counts = [len(r) for r in rows]
        j = next(k for k, c in enumerate(counts) if c != counts[0])
        raise DatasetError(
            f"{path}: rows have different numbers of columns ({counts[0]} in the first data "
            f"row, {counts[j]} in data row {j + 1}); every row must have the same length."
        )
    if not rows:
        raise DatasetError(f"{path} holds a header but no data rows.")
    if skip and len(header) != len(rows[0]):
        raise DatasetError(
            f"{path}: the first line names {len(header)} columns but the data rows have "
            f"{len(rows[0])}; every row, the header included, must have the same number of columns."
        )
    return np.array(rows, dtype=np.float64)


def _not_float(c: str) -> bool:
    try:
        float(c)
        return False
    except ValueError:
        return bool(c.strip())


#: how NumPy's binary files begin: np.load reads anything else as a pickle, and its
#: refusal ("allow_pickle") then said a text file renamed .npy "holds Python objects"
_MAGIC = {".npy": (b"\x93NUMPY", "NumPy .npy (numpy.save)"), ".npz": (b"PK", "NumPy .npz (numpy.savez)")}


def numpy_header_problem(head: bytes, ext: str, name: str) -> str | None:
    """Why a file named ``name`` with extension ``ext`` (".npy" / ".npz") whose first bytes
    are ``head`` is not what its name says, or None (other extensions: None)."""
    if ext not in _MAGIC:
        return None
    magic, kind = _MAGIC[ext]
    if head[:len(magic)] == magic:
        return None
    return (f"{name} is not a {kind} file (its first bytes are not NumPy's header); "
            "save the array with numpy, or give a text table the extension .csv or .txt.")


def _check_magic(path: Path, ext: str) -> None:
    with open(path, "rb") as f:
        why = numpy_header_problem(f.read(8), ext, str(path))
    if why:
        raise DatasetError(why)


def load_array(path: str | os.PathLike, key: str | None = None, allow_missing: bool = False) -> np.ndarray:
    """Read a user data matrix Y (N, D) as float64 and validate it.

    .npy: one array. .npz: the array ``key``, else the one named ``Y``, else the only
    array in the file. .csv: comma separated; .txt/.tsv/.dat: whitespace/tab separated;
    an optional header line of column names and ``#`` comment lines are skipped; an empty
    cell or ``nan`` is a missing value (NaN).
    Raises DatasetError unless the result is a 2-D, non-empty, finite, real matrix (with
    ``allow_missing``: finite or NaN, for models that fit with missing values).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DatasetError(f"no such file: {path}")
    ext = path.suffix.lower()
    if ext not in SUPPORTED:
        raise DatasetError(f"{path}: unsupported file type {ext!r}; use one of {', '.join(SUPPORTED)}.")
    _check_magic(path, ext)
    try:
        if ext == ".npy":
            A = np.load(path, allow_pickle=False)
        elif ext == ".npz":
            with np.load(path, allow_pickle=False) as z:
                names = list(z.files)
                if key is not None:
                    if key not in names:
                        raise DatasetError(f"{path}: no array {key!r}; the file holds {names}.")
                    A = z[key]
                elif "Y" in names:
                    A = z["Y"]
                elif len(names) == 1:
                    A = z[names[0]]
                else:
                    raise DatasetError(
                        f"{path} holds several arrays {names} and none is named 'Y': "
                        f"choose one with key=... (bgplvm fit: --key NAME)."
                    )
        else:
            A = _read_text(path, "," if ext == ".csv" else None)
    except DatasetError:
        raise
    except Exception as e:  # noqa: BLE001 -- np.load's errors, re-raised with the path
        msg = str(e)
        if "allow_pickle" in msg:
            msg = "it holds Python objects, not a numeric array"
        raise DatasetError(f"could not read {path}: {msg}.") from e
    return validate_array(A, str(path), allow_missing=allow_missing)


def validate_array(A, what: str = "array", allow_missing: bool = False) -> np.ndarray:
    """Check that ``A`` is a 2-D, non-empty, finite, real numeric matrix (``allow_missing``:
    NaN allowed, as missing values); return it as a C-contiguous float64 array."""
    A = np.asarray(A)
    if not (np.issubdtype(A.dtype, np.number) or A.dtype == bool) or np.iscomplexobj(A):
        raise DatasetError(f"{what}: expected real numbers, got dtype {A.dtype}.")
    if A.ndim != 2:
        hint = (
            "a 1-D vector: reshape it to (N, 1) for N points of one dimension"
            if A.ndim == 1
            else "flatten each point to one row, e.g. A.reshape(len(A), -1)"
            if A.ndim > 2
            else "a single number"
        )
        raise DatasetError(f"{what}: expected a 2-D array (N points x D dimensions), got shape {A.shape} ({hint}).")
    if A.shape[0] < 1 or A.shape[1] < 1:
        raise DatasetError(f"{what}: the array is empty (shape {A.shape}).")
    A = np.ascontiguousarray(A, dtype=np.float64)
    bad = np.isinf(A) if allow_missing else ~np.isfinite(A)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        if allow_missing:
            raise DatasetError(f"{what}: {int(bad.sum())} value(s) are infinite (first at row {r}, "
                               f"column {c}); mark missing values with NaN or an empty cell.")
        raise DatasetError(
            f"{what}: {int(bad.sum())} value(s) are NaN or infinite (first at row {r}, column {c}); "
            f"remove or impute them first."
        )
    return A

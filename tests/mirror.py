"""Where the tests find the real data sets: the offline mirror (``$BGPLVM_DATA_MIRROR``,
else ``../shared/datasets`` beside the repository), or the cache.

A clone without ``../shared`` (a user's) has neither: tests of real data skip there and
say which data set they need (``needs_data``); CI has the mirror and runs them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: the mirror beside the repository (CI's layout: ``../shared/datasets``)
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def find_mirror(required: str) -> Path | None:
    """The mirror directory if it holds the file ``required`` (e.g. "oil/DataTrn.txt")."""
    env = os.environ.get("BGPLVM_DATA_MIRROR")
    for p in ([Path(env)] if env else []) + [SHARED]:
        if (p / required).is_file():
            return p
    return None


def data_available(*names: str) -> bool:
    """True when every data set in ``names`` loads without the network (cached, embedded,
    or every file in the mirror)."""
    from bgplvm.datasets import is_available

    return all(is_available(n) for n in names)


def skip_reason(*names: str) -> str:
    missing = [n for n in names if not data_available(n)]
    return (f"needs the data set(s) {', '.join(missing)}, neither cached nor in an offline mirror "
            f"(set BGPLVM_DATA_MIRROR, or run `bgplvm datasets fetch {' '.join(missing)}` online)")


def needs_data(*names: str):
    """A skip marker for a test (or module: ``pytestmark``) of real data sets ``names``."""
    missing = not data_available(*names)
    return pytest.mark.skipif(missing, reason=skip_reason(*names) if missing else "")


def require_data(*names: str) -> None:
    """Inside a test or fixture: skip, saying why, unless the data sets ``names`` load offline."""
    if not data_available(*names):
        pytest.skip(skip_reason(*names))

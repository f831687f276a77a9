"""Where the tests find the real data sets: the offline mirror (``$BGPLVM_DATA_MIRROR``,
else ``../shared/datasets`` beside the repository)."""

from __future__ import annotations

import os
from pathlib import Path


def find_mirror(required: str) -> Path | None:
    """The mirror directory if it holds the file ``required`` (e.g. "oil/DataTrn.txt")."""
    env = os.environ.get("BGPLVM_DATA_MIRROR")
    for p in ([Path(env)] if env else []) + [Path(__file__).resolve().parents[2] / "shared" / "datasets"]:
        if (p / required).is_file():
            return p
    return None

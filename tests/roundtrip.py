"""A model through its file format in memory: the copy a test may change freely."""

from __future__ import annotations

import io


def roundtrip(m):
    """``m`` saved to a buffer and loaded again (``BayesianGPLVM.save`` / ``load``)."""
    from bgplvm import BayesianGPLVM

    buf = io.BytesIO()
    m.save(buf)
    buf.seek(0)
    return BayesianGPLVM.load(buf)

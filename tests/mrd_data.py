"""Multi-view test data with a known shared / private structure (``bgplvm.MRD`` tests)."""

from __future__ import annotations


def three_views(N=80, seed=0, noise=0.05) -> dict:
    """``bgplvm.datasets.synthetic.mrd_views`` with views of 8, 5 and 12 columns: x0 shared
    by all, x1 shared by views a and b, x2 private to a, x3 private to c."""
    from bgplvm.datasets.synthetic import mrd_views

    return mrd_views(N, dims=(8, 5, 12), noise_sd=noise, seed=seed)[0]

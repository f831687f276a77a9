"""Multi-view test data with a known shared / private structure (``bgplvm.MRD`` tests)."""

from __future__ import annotations


def three_views(N=80, seed=0, noise=0.05) -> dict:
    """``bgplvm.datasets.synthetic.mrd_views`` with views of 8, 5 and 12 columns: x0 shared
    by all, x1 shared by views a and b, x2 private to a, x3 private to c."""
    from bgplvm.datasets.synthetic import mrd_views

    return mrd_views(N, dims=(8, 5, 12), noise_sd=noise, seed=seed)[0]


def rows_in_order(m, order):
    """In-process MRD ``m`` rebuilt with its rows (every view's outputs and q(X)'s rows) in
    ``order``, at ``m``'s parameters: the same bound up to the rounding of sums over rows."""
    from bgplvm import MRD

    m2 = MRD({n: m.views[n].Y[order] for n in m.view_names}, m.latent_dim, m.num_inducing,
             [m.kernels[n] for n in m.view_names], inducing=m.inducing)
    v = dict(m._values())
    v.update({n: v[n][order] for n in m.prior.row_blocks})
    m2._set_x(m2._layout.pack(v))
    return m2

"""A small two-view model of data every clone has (the embedded synthetic walk): its joint
angles ("pose", drawn as the walk is) and their 2-D camera image ("image", vectors), for
the explorer's multi-view tests (``tests/test_explorer_views.py``, the browser test)."""

from __future__ import annotations

import numpy as np


def walk_views(step: int = 4) -> dict:
    """{"pose": (N, D), "image": (N, 2 J)} of every ``step``-th frame of the synthetic walk."""
    from bgplvm.datasets import load
    from bgplvm.datasets.views import camera_view

    ds = load("synth_walk")
    cam = camera_view(ds)
    sel = np.arange(0, ds.N, step)
    return {"pose": cam.views["angles"][sel], "image": cam.views["image"][sel]}


def walk_mrd(iters: int = 150, step: int = 1, seed: int = 0):
    """``MRD`` of ``walk_views`` (Q = 4, M = 12), fitted for ``iters`` iterations; its
    metadata names the walk (the page draws the pose view as a stick figure)."""
    from bgplvm import MRD

    m = MRD(walk_views(step), latent_dim=4, num_inducing=12, seed=seed)
    if iters:
        m.fit(max_iters=iters)
    m.metadata = {"dataset": "synth_walk"}
    return m


def walk_dynamical_mrd(iters: int = 60, step: int = 2, time_prior: str = "state_space"):
    """``DynamicalMRD`` of ``walk_views`` with the walk's time stamps and sequences (Q = 3,
    M = 12): its views' models are dynamical (the page plays and forecasts them)."""
    from bgplvm import DynamicalMRD
    from bgplvm.datasets import load

    ds = load("synth_walk")
    sel = np.arange(0, ds.N, step)
    m = DynamicalMRD(walk_views(step), ds.times[sel], sequences=ds.sequence[sel], latent_dim=3, num_inducing=12,
                     seed=0, time_prior=time_prior)
    if iters:
        m.fit(max_iters=iters, progress=False)
    m.metadata = {"dataset": "synth_walk"}
    return m

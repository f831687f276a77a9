"""Fixtures shared by the explorer's unit tests."""

import numpy as np
import pytest


@pytest.fixture(scope="session")
def walk():
    """The embedded synthetic walk, every 4th frame: 80 rows, 4 sequences, in time order
    within each (small enough for fits of a few seconds)."""
    from bgplvm.datasets import Dataset, load

    ds = load("synth_walk")
    sel = np.arange(0, ds.N, 4)
    return Dataset(name="synth_walk", Y=ds.Y[sel], renderer=ds.renderer, labels=ds.labels[sel],
                   label_names=ds.label_names, sequence=ds.sequence[sel], times=ds.times[sel], meta=ds.meta)

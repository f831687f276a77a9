"""Fixtures shared by the tests, and the data mirror they and the loaders use."""

import os
import signal

import numpy as np
import pytest

from clusters import close_cluster
from mirror import SHARED

# The loaders and the tests look in the same place, however pytest was started: the mirror
# beside the repository (CI's layout) when $BGPLVM_DATA_MIRROR is not set (scripts/test.sh
# sets it the same way). A user's clone has no ../shared: real-data tests skip there.
if not os.environ.get("BGPLVM_DATA_MIRROR") and SHARED.is_dir():
    os.environ["BGPLVM_DATA_MIRROR"] = str(SHARED)


def pytest_collection_finish(session):
    """With ``test_wheel.py`` among the tests: build and install the wheel and start its
    server now, so that the server's compile runs beside the suite's (``wheel_install``)."""
    if any(item.path.name == "test_wheel.py" for item in session.items):
        import importlib.util

        if importlib.util.find_spec("build") is not None:  # else test_wheel skips, saying so
            import wheel_install

            session.config.bgplvm_wheel = wheel_install.start()


def pytest_sessionfinish(session):
    inst = getattr(session.config, "bgplvm_wheel", None)
    if inst is not None:
        inst.stop()


@pytest.fixture
def sigint_raises():
    """Python's own SIGINT handler (KeyboardInterrupt) for the test, restored after: a
    process started with SIGINT ignored (a background job of a non-interactive shell, as
    some CI runners start the suite) never installs it, and a test's SIGINT then does
    nothing."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.fixture(scope="session")
def walk():
    """The embedded synthetic walk, every 4th frame: 80 rows, 4 sequences, in time order
    within each (small enough for fits of a few seconds)."""
    from bgplvm.datasets import Dataset, load

    ds = load("synth_walk")
    sel = np.arange(0, ds.N, 4)
    return Dataset(name="synth_walk", Y=ds.Y[sel], renderer=ds.renderer, labels=ds.labels[sel],
                   label_names=ds.label_names, sequence=ds.sequence[sel], times=ds.times[sel], meta=ds.meta)


@pytest.fixture(scope="session")
def client():
    """A Dask client of a LocalCluster of 2 single-threaded worker processes, shared by the
    distributed tests (tests/test_distributed*.py); they skip without dask[distributed]."""
    pytest.importorskip("distributed", reason="needs dask[distributed] (the test extra installs it)")
    from bgplvm.distributed import local_cluster

    c = local_cluster(2)
    yield c
    close_cluster(c)

"""Dask clusters the tests start: closing one whatever state its client's loop is in."""

from __future__ import annotations

import contextlib


def close_cluster(c) -> None:
    """Close the client ``c`` of a LocalCluster, then the cluster. The client's event loop is
    a thread of this process: once (CI, at the end of a 27-minute session, every distributed
    test passed) it was found closed here; the cluster's own close then still stops the
    worker processes."""
    cluster = c.cluster
    with contextlib.suppress(RuntimeError):
        c.close()
    cluster.close()

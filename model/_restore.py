"""Models built only to receive saved parameters skip their data-dependent initialisation.

``load_model`` constructs a model of the saved class and sizes, then overwrites every
parameter; searches and calibrations of the starting point (the dynamical prior's time
lengthscale and lambda) would be wasted work there, and on a busy machine they took most
of the time to open a model.
"""

from __future__ import annotations

import contextlib
import threading

_state = threading.local()


@contextlib.contextmanager
def restoring():
    """Inside: constructors may skip initialisation (their parameters are about to be set)."""
    previous = getattr(_state, "on", False)
    _state.on = True
    try:
        yield
    finally:
        _state.on = previous


def is_restoring() -> bool:
    return getattr(_state, "on", False)

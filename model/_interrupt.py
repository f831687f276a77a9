"""Ctrl-C during a fit: stop after the current iteration, keeping the best point.

Python delivers SIGINT as a KeyboardInterrupt raised wherever the main thread is; inside a
Numba kernel it surfaces as ``SystemError: ... returned a result with an exception set``
and the fit is lost. ``deferred_interrupt`` replaces the handler for the length of a fit:
the first Ctrl-C only sets a flag, which the optimiser polls after every iteration
(``optimize.Optimisation``); a second Ctrl-C raises KeyboardInterrupt as usual, so a long
single evaluation can still be broken off. Fits nested in fits share one flag.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


class InterruptRequest:
    """Set by the first Ctrl-C inside ``deferred_interrupt``."""

    def __init__(self) -> None:
        self.requested = False


_active: InterruptRequest | None = None
#: set by ``interrupt_aborts``: a fit stopped by Ctrl-C raises KeyboardInterrupt after
#: keeping its best point
_aborts = False


@contextmanager
def deferred_interrupt():
    """Within the block, Ctrl-C sets the yielded request's ``requested`` instead of raising
    (second Ctrl-C: KeyboardInterrupt). Only where Python's own SIGINT handler is in place
    and in the main thread; elsewhere (another thread, a program with its own handler) the
    request is never set and nothing changes."""
    global _active
    if _active is not None:  # a fit inside a fit: the outer handler serves both
        yield _active
        return
    req = InterruptRequest()
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield req
        return

    def handler(signum, frame):
        if req.requested:
            raise KeyboardInterrupt
        req.requested = True

    signal.signal(signal.SIGINT, handler)
    _active = req
    try:
        yield req
    finally:
        _active = None
        signal.signal(signal.SIGINT, signal.default_int_handler)


def caused_by_interrupt(e: BaseException) -> bool:
    """Whether ``e`` is, or was raised while handling, a KeyboardInterrupt (Numba wraps one
    raised inside a compiled function in a SystemError)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


@contextmanager
def interrupt_aborts():
    """Within the block a fit stopped by Ctrl-C raises KeyboardInterrupt once the model has
    kept its best point: for commands made of many fits (``bgplvm reproduce``), which must
    not go on and report a result built on an interrupted fit."""
    global _aborts
    old, _aborts = _aborts, True
    try:
        yield
    finally:
        _aborts = old


def aborts() -> bool:
    return _aborts

"""Results shared by the sessions of one server process.

Every session that opens the default page looks at the same pre-trained model object (the
asset is read once per process), so what a page computes from it -- the played
sequence's frames, the predictive-variance background -- is the same for all of them.
``shared(model, key, make)`` computes it once. Entries hold their model, so a model's id
is never reused for another while its entries live; the cache is small and
least-recently-used, so models of finished sessions are let go.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

_MAX = 24
_lock = threading.Lock()
_entries: OrderedDict = OrderedDict()


def shared(model, key, make):
    """``make()`` once per (model, key) in this process."""
    k = (id(model), key)
    with _lock:
        hit = _entries.get(k)
        if hit is not None and hit[0] is model:
            _entries.move_to_end(k)
            return hit[1]
    value = make()
    with _lock:
        _entries[k] = (model, value)
        _entries.move_to_end(k)
        while len(_entries) > _MAX:
            _entries.popitem(last=False)
    return value


def clear() -> None:
    with _lock:
        _entries.clear()

"""The one error the mocap parsers raise.

``MocapParseError`` is a ``ValueError`` whose message names the file that could not be
parsed (and, where known, the line).  The registry/fetching layer may catch it and re-raise
its own dataset error; it stays a ``ValueError`` so plain callers can catch that.
"""

from __future__ import annotations


class MocapParseError(ValueError):
    """A motion-capture file (ASF, AMC, OSU text zip, connections, .mat) is corrupt,
    truncated or not what it claims to be.  ``source`` is the file name."""

    def __init__(self, source: str, message: str):
        self.source = str(source)
        super().__init__(f"{self.source}: {message}")

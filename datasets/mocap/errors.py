"""The one error the mocap parsers raise.

``MocapParseError`` names the file that could not be parsed (and, where known, the
line).  It subclasses the data layer's ``bgplvm.datasets.errors.ParseError`` (so a
``DatasetError``) and thereby ``ValueError``, so plain callers can catch that.
"""

from __future__ import annotations

try:  # the data layer's error for "a file passed its checksum but could not be read"
    from ..errors import ParseError as _Base
except ImportError:  # pragma: no cover - only if the data layer is reorganised
    _Base = ValueError


class MocapParseError(_Base):
    """A motion-capture file (ASF, AMC, OSU text zip, connections, .mat) is corrupt,
    truncated or not what it claims to be.  ``source`` is the file name."""

    def __init__(self, source: str, message: str):
        self.source = str(source)
        super().__init__(f"{self.source}: {message}")

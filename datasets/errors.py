"""User-facing errors of the data layer. Every message says what went wrong, which
data set / file / URL it concerns, and what the user can do about it."""

from __future__ import annotations


class DatasetError(ValueError, RuntimeError):
    """Any user-facing failure to find, fetch, verify or parse data.

    A subclass of both ValueError (bad names, bad user files) and RuntimeError
    (network, corrupt downloads), so callers can catch whichever reads naturally.
    """


class UnknownDatasetError(DatasetError):
    """The name is not in the registry (the message lists the known names)."""


class DownloadError(DatasetError):
    """No source (cache, mirror, URL) could provide the file."""


class ChecksumError(DatasetError):
    """A file's size or sha256 differs from the registry; the bad copy was removed."""


class ParseError(DatasetError):
    """A file passed its checksum (or is user data) but could not be read."""

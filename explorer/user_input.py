"""What the explorer accepts from the person using it: ``UserError`` (a problem with their
input, shown in the page) and the size limits of uploads (``check_upload``)."""

from __future__ import annotations

import io
import zipfile

#: Uploads (arrays and model files) larger than this are refused with a message.
MAX_UPLOAD_MB = 50
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 1024 * 1024

#: An uploaded .npz (a zip archive) may unpack to at most this many MB: a small compressed
#: upload must not make the server allocate gigabytes.
MAX_UNPACKED_MB = 200


class UserError(ValueError):
    """A problem caused by user input; its message is shown in the page."""



def check_upload(data: bytes, name: str = "file") -> None:
    """Size limits of an upload: the file, and what a zip archive (.npz) unpacks to."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise UserError(f"{name} is {len(data) / 2**20:.1f} MB; the limit is {MAX_UPLOAD_MB} MB")
    if len(data) == 0:
        raise UserError(f"{name} is empty")
    if data[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                unpacked = sum(i.file_size for i in z.infolist())
        except zipfile.BadZipFile:
            return  # the reader says what is wrong with it
        if unpacked > MAX_UNPACKED_MB * 2**20:
            raise UserError(f"{name} unpacks to {unpacked / 2**20:.0f} MB; the limit is {MAX_UNPACKED_MB} MB")

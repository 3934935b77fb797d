"""Reading a user's ``.npz`` file, or saying in one line why it is not one.

Every file openvta reads with numpy — a program, a result, a compiled model, a
calibration set, a model's inputs — goes through :func:`read_npz`.  Its errors name the
file and what it should have been (``"program file 'x.txt' is not an openvta program
(not an npz archive)"``), never numpy's own reason: for a text file numpy guesses
"pickled data" and suggests ``allow_pickle=True``, which openvta never uses.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import BinaryIO, Union

import numpy as np

__all__ = ["read_npz"]

PathLike = Union[str, Path]

_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first entry, or an empty zip's directory
_NPY_MAGIC = b"\x93NUMPY"


def read_npz(source: PathLike | BinaryIO, what: str, kind: str,
             error: type[Exception]) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` archive ``source``, by entry name.

    Parameters
    ----------
    source :
        a path, or a seekable binary stream positioned at the archive.
    what :
        what the file is called in errors (``"program"``: ``"program file 'p.npz' …"``).
    kind :
        what it should be (``"an openvta program"``: ``"… is not an openvta program …"``).
    error :
        the exception to raise (called with the one-line message).

    Raises
    ------
    error
        when the file does not exist, is not a zip archive (a text file, an empty file,
        a single ``.npy`` array), is truncated or damaged, has an entry that is not a
        numpy array, holds pickled object data (never loaded), or has an entry whose
        header declares more bytes than it holds (a forged header would otherwise make
        numpy allocate the declared size first).
    """
    subject = f"{what} file {str(source)!r}" if isinstance(source, (str, Path)) else f"{what} file"
    try:
        head = _head(source)
    except FileNotFoundError:
        raise error(f"{subject} does not exist") from None
    except OSError as exc:
        raise error(f"{subject} cannot be read: {exc.strerror or exc}") from None
    reason = _not_a_zip(head)
    if reason is not None:
        raise error(f"{subject} is not {kind} ({reason})")
    try:
        with np.load(source, allow_pickle=False) as archive:
            _check_entries(archive.zip, subject, kind, error)
            return {key: archive[key] for key in archive.files}
    except error:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        raise error(f"{subject} is not {kind} (a truncated or damaged npz archive)") from None


def _head(source: PathLike | BinaryIO) -> bytes:
    if isinstance(source, (str, Path)):
        with open(source, "rb") as handle:
            return handle.read(len(_NPY_MAGIC))
    start = source.tell()
    head = source.read(len(_NPY_MAGIC))
    source.seek(start)
    return head


def _not_a_zip(head: bytes) -> str | None:
    if not head:
        return "an empty file"
    if head.startswith(_NPY_MAGIC):
        return "a single numpy array, not an npz archive"
    if not head.startswith(_ZIP_MAGICS):
        return "not an npz archive"
    return None


def _check_entries(zipped: zipfile.ZipFile, subject: str, kind: str, error: type[Exception]) -> None:
    """Refuse pickled data, entries that are not arrays, and sizes a header only claims."""
    for info in zipped.infolist():
        name = info.filename.removesuffix(".npy")
        with zipped.open(info) as member:
            try:
                version = np.lib.format.read_magic(member)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                header = read_header(member)
            except ValueError:
                raise error(f"{subject} is not {kind} (entry {name!r} is not a numpy array)") from None
            held = info.file_size - member.tell()
        shape, _, dtype = header
        if dtype.hasobject:
            raise error(f"{subject} holds pickled object data (entry {name!r}), which openvta never loads")
        declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if declared > held:
            raise error(f"{subject} entry {name!r} declares {declared} bytes ({dtype}{list(shape)}) "
                        f"but holds only {held}")

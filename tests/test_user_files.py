"""A file that is not what it should be: every reader of a user's npz file says so in one line.

Programs, results, compiled models, calibration sets and a model's inputs are all read
by :func:`openvta.runtime.npz.read_npz`; numpy's own reasons (which for a text file
suggest ``allow_pickle=True``) never come through.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from openvta.graph import ModelError, load_model
from openvta.model_cli import read_npz as read_feeds
from openvta.runtime import ProgramError, load_program, load_result
from openvta.runtime.npz import read_npz

READERS: dict[str, tuple[Callable[[str], object], type[Exception], str]] = {
    "program": (load_program, ProgramError, r"program file '{path}' is not an openvta program"),
    "result": (load_result, ProgramError, r"result file '{path}' is not an openvta result"),
    "model": (load_model, ModelError, r"model file '{path}' is not an openvta model"),
    "calibration": (lambda p: read_feeds(p, "calibration"), ProgramError,
                    r"calibration file '{path}' is not a calibration set"),
    "inputs": (lambda p: read_feeds(p, "inputs"), ProgramError, r"inputs file '{path}' is not a set of inputs"),
}


def _text(path: Path) -> None:
    path.write_text("x = 1\ny = 2\n")


def _truncated(path: Path) -> None:
    np.savez(path, a=np.arange(100))
    path.write_bytes(path.read_bytes()[:200])


def _single(path: Path) -> None:
    with open(path, "wb") as handle:
        np.save(handle, np.arange(4))


def _not_an_array(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a.npy", b"plain text in a zip")


FILES = {
    "text": (_text, r" \(not an npz archive\)"),
    "empty": (lambda p: p.write_bytes(b""), r" \(an empty file\)"),
    "truncated-zip": (_truncated, r" \(a truncated or damaged npz archive\)"),
    "single-array": (_single, r" \(a single numpy array, not an npz archive\)"),
    "not-an-array": (_not_an_array, r" \(entry 'a' is not a numpy array\)"),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", FILES)
def test_a_file_that_is_not_an_npz_is_named_as_such(tmp_path: Path, reader: str, kind: str) -> None:
    read, error, subject = READERS[reader]
    make, reason = FILES[kind]
    path = tmp_path / "user.npz"
    make(path)
    message = "^" + subject.format(path=re.escape(str(path))) + reason + "$"
    with pytest.raises(error, match=message):
        read(str(path))


@pytest.mark.parametrize("reader", READERS)
def test_pickled_object_data_is_never_loaded(tmp_path: Path, reader: str) -> None:
    read, error, subject = READERS[reader]
    path = tmp_path / "user.npz"
    np.savez(path, fine=np.arange(3), bad=np.array([{"x": 1}], dtype=object))
    what = subject.split(" file ")[0]
    with pytest.raises(error, match=rf"^{what} file '{re.escape(str(path))}' holds pickled object data "
                                    r"\(entry 'bad'\), which openvta never loads$"):
        read(str(path))


@pytest.mark.parametrize("reader", READERS)
def test_a_missing_file_or_a_folder(tmp_path: Path, reader: str) -> None:
    read, error, subject = READERS[reader]
    what = subject.split(" file ")[0]
    with pytest.raises(error, match=rf"^{what} file '{re.escape(str(tmp_path / 'no.npz'))}' does not exist$"):
        read(str(tmp_path / "no.npz"))
    with pytest.raises(error, match=rf"^{what} file '{re.escape(str(tmp_path))}' cannot be read: Is a directory$"):
        read(str(tmp_path))


def test_a_stream_is_read_from_where_it_stands_and_named_without_a_path() -> None:
    buffer = io.BytesIO()
    buffer.write(b"header")
    np.savez(buffer, a=np.arange(3))
    buffer.seek(len(b"header"))
    assert list(read_npz(buffer, "data", "a data set", ValueError)) == ["a"]
    with pytest.raises(ValueError, match=r"^data file is not a data set \(not an npz archive\)$"):
        read_npz(io.BytesIO(b"hello"), "data", "a data set", ValueError)

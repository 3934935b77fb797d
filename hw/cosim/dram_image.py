"""The DRAM image as ``$readmemh``/``$writememh`` text, for :mod:`.native_dram`.

No Amaranth here: the testbench imports it inside the simulator, where every import is
paid again by every run.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["IMAGE_IN", "IMAGE_OUT", "write_image", "read_image"]

#: Files in the simulator's working directory (the run directory).
IMAGE_IN = "dram_in.hex"
IMAGE_OUT = "dram_out.hex"


def write_image(path: str | os.PathLike[str], dram: np.ndarray, bus_bytes: int) -> None:
    """Write a byte image as ``$readmemh`` text: one little-endian bus word per line."""
    data = np.asarray(dram, dtype=np.uint8).ravel()
    words = -(-len(data) // bus_bytes)
    padded = np.zeros(words * bus_bytes, dtype=np.uint8)
    padded[:len(data)] = data
    hexed = padded.reshape(words, bus_bytes)[:, ::-1].tobytes().hex().encode()
    lines = np.frombuffer(hexed, dtype=np.uint8).reshape(words, 2 * bus_bytes)
    newline = np.full((words, 1), ord("\n"), dtype=np.uint8)
    with open(path, "wb") as handle:
        handle.write(np.concatenate([lines, newline], axis=1).tobytes())


def read_image(path: str | os.PathLike[str], image_bytes: int, bus_bytes: int) -> np.ndarray:
    """The first ``image_bytes`` bytes of a ``$writememh`` file of bus words."""
    with open(path, "rb") as handle:
        lines = [line for line in handle.read().split() if not line.startswith((b"//", b"@"))]
    words = -(-image_bytes // bus_bytes)
    if len(lines) < words:
        raise ValueError(f"{path} holds {len(lines)} words, not the image's {words}")
    raw = bytes.fromhex(b"".join(line.rjust(2 * bus_bytes, b"0") for line in lines[:words]).decode())
    return np.frombuffer(raw, dtype=np.uint8).reshape(words, bus_bytes)[:, ::-1].ravel()[:image_bytes].copy()

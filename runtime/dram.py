"""DRAM layout: an allocator that honours element alignment, and tile packing helpers.

Every buffer handed to the accelerator starts at a multiple of the largest element
size of the configuration (docs/ISA.md §4), so its address is a whole number of elements
of any memory type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openvta.isa import Config

__all__ = ["DramAllocator", "Segment", "pack_inp", "pack_wgt", "unpack_out", "pack_acc", "ceil_div"]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Segment:
    name: str
    addr: int
    nbytes: int


class DramAllocator:
    """Bump allocator over a DRAM image; every segment aligned to ``align`` bytes.

    Parameters
    ----------
    cfg :
        the configuration; the default alignment is its largest element size.
    base :
        first byte address handed out.
    """

    def __init__(self, cfg: Config, base: int = 0) -> None:
        if base < 0:
            raise ValueError(f"DRAM base must be non-negative, not {base!r}")
        self.align = cfg.max_elem_bytes
        self.segments: list[Segment] = []
        self._end = base

    @property
    def size(self) -> int:
        """Bytes spanned so far (the end of the last segment)."""
        return self._end

    def alloc(self, nbytes: int, name: str, align: int | None = None) -> int:
        """Reserve ``nbytes`` and return the segment's byte address."""
        if nbytes < 0:
            raise ValueError(f"segment size must be non-negative, not {nbytes!r}")
        align = self.align if align is None else align
        if align < 1 or align & (align - 1):
            raise ValueError(f"alignment must be a power of two, not {align!r}")
        if any(s.name == name for s in self.segments):
            raise ValueError(f"a DRAM segment named {name!r} already exists")
        addr = ceil_div(self._end, align) * align
        self.segments.append(Segment(name, addr, nbytes))
        self._end = addr + nbytes
        return addr


def _pad_to(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dtype=array.dtype)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


def pack_inp(matrix: np.ndarray, cfg: Config) -> np.ndarray:
    """``[M][K]`` int8 → inp tiles ``[M/BATCH][K/BLOCK_IN][BATCH][BLOCK_IN]`` (zero-padded)."""
    m, k = matrix.shape
    b, bi = cfg.BATCH, cfg.BLOCK_IN
    padded = _pad_to(matrix.astype(np.int8), (ceil_div(m, b) * b, ceil_div(k, bi) * bi))
    return padded.reshape(padded.shape[0] // b, b, -1, bi).transpose(0, 2, 1, 3).copy()


def pack_wgt(matrix: np.ndarray, cfg: Config) -> np.ndarray:
    """``[N][K]`` int8 (row = output channel) → wgt tiles ``[N/BO][K/BI][BO][BI]``."""
    n, k = matrix.shape
    bo, bi = cfg.BLOCK_OUT, cfg.BLOCK_IN
    padded = _pad_to(matrix.astype(np.int8), (ceil_div(n, bo) * bo, ceil_div(k, bi) * bi))
    return padded.reshape(padded.shape[0] // bo, bo, -1, bi).transpose(0, 2, 1, 3).copy()


def pack_acc(matrix: np.ndarray, cfg: Config, dtype: type = np.int32) -> np.ndarray:
    """``[M][N]`` → acc (or out) tiles ``[M/BATCH][N/BLOCK_OUT][BATCH][BLOCK_OUT]``."""
    m, n = matrix.shape
    b, bo = cfg.BATCH, cfg.BLOCK_OUT
    padded = _pad_to(matrix.astype(dtype), (ceil_div(m, b) * b, ceil_div(n, bo) * bo))
    return padded.reshape(padded.shape[0] // b, b, -1, bo).transpose(0, 2, 1, 3).copy()


def unpack_out(tiles: np.ndarray, m: int, n: int) -> np.ndarray:
    """Out (or acc) tiles ``[M/B][N/BO][B][BO]`` → the ``[m][n]`` matrix."""
    mt, nt, b, bo = tiles.shape
    return tiles.transpose(0, 2, 1, 3).reshape(mt * b, nt * bo)[:m, :n]

"""Happens-before race checking along dependency-token edges (vector clocks).

Each module's instructions are numbered 1, 2, … (its *epochs*).  A module's vector
clock says, for every module, the last epoch known to have completed before the
module's current instruction: its own predecessors (program order) and, through
every popped token, what the pusher had seen when it pushed.

For each shared element (inp, wgt and out tiles; DRAM granules) the checker keeps
the last writer and every module's last read.  A read is a race when the last write
by another module is not ordered before it; a write is a race when another module's
last read or write is not ordered before it.  Because the order is taken from the
tokens, not from the schedule the simulator happened to pick, a missing token is
reported even when the numbers come out right.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from openvta.isa import Module

from ..errors import RaceError
from .semantics import Access, Rows

__all__ = ["VectorClocks", "RaceChecker"]

_NAMES = {"inp": "inp buffer element", "wgt": "wgt buffer element",
          "out": "out buffer element", "dram": "DRAM byte"}


class VectorClocks:
    """Per-module vector clocks and the stream index of every executed instruction."""

    def __init__(self) -> None:
        n = len(Module)
        self.clock = np.zeros((n, n), dtype=np.int64)
        self.history: list[list[int]] = [[] for _ in range(n)]

    def begin(self, module: Module, stream_index: int) -> int:
        self.clock[module, module] += 1
        self.history[module].append(stream_index)
        return int(self.clock[module, module])

    def receive(self, module: Module, stamp: np.ndarray) -> None:
        np.maximum(self.clock[module], stamp, out=self.clock[module])

    def stamp(self, module: Module) -> np.ndarray:
        return self.clock[module].copy()

    def stream_index(self, module: int, epoch: int) -> int:
        return self.history[module][epoch - 1]


class RaceChecker:
    """Checks every access against the happens-before order of the tokens.

    Parameters
    ----------
    sizes :
        elements of each tracked resource (``inp``, ``wgt``, ``out``, ``dram``).
    clocks :
        the vector clocks the executor advances.
    describe :
        stream index → text naming the instruction, for messages.
    granule :
        bytes per DRAM element tracked (reported as byte addresses).
    """

    def __init__(
        self,
        sizes: dict[str, int],
        clocks: VectorClocks,
        describe: Callable[[int], str],
        granule: int,
    ) -> None:
        n = len(Module)
        self.clocks = clocks
        self.describe = describe
        self.granule = granule
        self.writer = {r: np.full(size, -1, dtype=np.int8) for r, size in sizes.items()}
        # epochs count one module's instructions: int32 halves the memory each check streams
        self.write_epoch = {r: np.zeros(size, dtype=np.int32) for r, size in sizes.items()}
        self.read_epoch = {r: np.zeros((n, size), dtype=np.int32) for r, size in sizes.items()}

    def check(self, module: Module, accesses: list[Access]) -> None:
        """Check and record ``accesses`` made by ``module``'s current instruction.

        An access's elements are an index array, or a contiguous range or evenly spaced
        rows: the checker then works on views of its tables, in time proportional to
        the elements and with no gather or scatter.
        """
        module = int(module)
        clock = [int(c) for c in self.clocks.clock[module]]
        epoch = clock[module]
        others = [m for m in range(len(clock)) if m != module]
        for access in accesses:
            r, index = access.resource, access.elements
            writer, written = _select(self.writer[r], index), _select(self.write_epoch[r], index)
            # the last write by another module must be ordered before this access
            bad = None
            for other in others:
                late = (writer == other) & (written > clock[other])
                bad = late if bad is None else bad | late
            if bad is not None and bad.any():
                k = int(np.flatnonzero(bad)[0])
                self._report(module, access, _element(index, k), int(writer.flat[k]),
                             int(written.flat[k]), "write")
            if access.write:
                # so must every other module's last read (a module's own reads never race)
                for other in others:
                    reads = _select(self.read_epoch[r][other], index)
                    late = reads > clock[other]
                    if late.any():
                        k = int(np.flatnonzero(late)[0])
                        self._report(module, access, _element(index, k), other,
                                     int(reads.flat[k]), "read")
                _assign(self.writer[r], index, module)
                _assign(self.write_epoch[r], index, epoch)
            else:
                _assign(self.read_epoch[r][module], index, epoch)

    def _report(
        self, module: Module, access: Access, element: int, other: int, epoch: int, kind: str
    ) -> None:
        verb = "writes" if access.write else "reads"
        where = element * self.granule if access.resource == "dram" else element
        mine = self.clocks.stream_index(module, int(self.clocks.clock[module, module]))
        theirs = self.clocks.stream_index(other, epoch)
        raise RaceError(
            f"race on {_NAMES[access.resource]} {where}: {Module(module).name.lower()} "
            f"{verb} it in instruction {mine} ({self.describe(mine)}), but the {kind} by "
            f"{Module(other).name.lower()} in instruction {theirs} ({self.describe(theirs)}) "
            "is not ordered before it by dependency tokens"
        )


def _select(table: np.ndarray, index: np.ndarray | slice | Rows) -> np.ndarray:
    """``table[..., index]``; a view unless ``index`` is an index array."""
    if isinstance(index, Rows):
        step = table.strides[-1]
        return np.lib.stride_tricks.as_strided(
            table[..., index.start:], table.shape[:-1] + (index.rows, index.row_len),
            table.strides[:-1] + (index.stride * step, step), writeable=False)
    return table[..., index]


def _assign(table: np.ndarray, index: np.ndarray | slice | Rows, value: int | np.integer) -> None:
    """``table[..., index] = value`` (overlapping rows get the same value, so order is moot)."""
    if isinstance(index, Rows):
        step = table.strides[-1]
        view = np.lib.stride_tricks.as_strided(
            table[..., index.start:], table.shape[:-1] + (index.rows, index.row_len),
            table.strides[:-1] + (index.stride * step, step))
        view[...] = value
    else:
        table[..., index] = value


def _element(index: np.ndarray | slice | Rows, k: int) -> int:
    """The ``k``-th element of an access's elements."""
    if isinstance(index, Rows):
        return index.start + (k // index.row_len) * index.stride + k % index.row_len
    if isinstance(index, slice):
        return int(index.start) + k
    return int(index[k])

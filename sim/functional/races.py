"""Happens-before race checking along dependency-token edges (vector clocks).

Each module's instructions are numbered 1, 2, … (its *epochs*).  A module's vector
clock says, for every module, the last epoch known to have completed before the
module's current instruction: its own predecessors (program order) and, through
every popped token, what the pusher had seen when it pushed.

For each shared element (inp, wgt and out tiles; DRAM granules) the rule is: a read
is a race when the last write by another module is not ordered before it; a write is
a race when another module's last read or write is not ordered before it.  Because
the order is taken from the tokens, not from the schedule the simulator happened to
pick, a missing token is reported even when the numbers come out right.

Incremental checking: the checker keeps, per resource and per module, the epoch of
that module's last write and last read of every element, and tests an access with
one maximum per other module that touched the resource since the last epoch of it
the accessing module knows of (none at all when it knows of every one).  Testing every other
module's last write, not only the last writer's, gives the same verdict while no
race has been found: the last writer's own check ordered every earlier write before
it, and vector clocks are transitive.  Only when a test fails does the checker look
for the element and the instruction to name, exactly as the rule above says.
Elements that only one module can touch (DRAM granules that no STORE writes, or
that no LOAD reads) are never tested: see ``shared`` below.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence

import numpy as np

from openvta.isa import Module

from ..errors import RaceError
from .semantics import Access, Rows

__all__ = ["VectorClocks", "RaceChecker"]

_NAMES = {"inp": "inp buffer element", "wgt": "wgt buffer element",
          "out": "out buffer element", "dram": "DRAM byte"}
Elements = np.ndarray | slice | Rows


class VectorClocks:
    """Per-module vector clocks (lists of ints) and the stream index of every executed instruction."""

    def __init__(self) -> None:
        n = len(Module)
        self.clock: list[list[int]] = [[0] * n for _ in range(n)]
        self.history: list[list[int]] = [[] for _ in range(n)]

    def begin(self, module: int, stream_index: int) -> int:
        row = self.clock[module]
        row[module] += 1
        self.history[module].append(stream_index)
        return row[module]

    def receive(self, module: int, stamp: Sequence[int]) -> None:
        row = self.clock[module]
        for m, epoch in enumerate(stamp):
            if epoch > row[m]:
                row[m] = int(epoch)

    def stamp(self, module: int) -> tuple[int, ...]:
        return tuple(self.clock[module])

    def stream_index(self, module: int, epoch: int) -> int:
        return self.history[module][epoch - 1]


class _Resource:
    """Per-module epochs of the last write and read of every element, and the last writer."""

    def __init__(self, size: int, shared: list[tuple[int, int]] | None) -> None:
        n = len(Module)
        self.size = size
        self.writer = np.full(size, -1, dtype=np.int8)
        # epochs count one module's instructions: int32 halves the memory each check streams
        self.writes: list[np.ndarray | None] = [None] * n
        self.reads: list[np.ndarray | None] = [None] * n
        #: per module, the latest epoch written into its table of writes and of reads: no
        #: entry of the table is larger (a module's epochs only grow), so an access needs
        #: no look at the table when the accessing module's clock has reached it
        self.last_write = [0] * n
        self.last_read = [0] * n
        #: sorted disjoint ranges of the elements that more than one module may touch
        #: (None: all of them)
        self.shared = None if shared is None else ([lo for lo, _ in shared], [hi for _, hi in shared])

    def table(self, tables: list[np.ndarray | None], module: int) -> np.ndarray:
        table = tables[module]
        if table is None:
            table = tables[module] = np.zeros(self.size, dtype=np.int32)
        return table

    def untouchable(self, index: Elements) -> bool:
        """True when no element of ``index`` can be touched by two modules."""
        if self.shared is None:
            return False
        starts, ends = self.shared
        lo, hi = _bounds(index)
        j = bisect_right(ends, lo)  # the first shared range that ends after lo
        return j == len(ends) or starts[j] >= hi


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
    shared :
        resource → sorted disjoint ranges ``(lo, hi)`` of the elements that more than
        one module may touch; accesses to none of them are not tracked (every element
        when absent).
    """

    def __init__(
        self,
        sizes: dict[str, int],
        clocks: VectorClocks,
        describe: Callable[[int], str],
        granule: int,
        shared: dict[str, list[tuple[int, int]]] | None = None,
    ) -> None:
        self.clocks = clocks
        self.describe = describe
        self.granule = granule
        shared = shared or {}
        self.resources = {r: _Resource(size, shared.get(r)) for r, size in sizes.items()}

    def check(self, module: int, accesses: list[Access]) -> None:
        """Check and record ``accesses`` made by ``module``'s current instruction.

        An access's elements are an index array, or a contiguous range or evenly spaced
        rows: the checker then works on views of its tables, in time proportional to
        the elements and with no gather or scatter.
        """
        module = int(module)
        clock = self.clocks.clock[module]
        epoch = clock[module]
        for access in accesses:
            res, index = self.resources[access.resource], access.elements
            if res.untouchable(index):
                continue
            for other, last in enumerate(res.last_write):
                if (last > clock[other] and other != module and (written := res.writes[other]) is not None
                        and _max(written, index) > clock[other]):
                    self._report_write(module, access, res)
            if access.write:
                for other, last in enumerate(res.last_read):
                    if (last > clock[other] and other != module and (table := res.reads[other]) is not None
                            and _max(table, index) > clock[other]):
                        self._report_read(module, access, res, other, table)
                _assign(res.writer, index, module)
                _assign(res.table(res.writes, module), index, epoch)
                res.last_write[module] = epoch
            else:
                _assign(res.table(res.reads, module), index, epoch)
                res.last_read[module] = epoch

    def _report_write(self, module: int, access: Access, res: _Resource) -> None:
        """The first element whose last writer, another module, is not ordered before."""
        index, clock = access.elements, self.clocks.clock[module]
        writer = _select(res.writer, index).reshape(-1).astype(np.int64)
        written = np.zeros(writer.shape, dtype=np.int64)
        for other, table in enumerate(res.writes):
            if table is not None:
                mine = writer == other
                written[mine] = _select(table, index).reshape(-1)[mine]
        limit = np.array(clock + [np.iinfo(np.int64).max], dtype=np.int64)
        limit[module] = np.iinfo(np.int64).max  # writer -1 (none) reads the last entry
        bad = written > limit[writer]
        assert bad.any(), "a late write by another module is always some element's last write"
        k = int(np.flatnonzero(bad)[0])
        self._report(module, access, _element(index, k), int(writer[k]), int(written[k]), "write")

    def _report_read(
        self, module: int, access: Access, res: _Resource, other: int, table: np.ndarray
    ) -> None:
        reads = _select(table, access.elements).reshape(-1)
        k = int(np.flatnonzero(reads > self.clocks.clock[module][other])[0])
        self._report(module, access, _element(access.elements, k), other, int(reads[k]), "read")

    def _report(
        self, module: int, access: Access, element: int, other: int, epoch: int, kind: str
    ) -> None:
        verb = "writes" if access.write else "reads"
        where = element * self.granule if access.resource == "dram" else element
        mine = self.clocks.stream_index(module, self.clocks.clock[module][module])
        theirs = self.clocks.stream_index(other, epoch)
        raise RaceError(
            f"race on {_NAMES[access.resource]} {where}: {Module(module).name.lower()} "
            f"{verb} it in instruction {mine} ({self.describe(mine)}), but the {kind} by "
            f"{Module(other).name.lower()} in instruction {theirs} ({self.describe(theirs)}) "
            "is not ordered before it by dependency tokens"
        )


def _rows_view(table: np.ndarray, index: Rows) -> np.ndarray:
    """The rows ``index`` of a one-dimensional ``table``, as a ``(rows, row_len)`` view."""
    step = table.itemsize
    return np.ndarray((index.rows, index.row_len), table.dtype, table, index.start * step,
                      (index.stride * step, step))


def _select(table: np.ndarray, index: Elements) -> np.ndarray:
    """``table[index]``; a view unless ``index`` is an index array."""
    if isinstance(index, Rows):
        return _rows_view(table, index)
    return table[index]


def _max(table: np.ndarray, index: Elements) -> int:
    """The largest entry of ``table`` at ``index`` (0 when ``index`` is empty)."""
    selected = _select(table, index)
    return int(selected.max()) if selected.size else 0


def _assign(table: np.ndarray, index: Elements, value: int) -> None:
    """``table[index] = value`` (overlapping rows get the same value, so order is moot)."""
    if isinstance(index, Rows):
        _rows_view(table, index)[...] = value
    else:
        table[index] = value


def _bounds(index: Elements) -> tuple[int, int]:
    """``lo, hi``: every element of ``index`` is in ``range(lo, hi)``."""
    if isinstance(index, Rows):
        if index.rows == 0 or index.row_len == 0:
            return index.start, index.start
        return index.start, index.start + (index.rows - 1) * index.stride + index.row_len
    if isinstance(index, slice):
        return int(index.start), int(index.stop)
    if index.size == 0:
        return 0, 0
    return int(index.min()), int(index.max()) + 1


def _element(index: Elements, k: int) -> int:
    """The ``k``-th element of an access's elements."""
    if isinstance(index, Rows):
        return index.start + (k // index.row_len) * index.stride + k % index.row_len
    if isinstance(index, slice):
        return int(index.start) + k
    return int(index[k])

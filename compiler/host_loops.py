"""Host loops: the loops outside the attach point, with their tail tiles peeled.

A host loop whose split leaves a tail tile becomes the loop over the whole tiles and one
iteration over the tail, each lowered with its own extents (:class:`~.bounds.Tail`).
When the split the virtual threads divide leaves the tail (:class:`UnevenThreads`), it
is the last thread's last tile: the virtual-thread loop gets a second body for the last
thread (:attr:`~.ir.Loop.tail`), and both bodies peel every thread's last tile, so they
have the same loops and the same machine statements (``inject_vthreads`` checks it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .bounds import StageBounds, Tail, ragged_splits
from .ir import Block, LoopKind, LoweringError, Loop, Stmt
from .schedule import Split, Stage
from .te import IterVar

__all__ = ["HostLoops", "UnevenThreads", "uneven_threads"]


@dataclass(frozen=True)
class UnevenThreads:
    """The split the virtual threads divide, when it leaves a tail tile: ``parent`` (its outer
    loop, split again into ``thread`` and ``rest``) has a tail of ``remainder`` in tiles of
    ``factor``; it is the last tile of the last thread."""

    thread: IterVar
    rest: IterVar
    parent: IterVar
    factor: int
    remainder: int


def uneven_threads(out: Stage, host: list[IterVar]) -> UnevenThreads | None:
    """The virtual threads' split of ``out`` when the loop they split has a tail tile, else None.

    Raises
    ------
    LoweringError
        when the loop the threads split or the tile's loop inside it is not where the
        tail can go: the threads' inner loop must be a host loop, the tile's inside the
        attach point.
    """
    ragged = ragged_splits(out)
    inner_of = {rel.outer: rel.inner for rel in out.relations if isinstance(rel, Split)}
    for rel in out.relations:
        if isinstance(rel, Split) and rel.outer is out.vthread_axis and rel.parent in ragged:
            if rel.inner not in host or inner_of[rel.parent] in host:
                raise LoweringError(f"lower {out.name}", f"the virtual threads' split of {rel.parent.name} leaves "
                                    "a tail tile: the threads' inner loop must be a host loop and the tile's "
                                    "inside the attach point")
            extent, factor = ragged[rel.parent]
            return UnevenThreads(rel.outer, rel.inner, rel.parent, factor, extent % factor)
    return None


@dataclass(frozen=True)
class HostLoops:
    """The host loops around the tile's statements; a loop with a tail tile becomes the loop
    over the whole tiles and one iteration over the tail, each with its own statements."""

    out: Stage
    info: StageBounds
    ragged: dict[IterVar, tuple[int, int]]
    lower_tile: Callable[[dict[IterVar, Tail]], Stmt]
    uneven: UnevenThreads | None = None
    last_thread: bool = False

    def nest(self, host: list[IterVar], tails: dict[IterVar, Tail]) -> Stmt:
        if not host:
            return self.lower_tile(tails)
        axis, rest = host[0], host[1:]
        kind = LoopKind.VTHREAD if axis is self.out.vthread_axis else LoopKind.HOST
        extent = self.info.extents[axis.var]
        if self.uneven is not None and axis is self.uneven.thread:
            last = replace(self, last_thread=True)
            return Loop(axis.var, extent, self.nest(rest, tails), kind, tail=last.nest(rest, tails))
        if self.uneven is not None and axis is self.uneven.rest:
            # every thread's last tile is peeled: the last thread's is the tail tile
            lasts = {**tails, axis: Tail(extent - 1, 0)}
            if self.last_thread:
                lasts[self.uneven.parent] = Tail(0, self.uneven.remainder)
            parts = [Loop(axis.var, 1, self.nest(rest, lasts), kind)]
            if extent > 1:
                parts.insert(0, Loop(axis.var, extent - 1, self.nest(rest, tails), kind))
            return Block(tuple(parts)) if len(parts) > 1 else parts[0]
        if axis not in self.ragged:
            return Loop(axis.var, extent, self.nest(rest, tails), kind)
        full, factor = self.ragged[axis]
        count, remainder = divmod(full, factor)
        parts = [Loop(axis.var, 1, self.nest(rest, {**tails, axis: Tail(count, remainder)}), kind)]
        if count:
            parts.insert(0, Loop(axis.var, count, self.nest(rest, tails), kind))
        return Block(tuple(parts))

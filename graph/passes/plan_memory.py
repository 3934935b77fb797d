"""Pass: plan memory — one arena for the tensors passed between fused groups, and one per
accelerator region.

A tensor needs a buffer when it crosses a group boundary: a graph input, or a group's
result read by another group or returned as a graph output.  Values inside a group
stay in the accelerator's on-chip buffers (or the CPU kernel's temporaries); constants
(weights, biases) are laid out once, apart from the arena.

Each buffer is live from the group that writes it (the start for graph inputs) to the
last group that reads it (the end for graph outputs), both inclusive, so a group never
writes over its own inputs.  Offsets are assigned greedily, largest buffer first, each
at the lowest aligned offset that overlaps no live-at-the-same-time buffer already
placed (TFLite's "greedy by size").  The plan records the arena's size and, for
comparison, the size with no reuse (every buffer its own aligned slot).

Values that stay inside an accelerator region (``scratch``) never reach the host and get no
host buffer.  Each region gets its own arena, the DRAM of its program, planned the same
greedy way over its tensors' packed sizes, with the liveness the compiler's program check
uses (:meth:`~openvta.graph.regions.Region.live`: from the start for host-supplied tensors,
or from the kernel that writes it, to its last reader or, for an output, to the end).  A
constant may so share bytes with an activation written after its last reader: every run
starts from the program's own image, so the constant is back for the next run.

Preconditions: every node has a group (fuse); groups are numbered in execution order.
Postconditions: ``graph.memory`` holds the host plan; every region tensor has its offset
(a multiple of ``alignment``, which must be the configuration's DRAM alignment) and every
region its arena sizes; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import PassError
from ..ir import Graph
from ..regions import MemoryPlan, Region, Role

__all__ = ["plan_memory", "plan_region", "Buffer", "buffers_of", "assign_offsets"]

_PASS = "plan memory"


@dataclass(frozen=True)
class Buffer:
    """A tensor to place: its size and the groups during which it is live."""

    name: str
    size: int
    start: int
    end: int


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def buffers_of(graph: Graph, batch: int = 1) -> list[Buffer]:
    """The tensors crossing group boundaries, with sizes at ``batch`` and live ranges."""
    group_of: dict[str, int] = {}
    node_group: dict[str, int] = {}
    for node in graph.nodes:
        if node.group is None:
            raise PassError(_PASS, f"node {node.label} has no fused group; run fuse first")
        group_of[node.outputs[0]] = node_group[node.name] = node.group
    end_of_graph = 1 + max(group_of.values(), default=-1)
    last: dict[str, int] = {name: end_of_graph for name in graph.outputs}
    crossing = set(graph.outputs) | set(graph.inputs)
    for node in graph.nodes:
        for value in node.inputs:
            if value in graph.constants:
                continue
            group = node_group[node.name]
            last[value] = max(last.get(value, -1), group)
            if group_of.get(value, -1) != group:
                crossing.add(value)
    inside = {t.value for r in graph.regions for t in r.tensors if t.role is Role.SCRATCH}
    return [Buffer(name, graph.types[name].nbytes(batch), group_of.get(name, -1),
                   last.get(name, group_of.get(name, -1)))
            for name in sorted(crossing - inside) if name not in graph.constants]


def assign_offsets(buffers: list[Buffer], alignment: int) -> dict[str, int]:
    """Greedy by size: each buffer at the lowest aligned offset free during its lifetime.

    >>> a, b, c = Buffer("a", 100, 0, 1), Buffer("b", 50, 1, 2), Buffer("c", 100, 2, 3)
    >>> assign_offsets([a, b, c], 64)
    {'a': 0, 'c': 0, 'b': 128}
    """
    placed: list[tuple[Buffer, int]] = []
    offsets: dict[str, int] = {}
    for buf in sorted(buffers, key=lambda b: (-b.size, b.start, b.name)):
        busy = sorted((offset, offset + other.size) for other, offset in placed
                      if other.start <= buf.end and buf.start <= other.end)
        offset = 0
        for low, high in busy:
            if offset + buf.size <= low:
                break
            offset = max(offset, _align(high, alignment))
        placed.append((buf, offset))
        offsets[buf.name] = offset
    return offsets


def _arena(buffers: list[Buffer], alignment: int) -> tuple[dict[str, int], int, int]:
    """Offsets, arena bytes with reuse and without."""
    offsets = assign_offsets(buffers, alignment)
    arena = max((_align(offsets[b.name] + b.size, alignment) for b in buffers), default=0)
    return offsets, arena, sum(_align(b.size, alignment) for b in buffers)


def plan_region(region: Region, alignment: int) -> Region:
    """``region`` with its tensors' offsets and its arena sizes (module docstring)."""
    live = region.live()
    unused = [t.name for t in region.tensors if t.name not in live]
    if unused:
        raise PassError(_PASS, f"region {region.index} tensor {unused[0]!r} is used by no kernel")
    buffers = [Buffer(t.name, t.nbytes, *live[t.name]) for t in region.tensors]
    offsets, arena, no_reuse = _arena(buffers, alignment)
    tensors = tuple(replace(t, offset=offsets[t.name]) for t in region.tensors)
    return replace(region, tensors=tensors, arena_bytes=arena, no_reuse_bytes=no_reuse)


def plan_memory(graph: Graph, batch: int = 1, alignment: int = 64) -> Graph:
    """``graph`` with its arena plans for ``batch`` images (module docstring)."""
    if batch < 1 or alignment < 1 or alignment & (alignment - 1):
        raise ValueError(f"plan_memory needs a positive batch and a power-of-two alignment, "
                         f"not {batch!r} and {alignment!r}")
    buffers = buffers_of(graph, batch)
    offsets, arena, no_reuse = _arena(buffers, alignment)
    sizes = {b.name: b.size for b in buffers}
    return graph.replace(memory=MemoryPlan(offsets, sizes, arena, no_reuse, batch, alignment),
                         regions=tuple(plan_region(r, alignment) for r in graph.regions))

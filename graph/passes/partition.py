"""Pass: partition — place every node on the accelerator or the CPU, with the reason.

In graph order, each node is placed by:

1. ``cpu_ops``, ``cpu_nodes``: an op type or a node the user forces to the CPU goes there
   ("forced");
2. the registry's ``accel_ok(node, graph, cfg)`` predicate: its answer and reason;
3. an element-wise or broadcast op the accelerator could run goes there only if one of
   its inputs comes from a node on the accelerator: alone it would cost a round trip to
   DRAM for a few ALU instructions, so it stays on the CPU;
4. unless every node reading it is an element-wise or broadcast node on the
   accelerator (walking back from the outputs): then it runs in their kernel, on a value
   the kernel loads anyway — the rescaling of a residual input that comes from the CPU.

Placement never changes the numbers: an accelerator kernel computes exactly its nodes'
integer references.

Preconditions: a typed graph (the quantized one: on a float graph every predicate says
no).  Postconditions: every node has a ``Placement``; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from openvta.isa import Config

from ..ir import Device, Graph, Node, Op, Placement
from ..ops.base import PatternKind
from ..registry import ONNX_OPS, op_def

__all__ = ["partition", "parse_cpu_ops"]


def parse_cpu_ops(cpu_ops: Collection[str | Op]) -> frozenset[Op]:
    """ONNX op type names (or :class:`Op` members) → the set of ops forced to the CPU.

    Raises
    ------
    ValueError
        for an entry that names no supported op.
    """
    if isinstance(cpu_ops, str):
        raise ValueError(f"cpu_ops must be a collection of op types, not the string {cpu_ops!r}")
    names = {op.value: op for op in ONNX_OPS}
    chosen = set()
    for entry in cpu_ops:
        if isinstance(entry, Op):
            chosen.add(entry)
        elif isinstance(entry, str) and entry in names:
            chosen.add(names[entry])
        else:
            raise ValueError(f"cpu_ops entries must be op types ({', '.join(sorted(names))}), "
                             f"not {entry!r}")
    return frozenset(chosen)


_ALONE = "element-wise op with no accelerator node before it"
_BEFORE = "element-wise op run in the kernel of the accelerator nodes that read it"


def _readers_on_accel(node: Node, graph: Graph, placed: dict[str, Placement],
                      consumers: dict[str, list[Node]]) -> bool:
    readers = [user for value in node.outputs for user in consumers.get(value, [])]
    return bool(readers) and not any(v in graph.outputs for v in node.outputs) and all(
        placed[r.name].device is Device.ACCEL and op_def(r.op).kind <= PatternKind.BROADCAST
        for r in readers)


def _place(node: Node, graph: Graph, cfg: Config, forced: tuple[frozenset[Op], frozenset[str]],
           placed: dict[str, Placement], producers: dict[str, Node]) -> Placement:
    if node.op in forced[0]:
        return Placement(Device.CPU, f"{node.op.value} forced to the CPU by cpu_ops")
    if node.name in forced[1]:
        return Placement(Device.CPU, "forced to the CPU by cpu_nodes")
    ok, reason = op_def(node.op).accel_ok(node, graph, cfg)
    if not ok:
        return Placement(Device.CPU, reason)
    if op_def(node.op).kind <= PatternKind.BROADCAST:
        sources = [producers[v] for v in node.inputs if v in producers]
        if not any(placed[p.name].device is Device.ACCEL for p in sources):
            return Placement(Device.CPU, _ALONE)
    return Placement(Device.ACCEL, reason)


def partition(graph: Graph, cfg: Config, cpu_ops: Collection[str | Op] = (),
              cpu_nodes: Collection[str] = ()) -> Graph:
    """``graph`` with a placement on every node (module docstring).

    Raises
    ------
    ValueError
        for a ``cpu_ops`` entry that is no op type, or a ``cpu_nodes`` entry that names no
        node of the graph.
    """
    names = sorted(n.name for n in graph.nodes)
    unknown = sorted(set(cpu_nodes) - set(names))
    if unknown:
        raise ValueError(f"cpu_nodes entries must name nodes of the model ({', '.join(names)}), "
                         f"not {unknown[0]!r}")
    forced = (parse_cpu_ops(cpu_ops), frozenset(cpu_nodes))
    placed: dict[str, Placement] = {}
    producers = graph.producers()
    for node in graph.nodes:
        placed[node.name] = _place(node, graph, cfg, forced, placed, producers)
    consumers = graph.consumers()
    for node in reversed(graph.nodes):
        if placed[node.name].reason == _ALONE and _readers_on_accel(node, graph, placed, consumers):
            placed[node.name] = Placement(Device.ACCEL, _BEFORE)
    return graph.replace(nodes=tuple(replace(n, placement=placed[n.name]) for n in graph.nodes))

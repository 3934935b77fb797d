"""Small helpers the passes share to rebuild graphs: fresh names, renaming, pruning, new
float32 constants.

Examples
--------
>>> fresh("conv1.acc", {"conv1.acc", "conv1.acc_1"})
'conv1.acc_2'
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

import numpy as np

from .ir import DType, Graph, Node, TensorType

__all__ = ["fresh", "rename_values", "prune", "add_constant", "with_constants"]


def fresh(base: str, used: Collection[str]) -> str:
    """``base``, or ``base_1``, ``base_2``, … — the first not in ``used``."""
    if base not in used:
        return base
    index = 1
    while f"{base}_{index}" in used:
        index += 1
    return f"{base}_{index}"


def _resolve(name: str, mapping: Mapping[str, str]) -> str:
    seen = set()
    while name in mapping and name not in seen:
        seen.add(name)
        name = mapping[name]
    return name


def rename_values(nodes: tuple[Node, ...], mapping: Mapping[str, str]) -> tuple[Node, ...]:
    """``nodes`` with every input and output name mapped through ``mapping`` (transitively)."""
    return tuple(replace(node, inputs=tuple(_resolve(v, mapping) for v in node.inputs),
                         outputs=tuple(_resolve(v, mapping) for v in node.outputs))
                 for node in nodes)


def prune(graph: Graph) -> Graph:
    """Drop nodes whose outputs nobody reads, then constants and types nobody refers to."""
    live = set(graph.outputs)
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if any(out in live for out in node.outputs):
            kept.append(node)
            live.update(node.inputs)
    nodes = tuple(reversed(kept))
    values = live | set(graph.inputs) | {o for n in nodes for o in n.outputs}
    return graph.replace(nodes=nodes,
                         constants={k: v for k, v in graph.constants.items() if k in values},
                         types={k: v for k, v in graph.types.items() if k in values})


def add_constant(base: str, value: np.ndarray, constants: dict[str, np.ndarray], used: set[str]) -> str:
    """``value`` (as float32) under a fresh name made from ``base``, added to ``constants``
    and to ``used``; the name."""
    name = fresh(base, used)
    used.add(name)
    constants[name] = value.astype(np.float32)
    return name


def with_constants(graph: Graph, nodes: Sequence[Node], constants: Mapping[str, np.ndarray],
                   notes: Sequence[str]) -> Graph:
    """``graph`` with ``nodes``, ``constants`` (those not in ``graph`` typed float32) and ``notes``."""
    types = dict(graph.types)
    types.update({k: TensorType(v.shape, DType.FLOAT32) for k, v in constants.items() if k not in graph.constants})
    return graph.replace(nodes=tuple(nodes), constants=dict(constants), types=types, notes=tuple(notes))

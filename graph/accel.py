"""A graph node before the compiler's operators: which one computes it, with which parameters.

The graph hands a node to the compiler as plain data (:class:`openvta.compiler.ops.Anchor`:
its ONNX op type, attributes, input shapes, dtypes and constness) and the registry's
matchers answer (:func:`openvta.compiler.ops.match_anchor`): the operator's descriptor and
its factory's parameters, or why none computes it.  Partitioning asks here whether a node
may run on the accelerator (then the compiler's planner is asked whether it fits, with the
smallest epilogue a kernel of the graph has: a bias and a clip to int8), and kernel matching
asks the same question of a fused group's anchor: one translation, the compiler's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openvta.compiler import Epilogue, LoweringError
from openvta.compiler.ops import Anchor, OperatorDescriptor, match_anchor
import numpy as np

from openvta.isa import Config

from .ir import Node
from .kernel import kernel_operator

if TYPE_CHECKING:
    from .ir import Graph

__all__ = ["AnchorMatch", "anchor_of", "match_node", "accelerator_refusal"]

#: The smallest epilogue of a graph kernel, for partitioning's check: a clip to int8.
_INT8 = np.iinfo(np.int8)
_INT8_CLIP = Epilogue.from_params(None, None, (int(_INT8.min), int(_INT8.max)))


@dataclass(frozen=True)
class AnchorMatch:
    """A node one operator computes: its descriptor, the factory's parameters, a note."""

    descriptor: OperatorDescriptor
    params: dict[str, Any]
    note: str


def anchor_of(node: Node, graph: Graph) -> Anchor:
    """``node`` as plain data for the compiler's matchers (static shapes, dtype names)."""
    types = [graph.types[value] for value in node.inputs]
    return Anchor(node.op.value, dict(node.attrs),
                  tuple(tuple(int(d) for d in t.concrete()) for t in types),
                  tuple(t.dtype.value for t in types), tuple(value in graph.constants for value in node.inputs),
                  tuple(bool(t.shape) and isinstance(t.shape[0], str) for t in types))


def match_node(node: Node, graph: Graph, cfg: Config) -> AnchorMatch | str:
    """The operator that computes ``node`` on ``cfg`` and its parameters, or why none does."""
    found = match_anchor(anchor_of(node, graph), cfg)
    if isinstance(found, str):
        return found
    return AnchorMatch(*found)


def accelerator_refusal(node: Node, graph: Graph, cfg: Config) -> tuple[bool, str]:
    """Whether ``node`` may run on the accelerator, and why (partitioning's predicate for the
    anchors: Conv, Gemm, MatMul): an operator matches it and its planner finds a tiling."""
    found = match_node(node, graph, cfg)
    if isinstance(found, str):
        return False, found
    name = found.descriptor.name
    try:
        kernel_operator(found.descriptor, found.params, cfg, _INT8_CLIP)
    except LoweringError as exc:
        return False, f"no {name} tiling fits the buffers ({exc})"
    except ValueError as exc:
        return False, f"the compiler's {name} cannot take it: {exc}"
    return True, found.note

"""Pass: shape and type inference.

Recomputes the type of every value from the graph inputs' and constants' types through
the registry's ``infer``, and drops the types of values no longer in the graph.

Preconditions: every graph input has a type; nodes are in topological order.
Postconditions: every value has a type; a value that had quantization parameters keeps
them (they are decided by calibration and quantization, not inferred).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import OpError, PassError
from ..ir import DType, Graph, Node, TensorType
from ..registry import op_def

__all__ = ["infer_shapes", "infer_node"]

_PASS = "infer shapes"


def infer_node(node: Node, types: Mapping[str, TensorType]) -> TensorType:
    """The output type of ``node`` from its input types (``OpError`` if it has none)."""
    inputs = []
    for name in node.inputs:
        if name not in types:
            raise OpError(f"input {name!r} is not defined before the node")
        inputs.append(types[name])
    return op_def(node.op).infer(inputs, node.attrs)


def infer_shapes(graph: Graph) -> Graph:
    """``graph`` with every value's type inferred (see the module docstring)."""
    types: dict[str, TensorType] = {}
    for name in graph.inputs:
        if name not in graph.types:
            raise PassError(_PASS, f"graph input {name!r} has no type")
        types[name] = graph.types[name]
    for name, array in graph.constants.items():
        old = graph.types.get(name)
        try:
            types[name] = TensorType(array.shape, DType.of(array.dtype), old.quant if old else None)
        except ValueError as exc:
            raise PassError(_PASS, f"constant {name!r}: {exc}") from None
    for node in graph.nodes:
        try:
            inferred = infer_node(node, types)
        except OpError as exc:
            raise PassError(_PASS, f"node {node.label}: {exc}") from None
        old = graph.types.get(node.outputs[0])
        types[node.outputs[0]] = inferred.with_quant(old.quant if old else None)
    return graph.replace(types=types)

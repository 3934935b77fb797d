"""The graph invariants, checked between passes.

A graph is valid when:

- every value is defined once (SSA): by a graph input, a constant or one node output;
- nodes are in topological order: each reads only values defined before it;
- every node's op has a registry entry, its input count is within the op's arity and
  it has one output;
- every value has a type, constants' types match their arrays, and each node's output
  type is what the registry infers from its input types and attributes (the recorded
  quantization parameters are not part of the comparison);
- node names are unique and every graph output is defined;
- the accelerator regions, if any, run exactly the runs of consecutive accelerator groups
  and name only values of the graph (``regions.check_regions``).
"""

from __future__ import annotations

from .errors import GraphError, OpError
from .ir import DType, Graph, Node, TensorType
from .regions import check_regions
from .registry import op_def

__all__ = ["verify_graph"]


def _define(graph: Graph, defined: set[str], name: str, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise GraphError(f"graph {graph.name!r}: {what} must have a non-empty name, not {name!r}")
    if name in defined:
        raise GraphError(f"graph {graph.name!r}: value {name!r} is defined twice (again by {what})")
    defined.add(name)


def _type_of(graph: Graph, name: str, what: str) -> TensorType:
    try:
        return graph.types[name]
    except KeyError:
        raise GraphError(f"graph {graph.name!r}: {what} {name!r} has no type") from None


def _check_constants(graph: Graph) -> None:
    for name, array in graph.constants.items():
        t = _type_of(graph, name, "constant")
        try:
            dtype = DType.of(array.dtype)
        except ValueError as exc:
            raise GraphError(f"graph {graph.name!r}: constant {name!r}: {exc}") from None
        if t.shape != array.shape or t.dtype is not dtype:
            raise GraphError(f"graph {graph.name!r}: constant {name!r} is typed {t} but holds "
                             f"{dtype.value}{list(array.shape)}")


def _check_node(graph: Graph, node: Node, defined: set[str]) -> None:
    d = op_def(node.op)
    low, high = d.arity
    if not low <= len(node.inputs) <= high:
        count = f"{low}" if low == high else f"{low} to {high}"
        raise GraphError(f"node {node.label} must have {count} inputs, not {len(node.inputs)}")
    if len(node.outputs) != 1:
        raise GraphError(f"node {node.label} must have one output, not {len(node.outputs)}")
    for name in node.inputs:
        if name not in defined:
            raise GraphError(f"node {node.label} reads {name!r} before it is defined")
    try:
        inferred = d.infer([graph.types[name] for name in node.inputs], node.attrs)
    except OpError as exc:
        raise GraphError(f"node {node.label}: {exc}") from None
    _define(graph, defined, node.outputs[0], f"node {node.label}")
    recorded = _type_of(graph, node.outputs[0], f"output of node {node.label}")
    if recorded.shape != inferred.shape or recorded.dtype is not inferred.dtype:
        raise GraphError(f"node {node.label} output {node.outputs[0]!r} is typed {recorded}, "
                         f"but its inputs give {inferred}")


def verify_graph(graph: Graph) -> Graph:
    """``graph`` itself once every invariant holds (module docstring).

    Raises
    ------
    GraphError
        naming the first broken invariant.

    Examples
    --------
    >>> from openvta.graph.ir import DType, Graph, Node, Op, TensorType
    >>> t = TensorType(("N", 4), DType.FLOAT32)
    >>> g = Graph("g", ("x",), ("y",), (Node("r", Op.RELU, ("x",), ("y",)),), {}, {"x": t, "y": t})
    >>> verify_graph(g) is g
    True
    """
    defined: set[str] = set()
    for name in graph.inputs:
        _define(graph, defined, name, "a graph input")
        _type_of(graph, name, "input")
    for name in graph.constants:
        _define(graph, defined, name, "a constant")
    _check_constants(graph)
    seen: set[str] = set()
    for node in graph.nodes:
        if node.name in seen:
            raise GraphError(f"graph {graph.name!r}: node name {node.name!r} is used twice")
        seen.add(node.name)
        _check_node(graph, node, defined)
    if not graph.outputs:
        raise GraphError(f"graph {graph.name!r} must have at least one output")
    for name in graph.outputs:
        if name not in defined:
            raise GraphError(f"graph {graph.name!r}: output {name!r} is never defined")
    check_regions(graph)
    return graph

"""The interpreter: run a graph node by node through the registry's numpy references.

This is the living definition of the IR's semantics: a float graph runs every node's
float reference; in a quantized graph a node with integer inputs runs its integer
reference, and the float islands (Quantize, Softmax after a Dequantize, ...) their
float one.  Placement does not enter: an accelerator kernel must compute exactly what
its nodes' integer references compute.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from .errors import ExecutionError, OpError
from .ir import DType, Graph, Node
from .registry import op_def

__all__ = ["execute", "run_node", "Observer"]

Observer = Callable[[str, np.ndarray], None]


def _last_uses(graph: Graph) -> dict[str, int]:
    last: dict[str, int] = {}
    for index, node in enumerate(graph.nodes):
        for name in node.inputs:
            last[name] = index
    return last


def run_node(graph: Graph, node: Node, values: Mapping[str, np.ndarray]) -> np.ndarray:
    """``node``'s reference on its inputs in ``values`` (the integer one on integer inputs).

    Raises
    ------
    ExecutionError
        naming the node, when its kernel fails.
    """
    args = [values[name] for name in node.inputs]
    try:
        dtype = graph.types[node.inputs[0]].dtype if node.inputs else DType.FLOAT32
        kernel = op_def(node.op).kernel(dtype)
        return kernel(args, node.attrs)
    except (OpError, ValueError) as exc:
        raise ExecutionError(f"node {node.label} failed: {exc}") from None


def execute(graph: Graph, feeds: Mapping[str, np.ndarray],
            observe: Observer | None = None) -> dict[str, np.ndarray]:
    """Run ``graph`` on ``feeds`` (one array per graph input) and return its outputs.

    Parameters
    ----------
    graph :
        a verified graph.
    feeds :
        input name → array of the input's dtype and (concrete) shape; not checked here
        (``CompiledModel`` checks what users hand in).
    observe :
        called with every graph input and node output as it is made (calibration).

    Returns
    -------
    dict
        output name → array.

    Raises
    ------
    ExecutionError
        for a missing feed or a kernel that fails, naming the node.
    """
    missing = [name for name in graph.inputs if name not in feeds]
    if missing:
        raise ExecutionError(f"graph {graph.name!r} needs a value for input {missing[0]!r}")
    values: dict[str, np.ndarray] = dict(graph.constants)
    for name in graph.inputs:
        values[name] = feeds[name]
        if observe is not None:
            observe(name, feeds[name])
    last, keep = _last_uses(graph), set(graph.outputs)
    for index, node in enumerate(graph.nodes):
        result = run_node(graph, node, values)
        values[node.outputs[0]] = result
        if observe is not None:
            observe(node.outputs[0], result)
        for name in dict.fromkeys(node.inputs):
            if last.get(name) == index and name not in keep and name not in graph.constants:
                del values[name]
    return {name: values[name] for name in graph.outputs}

"""Legalization: products in the forms the accelerator's kernels take — ``dense`` a Gemm
with ``transB=1`` of a 2-D activation, ``batch_matmul`` a 3-D MatMul.

Three of :data:`~openvta.graph.passes.legalize.STEPS`, in this order: a MatMul of an N-D
activation by a constant matrix made 2-D between Reshapes (``flatten_dense``), a MatMul of
two N-D activations made 3-D (``flatten_heads``), then every MatMul of a 2-D activation by
a constant matrix, with the bias Add after it, and every Gemm with constant weights, a Gemm
with ``transB=1`` whose ``alpha`` and ``beta`` are folded into its constants
(``dense_as_gemm``).  A QDQ model's scales stay on the moved constants.  The forms are the
same for every :class:`~openvta.graph.passes.legalize.LegalizeOptions` (every
configuration's ``dense`` and ``batch_matmul`` take them), and so with ``cpu_ops``: the
integer results do not depend on the placement.

Preconditions: a float graph with types.
Postconditions: the same function (up to float rounding of the folded ``alpha`` and
``beta``); the rewritten MatMuls and Gemms write the outputs they wrote.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..ir import Attrs, DType, Graph, Node, Op, QuantParams, TensorType
from ..ops.base import float_attr
from ..rewrite import fresh
from .infer_shapes import infer_shapes

from .legalize_options import LegalizeOptions

__all__ = ["flatten_dense", "flatten_heads", "dense_as_gemm"]


def _moved_quant(quant: QuantParams | None, transposed: bool, factor: float,
                 ndim: int) -> QuantParams | None:
    """A QDQ model's quantization of a constant after a transpose, or None if rescaled."""
    if quant is None or factor != 1.0:
        return None
    if quant.axis is None or not transposed:
        return replace(quant, axis=None if quant.axis is None else quant.axis % ndim)
    return replace(quant, axis=1 - quant.axis % 2)


def _gemm_form(graph: Graph, node: Node, constants: dict[str, np.ndarray],
               used: set[str], quants: dict[str, QuantParams | None]) -> Node:
    """``node`` (MatMul or Gemm with constant 2-D weights) as Gemm with ``transB=1``.

    A QDQ model's scales stay on the new constants (``quants``) unless alpha or beta
    rescale them.
    """
    weight = constants[node.inputs[1]].astype(np.float64)
    attrs = dict(node.attrs)
    transposed = node.op is Op.MATMUL or not attrs.get("transB", 0)
    if transposed:
        weight = weight.T
    alpha = float_attr(attrs, "alpha", 1.0)
    attrs.pop("alpha", None)
    weight = weight * alpha
    inputs = [node.inputs[0], fresh(f"{node.name}.weight", used)]
    used.add(inputs[1])
    constants[inputs[1]] = weight.astype(np.float32)
    quants[inputs[1]] = _moved_quant(graph.types[node.inputs[1]].quant, transposed, alpha, 2)
    if len(node.inputs) > 2 and node.inputs[2] in constants:
        beta = float_attr(attrs, "beta", 1.0)
        attrs.pop("beta", None)
        bias = constants[node.inputs[2]] * beta
        if bias.size == weight.shape[0] and bias.ndim <= 2:
            bias = bias.reshape(-1)
        inputs.append(fresh(f"{node.name}.bias", used))
        used.add(inputs[2])
        constants[inputs[2]] = bias.astype(np.float32)
        bias_quant = graph.types[node.inputs[2]].quant
        quants[inputs[2]] = _moved_quant(bias_quant, False, beta, 1) \
            if bias.ndim == 1 and (bias_quant is None or bias_quant.axis in (None, 0, -1)) else None
    elif len(node.inputs) > 2:
        inputs.append(node.inputs[2])
    attrs["transB"] = 1
    return replace(node, op=Op.GEMM, inputs=tuple(inputs), attrs=Attrs(attrs))


def _bias_add(graph: Graph, node: Node) -> tuple[Node, str] | None:
    """The Add of a constant ``(out,)`` bias right after MatMul ``node``, and the bias name."""
    users = graph.consumers().get(node.outputs[0], [])
    if len(users) != 1 or users[0].op is not Op.ADD or node.outputs[0] in graph.outputs:
        return None
    add = users[0]
    other = add.inputs[1] if add.inputs[0] == node.outputs[0] else add.inputs[0]
    out_features = graph.types[node.outputs[0]].shape[-1]
    if other not in graph.constants or graph.constants[other].shape not in ((out_features,),
                                                                            (1, out_features)):
        return None
    return add, other


def flatten_dense(graph: Graph, options: LegalizeOptions | None = None) -> Graph:
    """``graph`` with a MatMul of an N-D activation (N ≥ 3: a transformer's ``(batch,
    tokens, features)``, every dimension static) by a constant matrix, with the bias Add
    after it, as a Reshape to 2-D, the 2-D MatMul and Add (which ``dense_as_gemm`` makes a
    Gemm: the accelerator's dense) and a Reshape back, whatever the ``options``.  With a
    symbolic batch the rows are not a static count, and the MatMul stays (a float island)."""
    used = graph.names()
    nodes: dict[str, Node | list[Node]] = {n.name: n for n in graph.nodes}
    for node in graph.nodes:
        if node.op is not Op.MATMUL:
            continue
        data = graph.types[node.inputs[0]]
        weight = graph.constants.get(node.inputs[1])
        if weight is None or weight.ndim != 2 or data.ndim < 3 or not all(isinstance(d, int) for d in data.shape):
            continue
        k, features = weight.shape
        flat, product = (fresh(f"{node.name}.{what}", used) for what in ("flat", "2d"))
        used |= {flat, product}
        last = node
        found = _bias_add(graph, node)
        chain = [Node(f"{node.name}.flatten", Op.RESHAPE, (node.inputs[0],), (flat,), Attrs({"shape": (-1, k)})),
                 replace(node, inputs=(flat, node.inputs[1]), outputs=(product,))]
        if found is not None:
            add, bias = found
            summed = fresh(f"{add.name}.2d", used)
            used.add(summed)
            chain.append(replace(add, inputs=(product, bias), outputs=(summed,)))
            product, last = summed, add
            nodes[add.name] = []
        target = tuple(int(d) for d in data.shape[:-1]) + (features,)
        chain.append(Node(f"{node.name}.unflatten", Op.RESHAPE, (product,), last.outputs, Attrs({"shape": target})))
        nodes[node.name] = chain
    if all(isinstance(v, Node) for v in nodes.values()):
        return graph
    flat_nodes = tuple(n for v in nodes.values() for n in ([v] if isinstance(v, Node) else v))
    return infer_shapes(graph.replace(nodes=flat_nodes))


def flatten_heads(graph: Graph, options: LegalizeOptions | None = None) -> Graph:
    """``graph`` with a MatMul of two activations with the same static leading dimensions
    (attention's ``(batch, heads, tokens, d)`` by ``(batch, heads, d, tokens)``) as Reshapes
    to ``(heads, M, K)`` and ``(heads, K, N)``, the 3-D MatMul (the accelerator's
    batch_matmul) and a Reshape back, whatever the ``options``.  Broadcast or symbolic
    leading dimensions leave it."""
    used = graph.names()
    nodes: dict[str, Node | list[Node]] = {n.name: n for n in graph.nodes}
    for node in graph.nodes:
        if node.op is not Op.MATMUL or any(v in graph.constants for v in node.inputs):
            continue
        a, b = (graph.types[v] for v in node.inputs)
        if a.ndim < 4 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] \
                or not all(isinstance(d, int) for d in (*a.shape, *b.shape)):
            continue  # (a static 3-D one is batch_matmul's form already)
        heads = math.prod(int(d) for d in a.shape[:-2])
        left, right, product = (fresh(f"{node.name}.{what}", used) for what in ("heads_a", "heads_b", "3d"))
        used |= {left, right, product}
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        nodes[node.name] = [
            Node(f"{node.name}.heads_a", Op.RESHAPE, (node.inputs[0],), (left,), Attrs({"shape": (heads, m, k)})),
            Node(f"{node.name}.heads_b", Op.RESHAPE, (node.inputs[1],), (right,), Attrs({"shape": (heads, k, n)})),
            replace(node, inputs=(left, right), outputs=(product,)),
            Node(f"{node.name}.unheads", Op.RESHAPE, (product,), node.outputs,
                 Attrs({"shape": tuple(int(d) for d in a.shape[:-1]) + (int(n),)}))]
    if all(isinstance(v, Node) for v in nodes.values()):
        return graph
    flat_nodes = tuple(n for v in nodes.values() for n in ([v] if isinstance(v, Node) else v))
    return infer_shapes(graph.replace(nodes=flat_nodes))


def dense_as_gemm(graph: Graph, options: LegalizeOptions | None = None) -> Graph:
    """``graph`` with every MatMul of a 2-D activation by a constant matrix, with the Add of
    a constant ``(out,)`` bias after it, and every Gemm with constant 2-D weights as a Gemm
    with ``transB=1`` (weights stored ``(out, in)``, like the accelerator's dense) and
    ``alpha`` and ``beta`` folded into its constants, whatever the ``options``."""
    constants, used = dict(graph.constants), graph.names()
    quants: dict[str, QuantParams | None] = {}
    nodes: dict[str, Node] = {n.name: n for n in graph.nodes}
    for node in graph.nodes:
        if node.op not in (Op.MATMUL, Op.GEMM) or node.inputs[1] not in constants \
                or graph.types[node.inputs[0]].ndim != 2 or constants[node.inputs[1]].ndim != 2:
            continue
        if node.op is Op.MATMUL:
            found = _bias_add(graph, node)
            if found is not None:
                add, bias = found
                node = replace(node, inputs=(*node.inputs, bias), outputs=add.outputs)
                del nodes[add.name]
        nodes[node.name] = _gemm_form(graph, node, constants, used, quants)
    types = dict(graph.types)
    types.update({k: TensorType(constants[k].shape, DType.FLOAT32, q) for k, q in quants.items()})
    return graph.replace(nodes=tuple(nodes.values()), constants=constants, types=types)

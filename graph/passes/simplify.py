"""Pass: simplify a float graph before quantization.

In order: remove Identity and Dropout (inference-time no-ops); fold constants (a node
whose inputs are all constants becomes a constant); fold a BatchNormalization into the
Conv before it (when the Conv's output feeds only it and every parameter is constant), and
a Mul or Add of a per-channel constant after a Conv likewise; run
a grouped Conv the accelerator's grouped mapping cannot take (its group sizes divide the
block: depthwise, ShuffleNet's) as a dense one with block-diagonal weights; pack
a few-channel Conv's kernel windows into channels (``Im2Col``, then a 1×1 Conv) for the
accelerator's input block;
put dense layers in one canonical form — a MatMul of a 2-D tensor by a constant matrix
becomes a Gemm, followed by a constant bias Add it absorbs, and a Gemm with constant
weights gets ``transB=1`` (weights stored ``(out, in)``, like the accelerator's dense)
with ``alpha`` and ``beta`` folded into its constants; then drop what nobody reads.

Preconditions: a float graph (no integer-graph ops) with types.
Postconditions: the same function (up to float rounding of folded constants), no
Identity or Dropout except one that copies a graph input or constant to an output.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from ..errors import OpError, PassError
from ..ir import Attrs, DType, Graph, Node, Op, QuantParams, TensorType
from ..ops.base import float_attr, int_attr
from ..registry import QUANT_OPS, op_def
from ..rewrite import fresh, prune, rename_values
from .infer_shapes import infer_shapes

__all__ = ["simplify"]

_PASS = "simplify"


def _check_float(graph: Graph) -> None:
    for node in graph.nodes:
        if node.op in QUANT_OPS or any(v not in graph.constants and graph.types[v].dtype.is_quantized
                                          and graph.types[v].quant is not None for v in node.inputs):
            raise PassError(_PASS, f"node {node.label} belongs to a quantized graph; simplify "
                                   "runs on the float graph")


def _remove_identities(graph: Graph) -> Graph:
    producers, outputs = graph.producers(), set(graph.outputs)
    mapping: dict[str, str] = {}
    kept: list[Node] = []
    for node in graph.nodes:
        if node.op not in (Op.IDENTITY, Op.DROPOUT):
            kept.append(node)
            continue
        src, dst = rename_values((node,), mapping)[0].inputs[0], node.outputs[0]
        if dst not in outputs:
            mapping[dst] = src
        elif src in producers and src not in outputs:
            mapping[src] = dst  # the producer writes the graph output's name directly
        else:
            kept.append(node)  # copies a graph input, constant or output: keep the copy
    return graph.replace(nodes=rename_values(tuple(kept), mapping))


def _fold_constants(graph: Graph) -> Graph:
    constants, types = dict(graph.constants), dict(graph.types)
    kept: list[Node] = []
    for node in graph.nodes:
        if not node.inputs or not all(v in constants for v in node.inputs):
            kept.append(node)
            continue
        try:
            kernel = op_def(node.op).kernel(DType.of(constants[node.inputs[0]].dtype))
            value = kernel([constants[v] for v in node.inputs], node.attrs)
        except OpError as exc:
            raise PassError(_PASS, f"node {node.label} cannot be folded: {exc}") from None
        constants[node.outputs[0]] = value
        types[node.outputs[0]] = TensorType(value.shape, DType.of(value.dtype))
    return graph.replace(nodes=tuple(kept), constants=constants, types=types)


def _batch_norm_source(graph: Graph, bn: Node) -> Node | None:
    """The Conv ``bn`` can be folded into, if any."""
    conv = graph.producers().get(bn.inputs[0])
    if conv is None or conv.op is not Op.CONV or bn.inputs[0] in graph.outputs:
        return None
    if [n.name for n in graph.consumers()[bn.inputs[0]]] != [bn.name]:
        return None
    if not all(v in graph.constants for v in conv.inputs[1:] + bn.inputs[1:]):
        return None
    return conv


def _new_constant(base: str, value: np.ndarray, constants: dict[str, np.ndarray], used: set[str]) -> str:
    """``value`` (as float32) under a fresh name made from ``base``, added to ``constants``."""
    name = fresh(base, used)
    used.add(name)
    constants[name] = value.astype(np.float32)
    return name


def _with_constants(graph: Graph, nodes: list[Node], constants: dict[str, np.ndarray], notes: list[str]) -> Graph:
    """``graph`` with ``nodes``, ``constants`` (the new ones typed float32) and ``notes``."""
    types = dict(graph.types)
    types.update({k: TensorType(v.shape, DType.FLOAT32) for k, v in constants.items() if k not in graph.constants})
    return graph.replace(nodes=tuple(nodes), constants=constants, types=types, notes=tuple(notes))


def _batch_norm_affine(bn: Node, constants: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A BatchNormalization's ``(gain, shift)``: ``y = gain·x + shift`` per channel."""
    scale, beta, mean, var = (constants[v].astype(np.float64) for v in bn.inputs[1:])
    gain = scale / np.sqrt(var + float_attr(bn.attrs, "epsilon", 1e-5))
    return gain, beta - mean * gain


def _scaled_inputs(node: Node, gain: np.ndarray, shift: np.ndarray, constants: dict[str, np.ndarray],
                   used: set[str]) -> tuple[str, ...]:
    """``node``'s inputs (a Conv, or a BatchNormalization) with a per-channel affine folded
    in as new constants: its weight or scale (input 1) times ``gain`` along the channels,
    its bias (input 2, zero if none) as ``bias·gain + shift``; the rest as they were."""
    weight = constants[node.inputs[1]].astype(np.float64)
    bias = constants[node.inputs[2]].astype(np.float64) if len(node.inputs) > 2 else np.zeros(weight.shape[0])
    names = [_new_constant(f"{node.name}.{role}", value, constants, used)
             for role, value in (("weight", weight * gain.reshape((-1,) + (1,) * (weight.ndim - 1))),
                                 ("bias", bias * gain + shift))]
    return (node.inputs[0], *names, *node.inputs[3:])


def _fold_batch_norms(graph: Graph) -> Graph:
    constants, used = dict(graph.constants), graph.names()
    replaced: dict[str, Node] = {}
    removed: set[str] = set()
    for bn in (n for n in graph.nodes if n.op is Op.BATCH_NORM):
        conv = _batch_norm_source(graph, bn)
        if conv is None:
            continue
        inputs = _scaled_inputs(conv, *_batch_norm_affine(bn, constants), constants, used)
        replaced[conv.name] = replace(conv, inputs=inputs, outputs=bn.outputs)
        removed.add(bn.name)
    nodes = tuple(replaced.get(n.name, n) for n in graph.nodes if n.name not in removed)
    return graph.replace(nodes=nodes, constants=constants)


def _affine_as_depthwise(graph: Graph) -> Graph:
    """A BatchNormalization of 4-D data left after the folds (DenseNet's after each Concat) as
    the per-channel affine it is: a 1×1 depthwise Conv whose weight is the gain and bias the
    shift, which the accelerator's depthwise conv2d runs with its requantization (and the
    ReLU after it); the notes say which.  Whatever the placement (``cpu_ops``, ``cpu_nodes``:
    the Conv keeps the node's name), so that the integer results do not depend on it."""
    constants, used = dict(graph.constants), graph.names()
    nodes, notes = [], list(graph.notes)
    for node in graph.nodes:
        params = node.inputs[1:]
        if node.op is not Op.BATCH_NORM or graph.types[node.inputs[0]].ndim != 4 \
                or not all(v in constants for v in params):
            nodes.append(node)
            continue
        gain, shift = _batch_norm_affine(node, constants)
        weight = _new_constant(f"{node.name}.weight", gain.reshape(-1, 1, 1, 1), constants, used)
        bias = _new_constant(f"{node.name}.bias", shift, constants, used)
        attrs = Attrs({"kernel_shape": (1, 1), "strides": (1, 1), "pads": (0, 0, 0, 0), "group": len(gain)})
        nodes.append(Node(node.name, Op.CONV, (node.inputs[0], weight, bias), node.outputs, attrs))
        notes.append(f"node {node.name}: a BatchNormalization as a 1x1 depthwise convolution (its per-channel "
                     "affine on the accelerator)")
    return _with_constants(graph, nodes, constants, notes)


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


def _scalar(graph: Graph, value: str, expected: float) -> bool:
    """``value`` is a constant scalar within 1e-4 relative of ``expected``."""
    array = graph.constants.get(value)
    return array is not None and array.size == 1 and abs(float(array.reshape(())) - expected) <= 1e-4 * abs(expected)


class _Links:
    """Producers and single consumers of a graph's values, for the fusions' pattern matches."""

    def __init__(self, graph: Graph) -> None:
        self.graph, self.producers, self.consumers = graph, graph.producers(), graph.consumers()

    def only(self, value: str) -> Node | None:
        """The one node reading ``value`` (None if several, none, or a graph output)."""
        users = self.consumers.get(value, [])
        return users[0] if len(users) == 1 and value not in self.graph.outputs else None

    def made_by(self, value: str, op: Op) -> Node | None:
        node = self.producers.get(value)
        return node if node is not None and node.op is op else None

    def split(self, node: Node) -> tuple[str, str] | None:
        """A binary node's (activation, constant) inputs, in either order."""
        a, b = node.inputs
        if b in self.graph.constants and a not in self.graph.constants:
            return a, b
        if a in self.graph.constants and b not in self.graph.constants:
            return b, a
        return None

    def by_scalar(self, node: Node | None, op: Op, expected: float) -> str | None:
        """The activation ``node`` (an ``op`` by the scalar ``expected``) applies to."""
        if node is None or node.op is not op:
            return None
        pair = self.split(node)
        if pair is None or (op is Op.DIV and node.inputs[1] != pair[1]) or not _scalar(self.graph, pair[1], expected):
            return None
        return pair[0]


def _gelu_tail(links: _Links, inner: Node, x: str) -> tuple[list[Node], Node] | None:
    """GELU's ``x·(1 + inner)·0.5`` after ``inner`` (Erf or Tanh): its nodes and the last."""
    plus = links.only(inner.outputs[0])
    if plus is None or links.by_scalar(plus, Op.ADD, 1.0) != inner.outputs[0]:
        return None
    product = links.only(plus.outputs[0])
    if product is None or product.op is not Op.MUL:
        return None
    rest = product.inputs[1] if product.inputs[0] == plus.outputs[0] else product.inputs[0]
    if rest == x:  # x·(1 + inner)·0.5
        last = links.only(product.outputs[0])
        if links.by_scalar(last, Op.MUL, 0.5) != product.outputs[0]:
            return None
        assert last is not None
        return [plus, product, last], last
    half = links.producers.get(rest)  # (x·0.5)·(1 + inner)
    if links.by_scalar(half, Op.MUL, 0.5) != x or links.only(rest) is not product:
        return None
    assert half is not None
    return [plus, half, product], product


def _gelu_erf(links: _Links, erf: Node) -> tuple[list[Node], str, str] | None:
    """``x/√2`` (Div) or ``x·(1/√2)`` (Mul) into Erf: its nodes, ``x``, the approximation."""
    scale = links.producers.get(erf.inputs[0])
    if scale is None or links.only(erf.inputs[0]) is not erf:
        return None
    x = links.by_scalar(scale, Op.DIV, math.sqrt(2.0)) or links.by_scalar(scale, Op.MUL, 1 / math.sqrt(2.0))
    return ([scale], x, "none") if x is not None else None


def _gelu_tanh(links: _Links, tanh: Node) -> tuple[list[Node], str, str] | None:
    """``√(2/π)·(x + 0.044715·x³)`` into Tanh (x³ as ``Pow(x, 3)``)."""
    outer = links.producers.get(tanh.inputs[0])
    inner_value = links.by_scalar(outer, Op.MUL, math.sqrt(2 / math.pi))
    inner = links.made_by(inner_value, Op.ADD) if inner_value is not None else None
    if inner is None or links.only(tanh.inputs[0]) is not tanh or links.only(inner.outputs[0]) is not outer:
        return None
    for x, cube_value in (inner.inputs, inner.inputs[::-1]):
        cube = links.producers.get(cube_value)
        cubed = links.by_scalar(cube, Op.MUL, 0.044715)
        power = links.made_by(cubed, Op.POW) if cubed is not None else None
        if power is not None and power.inputs[0] == x and _scalar(links.graph, power.inputs[1], 3.0) \
                and links.only(cube_value) is inner and links.only(power.outputs[0]) is cube:
            assert outer is not None and cube is not None
            return [power, cube, inner, outer], x, "tanh"
    return None


def _fuse_gelu(graph: Graph) -> Graph:
    """GELU as exporters write it — its Erf form ``x·(1 + erf(x/√2))·0.5`` (``Div`` by √2 or
    ``Mul`` by 1/√2) and its tanh form ``x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))·0.5``, the
    0.5 applied last or first — as one ``Gelu`` node, which the quantize pass computes as
    one table of its int8 codes."""
    links = _Links(graph)
    gone: set[str] = set()
    replaced: dict[str, Node] = {}
    for node in graph.nodes:
        head = _gelu_erf(links, node) if node.op is Op.ERF else \
            _gelu_tanh(links, node) if node.op is Op.TANH else None
        if head is None:
            continue
        before, x, approximate = head
        tail = _gelu_tail(links, node, x)
        if tail is None:
            continue
        chain, last = before + [node] + tail[0], tail[1]
        gone |= {n.name for n in chain}
        attrs = {"approximate": "tanh"} if approximate == "tanh" else {}
        replaced[last.name] = Node(f"{node.name}.gelu", Op.GELU, (x,), last.outputs, Attrs(attrs))
    return _replaced(graph, gone, replaced)


def _replaced(graph: Graph, gone: set[str], replaced: dict[str, Node]) -> Graph:
    if not replaced:
        return graph
    nodes = tuple(replaced.get(n.name, n) for n in graph.nodes if n.name not in gone or n.name in replaced)
    return infer_shapes(prune(graph.replace(nodes=nodes)))


def _fuse_layer_norm(graph: Graph) -> Graph:
    """LayerNorm decomposed as exporters write it — ``(x - mean) / sqrt(mean((x - mean)²) +
    ε) · γ + β`` over the last axis (ReduceMean, Sub, Pow 2, ReduceMean, Add ε, Sqrt, Div,
    then Mul γ and Add β, each optional) — as one ``LayerNormalization`` node, which the
    quantize pass computes with the integer kernel."""
    links = _Links(graph)
    gone: set[str] = set()
    replaced: dict[str, Node] = {}
    constants = dict(graph.constants)
    used = graph.names()

    def last_axis_mean(node: Node | None) -> str | None:
        if node is None or node.op is not Op.REDUCE_MEAN or len(node.inputs) != 1:
            return None
        rank = graph.types[node.inputs[0]].ndim
        axes = node.attrs.get("axes")
        if not isinstance(axes, tuple) or [a % rank for a in axes if isinstance(a, int)] != [rank - 1] \
                or int_attr(node.attrs, "keepdims", 1) != 1:
            return None
        return node.inputs[0]

    for div in graph.nodes:
        if div.op is not Op.DIV:
            continue
        centred, std_value = div.inputs
        sub, sqrt = links.made_by(centred, Op.SUB), links.made_by(std_value, Op.SQRT)
        if sub is None or sqrt is None or links.only(std_value) is not div:
            continue
        x, mean_value = sub.inputs
        mean = links.made_by(mean_value, Op.REDUCE_MEAN)
        added = links.made_by(sqrt.inputs[0], Op.ADD)
        if last_axis_mean(mean) != x or links.only(mean_value) is not sub or added is None:
            continue
        pair = links.split(added)
        variance = links.made_by(pair[0], Op.REDUCE_MEAN) if pair is not None else None
        squared = links.made_by(variance.inputs[0], Op.POW) if variance is not None else None
        if pair is None or variance is None or squared is None or last_axis_mean(variance) != squared.outputs[0] \
                or squared.inputs[0] != centred or not _scalar(graph, squared.inputs[1], 2.0) \
                or {n.name for n in links.consumers.get(centred, [])} != {squared.name, div.name} \
                or links.only(squared.outputs[0]) is not variance or links.only(variance.outputs[0]) is not added \
                or links.only(added.outputs[0]) is not sqrt or graph.constants[pair[1]].size != 1:
            continue
        assert mean is not None
        chain, last = [mean, sub, squared, variance, added, sqrt, div], div
        channels = graph.types[x].shape[-1]
        if not isinstance(channels, int):
            continue
        gamma: np.ndarray = np.ones(channels, np.float32)
        beta: np.ndarray = np.zeros(channels, np.float32)
        for op in (Op.MUL, Op.ADD):
            step = links.only(last.outputs[0])
            found = links.split(step) if step is not None and step.op is op else None
            if found is None or found[0] != last.outputs[0] or graph.constants[found[1]].size not in (1, channels):
                break
            assert step is not None
            value = np.broadcast_to(graph.constants[found[1]].astype(np.float32).reshape(-1), (channels,))
            gamma, beta = (value, beta) if op is Op.MUL else (gamma, value)
            chain.append(step)
            last = step
        names = [fresh(f"{div.name}.{what}", used) for what in ("scale", "bias")]
        used |= set(names)
        constants[names[0]], constants[names[1]] = np.array(gamma), np.array(beta)
        gone |= {n.name for n in chain}
        epsilon = float(graph.constants[pair[1]].reshape(()))
        replaced[last.name] = Node(f"{div.name}.layer_norm", Op.LAYER_NORM, (x, *names), last.outputs,
                                   Attrs({"axis": -1, "epsilon": epsilon}))
    if not replaced:
        return graph
    types = dict(graph.types)
    for name in constants.keys() - graph.constants.keys():
        types[name] = TensorType(constants[name].shape, DType.FLOAT32)
    return _replaced(graph.replace(constants=constants, types=types), gone, replaced)


def _flatten_dense(graph: Graph) -> Graph:
    """A MatMul of an N-D activation (N ≥ 3: a transformer's ``(batch, tokens, features)``,
    every dimension static) by a constant matrix, with the bias Add after it, as a Reshape
    to 2-D, the 2-D MatMul and Add (which ``_canonical_dense`` makes a Gemm: the
    accelerator's dense) and a Reshape back.  With a symbolic batch the rows are not a
    static count, and the MatMul stays (a float island)."""
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


def _flatten_heads(graph: Graph) -> Graph:
    """A MatMul of two activations with the same static leading dimensions (attention's
    ``(batch, heads, tokens, d)`` by ``(batch, heads, d, tokens)``) as Reshapes to
    ``(heads, M, K)`` and ``(heads, K, N)``, the 3-D MatMul (the accelerator's
    batch_matmul) and a Reshape back.  Broadcast or symbolic leading dimensions leave it."""
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


def _canonical_dense(graph: Graph) -> Graph:
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


def _channel_vector(value: np.ndarray, channels: int) -> np.ndarray | None:
    """``value`` as one number per output channel of an NCHW tensor, if it broadcasts so
    (a scalar, ``(C, 1, 1)``, ``(1, C, 1, 1)``); else None."""
    if value.size == 1:
        return np.full(channels, float(value.reshape(())), np.float64)
    shape = tuple(value.shape)
    if shape in ((channels, 1, 1), (1, channels, 1, 1)):
        return value.reshape(channels).astype(np.float64)
    return None


def _fold_affine(graph: Graph) -> Graph:
    """A Mul or Add of a per-channel constant right after a Conv or a BatchNormalization
    (whose output feeds only it) folded into its weights and bias, or its scale and shift
    — how some exporters write a BatchNormalization's (Inception v2, DenseNet-121: one
    CPU island instead of three where no Conv precedes); repeated, so a Mul then an Add
    both fold."""
    while True:
        constants, used = dict(graph.constants), graph.names()
        producers, consumers = graph.producers(), graph.consumers()
        found = None
        for node in graph.nodes:
            if node.op not in (Op.MUL, Op.ADD) or len(node.inputs) != 2:
                continue
            for data, other in (node.inputs, node.inputs[::-1]):
                conv = producers.get(data)
                if other not in constants or conv is None or conv.op not in (Op.CONV, Op.BATCH_NORM) \
                        or data in graph.outputs or [n.name for n in consumers[data]] != [node.name] \
                        or not all(v in constants for v in conv.inputs[1:]) or graph.types[data].ndim != 4 \
                        or graph.types[node.outputs[0]].shape != graph.types[data].shape:
                    continue
                vector = _channel_vector(constants[other], constants[conv.inputs[1]].shape[0])
                if vector is not None:
                    found = (node, conv, vector)
                    break
            if found:
                break
        if found is None:
            return graph
        node, conv, vector = found
        gain, shift = (vector, np.zeros_like(vector)) if node.op is Op.MUL else (np.ones_like(vector), vector)
        inputs = _scaled_inputs(conv, gain, shift, constants, used)
        types = dict(graph.types)
        types.update({k: TensorType(constants[k].shape, DType.FLOAT32) for k in inputs[1:3]})
        nodes = tuple(replace(conv, inputs=inputs, outputs=node.outputs) if n.name == conv.name
                      else n for n in graph.nodes if n.name != node.name)
        graph = prune(graph.replace(nodes=nodes, constants=constants, types=types))


def _dense_groups(graph: Graph, block: int | None, keep: frozenset[str]) -> Graph:
    """A grouped Conv with constant weights that the accelerator's grouped mapping cannot take
    as a dense one whose weights are block-diagonal: the accelerator's conv2d runs it, doing
    ``group`` times its MACs (the zero blocks); the notes say which.  The grouped mapping
    (``depthwise_conv2d``) takes depthwise convolutions and groups of ``c`` channels in and
    out with ``c`` dividing ``block`` (``BLOCK_IN`` where it equals ``BLOCK_OUT``; 0: none);
    ``block=None`` (convolutions on the CPU) and the nodes in ``keep`` leave every one grouped."""
    if block is None:
        return graph
    constants, used = dict(graph.constants), graph.names()
    nodes, notes = [], list(graph.notes)
    for node in graph.nodes:
        group = node.attrs.get("group", 1) if node.op is Op.CONV else 1
        weight = constants.get(node.inputs[1]) if node.op is Op.CONV else None
        if weight is None or not isinstance(group, int) or group == 1 or node.name in keep \
                or (weight.shape[1] == 1 and weight.shape[0] == group) \
                or (weight.shape[0] == weight.shape[1] * group and block and block % weight.shape[1] == 0):
            nodes.append(node)
            continue
        out_g, in_g = weight.shape[0] // group, weight.shape[1]
        dense = np.zeros((weight.shape[0], in_g * group, *weight.shape[2:]), np.float32)
        for g in range(group):
            dense[g * out_g:(g + 1) * out_g, g * in_g:(g + 1) * in_g] = weight[g * out_g:(g + 1) * out_g]
        name = _new_constant(f"{node.name}.weight", dense, constants, used)
        attrs = dict(node.attrs)
        attrs["group"] = 1
        nodes.append(replace(node, inputs=(node.inputs[0], name, *node.inputs[2:]), attrs=Attrs(attrs)))
        notes.append(f"node {node.name}: a convolution of {group} groups as a dense one with block-diagonal "
                     f"weights ({group}x its MACs)")
    return _with_constants(graph, nodes, constants, notes)


def _few_channels(graph: Graph, block_in: int, keep: frozenset[str]) -> Graph:
    """A Conv whose input channels fill less than half of the GEMM's ``block_in``-lane input
    block (a stem's 3; not grouped, constant weights, not named in ``keep``) as an
    ``Im2Col`` of its data — each output pixel's kernel window packed into ``C·KH·KW``
    channels — and a 1×1 Conv of the reshaped weights, which fills the blocks."""
    constants, used = dict(graph.constants), graph.names()
    types = dict(graph.types)
    nodes, notes = [], list(graph.notes)
    for node in graph.nodes:
        weight = constants.get(node.inputs[1]) if node.op is Op.CONV else None
        channels = graph.types[node.inputs[0]].shape[1] if weight is not None else 0
        if weight is None or node.name in keep or node.attrs.get("group", 1) != 1 \
                or not isinstance(channels, int) or 2 * channels >= block_in or weight.shape[2:] == (1, 1):
            nodes.append(node)
            continue
        out_ch, _, kh, kw = weight.shape
        cols = fresh(f"{node.inputs[0]}.{node.name}.cols", used)
        used.add(cols)
        name = _new_constant(f"{node.name}.weight", weight.reshape(out_ch, -1, 1, 1), constants, used)
        types[name] = TensorType(constants[name].shape, DType.FLOAT32)
        strides, pads = node.attrs.get("strides", (1, 1)), node.attrs.get("pads", (0, 0, 0, 0))
        assert isinstance(strides, tuple) and isinstance(pads, tuple)  # (the converter's normal form)
        attrs = {"kernel_shape": (kh, kw), "strides": strides, "pads": pads}
        nodes.append(Node(fresh(f"{node.name}.im2col", used), Op.IM2COL, (node.inputs[0],), (cols,), Attrs(attrs)))
        one = {**dict(node.attrs), "kernel_shape": (1, 1), "strides": (1, 1), "pads": (0, 0, 0, 0)}
        nodes.append(replace(node, inputs=(cols, name, *node.inputs[2:]), attrs=Attrs(one)))
        notes.append(f"node {node.name}: its {channels} input channels' {kh}x{kw} windows packed into "
                     f"{channels * kh * kw} channels on the host (im2col), then a 1x1 convolution")
    return infer_shapes(graph.replace(nodes=tuple(nodes), constants=constants, types=types, notes=tuple(notes)))


def simplify(graph: Graph, block_in: int | None = None, keep: frozenset[str] = frozenset(),
             grouped: int | None = None, affine: bool = False) -> Graph:
    """The simplified graph (see the module docstring); with ``block_in``, few-channel
    convolutions (not in ``keep``) packed for a GEMM of that many input lanes; with
    ``grouped``, the grouped convolutions the accelerator's grouped mapping cannot take (its
    group sizes divide ``grouped``; 0: none) made dense, block-diagonal; with ``affine``, a
    BatchNormalization no Conv precedes made a 1×1 depthwise Conv."""
    _check_float(graph)
    graph = _remove_identities(graph)  # Identity, Dropout: no-ops at inference
    graph = _fold_constants(graph)  # all-constant nodes → constants
    graph = _fold_batch_norms(graph)  # Conv + BatchNormalization → Conv
    graph = _fold_affine(graph)  # Conv + Mul/Add of a per-channel constant → Conv
    if affine:
        graph = _affine_as_depthwise(graph)  # a BatchNormalization left → a 1×1 depthwise Conv
    graph = _dense_groups(graph, grouped, keep)  # other grouped Convs → dense, block-diagonal weights
    graph = _fuse_gelu(graph)  # x·(1 + erf(x/√2))·0.5, its tanh form → Gelu
    graph = _fuse_layer_norm(graph)  # ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add → LayerNorm
    graph = _flatten_dense(graph)  # an N-D activation's MatMul by a matrix → Reshape, 2-D MatMul, Reshape
    graph = _flatten_heads(graph)  # two activations' N-D MatMul → Reshapes, the 3-D MatMul per head, Reshape
    graph = _canonical_dense(graph)  # MatMul (+ bias Add) / Gemm → Gemm, weights (out, in)
    if block_in is not None:
        graph = _few_channels(infer_shapes(graph), block_in, keep)  # a stem's window into channels
    return infer_shapes(prune(graph))

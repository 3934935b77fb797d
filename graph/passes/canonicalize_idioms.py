"""Canonicalization: GELU and LayerNorm as exporters decompose them, fused back into one node.

Two of :data:`~openvta.graph.passes.canonicalize.STEPS`.  PyTorch and TensorFlow write
GELU and LayerNorm as chains of element-wise ops and reductions; one node each is what the
quantize pass computes as one integer kernel (a table of GELU's int8 codes, LayerNorm's
integer kernel) instead of a float island of seven to eleven nodes.

Preconditions: a float graph with types.
Postconditions: the same function; each matched chain one ``Gelu`` or
``LayerNormalization`` node writing the chain's last output, what nobody reads dropped.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import Attrs, DType, Graph, Node, Op, TensorType
from ..ops.base import int_attr
from ..rewrite import fresh, prune
from .infer_shapes import infer_shapes

__all__ = ["fuse_gelu", "fuse_layer_norm"]


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


def fuse_gelu(graph: Graph) -> Graph:
    """``graph`` with GELU as exporters write it — its Erf form ``x·(1 + erf(x/√2))·0.5`` (``Div`` by √2 or
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
    """``graph`` with the nodes ``gone`` removed, but those ``replaced`` (by name) replaced
    in place; what nobody reads dropped, the types inferred."""
    if not replaced:
        return graph
    nodes = tuple(replaced.get(n.name, n) for n in graph.nodes if n.name not in gone or n.name in replaced)
    return infer_shapes(prune(graph.replace(nodes=nodes)))


def _last_axis_mean(graph: Graph, node: Node | None) -> str | None:
    """What ``node`` averages, if it is a ReduceMean over the last axis keeping it."""
    if node is None or node.op is not Op.REDUCE_MEAN or len(node.inputs) != 1:
        return None
    rank = graph.types[node.inputs[0]].ndim
    axes = node.attrs.get("axes")
    if not isinstance(axes, tuple) or [a % rank for a in axes if isinstance(a, int)] != [rank - 1] \
            or int_attr(node.attrs, "keepdims", 1) != 1:
        return None
    return node.inputs[0]


def _normalization(links: _Links, div: Node) -> tuple[list[Node], str, str] | None:
    """``(x - mean) / sqrt(mean((x - mean)²) + ε)`` ending in ``div``: its seven nodes from
    the first ReduceMean, ``x`` and the constant ``ε``."""
    graph = links.graph
    centred, std_value = div.inputs
    sub, sqrt = links.made_by(centred, Op.SUB), links.made_by(std_value, Op.SQRT)
    if sub is None or sqrt is None or links.only(std_value) is not div:
        return None
    x, mean_value = sub.inputs
    mean = links.made_by(mean_value, Op.REDUCE_MEAN)
    added = links.made_by(sqrt.inputs[0], Op.ADD)
    if _last_axis_mean(graph, mean) != x or links.only(mean_value) is not sub or added is None:
        return None
    pair = links.split(added)
    variance = links.made_by(pair[0], Op.REDUCE_MEAN) if pair is not None else None
    squared = links.made_by(variance.inputs[0], Op.POW) if variance is not None else None
    if pair is None or variance is None or squared is None or _last_axis_mean(graph, variance) != squared.outputs[0] \
            or squared.inputs[0] != centred or not _scalar(graph, squared.inputs[1], 2.0) \
            or {n.name for n in links.consumers.get(centred, [])} != {squared.name, div.name} \
            or links.only(squared.outputs[0]) is not variance or links.only(variance.outputs[0]) is not added \
            or links.only(added.outputs[0]) is not sqrt or graph.constants[pair[1]].size != 1:
        return None
    assert mean is not None
    return [mean, sub, squared, variance, added, sqrt, div], x, pair[1]


def _gain_and_shift(links: _Links, chain: list[Node], channels: int) -> tuple[np.ndarray, np.ndarray]:
    """The Mul by γ and the Add of β after ``chain``'s last node, each optional (appended to
    ``chain`` when there): ``(γ, β)``, ones and zeros for those not there."""
    gamma: np.ndarray = np.ones(channels, np.float32)
    beta: np.ndarray = np.zeros(channels, np.float32)
    for op in (Op.MUL, Op.ADD):
        last = chain[-1]
        step = links.only(last.outputs[0])
        found = links.split(step) if step is not None and step.op is op else None
        if found is None or found[0] != last.outputs[0] or links.graph.constants[found[1]].size not in (1, channels):
            break
        assert step is not None
        value = np.broadcast_to(links.graph.constants[found[1]].astype(np.float32).reshape(-1), (channels,))
        gamma, beta = (value, beta) if op is Op.MUL else (gamma, value)
        chain.append(step)
    return gamma, beta


def fuse_layer_norm(graph: Graph) -> Graph:
    """``graph`` with LayerNorm decomposed as exporters write it — ``(x - mean) /
    sqrt(mean((x - mean)²) + ε) · γ + β`` over the last axis (ReduceMean, Sub, Pow 2,
    ReduceMean, Add ε, Sqrt, Div, then Mul γ and Add β, each optional), ``x``'s last
    dimension static — as one ``LayerNormalization`` node, which the quantize pass computes
    with the integer kernel."""
    links = _Links(graph)
    gone: set[str] = set()
    replaced: dict[str, Node] = {}
    constants = dict(graph.constants)
    used = graph.names()
    for div in graph.nodes:
        found = _normalization(links, div) if div.op is Op.DIV else None
        channels = graph.types[found[1]].shape[-1] if found is not None else None
        if found is None or not isinstance(channels, int):
            continue
        chain, x, epsilon = found
        gamma, beta = _gain_and_shift(links, chain, channels)
        names = [fresh(f"{div.name}.{what}", used) for what in ("scale", "bias")]
        used |= set(names)
        constants[names[0]], constants[names[1]] = np.array(gamma), np.array(beta)
        gone |= {n.name for n in chain}
        replaced[chain[-1].name] = Node(f"{div.name}.layer_norm", Op.LAYER_NORM, (x, *names), chain[-1].outputs,
                                        Attrs({"axis": -1, "epsilon": float(graph.constants[epsilon].reshape(()))}))
    if not replaced:
        return graph
    types = dict(graph.types)
    for name in constants.keys() - graph.constants.keys():
        types[name] = TensorType(constants[name].shape, DType.FLOAT32)
    return _replaced(graph.replace(constants=constants, types=types), gone, replaced)

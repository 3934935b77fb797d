"""Mixed precision by measured sensitivity: which products' activations are 16-bit.

Each candidate — the data input or the output of a Conv or Gemm with constant weights —
is quantized alone to int8 at its calibrated scale (rounded and clipped to ±127 steps, or
to its 256 codes at the zero point -128) in the float graph, every other value float, on
the calibration samples; its *sensitivity* is the mean square it adds to the model's
outputs, relative to theirs (the inverse of an SQNR at the output).  Making a value
16-bit makes its producing product's output and its reading products' inputs wide, which
costs int8 passes of the accelerator
(:class:`~openvta.graph.ir.Precision`: a wide output one more, a wide input two more).
The cost of a choice is counted in cycles, ``Σ cycles × passes`` over the products, each
product's cycles its kernel's in the all-int8 build on the cycle model (MACs where the
cycle model is not installed), against the all-int8 model's; the values are taken
greedily by sensitivity per added cycle while the total stays within ``budget`` times the
all-int8 one, and only values that add at least :data:`MIN_SHARE` of the total
sensitivity.

Examples
--------
>>> choose_wide({"a": 4.0, "b": 1.0, "c": 0.001}, {"a": 10, "b": 1, "c": 1}, 100, 1.05)
['b']
>>> choose_wide({"a": 4.0, "b": 1.0, "c": 0.001}, {"a": 10, "b": 1, "c": 1}, 100, 1.2)
['b', 'a']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from openvta.isa import INT8_MAX, INT8_MIN

from .execute import run_node
from .ir import DType, Graph, Node, Op
from .ops.base import ScaleRule
from .registry import op_def

__all__ = ["DEFAULT_BUDGET", "MIN_SHARE", "SAMPLES", "choose_wide", "product_macs", "scale_groups",
           "sensitivities", "wide_values"]

#: The default cycle budget of ``precision="auto"``: at most this many times the all-int8 model's cycles.
DEFAULT_BUDGET = 1.25
#: A value is made wide only if it adds at least this share of the summed sensitivity.
MIN_SHARE = 0.01
#: Calibration samples the sensitivities are measured on (the first ones; EfficientNet-B0's
#: 157 groups take 22 s a sample).
SAMPLES = 2


def is_product(node: Node, graph: Graph) -> bool:
    """A Conv or Gemm with constant weights and a computed input: what mixed precision widens."""
    return node.op in (Op.CONV, Op.GEMM) and len(node.inputs) >= 2 and node.inputs[1] in graph.constants \
        and node.inputs[0] not in graph.constants


def product_macs(node: Node, graph: Graph) -> int:
    """``node``'s multiply-accumulates (its op's count)."""
    inputs = [graph.types[v] for v in node.inputs]
    return int(op_def(node.op).macs(inputs, graph.types[node.outputs[0]], node.attrs))


def _root(graph: Graph, value: str, producers: Mapping[str, Node]) -> str:
    """The value whose scale ``value`` keeps (through ReLUs, pooling, reshapes), or ``value``."""
    while (maker := producers.get(value)) is not None and op_def(maker.op).scale_rule is ScaleRule.PRESERVE \
            and maker.inputs and maker.inputs[0] not in graph.constants:
        value = maker.inputs[0]
    return value


def scale_groups(graph: Graph) -> dict[str, list[str]]:
    """Each candidate's group, by its root: the values of one scale (a product's output, the
    ReLU after it, the pooling after that), made wide together; the candidates are the
    groups holding a product's data input or output."""
    producers = graph.producers()
    groups: dict[str, list[str]] = {}
    for name in list(graph.inputs) + [n.outputs[0] for n in graph.nodes]:
        if graph.types[name].dtype is DType.FLOAT32 and graph.types[name].quant is not None:
            groups.setdefault(_root(graph, name, producers), []).append(name)
    touched = {v for node in graph.nodes if is_product(node, graph) for v in (node.inputs[0], node.outputs[0])}
    return {root: members for root, members in groups.items() if touched.intersection(members)}


def sensitivities(graph: Graph, feeds: Sequence[Mapping[str, np.ndarray]], values: Sequence[str]
                  ) -> dict[str, float]:
    """Each value's sensitivity (module docstring), on at most :data:`SAMPLES` feeds: the
    graph re-run from the value's producer on, with the value alone quantized."""
    position = {node.outputs[0]: index for index, node in enumerate(graph.nodes)}
    totals = dict.fromkeys(values, 0.0)
    signal = 0.0
    for feed in feeds[:SAMPLES]:
        base: dict[str, np.ndarray] = dict(graph.constants)
        base.update(feed)
        for node in graph.nodes:
            base[node.outputs[0]] = run_node(graph, node, base)
        outputs = [base[name].astype(np.float64) for name in graph.outputs]
        signal += sum(float(np.sum(o * o)) for o in outputs)
        for value in values:
            quant = graph.types[value].quant
            assert quant is not None
            step, zero = quant.scale[0], quant.zero_point  # (-128: a non-negative value on 255 steps)
            low = -INT8_MAX if not zero else INT8_MIN - zero
            changed = dict(base)
            changed[value] = (np.clip(np.rint(base[value] / step), low, INT8_MAX - zero) * step).astype(np.float32)
            for node in graph.nodes[position.get(value, -1) + 1:]:
                changed[node.outputs[0]] = run_node(graph, node, changed)
            totals[value] += sum(float(np.sum((changed[name].astype(np.float64) - o) ** 2))
                                 for name, o in zip(graph.outputs, outputs))
    return {value: total / max(signal, 1e-30) for value, total in totals.items()}


def choose_wide(sensitivity: Mapping[str, float], cost: Mapping[str, int], base: int, budget: float) -> list[str]:
    """The values made wide, in the order chosen: greedily by sensitivity per added cost
    while the total stays within ``budget × base``, each adding at least
    :data:`MIN_SHARE` of the summed sensitivity (module docstring)."""
    total = sum(sensitivity.values())
    spent, chosen = float(base), []
    for value in sorted(sensitivity, key=lambda v: -sensitivity[v] / max(cost[v], 1)):
        if total <= 0 or sensitivity[value] < MIN_SHARE * total:
            continue
        if spent + cost[value] <= budget * base:
            spent += cost[value]
            chosen.append(value)
    return chosen


def wide_values(graph: Graph, feeds: Sequence[Mapping[str, np.ndarray]], budget: float,
                costs: Mapping[str, int] | None = None) -> set[str]:
    """The values made 16-bit within ``budget`` (module docstring): whole scale groups.
    ``costs``: each product's cycles in the all-int8 build by node name (a product not
    there, on the CPU, costs none); without them, its MACs."""
    products = [node for node in graph.nodes if is_product(node, graph)]
    if costs is None:
        work = {node.name: product_macs(node, graph) for node in products}
    else:
        work = {node.name: int(costs.get(node.name, 0)) for node in products}
    base = sum(work.values())
    groups = scale_groups(graph)
    if not groups or base <= 0:
        return set()
    cost = {}
    for root, members in groups.items():
        inside = set(members)
        cost[root] = sum(work[n.name] * ((2 if n.inputs[0] in inside else 0) + (1 if n.outputs[0] in inside else 0))
                         for n in products)
    chosen = choose_wide(sensitivities(graph, feeds, list(groups)), cost, base, budget)
    return {member for root in chosen for member in groups[root]}

"""Pass: correct biases — take the mean error int8 weights make out of each product's bias.

Empirical bias correction (Nagel et al., "Data-Free Quantization Through Weight
Equalization and Bias Correction", 2019, §4.2, with the calibration samples for the
expectation): a Conv's or Gemm's int8 weights ``W_q`` (dequantized: what the integer
product computes, ``quantization.quantize_weights`` per output channel) differ from ``W``
by ``ΔW``, so its outputs shift by ``ΔW·x``, whose mean over the samples and positions is
not zero where ``x`` is not (after a ReLU: always).  The bias becomes ``b − E[ΔW·x]`` per
output channel, ``x`` the float model's input to the node; a product without a bias gets
one.  Depthwise convolutions, nine weights a channel, gain most.

Preconditions: a float graph, calibration feeds.  Postconditions: the same graph, each
product with constant weights given its corrected bias (a new constant).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from ..execute import execute, run_node
from ..ir import Graph, Node, Op, RequantMode, TensorType
from ..quantization import quantize_weights
from .quantize_builder import channel_axis

__all__ = ["correct_biases"]


def _weight_error(node: Node, weight: np.ndarray, mode: RequantMode) -> np.ndarray:
    w_axis = channel_axis(node)[0]
    codes, scales = quantize_weights(weight, w_axis, mode)
    shape = [1] * weight.ndim
    shape[w_axis] = len(scales)
    return (codes.astype(np.float64) * scales.reshape(shape) - weight.astype(np.float64)).astype(np.float32)


def _products(graph: Graph) -> list[Node]:
    found = []
    for node in graph.nodes:
        if node.op not in (Op.CONV, Op.GEMM) or len(node.inputs) < 2 or node.inputs[1] not in graph.constants \
                or node.inputs[0] in graph.constants:
            continue
        channels = graph.constants[node.inputs[1]].shape[channel_axis(node)[0]]
        if len(node.inputs) > 2 and (node.inputs[2] not in graph.constants
                                     or graph.constants[node.inputs[2]].shape != (channels,)):
            continue  # a bias the quantize pass does not take as one: left as it is
        found.append(node)
    return found


def correct_biases(graph: Graph, feeds: Sequence[Mapping[str, np.ndarray]], mode: RequantMode) -> Graph:
    """The graph with each product's bias corrected for its int8 weights' mean error
    (module docstring)."""
    products = _products(graph)
    if not products or mode is RequantMode.EXACT:
        return graph
    errors = {node.name: _weight_error(node, graph.constants[node.inputs[1]], mode) for node in products}
    readers: dict[str, list[Node]] = {}
    for node in products:
        readers.setdefault(node.inputs[0], []).append(node)
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}

    def observe(name: str, value: np.ndarray) -> None:
        for node in readers.get(name, []):
            probe = replace(node, inputs=node.inputs[:2])
            shift = run_node(graph, probe, {node.inputs[0]: value, node.inputs[1]: errors[node.name]})
            axis = channel_axis(node)[1] % shift.ndim
            moved = np.moveaxis(shift.astype(np.float64), axis, 0).reshape(shift.shape[axis], -1)
            sums[node.name] = sums.get(node.name, 0) + moved.sum(axis=1)
            counts[node.name] = counts.get(node.name, 0) + moved.shape[1]

    for feed in feeds:
        execute(graph, feed, observe)
    constants, types, nodes = dict(graph.constants), dict(graph.types), []
    by_name = {node.name: node for node in products}
    for node in graph.nodes:
        if node.name not in by_name or node.name not in sums:
            nodes.append(node)
            continue
        mean = sums[node.name] / counts[node.name]
        channels = len(mean)
        bias = graph.constants[node.inputs[2]].astype(np.float64) if len(node.inputs) > 2 else np.zeros(channels)
        name = f"{node.name}.bias.corrected"
        constants[name] = (bias - mean).astype(np.float32)
        types[name] = TensorType((channels,), types[node.inputs[1]].dtype)
        nodes.append(replace(node, inputs=(node.inputs[0], node.inputs[1], name)))
    return graph.replace(nodes=tuple(nodes), constants=constants, types=types)

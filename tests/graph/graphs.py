"""Hand-built graphs for the pass tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from openvta.graph.verify import verify_graph
from openvta.graph.ir import Attrs, DType, Graph, Node, Op, TensorType
from openvta.graph.passes.infer_shapes import infer_shapes

__all__ = ["build", "node", "conv_relu_graph", "residual_graph", "RNG"]

RNG = np.random.default_rng(1234)


def node(name: str, op: Op, inputs: Sequence[str], output: str, **attrs: object) -> Node:
    return Node(name, op, tuple(inputs), (output,), Attrs(attrs))


def build(nodes: Sequence[Node], inputs: Mapping[str, tuple[int | str, ...]],
          outputs: Sequence[str], constants: Mapping[str, np.ndarray] | None = None,
          name: str = "g") -> Graph:
    """A float graph with typed inputs; every other type inferred, then verified."""
    types = {k: TensorType(v, DType.FLOAT32) for k, v in inputs.items()}
    graph = Graph(name, tuple(inputs), tuple(outputs), tuple(nodes), dict(constants or {}), types)
    return verify_graph(infer_shapes(graph))


def _weights(*shape: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    fan_in = int(np.prod(shape[1:]))
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)


def conv_relu_graph(channels: int = 16, size: int = 6) -> Graph:
    """conv 3x3 (channels → channels) + bias + ReLU, then a dense layer to 4 logits."""
    consts = {"w": _weights(channels, channels, 3, 3), "b": _weights(channels, seed=1),
              "fw": _weights(4, channels * size * size, seed=2), "fb": _weights(4, seed=3)}
    nodes = [node("conv", Op.CONV, ("x", "w", "b"), "c", pads=(1, 1, 1, 1)),
             node("relu", Op.RELU, ("c",), "r"),
             node("flat", Op.FLATTEN, ("r",), "f"),
             node("fc", Op.GEMM, ("f", "fw", "fb"), "y", transB=1)]
    return build(nodes, {"x": ("N", channels, size, size)}, ("y",), consts, "conv_relu")


def residual_graph(channels: int = 16, size: int = 4) -> Graph:
    """conv+relu → a → conv+relu → conv → add(a) → relu: a ResNet basic block without BN."""
    consts = {"w0": _weights(channels, channels, 1, 1, seed=4), "b0": _weights(channels, seed=5),
              "w1": _weights(channels, channels, 3, 3), "b1": _weights(channels, seed=1),
              "w2": _weights(channels, channels, 3, 3, seed=2), "b2": _weights(channels, seed=3)}
    nodes = [node("conv0", Op.CONV, ("x", "w0", "b0"), "c0"),
             node("relu0", Op.RELU, ("c0",), "a"),
             node("conv1", Op.CONV, ("a", "w1", "b1"), "c1", pads=(1, 1, 1, 1)),
             node("relu1", Op.RELU, ("c1",), "r1"),
             node("conv2", Op.CONV, ("r1", "w2", "b2"), "c2", pads=(1, 1, 1, 1)),
             node("add", Op.ADD, ("c2", "a"), "s"),
             node("relu2", Op.RELU, ("s",), "y")]
    return build(nodes, {"x": ("N", channels, size, size)}, ("y",), consts, "residual")

"""partition: the registry's predicates, cpu_ops, and the element-wise follow rule."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import build, conv_relu_graph, node

from openvta.graph.ir import Graph, Op, RequantMode
from openvta.graph.passes.calibrate import calibrate
from openvta.graph.passes.partition import parse_cpu_ops, partition
from openvta.graph.passes.quantize import quantize
from openvta.isa import Config, preset


def _int_graph(g: Graph, shape: tuple[int, ...]) -> Graph:
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return quantize(calibrate(g, [{"x": x}], RequantMode.FIXED), RequantMode.FIXED)


def _placements(g: Graph) -> dict[str, tuple[str, str]]:
    return {n.name: (n.placement.device.value, n.placement.reason) for n in g.nodes}


def test_conv_dense_and_their_tails_go_to_the_accelerator(cfg: Config) -> None:
    placed = _placements(partition(_int_graph(conv_relu_graph(), (2, 16, 6, 6)), cfg))
    assert {k for k, (d, _) in placed.items() if d == "accel"} == {
        "conv", "conv.requantize", "relu", "fc", "fc.requantize"}
    assert placed["conv"][1] == "int8 conv2d 3x3/1, 16->16 channels"
    assert placed["flat"] == ("cpu", "a change of shape runs on the CPU between accelerator regions")
    assert placed["x.quantize"] == ("cpu", "float data is quantized on the CPU")


def test_cpu_ops_force_ops_and_the_tails_that_follow_them() -> None:
    placed = _placements(partition(_int_graph(conv_relu_graph(), (2, 16, 6, 6)), preset("default"),
                                   ["Conv", Op.GEMM]))
    assert placed["conv"] == ("cpu", "Conv forced to the CPU by cpu_ops")
    assert placed["fc"] == ("cpu", "Gemm forced to the CPU by cpu_ops")
    assert placed["relu"] == ("cpu", "element-wise op with no accelerator node before it")
    assert all(d == "cpu" for d, _ in placed.values())


def test_a_float_graph_stays_on_the_cpu() -> None:
    placed = _placements(partition(conv_relu_graph(), preset("default")))
    assert placed["conv"] == ("cpu", "not quantized (float32 data)")
    assert placed["relu"] == ("cpu", "not quantized (float32 data)")


@pytest.mark.parametrize(("channels", "attrs", "reason"), [
    (1, {}, "1 input channels fill less than half of a 16-lane input block"),
    (16, {"group": 16, "strides": (2, 1)}, "the accelerator's depthwise conv2d needs a square kernel, "
                                           "one stride and the same padding on every side"),
    (16, {"strides": (1, 2)}, "the accelerator's conv2d needs a square kernel, one stride "
                              "and the same padding on every side"),
])
def test_conv_predicate_reasons(channels: int, attrs: dict, reason: str) -> None:
    w = np.ones((16, 1 if attrs.get("group") else channels, 3, 3), np.float32)
    g = build([node("conv", Op.CONV, ("x", "w"), "y", **attrs)], {"x": ("N", channels, 6, 6)},
              ("y",), {"w": w})
    placed = _placements(partition(_int_graph(g, (2, channels, 6, 6)), preset("default")))
    assert placed["conv"] == ("cpu", reason)


def test_a_conv_too_large_for_the_buffers_stays_on_the_cpu() -> None:
    w = np.ones((4, 4, 17, 17), np.float32)  # one 17x17 window is more than tiny's 256 inputs
    g = build([node("conv", Op.CONV, ("x", "w"), "y")], {"x": ("N", 4, 20, 20)}, ("y",), {"w": w})
    placed = _placements(partition(_int_graph(g, (1, 4, 20, 20)), preset("tiny")))
    assert placed["conv"][0] == "cpu"
    assert placed["conv"][1].startswith("no conv2d tiling fits the buffers (plan conv2d: ")


def test_cpu_ops_errors() -> None:
    assert parse_cpu_ops(["Softmax", Op.ADD]) == {Op.SOFTMAX, Op.ADD}
    with pytest.raises(ValueError, match=r"^cpu_ops entries must be op types \(Add, AveragePool, .*"
                                         r"Unsqueeze\), not 'LSTM'$"):
        parse_cpu_ops(["LSTM"])
    with pytest.raises(ValueError, match=r"^cpu_ops entries must be op types .*, not 'Quantize'$"):
        parse_cpu_ops(["Quantize"])
    with pytest.raises(ValueError, match=r"^cpu_ops must be a collection of op types, not the "
                                         r"string 'Conv'$"):
        parse_cpu_ops("Conv")


def test_a_conv_the_compilers_factory_refuses_says_why() -> None:
    w = np.ones((16, 16, 1, 1), np.float32)  # a 1x1 kernel with padding: pad must be < kernel
    g = build([node("conv", Op.CONV, ("x", "w"), "y", pads=(1, 1, 1, 1))], {"x": ("N", 16, 4, 4)},
              ("y",), {"w": w})
    placed = _placements(partition(_int_graph(g, (1, 16, 4, 4)), preset("default")))
    assert placed["conv"] == ("cpu", "the compiler's conv2d cannot take it: conv2d pad must be less "
                                     "than the kernel (1), not 1")


def test_cpu_nodes_force_single_nodes() -> None:
    g = _int_graph(conv_relu_graph(), (2, 16, 6, 6))
    placed = _placements(partition(g, preset("default"), cpu_nodes=["fc", "relu"]))
    assert placed["fc"] == placed["relu"] == ("cpu", "forced to the CPU by cpu_nodes")
    assert placed["conv"][0] == placed["conv.requantize"][0] == "accel"
    with pytest.raises(ValueError, match=r"^cpu_nodes entries must name nodes of the model \(conv, "
                                         r".*\), not 'conv9'$"):
        partition(g, preset("default"), cpu_nodes=["conv9"])

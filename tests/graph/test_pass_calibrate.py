"""calibrate: per-tensor int8 scales from observed ranges."""

from __future__ import annotations

import math

import numpy as np
import pytest
from graphs import build, conv_relu_graph, node

from openvta.graph.errors import PassError
from openvta.graph.execute import execute
from openvta.graph.ir import DType, Graph, Op, RequantMode, TensorType
from openvta.graph.passes.calibrate import calibrate, observed_ranges
from openvta.graph.quantization import choose_scale


def _scale(graph: Graph, name: str) -> float:
    quant = graph.types[name].quant
    assert quant is not None and quant.axis is None
    return quant.scale[0]


def test_scales_come_from_the_range_and_relu_users_need_only_the_positive_part() -> None:
    g = conv_relu_graph()
    x = np.random.default_rng(0).standard_normal((8, 16, 6, 6)).astype(np.float32)
    seen: dict[str, np.ndarray] = {}
    execute(g, {"x": x}, lambda name, value: seen.setdefault(name, value))
    c = calibrate(g, [{"x": x[:4]}, {"x": x[4:]}], RequantMode.FIXED)
    assert _scale(c, "x") == pytest.approx(np.abs(x).max() / 127)
    assert _scale(c, "c") == pytest.approx(seen["c"].max() / 127)  # read only by the ReLU
    assert _scale(c, "y") == pytest.approx(np.abs(seen["y"]).max() / 127)
    assert _scale(c, "r") == _scale(c, "f") == _scale(c, "c")  # ReLU, Flatten keep the scale
    assert all(c.types[k].quant is None for k in c.constants)


def test_pow2_scales_are_powers_of_two_that_cover_the_range() -> None:
    g = conv_relu_graph()
    x = np.random.default_rng(1).standard_normal((4, 16, 6, 6)).astype(np.float32)
    ranges = observed_ranges(g, [{"x": x}])
    c = calibrate(g, [{"x": x}], RequantMode.POW2)
    for name in ("x", "y"):
        scale = _scale(c, name)
        assert math.log2(scale) == int(math.log2(scale))
        assert 127 * scale >= max(abs(v) for v in ranges[name]) > 63 * scale
    assert choose_scale(0.0, RequantMode.FIXED) > 0


def test_clip_with_a_nonnegative_floor_counts_as_positive_only() -> None:
    g = build([node("clip", Op.CLIP, ("x",), "y", min=0.0, max=0.5)], {"x": (4,)}, ("y",))
    c = calibrate(g, [{"x": np.array([-3, 0.2, 1, 2], np.float32)}], RequantMode.FIXED)
    assert _scale(c, "x") == pytest.approx(0.5 / 127) and _scale(c, "y") == _scale(c, "x")


def test_a_graph_output_keeps_its_negative_range_even_when_a_relu_reads_it() -> None:
    g = build([node("relu", Op.RELU, ("x",), "y")], {"x": (3,)}, ("x", "y"))
    c = calibrate(g, [{"x": np.array([-4.0, 1.0, 2.0], np.float32)}], RequantMode.FIXED)
    assert _scale(c, "x") == pytest.approx(4 / 127)


def test_calibrate_errors() -> None:
    g = conv_relu_graph()
    with pytest.raises(PassError, match=r"^calibrate: needs at least one calibration feed, not none$"):
        calibrate(g, [], RequantMode.FIXED)
    q = Graph("g", ("x",), ("y",), (node("q", Op.QUANTIZE, ("x",), "y", scale=0.1),), {},
              {"x": TensorType((2,), DType.FLOAT32), "y": TensorType((2,), DType.INT8)})
    with pytest.raises(PassError, match=r"^calibrate: node 'q' \(Quantize\) belongs to a quantized "
                                        r"graph; calibrate runs on the float graph$"):
        calibrate(q, [{"x": np.zeros(2, np.float32)}], RequantMode.FIXED)
    with pytest.raises(PassError, match=r"^calibrate: value 'x' was never computed on the "
                                        r"calibration data$"):
        calibrate(g, [{"x": np.zeros((0, 16, 6, 6), np.float32)}], RequantMode.FIXED)

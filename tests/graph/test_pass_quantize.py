"""quantize: the integer graph, its structure, its accuracy, float islands and errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
from graphs import build, conv_relu_graph, node, residual_graph

from openvta.graph.errors import PassError
from openvta.graph.execute import execute
from openvta.graph.verify import verify_graph
from openvta.graph.ir import DType, Graph, Op, QuantParams, RequantMode
from openvta.graph.passes.calibrate import calibrate
from openvta.graph.passes.quantize import quantize

MODES = [RequantMode.FIXED, RequantMode.POW2]  # exact: test_qdq.py (QDQ models)


def _quantized(g: Graph, mode: RequantMode, x: np.ndarray) -> Graph:
    return verify_graph(quantize(calibrate(g, [{"x": x}], mode), mode))


def _relative_error(g: Graph, q: Graph, x: np.ndarray) -> float:
    expected = execute(g, {"x": x})[g.outputs[0]]
    got = execute(q, {"x": x})[g.outputs[0]]
    assert got.dtype == np.float32 and got.shape == expected.shape
    return float(np.abs(got - expected).max() / np.abs(expected).max())


@pytest.mark.parametrize("mode", MODES)
def test_conv_relu_dense(mode: RequantMode) -> None:
    g = conv_relu_graph()
    x = np.random.default_rng(0).standard_normal((16, 16, 6, 6)).astype(np.float32)
    q = _quantized(g, mode, x)
    assert [n.op for n in q.nodes] == [Op.QUANTIZE, Op.CONV, Op.REQUANTIZE, Op.RELU, Op.FLATTEN,
                                       Op.GEMM, Op.REQUANTIZE, Op.DEQUANTIZE]
    assert q.inputs == ("x",) and q.outputs == ("y",) and q.types["y"].dtype is DType.FLOAT32
    conv = q.node("conv")
    assert [q.types[v].dtype for v in conv.inputs] == [DType.INT8, DType.INT8, DType.INT32]
    assert q.types[conv.outputs[0]].dtype is DType.INT32
    weight = q.types[conv.inputs[1]].quant
    assert weight is not None and weight.axis == 0 and len(weight.scale) == 16
    peaks = np.abs(q.constants[conv.inputs[1]].reshape(16, -1)).max(axis=1)
    assert (peaks == 127).all() if mode is RequantMode.FIXED else (peaks > 63).all()
    assert _relative_error(g, q, x) < 0.05


@pytest.mark.parametrize("mode", MODES)
def test_requantize_parameters_follow_the_mode(mode: RequantMode) -> None:
    g = conv_relu_graph()
    x = np.random.default_rng(0).standard_normal((4, 16, 6, 6)).astype(np.float32)
    attrs = _quantized(g, mode, x).node("conv.requantize").attrs
    assert attrs["mode"] is mode and attrs["out_dtype"] is DType.INT8
    if mode is RequantMode.POW2:
        assert attrs["multiplier"] == (1,) and attrs["pre_shift"] == 0
        assert len(attrs["post_shift"]) == 16
    else:
        assert len(attrs["multiplier"]) == 16 and len(attrs["post_shift"]) == 1
        assert all(0 < m < 2 ** 15 for m in attrs["multiplier"])


@pytest.mark.parametrize("mode", MODES)
def test_residual_add_requantizes_both_operands_and_saturates(mode: RequantMode) -> None:
    g = residual_graph()
    x = np.random.default_rng(2).standard_normal((16, 16, 4, 4)).astype(np.float32)
    q = _quantized(g, mode, x)
    add = q.node("add")
    sources = [n for n in q.nodes if n.outputs[0] in add.inputs]
    assert [n.op for n in sources] == [Op.REQUANTIZE, Op.REQUANTIZE]
    assert all(n.attrs["out_dtype"] is DType.INT32 for n in sources)
    assert q.node("add.saturate").attrs == {"min": -128, "max": 127}
    assert _relative_error(g, q, x) < 0.05


def test_ops_without_an_integer_reference_run_as_float_islands() -> None:
    c = 4
    consts = {k: np.full(c, v, np.float32) for k, v in (("g", 2.0), ("b", 0.5), ("m", 0.1), ("v", 1.0))}
    g = build([node("relu", Op.RELU, ("x",), "r"),
               node("bn", Op.BATCH_NORM, ("r", "g", "b", "m", "v"), "n"),
               node("pool", Op.GLOBAL_AVERAGE_POOL, ("n",), "p"),
               node("flat", Op.FLATTEN, ("p",), "f"),
               node("soft", Op.SOFTMAX, ("f",), "y")], {"x": ("N", c, 3, 3)}, ("y",), consts)
    x = np.random.default_rng(3).standard_normal((8, c, 3, 3)).astype(np.float32)
    q = _quantized(g, RequantMode.FIXED, x)
    # (the pooled mean of a float value is float too, and what follows it; of an int8
    # value it is an int32 sum requantized to its own scale: test_calibration_methods.py)
    assert [n.op for n in q.nodes] == [Op.QUANTIZE, Op.RELU, Op.DEQUANTIZE, Op.BATCH_NORM,
                                       Op.GLOBAL_AVERAGE_POOL, Op.FLATTEN, Op.SOFTMAX]
    assert q.node("bn").inputs[0] == "r" and q.types["r"].dtype is DType.FLOAT32
    assert _relative_error(g, q, x) < 0.05


def test_clip_bounds_move_to_the_integer_scale() -> None:
    g = build([node("clip", Op.CLIP, ("x",), "y", min=-0.25, max=0.5)], {"x": (64,)}, ("y",))
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    q = _quantized(g, RequantMode.POW2, x)
    scale = q.types["x.q"].quant.scale[0]
    assert q.node("clip").attrs == {"min": round(-0.25 / scale), "max": round(0.5 / scale)}
    np.testing.assert_allclose(execute(q, {"x": x})["y"], np.clip(x, -0.25, 0.5), atol=scale)


def test_quantize_errors() -> None:
    g = conv_relu_graph()
    with pytest.raises(PassError, match=r"^quantize: value 'x' has no calibrated scale; run "
                                        r"calibrate first$"):
        quantize(g, RequantMode.FIXED)
    x = np.random.default_rng(0).standard_normal((4, 16, 6, 6)).astype(np.float32)
    q = _quantized(g, RequantMode.FIXED, x)
    with pytest.raises(PassError, match=r"^quantize: node 'x.quantize' \(Quantize\) is already an "
                                        r"integer-graph op$"):
        quantize(q, RequantMode.FIXED)


@pytest.mark.parametrize(("mode", "message"), [
    (RequantMode.FIXED, r"^node 'conv' \(Conv\) runs in float on the CPU: requantization multiplier must be "
                        r"below \S+ after a pre-shift of \d+, not \S+$"),
    (RequantMode.POW2, r"^node 'conv' \(Conv\) runs in float on the CPU: a left shift by \d+ of accumulators "
                       r"up to \d+ must fit int32, and does not$"),
])
def test_a_requantization_the_alu_cannot_do_runs_in_float(mode: RequantMode, message: str) -> None:
    g = conv_relu_graph()
    x = np.random.default_rng(0).standard_normal((4, 16, 6, 6)).astype(np.float32)
    c = calibrate(g, [{"x": x}], mode)
    tiny = c.replace(types={**c.types, "c": c.types["c"].with_quant(QuantParams((2.0 ** -40,)))})
    q = quantize(tiny, mode)
    (note,) = q.notes
    assert re.match(message, note), note
    (conv,) = [n for n in q.nodes if n.op is Op.CONV]
    assert q.types[conv.outputs[0]].dtype is DType.FLOAT32


def test_a_node_whose_numbers_int8_cannot_hold_runs_in_float() -> None:
    """A bias beyond int32 in the accumulator's scale (weights of 1e-3, a bias of 1e9): the
    Conv runs in float on the CPU, the rest in int8, and the summary says which and why."""
    from onnx import helper
    from onnx_models import make_model

    from openvta.graph import compile_model

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Conv", ["r", "w2"], ["y"])]
    proto = make_model(nodes, {"x": ["N", 16, 6, 6]}, ["y"],
                       {"w": rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 1e-3,
                        "b": np.full(16, 1e9, np.float32),
                        "w2": rng.standard_normal((16, 16, 1, 1)).astype(np.float32) * 0.1})
    x = rng.standard_normal((4, 16, 6, 6)).astype(np.float32)
    model = compile_model(proto, x)
    assert ("note: node 'Conv_0' (Conv) runs in float on the CPU: its bias does not fit int32 in the "
            "accumulator's scale") in model.summary()
    first, second = [n for n in model.graph.nodes if n.op is Op.CONV]
    assert model.graph.types[first.outputs[0]].dtype is DType.FLOAT32
    assert second.placement is not None and second.placement.device.value == "accel"
    np.testing.assert_array_equal(model.run(x)["y"], model.reference(x)["y"])
    expected = model.float_reference(x)["y"]
    assert np.abs(model.reference(x)["y"] - expected).max() <= 0.05 * np.abs(expected).max()

"""Importing QDQ models: the folded float model carries the model's own scales and zero points;
every Q/DQ shape it cannot stand for is one line naming the node."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from qdq_models import DIGITS, load_split, qdq_fragment, quantize_qdq

from openvta.graph.errors import ModelError
from openvta.graph.frontends.onnx import import_onnx
from openvta.graph.ir import Op


@pytest.fixture(scope="module")
def digits_qdq(tmp_path_factory) -> onnx.ModelProto:
    out = tmp_path_factory.mktemp("qdq") / "digits.onnx"
    return onnx.load(str(quantize_qdq(DIGITS / "digits.onnx", out, load_split()[0][:256],
                                      per_channel=True)))


def _init(model: onnx.ModelProto, name: str) -> np.ndarray:
    return next(numpy_helper.to_array(i) for i in model.graph.initializer if i.name == name)


def test_a_qdq_model_folds_into_its_float_model(digits_qdq) -> None:
    graph = import_onnx(digits_qdq)
    ops = [n.op for n in graph.nodes]
    assert ops == [Op.CLIP, Op.CONV, Op.CLIP, Op.CONV, Op.CLIP, Op.MAX_POOL, Op.CLIP, Op.FLATTEN,
                   Op.CLIP, Op.GEMM, Op.CLIP]  # each asymmetric pair saturates (a removed ReLU)
    image = graph.types["image"].quant
    assert image is not None and image.zero_point == -128
    assert np.float32(image.scale[0]) == _init(digits_qdq, "image_scale")


def test_weights_are_dequantized_as_onnxruntime_does(digits_qdq) -> None:
    graph = import_onnx(digits_qdq)
    conv = next(n for n in graph.nodes if n.name == "conv1")
    weight, quant = graph.constants[conv.inputs[1]], graph.types[conv.inputs[1]].quant
    q, scale = _init(digits_qdq, "conv1.weight_quantized"), _init(digits_qdq, "conv1.weight_scale")
    assert quant is not None and quant.axis == 0 and quant.zero_point == 0
    assert np.array_equal(np.float32(quant.scale), scale)
    assert np.array_equal(weight, q.astype(np.float32) * scale.reshape(-1, 1, 1, 1))


def test_a_model_without_qdq_has_no_model_scales() -> None:
    graph = import_onnx(DIGITS / "digits.onnx")
    assert all(t.quant is None for t in graph.types.values())


S, Z = np.float32(0.5), np.int8(0)
PAIR = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq"),
        helper.make_node("Relu", ["xd"], ["y"], name="relu")]


WEIGHTS = [helper.make_node("DequantizeLinear", ["wq", "s", "wz"], ["w"], name="dq_w"),
           helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]


@pytest.mark.parametrize("nodes, inits, message", [
    (WEIGHTS, {"wq": np.ones((2, 2), np.int8), "s": S, "wz": np.int8(1)},
     r"^node 'dq_w' \(DequantizeLinear\): weight zero point must be 0, not \[1\]$"),
    (WEIGHTS, {"wq": np.ones(2, np.int32), "s": S, "wz": np.int32(2)},
     r"^node 'dq_w' \(DequantizeLinear\): bias zero point must be 0, not \[2\]$"),
    (PAIR, {"s": S, "z": np.uint8(128)},
     r"^node 'q' \(QuantizeLinear\) must quantize to int8 \(or int32 for a bias\), not uint8$"),
    (PAIR, {"s": np.array([0.5, 0.5], np.float32), "z": np.zeros(2, np.int8)},
     r"^node 'q' \(QuantizeLinear\) must have one scale for an activation, not 2$"),
    (PAIR[:1] + [helper.make_node("DequantizeLinear", ["xq", "s2", "z"], ["y"], name="dq")],
     {"s": S, "s2": np.float32(0.25), "z": Z},
     r"^node 'dq' \(DequantizeLinear\) must use its QuantizeLinear's scale and zero point$"),
    # no pair and no quantized weight: not a QDQ model, its nodes run on ONNX's reference
    ([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq")], {"s": S, "z": Z},
     r"^node 'dq' \(DequantizeLinear\): ONNX's shape inference refuses it: x typestr: T, has unsupported type: "
     r"tensor\(float\)$"),
    ([helper.make_node("QuantizeLinear", ["x", "s", "x"], ["y"], name="q")], {"s": S},
     r"^node 'q' \(QuantizeLinear\): ONNX's shape inference refuses it: y_zero_point typestr: T2, has "
     r"unsupported type: tensor\(float\)$"),
    (PAIR[:1] + [helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["y"], name="dq")],
     {"s": S, "z": Z}, r"^model output 'y' must be computed, not a graph input$"),
])
def test_qdq_errors(nodes, inits, message) -> None:
    with pytest.raises(ModelError, match=message):
        import_onnx(qdq_fragment(nodes, inits, shape=(1, 2)))


def test_a_lone_quantizer_is_no_qdq_model_and_runs_on_onnxs_reference() -> None:
    from onnx_models import make_model

    from openvta.graph.execute import execute
    from openvta.graph.ir import Op

    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q")]
    graph = import_onnx(make_model(nodes, {"x": [4]}, ["y"], {"s": S, "z": Z}, opset=21))
    assert [n.op for n in graph.nodes] == [Op.ONNX_REFERENCE] and all(t.quant is None for t in graph.types.values())
    got = execute(graph, {"x": np.array([-1.0, 0.25, 0.75, 100.0], np.float32)})["y"]
    assert got.dtype == np.int8 and got.tolist() == [-2, 0, 2, 127]  # ties to even, saturated

"""The quantize pass in exact mode: small models quantized by onnxruntime (padded and strided
convolutions, per-tensor and per-channel, MatMul and Gemm, a residual Add, pooling) give
the ONNX specification's outputs (``onnx.reference``), and onnxruntime's bit for bit where
its int8 kernels are exact on this CPU (``ort_probe``); the zero point's border
correction; the errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_models import make_model
from ort_probe import require_exact_ort_int8
from qdq_models import assert_equals_spec, ort_outputs, output_step, quantize_qdq, spec_outputs

from openvta.graph.errors import PassError
from openvta.graph.ir import Op, QuantParams
from openvta.graph.passes.quantize_exact import recover_ints
from openvta.graph.pipeline import compile_model

SIZE = 6

#: what exact mode's outputs are compared with: the ONNX specification (always), and
#: onnxruntime's int8 kernels where the probe finds them exact on this CPU
ANCHORS = ["spec", "onnxruntime"]


def _expect_exact(got: np.ndarray, path: Path, feeds: dict[str, np.ndarray], anchor: str) -> None:
    if anchor == "onnxruntime":
        require_exact_ort_int8()
        (expected,) = ort_outputs(path, feeds)
        assert np.array_equal(got, expected)  # the same arithmetic, on an exact CPU
    else:
        (expected,) = spec_outputs(path, feeds)
        assert_equals_spec(got, expected, output_step(path, "y"))


def _conv_dense(rng: np.random.Generator, stride: int, pad: int, relu: bool,
                matmul: bool) -> onnx.ModelProto:
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[stride] * 2,
                              pads=[pad] * 4, name="conv")]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
    nodes.append(helper.make_node("Flatten", ["r" if relu else "c"], ["f"], axis=1))
    features = 4 * ((SIZE + 2 * pad - 3) // stride + 1) ** 2
    inits = {"w": rng.normal(0, 0.5, (4, 3, 3, 3)), "b": rng.normal(0, 0.5, 4)}
    if matmul:
        nodes.append(helper.make_node("MatMul", ["f", "m"], ["y"], name="dense"))
        inits["m"] = rng.normal(0, 0.3, (features, 5))
    else:
        nodes.append(helper.make_node("Gemm", ["f", "m", "mb"], ["y"], name="dense", transB=1))
        inits.update(m=rng.normal(0, 0.3, (5, features)), mb=rng.normal(0, 1, 5))
    return make_model(nodes, {"x": ["N", 3, SIZE, SIZE]}, ["y"],
                      {k: v.astype(np.float32) for k, v in inits.items()})


def _residual(rng: np.random.Generator) -> onnx.ModelProto:
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4, name="conv"),
             helper.make_node("Add", ["c", "x"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "m", "mb"], ["y"], name="dense", transB=1)]
    inits = {"w": rng.normal(0, 0.5, (3, 3, 3, 3)), "b": rng.normal(0, 0.5, 3),
             "m": rng.normal(0, 0.3, (5, 3)), "mb": rng.normal(0, 1, 5)}
    return make_model(nodes, {"x": ["N", 3, SIZE, SIZE]}, ["y"],
                      {k: v.astype(np.float32) for k, v in inits.items()})


CASES = {  # name: (stride, pad, relu, matmul, per_channel)
    "pad1_relu_gemm_per_channel": (1, 1, True, False, True),
    "stride2_pad1_matmul": (2, 1, False, True, False),
    "stride2_unpadded_relu_matmul_per_channel": (2, 0, True, True, True),
    "pad2_gemm": (1, 2, False, False, False),
}


def _quantized(tmp_path: Path, model: onnx.ModelProto, x: np.ndarray, per_channel: bool) -> Path:
    return quantize_qdq(model, tmp_path / "model.onnx", x, per_channel=per_channel, input_name="x")


@pytest.mark.parametrize("anchor", ANCHORS)
@pytest.mark.parametrize("case", list(CASES))
def test_conv_and_dense_give_the_exact_outputs(case: str, anchor: str, tmp_path: Path) -> None:
    stride, pad, relu, matmul, per_channel = CASES[case]
    rng = np.random.default_rng(len(case))
    x = rng.uniform(-1, 2, (64, 3, SIZE, SIZE)).astype(np.float32)  # asymmetric: z_x != 0
    path = _quantized(tmp_path, _conv_dense(rng, stride, pad, relu, matmul), x, per_channel)
    model = compile_model(path, x[:2], quantize="exact")
    _expect_exact(model.reference(x)["y"], path, {"x": x}, anchor)
    borders = [n for n in model.graph.nodes if n.name == "conv.border"]
    assert len(borders) == (1 if pad else 0)  # the data zero point meets the padding


@pytest.mark.parametrize("anchor", ANCHORS)
def test_a_residual_add_and_pooling_give_the_exact_outputs(anchor: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 2, (256, 3, SIZE, SIZE)).astype(np.float32)
    path = _quantized(tmp_path, _residual(rng), x, True)
    model = compile_model(path, x[:2], quantize="exact")
    _expect_exact(model.reference(x)["y"], path, {"x": x}, anchor)
    add = next(r for r in model.nodes() if r.name == "add")
    assert add.reason == "not quantized (float32 data)"  # a float island, as onnxruntime runs it


def test_exact_mode_needs_the_models_scales() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    with pytest.raises(PassError, match=r"^calibrate: value 'x' has no scale in the model; the "
                                        r"exact mode needs a QDQ model quantizing every "
                                        r"activation$"):
        compile_model(make_model(nodes, {"x": ["N", 4]}, ["y"]), np.ones((1, 4), np.float32),
                      quantize="exact")


def test_recover_ints() -> None:
    quant = QuantParams((0.5, 0.25), axis=0)
    real = np.array([[1.0, -0.5], [0.25, 31.75]], np.float32)
    assert recover_ints("w", real, quant, 0).tolist() == [[2, -1], [1, 127]]
    with pytest.raises(PassError, match=r"^quantize: constant 'w' is not a dequantized integer "
                                        r"tensor of its scale; the exact mode needs the model's "
                                        r"own int8/int32 values$"):
        recover_ints("w", real + np.float32(0.1), quant, 0)


def _dense_fragment(weight: np.ndarray, weight_scale: np.ndarray | np.floating, axis: int = 1,
                    bias: np.ndarray | None = None) -> onnx.ModelProto:
    """x (zero point -128) → Gemm(x, DQ(weight)[, DQ(bias)]) → a QDQ pair → y, hand-made."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=axis),
             helper.make_node("Gemm", ["xd", "w"] + (["bias"] if bias is not None else []),
                              ["c"], name="dense"),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"])]
    inits = {"s": np.float32(0.5), "zx": np.int8(-128), "z": np.int8(0), "wq": weight,
             "ws": weight_scale, "wz": np.zeros(weight_scale.shape, weight.dtype)}
    if bias is not None:
        nodes.insert(0, helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bias"]))
        inits.update(bq=bias, bs=np.float32(0.25), bz=np.int32(0))
    model = make_model(nodes, {"x": ["N", 2]}, ["y"], inits)
    return model


@pytest.mark.parametrize("weight, scale, axis, bias, message", [
    (np.full((2, 3), 300, np.int32), np.float32(0.5), 1, None,
     r"^quantize: node 'dense' \(Gemm\): weights must be int8$"),
    (np.ones((2, 3), np.int8), np.full(2, 0.5, np.float32), 0, None,
     r"^quantize: node 'dense' \(Gemm\): weight scales must be per output channel \(axis 0\), "
     r"not along axis 1$"),
    (np.full((2, 3), 127, np.int8), np.float32(0.5), 1, np.full(3, 2 ** 31 - 1, np.int32),
     r"^quantize: node 'dense' \(Gemm\): its bias with the data zero point folded in does not "
     r"fit int32$"),
])
def test_dense_errors(weight, scale, axis, bias, message) -> None:
    with pytest.raises(PassError, match=message):
        compile_model(_dense_fragment(weight, scale, axis, bias), np.ones((1, 2), np.float32),
                      quantize="exact")


def test_a_fragment_without_errors_compiles() -> None:
    model = compile_model(_dense_fragment(np.ones((2, 3), np.int8), np.float32(0.5)),
                          np.ones((1, 2), np.float32), quantize="exact")
    x = np.array([[1.0, 2.0]], np.float32)  # codes 2 - 128 and 4 - 128; 0.5 · 0.5 · 6 / 0.5 = 3
    assert model.reference(x)["y"].tolist() == [[1.5, 1.5, 1.5]]


def test_float_weights_have_no_scale() -> None:
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("Gemm", ["xd", "w"], ["c"], name="dense", transB=1),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"])]
    inits = {"s": np.float32(0.5), "z": np.int8(0), "w": np.ones((3, 2), np.float32)}
    with pytest.raises(PassError, match=r"^quantize: weight 'dense\.weight' has no scale in the "
                                        r"model; the exact mode needs a QDQ model$"):
        compile_model(make_model(nodes, {"x": ["N", 2]}, ["y"], inits),
                      np.ones((1, 2), np.float32), quantize="exact")


def _between_pairs(node: onnx.NodeProto, out_scale: float,
                   inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    """x → a QDQ pair (scale 0.5) → ``node`` (reads xd, writes c) → a QDQ pair → y."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]), node,
             helper.make_node("QuantizeLinear", ["c", "so", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "so", "z"], ["y"])]
    return make_model(nodes, {"x": ["N", 1, 4, 4]}, ["y"],
                      {"s": np.float32(0.5), "so": np.float32(out_scale), "z": np.int8(0), **inits})


@pytest.mark.parametrize("anchor", ANCHORS)
@pytest.mark.parametrize("node, out_scale, inits, int8_op", [
    (helper.make_node("MaxPool", ["xd"], ["c"], kernel_shape=[2, 2]), 0.5, {}, True),
    (helper.make_node("MaxPool", ["xd"], ["c"], kernel_shape=[2, 2]), 0.25, {}, False),
    (helper.make_node("Clip", ["xd", "lo", "hi"], ["c"]), 0.5,
     {"lo": np.float32(-100.0), "hi": np.float32(100.0)}, True),
    (helper.make_node("Clip", ["xd", "lo", "hi"], ["c"]), 0.5,
     {"lo": np.float32(0.0), "hi": np.float32(3.0)}, False),
])
def test_int8_ops_only_where_the_model_keeps_the_scale(node, out_scale, inits, int8_op, anchor,
                                                       tmp_path: Path) -> None:
    model = _between_pairs(node, out_scale, inits)
    x = np.random.default_rng(3).uniform(-70, 70, (16, 1, 4, 4)).astype(np.float32)
    compiled = compile_model(model, x[:1], quantize="exact")
    onnx.save(model, str(tmp_path / "m.onnx"))
    _expect_exact(compiled.reference(x)["y"], tmp_path / "m.onnx", {"x": x}, anchor)
    dequantizes = [n for n in compiled.graph.nodes if n.op is Op.DEQUANTIZE]
    assert len(dequantizes) == (1 if int8_op else 2)  # else a float island reads x on its grid


def _two_branches(rng: np.random.Generator) -> onnx.ModelProto:
    """Two convolutions of one ReLU added (onnxruntime runs the Add as QLinearAdd)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4, name="conv"),
             helper.make_node("Relu", ["c"], ["r0"]),
             helper.make_node("Conv", ["r0", "w2", "b2"], ["c2"], pads=[1] * 4, name="conv2"),
             helper.make_node("Conv", ["r0", "w3", "b3"], ["c3"], name="conv3"),
             helper.make_node("Add", ["c2", "c3"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "m", "mb"], ["y"], name="dense", transB=1)]
    inits = {"w": rng.normal(0, 0.5, (8, 3, 3, 3)), "b": rng.normal(0, 0.5, 8),
             "w2": rng.normal(0, 0.2, (8, 8, 3, 3)), "b2": rng.normal(0, 0.5, 8),
             "w3": rng.normal(0, 0.3, (8, 8, 1, 1)), "b3": rng.normal(0, 0.5, 8),
             "m": rng.normal(0, 0.1, (5, 8 * SIZE * SIZE)), "mb": rng.normal(0, 1, 5)}
    return make_model(nodes, {"x": ["N", 3, SIZE, SIZE]}, ["y"],
                      {k: v.astype(np.float32) for k, v in inits.items()})


@pytest.mark.parametrize("anchor", ANCHORS)
def test_an_add_of_two_branches_gives_the_exact_outputs(anchor: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 2, (512, 3, SIZE, SIZE)).astype(np.float32)
    path = _quantized(tmp_path, _two_branches(rng), x[:128], True)
    got = compile_model(path, x[:2], quantize="exact").reference(x)["y"]
    _expect_exact(got, path, {"x": x}, anchor)  # onnxruntime runs the Add as QLinearAdd

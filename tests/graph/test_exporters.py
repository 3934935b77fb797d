"""What today's exporters write, compiled as it comes: PyTorch's dynamo exporter (opset 20,
``Reshape(allowzero=1)``, the SDPA attention's ``IsNaN``/``Where`` guards, Hugging Face's
``And``/``GatherND``/``GatherElements`` masks) and its legacy one (opset 17), on the tiny
exports of ``tests/data/exporters`` (``benchmarks/export_models.py``); and, written with
``onnx.helper``, the idioms PaddlePaddle's exporter and the DB detection head add
(stale ``value_info``, a batch of ``-1``, ``ConvTranspose``, nearest ``Resize``, squeeze and
excitation, Concat of activations).

Each model: ``float_reference`` equal to onnxruntime within 1e-4 of the largest output,
int8 on the functional simulator equal to ``model.reference``, and at least 95 % of its
multiply-accumulates on the accelerator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx_models import make_model, run_onnxruntime

from openvta.cli import main
from openvta.graph import compile_model
from openvta.graph.compiled_model import CompiledModel
from openvta.graph.ir import Device, DType, Op

EXPORTS = Path(__file__).resolve().parents[1] / "data" / "exporters"
FILES = sorted(p.name for p in EXPORTS.glob("*.onnx"))


def _feeds(model: onnx.ModelProto, batch: int = 1, seq: int = 32, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs: images, or token ids with a mask whose last 5 positions are padding."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for value in model.graph.input:
        dims = [d.dim_value if d.dim_value > 0 else None for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == TensorProto.INT64:
            shape = (batch, dims[1] or seq)
            if "mask" in value.name:
                feeds[value.name] = np.ones(shape, np.int64)
                feeds[value.name][:, -5:] = 0
            elif "type" in value.name:
                feeds[value.name] = np.zeros(shape, np.int64)
            else:
                feeds[value.name] = rng.integers(0, 1000, shape).astype(np.int64)
        else:
            feeds[value.name] = rng.standard_normal((batch, *[int(d or 1) for d in dims[1:]])).astype(np.float32)
    return feeds


def _accelerator_share(model: CompiledModel) -> float:
    rows = model.nodes()
    total = sum(r.macs for r in rows)
    assert total
    return sum(r.macs for r in rows if r.device is Device.ACCEL) / total


def _check(model: CompiledModel, proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    expected = run_onnxruntime(proto, feeds)
    got = model.float_reference(feeds)
    for name, want in zip(model.outputs, expected):
        assert np.abs(got[name] - want).max() <= 1e-4 * np.abs(want).max(), name
    reference, functional = model.reference(feeds), model.run(feeds, backend="functional")
    for name in model.outputs:
        np.testing.assert_array_equal(functional[name], reference[name])


@pytest.mark.parametrize("name", FILES)
def test_every_export_compiles_as_it_comes(name: str) -> None:
    proto = onnx.load(EXPORTS / name)
    feeds = _feeds(proto, batch=1)
    model = compile_model(EXPORTS / name, feeds)
    _check(model, proto, feeds)
    assert _accelerator_share(model) >= 0.95
    # allowzero=1 without a 0 in the shape is openvta's Reshape
    assert not [n for n in model.float_graph.nodes
                if n.op is Op.ONNX_REFERENCE and "allowzero" in str(n.attrs.get("reason", ""))]


def test_the_dynamo_exports_hold_the_idioms_these_tests_are_for() -> None:
    ops = {name: {n.op_type for n in onnx.load(EXPORTS / name).graph.node} for name in FILES}
    allowzero = [n for n in onnx.load(EXPORTS / "bert_dynamo.onnx").graph.node
                 if n.op_type == "Reshape" and any(a.name == "allowzero" and a.i for a in n.attribute)]
    assert allowzero
    assert {"IsNaN", "Where", "And", "GatherND"} <= ops["bert_dynamo.onnx"]
    assert "GatherElements" in ops["bert_nott_dynamo.onnx"]
    assert {"HardSwish", "HardSigmoid", "Mul"} <= ops["mobilenet_v3_small_dynamo.onnx"]
    assert {"Sigmoid", "Mul"} <= ops["efficientnet_b0_dynamo.onnx"]  # SiLU and the SE gate


def test_a_dynamic_batch_compiles_and_runs_with_another_batch() -> None:
    proto = onnx.load(EXPORTS / "resnet18_dynbatch_dynamo.onnx")
    model = compile_model(proto, _feeds(proto, batch=2))
    assert isinstance(model.graph.types[model.inputs[0]].shape[0], str)  # the batch stays free
    _check(model, proto, _feeds(proto, batch=3, seed=1))


def test_a_dynamic_sequence_compiles_for_the_length_given() -> None:
    proto = onnx.load(EXPORTS / "bert_dynseq_dynamo.onnx")
    feeds = _feeds(proto, seq=24)
    model = compile_model(proto, feeds, input_shapes={k: v.shape for k, v in feeds.items()})
    _check(model, proto, feeds)
    with pytest.raises(ValueError, match=r"input 'input_ids' must have shape \(\w+, 24\), not \(1, 16\)"):
        model.reference(_feeds(proto, seq=16))


def test_a_batch_of_eight_calibrates_a_batch_one_export(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = EXPORTS / "resnet18_dynamo.onnx"
    x = np.random.default_rng(0).standard_normal((8, 3, 64, 64)).astype(np.float32)
    model = compile_model(path, x)
    assert "calibration: a batch of samples split into 8 runs of the model's fixed batch of 1" in model.summary()
    by_list = compile_model(path, [{"x": x[k:k + 1]} for k in range(8)])
    np.testing.assert_array_equal(model.reference(x[:1])[model.outputs[0]], by_list.reference(x[:1])[model.outputs[0]])
    np.savez(tmp_path / "calib.npz", x=x)
    assert main(["model", "compile", str(path), "--calibration", str(tmp_path / "calib.npz"),
                 "-o", str(tmp_path / "m.ovta")]) == 0
    capsys.readouterr()
    assert main(["model", "show", str(tmp_path / "m.ovta")]) == 0
    assert "split into 8 runs" in capsys.readouterr().out


def test_a_batch_that_is_no_multiple_of_the_models_is_named() -> None:
    x = np.zeros((3, 3, 64, 64), np.float32)
    proto = onnx.load(EXPORTS / "resnet18_dynamo.onnx")
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2
    with pytest.raises(ValueError, match=r"input 'x' must have shape \(2, 3, 64, 64\), not \(3, 3, 64, 64\)"):
        compile_model(proto, x)


# -- the idioms, written with onnx.helper ---------------------------------------------------

def _conv(rng: np.random.Generator, name: str, cin: int, cout: int, k: int = 3) -> np.ndarray:
    return (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)


def test_a_reshape_with_allowzero_and_no_zero_runs_openvtas_kernel() -> None:
    model = make_model([helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)], {"x": [2, 3, 4]}, ["y"],
                       {"shape": np.array([2, 12], np.int64)}, opset=14)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    compiled = compile_model(model, x)
    assert [n.op for n in compiled.float_graph.nodes] == [Op.RESHAPE]
    with_zero = make_model([helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)], {"x": [2, 0, 4]},
                           ["y"], {"shape": np.array([0, 4], np.int64)}, opset=14)
    from openvta.graph.frontends.onnx import import_onnx

    (node,) = import_onnx(with_zero).nodes
    assert node.op is Op.ONNX_REFERENCE
    assert "allowzero=1 with a 0 in the shape (a dimension of size 0) is not supported" in node.attrs["reason"]


def _paddle_like() -> onnx.ModelProto:
    """PaddlePaddle's exporter: a batch of ``-1``, unknown sizes, ``value_info`` with ``-1``,
    opset 11, and a flatten as ``Shape → Cast → Slice → Concat → Reshape``."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "?", "?"])
    x.type.tensor_type.shape.dim[0].dim_value = -1
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Shape", ["p"], ["s"]),
             helper.make_node("Cast", ["s"], ["s32"], to=TensorProto.INT32),
             helper.make_node("Slice", ["s32", "zero", "one", "axis0"], ["n"]),
             helper.make_node("Cast", ["n"], ["n64"], to=TensorProto.INT64),
             helper.make_node("Concat", ["n64", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["p", "shape"], ["y"])]
    inits = [numpy_helper.from_array(_conv(rng, "w", 3, 16), "w"),
             numpy_helper.from_array(np.array([0], np.int32), "zero"),
             numpy_helper.from_array(np.array([1], np.int32), "one"),
             numpy_helper.from_array(np.array([0], np.int32), "axis0"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    stale = helper.make_tensor_value_info("c", TensorProto.FLOAT, [-1, 16, -1, -1])
    graph = helper.make_graph(nodes, "paddle", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits, value_info=[stale])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def test_a_shape_of_a_value_the_given_input_shape_determines_folds() -> None:
    proto = _paddle_like()
    x = np.random.default_rng(1).standard_normal((2, 3, 12, 20)).astype(np.float32)
    model = compile_model(proto, x, input_shapes={"x": (1, 3, 12, 20)})
    assert "note: opset 11 upgraded to 13 with onnx.version_converter" in model.summary()
    assert not [n for n in model.float_graph.nodes if n.op is Op.ONNX_REFERENCE]
    _check(model, proto, {"x": x[:1]})


def _upsampling_model(conv_transpose: dict[str, Any], resize: dict[str, Any],
                      batch: int | str = "N") -> onnx.ModelProto:
    """DB's head: a 2×2 stride-2 ConvTranspose and a nearest Resize by 2, joined by Concat,
    then a squeeze-and-excitation gate (GlobalAveragePool → 1×1 Convs → HardSigmoid → Mul)."""
    rng = np.random.default_rng(2)
    k = int(conv_transpose.get("kernel", 2))
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("ConvTranspose", ["b", "wt", "bt"], ["up"], kernel_shape=[k, k],
                              strides=list(conv_transpose.get("strides", [2, 2])),
                              pads=list(conv_transpose.get("pads", [0, 0, 0, 0])),
                              dilations=list(conv_transpose.get("dilations", [1, 1]))),
             helper.make_node("Resize", ["b", "", "scales"], ["near"], **resize),
             helper.make_node("Concat", ["up", "near"], ["cat"], axis=1),
             helper.make_node("GlobalAveragePool", ["cat"], ["pool"]),
             helper.make_node("Conv", ["pool", "w1", "b1"], ["squeeze"]),
             helper.make_node("Relu", ["squeeze"], ["sr"]),
             helper.make_node("Conv", ["sr", "w2", "b2"], ["excite"]),
             helper.make_node("HardSigmoid", ["excite"], ["gate"], alpha=0.2, beta=0.5),
             helper.make_node("Mul", ["cat", "gate"], ["y"])]
    inits = {"w0": _conv(rng, "w0", 16, 16), "wt": _conv(rng, "wt", 16, 16, k).transpose(1, 0, 2, 3).copy(),
             "bt": rng.standard_normal(16).astype(np.float32) * 0.1,
             "scales": np.array([1, 1, 2, 2], np.float32),
             "w1": _conv(rng, "w1", 32, 16, 1), "b1": np.zeros(16, np.float32),
             "w2": _conv(rng, "w2", 16, 32, 1), "b2": np.zeros(32, np.float32)}
    return make_model(nodes, {"x": [batch, 16, 8, 8]}, ["y"], inits, opset=13)


def test_the_db_heads_upsampling_and_an_se_gate_run_in_int8() -> None:
    proto = _upsampling_model({}, {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                   "nearest_mode": "floor"})
    x = np.random.default_rng(3).standard_normal((4, 16, 8, 8)).astype(np.float32)
    model = compile_model(proto, x)
    _check(model, proto, {"x": x[:2]})
    ops = [n.op for n in model.float_graph.nodes]
    assert Op.ONNX_REFERENCE not in ops and Op.EXPAND in ops  # the Resize a repetition
    placed = {n.name: n for n in model.graph.nodes}
    assert placed["ConvTranspose_2.taps"].placement.device is Device.ACCEL  # the ConvTranspose's 1x1 Conv
    integer = {n.op: n for n in model.graph.nodes}
    assert model.graph.types[integer[Op.MUL].inputs[1]].dtype is DType.INT8  # the gate in int8
    assert model.graph.types[integer[Op.CONCAT].outputs[0]].dtype is DType.INT8
    assert model.graph.types[integer[Op.EXPAND].outputs[0]].dtype is DType.INT8


@pytest.mark.parametrize("conv_transpose, resize", [
    ({"kernel": 2, "strides": [2, 2], "pads": [0, 0, 1, 1], "dilations": [2, 2]},  # dilated: not rewritten
     {"mode": "linear"}),
    ({"kernel": 2, "strides": [2, 2], "pads": [0, 0, 0, 0]}, {"mode": "cubic"}),
])
def test_bilinear_resize_is_openvtas_and_what_is_not_runs_on_onnxs_kernels(conv_transpose: dict[str, Any],
                                                                         resize: dict[str, Any]) -> None:
    """A bilinear Resize interpolates int8 codes (openvta's Resize); a dilated ConvTranspose and
    a cubic Resize run on ONNX's reference kernels, as float islands."""
    proto = _upsampling_model(conv_transpose, resize, batch=1)  # (ONNX infers no symbolic batch through Resize)
    x = np.random.default_rng(4).standard_normal((2, 16, 8, 8)).astype(np.float32)
    model = compile_model(proto, x)
    fallback = {n.attrs["op_type"] for n in model.float_graph.nodes if n.op is Op.ONNX_REFERENCE}
    assert fallback == ({"ConvTranspose"} if "dilations" in conv_transpose else {"Resize"})
    if resize["mode"] == "linear":
        (node,) = [n for n in model.graph.nodes if n.op is Op.RESIZE]
        assert model.graph.types[node.outputs[0]].dtype is DType.INT8
    _check(model, proto, {"x": x[:1]})


def test_a_pow2_model_keeps_a_factor_that_is_no_power_of_two_in_float() -> None:
    model = make_model([helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),
                        helper.make_node("Mul", ["u", "k"], ["y"])], {"x": ["N", 4]}, ["y"],
                       {"axes": np.array([1], np.int64), "k": np.array(1.3, np.float32)})
    x = np.random.default_rng(5).standard_normal((8, 4)).astype(np.float32)
    compiled = compile_model(model, x, quantize="pow2")
    (mul,) = [n for n in compiled.graph.nodes if n.op is Op.MUL]
    assert compiled.graph.types[mul.inputs[0]].dtype is DType.FLOAT32
    np.testing.assert_array_equal(compiled.run(x)["y"], compiled.reference(x)["y"])


def test_eight_samples_calibrate_a_batch_one_export_with_a_dynamic_sequence() -> None:
    """The sequence length comes from the samples; their batch of 8 is 8 runs of the model's 1."""
    proto = onnx.load(EXPORTS / "bert_dynseq_dynamo.onnx")
    feeds = _feeds(proto, batch=8, seq=20)
    model = compile_model(proto, feeds)
    assert model.graph.types["input_ids"].shape == (1, 20)
    _check(model, proto, {k: v[:1] for k, v in feeds.items()})


def test_a_models_local_functions_are_inlined() -> None:
    """onnxscript's form when it does not inline: a node of a ``pkg.…`` domain whose body is
    a function of the model."""
    body = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    silu = helper.make_function("pkg.onnxscript.torch_lib", "aten_silu", ["x"], ["y"], body,
                                [helper.make_opsetid("", 18)])
    graph = helper.make_graph([helper.make_node("aten_silu", ["x"], ["y"], domain="pkg.onnxscript.torch_lib")],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    proto = helper.make_model(graph, functions=[silu], opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid("pkg.onnxscript.torch_lib", 1)])
    x = np.random.default_rng(6).standard_normal((2, 4)).astype(np.float32)
    model = compile_model(proto, x)
    assert "note: 1 local function inlined (pkg.onnxscript.torch_lib.aten_silu)" in model.summary()
    assert [n.op for n in model.float_graph.nodes] == [Op.SIGMOID, Op.MUL]
    _check(model, proto, {"x": x})


@pytest.mark.parametrize("opset, split", [(13, {"inputs": [4, 4, 8]}), (18, {"num_outputs": 3}), (11, {})])
def test_split_and_slice_move_int8_codes(opset: int, split: dict[str, Any]) -> None:
    """A Split (sizes as an input, ``num_outputs``, or equal parts) is one Slice per output,
    and a Slice of an activation moves its int8 codes, between two accelerator convolutions."""
    rng = np.random.default_rng(7)
    inputs = ["a", "sizes"] if "inputs" in split else ["a"]
    attrs = {"axis": 1, **({"num_outputs": split["num_outputs"]} if "num_outputs" in split else {})}
    if opset < 13:
        attrs["split"] = [4, 4, 8]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Split", inputs, ["p0", "p1", "p2"], **attrs),
             helper.make_node("Slice", ["p2", "starts", "ends", "axes", "steps"], ["s"]),
             helper.make_node("Concat", ["p1", "s", "p0"], ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "w1"], ["y"], pads=[1, 1, 1, 1])]
    inits: dict[str, object] = {"w0": _conv(rng, "w0", 16, 16), "w1": _conv(rng, "w1", 16, 16),
                                "starts": np.array([-1, 0], np.int64), "ends": np.array([-100, 8], np.int64),
                                "axes": np.array([1, 2], np.int64), "steps": np.array([-1, 1], np.int64)}
    if "inputs" in split:
        inits["sizes"] = np.array(split["inputs"], np.int64)
    elif opset >= 13 and "num_outputs" not in split:
        inputs.append("")
    if opset == 18:
        nodes[1] = helper.make_node("Split", ["a"], ["p0", "p1", "p2"], axis=1, num_outputs=3)
    proto = make_model(nodes, {"x": [1, 16, 8, 8]}, ["y"], inits, opset=opset)
    x = rng.standard_normal((4, 16, 8, 8)).astype(np.float32)
    model = compile_model(proto, x)
    assert {n.op for n in model.float_graph.nodes} == {Op.CONV, Op.SLICE, Op.CONCAT}
    slices = [n for n in model.graph.nodes if n.op is Op.SLICE]
    assert all(model.graph.types[n.outputs[0]].dtype is DType.INT8 for n in slices)
    _check(model, proto, {"x": x[:1]})


@settings(max_examples=12, deadline=None)
@given(kernel=st.integers(1, 5), stride=st.integers(2, 3), pads=st.lists(st.integers(0, 2), min_size=4, max_size=4),
       extra=st.integers(0, 1), rows=st.integers(2, 6), cols=st.integers(2, 6))
def test_any_convtranspose_is_a_subpixel_convolution_on_the_accelerator(kernel: int, stride: int, pads: list[int],
                                                                        extra: int, rows: int, cols: int) -> None:
    """Kernel, stride, asymmetric pads and output padding: the rewritten ConvTranspose equals
    onnxruntime's, its Conv runs on the accelerator, int8 equal on every back end."""
    pads = [min(p, kernel - 1) for p in pads]
    extra = min(extra, stride - 1, pads[2], pads[3])
    rng = np.random.default_rng(kernel * 100 + stride * 10 + rows)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[kernel, kernel],
                            strides=[stride, stride], pads=pads, output_padding=[extra, extra])
    proto = make_model([node], {"x": [1, 16, rows, cols]}, ["y"],
                       {"w": rng.standard_normal((16, 16, kernel, kernel)).astype(np.float32) / (4 * kernel),
                        "b": rng.standard_normal(16).astype(np.float32)})
    x = rng.standard_normal((3, 16, rows, cols)).astype(np.float32)
    model = compile_model(proto, x, config="tiny")
    assert Op.ONNX_REFERENCE not in {n.op for n in model.float_graph.nodes}
    (conv,) = [n for n in model.graph.nodes if n.op is Op.CONV]
    assert conv.placement is not None and conv.placement.device is Device.ACCEL, conv.placement
    _check(model, proto, {"x": x[:1]})
    np.testing.assert_array_equal(model.run(x[:1], backend="cycle")["y"], model.reference(x[:1])["y"])


@pytest.mark.parametrize("slopes", [(0.25,), (0.1, 0.2, 0.3)])
def test_a_prelu_runs_on_int8_codes(slopes: tuple[float, ...]) -> None:
    """torch's nn.PReLU() (one slope) is a table of int8 codes; slopes per channel its two
    halves requantized and added."""
    rng = np.random.default_rng(8)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("PRelu", ["c", "slope"], ["p"]), helper.make_node("Conv", ["p", "w2"], ["y"])]
    proto = make_model(nodes, {"x": ["N", 16, 6, 6]}, ["y"],
                       {"w": _conv(rng, "w", 16, 3), "w2": _conv(rng, "w2", 3, 16, 1),
                        "slope": np.array(slopes, np.float32).reshape(-1, 1, 1)})
    x = rng.standard_normal((4, 16, 6, 6)).astype(np.float32)
    model = compile_model(proto, x)
    tables = [n for n in model.graph.nodes if n.op is Op.TABLE]
    assert len(tables) == (len(slopes) == 1)
    assert Op.PRELU not in {n.op for n in model.graph.nodes}  # (no float island)
    _check(model, proto, {"x": x[:2]})


def test_the_newest_opset_the_pinned_onnx_knows_compiles() -> None:
    rng = np.random.default_rng(9)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "s"], ["f"], allowzero=1),
             helper.make_node("Gemm", ["f", "g"], ["y"], transB=1)]
    proto = make_model(nodes, {"x": [1, 16, 4, 4]}, ["y"],
                       {"w": _conv(rng, "w", 16, 16), "s": np.array([1, 256], np.int64),
                        "g": rng.standard_normal((10, 256)).astype(np.float32) * 0.05},
                       opset=onnx.defs.onnx_opset_version())
    x = rng.standard_normal((4, 16, 4, 4)).astype(np.float32)
    model = compile_model(proto, x)
    assert _accelerator_share(model) == 1.0
    _check(model, proto, {"x": x[:1]})


def test_a_concats_inputs_take_its_scale_so_no_requantization_runs_between() -> None:
    """SqueezeNet's fire module: two convolutions (with their ReLUs) joined by Concat; each
    convolution requantizes straight to the Concat's scale (its epilogue has one
    requantization), and the int8 Concat joins the codes."""
    rng = np.random.default_rng(10)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["ra"]),
             helper.make_node("Conv", ["x", "w3"], ["b"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["b"], ["rb"]),
             helper.make_node("Concat", ["ra", "rb"], ["y"], axis=1)]
    proto = make_model(nodes, {"x": ["N", 16, 6, 6]}, ["y"],
                       {"w1": _conv(rng, "w1", 16, 16, 1), "w3": 3 * _conv(rng, "w3", 16, 16)})
    x = rng.standard_normal((4, 16, 6, 6)).astype(np.float32)
    model = compile_model(proto, x)
    (concat,) = [n for n in model.graph.nodes if n.op is Op.CONCAT]
    scales = {model.graph.types[v].quant.scale for v in (*concat.inputs, concat.outputs[0])}
    assert len(scales) == 1
    assert [n.name for n in model.graph.nodes if n.op is Op.REQUANTIZE] == ["Conv_0.requantize", "Conv_2.requantize"]
    _check(model, proto, {"x": x[:2]})

"""Index inputs (the transformers' import): a sentence encoder's int64 token ids and attention
mask, Gather's embedding lookup, Cast and Expand, every output kept; and the real MiniLM
encoder of the ``transformers`` extra, whose float path equals onnxruntime and whose int8
build runs every MatMul with a constant matrix on the accelerator, equal to its reference."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import NodeProto, TensorProto, helper
from onnx_models import make_model, run_onnxruntime
from transformer_models import sentence_encoder

import openvta
from openvta.graph.errors import ExecutionError, ModelError
from openvta.graph.frontends.onnx import import_onnx
from openvta.graph.execute import execute
from openvta.graph.ir import Attrs, Device, DType, Op

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "minilm"))
import minilm_model  # noqa: E402

SEQ = 16


def _feeds(rng: np.random.Generator, pad: int = 0, vocabulary: int = 50) -> dict[str, np.ndarray]:
    ids = rng.integers(0, vocabulary, (1, SEQ)).astype(np.int64)
    mask = np.ones((1, SEQ), np.int64)
    mask[0, SEQ - pad:] = 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.fixture(scope="module")
def encoder() -> tuple[object, openvta.CompiledModel]:
    proto = sentence_encoder(seq=SEQ)
    rng = np.random.default_rng(0)
    return proto, openvta.compile_model(proto, [_feeds(rng, pad) for pad in (0, 5, 11)], config="default")


def test_int64_inputs_are_index_tensors(encoder: tuple) -> None:
    proto, model = encoder
    graph = import_onnx(proto)
    assert [graph.types[name].dtype for name in graph.inputs] == [DType.INT64, DType.INT64]
    ops = {n.op for n in model.graph.nodes}
    assert {Op.GATHER, Op.CAST, Op.EXPAND} <= ops
    assert not any(n.op is Op.QUANTIZE and n.inputs[0] in graph.inputs for n in model.graph.nodes)
    gemms = [n for n in model.graph.nodes if n.op is Op.GEMM]
    assert len(gemms) == 6 and all(n.placement.device is Device.ACCEL for n in gemms)
    products = [n for n in model.graph.nodes if n.op is Op.MATMUL]  # attention's two, per head
    assert len(products) == 2 and all(n.placement.device is Device.ACCEL for n in products)
    assert [n.placement.reason for n in products] == ["int8 batch_matmul, 4 heads of 16x8 by 8x16",
                                                      "int8 batch_matmul, 4 heads of 16x16 by 16x8"]
    assert model.summary().splitlines()[1] == "MACs: 100.0% on the accelerator (int8 products), none on the CPU"
    # the mask (1 - mask) · -10000, made in float from the index input, is added to the
    # int8 scores as int32 in their scale, and the integer Softmax reads the sum
    softmax, = (n for n in model.graph.nodes if n.op is Op.SOFTMAX)
    assert model.graph.types[softmax.inputs[0]].dtype is DType.INT32
    assert model.graph.types[softmax.outputs[0]].dtype is DType.INT8


@settings(max_examples=6, deadline=None)
@given(pad=st.integers(0, SEQ - 1), seed=st.integers(0, 2**16))
def test_float_path_equals_onnxruntime_and_every_back_end_the_reference(encoder: tuple, pad: int, seed: int) -> None:
    proto, model = encoder
    feeds = _feeds(np.random.default_rng(seed), pad)
    expected = dict(zip(("sentence", "tokens", "ids"), run_onnxruntime(proto, feeds)))
    ours = model.float_reference(feeds)
    for name in ("sentence", "tokens"):
        assert np.abs(ours[name] - expected[name]).max() <= 1e-5 * np.abs(expected[name]).max()
    reference = model.reference(feeds)
    assert reference["ids"].dtype == np.int64 and np.array_equal(reference["ids"], feeds["input_ids"])
    run = model.run(feeds, backend="functional")
    for name, value in reference.items():
        np.testing.assert_array_equal(run[name], value)


def test_the_cycle_back_end_equals_the_reference(encoder: tuple) -> None:
    _, model = encoder
    feeds = _feeds(np.random.default_rng(7), 6)
    run, reference = model.run(feeds, backend="cycle"), model.reference(feeds)
    assert run.report.cycles > 0
    for name, value in reference.items():
        np.testing.assert_array_equal(run[name], value)


def test_index_input_errors_are_one_line(encoder: tuple) -> None:
    _, model = encoder
    feeds = _feeds(np.random.default_rng(1))
    with pytest.raises(ValueError, match=r"^input 'input_ids' must hold integers \(int64: token ids, a mask\), "
                                         r"not float32$"):
        model.reference({**feeds, "input_ids": feeds["input_ids"].astype(np.float32)})
    with pytest.raises(ValueError, match=r"^input 'input_ids' holds values outside int64 "
                                         r"\(largest 18446744073709551615\)$"):
        model.reference({**feeds, "input_ids": np.full((1, SEQ), 2**64 - 1, np.uint64)})
    with pytest.raises(ValueError, match=r"^input 'attention_mask' must have shape \(1, 16\), not \(1, 12\)$"):
        model.reference({**feeds, "attention_mask": feeds["attention_mask"][:, :12]})
    bad = feeds["input_ids"].copy()
    bad[0, 3] = 50
    with pytest.raises(ExecutionError, match=r"^node 'Gather_0' \(Gather\) failed: Gather index 50 is out of range "
                                             r"for an axis of 50 \(-50\.\.49\)$"):
        model.reference({**feeds, "input_ids": bad})


@pytest.mark.parametrize(("node", "inputs", "message"), [
    (helper.make_node("Cast", ["x"], ["y"], to=TensorProto.STRING), {"x": [2]},
     r"^node 'Cast_0' \(Cast\) output 'y' is a tensor of string; openvta holds numbers and booleans \(no strings\)$"),
    (helper.make_node("Gather", ["x", "i"], ["y"]), {"x": [4, 2], "i": [3]},
     r"^node 'Gather_0' \(Gather\): ONNX's shape inference refuses it: indices typestr: Tind, has unsupported "
     r"type: tensor\(float\)$"),
    (helper.make_node("Expand", ["x", "s"], ["y"]), {"x": [2, 3], "s": [2]},
     r"^node 'Expand_0' \(Expand\): ONNX's shape inference refuses it: shape typestr: tensor\(int64\), has "
     r"unsupported type: tensor\(float\)$"),
])
def test_bad_index_nodes_are_one_line(node: NodeProto, inputs: dict, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        import_onnx(make_model([node], inputs, ["y"]))


def test_casts_truncate_as_onnx_and_narrow_casts_run_on_onnxs_reference() -> None:
    from openvta.graph.ops.indexing import DEFS

    cast = next(d for d in DEFS if d.op is Op.CAST).float_ref
    assert cast is not None
    x = np.array([-2.7, -0.5, 0.4, 3.9, 1e6], np.float32)
    assert cast([x], Attrs({"to": TensorProto.INT64})).tolist() == [-2, 0, 0, 3, 1000000]
    narrow = make_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN)], {"x": [5]}, ["y"],
                        opset=21)
    graph = import_onnx(narrow)
    assert graph.nodes[0].op is Op.ONNX_REFERENCE and graph.types["y"].dtype is DType.FLOAT8E4M3FN
    y = execute(graph, {"x": x})["y"]
    assert y.astype(np.float32).tolist()[-1] == 448.0  # saturates by default, as ONNX's


# -- the real MiniLM encoder (the ``transformers`` extra) ---------------------------------------


@pytest.fixture(scope="module")
def minilm() -> tuple[str, openvta.CompiledModel]:
    try:
        path = minilm_model.model_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    model = openvta.compile_model(str(path), minilm_model.sequences(2, seed=0), config="default", precision="int8")
    return str(path), model


def test_minilm_float_path_equals_onnxruntime(minilm: tuple) -> None:
    path, model = minilm
    import onnx

    proto = onnx.load(path)
    for feeds in minilm_model.sequences(2, seed=1, padded=True):
        expected = dict(zip([o.name for o in proto.graph.output], run_onnxruntime(proto, feeds)))
        ours = model.float_reference(feeds)
        assert set(ours) == set(expected)  # every output kept, the int64 ones included
        for name, value in expected.items():
            assert ours[name].dtype == value.dtype
            assert np.abs(ours[name] - value).max() <= 1e-4 * np.abs(value).max(), name


def test_minilm_int8_runs_its_matmuls_on_the_accelerator_equal_to_the_reference(minilm: tuple) -> None:
    _, model = minilm
    gemms = [n for n in model.graph.nodes if n.op is Op.GEMM]
    assert len(gemms) == 18 and all(n.placement.device is Device.ACCEL for n in gemms)
    feeds = minilm_model.sequences(2, seed=3, padded=True)[1]
    reference = model.reference(feeds)
    run = model.run(feeds, backend="functional")
    for name, value in reference.items():
        np.testing.assert_array_equal(run[name], value)
    embedding = minilm_model.EMBEDDING
    assert minilm_model.cosine(reference[embedding], model.float_reference(feeds)[embedding]) > 0.5


def test_input_shapes_that_contradict_the_calibration_name_both() -> None:
    feeds = _feeds(np.random.default_rng(2))
    proto = sentence_encoder(seq=SEQ)
    for value in proto.graph.input:  # tokens of any count, as exporters write them
        value.type.tensor_type.shape.dim[1].dim_param = "tokens"
    with pytest.raises(ValueError, match=r"^input 'input_ids' is given the shape \(1, 8\) \(input_shapes, "
                                         r"--input-shape\), but the calibration samples have \(1, 16\)$"):
        openvta.compile_model(proto, [feeds], input_shapes={"input_ids": (1, 8)})
    with pytest.raises(ModelError, match=r"^input 'input_ids' has shape \(1, 16\) in the model, but its shape is "
                                         r"given as \(1, 8\)$"):
        openvta.compile_model(sentence_encoder(seq=SEQ), [feeds], input_shapes={"input_ids": (1, 8)})

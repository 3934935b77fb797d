"""The CPU fallback: ONNX nodes openvta has no kernel for, run on ONNX's reference kernels —
compiled into int8 models around accelerator kernels, with subgraphs reading outer values,
with every tensor type, saved and loaded; and its errors, one line each."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from onnx_models import make_model

import openvta
from openvta.graph.errors import ExecutionError
from openvta.graph.execute import execute
from openvta.graph.frontends.onnx import import_onnx
from openvta.graph.ir import Device, DType, Op

RNG = np.random.default_rng(40)


def _conv_topk() -> tuple:
    w1 = (RNG.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    w2 = (RNG.standard_normal((8, 8, 3, 3)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Trilu", ["a"], ["t"], name="trilu"),
             helper.make_node("Conv", ["t", "w2"], ["c"], pads=[1, 1, 1, 1], name="conv2"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("ReduceMax", ["r"], ["m"], axes=[2, 3], keepdims=0, name="max"),
             helper.make_node("TopK", ["m", "k"], ["values", "indices"], name="topk"),
             helper.make_node("Equal", ["indices", "zero"], ["first"], name="eq")]
    proto = make_model(nodes, {"x": ["N", 3, 8, 8]}, ["values", "indices", "first"],
                       {"w1": w1, "w2": w2, "k": np.array([3]), "zero": np.array(0)}, opset=17)
    return proto, RNG.standard_normal((4, 3, 8, 8)).astype(np.float32)


def test_an_int8_model_with_fallback_nodes_runs_the_same_on_every_back_end(tmp_path: Path) -> None:
    proto, x = _conv_topk()
    model = openvta.compile_model(proto, x, config="tiny")
    by_name = {n.name: n for n in model.graph.nodes}
    assert by_name["conv2"].placement is not None and by_name["conv2"].placement.device is Device.ACCEL
    for name, op in (("trilu", "Trilu"), ("topk", "TopK"), ("topk:1", "TopK"), ("eq", "Equal")):
        node = by_name[name]
        assert node.op is Op.ONNX_REFERENCE and node.placement is not None
        assert node.placement.reason == f"no openvta kernel for {op}, ONNX's reference kernel"
    assert "CPU fallback: 5 nodes on ONNX's reference kernels (Equal, ReduceMax, TopK, Trilu)" in model.summary()
    expected = model.reference(x)
    assert expected["indices"].dtype == np.int64 and expected["first"].dtype == np.bool_
    for backend in ("functional", "cycle"):
        got = model.run(x, backend=backend)
        assert all(np.array_equal(got[k], expected[k]) for k in expected)
    path = tmp_path / "model.ovta"
    model.save(path)
    again = openvta.load_model(path).run(x)
    assert all(np.array_equal(again[k], expected[k]) for k in expected)


def test_the_float_path_is_onnxs_reference() -> None:
    proto, x = _conv_topk()
    want = ReferenceEvaluator(proto).run(None, {"x": x})
    got = execute(import_onnx(proto), {"x": x})
    for name, value in zip(("values", "indices", "first"), want):
        assert got[name].dtype == value.dtype
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6)


def test_a_subgraph_reads_outer_values_and_narrow_types_are_kept() -> None:
    then = helper.make_graph([helper.make_node("Mul", ["h", "scale"], ["out"])], "then", [],
                             [helper.make_tensor_value_info("out", TensorProto.FLOAT16, [2, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["h"], ["out"])], "else", [],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT16, [2, 3])])
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["positive"]),
             helper.make_node("If", ["positive"], ["y"], then_branch=then, else_branch=other, name="if")]
    proto = make_model(nodes, {"x": [2, 3]}, ["y"], {"zero": np.float32(0), "scale": np.float16(2)}, opset=17)
    graph = import_onnx(proto)
    node = graph.node("if")
    assert node.op is Op.ONNX_REFERENCE and node.inputs == ("positive", "h", "scale")  # the outer values read
    assert graph.types["h"].dtype is DType.FLOAT16 and graph.types["y"].dtype is DType.FLOAT16
    for x in (np.ones((2, 3), np.float32), -np.ones((2, 3), np.float32)):
        (want,) = ReferenceEvaluator(proto).run(None, {"x": x})
        got = execute(graph, {"x": x})["y"]
        assert got.dtype == np.float16 and np.array_equal(got, want)


def test_a_loop_with_a_fixed_trip_count_and_no_condition_compiles() -> None:
    """(``onnx.reference`` runs no iteration of a Loop without its optional condition; the
    fallback gives it the condition ``true``, the specification's meaning.)"""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [1, 4])])
    nodes = [helper.make_node("Loop", ["trips", "", "init"], ["total"], body=body, name="loop")]
    proto = make_model(nodes, {"x": [1, 4]}, ["total"], {"trips": np.array(3), "init": np.zeros((1, 4), np.float32)})
    x = RNG.standard_normal((1, 4)).astype(np.float32)
    model = openvta.compile_model(proto, x, config="tiny")
    np.testing.assert_array_equal(model.run(x)["total"], 3 * x)


def test_a_reference_kernel_that_fails_is_one_line() -> None:
    nodes = [helper.make_node("GatherND", ["x", "i"], ["y"], name="g", batch_dims=0)]
    proto = make_model(nodes, {"x": [2, 3]}, ["y"], {"i": np.array([[0, 1]])}, opset=17)
    graph = import_onnx(proto)
    with pytest.raises(ExecutionError, match=r"^node 'g' \(GatherND\) failed: GatherND index 5 at \(0, 0\) is "
                                             r"out of range for an axis of 2$"):
        execute(graph.replace(constants={"i": np.array([[5, 1]])}), {"x": np.ones((2, 3), np.float32)})
    nodes = [helper.make_node("Einsum", ["x", "x"], ["y"], name="e", equation="ij,ij->i")]
    graph = import_onnx(make_model(nodes, {"x": [2, 3]}, ["y"], opset=17))
    with pytest.raises(ExecutionError, match=r"^node 'e' \(Einsum\) failed: ONNX's reference kernel for Einsum "
                                             r"made a tensor of shape \(3,\), not the \(2\) shape inference gave"):
        execute(graph, {"x": np.ones((3, 3), np.float32)})

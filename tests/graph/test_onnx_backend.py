"""ONNX's own backend tests against openvta's float path (``graph/onnx_backend.py``): the node
test cases of every operator the registry claims (``collect_testcases()``: ONNX's inputs and
expected outputs), each passing or excluded for a reason listed here, each run by openvta's
own kernel on the types it computes on (float32, int64) unless the form is listed as one it
declines (then ONNX's reference kernel runs it, the fallback); and the zoo's light models
through the backend.  The whole node suite is ``test_onnx_node_suite.py``'s."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import ModelProto, TensorProto, numpy_helper
from onnx.backend.test.case.node import collect_testcases
from onnx.backend.test.case.test_case import TestCase
from onnx.reference import ReferenceEvaluator

from openvta.graph.frontends.onnx import SUPPORTED_OPS
from openvta.graph.ir import Op
from openvta.graph.onnx_backend import OpenvtaBackend

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "onnx_zoo"))
from zoo_models import MODELS, expected_output, model, shipped_input  # noqa: E402

#: Node tests of the registry's operators that openvta does not run, by pattern, with the reason.
EXCLUDED = {
    r"training": "training mode (openvta compiles for inference)",
    r"identity_(sequence|opt)": "sequence and optional types",
}
#: Forms of the registry's operators on float32 and int64 data that openvta's kernels decline
#: and ONNX's reference kernel runs; every other case of a registry op runs openvta's kernel.
DECLINED = {
    r"test_cast_(no_saturate_|e8m0_)?FLOAT_to_": "a Cast to another type than float32 or int64",
    r"test_constant$": "a Constant that is the model's output",
    r"dropout_default_mask": "Dropout's mask output",
    r"maxpool_with_argmax": "MaxPool's indices output",
    r"test_pow_types_int64_float32": "Pow of int64 data",
    r"reshape_allowzero": "Reshape with allowzero=1 and a 0 in its shape",
    r"test_resize_.*cubic": "Resize's cubic mode",
    r"test_resize_.*antialias": "Resize with antialias",
    r"test_resize_tf_crop_and_resize": "Resize's tf_crop_and_resize",
    r"test_resize_.*half_pixel_symmetric": "Resize's half_pixel_symmetric",
    r"test_resize_.*_axes_": "Resize with axes",
    r"test_resize_.*nearest_not_(larger|smaller)": "Resize with an aspect-ratio policy",
}


def _model(case: TestCase) -> ModelProto:
    assert case.model is not None  # a node test case has its model
    return case.model


def _registry_cases() -> list[TestCase]:
    supported = set(SUPPORTED_OPS)
    return [case for case in collect_testcases()
            if {n.op_type for n in _model(case).graph.node} <= supported]


CASES = _registry_cases()


def _reason(name: str) -> str | None:
    return next((why for pattern, why in EXCLUDED.items() if re.search(pattern, name)), None)


def _expected(value: object) -> np.ndarray:
    """An expected output as float64 (the narrow types come as ``TensorProto`` or ml_dtypes arrays)."""
    array = numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)
    return array if array.dtype.kind in "biuf" else array.astype(np.float64)


def _check(case: TestCase) -> None:
    rep = OpenvtaBackend.prepare(_model(case))
    assert case.data_sets is not None  # and its data sets
    for inputs, outputs in case.data_sets:
        for got, want in zip(rep.run(inputs), outputs):
            assert got.dtype == _array_dtype(want), (got.dtype, want)
            np.testing.assert_allclose(_expected(got), _expected(want), rtol=case.rtol, atol=case.atol)


def _array_dtype(value: object) -> np.dtype:
    return numpy_helper.to_array(value).dtype if isinstance(value, TensorProto) else np.asarray(value).dtype


@pytest.mark.parametrize("case", [c for c in CASES if _reason(c.name) is None], ids=lambda c: c.name)
def test_node_cases_of_the_registrys_operators_pass(case: TestCase) -> None:
    _check(case)


def _kernel_types(case: TestCase) -> bool:
    return all(v.type.tensor_type.elem_type in (TensorProto.FLOAT, TensorProto.INT64) for v in _model(case).graph.input)


@pytest.mark.parametrize("case", [c for c in CASES if _reason(c.name) is None and _kernel_types(c)],
                         ids=lambda c: c.name)
def test_no_registry_op_runs_through_the_fallback(case: TestCase) -> None:
    assert case.data_sets is not None
    graph = OpenvtaBackend.prepare(_model(case)).graph_for(case.data_sets[0][0])
    fallback = sorted({n.op_name for n in graph.nodes if n.op is Op.ONNX_REFERENCE})
    declined = any(re.search(pattern, case.name) for pattern in DECLINED)
    assert fallback == ([_model(case).graph.node[0].op_type] if declined else [])


def test_the_pass_counts_and_every_exclusion_are_as_listed() -> None:
    excluded = [c.name for c in CASES if _reason(c.name) is not None]
    declined = [c.name for c in CASES if any(re.search(p, c.name) for p in DECLINED)]
    assert (len(CASES), len(CASES) - len(excluded), len(excluded), len(declined)) == (458, 448, 10, 52)


@pytest.mark.parametrize("name", ["test_clip_example", "test_reshape_reordered_all_dims",
                                  "test_conv_with_strides_padding"])
def test_backend_run_of_openvtas_kernels_does_not_use_onnx_reference(name: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    case = next(c for c in CASES if c.name == name)
    rep = OpenvtaBackend.prepare(_model(case))
    assert case.data_sets is not None

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("onnx.reference ran during Backend.run")

    monkeypatch.setattr(ReferenceEvaluator, "run", refuse)
    for inputs, outputs in case.data_sets:
        for got, want in zip(rep.run(inputs), outputs):
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_light_models_give_their_shipped_output(name: str) -> None:
    proto = model(name)
    got = OpenvtaBackend.run_model(proto, [shipped_input(proto)])[0]
    np.testing.assert_allclose(got, expected_output(name), rtol=1e-3, atol=1e-7)


def test_a_single_node_is_not_run_alone() -> None:
    with pytest.raises(NotImplementedError, match="^openvta runs models, not single nodes: use prepare or run_model$"):
        OpenvtaBackend.run_node(_model(CASES[0]).graph.node[0], [])
    assert OpenvtaBackend.supports_device("CPU") and not OpenvtaBackend.supports_device("CUDA")


def _integer_model(op: str, elem: int, **attrs: Any) -> ModelProto:
    from onnx import helper

    node = helper.make_node(op, ["x", "y"] if op in ("Add", "Mul") else ["x"], ["z"], **attrs)
    inputs = [helper.make_tensor_value_info(n, elem, [2, 1, 4]) for n in node.input]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("z", elem, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def test_an_integer_model_wraps_as_its_type() -> None:
    from onnx import TensorProto

    x = np.array([[[250, 3, 0, 255]], [[1, 2, 3, 4]]], np.uint8)
    got = OpenvtaBackend.run_model(_integer_model("Add", TensorProto.UINT8), [x, x])[0]
    assert got.dtype == np.uint8 and got.tolist() == (x + x).tolist()


def test_an_integer_model_runs_exactly_beyond_float32s_integers() -> None:
    from onnx import TensorProto

    x = np.full((2, 1, 4), 5001, np.int32)
    got = OpenvtaBackend.run_model(_integer_model("Mul", TensorProto.INT32), [x, x])[0]
    assert got.dtype == np.int32 and (got == 5001 * 5001).all()  # 25,010,001 > 2**24


def test_an_integer_operator_onnx_does_not_define_is_refused() -> None:
    from onnx import TensorProto

    from openvta.graph.errors import ModelError

    with pytest.raises(ModelError, match=r"^node 'AveragePool_0' \(AveragePool\): ONNX's shape inference refuses it: "
                                         r"X typestr: T, has unsupported type: tensor\(int8\)$"):
        OpenvtaBackend.run_model(_integer_model("AveragePool", TensorProto.INT8, kernel_shape=[2]),
                                 [np.zeros((2, 1, 4), np.int8)])

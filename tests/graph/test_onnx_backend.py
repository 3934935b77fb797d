"""ONNX's own backend tests against openvta's float path (``graph/onnx_backend.py``): the node
test cases of every operator the registry claims (``collect_testcases()``: ONNX's inputs and
expected outputs), each passing or excluded for a reason listed here (and in docs/MODELS.md),
and the zoo's light models through the backend.  ``Backend.run`` computes with openvta's
own references: a run with ``onnx.reference``'s evaluator broken still passes."""

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
from openvta.graph.onnx_backend import OpenvtaBackend

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "onnx_zoo"))
from zoo_models import MODELS, expected_output, model, shipped_input  # noqa: E402

#: Node tests of the registry's operators that openvta does not run, by pattern, with the reason.
EXCLUDED = {
    r"training": "training mode (openvta compiles for inference)",
    r"dropout_default_mask": "Dropout's mask (bool) as a model output",
    r"maxpool_with_argmax": "MaxPool's indices output",
    r"reshape_allowzero|_empty_set": "zero-sized tensors (Reshape with allowzero=1, a reduction of an empty axis)",
    r"test_div_u?int": "integer Div (it truncates, which float32 division cannot be relied on to reproduce)",
    r"test_pow_types_int64": "int64 data (the float path's int64 tensors are shapes)",
    r"identity_(sequence|opt)": "sequence and optional types",
    r"DOUBLE": "float64 tensors (the graph holds float32, which does not hold a double exactly)",
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


def test_the_pass_counts_and_every_exclusion_are_as_the_readme_says() -> None:
    excluded = [c.name for c in CASES if _reason(c.name) is not None]
    assert (len(CASES), len(CASES) - len(excluded), len(excluded)) == (393, 358, 35)


@pytest.mark.parametrize("name", ["test_clip_example", "test_reshape_reordered_all_dims",
                                  "test_conv_with_strides_padding"])
def test_backend_run_does_not_use_onnx_reference(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
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
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_an_integer_model_wraps_as_its_type() -> None:
    from onnx import TensorProto

    x = np.array([[[250, 3, 0, 255]], [[1, 2, 3, 4]]], np.uint8)
    got = OpenvtaBackend.run_model(_integer_model("Add", TensorProto.UINT8), [x, x])[0]
    assert got.dtype == np.uint8 and got.tolist() == (x + x).tolist()


def test_an_integer_value_beyond_float32s_exact_range_is_refused() -> None:
    from onnx import TensorProto

    from openvta.graph.errors import ModelError

    x = np.full((2, 1, 4), 5000, np.int32)
    rep = OpenvtaBackend.prepare(_integer_model("Mul", TensorProto.INT32))
    with pytest.raises(ModelError, match=r"^integer model value 'z' leaves the integers float32 holds exactly "
                                         r"\(\|v\| <= 2\*\*24\), so the float path cannot run it exactly$"):
        rep.run([x, x])


def test_an_integer_operator_whose_float_result_differs_is_refused() -> None:
    from onnx import TensorProto

    from openvta.graph.errors import ModelError

    with pytest.raises(ModelError, match=r"^node 'AveragePool' \(AveragePool\) on integer tensors is not "
                                         r"supported; such models run only Add, Cast, Clip, .*Unsqueeze$"):
        OpenvtaBackend.prepare(_integer_model("AveragePool", TensorProto.INT8, kernel_shape=[2]))

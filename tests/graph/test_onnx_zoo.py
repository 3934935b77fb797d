"""The nine classic CNNs of the ONNX model zoo, as the ``onnx`` package ships them (opset 9,
weights as ConstantOfShape fills): each imports (its float path gives the shipped output
through the ONNX backend: test_onnx_backend.py); two with seeded He-normal
weights compile, their float reference equals
onnxruntime and their int8 run equals the integer reference.  (The 224-pixel int8 runs of
all nine are ``benchmarks/models.py --model zoo``.)"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx_models import run_onnxruntime

import openvta
from openvta.graph.frontends.onnx import import_onnx
from openvta.graph.ir import Op

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "onnx_zoo"))
from zoo_models import MODELS, input_shape, model, random_inputs, with_weights  # noqa: E402


@pytest.mark.parametrize("name", MODELS)
def test_every_zoo_model_imports(name: str) -> None:
    proto = model(name)
    graph = import_onnx(proto, dict([input_shape(proto)]))
    assert graph.notes == ("opset 9 upgraded to 13 with onnx.version_converter",)
    assert any(n.op is Op.CONV for n in graph.nodes)
    assert not {n.op.value for n in graph.nodes} & {"ConstantOfShape", "Sum", "Dropout"}


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet"])
def test_with_weights_the_float_path_is_onnxruntimes_and_int8_is_exact(name: str) -> None:
    proto = with_weights(name)
    name_in, _ = input_shape(proto)
    compiled = openvta.compile_model(proto, [{name_in: random_inputs(proto, 1, seed)} for seed in (1, 3)])
    x = random_inputs(proto, 1, seed=2)
    expected = run_onnxruntime(proto, {name_in: x})[0]
    got = compiled.float_reference(x)[compiled.graph.outputs[0]]
    assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()
    out = compiled.run(x, backend="functional")
    reference = compiled.reference(x)
    assert all(np.array_equal(out[k], reference[k]) for k in reference)

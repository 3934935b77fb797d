"""Zero points on non-negative activations (``compile_model``'s default, ``activations="asymmetric"``):
a ReLU's output takes all 256 codes at the zero point -128, its readers fold the zero point
into their bias (products) or requantization (sums, means, tables), a convolution pads with
-128 (LOAD INP's ``pad_min``), and the integer model is what every back end computes."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from onnx_models import make_model

import openvta
from openvta.graph.compiled_model import CompiledModel, load_model
from openvta.graph.ir import Op

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resnet18"
sys.path.insert(0, str(EXAMPLE))
from make_model import build_resnet18, random_images  # noqa: E402


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def resnet() -> tuple[object, np.ndarray, np.ndarray]:
    return build_resnet18(size=32, width=16), random_images(8, 32, seed=1), random_images(4, 32, seed=2)


@pytest.mark.parametrize("config", ["vta", "v2"])
def test_a_resnet_with_zero_points_runs_its_integer_model_and_is_closer_to_float(resnet, config) -> None:
    model, calibration, evaluation = resnet
    asymmetric = openvta.compile_model(model, calibration, config=config, activations="asymmetric")
    symmetric = openvta.compile_model(model, calibration, config=config, activations="symmetric")
    graph = asymmetric.graph
    padded = [n for n in graph.nodes if n.op is Op.CONV and n.attrs.get("pad_value") == -128]
    assert len(padded) >= 10  # every 3×3 convolution after a ReLU (the stem reads the image: signed)
    with_zero_point = {v for v, t in graph.types.items() if t.quant is not None and t.quant.zero_point == -128}
    assert any(v.endswith(".q") for v in with_zero_point)
    name, out = asymmetric.inputs[0], asymmetric.outputs[0]
    closer = []
    for x in evaluation:
        feed = {name: x[None]}
        expected = asymmetric.reference(feed)[out]
        np.testing.assert_array_equal(asymmetric.run(feed, backend="functional")[out], expected)
        real = asymmetric.float_reference(feed)[out]
        closer.append(_cosine(expected, real) - _cosine(symmetric.reference(feed)[out], real))
    assert np.mean(closer) > 0  # (0.99863 → 0.99929 on 8 inputs: docs/DECISIONS.md)
    feed = {name: evaluation[:1]}
    np.testing.assert_array_equal(asymmetric.run(feed, backend="cycle")[out], asymmetric.reference(feed)[out])


def test_a_model_with_zero_points_saves_and_loads(resnet) -> None:
    model, calibration, evaluation = resnet
    compiled = openvta.compile_model(model, calibration, config="tiny", activations="asymmetric")
    data = io.BytesIO()
    compiled.save(data)
    data.seek(0)
    loaded = load_model(data)
    feed = {compiled.inputs[0]: evaluation[:1]}
    out = compiled.outputs[0]
    np.testing.assert_array_equal(loaded.run(feed, backend="functional")[out], compiled.reference(feed)[out])


def _relu_then(reader: str) -> tuple[object, np.ndarray]:
    """x → Conv → Relu → ``reader`` (with a second activation where it takes two) → Conv."""
    rng = np.random.default_rng(0)
    inits = {"w1": rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.2,
             "w2": rng.standard_normal((16, 16 * (2 if reader == "Concat" else 1), 1, 1)).astype(np.float32) * 0.2}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"])]
    if reader == "Concat":
        nodes.append(helper.make_node("Concat", ["r", "x"], ["m"], axis=1))
    elif reader == "Mul":
        nodes += [helper.make_node("Sigmoid", ["x"], ["g"]), helper.make_node("Mul", ["r", "g"], ["m"])]
    else:
        nodes.append(helper.make_node(reader, ["r"], ["m"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Conv", ["m", "w2"], ["y"]))
    return make_model(nodes, {"x": [1, 16, 6, 6]}, ["y"], inits), rng.standard_normal((4, 16, 6, 6)).astype(np.float32)


@pytest.mark.parametrize("reader", ["Concat", "Mul", "AveragePool"])
def test_a_value_read_by_an_op_without_zero_points_stays_symmetric(reader) -> None:
    model, x = _relu_then(reader)
    compiled: CompiledModel = openvta.compile_model(model, x, config="tiny", activations="asymmetric")
    relu = next(t for v, t in compiled.graph.types.items() if v.startswith("r.q") or v == "r.q")
    assert relu.quant is not None and relu.quant.zero_point == 0
    np.testing.assert_array_equal(compiled.run({"x": x[:1]}, backend="functional")["y"],
                                  compiled.reference({"x": x[:1]})["y"])


def test_a_value_read_by_a_max_pool_keeps_its_zero_point() -> None:
    model, x = _relu_then("MaxPool")
    compiled = openvta.compile_model(model, x, config="tiny", activations="asymmetric")
    types = compiled.graph.types
    pooled = [n for n in compiled.graph.nodes if n.op is Op.MAX_POOL]  # (the ReLU is the clip at -128)
    assert pooled and types[pooled[0].inputs[0]].quant.zero_point == types[pooled[0].outputs[0]].quant.zero_point \
        == -128
    assert not any(n.op is Op.RELU for n in compiled.graph.nodes)
    np.testing.assert_array_equal(compiled.run({"x": x[:1]}, backend="functional")["y"],
                                  compiled.reference({"x": x[:1]})["y"])


def test_activations_must_be_symmetric_or_asymmetric(resnet) -> None:
    model, calibration, _ = resnet
    with pytest.raises(ValueError, match=r"^activations must be one of 'asymmetric', 'symmetric', not 'signed'$"):
        openvta.compile_model(model, calibration, activations="signed")


@pytest.mark.parametrize("precision", ["int16", "auto", "mixed:40"])
def test_zero_points_with_16_bit_products_keep_every_product_on_the_accelerator(resnet, precision) -> None:
    """A 16-bit product's 8-bit input keeps its zero point (the bias term, the padding); its
    16-bit values have none: no product falls back to float on the CPU."""
    model, calibration, evaluation = resnet
    compiled = openvta.compile_model(model, calibration, config="tiny", precision=precision)
    floats = [n.name for n in compiled.graph.nodes if n.op in (Op.CONV, Op.GEMM)
              and compiled.graph.types[n.inputs[0]].dtype.value == "float32" and "im2col" not in n.inputs[0]]
    assert floats == []
    feed = {compiled.inputs[0]: evaluation[:1]}
    out = compiled.outputs[0]
    np.testing.assert_array_equal(compiled.run(feed, backend="functional")[out], compiled.reference(feed)[out])

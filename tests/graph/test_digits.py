"""The digits example: openvta's float model equals onnxruntime, int8 keeps the accuracy,
the training script's hand-written passes are right and its export is the model it trained."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx_models import run_onnxruntime

from openvta.graph.compiled_model import CompiledModel, load_model
from openvta.graph.pipeline import compile_model

DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits"
sys.path.insert(0, str(DIGITS))
import train  # noqa: E402
from digits_data import load_split  # noqa: E402

MODEL = DIGITS / "digits.onnx"
SEPARABLE = DIGITS / "digits_dw.onnx"  # conv2 depthwise-separable (train.py --separable)


@pytest.fixture(scope="module")
def split() -> tuple[np.ndarray, ...]:
    return load_split()


@pytest.fixture(scope="module")
def compiled(split) -> dict[str, CompiledModel]:
    x_train = split[0]
    return {mode: compile_model(MODEL, x_train, quantize=mode) for mode in ("fixed", "pow2")}


def _accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float((logits.argmax(axis=1) == labels).mean())


def test_the_committed_model_is_small_float32_opset_13() -> None:
    assert MODEL.stat().st_size < 100_000
    model = onnx.load(str(MODEL))
    onnx.checker.check_model(model)
    assert model.opset_import[0].version == 13
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"


def test_float_reference_equals_onnxruntime(split, compiled) -> None:
    x_test = split[2]
    (expected,) = run_onnxruntime(onnx.load(str(MODEL)), {"image": x_test})
    ours = compiled["fixed"].float_reference(x_test)["logits"]
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_int8_accuracy_is_within_a_point_of_float(split, compiled) -> None:
    _, _, x_test, y_test = split
    float_accuracy = _accuracy(compiled["fixed"].float_reference(x_test)["logits"], y_test)
    assert float_accuracy > 0.97
    for mode, model in compiled.items():
        accuracy = _accuracy(model.reference(x_test)["logits"], y_test)
        assert accuracy >= float_accuracy - 0.01, (mode, accuracy, float_accuracy)


def test_the_model_file_round_trips_and_cpu_runs_equal_the_reference(split, compiled, tmp_path) -> None:
    x = split[2][:32]
    compiled["fixed"].save(tmp_path / "digits.ovta")
    loaded = load_model(tmp_path / "digits.ovta")
    assert np.array_equal(loaded.reference(x)["logits"], compiled["fixed"].reference(x)["logits"])
    cpu = compile_model(MODEL, split[0], cpu_ops=["Conv", "Gemm"])
    assert np.array_equal(cpu.run(x, backend="functional")["logits"], cpu.reference(x)["logits"])


@pytest.mark.parametrize("separable", [False, True])
def test_backward_matches_finite_differences(separable: bool) -> None:
    rng = np.random.default_rng(0)
    init = train.init_separable if separable else train.init_params
    params = {k: v.astype(np.float64) for k, v in init(rng).items()}
    x = rng.random((3, 1, 8, 8))
    labels = np.array([1, 4, 7])

    def loss(p: dict[str, np.ndarray]) -> float:
        return train.loss_and_grad(train.forward(p, x)[0], labels)[0]

    logits, cache = train.forward(params, x)
    grads = train.backward(params, cache, train.loss_and_grad(logits, labels)[1].astype(np.float64))
    for key in params:
        flat = params[key].reshape(-1)
        for index in rng.choice(flat.size, size=min(4, flat.size), replace=False):
            saved = flat[index]
            flat[index] = saved + 1e-6
            up = loss(params)
            flat[index] = saved - 1e-6
            down = loss(params)
            flat[index] = saved
            numeric = (up - down) / 2e-6
            assert abs(grads[key].reshape(-1)[index] - numeric) < 1e-6 + 1e-4 * abs(numeric), key


@pytest.mark.parametrize("separable", [False, True])
def test_the_export_computes_what_was_trained(split, tmp_path, separable: bool) -> None:
    x_train, y_train = split[0][:64], split[1][:64]
    params = train.train(x_train, y_train, epochs=1, separable=separable)
    train.export_onnx(params, tmp_path / "d.onnx")
    (exported,) = run_onnxruntime(onnx.load(str(tmp_path / "d.onnx")), {"image": x_train})
    np.testing.assert_allclose(exported, train.forward(params, x_train)[0], rtol=1e-4, atol=1e-4)


def test_the_separable_cnn_runs_its_depthwise_conv_on_the_accelerator_within_a_point(split) -> None:
    """MobileNet's block on real data: int8 top-1 within a point of float, every conv (the
    1-channel stem packed, the depthwise one, the pointwise one) on the accelerator, the
    cycle model equal to the integer reference."""
    from openvta.graph.ir import Device, Op

    x_train, _, x_test, y_test = split
    model = compile_model(SEPARABLE, x_train[:256])
    float_top1 = _accuracy(model.float_reference(x_test)["logits"], y_test)
    assert float_top1 > 0.97
    assert _accuracy(model.reference(x_test)["logits"], y_test) >= float_top1 - 0.01
    convs = [n for n in model.graph.nodes if n.op is Op.CONV]
    assert len(convs) == 3 and all(n.placement.device is Device.ACCEL for n in convs)
    assert any("depthwise" in n.placement.reason for n in convs)
    x = x_test[:8]
    assert np.array_equal(model.run(x, backend="cycle")["logits"], model.reference(x)["logits"])

"""The digits ViT (``examples/digits_vit``): a transformer encoder trained on real data,
from its ONNX file to every back end.

Its float path equals onnxruntime; the int8 model's top-1 on the 360 held-out images is
within 1 point of the float model's; every product runs on the accelerator; ``functional``,
``cycle`` and ``rtl`` equal the integer reference bit for bit; a batch that is not the
file's one image is refused in one line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pytest

import openvta
from openvta.graph.ir import Op

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "digits"))
from digits_data import load_split  # noqa: E402

VIT = ROOT / "examples" / "digits_vit" / "digits_vit.onnx"


@pytest.fixture(scope="module")
def vit() -> tuple[openvta.CompiledModel, np.ndarray, np.ndarray]:
    x_train, _, x_test, y_test = load_split()
    model = openvta.compile_model(str(VIT), [{"image": x_train[i:i + 1]} for i in range(32)])
    return model, x_test, y_test


def _logits(run: Callable[..., Mapping[str, np.ndarray]], images: np.ndarray) -> np.ndarray:
    return np.concatenate([run({"image": images[i:i + 1]})["logits"] for i in range(len(images))])


def test_the_float_path_equals_onnxruntime(vit: tuple) -> None:
    import onnxruntime

    model, x_test, _ = vit
    session = onnxruntime.InferenceSession(str(VIT), providers=["CPUExecutionProvider"])
    for image in x_test[:16]:
        expected = session.run(None, {"image": image[None]})[0]
        ours = model.float_reference({"image": image[None]})["logits"]
        assert np.abs(ours - expected).max() <= 1e-4 * np.abs(expected).max()


def test_int8_top1_is_within_one_point_of_float(vit: tuple) -> None:
    model, x_test, y_test = vit
    float_top1 = (_logits(model.float_reference, x_test).argmax(1) == y_test).mean()
    int8_top1 = (_logits(model.reference, x_test).argmax(1) == y_test).mean()
    assert float_top1 > 0.93
    assert float_top1 - int8_top1 <= 0.01


def test_every_product_runs_on_the_accelerator(vit: tuple) -> None:
    model, _, _ = vit
    products = [n for n in model.graph.nodes if n.op in (Op.CONV, Op.GEMM, Op.MATMUL)]
    # the patches, Q, K, V, out, fc1, fc2, the head, and attention's two products per head
    assert len(products) == 10
    assert all(n.placement is not None and n.placement.device.value == "accel" for n in products)
    share = next(line for line in model.summary().splitlines() if line.startswith("MACs"))
    assert share == "MACs: 100.0% on the accelerator (int8 products), none on the CPU"


def test_it_is_integer_from_its_input_to_its_logits(vit: tuple) -> None:
    """LayerNorm, Softmax, GELU, the residual adds and the mean run as integer kernels: the
    only float values are the image and the logits."""
    model, _, _ = vit
    floats = [n.op for n in model.graph.nodes if model.graph.types[n.outputs[0]].dtype.value == "float32"]
    assert floats == [Op.DEQUANTIZE]
    assert {n.op for n in model.graph.nodes} >= {Op.LAYER_NORM, Op.SOFTMAX, Op.TABLE, Op.REDUCE_SUM}


@pytest.mark.parametrize("backend", ["functional", "cycle"])
def test_the_back_ends_equal_the_reference(vit: tuple, backend: str) -> None:
    model, x_test, _ = vit
    for image in x_test[:3]:
        feeds = {"image": image[None]}
        np.testing.assert_array_equal(model.run(feeds, backend=backend)["logits"], model.reference(feeds)["logits"])


@pytest.mark.rtl
# its own build of small (about 60 s): with OPENVTA_FULL_RTL=1, outside make test's 20 minutes
# (benchmarks/models.py --model vit --rtl runs it too)
@pytest.mark.skipif(not os.environ.get("OPENVTA_FULL_RTL"), reason="the ViT on the RTL runs with OPENVTA_FULL_RTL=1")
def test_the_rtl_equals_the_reference_on_small() -> None:
    x_train, _, x_test, _ = load_split()
    model = openvta.compile_model(str(VIT), [{"image": x_train[i:i + 1]} for i in range(8)], config="small")
    feeds = {"image": x_test[:1]}
    out = model.run(feeds, backend="rtl")
    np.testing.assert_array_equal(out["logits"], model.reference(feeds)["logits"])
    cycles = model.run(feeds, backend="cycle").report.cycles
    assert out.report.cycles is not None and cycles is not None
    assert abs(out.report.cycles - cycles) <= 0.05 * cycles


def test_a_batch_the_file_does_not_have_is_one_line(vit: tuple) -> None:
    model, x_test, _ = vit
    with pytest.raises(ValueError) as info:
        model.reference({"image": x_test[:4]})
    assert "\n" not in str(info.value) and "(1, 1, 8, 8)" in str(info.value) and "(4, 1, 8, 8)" in str(info.value)

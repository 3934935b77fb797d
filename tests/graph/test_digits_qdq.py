"""The digits model quantized by onnxruntime (QDQ), imported with its own parameters.

In ``exact`` mode openvta's integer model gives the ONNX specification's outputs
(``onnx.reference``; compared as the dequantized float outputs, which are ``(q - z) * s``
of the int8 codes, so equal floats are equal codes) but for near ties
(``assert_equals_spec`` says why), and onnxruntime's int8 outputs exactly where its int8
kernels are exact on this CPU (``ort_probe``); ``functional`` and ``cycle`` runs equal
the reference exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ort_probe import require_exact_ort_int8
from qdq_models import DIGITS, assert_equals_spec, load_split, ort_outputs, output_step, quantize_qdq, spec_outputs

from openvta.graph.ir import Device, Op
from openvta.graph.compiled_model import CompiledModel, load_model
from openvta.graph.pipeline import compile_model

SCHEMES = {"per_tensor": False, "per_channel": True}


@pytest.fixture(scope="module")
def images() -> tuple[np.ndarray, np.ndarray]:
    x_train, _, x_test, _ = load_split()
    return x_train, np.concatenate([x_train, x_test])


@pytest.fixture(scope="module", params=list(SCHEMES))
def qdq(request, images, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("qdq") / f"digits_{request.param}.onnx"
    return quantize_qdq(DIGITS / "digits.onnx", out, images[0], per_channel=SCHEMES[request.param])


@pytest.fixture(scope="module")
def exact(qdq, images) -> CompiledModel:
    return compile_model(qdq, images[0][:4], quantize="exact")


def test_exact_mode_gives_the_specifications_outputs(qdq, exact, images) -> None:
    (expected,) = spec_outputs(qdq, {"image": images[1]})
    got = exact.reference(images[1])["logits"]
    assert_equals_spec(got, expected, output_step(qdq, "logits"))
    assert (got.argmax(1) == expected.argmax(1)).mean() >= 0.999


def test_exact_mode_gives_onnxruntimes_int8_outputs(qdq, exact, images) -> None:
    require_exact_ort_int8()
    (expected,) = ort_outputs(qdq, {"image": images[1]})
    got = exact.reference(images[1])["logits"]
    mismatches = int((got != expected).sum())
    assert mismatches == 0, f"{mismatches} of {expected.size} differ"  # the same arithmetic


@pytest.mark.parametrize("backend", ["functional", "cycle"])
def test_exact_mode_runs_equal_the_reference(exact, images, backend) -> None:
    x = images[1][:24]
    got = exact.run(x, backend=backend)["logits"]
    assert np.array_equal(got, exact.reference(x)["logits"])


def test_exact_requantization_stays_on_the_cpu_with_its_reason(exact) -> None:
    rows = exact.nodes()
    requant = [r for r in rows if r.op == Op.REQUANTIZE.value]
    assert len(requant) == 3
    for row in requant:
        assert row.device is Device.CPU
        assert row.reason.startswith("exact requantization multiplies by a float32 scale")
    assert exact.accelerator_groups() == []


def test_the_model_keeps_its_own_zero_points(exact) -> None:
    quantize = next(n for n in exact.graph.nodes if n.op is Op.QUANTIZE)
    assert quantize.attrs["zero_point"] == -128  # images in [0, 1]: an asymmetric range
    conv1 = next(n for n in exact.graph.nodes if n.name == "conv1.requantize")
    assert conv1.attrs["zero_point"] == -128  # the ReLU onnxruntime removed lives on here


def test_an_exact_model_file_loads_and_computes_the_same(exact, images, tmp_path) -> None:
    exact.save(tmp_path / "digits_qdq.ovta")
    loaded = load_model(tmp_path / "digits_qdq.ovta")
    x = images[1][:16]
    assert np.array_equal(loaded.reference(x)["logits"], exact.reference(x)["logits"])


def test_fixed_mode_reads_a_qdq_model_as_its_float_model(qdq, images) -> None:
    model = compile_model(qdq, images[0], quantize="fixed")
    x = images[1][:8]
    assert model.accelerator_groups()  # recalibrated, symmetric: the accelerator's scheme
    assert np.array_equal(model.run(x, backend="functional")["logits"],
                          model.reference(x)["logits"])
    (expected,) = spec_outputs(qdq, {"image": images[1]})
    top1 = model.reference(images[1])["logits"].argmax(1) == expected.argmax(1)
    assert top1.mean() >= 0.98  # the folded pairs keep the ReLUs quantize_static removed

"""Real pretrained models as a package ships them: PaddleOCR's text detector (PP-OCRv4, a
MobileNetV3/PP-LCNet backbone with squeeze-and-excitation blocks and a DB head that
upsamples by ``ConvTranspose`` and nearest ``Resize``) and its text-direction classifier
(dynamic ``[-1, 3, ?, ?]`` input, a flatten written ``Shape → Slice → Concat → Reshape``),
from ``rapidocr-onnxruntime==1.4.4`` (the ``ocr`` extra; it needs Python < 3.13).

Each compiles at the shapes rapidocr runs it (detector 1×3×320×640, classifier N×3×48×192),
its float path equal to onnxruntime within 1e-4 of the largest output, int8 on the
functional simulator equal to ``model.reference``, and at least 90 % of its MACs on the
accelerator.  Their accuracy on tasks with ground truth is ``benchmarks/tasks.py``'s."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from onnx_models import run_onnxruntime

from openvta.graph import compile_model
from openvta.graph.compiled_model import CompiledModel
from openvta.graph.ir import Device, Op


def _models() -> Path:
    spec = importlib.util.find_spec("rapidocr_onnxruntime")  # (its files only: importing it loads OpenCV)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("rapidocr-onnxruntime 1.4.4 is not installed (the ocr extra; it needs Python < 3.13)")
    return Path(next(iter(spec.submodule_search_locations))) / "models"


def _share(model: CompiledModel) -> float:
    rows = model.nodes()
    return sum(r.macs for r in rows if r.device is Device.ACCEL) / sum(r.macs for r in rows)


def _check(model: CompiledModel, path: Path, x: np.ndarray) -> None:
    import onnx

    (expected,) = run_onnxruntime(onnx.load(path), {"x": x})
    out = model.outputs[0]
    got = model.float_reference(x)[out]
    assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()
    np.testing.assert_array_equal(model.run(x, backend="functional")[out], model.reference(x)[out])


def _pages(count: int, height: int, width: int, seed: int) -> np.ndarray:
    """Bright pages with dark bars where text would be, normalized as rapidocr does
    (``x/255``, mean 0.5, std 0.5)."""
    rng = np.random.default_rng(seed)
    pages = np.full((count, 3, height, width), 235.0) + rng.normal(0, 8, (count, 3, height, width))
    for page in pages:
        for _ in range(3):
            top, left = rng.integers(0, height - 24), rng.integers(0, width // 2)
            page[:, top:top + rng.integers(10, 24), left:left + rng.integers(40, width // 2)] = rng.uniform(10, 60)
    return ((np.clip(pages, 0, 255) / 255 - 0.5) / 0.5).astype(np.float32)


def test_the_pp_ocrv4_detector_compiles_with_its_upsampling_on_the_accelerator() -> None:
    path = _models() / "ch_PP-OCRv4_det_infer.onnx"
    pages = _pages(3, 320, 640, seed=0)
    model = compile_model(path, pages[:2], input_shapes={"x": (1, 3, 320, 640)})
    _check(model, path, pages[2:])
    assert _share(model) >= 0.90
    taps = [n for n in model.graph.nodes if n.op is Op.CONV and n.name.endswith(".taps")]
    assert len(taps) == 2 and all(n.placement is not None and n.placement.device is Device.ACCEL for n in taps)


def test_the_direction_classifier_compiles_for_any_batch() -> None:
    path = _models() / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    lines = _pages(7, 48, 192, seed=1)
    model = compile_model(path, lines[:4], input_shapes={"x": (4, 3, 48, 192)})
    assert "note: opset 11 upgraded to 13 with onnx.version_converter" in model.summary()
    _check(model, path, lines[4:])  # a batch of 3
    assert _share(model) >= 0.90

"""Every registry op's float reference against onnxruntime, generated from the registry."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx_models import example_model, run_onnxruntime

from openvta.graph.execute import execute
from openvta.graph.frontends.onnx import import_onnx
from openvta.graph.registry import INTERNAL_OPS, REGISTRY

CASES = [pytest.param(op, example, id=f"{op.value}-{index}")
         for op, d in REGISTRY.items() for index, example in enumerate(d.examples)]


def test_every_onnx_op_has_an_example() -> None:
    missing = [op.value for op, d in REGISTRY.items() if op not in INTERNAL_OPS and not d.examples]
    assert missing == []


@pytest.mark.parametrize(("op", "example"), CASES)
def test_float_reference_matches_onnxruntime(op, example) -> None:
    rng = np.random.default_rng(zlib.crc32(op.value.encode()))
    model, feeds = example_model(op, example, rng)
    graph = import_onnx(model)
    ours = execute(graph, feeds)["out"]
    (expected,) = run_onnxruntime(model, feeds)
    assert ours.dtype == expected.dtype and ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)

"""An incomplete op registry or frontend fails at import, naming what is missing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from openvta.graph.frontends.onnx_ops import CONVERTERS, check_converters
from openvta.graph.ir import Op
from openvta.graph.registry import ONNX_OPS, REGISTRY, check_registry


def test_the_shipped_registry_and_frontend_are_complete() -> None:
    check_registry(REGISTRY)
    check_converters(CONVERTERS, ONNX_OPS)


def test_an_op_without_an_entry_or_with_half_an_entry_is_named() -> None:
    partial = {op: entry for op, entry in REGISTRY.items() if op is not Op.SOFTMAX}
    partial[Op.RELU] = replace(REGISTRY[Op.RELU], float_ref=None, examples=())
    with pytest.raises(ImportError, match=r"^the op registry is incomplete: Softmax has no registry entry "
                                          r"\(graph/ops\); Relu has no float reference; Relu has no ONNX "
                                          r"example$"):
        check_registry(partial)
    with pytest.raises(ImportError, match=r"^the op registry is incomplete: Gemm's entry is Conv's$"):
        check_registry({**REGISTRY, Op.GEMM: REGISTRY[Op.CONV]})


def test_an_onnx_op_without_a_converter_is_named() -> None:
    converters = {op: c for op, c in CONVERTERS.items() if op is not Op.CLIP}
    with pytest.raises(ImportError, match=r"^ONNX ops without a converter in graph/frontends/onnx_ops\.py: "
                                          r"Clip$"):
        check_converters(converters, ONNX_OPS)
    with pytest.raises(ImportError, match=r"^converters for ops that are not ONNX ops of the registry: "
                                          r"Requantize$"):
        check_converters({**CONVERTERS, Op.REQUANTIZE: CONVERTERS[Op.RELU]}, ONNX_OPS)

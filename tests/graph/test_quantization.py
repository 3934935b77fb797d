"""Requantization arithmetic against exact rational arithmetic, and Quantize/Dequantize
against onnxruntime's QuantizeLinear/DequantizeLinear."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx_models import make_model, run_onnxruntime

from openvta.graph.ir import DType, RequantMode
from openvta.graph.ops.windows import round_div
from openvta.graph.ops.quant import dequantize, quantize, requantize
from openvta.graph.pipeline import compile_model
from openvta.isa.arith import round_shift
from openvta.graph.quantization import (MULTIPLIER_BITS, X_BITS, fixed_requant, pow2_requant,
                                        pre_shift_for, quantize_weights, requant_params)

INT32 = st.integers(-(2 ** 31), 2 ** 31 - 1)


def _floor_half(numerator: int, denominator: int) -> int:
    """floor(numerator / denominator + 1/2), exactly."""
    return (2 * numerator + denominator) // (2 * denominator)


@given(st.lists(INT32, min_size=1, max_size=8), st.integers(0, 31))
def test_round_shift_is_round_half_up(values: list[int], shift: int) -> None:
    got = round_shift(np.array(values, np.int64), shift).tolist()
    assert got == [_floor_half(v, 2 ** shift) for v in values]


@given(st.lists(st.integers(-(2 ** 20), 2 ** 20), min_size=1, max_size=8), st.integers(1, 1000))
def test_round_div_is_round_half_up(values: list[int], divisor: int) -> None:
    assert round_div(np.array(values), divisor).tolist() == [_floor_half(v, divisor) for v in values]


def test_round_shift_left_for_negative_shifts() -> None:
    assert round_shift(np.array([3, -3, 5]), np.array([-1, -4, 0])).tolist() == [6, -48, 5]


@settings(max_examples=200)
@given(st.floats(2.0 ** -24, 50.0), st.data())
def test_fixed_requant_never_overflows_and_is_accurate(multiplier: float, data) -> None:
    # results up to 2**29: far beyond int8, so every multiplier a model meets is covered
    bound = data.draw(st.integers(1, max(1, min(2 ** 30, int(2 ** 29 / multiplier)))))
    params = fixed_requant(np.array([multiplier]), bound)
    pre, (m,), (post,) = params.pre_shift, params.multiplier, params.post_shift
    assert 0 <= m < 2 ** MULTIPLIER_BITS and 0 <= post <= 31 and 0 <= pre <= 31
    half = (1 << pre) >> 1  # the quantize pass adds it to the bias
    for acc in (-bound, bound, data.draw(st.integers(-bound, bound))):
        x = (acc + half) >> pre
        assert abs(x) <= 2 ** X_BITS and abs(x * m) < 2 ** 31
        got = int(requantize(np.array([acc + half]), pre, (m,), (post,), 0, DType.INT32)[0])
        slack = 1 + 2.0 ** pre * multiplier + abs(acc) * multiplier * 2.0 ** -(MULTIPLIER_BITS - 1)
        assert abs(got - acc * multiplier) <= slack


@given(st.lists(st.integers(-12, 31), min_size=1, max_size=6), st.integers(1, 2 ** 16))
def test_pow2_requant_is_one_shift_per_channel(exponents: list[int], bound: int) -> None:
    params = pow2_requant(2.0 ** -np.array(exponents, dtype=np.float64), bound)
    assert params.pre_shift == 0 and params.multiplier == (1,)
    assert params.post_shift == tuple(exponents)
    acc = np.full((1, len(exponents)), bound, np.int64)
    got = requantize(acc, 0, (1,), params.post_shift, 1, DType.INT32)[0].tolist()
    assert got == [_floor_half(bound * 2 ** max(-k, 0), 2 ** max(k, 0)) for k in exponents]


def test_requant_errors() -> None:
    with pytest.raises(ValueError, match=r"^pow2 multipliers must be powers of two, not \[0\.3\]$"):
        pow2_requant(np.array([0.3]), 10)
    with pytest.raises(ValueError, match=r"^a left shift by 20 of accumulators up to 4096 must fit "
                                         r"int32, and does not$"):
        pow2_requant(np.array([2.0 ** 20]), 4096)
    with pytest.raises(ValueError, match=r"^requantization multiplier must be below 0\.25 after a "
                                         r"pre-shift of 17, not 1$"):
        fixed_requant(np.array([1.0]), 2 ** 32 - 1)
    with pytest.raises(ValueError, match=r"^accumulators up to 2147483648 must fit int32, and may not$"):
        requant_params(RequantMode.FIXED, np.array([1e-6]), 2 ** 31)
    assert fixed_requant(np.array([0.0, 0.0]), 100).multiplier == (0, 0)
    assert pre_shift_for(2 ** 16 - 1) == 0 and pre_shift_for(2 ** 16) == 1


def test_weights_quantize_per_channel() -> None:
    w = np.array([[1.0, -0.5], [0.0, 0.0], [-4.0, 3.0]], np.float32)
    q, scales = quantize_weights(w, 0, RequantMode.FIXED)
    assert q.tolist() == [[127, -64], [0, 0], [-127, 95]]
    np.testing.assert_allclose(scales[[0, 2]], [1 / 127, 4 / 127])
    q2, scales2 = quantize_weights(w, 1, RequantMode.POW2)
    assert scales2.tolist() == [2.0 ** -4, 2.0 ** -5] and q2[2].tolist() == [-64, 96]


def _ort_single(op: str, x: np.ndarray, scale: np.ndarray, axis: int | None = None,
                zero: np.ndarray | None = None) -> np.ndarray:
    elem = TensorProto.FLOAT if x.dtype == np.float32 else TensorProto.INT8
    attrs: dict[str, Any] = {} if axis is None else {"axis": axis}
    node = helper.make_node(op, ["x", "s", "z"], ["y"], **attrs)
    zero = np.zeros(scale.shape, np.int8) if zero is None else zero
    out = TensorProto.FLOAT if op == "DequantizeLinear" else TensorProto.INT8
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", elem, x.shape)],
                              [helper.make_tensor_value_info("y", out, None)],
                              [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zero, "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return run_onnxruntime(model, {"x": x})[0]


def test_quantize_and_dequantize_match_onnxruntime() -> None:
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 4, 5)) * 3).astype(np.float32)
    x[0, 0, :3] = [0.25, -0.75, 1.25]  # ties to even at scale 0.5
    q = quantize(x, 0.5)
    assert np.array_equal(q, _ort_single("QuantizeLinear", x, np.array(0.5, np.float32)))
    scales = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    ours = dequantize(q, tuple(float(s) for s in scales), 1)
    assert np.array_equal(ours, _ort_single("DequantizeLinear", q, scales, axis=1))
    assert math.isclose(float(dequantize(np.array([3], np.int8), (0.5,), None)[0]), 1.5)


@pytest.mark.parametrize("zero_point", [-128, -1, 0, 1, 127])
def test_zero_points_match_onnxruntime(zero_point: int) -> None:
    x = np.concatenate([np.linspace(-3, 3, 97, dtype=np.float32),
                        np.array([0.25, 0.75, -0.25, 1e6, -1e6], np.float32)])
    scale, zero = np.array(0.5, np.float32), np.array(zero_point, np.int8)
    q = quantize(x, 0.5, zero_point)
    assert np.array_equal(q, _ort_single("QuantizeLinear", x, scale, zero=zero))
    assert np.array_equal(dequantize(q, (0.5,), None, zero_point),
                          _ort_single("DequantizeLinear", q, scale, zero=zero))


def test_a_value_that_calibrates_to_zero_keeps_a_biased_reader_within_int32() -> None:
    """Relu after a BatchNormalization that makes every sample negative: its output is all
    zero, and the Gemm reading it still quantizes (its bias in a unit range's scale)."""
    inits = {"w": np.ones((3, 4), np.float32), "b": np.array([0.9, -0.7, -1.3], np.float32),
             "shift": np.full((4,), -100.0, np.float32)}
    nodes = [helper.make_node("Add", ["x", "shift"], ["s"]),
             helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Gemm", ["r", "w", "b"], ["y"], transB=1)]
    model = make_model(nodes, {"x": ["N", 4]}, ["y"], inits)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    for mode in ("fixed", "pow2"):
        compiled = compile_model(model, x, quantize=mode)
        np.testing.assert_allclose(compiled.reference(x)["y"], np.tile(inits["b"], (2, 1)),
                                   atol=0.02)

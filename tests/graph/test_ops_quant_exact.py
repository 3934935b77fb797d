"""The exact Requantize against a deliberately naive model of onnxruntime's MLAS requantization,
one accumulator at a time in numpy float32 scalars; its type checks and their errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openvta.graph.errors import OpError
from openvta.graph.ir import Attrs, DType, Op, RequantMode, TensorType
from openvta.graph.ops.quant import requantize_exact
from openvta.graph.registry import op_def

EDGES = [0, 1, 2, 3, 4, 15, 16, 17, 127, 128, 255, 256, 2 ** 24 - 1, 2 ** 24 + 1, 2 ** 31 - 1]


def naive(acc: int, scale: float, zero_point: int) -> int:
    """MlasRequantizeOutput for one value: float32 product, clamp, round half to even, + zp."""
    value = np.float32(acc) * np.float32(scale)
    value = min(max(value, np.float32(-128 - zero_point)), np.float32(127 - zero_point))
    return int(round(float(value))) + zero_point  # Python's round: ties to even


@pytest.mark.parametrize("zero_point", [-128, -1, 0, 1, 127])
@pytest.mark.parametrize("scale", [0.5, 0.25, 0.1, 1.0, 3.0, 1e-4, 0.0123])
def test_edges_equal_the_naive_model(scale: float, zero_point: int) -> None:
    accs = np.array(EDGES + [-e for e in EDGES] + [-2 ** 31], dtype=np.int32)
    got = requantize_exact(accs.reshape(1, -1), (scale,), zero_point, 1).reshape(-1)
    assert got.tolist() == [naive(int(a), scale, zero_point) for a in accs]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), min_size=3, max_size=3),
       st.lists(st.floats(2.0 ** -20, 4.0, width=32), min_size=3, max_size=3),
       st.integers(-128, 127))
def test_per_channel_equals_the_naive_model(accs: list[int], scales: list[float],
                                            zero_point: int) -> None:
    acc = np.array(accs, np.int32).reshape(1, 3, 1)
    got = requantize_exact(acc, tuple(scales), zero_point, 1).reshape(-1)
    assert got.tolist() == [naive(a, s, zero_point) for a, s in zip(accs, scales)]


def test_ties_round_to_even() -> None:
    acc = np.array([[1, 3, 5, -1, -3, -5]], np.int32)
    assert requantize_exact(acc, (0.5,), 0, 1).tolist() == [[0, 2, 2, 0, -2, -2]]


def _exact_attrs(**changes: object) -> Attrs:
    attrs: dict[str, object] = {"mode": RequantMode.EXACT, "scale": (0.5,), "zero_point": 3,
                                "axis": 1, "out_dtype": DType.INT8}
    attrs.update(changes)
    return Attrs(attrs)


def test_the_op_types_and_runs() -> None:
    requant = op_def(Op.REQUANTIZE)
    acc = TensorType((2, 3), DType.INT32)
    assert requant.infer([acc], _exact_attrs()) == TensorType((2, 3), DType.INT8)
    data = np.array([[1, 2, 3], [-4, 5, 600]], np.int32)
    assert requant.int_ref is not None
    assert requant.int_ref([data], _exact_attrs()).tolist() == [[3, 4, 5], [1, 5, 127]]


@pytest.mark.parametrize("changes, message", [
    ({"out_dtype": DType.INT32}, r"^exact Requantize out_dtype must be int8, not <DType\.INT32: "
                                 r"'int32'>$"),
    ({"zero_point": 128}, r"^zero_point must be an int8 value, not 128$"),
    ({"scale": (0.5, 0.25)}, r"^Requantize scale must hold 1 value or one per channel of axis 1 "
                             r"of \(2, 3\), not 2$"),
])
def test_the_op_errors(changes: dict[str, object], message: str) -> None:
    with pytest.raises(OpError, match=message):
        op_def(Op.REQUANTIZE).infer([TensorType((2, 3), DType.INT32)], _exact_attrs(**changes))


def test_quantize_and_dequantize_check_their_zero_point() -> None:
    with pytest.raises(OpError, match=r"^zero_point must be an int8 value, not -129$"):
        op_def(Op.QUANTIZE).infer([TensorType((2,), DType.FLOAT32)],
                                  Attrs({"scale": 0.5, "zero_point": -129}))
    with pytest.raises(OpError, match=r"^zero_point must be an int8 value, not 200$"):
        op_def(Op.DEQUANTIZE).infer([TensorType((2,), DType.INT8)],
                                    Attrs({"scale": (0.5,), "zero_point": 200}))

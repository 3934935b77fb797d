"""Compulsory DRAM bytes of the operators: what any schedule must move, counted by hand.

The ideal roofline of the cycle report (``CycleReport.ideal_cycles``) divides these by the
bus width; they are the logical elements each operator really uses, not its packed layouts.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import openvta
from openvta.compiler.epilogue import AluStage, Epilogue, TensorOperand
from openvta.compiler.ops.conv2d import conv2d_used_input_elems
from openvta.compiler.ops.registry import REGISTRY
from openvta.isa import AluOp
from openvta.runtime.program import load_program, program_bytes


def _naive_used_input_elems(n: int, ci: int, hw: int, kernel: int, pad: int, stride: int, w: int) -> int:
    """Mark every input pixel some output's window touches, in two dimensions at once."""
    rows, cols = hw + 2 * pad, w + 2 * pad
    touched = np.zeros((rows, cols), bool)
    for y in range((rows - kernel) // stride + 1):
        for x in range((cols - kernel) // stride + 1):
            touched[y * stride:y * stride + kernel, x * stride:x * stride + kernel] = True
    return n * ci * int(touched[pad:pad + hw, pad:pad + w].sum())


@pytest.mark.parametrize("shape, used", [
    # 1x1 stride 2 reads every other row and column: a quarter of the input
    (dict(n=1, ci=64, hw=56, kernel=1, pad=0, stride=2), 64 * 28 * 28),
    # odd size: rows 0, 2, 4 of 5
    (dict(n=1, ci=1, hw=5, kernel=1, pad=0, stride=2), 9),
    # 3x3 pad 1 stride 1 reads everything; padding is not input
    (dict(n=2, ci=3, hw=4, kernel=3, pad=1, stride=1), 2 * 3 * 16),
    # 3x3 stride 2 pad 1 on 8: windows start at -1, 1, 3, 5 and cover rows -1..7: all of it
    (dict(n=1, ci=1, hw=8, kernel=3, pad=1, stride=2), 64),
    # 2x2 stride 3 on 7: rows 0, 1, 3, 4 (row 6 would need a window past the end)
    (dict(n=1, ci=2, hw=7, kernel=2, pad=0, stride=3), 2 * 4 * 4),
    # 3x3 stride 1 pad 0 on 3: one output reads all 9 inputs
    (dict(n=1, ci=1, hw=3, kernel=3, pad=0, stride=1), 9),
    # 1x1 stride 3 pad 0 on 4: rows 0 and 3
    (dict(n=1, ci=1, hw=4, kernel=1, pad=0, stride=3), 4),
    # rectangular: 1x1 stride 2 on 5 rows of 8 columns reads rows 0, 2, 4 and columns 0, 2, 4, 6
    (dict(n=1, ci=2, hw=5, w=8, kernel=1, pad=0, stride=2), 2 * 3 * 4),
    # 2x2 stride 3 on 4 rows of 7 columns: rows 0, 1; columns 0, 1, 3, 4
    (dict(n=1, ci=1, hw=4, w=7, kernel=2, pad=0, stride=3), 2 * 4),
])
def test_used_input_elems_by_hand(shape: dict[str, int], used: int) -> None:
    assert conv2d_used_input_elems(**shape) == used


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 2), ci=st.integers(1, 3), hw=st.integers(1, 12), w=st.none() | st.integers(1, 12),
       kernel=st.integers(1, 5), pad=st.integers(0, 4), stride=st.integers(1, 4))
def test_used_input_elems_equal_the_naive_two_dimensional_count(n: int, ci: int, hw: int, w: int | None,
                                                                 kernel: int, pad: int, stride: int) -> None:
    kernel = min(kernel, hw + 2 * pad, (hw if w is None else w) + 2 * pad)
    pad = min(pad, kernel - 1)
    assert conv2d_used_input_elems(n, ci, hw, kernel, pad, stride, w=w) == \
        _naive_used_input_elems(n, ci, hw, kernel, pad, stride, hw if w is None else w)


def test_conv2d_1x1_stride_2_compulsory_bytes() -> None:
    op = openvta.operator("conv2d", config="tiny", ci=4, co=8, hw=8, kernel=1, stride=2)
    data, weight, bias, out = 4 * 4 * 4, 8 * 4, 8 * 4, 8 * 4 * 4   # bias is int32
    assert {name: op.used_bytes(name) for name in ("data", "weight", "bias", "out")} == \
        {"data": data, "weight": weight, "bias": bias, "out": out}
    assert op.compulsory_bytes == data + weight + bias + out


def test_conv2d_padding_counts_no_zero() -> None:
    # 5 input channels padded to 8 in the tiles of tiny's BLOCK_IN = 4: only 5 count
    op = openvta.operator("conv2d", config="tiny", ci=5, co=3, hw=6, kernel=3, pad=1, bias=False)
    assert op.compulsory_bytes == 5 * 36 + 3 * 5 * 9 + 3 * 36
    program = op.build()
    assert program.symbol("data").used_bytes == 5 * 36 < program.symbol("data").nbytes


def test_dense_compulsory_bytes() -> None:
    op = openvta.operator("dense", config="tiny", batch=3, in_features=10, out_features=6)
    assert op.compulsory_bytes == 3 * 10 + 6 * 10 + 6 * 4 + 3 * 6


def test_elementwise_compulsory_bytes() -> None:
    op = openvta.operator("elementwise", config="tiny", batch=2, channels=5, shift=3, bias=True)
    assert op.compulsory_bytes == 2 * 5 * 4 + 5 * 4 + 2 * 5


@pytest.mark.parametrize("dtype, itemsize", [("int8", 1), ("int32", 4)])
def test_a_residual_operand_is_read_whole_in_its_dtype(dtype: str, itemsize: int) -> None:
    epilogue = Epilogue((AluStage(AluOp.ADD, TensorOperand("skip", dtype)),))
    op = openvta.operator("conv2d", config="tiny", ci=4, co=4, hw=8, kernel=1, stride=2, bias=False,
                          epilogue=epilogue)
    assert op.used_bytes("skip") == 4 * 4 * 4 * itemsize      # the output's shape (1, 4, 4, 4)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_operator_records_its_used_bytes_in_the_program_file(name: str) -> None:
    spec = REGISTRY[name]
    op = spec.factory(openvta.preset("tiny"), **spec.example)
    program = load_program(io.BytesIO(program_bytes(op.build())))
    for symbol in op.logical_shapes:
        assert program.symbol(symbol).used_bytes == op.used_bytes(symbol)
    read, write = program.compulsory_bytes() or (0, 0)
    assert (read + write, write) == (op.compulsory_bytes, op.used_bytes("out"))

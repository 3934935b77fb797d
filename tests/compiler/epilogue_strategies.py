"""Hypothesis strategies for epilogues: random stage lists and operand values.

Immediates are drawn within the ALU's fields as ``openvta.compiler.epilogue`` derives
them from ``isa`` (SHR amounts in ``SHR_RANGE``, others in ``IMM_FIELD``), leaning
towards small values so that the int8 output is not always saturated; channel operands
are named ``vec0``/``vec1``, tensor operands ``res0``/``res1`` (int8 or int32, with
their own stages of immediates and channel operands).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from openvta.compiler.epilogue import IMM_FIELD, SHR_RANGE, AluStage, ChannelOperand, Epilogue, TensorOperand
from openvta.isa import AluOp

CHANNEL_NAMES = ("vec0", "vec1")
TENSOR_NAMES = ("res0", "res1")


def immediates(op: AluOp) -> st.SearchStrategy[int]:
    if op is AluOp.SHR:
        return st.integers(*SHR_RANGE)
    return st.one_of(st.integers(-200, 200), st.integers(IMM_FIELD.low, IMM_FIELD.high))


@st.composite
def _stage(draw: st.DrawFn, tensors: tuple[TensorOperand, ...]) -> AluStage:
    op = draw(st.sampled_from(list(AluOp)))
    kinds = ["imm", "channel"] + (["tensor"] if tensors else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "imm":
        return AluStage(op, draw(immediates(op)))
    if kind == "channel":
        return AluStage(op, ChannelOperand(draw(st.sampled_from(CHANNEL_NAMES))))
    return AluStage(op, draw(st.sampled_from(tensors)))


@st.composite
def epilogues(draw: st.DrawFn, max_stages: int = 6, tensors: bool = True) -> Epilogue:
    """A random epilogue of 0..``max_stages`` stages (up to two tensor operands)."""
    defined = []
    for name in TENSOR_NAMES[: draw(st.integers(0, 2 if tensors else 0))]:
        inner = draw(st.lists(_stage(()), max_size=3))
        defined.append(TensorOperand(name, draw(st.sampled_from(["int8", "int32"])), tuple(inner)))
    stages = draw(st.lists(_stage(tuple(defined)), max_size=max_stages))
    return Epilogue(tuple(stages))


_RANGES = [(-128, 127), (-40, 40), (0, 31), (-(1 << 20), 1 << 20), (-(1 << 31), (1 << 31) - 1)]


@st.composite
def operand_arrays(draw: st.DrawFn, epilogue: Epilogue, channels: int,
                   out_shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Logical values for every operand of ``epilogue``, each from a range drawn for it."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, operand in epilogue.operands().items():
        if isinstance(operand, ChannelOperand):
            low, high = draw(st.sampled_from(_RANGES))
            arrays[name] = rng.integers(low, high, (channels,), dtype=np.int64, endpoint=True).astype(np.int32)
        else:
            info = np.iinfo(operand.dtype)
            low, high = draw(st.sampled_from(_RANGES))
            low, high = max(low, int(info.min)), min(high, int(info.max))
            arrays[name] = rng.integers(low, high, out_shape, dtype=np.int64, endpoint=True).astype(operand.dtype)
    return arrays


@st.composite
def operator_cases(draw: st.DrawFn, configs: tuple[str, ...], max_co: int = 12) -> tuple[str, str, dict[str, Any]]:
    """A random small conv2d or dense on one of ``configs``: its kind and factory keywords."""
    config = draw(st.sampled_from(configs))
    kind = draw(st.sampled_from(["conv2d", "dense"]))
    shape: dict[str, Any]
    if kind == "conv2d":
        kernel = draw(st.integers(1, 3))
        shape = dict(ci=draw(st.integers(1, 12)), co=draw(st.integers(1, max_co)), hw=draw(st.integers(kernel, 6)),
                     kernel=kernel, pad=draw(st.integers(0, kernel - 1)), stride=draw(st.integers(1, 2)))
    else:
        shape = dict(batch=draw(st.integers(1, 3)), in_features=draw(st.integers(1, 20)),
                     out_features=draw(st.integers(1, 20)))
    shape["shift"] = draw(st.one_of(st.none(), st.integers(0, 12)))
    shape["bias"] = draw(st.booleans())
    shape["clip"] = draw(st.one_of(st.none(), st.just((-128, 127)), st.just((0, 127))))
    shape["vthreads"] = draw(st.integers(1, 2))
    return config, kind, shape

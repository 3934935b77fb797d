"""Epilogues: their checks, the numpy reference against the golden ALU and a naive model,
and random epilogues compiled onto conv2d and dense and run on both simulators."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import naive_models as naive
import openvta
from epilogue_strategies import epilogues, operand_arrays, operator_cases
from openvta.compiler import LoweringError, conv2d, dense
from openvta.compiler.epilogue import (IMM_FIELD, SHR_RANGE, AluStage, ChannelOperand, Epilogue, TensorOperand,
                                       apply_epilogue)
from openvta.isa import AluOp, preset
from openvta.isa.arith import alu_lanes

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)


@settings(max_examples=400, deadline=None)
@given(op=st.sampled_from(list(AluOp)), a=st.lists(INT32, min_size=1, max_size=8), b=INT32)
def test_the_lanes_are_the_naive_models(op: AluOp, a: list[int], b: int) -> None:
    lanes = np.array(a, np.int64)
    assert [naive.alu(op.name, x, b) for x in a] == alu_lanes(op, lanes, b).tolist()


@settings(max_examples=200, deadline=None)
@given(data=st.data(), epilogue=epilogues(), shape=st.sampled_from([(1, 3), (2, 5), (1, 2, 2, 3)]))
def test_the_reference_is_the_naive_model(data: st.DataObject, epilogue: Epilogue,
                                          shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    acc = rng.integers(-(1 << 31), 1 << 31, shape, dtype=np.int64).astype(np.int32)
    operands = data.draw(operand_arrays(epilogue, shape[1], shape))
    note(epilogue.describe())
    np.testing.assert_array_equal(apply_epilogue(acc, epilogue, operands),
                                  naive.epilogue(acc, epilogue.stages, operands))


def test_the_parameters_are_an_epilogue() -> None:
    epilogue = Epilogue.from_params(8, "bias", (0, 127))
    assert epilogue.describe() == "SHR 8, ADD bias[c], MIN 127, MAX 0"
    assert Epilogue.from_params(None, None, None) == Epilogue()
    skip = TensorOperand("skip", "int32", (AluStage(AluOp.SHR, 1), AluStage(AluOp.MUL, ChannelOperand("m"))))
    both = epilogue + Epilogue((AluStage(AluOp.ADD, skip),))
    assert list(both.operands()) == ["bias", "m", "skip"]
    assert both.channel_operands == (ChannelOperand("bias"), ChannelOperand("m"))
    assert both.tensor_operands == (skip,)
    assert both.describe().endswith("ADD skip:int32 (SHR 1, MUL m[c])")


@pytest.mark.parametrize(("make", "message"), [
    (lambda: AluStage(AluOp.SHR, SHR_RANGE[1] + 1), rf"a SHR amount must be in {SHR_RANGE[0]}..{SHR_RANGE[1]}, not 32"),
    (lambda: AluStage(AluOp.SHR, -33), r"a SHR amount must be in -32..31, not -33"),
    (lambda: AluStage(AluOp.ADD, IMM_FIELD.high + 1),
     rf"an ADD immediate must be in {IMM_FIELD.low}..{IMM_FIELD.high}, not {IMM_FIELD.high + 1}"),
    (lambda: AluStage(AluOp.MIN, 1.5), r"an ALU stage operand must be an int, a ChannelOperand or a "
                                       r"TensorOperand, not 1\.5"),
    (lambda: AluStage(AluOp.MAX, True), r"an ALU stage operand must be .*, not True"),
    (lambda: AluStage(7, 0), r"an ALU stage op must be one of MIN, MAX, ADD, SHR, MUL, not 7"),
    (lambda: ChannelOperand("out"), r"a channel operand's name must be an identifier other than data, "
                                    r"weight, out, not 'out'"),
    (lambda: TensorOperand("a b"), r"a tensor operand's name must be an identifier .*, not 'a b'"),
    (lambda: TensorOperand("r", "int16"), r"tensor operand 'r' dtype must be one of int8, int32, not 'int16'"),
    (lambda: TensorOperand("r", stages=(AluStage(AluOp.ADD, TensorOperand("q")),)),
     r"tensor operand 'r' stages must take immediates or channel operands, not the tensor 'q'"),
    (lambda: TensorOperand("r", stages=(1,)), r"tensor operand 'r' stages must be a sequence of AluStage, "
                                              r"not \(1,\)"),
    (lambda: Epilogue((AluStage(AluOp.ADD, ChannelOperand("x")), AluStage(AluOp.ADD, TensorOperand("x")))),
     r"epilogue operand name 'x' must name one operand, not both ChannelOperand\(name='x'\) and "
     r"TensorOperand\(name='x', dtype='int8', stages=\(\)\)"),
    (lambda: Epilogue("SHR 1"), r"epilogue stages must be a sequence of AluStage, not 'SHR 1'"),
])
def test_a_bad_epilogue_is_refused_saying_why(make, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        make()


def test_the_reference_names_a_missing_or_misshapen_operand() -> None:
    epilogue = Epilogue((AluStage(AluOp.ADD, ChannelOperand("b")), AluStage(AluOp.ADD, TensorOperand("r"))))
    acc = np.zeros((1, 3), np.int32)
    with pytest.raises(ValueError, match=r"^epilogue operand 'b' must be given, and is not \(given: none\)$"):
        apply_epilogue(acc, epilogue, {})
    with pytest.raises(ValueError, match=r"^channel operand 'b' must have shape \(3,\), not \(4,\)$"):
        apply_epilogue(acc, epilogue, {"b": np.zeros(4, np.int32)})
    with pytest.raises(ValueError, match=r"^tensor operand 'r' must have shape \(1, 3\), not \(3,\)$"):
        apply_epilogue(acc, epilogue, {"b": np.zeros(3, np.int32), "r": np.zeros(3, np.int8)})


def test_an_operator_names_a_clash_with_its_own_bias() -> None:
    clash = Epilogue((AluStage(AluOp.ADD, TensorOperand("bias")),))
    with pytest.raises(ValueError, match=r"^conv2d epilogue operand name 'bias' must name one operand"):
        conv2d(preset("tiny"), ci=4, co=4, hw=4, kernel=1, epilogue=clash)
    op = dense(preset("tiny"), batch=1, in_features=4, out_features=4, bias=False, epilogue=clash)
    assert op.roles["bias"] == "input" and op.layouts["bias"] == op.layouts["out"]


def test_operands_take_room_in_the_accumulator() -> None:
    """Every tensor operand is another output tile in the accumulator: the planner keeps room."""
    many = Epilogue(tuple(AluStage(AluOp.ADD, TensorOperand(f"r{k}")) for k in range(6)))
    cfg = preset("tiny")
    small = conv2d(cfg, ci=4, co=8, hw=8, kernel=3, pad=1)
    crowded = conv2d(cfg, ci=4, co=8, hw=8, kernel=3, pad=1, epilogue=many)
    area = [p.plan.cob * p.plan.yb * p.plan.xb for p in (small, crowded)]
    assert area[1] * 7 + crowded.plan.cob <= cfg.acc_depth < area[0] * 7 + small.plan.cob
    with pytest.raises(LoweringError, match=r"^plan dense: no tiling of this dense layer fits the buffers with 1 "
                                            r"virtual thread: acc buffer overflow: 1 thread × 258 = 258 "
                                            r"entries > 256$"):
        dense(cfg, batch=1, in_features=4, out_features=4,
              epilogue=Epilogue(tuple(AluStage(AluOp.ADD, TensorOperand(f"r{k}")) for k in range(cfg.acc_depth))))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=operator_cases(("tiny", "small")), epilogue=epilogues(), data=st.data())
def test_random_epilogues_match_the_reference_on_both_simulators(case: tuple[str, str, dict], epilogue: Epilogue,
                                                                 data: st.DataObject) -> None:
    config, kind, params = case
    note(f"{kind}({params}) on {config}: {epilogue.describe()}")
    try:
        op = {"conv2d": conv2d, "dense": dense}[kind](preset(config), epilogue=epilogue, **params)
    except LoweringError as exc:  # the virtual threads do not divide the output tiles, say
        assert str(exc).startswith(f"plan {kind}"), exc
        assume(False)
        return
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    inputs = {name: rng.integers(-128, 128, op.logical_shapes[name], dtype=np.int8) for name in ("data", "weight")}
    inputs |= data.draw(operand_arrays(op.epilogue, op.logical_shapes["out"][1], op.logical_shapes["out"]))
    expected = op.reference(inputs)
    program = op.build(inputs)
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], expected,
                                      err_msg=f"{backend} back end")


def test_a_residual_add_in_int8_and_int32() -> None:
    """conv2d + bias, then a residual int8 tensor and an int32 tensor added, clipped, on default."""
    cfg = preset("default")
    epilogue = Epilogue((AluStage(AluOp.ADD, TensorOperand("skip")),
                         AluStage(AluOp.ADD, TensorOperand("wide", "int32")),
                         AluStage(AluOp.MIN, 127), AluStage(AluOp.MAX, -128)))
    op = conv2d(cfg, ci=16, co=32, hw=7, kernel=3, pad=1, clip=None, epilogue=epilogue, vthreads=2)
    rng = np.random.default_rng(4)
    inputs: dict[str, np.ndarray] = {"data": rng.integers(-128, 128, (1, 16, 7, 7), dtype=np.int8),
                                     "weight": rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8),
                                     "bias": rng.integers(-500, 500, (32,), dtype=np.int32),
                                     "skip": rng.integers(-128, 128, (1, 32, 7, 7), dtype=np.int8),
                                     "wide": rng.integers(-300, 300, (1, 32, 7, 7), dtype=np.int32)}
    expected = op.reference(inputs)
    acc = naive.conv2d(inputs["data"], inputs["weight"], 1, 1)
    np.testing.assert_array_equal(expected, naive.epilogue(acc, op.epilogue.stages, inputs))
    assert len(np.unique(expected)) > 100
    np.testing.assert_array_equal(openvta.simulate(op.build(inputs), backend="functional")["out"], expected)


def test_the_epilogue_parameter_is_documented() -> None:
    spec = openvta.compiler.REGISTRY["conv2d"]
    param = spec.param("epilogue")
    assert (param.kind, param.optional, param.cli, param.constraint) == (Epilogue, True, False,
                                                                         "an Epilogue or None")
    with pytest.raises(ValueError, match=re.escape("conv2d epilogue must be an Epilogue or None, not 'SHR 1'")):
        conv2d(preset("tiny"), ci=4, co=4, hw=4, kernel=1, epilogue="SHR 1")

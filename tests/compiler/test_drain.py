"""Machine v2 in the compiler: the epilogue on the drain unit, bit-exact, and VTA's programs unchanged."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st

import openvta
from openvta.compiler import batch_matmul, conv2d, dense, depthwise_conv2d
from openvta.compiler.epilogue import AluStage, Epilogue, TensorOperand
from openvta.compiler.ir import LoweringError
from openvta.isa import AluOp, Config, DrainOp, MemoryType, Opcode, format_drain_ops, preset
from openvta.isa.encoding import Format, layouts_of

sys.path.insert(0, str(Path(__file__).parent))
from epilogue_strategies import epilogues, operand_arrays, operator_cases  # noqa: E402

#: Drain configurations small enough for random tests: small's and tiny's machines with the unit.
CONFIGS = {
    "small_v2": preset("small").replace(LOG_EPI_BUFF_SIZE=13, DRAIN_STAGES=8),
    "tiny_v2": preset("tiny").replace(LOG_EPI_BUFF_SIZE=10, DRAIN_STAGES=4),
    "v2": preset("v2"),
}


def _kinds(program: openvta.Program) -> list[tuple[Opcode, MemoryType | None]]:
    """Opcode and memory type of every instruction but the token-only ones (x_size 0)."""
    return [(i.opcode, getattr(i, "memory_type", None)) for i in program.instructions()
            if getattr(i, "x_size", 1)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=operator_cases(("tiny_v2", "small_v2"), max_co=20), epilogue=epilogues(max_stages=4), data=st.data())
def test_random_epilogues_on_the_drain_unit_match_the_reference(case: tuple[str, str, dict], epilogue: Epilogue,
                                                               data: st.DataObject) -> None:
    config, kind, params = case
    cfg = CONFIGS[config]
    note(f"{kind}({params}) on {config}: {epilogue.describe()}")
    try:
        op = {"conv2d": conv2d, "dense": dense}[kind](cfg, epilogue=epilogue, **params)
    except LoweringError as exc:
        assert str(exc).startswith(f"plan {kind}"), exc
        assume(False)
        return
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    inputs = {name: rng.integers(-128, 128, op.logical_shapes[name], dtype=np.int8) for name in ("data", "weight")}
    inputs |= data.draw(operand_arrays(op.epilogue, op.logical_shapes["out"][1], op.logical_shapes["out"]))
    expected = op.reference(inputs)
    program = op.build(inputs)
    kinds = _kinds(program)
    drained = not op.epilogue.tensor_operands and len(op.epilogue.stages) <= cfg.DRAIN_STAGES
    if drained:  # the whole epilogue on the drain unit (no ALU instruction, every store drains), or
        # all of it on the ALU where channel blocks are one tile each (a dense layer's, a 1x1 output's)
        one_tile = kind == "dense" or tuple(op.logical_shapes["out"][2:]) == (1, 1)
        on_alu = (Opcode.STORE, MemoryType.ACC) not in kinds
        drains_all = (Opcode.ALU, None) not in kinds and (Opcode.STORE, MemoryType.OUT) not in kinds
        assert (on_alu and one_tile) or drains_all
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], expected,
                                      err_msg=f"{backend} back end")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=operator_cases(("tiny_v2",), max_co=12), epilogue=epilogues(max_stages=4),
       sets=st.lists(st.sets(st.sampled_from(list(DrainOp)), min_size=1), min_size=4, max_size=4), data=st.data())
def test_epilogues_on_stages_of_few_operations(case: tuple[str, str, dict], epilogue: Epilogue,
                                               sets: list[set[DrainOp]], data: st.DataObject) -> None:
    """A drain unit whose stages have only some operations (``DRAIN_OPS``): the compiler
    drains an epilogue only where each stage has its operation (the simulator refuses any
    other descriptor) and otherwise keeps it on the ALU; the result is exact either way."""
    _, kind, params = case
    cfg = CONFIGS["tiny_v2"].replace(DRAIN_OPS=sum(1 << (8 * k + op) for k, ops in enumerate(sets) for op in ops))
    try:
        op = {"conv2d": conv2d, "dense": dense}[kind](cfg, epilogue=epilogue, **params)
    except LoweringError:
        assume(False)
        return
    note(f"{kind}({params}) with {format_drain_ops(cfg)}: {op.epilogue.describe()}")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    inputs = {name: rng.integers(-128, 128, op.logical_shapes[name], dtype=np.int8) for name in ("data", "weight")}
    inputs |= data.draw(operand_arrays(op.epilogue, op.logical_shapes["out"][1], op.logical_shapes["out"]))
    program = op.build(inputs)
    kinds = _kinds(program)
    first = op.epilogue.stages[0].op if op.epilogue.stages else None
    if first is not None and DrainOp(int(first)) not in sets[0] and first not in (AluOp.SHR, AluOp.MIN):
        assert (Opcode.STORE, MemoryType.ACC) not in kinds  # (SHR may open an RSHR, MIN a CLIP)
    event(f"drained: {(Opcode.STORE, MemoryType.ACC) in kinds}")
    np.testing.assert_array_equal(openvta.simulate(program, backend="functional")["out"], op.reference(inputs))


@pytest.mark.parametrize("make", [
    lambda cfg: conv2d(cfg, ci=32, co=48, hw=6, kernel=3, pad=1, vthreads=2),
    lambda cfg: depthwise_conv2d(cfg, channels=40, hw=7, kernel=3, pad=1),
])
def test_operators_on_v2_drain_their_epilogue(make) -> None:
    op = make(preset("v2"))
    rng = np.random.default_rng(3)
    inputs = op.operands({name: rng.integers(-128, 128, op.logical_shapes[name]).astype(t.dtype)
                          for name, t in op.inputs.items() if name != "bias"})
    inputs["bias"] = rng.integers(-2**14, 2**14, op.logical_shapes["bias"]).astype(np.int32)
    program = op.build(inputs)
    kinds = _kinds(program)
    assert (Opcode.STORE, MemoryType.ACC) in kinds and (Opcode.LOAD, MemoryType.EPI) in kinds
    assert (Opcode.ALU, None) not in kinds
    result = openvta.simulate(program, backend="functional")
    np.testing.assert_array_equal(result["out"], op.reference(inputs))
    np.testing.assert_array_equal(openvta.simulate(program, backend="cycle")["out"], op.reference(inputs))


@pytest.mark.parametrize("vthreads", [1, 2])
def test_a_dense_layers_bias_stays_on_the_alu(vthreads: int) -> None:
    """A dense layer's channel blocks are one accumulator tile each: drained, its per-channel
    epilogue would be a STORE a tile, which the cycle model measures slower than the ALU."""
    op = dense(preset("v2"), batch=3, in_features=40, out_features=36, vthreads=vthreads)
    rng = np.random.default_rng(vthreads)
    inputs = {name: rng.integers(-100, 100, op.logical_shapes[name]).astype(t.dtype) for name, t in op.inputs.items()}
    program = op.build(inputs)
    kinds = _kinds(program)
    assert (Opcode.ALU, None) in kinds and (Opcode.STORE, MemoryType.ACC) not in kinds
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], op.reference(inputs))


@pytest.mark.parametrize("vthreads", [1, 2])
def test_an_epilogue_without_per_channel_operands_drains_across_channel_blocks(vthreads: int) -> None:
    """batch_matmul's shift and clip are the same for every channel block: one descriptor,
    its draining STOREs span channel blocks (cols 40: three)."""
    op = batch_matmul(preset("v2"), heads=2, rows=9, inner=20, cols=40, shift=5, vthreads=vthreads)
    rng = np.random.default_rng(vthreads)
    inputs = {name: rng.integers(-100, 100, op.logical_shapes[name]).astype(t.dtype) for name, t in op.inputs.items()}
    program = op.build(inputs)
    drains = [i for i in program.instructions() if i.opcode == Opcode.STORE and i.memory_type == MemoryType.ACC
              and i.x_size]
    assert drains and all(i.y_size * i.x_size > 1 for i in drains)  # not a STORE a tile
    assert (Opcode.ALU, None) not in _kinds(program)
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], op.reference(inputs))


@pytest.mark.parametrize("dtype", ["int8", "int32"])
@pytest.mark.parametrize("vthreads", [1, 2])
def test_a_residual_is_drained(dtype: str, vthreads: int) -> None:
    """A requantized residual added before the clip: loaded by the store module beside each
    STORE, no ALU instruction, equal to the reference on both simulators."""
    cfg = preset("v2")
    skip = TensorOperand("skip", dtype, (AluStage(AluOp.MUL, 3), AluStage(AluOp.SHR, 1), AluStage(AluOp.ADD, 1),
                                         AluStage(AluOp.SHR, 1)))
    epilogue = Epilogue((AluStage(AluOp.MIN, 127), AluStage(AluOp.MAX, -128), AluStage(AluOp.ADD, skip),
                         AluStage(AluOp.MIN, 127), AluStage(AluOp.MAX, 0)))
    op = conv2d(cfg, ci=32, co=32, hw=6, kernel=3, pad=1, shift=4, epilogue=epilogue, vthreads=vthreads)
    rng = np.random.default_rng(vthreads)
    inputs = {name: rng.integers(-100, 100, op.logical_shapes[name]).astype(t.dtype) for name, t in op.inputs.items()}
    program = op.build(inputs)
    kinds = _kinds(program)
    assert (Opcode.ALU, None) not in kinds and (Opcode.LOAD, MemoryType.ACC_8BIT) not in kinds
    assert (Opcode.LOAD, MemoryType.EPI_8BIT if dtype == "int8" else MemoryType.EPI) in kinds
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], op.reference(inputs))


def test_two_residuals_stay_on_the_alu() -> None:
    """The drain unit has one residual register: a second whole-tensor operand keeps the ALU."""
    cfg = preset("v2")
    epilogue = Epilogue((AluStage(AluOp.ADD, TensorOperand("a")), AluStage(AluOp.ADD, TensorOperand("b"))))
    op = conv2d(cfg, ci=16, co=16, hw=4, kernel=1, shift=4, epilogue=epilogue)
    rng = np.random.default_rng(0)
    inputs = {name: rng.integers(-100, 100, op.logical_shapes[name]).astype(t.dtype) for name, t in op.inputs.items()}
    program = op.build(inputs)
    kinds = _kinds(program)
    assert (Opcode.ALU, None) in kinds and (Opcode.STORE, MemoryType.ACC) not in kinds
    np.testing.assert_array_equal(openvta.simulate(program, backend="functional")["out"], op.reference(inputs))


#: VTA's fields: the memory, GEMM and ALU layouts of VTA's configuration (docs/ISA.md §2).
_VTA_TYPES = {MemoryType.UOP, MemoryType.WGT, MemoryType.INP, MemoryType.ACC, MemoryType.OUT, MemoryType.ACC_8BIT}


@pytest.mark.parametrize("layer", ["C2", "C4", "C11"])
def test_programs_for_vta_are_configs_and_use_only_vtas_instructions(layer: str) -> None:
    vta = openvta.compile("conv2d", layer=layer, config="vta", vthreads=2, seed=1)
    plain = openvta.compile("conv2d", layer=layer, config=Config(), vthreads=2, seed=1)
    assert vta.config == plain.config and "DRAIN_STAGES" not in vta.config.to_dict()
    np.testing.assert_array_equal(vta.dram, plain.dram)
    layouts = layouts_of(preset("vta"))
    for insn in vta.instructions():
        assert insn.opcode in {Opcode.LOAD, Opcode.STORE, Opcode.GEMM, Opcode.ALU, Opcode.FINISH}
        if insn.opcode in (Opcode.LOAD, Opcode.STORE):
            assert insn.memory_type in _VTA_TYPES
            if insn.opcode == Opcode.STORE:
                assert insn.memory_type == MemoryType.OUT
        assert set(insn.fields()) == set(layouts[insn.format].names)
    assert layouts[Format.MEM].names == layouts_of(preset("v2"))[Format.MEM].names


def test_a_v2_program_on_vta_is_refused_naming_the_instruction() -> None:
    program = openvta.compile("conv2d", config="v2", ci=16, co=16, hw=4, kernel=1, seed=0)
    index = next(i for i, insn in enumerate(program.instructions()) if insn.opcode == Opcode.LOAD
                 and insn.memory_type == MemoryType.EPI)
    from openvta.runtime import ProgramError
    with pytest.raises(ProgramError, match=rf"^instruction {index}: LOAD EPI is an instruction of machine v2 "
                                           r"\(the drain unit\), which configuration 'vta' does not have$"):
        dataclasses.replace(program, config=preset("vta"))


@pytest.mark.parametrize("vthreads", [1, 2])
def test_double_buffered_loads_are_race_free_and_exact(vthreads: int) -> None:
    """On v2 a thread's loads alternate between two copies of its slices when they fit: the
    race checker (functional back end) and both simulators agree with the reference."""
    from openvta.compiler.pipeline import lower
    cfg = preset("v2")
    op = conv2d(cfg, ci=64, co=32, hw=14, kernel=3, pad=1, vthreads=vthreads)
    assert lower(op.schedule, cfg).load_copies == 2
    rng = np.random.default_rng(vthreads)
    inputs = {name: rng.integers(-100, 100, op.logical_shapes[name]).astype(t.dtype) for name, t in op.inputs.items()}
    program = op.build(inputs)
    inp_bases = {i.sram_base for i in program.instructions() if i.opcode == Opcode.LOAD
                 and getattr(i, "memory_type", None) == MemoryType.INP and i.x_size}
    assert len(inp_bases) > vthreads  # the copies are used
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], op.reference(inputs))


def _loaded_bytes(program: openvta.Program, memory_type: MemoryType) -> int:
    return sum(i.y_size * i.x_size for i in program.instructions() if i.opcode == Opcode.LOAD
               and getattr(i, "memory_type", None) == memory_type)


@pytest.mark.parametrize("vthreads", [1, 2])
def test_weights_and_inputs_stay_resident_across_a_threads_tiles(vthreads: int) -> None:
    """On v2 a thread loads what its earlier tiles left in a copy of its slice once: a 1×1
    conv2d whose row tiles all take every input channel loads each thread's weights once,
    and the channel tiles of one row window load their input once (VTA reloads both)."""
    from openvta.compiler.ops.conv2d import Conv2dPlan
    rng = np.random.default_rng(vthreads)
    cases = [  # (params, plan, what stays): row tiles share weights; channel tiles share inputs
        (dict(ci=64, co=64, hw=16, kernel=1, stride=2), Conv2dPlan(4, 2, 8, 2, vthreads, "y"), MemoryType.WGT),
        (dict(ci=64, co=128, hw=14, kernel=1, stride=2), Conv2dPlan(2, 7, 7, 2, vthreads, "co"), MemoryType.INP),
    ]
    for params, plan, kept in cases:
        counts = {}
        for name in ("v2", "vta"):
            op = conv2d(preset(name), plan=plan, **params)
            inputs = {k: rng.integers(-100, 100, op.logical_shapes[k]).astype(t.dtype) for k, t in op.inputs.items()}
            program = op.build(inputs)
            counts[name] = _loaded_bytes(program, kept)
            for backend in ("functional", "cycle"):  # the race checker: no copy is overwritten too early
                np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"],
                                              op.reference(inputs))
        if kept == MemoryType.WGT:  # each thread loads every weight once
            assert counts["v2"] == vthreads * (params["co"] // 16) * (params["ci"] // 16)
        else:  # each thread loads its input window once, not once per channel tile
            assert counts["v2"] * (params["co"] // 16 // plan.cob // vthreads) == counts["vta"]
        assert counts["v2"] < counts["vta"]


def test_the_accumulator_alternates_between_two_copies_on_v2() -> None:
    """A tile's GEMMs run while the drain stores the thread's previous tile: its GEMMs and its
    drain use the other copy of the thread's acc slice, and the initial reset clears both."""
    from openvta.compiler.pipeline import lower
    cfg = preset("v2")
    op = conv2d(cfg, ci=32, co=32, hw=16, kernel=3, pad=1, vthreads=2)
    lowered = lower(op.schedule, cfg)
    assert lowered.acc_copies == 2 and lowered.load_copies == 2
    rng = np.random.default_rng(0)
    inputs = {k: rng.integers(-100, 100, op.logical_shapes[k]).astype(t.dtype) for k, t in op.inputs.items()}
    program = op.build(inputs)
    drains = {i.sram_base for i in program.instructions() if i.opcode == Opcode.STORE
              and getattr(i, "memory_type", None) == MemoryType.ACC and i.x_size}
    slice_ = lowered.slices[next(s for s in lowered.slices if s.value == "acc")]
    assert any(base >= 2 * slice_ for base in drains)  # the second copy, after both threads' first
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], op.reference(inputs))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_random_plans_with_tail_tiles_run_race_free_on_v2(data: st.DataObject) -> None:
    """Any plan the planner's check accepts — tail tiles, uneven thread splits, resident
    copies, the double-buffered accumulator — runs race-free (the functional simulator's
    checker) and exactly on machine v2 (a peeled tail tile once deadlocked its tokens)."""
    from openvta.compiler.ops.conv2d import Conv2dPlan, check_conv2d_plan
    cfg = CONFIGS["small_v2"]
    kernel = data.draw(st.sampled_from([1, 3]), "kernel")
    ci, co = data.draw(st.sampled_from([8, 16, 24, 32]), "ci"), data.draw(st.sampled_from([8, 16, 24, 40]), "co")
    hw, stride = data.draw(st.integers(kernel + 2, 9), "hw"), data.draw(st.integers(1, 2), "stride")
    pad = kernel // 2
    oh = (hw + 2 * pad - kernel) // stride + 1
    ci_t, co_t = -(-ci // cfg.BLOCK_IN), -(-co // cfg.BLOCK_OUT)
    plan = Conv2dPlan(data.draw(st.integers(1, co_t), "cob"), data.draw(st.integers(1, oh), "yb"),
                      data.draw(st.integers(1, oh), "xb"),
                      data.draw(st.sampled_from([d for d in range(1, ci_t + 1) if ci_t % d == 0]), "icb"),
                      data.draw(st.integers(1, 2), "vthreads"), data.draw(st.sampled_from(["co", "y"]), "split"))
    assume(not check_conv2d_plan(cfg, 1, ci, co, hw, kernel, pad, stride, plan, uneven=True))
    try:
        op = conv2d(cfg, ci=ci, co=co, hw=hw, kernel=kernel, pad=pad, stride=stride, plan=plan)
    except LoweringError:
        assume(False)
        return
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    inputs = {k: rng.integers(-100, 100, op.logical_shapes[k]).astype(t.dtype) for k, t in op.inputs.items()}
    try:
        program = op.build(inputs)
    except LoweringError:
        assume(False)
        return
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], op.reference(inputs))


@pytest.mark.parametrize("kernel", [1, 3])
def test_a_tail_tile_after_the_whole_tiles_in_one_block_keeps_its_tokens(kernel: int) -> None:
    """One row tile and one channel tile per thread leave the loop over whole column tiles
    and the inlined tail tile in the block of the reset: each tile waits for its own store
    (this plan once deadlocked: the reset took the store tokens of the first tile; here the
    accumulator is too small for two copies, whose extra tokens would hide it)."""
    from openvta.compiler.ops.conv2d import Conv2dPlan
    from openvta.compiler.pipeline import lower
    cfg = CONFIGS["tiny_v2"]
    co_t = 10
    op = conv2d(cfg, ci=2 * cfg.BLOCK_IN, co=co_t * cfg.BLOCK_OUT, hw=7, kernel=kernel, pad=kernel // 2,
                plan=Conv2dPlan(co_t // 2, 7, 2, 1, 2, "co"))
    assert lower(op.schedule, cfg).acc_copies == 1
    rng = np.random.default_rng(kernel)
    inputs = {k: rng.integers(-100, 100, op.logical_shapes[k]).astype(t.dtype) for k, t in op.inputs.items()}
    program = op.build(inputs)
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], op.reference(inputs))


def test_a_tail_tile_adds_no_reset() -> None:
    """The tail tile's accumulator lies inside the whole tiles' (the same addresses), so the
    reset before the first tile covers it: one reset per copy of the accumulator, not four."""
    from openvta.compiler.ops.conv2d import Conv2dPlan
    from openvta.isa import GemmInsn
    op = openvta.operator("conv2d", layer="resnet18.C10", config="v2", plan=Conv2dPlan(7, 7, 7, 2, 1, "co"))
    rng = np.random.default_rng(0)
    inputs = {k: rng.integers(-100, 100, op.logical_shapes[k]).astype(t.dtype) for k, t in op.inputs.items()}
    program = op.build(inputs)
    resets = [i for i in program.instructions() if isinstance(i, GemmInsn) and i.reset_reg]
    assert len(resets) == 2
    np.testing.assert_array_equal(openvta.simulate(program)["out"], op.reference(inputs))


def test_two_inlined_tiles_in_one_block_each_wait_for_their_own_store() -> None:
    """A tile loop of one whole tile and a peeled tail tile, both inlined into one block
    with two threads (co=17 on tiny_v2's 4-lane blocks, 4x4 outputs): the second tile's
    compute of a thread follows that thread's first store in the block, so the token pass
    starts a segment there (one compute→store token per store).  Hypothesis found it: the
    block's second stores popped two tokens nobody pushed."""
    op = conv2d(CONFIGS["tiny_v2"], epilogue=Epilogue(stages=()), ci=5, co=17, hw=3, kernel=2, pad=1, stride=1,
                shift=None, bias=False, clip=None, vthreads=2)
    rng = np.random.default_rng(0)
    inputs = {name: rng.integers(-128, 128, op.logical_shapes[name], dtype=np.int8) for name in ("data", "weight")}
    program = op.build(inputs)
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], op.reference(inputs))

"""ProgramBuilder dependency tokens: dep_push/dep_pop placement and the drain in finish().

Streams are compared as assembly text (``openvta.isa.disassemble``); the functional
simulator is the judge of whether a finished program is well formed (it raises
FinishError when a token queue is not empty at FINISH or when a load or store
instruction is not ordered before it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openvta.blocked_gemm import read_gemm_output, reference_gemm
from openvta.isa import (
    Config,
    Instruction,
    MemInsn,
    MemoryType,
    Module,
    Opcode,
    TokenQueue,
    Uop,
    assemble,
    disassemble,
    encode_stream,
    preset,
    words_to_bytes,
)
from openvta.runtime import BuildError, Device, Program, ProgramBuilder, Symbol, UopKernel
from openvta.sim.functional import FinishError

L, C, S = Module.LOAD, Module.COMPUTE, Module.STORE
K0 = UopKernel((Uop(0, 0, 0),))


def asm(insns: list[Instruction]) -> list[str]:
    """Assembly lines, with LOAD UOP dram_base zeroed (it is only fixed up by finish())."""
    plain = [i.replace(dram_base=0) if isinstance(i, MemInsn) and i.memory_type == MemoryType.UOP
             else i for i in insns]
    return disassemble(plain).splitlines()


def zero_tokens() -> dict[TokenQueue, int]:
    return {q: 0 for q in TokenQueue}


def builder_with_tensors(cfg: Config) -> tuple[ProgramBuilder, Symbol, Symbol]:
    b = ProgramBuilder(cfg)
    x = b.tensor("x", shape=(4, cfg.BATCH, cfg.BLOCK_IN), dtype="int8")
    c = b.tensor("c", shape=(4, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
    return b, x, c


def run_ok(program: Program) -> None:
    result = Device("functional").run(program)
    assert result.counters["token_pushes"] == result.counters["token_pops"]


# -- dep_push ------------------------------------------------------------------------


def test_push_piggybacks_on_the_previous_instruction(tiny: Config) -> None:
    b, x, _ = builder_with_tensors(tiny)
    b.load_2d(MemoryType.INP, 0, x, y_size=1, x_size=2)
    b.dep_push(L, C)
    assert asm(b.insns) == ["LOAD INP push_next_dep y_size=1 x_size=2 x_stride=2"]
    assert b.tokens == {**zero_tokens(), TokenQueue.LOAD_TO_COMPUTE: 1}


def test_push_piggybacks_past_other_modules_instructions(tiny: Config) -> None:
    b, x, c = builder_with_tensors(tiny)
    b.load_2d(MemoryType.INP, 1, x, y_size=1, x_size=1)
    b.gemm(K0)
    b.store_2d(0, c, y_size=1, x_size=1)
    b.dep_push(L, C)
    assert asm(b.insns) == [
        "LOAD INP push_next_dep sram_base=1 y_size=1 x_size=1 x_stride=1",
        "LOAD UOP y_size=1 x_size=1 x_stride=1",
        "GEMM uop_end=1 iter_out=1 iter_in=1",
        "STORE OUT dram_base=4 y_size=1 x_size=1 x_stride=1",
    ]


def test_compute_carries_both_pushes_on_one_instruction(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.gemm(K0, reset=True)
    b.dep_push(C, L)
    b.dep_push(C, S)
    assert asm(b.insns)[1:] == ["GEMM push_prev_dep push_next_dep reset_reg uop_end=1 iter_out=1 iter_in=1"]


SYNCS = [
    (L, C, "LOAD INP push_next_dep", Opcode.LOAD, MemoryType.INP),
    (C, L, "LOAD UOP push_prev_dep", Opcode.LOAD, MemoryType.UOP),
    (C, S, "LOAD UOP push_next_dep", Opcode.LOAD, MemoryType.UOP),
    (S, C, "STORE OUT push_prev_dep", Opcode.STORE, MemoryType.OUT),
]


@pytest.mark.parametrize("src, dst, line, opcode, memory_type", SYNCS,
                         ids=["load-compute", "compute-load", "compute-store", "store-compute"])
def test_push_without_a_previous_instruction_emits_a_sync(
    tiny: Config, src: Module, dst: Module, line: str, opcode: Opcode, memory_type: MemoryType,
) -> None:
    b = ProgramBuilder(tiny)
    b.dep_push(src, dst)
    assert asm(b.insns) == [line]
    insn = b.insns[0]
    assert isinstance(insn, MemInsn) and insn.is_sync and insn.x_size == 0
    assert (insn.opcode, insn.memory_type, insn.module) == (opcode, memory_type, src)
    assert b.tokens == {**zero_tokens(), TokenQueue.between(src, dst): 1}


@pytest.mark.parametrize("src, dst, line, opcode, memory_type", SYNCS,
                         ids=["load-compute", "compute-load", "compute-store", "store-compute"])
def test_push_onto_an_instruction_that_already_pushes_emits_a_sync(
    tiny: Config, src: Module, dst: Module, line: str, opcode: Opcode, memory_type: MemoryType,
) -> None:
    b = ProgramBuilder(tiny)
    b.dep_push(src, dst)
    b.dep_push(src, dst)
    b.dep_push(src, dst)
    assert asm(b.insns) == [line] * 3
    assert b.tokens[TokenQueue.between(src, dst)] == 3


def test_second_push_after_a_real_instruction(tiny: Config) -> None:
    b, x, c = builder_with_tensors(tiny)
    b.store_2d(2, c, y_size=1, x_size=2)
    b.dep_push(S, C)
    b.dep_push(S, C)
    assert asm(b.insns) == [
        "STORE OUT push_prev_dep sram_base=2 dram_base=4 y_size=1 x_size=2 x_stride=2",
        "STORE OUT push_prev_dep",
    ]


def test_push_commits_the_pushing_modules_pending_pops_first(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.dep_push(C, L)
    b.dep_pop(C, L)
    b.dep_push(L, C)
    assert asm(b.insns) == ["LOAD UOP push_prev_dep", "LOAD INP pop_next_dep push_next_dep"]


def test_no_queue_between_load_and_store(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    with pytest.raises(ValueError, match=r"^there is no token queue from load to store$"):
        b.dep_push(L, S)
    with pytest.raises(ValueError, match=r"^there is no token queue from store to load$"):
        b.dep_pop(S, L)
    assert b.insns == [] and b.tokens == zero_tokens()


# -- dep_pop -----------------------------------------------------------------------------


def test_pop_marks_the_next_instruction_of_the_popping_module(tiny: Config) -> None:
    b, x, _ = builder_with_tensors(tiny)
    b.dep_push(C, L)
    b.dep_pop(C, L)
    assert asm(b.insns) == ["LOAD UOP push_prev_dep"]  # nothing emitted yet
    b.gemm(K0)  # another module: not marked
    b.load_2d(MemoryType.INP, 0, x, y_size=1, x_size=1)
    b.load_2d(MemoryType.INP, 1, x, offset=1, y_size=1, x_size=1)
    assert asm(b.insns) == [
        "LOAD UOP push_prev_dep",
        "LOAD UOP y_size=1 x_size=1 x_stride=1",
        "GEMM uop_end=1 iter_out=1 iter_in=1",
        "LOAD INP pop_next_dep y_size=1 x_size=1 x_stride=1",
        "LOAD INP sram_base=1 dram_base=1 y_size=1 x_size=1 x_stride=1",
    ]
    assert b.tokens == zero_tokens()


def test_two_pops_of_one_queue_force_a_sync(tiny: Config) -> None:
    b, x, _ = builder_with_tensors(tiny)
    b.dep_push(C, L)
    b.dep_push(C, L)
    b.dep_pop(C, L)
    b.dep_pop(C, L)
    assert asm(b.insns) == ["LOAD UOP push_prev_dep"] * 2 + ["LOAD INP pop_next_dep"]
    b.load_2d(MemoryType.INP, 0, x, y_size=1, x_size=1)
    assert asm(b.insns)[3:] == ["LOAD INP pop_next_dep y_size=1 x_size=1 x_stride=1"]


def test_pops_of_two_queues_land_on_one_instruction(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.dep_push(L, C)
    b.dep_push(S, C)
    b.dep_pop(L, C)
    b.dep_pop(S, C)
    b.gemm(K0)
    assert asm(b.insns) == [
        "LOAD INP push_next_dep",
        "STORE OUT push_prev_dep",
        "LOAD UOP pop_prev_dep pop_next_dep y_size=1 x_size=1 x_stride=1",
        "GEMM uop_end=1 iter_out=1 iter_in=1",
    ]


def test_pop_lands_on_the_gemm_when_its_kernel_is_resident(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.gemm(K0)
    b.dep_push(L, C)
    b.dep_pop(L, C)
    b.gemm(K0)
    assert asm(b.insns)[-1] == "GEMM pop_prev_dep uop_end=1 iter_out=1 iter_in=1"


def test_tokens_count_pushes_minus_pops(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    for _ in range(3):
        b.dep_push(C, L)
    b.dep_push(C, S)
    b.dep_pop(C, L)
    b.dep_pop(L, C)
    assert b.tokens == {TokenQueue.LOAD_TO_COMPUTE: -1, TokenQueue.COMPUTE_TO_LOAD: 2,
                        TokenQueue.COMPUTE_TO_STORE: 1, TokenQueue.STORE_TO_COMPUTE: 0}
    b.tokens[TokenQueue.COMPUTE_TO_LOAD] = 99  # a copy
    assert b.tokens[TokenQueue.COMPUTE_TO_LOAD] == 2


# -- finish ------------------------------------------------------------------------------


def test_empty_program(tiny: Config) -> None:
    program = ProgramBuilder(tiny).finish()
    assert asm(program.instructions()) == ["FINISH"]
    assert program.insn_count == 1
    result = Device("functional").run(program)
    assert result.counters["compute_insns"] == 1 and result.counters["fetch_insns"] == 1


def test_spec_drain_pattern_two_threads(tiny: Config) -> None:
    """The two-virtual-thread example of docs/ISA.md §5, including its drain."""
    b, x, _ = builder_with_tensors(tiny)
    kernels = [UopKernel((Uop(t, t, 0),)) for t in range(2)]
    b.dep_push(C, L)
    b.dep_push(C, L)
    for k in range(2):
        for t in range(2):
            b.dep_pop(C, L)
            b.load_2d(MemoryType.INP, t, x, offset=2 * k + t, y_size=1, x_size=1)
            b.dep_push(L, C)
        for t in range(2):
            b.dep_pop(L, C)
            b.gemm(kernels[t])
            b.dep_push(C, L)
    assert b.tokens == {**zero_tokens(), TokenQueue.COMPUTE_TO_LOAD: 2}
    program = b.finish()
    assert b.tokens == zero_tokens()
    assert asm(program.instructions()) == [
        "LOAD UOP push_prev_dep",
        "LOAD UOP push_prev_dep",
        "LOAD INP pop_next_dep push_next_dep y_size=1 x_size=1 x_stride=1",
        "LOAD INP pop_next_dep push_next_dep sram_base=1 dram_base=1 y_size=1 x_size=1 x_stride=1",
        "LOAD UOP pop_prev_dep y_size=1 x_size=1 x_stride=1",
        "GEMM push_prev_dep uop_end=1 iter_out=1 iter_in=1",
        "LOAD UOP pop_prev_dep sram_base=1 y_size=1 x_size=1 x_stride=1",
        "GEMM push_prev_dep uop_bgn=1 uop_end=2 iter_out=1 iter_in=1",
        "LOAD INP pop_next_dep push_next_dep dram_base=2 y_size=1 x_size=1 x_stride=1",
        "LOAD INP pop_next_dep push_next_dep sram_base=1 dram_base=3 y_size=1 x_size=1 x_stride=1",
        "GEMM pop_prev_dep push_prev_dep uop_end=1 iter_out=1 iter_in=1",
        "GEMM pop_prev_dep push_prev_dep uop_bgn=1 uop_end=2 iter_out=1 iter_in=1",
        # drain: L pops ×2, the last one pushing load→compute; C pops it; FINISH
        "LOAD INP pop_next_dep",
        "LOAD INP pop_next_dep push_next_dep",
        "LOAD UOP pop_prev_dep",
        "FINISH",
    ]
    run_ok(program)


def test_last_load_is_ordered_before_finish(tiny: Config) -> None:
    b, x, _ = builder_with_tensors(tiny)
    b.load_2d(MemoryType.INP, 0, x, y_size=1, x_size=2)
    program = b.finish()
    assert asm(program.instructions()) == [
        "LOAD INP push_next_dep y_size=1 x_size=2 x_stride=2",
        "LOAD UOP pop_prev_dep",
        "FINISH",
    ]
    run_ok(program)


def test_last_store_is_ordered_before_finish(tiny: Config) -> None:
    b, _, c = builder_with_tensors(tiny)
    b.store_2d(0, c, y_size=1, x_size=2)
    program = b.finish()
    assert asm(program.instructions()) == [
        "STORE OUT push_prev_dep dram_base=4 y_size=1 x_size=2 x_stride=2",
        "LOAD UOP pop_next_dep",
        "FINISH",
    ]
    run_ok(program)


def test_last_load_and_store_that_already_push_get_a_sync(tiny: Config) -> None:
    b, x, c = builder_with_tensors(tiny)
    b.load_2d(MemoryType.INP, 0, x, y_size=1, x_size=1)
    b.dep_push(L, C)
    b.dep_pop(L, C)
    b.gemm(K0)
    b.dep_push(C, S)
    b.dep_pop(C, S)
    b.store_2d(0, c, y_size=1, x_size=1)
    b.dep_push(S, C)
    program = b.finish()
    assert asm(program.instructions()) == [
        "LOAD INP push_next_dep y_size=1 x_size=1 x_stride=1",
        "LOAD UOP pop_prev_dep y_size=1 x_size=1 x_stride=1",
        "GEMM push_next_dep uop_end=1 iter_out=1 iter_in=1",
        "STORE OUT pop_prev_dep push_prev_dep dram_base=4 y_size=1 x_size=1 x_stride=1",
        # drain: both last instructions already push, so each module gets a sync
        "LOAD INP push_next_dep",
        "STORE OUT push_prev_dep",
        "LOAD UOP pop_prev_dep pop_next_dep",
        "LOAD UOP pop_next_dep",
        "FINISH",
    ]
    run_ok(program)


# Each script (builder calls) leaves tokens behind; finish() must drain them all.
Step = tuple[str, tuple[Any, ...]]
SCRIPTS: dict[str, tuple[list[Step], dict[TokenQueue, int]]] = {
    "compute-load x3": ([("dep_push", (C, L))] * 3, {TokenQueue.COMPUTE_TO_LOAD: 3}),
    "load-compute x2": ([("dep_push", (L, C))] * 2, {TokenQueue.LOAD_TO_COMPUTE: 2}),
    "compute-store x2, store-compute": (
        [("dep_push", (C, S)), ("dep_push", (C, S)), ("dep_push", (S, C))],
        {TokenQueue.COMPUTE_TO_STORE: 2, TokenQueue.STORE_TO_COMPUTE: 1}),
    "pending load pop": ([("dep_push", (C, L)), ("dep_pop", (C, L))], {}),
    "pending compute pop": ([("dep_push", (L, C)), ("dep_pop", (L, C))], {}),
    "pending store pop": ([("dep_push", (C, S)), ("dep_pop", (C, S))], {}),
    "every queue": (
        [("dep_push", (L, C)), ("dep_push", (C, L)), ("dep_push", (C, S)), ("dep_push", (S, C)),
         ("gemm", (K0,)), ("dep_push", (C, L))],
        {q: 1 for q in TokenQueue} | {TokenQueue.COMPUTE_TO_LOAD: 2}),
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_finish_drains_every_queue(tiny: Config, name: str) -> None:
    script, left = SCRIPTS[name]
    b = ProgramBuilder(tiny)
    for method, args in script:
        getattr(b, method)(*args)
    assert b.tokens == {**zero_tokens(), **left}
    program = b.finish()
    assert b.tokens == zero_tokens()
    insns = program.instructions()
    assert insns[-1].opcode == Opcode.FINISH
    assert [i.opcode for i in insns].count(Opcode.FINISH) == 1
    run_ok(program)


def test_simulator_rejects_an_undrained_program(tiny: Config) -> None:
    """What the drain prevents: the checks above are not vacuous."""
    for text, message in [
        ("LOAD UOP push_prev_dep\nFINISH\n",
         r"token queues are not empty at FINISH \(compute→load: 1\)"),
        ("STORE OUT y_size=1 x_size=1 x_stride=1\nFINISH\n",
         r"store instruction 0 \(STORE OUT .*\) is not ordered before FINISH"),
    ]:
        image = words_to_bytes(encode_stream(assemble(text, tiny), tiny))
        program = Program(tiny, np.concatenate([image, np.zeros(16, np.uint8)]), 0, 2)
        with pytest.raises(FinishError, match=message):
            Device("functional").run(program)


def test_popping_more_than_pushed_fails_at_finish(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.dep_push(C, L)
    b.dep_pop(C, L)
    b.dep_pop(C, L)
    b.dep_pop(S, C)
    with pytest.raises(BuildError, match=(
        r"^token queue compute→load is popped 1 more times than it is pushed: "
        r"the program would deadlock$"
    )):
        b.finish()


def test_every_pop_needs_a_push(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.dep_pop(S, C)
    b.gemm(K0)
    with pytest.raises(BuildError, match=r"^token queue store→compute is popped 1 more times"):
        b.finish()


def test_blocked_gemm_drains_for_every_thread_count(tiny: Config, make_gemm: Callable[..., Any]) -> None:
    for vthreads in (1, 2, 3, 4):
        program, a, w = make_gemm(tiny, 6, 9, 10, vthreads=vthreads, shift=5, seed=vthreads)
        assert program.instructions()[-1].opcode == Opcode.FINISH
        result = Device("functional").run(program)
        np.testing.assert_array_equal(read_gemm_output(program, result.dram, 6, 9),
                                      reference_gemm(a, w, 5))


# -- random token programs ----------------------------------------------------------------

_QUEUES = [(L, C), (C, L), (C, S), (S, C)]


@st.composite
def token_scripts(draw: st.DrawFn) -> list[tuple[str, int]]:
    """Random builder calls in which no pop comes before its push (so nothing deadlocks)."""
    ops: list[tuple[str, int]] = []
    level = [0] * 4
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["push", "pop", "load", "gemm", "store"]))
        q = draw(st.integers(0, 3))
        if kind == "pop" and level[q] == 0:
            kind = "push"
        if kind == "push":
            level[q] += 1
        elif kind == "pop":
            level[q] -= 1
        ops.append((kind, q))
    return ops


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(token_scripts())
def test_random_token_programs_finish_cleanly(ops: list[tuple[str, int]]) -> None:
    cfg = preset("default")
    b = ProgramBuilder(cfg)
    x = b.tensor("x", shape=(4, cfg.BATCH, cfg.BLOCK_IN))
    c = b.tensor("c", shape=(4, cfg.BATCH, cfg.BLOCK_OUT))
    for kind, q in ops:
        if kind == "push":
            b.dep_push(*_QUEUES[q])
        elif kind == "pop":
            b.dep_pop(*_QUEUES[q])
        elif kind == "load":
            b.load_2d(MemoryType.INP, q, x, offset=q, y_size=1, x_size=1)
        elif kind == "gemm":
            b.gemm(UopKernel((Uop(q, q, q),)))
        else:
            b.store_2d(q, c, offset=q, y_size=1, x_size=1)
    program = b.finish()
    assert b.tokens == zero_tokens()
    assert program.instructions()[-1].opcode == Opcode.FINISH
    # Data accesses here are deliberately unordered: only the token rules are checked.
    result = Device("functional", check_races=False).run(program)
    assert result.counters["token_pushes"] == result.counters["token_pops"]
    assert result.counters["fetch_insns"] == program.insn_count

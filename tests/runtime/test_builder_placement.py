"""ProgramBuilder: tensors at chosen addresses, and barriers between kernels of one stream.

The functional simulator (race checker on) judges the barrier: a store's DRAM bytes read
by the next kernel's loads race without it and do not with it.
"""

from __future__ import annotations

import numpy as np
import pytest

from openvta.isa import AluOp, Config, MemoryType, Module, Uop, preset
from openvta.runtime import BuildError, Device, ProgramBuilder, UopKernel
from openvta.sim.functional import RaceError

L, C, S = Module.LOAD, Module.COMPUTE, Module.STORE


@pytest.fixture
def tiny() -> Config:
    return preset("tiny")


def test_placed_tensors_keep_their_address_and_may_overlap(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    align = tiny.max_elem_bytes
    first = b.tensor("a", data=np.arange(2 * align, dtype=np.int8), addr=align)
    second = b.tensor("b", data=np.full(align, -1, np.int8), addr=2 * align)  # a's second half
    after = b.tensor("c", shape=(3,), dtype="int32")
    assert (first.addr, second.addr) == (align, 2 * align)
    assert after.addr == 3 * align  # the next free aligned byte after everything placed
    program = b.finish()
    assert program.read("a").tolist() == list(range(align)) + [-1] * align  # b is declared later
    assert program.insn_addr >= after.addr + 12


def test_code_goes_after_the_last_placed_tensor(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.tensor("far", shape=(5,), dtype="int8", addr=40 * tiny.max_elem_bytes)
    b.alu(UopKernel((Uop(0, 0, 0),)), AluOp.ADD, imm=1)
    program = b.finish()
    assert program.insn_addr >= 40 * tiny.max_elem_bytes + 5
    Device("functional").run(program)


@pytest.mark.parametrize("addr", [-16, 8, 1.5, True])
def test_a_placed_address_must_be_aligned(tiny: Config, addr: object) -> None:
    with pytest.raises(BuildError, match=rf"^tensor 'x' addr must be a non-negative multiple of 16 bytes "
                                         rf"\(the DRAM alignment\), not {addr!r}$"):
        ProgramBuilder(tiny).tensor("x", shape=(4,), addr=addr)


def test_a_placed_name_is_still_unique(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.tensor("x", shape=(4,), addr=0)
    with pytest.raises(BuildError, match=r"^a DRAM segment named 'x' already exists$"):
        b.tensor("x", shape=(4,), addr=64)


def _two_kernels(cfg: Config, barrier: bool):
    """Kernel 1 copies ``a`` (int32 acc tiles) to ``t`` (out tiles); kernel 2 reads ``t``
    back, with the load module (INP) and compute (ACC_8BIT), and stores it to ``r``."""
    b = ProgramBuilder(cfg)
    tile = (cfg.BATCH, cfg.BLOCK_OUT)
    a = b.tensor("a", data=np.arange(-3, -3 + 2 * cfg.BLOCK_OUT * cfg.BATCH, dtype=np.int32).reshape(2, *tile),
                 role="input")
    t = b.tensor("t", shape=(2, *tile), dtype="int8")
    r = b.tensor("r", shape=(2, *tile), dtype="int8", role="output")
    for src, dst, memory_type in ((a, t, MemoryType.ACC), (t, r, MemoryType.ACC_8BIT)):
        if src is t:
            b.load_2d(MemoryType.INP, 0, t, y_size=1, x_size=2)
        b.load_2d(memory_type, 0, src, y_size=1, x_size=2)
        b.alu(UopKernel((Uop(0, 0, 0), Uop(1, 1, 0))), AluOp.SHR, imm=0)
        b.dep_push(C, S)
        b.dep_pop(C, S)
        b.store_2d(0, dst, y_size=1, x_size=2)
        b.dep_push(S, C)
        b.dep_pop(S, C)
        if barrier and src is a:
            b.barrier()
    return b.finish()


def test_a_barrier_orders_the_next_kernels_loads_after_the_stores(tiny: Config) -> None:
    program = _two_kernels(tiny, barrier=True)
    result = Device("functional").run(program)
    expected = program.read("a").astype(np.int8)
    np.testing.assert_array_equal(result.read("r"), expected)
    np.testing.assert_array_equal(Device("cycle").run(program).read("r"), expected)


def test_without_the_barrier_the_load_races_the_store(tiny: Config) -> None:
    with pytest.raises(RaceError, match="DRAM byte"):
        Device("functional").run(_two_kernels(tiny, barrier=False))


def test_a_barrier_needs_empty_token_queues(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.dep_push(C, L)
    with pytest.raises(BuildError, match=r"^a barrier needs every token queue empty, not compute→load \(\+1\)$"):
        b.barrier()

"""Machine v2's drain unit alone in Amaranth's simulator, on descriptors the simulators refuse.

docs/ISA.md §9: a descriptor whose header, operand words or residual fall outside the epi
buffer, whose stage count is above ``DRAIN_STAGES`` or whose codes are not codes is a
``MemoryAccessError`` of the simulators (``tests/sim/test_drain_refusals.py``); the RTL
checks nothing and runs it as the model below reads it: every epi address modulo the
buffer's depth (a power of two: the address registers keep its low bits), the first
``min(n, DRAIN_STAGES)`` stages, a code's bits 5–7 ignored, and op 7 giving zeros.  The
:class:`~openvta.hw.rtl.drain.DrainUnit` runs against Python memories (a read's data a
cycle after its address, as the block RAMs give it) and its tiles are compared with that
model, written from the spec's pseudo-code with the addresses wrapped.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

amaranth = pytest.importorskip("amaranth")

from amaranth.sim import Simulator  # noqa: E402

from openvta.hw.rtl.drain import DrainUnit  # noqa: E402
from openvta.hw.rtl.drain import drain_latency  # noqa: E402
from openvta.isa import (AluOp, Config, DrainOp, DrainStage, MemInsn, MemoryType, Opcode, encode_header,  # noqa: E402
                         preset, with_epi_base)
from openvta.isa.drain import parse_drain_ops  # noqa: E402
from openvta.isa.config import DRAIN_CODES_PER_LANE, DRAIN_HEADER_LANES  # noqa: E402
from openvta.isa.drain import drain_lanes  # noqa: E402
from openvta.sim.functional import MemoryAccessError  # noqa: E402
from openvta.sim.functional.semantics import MachineState, execute_store  # noqa: E402

#: ``tiny`` with a drain unit of four stages: four lanes, an epi buffer of 64 words.
CFG = preset("tiny").replace(LOG_EPI_BUFF_SIZE=10, DRAIN_STAGES=4)
LANES = CFG.BATCH * CFG.BLOCK_OUT
DEPTH = CFG.epi_depth
ADD_R = DrainStage(AluOp.ADD, operand_residual=True)


def _pack(lanes: np.ndarray, width: int) -> int:
    return sum((int(v) & ((1 << width) - 1)) << (width * i) for i, v in enumerate(lanes))


def _unpack8(word: int) -> list[int]:
    return [((word >> (8 * i) & 0xFF) ^ 0x80) - 0x80 for i in range(LANES)]


def _run_rtl(epi: np.ndarray, acc: np.ndarray, epi_base: int, y_size: int, x_size: int,
             cfg: Config = CFG, mul_cycles: int = 1, first: list[int] | None = None) -> list[list[int]]:
    """The int8 tiles the unit drains from acc tiles ``0 …`` through the descriptor at
    ``epi_base`` (``first`` gets the cycle its first tile is at the FIFO's head)."""
    dut = DrainUnit(cfg, mul_cycles)
    tiles: list[list[int]] = []
    acc = np.concatenate([acc, np.zeros((cfg.acc_depth - len(acc), LANES), np.int32)])

    async def bench(ctx: Any) -> None:
        ctx.set(dut.out_next, 1)
        ctx.set(dut.sram_base, 0)
        ctx.set(dut.y_size, y_size)
        ctx.set(dut.x_size, x_size)
        ctx.set(dut.epi_base, epi_base)
        ctx.set(dut.start, 1)
        # the last tile leaves the FIFO 2·n + 4 cycles after the last issue: well within 60
        for cycle in range(60):
            epi_addr, acc_addr = ctx.get(dut.epi_r.addr), ctx.get(dut.acc_r.addr)
            if ctx.get(dut.out_valid):
                if not tiles and first is not None:
                    first.append(cycle)
                tiles.append(_unpack8(ctx.get(dut.out_data)))
            await ctx.tick()
            ctx.set(dut.start, 0)
            ctx.set(dut.epi_r.data, _pack(epi[epi_addr], 32))
            ctx.set(dut.acc_r.data, _pack(acc[acc_addr], 32))
        assert not ctx.get(dut.busy) and not ctx.get(dut.out_valid), "the drain unit is not done after 60 cycles"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return tiles


def _rtl_reading(epi: np.ndarray, acc: np.ndarray, epi_base: int, count: int) -> list[list[int]]:
    """The model: §9's pseudo-code with every epi address modulo the depth, ``min(n,
    DRAIN_STAGES)`` stages, a code's bits 5–7 ignored and op 7 giving zeros."""
    header = epi[epi_base % DEPTH].astype(np.int64) & 0xFFFF_FFFF
    n = min(int(header[0]), CFG.DRAIN_STAGES)
    res_base, stride = (int(np.uint32(v).view(np.int32)) for v in header[1:3])
    codes = [int(header[DRAIN_HEADER_LANES + k // DRAIN_CODES_PER_LANE]) >> (8 * (k % DRAIN_CODES_PER_LANE)) & 0xFF
             for k in range(n)]
    words = [epi[(epi_base + (k + 1) * stride) % DEPTH] for k in range(n)]
    out = []
    for e in range(count):
        x, r = acc[e], epi[(res_base + e) % DEPTH]
        for code, word in zip(codes, words):
            op, on_r, b_r = code & 7, code >> 3 & 1, code >> 4 & 1
            a, b = (r if on_r else x), (r if b_r else word)
            t = np.zeros(LANES, np.int32) if op == 7 else drain_lanes(DrainOp(op), a, b)
            x, r = (x, t) if on_r else (t, r)
        out.append([((int(v) + 128) & 0xFF) - 128 for v in x])
    return out


def _header(stages: tuple[DrainStage, ...], res_base: int = 0, stride: int = 1) -> np.ndarray:
    return encode_header(CFG, stages, res_base=res_base, stride=stride)


def _with(header: np.ndarray, lane: int, value: int) -> np.ndarray:
    header = header.copy()
    header[lane] = np.uint32(value & 0xFFFF_FFFF).view(np.int32)
    return header


# (descriptor index, header, y_size, x_size): each one the simulators refuse
CASES = {
    "negative-residual": (10, _header((ADD_R,), res_base=-3), 1, 5),
    "most-negative-residual": (10, _header((ADD_R,), res_base=-(2**31)), 2, 2),
    "residual-past-the-end": (10, _header((ADD_R,), res_base=62), 1, 5),
    "largest-residual": (10, _header((ADD_R,), res_base=2**31 - 1), 1, 3),
    "operands-past-the-end": (10, _header((DrainStage(AluOp.ADD),) * 3, stride=30), 1, 2),
    "negative-stride": (10, _header((DrainStage(AluOp.ADD), DrainStage(AluOp.MUL)), stride=-7), 1, 2),
    "header-past-the-end": (DEPTH + 10, _header((ADD_R, DrainStage(AluOp.SHR)), res_base=40), 1, 3),
    "count-above-the-stages": (10, _with(_header((DrainStage(AluOp.ADD),) * 4), 0, -1), 1, 2),
    "op-7": (10, _with(_header((DrainStage(AluOp.ADD),) * 2), 3, 0x07 << 8 | 0x02), 1, 2),
    "code-bits-5-to-7": (10, _with(_header((DrainStage(AluOp.ADD),) * 2), 3, 0xE4 << 8 | 0x22), 1, 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_rtl_wraps_a_malformed_descriptor(case: str) -> None:
    epi_base, header, y_size, x_size = CASES[case]
    rng = np.random.default_rng(sorted(CASES).index(case))
    epi = rng.integers(-2**12, 2**12, (DEPTH, LANES)).astype(np.int32)
    epi[epi_base % DEPTH] = header
    acc = rng.integers(-2**12, 2**12, (y_size * x_size, LANES)).astype(np.int32)
    expected = _rtl_reading(epi, acc, epi_base, y_size * x_size)
    assert _run_rtl(epi, acc, epi_base, y_size, x_size) == expected
    # ... a descriptor the functional simulator refuses
    state = MachineState(CFG, np.zeros(4096, np.uint8))
    state.epi[:] = epi.reshape(state.epi.shape)
    insn = MemInsn(opcode=Opcode.STORE, memory_type=MemoryType.ACC, y_size=y_size, x_size=x_size,
                   x_stride=x_size, cfg=CFG)
    with pytest.raises(MemoryAccessError, match=r"^store[ :]"):
        execute_store(state, with_epi_base(insn, epi_base), "store")


def test_a_stage_of_mul_alone_over_two_cycles_drains_the_same_tiles_a_cycle_later() -> None:
    """``mul_cycles=2`` (the lean build's): a stage of MUL alone registers the lanes' partial
    products and sums them the next cycle, as the compute ALU's MUL; the tiles are the same,
    the first one cycle later per such stage passed (:func:`drain_latency`), every other
    stage as it was."""
    cfg = CFG.replace(DRAIN_STAGES=3, DRAIN_OPS=parse_drain_ops("ADD/MUL/CLIP"))
    stages = (DrainStage(AluOp.ADD), DrainStage(AluOp.MUL), DrainStage(DrainOp.CLIP))
    rng = np.random.default_rng(7)
    for count in (1, 2, 3):
        epi = rng.integers(-2**12, 2**12, (DEPTH, LANES)).astype(np.int32)
        epi[10] = encode_header(cfg, stages[:count], res_base=0, stride=1)
        epi[13] = np.uint32(0x0010_FFE0).view(np.int32)  # CLIP to [-32, 16]
        acc = rng.integers(-2**15, 2**15, (6, LANES)).astype(np.int32)
        runs = {}
        for mul_cycles in (1, 2):
            first: list[int] = []
            runs[mul_cycles] = (_run_rtl(epi, acc, 10, 2, 3, cfg, mul_cycles, first), first[0])
        assert runs[1][0] == runs[2][0] and len(runs[1][0]) == 6
        assert runs[2][1] - runs[1][1] == (1 if count >= 2 else 0)
        assert drain_latency(cfg, count, 2) - drain_latency(cfg, count, 1) == (1 if count >= 2 else 0)

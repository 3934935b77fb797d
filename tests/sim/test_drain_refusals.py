"""Malformed drain descriptors (docs/ISA.md §9, "What makes it invalid"), refused alike by the
functional simulator and the cycle model: one ``MemoryAccessError`` of one line naming the
STORE ACC, its descriptor and what is wrong with it.

Hypothesis draws each kind at both ends of its range: a residual base below 0 (the header's
lane 1 is a signed int32) or past the epi buffer's end, operand words past the end or at a
negative stride, a header past the end, a stage count beyond what the header holds or the
unit has, a code that is not one, an operation a stage does not have.  (What the RTL does
with such a descriptor: ``tests/hw/test_drain_unit.py``.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openvta.isa import (AluOp, Config, DrainOp, DrainStage, MemInsn, MemoryType, Module, Opcode, encode_header,
                         encode_stream, parse_drain_ops, preset, with_epi_base, words_to_bytes)
from openvta.isa.config import DRAIN_CODES_PER_LANE, DRAIN_HEADER_LANES
from openvta.isa.drain import max_stages
from openvta.runtime import Program, ProgramBuilder
from openvta.sim.cycle import simulate_cycles
from openvta.sim.functional import MemoryAccessError, run

V2 = preset("v2")
TINY_V2 = preset("tiny").replace(LOG_EPI_BUFF_SIZE=10, DRAIN_STAGES=4)  # 4 lanes, 64 epi words
LEAN = V2.replace(DRAIN_STAGES=3, DRAIN_OPS=parse_drain_ops("RSHR+SHR/ADD/CLIP"))
CONFIGS = (V2, TINY_V2, LEAN)
INT32 = (-(2**31), 2**31 - 1)
SIMULATORS: dict[str, Callable[[Program], Any]] = {"functional": run, "cycle": simulate_cycles}


class Case:
    """A STORE ACC of ``y·x`` tiles through the descriptor at ``epi_base``, whose header and
    operand words are loaded at ``at``; ``message`` the refusal, less its ``instruction N``."""

    def __init__(self, cfg: Config, header: np.ndarray, at: int, words: int, y: int, x: int, message: str,
                 epi_base: int | None = None) -> None:
        self.cfg, self.header, self.at, self.words, self.y, self.x = cfg, header, at, words, y, x
        self.epi_base = at if epi_base is None else epi_base
        self.message = message

    def program(self) -> Program:
        cfg, lanes, count = self.cfg, self.cfg.BATCH * self.cfg.BLOCK_OUT, self.y * self.x
        b = ProgramBuilder(cfg)
        acc = b.tensor("acc", data=np.ones((count, cfg.BATCH, cfg.BLOCK_OUT), np.int32), role="input")
        out = b.tensor("out", shape=(count, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
        b.load_2d(MemoryType.ACC, 0, acc, y_size=1, x_size=count)
        b.dep_push(Module.COMPUTE, Module.STORE)
        block = np.zeros((self.words, lanes), np.int32)
        block[0] = self.header
        b.load_epi_words(self.at, block)
        b.dep_pop(Module.COMPUTE, Module.STORE)
        b.store_2d(0, out, y_size=self.y, x_size=self.x, epi_base=self.at)
        program = b.finish()
        if self.epi_base == self.at:
            return program
        # a descriptor index past the epi buffer, which the builder refuses: the STORE rewritten
        insns = [with_epi_base(i, self.epi_base) if _drains(i) else i for i in program.instructions()]
        dram = program.dram.copy()
        image = words_to_bytes(encode_stream(insns, cfg))
        dram[program.insn_addr : program.insn_addr + len(image)] = image
        return Program(cfg, dram, program.insn_addr, program.insn_count)


def _drains(insn: object) -> bool:
    return isinstance(insn, MemInsn) and insn.opcode == Opcode.STORE and insn.memory_type == MemoryType.ACC


def _stages(draw: st.DrawFn, cfg: Config, n: int, reads_r: bool = False) -> tuple[DrainStage, ...]:
    """``n`` stages each of an operation its stage has; with ``reads_r``, stage 0 reads ``R``."""
    stages = [DrainStage(draw(st.sampled_from(sorted(ops)))) for ops in cfg.drain_stage_ops[:n]]
    if reads_r:
        on_r = draw(st.booleans())
        stages[0] = DrainStage(stages[0].op, on_residual=on_r, operand_residual=not on_r or draw(st.booleans()))
    return tuple(stages)


def _set_lane(header: np.ndarray, lane: int, value: int) -> np.ndarray:
    header = header.copy()
    header[lane] = np.uint32(value & 0xFFFF_FFFF).view(np.int32)
    return header


def _code_lanes(codes: list[int]) -> dict[int, int]:
    """The header lanes holding ``codes`` (stage 0 in the low byte of lane 3)."""
    lanes: dict[int, int] = {}
    for k, code in enumerate(codes):
        lane = DRAIN_HEADER_LANES + k // DRAIN_CODES_PER_LANE
        lanes[lane] = lanes.get(lane, 0) | code << (8 * (k % DRAIN_CODES_PER_LANE))
    return lanes


def _residual(draw: st.DrawFn, cfg: Config, below: bool) -> Case:
    y, x = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    count, depth = y * x, cfg.epi_depth
    res_base = draw(st.integers(INT32[0], -1) if below else st.integers(depth - count + 1, INT32[1]))
    header = encode_header(cfg, _stages(draw, cfg, 1, reads_r=True), res_base=res_base)
    where = r"before its first element \(0\)" if below else rf"past its depth \({depth}\)"
    return Case(cfg, header, draw(st.integers(0, depth - 2)), 2, y, x,
                rf" \(its residual\) accesses epi buffer elements {res_base}\.\.{res_base + count - 1}, {where}")


def _operands(draw: st.DrawFn, cfg: Config, negative: bool) -> Case:
    depth, n = cfg.epi_depth, draw(st.integers(1, cfg.DRAIN_STAGES))
    at = draw(st.integers(0, depth - 1))
    stride = draw(st.integers(INT32[0], -1) if negative else st.integers(-(-(depth - at) // n), INT32[1]))
    header = encode_header(cfg, _stages(draw, cfg, n), stride=stride)
    return Case(cfg, header, at, 1, 1, 2, rf": descriptor epi\[{at}\] reads operand words up to "
                                         rf"epi\[{at + n * stride}\], outside the epi buffer \({depth} words\)")


def _header_outside(draw: st.DrawFn, cfg: Config) -> Case:
    epi_base = draw(st.integers(cfg.epi_depth, (1 << 16) - 1))
    return Case(cfg, encode_header(cfg, ()), 0, 1, 1, 1, rf" \(its descriptor header\) accesses epi buffer "
                rf"elements {epi_base}\.\.{epi_base}, past its depth \({cfg.epi_depth}\)", epi_base=epi_base)


def _count_beyond_the_header(draw: st.DrawFn, cfg: Config) -> Case:
    capacity = max_stages(cfg)
    count = draw(st.integers(capacity + 1, (1 << 32) - 1))  # lane 0 is unsigned: a negative int32 too
    header = _set_lane(encode_header(cfg, ()), 0, count)
    return Case(cfg, header, 0, 1, 1, 1, rf": descriptor epi\[0\]: a header of {count} stages \(at most {capacity}\)")


def _count_beyond_the_unit(draw: st.DrawFn, cfg: Config) -> Case:
    n = draw(st.integers(cfg.DRAIN_STAGES + 1, max_stages(cfg)))
    header = _set_lane(encode_header(cfg, ()), 0, n)
    for lane, value in _code_lanes([DrainStage(AluOp.ADD).code] * n).items():
        header = _set_lane(header, lane, value)
    return Case(cfg, header, 0, 1, 1, 1, rf": descriptor epi\[0\] has {n} stages, more than the drain "
                                         rf"unit's {cfg.DRAIN_STAGES} \(DRAIN_STAGES\)")


def _bad_code(draw: st.DrawFn, cfg: Config) -> Case:
    n = draw(st.integers(1, cfg.DRAIN_STAGES))
    k = draw(st.integers(0, n - 1))
    bad = draw(st.integers(0, 255).filter(lambda c: c & 0xE0 or c & 7 == 7))
    codes = [s.code for s in _stages(draw, cfg, n)]
    codes[k] = bad
    header = _set_lane(encode_header(cfg, ()), 0, n)
    for lane, value in _code_lanes(codes).items():
        header = _set_lane(header, lane, value)
    return Case(cfg, header, 0, 1 + n, 1, 1, rf": descriptor epi\[0\]: invalid drain stage code {bad:#04x}")


def _op_a_stage_lacks(draw: st.DrawFn, cfg: Config) -> Case:
    stages = list(_stages(draw, cfg, cfg.DRAIN_STAGES))
    k = draw(st.integers(0, cfg.DRAIN_STAGES - 1))
    ops = cfg.drain_stage_ops[k]
    stages[k] = DrainStage(draw(st.sampled_from(sorted(set(DrainOp) - ops))))
    header = _set_lane(encode_header(cfg, ()), 0, len(stages))
    for lane, value in _code_lanes([s.code for s in stages]).items():
        header = _set_lane(header, lane, value)
    return Case(cfg, header, 0, 1 + len(stages), 1, 1,
                rf": descriptor epi\[0\] has stage {k} {stages[k].op.name}, which the drain unit's stage {k} does "
                rf"not have \(DRAIN_OPS: it has {re.escape('+'.join(op.name for op in sorted(ops)))}\)")


KINDS: dict[str, tuple[Callable[..., Case], tuple[Config, ...]]] = {
    "negative-residual": (lambda draw, cfg: _residual(draw, cfg, below=True), CONFIGS),
    "residual-past-the-end": (lambda draw, cfg: _residual(draw, cfg, below=False), CONFIGS),
    "negative-stride": (lambda draw, cfg: _operands(draw, cfg, negative=True), CONFIGS),
    "operands-past-the-end": (lambda draw, cfg: _operands(draw, cfg, negative=False), CONFIGS),
    "header-past-the-end": (_header_outside, CONFIGS),
    "count-beyond-the-header": (_count_beyond_the_header, CONFIGS),
    "count-beyond-the-unit": (_count_beyond_the_unit, (V2, LEAN)),  # (TINY_V2's header holds 4, its unit has 4)
    "bad-code": (_bad_code, CONFIGS),
    "op-a-stage-lacks": (_op_a_stage_lacks, (LEAN,)),
}


def _refusals(program: Program) -> dict[str, str]:
    """The message each simulator refuses ``program`` with."""
    messages = {}
    for name, simulate in SIMULATORS.items():
        with pytest.raises(MemoryAccessError) as caught:
            simulate(program)
        messages[name] = str(caught.value)
    return messages


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_malformed_descriptor_is_refused_with_one_line(kind: str, data: st.DataObject) -> None:
    make, configs = KINDS[kind]
    cfg = data.draw(st.sampled_from(configs), label="cfg")
    case = data.draw(st.composite(lambda draw: make(draw, cfg))(), label="case")
    program = case.program()
    index = next(i for i, insn in enumerate(program.instructions()) if _drains(insn))
    messages = _refusals(program)
    assert messages["functional"] == messages["cycle"]
    assert re.fullmatch(rf"instruction {index}{case.message} \[STORE ACC [^\]\n]*\]", messages["functional"]), \
        messages["functional"]


def test_a_negative_residual_base_no_longer_reads_the_buffers_end() -> None:
    """The residual at epi[-5], epi[-4] ran to FINISH, numpy reading epi[251], epi[252]."""
    header = encode_header(V2, (DrainStage(AluOp.ADD, operand_residual=True),), res_base=-5)
    program = Case(V2, header, 10, 3, 1, 2, "").program()
    assert _refusals(program) == dict.fromkeys(SIMULATORS, (
        "instruction 2 (its residual) accesses epi buffer elements -5..-4, before its first element (0) "
        "[STORE ACC pop_prev_dep push_prev_dep dram_base=16 y_size=1 x_size=2 x_stride=2 y_pad_0=10]"))

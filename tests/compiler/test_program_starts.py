"""build_program_starts: the program of build_program, and where each kernel's instructions
begin — checked by counting each kernel's GEMM and ALU instructions in its span against the
same operator compiled alone."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from test_build_program import Arena

from openvta.compiler import conv2d, dense
from openvta.compiler.program import Kernel, build_program, build_program_starts
from openvta.isa import Config, Opcode, preset
from openvta.runtime import Program


def _compute_kinds(program: Program, start: int = 0, stop: int | None = None) -> Counter[Opcode]:
    insns = program.instructions()[start:stop]
    return Counter(i.opcode for i in insns if i.opcode in (Opcode.GEMM, Opcode.ALU))


def _chain(cfg: Config) -> tuple[list[Kernel], Arena, list]:
    rng = np.random.default_rng(5)
    ch = 2 * cfg.BLOCK_IN
    ops = [conv2d(cfg, ci=ch, co=ch, hw=4, kernel=3, pad=1, shift=8),
           conv2d(cfg, ci=ch, co=ch, hw=4, kernel=1, shift=6, clip=(-128, 127)),
           conv2d(cfg, ci=ch, co=ch - 1, hw=4, kernel=3, pad=1, stride=2, shift=7)]
    arena = Arena(cfg)
    names = [arena.add("x", ops[0], "data", role="input"), arena.add("a", ops[0], "out"),
             arena.add("b", ops[1], "out"), arena.add("c", ops[2], "out", role="output")]
    kernels = [Kernel(op, {"data": names[k], "out": names[k + 1], **arena.weights(op, f"k{k}", rng)})
               for k, op in enumerate(ops)]
    return kernels, arena, ops


def test_each_span_holds_exactly_its_kernels_compute_instructions(cfg: Config) -> None:
    kernels, arena, ops = _chain(cfg)
    tensors = list(arena.tensors.values())
    program, starts = build_program_starts(kernels, cfg, tensors=tensors)
    assert np.array_equal(program.dram, build_program(kernels, cfg, tensors=tensors).dram)
    assert starts[0] == 0 and list(starts) == sorted(set(starts)) and starts[-1] < program.insn_count
    bounds = [*starts, program.insn_count]
    for k, op in enumerate(ops):
        alone = _compute_kinds(op.build())
        assert alone[Opcode.GEMM] > 0  # (a machine with a drain unit needs no ALU for the epilogue)
        assert _compute_kinds(program, bounds[k], bounds[k + 1]) == alone, f"kernel {k}"


@pytest.mark.parametrize("count", [1, 2])
def test_one_start_per_kernel(count: int) -> None:
    cfg = preset("tiny")
    rng = np.random.default_rng(count)
    op = dense(cfg, batch=1, in_features=8, out_features=8, shift=4)
    arena = Arena(cfg)
    names = [arena.add("x", op, "data", role="input")]
    names += [arena.add(f"y{k}", op, "out", role="output" if k == count - 1 else "scratch")
              for k in range(count)]
    kernels = [Kernel(op, {"data": names[k], "out": names[k + 1], **arena.weights(op, f"k{k}", rng)})
               for k in range(count)]
    program, starts = build_program_starts(kernels, cfg, tensors=list(arena.tensors.values()))
    assert len(starts) == count and starts[0] == 0
    assert sum(_compute_kinds(program).values()) == count * sum(_compute_kinds(op.build()).values())

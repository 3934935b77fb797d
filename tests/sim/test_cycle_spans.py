"""CycleReport.span_cycles: the cycles of a run cut into spans of instructions."""

from __future__ import annotations

import re

import numpy as np
import pytest

from openvta.blocked_gemm import build_blocked_gemm
from openvta.compiler import Kernel, ProgramTensor, build_program_starts, conv2d
from openvta.isa import Config, preset
from openvta.sim.cycle import simulate_cycles


def _report(program):
    return simulate_cycles(program).report


def _chain(cfg: Config, count: int):
    """``count`` copies of one conv2d, each reading the previous one's output."""
    ch = 2 * cfg.BLOCK_IN
    op = conv2d(cfg, ci=ch, co=ch, hw=6, kernel=3, pad=1, shift=9)
    rng = np.random.default_rng(3)
    act = {"dtype": "int8", "layout": op.layouts["data"], "shape": op.logical_shapes["data"]}
    size = -(-ProgramTensor("t", 0, **act).nbytes // cfg.max_elem_bytes) * cfg.max_elem_bytes
    tensors = [ProgramTensor(f"t{k}", k * size, role="input" if k == 0 else
                             "output" if k == count else "scratch", **act) for k in range(count + 1)]
    end = (count + 1) * size
    for name in ("weight", "bias"):
        data = rng.integers(-100, 100, op.logical_shapes[name]).astype(op.inputs[name].dtype)
        tensors.append(ProgramTensor(name, end, op.inputs[name].dtype, op.layouts[name],
                                     op.logical_shapes[name], name, data))
        end += -(-tensors[-1].nbytes // cfg.max_elem_bytes) * cfg.max_elem_bytes
    kernels = [Kernel(op, {"data": f"t{k}", "out": f"t{k + 1}", "weight": "weight", "bias": "bias"})
               for k in range(count)]
    return build_program_starts(kernels, cfg, tensors=tensors), op


@pytest.mark.parametrize("name", ["tiny", "default"])
def test_chained_kernels_get_their_own_cycles(name: str) -> None:
    cfg = preset(name)
    (program, starts), op = _chain(cfg, 3)
    report = _report(program)
    spans = report.span_cycles(starts)
    assert len(spans) == 3 and sum(spans) == report.cycles and min(spans) > 0
    alone = _report(op.build()).cycles
    for cycles in spans:  # a barrier instead of the drain and FINISH: close to the kernel alone
        assert abs(cycles - alone) <= 0.1 * alone, (spans, alone)
    assert abs(spans[1] - spans[2]) <= 0.02 * spans[1]  # the same work, mid-stream


def test_one_span_is_the_whole_run() -> None:
    program = build_blocked_gemm(preset("tiny"), np.ones((4, 8), np.int8), np.ones((8, 8), np.int8))
    report = _report(program)
    assert report.span_cycles([0]) == [report.cycles]
    every = report.span_cycles(range(program.insn_count))
    assert sum(every) == report.cycles and min(every) >= 0


@pytest.mark.parametrize("starts", [[], [1, 4], [0, 3, 3], [0, 5, 2]])
def test_span_starts_must_begin_at_zero_and_increase(starts: list[int]) -> None:
    program = build_blocked_gemm(preset("tiny"), np.ones((4, 8), np.int8), np.ones((8, 8), np.int8))
    with pytest.raises(ValueError, match=rf"^span starts must begin at 0 and increase, not "
                                         rf"{re.escape(repr(starts))}$"):
        _report(program).span_cycles(starts)

"""The cycle model: closed-form costs, back-pressure, equality with the functional simulator."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import random_programs

from openvta.blocked_gemm import build_blocked_gemm, read_gemm_output, reference_gemm
from openvta.isa import INSN_BYTES, PRESETS, AluOp, MemoryType, Module, Timing, Uop, preset
from openvta.runtime import Device, ProgramBuilder, UopKernel, UopLoop
from openvta.sim.cycle import CycleLimitError, CycleModel, simulate_cycles
from openvta.sim.functional import DeadlockError, RaceError, run

TINY = preset("tiny")
# 64-beat bursts: fetch reads 16 instructions per burst, so these small programs are
# fetched in one burst and the measured instruction never shares the bus.
T = Timing(dram_read_latency_cycles=5, dram_write_latency_cycles=7, max_burst_beats=64,
           request_cycles=2, prefetch_latency_cycles=2, queue_latency_cycles=1, issue_cycles=4,
           dma_row_cycles=3,
           dma_pad_row_cycles=2, dma_done_cycles=1, store_row_cycles=1, pad_cycles_per_elem=1,
           gemm_pipeline_cycles=3, gemm_ii_cycles=1, alu_pipeline_cycles=3,
           alu_imm_ii_cycles=1, alu_vec_ii_cycles=2)
READ_BURST = T.request_cycles + T.dram_read_latency_cycles  # beyond the beats
WRITE_BURST = T.request_cycles + 1 + T.dram_write_latency_cycles


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _bursts(beats: int) -> int:
    """Cycles of a transfer of ``beats`` beats in bursts of at most 64."""
    count = _ceil(beats, T.max_burst_beats)
    return count * READ_BURST + beats


def _durations(program, timing: Timing = T) -> tuple[CycleModel, dict[int, int]]:
    model = CycleModel(program, timing)
    model.run()
    return model, {r.index: r.end - r.start for r in model.records if r.module != "fetch"}


def _first(program, opcode_name: str, memory_type: MemoryType | None = None) -> int:
    for index, insn in enumerate(program.instructions()):
        if insn.opcode.name == opcode_name and (
                memory_type is None or insn.memory_type == memory_type) and \
                getattr(insn, "x_size", 1):
            return index
    raise AssertionError(f"no {opcode_name}")


@pytest.mark.parametrize("tiles", [1, 2, 7, 64, 65, 130])
@pytest.mark.parametrize("strided", [False, True])
def test_load_of_n_tiles_closed_form(tiles: int, strided: bool) -> None:
    b = ProgramBuilder(TINY)
    src = b.tensor("x", shape=(2 * tiles, 1, 4), dtype="int8")
    rows, cols = (tiles, 1) if strided else (1, tiles)
    b.load_2d(MemoryType.INP, 0, src, y_size=rows, x_size=cols, x_stride=2 if strided else cols)
    program = b.finish()
    _, durations = _durations(program)
    beats_per_row = cols * TINY.inp_elem_bytes // TINY.bus_bytes
    expected = T.issue_cycles + rows * (T.dma_row_cycles + _bursts(beats_per_row)) + T.dma_done_cycles
    assert durations[_first(program, "LOAD", MemoryType.INP)] == expected


@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (1, 0, 0, 0), (0, 0, 2, 3), (2, 1, 1, 2)])
def test_padding_costs_buffer_writes_not_dram(pads) -> None:
    b = ProgramBuilder(TINY)
    src = b.tensor("x", shape=(8, 1, 4), dtype="int8")
    b.load_2d(MemoryType.INP, 0, src, y_size=2, x_size=3, x_stride=4, y_pad_0=pads[0],
              y_pad_1=pads[1], x_pad_0=pads[2], x_pad_1=pads[3])
    program = b.finish()
    model, durations = _durations(program)
    width = pads[2] + 3 + pads[3]
    pad_rows = (pads[0] + pads[1]) * (T.dma_pad_row_cycles + width)
    data_rows = 2 * (T.dma_row_cycles + pads[2] + pads[3] + _bursts(3))
    expected = T.issue_cycles + pad_rows + data_rows + T.dma_done_cycles
    assert durations[_first(program, "LOAD", MemoryType.INP)] == expected
    assert model.read.beats - _ceil(program.insn_count * 16, TINY.bus_bytes) == 6  # data only


@pytest.mark.parametrize("uops", [1, 5, 40])
def test_gemm_of_n_micro_ops_closed_form(uops: int) -> None:
    b = ProgramBuilder(TINY)
    b.gemm(UopKernel(tuple(Uop(i % 200, 0, 0) for i in range(uops))))  # distinct neighbours
    b.gemm(UopKernel((Uop(3, 0, 0),), (UopLoop(uops),)))  # the same tile every time
    program = b.finish()
    gemms = [i for i, insn in enumerate(program.instructions()) if insn.opcode.name == "GEMM"]
    p = T.gemm_pipeline_cycles
    _, durations = _durations(program)
    assert durations[gemms[0]] == T.issue_cycles + p + uops * T.gemm_ii_cycles
    assert durations[gemms[1]] == T.issue_cycles + p + uops  # forwarded: no hazard stall
    window = 4
    _, stalled = _durations(program, T.replace(hazard_window=window))
    assert stalled[gemms[0]] == durations[gemms[0]]
    assert stalled[gemms[1]] == T.issue_cycles + p + uops + (uops - 1) * (window - 1)


@pytest.mark.parametrize("use_imm", [True, False])
def test_alu_with_and_without_immediate_closed_form(use_imm: bool) -> None:
    b = ProgramBuilder(TINY)
    b.alu(UopKernel((Uop(0, 100),), (UopLoop(30, dst_factor=1, src_factor=1),)), AluOp.ADD,
          imm=5 if use_imm else None)
    program = b.finish()
    _, durations = _durations(program)
    ii = T.alu_imm_ii_cycles if use_imm else T.alu_vec_ii_cycles
    assert durations[_first(program, "ALU")] == T.issue_cycles + T.alu_pipeline_cycles + 30 * ii


@pytest.mark.parametrize("use_imm", [True, False])
@pytest.mark.parametrize("op", [AluOp.MUL, AluOp.ADD])
def test_a_two_cycle_mul_costs_one_more_pass_per_part(use_imm: bool, op: AluOp) -> None:
    """``alu_mul_cycles = 2`` (the RTL registers the products, then sums them) adds
    ``alu_imm_ii_cycles`` cycles to every MUL execution and nothing to other ops."""
    b = ProgramBuilder(TINY)
    b.alu(UopKernel((Uop(0, 100),), (UopLoop(30, dst_factor=1, src_factor=1),)), op,
          imm=5 if use_imm else None)
    program = b.finish()
    timing = T.replace(alu_imm_ii_cycles=2, alu_vec_ii_cycles=3, alu_mul_cycles=2)
    _, durations = _durations(program, timing)
    ii = 2 if use_imm else 3
    extra = 2 if op == AluOp.MUL else 0
    assert durations[_first(program, "ALU")] == T.issue_cycles + T.alu_pipeline_cycles + 30 * (ii + extra)


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("tiles", [1, 9, 64, 70])
def test_store_closed_form(rows: int, tiles: int) -> None:
    b = ProgramBuilder(TINY)
    dst = b.tensor("y", shape=(rows, tiles, 1, 4), dtype="int8", role="output")
    b.store_2d(0, dst, y_size=rows, x_size=tiles)
    program = b.finish()
    _, durations = _durations(program)
    beats = tiles * TINY.out_elem_bytes // TINY.bus_bytes
    row = T.store_row_cycles + _ceil(beats, T.max_burst_beats) * WRITE_BURST + beats
    expected = T.issue_cycles + rows * row + T.dma_done_cycles
    assert durations[_first(program, "STORE")] == expected


@pytest.mark.parametrize("count", [1, 2, 16, 17, 40])
def test_fetch_of_n_instructions_closed_form(count: int) -> None:
    b = ProgramBuilder(TINY)
    for _ in range(count - 1):
        b.dep_push(Module.COMPUTE, Module.LOAD)  # a compute sync instruction each
        b.dep_pop(Module.COMPUTE, Module.LOAD)
    program = b.finish()
    model = CycleModel(program, T)
    model.run()
    beats_per_insn = INSN_BYTES // TINY.bus_bytes
    per_burst = T.max_burst_beats // beats_per_insn
    chunks = [per_burst] * (program.insn_count // per_burst)
    chunks += [program.insn_count % per_burst] if program.insn_count % per_burst else []
    expected = sum(READ_BURST + c * beats_per_insn for c in chunks)
    fetch = [r for r in model.records if r.module == "fetch"]
    assert sum(r.end - r.start for r in fetch) == expected
    if program.insn_count == 1:  # FINISH alone: fetched, routed, issued
        assert model.env.now == (expected + T.prefetch_latency_cycles + T.queue_latency_cycles
                                 + T.issue_cycles)


def _producer_consumer(depth: int):
    """Load pushes 6 tokens back to back; compute spends 50 cycles per token."""
    cfg = TINY.replace(DEP_QUEUE_DEPTH=depth)
    b = ProgramBuilder(cfg)
    for _ in range(6):
        b.dep_push(Module.LOAD, Module.COMPUTE)
    for _ in range(6):
        b.dep_pop(Module.LOAD, Module.COMPUTE)
        b.gemm(UopKernel((Uop(0, 0, 0),), (UopLoop(46, dst_factor=1),)))
    return b.finish()


def test_back_pressure_from_a_full_token_queue() -> None:
    deep = simulate_cycles(_producer_consumer(16), T)
    shallow = simulate_cycles(_producer_consumer(1), T)
    assert deep.counters["load_wait_token_cycles"] == 0
    assert shallow.counters["load_wait_token_cycles"] > 4 * 50
    np.testing.assert_array_equal(deep.dram, shallow.dram)
    assert shallow.counters["cycles"] == deep.counters["cycles"]  # compute is the bottleneck


@pytest.mark.parametrize("name", ["tiny", "small", "default"])
def test_random_programs_equal_functional(name: str) -> None:
    cfg = PRESETS[name]

    @settings(max_examples={"tiny": 40, "small": 20, "default": 10}[name], deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        program = data.draw(random_programs(cfg))
        cycle = simulate_cycles(program)
        functional = run(program)
        np.testing.assert_array_equal(cycle.dram, functional.dram)
        for key, value in functional.counters.items():
            assert cycle.counters[key] == value, key

    check()


@pytest.mark.parametrize("vthreads", [1, 2, 3])
def test_blocked_gemm_equals_functional_and_numpy(cfg, vthreads: int) -> None:
    rng = np.random.default_rng(vthreads)
    a = rng.integers(-128, 128, (40, 24), dtype=np.int8)
    w = rng.integers(-128, 128, (20, 24), dtype=np.int8)
    program = build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=5)
    result = Device("cycle").run(program)
    np.testing.assert_array_equal(result.dram, run(program).dram)
    np.testing.assert_array_equal(read_gemm_output(program, result.dram, 40, 20),
                                  reference_gemm(a, w, 5))


def test_two_virtual_threads_hide_latency() -> None:
    cfg = preset("default")
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (256, 256), dtype=np.int8)
    w = rng.integers(-128, 128, (256, 256), dtype=np.int8)
    one = simulate_cycles(build_blocked_gemm(cfg, a, w, vthreads=1, shift=8)).report
    two = simulate_cycles(build_blocked_gemm(cfg, a, w, vthreads=2, shift=8)).report
    assert two.cycles < one.cycles
    assert two.utilization > one.utilization
    assert one.macs == two.macs == 256**3


def test_report_figures_are_consistent() -> None:
    cfg = preset("small")
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (64, 64), dtype=np.int8)
    program = build_blocked_gemm(cfg, a, a, vthreads=2, shift=8)
    report = simulate_cycles(program).report
    assert report.utilization == pytest.approx(report.macs / (report.cycles * 64))
    assert report.roofline_cycles == max(report.macs / 64,
                                         max(report.dram_read_bytes, report.dram_write_bytes) / 8)
    assert 0 < report.roofline_fraction <= 1
    for name, stats in report.modules.items():
        assert stats.total == report.cycles, name
    assert report.counters["cycles"] == report.cycles
    assert report.counters["gemm_busy_cycles"] <= report.counters["compute_busy_cycles"]
    assert "GEMM utilization" in report.format()


def test_deadlock_and_cycle_bound_and_races_surface_here_too() -> None:
    b = ProgramBuilder(TINY)
    src = b.tensor("inp", shape=(4, 1, 4), dtype="int8")
    b.dep_pop(Module.LOAD, Module.COMPUTE)
    b.gemm(UopKernel((Uop(0, 0, 0),)))
    b.dep_push(Module.COMPUTE, Module.LOAD)
    b.dep_pop(Module.COMPUTE, Module.LOAD)
    b.load_2d(MemoryType.INP, 0, src, y_size=1, x_size=4)
    b.dep_push(Module.LOAD, Module.COMPUTE)
    with pytest.raises(DeadlockError, match=(r"(?s)^deadlock at cycle \d+: no module can make "
                                             r"progress.*load: instruction 2 \(LOAD INP.*waits for "
                                             r"a token on compute→load.*token queues: ")):
        simulate_cycles(b.finish())
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (32, 32), dtype=np.int8)
    program = build_blocked_gemm(TINY, a, a, vthreads=2)
    with pytest.raises(CycleLimitError, match=r"^cycle bound of 500 cycles reached before FINISH\n"):
        simulate_cycles(program, max_cycles=500)
    b = ProgramBuilder(TINY)
    src = b.tensor("inp", data=np.ones((4, 1, 4), dtype=np.int8))
    b.load_2d(MemoryType.INP, 0, src, y_size=1, x_size=4)
    b.gemm(UopKernel((Uop(0, 0, 0),)))  # no load→compute token
    with pytest.raises(RaceError, match=r"^race on inp buffer element 0: "):
        simulate_cycles(b.finish())


def test_trace_and_timeline(tmp_path) -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (16, 16), dtype=np.int8)
    program = build_blocked_gemm(TINY, a, a, vthreads=2, shift=4)
    report = simulate_cycles(program).report
    report.write_trace(tmp_path / "trace.json")
    report.write_timeline(tmp_path / "timeline.png")
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    lanes = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert lanes == {"fetch", "load", "compute", "store"}
    slices = [e for e in events if e["ph"] == "X" and e["cat"] != "fetch"]
    assert sorted(e["args"]["index"] for e in slices) == list(range(program.insn_count))
    starts = [e for e in events if e["ph"] == "s"]
    assert len(starts) == report.counters["token_pushes"] == len([e for e in events if e["ph"] == "f"])
    assert (tmp_path / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

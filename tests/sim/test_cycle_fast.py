"""The cycle model's fast path against its event-by-event reference.

The fast path (:meth:`openvta.sim.cycle.memory.Channel.train`) spends the DMA steps
nothing else can see as arithmetic.  It must not be told apart from the reference:
every run here compares the cycles, every counter, every module's busy/stall figures,
the instruction and token records in their order, the Chrome trace, the beats moved
and the final DRAM, or the error and its message, on compiled ResNet-18 layers,
blocked GEMMs with virtual threads, sequential random programs and DMA-only programs
where load, compute and store fight for the channels, under random timings.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import random_programs

import openvta
from openvta.blocked_gemm import build_blocked_gemm
from openvta.compiler.workloads import RESNET18, random_inputs
from openvta.isa import PRESETS, Config, MemoryType, Module, Timing, preset, timing_for
from openvta.isa.timing import INSN_MOVE_CHOICES
from openvta.runtime import Device, Program, ProgramBuilder
from openvta.sim.cycle import CycleModel
from openvta.sim.cycle.trace import chrome_trace
from openvta.sim.functional import machine as machine_module



def slow(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _run(program: Program, event_by_event: bool, **options: Any) -> dict[str, Any]:
    model = CycleModel(program, event_by_event=event_by_event, **options)
    try:
        report = model.run()
    except Exception as exc:  # the error is part of the behaviour compared
        return {"error": (type(exc), str(exc))}
    return {
        "cycles": report.cycles,
        "counters": report.counters,
        "modules": {name: dataclasses.asdict(s) for name, s in report.modules.items()},
        "records": [dataclasses.astuple(r) for r in model.records],
        "tokens": [dataclasses.astuple(r) for r in model.token_records],
        "beats": (model.read.beats, model.write.beats),
        "trace": chrome_trace(model),
        "dram": model.machine.state.dram.tobytes(),
    }


def assert_same(program: Program, **options: Any) -> dict[str, Any]:
    """Run ``program`` both ways and check the runs are identical; return the fast one."""
    fast = _run(program, False, **options)
    reference = _run(program, True, **options)
    assert fast.keys() == reference.keys()
    for key, value in reference.items():
        assert fast[key] == value, key
    return fast


@st.composite
def timings(draw: st.DrawFn) -> Timing:
    """Timings from the calibrated ones to odd ones (short bursts, long latencies)."""
    small = st.integers(0, 6)
    return Timing(
        dram_read_latency_cycles=draw(small), dram_write_latency_cycles=draw(small),
        max_burst_beats=draw(st.sampled_from([1, 2, 3, 8, 16, 64, 256])),
        request_cycles=draw(small), prefetch_latency_cycles=draw(small),
        queue_latency_cycles=draw(small), issue_cycles=draw(st.integers(1, 6)),
        insn_move_cycles=draw(st.sampled_from(INSN_MOVE_CHOICES)),
        dma_row_cycles=draw(small), dma_pad_row_cycles=draw(small),
        dma_done_cycles=draw(small), store_row_cycles=draw(small),
        pad_cycles_per_elem=draw(st.integers(0, 2)),
        gemm_pipeline_cycles=draw(small), gemm_ii_cycles=draw(st.integers(1, 3)),
        alu_pipeline_cycles=draw(small), alu_imm_ii_cycles=draw(st.integers(1, 3)),
        alu_vec_ii_cycles=draw(st.integers(1, 3)), hazard_window=draw(st.integers(0, 4)))


@st.composite
def dma_programs(draw: st.DrawFn, cfg: Config) -> Program:
    """Loads on the load and compute modules and stores, on buffers none of the others
    touches (race-free without tokens), with random tokens between the modules: every
    module moves data at once, so the channels are contended."""
    b = ProgramBuilder(cfg)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    elems = 64
    shapes = {MemoryType.INP: (cfg.BATCH, cfg.BLOCK_IN), MemoryType.WGT: (cfg.BLOCK_OUT, cfg.BLOCK_IN),
              MemoryType.ACC: (cfg.BATCH, cfg.BLOCK_OUT)}
    src = {mt: b.tensor(mt.name.lower(), data=rng.integers(-100, 100, (elems, *shape)).astype(
        np.int32 if mt == MemoryType.ACC else np.int8)) for mt, shape in shapes.items()}
    out = b.tensor("out", shape=(elems, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
    pushed = {queue: 0 for queue in ((Module.LOAD, Module.COMPUTE), (Module.COMPUTE, Module.STORE),
                                     (Module.STORE, Module.COMPUTE), (Module.COMPUTE, Module.LOAD))}
    for _ in range(draw(st.integers(1, 14))):
        op = draw(st.sampled_from(["inp", "wgt", "acc", "store", "push", "pop"]))
        if op in ("push", "pop"):
            queue = draw(st.sampled_from(sorted(pushed)))
            if op == "push":
                b.dep_push(*queue)
                pushed[queue] += 1
            elif pushed[queue]:
                b.dep_pop(*queue)
                pushed[queue] -= 1
            continue
        y_size, x_size = draw(st.integers(1, 6)), draw(st.integers(1, 8))
        x_stride = x_size + draw(st.integers(0, 3))
        offset = draw(st.integers(0, elems - (y_size - 1) * x_stride - x_size))
        if op == "store":
            b.store_2d(draw(st.integers(0, cfg.out_depth - y_size * x_size)), out, offset=offset,
                       y_size=y_size, x_size=x_size, x_stride=x_stride)
            continue
        mt = MemoryType[op.upper()]
        pads = draw(st.lists(st.integers(0, 2), min_size=4, max_size=4))
        footprint = (pads[0] + y_size + pads[1]) * (pads[2] + x_size + pads[3])
        b.load_2d(mt, draw(st.integers(0, cfg.buffer_depth(mt) - footprint)), src[mt],
                  offset=offset, y_size=y_size, x_size=x_size, x_stride=x_stride,
                  y_pad_0=pads[0], y_pad_1=pads[1], x_pad_0=pads[2], x_pad_1=pads[3])
    return b.finish()


@pytest.mark.parametrize("layer", ["C7", "C10"])
@pytest.mark.parametrize("vthreads", [1, 2])
def test_resnet18_layers_identical(layer: str, vthreads: int) -> None:
    operands = random_inputs(RESNET18[layer], seed=0)
    op = openvta.operator("conv2d", layer=layer, config="default", vthreads=vthreads)
    program = op.build({k: operands[k] for k in ("data", "weight", "bias")})
    fast = assert_same(program)
    assert fast["cycles"] > 10_000 and fast["beats"][0] > 10_000  # a real run, not an error


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_blocked_gemms_with_virtual_threads_identical(name: str) -> None:
    cfg = PRESETS[name]

    @slow(12)
    @given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 40), st.integers(1, 4),
           timings(), st.integers(0, 2**32 - 1))
    def check(m: int, n: int, k: int, vthreads: int, timing: Timing, seed: int) -> None:
        rng = np.random.default_rng(seed)
        a = rng.integers(-128, 128, (m, k), dtype=np.int8)
        w = rng.integers(-128, 128, (n, k), dtype=np.int8)
        try:
            program = build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=6)
        except ValueError:  # the threads' blocks do not fit the buffers
            return
        assert "error" not in assert_same(program, timing=timing)

    check()


@pytest.mark.parametrize("name", ["tiny", "vta"])
def test_dma_programs_identical(name: str) -> None:
    cfg = PRESETS[name]

    @slow(40)
    @given(st.data(), timings())
    def check(data: st.DataObject, timing: Timing) -> None:
        program = data.draw(dma_programs(cfg))
        assert "error" not in assert_same(program, timing=timing)

    check()


@slow(40)
@given(st.data(), st.sampled_from(["tiny", "small", "vta"]), timings())
def test_random_programs_identical(data: st.DataObject, name: str, timing: Timing) -> None:
    program = data.draw(random_programs(PRESETS[name]))
    assert "error" not in assert_same(program, timing=timing)


@slow(15)
@given(st.integers(1, 3000), st.integers(1, 3), timings())
def test_cycle_bound_stops_both_alike(max_cycles: int, vthreads: int, timing: Timing) -> None:
    rng = np.random.default_rng(max_cycles)
    a = rng.integers(-128, 128, (16, 16), dtype=np.int8)
    program = build_blocked_gemm(preset("tiny"), a, a, vthreads=vthreads, shift=4)
    assert_same(program, timing=timing, max_cycles=max_cycles)


def test_deadlock_reported_alike() -> None:
    b = ProgramBuilder(preset("tiny"))
    src = b.tensor("inp", shape=(4, 1, 4), dtype="int8")
    b.dep_pop(Module.LOAD, Module.COMPUTE)
    b.load_2d(MemoryType.ACC, 0, b.tensor("acc", shape=(4, 1, 4), dtype="int32"), y_size=2,
              x_size=2)
    b.dep_push(Module.COMPUTE, Module.LOAD)
    b.dep_pop(Module.COMPUTE, Module.LOAD)
    b.load_2d(MemoryType.INP, 0, src, y_size=1, x_size=4)
    b.dep_push(Module.LOAD, Module.COMPUTE)
    run = assert_same(b.finish())
    assert run["error"][1].startswith("deadlock at cycle ")


def test_event_by_event_is_a_device_option() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (16, 16), dtype=np.int8)
    program = build_blocked_gemm(preset("tiny"), a, a, vthreads=2, shift=4)
    fast = Device("cycle").run(program)
    slow = Device("cycle", event_by_event=True).run(program)
    assert fast.counters == slow.counters
    np.testing.assert_array_equal(fast.dram, slow.dram)


def test_event_by_event_must_be_a_bool() -> None:
    program = ProgramBuilder(preset("tiny")).finish()
    with pytest.raises(TypeError, match=r"^event_by_event must be a bool, not 1$"):
        CycleModel(program, event_by_event=1)
    with pytest.raises(TypeError, match=r"^event_by_event must be a bool, not 'yes'$"):
        Device("cycle", event_by_event="yes")


def test_progress_reports_a_short_run_too() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (16, 16), dtype=np.int8)
    program = build_blocked_gemm(preset("tiny"), a, a, vthreads=2, shift=4)
    calls: list[tuple[str, int, int | None]] = []
    result = Device("cycle", progress=lambda *call: calls.append(call)).run(program)
    assert calls[-1] == ("cycles", result.counters["cycles"], None)
    assert [c[1] for c in calls] == sorted(c[1] for c in calls)


def _cold(program: Program, **options: Any) -> dict[str, Any]:
    """A run of ``program`` with no decoding, plans, loop cycles or trains kept from before."""
    machine_module._decoded_cache.__dict__.clear()
    return _run(program, False, **options)


def test_runs_of_one_program_share_its_decoding_and_match_cold_runs() -> None:
    """What is worked out once per program (the decoding, the loop plans, the loop cycles
    and the DMA trains per timing) gives what a first run gives, for other data in the
    same instruction words too."""
    cfg = preset("tiny")
    rng = np.random.default_rng(1)
    a, b, w = (rng.integers(-128, 128, (24, 20), dtype=np.int8) for _ in range(3))
    first, second = (build_blocked_gemm(cfg, x, w, vthreads=2, shift=6) for x in (a, b))
    assert np.array_equal(first.words(), second.words())
    slower = dataclasses.replace(timing_for(cfg), gemm_ii_cycles=3, dma_row_cycles=5)
    cold = {"first": _cold(first), "second": _cold(second), "slower": _cold(first, timing=slower)}
    machine_module._decoded_cache.__dict__.clear()
    for _ in range(2):
        assert _run(first, False) == cold["first"]
        assert _run(first, False, timing=slower) == cold["slower"]
        assert _run(second, False) == cold["second"]
    assert cold["slower"]["cycles"] > cold["first"]["cycles"]
    assert cold["first"]["dram"] != cold["second"]["dram"]
    assert cold["second"]["dram"] == Device("functional").run(second).dram.tobytes()

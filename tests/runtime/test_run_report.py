"""Every back end's result carries a typed report of what it measured, and only that."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from openvta.blocked_gemm import build_blocked_gemm
from openvta.isa import UNIT_COUNTERS, Counter, InsnTiming, RunReport, Unit, UnitTiming, preset, unit_timing
from openvta.runtime import BackendError, Device, Program, ProgramBuilder, Result, register_backend
from openvta.sim.cycle import CycleReport

CFG = preset("tiny")


def _program() -> Program:
    a, w = np.ones((4, 8), np.int8), np.ones((8, 8), np.int8)
    return build_blocked_gemm(CFG, a, w)


def test_the_unit_counters_are_named_after_their_unit() -> None:
    assert [u.value for u in Unit] == ["fetch", "load", "compute", "store"]
    for unit, names in UNIT_COUNTERS.items():
        assert names.busy.value == f"{unit.value}_busy_cycles"
        assert names.wait_memory.value == f"{unit.value}_wait_memory_cycles"
        assert names.wait_queue.value == f"{unit.value}_wait_queue_cycles"
        token = None if unit is Unit.FETCH else f"{unit.value}_wait_token_cycles"
        assert (names.wait_token and names.wait_token.value) == token


def test_a_functional_run_reports_no_time() -> None:
    report = Device("functional").run(_program()).report
    assert isinstance(report, RunReport) and report.backend == "functional"
    assert report.units == {} and report.timeline is None and report.measured_cycles is None
    assert Counter.CYCLES.value not in report.counters and report.counters["macs"] > 0
    assert report.format() == ""
    with pytest.raises(ValueError, match=r"^the functional back end must time every instruction to "
                                         r"cut its run into spans, not only count cycles$"):
        report.span_cycles([0])


def test_the_cycle_model_times_every_unit_and_instruction() -> None:
    result = Device("cycle").run(_program())
    report = result.report
    assert isinstance(report, CycleReport) and isinstance(report, RunReport)
    assert report.backend == "cycle" and report.counters == result.counters
    assert list(report.units) == list(Unit) and list(report.modules) == list(Unit)
    assert report.units == unit_timing(report.counters)
    assert report.units[Unit.FETCH].wait_token_cycles is None
    assert report.units[Unit.COMPUTE] == UnitTiming(
        report.modules[Unit.COMPUTE].busy, report.modules[Unit.COMPUTE].wait_token,
        report.modules[Unit.COMPUTE].wait_memory, report.modules[Unit.COMPUTE].wait_queue)
    assert report.timeline is not None and all(isinstance(t, InsnTiming) for t in report.timeline)
    assert report.measured_cycles == report.cycles == max(t.end_cycle for t in report.timeline)


def test_counters_only_give_units_only_where_measured() -> None:
    report = RunReport.measured("rtl", {"cycles": 50, "store_busy_cycles": 7, "macs": 3})
    assert report.units == {Unit.STORE: UnitTiming(busy_cycles=7)}
    assert report.measured_cycles == 50 and report.timeline is None
    assert report.format().splitlines()[1].split() == ["store", "7", "-", "-", "-"]


class _Plain:
    def __init__(self, report: Any = None) -> None:
        self.report = report

    def run(self, program: Program) -> Result:
        return Result(dram=program.dram.copy(), counters={"cycles": 9}, report=self.report)


def test_a_back_end_without_a_report_gets_one_of_its_counters(registry: None) -> None:
    register_backend("plain", lambda: _Plain())
    report = Device("plain").run(ProgramBuilder(CFG).finish()).report
    assert report == RunReport(backend="plain", counters={"cycles": 9})


def test_a_back_end_report_must_be_a_run_report(registry: None) -> None:
    register_backend("odd", lambda: _Plain(report={"cycles": 9}))
    with pytest.raises(BackendError, match=r"^back end 'odd' report must be a RunReport or None, not dict$"):
        Device("odd").run(ProgramBuilder(CFG).finish())

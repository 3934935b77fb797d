"""The single-port on-chip DRAM (:class:`openvta.hw.rtl.axi_ram.AxiRam` ``single_port``)
maps onto the iCE40 UP5K's SPRAM with the bitstream build's command, and onto block RAM
without it; the bitstream build's options for it are checked.  (Its behaviour:
tests/hw/test_uart.py; the core on it against the cycle model's ``spram_timing``:
tests/hw/test_core_random.py; the UP5K's design through the UART bridge:
tests/hw/test_soc.py.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from amaranth.back import rtlil

from openvta.hw.fpga.bitstream import SocOptions, _tool_path, build_bitstream
from openvta.hw.fpga.boards import board
from openvta.hw.rtl.axi_ram import SPRAM_NO_INIT, AxiRam
from openvta.isa import Machine, preset

#: tests that run the YoWASP tools share one xdist worker (tests/hw/test_bitstream.py)
YOWASP = pytest.mark.xdist_group("yowasp")


def _cells(tmp_path: Path, mem_bytes: int, before_synth: str) -> dict[str, int]:
    (tmp_path / "ram.il").write_text(rtlil.convert(AxiRam(mem_bytes, 4, single_port=True), name="ram"))
    script = (f"read_rtlil ram.il; {before_synth}; synth_ice40 -spram -top ram; "
              "tee -q -o stat.json stat -json")
    subprocess.run([_tool_path("yosys"), "-q", "-p", script], cwd=tmp_path, check=True,
                   capture_output=True, timeout=600)
    return json.loads((tmp_path / "stat.json").read_text())["design"]["num_cells_by_type"]


@YOWASP
@pytest.mark.parametrize("mem_bytes, sprams", [(65536, 2), (131072, 4)])
def test_the_single_port_ram_is_the_up5ks_spram(tmp_path: Path, mem_bytes: int, sprams: int) -> None:
    """16K 32-bit words are two 16-bit SPRAMs side by side, 32K four; no block RAM."""
    cells = _cells(tmp_path, mem_bytes, SPRAM_NO_INIT)
    assert cells.get("SB_SPRAM256KA") == sprams and "SB_RAM40_4K" not in cells, cells
    assert cells["SB_LUT4"] < 300


@YOWASP
def test_without_the_command_the_memory_stays_in_block_ram(tmp_path: Path) -> None:
    """(An SPRAM has no initial contents: the memory's zeros keep it out.)"""
    cells = _cells(tmp_path, 65536, "opt_clean")
    assert "SB_SPRAM256KA" not in cells and cells["SB_RAM40_4K"] == 128, cells


@pytest.mark.parametrize("board_name, kwargs, message", [
    ("ulx3s-85f", {}, r"^ulx3s-85f's ECP5 LFE5U-85F has no SPRAM: build it with block RAM "
                      r"\(not memory=spram\)$"),
    ("icebreaker", {"mem_bytes": 262144},
     r"^mem_bytes must be at most the iCE40 UP5K's 128 KiB of SPRAM, not 262144$"),
])
def test_spram_options_are_checked(tmp_path: Path, board_name: str, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_bitstream(board_name, "tiny:memory=spram", SocOptions(**kwargs), out_dir=tmp_path / "b")
    assert not (tmp_path / "b").exists()  # nothing was built


def test_a_dram_shaped_for_more_sprams_than_the_part_has_is_refused(tmp_path: Path) -> None:
    """128 KiB on an 8-bit bus is 128K words deep: eight 16K-word SPRAMs of four; a 128-bit
    bus is eight side by side at any depth."""
    narrow = preset("tiny").replace(LOG_BUS_WIDTH=3)
    with pytest.raises(ValueError, match=r"^a DRAM of 128 KiB on a 8-bit bus takes 8 SPRAMs of 16K 16-bit "
                                         r"words, and the iCE40 UP5K has 4: choose a smaller mem_bytes or a "
                                         r"narrower bus$"):
        build_bitstream("icebreaker", Machine(narrow, memory="spram"), out_dir=tmp_path / "b")
    wide = preset("tiny").replace(LOG_BUS_WIDTH=7)
    with pytest.raises(ValueError, match=r"^a DRAM of 16 KiB on a 128-bit bus takes 8 SPRAMs"):
        build_bitstream("icebreaker", Machine(wide, memory="spram"), SocOptions(mem_bytes=16384),
                        out_dir=tmp_path / "b")
    assert not (tmp_path / "b").exists()
    icebreaker = board("icebreaker")
    assert icebreaker.spram_blocks == 4
    assert icebreaker.sprams_for(131072, 32) == 4 and icebreaker.sprams_for(65536, 64) == 4

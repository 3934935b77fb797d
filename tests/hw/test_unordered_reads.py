"""The bitstream build's command for the buffers' unordered reads
(:data:`openvta.hw.rtl.buffers.UNORDERED_READS_SCRIPT`): Yosys then maps a buffer's read
port onto the block RAM alone (iCE40 and ECP5), where it would otherwise keep
Amaranth's read-first semantics with a registered copy of each write and a bypass
multiplexer; the acc buffer's transparent ports are left as they are."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from amaranth import Module, unsigned
from amaranth.back import rtlil
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from openvta.hw.fpga.bitstream import _tool_path
from openvta.hw.rtl.buffers import UNORDERED_READS, UNORDERED_READS_SCRIPT
from openvta.hw.rtl.top import Top
from openvta.isa import preset

#: tests that run the YoWASP tools share one xdist worker (tests/hw/test_bitstream.py)
YOWASP = pytest.mark.xdist_group("yowasp")
WIDTH = 128


class _Buffer(wiring.Component):
    """One buffer as the core builds it (``{name}_buffer``): a write port and a read port,
    transparent for it if ``transparent``."""

    def __init__(self, name: str, transparent: bool) -> None:
        self.name, self.transparent = name, transparent
        super().__init__({"we": In(1), "waddr": In(8), "wdata": In(WIDTH), "raddr": In(8),
                          "rdata": Out(WIDTH)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules[f"{self.name}_buffer"] = mem = Memory(shape=unsigned(WIDTH), depth=256, init=[])
        w = mem.write_port()
        r = mem.read_port(transparent_for=(w,) if self.transparent else ())
        m.d.comb += [w.en.eq(self.we), w.addr.eq(self.waddr), w.data.eq(self.wdata),
                     r.addr.eq(self.raddr), self.rdata.eq(r.data)]
        return m


#: per family: Yosys's synthesis command, its block RAM cell and how many a 256 × 128-bit
#: buffer takes, its flip-flop cells' prefix
FAMILIES = {"ice40": ("synth_ice40", "SB_RAM40_4K", 8, "SB_DFF"), "ecp5": ("synth_ecp5", "DP16KD", 4, "TRELLIS_FF")}


def _flip_flops(tmp_path: Path, name: str, transparent: bool, after_read: str, family: str = "ice40") -> int:
    synth, bram, blocks, flip_flop = FAMILIES[family]
    (tmp_path / "buffer.il").write_text(rtlil.convert(_Buffer(name, transparent), name="top"))
    script = f"read_rtlil buffer.il; {after_read}; {synth} -top top; tee -q -o stat.json stat -json"
    subprocess.run([_tool_path("yosys"), "-q", "-p", script], cwd=tmp_path, check=True,
                   capture_output=True, timeout=600)
    cells = json.loads((tmp_path / "stat.json").read_text())["design"]["num_cells_by_type"]
    assert cells.get(bram) == blocks, cells
    return sum(n for cell, n in cells.items() if cell.startswith(flip_flop))


def test_the_command_names_every_buffer_but_acc() -> None:
    assert set(UNORDERED_READS) == {"inp", "wgt", "out", "uop", "epi"}
    for name in UNORDERED_READS:
        assert f"r:MEMID=*{name}_buffer " in UNORDERED_READS_SCRIPT
    assert "acc" not in UNORDERED_READS_SCRIPT


@YOWASP
@pytest.mark.parametrize("name, family", [("wgt", "ice40"), ("uop", "ice40"), ("inp", "ecp5")])
def test_an_unordered_read_is_the_block_ram_alone(tmp_path: Path, name: str, family: str) -> None:
    assert _flip_flops(tmp_path, name, False, "opt_clean", family) >= WIDTH  # the write's copy
    assert _flip_flops(tmp_path, name, False, UNORDERED_READS_SCRIPT, family) == 0


@YOWASP
def test_the_acc_buffers_transparent_read_is_kept(tmp_path: Path) -> None:
    kept = _flip_flops(tmp_path, "acc", True, "opt_clean")
    assert kept >= WIDTH and _flip_flops(tmp_path, "acc", True, UNORDERED_READS_SCRIPT) == kept


@YOWASP
@pytest.mark.parametrize("drain", [False, True])
def test_the_command_marks_the_cores_buffers_and_not_acc(tmp_path: Path, drain: bool) -> None:
    """On the real top level (``tiny``, and ``tiny`` with a drain unit for the epi buffer):
    the read ports of inp, wgt, out and uop (and epi and the cleared bits) are marked,
    acc's are not, so a renamed buffer cannot silently drop out of the command."""
    cfg = preset("tiny").replace(LOG_EPI_BUFF_SIZE=12, DRAIN_STAGES=4) if drain else preset("tiny")
    (tmp_path / "top.il").write_text(rtlil.convert(Top(cfg), name="top"))
    marked = "t:$memrd_v2 r:COLLISION_X_MASK=1'1 %i"
    cleared = f"{marked} r:MEMID=*cleared_bits_* %i"  # the drain's cleared bits: 2 banks of 4 (3 readers + 1)
    script = (f"read_rtlil top.il; {UNORDERED_READS_SCRIPT}; "
              f"select -assert-count {5 if drain else 4} {marked} {cleared} %d; "
              f"select -assert-count {8 if drain else 0} {cleared}; "
              f"select -assert-none {marked} r:MEMID=*acc_buffer %i")
    done = subprocess.run([_tool_path("yosys"), "-q", "-p", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

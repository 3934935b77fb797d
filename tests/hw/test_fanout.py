"""Replicated registers (:mod:`openvta.hw.rtl.fanout`): Yosys keeps every copy with the
bitstream build's command, and merges them back into one without it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from amaranth import Cat, ClockDomain, Module, Mux, Signal
from amaranth.back import rtlil
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from openvta.hw.fpga.bitstream import TOP_NAME, _plan, _tool_path
from openvta.hw.fpga.boards import board
from openvta.isa import LeanBuild
from openvta.hw.rtl.fanout import KEEP_REPLICAS, REPLICA_ATTR, replicas
from openvta.isa import preset
from openvta.isa.counters import counter_set

#: tests that run the YoWASP tools share one xdist worker (tests/hw/test_bitstream.py)
YOWASP = pytest.mark.xdist_group("yowasp")
COPIES = 4


class _Lanes(wiring.Component):
    """Four 8-bit lanes, each choosing between ``a`` and ``b`` on its copy of ``sel``."""

    def __init__(self) -> None:
        super().__init__({"sel": In(1), "a": In(8 * COPIES), "b": In(8 * COPIES),
                          "o": Out(8 * COPIES)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        sels = replicas(m, "sel", self.sel, COPIES)
        m.d.sync += self.o.eq(Cat(*(Mux(sel, self.a.word_select(k, 8), self.b.word_select(k, 8))
                                    for k, sel in enumerate(sels))))
        return m


def _flip_flops(tmp_path: Path, before_synth: str, async_reset: bool) -> int:
    """The flip-flops ``synth_ecp5`` leaves of :class:`_Lanes`, with ``before_synth``
    run after reading it."""
    top, lanes = Module(), _Lanes()
    top.domains.sync = sync = ClockDomain(async_reset=async_reset)
    top.submodules.lanes = lanes
    ports = [lanes.sel, lanes.a, lanes.b, lanes.o, sync.clk, sync.rst]
    (tmp_path / "lanes.il").write_text(rtlil.convert(top, name="top", ports=ports))
    script = f"read_rtlil lanes.il; {before_synth}; synth_ecp5 -top top; tee -q -o stat.json stat -json"
    subprocess.run([_tool_path("yosys"), "-q", "-p", script], cwd=tmp_path, check=True,
                   capture_output=True, timeout=600)
    cells = json.loads((tmp_path / "stat.json").read_text())["design"]["num_cells_by_type"]
    return cells["TRELLIS_FF"]


def test_replicas_hold_the_same_value() -> None:
    from amaranth.sim import Simulator

    m = Module()
    sel = Signal()
    copies = replicas(m, "sel", sel, 3)
    seen = []

    async def bench(ctx) -> None:
        for value in (1, 0, 1, 1, 0):
            ctx.set(sel, value)
            await ctx.tick()
            seen.append((value, [ctx.get(c) for c in copies]))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [(v, [v] * 3) for v, _ in seen]


@YOWASP
@pytest.mark.parametrize("async_reset", [False, True], ids=["sync-reset", "async-reset"])
def test_yosys_keeps_the_copies_only_when_told(tmp_path: Path, async_reset: bool) -> None:
    """Amaranth makes the copies ``$dff`` cells, ``$adff`` in a domain with an
    asynchronous reset: either way the command keeps them."""
    outputs = 8 * COPIES
    (tmp_path / "kept").mkdir()
    (tmp_path / "merged").mkdir()
    assert _flip_flops(tmp_path / "kept", KEEP_REPLICAS, async_reset) == outputs + COPIES
    assert _flip_flops(tmp_path / "merged", "opt_clean", async_reset) == outputs + 1


@YOWASP
def test_the_bitstream_build_keeps_every_copy_of_the_accelerator(tmp_path: Path) -> None:
    """The build's script marks the flip-flop of every copy in the real SoC (lean `tiny`
    on the ULX3S): one kept ``$dff`` per replica wire, none missed."""
    lean = LeanBuild(alu_ii=2, acc_ports=1, mul_cycles=2, uop_stage=1)
    _plan(board("ulx3s-85f"), preset("tiny"), 4096, 115200, True, 50.0, counter_set("none"),
          lean).extract(tmp_path)
    assert KEEP_REPLICAS in (tmp_path / f"{TOP_NAME}.ys").read_text()
    script = f"read_rtlil {TOP_NAME}.il; {KEEP_REPLICAS}; proc; write_json marked.json"
    subprocess.run([_tool_path("yosys"), "-q", "-p", script], cwd=tmp_path, check=True,
                   capture_output=True, timeout=600)
    modules = json.loads((tmp_path / "marked.json").read_text())["modules"].values()
    wires = sum(len(net["bits"]) for mod in modules for net in mod["netnames"].values()
                if REPLICA_ATTR in net["attributes"])
    kept = sum(int(cell["parameters"]["WIDTH"], 2) for mod in modules for cell in mod["cells"].values()
               if cell["type"] == "$dff" and "keep" in cell["attributes"])
    assert wires > 0 and kept == wires

"""Run the core in Amaranth's own simulator against a Python AXI memory model.

Slow (a few thousand cycles per second) but needs no Verilator: the quick check that a
program gives the functional simulator's DRAM, used for small programs on ``tiny``.
"""

from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator

from openvta.hw.rtl.core import Core
from openvta.isa import Timing
from openvta.runtime import Program


def simulate_core(program: Program, max_cycles: int = 20000, counters: str = "all",
                  timing: Timing | None = None, shared_dma: bool = False) -> tuple[np.ndarray, dict[str, int]]:
    """(final DRAM, counters) of ``program`` on the RTL core built with ``counters``,
    ``timing`` and ``shared_dma`` (only the counters it has are returned)."""
    cfg = program.config
    dut = Core(cfg, timing, counters=counters, shared_dma=shared_dma)
    bus_bytes = cfg.bus_bytes
    memory = bytearray(program.dram.tobytes()) + bytearray(4096)
    found: dict[str, int] = {}  # the counters, read by the testbench at the end

    async def testbench(ctx) -> None:
        a = lambda name: getattr(dut, f"m_axi_{name}")  # noqa: E731
        ctx.set(dut.insn_addr, program.insn_addr)
        ctx.set(dut.insn_count, program.insn_count)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        read = None  # [address, beats left]
        write = None  # [address, beats left, responding]
        for _ in range(max_cycles):
            ctx.set(a("arready"), read is None)
            if read is not None:
                addr = read[0]
                ctx.set(a("rvalid"), 1)
                ctx.set(a("rdata"), int.from_bytes(memory[addr : addr + bus_bytes], "little"))
                ctx.set(a("rlast"), read[1] == 1)
            else:
                ctx.set(a("rvalid"), 0)
            ctx.set(a("awready"), write is None)
            ctx.set(a("wready"), write is not None and not write[2])
            ctx.set(a("bvalid"), write is not None and write[2])
            arvalid, rready = ctx.get(a("arvalid")), ctx.get(a("rready"))
            araddr, arlen = ctx.get(a("araddr")), ctx.get(a("arlen"))
            awvalid, awaddr, awlen = ctx.get(a("awvalid")), ctx.get(a("awaddr")), ctx.get(a("awlen"))
            wvalid, wdata, bready = ctx.get(a("wvalid")), ctx.get(a("wdata")), ctx.get(a("bready"))
            wstrb = ctx.get(a("wstrb"))
            if ctx.get(dut.done):
                break
            await ctx.tick()
            if read is not None and rready:
                read = None if read[1] == 1 else [read[0] + bus_bytes, read[1] - 1]
            elif read is None and arvalid:
                read = [araddr, arlen + 1]
            if write is None:
                if awvalid:
                    write = [awaddr, awlen + 1, False]
            elif write[2]:
                if bready:
                    write = None
            elif wvalid:
                beat = wdata.to_bytes(bus_bytes, "little")
                for lane in range(bus_bytes):  # only the bytes the strobes select
                    if wstrb >> lane & 1:
                        memory[write[0] + lane] = beat[lane]
                write = [write[0] + bus_bytes, write[1] - 1, write[1] == 1]
        else:
            raise AssertionError(f"the core did not finish within {max_cycles} cycles")
        found.update({c.value: ctx.get(dut.counters[k])
                      for k, c in enumerate(dut.counter_set.counters)})

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    dram = np.frombuffer(bytes(memory[: len(program.dram)]), dtype=np.uint8).copy()
    return dram, found


def simulate_core_on_ram(program: Program, timing: Timing | None = None, single_port: bool = False,
                         max_cycles: int = 60000, shared_dma: bool = False) -> tuple[np.ndarray, dict[str, int]]:
    """(final DRAM, counters) of ``program`` on the RTL core with the SoC's on-chip RAM
    (:class:`~openvta.hw.rtl.axi_ram.AxiRam`, two ports or ``single_port``: the UP5K's
    SPRAM) as its DRAM, loaded directly before the start."""
    from amaranth import Module
    from amaranth.lib import wiring

    from openvta.hw.rtl.axi_ram import AxiRam
    from openvta.hw.rtl.memory import axi_master_signature

    cfg = program.config
    bus_bytes = cfg.bus_bytes
    size = 1024
    while size < len(program.dram) + 4096:
        size *= 2
    core = Core(cfg, timing, shared_dma=shared_dma)
    ram = AxiRam(size, bus_bytes, single_port=single_port)

    class Both(wiring.Component):
        def __init__(self) -> None:
            super().__init__({})

        def elaborate(self, platform: object) -> Module:
            m = Module()
            m.submodules.core, m.submodules.ram = core, ram
            for name, member in axi_master_signature(bus_bytes * 8).items():
                ours, theirs = getattr(core, name), getattr(ram, "s_axi_" + name.removeprefix("m_axi_"))
                m.d.comb += (theirs.eq(ours) if member.flow == wiring.Out else ours.eq(theirs))
            return m

    image = bytes(program.dram.tobytes()) + bytes(size - len(program.dram))
    found: dict[str, int] = {}  # the counters, read by the testbench at the end
    read: list[bytes] = []  # and the DRAM

    async def testbench(ctx) -> None:
        assert ram.memory is not None  # (elaborated)
        for k in range(size // bus_bytes):
            word = int.from_bytes(image[k * bus_bytes:(k + 1) * bus_bytes], "little")
            if word:
                ctx.set(ram.memory.data[k], word)
        ctx.set(core.insn_addr, program.insn_addr)
        ctx.set(core.insn_count, program.insn_count)
        ctx.set(core.start, 1)
        await ctx.tick()
        ctx.set(core.start, 0)
        for _ in range(max_cycles):
            if ctx.get(core.done):
                break
            await ctx.tick()
        else:
            raise AssertionError(f"the core did not finish within {max_cycles} cycles")
        found.update({c.value: ctx.get(core.counters[k]) for k, c in enumerate(core.counter_set.counters)})
        read.append(b"".join(ctx.get(ram.memory.data[k]).to_bytes(bus_bytes, "little")
                             for k in range(-(-len(program.dram) // bus_bytes))))

    sim = Simulator(Both())
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    dram = np.frombuffer(read[0][: len(program.dram)], dtype=np.uint8).copy()
    return dram, found

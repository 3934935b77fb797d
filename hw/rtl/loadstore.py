"""The load and store modules.

Load runs LOAD INP and LOAD WGT with one DMA reader per buffer; store runs STORE with
one DMA writer from the out buffer.  A LOAD or STORE with ``x_size = 0`` moves nothing
and completes in its first cycle (its tokens still act).  Latency: an instruction
starts executing two cycles after it leaves the command queue when its tokens are
there (IDLE, POP), and retires the cycle after its DMA engine is done (PUSH); the
engines move one element per cycle (:mod:`.dma`).
"""

from __future__ import annotations

from amaranth import Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from openvta.isa import Config, MemoryType
from openvta.isa import Module as Unit

from .buffers import read_port, write_port
from .dma import READ_FIELDS, WRITE_FIELDS, DmaReader, DmaWriter
from .fields import Decoded
from .memory import mem_port
from .params import refusing
from .stage import Stage

__all__ = ["LoadUnit", "StoreUnit", "dma_fields"]


def dma_fields(m: Module, dma: DmaReader | DmaWriter, insn: Decoded, names: tuple[str, ...]) -> None:
    """Drive a DMA engine's field inputs from the latched instruction."""
    for name in names:
        m.d.comb += getattr(dma, name).eq(insn.mem(name))


class LoadUnit(Stage):
    """LOAD INP / LOAD WGT into the inp and wgt buffers.

    Members
    -------
    inp_w, wgt_w : :func:`~.buffers.write_port`
        the buffers' write ports.
    inp_mem, wgt_mem : Out(mem_port(bus_bits))
        the two DMA readers' burst ports.

    and those of :class:`~.stage.Stage`.
    """

    @refusing
    def __init__(self, cfg: Config, bus_bits: int, max_burst: int) -> None:
        super().__init__(Unit.LOAD, cfg, bus_bits, {
            "inp_w": write_port(cfg, "inp"), "wgt_w": write_port(cfg, "wgt"),
            "inp_mem": Out(mem_port(bus_bits)), "wgt_mem": Out(mem_port(bus_bits)),
        })
        self.dmas = {
            MemoryType.INP: DmaReader(cfg.inp_elem_bytes * 8, bus_bits, max_burst),
            MemoryType.WGT: DmaReader(cfg.wgt_elem_bytes * 8, bus_bits, max_burst),
        }

    def elaborate(self, platform: object) -> Module:
        m = Module()
        for mt, dma in self.dmas.items():
            m.submodules[f"dma_{mt.name.lower()}"] = dma
        for port, mem, dma in ((self.inp_w, self.inp_mem, self.dmas[MemoryType.INP]),
                               (self.wgt_w, self.wgt_mem, self.dmas[MemoryType.WGT])):
            m.d.comb += [port.en.eq(dma.wr_en), port.addr.eq(dma.wr_addr), port.data.eq(dma.wr_data)]
            wiring.connect(m, wiring.flipped(mem), dma.mem)
        m.d.comb += self.waiting_memory.eq(self.dmas[MemoryType.INP].waiting
                                           | self.dmas[MemoryType.WGT].waiting)

        def execute(m: Module, insn: Decoded, first: Value) -> Value:
            sync = insn.mem("x_size") == 0
            done = first & sync
            for mt, dma in self.dmas.items():
                dma_fields(m, dma, insn, READ_FIELDS)
                m.d.comb += dma.start.eq(first & ~sync & (insn.mem("memory_type") == mt))
                done = done | dma.done
            return done

        self.instruction_cycle(m, execute)
        return m


class StoreUnit(Stage):
    """STORE from the out buffer to DRAM.

    Members
    -------
    out_r : :func:`~.buffers.read_port`
        the out buffer's read port.
    out_mem : Out(mem_port(bus_bits))
        the DMA writer's burst port.

    and those of :class:`~.stage.Stage`.
    """

    @refusing
    def __init__(self, cfg: Config, bus_bits: int, max_burst: int) -> None:
        super().__init__(Unit.STORE, cfg, bus_bits, {
            "out_r": read_port(cfg, "out"), "out_mem": Out(mem_port(bus_bits)),
        })
        self.dma = DmaWriter(cfg.out_elem_bytes * 8, bus_bits, max_burst)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.dma = dma = self.dma
        wiring.connect(m, wiring.flipped(self.out_mem), dma.mem)
        rp = self.out_r
        m.d.comb += [rp.en.eq(dma.rd_en), rp.addr.eq(dma.rd_addr), dma.rd_data.eq(rp.data),
                     self.waiting_memory.eq(dma.waiting)]

        def execute(m: Module, insn: Decoded, first: Value) -> Value:
            sync = insn.mem("x_size") == 0
            dma_fields(m, dma, insn, WRITE_FIELDS)
            m.d.comb += dma.start.eq(first & ~sync)
            return (first & sync) | dma.done

        self.instruction_cycle(m, execute)
        return m

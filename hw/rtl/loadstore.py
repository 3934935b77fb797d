"""The load and store modules.

Load runs LOAD INP and LOAD WGT with one DMA reader per buffer; store runs STORE with
one DMA writer from the out buffer.  A LOAD or STORE with ``x_size = 0`` moves nothing
and completes in its first cycle (its tokens still act).
"""

from __future__ import annotations

from amaranth import Elaboratable, Module, Signal
from amaranth.lib.fifo import SyncFIFOBuffered

from openvta.isa import Config, MemoryType, TokenQueue
from openvta.isa import Module as Unit

from .dma import READ_FIELDS, WRITE_FIELDS, DmaReader, DmaWriter
from .fetch import TokenCounter
from .fields import Decoded
from .stage import StageStatus, instruction_cycle

__all__ = ["LoadUnit", "StoreUnit", "dma_fields"]


def dma_fields(m: Module, dma: object, insn: Decoded, names: tuple[str, ...]) -> None:
    """Drive a DMA engine's field inputs from the latched instruction."""
    for name in names:
        m.d.comb += getattr(dma, name).eq(insn.mem(name))


class LoadUnit(Elaboratable):
    """LOAD INP / LOAD WGT into the inp and wgt buffers (write ports ``inp_wp``, ``wgt_wp``)."""

    def __init__(self, cfg: Config, bus_bits: int, max_burst: int, fifo: SyncFIFOBuffered,
                 tokens: dict[TokenQueue, TokenCounter], inp_wp: object, wgt_wp: object,
                 remaining: Signal) -> None:
        self.cfg, self.fifo, self.tokens, self.remaining = cfg, fifo, tokens, remaining
        self.inp_wp, self.wgt_wp = inp_wp, wgt_wp
        self.dmas = {
            MemoryType.INP: DmaReader(cfg.inp_elem_bytes * 8, bus_bits, max_burst),
            MemoryType.WGT: DmaReader(cfg.wgt_elem_bytes * 8, bus_bits, max_burst),
        }
        self.status = StageStatus()
        self.waiting_memory = Signal()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        for mt, dma in self.dmas.items():
            m.submodules[f"dma_{mt.name.lower()}"] = dma
        for mt, port in ((MemoryType.INP, self.inp_wp), (MemoryType.WGT, self.wgt_wp)):
            dma = self.dmas[mt]
            m.d.comb += [port.en.eq(dma.wr_en), port.addr.eq(dma.wr_addr),  # type: ignore[attr-defined]
                         port.data.eq(dma.wr_data)]  # type: ignore[attr-defined]
        m.d.comb += self.waiting_memory.eq(self.dmas[MemoryType.INP].waiting
                                           | self.dmas[MemoryType.WGT].waiting)

        def execute(m: Module, insn: Decoded, first: Signal) -> object:
            sync = insn.mem("x_size") == 0
            done = first & sync
            for mt, dma in self.dmas.items():
                dma_fields(m, dma, insn, READ_FIELDS)
                m.d.comb += dma.start.eq(first & ~sync & (insn.mem("memory_type") == mt))
                done = done | dma.done
            return done

        instruction_cycle(m, self.cfg, Unit.LOAD, self.fifo, self.tokens, self.status, execute,
                          self.remaining)
        return m


class StoreUnit(Elaboratable):
    """STORE from the out buffer (read port ``out_rp``) to DRAM."""

    def __init__(self, cfg: Config, bus_bits: int, max_burst: int, fifo: SyncFIFOBuffered,
                 tokens: dict[TokenQueue, TokenCounter], out_rp: object, remaining: Signal) -> None:
        self.cfg, self.fifo, self.tokens, self.remaining = cfg, fifo, tokens, remaining
        self.out_rp = out_rp
        self.dma = DmaWriter(cfg.out_elem_bytes * 8, bus_bits, max_burst)
        self.status = StageStatus()
        self.waiting_memory = Signal()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.dma = dma = self.dma
        rp = self.out_rp
        m.d.comb += [rp.en.eq(dma.rd_en), rp.addr.eq(dma.rd_addr), dma.rd_data.eq(rp.data),  # type: ignore[attr-defined]
                     self.waiting_memory.eq(dma.waiting)]

        def execute(m: Module, insn: Decoded, first: Signal) -> object:
            sync = insn.mem("x_size") == 0
            dma_fields(m, dma, insn, WRITE_FIELDS)
            m.d.comb += dma.start.eq(first & ~sync)
            return (first & sync) | dma.done

        instruction_cycle(m, self.cfg, Unit.STORE, self.fifo, self.tokens, self.status, execute,
                          self.remaining)
        return m

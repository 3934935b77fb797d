"""The load and store modules.

Load runs LOAD INP and LOAD WGT with one DMA reader per buffer (or, with
``shared_dma``, one reader of both widths: :class:`~.dma.DmaReaders`); store runs STORE
with one DMA writer from the out buffer.  On machine v2 (docs/ISA.md §9) the store
module also runs LOAD EPI and EPI_8BIT into the epi buffer (two DMA readers, or one
shared, as compute's ACC and ACC_8BIT loads: padding zeros, int8 lanes sign-extended),
and STORE ACC through the drain unit (:class:`~.drain.DrainUnit`), whose stream of int8
tiles its DMA writer sends instead of the out buffer's.  A LOAD or STORE with
``x_size = 0`` moves nothing and completes in its first cycle (its tokens still act).
Latency: an instruction starts executing two cycles after it leaves the command queue
when its tokens are there (IDLE, POP; with instructions in k words, k + 1 cycles:
:mod:`.stage`'s TAKE), and retires the cycle after its DMA engine is done (PUSH); the
engines move one element per cycle (:mod:`.dma`).
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from openvta.isa import Config, MemoryType, Opcode
from openvta.isa import Module as Unit
from openvta.isa.drain import EPI_BASE_FIELDS

from .buffers import read_port, write_port
from .dma import WRITE_FIELDS, DmaReaders, DmaWriter, dma_fields
from .drain import DrainUnit
from .fields import Decoded
from .memory import mem_port
from .params import refusing
from .stage import Stage
from .units import widen_lanes

__all__ = ["LoadUnit", "StoreUnit"]


class LoadUnit(Stage):
    """LOAD INP / LOAD WGT into the inp and wgt buffers.

    Members
    -------
    inp_w, wgt_w : :func:`~.buffers.write_port`
        the buffers' write ports.
    inp_mem, wgt_mem : Out(mem_port(bus_bits))
        the two DMA readers' burst ports; with ``shared_dma``, one reader of both widths
        and its port ``dma_mem`` (:class:`~.dma.DmaReaders`).

    and those of :class:`~.stage.Stage`.
    """

    @refusing
    def __init__(self, cfg: Config, bus_bits: int, max_burst: int, shared_dma: bool = False,
                 insn_words: int = 1) -> None:
        self.readers = DmaReaders({MemoryType.INP: cfg.inp_elem_bytes * 8,
                                   MemoryType.WGT: cfg.wgt_elem_bytes * 8}, bus_bits, max_burst, shared_dma)
        super().__init__(Unit.LOAD, cfg, bus_bits, {
            "inp_w": write_port(cfg, "inp"), "wgt_w": write_port(cfg, "wgt"), **self.readers.members(),
        }, insn_words)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.d.comb += self.waiting_memory.eq(self.readers.elaborate_into(m, self))
        insn = Decoded(self.status.insn, self.cfg)
        for port, mt in ((self.inp_w, MemoryType.INP), (self.wgt_w, MemoryType.WGT)):
            en, addr, data = self.readers.write(mt, insn)
            m.d.comb += [port.en.eq(en), port.addr.eq(addr), port.data.eq(data)]

        def execute(m: Module, insn: Decoded, first: Value) -> Value:
            sync = insn.mem("x_size") == 0
            return (first & sync) | self.readers.start(m, insn, first & ~sync)

        self.instruction_cycle(m, execute)
        return m


class StoreUnit(Stage):
    """STORE from the out buffer to DRAM; on machine v2 also LOAD EPI/EPI_8BIT and STORE ACC.

    Members
    -------
    out_r : :func:`~.buffers.read_port`
        the out buffer's read port.
    out_mem : Out(mem_port(bus_bits))
        the DMA writer's burst port.

    On machine v2 (docs/ISA.md §9), also:

    epi_w, epi_r : :func:`~.buffers.write_port`, :func:`~.buffers.read_port`
        the epi buffer's ports (the EPI loads write it; the drain reads it).
    acc_d, acc_z : :func:`~.buffers.read_port`, :func:`~.buffers.write_port`
        the drain's read port of the acc buffer (not transparent) and its second write
        port, which zeroes the drained tiles (:mod:`.drain`).
    epi_mem, epi_8bit_mem : Out(mem_port(bus_bits))
        the burst ports of the EPI and EPI_8BIT DMA readers (``dma_mem`` with
        ``shared_dma``: one reader of both).

    and those of :class:`~.stage.Stage`.  ``mul_cycles`` (the lean build's) = 2 splits the
    drain's stages of MUL alone over two cycles, as the compute ALU's MUL
    (:func:`openvta.isa.drain_split_stages`).  A STORE ACC starts its drain and its DMA
    writer together; the writer's beats wait for the drain's tiles, so a drain takes as
    long as a STORE of the out buffer plus the drain's latency
    (:func:`~.drain.drain_latency`) less the writer's own start (its first row's request).
    """

    @refusing
    def __init__(self, cfg: Config, bus_bits: int, max_burst: int, shared_dma: bool = False,
                 insn_words: int = 1, mul_cycles: int = 1) -> None:
        members: dict[str, wiring.Member] = {"out_r": read_port(cfg, "out"), "out_mem": Out(mem_port(bus_bits))}
        self.drain: DrainUnit | None = None
        if cfg.has_drain:  # machine v2: the EPI loads' readers, and the drain, whose tiles the writer sends
            self.readers = DmaReaders({MemoryType.EPI: cfg.acc_elem_bytes * 8,
                                       MemoryType.EPI_8BIT: cfg.out_elem_bytes * 8}, bus_bits, max_burst,
                                      shared_dma)
            members.update({"epi_w": write_port(cfg, "epi"), "epi_r": read_port(cfg, "epi"),
                            "acc_d": read_port(cfg, "acc"), "acc_z": write_port(cfg, "acc"),
                            **self.readers.members()})
            self.drain = DrainUnit(cfg, mul_cycles)
        super().__init__(Unit.STORE, cfg, bus_bits, members, insn_words)
        self.dma = DmaWriter(cfg.out_elem_bytes * 8, bus_bits, max_burst, stream=self.drain is not None)

    def elaborate(self, platform: object) -> Module:
        if self.cfg.has_drain:
            return self._elaborate_v2()
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

    def _elaborate_v2(self) -> Module:
        """The store module of machine v2: the EPI loads, STORE OUT and STORE ACC."""
        m = Module()
        cfg = self.cfg
        m.submodules.dma = dma = self.dma
        m.submodules.drain = drain = self.drain
        assert drain is not None  # (built with it)
        readers_waiting = self.readers.elaborate_into(m, self)
        wiring.connect(m, wiring.flipped(self.out_mem), dma.mem)
        wiring.connect(m, wiring.flipped(self.acc_d), drain.acc_r)
        wiring.connect(m, wiring.flipped(self.acc_z), drain.acc_z)
        wiring.connect(m, wiring.flipped(self.epi_r), drain.epi_r)
        insn = Decoded(self.status.insn, cfg)
        (epi_en, epi_addr, epi_data), (epi8_en, epi8_addr, epi8_data) = (
            self.readers.write(mt, insn) for mt in (MemoryType.EPI, MemoryType.EPI_8BIT))
        with m.If(epi_en):
            m.d.comb += [self.epi_w.en.eq(1), self.epi_w.addr.eq(epi_addr), self.epi_w.data.eq(epi_data)]
        with m.Elif(epi8_en):
            m.d.comb += [self.epi_w.en.eq(1), self.epi_w.addr.eq(epi8_addr),
                         self.epi_w.data.eq(widen_lanes(epi8_data, cfg.BATCH * cfg.BLOCK_OUT, cfg))]
        drains = (insn.opcode == Opcode.STORE) & (insn.mem("memory_type") == MemoryType.ACC)
        rp = self.out_r
        m.d.comb += [rp.en.eq(dma.rd_en), rp.addr.eq(dma.rd_addr),
                     dma.rd_data.eq(Mux(drains, drain.out_data, rp.data)),
                     dma.rd_valid.eq(~drains | drain.out_valid), drain.out_next.eq(drains & dma.rd_next),
                     self.waiting_memory.eq(dma.waiting | readers_waiting)]

        def execute(m: Module, insn: Decoded, first: Value) -> Value:
            sync = insn.mem("x_size") == 0
            load = insn.opcode == Opcode.LOAD
            done = (first & sync) | dma.done | self.readers.start(m, insn, first & ~sync & load)
            dma_fields(m, dma, insn, WRITE_FIELDS)
            m.d.comb += [dma.start.eq(first & ~sync & ~load), drain.start.eq(first & ~sync & drains),
                         drain.sram_base.eq(insn.mem("sram_base")), drain.y_size.eq(insn.mem("y_size")),
                         drain.x_size.eq(insn.mem("x_size")),
                         drain.epi_base.eq(Cat(*(insn.mem(f) for f in EPI_BASE_FIELDS)))]
            return done

        self.instruction_cycle(m, execute)
        return m

"""The compute module: micro-op and accumulator loads, GEMM, ALU, FINISH.

GEMM and ALU share one loop engine (docs/ISA.md §3 loops: ``iter_out``, ``iter_in``, micro-ops
innermost) with a five-stage pipeline, one micro-op execution per cycle:

1. read the micro-op;
2. add the loop offsets; read inp, wgt and the accumulator tile(s);
3. register what the buffers return (block RAM outputs are slow on an FPGA);
4. multiply (the :class:`GemmCore`'s registered products), or compute the ALU
   (:class:`AluLanes`, result registered);
5. add the products to the accumulator tile; write acc and out.

The accumulator's read ports are transparent for its write port, and the tiles read
in stage 2 are brought up to date with the writes made since (forwarding: in stage 4
for the ALU, from its own registered results; in stage 5 for the GEMM), so an
execution that reads the tile an earlier one writes always sees the new value:
back-to-back accumulation into one tile needs no stall (docs/ISA.md: no hazard rule).
LOAD ACC and ACC_8BIT write the accumulator only; GEMM with ``reset_reg`` writes zeros
to the accumulator only.
"""

from __future__ import annotations

from amaranth import Cat, Elaboratable, Module, Mux, Signal, Value
from amaranth.lib.fifo import SyncFIFOBuffered

from openvta.isa import Config, Format, MemoryType, Opcode, TokenQueue, layouts_of
from openvta.isa import Module as Unit
from openvta.isa.config import LOOP_ITER_WIDTH, UOP_WIDTH

from .dma import READ_FIELDS, DmaReader
from .fetch import TokenCounter
from .fields import Decoded, uop_fields
from .loadstore import dma_fields
from .stage import StageStatus, instruction_cycle
from .units import AluLanes, GemmCore

__all__ = ["ComputeUnit"]


class ComputeUnit(Elaboratable):
    """Compute: drives the uop write/read ports, the acc read (two) and write ports, the
    out write port, and reads inp and wgt.  ``done`` rises when FINISH executes."""

    def __init__(self, cfg: Config, bus_bits: int, max_burst: int, fifo: SyncFIFOBuffered,
                 tokens: dict[TokenQueue, TokenCounter], ports: dict[str, object],
                 remaining: Signal) -> None:
        self.cfg, self.fifo, self.tokens, self.ports, self.remaining = cfg, fifo, tokens, ports, remaining
        self.dmas = {
            MemoryType.UOP: DmaReader(UOP_WIDTH, bus_bits, max_burst),
            MemoryType.ACC: DmaReader(cfg.acc_elem_bytes * 8, bus_bits, max_burst),
            MemoryType.ACC_8BIT: DmaReader(cfg.out_elem_bytes * 8, bus_bits, max_burst),
        }
        self.gemm, self.alu = GemmCore(cfg, registered=True), AluLanes(cfg)
        self.status = StageStatus()
        self.finished = Signal()  # FINISH executed (until the next start)
        self.clear = Signal()  # start of a run: clears ``finished``
        self.waiting_memory = Signal()
        self.gemm_busy, self.alu_busy = Signal(), Signal()
        self.uop_fire, self.uop_is_gemm, self.uop_reset = Signal(), Signal(), Signal()
        self.loop_start = Signal()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        for mt, dma in self.dmas.items():
            m.submodules[f"dma_{mt.name.lower()}"] = dma
        m.submodules.gemm, m.submodules.alu = self.gemm, self.alu
        p = self.ports
        m.d.comb += self.waiting_memory.eq(self.dmas[MemoryType.UOP].waiting
                                           | self.dmas[MemoryType.ACC].waiting
                                           | self.dmas[MemoryType.ACC_8BIT].waiting)
        uop = self.dmas[MemoryType.UOP]
        m.d.comb += [p["uop_w"].en.eq(uop.wr_en), p["uop_w"].addr.eq(uop.wr_addr),  # type: ignore[attr-defined]
                     p["uop_w"].data.eq(uop.wr_data)]  # type: ignore[attr-defined]
        with m.If(self.clear):
            m.d.sync += self.finished.eq(0)
        loop_done = self._loop_engine(m)

        def execute(m: Module, insn: Decoded, first: Signal) -> object:
            op = insn.opcode
            sync = (op == Opcode.LOAD) & (insn.mem("x_size") == 0)
            done = first & sync
            for mt, dma in self.dmas.items():
                dma_fields(m, dma, insn, READ_FIELDS)
                m.d.comb += dma.start.eq(first & ~sync & (op == Opcode.LOAD)
                                         & (insn.mem("memory_type") == mt))
                done = done | dma.done
            with m.If(first & (op == Opcode.FINISH)):
                m.d.sync += self.finished.eq(1)
            m.d.comb += self.loop_start.eq(first & ((op == Opcode.GEMM) | (op == Opcode.ALU)))
            return done | (first & (op == Opcode.FINISH)) | loop_done

        instruction_cycle(m, self.cfg, Unit.COMPUTE, self.fifo, self.tokens, self.status, execute,
                          self.remaining)
        self._acc_writes(m)
        return m

    def _loop_engine(self, m: Module) -> Signal:
        """The micro-op loops; returns the done pulse."""
        cfg = self.cfg
        d = Decoded(self.status.insn, cfg)
        is_alu = d.opcode == Opcode.ALU

        def get(name: str) -> Value:
            return Mux(is_alu, d.alu(name), d.gemm(name))

        i, j = Signal(LOOP_ITER_WIDTH), Signal(LOOP_ITER_WIDTH)
        u = Signal(layouts_of(cfg)[Format.GEMM].field("uop_end").width)
        names = ("dst", "src", "wgt")
        # an index is as wide as its micro-op field: sums wrap at the buffer's depth
        uop_layout = layouts_of(cfg)[Format.UOP]
        bits = {n: uop_layout.field(f"{n}_idx").width for n in names}
        base = {n: Signal(bits[n], name=f"base_{n}") for n in names}  # i·factor_out
        off = {n: Signal(bits[n], name=f"off_{n}") for n in names}  # i·factor_out + j·factor_in
        issuing = Signal()
        done = Signal()
        # stage registers: s1 holds the offsets of the micro-op being read, s2 the indices
        s1_valid, s2_valid = Signal(), Signal()
        s1_off = {n: Signal(bits[n], name=f"s1_{n}") for n in names}
        s2_dst, s2_src = Signal(bits["dst"]), Signal(bits["src"])
        factor = {n: (get(f"{n}_factor_out") if n != "wgt" else d.gemm("wgt_factor_out"),
                      get(f"{n}_factor_in") if n != "wgt" else d.gemm("wgt_factor_in")) for n in names}
        bgn, end = get("uop_bgn"), get("uop_end")
        iter_out, iter_in = get("iter_out"), get("iter_in")
        empty = (iter_out == 0) | (iter_in == 0) | (bgn >= end)
        p = self.ports
        with m.If(self.loop_start):
            m.d.sync += [i.eq(0), j.eq(0), u.eq(bgn), issuing.eq(~empty)]
            m.d.sync += [base[n].eq(0) for n in names] + [off[n].eq(0) for n in names]
        m.d.comb += [p["uop_r"].addr.eq(u)]  # type: ignore[attr-defined]
        with m.If(issuing):
            m.d.sync += [s1_valid.eq(1)] + [s1_off[n].eq(off[n]) for n in names]
            with m.If(u + 1 < end):
                m.d.sync += u.eq(u + 1)
            with m.Else():
                m.d.sync += u.eq(bgn)
                with m.If(j + 1 < iter_in):
                    m.d.sync += [j.eq(j + 1)] + [off[n].eq(off[n] + factor[n][1]) for n in names]
                with m.Else():
                    m.d.sync += [j.eq(0), i.eq(i + 1)]
                    m.d.sync += [base[n].eq(base[n] + factor[n][0]) for n in names]
                    m.d.sync += [off[n].eq(base[n] + factor[n][0]) for n in names]
                    with m.If(i + 1 >= iter_out):
                        m.d.sync += issuing.eq(0)
        with m.Else():
            m.d.sync += s1_valid.eq(0)
        # stage 2: indices from the micro-op read last cycle; issue the buffer reads
        udst, usrc, uwgt = uop_fields(p["uop_r"].data, cfg)  # type: ignore[attr-defined]
        dst = (udst + s1_off["dst"])[:bits["dst"]]
        src = (usrc + s1_off["src"])[:bits["src"]]
        wgt = (uwgt + s1_off["wgt"])[:bits["wgt"]]
        m.d.comb += [p["acc_ra"].addr.eq(dst), p["acc_rb"].addr.eq(src),  # type: ignore[attr-defined]
                     p["inp_r"].addr.eq(src), p["wgt_r"].addr.eq(wgt)]  # type: ignore[attr-defined]
        m.d.sync += [s2_valid.eq(s1_valid), s2_dst.eq(dst), s2_src.eq(src)]
        # stage 3: register the buffers' outputs
        s3_valid, s4_valid = Signal(), Signal()
        s3_dst, s3_src, s4_dst = Signal.like(s2_dst), Signal.like(s2_src), Signal.like(s2_dst)
        acc_bits = len(p["acc_ra"].data)  # type: ignore[attr-defined]
        a3, b3, a4 = (Signal(acc_bits, name=n) for n in ("a3", "b3", "a4"))
        inp3 = Signal.like(p["inp_r"].data, name="inp3")  # type: ignore[attr-defined]
        wgt3 = Signal.like(p["wgt_r"].data, name="wgt3")  # type: ignore[attr-defined]
        m.d.sync += [s3_valid.eq(s2_valid), s3_dst.eq(s2_dst), s3_src.eq(s2_src),
                     a3.eq(p["acc_ra"].data), b3.eq(p["acc_rb"].data),  # type: ignore[attr-defined]
                     inp3.eq(p["inp_r"].data), wgt3.eq(p["wgt_r"].data)]  # type: ignore[attr-defined]
        # stage 4: the GEMM core registers its products; the ALU computes on its operands
        # brought up to date with the write in stage 5 (its own result of last cycle)
        # and the write of the cycle before, and registers its result
        m.d.sync += [s4_valid.eq(s3_valid), s4_dst.eq(s3_dst), a4.eq(a3)]
        self.s4_valid, self.s4_dst, self.is_alu = s4_valid, s4_dst, is_alu
        gemm, alu = self.gemm, self.alu
        alu_q, alu_out_q = Signal.like(alu.acc_out, name="alu_q"), Signal.like(alu.out, name="alu_out_q")
        m.d.sync += [alu_q.eq(alu.acc_out), alu_out_q.eq(alu.out)]
        self.alu_q, self.alu_out_q = alu_q, alu_out_q
        written = self._write_history(m)
        # which write each operand must take is decided a cycle ahead, when stage 3
        # holds the micro-op: the write stage 4 will make (its ALU result) and the one
        # happening now
        acc_w = p["acc_w"]
        addr_bits = len(written[0][1])
        upcoming = ((s3_valid, s3_dst[:addr_bits]), (acc_w.en, acc_w.addr))  # type: ignore[attr-defined]
        a_sel = _selects_ahead(m, "a", upcoming, s2_dst[:addr_bits])
        b_sel = _selects_ahead(m, "b", upcoming, s2_src[:addr_bits])
        m.d.comb += [alu.op.eq(d.alu("alu_opcode")), alu.use_imm.eq(d.alu("use_imm")),
                     alu.imm.eq(d.alu("imm")),
                     alu.a.eq(Mux(a_sel[0], alu_q, Mux(a_sel[1], written[0][2], a3))),
                     alu.b.eq(Mux(b_sel[0], alu_q, Mux(b_sel[1], written[0][2], b3)))]
        # stage 5: the GEMM sum on the accumulator tile brought up to date with the two
        # writes made since stage 2 read it; the write (_acc_writes)
        # (the same a cycle ahead for the GEMM: the writes of this cycle and the last)
        g_sel = _selects_ahead(m, "g", ((acc_w.en, acc_w.addr),  # type: ignore[attr-defined]
                                        written[0][:2]), s3_dst[:addr_bits])
        m.d.comb += [gemm.inp.eq(inp3), gemm.wgt.eq(wgt3),
                     gemm.acc_in.eq(Mux(g_sel[0], written[0][2], Mux(g_sel[1], written[1][2], a4))),
                     gemm.reset.eq(d.gemm("reset_reg"))]
        m.d.comb += done.eq(self.status.busy & ~self.loop_start & ~issuing & ~s1_valid & ~s2_valid
                            & ~s3_valid & ~s4_valid
                            & ((d.opcode == Opcode.GEMM) | is_alu))
        m.d.comb += [self.uop_fire.eq(s2_valid), self.uop_is_gemm.eq(~is_alu),
                     self.uop_reset.eq(d.gemm("reset_reg") & ~is_alu),
                     self.gemm_busy.eq(self.status.busy & (d.opcode == Opcode.GEMM)),
                     self.alu_busy.eq(self.status.busy & is_alu)]
        return done

    def _write_history(self, m: Module) -> list[tuple[Signal, Signal, Signal]]:
        """(en, addr, data) of the accumulator writes of the last cycle and the one before."""
        acc_w = self.ports["acc_w"]
        en, addr, data = acc_w.en, acc_w.addr, acc_w.data  # type: ignore[attr-defined]
        history = []
        for age in (1, 2):
            reg = (Signal(name=f"w{age}_en"), Signal.like(addr, name=f"w{age}_addr"),
                   Signal.like(data, name=f"w{age}_data"))
            m.d.sync += [reg[0].eq(en), reg[1].eq(addr), reg[2].eq(data)]
            history.append(reg)
            en, addr, data = reg
        return history

    def _acc_writes(self, m: Module) -> None:
        p = self.ports
        acc_w, out_w = p["acc_w"], p["out_w"]
        acc_dma, acc8_dma = self.dmas[MemoryType.ACC], self.dmas[MemoryType.ACC_8BIT]
        lanes = self.cfg.BATCH * self.cfg.BLOCK_OUT
        # ACC_8BIT: every int8 lane sign-extended to an int32 accumulator lane
        widened = _widen(acc8_dma.wr_data, lanes, self.cfg)
        result = Mux(self.is_alu, self.alu_q, self.gemm.acc_out)
        low8 = Mux(self.is_alu, self.alu_out_q, self.gemm.out)
        with m.If(acc_dma.wr_en):
            m.d.comb += [acc_w.en.eq(1), acc_w.addr.eq(acc_dma.wr_addr), acc_w.data.eq(acc_dma.wr_data)]  # type: ignore[attr-defined]
        with m.Elif(acc8_dma.wr_en):
            m.d.comb += [acc_w.en.eq(1), acc_w.addr.eq(acc8_dma.wr_addr), acc_w.data.eq(widened)]  # type: ignore[attr-defined]
        with m.Elif(self.s4_valid):
            m.d.comb += [acc_w.en.eq(1), acc_w.addr.eq(self.s4_dst), acc_w.data.eq(result)]  # type: ignore[attr-defined]
            # a GEMM with reset_reg leaves the out buffer alone (docs/ISA.md decision)
            m.d.comb += [out_w.en.eq(~self.uop_reset), out_w.addr.eq(self.s4_dst), out_w.data.eq(low8)]  # type: ignore[attr-defined]


def _selects_ahead(m: Module, name: str, writes: tuple, addr: Value) -> list[Signal]:
    """Registered ``en & (waddr == addr)`` for each (en, waddr) of ``writes``: next
    cycle, whether the micro-op reading ``addr`` now must take that write's data."""
    sels = []
    for age, (en, waddr) in enumerate(writes):
        sel = Signal(name=f"{name}_sel{age}")
        m.d.sync += sel.eq(en & (waddr == addr))
        sels.append(sel)
    return sels


def _widen(tile: object, lanes: int, cfg: Config) -> object:
    """Out-width lanes (int8) → accumulator-width lanes (int32), sign-extended."""
    parts = []
    for w in range(lanes):
        lane = tile.word_select(w, cfg.OUT_WIDTH)  # type: ignore[attr-defined]
        parts.append(Cat(lane, lane[-1].replicate(cfg.ACC_WIDTH - cfg.OUT_WIDTH)))
    return Cat(*parts)

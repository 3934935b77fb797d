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

from dataclasses import dataclass

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from openvta.isa import Config, Format, MemoryType, Opcode, layouts_of
from openvta.isa import Module as Unit
from openvta.isa.config import LOOP_ITER_WIDTH, UOP_WIDTH

from .buffers import read_port, write_port
from .dma import READ_FIELDS, DmaReader
from .fields import Decoded, uop_fields
from .loadstore import dma_fields
from .memory import mem_port
from .params import refusing
from .stage import Stage
from .units import AluLanes, GemmCore

__all__ = ["ComputeUnit"]

#: The micro-op's index fields, each offset by the loops (dst: acc/out, src: inp/acc, wgt).
_INDICES = ("dst", "src", "wgt")
#: The buffers compute loads with LOAD, in the order of their burst ports.
_LOADED = (MemoryType.UOP, MemoryType.ACC, MemoryType.ACC_8BIT)


@dataclass(frozen=True)
class _Issued:
    """Stage 1: the micro-op being read and its loop offsets (registered)."""

    valid: Signal
    offsets: dict[str, Signal]
    issuing: Signal  # the loops have micro-ops left to issue


@dataclass(frozen=True)
class _Operands:
    """Stages 2 and 3: the indices, and the registered buffer outputs."""

    s2_valid: Signal
    s2_dst: Signal
    s2_src: Signal
    valid: Signal  # stage 3
    dst: Signal
    src: Signal
    acc_a: Signal  # the accumulator tile at dst
    acc_b: Signal  # the accumulator tile at src (the ALU's second operand)
    inp: Signal
    wgt: Signal


@dataclass(frozen=True)
class _Executed:
    """Stage 4: the micro-op whose result stage 5 writes, and the ALU's registered result."""

    valid: Signal
    dst: Signal
    alu_acc: Signal
    alu_out: Signal


class ComputeUnit(Stage):
    """Compute: micro-op and accumulator loads, GEMM, ALU, FINISH.

    Members
    -------
    uop_w, uop_r : write and read port of the uop buffer
        the micro-op loads write it; the loops read it.
    acc_w, acc_ra, acc_rb : write port and two read ports of the acc buffer
        the read ports are transparent for the write port.
    inp_r, wgt_r : read ports of the inp and wgt buffers
    out_w : write port of the out buffer
    uop_mem, acc_mem, acc_8bit_mem : Out(mem_port(bus_bits))
        the burst ports of the three DMA readers (LOAD UOP, ACC, ACC_8BIT).
    clear : In(1)
        the start of a run: clears ``finished``.
    finished : Out(1)
        FINISH has executed (until ``clear``).
    gemm_busy, alu_busy : Out(1)
        executing a GEMM, an ALU instruction.
    uop_fire, uop_is_gemm, uop_reset : Out(1)
        a micro-op enters stage 3 this cycle; it is a GEMM's; a GEMM with ``reset_reg``.

    and those of :class:`~.stage.Stage`.  Throughput: one micro-op execution per cycle;
    a GEMM or ALU instruction is done five cycles after its last micro-op is issued.
    """

    @refusing
    def __init__(self, cfg: Config, bus_bits: int, max_burst: int) -> None:
        members: dict[str, wiring.Member] = {
            "uop_w": write_port(cfg, "uop"), "uop_r": read_port(cfg, "uop"),
            "acc_w": write_port(cfg, "acc"), "acc_ra": read_port(cfg, "acc"),
            "acc_rb": read_port(cfg, "acc"), "inp_r": read_port(cfg, "inp"),
            "wgt_r": read_port(cfg, "wgt"), "out_w": write_port(cfg, "out"),
            "clear": In(1), "finished": Out(1), "gemm_busy": Out(1), "alu_busy": Out(1),
            "uop_fire": Out(1), "uop_is_gemm": Out(1), "uop_reset": Out(1),
        }
        members.update({f"{mt.name.lower()}_mem": Out(mem_port(bus_bits)) for mt in _LOADED})
        super().__init__(Unit.COMPUTE, cfg, bus_bits, members)
        self.dmas = {
            MemoryType.UOP: DmaReader(UOP_WIDTH, bus_bits, max_burst),
            MemoryType.ACC: DmaReader(cfg.acc_elem_bytes * 8, bus_bits, max_burst),
            MemoryType.ACC_8BIT: DmaReader(cfg.out_elem_bytes * 8, bus_bits, max_burst),
        }
        self.gemm, self.alu = GemmCore(cfg, registered=True), AluLanes(cfg)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        for mt, dma in self.dmas.items():
            m.submodules[f"dma_{mt.name.lower()}"] = dma
            wiring.connect(m, wiring.flipped(getattr(self, f"{mt.name.lower()}_mem")), dma.mem)
        m.submodules.gemm, m.submodules.alu = self.gemm, self.alu
        m.d.comb += self.waiting_memory.eq(self.dmas[MemoryType.UOP].waiting
                                           | self.dmas[MemoryType.ACC].waiting
                                           | self.dmas[MemoryType.ACC_8BIT].waiting)
        uop = self.dmas[MemoryType.UOP]
        m.d.comb += [self.uop_w.en.eq(uop.wr_en), self.uop_w.addr.eq(uop.wr_addr),
                     self.uop_w.data.eq(uop.wr_data)]
        with m.If(self.clear):
            m.d.sync += self.finished.eq(0)
        loop_start = Signal()
        loop_done = self._loop_engine(m, loop_start)

        def execute(m: Module, insn: Decoded, first: Value) -> Value:
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
            m.d.comb += loop_start.eq(first & ((op == Opcode.GEMM) | (op == Opcode.ALU)))
            return done | (first & (op == Opcode.FINISH)) | loop_done

        self.instruction_cycle(m, execute)
        return m

    def _loop_engine(self, m: Module, loop_start: Signal) -> Signal:
        """The five-stage micro-op pipeline of GEMM and ALU; returns the done pulse."""
        d = Decoded(self.status.insn, self.cfg)
        is_alu = d.opcode == Opcode.ALU
        issued = self._issue(m, d, is_alu, loop_start)
        operands = self._read_operands(m, issued)
        executed = self._execute(m, d, operands)
        self._acc_writes(m, is_alu, executed)
        done = Signal()
        m.d.comb += done.eq(self.status.busy & ~loop_start & ~issued.issuing & ~issued.valid
                            & ~operands.s2_valid & ~operands.valid & ~executed.valid
                            & ((d.opcode == Opcode.GEMM) | is_alu))
        m.d.comb += [self.uop_fire.eq(operands.s2_valid), self.uop_is_gemm.eq(~is_alu),
                     self.uop_reset.eq(d.gemm("reset_reg") & ~is_alu),
                     self.gemm_busy.eq(self.status.busy & (d.opcode == Opcode.GEMM)),
                     self.alu_busy.eq(self.status.busy & is_alu)]
        return done

    def _index_bits(self) -> dict[str, int]:
        """An index is as wide as its micro-op field: sums wrap at the buffer's depth."""
        uop_layout = layouts_of(self.cfg)[Format.UOP]
        return {n: uop_layout.field(f"{n}_idx").width for n in _INDICES}

    def _issue(self, m: Module, d: Decoded, is_alu: Value, loop_start: Signal) -> _Issued:
        """Stage 1: the loops (docs/ISA.md §3: ``iter_out``, ``iter_in``, micro-ops
        innermost) read one micro-op per cycle and register its offsets."""

        def get(name: str) -> Value:
            return Mux(is_alu, d.alu(name), d.gemm(name))

        bits = self._index_bits()
        i, j = Signal(LOOP_ITER_WIDTH), Signal(LOOP_ITER_WIDTH)
        u = Signal(layouts_of(self.cfg)[Format.GEMM].field("uop_end").width)
        base = {n: Signal(bits[n], name=f"base_{n}") for n in _INDICES}  # i·factor_out
        off = {n: Signal(bits[n], name=f"off_{n}") for n in _INDICES}  # i·factor_out + j·factor_in
        issuing = Signal()
        s1_valid = Signal()
        s1_off = {n: Signal(bits[n], name=f"s1_{n}") for n in _INDICES}
        factor = {n: (get(f"{n}_factor_out") if n != "wgt" else d.gemm("wgt_factor_out"),
                      get(f"{n}_factor_in") if n != "wgt" else d.gemm("wgt_factor_in")) for n in _INDICES}
        bgn, end = get("uop_bgn"), get("uop_end")
        iter_out, iter_in = get("iter_out"), get("iter_in")
        empty = (iter_out == 0) | (iter_in == 0) | (bgn >= end)
        with m.If(loop_start):
            m.d.sync += [i.eq(0), j.eq(0), u.eq(bgn), issuing.eq(~empty)]
            m.d.sync += [base[n].eq(0) for n in _INDICES] + [off[n].eq(0) for n in _INDICES]
        m.d.comb += self.uop_r.addr.eq(u)
        with m.If(issuing):
            m.d.sync += [s1_valid.eq(1)] + [s1_off[n].eq(off[n]) for n in _INDICES]
            with m.If(u + 1 < end):
                m.d.sync += u.eq(u + 1)
            with m.Else():
                m.d.sync += u.eq(bgn)
                with m.If(j + 1 < iter_in):
                    m.d.sync += [j.eq(j + 1)] + [off[n].eq(off[n] + factor[n][1]) for n in _INDICES]
                with m.Else():
                    m.d.sync += [j.eq(0), i.eq(i + 1)]
                    m.d.sync += [base[n].eq(base[n] + factor[n][0]) for n in _INDICES]
                    m.d.sync += [off[n].eq(base[n] + factor[n][0]) for n in _INDICES]
                    with m.If(i + 1 >= iter_out):
                        m.d.sync += issuing.eq(0)
        with m.Else():
            m.d.sync += s1_valid.eq(0)
        return _Issued(s1_valid, s1_off, issuing)

    def _read_operands(self, m: Module, issued: _Issued) -> _Operands:
        """Stage 2: the indices from the micro-op read last cycle, and the buffer reads;
        stage 3: the buffers' outputs, registered (block RAM outputs are slow on an FPGA)."""
        bits = self._index_bits()
        udst, usrc, uwgt = uop_fields(self.uop_r.data, self.cfg)
        dst = (udst + issued.offsets["dst"])[:bits["dst"]]
        src = (usrc + issued.offsets["src"])[:bits["src"]]
        wgt = (uwgt + issued.offsets["wgt"])[:bits["wgt"]]
        m.d.comb += [self.acc_ra.addr.eq(dst), self.acc_rb.addr.eq(src),
                     self.inp_r.addr.eq(src), self.wgt_r.addr.eq(wgt)]
        s2_valid, s2_dst, s2_src = Signal(), Signal(bits["dst"]), Signal(bits["src"])
        m.d.sync += [s2_valid.eq(issued.valid), s2_dst.eq(dst), s2_src.eq(src)]
        s3_valid, s3_dst, s3_src = Signal(), Signal.like(s2_dst), Signal.like(s2_src)
        acc_bits = len(self.acc_ra.data)
        a3, b3 = Signal(acc_bits, name="a3"), Signal(acc_bits, name="b3")
        inp3 = Signal.like(self.inp_r.data, name="inp3")
        wgt3 = Signal.like(self.wgt_r.data, name="wgt3")
        m.d.sync += [s3_valid.eq(s2_valid), s3_dst.eq(s2_dst), s3_src.eq(s2_src),
                     a3.eq(self.acc_ra.data), b3.eq(self.acc_rb.data),
                     inp3.eq(self.inp_r.data), wgt3.eq(self.wgt_r.data)]
        return _Operands(s2_valid, s2_dst, s2_src, s3_valid, s3_dst, s3_src, a3, b3, inp3, wgt3)

    def _execute(self, m: Module, d: Decoded, ops: _Operands) -> _Executed:
        """Stage 4: the GEMM core registers its products; the ALU computes on its operands
        brought up to date with the write in stage 5 (its own result of last cycle) and
        the write of the cycle before, and registers its result.  Also the GEMM's inputs
        for stage 5: the accumulator tile brought up to date with the two writes made
        since stage 2 read it."""
        s4_valid, s4_dst = Signal(), Signal.like(ops.dst)
        a4 = Signal(len(ops.acc_a), name="a4")
        m.d.sync += [s4_valid.eq(ops.valid), s4_dst.eq(ops.dst), a4.eq(ops.acc_a)]
        gemm, alu = self.gemm, self.alu
        alu_q, alu_out_q = Signal.like(alu.acc_out, name="alu_q"), Signal.like(alu.out, name="alu_out_q")
        m.d.sync += [alu_q.eq(alu.acc_out), alu_out_q.eq(alu.out)]
        written = self._write_history(m)
        # which write each operand must take is decided a cycle ahead, when stage 3
        # holds the micro-op: the write stage 4 will make (its ALU result) and the one
        # happening now
        acc_w = self.acc_w
        addr_bits = len(written[0][1])
        upcoming = ((ops.valid, ops.dst[:addr_bits]), (acc_w.en, acc_w.addr))
        a_sel = _selects_ahead(m, "a", upcoming, ops.s2_dst[:addr_bits])
        b_sel = _selects_ahead(m, "b", upcoming, ops.s2_src[:addr_bits])
        m.d.comb += [alu.op.eq(d.alu("alu_opcode")), alu.use_imm.eq(d.alu("use_imm")),
                     alu.imm.eq(d.alu("imm")),
                     alu.a.eq(Mux(a_sel[0], alu_q, Mux(a_sel[1], written[0][2], ops.acc_a))),
                     alu.b.eq(Mux(b_sel[0], alu_q, Mux(b_sel[1], written[0][2], ops.acc_b)))]
        # (the same a cycle ahead for the GEMM: the writes of this cycle and the last)
        g_sel = _selects_ahead(m, "g", ((acc_w.en, acc_w.addr), written[0][:2]), ops.dst[:addr_bits])
        m.d.comb += [gemm.inp.eq(ops.inp), gemm.wgt.eq(ops.wgt),
                     gemm.acc_in.eq(Mux(g_sel[0], written[0][2], Mux(g_sel[1], written[1][2], a4))),
                     gemm.reset.eq(d.gemm("reset_reg"))]
        return _Executed(s4_valid, s4_dst, alu_q, alu_out_q)

    def _write_history(self, m: Module) -> list[tuple[Signal, Signal, Signal]]:
        """(en, addr, data) of the accumulator writes of the last cycle and the one before."""
        en, addr, data = self.acc_w.en, self.acc_w.addr, self.acc_w.data
        history = []
        for age in (1, 2):
            reg = (Signal(name=f"w{age}_en"), Signal.like(addr, name=f"w{age}_addr"),
                   Signal.like(data, name=f"w{age}_data"))
            m.d.sync += [reg[0].eq(en), reg[1].eq(addr), reg[2].eq(data)]
            history.append(reg)
            en, addr, data = reg
        return history

    def _acc_writes(self, m: Module, is_alu: Value, executed: _Executed) -> None:
        """Stage 5, and the accumulator loads: the acc (and out) buffer writes."""
        acc_w, out_w = self.acc_w, self.out_w
        acc_dma, acc8_dma = self.dmas[MemoryType.ACC], self.dmas[MemoryType.ACC_8BIT]
        lanes = self.cfg.BATCH * self.cfg.BLOCK_OUT
        # ACC_8BIT: every int8 lane sign-extended to an int32 accumulator lane
        widened = _widen(acc8_dma.wr_data, lanes, self.cfg)
        result = Mux(is_alu, executed.alu_acc, self.gemm.acc_out)
        low8 = Mux(is_alu, executed.alu_out, self.gemm.out)
        with m.If(acc_dma.wr_en):
            m.d.comb += [acc_w.en.eq(1), acc_w.addr.eq(acc_dma.wr_addr), acc_w.data.eq(acc_dma.wr_data)]
        with m.Elif(acc8_dma.wr_en):
            m.d.comb += [acc_w.en.eq(1), acc_w.addr.eq(acc8_dma.wr_addr), acc_w.data.eq(widened)]
        with m.Elif(executed.valid):
            m.d.comb += [acc_w.en.eq(1), acc_w.addr.eq(executed.dst), acc_w.data.eq(result)]
            # a GEMM with reset_reg leaves the out buffer alone (docs/ISA.md decision)
            m.d.comb += [out_w.en.eq(~self.uop_reset), out_w.addr.eq(executed.dst), out_w.data.eq(low8)]


def _selects_ahead(m: Module, name: str, writes: tuple, addr: Value) -> list[Signal]:
    """Registered ``en & (waddr == addr)`` for each (en, waddr) of ``writes``: next
    cycle, whether the micro-op reading ``addr`` now must take that write's data."""
    sels = []
    for age, (en, waddr) in enumerate(writes):
        sel = Signal(name=f"{name}_sel{age}")
        m.d.sync += sel.eq(en & (waddr == addr))
        sels.append(sel)
    return sels


def _widen(tile: Value, lanes: int, cfg: Config) -> Value:
    """Out-width lanes (int8) → accumulator-width lanes (int32), sign-extended."""
    parts = []
    for w in range(lanes):
        lane = tile.word_select(w, cfg.OUT_WIDTH)
        parts.append(Cat(lane, lane[-1].replicate(cfg.ACC_WIDTH - cfg.OUT_WIDTH)))
    return Cat(*parts)

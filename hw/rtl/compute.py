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
Which write a tile takes is decided a cycle ahead and registered once per lane, as are
the ALU's controls (:mod:`.fanout`): each copy drives one lane's multiplexers, so no
register drives a whole tile's (the FPGA clock: docs/FPGA_NOTES.md).
LOAD ACC and ACC_8BIT write the accumulator only; GEMM with ``reset_reg`` writes zeros
to the accumulator only.

Lean builds (the machine's :class:`~openvta.isa.Timing` says which, and the cycle model
charges the same): with ``gemm_ii_cycles`` = k the GEMM core has a k-th of the
multipliers, and stage 1 issues every GEMM micro-op k times, each *pass* computing a
k-th of the output rows (:class:`~.units.GemmCore`'s ``fold``); ``alu_imm_ii_cycles``
= k does the same for the ALU's lanes.  ``alu_vec_ii_cycles`` = ``alu_imm_ii_cycles``
+ 1 builds the accumulator with one read port instead of two: an ALU micro-op with a
tile operand first passes once to read that tile into a register.  ``alu_mul_cycles`` = 2
gives a MUL two passes per part: the first registers the products, the second sums
them (the 32×32 multiply off the forwarding path, for the FPGA clock).  With
``gemm_pipeline_cycles`` = ``alu_pipeline_cycles`` = 6 instead of 5, the micro-op read
from the uop buffer is registered before its indices are added (a sixth stage between 1
and 2: the block RAM's output no longer feeds the index adders and the buffer addresses
in one cycle).  Passes flow through the pipeline like micro-ops (forwarding makes each
see the one before); a pass that only reads or multiplies writes nothing, and only the
first counts as an execution.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from amaranth.utils import ceil_log2

from openvta.isa import AluOp, Config, Format, LeanBuild, MemoryType, Opcode, Timing, layouts_of
from openvta.isa import Module as Unit
from openvta.isa.config import LOOP_ITER_WIDTH, UOP_WIDTH

from .buffers import read_port, write_port
from .dma import DmaReaders
from .fanout import replicas
from .fields import Decoded, uop_fields
from .params import refusing
from .stage import Stage
from .units import AluLanes, GemmCore, widen_lanes

__all__ = ["ComputeUnit"]

#: The micro-op's index fields, each offset by the loops (dst: acc/out, src: inp/acc, wgt).
_INDICES = ("dst", "src", "wgt")
#: The buffers compute loads with LOAD, in the order of their burst ports.


@dataclass(frozen=True)
class _Issued:
    """Stage 1: the micro-op being read and its loop offsets (registered)."""

    valid: Signal
    offsets: dict[str, Signal]
    issuing: Signal  # the loops have micro-ops left to issue
    part: Signal  # which part of the tile this pass computes (lean builds)
    load_b: Signal  # this pass reads the ALU's tile operand (one acc read port)
    silent: Signal  # this pass writes nothing (load_b, or a MUL's multiplying pass)
    first: Signal  # the micro-op's first pass: it counts as an execution


@dataclass(frozen=True)
class _Operands:
    """Stages 2 and 3: the indices, and the registered buffer outputs."""

    s2_valid: Signal
    s2_dst: Signal
    s2_src: Signal
    s2_first: Signal
    s2_part: Signal
    valid: Signal  # stage 3
    dst: Signal  # the tile read on the first read port (src on a load_b pass)
    src: Signal
    part: Signal
    load_b: Signal
    silent: Signal
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
        the read ports are transparent for the write port; ``acc_rb`` only when
        ``timing.alu_vec_ii_cycles`` equals ``alu_imm_ii_cycles``.
    inp_r, wgt_r : read ports of the inp and wgt buffers
    out_w : write port of the out buffer
    uop_mem, acc_mem, acc_8bit_mem : Out(mem_port(bus_bits))
        the burst ports of the three DMA readers (LOAD UOP, ACC, ACC_8BIT); with
        ``shared_dma``, one reader of their widths and its port ``dma_mem``
        (:class:`~.dma.DmaReaders`).
    clear : In(1)
        the start of a run: clears ``finished``.
    finished : Out(1)
        FINISH has executed (until ``clear``).
    gemm_busy, alu_busy : Out(1)
        executing a GEMM, an ALU instruction.
    uop_fire, uop_is_gemm, uop_reset : Out(1)
        a micro-op enters stage 3 this cycle; it is a GEMM's; a GEMM with ``reset_reg``.

    and those of :class:`~.stage.Stage`.  Throughput: one pass per cycle, a micro-op
    execution being ``timing.gemm_ii_cycles``, ``alu_imm_ii_cycles`` or
    ``alu_vec_ii_cycles`` passes; a GEMM or ALU instruction is done five cycles (six with
    the micro-op stage) after its last pass is issued.

    Raises
    ------
    ValueError
        if ``timing`` asks for a lean build this unit cannot be (see :meth:`LeanBuild.of`).
    """

    @refusing
    def __init__(self, cfg: Config, bus_bits: int, timing: Timing, shared_dma: bool = False) -> None:
        self.lean = lean = LeanBuild.of(cfg, timing)
        members: dict[str, wiring.Member] = {
            "uop_w": write_port(cfg, "uop"), "uop_r": read_port(cfg, "uop"),
            "acc_w": write_port(cfg, "acc"), "acc_ra": read_port(cfg, "acc"),
            "inp_r": read_port(cfg, "inp"),
            "wgt_r": read_port(cfg, "wgt"), "out_w": write_port(cfg, "out"),
            "clear": In(1), "finished": Out(1), "gemm_busy": Out(1), "alu_busy": Out(1),
            "uop_fire": Out(1), "uop_is_gemm": Out(1), "uop_reset": Out(1),
        }
        if lean.acc_ports == 2:
            members["acc_rb"] = read_port(cfg, "acc")
        self.readers = DmaReaders({MemoryType.UOP: UOP_WIDTH, MemoryType.ACC: cfg.acc_elem_bytes * 8,
                                   MemoryType.ACC_8BIT: cfg.out_elem_bytes * 8}, bus_bits,
                                  timing.max_burst_beats, shared_dma)
        members.update(self.readers.members())
        super().__init__(Unit.COMPUTE, cfg, bus_bits, members, timing.insn_move_cycles)
        self.gemm = GemmCore(cfg, registered=True, fold=lean.gemm_ii)
        self.alu = AluLanes(cfg, fold=lean.alu_ii, mul_stage=lean.mul_cycles == 2, ahead=True)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.d.comb += self.waiting_memory.eq(self.readers.elaborate_into(m, self))
        m.submodules.gemm, m.submodules.alu = self.gemm, self.alu
        uop_en, uop_addr, uop_data = self.readers.write(MemoryType.UOP, Decoded(self.status.insn, self.cfg))
        m.d.comb += [self.uop_w.en.eq(uop_en), self.uop_w.addr.eq(uop_addr), self.uop_w.data.eq(uop_data)]
        with m.If(self.clear):
            m.d.sync += self.finished.eq(0)
        loop_start = Signal()
        loop_done = self._loop_engine(m, loop_start)

        def execute(m: Module, insn: Decoded, first: Value) -> Value:
            op = insn.opcode
            sync = (op == Opcode.LOAD) & (insn.mem("x_size") == 0)
            done = (first & sync) | self.readers.start(m, insn, first & ~sync & (op == Opcode.LOAD))
            with m.If(first & (op == Opcode.FINISH)):
                m.d.sync += self.finished.eq(1)
            m.d.comb += loop_start.eq(first & ((op == Opcode.GEMM) | (op == Opcode.ALU)))
            return done | (first & (op == Opcode.FINISH)) | loop_done

        self.instruction_cycle(m, execute)
        return m

    def _loop_engine(self, m: Module, loop_start: Signal) -> Signal:
        """The five-stage (six with ``uop_stage``) micro-op pipeline of GEMM and ALU;
        returns the done pulse."""
        d = Decoded(self.status.insn, self.cfg)
        is_alu = d.opcode == Opcode.ALU
        issued = self._issue(m, d, is_alu, loop_start)
        uop, in_flight = self.uop_r.data, [issued.valid]
        if self.lean.uop_stage:  # the micro-op and its pass registered once more
            uop, issued = self._register_issued(m, issued)
            in_flight.append(issued.valid)
        operands = self._read_operands(m, issued, uop)
        executed = self._execute(m, d, operands)
        self._acc_writes(m, is_alu, executed)
        done = Signal()
        m.d.comb += done.eq(self.status.busy & ~loop_start & ~issued.issuing & ~Cat(*in_flight).any()
                            & ~operands.s2_valid & ~operands.valid & ~executed.valid
                            & ((d.opcode == Opcode.GEMM) | is_alu))
        m.d.comb += [self.uop_fire.eq(operands.s2_valid & operands.s2_first),
                     self.uop_is_gemm.eq(~is_alu),
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
        # the passes of one micro-op (lean builds): k parts, after a load_b pass if the
        # ALU's tile operand must be read first (one accumulator read port)
        vec_first = Const(self.lean.acc_ports == 1) & is_alu & ~d.alu("use_imm")
        # … and a MUL's parts two passes each with alu_mul_cycles = 2 (multiply, then sum)
        is_mul = Const(self.lean.mul_cycles == 2) & is_alu & (d.alu("alu_opcode") == AluOp.MUL)
        passes = Mux(is_alu, Mux(is_mul, 2 * self.lean.alu_ii, self.lean.alu_ii) + vec_first,
                     self.lean.gemm_ii)
        p_bits = ceil_log2(max(self.lean.gemm_ii, 2 * self.lean.alu_ii + 1) + 1)
        p = Signal(p_bits)
        q = Signal(p_bits)  # the pass among the parts' passes (after the load_b pass)
        m.d.comb += q.eq(p - vec_first)
        s1_part, s1_load_b, s1_first = Signal(p_bits), Signal(), Signal()
        s1_silent = Signal()
        with m.If(loop_start):
            m.d.sync += [i.eq(0), j.eq(0), u.eq(bgn), p.eq(0), issuing.eq(~empty)]
            m.d.sync += [base[n].eq(0) for n in _INDICES] + [off[n].eq(0) for n in _INDICES]
        m.d.comb += self.uop_r.addr.eq(u)
        with m.If(issuing):
            m.d.sync += [s1_valid.eq(1)] + [s1_off[n].eq(off[n]) for n in _INDICES]
            load_b = vec_first & (p == 0)
            m.d.sync += [s1_part.eq(Mux(is_mul, q >> 1, q)), s1_load_b.eq(load_b),
                         s1_silent.eq(load_b | (is_mul & ~q[0])), s1_first.eq(p == 0)]
        with m.If(issuing & (p + 1 < passes)):
            m.d.sync += p.eq(p + 1)  # the same micro-op again, for its next pass
        with m.Elif(issuing):
            m.d.sync += p.eq(0)
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
        with m.If(~issuing):
            m.d.sync += s1_valid.eq(0)
        return _Issued(s1_valid, s1_off, issuing, s1_part, s1_load_b, s1_silent, s1_first)

    def _register_issued(self, m: Module, issued: _Issued) -> tuple[Signal, _Issued]:
        """The micro-op stage: the micro-op read from the uop buffer, and what stage 1
        issued with it, registered (``uop_stage``)."""
        uop = Signal.like(self.uop_r.data, name="uop_q")
        later = _Issued(Signal(name="s1b_valid"),
                        {n: Signal.like(v, name=f"s1b_{n}") for n, v in issued.offsets.items()},
                        issued.issuing, Signal.like(issued.part, name="s1b_part"),
                        Signal(name="s1b_load_b"), Signal(name="s1b_silent"), Signal(name="s1b_first"))
        m.d.sync += [uop.eq(self.uop_r.data), later.valid.eq(issued.valid), later.part.eq(issued.part),
                     later.load_b.eq(issued.load_b), later.silent.eq(issued.silent),
                     later.first.eq(issued.first)]
        m.d.sync += [later.offsets[n].eq(v) for n, v in issued.offsets.items()]
        return uop, later

    def _read_operands(self, m: Module, issued: _Issued, uop: Value) -> _Operands:
        """Stage 2: the indices from the micro-op read last cycle, and the buffer reads;
        stage 3: the buffers' outputs, registered (block RAM outputs are slow on an FPGA)."""
        bits = self._index_bits()
        udst, usrc, uwgt = uop_fields(uop, self.cfg)
        dst = (udst + issued.offsets["dst"])[:bits["dst"]]
        src = (usrc + issued.offsets["src"])[:bits["src"]]
        wgt = (uwgt + issued.offsets["wgt"])[:bits["wgt"]]
        # a load_b pass reads the ALU's tile operand on the first read port
        first_addr = Mux(issued.load_b, src, dst)[:bits["dst"]] if self.lean.acc_ports == 1 else dst
        m.d.comb += [self.acc_ra.addr.eq(first_addr), self.inp_r.addr.eq(src),
                     self.wgt_r.addr.eq(wgt)]
        if self.lean.acc_ports == 2:
            m.d.comb += self.acc_rb.addr.eq(src)
        s2_valid, s2_dst, s2_src = Signal(), Signal(bits["dst"]), Signal(bits["src"])
        s2_part, s2_load_b, s2_first = Signal.like(issued.part), Signal(), Signal()
        s2_silent = Signal()
        m.d.sync += [s2_valid.eq(issued.valid), s2_dst.eq(first_addr), s2_src.eq(src),
                     s2_part.eq(issued.part), s2_load_b.eq(issued.load_b),
                     s2_silent.eq(issued.silent), s2_first.eq(issued.first)]
        s3_valid, s3_dst, s3_src = Signal(), Signal.like(s2_dst), Signal.like(s2_src)
        s3_part, s3_load_b, s3_silent = Signal.like(s2_part), Signal(), Signal()
        acc_bits = len(self.acc_ra.data)
        a3, b3 = Signal(acc_bits, name="a3"), Signal(acc_bits, name="b3")
        inp3 = Signal.like(self.inp_r.data, name="inp3")
        wgt3 = Signal(len(self.gemm.wgt), name="wgt3")  # the rows of the pass's part
        wgt = self.wgt_r.data
        if self.lean.gemm_ii > 1:
            wgt = wgt.word_select(s2_part[:ceil_log2(self.lean.gemm_ii)], len(wgt3))
        m.d.sync += [s3_valid.eq(s2_valid), s3_dst.eq(s2_dst), s3_src.eq(s2_src),
                     s3_part.eq(s2_part), s3_load_b.eq(s2_load_b), s3_silent.eq(s2_silent),
                     a3.eq(self.acc_ra.data), inp3.eq(self.inp_r.data), wgt3.eq(wgt)]
        if self.lean.acc_ports == 2:
            m.d.sync += b3.eq(self.acc_rb.data)
        return _Operands(s2_valid, s2_dst, s2_src, s2_first, s2_part, s3_valid, s3_dst, s3_src,
                         s3_part, s3_load_b, s3_silent, a3, b3, inp3, wgt3)

    def _execute(self, m: Module, d: Decoded, ops: _Operands) -> _Executed:
        """Stage 4: the GEMM core registers its products; the ALU computes on its operands
        brought up to date with the write in stage 5 (its own result of last cycle) and
        the write of the cycle before, and registers its result.  Also the GEMM's inputs
        for stage 5: the accumulator tile brought up to date with the two writes made
        since stage 2 read it."""
        s4_valid, s4_dst, s4_part = Signal(), Signal.like(ops.dst), Signal.like(ops.part)
        a4 = Signal(len(ops.acc_a), name="a4")
        writes = ops.valid & ~ops.silent  # a load_b pass, a multiplying pass write nothing
        m.d.sync += [s4_valid.eq(writes), s4_dst.eq(ops.dst), s4_part.eq(ops.part),
                     a4.eq(ops.acc_a)]
        gemm, alu = self.gemm, self.alu
        alu_q, alu_out_q = Signal.like(alu.acc_out, name="alu_q"), Signal.like(alu.out, name="alu_out_q")
        m.d.sync += [alu_q.eq(alu.acc_out), alu_out_q.eq(alu.out)]
        written = self._write_history(m)
        # which write each operand must take is decided a cycle ahead, when stage 3
        # holds the micro-op: the write stage 4 will make (its ALU result) and the one
        # happening now
        acc_w = self.acc_w
        addr_bits = len(written[0][1])
        upcoming = ((writes, ops.dst[:addr_bits]), (acc_w.en, acc_w.addr))
        lanes = self.cfg.BATCH * self.cfg.BLOCK_OUT
        a_sel = _selects_ahead(m, "a", upcoming, ops.s2_dst[:addr_bits], lanes)
        m.d.comb += [alu.op.eq(d.alu("alu_opcode")), alu.use_imm.eq(d.alu("use_imm")),
                     alu.imm.eq(d.alu("imm")),
                     alu.a.eq(_lanewise(a_sel, (alu_q, written[0][2], ops.acc_a)))]
        if self.lean.acc_ports == 2:
            b_sel = _selects_ahead(m, "b", upcoming, ops.s2_src[:addr_bits], lanes)
            m.d.comb += alu.b.eq(_lanewise(b_sel, (alu_q, written[0][2], ops.acc_b)))
        else:  # the tile the load_b pass read, brought up to date like a
            held = Signal(len(ops.acc_a), name="held_b")
            with m.If(ops.valid & ops.load_b):
                m.d.sync += held.eq(alu.a)
            m.d.comb += alu.b.eq(held)
        if self.lean.alu_ii > 1:  # (the ALU registers its controls: given a cycle ahead)
            m.d.comb += alu.part.eq(ops.s2_part)
        if self.lean.gemm_ii > 1:
            m.d.comb += gemm.part.eq(s4_part)
        # (the same a cycle ahead for the GEMM: the writes of this cycle and the last)
        g_sel = _selects_ahead(m, "g", ((acc_w.en, acc_w.addr), written[0][:2]), ops.dst[:addr_bits],
                               lanes)
        m.d.comb += [gemm.inp.eq(ops.inp), gemm.wgt.eq(ops.wgt),
                     gemm.acc_in.eq(_lanewise(g_sel, (written[0][2], written[1][2], a4))),
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
        insn = Decoded(self.status.insn, self.cfg)
        (acc_en, acc_addr, acc_data), (acc8_en, acc8_addr, acc8_data) = (
            self.readers.write(mt, insn) for mt in (MemoryType.ACC, MemoryType.ACC_8BIT))
        lanes = self.cfg.BATCH * self.cfg.BLOCK_OUT
        # ACC_8BIT: every int8 lane sign-extended to an int32 accumulator lane
        widened = widen_lanes(acc8_data, lanes, self.cfg)
        result = Mux(is_alu, executed.alu_acc, self.gemm.acc_out)
        low8 = Mux(is_alu, executed.alu_out, self.gemm.out)
        with m.If(acc_en):
            m.d.comb += [acc_w.en.eq(1), acc_w.addr.eq(acc_addr), acc_w.data.eq(acc_data)]
        with m.Elif(acc8_en):
            m.d.comb += [acc_w.en.eq(1), acc_w.addr.eq(acc8_addr), acc_w.data.eq(widened)]
        with m.Elif(executed.valid):
            m.d.comb += [acc_w.en.eq(1), acc_w.addr.eq(executed.dst), acc_w.data.eq(result)]
            # a GEMM with reset_reg leaves the out buffer alone (docs/ISA.md decision)
            m.d.comb += [out_w.en.eq(~self.uop_reset), out_w.addr.eq(executed.dst), out_w.data.eq(low8)]


def _selects_ahead(m: Module, name: str, writes: tuple, addr: Value, lanes: int) -> list[list[Signal]]:
    """Registered ``en & (waddr == addr)`` for each (en, waddr) of ``writes``: next
    cycle, whether the micro-op reading ``addr`` now must take that write's data; one
    copy per lane of the tile it selects (:mod:`.fanout`)."""
    return [replicas(m, f"{name}_sel{age}", en & (waddr == addr), lanes)
            for age, (en, waddr) in enumerate(writes)]


def _lanewise(sels: list[list[Signal]], tiles: tuple[Value, Value, Value]) -> Value:
    """Lane by lane: ``tiles[0]`` where the first select's copy for the lane is set, else
    ``tiles[1]`` where the second's is, else ``tiles[2]``."""
    lanes = len(sels[0])
    bits = len(tiles[0]) // lanes
    first, second, rest = tiles
    return Cat(*(Mux(sels[0][k], first.word_select(k, bits),
                     Mux(sels[1][k], second.word_select(k, bits), rest.word_select(k, bits)))
                 for k in range(lanes)))

"""Machine v2's drain unit (docs/ISA.md §9, :mod:`openvta.isa.drain`): the accumulator tiles
of a STORE ACC through its descriptor's ALU stages, out as a stream of int8 tiles.

:class:`DrainUnit` lives in the store module (:class:`~.loadstore.StoreUnit`), which
feeds the stream to its DMA writer (:class:`~.dma.DmaWriter` built with ``stream``) in
the order the writer sends the elements: acc tile ``sram_base + e`` for ``e = 0 …
y_size·x_size − 1``.

Work of one STORE ACC:

1. **descriptor** — the header ``epi[epi_base]`` is read in the ``start`` cycle and
   decoded the next (stage count ``n``, residual base, stride, stage codes), then the
   ``n`` operand words ``epi[epi_base + (k + 1)·stride]``, one per cycle, into registers:
   the setup takes ``max(n, 1) + 1`` cycles.
2. **elements** — one per cycle while the output FIFO has room for it (credits): acc tile
   ``sram_base + e`` is read on the store's own read port of the acc buffer and, in the
   same cycle, zeroed through its own write port (the read port is not transparent for
   it, so it returns the tile as it was); the residual ``epi[res_base + e]`` is read on
   the epi buffer's read port.  The two are registered (block RAM outputs are slow on an
   FPGA), then pass ``DRAIN_STAGES`` stage units, each a :class:`DrainLanes` and a
   register: stage ``k`` applies its code (``op`` on ``X`` or ``R``, the operand its word
   or ``R``).  The low 8 bits of every lane of ``X`` after stage ``n − 1`` (the tap: a
   multiplexer on the stage registers, set from the count; the stages past it are not
   waited for, and their valid bits stop there) enter a FIFO of ``DRAIN_STAGES + 4``
   tiles whose head is ``out_data``/``out_valid``, popped by ``out_next``.

**Latency**: the first tile is at the head of the FIFO ``2·n + 4`` cycles after ``start``
(``n + 1`` of setup, one to read the acc tile, one register, ``n`` stages, one FIFO
write; 5 for ``n = 0``).  **Throughput**: one tile per cycle, as long as the consumer
pops one per cycle (the FIFO holds every tile in flight, so the credit loop never starves
the pipeline); the store's DMA writer takes at most one per cycle, so a drain moves as
fast as a STORE of the out buffer after the first tile.  Measured on the RTL
(Verilator): a drain takes ``2·n + 1`` cycles more than the STORE of the out buffer it
replaces (the writer's first three cycles overlap the latency): 7 for ResNet-18's
``SHR, ADD, CLIP``, 25 for a descriptor of all of ``v2``'s twelve stages —
:func:`drain_pipeline_cycles`, which the cycle model charges as
:func:`openvta.isa.drain_fill_cycles`.  (The first version read all ``DRAIN_STAGES``
words and passed every tile through every stage: 25 cycles for every descriptor.)

**Size**: ``DRAIN_STAGES`` ALUs of ``BATCH·BLOCK_OUT`` 32-bit lanes (each with a 32×32
multiplier: 128 for ``v2``), ``DRAIN_STAGES`` operand words and two tiles of pipeline
registers per stage, and the FIFO of ``DRAIN_STAGES + 4`` int8 tiles.

**Zeroing**: the drain zeroes each tile it reads by setting the tile's **cleared bit**
(:class:`~.core.ClearedTiles`, through its ``acc_z`` port, whose data is not used): every
read of the acc buffer — compute's and the drain's own — returns zeros for a tile whose bit
is set, and compute's writes clear it.  Not a second write port of the acc buffer, which
was the first version: block RAMs have two ports, and the acc buffer already takes one
write port and up to three read ports (copies of a simple dual-port RAM, one per read
port, each written by the one write port); a second writer would take it out of block
RAM.  The bits are in block RAM too (two banks of ``acc_depth`` bits, a copy per
reader: :class:`~.core.ClearedTiles`; in flip-flops, their first version, they cost
4,702 LUT4 of ``small``'s SDRAM image).  The tokens guarantee that compute never touches
the tiles being drained, so a set and a clear of one tile never come within two cycles.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from openvta.isa import AluOp, Config, DrainOp, drain_split_stages
from openvta.isa.config import DRAIN_HEADER_LANES, SHR_AMOUNT_WIDTH, SRAM_BASE_WIDTH
from openvta.isa.drain import DRAIN_CODE_BITS, DRAIN_ON_RESIDUAL_BIT, DRAIN_OPERAND_RESIDUAL_BIT
from openvta.isa.encoding import MEM_FIELDS

from .buffers import read_port, write_port
from .params import refusing
from .units import AluLanes

__all__ = ["DrainLanes", "DrainUnit", "EPI_BASE_BITS", "WRITER_START_CYCLES", "drain_latency", "drain_pipeline_cycles"]

_FIELDS = {name: width for name, width, _ in MEM_FIELDS}
#: Bits of a STORE ACC's descriptor index (its four 4-bit pad fields).
EPI_BASE_BITS = 4 * _FIELDS["y_pad_0"]
#: Tiles the output FIFO holds beyond the stages: the acc read, its register, the FIFO
#: write and the cycle the credit takes to come back.
_FIFO_EXTRA = 4


#: Cycles from a STORE's start to its DMA writer's first beat when nothing waits (the
#: row's first read, its burst request and the grant): a drain's latency hides that much.
WRITER_START_CYCLES = 3


def drain_latency(cfg: Config, stages: int, mul_cycles: int = 1) -> int:
    """Cycles from a drain's ``start`` to its first tile at the head of the output FIFO, for
    a descriptor of ``stages`` stages (``2·stages + 4``; a descriptor of none takes one
    word's cycle all the same), one more per stage it passes whose product takes two
    cycles (:func:`openvta.isa.drain_split_stages` of ``mul_cycles``)."""
    count = min(stages, cfg.DRAIN_STAGES)
    split = sum(1 for k in drain_split_stages(cfg, mul_cycles) if k < count)
    return max(count, 1) + count + split + _FIFO_EXTRA


def drain_pipeline_cycles(cfg: Config, stages: int, mul_cycles: int = 1) -> int:
    """What a drain of a descriptor of ``stages`` stages costs beyond the STORE of the out
    buffer it replaces: its latency less the writer's start (``2·stages + 1``; 7 for
    ResNet-18's SHR, ADD, CLIP), what :func:`openvta.isa.drain_fill_cycles` charges."""
    return drain_latency(cfg, stages, mul_cycles) - WRITER_START_CYCLES


class DrainLanes(wiring.Component):
    """One drain stage's lanes: ``out = op(a, b)`` for a :class:`~openvta.isa.DrainOp`, on
    every 32-bit lane — the ALU's five operations (:class:`~.units.AluLanes`), and RSHR (the
    ALU's ``SHR s-1, ADD 1, SHR 1`` for ``s >= 1``, ``SHR s`` otherwise, ``s`` the signed low
    6 bits of ``b``) and CLIP (MIN by ``b``'s high 16 bits, then MAX by its low 16 bits),
    exactly as :mod:`openvta.isa.arith` computes them.  Combinational.  Only the operations
    in ``ops`` are built (the stage's set, ``cfg.DRAIN_OPS``; RSHR and SHR on one shifter
    a lane when both are); any other ``op`` gives zeros, except in a stage of one
    operation, which computes it whatever ``op`` says (no decoder in its lanes: the
    functional simulator refuses a descriptor naming another).  With ``mul_stage``, MUL
    gives the product of the operands of the cycle before (:class:`~.units.AluLanes`'s
    split product: the partial products registered, summed the next cycle)."""

    def __init__(self, cfg: Config, ops: frozenset[DrainOp] = frozenset(DrainOp), mul_stage: bool = False) -> None:
        self.cfg, self.ops, self.mul_stage = cfg, frozenset(ops), bool(mul_stage)
        n = cfg.BATCH * cfg.BLOCK_OUT
        super().__init__({"op": In(3), "a": In(n * cfg.ACC_WIDTH), "b": In(n * cfg.ACC_WIDTH),
                          "out": Out(n * cfg.ACC_WIDTH)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg, bits = self.cfg, self.cfg.ACC_WIDTH
        n = cfg.BATCH * cfg.BLOCK_OUT
        # with RSHR, SHR is RSHR's shift (one shifter a lane for both), not the ALU's
        shares_shift = DrainOp.RSHR in self.ops and DrainOp.SHR in self.ops
        alu_ops = frozenset(AluOp(int(op)) for op in self.ops
                            if op.name in AluOp.__members__ and not (shares_shift and op is DrainOp.SHR))
        only = next(iter(self.ops)) if len(self.ops) == 1 else None
        if alu_ops:
            m.submodules.alu = alu = AluLanes(cfg, ops=alu_ops, mul_stage=self.mul_stage)
            m.d.comb += [alu.op.eq(self.op if only is None else int(only)), alu.use_imm.eq(0), alu.imm.eq(0),
                         alu.a.eq(self.a), alu.b.eq(self.b)]
        lanes = []
        for w in range(n):
            lane = Signal(bits, name=f"drain_{w}")
            lanes.append(lane)
            a, b = self.a.word_select(w, bits).as_signed(), self.b.word_select(w, bits)
            # RSHR's rounding applies when the op is RSHR (a stage with SHR too shares its shift)
            rounding = self.op == int(DrainOp.RSHR) if shares_shift else Const(1)
            rshr = self._rshr(m, w, a, b, rounding) if DrainOp.RSHR in self.ops else None
            if only is DrainOp.RSHR:
                m.d.comb += lane.eq(rshr)
                continue
            if only is DrainOp.CLIP:
                m.d.comb += lane.eq(self._clip(a, b))
                continue
            with m.Switch(self.op):
                if rshr is not None:
                    with m.Case(*((DrainOp.RSHR, DrainOp.SHR) if shares_shift else (DrainOp.RSHR,))):
                        m.d.comb += lane.eq(rshr)
                if DrainOp.CLIP in self.ops:
                    with m.Case(DrainOp.CLIP):
                        m.d.comb += lane.eq(self._clip(a, b))
                if alu_ops:
                    with m.Default():
                        m.d.comb += lane.eq(alu.acc_out.word_select(w, bits))
        m.d.comb += self.out.eq(Cat(*lanes))
        return m

    @staticmethod
    def _clip(a: Value, b: Value) -> Value:
        """CLIP on a lane: MIN by ``b``'s high 16 bits, then MAX by its low 16 bits."""
        high, low = b[16:32].as_signed(), b[:16].as_signed()
        lower = Mux(a < high, a, high)
        return Mux(lower > low, lower, low)

    def _rshr(self, m: Module, w: int, a: Value, b: Value, rounding: Value) -> Signal:
        """RSHR on lane ``w`` by ``s``, the signed low bits of ``b`` (SHR without ``rounding``):
        one shifter.

        RSHR by ``s >= 1`` is the ALU's ``SHR s-1, ADD 1, SHR 1``, which is ``(a >> s) +
        a[s-1]`` (the rounding bit) except for ``a = 2^31 - 1``, ``s = 1``, where the ``ADD 1``
        wraps and gives ``-2^30``; for ``s <= 0`` it is ``SHR s``.  The shift is a right
        shifter of one step per amount bit, the left shifts (``s < 0``, by 1 … 32) through
        it on the bit-reversed lane, and a stage with SHR too computes SHR on it (its
        ``rounding`` off).  The earlier lanes shifted RSHR's ``a`` by ``s - 1`` on a
        two-way shifter of their own, beside the ALU lanes' SHR: the lean drain's unit
        (``RSHR+SHR/ADD/CLIP``) was 7,127 LUT4 with them, 5,849 with this one
        (benchmarks/drain_synth.py, Yosys ``synth_ecp5``).
        """
        bits = self.cfg.ACC_WIDTH
        s = Signal(signed(SHR_AMOUNT_WIDTH), name=f"rshr_s_{w}")
        left, amount = Signal(name=f"shl_{w}"), Signal(SHR_AMOUNT_WIDTH, name=f"shamt_{w}")
        m.d.comb += [s.eq(b[:SHR_AMOUNT_WIDTH]), left.eq(s < 0), amount.eq(Mux(left, -s, s))]
        fill = ~left & a[-1]  # the sign for a right shift, zeros for a left one
        value = Signal(bits, name=f"shift_in_{w}")
        m.d.comb += value.eq(Mux(left, a[::-1], a))
        for k in range(SHR_AMOUNT_WIDTH):  # right by 2^k (32 for the top bit: all fill)
            step, after = min(1 << k, bits), Signal(bits, name=f"shift{k}_{w}")
            m.d.comb += after.eq(Mux(amount[k], Cat(value[step:], fill.replicate(step)), value))
            value = after
        shifted = Signal(signed(bits), name=f"shifted_{w}")
        m.d.comb += shifted.eq(Mux(left, value[::-1], value))
        up, wraps = Signal(name=f"rshr_up_{w}"), Signal(name=f"rshr_wraps_{w}")
        m.d.comb += [up.eq(rounding & (s >= 1) & a.bit_select((s - 1).as_unsigned()[:SHR_AMOUNT_WIDTH - 1], 1)),
                     wraps.eq(rounding & (s == 1) & (a == (1 << (bits - 1)) - 1))]
        rounded = Signal(signed(bits), name=f"rshr_{w}")
        m.d.comb += rounded.eq(Mux(wraps, -(1 << (bits - 2)), (shifted + up)[:bits]))
        return rounded


class DrainUnit(wiring.Component):
    """The drain unit of machine v2 (docs/ISA.md §9; see the module docstring).

    Members
    -------
    start : In(1)
        pulses with a STORE ACC's first cycle; the fields below are read then.
    sram_base, y_size, x_size : In
        the STORE's fields (its acc tiles are ``sram_base`` … ``+ y_size·x_size − 1``).
    epi_base : In(EPI_BASE_BITS)
        the descriptor's index (:func:`openvta.isa.drain.epi_base_of`).
    busy : Out(1)
        reading the descriptor or issuing tiles.
    acc_r, acc_z : a read port and a write port of the acc buffer
        the tiles read, and zeroed.
    epi_r : a read port of the epi buffer
        the descriptor and the residuals.
    out_data, out_valid : Out
        the head of the stream of drained tiles (int8 lanes), and whether there is one.
    out_next : In(1)
        pops the head.

    Raises
    ------
    ValueError
        if ``cfg`` has no drain unit.
    """

    @refusing
    def __init__(self, cfg: Config, mul_cycles: int = 1) -> None:
        if not isinstance(cfg, Config):
            raise TypeError(f"cfg must be a Config, not {cfg!r}")
        if not cfg.has_drain:
            raise ValueError("this configuration has no drain unit (DRAIN_STAGES is 0)")
        self.cfg = cfg
        #: the stages whose product takes two cycles (the lean build's ``mul_cycles``)
        self.split = drain_split_stages(cfg, mul_cycles)
        self.lanes = cfg.BATCH * cfg.BLOCK_OUT
        super().__init__({
            "start": In(1), "sram_base": In(SRAM_BASE_WIDTH), "y_size": In(_FIELDS["y_size"]),
            "x_size": In(_FIELDS["x_size"]), "epi_base": In(EPI_BASE_BITS), "busy": Out(1),
            "acc_r": read_port(cfg, "acc"), "acc_z": write_port(cfg, "acc"), "epi_r": read_port(cfg, "epi"),
            "out_data": Out(self.lanes * cfg.OUT_WIDTH), "out_valid": Out(1), "out_next": In(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg, lanes, stages = self.cfg, self.lanes, self.cfg.DRAIN_STAGES
        width = cfg.ACC_WIDTH
        acc_bits, epi_bits = ceil_log2(cfg.acc_depth), ceil_log2(cfg.epi_depth)
        capacity = stages + len(self.split) + _FIFO_EXTRA
        m.submodules.fifo = fifo = SyncFIFO(width=lanes * cfg.OUT_WIDTH, depth=capacity)

        # the STORE's fields and the descriptor, latched
        idx, ridx = Signal(acc_bits), Signal(epi_bits)  # the next tile, the next residual
        x, y = Signal(_FIELDS["x_size"]), Signal(_FIELDS["y_size"])
        x_size, y_size = Signal.like(x, name="x_size_q"), Signal.like(y, name="y_size_q")
        ebase, stride, waddr = Signal(epi_bits), Signal(epi_bits), Signal(epi_bits)
        count = Signal(width)  # the descriptor's stage count (lane 0, unsigned)
        codes = Signal(DRAIN_CODE_BITS * stages)
        words = [Signal(lanes * width, name=f"word_{k}") for k in range(stages)]
        k = Signal(range(stages + 1))
        tap = Signal(range(stages + 1))  # the stage register the FIFO is written from: the count
        cap_en, cap_k = Signal(), Signal(range(max(stages, 2)))
        in_flight = Signal(range(capacity + 1))  # issued, not yet popped
        issue = Signal()

        header = self.epi_r.data
        lane = [header.word_select(i, width) for i in range(DRAIN_HEADER_LANES)]
        m.d.comb += [self.acc_r.en.eq(1), self.epi_r.en.eq(1), self.busy.eq(1)]
        m.d.sync += cap_en.eq(0)
        with m.If(cap_en):  # an operand word read last cycle
            for j, word in enumerate(words):
                with m.If(cap_k == j):
                    m.d.sync += word.eq(self.epi_r.data)
        with m.FSM(name="drain"):
            with m.State("IDLE"):
                m.d.comb += [self.busy.eq(self.start), self.epi_r.addr.eq(self.epi_base)]
                with m.If(self.start):
                    m.d.sync += [idx.eq(self.sram_base), x.eq(0), y.eq(0), x_size.eq(self.x_size),
                                 y_size.eq(self.y_size), ebase.eq(self.epi_base)]
                    m.next = "HEADER"
            with m.State("HEADER"):  # the header is on the read port: word 0 next
                first_word = (ebase + lane[2])[:epi_bits]
                m.d.comb += self.epi_r.addr.eq(first_word)
                m.d.sync += [count.eq(lane[0]), ridx.eq(lane[1]), stride.eq(lane[2]), waddr.eq(first_word),
                             codes.eq(header[DRAIN_HEADER_LANES * width:][:len(codes)]),
                             tap.eq(Mux(lane[0] < stages, lane[0], stages)),
                             cap_en.eq(1), cap_k.eq(0), k.eq(1)]
                with m.If((x_size == 0) | (y_size == 0)):
                    m.next = "IDLE"
                with m.Elif(lane[0] <= 1):
                    m.next = "RUN"
                with m.Else():
                    m.next = "WORDS"
            with m.State("WORDS"):  # the count's words only (a larger count: all of them)
                m.d.comb += self.epi_r.addr.eq(waddr + stride)
                m.d.sync += [waddr.eq(waddr + stride), cap_en.eq(1), cap_k.eq(k), k.eq(k + 1)]
                with m.If((k + 1 >= count) | (k == stages - 1)):
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [issue.eq(in_flight < capacity), self.acc_r.addr.eq(idx),
                             self.epi_r.addr.eq(ridx)]
                with m.If(issue):
                    m.d.comb += [self.acc_z.en.eq(1), self.acc_z.addr.eq(idx), self.acc_z.data.eq(0)]
                    m.d.sync += [idx.eq(idx + 1), ridx.eq(ridx + 1)]
                    with m.If(x + 1 < x_size):
                        m.d.sync += x.eq(x + 1)
                    with m.Else():
                        m.d.sync += [x.eq(0), y.eq(y + 1)]
                        with m.If(y + 1 >= y_size):
                            m.next = "IDLE"
        popped = self.out_next & fifo.r_rdy
        m.d.sync += in_flight.eq(in_flight + issue - popped)
        m.d.comb += [self.out_data.eq(fifo.r_data), self.out_valid.eq(fifo.r_rdy), fifo.r_en.eq(self.out_next)]

        # the pipeline: the buffers' outputs registered, then one register per stage
        read = Signal()
        m.d.sync += read.eq(issue)
        valid, tile_x, tile_r = Signal(name="v_in"), Signal(lanes * width, name="x_in"), \
            Signal(lanes * width, name="r_in")
        m.d.sync += [valid.eq(read), tile_x.eq(self.acc_r.data), tile_r.eq(self.epi_r.data)]
        taps = [(valid, tile_x)]
        for s in range(stages):
            m.submodules[f"stage_{s}"] = alu = DrainLanes(cfg, cfg.drain_stage_ops[s], mul_stage=s in self.split)
            # the stage's own copy of its code and of whether the count reaches it, a cycle
            # behind ``codes`` and ``count`` (set in HEADER; the first tile reaches stage 0 two
            # cycles after RUN begins): placed by the stage, not routed across the chip to it
            code, active = Signal(DRAIN_CODE_BITS, name=f"code_{s}"), Signal(name=f"active_{s}")
            m.d.sync += [code.eq(codes[DRAIN_CODE_BITS * s:][:DRAIN_CODE_BITS]), active.eq(count > s)]
            on_r, b_r = code[DRAIN_ON_RESIDUAL_BIT], code[DRAIN_OPERAND_RESIDUAL_BIT]
            m.d.comb += [alu.op.eq(code[:len(alu.op)]),
                         alu.a.eq(Mux(on_r, tile_r, tile_x)), alu.b.eq(Mux(b_r, tile_r, words[s]))]
            if s in self.split:  # its product is the sum, this cycle, of last cycle's partial products
                dv, dx, dr = Signal(name=f"v_{s}_mul"), Signal.like(tile_x, name=f"x_{s}_mul"), \
                    Signal.like(tile_r, name=f"r_{s}_mul")
                m.d.sync += [dv.eq(valid), dx.eq(tile_x), dr.eq(tile_r)]
                valid, tile_x, tile_r = dv, dx, dr
            nv, nx, nr = Signal(name=f"v_{s}"), Signal.like(tile_x, name=f"x_{s}"), Signal.like(tile_r, name=f"r_{s}")
            m.d.sync += [nv.eq(valid & (tap > s)), nx.eq(Mux(active & ~on_r, alu.out, tile_x)),
                         nr.eq(Mux(active & on_r, alu.out, tile_r))]
            valid, tile_x, tile_r = nv, nx, nr
            taps.append((valid, tile_x))
        with m.Switch(tap):  # the stages past the count are skipped, not waited for
            for s, (v, t) in enumerate(taps):
                with m.Case(s):
                    m.d.comb += [fifo.w_en.eq(v),
                                 fifo.w_data.eq(Cat(*(t.word_select(i, width)[:cfg.OUT_WIDTH] for i in range(lanes))))]
        return m

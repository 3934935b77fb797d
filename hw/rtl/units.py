"""Arithmetic units: the GEMM core's tile product and the ALU's lanes.

Latency: the ALU is combinational.  The GEMM core is too, unless built with
``registered=True``: then its products are registered (one cycle after ``inp`` and
``wgt``; ``acc_in``, ``reset`` and ``part`` belong to that later cycle), which takes the
multipliers out of the accumulate path for the FPGA clock.  Either way one micro-op
completes per cycle.

Folding (``fold=k``, a lean build for small FPGAs): the unit has the multipliers or
lanes of one k-th of the tile and computes the part ``part`` of it (GEMM: output rows
``part·BLOCK_OUT/k`` onwards; ALU: lanes ``part·n/k`` onwards); the other lanes of
``acc_out`` are ``acc_in`` (``a``) unchanged.  k passes, part 0 to k − 1, one after the
other on the tile each has written, compute the whole tile: ``Timing.gemm_ii_cycles``
and ``alu_imm_ii_cycles`` are k (:class:`~.compute.ComputeUnit`).

Lane ``w`` of a packed tile occupies bits ``[w·W + W − 1 : w·W]`` (docs/ISA.md §1).
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from openvta.isa import SHR_AMOUNT_WIDTH, AluOp, Config, Format, layouts_of
from openvta.isa.timing import check_fold

from .fanout import replicas
from .params import refusing

__all__ = ["GemmCore", "AluLanes", "widen_lanes"]


class GemmCore(wiring.Component):
    """``acc_out[b][o] = 0 if reset else acc_in[b][o] + Σ_k inp[b][k]·wgt[o][k]``, 32-bit wrap.

    Parameters
    ----------
    cfg : Config
    registered : bool
        register the products: ``acc_out`` is then ``acc_in`` plus the products of
        the ``inp`` and ``wgt`` of the cycle before.
    fold : int
        the core has ``BATCH·BLOCK_IN·BLOCK_OUT / fold`` multipliers and computes the
        output rows of part ``part`` (default 1: the whole tile); ``fold`` divides
        ``BLOCK_OUT``.

    Members
    -------
    inp, wgt, acc_in :
        packed tiles (int8, int8, int32 lanes); ``wgt`` holds the part's
        ``BLOCK_OUT / fold`` rows.
    part :
        which part of the output rows (only with ``fold`` > 1).
    acc_out, out :
        the new accumulator tile and its low 8 bits per lane.
    """

    @refusing
    def __init__(self, cfg: Config, registered: bool = False, fold: int = 1) -> None:
        self.cfg, self.registered = cfg, registered
        self.fold = check_fold(fold, cfg.BLOCK_OUT, "the GEMM core's fold", "BLOCK_OUT")
        b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
        members = {
            "inp": In(b * bi * cfg.INP_WIDTH), "wgt": In(bo // self.fold * bi * cfg.WGT_WIDTH),
            "acc_in": In(b * bo * cfg.ACC_WIDTH), "reset": In(1),
            "acc_out": Out(b * bo * cfg.ACC_WIDTH), "out": Out(b * bo * cfg.OUT_WIDTH),
        }
        if self.fold > 1:
            members["part"] = In(ceil_log2(self.fold))
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
        rows = bo // self.fold  # the output rows of one part
        lanes = []
        for i in range(b):
            totals = []
            for o in range(rows):
                products = []
                for k in range(bi):
                    product = Signal(signed(cfg.INP_WIDTH + cfg.WGT_WIDTH),
                                     name=f"product_{i}_{o}_{k}")
                    domain = m.d.sync if self.registered else m.d.comb
                    domain += product.eq(self.inp.word_select(i * bi + k, cfg.INP_WIDTH).as_signed()
                                         * self.wgt.word_select(o * bi + k, cfg.WGT_WIDTH).as_signed())
                    products.append(product)
                totals.append(_tree_sum(products))
            for o in range(bo):
                acc = self.acc_in.word_select(i * bo + o, cfg.ACC_WIDTH).as_signed()
                lane = Signal(signed(cfg.ACC_WIDTH), name=f"lane_{i}_{o}")
                new = acc + totals[o % rows]
                if self.fold > 1:  # a lane of another part keeps its value
                    new = Mux(self.part == o // rows, new, acc)
                m.d.comb += lane.eq(Mux(self.reset, 0, new))
                lanes.append(lane)
        m.d.comb += [self.acc_out.eq(Cat(*lanes)),
                     self.out.eq(Cat(*(lane[:cfg.OUT_WIDTH] for lane in lanes)))]
        return m


def _tree_sum(values: list) -> object:
    while len(values) > 1:
        values = [values[i] + values[i + 1] if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


class AluLanes(wiring.Component):
    """``acc_out = op(a, b)`` on every accumulator lane (docs/ISA.md §3 ALU), and its low bits.

    ``b`` is the second tile, or the sign-extended immediate when ``use_imm``.  The
    ``op`` and ``imm`` ports have the widths of the ALU instruction's fields.  With
    ``fold`` > 1 (dividing ``BATCH·BLOCK_OUT``) there are ``n / fold`` lanes, and they
    compute the lanes of part ``part``; the others are ``a``'s.  With ``mul_stage``, MUL
    takes two cycles: the lanes' 16×16 partial products of this cycle's ``a`` and ``b``
    are registered, and a MUL's ``acc_out`` is the sum of those of the cycle before
    (the low 32 bits of ``a·b`` need three: ``a_lo·b_lo``, ``a_hi·b_lo``, ``a_lo·b_hi``).
    Only the operations in ``ops`` are built (a drain stage's set, ``DRAIN_OPS``); any
    other ``op`` gives zeros.  With ``ahead``, ``op``, ``use_imm``, ``imm`` and ``part``
    are given a cycle before the operands they apply to, and registered once per lane
    built (:mod:`.fanout`: each copy drives one lane's logic, not all of it).
    """

    @refusing
    def __init__(self, cfg: Config, fold: int = 1, mul_stage: bool = False,
                 ops: frozenset[AluOp] = frozenset(AluOp), ahead: bool = False) -> None:
        self.cfg, self.mul_stage, self.ops = cfg, bool(mul_stage), frozenset(ops)
        self.ahead = bool(ahead)
        n = cfg.BATCH * cfg.BLOCK_OUT
        self.fold = check_fold(fold, n, "the ALU's fold", "BATCH·BLOCK_OUT")
        layout = layouts_of(cfg)[Format.ALU]
        imm = layout.field("imm")
        members = {
            "op": In(layout.field("alu_opcode").width), "use_imm": In(1),
            "imm": In(signed(imm.width) if imm.signed else imm.width),
            "a": In(n * cfg.ACC_WIDTH), "b": In(n * cfg.ACC_WIDTH),
            "acc_out": Out(n * cfg.ACC_WIDTH), "out": Out(n * cfg.OUT_WIDTH),
        }
        if self.fold > 1:
            members["part"] = In(ceil_log2(self.fold))
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        n, bits = cfg.BATCH * cfg.BLOCK_OUT, cfg.ACC_WIDTH
        width = n // self.fold  # the lanes built
        # SHR's amount: the low LOG_ACC_WIDTH + 1 bits of b, signed (docs/ISA.md §3: -32..31)
        shift_bits = SHR_AMOUNT_WIDTH
        lanes = []

        controls = self._controls(m, width)

        def lane_of(tile: Value, w: int) -> Value:
            """Lane ``w`` of the lanes built: lane ``part·width + w`` of ``tile``."""
            if self.fold == 1:
                return tile.word_select(w, bits).as_signed()
            lanes = Cat(*(tile.word_select(p * width + w, bits) for p in range(self.fold)))
            return lanes.word_select(controls[w]["part"], bits).as_signed()

        for w in range(width):
            op, use_imm, imm = controls[w]["op"], controls[w]["use_imm"], controls[w]["imm"]
            a = lane_of(self.a, w)
            b = Mux(use_imm, imm, lane_of(self.b, w))
            shamt = Signal(signed(shift_bits), name=f"shamt_{w}")
            m.d.comb += shamt.eq(b[:shift_bits])
            result = Signal(signed(bits), name=f"alu_{w}")
            wide = Signal(signed(2 * bits), name=f"wide_{w}")
            product = None
            if AluOp.MUL in self.ops:
                product = _split_product(m, w, a, b, bits) if self.mul_stage else a * b
            with m.Switch(op):
                if AluOp.MIN in self.ops:
                    with m.Case(AluOp.MIN):
                        m.d.comb += result.eq(Mux(a < b, a, b))
                if AluOp.MAX in self.ops:
                    with m.Case(AluOp.MAX):
                        m.d.comb += result.eq(Mux(a > b, a, b))
                if AluOp.ADD in self.ops:
                    with m.Case(AluOp.ADD):
                        m.d.comb += result.eq(a + b)
                if product is not None:
                    with m.Case(AluOp.MUL):
                        m.d.comb += result.eq(product)
                if AluOp.SHR in self.ops:
                    with m.Case(AluOp.SHR):
                        # s >= 0: arithmetic right shift by s; s < 0: left shift by -s (32 gives 0)
                        with m.If(shamt >= 0):
                            m.d.comb += result.eq(a >> shamt.as_unsigned()[:shift_bits - 1])
                        with m.Else():
                            m.d.comb += [wide.eq(a << (-shamt).as_unsigned()[:shift_bits]),
                                         result.eq(wide[:bits])]
            lanes.append(result)
        if self.fold > 1:  # the lanes of the other parts keep a's values
            kept = []
            for w in range(n):
                lane = Signal(signed(bits), name=f"lane_{w}")
                m.d.comb += lane.eq(Mux(controls[w % width]["part"] == w // width, lanes[w % width],
                                        self.a.word_select(w, bits)))
                kept.append(lane)
            lanes = kept
        m.d.comb += [self.acc_out.eq(Cat(*lanes)),
                     self.out.eq(Cat(*(lane[:cfg.OUT_WIDTH] for lane in lanes)))]
        return m

    def _controls(self, m: Module, width: int) -> list[dict[str, Value]]:
        """For each lane built, the control inputs it computes with: the ports, or with
        ``ahead`` its own registered copy of them."""
        ports: dict[str, Value] = {"op": self.op, "use_imm": self.use_imm, "imm": self.imm}
        if self.fold > 1:
            ports["part"] = self.part
        if not self.ahead:
            return [ports] * width
        copies = {name: replicas(m, f"alu_{name}", port, width) for name, port in ports.items()}
        return [{name: copies[name][w] for name in ports} for w in range(width)]


def _split_product(m: Module, w: int, a: Value, b: Value, bits: int) -> Value:
    """The low ``bits`` of ``a·b`` from its partial products registered a cycle before."""
    half = bits // 2
    a_u, b_u = a.as_unsigned(), b.as_unsigned()
    low = Signal(bits, name=f"mul_low_{w}")
    cross = Signal(half, name=f"mul_cross_{w}")
    m.d.sync += [low.eq(a_u[:half] * b_u[:half]),
                 cross.eq(a_u[half:] * b_u[:half] + a_u[:half] * b_u[half:])]
    return (low + Cat(Const(0, half), cross))[:bits]


def widen_lanes(tile: Value, lanes: int, cfg: Config) -> Value:
    """Out-width lanes (int8) → accumulator-width lanes (int32), sign-extended (the
    ACC_8BIT and EPI_8BIT loads)."""
    parts = []
    for w in range(lanes):
        lane = tile.word_select(w, cfg.OUT_WIDTH)
        parts.append(Cat(lane, lane[-1].replicate(cfg.ACC_WIDTH - cfg.OUT_WIDTH)))
    return Cat(*parts)

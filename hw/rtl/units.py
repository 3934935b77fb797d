"""Arithmetic units: the GEMM core's tile product and the ALU's lanes.

Latency: the ALU is combinational.  The GEMM core is too, unless built with
``registered=True``: then its products are registered (one cycle after ``inp`` and
``wgt``; ``acc_in`` and ``reset`` belong to that later cycle), which takes the
multipliers out of the accumulate path for the FPGA clock.  Either way one micro-op
completes per cycle.

Lane ``w`` of a packed tile occupies bits ``[w·W + W − 1 : w·W]`` (docs/ISA.md §1).
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from openvta.isa import AluOp, Config, Format, layouts_of

__all__ = ["GemmCore", "AluLanes"]


class GemmCore(wiring.Component):
    """``acc_out[b][o] = 0 if reset else acc_in[b][o] + Σ_k inp[b][k]·wgt[o][k]``, 32-bit wrap.

    Parameters
    ----------
    cfg : Config
    registered : bool
        register the products: ``acc_out`` is then ``acc_in`` plus the products of
        the ``inp`` and ``wgt`` of the cycle before.

    Members
    -------
    inp, wgt, acc_in :
        packed tiles (int8, int8, int32 lanes).
    acc_out, out :
        the new accumulator tile and its low 8 bits per lane.
    """

    def __init__(self, cfg: Config, registered: bool = False) -> None:
        self.cfg, self.registered = cfg, registered
        b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
        super().__init__({
            "inp": In(b * bi * cfg.INP_WIDTH), "wgt": In(bo * bi * cfg.WGT_WIDTH),
            "acc_in": In(b * bo * cfg.ACC_WIDTH), "reset": In(1),
            "acc_out": Out(b * bo * cfg.ACC_WIDTH), "out": Out(b * bo * cfg.OUT_WIDTH),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
        lanes = []
        for i in range(b):
            for o in range(bo):
                products = []
                for k in range(bi):
                    product = Signal(signed(cfg.INP_WIDTH + cfg.WGT_WIDTH),
                                     name=f"product_{i}_{o}_{k}")
                    domain = m.d.sync if self.registered else m.d.comb
                    domain += product.eq(self.inp.word_select(i * bi + k, cfg.INP_WIDTH).as_signed()
                                         * self.wgt.word_select(o * bi + k, cfg.WGT_WIDTH).as_signed())
                    products.append(product)
                total = _tree_sum(products)
                acc = self.acc_in.word_select(i * bo + o, cfg.ACC_WIDTH).as_signed()
                lane = Signal(signed(cfg.ACC_WIDTH), name=f"lane_{i}_{o}")
                m.d.comb += lane.eq(Mux(self.reset, 0, acc + total))
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
    ``op`` and ``imm`` ports have the widths of the ALU instruction's fields.
    """

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        n = cfg.BATCH * cfg.BLOCK_OUT
        layout = layouts_of(cfg)[Format.ALU]
        imm = layout.field("imm")
        super().__init__({
            "op": In(layout.field("alu_opcode").width), "use_imm": In(1),
            "imm": In(signed(imm.width) if imm.signed else imm.width),
            "a": In(n * cfg.ACC_WIDTH), "b": In(n * cfg.ACC_WIDTH),
            "acc_out": Out(n * cfg.ACC_WIDTH), "out": Out(n * cfg.OUT_WIDTH),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        n, bits = cfg.BATCH * cfg.BLOCK_OUT, cfg.ACC_WIDTH
        # SHR's amount: the low LOG_ACC_WIDTH + 1 bits of b, signed (docs/ISA.md §3: -32..31)
        shift_bits = cfg.LOG_ACC_WIDTH + 1
        lanes = []
        for w in range(n):
            a = self.a.word_select(w, bits).as_signed()
            b = Mux(self.use_imm, self.imm, self.b.word_select(w, bits).as_signed())
            shamt = Signal(signed(shift_bits), name=f"shamt_{w}")
            m.d.comb += shamt.eq(b[:shift_bits])
            result = Signal(signed(bits), name=f"alu_{w}")
            wide = Signal(signed(2 * bits), name=f"wide_{w}")
            with m.Switch(self.op):
                with m.Case(AluOp.MIN):
                    m.d.comb += result.eq(Mux(a < b, a, b))
                with m.Case(AluOp.MAX):
                    m.d.comb += result.eq(Mux(a > b, a, b))
                with m.Case(AluOp.ADD):
                    m.d.comb += result.eq(a + b)
                with m.Case(AluOp.MUL):
                    m.d.comb += result.eq(a * b)
                with m.Case(AluOp.SHR):
                    # s >= 0: arithmetic right shift by s; s < 0: left shift by -s (32 gives 0)
                    with m.If(shamt >= 0):
                        m.d.comb += result.eq(a >> shamt.as_unsigned()[:shift_bits - 1])
                    with m.Else():
                        m.d.comb += [wide.eq(a << (-shamt).as_unsigned()[:shift_bits]),
                                     result.eq(wide[:bits])]
            lanes.append(result)
        m.d.comb += [self.acc_out.eq(Cat(*lanes)),
                     self.out.eq(Cat(*(lane[:cfg.OUT_WIDTH] for lane in lanes)))]
        return m

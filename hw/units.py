"""Arithmetic units: the GEMM core's tile product and the ALU's lanes.

Latency: the ALU is combinational.  The GEMM core is too, unless built with
``registered=True``: then its products are registered (one cycle after ``inp`` and
``wgt``; ``acc_in`` and ``reset`` belong to that later cycle), which takes the
multipliers out of the accumulate path for the FPGA clock.  Either way one micro-op
completes per cycle.

Lane ``w`` of a packed tile occupies bits ``[w·W + W − 1 : w·W]`` (ISA.md §1).
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from openvta.isa import AluOp, Config

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
            "inp": In(b * bi * 8), "wgt": In(bo * bi * 8), "acc_in": In(b * bo * 32),
            "reset": In(1), "acc_out": Out(b * bo * 32), "out": Out(b * bo * 8),
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
                    product = Signal(signed(16), name=f"product_{i}_{o}_{k}")
                    domain = m.d.sync if self.registered else m.d.comb
                    domain += product.eq(self.inp.word_select(i * bi + k, 8).as_signed()
                                         * self.wgt.word_select(o * bi + k, 8).as_signed())
                    products.append(product)
                total = _tree_sum(products)
                acc = self.acc_in.word_select(i * bo + o, 32).as_signed()
                lane = Signal(signed(32), name=f"lane_{i}_{o}")
                m.d.comb += lane.eq(Mux(self.reset, 0, acc + total))
                lanes.append(lane)
        m.d.comb += [self.acc_out.eq(Cat(*lanes)), self.out.eq(Cat(*(lane[:8] for lane in lanes)))]
        return m


def _tree_sum(values: list) -> object:
    while len(values) > 1:
        values = [values[i] + values[i + 1] if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


class AluLanes(wiring.Component):
    """``acc_out = op(a, b)`` on every 32-bit lane (ISA.md §3 ALU), and its low 8 bits.

    ``b`` is the second tile, or the sign-extended immediate when ``use_imm``.
    """

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        n = cfg.BATCH * cfg.BLOCK_OUT
        super().__init__({
            "op": In(3), "use_imm": In(1), "imm": In(signed(16)),
            "a": In(n * 32), "b": In(n * 32), "acc_out": Out(n * 32), "out": Out(n * 8),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n = self.cfg.BATCH * self.cfg.BLOCK_OUT
        lanes = []
        for w in range(n):
            a = self.a.word_select(w, 32).as_signed()
            b = Mux(self.use_imm, self.imm, self.b.word_select(w, 32).as_signed())
            shamt = Signal(signed(6), name=f"shamt_{w}")
            m.d.comb += shamt.eq(b[:6])
            result = Signal(signed(32), name=f"alu_{w}")
            wide = Signal(signed(64), name=f"wide_{w}")
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
                        m.d.comb += result.eq(a >> shamt.as_unsigned()[:5])
                    with m.Else():
                        m.d.comb += [wide.eq(a << (-shamt).as_unsigned()[:6]), result.eq(wide[:32])]
            lanes.append(result)
        m.d.comb += [self.acc_out.eq(Cat(*lanes)), self.out.eq(Cat(*(lane[:8] for lane in lanes)))]
        return m

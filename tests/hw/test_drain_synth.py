"""``benchmarks/drain_synth.py`` without Yosys: how it reads Yosys's statistics and netlists,
the table it makes of them, the designs it elaborates, and that the stand-ins it synthesizes
compute what they claim (Amaranth's simulator against :func:`openvta.isa.drain.drain_lanes`,
the functional simulator's arithmetic, and against hw/rtl/core.py's ``ClearedTiles``)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("amaranth")

from amaranth.sim import Simulator  # noqa: E402

from openvta.hw.rtl import drain as drain_rtl  # noqa: E402
from openvta.hw.rtl.core import ClearedTiles  # noqa: E402
from openvta.isa import DrainOp, preset  # noqa: E402
from openvta.isa.drain import drain_lanes  # noqa: E402


def _load() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "drain_synth.py"
    spec = importlib.util.spec_from_file_location("drain_synth", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


ds = _load()

#: ``tiny``'s four lanes: the levers' arithmetic does not depend on the lane count.
CFG = preset("tiny").replace(LOG_EPI_BUFF_SIZE=10, DRAIN_STAGES=3)


def test_counts_read_the_ecp5_cells() -> None:
    cells = {"LUT4": 10, "TRELLIS_FF": 3, "TRELLIS_FF_X": 2, "CCU2C": 4, "PFUMX": 5, "L6MUX21": 1,
             "TRELLIS_DPR16X4": 2, "MULT18X18D": 7, "$scopeinfo": 9}
    assert ds.counts(cells) == {"LUT4": 10, "FF": 5, "CCU2C": 4, "MUX": 6, "LUTRAM": 2, "DSP": 7}
    assert ds.counts({}) == dict.fromkeys(ds.COLUMNS, 0)


def test_modules_and_totals_from_stat_json() -> None:
    stat: dict[str, Any] = {"modules": {"\\top": {"num_cells_by_type": {"LUT4": 3, "top.a": 1}},
                        "\\top.a": {"num_cells_by_type": {"LUT4": 5, "TRELLIS_FF": 2}}}}
    assert ds.module_counts(stat)["top.a"]["LUT4"] == 5
    assert ds.total(stat)["LUT4"] == 8 and ds.total(stat)["FF"] == 2  # no design total: the sum
    stat["design"] = {"num_cells_by_type": {"LUT4": 7}}
    assert ds.total(stat)["LUT4"] == 7


def test_flip_flops_are_named_by_their_register() -> None:
    netlist = {"modules": {"top": {
        "netnames": {"x_0": {"bits": [2, 3], "hide_name": 0},
                     "x_0_TRELLIS_FF_Q_1_DI_LUT4_Z_D": {"bits": [3], "hide_name": 0},
                     "$abc$9": {"bits": [4], "hide_name": 1},
                     "word_1[3]": {"bits": [5], "hide_name": 0}},
        "cells": {f"ff{q}": {"type": "TRELLIS_FF", "connections": {"Q": [q]}} for q in (2, 3, 4, 5)}
        | {"lut": {"type": "LUT4", "connections": {"Z": [6]}},
           "tied": {"type": "TRELLIS_FF", "connections": {"Q": ["0"]}}},
    }}}
    assert ds.flip_flops_by_register(netlist) == {"x_0": 2, "(constant)": 1, "(unnamed)": 1, "word_1": 1}
    assert ds.register_of("\\rshr_s_5[2]") == "rshr_s_*"


def test_the_breakdown_subtracts_the_runs_it_names() -> None:
    runs = ds.plan(levers=True)
    assert [v.key for v in ds.plan(quick=True)] == ["unit", "modules"]
    keys = {v.key for v in runs}
    assert {"through-0", "through-1", "through-2", "through-all", "only-RSHR", "only-SHR", "lanes-CLIP"} <= keys
    totals = {key: dict.fromkeys(ds.COLUMNS, 0) | {"LUT4": 1000 - 10 * i} for i, key in enumerate(sorted(keys))}
    rows = {row.part: row for row in ds.breakdown(totals)}
    stage1 = rows["stage 1 (ADD): lanes and selects"]
    assert stage1.cells["LUT4"] == totals["unit"]["LUT4"] - totals["through-1"]["LUT4"]
    # the unit, each stage's lanes, stage 0's two operations, the rest, five lanes alone, each lever and its saving
    assert len(rows) == 1 + 3 + 2 + 1 + 5 + 2 * len(ds.LEVERS)
    assert len(ds.breakdown({"unit": totals["unit"]})) == 1  # rows without their runs are left out
    text = ds.table(list(rows.values()))
    assert text.splitlines()[0] == "| part | LUT4 | measured as |"  # no empty column
    assert "| stage 1 (ADD): lanes and selects | " in text


def test_the_share_of_the_image() -> None:
    assert "50.0 % of the SDRAM image" in ds.share_line(500, 1000, "x")
    assert "≤ 30 % (300)" in ds.share_line(500, 1000, "x")


def test_each_run_elaborates_and_the_rtl_lanes_come_back() -> None:
    original = drain_rtl.DrainLanes
    for variant in ds.plan(levers=True):
        if variant.key in ("unit", "through-1", "lanes-CLIP", "lever-fine+narrow"):
            text = ds.elaborate(variant)
            assert text.startswith("attribute") or "module" in text
    assert drain_rtl.DrainLanes is original
    with ds.stage_lanes(("rtl", "through")):
        made = [drain_rtl.DrainLanes(CFG, frozenset(DrainOp)) for _ in range(4)]  # two units' stages 0 … 2
    for lanes in made:
        lanes._MustUse__silence = True  # made to be looked at, not elaborated
    assert [type(x) for x in made] == [original, ds.ThroughLanes, original, original]
    assert drain_rtl.DrainLanes is original
    script = ds.yosys_script("top", hier=True, netlist=True)
    assert "synth_ecp5 -noflatten -top top" in script and "write_json netlist.json" in script
    assert "COLLISION_X_MASK" in script  # the bitstream flow's commands after reading the design


INT32 = st.integers(-2**31, 2**31 - 1)
#: An ``(a, b)`` pair of operand tiles, int32 lanes.
Vector = tuple[list[int], list[int]]
#: The operands' edges: the amounts' ends (the low 6 bits, signed), the int32 ends, zero.
EDGES = [(a, b) for a in (-2**31, 2**31 - 1, -1, 0, 1, 255, -300) for b in (-32, -31, -1, 0, 1, 2, 30, 31, 63, 64)]


def _simulate(dut: Any, ops: Sequence[DrainOp], vectors: Sequence[Vector]) -> dict[DrainOp, list[list[int]]]:
    """``dut``'s int32 ``out`` lanes for each op of ``ops`` on each ``(a, b)`` of ``vectors``
    (int32 lanes), in one run of Amaranth's simulator (the lanes are combinational)."""
    got: dict[DrainOp, list[list[int]]] = {op: [] for op in ops}

    async def bench(ctx: Any) -> None:
        for a, b in vectors:
            ctx.set(dut.a, sum((v & 0xFFFFFFFF) << (32 * i) for i, v in enumerate(a)))
            ctx.set(dut.b, sum((v & 0xFFFFFFFF) << (32 * i) for i, v in enumerate(b)))
            for op in ops:
                ctx.set(dut.op, int(op))
                out = ctx.get(dut.out)
                got[op].append([(out >> (32 * i)) & 0xFFFFFFFF for i in range(len(a))])

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return got


def _want(op: DrainOp, a: Sequence[int], b: Sequence[int]) -> list[int]:
    return drain_lanes(op, np.array(a, np.int32), np.array(b, np.int32)).astype(np.int32).view(np.uint32).tolist()


def _vectors(pairs: Sequence[tuple[int, int]], random: Sequence[Vector]) -> list[Vector]:
    """The edge pairs spread over the lanes (a lane each, shifted by one per vector), then
    the random vectors."""
    n = CFG.BATCH * CFG.BLOCK_OUT
    edges = [([pairs[(k + i) % len(pairs)][0] for i in range(n)], [pairs[(k + i) % len(pairs)][1] for i in range(n)])
             for k in range(len(pairs))]
    return edges + list(random)


_TILE = st.lists(INT32, min_size=CFG.BATCH * CFG.BLOCK_OUT, max_size=CFG.BATCH * CFG.BLOCK_OUT)
LANE_VECTORS = st.lists(st.tuples(_TILE, _TILE), min_size=1, max_size=24)


def _name(ops: tuple[DrainOp, ...]) -> str:
    return "+".join(op.name for op in ops)


FEW = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("lever", ["shared-shift", "product-shift", "fine-shift", "round-bit"])
@pytest.mark.parametrize("ops", [(DrainOp.RSHR, DrainOp.SHR), (DrainOp.RSHR,), (DrainOp.SHR,)], ids=_name)
@FEW
@given(random=LANE_VECTORS)
def test_the_exact_levers_are_the_isa_s_shifts(lever: str, ops: tuple[DrainOp, ...],
                                               random: list[Vector]) -> None:
    vectors = _vectors(EDGES, random)
    got = _simulate(ds.LANES[lever](CFG, frozenset(ops)), ops, vectors)
    for op in ops:
        for (a, b), out in zip(vectors, got[op]):
            assert out == _want(op, a, b), f"{lever} {op.name} a={a} b={b}"


@pytest.mark.parametrize("ops", [(DrainOp.RSHR, DrainOp.SHR), (DrainOp.RSHR,), (DrainOp.ADD,), (DrainOp.CLIP,),
                                 tuple(DrainOp)], ids=_name)
@FEW
@given(random=LANE_VECTORS)
def test_the_rtl_lanes_are_the_isa_s_and_through_passes_a(ops: tuple[DrainOp, ...],
                                                         random: list[Vector]) -> None:
    """The reference the breakdown subtracts from: the RTL's lanes as the ISA computes, the
    stand-in of a stage passed through giving ``a``."""
    vectors = _vectors(EDGES, random)
    rtl = _simulate(ds.LANES["rtl"](CFG, frozenset(ops)), ops, vectors)
    through = _simulate(ds.LANES["through"](CFG, frozenset(ops)), ops[:1], vectors)
    for op in ops:
        for (a, b), out in zip(vectors, rtl[op]):
            assert out == _want(op, a, b), f"{op.name} a={a} b={b}"
    for (a, _), passed in zip(vectors, through[ops[0]]):
        assert passed == [v & 0xFFFFFFFF for v in a]


def _narrowed(values: Sequence[int]) -> list[int]:
    bits = ds.NARROW_BITS
    return [((v & ((1 << bits) - 1)) ^ (1 << (bits - 1))) - (1 << (bits - 1)) for v in values]


@pytest.mark.parametrize("op", [DrainOp.ADD, DrainOp.CLIP], ids=lambda op: op.name)
@FEW
@given(random=LANE_VECTORS)
def test_the_narrow_lever_is_the_isa_on_narrowed_operands(op: DrainOp, random: list[Vector]) -> None:
    """Not exact on 32-bit lanes (the measured lever changes the arithmetic): exactly
    the ISA's operation on the operands' low :data:`NARROW_BITS` bits, sign-extended (CLIP's
    bounds whole)."""
    vectors = _vectors([(65535, -65536), (-65536, 65535), (1 << 20, 5), (7, 100), (-3, 0x7F_FF80)], random)
    got = _simulate(ds.LANES["narrow"](CFG, frozenset({op})), (op,), vectors)
    for (a, b), out in zip(vectors, got[op]):
        assert out == _want(op, _narrowed(a), b if op is DrainOp.CLIP else _narrowed(b)), f"a={a} b={b}"


def test_the_block_ram_cleared_bits_are_the_flip_flops_bits() -> None:
    """Random sets, clears and reads, no tile set and cleared within two cycles (the
    tokens keep them far apart): ClearedTiles (block RAM) reads what the flip-flops of its
    first version read."""
    depth, reads = 32, 2
    rtl, flops = ClearedTiles(depth, reads), ds.FlipFlopClearedTiles(depth, reads)
    rng = np.random.default_rng(5)
    got: dict[str, list[int]] = {"rtl": [], "flops": []}
    recent: list[tuple[int, int]] = []  # (cycle, tile) of the sets and clears of the last two cycles

    def step(cycle: int) -> dict[str, int]:
        busy = {tile for when, tile in recent if cycle - when <= 2}
        ask: dict[str, int] = {}
        for kind in ("set", "clear"):
            tile = int(rng.integers(depth))
            if rng.random() < 0.5 and tile not in busy:
                ask[kind] = tile
                busy.add(tile)
                recent.append((cycle, tile))
        return ask

    plan = [step(cycle) for cycle in range(400)]
    addrs = rng.integers(depth, size=(400, reads))
    enables = rng.random((400, reads)) < 0.8

    for name, dut in (("rtl", rtl), ("flops", flops)):
        async def bench(ctx: Any, dut: Any = dut, name: str = name) -> None:
            for cycle, ask in enumerate(plan):
                ctx.set(dut.set_en, "set" in ask)
                ctx.set(dut.set_addr, ask.get("set", 0))
                ctx.set(dut.clear_en, "clear" in ask)
                ctx.set(dut.clear_addr, ask.get("clear", 0))
                for i in range(reads):
                    ctx.set(dut.read_en[i], bool(enables[cycle, i]))
                    ctx.set(dut.read_addr[i], int(addrs[cycle, i]))
                await ctx.tick()
                got[name].extend(ctx.get(dut.read_bit[i]) for i in range(reads))

        sim = Simulator(dut)
        sim.add_clock(1e-6)
        sim.add_testbench(bench)
        sim.run()
    assert sum(got["rtl"]) > 50
    assert got["flops"] == got["rtl"]


def test_the_module_changes_of_two_socs() -> None:
    def stat(modules: dict[str, dict[str, int]]) -> dict[str, Any]:
        return {"modules": {f"\\openvta_soc.soc.{k}": {"num_cells_by_type": v} for k, v in modules.items()}}

    without = stat({"core": {"LUT4": 10}, "core.arbiter": {"LUT4": 5}, "rx$12": {"LUT4": 3}})
    with_drain = stat({"core": {"LUT4": 14}, "core.arbiter": {"LUT4": 5}, "core.cleared": {"LUT4": 50},
                       "rx$13": {"LUT4": 3}})
    rows = ds.module_changes(without, with_drain)
    assert [(r.part, r.cells["LUT4"], r.how) for r in rows] == [("core.cleared", 50, "new"), ("core", 4, "changed")]
    assert ds.soc_lever("fine-shift+flip-flop-cleared") == (ds.LEVERS["fine-shift"][1], "flip-flops")
    with pytest.raises(ValueError, match="no lever"):
        ds.soc_lever("faster")

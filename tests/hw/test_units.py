"""The RTL building blocks in Amaranth's simulator, each against a deliberately naive model.

GemmCore and AluLanes (combinational) against numpy and the functional simulator's
``alu_lanes``; TokenCounter against a Python counter; DmaReader and DmaWriter against
docs/ISA.md §3 LOAD/STORE with a Python memory behind their burst port (sentinel bytes
everywhere outside the region they may touch), the writer also on a stream as machine
v2's drain unit feeds it; AxiArbiter against round-robin order.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np
import pytest

amaranth = pytest.importorskip("amaranth")

from amaranth.sim import Simulator  # noqa: E402

from openvta.hw.rtl.dma import DmaReader, DmaWriter  # noqa: E402
from openvta.hw.rtl.fetch import CommandQueue, Fetch, TokenCounter  # noqa: E402
from openvta.hw.rtl.memory import AxiArbiter  # noqa: E402
from openvta.hw.rtl.drain import DrainLanes  # noqa: E402
from openvta.hw.rtl.units import AluLanes, GemmCore  # noqa: E402
from openvta.isa import AluOp, Config, DrainOp, parse_drain_ops, preset  # noqa: E402
from openvta.isa.drain import drain_lanes  # noqa: E402
from openvta.sim.functional.alu import alu_lanes  # noqa: E402

Bench = Callable[[Any], Coroutine[Any, Any, None]]

CUSTOM = dict(LOG_BATCH=1, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=11, LOG_INP_BUFF_SIZE=10,
              LOG_WGT_BUFF_SIZE=12, LOG_ACC_BUFF_SIZE=13)
CONFIG_NAMES = ("tiny", "small", "custom")
# the same edges as tests/sim/test_semantics.py
INT32_EDGES = [-(2**31), -(2**31) + 1, -65536, -129, -128, -1, 0, 1, 2, 127, 128, 255, 65535,
               2**30, 2**31 - 1]
SHIFTS = list(range(-40, 41)) + [63, 64, 65, -64, -65, 2**15 - 1, -(2**15)]
INT16_EDGES = [v for v in INT32_EDGES if -(2**15) <= v < 2**15] + [-(2**15), 2**15 - 1]


def _config(name: str) -> Config:
    return Config(**CUSTOM) if name == "custom" else preset(name)


def _simulate(dut: object, bench: Bench, clocked: bool = True) -> None:
    sim = Simulator(dut)
    if clocked:
        sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def pack(values: Any, width: int) -> int:
    """Lane ``w`` of the result holds ``values[w]`` in bits ``[w*width + width-1 : w*width]``."""
    word = 0
    for w, v in enumerate(np.asarray(values).reshape(-1)):
        word |= (int(v) & ((1 << width) - 1)) << (w * width)
    return word


def unpack(word: int, width: int, count: int) -> list[int]:
    """Signed lanes of a packed word."""
    lanes = []
    for w in range(count):
        v = (word >> (w * width)) & ((1 << width) - 1)
        lanes.append(v - (1 << width) if v >> (width - 1) else v)
    return lanes


def wrap32(values: np.ndarray) -> np.ndarray:
    return ((values.astype(np.int64) + 2**31) % 2**32 - 2**31).astype(np.int64)


# -- GemmCore ------------------------------------------------------------------------------

def test_custom_config_validates() -> None:
    cfg = Config(**CUSTOM)
    assert (cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT, cfg.name) == (2, 4, 4, "custom")
    assert (cfg.inp_depth, cfg.wgt_depth, cfg.acc_depth) == (2**10 // 8, 2**12 // 16, 2**13 // 32)


def _gemm_cases(cfg: Config, rng: np.random.Generator) -> list[tuple[Any, Any, Any]]:
    """(inp, wgt, acc) tiles: random ones, then the extremes of int8 and int32."""
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    cases: list[tuple[Any, Any, Any]]
    cases = [(rng.integers(-128, 128, (b, bi)), rng.integers(-128, 128, (bo, bi)),
              rng.integers(-(2**31), 2**31, (b, bo))) for _ in range(12)]
    i8 = [-128, -127, -1, 0, 1, 127]
    i32 = [-(2**31), -(2**31) + 1, -1, 0, 1, 2**31 - 2, 2**31 - 1]
    for x, y, a in [(-128, -128, 2**31 - 1), (-128, 127, -(2**31)), (127, 127, 2**31 - 1),
                    (127, -128, -(2**31) + 1), (-128, -128, 0), (0, 0, -(2**31))]:
        cases.append((np.full((b, bi), x), np.full((bo, bi), y), np.full((b, bo), a)))
    for _ in range(6):
        cases.append((rng.choice(i8, (b, bi)), rng.choice(i8, (bo, bi)), rng.choice(i32, (b, bo))))
    return cases


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_gemm_core_matches_numpy(name: str) -> None:
    cfg = _config(name)
    dut = GemmCore(cfg)
    lanes = cfg.BATCH * cfg.BLOCK_OUT
    cases = _gemm_cases(cfg, np.random.default_rng(len(name)))
    checked = []

    async def bench(ctx: Any) -> None:
        for (inp, wgt, acc), reset in itertools.product(cases, (0, 1)):
            ctx.set(dut.inp, pack(inp, 8))
            ctx.set(dut.wgt, pack(wgt, 8))
            ctx.set(dut.acc_in, pack(acc, 32))
            ctx.set(dut.reset, reset)
            # [b][o] = Σ_k inp[b][k]·wgt[o][k] in int64, then wrapped to int32
            product = inp.astype(np.int64) @ wgt.astype(np.int64).T
            expected = np.zeros_like(product) if reset else wrap32(acc + product)
            got = unpack(ctx.get(dut.acc_out), 32, lanes)
            assert got == expected.reshape(-1).tolist(), (inp, wgt, acc, reset)
            low8 = expected.astype(np.int8).reshape(-1).tolist()
            assert unpack(ctx.get(dut.out), 8, lanes) == low8
            checked.append(reset)

    _simulate(dut, bench, clocked=False)
    assert len(checked) == 2 * len(cases)


# -- AluLanes ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["tiny", "custom"])
@pytest.mark.parametrize("op", list(AluOp))
def test_alu_lanes_match_functional_simulator(name: str, op: AluOp) -> None:
    cfg = _config(name)
    dut = AluLanes(cfg)
    n = cfg.BATCH * cfg.BLOCK_OUT
    operands = SHIFTS if op == AluOp.SHR else INT32_EDGES
    pairs = list(itertools.product(INT32_EDGES, operands))
    pairs += [pairs[0]] * (-len(pairs) % n)  # whole vectors
    imms = [v for v in SHIFTS if -(2**15) <= v < 2**15] if op == AluOp.SHR else INT16_EDGES
    rng = np.random.default_rng(int(op))
    checked = []

    async def bench(ctx: Any) -> None:
        ctx.set(dut.op, int(op))
        ctx.set(dut.use_imm, 0)
        for k in range(0, len(pairs), n):
            a = np.array([p[0] for p in pairs[k : k + n]], np.int64)
            b = np.array([p[1] for p in pairs[k : k + n]], np.int64)
            ctx.set(dut.a, pack(a, 32))
            ctx.set(dut.b, pack(b, 32))
            expected = alu_lanes(op, a, b)
            assert unpack(ctx.get(dut.acc_out), 32, n) == expected.tolist(), (op, a, b)
            assert unpack(ctx.get(dut.out), 8, n) == expected.astype(np.int8).tolist()
            checked.append(k)
        ctx.set(dut.use_imm, 1)
        a = np.resize(np.array(INT32_EDGES, np.int64), n)
        for imm in imms:
            a = np.roll(a, 1)
            ctx.set(dut.a, pack(a, 32))
            ctx.set(dut.b, pack(rng.integers(-(2**31), 2**31, n), 32))  # ignored
            ctx.set(dut.imm, imm)
            expected = alu_lanes(op, a, np.int64(imm))
            assert unpack(ctx.get(dut.acc_out), 32, n) == expected.tolist(), (op, a, imm)
            assert unpack(ctx.get(dut.out), 8, n) == expected.astype(np.int8).tolist()
            checked.append(imm)

    _simulate(dut, bench, clocked=False)
    assert len(checked) == len(pairs) // n + len(imms)


@pytest.mark.parametrize("fold", [1, 2])
def test_alu_lanes_ahead_compute_with_the_controls_of_the_cycle_before(fold: int) -> None:
    """With ``ahead`` (the compute unit's ALU), each lane registers its own copy of ``op``,
    ``use_imm``, ``imm`` and ``part``: the result is that of the controls given a cycle
    before the operands, whatever the ports hold now."""
    cfg = preset("tiny")
    dut = AluLanes(cfg, fold=fold, ahead=True)
    n, rng = cfg.BATCH * cfg.BLOCK_OUT, np.random.default_rng(fold)
    checked = []

    async def bench(ctx: Any) -> None:
        for trial in range(40):
            op, use_imm = AluOp(trial % len(AluOp)), trial % 3 == 0
            imm = int(rng.choice(SHIFTS if op == AluOp.SHR else INT16_EDGES))
            part = int(rng.integers(fold))
            controls = [(dut.op, int(op)), (dut.use_imm, int(use_imm)), (dut.imm, imm)]
            if fold > 1:
                controls.append((dut.part, part))
            for port, value in controls:
                ctx.set(port, value)
            await ctx.tick()
            for port, _ in controls:  # the ports change: the lanes keep their copies
                ctx.set(port, 0)
            a = rng.choice(INT32_EDGES, n).astype(np.int64)
            b = rng.choice(SHIFTS if op == AluOp.SHR else INT32_EDGES, n).astype(np.int64)
            ctx.set(dut.a, pack(a, 32))
            ctx.set(dut.b, pack(b, 32))
            expected = alu_lanes(op, a, np.int64(imm) if use_imm else b)
            lanes = slice(part * n // fold, (part + 1) * n // fold)
            want = a.copy()
            want[lanes] = expected[lanes]
            assert unpack(ctx.get(dut.acc_out), 32, n) == want.tolist(), (op, use_imm, part)
            checked.append(trial)

    _simulate(dut, bench)
    assert len(checked) == 40


# -- DrainLanes with a stage's operation set (DRAIN_OPS) ----------------------------------

@pytest.mark.parametrize("ops", ["RSHR+SHR", "ADD", "CLIP+MIN+MAX", "MUL", "MIN+MAX+ADD+SHR+MUL+RSHR+CLIP"])
def test_drain_lanes_build_only_their_operations(ops: str) -> None:
    """Each operation of the set is :func:`~openvta.isa.drain.drain_lanes`, exactly; any other
    gives zeros, or in a stage of one operation that operation (the functional simulator
    refuses a descriptor that names another)."""
    cfg = preset("tiny").replace(LOG_EPI_BUFF_SIZE=10, DRAIN_STAGES=1, DRAIN_OPS=parse_drain_ops(ops))
    built = cfg.drain_stage_ops[0]
    dut = DrainLanes(cfg, built)
    n = cfg.BATCH * cfg.BLOCK_OUT
    rng = np.random.default_rng(len(ops))
    checked = []

    async def bench(ctx: Any) -> None:
        for op in DrainOp:
            seconds = SHIFTS if op in (DrainOp.SHR, DrainOp.RSHR) else INT32_EDGES
            pairs = list(itertools.product(INT32_EDGES, seconds))
            pairs += [pairs[0]] * (-len(pairs) % n)
            if op == DrainOp.CLIP:  # a packed clip word: low <= high in each half
                pairs = [(a, (int(h) << 16) | (int(lo) & 0xFFFF)) for a, (lo, h) in zip(
                    rng.choice(INT32_EDGES, len(pairs)), np.sort(rng.integers(-2**15, 2**15, (len(pairs), 2))))]
            ctx.set(dut.op, int(op))
            for k in range(0, len(pairs), n):
                a = np.array([p[0] for p in pairs[k : k + n]], np.int64)
                b = np.array([p[1] for p in pairs[k : k + n]], np.int64)
                ctx.set(dut.a, pack(a, 32))
                ctx.set(dut.b, pack(b, 32))
                got = unpack(ctx.get(dut.out), 32, n)
                done = op if op in built else next(iter(built)) if len(built) == 1 else None
                if done is not None:  # (a stage of one operation computes it whatever the code)
                    expected = drain_lanes(done, a.astype(np.uint32).view(np.int32),
                                           b.astype(np.uint32).view(np.int32))
                    assert got == expected.tolist(), (op, a, b)
                else:
                    assert got == [0] * n, op
                checked.append(op)

    _simulate(dut, bench, clocked=False)
    assert set(checked) == set(DrainOp)


# -- TokenCounter --------------------------------------------------------------------------

def _token_sequence(depth: int, rng: random.Random) -> list[tuple[int, int]]:
    """Fill past full, push+pop at full, drain past empty, push+pop at empty, then random."""
    seq = [(1, 0)] * (depth + 2) + [(1, 1)] * 2 + [(0, 1)] * (depth + 2) + [(1, 1)] * 2
    seq += [(1, 0)] * (depth // 2) + [(1, 1)] * 3
    seq += [(rng.randint(0, 1), rng.randint(0, 1)) for _ in range(60)]
    return seq


@pytest.mark.parametrize("depth", [1, 2, 3, 16])
def test_token_counter_matches_counter_model(depth: int) -> None:
    dut = TokenCounter(depth)
    seq = _token_sequence(depth, random.Random(depth))
    seen = set()

    async def bench(ctx: Any) -> None:
        count = 0
        for push, pop in seq:
            assert ctx.get(dut.count) == count
            assert ctx.get(dut.empty) == (count == 0)
            assert ctx.get(dut.full) == (count == depth)
            seen.add(count)
            ctx.set(dut.push, push)
            ctx.set(dut.pop, pop)
            await ctx.tick()
            # a push into a full queue and a pop from an empty one are ignored; the
            # rest of a simultaneous push and pop cancel
            up = push and count != depth
            down = pop and count != 0
            count += up - down
        assert ctx.get(dut.count) == count

    _simulate(dut, bench)
    assert seen == set(range(depth + 1))


# -- DmaReader -----------------------------------------------------------------------------

# (element bits, bus bits, max burst beats): several elements per beat, one, several
# beats; AXI4's narrowest and widest buses
READ_GEOMETRIES = [(32, 32, 3), (32, 64, 3), (128, 64, 3), (512, 64, 256), (128, 32, 2),
                   (16, 128, 2), (32, 8, 5), (64, 1024, 2)]
PADS = {"none": (0, 0, 0, 0), "y0": (2, 0, 0, 0), "y1": (0, 2, 0, 0), "x0": (0, 0, 2, 0),
        "x1": (0, 0, 0, 2), "all": (1, 2, 3, 1), "0-15": (0, 15, 0, 15), "15-0": (15, 0, 15, 0)}
# (y_size, x_size, x_stride, dram_base)
SIZES = [(1, 1, 1, 0), (2, 3, 5, 1), (3, 4, 4, 3), (1, 9, 9, 2), (3, 2, 7, 5), (0, 2, 2, 0)]


def _element_rows(dram: bytes, e_bytes: int, y: int, x: int, stride: int, base: int) -> np.ndarray:
    """The LOAD's DRAM rows, ``[y][x][byte]``."""
    elems = np.frombuffer(dram, np.uint8)[: len(dram) // e_bytes * e_bytes].reshape(-1, e_bytes)
    rows = [elems[base + r * stride : base + r * stride + x] for r in range(y)]
    return np.array(rows, np.uint8).reshape(y, x, e_bytes)


def _run_reader(geometry: tuple[int, int, int], fields: dict[str, int], depth: int,
                stall: bool, seed: int, widths: tuple[int, ...] = ()) -> list[tuple[int, int]]:
    """Run one LOAD of ``geometry``'s elements on a reader (of ``widths``, when given,
    ``sel`` choosing the element's) and check its buffer writes; returns them as
    (cycle, address)."""
    e_bits, bus_bits, max_burst = geometry
    e_bytes, bus_bytes = e_bits // 8, bus_bits // 8
    rng = random.Random(seed)
    dut = DmaReader(widths or e_bits, bus_bits, max_burst)
    y, x, stride, base = (fields[k] for k in ("y_size", "x_size", "x_stride", "dram_base"))
    dram_bytes = (base + max(y, 1) * stride + x + 1) * e_bytes + 2 * bus_bytes
    dram = bytes(rng.getrandbits(8) for _ in range(dram_bytes))
    sentinel = np.frombuffer(bytes(rng.getrandbits(8) for _ in range(depth * e_bytes)), np.uint8)
    buffer = sentinel.reshape(depth, e_bytes).copy()
    writes: list[int] = []
    timed: list[tuple[int, int]] = []
    mem = dut.mem

    async def bench(ctx: Any) -> None:
        for name, value in fields.items():
            ctx.set(getattr(dut, name), value)
        if widths:
            ctx.set(dut.sel, dut.widths.index(e_bits))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        burst: Any = None  # [byte address, beats left]
        done_at = None
        held = False  # a beat offered and not taken stays offered (AXI rvalid)
        for cycle in range(20000):
            ctx.set(mem.rreq.ready, burst is None and (not stall or rng.random() < 0.6))
            valid = burst is not None and (held or not stall or rng.random() < 0.7)
            ctx.set(mem.rdata.valid, valid)
            if valid:
                ctx.set(mem.rdata.payload.data, int.from_bytes(dram[burst[0] : burst[0] + bus_bytes], "little"))
                ctx.set(mem.rdata.payload.last, burst[1] == 1)
            if ctx.get(dut.wr_en):
                assert done_at is None, "a buffer write after done"
                addr, data = ctx.get(dut.wr_addr), ctx.get(dut.wr_data)
                assert data >> e_bits == 0, "a narrower element is written in the low bits"
                writes.append(addr)
                timed.append((cycle, addr))
                buffer[addr % depth] = np.frombuffer(data.to_bytes(e_bytes, "little"), np.uint8)
            if ctx.get(dut.done):
                assert done_at is None, "done pulsed twice"
                done_at = cycle
            if done_at is not None and cycle >= done_at + 3:
                break
            request = ctx.get(mem.rreq.valid) and ctx.get(mem.rreq.ready)
            r_addr, r_beats = ctx.get(mem.rreq.payload.addr), ctx.get(mem.rreq.payload.beats)
            taken = valid and ctx.get(mem.rdata.ready)
            held = valid and not taken
            await ctx.tick()
            if taken:
                burst = None if burst[1] == 1 else [burst[0] + bus_bytes, burst[1] - 1]
            if request:
                assert done_at is None
                assert r_addr % bus_bytes == 0 and 1 <= r_beats <= max_burst, (r_addr, r_beats)
                assert r_addr + r_beats * bus_bytes <= len(dram), "read past the tensor"
                burst = [r_addr, r_beats]
        else:
            raise AssertionError("the DMA reader did not finish")
        assert burst is None, "done before the last burst was read"

    _simulate(dut, bench)
    y0, y1, x0, x1 = (fields[k] for k in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"))
    rows = _element_rows(dram, e_bytes, y, x, stride, base)
    region = np.pad(rows, ((y0, y1), (x0, x1), (0, 0)),  # (pad_min: -128 in every byte)
                    constant_values=0x80 if fields.get("pad_min") else 0).reshape(-1, e_bytes)
    sram = fields["sram_base"]
    expected = sentinel.reshape(depth, e_bytes).copy()
    expected[sram : sram + len(region)] = region
    assert writes == list(range(sram, sram + len(region))), "writes out of order or out of region"
    np.testing.assert_array_equal(buffer, expected)
    return timed


def _load_fields(size: tuple[int, ...], pads: tuple[int, ...], sram: int) -> dict[str, int]:
    y, x, stride, base = size
    return dict(sram_base=sram, dram_base=base, y_size=y, x_size=x, x_stride=stride,
                y_pad_0=pads[0], y_pad_1=pads[1], x_pad_0=pads[2], x_pad_1=pads[3])


def _geometry_id(g: tuple[int, int, int]) -> str:
    return f"e{g[0]}-bus{g[1]}-burst{g[2]}"


@pytest.mark.parametrize("geometry", READ_GEOMETRIES, ids=_geometry_id)
@pytest.mark.parametrize("pads", list(PADS.values()), ids=list(PADS))
def test_dma_reader_pads_with_zeros(geometry: tuple[int, int, int], pads: tuple[int, ...]) -> None:
    size = (2, 3, 5, 1) if 15 not in pads else (1, 2, 3, 1)
    fields = _load_fields(size, pads, sram=3)
    area = (pads[0] + size[0] + pads[1]) * (pads[2] + size[1] + pads[3])
    _run_reader(geometry, fields, depth=3 + area + 4, stall=False, seed=sum(pads))


@pytest.mark.parametrize("geometry", READ_GEOMETRIES, ids=_geometry_id)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: "y{}x{}s{}b{}".format(*s))
def test_dma_reader_sizes_under_backpressure(geometry: tuple[int, int, int],
                                             size: tuple[int, ...]) -> None:
    pads = (1, 0, 0, 1) if size[0] else (1, 2, 1, 0)
    fields = _load_fields(size, pads, sram=1)
    area = (pads[0] + size[0] + pads[1]) * (pads[2] + size[1] + pads[3])
    _run_reader(geometry, fields, depth=1 + area + 3, stall=True, seed=size[1] * 7 + size[3])


@pytest.mark.parametrize("geometry", READ_GEOMETRIES[:3], ids=_geometry_id)
def test_dma_reader_pads_with_minus_128_when_pad_min(geometry: tuple[int, int, int]) -> None:
    fields = _load_fields((2, 3, 5, 1), (1, 2, 1, 3), sram=3) | {"pad_min": 1}
    _run_reader(geometry, fields, depth=3 + 5 * 7 + 4, stall=True, seed=7)


def test_dma_reader_all_pads_15() -> None:
    fields = _load_fields((1, 1, 1, 1), (15, 15, 15, 15), sram=2)
    _run_reader((32, 64, 4), fields, depth=2 + 31 * 31 + 2, stall=False, seed=15)


# A reader of several widths (a module's LOADs, :class:`DmaReaders`): elements narrower
# than a beat and wider in one engine, narrower than the widest in the low bits.
SHARED_WIDTHS = [((32, 128), 32), ((32, 128), 64), ((16, 32, 128), 32), ((8, 64), 16), ((32, 512), 64)]


@pytest.mark.parametrize("widths,bus_bits", SHARED_WIDTHS, ids=lambda v: "-".join(map(str, v))
                         if isinstance(v, tuple) else f"bus{v}")
@pytest.mark.parametrize("size", SIZES[1:4], ids=lambda s: "y{}x{}s{}b{}".format(*s))
def test_a_shared_reader_writes_what_and_when_a_reader_of_one_width_does(
        widths: tuple[int, ...], bus_bits: int, size: tuple[int, ...]) -> None:
    """Each width, chosen by ``sel``, under random stalls: the same buffer contents, and
    every write in the same cycle as on a reader built for that width alone."""
    pads = (1, 0, 2, 1)
    fields = _load_fields(size, pads, sram=2) | {"pad_min": size[1] % 2}
    area = (pads[0] + size[0] + pads[1]) * (pads[2] + size[1] + pads[3])
    for e_bits in widths:
        geometry = (e_bits, bus_bits, 3)
        alone = _run_reader(geometry, fields, depth=2 + area + 3, stall=True, seed=e_bits + size[1])
        shared = _run_reader(geometry, fields, depth=2 + area + 3, stall=True, seed=e_bits + size[1],
                             widths=widths)
        assert shared == alone


# -- DmaWriter -----------------------------------------------------------------------------

# wider than a beat, one beat, narrower (2, 4, 16 elements per beat: rows start and end
# inside beats, written with strobes)
WRITE_GEOMETRIES = [(32, 32, 3), (128, 32, 3), (128, 64, 256), (512, 64, 5), (32, 64, 3),
                    (32, 128, 2), (16, 256, 4), (16, 8, 3), (64, 1024, 2)]
STORE_SIZES = [(1, 1, 1, 0), (2, 3, 5, 1), (3, 4, 4, 2), (1, 9, 9, 0), (2, 2, 3, 3), (0, 3, 3, 0),
               (2, 17, 19, 7)]


def _row_beats(e_bytes: int, bus_bytes: int, x: int, elem: int) -> int:
    """Beats a row of ``x`` elements from DRAM element ``elem`` touches."""
    first, end = elem * e_bytes, (elem + x) * e_bytes
    return -(-end // bus_bytes) - first // bus_bytes if x else 0


def _run_writer(geometry: tuple[int, int, int], size: tuple[int, ...], sram: int,
                stall: bool, seed: int, stream: bool = False) -> None:
    """``stream``: the elements come from a stream (machine v2's drain unit) whose head,
    once there, stays until ``rd_next`` takes it; under ``stall`` it is there one cycle in
    two at random."""
    e_bits, bus_bits, max_burst = geometry
    e_bytes, bus_bytes = e_bits // 8, bus_bits // 8
    y, x, stride, base = size
    rng = random.Random(seed)
    dut = DmaWriter(e_bits, bus_bits, max_burst, stream=stream)
    depth = sram + y * x + 2
    buffer = np.frombuffer(bytes(rng.getrandbits(8) for _ in range(depth * e_bytes)), np.uint8)
    buffer = buffer.reshape(depth, e_bytes)
    n_elems = base + max(y, 1) * stride + x + 2
    n_elems += -n_elems % max(1, bus_bytes // e_bytes)  # whole beats
    initial = bytes(rng.getrandbits(8) for _ in range(n_elems * e_bytes))
    dram = bytearray(initial)
    bursts: list[tuple[int, int]] = []
    mem = dut.mem

    async def bench(ctx: Any) -> None:
        fields = dict(sram_base=sram, dram_base=base, y_size=y, x_size=x, x_stride=stride)
        for name, value in fields.items():
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        write: Any = None  # [byte address, beats left] or "resp"
        rd_data, done = 0, False
        head, shown = 0, False  # stream: the head element, and whether it is there
        for _ in range(20000):
            if stream:
                shown = shown or (head < y * x and (not stall or rng.random() < 0.5))
                element = int.from_bytes(buffer[(sram + head) % depth].tobytes(), "little")
                ctx.set(dut.rd_valid, shown)
                ctx.set(dut.rd_data, element if shown else rng.getrandbits(e_bits))
            else:
                ctx.set(dut.rd_data, rd_data)
            ctx.set(mem.wreq.ready, write is None and (not stall or rng.random() < 0.6))
            ready = isinstance(write, list) and (not stall or rng.random() < 0.6)
            ctx.set(mem.wdata.ready, ready)
            resp = write == "resp" and (not stall or rng.random() < 0.5)
            ctx.set(mem.wresp.valid, resp)
            if ctx.get(dut.done):
                done = True
                break
            rd_en, rd_addr = ctx.get(dut.rd_en), ctx.get(dut.rd_addr)
            request = ctx.get(mem.wreq.valid) and ctx.get(mem.wreq.ready)
            w_addr, w_beats = ctx.get(mem.wreq.payload.addr), ctx.get(mem.wreq.payload.beats)
            beat = ready and ctx.get(mem.wdata.valid)
            w_beat = mem.wdata.payload
            w_data, w_last, w_strb = ctx.get(w_beat.data), ctx.get(w_beat.last), ctx.get(w_beat.strb)
            taken = stream and ctx.get(dut.rd_next)
            await ctx.tick()
            if taken:
                assert shown, "rd_next without an element"
                head, shown = head + 1, False
            if rd_en:  # the read port: data one cycle after the address
                rd_data = int.from_bytes(buffer[rd_addr % depth].tobytes(), "little")
            if resp:
                write = None
            if beat:
                assert w_last == (write[1] == 1), "wdata_last on the wrong beat"
                assert write[0] + bus_bytes <= len(dram), "write past the tensor"
                data = w_data.to_bytes(bus_bytes, "little")
                for lane in range(bus_bytes):  # the bytes the strobes select, only
                    if w_strb >> lane & 1:
                        dram[write[0] + lane] = data[lane]
                write = "resp" if write[1] == 1 else [write[0] + bus_bytes, write[1] - 1]
            if request:
                assert w_addr % bus_bytes == 0 and 1 <= w_beats <= max_burst, (w_addr, w_beats)
                bursts.append((w_addr, w_beats))
                write = [w_addr, w_beats]
        assert done, "the DMA writer did not finish"
        assert write is None, "done before the last write response"

    _simulate(dut, bench)
    expected = np.frombuffer(initial, np.uint8).reshape(n_elems, e_bytes).copy()
    for r in range(y):
        row = base + r * stride
        expected[row : row + x] = buffer[sram + r * x : sram + (r + 1) * x]
    got = np.frombuffer(bytes(dram), np.uint8).reshape(n_elems, e_bytes)
    np.testing.assert_array_equal(got, expected)
    beats = sum(_row_beats(e_bytes, bus_bytes, x, base + r * stride) for r in range(y))
    assert sum(b for _, b in bursts) == beats, "beats other than the rows' own"


@pytest.mark.parametrize("geometry", WRITE_GEOMETRIES, ids=_geometry_id)
@pytest.mark.parametrize("size", STORE_SIZES[1:4] + STORE_SIZES[5:], ids=lambda s: "y{}x{}s{}b{}".format(*s))
@pytest.mark.parametrize("stall", [False, True], ids=["eager", "stalls"])
def test_dma_writer_stores_a_stream(geometry: tuple[int, int, int], size: tuple[int, ...],
                                    stall: bool) -> None:
    """Machine v2's writer (``stream``) on the drain unit's stream: the same DRAM."""
    _run_writer(geometry, size, sram=2, stall=stall, seed=size[1] * 13 + stall, stream=True)


@pytest.mark.parametrize("geometry", WRITE_GEOMETRIES, ids=_geometry_id)
@pytest.mark.parametrize("size", STORE_SIZES, ids=lambda s: "y{}x{}s{}b{}".format(*s))
@pytest.mark.parametrize("stall", [False, True], ids=["eager", "backpressure"])
def test_dma_writer_stores_rows(geometry: tuple[int, int, int], size: tuple[int, ...],
                                stall: bool) -> None:
    _run_writer(geometry, size, sram=2, stall=stall, seed=size[1] * 11 + stall)


# -- AxiArbiter ----------------------------------------------------------------------------

def _beat_value(addr: int, bus_bits: int) -> int:
    return (addr * 0x9E3779B1 + 0x5A) & ((1 << bus_bits) - 1)


def _run_arbiter_reads(count: int, requests: dict[int, int], bus_bits: int = 32) -> list[int]:
    """Masters ``i`` issue ``requests[i]`` bursts from cycle 0; returns the grant order."""
    bus_bytes = bus_bits // 8
    dut = AxiArbiter(count, bus_bits)
    plans = {i: [(0x1000 * (i + 1) + 0x100 * k, 1 + (i + k) % 3) for k in range(n)]
             for i, n in requests.items()}
    received: dict[int, list[int]] = {i: [] for i in requests}
    grants: list[int] = []

    async def bench(ctx: Any) -> None:
        todo = {i: list(p) for i, p in plans.items()}
        state = {i: "req" for i in todo}  # req / data / idle
        burst: Any = None  # [master, byte address, beats left]
        for _ in range(2000):
            if all(not t and state[i] == "idle" for i, t in todo.items()):
                break
            for i in range(count):
                port = dut.masters[i]
                req = i in todo and state[i] == "req"
                ctx.set(port.rreq.valid, req)
                if req:
                    ctx.set(port.rreq.payload.addr, todo[i][0][0])
                    ctx.set(port.rreq.payload.beats, todo[i][0][1])
                ctx.set(port.rdata.ready, i in todo and state[i] == "data")
            ctx.set(dut.m_axi_arready, burst is None)
            ctx.set(dut.m_axi_rvalid, burst is not None)
            if burst is not None:
                ctx.set(dut.m_axi_rdata, _beat_value(burst[1], bus_bits))
                ctx.set(dut.m_axi_rlast, burst[2] == 1)
            ar = ctx.get(dut.m_axi_arvalid) and burst is None
            araddr, arlen = ctx.get(dut.m_axi_araddr), ctx.get(dut.m_axi_arlen)
            rready = ctx.get(dut.m_axi_rready)
            accepted = [i for i in range(count) if ctx.get(dut.masters[i].rreq.ready)]
            beats = {i: (ctx.get(dut.masters[i].rdata.payload.data), ctx.get(dut.masters[i].rdata.payload.last))
                     for i in range(count) if ctx.get(dut.masters[i].rdata.valid)}
            await ctx.tick()
            if ar:
                owner = next(i for i, t in todo.items() if state[i] == "req" and t[0][0] == araddr)
                assert accepted == [owner], "rreq_ready went to another master"
                assert arlen == todo[owner][0][1] - 1
                grants.append(owner)
                state[owner] = "data"
                burst = [owner, araddr, arlen + 1]
            else:
                assert accepted == []
            if burst is not None and not ar:
                assert list(beats) == [burst[0]], "read data routed to the wrong master"
                assert beats[burst[0]] == (_beat_value(burst[1], bus_bits), burst[2] == 1)
                assert rready
                received[burst[0]].append(beats[burst[0]][0])
                if burst[2] == 1:
                    owner = burst[0]
                    todo[owner].pop(0)
                    state[owner] = "req" if todo[owner] else "idle"
                    burst = None
                else:
                    burst = [burst[0], burst[1] + bus_bytes, burst[2] - 1]
            else:
                assert beats == {}
        else:
            raise AssertionError("the arbiter did not serve every request")

    _simulate(dut, bench)
    for i, plan in plans.items():
        beats = [a + k * bus_bytes for a, n in plan for k in range(n)]
        assert received[i] == [_beat_value(addr, bus_bits) for addr in beats]
    return grants


def _round_robin(count: int, requests: dict[int, int]) -> list[int]:
    """Naive model: from the master after the last one granted, the first that still requests."""
    left, last, order = dict(requests), count - 1, []
    while any(left.values()):
        last = next((last + k) % count for k in range(1, count + 1) if left.get((last + k) % count))
        left[last] -= 1
        order.append(last)
    return order


ARBITER_CASES = [(1, {0: 3}), (2, {0: 2, 1: 2}), (4, {0: 2, 1: 2, 2: 2, 3: 2}), (4, {1: 3, 3: 3}),
                 (7, {0: 3, 2: 1, 6: 2}), (3, {2: 2, 0: 1})]


@pytest.mark.parametrize("count,requests", ARBITER_CASES)
def test_arbiter_grants_reads_round_robin(count: int, requests: dict[int, int]) -> None:
    assert _run_arbiter_reads(count, requests) == _round_robin(count, requests)


def _run_arbiter_writes(count: int, requests: dict[int, int], bus_bits: int = 64) -> list[int]:
    """Masters write bursts; returns the grant order, checks data and responses per master."""
    bus_bytes = bus_bits // 8
    dut = AxiArbiter(count, bus_bits)
    plans = {i: [(0x1000 * (i + 1) + 0x100 * k, 1 + (i + 2 * k) % 3) for k in range(n)]
             for i, n in requests.items()}
    written: dict[int, tuple[int, int]] = {}  # address → (data, strobes)
    responses: dict[int, int] = {i: 0 for i in requests}
    grants: list[int] = []

    async def bench(ctx: Any) -> None:
        todo = {i: list(p) for i, p in plans.items()}
        # per master: req / data (and the beat) / resp / idle
        state: dict[int, list[Any]] = {i: ["req", 0] for i in todo}
        slave: Any = None  # [master, address, beats left] then "resp"
        owner: Any = None
        for _ in range(2000):
            if all(s[0] == "idle" for s in state.values()):
                break
            for i in range(count):
                port, s = dut.masters[i], state.get(i, ["idle", 0])
                ctx.set(port.wreq.valid, s[0] == "req")
                ctx.set(port.wdata.valid, s[0] == "data")
                if s[0] in ("req", "data"):
                    addr, beats = todo[i][0]
                    ctx.set(port.wreq.payload.addr, addr)
                    ctx.set(port.wreq.payload.beats, beats)
                    ctx.set(port.wdata.payload.data, _beat_value(addr + s[1] * bus_bytes, bus_bits))
                    ctx.set(port.wdata.payload.strb, _beat_value(addr + s[1] * bus_bytes, bus_bytes))
                    ctx.set(port.wdata.payload.last, s[1] == beats - 1)
            ctx.set(dut.m_axi_awready, slave is None)
            ctx.set(dut.m_axi_wready, isinstance(slave, list))
            ctx.set(dut.m_axi_bvalid, slave == "resp")
            aw = ctx.get(dut.m_axi_awvalid) and slave is None
            awaddr, awlen = ctx.get(dut.m_axi_awaddr), ctx.get(dut.m_axi_awlen)
            w = isinstance(slave, list) and ctx.get(dut.m_axi_wvalid)
            wdata, wlast = ctx.get(dut.m_axi_wdata), ctx.get(dut.m_axi_wlast)
            wstrb = ctx.get(dut.m_axi_wstrb)
            b = slave == "resp" and ctx.get(dut.m_axi_bready)
            accepted = [i for i in range(count) if ctx.get(dut.masters[i].wreq.ready)]
            taken = [i for i in range(count) if ctx.get(dut.masters[i].wdata.ready)]
            resp = [i for i in range(count) if ctx.get(dut.masters[i].wresp.valid)]
            await ctx.tick()
            if aw:
                owner = next(i for i in todo if state[i][0] == "req" and todo[i][0][0] == awaddr)
                assert accepted == [owner] and awlen == todo[owner][0][1] - 1
                grants.append(owner)
                state[owner] = ["data", 0]
                slave = [owner, awaddr, awlen + 1]
            else:
                assert accepted == []
            if w:
                assert taken == [owner], "wdata_ready went to another master"
                written[slave[1]] = (wdata, wstrb)
                assert wlast == (slave[2] == 1)
                state[owner][1] += 1
                if slave[2] == 1:
                    state[owner] = ["resp", 0]
                    slave = "resp"
                else:
                    slave = [owner, slave[1] + bus_bytes, slave[2] - 1]
            else:
                assert taken == []
            if b:
                assert resp == [owner], "write response routed to the wrong master"
                responses[owner] += 1
                todo[owner].pop(0)
                state[owner] = ["req", 0] if todo[owner] else ["idle", 0]
                slave = None
            else:
                assert resp == []
        else:
            raise AssertionError("the arbiter did not serve every write")

    _simulate(dut, bench)
    expected = {a + k * bus_bytes: (_beat_value(a + k * bus_bytes, bus_bits),
                                    _beat_value(a + k * bus_bytes, bus_bytes))
                for plan in plans.values() for a, n in plan for k in range(n)}
    assert written == expected
    assert responses == {i: len(p) for i, p in plans.items()}
    return grants


@pytest.mark.parametrize("count,requests", ARBITER_CASES)
def test_arbiter_grants_writes_round_robin(count: int, requests: dict[int, int]) -> None:
    assert _run_arbiter_writes(count, requests) == _round_robin(count, requests)


# -- parameter errors ----------------------------------------------------------------------

@pytest.mark.parametrize("make,message", [
    (lambda: TokenCounter(0), r"^token queue depth must be at least 1, not 0$"),
    (lambda: DmaReader(12, 32, 4),
     r"^DMA element width must be a power of two of at least 8 bits, not 12$"),
    (lambda: DmaReader(32, 4, 4),
     r"^DMA bus width must be a power of two between 8 and 1024 bits, not 4$"),
    (lambda: DmaWriter(32, 2048, 4),
     r"^DMA bus width must be a power of two between 8 and 1024 bits, not 2048$"),
    (lambda: DmaReader(32, 32, 0), r"^DMA burst length must be 1\.\.256 beats, not 0$"),
    (lambda: DmaReader((), 32, 4), r"^a DMA engine needs at least one element width$"),
    (lambda: DmaReader((32, 24), 32, 4),
     r"^DMA element width must be a power of two of at least 8 bits, not 24$"),
    (lambda: DmaWriter((32, 128), 32, 4),
     r"^DMA element width must be a power of two of at least 8 bits, not \(32, 128\)$"),
    (lambda: DmaWriter(32, 32, 257), r"^DMA burst length must be 1\.\.256 beats, not 257$"),
    (lambda: AxiArbiter(0, 32), r"^arbiter master count must be at least 1, not 0$"),
    (lambda: AxiArbiter(2, 48),
     r"^AXI data width must be a power of two between 8 and 1024 bits, not 48$"),
    (lambda: Fetch(preset("tiny"), 24, 4),
     r"^fetch bus width must be a power of two between 8 and 1024 bits, not 24$"),
    (lambda: Fetch(preset("tiny"), 32, 4, words=16),
     r"^instructions move in 1, 2, 4 or 8 words \(insn_move_cycles\), not 16$"),
    (lambda: CommandQueue(0, 8), r"^command queue depth must be at least 1, not 0$"),
    (lambda: CommandQueue(4, 3), r"^instructions move in 1, 2, 4 or 8 words \(insn_move_cycles\), not 3$"),
    (lambda: GemmCore(preset("tiny"), fold=3),
     r"^the GEMM core's fold must be a positive integer dividing BLOCK_OUT \(4\), not 3$"),
    (lambda: AluLanes(preset("tiny"), fold=0),
     r"^the ALU's fold must be a positive integer dividing BATCH·BLOCK_OUT \(4\), not 0$"),
])
@pytest.mark.usefixtures("no_unused_elaboratable")
def test_bad_parameters_are_refused(make: Callable[[], object], message: str) -> None:
    """A refused component raises at once and leaves no UnusedElaboratable warning behind
    (it was never meant to be elaborated)."""
    with pytest.raises(ValueError, match=message):
        make()

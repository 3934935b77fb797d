"""The SDRAM controller on the model of its part: every AXI burst keeps its
data, and the model's datasheet checks (an ``AssertionError`` naming the rule) hold on the
controller's command stream — bursts that cross rows and banks, refresh through long idle
spells and long bursts, read back-pressure."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from amaranth import Module
from amaranth.sim import Simulator, SimulatorContext
from hypothesis import given, settings
from hypothesis import strategies as st

from openvta.hw.cosim.sdram_model import SdramModel, SdramSystem, attach
from openvta.hw.rtl.host_port import AxiJoin, ByteToAxi
from openvta.hw.rtl.sdram import AS4C32M16SB_7, SdramController
from openvta.isa import ConfigError, Timing

CLOCK = 50.0
ROWS = 4  # rows simulated per bank: 32 KiB
SIZE = ROWS * AS4C32M16SB_7.banks * AS4C32M16SB_7.columns * 2


def system(bus_bytes: int, read_beats: int = 4) -> tuple[Module, SdramController]:
    m = Module()
    m.submodules.ctrl = ctrl = SdramController(AS4C32M16SB_7, CLOCK, bus_bytes, init_us=1.0, read_beats=read_beats)
    m.submodules.part = part = SdramModel(AS4C32M16SB_7, CLOCK, rows=ROWS)
    attach(m, ctrl, part)
    return m, ctrl


async def handshake(ctx: SimulatorContext, valid: object, ready: object) -> int:
    """Raise ``valid`` until the cycle where ``ready`` is high too; returns the cycles taken."""
    cycles = 1
    ctx.set(valid, 1)
    while not ctx.get(ready):
        await ctx.tick()
        cycles += 1
    await ctx.tick()
    ctx.set(valid, 0)
    return cycles


async def write_burst(ctx: SimulatorContext, c: SdramController, addr: int, beats: list[int],
                      strobes: list[int]) -> int:
    """One write burst; returns the cycles from AWVALID to the response."""
    ctx.set(c.s_axi_awaddr, addr)
    ctx.set(c.s_axi_awlen, len(beats) - 1)
    cycles = await handshake(ctx, c.s_axi_awvalid, c.s_axi_awready)
    for i, (data, strb) in enumerate(zip(beats, strobes)):
        ctx.set(c.s_axi_wdata, data)
        ctx.set(c.s_axi_wstrb, strb)
        ctx.set(c.s_axi_wlast, i == len(beats) - 1)
        cycles += await handshake(ctx, c.s_axi_wvalid, c.s_axi_wready)
    return cycles + await handshake(ctx, c.s_axi_bready, c.s_axi_bvalid)


async def read_burst(ctx: SimulatorContext, c: SdramController, addr: int, beats: int,
                     stall: random.Random | None = None) -> list[int]:
    ctx.set(c.s_axi_araddr, addr)
    ctx.set(c.s_axi_arlen, beats - 1)
    await handshake(ctx, c.s_axi_arvalid, c.s_axi_arready)
    got: list[int] = []
    while len(got) < beats:
        ready = stall is None or stall.random() < 0.3
        ctx.set(c.s_axi_rready, ready)
        if ready and ctx.get(c.s_axi_rvalid):
            got.append(ctx.get(c.s_axi_rdata))
            assert ctx.get(c.s_axi_rlast) == (len(got) == beats)
        await ctx.tick()
    ctx.set(c.s_axi_rready, 0)
    return got


def simulate(bus_bytes: int, bench, read_beats: int = 4) -> None:
    m, ctrl = system(bus_bytes, read_beats)
    sim = Simulator(m)
    sim.add_clock(1e-6 / CLOCK)

    async def run(ctx: SimulatorContext) -> None:
        await bench(ctx, ctrl)

    sim.add_testbench(run)
    sim.run()


def merge(memory: bytearray, addr: int, bus_bytes: int, beats: list[int], strobes: list[int]) -> None:
    for i, (data, strb) in enumerate(zip(beats, strobes)):
        for lane in range(bus_bytes):
            if strb >> lane & 1:
                memory[addr + i * bus_bytes + lane] = data >> (8 * lane) & 0xFF


def beats_of(memory: bytearray, addr: int, bus_bytes: int, count: int) -> list[int]:
    return [int.from_bytes(memory[addr + i * bus_bytes:addr + (i + 1) * bus_bytes], "little") for i in range(count)]


@st.composite
def bursts(draw: st.DrawFn, bus_bytes: int) -> list[tuple]:
    """Write and read bursts inside the simulated rows, never across 4 KiB."""
    out: list[tuple] = []
    for _ in range(draw(st.integers(1, 5))):
        beats = draw(st.integers(1, 24))
        addr = draw(st.integers(0, (SIZE - beats * bus_bytes) // bus_bytes)) * bus_bytes
        if addr // 4096 != (addr + beats * bus_bytes - 1) // 4096:
            addr = (addr + beats * bus_bytes - 1) // 4096 * 4096 - beats * bus_bytes
            addr = max(addr, 0)
        if draw(st.booleans()):
            seed = draw(st.integers(0, 2**32))
            out.append(("write", addr, beats, seed))
        else:
            out.append(("read", addr, beats))
    return out


@pytest.mark.parametrize("bus_bytes", [8, 2])
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_random_bursts_keep_their_data_within_the_parts_timings(bus_bytes: int, data: st.DataObject) -> None:
    plan = data.draw(bursts(bus_bytes))
    memory = bytearray(SIZE)

    async def bench(ctx: SimulatorContext, c: SdramController) -> None:
        for step in plan:
            if step[0] == "write":
                _, addr, count, seed = step
                rng = random.Random(seed)
                beats = [rng.getrandbits(8 * bus_bytes) for _ in range(count)]
                strobes = [rng.choice([(1 << bus_bytes) - 1, rng.getrandbits(bus_bytes)]) for _ in range(count)]
                await write_burst(ctx, c, addr, beats, strobes)
                merge(memory, addr, bus_bytes, beats, strobes)
            else:
                _, addr, count = step
                assert await read_burst(ctx, c, addr, count) == beats_of(memory, addr, bus_bytes, count)

    simulate(bus_bytes, bench)


def test_bursts_across_rows_and_banks_with_back_pressure_and_refresh() -> None:
    """A 64-beat burst over a row's end (into the next bank) and over the last bank's row end
    (a PRECHARGE and ACTIVE of bank 0 mid-burst), read back with RREADY low 70 % of the time,
    through more than nine refresh intervals (the model stops at the ninth one missed)."""
    bus_bytes = 8
    rng = random.Random(1)
    row_bytes = AS4C32M16SB_7.columns * 2
    starts = [row_bytes - 256, 4 * row_bytes - 256, 0]  # bank 0 → 1; bank 3 row 0 → bank 0 row 1; bank 0 row 0

    async def bench(ctx: SimulatorContext, c: SdramController) -> None:
        memory = bytearray(SIZE)
        for addr in starts:
            beats = [rng.getrandbits(64) for _ in range(64)]
            await write_burst(ctx, c, addr, beats, [0xFF] * 64)
            merge(memory, addr, bus_bytes, beats, [0xFF] * 64)
        for addr in starts:
            assert await read_burst(ctx, c, addr, 64, stall=rng) == beats_of(memory, addr, bus_bytes, 64)
        refi = AS4C32M16SB_7.timing(CLOCK).t_refi
        await ctx.tick().repeat(10 * refi)  # idle: the refreshes go on
        assert await read_burst(ctx, c, starts[1], 64) == beats_of(memory, starts[1], bus_bytes, 64)

    simulate(bus_bytes, bench)


def test_an_open_row_streams_one_word_a_cycle() -> None:
    """After the row is open, a 64-beat write of 8-byte beats takes 4 cycles a beat and a few
    for the address and the response."""
    async def bench(ctx: SimulatorContext, c: SdramController) -> None:
        while not ctx.get(c.ready):
            await ctx.tick()
        await write_burst(ctx, c, 0, [1] * 4, [0xFF] * 4)  # opens bank 0's row 0
        cycles = await write_burst(ctx, c, 256, list(range(64)), [0xFF] * 64)
        assert 256 <= cycles <= 256 + 6, cycles

    simulate(8, bench)


@pytest.mark.parametrize("kwargs, message", [
    ({"clock_mhz": 150.0}, r"AS4C32M16SB-7 runs at most at 142.9 MHz, not 150"),
    ({"bus_bytes": 1}, r"bus_bytes must be a power of two from the part's 2 to 128, not 1"),
    ({"bus_bytes": 12}, r"bus_bytes must be a power of two from the part's 2 to 128, not 12"),
    ({"init_us": -1}, r"init_us must be a non-negative number, not -1"),
    ({"read_beats": 1}, r"read_beats must be an integer of at least 2, not 1"),
])
def test_refused_parameters(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SdramController(**kwargs)


def test_a_compiled_conv2d_through_the_sdram_equals_the_functional_simulator() -> None:
    """The accelerator's AXI master on the SDRAM controller and the part's model, inside the
    Verilated design (``RtlBackend(memory="sdram")``): the final DRAM and the event counters
    are the functional simulator's, and the cycles the cycle model's board timing's."""
    import numpy as np

    import openvta
    from openvta.hw.cosim.backend import RtlBackend
    from openvta.isa import EVENT_COUNTERS, sdram_timing
    from openvta.sim.cycle import simulate_cycles
    from openvta.sim.functional import run as run_functional

    op = openvta.operator("conv2d", config="tiny", hw=8, ci=16, co=16, kernel=3, pad=1, vthreads=2)
    rng = np.random.default_rng(0)
    shapes = op.logical_shapes
    program = op.build({"data": rng.integers(-8, 8, size=shapes["data"], dtype=np.int8),
                        "weight": rng.integers(-8, 8, size=shapes["weight"], dtype=np.int8),
                        "bias": rng.integers(-64, 64, size=shapes["bias"], dtype=np.int32)})
    golden = run_functional(program)
    sdram = RtlBackend(memory="sdram").run(program)
    np.testing.assert_array_equal(sdram.dram, golden.dram)
    for counter in EVENT_COUNTERS:
        assert sdram.counters[counter.value] == golden.counters[counter.value], counter.value
    # the cycle model's board timing (calibrated on ResNet layers on small) on tiny's 32-bit bus
    model = simulate_cycles(program, sdram_timing(program.config)).counters["cycles"]
    assert abs(model - sdram.counters["cycles"]) <= 0.05 * sdram.counters["cycles"], (model, sdram.counters)


def test_a_failed_assertion_of_the_design_is_the_error_in_one_line(tmp_path: object) -> None:
    """Verilator's line for an assertion (as a run of a controller without tRCD printed it)
    becomes the run's error, the rule's name first."""
    from pathlib import Path

    from openvta.hw.cosim.runner import _failed_assertion

    log = Path(str(tmp_path)) / "sim.log"
    log.write_text("   100.00ns WARNING  py.warnings   something\n"
                   "SDRAM AS4C32M16SB-7: tRCD: READ or WRITE to bank 2 1 cycles after its ACTIVE (needs 2) at cycle 115"
                   "[1210000] %Error: openvta_top.v:29302: Assertion failed in openvta_top_mem.sdram.model: "
                   "'assert' failed.\n%Error: openvta_top.v:29302: Verilog $stop\n")
    assert _failed_assertion(log) == ("SDRAM AS4C32M16SB-7: tRCD: READ or WRITE to bank 2 1 cycles after its ACTIVE "
                                      "(needs 2) at cycle 115 (an assertion of openvta_top_mem.sdram.model failed; "
                                      "the simulation stopped)")


class _Port:
    """One of AxiJoin's master ports under the ``s_axi_*`` names the burst helpers drive."""

    def __init__(self, join: object, k: int) -> None:
        self._join, self._k = join, k

    def __getattr__(self, name: str) -> object:
        return getattr(self._join, f"m{self._k}_axi_" + name[len("s_axi_"):])


def test_two_masters_share_the_controller_burst_by_burst() -> None:
    """AxiJoin (the SoC's core and bridge on the SDRAM's one port): two masters writing and
    reading their own regions at once, through the controller on the part's model, each
    reading back what it wrote."""
    bus_bytes = 8
    m = Module()
    m.submodules.ctrl = ctrl = SdramController(AS4C32M16SB_7, CLOCK, bus_bytes, init_us=1.0)
    m.submodules.part = part = SdramModel(AS4C32M16SB_7, CLOCK, rows=ROWS)
    m.submodules.join = join = AxiJoin(bus_bytes * 8)
    attach(m, ctrl, part)
    for name, member in join.signature.members.items():
        if name.startswith("m_axi_"):
            theirs = getattr(ctrl, "s_axi_" + name[len("m_axi_"):])
            m.d.comb += theirs.eq(getattr(join, name)) if member.flow.name == "Out" else \
                getattr(join, name).eq(theirs)
    sim = Simulator(m)
    sim.add_clock(1e-6 / CLOCK)
    seen: dict[int, list[int]] = {}

    def master(k: int, base: int):
        async def bench(ctx: SimulatorContext) -> None:
            port = _Port(join, k)
            beats = [random.Random(k).getrandbits(64) for _ in range(32)]
            for start in (0, 16 * bus_bytes):
                await write_burst(ctx, port, base + start, beats[start // bus_bytes:][:16], [0xFF] * 16)
            seen[k] = await read_burst(ctx, port, base, 32)
            assert seen[k] == beats
        return bench

    sim.add_testbench(master(0, 0))
    sim.add_testbench(master(1, 8192))
    sim.run()
    assert set(seen) == {0, 1}


def test_a_master_that_stalls_a_burst_cannot_starve_the_refresh() -> None:
    """A read burst whose R beats are not taken, and a write burst whose W beats do not
    come, for ten tREFI each: the controller interrupts the burst at a beat for the owed
    refreshes (the model stops at the ninth interval missed) and the data stay right."""
    bus_bytes = 8
    refi = AS4C32M16SB_7.timing(CLOCK).t_refi
    beats = [random.Random(5).getrandbits(64) for _ in range(16)]

    async def bench(ctx: SimulatorContext, c: SdramController) -> None:
        ctx.set(c.s_axi_awaddr, 0)
        ctx.set(c.s_axi_awlen, len(beats) - 1)
        await handshake(ctx, c.s_axi_awvalid, c.s_axi_awready)
        for i, data in enumerate(beats):
            if i == 8:
                await ctx.tick().repeat(10 * refi)  # no W beat for ten intervals
            ctx.set(c.s_axi_wdata, data)
            ctx.set(c.s_axi_wstrb, 0xFF)
            ctx.set(c.s_axi_wlast, i == len(beats) - 1)
            await handshake(ctx, c.s_axi_wvalid, c.s_axi_wready)
        await handshake(ctx, c.s_axi_bready, c.s_axi_bvalid)
        ctx.set(c.s_axi_araddr, 0)
        ctx.set(c.s_axi_arlen, len(beats) - 1)
        await handshake(ctx, c.s_axi_arvalid, c.s_axi_arready)
        await ctx.tick().repeat(10 * refi)  # the read FIFO full, RREADY low
        got = []
        ctx.set(c.s_axi_rready, 1)
        for _ in range(len(beats) * 16):
            if ctx.get(c.s_axi_rvalid):
                got.append(ctx.get(c.s_axi_rdata))
            await ctx.tick()
        assert got == beats

    simulate(bus_bytes, bench)


@pytest.mark.parametrize("call, error, message", [
    (lambda: Timing(dram_channels=3), ConfigError, r"^dram_channels must be 1 or 2, not 3$"),
    (lambda: Timing(dram_beat_cycles=0), ConfigError, r"^dram_beat_cycles must be at least 1, not 0$"),
    (lambda: Timing(insn_move_cycles=16), ConfigError,
     r"^insn_move_cycles must be 1, 2, 4 or 8 \(instructions moved in words of 128, 64, 32, 16 bits\), not 16$"),
    (lambda: ByteToAxi(40, 64), ValueError, r"^addr_width must be an integer from 10 to 32, not 40$"),
    (lambda: SdramSystem(8, 1000), ValueError,
     r"^dram_bytes must be a multiple of 8192 up to 67108864 \(AS4C32M16SB-7\), not 1000$"),
])
def test_refused_memory_options(call: Callable[[], object], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_an_image_larger_than_the_sdram_is_refused_before_any_build(tmp_path: object) -> None:
    from openvta.hw.cosim.backend import RtlBackend
    from openvta.hw.cosim.runner import RtlError
    from openvta.isa import preset

    backend = RtlBackend(memory="sdram", build_root=str(tmp_path))
    with pytest.raises(RtlError, match=r"^the program's DRAM image \(100000000 bytes\) does not fit the SDRAM "
                                       r"\(AS4C32M16SB-7, 67108864 bytes\)$"):
        backend.build_dir(preset("tiny"), 100_000_000)

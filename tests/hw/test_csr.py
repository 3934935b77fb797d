"""ControlRegisters in Amaranth's simulator, against a naive model of the register map."""

from __future__ import annotations

import gc
import random
import re
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

amaranth = pytest.importorskip("amaranth")

from amaranth.hdl import Fragment  # noqa: E402
from amaranth.sim import Simulator  # noqa: E402

from openvta.hw.rtl.csr import ControlRegisters  # noqa: E402
from openvta.isa.counters import (  # noqa: E402
    COUNTER_BASE,
    HW_COUNTERS,
    REG_CONTROL,
    REG_COUNTERS,
    REG_INSN_ADDR,
    REG_INSN_COUNT,
    REG_STATUS,
    CounterSet,
)

Bench = Callable[[Any, ControlRegisters], Coroutine[Any, Any, None]]
MASK64 = (1 << 64) - 1


class RegisterModel:
    """The register map as plain Python: what a read at ``addr`` must return."""

    def __init__(self, counters: list[int], present: CounterSet = CounterSet.ALL) -> None:
        self.insn_addr = 0
        self.insn_count = 0
        self.present = present
        # slot k -> value: "all" puts counter k at slot k, the others at their HW_COUNTERS slot
        slots = (range(len(counters)) if present is CounterSet.ALL
                 else [HW_COUNTERS.index(c) for c in present.counters])
        self.counters = dict(zip(slots, counters))

    def write(self, addr: int, value: int) -> None:
        if addr & ~3 == REG_INSN_ADDR:
            self.insn_addr = value
        elif addr & ~3 == REG_INSN_COUNT:
            self.insn_count = value

    def read(self, addr: int, busy: int, done_latched: int) -> int:
        addr &= ~3
        fixed = {REG_CONTROL: busy, REG_STATUS: done_latched,
                 REG_INSN_ADDR: self.insn_addr, REG_INSN_COUNT: self.insn_count,
                 REG_COUNTERS: int(self.present)}
        if addr in fixed:
            return fixed[addr]
        k, high = divmod(addr - COUNTER_BASE, 8)
        if addr >= COUNTER_BASE and k in self.counters:
            return (self.counters[k] >> (32 if high else 0)) & 0xFFFF_FFFF
        return 0


def simulate(dut: ControlRegisters, bench: Bench, *, watch_start: list[int] | None = None) -> None:
    """Run ``bench(ctx, dut)``; with ``watch_start``, append the cycle of every start pulse."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def testbench(ctx: Any) -> None:
        await bench(ctx, dut)

    sim.add_testbench(testbench)
    if watch_start is not None:
        async def watcher(ctx: Any) -> None:
            cycle = 0
            async for _clk, _rst, start in ctx.tick().sample(dut.start):
                if start:
                    watch_start.append(cycle)
                cycle += 1
        sim.add_testbench(watcher, background=True)
    sim.run()


async def handshake(ctx: Any, channels: list[tuple[Any, Any, list[tuple[Any, int]]]]) -> int:
    """Present every ``(valid, ready, payload)`` channel at once; drop each when taken.

    Returns the number of cycles until the last one was accepted.
    """
    pending = list(channels)
    for valid, _ready, payload in pending:
        for signal, value in payload:
            ctx.set(signal, value)
        ctx.set(valid, 1)
    cycles = 0
    while pending:
        taken = [bool(ctx.get(ready)) for _valid, ready, _payload in pending]
        await ctx.tick()
        cycles += 1
        for (valid, _ready, _payload), done in zip(pending, taken):
            if done:
                ctx.set(valid, 0)
        pending = [c for c, done in zip(pending, taken) if not done]
        assert cycles < 20, "AXI-Lite channel never became ready"
    return cycles


async def axil_write(ctx: Any, dut: ControlRegisters, addr: int, value: int, *,
                     order: str = "together", gap: int = 0, strobe: int = 0xF,
                     b_delay: int = 0) -> None:
    """One AXI-Lite write: AW and W ``together``, ``aw_first`` or ``w_first``."""
    aw = (dut.s_axil_awvalid, dut.s_axil_awready, [(dut.s_axil_awaddr, addr)])
    w = (dut.s_axil_wvalid, dut.s_axil_wready, [(dut.s_axil_wdata, value), (dut.s_axil_wstrb, strobe)])
    if order == "together":
        await handshake(ctx, [aw, w])
    else:
        first, second = (aw, w) if order == "aw_first" else (w, aw)
        await handshake(ctx, [first])
        for _ in range(gap):
            await ctx.tick()
        await handshake(ctx, [second])
    for _ in range(b_delay):
        await ctx.tick()
    ctx.set(dut.s_axil_bready, 1)
    for _ in range(20):
        if ctx.get(dut.s_axil_bvalid):
            assert ctx.get(dut.s_axil_bresp) == 0
            await ctx.tick()
            ctx.set(dut.s_axil_bready, 0)
            return
        await ctx.tick()
    raise AssertionError(f"no write response for address {addr:#x}")


async def axil_read(ctx: Any, dut: ControlRegisters, addr: int, *, r_delay: int = 0) -> int:
    await handshake(ctx, [(dut.s_axil_arvalid, dut.s_axil_arready, [(dut.s_axil_araddr, addr)])])
    for _ in range(r_delay):
        await ctx.tick()
        assert ctx.get(dut.s_axil_rvalid), "RVALID must hold until RREADY"
        assert not ctx.get(dut.s_axil_arready), "no new read while a response waits"
    ctx.set(dut.s_axil_rready, 1)
    for _ in range(20):
        if ctx.get(dut.s_axil_rvalid):
            assert ctx.get(dut.s_axil_rresp) == 0
            value = ctx.get(dut.s_axil_rdata)
            await ctx.tick()
            ctx.set(dut.s_axil_rready, 0)
            return int(value)
        await ctx.tick()
    raise AssertionError(f"no read response for address {addr:#x}")


# -- constructor ---------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 2, 3, 480])
def test_counter_count_edges_elaborate(count: int) -> None:
    dut = ControlRegisters(count)
    assert dut.counter_count == count
    Fragment.get(dut, None)


# A component that refuses its parameters must not leave an UnusedElaboratable warning.
REJECTED = pytest.mark.usefixtures("no_unused_elaboratable")


@REJECTED
@pytest.mark.parametrize("bad", [1.0, "4", True, None])
def test_counter_count_must_be_an_integer(bad: object) -> None:
    with pytest.raises(TypeError, match=rf"^counter_count must be an integer, not {re.escape(repr(bad))}$"):
        ControlRegisters(bad)
    gc.collect()


@REJECTED
@pytest.mark.parametrize("bad", [-1, 481])
def test_counter_count_must_fit_the_window(bad: int) -> None:
    with pytest.raises(ValueError, match=rf"^counter_count must be between 0 and 480 .*, not {bad}$"):
        ControlRegisters(bad)
    gc.collect()


# -- registers -----------------------------------------------------------------------------


@pytest.mark.parametrize("order,gap", [("together", 0), ("aw_first", 0), ("aw_first", 3),
                                       ("w_first", 0), ("w_first", 3)])
def test_insn_registers_read_back_whatever_the_channel_order(order: str, gap: int) -> None:
    values = {REG_INSN_ADDR: 0xDEAD_BEE0, REG_INSN_COUNT: 0xFFFF_FFFF}

    async def bench(ctx: Any, dut: ControlRegisters) -> None:
        for addr, value in values.items():
            assert await axil_read(ctx, dut, addr) == 0
            await axil_write(ctx, dut, addr, value, order=order, gap=gap)
        assert ctx.get(dut.insn_addr) == values[REG_INSN_ADDR]
        assert ctx.get(dut.insn_count) == values[REG_INSN_COUNT]
        for addr, value in values.items():
            assert await axil_read(ctx, dut, addr) == value

    simulate(ControlRegisters(2), bench)


def test_wstrb_and_low_address_bits_are_ignored() -> None:
    async def bench(ctx: Any, dut: ControlRegisters) -> None:
        await axil_write(ctx, dut, REG_INSN_ADDR | 3, 0x1234_5678, strobe=0b0001)
        assert await axil_read(ctx, dut, REG_INSN_ADDR) == 0x1234_5678
        assert await axil_read(ctx, dut, REG_INSN_ADDR | 2) == 0x1234_5678

    simulate(ControlRegisters(1), bench)


def test_start_pulses_once_per_write_of_bit_0() -> None:
    pulses: list[int] = []

    async def bench(ctx: Any, dut: ControlRegisters) -> None:
        for value in (1, 0, 0xFFFF_FFFE, 3, 1):
            await axil_write(ctx, dut, REG_CONTROL, value)
            for _ in range(3):
                await ctx.tick()

    simulate(ControlRegisters(1), bench, watch_start=pulses)
    assert len(pulses) == 3, pulses  # values 1, 3 and 1
    assert all(b - a > 1 for a, b in zip(pulses, pulses[1:])), "start must be a one-cycle pulse"


def test_control_reads_busy_and_status_latches_done() -> None:
    async def bench(ctx: Any, dut: ControlRegisters) -> None:
        assert await axil_read(ctx, dut, REG_CONTROL) == 0
        ctx.set(dut.busy, 1)
        assert await axil_read(ctx, dut, REG_CONTROL) == 1
        assert await axil_read(ctx, dut, REG_STATUS) == 0
        ctx.set(dut.busy, 0)
        ctx.set(dut.done, 1)
        await ctx.tick()
        assert await axil_read(ctx, dut, REG_STATUS) == 1
        ctx.set(dut.done, 0)  # the status bit is a latch, not the level
        assert await axil_read(ctx, dut, REG_STATUS) == 1
        await axil_write(ctx, dut, REG_STATUS, 0)  # read-only: ignored
        assert await axil_read(ctx, dut, REG_STATUS) == 1
        await axil_write(ctx, dut, REG_CONTROL, 1)  # start clears it
        assert await axil_read(ctx, dut, REG_STATUS) == 0
        ctx.set(dut.done, 1)
        await ctx.tick()
        assert await axil_read(ctx, dut, REG_STATUS) == 1
        await axil_write(ctx, dut, REG_CONTROL, 1)  # done held high across start: no edge
        assert await axil_read(ctx, dut, REG_STATUS) == 0
        ctx.set(dut.done, 0)
        await ctx.tick()
        ctx.set(dut.done, 1)
        await ctx.tick()
        assert await axil_read(ctx, dut, REG_STATUS) == 1

    simulate(ControlRegisters(1), bench)


@pytest.mark.parametrize("count", [0, 1, 2, 3, len(HW_COUNTERS)])
def test_counters_read_as_low_and_high_words(count: int) -> None:
    rng = random.Random(count)
    values = [rng.getrandbits(64) for _ in range(count)]
    if count:
        values[-1] = MASK64
    model = RegisterModel(values)

    async def bench(ctx: Any, dut: ControlRegisters) -> None:
        for k, value in enumerate(values):
            ctx.set(dut.counters[k], value)
        # one counter past the end, to see that it reads 0
        for addr in range(COUNTER_BASE, COUNTER_BASE + 8 * (count + 1), 4):
            assert await axil_read(ctx, dut, addr) == model.read(addr, 0, 0), hex(addr)
        await axil_write(ctx, dut, COUNTER_BASE, 0)  # read-only: ignored
        if count:
            assert await axil_read(ctx, dut, COUNTER_BASE) == values[0] & 0xFFFF_FFFF

    simulate(ControlRegisters(count), bench)


@pytest.mark.parametrize("present", list(CounterSet), ids=lambda c: c.label)
def test_each_counter_set_reads_its_code_and_only_its_counters(present: CounterSet) -> None:
    """REG_COUNTERS reads the set's code; the counters it lacks read 0 at their slots."""
    rng = random.Random(int(present))
    values = [rng.getrandbits(64) | 1 << 63 for _ in present.counters]
    model = RegisterModel(values, present)

    async def bench(ctx: Any, dut: ControlRegisters) -> None:
        for k, value in enumerate(values):
            ctx.set(dut.counters[k], value)
        await axil_write(ctx, dut, REG_COUNTERS, 0xFFFF_FFFF)  # read-only: ignored
        assert await axil_read(ctx, dut, REG_COUNTERS) == int(present)
        for addr in range(COUNTER_BASE, COUNTER_BASE + 8 * len(HW_COUNTERS), 4):
            assert await axil_read(ctx, dut, addr) == model.read(addr, 0, 0), hex(addr)

    dut = ControlRegisters(len(present.counters), present.label)
    assert dut.counter_set is present
    simulate(dut, bench)


@REJECTED
def test_the_counter_set_must_be_named() -> None:
    with pytest.raises(ValueError, match=r"^counters must be one of 'all', 'cycles', 'none', "
                                         r"not 'some'$"):
        ControlRegisters(1, "some")
    gc.collect()


@REJECTED
@pytest.mark.parametrize("present, count", [("cycles", 0), ("cycles", len(HW_COUNTERS)), ("none", 1)])
def test_the_counter_count_must_match_the_counter_set(present: str, count: int) -> None:
    size = len(CounterSet[present.upper()].counters)
    with pytest.raises(ValueError, match=rf"^counter_count must be {size} for counters "
                                         rf"'{present}', not {count}$"):
        ControlRegisters(count, present)
    gc.collect()


def test_unmapped_addresses_read_zero_and_ignore_writes() -> None:
    unmapped = [0x014, 0x0FC, COUNTER_BASE + 8 * 3, 0xFFC]

    async def bench(ctx: Any, dut: ControlRegisters) -> None:
        await axil_write(ctx, dut, REG_INSN_ADDR, 0x40)
        await axil_write(ctx, dut, REG_INSN_COUNT, 7)
        for addr in unmapped:
            await axil_write(ctx, dut, addr, 0xFFFF_FFFF)
            assert await axil_read(ctx, dut, addr) == 0, hex(addr)
        assert await axil_read(ctx, dut, REG_INSN_ADDR) == 0x40
        assert await axil_read(ctx, dut, REG_INSN_COUNT) == 7

    simulate(ControlRegisters(3), bench)


def test_responses_wait_for_ready() -> None:
    async def bench(ctx: Any, dut: ControlRegisters) -> None:
        await axil_write(ctx, dut, REG_INSN_COUNT, 5, b_delay=4)
        assert await axil_read(ctx, dut, REG_INSN_COUNT, r_delay=4) == 5

    simulate(ControlRegisters(1), bench)


def test_random_traffic_matches_the_model() -> None:
    rng = random.Random(7)
    counters = [rng.getrandbits(64) for _ in range(4)]
    model = RegisterModel(counters)
    addrs = [REG_CONTROL, REG_STATUS, REG_INSN_ADDR, REG_INSN_COUNT, 0x20,
             *range(COUNTER_BASE, COUNTER_BASE + 8 * 5, 4)]

    async def bench(ctx: Any, dut: ControlRegisters) -> None:
        for k, value in enumerate(counters):
            ctx.set(dut.counters[k], value)
        for _ in range(120):
            addr = rng.choice(addrs)
            if rng.random() < 0.5 and addr != REG_CONTROL:
                value = rng.getrandbits(32)
                order = rng.choice(["together", "aw_first", "w_first"])
                await axil_write(ctx, dut, addr, value, order=order, gap=rng.randrange(3),
                                 b_delay=rng.randrange(3))
                model.write(addr, value)
            else:
                got = await axil_read(ctx, dut, addr, r_delay=rng.randrange(3))
                assert got == model.read(addr, 0, 0), hex(addr)

    simulate(ControlRegisters(len(counters)), bench)

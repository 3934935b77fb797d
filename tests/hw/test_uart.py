"""The UART and the host bridge in Amaranth's simulator.

The UART is checked against a bit-banged line (the 8N1 frame written out in Python)
and in a loopback; the bridge against a plain dict as its memory, with frames from
:mod:`openvta.hw.fpga.bridge_protocol` (the one definition of the protocol).
"""

from __future__ import annotations

import gc
import re
from typing import Any

import pytest

pytest.importorskip("amaranth")

from amaranth import Module  # noqa: E402
from amaranth.sim import Simulator  # noqa: E402

from openvta.hw.fpga import bridge_protocol as bp  # noqa: E402
from openvta.hw.rtl.axi_ram import AxiRam  # noqa: E402
from openvta.hw.rtl.bridge import Bridge  # noqa: E402
from openvta.hw.fpga.bridge_protocol import Command, Status  # noqa: E402
from openvta.hw.rtl.uart import UartRx, UartTx  # noqa: E402
from openvta.isa import COUNTER_BASE, HW_COUNTERS, REG_CONTROL, REG_INSN_ADDR, REG_INSN_COUNT  # noqa: E402
from openvta.isa.counters import REG_COUNTERS, Counter, CounterSet  # noqa: E402

DIVISORS = (4, 5, 7, 16)


def line_bits(byte: int, stop: int = 1) -> list[int]:
    """The 8N1 frame of ``byte`` as line levels: start, data LSB first, stop."""
    return [0, *((byte >> i) & 1 for i in range(8)), stop]


def run(dut: Any, *benches: Any, background: tuple = (), deadline: float = 1e-3) -> None:
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for bench in benches:
        sim.add_testbench(bench)
    for bench in background:
        sim.add_testbench(bench, background=True)
    sim.run_until(deadline) if not benches else sim.run()


# -- UART ----------------------------------------------------------------------------------


@pytest.mark.parametrize("divisor", DIVISORS)
def test_rx_receives_bytes_at_nominal_and_skewed_rates(divisor: int) -> None:
    data = [0x00, 0xFF, 0x55, 0xA5, 0x5A, 0x01, 0x80]
    dut = UartRx(divisor)
    got: list[int] = []
    errors: list[int] = []

    async def drive(ctx: Any) -> None:
        await ctx.tick().repeat(3)
        # Half the bytes 2 % slow: the sample point drifts, stays inside each bit.
        for n, byte in enumerate(data):
            period = divisor * (1.02 if n % 2 else 1.0)
            for k, level in enumerate(line_bits(byte)):
                ctx.set(dut.rx, level)
                await ctx.tick().repeat(round((k + 1) * period) - round(k * period))
        await ctx.tick().repeat(4 * divisor)

    async def watch(ctx: Any) -> None:
        async for _clk, _rst, valid, payload, error in ctx.tick().sample(
                dut.o.valid, dut.o.payload, dut.error):
            if valid:
                got.append(payload)
            if error:
                errors.append(1)

    run(dut, drive, background=(watch,))
    assert got == data
    assert errors == []


@pytest.mark.parametrize("divisor", (4, 9))
def test_rx_reports_a_low_stop_bit_and_ignores_a_glitch(divisor: int) -> None:
    dut = UartRx(divisor)
    got: list[int] = []
    errors: list[int] = []

    async def drive(ctx: Any) -> None:
        await ctx.tick().repeat(3)
        for level in line_bits(0x3C, stop=0):
            ctx.set(dut.rx, level)
            await ctx.tick().repeat(divisor)
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(2 * divisor)
        ctx.set(dut.rx, 0)  # shorter than half a bit: not a start bit
        await ctx.tick()
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(12 * divisor)
        for level in line_bits(0xC3):
            ctx.set(dut.rx, level)
            await ctx.tick().repeat(divisor)
        await ctx.tick().repeat(2 * divisor)

    async def watch(ctx: Any) -> None:
        async for _clk, _rst, valid, payload, error in ctx.tick().sample(
                dut.o.valid, dut.o.payload, dut.error):
            if valid:
                got.append(payload)
            errors.extend([1] * error)

    run(dut, drive, background=(watch,))
    assert (got, errors) == ([0xC3], [1])


@pytest.mark.parametrize("divisor", DIVISORS)
def test_tx_puts_each_frame_on_the_line_bit_by_bit(divisor: int) -> None:
    data = [0xA5, 0x00, 0xFF, 0x12]
    dut = UartTx(divisor)
    levels: list[int] = []

    async def feed(ctx: Any) -> None:
        for byte in data:
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, byte)
            await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)
        await ctx.tick().repeat(10 * divisor * (len(data) + 1))

    async def watch(ctx: Any) -> None:
        async for _clk, _rst, tx in ctx.tick().sample(dut.tx):
            levels.append(tx)

    run(dut, feed, background=(watch,))
    first = levels.index(0)
    assert all(levels[:first])
    expected = [level for byte in data for level in line_bits(byte) for _ in range(divisor)]
    assert levels[first:first + len(expected)] == expected  # back to back, no idle bits
    assert all(levels[first + len(expected):])


@pytest.mark.parametrize("divisor", (4, 6))
def test_loopback(divisor: int) -> None:
    m = Module()
    m.submodules.tx = tx = UartTx(divisor)
    m.submodules.rx = rx = UartRx(divisor)
    m.d.comb += rx.rx.eq(tx.tx)
    data = list(range(0, 256, 17))
    got: list[int] = []

    async def feed(ctx: Any) -> None:
        for byte in data:
            ctx.set(tx.i.valid, 1)
            ctx.set(tx.i.payload, byte)
            await ctx.tick().until(tx.i.ready)
        ctx.set(tx.i.valid, 0)
        await ctx.tick().repeat(12 * divisor)

    async def watch(ctx: Any) -> None:
        async for _clk, _rst, valid, payload in ctx.tick().sample(rx.o.valid, rx.o.payload):
            if valid:
                got.append(payload)

    run(m, feed, background=(watch,))
    assert got == data


# A component that refuses its parameters must not leave an UnusedElaboratable warning.
REJECTED = pytest.mark.usefixtures("no_unused_elaboratable")


@REJECTED
@pytest.mark.parametrize("component", (UartRx, UartTx))
@pytest.mark.parametrize("divisor, error", [
    (3, ValueError), (0, ValueError), (-8, ValueError), (4.0, TypeError), (True, TypeError)])
def test_divisor_is_checked(component: type, divisor: object, error: type) -> None:
    with pytest.raises(error, match=rf"^UART divisor must be (an integer|at least 4 clock "
                                    rf"cycles per bit), not {re.escape(repr(divisor))}$"):
        component(divisor)
    gc.collect()


# -- the bridge ----------------------------------------------------------------------------

MEM_BYTES = 1024
COUNTERS = [0x1_0000_0002, 7, (1 << 64) - 1]
TIMEOUT = 200


class BridgeBench:
    """The bridge with a dict as memory; frames in as bytes, replies out as bytes."""

    def __init__(self, *, gap: int = 1, tx_stall: int = 0, can_start: bool = True,
                 counters: CounterSet = CounterSet.ALL, mem_wait: int = 0) -> None:
        # "all" with three counters at slots 0..2; the other sets with their own counters
        self.values = COUNTERS if counters is CounterSet.ALL else COUNTERS[:len(counters.counters)]
        self.dut = Bridge(MEM_BYTES, len(self.values), TIMEOUT, can_start=can_start,
                          counters=counters)
        self.memory = {a: (a * 7 + 3) & 0xFF for a in range(MEM_BYTES)}  # sentinels
        self.starts: list[tuple[int, int]] = []
        self.errors = 0
        self.gap, self.tx_stall = gap, tx_stall
        self.mem_wait = mem_wait  # the memory is ready one cycle in mem_wait + 1
        self.done = self.busy = 0

    async def memory_port(self, ctx: Any) -> None:
        port = self.dut.mem
        cycle, ready, ready_addr = 0, 1, None
        ctx.set(port.ready, ready)
        async for _clk, _rst, addr, w_en, w_data, start, ia, ic, error in ctx.tick().sample(
                port.addr, port.w_en, port.w_data, self.dut.start, self.dut.insn_addr,
                self.dut.insn_count, self.dut.error):
            if ready:
                ready_addr = addr
                if w_en:
                    self.memory[addr] = w_data
            # the byte of a ready address, junk before it is ready
            ctx.set(port.r_data, self.memory[addr] if addr == ready_addr else 0xEE)
            cycle += 1
            ready = int(cycle % (self.mem_wait + 1) == 0)
            ctx.set(port.ready, ready)
            if start:
                self.starts.append((ia, ic))
            self.errors += error
            ctx.set(self.dut.done, self.done)
            ctx.set(self.dut.busy, self.busy)

    async def send(self, ctx: Any, frame: bytes, *, error_at: int | None = None) -> None:
        for n, byte in enumerate(frame):
            ctx.set(self.dut.rx.valid, 1)
            ctx.set(self.dut.rx.payload, byte)
            ctx.set(self.dut.rx_error, n == error_at)
            await ctx.tick()
            ctx.set(self.dut.rx.valid, 0)
            ctx.set(self.dut.rx_error, 0)
            if self.gap:
                await ctx.tick().repeat(self.gap)

    async def receive(self, ctx: Any, payload_bytes: int) -> bytes:
        out = bytearray()
        bound = ((4 * (payload_bytes + 3) * (self.tx_stall + 1) + 2 * bp.MAX_PAYLOAD) * (self.mem_wait + 1)
                 + TIMEOUT + 50)
        for _ in range(bound):
            stalled = self.tx_stall and len(out) % 2
            ctx.set(self.dut.tx.ready, 0)
            if stalled:
                await ctx.tick().repeat(self.tx_stall)
            ctx.set(self.dut.tx.ready, 1)
            _, _, valid, byte = await ctx.tick().sample(self.dut.tx.valid, self.dut.tx.payload)
            if valid:
                out.append(byte)
            if len(out) >= 3 and (out[1] != 0 or len(out) == payload_bytes + 3):
                ctx.set(self.dut.tx.ready, 0)
                return bytes(out)
        raise AssertionError(f"no complete reply; got {out.hex(' ')}")

    def exchange(self, *frames: tuple[bytes, int], error_at: int | None = None) -> list[bytes]:
        """Send each (frame, expected payload bytes); return the raw replies."""
        replies: list[bytes] = []
        counters = self.dut.counters

        async def bench(ctx: Any) -> None:
            for k, value in enumerate(self.values):
                ctx.set(counters[k], value)
            for frame, payload_bytes in frames:
                await self.send(ctx, frame, error_at=error_at)
                replies.append(await self.receive(ctx, payload_bytes))

        run(self.dut, bench, background=(self.memory_port,))
        return replies


def decode(replies: list[bytes], payloads: list[int]) -> list[bp.Reply]:
    return [bp.decode_reply(r, n) for r, n in zip(replies, payloads)]


@pytest.mark.parametrize("gap, tx_stall, mem_wait", [(0, 0, 0), (1, 0, 0), (3, 5, 0), (0, 0, 3)])
@pytest.mark.parametrize("addr, size", [(0, 1), (5, 4), (100, 17), (MEM_BYTES - 256, 256)])
def test_write_then_read_memory(addr: int, size: int, gap: int, tx_stall: int, mem_wait: int) -> None:
    """... and with a memory that is ready one cycle in four (``mem_wait``: the SDRAM's)."""
    bench = BridgeBench(gap=gap, tx_stall=tx_stall, mem_wait=mem_wait)
    data = bytes((i * 31 + 5) & 0xFF for i in range(size))
    before = dict(bench.memory)
    replies = bench.exchange((bp.encode_request(Command.WRITE_MEM, addr, payload=data), 0),
                             (bp.encode_request(Command.READ_MEM, addr, size), size))
    write, read = decode(replies, [0, size])
    assert (write.status, read.status, read.payload) == (Status.OK, Status.OK, data)
    expected = {**before, **{addr + i: b for i, b in enumerate(data)}}
    assert bench.memory == expected  # and nothing around it
    assert bench.errors == 0


@pytest.mark.parametrize("position", [1, 2, 5, 6, 7, 8, 11, 12])
def test_a_corrupted_byte_is_rejected_and_nothing_is_written(position: int) -> None:
    frame = bytearray(bp.encode_request(Command.WRITE_MEM, 16, payload=b"\x11\x22\x33\x44"))
    frame[position] ^= 0x04  # the checksum, a payload byte, the address, ...
    bench = BridgeBench()
    before = dict(bench.memory)
    [reply] = decode(bench.exchange((bytes(frame), 0)), [0])
    assert reply.status == Status.BAD_CHECKSUM
    assert bench.memory == before
    assert bench.errors == 1


def test_a_corrupted_start_does_not_start() -> None:
    frame = bytearray(bp.encode_request(Command.START, 0x40, payload=(3).to_bytes(4, "little")))
    frame[-2] ^= 0x80
    bench = BridgeBench()
    [reply] = decode(bench.exchange((bytes(frame), 0)), [0])
    assert (reply.status, bench.starts) == (Status.BAD_CHECKSUM, [])


def test_the_link_test_bridge_refuses_start_and_serves_memory() -> None:
    bench = BridgeBench(can_start=False)
    requests = [(bp.encode_request(Command.START, 0x40, payload=(3).to_bytes(4, "little")), 0),
                (bp.encode_request(Command.WRITE_MEM, 8, payload=b"\x5a\xa5"), 0),
                (bp.encode_request(Command.READ_MEM, 8, 2), 2)]
    start, write, read = decode(bench.exchange(*requests), [n for _, n in requests])
    assert (start.status, bench.starts) == (Status.BAD_COMMAND, [])
    assert (write.status, read.status, read.payload) == (Status.OK, Status.OK, b"\x5a\xa5")


def test_a_uart_framing_error_is_a_bad_frame() -> None:
    bench = BridgeBench()
    frame = bp.encode_request(Command.WRITE_MEM, 0, payload=b"\x00")
    [reply] = decode(bench.exchange((frame, 0), error_at=9), [0])
    assert reply.status == Status.BAD_CHECKSUM
    assert bench.memory[0] == 3


def test_a_silent_link_abandons_the_frame() -> None:
    bench = BridgeBench()
    frame = bp.encode_request(Command.WRITE_MEM, 0, payload=b"\x00\x01")
    [reply] = decode(bench.exchange((frame[:-3], 0)), [0])  # the rest never comes
    assert reply.status == Status.BAD_CHECKSUM
    assert bench.memory[0] == 3


def raw_request(command: int, addr: int, length: int, payload: bytes = b"") -> bytes:
    """A frame the encoder would refuse (unknown command, wrong length), checksum right."""
    body = bytes([command]) + addr.to_bytes(4, "little") + length.to_bytes(2, "little") + payload
    return bytes([bp.REQUEST_SYNC]) + body + bytes([bp.checksum(body)])


@pytest.mark.parametrize("frame, status", [
    (raw_request(0, 0, 0), Status.BAD_COMMAND),
    (raw_request(7, 0, 0), Status.BAD_COMMAND),
    (raw_request(Command.READ_MEM, 0, 0), Status.BAD_COMMAND),
    (raw_request(Command.READ_MEM, 0, bp.MAX_PAYLOAD + 1), Status.BAD_COMMAND),
    (raw_request(Command.WRITE_MEM, 0, 300, bytes(300)), Status.BAD_COMMAND),
    (raw_request(Command.WRITE_REG, 8, 2, b"\x01\x02"), Status.BAD_COMMAND),
    (raw_request(Command.STATUS, 0, 0), Status.BAD_COMMAND),
    (bp.encode_request(Command.READ_MEM, MEM_BYTES - 3, 4), Status.OUT_OF_RANGE),
    (bp.encode_request(Command.WRITE_MEM, MEM_BYTES, payload=b"\x01"), Status.OUT_OF_RANGE),
    (bp.encode_request(Command.WRITE_MEM, 0xFFFF_FFFF, payload=b"\x01"), Status.OUT_OF_RANGE),
    (bp.encode_request(Command.READ_REG, 0x1000), Status.OUT_OF_RANGE),
    (bp.encode_request(Command.WRITE_REG, 0x0A, payload=bytes(4)), Status.OUT_OF_RANGE),
    (bp.encode_request(Command.START, MEM_BYTES - 16, payload=(2).to_bytes(4, "little")),
     Status.OUT_OF_RANGE),
])
def test_rejected_requests_change_nothing(frame: bytes, status: Status) -> None:
    bench = BridgeBench()
    before = dict(bench.memory)
    [reply] = decode(bench.exchange((frame, 0)), [0])
    assert (reply.status, bench.memory, bench.starts, bench.errors) == (status, before, [], 1)


def test_registers_start_and_status() -> None:
    bench = BridgeBench()
    bench.done, bench.busy = 0, 1
    count = (5).to_bytes(4, "little")
    requests = [
        (bp.encode_request(Command.WRITE_REG, REG_INSN_ADDR, payload=(0x120).to_bytes(4, "little")),
         0),
        (bp.encode_request(Command.WRITE_REG, REG_INSN_COUNT, payload=count), 0),
        (bp.encode_request(Command.READ_REG, REG_INSN_ADDR), 4),
        (bp.encode_request(Command.WRITE_REG, REG_CONTROL, payload=(1).to_bytes(4, "little")), 0),
        (bp.encode_request(Command.READ_REG, REG_CONTROL), 4),
        (bp.encode_request(Command.START, 0x40, payload=(3).to_bytes(4, "little")), 0),
        (bp.encode_request(Command.READ_REG, REG_INSN_COUNT), 4),
        (bp.encode_request(Command.STATUS, 0), 1),
        *((bp.encode_request(Command.READ_REG, COUNTER_BASE + 8 * k + 4 * high), 4)
          for k in range(len(COUNTERS)) for high in (0, 1)),
        (bp.encode_request(Command.READ_REG, 0x80), 4),
    ]
    replies = decode(bench.exchange(*requests), [n for _, n in requests])
    assert all(r.status == Status.OK for r in replies)
    values = [int.from_bytes(r.payload, "little") for r in replies]
    assert values[2] == 0x120
    assert values[4] == 1  # busy
    assert values[6] == 3
    assert values[7] == 0b10  # busy, not done
    counter_words = [(c >> (32 * high)) & 0xFFFF_FFFF for c in COUNTERS for high in (0, 1)]
    assert values[8:-1] == counter_words
    assert values[-1] == 0
    assert bench.starts == [(0x120, 5), (0x40, 3)]


@pytest.mark.parametrize("present", [CounterSet.CYCLES, CounterSet.NONE], ids=lambda c: c.label)
def test_reg_counters_names_the_counters_the_image_has(present: CounterSet) -> None:
    bench = BridgeBench(counters=present)
    cycles = COUNTER_BASE + 8 * HW_COUNTERS.index(Counter.CYCLES)
    addrs = [REG_COUNTERS, cycles, cycles + 4, COUNTER_BASE, COUNTER_BASE + 4]
    requests = [(bp.encode_request(Command.READ_REG, a), 4) for a in addrs]
    replies = decode(bench.exchange(*requests), [n for _, n in requests])
    values = [int.from_bytes(r.payload, "little") for r in replies]
    words = [COUNTERS[0] & 0xFFFF_FFFF, COUNTERS[0] >> 32] if present.counters else [0, 0]
    assert values == [int(present), *words, 0, 0]  # the absent counter 0 reads 0


@REJECTED
def test_bridge_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match=r"^mem_bytes must be a power of two of at least 1024, "
                                         r"not 1000$"):
        Bridge(1000, 3, 10)
    with pytest.raises(ValueError, match=r"^timeout_cycles must be a positive integer, not 0$"):
        Bridge(1024, 3, 0)
    with pytest.raises(ValueError, match=r"^counter_count must be an integer between 0 and 480, "
                                         r"not -1$"):
        Bridge(1024, -1, 10)
    with pytest.raises(ValueError, match=r"^counters must be one of 'all', 'cycles', 'none', "
                                         r"not 'few'$"):
        Bridge(1024, 1, 10, counters="few")
    with pytest.raises(ValueError, match=r"^counter_count must be 0 for counters 'none', not 3$"):
        Bridge(1024, 3, 10, counters="none")
    gc.collect()


# -- the RAM's two ports -------------------------------------------------------------------


@pytest.mark.parametrize("single_port", [False, True], ids=["two-ports", "single-port"])
@pytest.mark.parametrize("bus_bytes", [1, 2, 4, 16])
def test_axi_ram_byte_port_and_axi_burst_see_the_same_memory(bus_bytes: int, single_port: bool) -> None:
    m = Module()
    m.submodules.ram = ram = AxiRam(1024, bus_bytes, single_port=single_port)
    got: list[int] = []

    async def bench(ctx: Any) -> None:
        for addr, byte in enumerate(range(0x10, 0x20)):
            ctx.set(ram.byte.addr, 64 + addr)
            ctx.set(ram.byte.w_data, byte)
            ctx.set(ram.byte.w_en, 1)
            await ctx.tick()
        ctx.set(ram.byte.w_en, 0)
        ctx.set(ram.s_axi_araddr, 64)
        ctx.set(ram.s_axi_arlen, 16 // bus_bytes - 1)
        ctx.set(ram.s_axi_arvalid, 1)
        await ctx.tick().until(ram.s_axi_arready)
        ctx.set(ram.s_axi_arvalid, 0)
        for n in range(3 * 16 // bus_bytes):
            ctx.set(ram.s_axi_rready, n % 3 != 1)  # stall every third cycle
            _, _, valid, ready, data = await ctx.tick().sample(
                ram.s_axi_rvalid, ram.s_axi_rready, ram.s_axi_rdata)
            if valid and ready:
                got.append(data)

    run(m, bench)
    assert got == [int.from_bytes(bytes(range(b, b + bus_bytes)), "little")
                   for b in range(0x10, 0x20, bus_bytes)]


def test_a_single_port_ram_serves_one_burst_at_a_time() -> None:
    """Both channels asking at once: the read burst first, the write after its last beat,
    the byte port only between bursts; every beat as a two-port RAM would give it."""
    m = Module()
    m.submodules.ram = ram = AxiRam(1024, 4, single_port=True)
    events: list[tuple[str, int]] = []

    async def bench(ctx: Any) -> None:
        for k in range(8):  # words 0..7 through the byte port
            for lane in range(4):
                ctx.set(ram.byte.addr, 4 * k + lane)
                ctx.set(ram.byte.w_data, 16 * k + lane)
                ctx.set(ram.byte.w_en, 1)
                await ctx.tick()
        ctx.set(ram.byte.w_en, 0)
        ctx.set(ram.s_axi_araddr, 0)
        ctx.set(ram.s_axi_arlen, 3)
        ctx.set(ram.s_axi_arvalid, 1)
        ctx.set(ram.s_axi_awaddr, 16)
        ctx.set(ram.s_axi_awlen, 1)
        ctx.set(ram.s_axi_awvalid, 1)
        ctx.set(ram.s_axi_wstrb, 0xF)
        ctx.set(ram.s_axi_rready, 1)
        ctx.set(ram.s_axi_bready, 1)
        written = 0
        for cycle in range(30):
            ar, aw = ctx.get(ram.s_axi_arready), ctx.get(ram.s_axi_awready)
            rvalid, wready, bvalid = ctx.get(ram.s_axi_rvalid), ctx.get(ram.s_axi_wready), ctx.get(ram.s_axi_bvalid)
            assert not (ctx.get(ram.byte.ready) and (rvalid or wready)), "the byte port during a burst"
            if ar and ctx.get(ram.s_axi_arvalid):
                events.append(("ar", cycle))
            if aw and ctx.get(ram.s_axi_awvalid):
                events.append(("aw", cycle))
            if rvalid:
                events.append((f"r{ctx.get(ram.s_axi_rdata):08x}", cycle))
            if wready and written < 2:
                ctx.set(ram.s_axi_wvalid, 1)
                ctx.set(ram.s_axi_wdata, 0xA0A0A0A0 + written)
                ctx.set(ram.s_axi_wlast, written == 1)
                events.append(("w", cycle))
                written += 1
            else:
                ctx.set(ram.s_axi_wvalid, 0)
            if bvalid:
                events.append(("b", cycle))
            await ctx.tick()
            if ar:
                ctx.set(ram.s_axi_arvalid, 0)
            if aw:
                ctx.set(ram.s_axi_awvalid, 0)
        assert ram.memory is not None
        for k, value in ((4, 0xA0A0A0A0), (5, 0xA0A0A0A1), (6, 0x63626160)):
            assert ctx.get(ram.memory.data[k]) == value

    run(m, bench)
    names = [name for name, _ in events]
    assert names == ["ar", "r03020100", "r13121110", "r23222120", "r33323130", "aw", "w", "w", "b"], events
    cycle = dict((name, c) for name, c in events)
    assert cycle["r03020100"] == cycle["ar"] + 2  # as the two-port RAM: a cycle after the address


def test_a_single_port_ram_keeps_the_byte_read_while_a_burst_runs() -> None:
    """The bridge may hold a read for many cycles (waiting for its UART): a burst that
    starts meanwhile takes the one port, and the byte read must not change."""
    m = Module()
    m.submodules.ram = ram = AxiRam(1024, 4, single_port=True)
    seen: list[int] = []

    async def bench(ctx: Any) -> None:
        for addr, byte in ((8, 0x5A), (64, 0x11), (65, 0x22), (66, 0x33), (67, 0x44)):
            ctx.set(ram.byte.addr, addr)
            ctx.set(ram.byte.w_data, byte)
            ctx.set(ram.byte.w_en, 1)
            await ctx.tick()
        ctx.set(ram.byte.w_en, 0)
        ctx.set(ram.byte.addr, 8)
        ctx.set(ram.byte.r_en, 1)
        await ctx.tick()
        ctx.set(ram.s_axi_araddr, 64)
        ctx.set(ram.s_axi_arlen, 0)
        ctx.set(ram.s_axi_arvalid, 1)
        ctx.set(ram.s_axi_rready, 1)
        for _ in range(6):  # the burst runs; the byte port holds its read
            seen.append(ctx.get(ram.byte.r_data))
            if ctx.get(ram.s_axi_arready):
                await ctx.tick()
                ctx.set(ram.s_axi_arvalid, 0)
            else:
                await ctx.tick()
        assert seen == [0x5A] * 6

    run(m, bench)


@REJECTED
def test_axi_ram_size_is_checked() -> None:
    with pytest.raises(ValueError, match=r"^mem_bytes must be a power of two of at least 1024, "
                                         r"not 3072$"):
        AxiRam(3072, 4)
    with pytest.raises(TypeError, match=r"^mem_bytes must be an integer, not '1k'$"):
        AxiRam("1k", 4)
    for bad in (3, 256):
        with pytest.raises(ValueError, match=rf"^bus_bytes must be a power of two between 1 and "
                                             rf"128, not {bad}$"):
            AxiRam(1024, bad)
    gc.collect()

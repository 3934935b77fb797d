"""The UART host bridge: frames of :mod:`~openvta.hw.fpga.bridge_protocol` in, memory and registers out.

It receives a whole request, buffering a write's payload, and verifies the checksum
before anything is executed: a corrupted frame is answered with status 1 and nothing
is written or started.  It then executes the request against the SoC memory's byte
port and the core's control signals (the semantics of
:class:`~openvta.hw.rtl.csr.ControlRegisters`, without the AXI4-Lite block) and replies.
"""

from __future__ import annotations

from amaranth import Const, Module, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from openvta.isa import COUNTER_BASE, INSN_BYTES, REG_CONTROL, REG_INSN_ADDR, REG_INSN_COUNT
from openvta.isa.counters import COUNTER_WIDTH, REG_WIDTH, CounterSet, counter_set

from .axi_ram import byte_port_signature, check_mem_bytes
from .csr import counter_slots, read_register
from .params import refusing
from ..fpga.bridge_protocol import (
    FIXED_LENGTH,
    HEADER_BYTES,
    MAX_PAYLOAD,
    REG_WINDOW_BYTES,
    REPLY_SYNC,
    REQUEST_SYNC,
    Command,
    Status,
)

__all__ = ["Bridge"]


class Bridge(wiring.Component):
    """Parses request frames, executes them, sends the reply.

    Parameters
    ----------
    mem_bytes : int
        size of the memory behind ``mem`` (a power of two of at least 1024); a memory
        access past it is answered with status 3.
    counter_count : int
        number of 64-bit counters readable at ``COUNTER_BASE + 8·k`` (and ``+ 4``).
    timeout_cycles : int
        a frame that stays silent this many cycles before its checksum byte arrives
        is abandoned and answered with status 1 (so that a corrupted length field
        cannot hang the link).
    can_start : bool
        False for the link-test image, which has no accelerator: START is then
        answered with status 2 (bad command) and starts nothing.
    counters : str or CounterSet
        which counters ``counters`` carries and ``REG_COUNTERS`` reports, as for
        :class:`~openvta.hw.rtl.csr.ControlRegisters` (``"none"`` for the link-test image).

    Members
    -------
    rx : In(stream.Signature(8, always_ready=True))
        received bytes (from :class:`~openvta.hw.rtl.uart.UartRx`).
    rx_error : In(1)
        a UART framing error: the current frame is answered with status 1.
    tx : Out(stream.Signature(8))
        reply bytes (to :class:`~openvta.hw.rtl.uart.UartTx`).
    mem : Out(byte_port_signature(log2(mem_bytes)))
        the memory's byte port (read data one cycle after a ready address; a write or a
        read waits while the memory is not ready).
    start, insn_addr, insn_count, done, busy, counters :
        the core's control interface, as :class:`~openvta.hw.rtl.csr.ControlRegisters`
        drives and reads it: ``start`` is a one-cycle pulse, the done bit of
        ``REG_STATUS`` and of STATUS is set by a rising ``done`` and cleared by ``start``.
    active : Out(1)
        high from a request's sync byte to the end of its reply.
    error : Out(1)
        one-cycle pulse when a reply with a non-zero status is sent.

    Latency: WRITE_MEM takes two cycles per byte after the checksum (more while the
    memory is not ready); the other
    commands start their reply one or two cycles after it.  The link, not the bridge,
    sets the throughput.
    """

    @refusing
    def __init__(self, mem_bytes: int, counter_count: int, timeout_cycles: int,
                 can_start: bool = True, counters: str | CounterSet = "all") -> None:
        self._mem_bytes = check_mem_bytes(mem_bytes)
        if not isinstance(counter_count, int) or not 0 <= counter_count <= \
                (REG_WINDOW_BYTES - COUNTER_BASE) // 8:
            raise ValueError(f"counter_count must be an integer between 0 and "
                             f"{(REG_WINDOW_BYTES - COUNTER_BASE) // 8}, not {counter_count!r}")
        if not isinstance(timeout_cycles, int) or timeout_cycles < 1:
            raise ValueError(f"timeout_cycles must be a positive integer, not {timeout_cycles!r}")
        self._counter_count, self._timeout_cycles = counter_count, timeout_cycles
        self._can_start = bool(can_start)
        self._slots = counter_slots(counter_count, counters)
        self._counters = counter_set(counters)
        super().__init__({
            "rx": In(stream.Signature(8, always_ready=True)), "rx_error": In(1),
            "tx": Out(stream.Signature(8)),
            "mem": Out(byte_port_signature(self._mem_bytes.bit_length() - 1)),
            "start": Out(1), "insn_addr": Out(REG_WIDTH), "insn_count": Out(REG_WIDTH),
            "done": In(1), "busy": In(1),
            "counters": In(data.ArrayLayout(COUNTER_WIDTH, counter_count)),
            "active": Out(1), "error": Out(1),
        })

    @property
    def mem_bytes(self) -> int:
        return self._mem_bytes

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.buffer = buffer = Memory(shape=8, depth=MAX_PAYLOAD, init=[])
        buf_w, buf_r = buffer.write_port(), buffer.read_port()
        header = Signal(8 * HEADER_BYTES)
        cmd, addr, length = header[0:8], header[8:40], header[40:56]
        count = Signal(16)  # bytes received in this part of the frame / sent or written
        total = Signal(8)  # running 8-bit sum of the frame (request, then reply)
        corrupt = Signal()
        word = Signal(32)  # last four payload bytes (LE), then the reply value
        status = Signal(2)
        done_latched = Signal()
        byte = self.rx.payload
        got = self.rx.valid
        next_header = Signal.like(header)
        m.d.comb += [next_header.eq(header[8:] | (byte << (8 * HEADER_BYTES - 8))),
                     self.mem.addr.eq(addr + count), buf_r.addr.eq(count),
                     buf_w.addr.eq(count), buf_w.data.eq(byte), self.tx.payload.eq(REPLY_SYNC)]
        self._done_latch(m, done_latched)
        timer = Signal(range(self._timeout_cycles + 1))
        m.d.sync += [self.start.eq(0), self.error.eq(0), timer.eq(0)]
        with m.If(self.rx_error):
            m.d.sync += corrupt.eq(1)

        with m.FSM() as fsm:
            with m.State("SYNC"):
                with m.If(got & (byte == REQUEST_SYNC)):
                    m.d.sync += [count.eq(0), total.eq(0), corrupt.eq(0)]
                    m.next = "HEADER"
            with m.State("HEADER"):
                self._receive(m, timer, total, corrupt)
                with m.If(got):
                    m.d.sync += [header.eq(next_header), count.eq(count + 1)]
                    with m.If(count == HEADER_BYTES - 1):
                        m.d.sync += count.eq(0)
                        new_cmd, new_length = next_header[0:8], next_header[40:56]
                        writes = ((new_cmd == Command.WRITE_MEM) | (new_cmd == Command.WRITE_REG)
                                  | (new_cmd == Command.START))
                        m.next = "CHECK"
                        with m.If(writes & (new_length != 0)):
                            m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                self._receive(m, timer, total, corrupt)
                with m.If(got):
                    m.d.comb += buf_w.en.eq(count < MAX_PAYLOAD)
                    m.d.sync += [word.eq(word[8:] | (byte << 24)), count.eq(count + 1)]
                    with m.If(count == length - 1):
                        m.next = "CHECK"
            with m.State("CHECK"):
                self._receive(m, timer, total, corrupt)
                with m.If(got):
                    m.next = "EVAL"
            with m.State("EVAL"):
                m.d.sync += count.eq(0)
                self._evaluate(m, cmd, addr, length, word, total, corrupt, status)
            with m.State("WRITE_MEM"):  # the buffer's read port has one cycle of latency
                m.next = "WRITE_MEM_BYTE"
            with m.State("WRITE_MEM_BYTE"):  # held until the memory is ready
                m.d.comb += [self.mem.w_en.eq(1), self.mem.w_data.eq(buf_r.data)]
                with m.If(self.mem.ready):
                    m.d.sync += count.eq(count + 1)
                    m.next = "WRITE_MEM"
                    with m.If(count == length - 1):
                        m.d.sync += count.eq(0)
                        m.next = "REPLY_SYNC"
            with m.State("EXECUTE"):
                self._execute(m, cmd, addr, word, done_latched)
                m.next = "REPLY_SYNC"
            self._reply(m, cmd, length, count, total, word, status)
        m.d.comb += self.active.eq(~fsm.ongoing("SYNC"))
        return m

    def _receive(self, m: Module, timer: Signal, total: Signal, corrupt: Signal) -> None:
        """In a state that receives: sum every byte; a silent link abandons the frame."""
        with m.If(self.rx.valid):
            m.d.sync += total.eq(total + self.rx.payload)
        with m.Elif(timer == self._timeout_cycles):
            m.d.sync += corrupt.eq(1)
            m.next = "EVAL"
        with m.Else():
            m.d.sync += timer.eq(timer + 1)

    def _done_latch(self, m: Module, done_latched: Signal) -> None:
        done_prev = Signal()
        m.d.sync += done_prev.eq(self.done)
        with m.If(self.start):
            m.d.sync += done_latched.eq(0)
        with m.Elif(self.done & ~done_prev):
            m.d.sync += done_latched.eq(1)

    def _evaluate(self, m: Module, cmd: Value, addr: Value, length: Value, word: Signal,
                  total: Signal, corrupt: Signal, status: Signal) -> None:
        """The EVAL state: checksum first, then command and length, then range."""
        reg_ok = (addr[0:2] == 0) & (addr < REG_WINDOW_BYTES)
        mem_ok = addr + length <= self._mem_bytes
        program_ok = addr + word * INSN_BYTES <= self._mem_bytes
        checks = {
            Command.WRITE_MEM: ((length != 0) & (length <= MAX_PAYLOAD), mem_ok, "WRITE_MEM"),
            Command.READ_MEM: ((length != 0) & (length <= MAX_PAYLOAD), mem_ok, "REPLY_SYNC"),
            Command.WRITE_REG: (length == FIXED_LENGTH[Command.WRITE_REG], reg_ok, "EXECUTE"),
            Command.READ_REG: (length == FIXED_LENGTH[Command.READ_REG], reg_ok, "EXECUTE"),
            Command.START: ((length == FIXED_LENGTH[Command.START]) & int(self._can_start),
                            program_ok, "EXECUTE"),
            Command.STATUS: (length == FIXED_LENGTH[Command.STATUS], Const(1), "EXECUTE"),
        }
        with m.If(corrupt | (total != 0)):
            m.d.sync += status.eq(Status.BAD_CHECKSUM)
            m.next = "REPLY_SYNC"
        with m.Else():
            with m.Switch(cmd):
                for command, (length_ok, range_ok, target) in checks.items():
                    with m.Case(command):
                        with m.If(~length_ok):
                            m.d.sync += status.eq(Status.BAD_COMMAND)
                            m.next = "REPLY_SYNC"
                        with m.Elif(~range_ok):
                            m.d.sync += status.eq(Status.OUT_OF_RANGE)
                            m.next = "REPLY_SYNC"
                        with m.Else():
                            m.d.sync += status.eq(Status.OK)
                            m.next = target
                with m.Default():
                    m.d.sync += status.eq(Status.BAD_COMMAND)
                    m.next = "REPLY_SYNC"

    def _execute(self, m: Module, cmd: Value, addr: Value, word: Signal,
                 done_latched: Signal) -> None:
        """Register commands: one cycle, then the reply (``word`` becomes the reply value)."""
        with m.Switch(cmd):
            with m.Case(Command.WRITE_REG):
                with m.Switch(addr):
                    with m.Case(REG_CONTROL):
                        m.d.sync += self.start.eq(word[0])
                    with m.Case(REG_INSN_ADDR):
                        m.d.sync += self.insn_addr.eq(word)
                    with m.Case(REG_INSN_COUNT):
                        m.d.sync += self.insn_count.eq(word)
            with m.Case(Command.READ_REG):
                m.d.sync += word.eq(self._register(m, addr, done_latched))
            with m.Case(Command.START):
                m.d.sync += [self.insn_addr.eq(addr), self.insn_count.eq(word), self.start.eq(1)]
            with m.Case(Command.STATUS):
                m.d.sync += word.eq(done_latched | (self.busy << 1))

    def _register(self, m: Module, addr: Value, done_latched: Signal) -> Signal:
        return read_register(m, addr[2:12], self.busy, done_latched, self.insn_addr,
                             self.insn_count, self.counters, self._slots, self._counters)

    def _reply(self, m: Module, cmd: Value, length: Value, count: Signal, total: Signal,
               word: Signal, status: Signal) -> None:
        """The reply states: sync, status, payload (a read's, when OK), checksum."""
        has_payload = (status == Status.OK) & ((cmd == Command.READ_MEM)
                                               | (cmd == Command.READ_REG)
                                               | (cmd == Command.STATUS))
        with m.State("REPLY_SYNC"):
            m.d.comb += self.tx.valid.eq(1)
            with m.If(self.tx.ready):
                m.d.sync += self.error.eq(status != Status.OK)
                m.next = "REPLY_STATUS"
        with m.State("REPLY_STATUS"):
            m.d.comb += [self.tx.valid.eq(1), self.tx.payload.eq(status)]
            with m.If(self.tx.ready):
                m.d.sync += [total.eq(status), count.eq(0)]
                m.next = "REPLY_CHECKSUM"
                with m.If(has_payload):
                    m.next = "REPLY_WORD"
                    with m.If(cmd == Command.READ_MEM):
                        m.next = "REPLY_MEM_WAIT"
        with m.State("REPLY_WORD"):
            m.d.comb += [self.tx.valid.eq(1), self.tx.payload.eq(word[:8])]
            with m.If(self.tx.ready):
                m.d.sync += [total.eq(total + word[:8]), word.eq(word >> 8), count.eq(count + 1)]
                with m.If(count == length - 1):
                    m.next = "REPLY_CHECKSUM"
        with m.State("REPLY_MEM_WAIT"):  # the byte port's read data follows a ready address
            m.d.comb += self.mem.r_en.eq(1)
            with m.If(self.mem.ready):
                m.next = "REPLY_MEM"
        with m.State("REPLY_MEM"):
            m.d.comb += [self.mem.r_en.eq(1), self.tx.valid.eq(1), self.tx.payload.eq(self.mem.r_data)]
            with m.If(self.tx.ready):
                m.d.sync += [total.eq(total + self.mem.r_data), count.eq(count + 1)]
                m.next = "REPLY_MEM_WAIT"
                with m.If(count == length - 1):
                    m.next = "REPLY_CHECKSUM"
        with m.State("REPLY_CHECKSUM"):
            m.d.comb += [self.tx.valid.eq(1), self.tx.payload.eq(-total)]
            with m.If(self.tx.ready):
                m.next = "SYNC"

"""cocotb test (started by ``test_soc.py``): the board back end against the simulated SoC.

:class:`SimulatedSerial` is a pyserial-like port whose ``write()`` shifts bytes into
``uart_rx`` bit by bit at the divisor rate and whose ``read()`` returns the bytes
decoded from ``uart_tx``; :class:`openvta.hw.fpga.backend.BoardBackend` runs unchanged on it
in a cocotb bridge thread.  Options come from ``$OPENVTA_SOC_RUN/run.json``; the
program from ``program.npz``; the result goes to ``result.npz`` and what else was
observed to ``observed.json``.
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from pathlib import Path
from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.task import bridge, resume
from cocotb.triggers import ClockCycles, Event, FallingEdge

from openvta.hw.fpga import bridge_protocol as bp
from openvta.hw.fpga.backend import BoardBackend
from openvta.runtime import load_program

CLOCK_PERIOD_NS = 10
RESET_CYCLES = 5


class SimulatedSerial:
    """A serial port wired to the SoC's UART pins, ``divisor`` clock cycles per bit.

    ``read(n)`` returns fewer bytes than asked when none arrives for
    ``timeout_cycles``, as pyserial does on its timeout.  The ``corrupt_writes`` set names
    ``write()`` calls (counted from 0) whose last payload byte is flipped on the line.
    """

    def __init__(self, dut: Any, divisor: int, timeout_cycles: int,
                 corrupt_writes: frozenset[int] = frozenset()) -> None:
        self.dut, self.divisor, self.timeout_cycles = dut, divisor, timeout_cycles
        self.corrupt_writes = corrupt_writes
        self.writes = 0
        self.frames: list[tuple[int, int]] = []  # (command, addr) of every write()
        self.to_device: deque[int] = deque()
        self.from_device: deque[int] = deque()
        self.line_errors: list[str] = []
        self.sending = False
        self._pending = Event()

    def start(self) -> None:
        cocotb.start_soon(self._drive())
        cocotb.start_soon(self._monitor())

    async def _drive(self) -> None:
        while True:
            if not self.to_device:
                self._pending.clear()
                await self._pending.wait()
            self.sending = True
            byte = self.to_device.popleft()
            for level in [0, *((byte >> i) & 1 for i in range(8)), 1]:
                self.dut.uart_rx.value = level
                await ClockCycles(self.dut.clk, self.divisor)
            self.sending = bool(self.to_device)

    async def _monitor(self) -> None:
        tx, clk = self.dut.uart_tx, self.dut.clk
        while True:
            await FallingEdge(tx)
            await ClockCycles(clk, self.divisor // 2)
            if int(tx.value) != 0:
                self.line_errors.append("a start bit shorter than half a bit")
                continue
            byte = 0
            for i in range(8):
                await ClockCycles(clk, self.divisor)
                byte |= int(tx.value) << i
            await ClockCycles(clk, self.divisor)
            if int(tx.value) != 1:
                self.line_errors.append(f"byte {byte:#04x} with a low stop bit")
            self.from_device.append(byte)

    @resume
    async def _queue(self, data: bytes) -> None:
        self.to_device.extend(data)
        self._pending.set()

    @resume
    async def _collect(self, count: int) -> bytes:
        waited, have = 0, len(self.from_device)
        while len(self.from_device) < count and waited < self.timeout_cycles:
            await ClockCycles(self.dut.clk, self.divisor)
            # The timeout runs from the last byte sent or received, not from the call.
            moving = len(self.from_device) > have or self.sending
            waited = 0 if moving else waited + self.divisor
            have = len(self.from_device)
        return bytes(self.from_device.popleft()
                     for _ in range(min(count, len(self.from_device))))

    def write(self, data: bytes) -> int:
        frame = bytearray(data)
        self.frames.append((frame[1], int.from_bytes(frame[2:6], "little")))
        if self.writes in self.corrupt_writes:
            frame[-2] ^= 0x01
        self.writes += 1
        self._queue(bytes(frame))
        return len(frame)

    def read(self, count: int) -> bytes:
        return self._collect(count)


async def reset(dut: Any) -> None:
    dut.uart_rx.value = 1
    dut.rst.value = 1
    await ClockCycles(dut.clk, RESET_CYCLES)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)


def exchange(port: SimulatedSerial, frame: bytes, payload_bytes: int) -> bp.Reply:
    """One raw frame and its reply, bypassing the back end."""
    port.write(frame)
    head = port.read(2)
    rest = port.read(payload_bytes + 1 if head[1:] == b"\x00" else 1)
    return bp.decode_reply(head + rest, payload_bytes)


@cocotb.test()
async def run_program(dut: Any) -> None:
    """A corrupted frame, then the program through BoardBackend; save what was seen."""
    run_dir = Path(os.environ["OPENVTA_SOC_RUN"])
    options = json.loads((run_dir / "run.json").read_text())
    program = load_program(run_dir / "program.npz")
    logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)
    Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start()
    await reset(dut)
    divisor = int(options["divisor"])
    port = SimulatedSerial(dut, divisor, timeout_cycles=200 * 10 * divisor,
                           corrupt_writes=frozenset({1}))
    port.start()

    def session() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        # Write 0 is sent as is: a frame with a wrong checksum must be refused.
        bad = bytearray(bp.encode_request(bp.Command.WRITE_MEM, 0, payload=b"\xEE" * 8))
        bad[-1] ^= 0xFF
        seen["corrupted_status"] = int(exchange(port, bytes(bad), 0).status)
        # Write 1, the first chunk of the image, is corrupted on the line: retried.
        backend = BoardBackend(port, max_polls=int(options["max_polls"]))
        backend.run(program).save(run_dir / "result.npz")
        seen["frames"] = port.frames
        return seen

    seen = await bridge(session)()
    await ClockCycles(dut.clk, 10)
    seen["leds"] = int(dut.leds.value)
    seen["line_errors"] = port.line_errors
    (run_dir / "observed.json").write_text(json.dumps(seen))

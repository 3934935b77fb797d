"""The board's side of the UART bridge, modelled in Python, for the ``board`` back end's tests.

A serial-port-like object (``read``, ``write``) in front of ``mem_bytes`` of board memory:
it answers every frame of :mod:`openvta.hw.fpga.bridge_protocol` and runs START with ``run``
(the functional simulator by default; the graph tests use the cycle model to get cycles).
``faults`` maps a frame number (from 0) to ``"bad_checksum"`` (answer status 1 without
executing), ``"garble"`` (execute, flip a bit of the reply) or ``"silent"`` (no reply from
this frame on). STATUS reports done from the ``finish_after``-th poll after START (never,
if ``None``). ``counters`` is the image's build option (``"all"``, ``"cycles"``, ``"none"``):
``REG_COUNTERS`` reads its code and a counter the image lacks reads 0, as on the SoC.
The SoC itself is tested against the RTL in tests/hw.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from openvta.hw.fpga import bridge_protocol as bp
from openvta.hw.fpga.bridge_protocol import Command, Status
from openvta.isa import COUNTER_BASE, HW_COUNTERS, Config
from openvta.isa.counters import REG_COUNTERS, counter_set
from openvta.runtime import Program, Result
from openvta.sim import functional

__all__ = ["ModelBoard"]


class ModelBoard:
    """See the module docstring."""

    def __init__(self, cfg: Config, *, mem_bytes: int = 4096, faults: dict[int, str] | None = None,
                 finish_after: int | None = 2,
                 run: Callable[[Program], Result] = functional.run, counters: str = "all") -> None:
        self.cfg, self.run = cfg, run
        self.counter_set = counter_set(counters)
        self.memory = bytearray(mem_bytes)
        self.faults, self.finish_after = faults or {}, finish_after
        self.frames: list[bp.Request] = []
        self.out = bytearray()
        self.counters = [0] * len(HW_COUNTERS)
        self.polls, self.starts, self.silent = 0, 0, False

    def write(self, frame: bytes) -> int:
        fault = self.faults.get(len(self.frames))
        request = bp.decode_request(frame)
        self.frames.append(request)
        self.silent |= fault == "silent"
        if fault == "bad_checksum":
            reply = bp.encode_reply(Status.BAD_CHECKSUM)
        else:
            status, payload = self.execute(request)
            reply = bytearray(bp.encode_reply(status, payload))
            if fault == "garble":
                reply[-1] ^= 0x10
        if not self.silent:
            self.out += reply
        return len(frame)

    def execute(self, r: bp.Request) -> tuple[Status, bytes]:
        memory_command = r.command in (Command.WRITE_MEM, Command.READ_MEM)
        if memory_command and r.addr + r.length > len(self.memory):
            return Status.OUT_OF_RANGE, b""
        if r.command == Command.WRITE_MEM:
            self.memory[r.addr:r.addr + r.length] = r.payload
        elif r.command == Command.READ_MEM:
            return Status.OK, bytes(self.memory[r.addr:r.addr + r.length])
        elif r.command == Command.START:
            image = np.frombuffer(bytes(self.memory), np.uint8).copy()
            result = self.run(Program(self.cfg, image, r.addr, int.from_bytes(r.payload, "little")))
            self.memory[:] = result.dram.tobytes()
            built = self.counter_set.counters
            self.counters = [result.counters.get(str(c), 0) if c in built else 0 for c in HW_COUNTERS]
            self.starts, self.polls = self.starts + 1, 0
        elif r.command == Command.STATUS:
            self.polls += 1
            done = self.starts and self.polls >= (self.finish_after or 1 << 62)
            return Status.OK, bytes([1 if done else 2])
        elif r.command == Command.READ_REG and r.addr >= COUNTER_BASE:
            k, high = divmod(r.addr - COUNTER_BASE, 8)
            return Status.OK, ((self.counters[k] >> (8 * high)) & 0xFFFF_FFFF).to_bytes(4, "little")
        elif r.command == Command.READ_REG and r.addr == REG_COUNTERS:
            return Status.OK, int(self.counter_set).to_bytes(4, "little")
        elif r.command == Command.READ_REG:
            return Status.OK, bytes(4)
        return Status.OK, b""

    def read(self, count: int) -> bytes:
        data = bytes(self.out[:count])
        del self.out[:count]
        return data

"""A board on a serial port, modelled in Python: it answers the UART bridge protocol's frames
and runs START on the cycle model, so that the ``board`` back end can run whole models in the
graph tests (the SoC itself is tested against the RTL in tests/hw)."""

from __future__ import annotations

import numpy as np

from openvta.hw import bridge_protocol as bp
from openvta.hw.bridge_protocol import Command, Status
from openvta.isa import COUNTER_BASE, HW_COUNTERS, Config
from openvta.runtime import Device, Program

__all__ = ["BoardPort"]

_DONE = 1


class BoardPort:
    """A serial-port-like object (``read``, ``write``) in front of ``mem_bytes`` of board memory."""

    def __init__(self, cfg: Config, mem_bytes: int = 1 << 16) -> None:
        self.cfg, self.memory = cfg, bytearray(mem_bytes)
        self.out = bytearray()
        self.counters = [0] * len(HW_COUNTERS)
        self.starts = 0

    def write(self, frame: bytes) -> int:
        status, payload = self.execute(bp.decode_request(frame))
        self.out += bp.encode_reply(status, payload)
        return len(frame)

    def read(self, count: int) -> bytes:
        data = bytes(self.out[:count])
        del self.out[:count]
        return data

    def execute(self, r: bp.Request) -> tuple[Status, bytes]:
        if r.command in (Command.WRITE_MEM, Command.READ_MEM) and r.addr + r.length > len(self.memory):
            return Status.OUT_OF_RANGE, b""
        if r.command == Command.WRITE_MEM:
            self.memory[r.addr:r.addr + r.length] = r.payload
        elif r.command == Command.READ_MEM:
            return Status.OK, bytes(self.memory[r.addr:r.addr + r.length])
        elif r.command == Command.START:
            program = Program(self.cfg, np.frombuffer(bytes(self.memory), np.uint8).copy(), r.addr,
                              int.from_bytes(r.payload, "little"))
            result = Device("cycle").run(program)
            self.memory[:] = result.dram.tobytes()
            self.counters = [result.counters.get(str(c), 0) for c in HW_COUNTERS]
            self.starts += 1
        elif r.command == Command.STATUS:
            return Status.OK, bytes([_DONE])
        elif r.command == Command.READ_REG and r.addr >= COUNTER_BASE:
            k, high = divmod(r.addr - COUNTER_BASE, 8)
            return Status.OK, ((self.counters[k] >> (8 * high)) & 0xFFFF_FFFF).to_bytes(4, "little")
        elif r.command == Command.READ_REG:
            return Status.OK, bytes(4)
        return Status.OK, b""

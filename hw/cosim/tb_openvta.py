"""The cocotb test that runs one program on ``openvta_top`` (started by :mod:`.cosim`).

It reads the run directory named by ``OPENVTA_TB_RUN``: ``program.npz`` and
``run.json`` (``max_cycles``, ``idle``, ``backpressure``, ``seed``).  It loads the
DRAM image into an :class:`~cocotbext.axi.AxiRam`, programs the registers over
AXI4-Lite, starts the core, polls ``REG_STATUS`` every :data:`POLL_CYCLES` cycles
(appending the cycles since start to ``progress.txt``, one line per poll), then writes
``result.npz`` (final DRAM image and every counter of ``HW_COUNTERS``).
A failure of its own is also written to ``error.txt`` for the harness to report.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from openvta.runtime.program import Result, load_program

from .tb_common import CLOCK_PERIOD_NS, cycles, fail, reset, run_to_finish

POLL_CYCLES = 1000
#: The RAM spans the whole 32-bit address space (sparse, so free): a stray address
#: lands outside the image instead of aliasing into it.
RAM_BYTES = 1 << 32
PAUSE_PROBABILITY = 0.3


def _pauses(seed: int) -> Iterator[bool]:
    """A pause generator for cocotbext-axi channels: random, reproducible per seed."""
    rng = random.Random(seed)
    while True:
        yield rng.random() < PAUSE_PROBABILITY


class TB:
    """Clock, reset, the DRAM model and the register master around ``openvta_top``."""

    def __init__(self, dut: Any, image: bytes) -> None:
        self.dut = dut
        logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)
        Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start()
        self.ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=RAM_BYTES)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        self.image_bytes = len(image)
        self.ram.write(0, image)
        self.stray_writes: list[tuple[int, int]] = []
        self._watch_writes()

    def _watch_writes(self) -> None:
        # Every write burst goes through AxiRamWrite._write(address, data) (pinned
        # cocotbext-axi 0.1.28); wrap it to record bytes written past the image.
        write_if = self.ram.write_if
        original = write_if._write

        async def checked(address: int, data: bytes) -> None:
            if address + len(data) > self.image_bytes:
                self.stray_writes.append((address, len(data)))
            await original(address, data)

        write_if._write = checked

    def set_idle(self, seed: int) -> None:
        """Random idle cycles on the channels the RAM drives (R, B)."""
        self.ram.read_if.r_channel.set_pause_generator(_pauses(seed))
        self.ram.write_if.b_channel.set_pause_generator(_pauses(seed + 1))

    def set_backpressure(self, seed: int) -> None:
        """Random low ready on the channels the RAM receives (AR, AW, W)."""
        self.ram.read_if.ar_channel.set_pause_generator(_pauses(seed + 2))
        self.ram.write_if.aw_channel.set_pause_generator(_pauses(seed + 3))
        self.ram.write_if.w_channel.set_pause_generator(_pauses(seed + 4))

    async def reset(self) -> None:
        await reset(self.dut)

    def cycles(self) -> int:
        return cycles()

    def dram(self) -> bytes:
        return bytes(self.ram.read(0, self.image_bytes))


@cocotb.test()
async def run_program(dut: Any) -> None:
    """Run the program of ``$OPENVTA_TB_RUN`` to FINISH and save the result."""
    run_dir = Path(os.environ["OPENVTA_TB_RUN"])
    options = json.loads((run_dir / "run.json").read_text())
    program = load_program(run_dir / "program.npz")
    max_cycles, seed = int(options["max_cycles"]), int(options["seed"])

    tb = TB(dut, program.dram.tobytes())
    if options["idle"]:
        tb.set_idle(seed)
    if options["backpressure"]:
        tb.set_backpressure(seed)
    await tb.reset()

    counters = await run_to_finish(tb, run_dir, program, max_cycles,
                                   lambda elapsed: ClockCycles(dut.clk, POLL_CYCLES))
    if tb.stray_writes:
        first, size = tb.stray_writes[0]
        fail(run_dir, f"the core wrote outside the DRAM image ({tb.image_bytes} bytes): "
                      f"{len(tb.stray_writes)} writes, the first {size} bytes at {first:#x}")
    dram = np.frombuffer(tb.dram(), dtype=np.uint8).copy()
    Result(dram=dram, counters=counters).save(run_dir / "result.npz")

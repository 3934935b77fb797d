"""The cocotb test that runs one program on ``openvta_top_mem`` (started by :mod:`.cosim`).

The DRAM is inside the design (:mod:`.native_dram`): the harness has written the image
to ``dram_in.hex`` in the run directory, which the design reads at time 0.  As
:mod:`.tb_openvta`, this reads ``program.npz`` and ``run.json`` from the run directory
named by ``OPENVTA_TB_RUN``, programs the registers over AXI4-Lite, starts the core and
polls ``REG_STATUS`` (appending the cycles since start to ``progress.txt``), then
writes ``result.npz``, or ``error.txt`` when it fails.  Python wakes only for the
polls: the clock is cocotb's GPI clock (C++, no Python per edge) and between polls it
waits on one timer of up to :data:`POLL_CYCLES` cycles, an eighth of the cycles run
so far (so a run goes on at most that far past FINISH, which the counters do not see).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from openvta.runtime.program import Result, load_program

from .dram_image import IMAGE_OUT, read_image
from .tb_common import CLOCK_PERIOD_NS, cycles, fail, reset, run_to_finish

#: The longest wait between two polls, and the shortest.
POLL_CYCLES = 20_000
MIN_POLL_CYCLES = 1000


class TB:
    """Clock, reset and the register master around ``openvta_top_mem``."""

    def __init__(self, dut: Any, image_bytes: int) -> None:
        self.dut = dut
        logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)
        Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns", impl="gpi").start()
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        dut.image_bytes.value = image_bytes
        dut.dump.value = 0

    async def reset(self) -> None:
        await reset(self.dut)

    def cycles(self) -> int:
        return cycles()

    async def wait(self, cycles: int) -> None:
        """``cycles`` clock cycles with one timer, then back on a rising edge."""
        await Timer(cycles * CLOCK_PERIOD_NS, unit="ns")
        await RisingEdge(self.dut.clk)

    async def dram(self, run_dir: Path, image_bytes: int, bus_bytes: int) -> np.ndarray:
        """The image, dumped by the design at the edge after ``dump`` rises."""
        self.dut.dump.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.dump.value = 0
        await ClockCycles(self.dut.clk, 2)  # the dumping edge has been evaluated
        return read_image(run_dir / IMAGE_OUT, image_bytes, bus_bytes)

    def check_accesses(self, run_dir: Path, image_bytes: int, bus_bytes: int) -> None:
        """Fail on what cocotbext-axi's AxiRam or the AxiRam harness would have refused."""
        dut = self.dut
        if int(dut.bad_bursts.value):
            fail(run_dir, f"the core broke the AXI protocol: {int(dut.bad_bursts.value)} bursts "
                          f"not INCR of full bus beats within 4 KiB, the first at "
                          f"{int(dut.bad_addr.value):#x}")
        if int(dut.wild_accesses.value):
            fail(run_dir, f"the core accessed the DRAM past the simulated "
                          f"{1 << int(dut.dram_log2.value)} bytes: "
                          f"{int(dut.wild_accesses.value)} bursts, the first at "
                          f"{int(dut.wild_addr.value):#x}")
        if int(dut.stray_writes.value):
            beat, strobes = int(dut.stray_addr.value), int(dut.stray_strb.value)
            lanes = [lane for lane in range(bus_bytes) if strobes >> lane & 1
                     and beat + lane >= image_bytes]
            fail(run_dir, f"the core wrote outside the DRAM image ({image_bytes} bytes): "
                          f"{int(dut.stray_writes.value)} write beats, the first "
                          f"{len(lanes)} bytes from {beat + lanes[0]:#x}")


@cocotb.test()
async def run_program(dut: Any) -> None:
    """Run the program of ``$OPENVTA_TB_RUN`` to FINISH and save the result."""
    run_dir = Path(os.environ["OPENVTA_TB_RUN"])
    options = json.loads((run_dir / "run.json").read_text())
    program = load_program(run_dir / "program.npz")
    max_cycles = int(options["max_cycles"])
    image_bytes, bus_bytes = len(program.dram), program.config.bus_bytes

    tb = TB(dut, image_bytes)
    await tb.reset()

    def wait(elapsed: int) -> Awaitable[None]:
        return tb.wait(max(1, min(POLL_CYCLES, max(MIN_POLL_CYCLES, elapsed // 8), max_cycles - elapsed)))

    counters = await run_to_finish(tb, run_dir, program, max_cycles, wait)
    tb.check_accesses(run_dir, image_bytes, bus_bytes)
    dram = await tb.dram(run_dir, image_bytes, bus_bytes)
    Result(dram=dram, counters=counters).save(run_dir / "result.npz")

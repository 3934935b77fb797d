"""What the two cocotb testbenches share (:mod:`.tb_openvta`, :mod:`.tb_native`): start the
core through the registers, poll ``REG_STATUS`` until FINISH or the cycle bound, read the
counters, and fail with a message the back end shows.

Imported inside the simulator; it has no ``@cocotb.test`` of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn

from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles

from openvta.isa import COUNTER_BASE, HW_COUNTERS, REG_CONTROL, REG_INSN_ADDR, REG_INSN_COUNT, REG_STATUS
from openvta.isa.counters import COUNTER_WIDTH, REG_WIDTH
from openvta.runtime.program import Program

__all__ = ["CLOCK_PERIOD_NS", "RESET_CYCLES", "cycles", "fail", "read_counters", "reset", "run_to_finish"]

CLOCK_PERIOD_NS = 10
RESET_CYCLES = 5


def cycles() -> int:
    """Clock cycles simulated so far."""
    return int(get_sim_time("ns")) // CLOCK_PERIOD_NS


async def reset(dut: Any) -> None:
    """Hold ``rst`` for :data:`RESET_CYCLES` cycles, then two cycles out of reset."""
    dut.rst.value = 1
    await ClockCycles(dut.clk, RESET_CYCLES)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)


def fail(run_dir: Path, message: str) -> NoReturn:
    """Leave ``message`` in the run directory's ``error.txt`` and fail the cocotb test."""
    (run_dir / "error.txt").write_text(message)
    raise AssertionError(message)


async def read_counters(axil: Any) -> dict[str, int]:
    """Every hardware counter, read through the AXI4-Lite master ``axil``."""
    counters = {}
    for k, counter in enumerate(HW_COUNTERS):
        base = COUNTER_BASE + COUNTER_WIDTH // 8 * k
        low = await axil.read_dword(base)
        high = await axil.read_dword(base + REG_WIDTH // 8)
        counters[str(counter)] = high << REG_WIDTH | low
    return counters


async def run_to_finish(tb: Any, run_dir: Path, program: Program, max_cycles: int,
                        wait: Callable[[int], Awaitable[Any]]) -> dict[str, int]:
    """Start ``program`` on the core of ``tb`` (``.axil``, ``.cycles()``) and poll until
    FINISH, awaiting ``wait(cycles run so far)`` between polls; the counters at the end.

    One line per poll goes to ``progress.txt`` (read by :mod:`openvta.hw.cosim.runner` while the
    simulation runs); past ``max_cycles`` the run fails with the counters listed.
    """
    await tb.axil.write_dword(REG_INSN_ADDR, program.insn_addr)
    await tb.axil.write_dword(REG_INSN_COUNT, program.insn_count)
    started = tb.cycles()
    await tb.axil.write_dword(REG_CONTROL, 1)
    # the core started during that write: counted from here, and before the status is
    # read, every poll's count is below the run's final cycle count
    running = tb.cycles()
    with open(run_dir / "progress.txt", "a") as progress:
        while True:
            ran = tb.cycles() - running
            if (await tb.axil.read_dword(REG_STATUS)) & 1:
                break
            progress.write(f"{ran}\n")
            progress.flush()
            elapsed = tb.cycles() - started
            if elapsed >= max_cycles:
                counters = await read_counters(tb.axil)
                listing = "\n".join(f"  {name} = {value}" for name, value in counters.items())
                fail(run_dir, f"RTL hit the cycle bound: no FINISH (REG_STATUS bit 0 clear) "
                              f"after {elapsed} cycles, max_cycles={max_cycles}; counters:\n{listing}")
            await wait(elapsed)
    return await read_counters(tb.axil)

"""Performance counters: the names and meanings every back end reports.

The functional simulator reports the event counters; the cycle model and the RTL
also report the cycle counters, with the same definitions.  Back ends key their
``counters`` dict by these names (``Counter`` members are ``str``).
"""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import NamedTuple

from .enums import Unit

__all__ = [
    "Counter", "EVENT_COUNTERS", "CYCLE_COUNTERS", "COUNTER_DOC", "HW_COUNTERS", "COUNTER_BASE",
    "REG_CONTROL", "REG_STATUS", "REG_INSN_ADDR", "REG_INSN_COUNT", "REG_COUNTERS", "REGISTER_DOC",
    "CounterSet", "counter_set", "UnitCounters", "UNIT_COUNTERS",
]


class Counter(str, Enum):
    """Counter names (the value is the key in a result's ``counters``)."""

    # -- events: every back end ---------------------------------------------------
    FETCH_INSNS = "fetch_insns"
    LOAD_INSNS = "load_insns"
    COMPUTE_INSNS = "compute_insns"
    STORE_INSNS = "store_insns"
    SYNC_INSNS = "sync_insns"
    GEMM_INSNS = "gemm_insns"
    ALU_INSNS = "alu_insns"
    GEMM_UOPS = "gemm_uops"
    ALU_UOPS = "alu_uops"
    MACS = "macs"
    INP_LOAD_BYTES = "inp_load_bytes"
    WGT_LOAD_BYTES = "wgt_load_bytes"
    UOP_LOAD_BYTES = "uop_load_bytes"
    ACC_LOAD_BYTES = "acc_load_bytes"
    OUT_STORE_BYTES = "out_store_bytes"
    INSN_FETCH_BYTES = "insn_fetch_bytes"
    DRAM_READ_BYTES = "dram_read_bytes"
    DRAM_WRITE_BYTES = "dram_write_bytes"
    TOKEN_PUSHES = "token_pushes"
    TOKEN_POPS = "token_pops"
    # -- cycles: cycle model and RTL ----------------------------------------------
    CYCLES = "cycles"
    FETCH_BUSY_CYCLES = "fetch_busy_cycles"
    LOAD_BUSY_CYCLES = "load_busy_cycles"
    COMPUTE_BUSY_CYCLES = "compute_busy_cycles"
    STORE_BUSY_CYCLES = "store_busy_cycles"
    GEMM_BUSY_CYCLES = "gemm_busy_cycles"
    ALU_BUSY_CYCLES = "alu_busy_cycles"
    LOAD_WAIT_TOKEN_CYCLES = "load_wait_token_cycles"
    COMPUTE_WAIT_TOKEN_CYCLES = "compute_wait_token_cycles"
    STORE_WAIT_TOKEN_CYCLES = "store_wait_token_cycles"
    FETCH_WAIT_MEMORY_CYCLES = "fetch_wait_memory_cycles"
    LOAD_WAIT_MEMORY_CYCLES = "load_wait_memory_cycles"
    COMPUTE_WAIT_MEMORY_CYCLES = "compute_wait_memory_cycles"
    STORE_WAIT_MEMORY_CYCLES = "store_wait_memory_cycles"
    FETCH_WAIT_QUEUE_CYCLES = "fetch_wait_queue_cycles"
    LOAD_WAIT_QUEUE_CYCLES = "load_wait_queue_cycles"
    COMPUTE_WAIT_QUEUE_CYCLES = "compute_wait_queue_cycles"
    STORE_WAIT_QUEUE_CYCLES = "store_wait_queue_cycles"

    def __str__(self) -> str:
        return self.value


COUNTER_DOC: dict[Counter, str] = {
    Counter.FETCH_INSNS: "instructions read from DRAM by fetch",
    Counter.LOAD_INSNS: "instructions executed by the load module",
    Counter.COMPUTE_INSNS: "instructions executed by the compute module (FINISH included)",
    Counter.STORE_INSNS: "instructions executed by the store module",
    Counter.SYNC_INSNS: "LOAD/STORE instructions with x_size = 0 (tokens only)",
    Counter.GEMM_INSNS: "GEMM instructions executed",
    Counter.ALU_INSNS: "ALU instructions executed",
    Counter.GEMM_UOPS: "GEMM micro-op executions (iter_out × iter_in × micro-ops, summed)",
    Counter.ALU_UOPS: "ALU micro-op executions",
    Counter.MACS: "multiply-accumulates: GEMM micro-ops (reset excluded) × BATCH·BLOCK_IN·BLOCK_OUT",
    Counter.INP_LOAD_BYTES: "bytes read from DRAM into the inp buffer (padding excluded)",
    Counter.WGT_LOAD_BYTES: "bytes read from DRAM into the wgt buffer",
    Counter.UOP_LOAD_BYTES: "bytes read from DRAM into the micro-op buffer",
    Counter.ACC_LOAD_BYTES: ("bytes read from DRAM into the accumulator (ACC and ACC_8BIT) or the drain unit's "
                             "epi buffer (EPI, EPI_8BIT)"),
    Counter.OUT_STORE_BYTES: "bytes written to DRAM from the out buffer (or drained from the accumulator)",
    Counter.INSN_FETCH_BYTES: "bytes of instructions read by fetch",
    Counter.DRAM_READ_BYTES: "all bytes read from DRAM (instructions, micro-ops, tiles)",
    Counter.DRAM_WRITE_BYTES: "all bytes written to DRAM",
    Counter.TOKEN_PUSHES: "dependency tokens pushed, all four queues",
    Counter.TOKEN_POPS: "dependency tokens popped, all four queues",
    Counter.CYCLES: "clock cycles from start to FINISH",
    Counter.FETCH_BUSY_CYCLES: "cycles fetch spends reading and routing instructions",
    Counter.LOAD_BUSY_CYCLES: "cycles the load module executes an instruction",
    Counter.COMPUTE_BUSY_CYCLES: "cycles the compute module executes an instruction",
    Counter.STORE_BUSY_CYCLES: "cycles the store module executes an instruction",
    Counter.GEMM_BUSY_CYCLES: "cycles the GEMM core executes micro-ops",
    Counter.ALU_BUSY_CYCLES: "cycles the ALU executes micro-ops",
    Counter.LOAD_WAIT_TOKEN_CYCLES: "cycles load waits to pop, or to push into a full token queue",
    Counter.COMPUTE_WAIT_TOKEN_CYCLES: "cycles compute waits on a token queue",
    Counter.STORE_WAIT_TOKEN_CYCLES: "cycles store waits on a token queue",
    Counter.FETCH_WAIT_MEMORY_CYCLES: "cycles fetch waits for the memory system",
    Counter.LOAD_WAIT_MEMORY_CYCLES: "cycles load waits for the memory system",
    Counter.COMPUTE_WAIT_MEMORY_CYCLES: "cycles compute waits for the memory system",
    Counter.STORE_WAIT_MEMORY_CYCLES: "cycles store waits for the memory system",
    Counter.FETCH_WAIT_QUEUE_CYCLES: "cycles fetch waits on a full command queue",
    Counter.LOAD_WAIT_QUEUE_CYCLES: "cycles load waits on an empty command queue",
    Counter.COMPUTE_WAIT_QUEUE_CYCLES: "cycles compute waits on an empty command queue",
    Counter.STORE_WAIT_QUEUE_CYCLES: "cycles store waits on an empty command queue",
}

#: Counters every back end reports, the functional simulator included.
EVENT_COUNTERS = tuple(c for c in Counter if not c.value.endswith("cycles"))
#: Counters of the timed back ends (cycle model, RTL).
CYCLE_COUNTERS = tuple(c for c in Counter if c.value.endswith("cycles"))

class UnitCounters(NamedTuple):
    """The cycle counters of one unit: busy, and waiting on a token, memory, its queue."""

    busy: Counter
    wait_token: Counter | None  # fetch pops no token
    wait_memory: Counter
    wait_queue: Counter


#: Each unit's cycle counters.
UNIT_COUNTERS: dict[Unit, UnitCounters] = {
    Unit.FETCH: UnitCounters(Counter.FETCH_BUSY_CYCLES, None, Counter.FETCH_WAIT_MEMORY_CYCLES,
                             Counter.FETCH_WAIT_QUEUE_CYCLES),
    Unit.LOAD: UnitCounters(Counter.LOAD_BUSY_CYCLES, Counter.LOAD_WAIT_TOKEN_CYCLES,
                            Counter.LOAD_WAIT_MEMORY_CYCLES, Counter.LOAD_WAIT_QUEUE_CYCLES),
    Unit.COMPUTE: UnitCounters(Counter.COMPUTE_BUSY_CYCLES, Counter.COMPUTE_WAIT_TOKEN_CYCLES,
                               Counter.COMPUTE_WAIT_MEMORY_CYCLES, Counter.COMPUTE_WAIT_QUEUE_CYCLES),
    Unit.STORE: UnitCounters(Counter.STORE_BUSY_CYCLES, Counter.STORE_WAIT_TOKEN_CYCLES,
                             Counter.STORE_WAIT_MEMORY_CYCLES, Counter.STORE_WAIT_QUEUE_CYCLES),
}

#: Counters the RTL implements, in register order: counter ``k`` is the 64-bit value at
#: byte offsets ``COUNTER_BASE + 8·k`` (low word) and ``+ 4`` (high word) of the
#: AXI4-Lite register block.
HW_COUNTERS = tuple(Counter)
COUNTER_BASE = 0x100
#: Bits of each hardware counter (two registers).
COUNTER_WIDTH = 64

#: Bits of every register of the AXI4-Lite register block.
REG_WIDTH = 32

#: AXI4-Lite register map (byte offsets of 32-bit registers).
REG_CONTROL = 0x00  # write bit 0 = 1: start (reads 1 while running)
REG_STATUS = 0x04  # bit 0: done (FINISH executed); cleared by start
REG_INSN_ADDR = 0x08  # byte address of the first instruction
REG_INSN_COUNT = 0x0C  # number of instructions
REG_COUNTERS = 0x10  # read only: the CounterSet code of the counters the image implements

#: Access and meaning of each register above, by name (the docs' register table).
REGISTER_DOC: dict[str, tuple[str, str]] = {
    "REG_CONTROL": ("R/W", "write bit 0 = 1: start; reads bit 0 = 1 while running"),
    "REG_STATUS": ("R", "bit 0: done (FINISH executed since the last start)"),
    "REG_INSN_ADDR": ("R/W", "byte address of the first instruction"),
    "REG_INSN_COUNT": ("R/W", "number of instructions"),
    "REG_COUNTERS": ("R", "counters the image implements: 0 all, 1 `cycles` only, 2 none "
                          "(`CounterSet`); a missing counter's registers read 0"),
}


class CounterSet(IntEnum):
    """The counters a hardware image implements (the build option ``counters``).

    The code is what ``REG_COUNTERS`` reads.  A counter an image lacks keeps its
    address (``COUNTER_BASE + 8·k``, ``k`` its index in :data:`HW_COUNTERS`) but reads
    0 there, so the host reads ``REG_COUNTERS`` first and reports only the counters
    the image has.  ``ALL`` is code 0 because images built before ``REG_COUNTERS``
    existed read 0 at that offset and implement every counter.

    Examples
    --------
    >>> CounterSet.CYCLES.counters
    (<Counter.CYCLES: 'cycles'>,)
    >>> counter_set("none").label, int(counter_set("none"))
    ('none', 2)
    """

    ALL = 0
    CYCLES = 1
    NONE = 2

    @property
    def label(self) -> str:
        """The option's name: ``all``, ``cycles`` or ``none``."""
        return self.name.lower()

    @property
    def counters(self) -> tuple[Counter, ...]:
        """The implemented counters, in :data:`HW_COUNTERS` order."""
        if self is CounterSet.ALL:
            return HW_COUNTERS
        return (Counter.CYCLES,) if self is CounterSet.CYCLES else ()


def counter_set(value: object) -> CounterSet:
    """The :class:`CounterSet` named by ``value`` (``"all"``, ``"cycles"``, ``"none"``,
    or a member).

    Raises
    ------
    ValueError
        if ``value`` names no counter set.
    """
    if isinstance(value, CounterSet):
        return value
    for member in CounterSet:
        if value == member.label:
            return member
    choices = ", ".join(repr(m.label) for m in CounterSet)
    raise ValueError(f"counters must be one of {choices}, not {value!r}")

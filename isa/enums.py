"""The ISA's enumerations: opcodes, memory types, ALU ops, modules and token queues.

Every other layer names these members; no integer or string stands for an op
anywhere else.
"""

from __future__ import annotations

from enum import Enum, IntEnum

import numpy as np

__all__ = [
    "Opcode", "MemoryType", "AluOp", "DrainOp", "Module", "Unit", "TokenQueue", "module_of", "modules_of",
    "LOAD_MODULE_TYPES", "STORE_MODULE_TYPES", "dram_type",
]


class Opcode(IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemoryType(IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4
    ACC_8BIT = 5
    #: machine v2 (a drain unit): an epi buffer word, int32 like an acc tile (LOAD on store)
    EPI = 6
    #: machine v2: an epi buffer word stored as int8, sign-extended on LOAD (on store)
    EPI_8BIT = 7


class AluOp(IntEnum):
    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3
    MUL = 4


class DrainOp(IntEnum):
    """A drain stage's operation (machine v2, docs/ISA.md §9): the ALU's five, then RSHR (the
    ALU's rounding shift in one stage) and CLIP (MIN and MAX by a word's two halves)."""

    MIN = AluOp.MIN
    MAX = AluOp.MAX
    ADD = AluOp.ADD
    SHR = AluOp.SHR
    MUL = AluOp.MUL
    RSHR = 5
    CLIP = 6


class Module(IntEnum):
    """The three instruction-executing modules, upstream first ("prev" < "next")."""

    LOAD = 0
    COMPUTE = 1
    STORE = 2


class Unit(str, Enum):
    """The machine's four units, fetch first: the keys of every back end's per-unit timing.

    :class:`Module` names the three that execute instructions (and own token queues); a
    unit is also fetch, which reads the stream and routes it.  Members are ``str``: a unit
    is its lower-case name, as in the counter names (``fetch_busy_cycles``).
    """

    FETCH = "fetch"
    LOAD = "load"
    COMPUTE = "compute"
    STORE = "store"

    def __str__(self) -> str:
        return self.value


class TokenQueue(IntEnum):
    """The four dependency-token queues of docs/ISA.md §5."""

    LOAD_TO_COMPUTE = 0
    COMPUTE_TO_LOAD = 1
    COMPUTE_TO_STORE = 2
    STORE_TO_COMPUTE = 3

    @property
    def producer(self) -> Module:
        return _QUEUE_ENDS[self][0]

    @property
    def consumer(self) -> Module:
        return _QUEUE_ENDS[self][1]

    @property
    def label(self) -> str:
        return f"{self.producer.name.lower()}→{self.consumer.name.lower()}"

    @classmethod
    def between(cls, producer: Module, consumer: Module) -> TokenQueue:
        """The queue from ``producer`` to ``consumer``; there is none between load and store."""
        for queue, ends in _QUEUE_ENDS.items():
            if ends == (producer, consumer):
                return queue
        raise ValueError(
            f"there is no token queue from {producer.name.lower()} to {consumer.name.lower()}"
        )

    @classmethod
    def popped_by(cls, module: Module, flag: str) -> TokenQueue:
        """The queue a ``pop_prev_dep``/``pop_next_dep`` flag of ``module`` pops."""
        other = _neighbour(module, flag)
        return cls.between(other, module)

    @classmethod
    def pushed_by(cls, module: Module, flag: str) -> TokenQueue:
        """The queue a ``push_prev_dep``/``push_next_dep`` flag of ``module`` pushes."""
        other = _neighbour(module, flag)
        return cls.between(module, other)


_QUEUE_ENDS = {
    TokenQueue.LOAD_TO_COMPUTE: (Module.LOAD, Module.COMPUTE),
    TokenQueue.COMPUTE_TO_LOAD: (Module.COMPUTE, Module.LOAD),
    TokenQueue.COMPUTE_TO_STORE: (Module.COMPUTE, Module.STORE),
    TokenQueue.STORE_TO_COMPUTE: (Module.STORE, Module.COMPUTE),
}


def _neighbour(module: Module, flag: str) -> Module:
    step = -1 if "prev" in flag else 1
    index = module + step
    if not 0 <= index < len(Module):
        raise ValueError(f"{module.name.lower()} module has no {flag.split('_')[1]} neighbour")
    return Module(index)


#: Memory types whose LOADs run on the load module; the epi buffer's LOADs run on the
#: store module (machine v2); every other LOAD runs on compute.
LOAD_MODULE_TYPES = (MemoryType.INP, MemoryType.WGT)
#: Memory types whose LOADs run on the store module: the drain unit's epi buffer.
STORE_MODULE_TYPES = (MemoryType.EPI, MemoryType.EPI_8BIT)


def module_of(opcode: int, memory_type: int) -> Module:
    """Where fetch routes an instruction (docs/ISA.md §5).

    STORE and LOAD EPI/EPI_8BIT → store; LOAD of INP/WGT → load; everything else → compute.
    """
    if opcode == Opcode.STORE or (opcode == Opcode.LOAD and memory_type in STORE_MODULE_TYPES):
        return Module.STORE
    if opcode == Opcode.LOAD and memory_type in LOAD_MODULE_TYPES:
        return Module.LOAD
    return Module.COMPUTE


def dram_type(opcode: int, memory_type: int) -> MemoryType:
    """The memory type of the DRAM elements a memory instruction moves: a STORE always
    writes OUT elements (a draining STORE ACC of machine v2 too); a LOAD its own type."""
    return MemoryType.OUT if opcode == Opcode.STORE else MemoryType(memory_type)


def modules_of(opcodes: np.ndarray, memory_types: np.ndarray) -> np.ndarray:
    """:func:`module_of` over whole streams: an int array of :class:`Module` values."""
    on_load = (opcodes == Opcode.LOAD) & np.isin(memory_types, LOAD_MODULE_TYPES)
    out = np.full(len(opcodes), int(Module.COMPUTE), dtype=np.int64)
    out[on_load] = Module.LOAD
    on_store = (opcodes == Opcode.STORE) | ((opcodes == Opcode.LOAD) & np.isin(memory_types, STORE_MODULE_TYPES))
    out[on_store] = Module.STORE
    return out

"""The accelerator's state and instruction effects, shared by every simulator.

:class:`Machine` decodes and validates a program, owns the buffers, the event
counters and the happens-before clocks, and applies one instruction at a time.
*When* an instruction runs is the caller's business: the functional executor picks
any order the tokens allow, the cycle model applies each instruction at the
simulated time it completes.  Both therefore compute with the same code.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from openvta.isa import (
    EVENT_COUNTERS,
    INSN_BYTES,
    AluInsn,
    Config,
    Counter,
    GemmInsn,
    Instruction,
    MemInsn,
    MemoryType,
    Module,
    Opcode,
    TokenQueue,
    decode_table,
    dram_type,
    format_insn,
    modules_of,
)
from openvta.isa.instructions import POP_FLAGS, PUSH_FLAGS, decode_stream
from openvta.isa.report import RunReport
from openvta.runtime.program import Program, Result

from ..errors import FinishError, MemoryAccessError
from .races import RaceChecker, VectorClocks
from .semantics import Access, MachineState, execute_alu, execute_gemm, execute_load, execute_store
from .validate import check_stream

__all__ = ["Machine", "token_queues_of"]

_LOAD_BYTES = {
    MemoryType.INP: Counter.INP_LOAD_BYTES,
    MemoryType.WGT: Counter.WGT_LOAD_BYTES,
    MemoryType.UOP: Counter.UOP_LOAD_BYTES,
    MemoryType.ACC: Counter.ACC_LOAD_BYTES,
    MemoryType.ACC_8BIT: Counter.ACC_LOAD_BYTES,
    MemoryType.EPI: Counter.ACC_LOAD_BYTES,
    MemoryType.EPI_8BIT: Counter.ACC_LOAD_BYTES,
}
_INSNS = (Counter.LOAD_INSNS, Counter.COMPUTE_INSNS, Counter.STORE_INSNS)


def token_queues_of(insn: Instruction, module: Module) -> tuple[list[TokenQueue], list[TokenQueue]]:
    """The queues ``insn`` pops and pushes when it runs on ``module``."""
    pops = [TokenQueue.popped_by(module, f) for f in POP_FLAGS if getattr(insn, f)]
    pushes = [TokenQueue.pushed_by(module, f) for f in PUSH_FLAGS if getattr(insn, f)]
    return pops, pushes


def _queues(module: Module, flags: int) -> tuple[list[TokenQueue], list[TokenQueue]]:
    """:func:`token_queues_of` from the flag bits (pop prev, pop next, push prev, push next)."""
    pops = [TokenQueue.popped_by(module, f) for i, f in enumerate(POP_FLAGS) if flags >> i & 1]
    pushes = [TokenQueue.pushed_by(module, f) for i, f in enumerate(PUSH_FLAGS) if flags >> 2 + i & 1]
    return pops, pushes


def _queue_table() -> dict[tuple[int, int], tuple[list[TokenQueue], list[TokenQueue]]]:
    """(module, flag bits) -> (queues popped, queues pushed), for every valid pair."""
    table = {}
    for module in Module:
        for flags in range(16):
            try:
                table[int(module), flags] = _queues(module, flags)
            except ValueError:  # a flag with no queue on this module: check_stream rejects it
                pass
    return table


_MODULES = list(Module)
_QUEUES = _queue_table()


def _dram_shared(table: dict[str, np.ndarray], cfg: Config, size: int, granule: int) -> list[tuple[int, int]]:
    """Granule ranges ``[lo, hi)`` that a STORE may write and a LOAD may read (bounding ranges)."""
    op = table["opcode"]
    load, store = op == Opcode.LOAD, op == Opcode.STORE
    moves = (load | store) & (table["x_size"] > 0) & (table["y_size"] > 0)
    elem_of = np.array([cfg.elem_bytes(m) for m in MemoryType], dtype=np.int64)
    elem = elem_of[np.where(moves, np.where(store, int(MemoryType.OUT), table["memory_type"]), 0)]
    base = table["dram_base"]
    end = base + (table["y_size"] - 1) * table["x_stride"] + table["x_size"]
    lo = np.minimum(base * elem // granule, size)
    hi = np.minimum(-(-(end * elem) // granule), size)
    stores, loads = (_union(lo[mask], hi[mask]) for mask in (moves & store, moves & load))
    shared, i, j = [], 0, 0
    while i < len(stores) and j < len(loads):
        a, b = max(stores[i][0], loads[j][0]), min(stores[i][1], loads[j][1])
        if a < b:
            shared.append((a, b))
        if stores[i][1] < loads[j][1]:
            i += 1
        else:
            j += 1
    return shared


def _union(lo: np.ndarray, hi: np.ndarray) -> list[tuple[int, int]]:
    """The union of ranges ``[lo, hi)`` as sorted disjoint ranges."""
    keep = hi > lo
    order = np.argsort(lo[keep], kind="stable")
    lo, hi = lo[keep][order], hi[keep][order]
    if len(lo) == 0:
        return []
    reach = np.maximum.accumulate(hi)
    first = np.flatnonzero(np.r_[True, lo[1:] > reach[:-1]])
    last = np.r_[first[1:] - 1, len(lo) - 1]
    return list(zip(lo[first].tolist(), reach[last].tolist()))


class _Decoded(NamedTuple):
    """What a program's instruction words decode to: a pure function of the words, the
    configuration and the DRAM size, worked out once per program (:func:`_decode`)."""

    insns: list[Instruction]
    module: list[Module]
    pops: list[list[TokenQueue]]
    pushes: list[list[TokenQueue]]
    dram_shared: list[tuple[int, int]]
    #: loop plans (:func:`.semantics.loop_plan`) shared by every run of the program
    plans: dict[tuple, Any]
    #: what other simulators work out once per program (the cycle model: loop cycles)
    extra: dict[Any, Any]


_DECODED_PROGRAMS = 16  # programs whose decoding each thread keeps
_decoded_cache = threading.local()  # per thread: the plans' scratch arrays are not shared


def _decode(program: Program) -> _Decoded:
    """Decode and validate ``program`` (:class:`EncodingError`), or reuse the decoding of
    a program with the same words, configuration and DRAM size run before (on this
    thread): running one program again, as benchmarks and measurements do, skips the
    decoding, the checks and the loop plans."""
    cfg = program.config
    words = program.words()
    cache: OrderedDict[tuple, _Decoded] | None = getattr(_decoded_cache, "programs", None)
    if cache is None:
        cache = _decoded_cache.programs = OrderedDict()
    key = (cfg, len(program.dram), words.tobytes())
    decoded = cache.get(key)
    if decoded is not None:
        cache.move_to_end(key)
        return decoded
    table = decode_table(words, cfg)
    check_stream(table, words, cfg)
    insns = decode_stream(words, cfg, table=table)
    modules = modules_of(table["opcode"], table["memory_type"]).tolist()
    flags = table["pop_prev_dep"] | table["pop_next_dep"] << 1
    flags |= table["push_prev_dep"] << 2 | table["push_next_dep"] << 3
    queues = [_QUEUES[m, f] for m, f in zip(modules, flags.tolist())]
    granule = min(cfg.elem_bytes(m) for m in MemoryType)
    shared = _dram_shared(table, cfg, -(-len(program.dram) // granule), granule)
    decoded = _Decoded(insns, [_MODULES[m] for m in modules], [q[0] for q in queues],
                       [q[1] for q in queues], shared, {}, {})
    cache[key] = decoded
    if len(cache) > _DECODED_PROGRAMS:
        cache.popitem(last=False)
    return decoded


class Machine:
    """One program's machine state, ready to execute its instructions.

    Parameters
    ----------
    program :
        decoded and validated here (:class:`EncodingError` before anything runs).
    check_races :
        check every shared access against the token order (see :mod:`.races`).

    Members
    -------
    insns, module :
        the decoded instructions and the module each one runs on.
    pops, pushes :
        the token queues each instruction pops and pushes.
    decoded :
        all of the above and the loop plans, shared by every run of the same
        instruction words (same configuration and DRAM size) on this thread.
    """

    def __init__(self, program: Program, *, check_races: bool = True) -> None:
        self.program = program
        self.cfg = cfg = program.config
        decoded = self.decoded = _decode(program)
        self.insns = decoded.insns
        self.module = decoded.module
        self.pops = decoded.pops
        self.pushes = decoded.pushes
        self.state = MachineState(cfg, program.dram, plans=decoded.plans)
        self.clocks = VectorClocks()
        self.races: RaceChecker | None = None
        if check_races:
            granule = self.state.granule
            dram = -(-len(program.dram) // granule)
            sizes = {"inp": cfg.inp_depth, "wgt": cfg.wgt_depth, "out": cfg.out_depth, "dram": dram}
            shared = {"dram": decoded.dram_shared}
            self.races = RaceChecker(sizes, self.clocks, self.describe, granule, shared)
        self.counters: dict[str, int] = {c.value: 0 for c in EVENT_COUNTERS}
        self.finished = False

    def describe(self, index: int) -> str:
        return format_insn(self.insns[index])

    # -- token edges -----------------------------------------------------------------
    def begin(self, module: Module, index: int) -> None:
        """``module`` starts instruction ``index`` (after its pops were granted)."""
        self.clocks.begin(module, index)

    def receive(self, module: Module, stamp: np.ndarray) -> None:
        """``module`` popped a token carrying ``stamp``."""
        self.clocks.receive(module, stamp.tolist())
        self.counters[Counter.TOKEN_POPS] += 1

    def stamp(self, module: Module) -> np.ndarray:
        """The happens-before stamp a token pushed by ``module`` now carries."""
        self.counters[Counter.TOKEN_PUSHES] += 1
        return np.array(self.clocks.stamp(module), dtype=np.int64)

    # -- effects -------------------------------------------------------------------
    def execute(self, module: Module, index: int, tokens_left: Mapping[TokenQueue, int]) -> None:
        """Apply instruction ``index`` on ``module``; FINISH checks ``tokens_left``."""
        insn = self.insns[index]
        c = self.counters
        c[Counter.FETCH_INSNS] += 1
        c[Counter.INSN_FETCH_BYTES] += INSN_BYTES
        c[_INSNS[module]] += 1
        what = f"instruction {index}"
        if insn.opcode == Opcode.FINISH:
            self._finish(what, tokens_left)
            return
        try:
            accesses = self._apply(insn, what)
        except MemoryAccessError as exc:
            raise MemoryAccessError(f"{exc} [{format_insn(insn)}]") from None
        if self.races is not None and accesses:
            self.races.check(module, accesses)

    def _apply(self, insn: Instruction, what: str) -> list[Access]:
        c = self.counters
        if isinstance(insn, MemInsn):
            if insn.x_size == 0:
                c[Counter.SYNC_INSNS] += 1
                return []
            nbytes = insn.y_size * insn.x_size * self.cfg.elem_bytes(dram_type(insn.opcode, insn.memory_type))
            if insn.opcode == Opcode.STORE:
                c[Counter.OUT_STORE_BYTES] += nbytes
                c[Counter.DRAM_WRITE_BYTES] += nbytes
                return execute_store(self.state, insn, what)
            c[_LOAD_BYTES[insn.memory_type]] += nbytes
            c[Counter.DRAM_READ_BYTES] += nbytes
            return execute_load(self.state, insn, what)
        if isinstance(insn, AluInsn):
            accesses, n = execute_alu(self.state, insn, what)
            c[Counter.ALU_INSNS] += 1
            c[Counter.ALU_UOPS] += n
            return accesses
        assert isinstance(insn, GemmInsn)
        accesses, n = execute_gemm(self.state, insn, what)
        c[Counter.GEMM_INSNS] += 1
        c[Counter.GEMM_UOPS] += n
        if not insn.reset_reg:
            c[Counter.MACS] += n * self.cfg.macs_per_uop
        return accesses

    def _finish(self, what: str, tokens_left: Mapping[TokenQueue, int]) -> None:
        self.counters[Counter.DRAM_READ_BYTES] += self.counters[Counter.INSN_FETCH_BYTES]
        left = {q.label: n for q, n in tokens_left.items() if n}
        if left:
            listing = ", ".join(f"{label}: {n}" for label, n in left.items())
            raise FinishError(f"{what}: token queues are not empty at FINISH ({listing})")
        clock = self.clocks.clock[Module.COMPUTE]
        for module in (Module.LOAD, Module.STORE):
            if clock[module] == self.module.count(module):
                continue
            mine = [i for i, m in enumerate(self.module) if m == module]
            if clock[module] < len(mine):
                first = mine[int(clock[module])]
                name = module.name.lower()
                raise FinishError(
                    f"{what}: {name} instruction {first} ({self.describe(first)}) is not "
                    f"ordered before FINISH by tokens: {len(mine) - int(clock[module])} of "
                    f"{len(mine)} {name} instructions may still be running"
                )
        self.finished = True

    def result(self) -> Result:
        counters = dict(self.counters)
        # events only: the functional simulator counts no time
        return Result(dram=self.state.dram, counters=counters,
                      report=RunReport.measured("functional", counters))

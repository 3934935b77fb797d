"""The golden executor: fetch, load, compute and store under the token rule (ISA.md §5).

There is no notion of time here.  Fetch routes instructions in program order into
bounded command queues; each module runs the head of its queue once every token it
pops is available and every queue it pushes has room.  Modules and bounded queues
form a Kahn process network, so whether the program finishes, and what it computes
when it is race-free, does not depend on the order the simulator picks.  When no
module can move and FINISH has not run, that is a deadlock, reported with each
module's blocked instruction and every queue's fill.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from openvta.isa import (
    AluInsn,
    Counter,
    EVENT_COUNTERS,
    GemmInsn,
    Instruction,
    MemInsn,
    MemoryType,
    Module,
    Opcode,
    TokenQueue,
    decode_table,
    format_insn,
    modules_of,
)
from openvta.isa.instructions import decode_stream
from openvta.runtime.program import Program, Result

from ..errors import DeadlockError, FinishError, MemoryAccessError
from .races import RaceChecker, VectorClocks
from .semantics import Access, MachineState, execute_alu, execute_gemm, execute_load, execute_store
from .validate import check_stream

__all__ = ["FunctionalSimulator", "FunctionalBackend", "run", "token_queues_of"]

_FLAGS = ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")
_LOAD_BYTES = {
    MemoryType.INP: Counter.INP_LOAD_BYTES,
    MemoryType.WGT: Counter.WGT_LOAD_BYTES,
    MemoryType.UOP: Counter.UOP_LOAD_BYTES,
    MemoryType.ACC: Counter.ACC_LOAD_BYTES,
    MemoryType.ACC_8BIT: Counter.ACC_LOAD_BYTES,
}


def token_queues_of(insn: Instruction, module: Module) -> tuple[list[TokenQueue], list[TokenQueue]]:
    """The queues ``insn`` pops and pushes when it runs on ``module``."""
    pops = [TokenQueue.popped_by(module, f) for f in _FLAGS[:2] if getattr(insn, f)]
    pushes = [TokenQueue.pushed_by(module, f) for f in _FLAGS[2:] if getattr(insn, f)]
    return pops, pushes


class FunctionalSimulator:
    """Runs one program to FINISH on numpy buffers.

    Parameters
    ----------
    program :
        the program to run (its DRAM image is copied, not modified).
    check_races :
        check every shared access against the token order (see :mod:`.races`).

    Raises
    ------
    EncodingError, MemoryAccessError, DeadlockError, RaceError, FinishError
        from :meth:`run`, each naming the instruction and the state involved.
    """

    def __init__(self, program: Program, *, check_races: bool = True) -> None:
        self.program = program
        self.cfg = cfg = program.config
        words = program.words()
        table = decode_table(words, cfg)
        check_stream(table, words, cfg)
        self.insns = decode_stream(words, cfg)
        self.module = [Module(m) for m in modules_of(table["opcode"], table["memory_type"]).tolist()]
        self.state = MachineState(cfg, program.dram)
        self.clocks = VectorClocks()
        self.races: RaceChecker | None = None
        if check_races:
            sizes = {"inp": cfg.inp_depth, "wgt": cfg.wgt_depth, "out": cfg.out_depth,
                     "dram": -(-len(program.dram) // self.state.granule)}
            self.races = RaceChecker(sizes, self.clocks, self.describe, self.state.granule)
        self.counters: dict[str, int] = {c.value: 0 for c in EVENT_COUNTERS}
        self.tokens: dict[TokenQueue, deque[np.ndarray]] = {q: deque() for q in TokenQueue}
        self.commands: dict[Module, deque[int]] = {m: deque() for m in Module}
        self.fetched = 0
        self.finished = False

    def describe(self, index: int) -> str:
        return format_insn(self.insns[index])

    # -- scheduling ------------------------------------------------------------------
    def run(self) -> Result:
        while not self.finished:
            progress = self._fetch()
            for module in Module:
                while not self.finished and self._step(module):
                    progress = True
            if not progress and not self.finished:
                raise DeadlockError(self._deadlock_report())
        return Result(dram=self.state.dram, counters=dict(self.counters))

    def _fetch(self) -> bool:
        moved = False
        depth = self.cfg.CMD_QUEUE_DEPTH
        while self.fetched < len(self.insns):
            queue = self.commands[self.module[self.fetched]]
            if len(queue) >= depth:
                break
            queue.append(self.fetched)
            self.fetched += 1
            moved = True
        return moved

    def _step(self, module: Module) -> bool:
        queue = self.commands[module]
        if not queue:
            if self.fetched < len(self.insns):
                self._fetch()
            if not queue:
                return False
        index = queue[0]
        insn = self.insns[index]
        pops, pushes = token_queues_of(insn, module)
        if any(not self.tokens[q] for q in pops):
            return False
        if any(len(self.tokens[q]) >= self.cfg.DEP_QUEUE_DEPTH for q in pushes):
            return False
        queue.popleft()
        self.clocks.begin(module, index)
        for q in pops:
            self.clocks.receive(module, self.tokens[q].popleft())
        self._execute(module, index, insn)
        for q in pushes:
            self.tokens[q].append(self.clocks.stamp(module))
        self.counters[Counter.TOKEN_POPS] += len(pops)
        self.counters[Counter.TOKEN_PUSHES] += len(pushes)
        return True

    # -- execution -------------------------------------------------------------------
    def _execute(self, module: Module, index: int, insn: Instruction) -> None:
        what = f"instruction {index}"
        c = self.counters
        c[Counter.FETCH_INSNS] += 1
        c[Counter.INSN_FETCH_BYTES] += 16
        c[(Counter.LOAD_INSNS, Counter.COMPUTE_INSNS, Counter.STORE_INSNS)[module]] += 1
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
            nbytes = insn.y_size * insn.x_size * self.cfg.elem_bytes(insn.memory_type)
            if insn.opcode == Opcode.STORE:
                c[Counter.OUT_STORE_BYTES] += nbytes
                c[Counter.DRAM_WRITE_BYTES] += nbytes
                return execute_store(self.state, insn, what)
            c[_LOAD_BYTES[insn.memory_type]] += nbytes
            c[Counter.DRAM_READ_BYTES] += nbytes
            return execute_load(self.state, insn, what)
        if insn.opcode == Opcode.FINISH:
            self._finish(what)
            return []
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

    def _finish(self, what: str) -> None:
        self.counters[Counter.DRAM_READ_BYTES] += self.counters[Counter.INSN_FETCH_BYTES]
        left = {q.label: len(t) for q, t in self.tokens.items() if t}
        if left:
            listing = ", ".join(f"{label}: {n}" for label, n in left.items())
            raise FinishError(f"{what}: token queues are not empty at FINISH ({listing})")
        clock = self.clocks.clock[Module.COMPUTE]
        for module in (Module.LOAD, Module.STORE):
            total = sum(1 for m in self.module if m == module)
            if clock[module] < total:
                pending = [i for i, m in enumerate(self.module) if m == module]
                first = pending[int(clock[module])]
                raise FinishError(
                    f"{what}: {module.name.lower()} instruction {first} "
                    f"({self.describe(first)}) is not ordered before FINISH by tokens: "
                    f"{total - int(clock[module])} of {total} {module.name.lower()} "
                    "instructions may still be running"
                )
        self.finished = True

    # -- diagnostics -----------------------------------------------------------------
    def _deadlock_report(self) -> str:
        lines = ["deadlock: no module can make progress and FINISH has not run"]
        for module in Module:
            queue = self.commands[module]
            name = module.name.lower()
            if not queue:
                lines.append(f"  {name}: no instruction to run")
                continue
            index = queue[0]
            pops, pushes = token_queues_of(self.insns[index], module)
            waits = [f"a token on {q.label} (empty)" for q in pops if not self.tokens[q]]
            waits += [f"room on {q.label} (full)" for q in pushes
                      if len(self.tokens[q]) >= self.cfg.DEP_QUEUE_DEPTH]
            lines.append(f"  {name}: instruction {index} ({self.describe(index)}) waits for "
                         + " and ".join(waits))
        if self.fetched < len(self.insns):
            target = self.module[self.fetched].name.lower()
            lines.append(f"  fetch: instruction {self.fetched} waits for room in the full "
                         f"{target} command queue ({self.cfg.CMD_QUEUE_DEPTH} entries)")
        fill = ", ".join(f"{q.label} {len(self.tokens[q])}" for q in TokenQueue)
        lines.append(f"  token queues: {fill} (depth {self.cfg.DEP_QUEUE_DEPTH})")
        return "\n".join(lines)


def run(program: Program, *, check_races: bool = True) -> Result:
    """Run ``program`` on the functional simulator and return the final DRAM and counters."""
    return FunctionalSimulator(program, check_races=check_races).run()


class FunctionalBackend:
    """The ``functional`` back end of :class:`openvta.runtime.Device`."""

    def __init__(self, check_races: bool = True, **options: Any) -> None:
        if options:
            raise TypeError(f"the functional back end takes no options {sorted(options)}")
        self.check_races = check_races

    def run(self, program: Program) -> Result:
        return run(program, check_races=self.check_races)

"""The golden executor: fetch, load, compute and store under the token rule (docs/ISA.md §5).

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

from openvta.isa import Module, TokenQueue
from openvta.runtime.program import Program, Progress, Result

from ..errors import DeadlockError
from .machine import Machine
from .semantics import MachineState

__all__ = ["FunctionalSimulator", "FunctionalBackend", "run"]


class FunctionalSimulator:
    """Runs one program to FINISH on numpy buffers.

    Parameters
    ----------
    program :
        the program to run (its DRAM image is copied, not modified).
    check_races :
        check every shared access against the token order (see :mod:`.races`).
    progress :
        called as ``progress("instructions", executed, total)`` as the run goes on
        (:data:`openvta.runtime.Progress`).

    Raises
    ------
    EncodingError, MemoryAccessError, DeadlockError, RaceError, FinishError
        from :meth:`run`, each naming the instruction and the state involved.
    """

    def __init__(self, program: Program, *, check_races: bool = True,
                 progress: Progress | None = None) -> None:
        self.machine = Machine(program, check_races=check_races)
        self.progress = progress
        self.cfg = program.config
        self.tokens: dict[TokenQueue, deque[np.ndarray]] = {q: deque() for q in TokenQueue}
        self.commands: dict[Module, deque[int]] = {m: deque() for m in Module}
        self.fetched = 0

    @property
    def state(self) -> MachineState:
        """The machine's buffers and DRAM (:class:`~.semantics.MachineState`)."""
        return self.machine.state

    def run(self) -> Result:
        machine = self.machine
        total = len(machine.insns)
        executed = 0
        while not machine.finished:
            moved = self._fetch()
            for module in Module:
                while not machine.finished and self._step(module):
                    moved = True
                    executed += 1
            if not moved and not machine.finished:
                raise DeadlockError(self._deadlock_report())
            if self.progress is not None:
                self.progress("instructions", executed, total)
        return machine.result()

    def _fetch(self) -> bool:
        moved = False
        depth = self.cfg.CMD_QUEUE_DEPTH
        count = len(self.machine.insns)
        while self.fetched < count:
            queue = self.commands[self.machine.module[self.fetched]]
            if len(queue) >= depth:
                break
            queue.append(self.fetched)
            self.fetched += 1
            moved = True
        return moved

    def _step(self, module: Module) -> bool:
        queue = self.commands[module]
        if not queue:
            self._fetch()
            if not queue:
                return False
        index = queue[0]
        machine = self.machine
        pops, pushes = machine.pops[index], machine.pushes[index]
        if any(not self.tokens[q] for q in pops):
            return False
        if any(len(self.tokens[q]) >= self.cfg.DEP_QUEUE_DEPTH for q in pushes):
            return False
        queue.popleft()
        machine.begin(module, index)
        for q in pops:
            machine.receive(module, self.tokens[q].popleft())
        machine.execute(module, index, {q: len(t) for q, t in self.tokens.items()})
        for q in pushes:
            self.tokens[q].append(machine.stamp(module))
        return True

    def _deadlock_report(self) -> str:
        machine = self.machine
        lines = ["deadlock: no module can make progress and FINISH has not run"]
        for module in Module:
            queue = self.commands[module]
            name = module.name.lower()
            if not queue:
                lines.append(f"  {name}: no instruction to run")
                continue
            index = queue[0]
            waits = [f"a token on {q.label} (empty)" for q in machine.pops[index] if not self.tokens[q]]
            waits += [f"room on {q.label} (full)" for q in machine.pushes[index]
                      if len(self.tokens[q]) >= self.cfg.DEP_QUEUE_DEPTH]
            lines.append(f"  {name}: instruction {index} ({machine.describe(index)}) waits for "
                         + " and ".join(waits))
        if self.fetched < len(machine.insns):
            target = machine.module[self.fetched].name.lower()
            lines.append(f"  fetch: instruction {self.fetched} waits for room in the full "
                         f"{target} command queue ({self.cfg.CMD_QUEUE_DEPTH} entries)")
        fill = ", ".join(f"{q.label} {len(self.tokens[q])}" for q in TokenQueue)
        lines.append(f"  token queues: {fill} (depth {self.cfg.DEP_QUEUE_DEPTH})")
        return "\n".join(lines)


def run(program: Program, *, check_races: bool = True, progress: Progress | None = None) -> Result:
    """Run ``program`` on the functional simulator and return the final DRAM and counters."""
    return FunctionalSimulator(program, check_races=check_races, progress=progress).run()


class FunctionalBackend:
    """The ``functional`` back end of :class:`openvta.runtime.Device`."""

    def __init__(self, check_races: bool = True, progress: Progress | None = None,
                 **options: Any) -> None:
        if options:
            raise TypeError(f"the functional back end takes no options {sorted(options)}")
        self.check_races = check_races
        self.progress = progress

    def run(self, program: Program) -> Result:
        return run(program, check_races=self.check_races, progress=self.progress)

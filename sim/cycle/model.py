"""The cycle-level model: fetch, load, compute and store as SimPy processes.

The structure mirrors the hardware: three bounded command queues fed by fetch, four
bounded token queues (pushing into a full one stalls the pusher), a shared memory
system (:mod:`.memory`) and the per-instruction costs of :mod:`.costs`.  Time advances
per instruction and per burst, never per cycle.

Data moves at simulated time: when an instruction's cycles are spent, the functional
simulator's :class:`~openvta.sim.functional.Machine` applies its effect, so the
arithmetic exists once and the final DRAM equals the functional simulator's for
every race-free program (the race checker runs here too, on this schedule).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from openvta.isa import (
    INSN_BYTES,
    AluInsn,
    GemmInsn,
    MemInsn,
    Module,
    Opcode,
    Timing,
    TokenQueue,
    timing_for,
)
from openvta.runtime.program import Program, Result

from ..errors import DeadlockError, MemoryAccessError, SimulationError
from ..functional.machine import Machine
from ..functional.semantics import loop_indices
from .costs import Bursts, dma_bursts, fetch_bursts, hazard_stall_cycles, pad_elems
from .memory import Channel, ModuleStats
from .report import CycleReport, build_report

__all__ = ["CycleModel", "CycleBackend", "CycleLimitError", "simulate_cycles"]

#: Default bound on simulated cycles; a program needing more is stopped with an error.
DEFAULT_MAX_CYCLES = 10**10


class CycleLimitError(SimulationError):
    """The program ran past the cycle bound."""


@dataclass
class Token:
    stamp: np.ndarray
    time: int
    flow: int
    producer_insn: int


@dataclass
class InsnRecord:
    """One executed instruction, for traces and timelines."""

    module: str
    index: int
    start: int
    end: int
    label: str = ""


@dataclass
class TokenRecord:
    queue: TokenQueue
    flow: int
    push_time: int
    push_insn: int
    pop_time: int
    pop_insn: int


class CycleModel:
    """Runs one program, spending each instruction's cycles as SimPy time.

    Parameters
    ----------
    program :
        the program to run.
    timing :
        timing parameters (default: the preset of the program's configuration).
    check_races :
        run the race checker on this model's schedule.
    max_cycles :
        stop with :class:`CycleLimitError` past this many cycles.
    """

    def __init__(
        self,
        program: Program,
        timing: Timing | None = None,
        *,
        check_races: bool = True,
        max_cycles: int = DEFAULT_MAX_CYCLES,
    ) -> None:
        self.cfg = cfg = program.config
        self.timing = timing or timing_for(cfg)
        self.max_cycles = max_cycles
        self.machine = Machine(program, check_races=check_races)
        self.env = env = simpy.Environment()
        self.read = Channel(env, self.timing.dram_read_latency_cycles, cfg.bus_bytes)
        self.write = Channel(env, self.timing.dram_write_latency_cycles, cfg.bus_bytes)
        self.commands = {m: simpy.Store(env, capacity=cfg.CMD_QUEUE_DEPTH) for m in Module}
        self.tokens = {q: simpy.Store(env, capacity=cfg.DEP_QUEUE_DEPTH) for q in TokenQueue}
        self.stats = {name: ModuleStats() for name in ("fetch", "load", "compute", "store")}
        self.status = {name: "not started" for name in self.stats}
        self.records: list[InsnRecord] = []
        self.token_records: list[TokenRecord] = []
        self.done = env.event()
        self._flow = 0

    # -- processes -------------------------------------------------------------------
    def _fetch(self) -> Generator[Any, Any, None]:
        env, stats, timing = self.env, self.stats["fetch"], self.timing
        index = 0
        for chunk in fetch_bursts(len(self.machine.insns), self.cfg, timing):
            label = f"{index}..{index + chunk - 1}"
            self.status["fetch"] = f"reading instructions {label}"
            start = int(env.now)
            yield from self.read.latency(stats)
            beats = -(-chunk * INSN_BYTES // self.cfg.bus_bytes)
            yield from self.read.transfer(Bursts([(1, beats)]), stats)
            for _ in range(chunk):
                if timing.fetch_dispatch_cycles:
                    yield env.timeout(timing.fetch_dispatch_cycles)
                    stats.busy += timing.fetch_dispatch_cycles
                target = self.machine.module[index]
                self.status["fetch"] = (f"instruction {index} waits for room in the full "
                                        f"{target.name.lower()} command queue")
                asked = int(env.now)
                yield self.commands[target].put(index)
                stats.wait_queue += int(env.now) - asked
                stats.insns += 1
                index += 1
            self.records.append(InsnRecord("fetch", index - 1, start, int(env.now), label))
        self.status["fetch"] = "done"

    def _module(self, module: Module) -> Generator[Any, Any, None]:
        env, machine = self.env, self.machine
        name = module.name.lower()
        stats = self.stats[name]
        while True:
            self.status[name] = "waiting for an instruction"
            asked = int(env.now)
            index = yield self.commands[module].get()
            stats.wait_queue += int(env.now) - asked
            asked = int(env.now)
            popped = []
            for queue in machine.pops[index]:
                self.status[name] = (f"instruction {index} ({machine.describe(index)}) waits "
                                     f"for a token on {queue.label}")
                popped.append((queue, (yield self.tokens[queue].get())))
            stats.wait_token += int(env.now) - asked
            machine.begin(module, index)
            for queue, token in popped:
                machine.receive(module, token.stamp)
                self.token_records.append(TokenRecord(queue, token.flow, token.time,
                                                      token.producer_insn, int(env.now), index))
            self.status[name] = f"instruction {index} ({machine.describe(index)}) executing"
            start = int(env.now)
            yield from self._spend(module, index, stats)
            machine.execute(module, index, {q: len(s.items) for q, s in self.tokens.items()})
            stats.insns += 1
            self.records.append(InsnRecord(name, index, start, int(env.now)))
            asked = int(env.now)
            for queue in machine.pushes[index]:
                self.status[name] = (f"instruction {index} ({machine.describe(index)}) waits "
                                     f"for room on {queue.label}")
                self._flow += 1
                yield self.tokens[queue].put(Token(machine.stamp(module), int(env.now), self._flow, index))
            stats.wait_token += int(env.now) - asked
            if machine.insns[index].opcode == Opcode.FINISH:
                self.status[name] = "finished"
                self.done.succeed()
                return

    # -- instruction costs -------------------------------------------------------------
    def _spend(self, module: Module, index: int, stats: ModuleStats) -> Generator[Any, Any, None]:
        insn, timing, env = self.machine.insns[index], self.timing, self.env
        if timing.issue_cycles:
            yield env.timeout(timing.issue_cycles)
            stats.busy += timing.issue_cycles
        if isinstance(insn, MemInsn):
            if insn.x_size == 0:
                return
            if insn.opcode == Opcode.STORE:
                yield from self.write.transfer(dma_bursts(insn, self.cfg, timing), stats)
                yield from self.write.latency(stats)
                return
            yield from self.read.latency(stats)
            yield from self.read.transfer(dma_bursts(insn, self.cfg, timing), stats)
            pad = pad_elems(insn) * timing.pad_cycles_per_elem
            if pad:
                yield env.timeout(pad)
                stats.busy += pad
            return
        if insn.opcode == Opcode.FINISH:
            return
        cycles = self._loop_cycles(index, insn)  # type: ignore[arg-type]
        if int(env.now) + cycles > self.max_cycles:
            raise CycleLimitError(
                f"instruction {index} ({self.machine.describe(index)}) needs {cycles} cycles "
                f"and would pass the cycle bound of {self.max_cycles} cycles"
            )
        yield env.timeout(cycles)
        stats.busy += cycles
        unit = "gemm" if isinstance(insn, GemmInsn) else "alu"
        stats.extra[unit] = stats.extra.get(unit, 0) + cycles

    def _loop_cycles(self, index: int, insn: GemmInsn | AluInsn) -> int:
        timing = self.timing
        try:
            idx = loop_indices(self.machine.state, insn, f"instruction {index}")
        except MemoryAccessError:
            return 0  # the machine reports it, with the instruction, when it applies it
        dst = idx.dst.reshape(-1)
        if isinstance(insn, AluInsn):
            reads = [] if insn.use_imm else [idx.src.reshape(-1)]
            ii = timing.alu_imm_ii_cycles if insn.use_imm else timing.alu_vec_ii_cycles
            pipeline = timing.alu_pipeline_cycles
        else:
            reads, ii, pipeline = [], timing.gemm_ii_cycles, timing.gemm_pipeline_cycles
        if dst.size == 0:
            return 0
        return pipeline + dst.size * ii + hazard_stall_cycles(dst, reads, pipeline)

    # -- running ---------------------------------------------------------------------
    def run(self) -> CycleReport:
        env = self.env
        env.process(self._fetch())
        for module in Module:
            env.process(self._module(module))
        while not self.done.triggered:
            upcoming = env.peek()
            if upcoming == float("inf"):
                raise DeadlockError(self._deadlock_report())
            if upcoming > self.max_cycles:
                raise CycleLimitError(
                    f"cycle bound of {self.max_cycles} cycles reached before FINISH\n"
                    + self._states()
                )
            env.step()
        return build_report(self)

    def result(self) -> Result:
        report = self.run()
        return Result(dram=self.machine.state.dram, counters=report.counters, report=report)

    def _states(self) -> str:
        lines = [f"  {name}: {state}" for name, state in self.status.items()]
        fill = ", ".join(f"{q.label} {len(s.items)}" for q, s in self.tokens.items())
        lines.append(f"  token queues: {fill} (depth {self.cfg.DEP_QUEUE_DEPTH})")
        cmds = ", ".join(f"{m.name.lower()} {len(s.items)}" for m, s in self.commands.items())
        lines.append(f"  command queues: {cmds} (depth {self.cfg.CMD_QUEUE_DEPTH})")
        return "\n".join(lines)

    def _deadlock_report(self) -> str:
        return (f"deadlock at cycle {int(self.env.now)}: no module can make progress and "
                f"FINISH has not run\n" + self._states())


def simulate_cycles(program: Program, timing: Timing | None = None, **options: Any) -> Result:
    """Run ``program`` on the cycle model; the result's ``report`` is a :class:`CycleReport`."""
    return CycleModel(program, timing, **options).result()


class CycleBackend:
    """The ``cycle`` back end of :class:`openvta.runtime.Device`."""

    def __init__(self, timing: Timing | None = None, check_races: bool = True,
                 max_cycles: int = DEFAULT_MAX_CYCLES) -> None:
        self.timing = timing
        self.options = {"check_races": check_races, "max_cycles": max_cycles}

    def run(self, program: Program) -> Result:
        return simulate_cycles(program, self.timing, **self.options)


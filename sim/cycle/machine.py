"""The cycle-level model: fetch, load, compute and store as SimPy processes.

The structure mirrors the hardware: three bounded command queues fed by fetch, four
bounded token queues (pushing into a full one stalls the pusher), a shared memory
system (:mod:`.memory`) and the per-instruction costs of :mod:`.costs`.  Time advances
per instruction and per burst, never per cycle.

Event by event (``event_by_event=True``), every step is a SimPy event.  The fast path
(the default) leaves out the events no process could tell apart from their absence,
and only those: DMA steps that end before any other process can act (the train of
:meth:`.memory.Channel.train`), the grant and release of a burst nobody else waits
for, a queue get or put that succeeds at once with nobody on the other side and no
other event in the same cycle, a prefetch put or routed signal nobody waits for, and
a module's wait for an instruction to become visible and its take cycle when they end
before any other process may act (the module's own time then runs ahead of SimPy's
into the instruction's train or busy time, as a train's does).  What every process
sees, when and in which order is unchanged, so the cycles, the counters, the records
and the traces are the same (``tests/sim/test_cycle_fast.py``); the cost left is a few
SimPy events per instruction and the functional semantics.

What depends on the program alone is worked out once per program and kept for its
next runs (see :class:`~openvta.sim.functional.Machine`): the decoding and the loop
plans, and here, per timings, the loop cycles and the DMA trains of each instruction.

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
    AluOp,
    GemmInsn,
    MemInsn,
    MemoryType,
    Module,
    Opcode,
    Timing,
    UNIT_COUNTERS,
    Counter,
    InsnTiming,
    TokenQueue,
    Unit,
    drain_fill_cycles,
    epi_base_of,
    unit_timing,
)
from openvta.runtime.program import Program, Progress, Result

from ..errors import DeadlockError, MemoryAccessError, SimulationError
from ..functional.machine import Machine
from ..functional.semantics import loop_indices
from .costs import Bursts, fetch_bursts, hazard_stall_cycles, rows_of
from .memory import Channel, ModuleStats, Row, horizon
from .records import InsnRecord, TokenRecord
from .report import CycleReport

__all__ = ["CycleModel", "CycleBackend", "CycleLimitError", "simulate_cycles"]

#: Default bound on simulated cycles; a program needing more is stopped with an error.
DEFAULT_MAX_CYCLES = 10**10
_PROGRESS_STEPS = 4096  # SimPy events between two progress reports
_NO_TOKENS: dict[TokenQueue, int] = {}  # what an instruction other than FINISH is told of the queues


class CycleLimitError(SimulationError):
    """The program ran past the cycle bound."""


@dataclass
class Token:
    stamp: np.ndarray
    time: int
    flow: int
    producer_insn: int


class CycleModel:
    """Runs one program, spending each instruction's cycles as SimPy time.

    Parameters
    ----------
    program :
        the program to run.
    timing :
        timing parameters (default: the machine the program records, :attr:`Program.target
        <openvta.runtime.Program.target>`; its configuration's preset timing when it records none).
    check_races :
        run the race checker on this model's schedule.
    max_cycles :
        stop with :class:`CycleLimitError` past this many cycles (a positive integer).
    progress :
        called as ``progress("cycles", now, None)`` as simulated time goes on
        (:data:`openvta.runtime.Progress`).
    event_by_event :
        make every step its own SimPy event (the reference the fast path is tested
        against) instead of leaving out the events nothing could tell apart from their
        absence (see the module docstring); both give the same cycles, counters,
        records and traces.
    """

    def __init__(
        self,
        program: Program,
        timing: Timing | None = None,
        *,
        check_races: bool = True,
        max_cycles: int = DEFAULT_MAX_CYCLES,
        progress: Progress | None = None,
        event_by_event: bool = False,
    ) -> None:
        if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
            raise ValueError(f"max_cycles must be a positive integer, not {max_cycles!r}")
        if not isinstance(event_by_event, bool):
            raise TypeError(f"event_by_event must be a bool, not {event_by_event!r}")
        self.cfg = cfg = program.config
        self.timing = timing or program.target.timing  # the machine the program records
        self.max_cycles = max_cycles
        self.progress = progress
        self.machine = Machine(program, check_races=check_races)
        self.env = env = simpy.Environment()
        t = self.timing
        self.read = Channel(env, t.request_cycles + t.dram_read_latency_cycles, cfg.bus_bytes, t.dram_beat_cycles)
        self.write = Channel(env, t.request_cycles + 1 + t.dram_write_latency_cycles, cfg.bus_bytes,
                             t.dram_beat_cycles, shares=self.read if t.dram_channels == 1 else None)
        self.commands = {m: simpy.Store(env, capacity=cfg.CMD_QUEUE_DEPTH) for m in Module}
        self.tokens = {q: simpy.Store(env, capacity=cfg.DEP_QUEUE_DEPTH) for q in TokenQueue}
        self.stats = {unit: ModuleStats() for unit in Unit}
        # a state, or (instruction, what it does, queue) spelt out only when reported
        self.status: dict[Unit, str | tuple[int, str, TokenQueue | None]] = {
            unit: "not started" for unit in self.stats}
        self.asked = {unit: 0 for unit in self.stats}  # when each module began waiting
        self.fetch_done = 0
        self.prefetch = simpy.Store(env)
        self.routed = 0
        self.routed_event = env.event()
        self._last_route = -1
        self.records: list[InsnRecord] = []
        self.token_records: list[TokenRecord] = []
        self.done = env.event()
        self._flow = 0
        bound = max_cycles + 1
        self._until = None if event_by_event else (lambda: horizon(env, bound))
        # loop cycles by instruction and micro-ops, shared by every run of the program
        # with these timings (the machine keeps what is worked out once per program)
        self._loops: dict[tuple[GemmInsn | AluInsn, bytes], int] = self.machine.decoded.extra.setdefault(
            ("loop cycles", self.timing), {})
        self._trains: dict[tuple[int, int], list[Row]] = self.machine.decoded.extra.setdefault(
            ("trains", self.timing), {})
        # bytes per DRAM element (the configuration's properties are computed per call)
        self._elem_bytes = {mt: cfg.elem_bytes(mt) for mt in MemoryType}
        self._out_elem_bytes = cfg.out_elem_bytes

    # -- processes -------------------------------------------------------------------
    def _fetch(self) -> Generator[Any, Any, None]:
        """Fetch reads a burst into its prefetch buffer, then waits until it is all routed."""
        env, stats, timing = self.env, self.stats[Unit.FETCH], self.timing
        beats_per_insn = max(1, INSN_BYTES // self.cfg.bus_bytes)
        # one instruction a cycle (a beat of several) or its beats, each dram_beat_cycles long,
        # or its words (insn_move_cycles), one a cycle, if more
        cycles_per_insn = max(beats_per_insn, -(-INSN_BYTES * timing.dram_beat_cycles // self.cfg.bus_bytes),
                              timing.insn_move_cycles)
        index = 0
        for chunk in fetch_bursts(self.machine.program.insn_addr, len(self.machine.insns), self.cfg,
                                  timing):
            label = f"{index}..{index + chunk - 1}"
            self.status[Unit.FETCH] = f"reading instructions {label}"
            start = asked = int(env.now)
            with self.read.port.request() as grant:
                yield grant
                yield env.timeout(self.read.overhead_cycles)
                stats.wait_memory += int(env.now) - asked
                for _ in range(chunk):
                    yield env.timeout(cycles_per_insn)
                    stats.busy += cycles_per_insn
                    if self._until is None or self.prefetch.get_queue:
                        self.prefetch.put((index, int(env.now)))
                    else:  # the put's event would find nobody to serve: spare it
                        self.prefetch.items.append((index, int(env.now)))
                    index += 1
                self.read.beats += chunk * beats_per_insn
            self.records.append(InsnRecord(Unit.FETCH, index - 1, start, int(env.now), label))
            self.status[Unit.FETCH] = f"routing instructions {label}"
            while self.routed < index:  # the next burst waits for an empty prefetch buffer
                yield self.routed_event
        self.status[Unit.FETCH] = "done"
        self.fetch_done = int(env.now)

    def _route(self) -> Generator[Any, Any, None]:
        """The router: one instruction per cycle from the prefetch buffer to its queue."""
        env, stats, until, queue = self.env, self.stats[Unit.FETCH], self._until, self.env._queue
        prefetch, commands, module_of = self.prefetch, self.commands, self.machine.module
        latency, words = self.timing.prefetch_latency_cycles, self.timing.insn_move_cycles
        while True:
            # (:meth:`_get` and :meth:`_put` written out: this loop runs per instruction)
            if (prefetch.items and not prefetch.put_queue and not prefetch.get_queue
                    and until is not None and (not queue or queue[0][0] > env.now)):
                index, arrived = prefetch.items.pop(0)
            else:
                index, arrived = yield prefetch.get()
            now = int(env.now)
            ready = max(arrived + latency, self._last_route + words)
            if ready > now:
                yield env.timeout(ready - now)
                now = ready
            target = commands[module_of[index]]
            if (len(target.items) < target.capacity and not target.put_queue and not target.get_queue
                    and until is not None and (not queue or queue[0][0] > now)):
                target.items.append((index, now))
            else:
                yield target.put((index, now))
                stats.wait_queue += int(env.now) - now
                now = int(env.now)
            stats.insns += 1
            self._last_route = now
            self.routed += 1
            if until is None or self.routed_event.callbacks:  # (fast path: only if fetch waits)
                event, self.routed_event = self.routed_event, env.event()
                event.succeed()

    def _module(self, module: Module) -> Generator[Any, Any, None]:
        env, machine, until = self.env, self.machine, self._until
        name = Unit(module.name.lower())
        stats = self.stats[name]
        commands, tokens, latency = self.commands[module], self.tokens, self.timing.queue_latency_cycles
        take = self.timing.insn_move_cycles  # the take cycles: one per word of the instruction
        pops_of, pushes_of, insns = machine.pops, machine.pushes, machine.insns
        events = env._queue  # (read directly, as in :meth:`_quiet`)
        while True:
            self.status[name] = "waiting for an instruction"
            asked = self.asked[name] = int(env.now)
            if (commands.items and not commands.put_queue and not commands.get_queue
                    and until is not None and (not events or events[0][0] > env.now)):
                index, routed = commands.items.pop(0)  # (:meth:`_get` written out)
            else:
                index, routed = yield commands.get()
            # the instruction is visible at ``visible`` and taken in the cycle after it:
            # on the fast path, as a train's steps (:meth:`.memory.Channel.train`), a wait
            # that ends before any other process may act is no event, and the module's
            # own time ``t`` runs ahead of SimPy's until it must be seen
            now = int(env.now)
            visible = max(routed + latency, now)
            if until is None:
                if visible > now:
                    yield env.timeout(visible - now)
                yield env.timeout(take)
                now = t = visible + take
            else:
                limit = until()
                if visible >= limit and visible > now:
                    yield env.timeout(visible - now)
                    now, limit = visible, until()
                t = visible + take
                if t >= limit:
                    yield env.timeout(t - now)
                    now = t
            stats.wait_queue += visible - asked
            stats.busy += take
            pops = pops_of[index]
            if pops:
                if t > now:  # (the pops look at the queues now)
                    yield env.timeout(t - now)
                asked = t
                popped = []
                for queue in pops:
                    self.status[name] = (index, "waits for a token on", queue)
                    popped.append((queue, (yield from self._get(tokens[queue]))))
                t = int(env.now)
                stats.wait_token += t - asked
                machine.begin(module, index)
                for queue, token in popped:
                    machine.receive(module, token.stamp)
                    self.token_records.append(TokenRecord(queue, token.flow, token.time,
                                                          token.producer_insn, t, index))
            else:
                machine.begin(module, index)
            start = t - take  # the slice starts with the take cycles, after the pops
            self.status[name] = (index, "executing", None)
            yield from self._spend(module, index, stats, t)
            insn = insns[index]
            finish = insn.opcode == Opcode.FINISH
            machine.execute(module, index, {q: len(s.items) for q, s in tokens.items()}
                            if finish else _NO_TOKENS)
            stats.insns += 1
            end = int(env.now)
            self.records.append(InsnRecord(name, index, start, end))
            pushes = pushes_of[index]
            if pushes:
                for queue in pushes:
                    self.status[name] = (index, "waits for room on", queue)
                    self._flow += 1
                    yield from self._put(tokens[queue],
                                         Token(machine.stamp(module), int(env.now), self._flow, index))
                stats.wait_token += int(env.now) - end
            if finish:
                self.status[name] = "finished"
                self.done.succeed()
                return

    # -- queues ------------------------------------------------------------------------
    def _quiet(self) -> bool:
        """Fast path: no other event this cycle, so an event made now is the next one."""
        queue = self.env._queue  # (read directly, as in .memory.horizon)
        return self._until is not None and (not queue or queue[0][0] > self.env.now)

    def _get(self, store: simpy.Store) -> Generator[Any, Any, Any]:
        """``store``'s next item.  A get that succeeds at once, with nobody waiting to put,
        is an event that would only resume this process, next: taken without it."""
        if store.items and not store.put_queue and not store.get_queue and self._quiet():
            return store.items.pop(0)
        return (yield store.get())

    def _put(self, store: simpy.Store, item: Any) -> Generator[Any, Any, None]:
        """Put ``item`` into ``store`` (without an event, as :meth:`_get`, when it has room
        and nobody waits to get)."""
        if (len(store.items) < store.capacity and not store.put_queue and not store.get_queue
                and self._quiet()):
            store.items.append(item)
            return
        yield store.put(item)

    # -- instruction costs -------------------------------------------------------------
    def _spend(self, module: Module, index: int, stats: ModuleStats,
               t: int) -> Generator[Any, Any, None]:
        """Spend instruction ``index``'s cycles from the module's own time ``t`` (ahead of
        SimPy's only on the fast path, when nobody else may act before it); SimPy's time
        is the instruction's end when it returns."""
        insn, timing, env = self.machine.insns[index], self.timing, self.env
        busy = timing.issue_cycles - 1  # the take cycle is spent before the pops
        if isinstance(insn, MemInsn) and insn.x_size:
            store = insn.opcode == Opcode.STORE
            yield from (self.write if store else self.read).train(
                self._rows(index, insn, busy), stats, self._until, t)
            return
        if isinstance(insn, (GemmInsn, AluInsn)) and insn.opcode != Opcode.FINISH:
            cycles = self._loop_cycles(index, insn)
            if t + cycles > self.max_cycles:
                raise CycleLimitError(
                    f"instruction {index} ({self.machine.describe(index)}) needs {cycles} cycles "
                    f"and would pass the cycle bound of {self.max_cycles} cycles"
                )
            unit = "gemm" if isinstance(insn, GemmInsn) else "alu"
            # the GEMM/ALU counters count the execute cycles: the first one and the loop's
            stats.extra[unit] = stats.extra.get(unit, 0) + cycles + 1
            busy += cycles
        stats.busy += busy
        end = t + busy
        if end > int(env.now):  # (one event, created now: nobody acted since t)
            yield env.timeout(end - int(env.now))

    def _rows(self, index: int, insn: MemInsn, busy: int) -> list[Row]:
        """The train of a LOAD or STORE moving data: a function of the instruction alone,
        worked out once per program and timings."""
        key = (index, busy)
        rows = self._trains.get(key)
        if rows is not None:
            return rows
        timing = self.timing
        if insn.opcode == Opcode.STORE:
            bursts = rows_of(insn, self._out_elem_bytes, self.cfg.bus_bytes, timing.max_burst_beats)
            # a draining STORE ACC (machine v2) first fills the drain unit's pipeline
            fill = drain_fill_cycles(self.cfg, timing, self._descriptor_stages(insn)) \
                if insn.memory_type == MemoryType.ACC else 0
            rows = [(busy + fill, None)] + [(timing.store_row_cycles, train) for train in bursts]
        else:
            bursts = rows_of(insn, self._elem_bytes[insn.memory_type], self.cfg.bus_bytes,
                             timing.max_burst_beats)
            rows = [(busy, None)] + self._load_rows(insn, bursts)
        rows.append((timing.dma_done_cycles, None))
        self._trains[key] = rows
        return rows

    def _descriptor_stages(self, insn: MemInsn) -> int:
        """The stage count of a draining STORE's descriptor, as the store module finds it
        (its LOADs into the epi buffer ran before it); a bad one fails when it runs."""
        base = epi_base_of(insn)
        epi = self.machine.state.epi
        return int(np.uint32(epi[base].reshape(-1)[0])) if base < len(epi) else 0

    def _load_rows(self, insn: MemInsn, bursts: list[Bursts]) -> list[Row]:
        """A LOAD's padding rows (written to the buffer, not read), then its data rows."""
        timing, width = self.timing, insn.x_pad_0 + insn.x_size + insn.x_pad_1
        pad_rows = insn.y_pad_0 + insn.y_pad_1
        rows: list[Row] = [(pad_rows * (timing.dma_pad_row_cycles + width * timing.pad_cycles_per_elem),
                            None)]
        row_cycles = timing.dma_row_cycles + (insn.x_pad_0 + insn.x_pad_1) * timing.pad_cycles_per_elem
        rows += [(row_cycles, train) for train in bursts]
        return rows

    def _loop_cycles(self, index: int, insn: GemmInsn | AluInsn) -> int:
        """The loop's cycles: a function of the instruction and its micro-ops alone, so
        a kernel run again (every tile, every virtual thread) is looked up."""
        key = (insn, self.machine.state.uop[insn.uop_bgn:insn.uop_end].tobytes())
        cycles = self._loops.get(key)
        if cycles is None:
            cycles = self._loops[key] = self._count_loop_cycles(index, insn)
        return cycles

    def _count_loop_cycles(self, index: int, insn: GemmInsn | AluInsn) -> int:
        timing = self.timing
        try:
            idx = loop_indices(self.machine.state, insn, f"instruction {index}")
        except MemoryAccessError:
            return 1  # the machine reports it, with the instruction, when it applies it
        dst = idx.dst.reshape(-1)
        if isinstance(insn, AluInsn):
            reads = [] if insn.use_imm else [idx.src.reshape(-1)]
            ii = timing.alu_imm_ii_cycles if insn.use_imm else timing.alu_vec_ii_cycles
            if insn.alu_opcode == AluOp.MUL:  # each lane pass multiplies, then sums
                ii += (timing.alu_mul_cycles - 1) * timing.alu_imm_ii_cycles
            pipeline = timing.alu_pipeline_cycles
        else:
            reads, ii, pipeline = [], timing.gemm_ii_cycles, timing.gemm_pipeline_cycles
        if dst.size == 0:
            return 1
        return pipeline + dst.size * ii + hazard_stall_cycles(dst, reads, timing.hazard_window)

    # -- running ---------------------------------------------------------------------
    def run(self) -> CycleReport:
        env = self.env
        env.process(self._fetch())
        env.process(self._route())
        for module in Module:
            env.process(self._module(module))
        # SimPy's queue read directly (as in .memory.horizon): this loop runs once per event
        queue, step, done, progress = env._queue, env.step, self.done, self.progress
        steps = 0
        while not done.triggered:
            if not queue:
                raise DeadlockError(self._deadlock_report())
            if queue[0][0] > self.max_cycles:
                raise CycleLimitError(
                    f"cycle bound of {self.max_cycles} cycles reached before FINISH\n"
                    + self._states()
                )
            step()
            if progress is not None:
                steps += 1
                if not steps % _PROGRESS_STEPS:
                    progress("cycles", int(env.now), None)
        if progress is not None:  # a short run (few events on the fast path) reports too
            progress("cycles", int(env.now), None)
        return build_report(self)

    def result(self) -> Result:
        report = self.run()
        return Result(dram=self.machine.state.dram, counters=report.counters, report=report)

    def _states(self) -> str:
        lines = [f"  {name}: {self._spell(state)}" for name, state in self.status.items()]
        fill = ", ".join(f"{q.label} {len(s.items)}" for q, s in self.tokens.items())
        lines.append(f"  token queues: {fill} (depth {self.cfg.DEP_QUEUE_DEPTH})")
        cmds = ", ".join(f"{m.name.lower()} {len(s.items)}" for m, s in self.commands.items())
        lines.append(f"  command queues: {cmds} (depth {self.cfg.CMD_QUEUE_DEPTH})")
        return "\n".join(lines)

    def _spell(self, state: str | tuple[int, str, TokenQueue | None]) -> str:
        if isinstance(state, str):
            return state
        index, what, queue = state
        text = f"instruction {index} ({self.machine.describe(index)}) {what}"
        return text if queue is None else f"{text} {queue.label}"

    def _deadlock_report(self) -> str:
        return (f"deadlock at cycle {int(self.env.now)}: no module can make progress and "
                f"FINISH has not run\n" + self._states())


def build_report(model: CycleModel) -> CycleReport:
    """Close the books of a finished run: what no category claims is idle time."""
    cycles = int(model.env.now)
    counters = dict(model.machine.counters)
    for unit, stats in model.stats.items():
        stats.busy, stats.wait_token = int(stats.busy), int(stats.wait_token)
        stats.wait_memory, stats.wait_queue = int(stats.wait_memory), int(stats.wait_queue)
        if unit is not Unit.FETCH and model.status[unit] == "waiting for an instruction":
            # waiting for an instruction while fetch could still route one is queue wait
            stats.wait_queue += max(0, min(model.fetch_done, cycles) - model.asked[unit])
        stats.idle = cycles - stats.total
        busy, token, memory, queue = UNIT_COUNTERS[unit]
        counters[busy.value] = stats.busy
        if token is not None:
            counters[token.value] = stats.wait_token
        counters[memory.value] = stats.wait_memory
        counters[queue.value] = stats.wait_queue
    compute = model.stats[Unit.COMPUTE].extra
    counters[Counter.CYCLES.value] = cycles
    counters[Counter.GEMM_BUSY_CYCLES.value] = compute.get("gemm", 0)
    counters[Counter.ALU_BUSY_CYCLES.value] = compute.get("alu", 0)
    cfg = model.cfg
    compulsory = model.machine.program.compulsory_bytes()
    return CycleReport(
        cycles=cycles,
        modules=model.stats,
        macs=counters[Counter.MACS.value],
        peak_macs_per_cycle=cfg.macs_per_uop // model.timing.gemm_ii_cycles,
        dram_read_bytes=counters[Counter.DRAM_READ_BYTES.value],
        dram_write_bytes=counters[Counter.DRAM_WRITE_BYTES.value],
        bus_bytes=cfg.bus_bytes,
        clock_mhz=model.timing.clock_mhz,
        backend="cycle",
        counters=counters,
        units=unit_timing(counters),
        timeline=tuple(InsnTiming(r.index, r.module, r.start, r.end) for r in model.records),
        compulsory_read_bytes=None if compulsory is None else compulsory[0],
        compulsory_write_bytes=None if compulsory is None else compulsory[1],
        model=model,
    )


def simulate_cycles(program: Program, timing: Timing | None = None, **options: Any) -> Result:
    """Run ``program`` on the cycle model; the result's ``report`` is a :class:`CycleReport`."""
    return CycleModel(program, timing, **options).result()


class CycleBackend:
    """The ``cycle`` back end of :class:`openvta.runtime.Device`."""

    def __init__(self, timing: Timing | None = None, check_races: bool = True,
                 max_cycles: int = DEFAULT_MAX_CYCLES, progress: Progress | None = None,
                 event_by_event: bool = False) -> None:
        if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
            raise ValueError(f"max_cycles must be a positive integer, not {max_cycles!r}")
        if not isinstance(event_by_event, bool):
            raise TypeError(f"event_by_event must be a bool, not {event_by_event!r}")
        self.timing = timing
        self.options: dict[str, Any] = {"check_races": check_races, "max_cycles": max_cycles,
                                        "progress": progress, "event_by_event": event_by_event}

    def run(self, program: Program) -> Result:
        return simulate_cycles(program, self.timing, **self.options)


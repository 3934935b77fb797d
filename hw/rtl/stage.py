"""What load, compute and store share: take an instruction, pop tokens, execute, push.

:func:`instruction_cycle` builds that FSM in a module: an instruction leaves the
command FIFO, its pop flags wait for a token in each named queue, the module's own
``execute`` runs until its done signal, then its push flags wait for room and push
(docs/ISA.md §5).  It also reports, every cycle, what the module is doing, for the
performance counters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from amaranth import Module, Signal, Value
from amaranth.lib.fifo import SyncFIFOBuffered

from openvta.isa import Config, TokenQueue
from openvta.isa import Module as Unit
from openvta.isa.instructions import POP_FLAGS, PUSH_FLAGS

from .fetch import INSN_BITS, TokenCounter
from .fields import Decoded

__all__ = ["StageStatus", "instruction_cycle"]

@dataclass
class StageStatus:
    """Per-cycle status of one module (1-bit signals) and its instruction register."""

    insn: Signal = field(default_factory=lambda: Signal(INSN_BITS))
    busy: Signal = field(default_factory=Signal)  # executing (EXEC state)
    issue: Signal = field(default_factory=Signal)  # taking, popping or pushing without waiting
    wait_token: Signal = field(default_factory=Signal)
    wait_queue: Signal = field(default_factory=Signal)
    started: Signal = field(default_factory=Signal)  # pulses when an instruction starts executing
    retired: Signal = field(default_factory=Signal)  # pulses when it has pushed its tokens
    pops: Signal = field(default_factory=lambda: Signal(len(POP_FLAGS)))  # one bit per flag
    pushes: Signal = field(default_factory=lambda: Signal(len(PUSH_FLAGS)))


def _queue(unit: Unit, flag: str, popping: bool) -> TokenQueue | None:
    try:
        return TokenQueue.popped_by(unit, flag) if popping else TokenQueue.pushed_by(unit, flag)
    except ValueError:
        return None  # e.g. a load never has a previous module: the flag names no queue


def instruction_cycle(
    m: Module, cfg: Config, unit: Unit, fifo: SyncFIFOBuffered,
    tokens: dict[TokenQueue, TokenCounter], status: StageStatus,
    execute: Callable[[Module, Decoded, Value], Value], remaining: Value,
) -> None:
    """Build the instruction FSM around ``execute(m, insn, first) -> done``.

    ``first`` is high on the first EXEC cycle (start the work then); ``remaining`` is
    high while fetch may still route instructions here (for the wait_queue status).
    """
    insn = Decoded(status.insn, cfg)
    pops = [(insn.flag(f), _queue(unit, f, True)) for f in POP_FLAGS]
    pushes = [(insn.flag(f), _queue(unit, f, False)) for f in PUSH_FLAGS]
    can_pop = _all([~flag | ~tokens[q].empty for flag, q in pops if q is not None])
    can_push = _all([~flag | ~tokens[q].full for flag, q in pushes if q is not None])
    first = Signal(name=f"{unit.name.lower()}_first")
    with m.FSM(name=f"{unit.name.lower()}_insn"):
        with m.State("IDLE"):
            m.d.comb += [fifo.r_en.eq(1), status.wait_queue.eq(~fifo.r_rdy & remaining),
                         status.issue.eq(fifo.r_rdy)]
            with m.If(fifo.r_rdy):
                m.d.sync += status.insn.eq(fifo.r_data)
                m.next = "POP"
        with m.State("POP"):
            m.d.comb += [status.wait_token.eq(~can_pop), status.issue.eq(can_pop)]
            with m.If(can_pop):
                for k, (flag, q) in enumerate(pops):
                    if q is not None:
                        m.d.comb += [tokens[q].pop.eq(flag), status.pops[k].eq(flag)]
                m.d.comb += status.started.eq(1)
                m.d.sync += first.eq(1)
                m.next = "EXEC"
        with m.State("EXEC"):
            m.d.comb += status.busy.eq(1)
            m.d.sync += first.eq(0)
            with m.If(execute(m, insn, first)):
                m.next = "PUSH"
        with m.State("PUSH"):
            m.d.comb += [status.wait_token.eq(~can_push), status.issue.eq(can_push)]
            with m.If(can_push):
                for k, (flag, q) in enumerate(pushes):
                    if q is not None:
                        m.d.comb += [tokens[q].push.eq(flag), status.pushes[k].eq(flag)]
                m.d.comb += status.retired.eq(1)
                m.next = "IDLE"


def _all(terms: list) -> Value:
    result: Value | int = 1
    for term in terms:
        result = term & result
    return result  # type: ignore[return-value]

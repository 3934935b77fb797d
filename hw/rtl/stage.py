"""What load, compute and store share: take an instruction, pop tokens, execute, push.

:func:`instruction_cycle` builds that FSM in a module: an instruction leaves the
command FIFO, its pop flags wait for a token in each named queue, the module's own
``execute`` runs until its done signal, then its push flags wait for room and push
(docs/ISA.md §5).  It also reports, every cycle, what the module is doing, for the
performance counters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amaranth import Cat, Const, Module, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from openvta.isa import Config, TokenQueue
from openvta.isa import Module as Unit
from openvta.isa.instructions import POP_FLAGS, PUSH_FLAGS

from .fetch import INSN_BITS, check_insn_words
from .fields import Decoded
from .params import check_bus_bits

__all__ = ["STATUS", "TOKEN_POP", "TOKEN_PUSH", "Stage", "instruction_cycle", "token_queues"]

#: Per-cycle status of one module (1-bit signals but ``insn``, its instruction register),
#: for the performance counters.
STATUS = wiring.Signature({
    "insn": Out(INSN_BITS),
    "busy": Out(1),  # executing (EXEC state)
    "issue": Out(1),  # taking, popping or pushing without waiting
    "wait_token": Out(1),
    "wait_queue": Out(1),
    "started": Out(1),  # pulses when an instruction starts executing
    "retired": Out(1),  # pulses when it has pushed its tokens
    "pops": Out(len(POP_FLAGS)),  # one bit per flag
    "pushes": Out(len(PUSH_FLAGS)),
})
#: A module's end of a token queue it pops from: take a token; whether there is none.
TOKEN_POP = wiring.Signature({"pop": Out(1), "empty": In(1)})
#: A module's end of a token queue it pushes to: add a token; whether there is no room.
TOKEN_PUSH = wiring.Signature({"push": Out(1), "full": In(1)})


def _queue(unit: Unit, flag: str, popping: bool) -> TokenQueue | None:
    try:
        return TokenQueue.popped_by(unit, flag) if popping else TokenQueue.pushed_by(unit, flag)
    except ValueError:
        return None  # e.g. a load never has a previous module: the flag names no queue


def token_queues(unit: Unit) -> tuple[list[TokenQueue], list[TokenQueue]]:
    """(the queues ``unit`` pops from, the queues it pushes to)."""
    pops = [_queue(unit, f, True) for f in POP_FLAGS]
    pushes = [_queue(unit, f, False) for f in PUSH_FLAGS]
    return [q for q in pops if q is not None], [q for q in pushes if q is not None]


class Stage(wiring.Component):
    """What load, compute and store share: their configuration and the ports of
    :func:`instruction_cycle`.

    Members
    -------
    cmd : In(stream.Signature(INSN_BITS // insn_words))
        the module's command queue: whole instructions, or each in ``insn_words`` words
        (``Timing.insn_move_cycles``, :class:`~.fetch.CommandQueue`), taken one a cycle.
    remaining : In(1)
        high while fetch may still route instructions here (for ``wait_queue``).
    status : Out(STATUS)
        what the module does this cycle, and its instruction.
    waiting_memory : Out(1)
        executing, but waiting for the memory.
    <queue> : Out(TOKEN_POP) or Out(TOKEN_PUSH)
        one per token queue the module pops from or pushes to, named after the
        :class:`~openvta.isa.TokenQueue` in lower case (e.g. ``load_to_compute``).
    """

    def __init__(self, unit: Unit, cfg: Config, bus_bits: int, members: dict[str, wiring.Member],
                 insn_words: int = 1) -> None:
        if not isinstance(cfg, Config):
            raise TypeError(f"cfg must be a Config, not {cfg!r}")
        check_bus_bits(bus_bits, f"{unit.name.lower()} bus width")
        self.unit, self.cfg, self.bus_bits = unit, cfg, bus_bits
        self.insn_words = check_insn_words(insn_words)
        pops, pushes = token_queues(unit)
        members.update({"cmd": In(stream.Signature(INSN_BITS // self.insn_words)), "remaining": In(1),
                        "status": Out(STATUS), "waiting_memory": Out(1)})
        members.update({q.name.lower(): Out(TOKEN_POP) for q in pops})
        members.update({q.name.lower(): Out(TOKEN_PUSH) for q in pushes})
        super().__init__(members)

    def tokens(self) -> dict[TokenQueue, Any]:
        """The token queue ends of this module, by queue."""
        pops, pushes = token_queues(self.unit)
        return {q: getattr(self, q.name.lower()) for q in (*pops, *pushes)}

    def instruction_cycle(self, m: Module, execute: Callable[[Module, Decoded, Value], Value]) -> None:
        """:func:`instruction_cycle` on this module's ports."""
        instruction_cycle(m, self.cfg, self.unit, self.cmd, self.tokens(), self.status, execute,
                          self.remaining, self.insn_words)


def instruction_cycle(
    m: Module, cfg: Config, unit: Unit, cmd: Any, tokens: dict[TokenQueue, Any], status: Any,
    execute: Callable[[Module, Decoded, Value], Value], remaining: Value, words: int = 1,
) -> None:
    """Build the instruction FSM around ``execute(m, insn, first) -> done``.

    ``cmd`` is the command queue (a :class:`~amaranth.lib.stream.Signature` stream of
    instructions), ``tokens`` the ends of the token queues (:data:`TOKEN_POP`,
    :data:`TOKEN_PUSH`) and ``status`` a :data:`STATUS` interface.  ``first`` is high on
    the first EXEC cycle (start the work then); ``remaining`` is high while fetch may
    still route instructions here (for the wait_queue status).  With ``words`` > 1 the
    queue gives each instruction in that many words, taken one a cycle (the first in IDLE,
    the others in TAKE) into the instruction register, lowest word first.
    """
    insn = Decoded(status.insn, cfg)
    pops = [(insn.flag(f), _queue(unit, f, True)) for f in POP_FLAGS]
    pushes = [(insn.flag(f), _queue(unit, f, False)) for f in PUSH_FLAGS]
    can_pop = _all([~flag | ~tokens[q].empty for flag, q in pops if q is not None])
    can_push = _all([~flag | ~tokens[q].full for flag, q in pushes if q is not None])
    first = Signal(name=f"{unit.name.lower()}_first")
    # words of the instruction taken (with ``words`` > 1)
    taken = Signal(range(words), name=f"{unit.name.lower()}_taken") if words > 1 else Const(0)
    shifted_in = Cat(status.insn[len(cmd.payload):], cmd.payload)  # (words > 1) the word taken, on top
    with m.FSM(name=f"{unit.name.lower()}_insn"):
        with m.State("IDLE"):
            m.d.comb += [cmd.ready.eq(1), status.wait_queue.eq(~cmd.valid & remaining),
                         status.issue.eq(cmd.valid)]
            with m.If(cmd.valid):
                if words == 1:
                    m.d.sync += status.insn.eq(cmd.payload)
                    m.next = "POP"
                else:
                    m.d.sync += [status.insn.eq(shifted_in), taken.eq(1)]
                    m.next = "TAKE"
        if words > 1:
            with m.State("TAKE"):  # the instruction's other words, one a cycle
                m.d.comb += [cmd.ready.eq(1), status.issue.eq(cmd.valid)]
                with m.If(cmd.valid):
                    m.d.sync += [status.insn.eq(shifted_in), taken.eq(taken + 1)]
                    with m.If(taken == words - 1):
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


def _all(terms: list[Value]) -> Value:
    result: Value = Const(1)
    for term in terms:
        result = term & result
    return result

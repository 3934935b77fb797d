"""What a cycle-model run records for traces, timelines and per-instruction timing."""

from __future__ import annotations

from dataclasses import dataclass

from openvta.isa import TokenQueue, Unit

__all__ = ["InsnRecord", "TokenRecord"]


@dataclass
class InsnRecord:
    """One executed instruction, for traces and timelines."""

    module: Unit
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

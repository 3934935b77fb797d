"""Errors the simulators raise: each names the instruction and the state involved."""

from __future__ import annotations

__all__ = [
    "SimulationError",
    "EncodingError",
    "MemoryAccessError",
    "DeadlockError",
    "RaceError",
    "FinishError",
]


class SimulationError(RuntimeError):
    """Base of every error a simulator reports about the program it runs."""


class EncodingError(SimulationError):
    """An instruction that is not a valid encoding (invalid opcode, flags, type)."""


class MemoryAccessError(SimulationError):
    """A buffer or DRAM access out of range."""


class DeadlockError(SimulationError):
    """No module can make progress and FINISH has not run."""


class RaceError(SimulationError):
    """A buffer or DRAM access that dependency tokens do not order."""


class FinishError(SimulationError):
    """FINISH ran with tokens left in a queue or instructions not ordered before it."""

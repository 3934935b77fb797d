"""The golden functional simulator: what every program computes, bit for bit."""

from ..errors import (
    DeadlockError,
    EncodingError,
    FinishError,
    MemoryAccessError,
    RaceError,
    SimulationError,
)
from .executor import FunctionalBackend, FunctionalSimulator, run
from .machine import Machine, token_queues_of
from .semantics import MachineState, execute_alu, execute_gemm, execute_load, execute_store

__all__ = [
    "DeadlockError", "EncodingError", "FinishError", "FunctionalBackend", "FunctionalSimulator",
    "Machine", "token_queues_of",
    "MachineState", "MemoryAccessError", "RaceError", "SimulationError", "execute_alu",
    "execute_gemm", "execute_load", "execute_store", "run",
]

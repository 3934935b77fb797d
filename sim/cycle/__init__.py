"""The cycle-level SimPy model: cycles, utilization, stall breakdown, timelines."""

from .machine import CycleBackend, CycleLimitError, CycleModel, simulate_cycles
from .report import CycleReport

__all__ = ["CycleBackend", "CycleLimitError", "CycleModel", "CycleReport", "simulate_cycles"]

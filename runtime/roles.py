"""The roles of a program's tensors: who writes and who reads each one.

A role is a ``str``-valued enum, so a program file keeps writing (and old files keep
reading) the plain JSON strings ``"input"``, ``"weight"``… and code that still compares
with those strings keeps working.

>>> Role("weight") is Role.WEIGHT, Role.WEIGHT == "weight", f"{Role.OUTPUT}"
(True, True, 'output')
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Role", "ROLES", "HOST_ROLES"]


class Role(str, Enum):
    """A program tensor's role (the ``role`` of a :class:`~openvta.runtime.program.Symbol`)."""

    INPUT = "input"  # an activation the host packs into the program before each run
    WEIGHT = "weight"
    BIAS = "bias"  # a bias or an epilogue's per-channel vector
    OUTPUT = "output"  # an activation the host unpacks after each run
    SCRATCH = "scratch"  # an activation that lives only in DRAM (a graph region's arena)

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


#: Every role, in declaration order.
ROLES: tuple[Role, ...] = tuple(Role)

#: Roles of tensors whose contents the host supplies.
HOST_ROLES: frozenset[Role] = frozenset({Role.INPUT, Role.WEIGHT, Role.BIAS})

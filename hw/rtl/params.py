"""Parameter checks the hardware components share.

A component checks its parameters in its constructor (STYLE.md).  Amaranth warns
(``UnusedElaboratable``) about every ``Elaboratable`` that is garbage-collected without
having been elaborated, and a component whose constructor raised is such an object:
the warning would only repeat, late and from the garbage collector, that the object
was refused.  :func:`refusing` marks a refused component so that Amaranth does not
report it; every other unused component is still reported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["check_bus_bits", "refusing"]

P = ParamSpec("P")
S = TypeVar("S")

#: AXI4 data widths in bits: a power of two from 8 to 1024.
MIN_BUS_BITS, MAX_BUS_BITS = 8, 1024


def refusing(init: Callable[Concatenate[S, P], None]) -> Callable[Concatenate[S, P], None]:
    """Decorate a component's ``__init__``: when it raises ``TypeError`` or ``ValueError``
    (a refused parameter), the half-built component is marked as never to be elaborated."""

    @functools.wraps(init)
    def checked(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> None:
        try:
            init(self, *args, **kwargs)
        except (TypeError, ValueError):
            self._MustUse__silence = True  # refused: the exception already says so
            raise

    return checked


def check_bus_bits(bus_bits: object, what: str = "AXI data width") -> int:
    """``bus_bits`` if it is one of AXI4's data widths (a power of two, 8 to 1024 bits)."""
    if not isinstance(bus_bits, int) or isinstance(bus_bits, bool) \
            or not MIN_BUS_BITS <= bus_bits <= MAX_BUS_BITS or bus_bits & (bus_bits - 1):
        raise ValueError(f"{what} must be a power of two between {MIN_BUS_BITS} and "
                         f"{MAX_BUS_BITS} bits, not {bus_bits!r}")
    return bus_bits

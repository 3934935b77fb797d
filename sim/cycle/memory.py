"""The memory system: one AXI-like read channel and one write channel, shared.

A channel moves one beat of ``bus_bytes`` per cycle.  Masters (fetch, load, compute,
store) request it one burst at a time and are served in arrival order, so masters
that keep a request waiting are served round-robin, burst by burst.  The request
latency lives here, in the link, not in the masters.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from .costs import Bursts

__all__ = ["Channel", "ModuleStats"]


@dataclass
class ModuleStats:
    """Where one module's cycles went (all in cycles).

    ``idle`` is the time after a module's last instruction (fetch: after the last
    instruction was routed) until FINISH.
    """

    busy: int = 0
    wait_token: int = 0
    wait_memory: int = 0
    wait_queue: int = 0
    idle: int = 0
    insns: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.busy + self.wait_token + self.wait_memory + self.wait_queue + self.idle


class Channel:
    """One direction of the memory bus: one burst at a time, in request order.

    Parameters
    ----------
    env :
        the SimPy environment.
    overhead_cycles :
        cycles a burst holds the channel besides its beats (request, arbitration, latency,
        and for writes the response).
    """

    def __init__(self, env: simpy.Environment, overhead_cycles: int, bus_bytes: int) -> None:
        self.env = env
        self.overhead_cycles = overhead_cycles
        self.bus_bytes = bus_bytes
        self.port = simpy.Resource(env, capacity=1)
        self.beats = 0

    def transfer(self, bursts: Bursts, stats: ModuleStats) -> Generator[Any, Any, None]:
        """Move ``bursts``; waiting for the channel and the overhead are memory wait."""
        env = self.env
        for count, beats, cycles in bursts.runs:
            for _ in range(count):
                asked = int(env.now)
                with self.port.request() as grant:
                    yield grant
                    yield env.timeout(self.overhead_cycles + cycles)
                stats.wait_memory += int(env.now) - asked - cycles
                stats.busy += cycles
                self.beats += beats

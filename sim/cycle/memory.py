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
    """One direction of the memory bus.

    Parameters
    ----------
    env :
        the SimPy environment.
    latency_cycles :
        cycles from a request to its first beat (read), or from the last beat to the
        response (write).
    """

    def __init__(self, env: simpy.Environment, latency_cycles: int, bus_bytes: int) -> None:
        self.env = env
        self.latency_cycles = latency_cycles
        self.bus_bytes = bus_bytes
        self.port = simpy.Resource(env, capacity=1)
        self.beats = 0

    def latency(self, stats: ModuleStats) -> Generator[Any, Any, None]:
        if self.latency_cycles:
            yield self.env.timeout(self.latency_cycles)
            stats.wait_memory += self.latency_cycles

    def transfer(self, bursts: Bursts, stats: ModuleStats) -> Generator[Any, Any, None]:
        """Move ``bursts``, one grant per burst; waiting for a grant is memory wait."""
        env = self.env
        for count, beats in bursts.runs:
            for _ in range(count):
                asked = int(env.now)
                with self.port.request() as grant:
                    yield grant
                    stats.wait_memory += int(env.now) - asked
                    yield env.timeout(beats)
                stats.busy += beats
                self.beats += beats

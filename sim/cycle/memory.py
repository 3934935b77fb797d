"""The memory system: one AXI-like read channel and one write channel, shared.

A channel moves one beat of ``bus_bytes`` per cycle.  Masters (fetch, load, compute,
store) request it one burst at a time and are served in arrival order, so masters
that keep a request waiting are served round-robin, burst by burst.  The request
latency lives here, in the link, not in the masters.

A DMA instruction spends its cycles as a *train* (:meth:`Channel.train`): busy steps
and bursts, one after the other.  Event by event, every step is a SimPy event (a
burst three: the grant, its timeout, the release).  The fast path spends the steps
that end before anything else can happen (:func:`horizon`) as plain arithmetic, and
lets SimPy see only the step that reaches the horizon, created at the moment it would
have been, so every process sees the same channel, at the same time, in the same
order: the counters, the records and the traces are those of the event-by-event run.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import simpy
from simpy.resources.resource import Release, Request

from .costs import Bursts

__all__ = ["Channel", "ModuleStats", "Row", "horizon"]

#: One step of a train: ``busy`` cycles in the module, then the bursts (maybe none).
Row = tuple[int, Bursts | None]


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
    beat_cycles :
        cycles the memory takes per beat: a burst's data holds the channel for its
        ``cycles`` (:class:`~.costs.Bursts`) or its beats times this, whichever is longer.
    shares :
        a channel whose port this one shares (a memory that serves one burst at a time,
        read or write: the SDRAM controller).
    """

    def __init__(self, env: simpy.Environment, overhead_cycles: int, bus_bytes: int, beat_cycles: int = 1,
                 shares: Channel | None = None) -> None:
        self.env = env
        self.beat_cycles = beat_cycles
        self.overhead_cycles = overhead_cycles
        self.bus_bytes = bus_bytes
        # one burst at a time on both directions: the other channel's port
        self.port: simpy.Resource = simpy.Resource(env, capacity=1) if shares is None else shares.port
        # the fast path's user of the channel (:meth:`_hold`): a stand-in for a request
        self._holder = cast(Request, object())
        self.beats = 0

    def train(self, rows: Sequence[Row], stats: ModuleStats,
              until: Callable[[], int] | None, start: int | None = None) -> Generator[Any, Any, None]:
        """Spend ``rows`` in order from cycle ``start`` (default: now); with ``until``
        (:func:`horizon`), fast-forward.

        ``until()`` is the first cycle at which another process may act; steps that
        end before it cannot be told apart from their events, so they cost arithmetic.
        The step reaching it becomes one SimPy event, created now: exactly where the
        event-by-event run would have created it, since no event is created between.
        A ``start`` ahead of SimPy's time is the caller's own fast-forward (before
        ``until()``): the train goes on from it.
        """
        if until is None:
            assert start is None or start == self.env.now, "event by event, no time runs ahead"
            for busy, bursts in rows:
                if busy:
                    yield self.env.timeout(busy)
                    stats.busy += busy
                if bursts is not None:
                    yield from self.transfer(bursts, stats)
            return
        env, port, overhead = self.env, self.port, self.overhead_cycles
        now = int(env.now)
        t = now if start is None else start  # t: the train's own time, ahead of SimPy's by t - now
        limit = until()
        for busy, bursts in rows:
            if busy:
                if busy < 0 or t + busy >= limit:  # (SimPy refuses a negative delay)
                    yield env.timeout(t + busy - now)
                    now, limit = int(env.now), until()
                t += busy
                stats.busy += busy
            if bursts is None:
                continue
            for count, beats, cycles in bursts.runs:
                cycles = max(cycles, beats * self.beat_cycles)
                self.beats += count * beats
                step = overhead + cycles
                while count:
                    if t < limit and not port.users and not port.put_queue:
                        # granted at t, nobody to wait for: the bursts that end before
                        # ``limit`` at once (nothing can change the channel meanwhile)
                        n = min(count, (limit - 1 - t) // step) if step > 0 else count
                        if n <= 0:  # the next burst ends at or past the limit: held
                            n, end = 1, t + step
                            yield from self._hold(end - now)
                            now, limit = int(env.now), until()
                            t = end
                        else:
                            t += n * step
                        stats.wait_memory += n * overhead
                    else:  # someone holds or wants the channel (or may, at t)
                        n = 1
                        if t > now:
                            yield env.timeout(t - now)
                        with port.request() as grant:
                            yield grant
                            yield env.timeout(step)
                        stats.wait_memory += int(env.now) - t - cycles
                        now = t = int(env.now)
                        limit = until()
                    stats.busy += n * cycles
                    count -= n
        if t > now:
            yield env.timeout(t - now)

    def _hold(self, cycles: int) -> Generator[Any, Any, None]:
        """Hold the free channel from now for ``cycles`` (nobody looks at it before the
        burst's grant).  A request would be granted at once and its event find nobody to
        resume, so the holder is put among the users without one; the release is an event
        only when someone queued meanwhile (its processing grants them, as SimPy's)."""
        self.port.users.append(self._holder)
        yield self.env.timeout(cycles)
        self.port.users.remove(self._holder)
        if self.port.put_queue:
            self.port.release(self._holder)

    def transfer(self, bursts: Bursts, stats: ModuleStats) -> Generator[Any, Any, None]:
        """Move ``bursts``; waiting for the channel and the overhead are memory wait."""
        env = self.env
        for count, beats, cycles in bursts.runs:
            cycles = max(cycles, beats * self.beat_cycles)
            for _ in range(count):
                asked = int(env.now)
                with self.port.request() as grant:
                    yield grant
                    yield env.timeout(self.overhead_cycles + cycles)
                stats.wait_memory += int(env.now) - asked - cycles
                stats.busy += cycles
                self.beats += beats


def horizon(env: simpy.Environment, bound: int) -> int:
    """The first cycle at which a process other than the running one may act (at most
    ``bound``).

    That is the earliest scheduled event, leaving out the grants and releases nobody
    waits for (a running train's own, or another master's release with nobody queued):
    spending them sooner or later changes nothing.  SimPy's queue is a small heap of
    ``(time, priority, id, event)``; reading it is the one place this model looks
    inside SimPy.
    """
    first: float = bound
    for when, _, _, event in env._queue:  # noqa: SLF001 - a handful of entries
        if when < first and not _idle(event):
            first = when
    return int(first)  # (SimPy's times are numbers; this model's are whole cycles)


def _idle(event: simpy.Event) -> bool:
    callbacks = event.callbacks
    if callbacks is None or len(callbacks) != 1:
        return False
    if type(event) is Request:
        return True  # a grant only its own train knew about
    return type(event) is Release and not event.resource.put_queue

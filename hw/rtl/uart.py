"""An 8N1 UART: receiver and transmitter, ``divisor`` clock cycles per bit.

For a clock of ``f`` Hz and a line of ``baud`` bits per second, ``divisor =
round(f / baud)`` (12 MHz / 115200 → 104, 25 MHz / 115200 → 217); the rate error is
about ``1 / (2 · divisor)`` and must stay well below 5 % for 8N1, hence
``divisor >= 4``.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from .params import refusing

__all__ = ["UartRx", "UartTx", "MIN_DIVISOR", "check_divisor"]

#: Fewest clock cycles per bit: mid-bit sampling needs a middle.
MIN_DIVISOR = 4


def check_divisor(divisor: object) -> int:
    """``divisor`` if it is an integer of at least :data:`MIN_DIVISOR`."""
    if not isinstance(divisor, int) or isinstance(divisor, bool):
        raise TypeError(f"UART divisor must be an integer, not {divisor!r}")
    if divisor < MIN_DIVISOR:
        raise ValueError(f"UART divisor must be at least {MIN_DIVISOR} clock cycles per bit, "
                         f"not {divisor!r}")
    return divisor


class UartRx(wiring.Component):
    """8N1 receiver with a two-flop synchronizer and mid-bit sampling.

    Parameters
    ----------
    divisor : int
        clock cycles per bit (at least 4).

    Members
    -------
    rx : In(1)
        the line, asynchronous, idle high.
    o : Out(stream.Signature(8, always_ready=True))
        ``o.valid`` is high for one cycle per byte received with a good stop bit,
        ``o.payload`` holding it (data bits LSB first on the line).
    error : Out(1)
        one-cycle pulse for a byte whose stop bit was low (framing error); the byte is
        dropped.

    A byte is reported about 9.5 bit times after its start edge (+2 cycles of
    synchronizer).  A start bit that is high again at its middle is a glitch and is
    ignored.  After the stop bit's middle the receiver hunts for the next falling
    edge at once, so back-to-back bytes are received at full rate.
    """

    @refusing
    def __init__(self, divisor: int) -> None:
        self._divisor = check_divisor(divisor)
        super().__init__({
            "rx": In(1, init=1),
            "o": Out(stream.Signature(8, always_ready=True)),
            "error": Out(1),
        })

    @property
    def divisor(self) -> int:
        return self._divisor

    def elaborate(self, platform: object) -> Module:
        m = Module()
        line = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, line, init=1)
        timer = Signal(range(self._divisor))
        bit = Signal(range(9))
        shift = Signal(8)
        m.d.sync += [self.o.valid.eq(0), self.error.eq(0)]
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += timer.eq(self._divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer == 0):
                    with m.If(line):
                        m.next = "IDLE"  # a glitch, not a start bit
                    with m.Else():
                        m.d.sync += [timer.eq(self._divisor - 1), bit.eq(0)]
                        m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer == 0):
                    m.d.sync += [shift.eq(shift[1:] | (line << 7)), bit.eq(bit + 1),
                                 timer.eq(self._divisor - 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer == 0):
                    with m.If(line):
                        m.d.sync += [self.o.payload.eq(shift), self.o.valid.eq(1)]
                    with m.Else():
                        m.d.sync += self.error.eq(1)
                    m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """8N1 transmitter with a ready/valid byte input.

    Parameters
    ----------
    divisor : int
        clock cycles per bit (at least 4).

    Members
    -------
    i : In(stream.Signature(8))
        bytes to send; ``i.ready`` is high while the transmitter is idle and in the
        last cycle of a stop bit, so a byte is taken in the cycle ``i.valid`` is seen
        and the next one at the end of its stop bit.
    tx : Out(1)
        the line, idle high.

    One byte takes exactly ``10 · divisor`` cycles on the line; back-to-back bytes
    leave no idle time between a stop bit and the next start bit.
    """

    @refusing
    def __init__(self, divisor: int) -> None:
        self._divisor = check_divisor(divisor)
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    @property
    def divisor(self) -> int:
        return self._divisor

    def elaborate(self, platform: object) -> Module:
        m = Module()
        timer = Signal(range(self._divisor))
        left = Signal(range(11))  # bits still to put on the line, including this one
        frame = Signal(10, init=0x3FF)  # stop, data[7:0], start: shifted out LSB first
        # Ready in the last cycle of a stop bit too, so that frames follow back to back.
        m.d.comb += [self.i.ready.eq((left == 0) | ((left == 1) & (timer == 0))),
                     self.tx.eq(frame[0])]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [frame.eq((1 << 9) | (self.i.payload << 1)), left.eq(10),
                         timer.eq(self._divisor - 1)]
        with m.Elif(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.Elif(left != 0):
            m.d.sync += [frame.eq((1 << 9) | frame[1:]), left.eq(left - 1),
                         timer.eq(self._divisor - 1)]
        return m

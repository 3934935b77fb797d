"""The AXI4-Lite register block: how the host starts the accelerator and reads it out.

The register map is written once in :mod:`openvta.isa.counters`; this file only
decodes it.  Every register is 32 bits wide at a 4-byte aligned byte offset of a
4 KiB window (12 address bits):

========================  =====  ====================================================
offset                    kind   meaning
========================  =====  ====================================================
``REG_CONTROL``           R/W    write bit 0 = 1: one-cycle ``start`` pulse;
                                 read bit 0: ``busy``
``REG_STATUS``            R      bit 0: ``done`` latched (set on a rising ``done``,
                                 cleared by ``start``)
``REG_INSN_ADDR``         R/W    byte address of the first instruction
``REG_INSN_COUNT``        R/W    number of instructions
``REG_COUNTERS``          R      the ``CounterSet`` code of the counters present
``COUNTER_BASE + 8·k``    R      counter ``k`` (``HW_COUNTERS`` order), low word
``COUNTER_BASE + 8·k+4``  R      counter ``k``, high word
anything else             —      reads 0, writes are ignored
========================  =====  ====================================================

``WSTRB`` is ignored: every write stores the whole 32-bit word (the host driver and
the cocotb harness only issue full-word writes).  The two low address bits are
ignored too.  Both responses are always ``OKAY``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from openvta.isa.counters import (
    COUNTER_BASE,
    COUNTER_WIDTH,
    HW_COUNTERS,
    REG_CONTROL,
    REG_COUNTERS,
    REG_INSN_ADDR,
    REG_INSN_COUNT,
    REG_STATUS,
    REG_WIDTH,
    CounterSet,
    counter_set,
)

from .params import refusing

__all__ = ["AXIL_ADDR_WIDTH", "AXIL_DATA_WIDTH", "AXIL_MEMBERS", "ControlRegisters", "connect_axil",
           "counter_slots"]

AXIL_ADDR_WIDTH = 12
AXIL_DATA_WIDTH = REG_WIDTH

#: The AXI4-Lite slave ports, flat so that Verilog port names match
#: ``cocotbext.axi.AxiLiteBus.from_prefix(dut, "s_axil")``.
AXIL_MEMBERS: dict[str, wiring.Member] = {
    "s_axil_awaddr": In(AXIL_ADDR_WIDTH),
    "s_axil_awvalid": In(1),
    "s_axil_awready": Out(1),
    "s_axil_wdata": In(AXIL_DATA_WIDTH),
    "s_axil_wstrb": In(AXIL_DATA_WIDTH // 8),
    "s_axil_wvalid": In(1),
    "s_axil_wready": Out(1),
    "s_axil_bresp": Out(2),
    "s_axil_bvalid": Out(1),
    "s_axil_bready": In(1),
    "s_axil_araddr": In(AXIL_ADDR_WIDTH),
    "s_axil_arvalid": In(1),
    "s_axil_arready": Out(1),
    "s_axil_rdata": Out(AXIL_DATA_WIDTH),
    "s_axil_rresp": Out(2),
    "s_axil_rvalid": Out(1),
    "s_axil_rready": In(1),
}

_MAX_COUNTERS = ((1 << AXIL_ADDR_WIDTH) - COUNTER_BASE) // 8


def counter_slots(counter_count: int, counters: object) -> tuple[int, ...]:
    """The register slot ``k`` (at ``COUNTER_BASE + 8·k``) of each of ``counter_count``
    counters of the counter set ``counters``: ``0 … counter_count − 1`` for ``"all"``
    (a register block of any size), the counters' indices in ``HW_COUNTERS`` otherwise.

    Raises
    ------
    ValueError
        if ``counters`` names no :class:`~openvta.isa.counters.CounterSet`, or it is not
        ``"all"`` and ``counter_count`` is not its size.
    """
    chosen = counter_set(counters)
    if chosen is CounterSet.ALL:
        return tuple(range(counter_count))
    if counter_count != len(chosen.counters):
        raise ValueError(f"counter_count must be {len(chosen.counters)} for counters "
                         f"{chosen.label!r}, not {counter_count!r}")
    return tuple(HW_COUNTERS.index(c) for c in chosen.counters)


class ControlRegisters(wiring.Component):
    """AXI4-Lite slave holding the control, status and counter registers.

    Parameters
    ----------
    counter_count : int
        Number of 64-bit counters exposed at ``COUNTER_BASE`` (``len(HW_COUNTERS)``
        for the accelerator); at most 480, which fills the 4 KiB window.
    counters : str or CounterSet
        Which counters the ``counters`` input carries (the image's build option):
        ``"all"`` puts counter ``k`` at slot ``k``; ``"cycles"`` and ``"none"`` need
        ``counter_count`` 1 and 0 and put each counter at its ``HW_COUNTERS`` slot.
        ``REG_COUNTERS`` reads its code; the other counter slots read 0.

    Members
    -------
    s_axil_* : AXI4-Lite slave (see :data:`AXIL_MEMBERS`)
        Write path: ``AWREADY``/``WREADY`` are high while the address/data holding
        register is empty, so AW and W are accepted in either order or together; the
        write takes effect one cycle after both are held and ``BVALID`` rises with
        it (two cycles from the later handshake).  At most one write per two cycles.
        Read path: ``RVALID`` and ``RDATA`` follow one cycle after the AR handshake;
        ``ARREADY`` is low while a read response waits.
    start : Out(1)
        One-cycle pulse in the cycle after a write to ``REG_CONTROL`` with bit 0 set
        takes effect.  It is not gated by ``busy``: the core decides what a start
        while running means.
    insn_addr, insn_count : Out(32)
        The ``REG_INSN_ADDR`` and ``REG_INSN_COUNT`` registers (reset 0).
    done : In(1)
        Level from the core, high after FINISH.  Its rising edge sets the status
        bit; ``start`` clears it and wins when both happen in one cycle.
    busy : In(1)
        Level from the core, readable as ``REG_CONTROL`` bit 0.
    counters : In(ArrayLayout(64, counter_count))
        Sampled when read.  A low/high word pair is two reads, so a counter that
        is still changing may tear across the 32-bit boundary; read them once
        ``done`` is set.

    Raises
    ------
    TypeError
        if ``counter_count`` is not an integer.
    ValueError
        if ``counter_count`` is negative or does not fit the register window, or
        ``counters`` names no counter set or does not match ``counter_count``.
    """

    @refusing
    def __init__(self, counter_count: int, counters: str | CounterSet = "all") -> None:
        if not isinstance(counter_count, int) or isinstance(counter_count, bool):
            raise TypeError(f"counter_count must be an integer, not {counter_count!r}")
        if not 0 <= counter_count <= _MAX_COUNTERS:
            raise ValueError(
                f"counter_count must be between 0 and {_MAX_COUNTERS} (the counters at "
                f"{COUNTER_BASE:#x} must fit the {1 << AXIL_ADDR_WIDTH}-byte register window), "
                f"not {counter_count!r}"
            )
        self._counter_count = counter_count
        self._slots = counter_slots(counter_count, counters)
        self._counters = counter_set(counters)
        super().__init__({
            **AXIL_MEMBERS,
            "start": Out(1),
            "insn_addr": Out(AXIL_DATA_WIDTH),
            "insn_count": Out(AXIL_DATA_WIDTH),
            "done": In(1),
            "busy": In(1),
            "counters": In(data.ArrayLayout(COUNTER_WIDTH, counter_count)),
        })

    @property
    def counter_count(self) -> int:
        return self._counter_count

    @property
    def counter_set(self) -> CounterSet:
        return self._counters

    def elaborate(self, platform: object) -> Module:
        m = Module()
        done_latched = Signal()
        self._elaborate_write(m, done_latched)
        self._elaborate_read(m, done_latched)
        return m

    def _elaborate_write(self, m: Module, done_latched: Signal) -> None:
        aw_full = Signal()
        aw_word = Signal(AXIL_ADDR_WIDTH - 2)
        w_full = Signal()
        w_data = Signal(AXIL_DATA_WIDTH)
        done_prev = Signal()

        m.d.comb += [
            self.s_axil_awready.eq(~aw_full),
            self.s_axil_wready.eq(~w_full),
            self.s_axil_bresp.eq(0),
        ]
        with m.If(self.s_axil_awvalid & ~aw_full):
            m.d.sync += [aw_full.eq(1), aw_word.eq(self.s_axil_awaddr[2:])]
        with m.If(self.s_axil_wvalid & ~w_full):
            m.d.sync += [w_full.eq(1), w_data.eq(self.s_axil_wdata)]
        with m.If(self.s_axil_bvalid & self.s_axil_bready):
            m.d.sync += self.s_axil_bvalid.eq(0)

        m.d.sync += self.start.eq(0)
        with m.If(aw_full & w_full & ~self.s_axil_bvalid):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), self.s_axil_bvalid.eq(1)]
            with m.Switch(aw_word):
                with m.Case(REG_CONTROL >> 2):
                    m.d.sync += self.start.eq(w_data[0])
                with m.Case(REG_INSN_ADDR >> 2):
                    m.d.sync += self.insn_addr.eq(w_data)
                with m.Case(REG_INSN_COUNT >> 2):
                    m.d.sync += self.insn_count.eq(w_data)

        m.d.sync += done_prev.eq(self.done)
        with m.If(self.start):
            m.d.sync += done_latched.eq(0)
        with m.Elif(self.done & ~done_prev):
            m.d.sync += done_latched.eq(1)

    def _elaborate_read(self, m: Module, done_latched: Signal) -> None:
        value = read_register(m, self.s_axil_araddr[2:], self.busy, done_latched,
                              self.insn_addr, self.insn_count, self.counters, self._slots,
                              self._counters)
        m.d.comb += [
            self.s_axil_arready.eq(~self.s_axil_rvalid),
            self.s_axil_rresp.eq(0),
        ]
        with m.If(self.s_axil_rvalid & self.s_axil_rready):
            m.d.sync += self.s_axil_rvalid.eq(0)
        with m.If(self.s_axil_arvalid & ~self.s_axil_rvalid):
            m.d.sync += [self.s_axil_rvalid.eq(1), self.s_axil_rdata.eq(value)]


def read_register(m: Module, word_addr: Value, busy: Value, done: Value, insn_addr: Value,
                  insn_count: Value, counters: Any, slots: Sequence[int],
                  present: CounterSet) -> Signal:
    """The 32-bit value of the register at word address ``word_addr`` (the register map of
    :mod:`openvta.isa.counters`; unknown addresses read 0), for the AXI-Lite block and the
    UART bridge alike: ``counters[i]`` is read at slot ``slots[i]``, ``REG_COUNTERS``
    reads ``present``."""
    value = Signal(AXIL_DATA_WIDTH)
    with m.Switch(word_addr):
        with m.Case(REG_CONTROL >> 2):
            m.d.comb += value.eq(busy)
        with m.Case(REG_STATUS >> 2):
            m.d.comb += value.eq(done)
        with m.Case(REG_INSN_ADDR >> 2):
            m.d.comb += value.eq(insn_addr)
        with m.Case(REG_INSN_COUNT >> 2):
            m.d.comb += value.eq(insn_count)
        with m.Case(REG_COUNTERS >> 2):
            m.d.comb += value.eq(int(present))
        for i, k in enumerate(slots):
            word = (COUNTER_BASE >> 2) + 2 * k
            with m.Case(word):
                m.d.comb += value.eq(counters[i][:AXIL_DATA_WIDTH])
            with m.Case(word + 1):
                m.d.comb += value.eq(counters[i][AXIL_DATA_WIDTH:])
    return value


def connect_axil(m: Module, top: wiring.Component, csr: ControlRegisters) -> None:
    """Wire the flat ``s_axil_*`` ports of ``top`` (seen from inside) to ``csr``.

    ``top`` must have the members of :data:`AXIL_MEMBERS` with the same flows; an
    ``In`` port of the top drives the register block's ``In`` port and vice versa.
    """
    for name, member in AXIL_MEMBERS.items():
        outer, inner = getattr(top, name), getattr(csr, name)
        if member.flow == wiring.In:
            m.d.comb += inner.eq(outer)
        else:
            m.d.comb += outer.eq(inner)

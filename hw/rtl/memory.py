"""The memory system: a burst port per module, round-robin arbitration, one AXI4 master.

Each master (fetch, load, compute, store) has a :func:`mem_port` with a read side
(request: byte address and beats; then the data beats in order) and a write side
(request, data beats, a response pulse).  :class:`AxiArbiter` grants one master a
whole burst at a time on each channel, round-robin among the masters that request,
and drives the flat ``m_axi_*`` AXI4 signals.  One burst is outstanding per channel.

Latency: a granted read reaches ``arvalid`` the cycle after the grant; write data
follows the address handshake; the write response is passed on when ``bvalid``.
"""

from __future__ import annotations

from typing import Any

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from openvta.isa.timing import AXI_BOUNDARY, AXI_MAX_BURST_BEATS

from .params import check_bus_bits, refusing

__all__ = ["mem_port", "BURST_LAYOUT", "AxiArbiter", "axi_master_signature", "burst_beats", "AXI_BOUNDARY",
           "ADDR_WIDTH", "BEATS_SHAPE"]

#: Bits of a DRAM byte address (the AXI4 address channels).
ADDR_WIDTH = 32
#: The shape of a burst length in beats (1 to AXI4's longest burst).
BEATS_SHAPE = range(AXI_MAX_BURST_BEATS + 1)


def burst_beats(addr: Any, left: Any, max_burst: int, bus_bytes: int) -> Any:
    """Beats of the next burst at byte ``addr`` with ``left`` beats to go: at most
    ``max_burst`` and never across a 4 KiB boundary."""
    offset = addr[:AXI_BOUNDARY.bit_length() - 1]
    to_boundary = (AXI_BOUNDARY - offset) >> (bus_bytes.bit_length() - 1)
    limit = Mux(to_boundary < max_burst, to_boundary, max_burst)
    return Mux(left > limit, limit, left)


#: A burst request: its first byte address and its length in beats.
BURST_LAYOUT = data.StructLayout({"addr": ADDR_WIDTH, "beats": BEATS_SHAPE})


def mem_port(bus_bits: int) -> wiring.Signature:
    """A master's burst port, seen from the master: five streams (valid/ready channels).

    ``rreq`` and ``wreq`` (out) request a burst (:data:`BURST_LAYOUT`); ``rdata`` (in)
    brings its beats (``data``, ``last``), ``wdata`` (out) takes them (``data``, ``strb``,
    ``last``: ``strb`` marks the bytes of a write beat to store, since a STORE of elements
    narrower than a beat writes part of its first and last beats); ``wresp`` (in, no
    payload, always ready) pulses when the write burst is done.  A transfer happens in a
    cycle where ``valid`` and ``ready`` are both high, as in AXI4.
    """
    return wiring.Signature({
        "rreq": Out(stream.Signature(BURST_LAYOUT)),
        "rdata": In(stream.Signature(data.StructLayout({"data": bus_bits, "last": 1}))),
        "wreq": Out(stream.Signature(BURST_LAYOUT)),
        "wdata": Out(stream.Signature(data.StructLayout({"data": bus_bits, "strb": bus_bits // 8,
                                                         "last": 1}))),
        "wresp": In(stream.Signature(0, always_ready=True)),
    })


def axi_master_signature(bus_bits: int) -> dict[str, wiring.Member]:
    """The flat ``m_axi_*`` AXI4 master ports (names as cocotbext-axi's ``from_prefix`` expects)."""
    strb = bus_bits // 8
    beats = (AXI_MAX_BURST_BEATS - 1).bit_length()
    outs = {"awid": 1, "awaddr": ADDR_WIDTH, "awlen": beats, "awsize": 3, "awburst": 2,
            "awvalid": 1, "wdata": bus_bits, "wstrb": strb, "wlast": 1, "wvalid": 1, "bready": 1,
            "arid": 1, "araddr": ADDR_WIDTH, "arlen": beats, "arsize": 3, "arburst": 2,
            "arvalid": 1, "rready": 1}
    ins = {"awready": 1, "wready": 1, "bid": 1, "bresp": 2, "bvalid": 1, "arready": 1,
           "rid": 1, "rdata": bus_bits, "rresp": 2, "rlast": 1, "rvalid": 1}
    members = {f"m_axi_{k}": Out(w) for k, w in outs.items()}
    members.update({f"m_axi_{k}": In(w) for k, w in ins.items()})
    return members


class AxiArbiter(wiring.Component):
    """Round-robin arbitration of ``count`` burst ports onto one AXI4 master.

    Parameters
    ----------
    count :
        number of masters.
    bus_bits :
        AXI data width in bits (a power of two, 8 to 1024).
    """

    @refusing
    def __init__(self, count: int, bus_bits: int) -> None:
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"arbiter master count must be at least 1, not {count!r}")
        check_bus_bits(bus_bits)
        self._count, self._bus_bits = count, bus_bits
        members = {"masters": In(mem_port(bus_bits)).array(count)}
        members.update(axi_master_signature(bus_bits))
        super().__init__(members)

    def _next(self, m: Module, requests: list, last: Signal) -> tuple[Signal, Signal]:
        """Round-robin choice: the first requester after ``last``."""
        n = self._count
        chosen = Signal(range(n))
        any_ = Signal()
        for offset in reversed(range(1, n + 1)):
            for i in range(n):
                with m.If((last == i) & requests[(i + offset) % n]):
                    m.d.comb += [chosen.eq((i + offset) % n), any_.eq(1)]
        return chosen, any_

    def elaborate(self, platform: object) -> Module:
        m = Module()
        ports = self.masters
        size = (self._bus_bits // 8).bit_length() - 1
        m.d.comb += [
            self.m_axi_arsize.eq(size), self.m_axi_arburst.eq(1), self.m_axi_arid.eq(0),
            self.m_axi_awsize.eq(size), self.m_axi_awburst.eq(1), self.m_axi_awid.eq(0),
        ]
        self._read(m, ports)
        self._write(m, ports)
        return m

    def _grant(self, m: Module, ports: Any, side: str, sel: Signal, choice: tuple) -> None:
        """The IDLE and ADDR states of a channel's FSM (``side`` is ``"r"`` or ``"w"``):
        grant the next requester round-robin, then pass its address to AXI."""
        chosen, any_ = choice
        axi = {k: getattr(self, f"m_axi_a{side}{k}") for k in ("valid", "addr", "len", "ready")}
        # the granted request's address and length are registered at the grant (a
        # requester holds them until its handshake), so the AXI address channel is
        # driven from flip-flops
        addr_q, len_q = Signal.like(axi["addr"], name=f"a{side}addr_q"), Signal.like(axi["len"], name=f"a{side}len_q")
        with m.State("IDLE"):
            with m.If(any_):
                m.d.sync += sel.eq(chosen)
                for i, p in enumerate(ports):
                    with m.If(chosen == i):
                        m.d.sync += [addr_q.eq(getattr(p, f"{side}req").payload.addr),
                                     len_q.eq(getattr(p, f"{side}req").payload.beats - 1)]
                m.next = "ADDR"
        with m.State("ADDR"):
            m.d.comb += [axi["valid"].eq(1), axi["addr"].eq(addr_q), axi["len"].eq(len_q)]
            for i, p in enumerate(ports):
                with m.If(sel == i):
                    m.d.comb += getattr(p, f"{side}req").ready.eq(axi["ready"])
            with m.If(axi["ready"]):
                m.next = "DATA"

    def _read(self, m: Module, ports: Any) -> None:
        sel = Signal(range(self._count))
        last = Signal(range(self._count), init=self._count - 1)
        choice = self._next(m, [p.rreq.valid for p in ports], last)
        with m.FSM(name="read"):
            self._grant(m, ports, "r", sel, choice)
            with m.State("DATA"):
                for i, p in enumerate(ports):
                    with m.If(sel == i):
                        m.d.comb += [p.rdata.valid.eq(self.m_axi_rvalid), p.rdata.payload.data.eq(self.m_axi_rdata),
                                     p.rdata.payload.last.eq(self.m_axi_rlast),
                                     self.m_axi_rready.eq(p.rdata.ready)]
                with m.If(self.m_axi_rvalid & self.m_axi_rready & self.m_axi_rlast):
                    m.d.sync += last.eq(sel)
                    m.next = "IDLE"

    def _write(self, m: Module, ports: Any) -> None:
        sel = Signal(range(self._count))
        last = Signal(range(self._count), init=self._count - 1)
        choice = self._next(m, [p.wreq.valid for p in ports], last)
        with m.FSM(name="write"):
            self._grant(m, ports, "w", sel, choice)
            with m.State("DATA"):
                for i, p in enumerate(ports):
                    with m.If(sel == i):
                        beat = p.wdata.payload
                        m.d.comb += [self.m_axi_wvalid.eq(p.wdata.valid), self.m_axi_wdata.eq(beat.data),
                                     self.m_axi_wstrb.eq(beat.strb), self.m_axi_wlast.eq(beat.last),
                                     p.wdata.ready.eq(self.m_axi_wready)]
                with m.If(self.m_axi_wvalid & self.m_axi_wready & self.m_axi_wlast):
                    m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += self.m_axi_bready.eq(1)
                with m.If(self.m_axi_bvalid):
                    for i, p in enumerate(ports):
                        with m.If(sel == i):
                            m.d.comb += p.wresp.valid.eq(1)
                    m.d.sync += last.eq(sel)
                    m.next = "IDLE"

"""The host's way into a memory behind a controller: the bridge's byte port as AXI4
transactions (:class:`ByteToAxi`), and two AXI4 masters on one slave (:class:`AxiJoin`).

With on-chip RAM the bridge has a byte port of its own (:class:`~.axi_ram.AxiRam`); with
the SDRAM (:mod:`.sdram`) the core and the bridge share the controller's one AXI4 port::

    Core ── m_axi ──┐
                    AxiJoin ── SdramController ── the part's pins
    Bridge ─ byte ─ ByteToAxi ┘
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axi_ram import axi_slave_members, byte_port_signature
from .memory import axi_master_signature
from .params import check_bus_bits, refusing

__all__ = ["ByteToAxi", "AxiJoin"]

#: AXI4 signals by channel: the read channels (AR, R) and the write channels (AW, W, B).
_READ_PREFIXES, _WRITE_PREFIXES = ("ar", "r"), ("aw", "w", "b")
#: The handshake signals of each channel (valid from the source, ready from the sink):
#: a master not granted the channel sees and drives them low.
_HANDSHAKES = {f"{channel}{signal}" for channel in ("ar", "r", "aw", "w", "b") for signal in ("valid", "ready")}


class ByteToAxi(wiring.Component):
    """The bridge's byte port (:func:`~.axi_ram.byte_port_signature`) as an AXI4 master.

    A write is one single-beat burst with the byte's strobe (``ready`` is low until its
    response).  A read fetches the bus word holding ``addr`` (one single-beat burst) and
    keeps it while ``r_en`` stays high, so the bytes of one word cost one burst; the word
    is dropped when ``r_en`` falls or a write comes, so a later read sees what the core
    wrote meanwhile.

    Parameters
    ----------
    addr_width : int
        the byte port's address bits (the memory's size, a power of two).
    bus_bits : int
        the AXI4 data width.
    """

    @refusing
    def __init__(self, addr_width: int, bus_bits: int) -> None:
        self._bus_bits = check_bus_bits(bus_bits)
        if not isinstance(addr_width, int) or isinstance(addr_width, bool) or not 10 <= addr_width <= 32:
            raise ValueError(f"addr_width must be an integer from 10 to 32, not {addr_width!r}")
        self._addr_width = addr_width
        super().__init__({**axi_master_signature(bus_bits), "byte": In(byte_port_signature(addr_width))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bus_bytes = self._bus_bits // 8
        low = bus_bytes.bit_length() - 1
        port = self.byte
        word = port.addr[low:]
        lane = port.addr[:low] if low else 0
        cached, cached_word, cache = Signal(), Signal(self._addr_width - low), Signal(self._bus_bits)
        hit = cached & (cached_word == word)
        m.d.comb += [port.r_data.eq(cache.word_select(lane, 8) if low else cache),
                     self.m_axi_awsize.eq(low), self.m_axi_arsize.eq(low),
                     self.m_axi_awburst.eq(1), self.m_axi_arburst.eq(1),
                     self.m_axi_awaddr.eq(word << low), self.m_axi_araddr.eq(word << low),
                     self.m_axi_wdata.eq(port.w_data.replicate(bus_bytes)), self.m_axi_wlast.eq(1),
                     self.m_axi_wstrb.eq(1 << lane if low else 1)]
        with m.If(~port.r_en):
            m.d.sync += cached.eq(0)
        address_sent, data_sent = Signal(), Signal()
        with m.FSM():
            with m.State("IDLE"):
                with m.If(port.w_en):
                    m.d.sync += [cached.eq(0), address_sent.eq(0), data_sent.eq(0)]
                    m.next = "WRITE"
                with m.Elif(port.r_en & ~hit):
                    m.next = "READ"
                with m.Else():
                    m.d.comb += port.ready.eq(port.r_en)
            with m.State("WRITE"):  # the address and the data, then the response
                m.d.comb += [self.m_axi_awvalid.eq(~address_sent), self.m_axi_wvalid.eq(~data_sent),
                             self.m_axi_bready.eq(1)]
                with m.If(self.m_axi_awready):
                    m.d.sync += address_sent.eq(1)
                with m.If(self.m_axi_wready):
                    m.d.sync += data_sent.eq(1)
                with m.If(self.m_axi_bvalid):
                    m.d.comb += port.ready.eq(1)  # the write is taken as it completes
                    m.next = "DONE"
            with m.State("DONE"):  # the bridge moves on from the byte it wrote
                m.next = "IDLE"
            with m.State("READ"):
                m.d.comb += self.m_axi_arvalid.eq(1)
                with m.If(self.m_axi_arready):
                    m.next = "READ_DATA"
            with m.State("READ_DATA"):
                m.d.comb += self.m_axi_rready.eq(1)
                with m.If(self.m_axi_rvalid):
                    m.d.sync += [cache.eq(self.m_axi_rdata), cached_word.eq(word), cached.eq(1)]
                    m.next = "IDLE"
        return m


class AxiJoin(wiring.Component):
    """Two AXI4 masters (``m0_axi_*``, ``m1_axi_*``) on one slave (``m_axi_*``): each
    direction is granted to one master for one burst (the read from its AR to its last R
    beat, the write from its AW to its response; a second address of the same master
    waits for the next grant), in turn when both wait.

    Parameters
    ----------
    bus_bits : int
        the AXI4 data width.
    """

    @refusing
    def __init__(self, bus_bits: int) -> None:
        self._bus_bits = check_bus_bits(bus_bits)
        members = dict(axi_master_signature(bus_bits))
        for k in (0, 1):
            members.update({f"m{k}_axi_" + name[len("s_axi_"):]: member
                            for name, member in axi_slave_members(bus_bits).items()})
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        for prefixes, request, done in ((_READ_PREFIXES, "arvalid", self.m_axi_rvalid & self.m_axi_rready
                                         & self.m_axi_rlast),
                                        (_WRITE_PREFIXES, "awvalid", self.m_axi_bvalid & self.m_axi_bready)):
            busy, owner, addressed = Signal(), Signal(), Signal()
            wants = [getattr(self, f"m{k}_axi_{request}") for k in (0, 1)]
            with m.If(~busy & (wants[0] | wants[1])):  # both waiting: the one not granted last
                m.d.sync += [busy.eq(1), owner.eq(Mux(wants[0] & wants[1], ~owner, wants[1]))]
            with m.If(getattr(self, f"m_axi_{request}") & getattr(self, f"m_axi_{request[:2]}ready")):
                m.d.sync += addressed.eq(1)  # a grant is one burst: its address passes once
            with m.If(busy & done):
                m.d.sync += [busy.eq(0), addressed.eq(0)]
            for name, member in axi_master_signature(self._bus_bits).items():
                channel = name[len("m_axi_"):]
                if not channel.startswith(prefixes):
                    continue
                ours = [getattr(self, f"m{k}_axi_{channel}") for k in (0, 1)]
                theirs = getattr(self, name)
                handshake = channel in _HANDSHAKES
                # the address channel's handshake is open once per grant
                open_ = busy & ~addressed if channel in (request, request[:2] + "ready") else busy
                if member.flow == Out:  # master to slave
                    chosen = Mux(owner, ours[1], ours[0])
                    m.d.comb += theirs.eq(chosen & open_ if handshake else chosen)
                else:  # slave to master
                    for k in (0, 1):
                        m.d.comb += ours[k].eq(theirs & open_ & (owner == k) if handshake else theirs)
        return m

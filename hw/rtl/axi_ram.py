"""On-chip RAM behind an AXI4 slave, with a byte-wide side port for the host bridge.

The SoC's "DRAM": one :class:`amaranth.lib.memory.Memory` of ``mem_bytes / bus_bytes``
words of ``bus_bytes`` bytes, with one write port (byte enables) shared by the AXI
write channel and the byte port, and two read ports (AXI, byte port), so it maps onto
two copies of a simple dual-port block RAM.
"""

from __future__ import annotations

from amaranth import Const, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory, ReadPort, WritePort
from amaranth.lib.wiring import In, Out

from .memory import BEATS_SHAPE, axi_master_signature
from .params import refusing

__all__ = ["AxiRam", "axi_slave_members", "byte_port_signature", "check_mem_bytes"]

MIN_MEM_BYTES = 1024


def check_mem_bytes(mem_bytes: object) -> int:
    """``mem_bytes`` if it is a power of two of at least :data:`MIN_MEM_BYTES`."""
    if not isinstance(mem_bytes, int) or isinstance(mem_bytes, bool):
        raise TypeError(f"mem_bytes must be an integer, not {mem_bytes!r}")
    if mem_bytes < MIN_MEM_BYTES or mem_bytes & (mem_bytes - 1):
        raise ValueError(f"mem_bytes must be a power of two of at least {MIN_MEM_BYTES}, "
                         f"not {mem_bytes!r}")
    return mem_bytes


def byte_port_signature(addr_width: int) -> wiring.Signature:
    """The byte port, seen from its user (the bridge): address, write, read, ``ready``.

    In a cycle where ``ready`` is high, ``w_en`` stores ``w_data`` at ``addr`` (at the end
    of the cycle), and with ``r_en``, ``r_data`` is from the next cycle on the byte at
    ``addr``, for as long as ``addr`` and ``r_en`` stay.  A write or read in a cycle where
    ``ready`` is low waits: the user holds it.  :class:`AxiRam` is always ready, and its
    ``r_data`` is the byte at the ``addr`` of the previous cycle; a memory behind a
    controller (:class:`~openvta.hw.rtl.host_port.ByteToAxi`) is not.
    """
    return wiring.Signature({"addr": Out(addr_width), "w_en": Out(1), "w_data": Out(8),
                             "r_en": Out(1), "r_data": In(8), "ready": In(1)})


def axi_slave_members(bus_bits: int) -> dict[str, wiring.Member]:
    """The flat ``s_axi_*`` AXI4 slave ports: :func:`axi_master_signature` flipped."""
    members = {}
    for name, member in axi_master_signature(bus_bits).items():
        flow = In if member.flow == Out else Out
        members["s_axi_" + name.removeprefix("m_axi_")] = flow(member.shape)
    return members


class AxiRam(wiring.Component):
    """AXI4 slave RAM with a byte port.

    Parameters
    ----------
    mem_bytes : int
        size, a power of two of at least 1024.  Addresses wrap modulo the size.
    bus_bytes : int
        AXI data width in bytes (a power of two, 1 to 128: every width AXI4 has).

    Members
    -------
    s_axi_* : AXI4 slave (see :func:`axi_slave_members`)
        INCR bursts of full ``bus_bytes``-byte beats (``AxSIZE`` and ``AxBURST`` are not
        looked at), one read and one write burst outstanding.  Read: ``ARREADY`` while no
        burst is in flight; the first beat one cycle after the AR handshake, then one
        beat per cycle while ``RREADY``.  Write: ``AWREADY`` while no burst is in
        flight; ``WREADY`` after the AW handshake (W is not taken before AW), one beat
        per cycle with ``WSTRB`` byte enables; ``BVALID`` one cycle after ``WLAST``.
        ``BRESP``/``RRESP`` are always OKAY; IDs are echoed as 0 (one ID only).
    byte : In(byte_port_signature(log2(mem_bytes)))
        The bridge's port.  Its writes take the shared write port: ``WREADY`` is low
        in a cycle with ``byte.w_en``.  Its reads have their own port.
    """

    @refusing
    def __init__(self, mem_bytes: int, bus_bytes: int) -> None:
        self._mem_bytes = check_mem_bytes(mem_bytes)
        if not isinstance(bus_bytes, int) or isinstance(bus_bytes, bool) \
                or not 1 <= bus_bytes <= 128 or bus_bytes & (bus_bytes - 1):
            raise ValueError(f"bus_bytes must be a power of two between 1 and 128, "
                             f"not {bus_bytes!r}")
        self._bus_bytes = bus_bytes
        super().__init__({**axi_slave_members(bus_bytes * 8),
                          "byte": In(byte_port_signature(self.addr_width))})

    @property
    def mem_bytes(self) -> int:
        return self._mem_bytes

    @property
    def bus_bytes(self) -> int:
        return self._bus_bytes

    @property
    def addr_width(self) -> int:
        return self._mem_bytes.bit_length() - 1

    def elaborate(self, platform: object) -> Module:
        m = Module()
        depth = self._mem_bytes // self._bus_bytes
        m.submodules.mem = mem = Memory(shape=self._bus_bytes * 8, depth=depth, init=[])
        write = mem.write_port(granularity=8)
        axi_read = mem.read_port()
        byte_read = mem.read_port()
        self._read(m, axi_read)
        self._write(m, write)
        self._byte_port(m, write, byte_read)
        return m

    def _word(self, addr: Value) -> Value:
        """Word index of a byte address, wrapped to the memory."""
        low = self._bus_bytes.bit_length() - 1
        return addr[low:self.addr_width]

    def _read(self, m: Module, port: ReadPort) -> None:
        word = Signal(range(self._mem_bytes // self._bus_bytes))
        left = Signal(BEATS_SHAPE)  # beats still to read from the memory
        # The memory's output register is the R channel's data register: the port
        # reads the next beat whenever the current one is not stalled.
        advance = ~self.s_axi_rvalid | self.s_axi_rready
        m.d.comb += [port.addr.eq(word), port.en.eq(advance), self.s_axi_rdata.eq(port.data),
                     self.s_axi_arready.eq((left == 0) & ~self.s_axi_rvalid),
                     self.s_axi_rid.eq(0), self.s_axi_rresp.eq(0)]
        with m.If(advance):
            m.d.sync += [self.s_axi_rvalid.eq(left != 0), self.s_axi_rlast.eq(left == 1)]
            with m.If(left != 0):
                m.d.sync += [word.eq(word + 1), left.eq(left - 1)]
        with m.If(self.s_axi_arvalid & self.s_axi_arready):
            m.d.sync += [word.eq(self._word(self.s_axi_araddr)), left.eq(self.s_axi_arlen + 1)]

    def _write(self, m: Module, port: WritePort) -> None:
        word = Signal(range(self._mem_bytes // self._bus_bytes))
        active = Signal()
        m.d.comb += [self.s_axi_awready.eq(~active & ~self.s_axi_bvalid),
                     self.s_axi_wready.eq(active & ~self.byte.w_en),
                     self.s_axi_bid.eq(0), self.s_axi_bresp.eq(0)]
        with m.If(self.s_axi_awvalid & self.s_axi_awready):
            m.d.sync += [word.eq(self._word(self.s_axi_awaddr)), active.eq(1)]
        with m.If(self.s_axi_wvalid & self.s_axi_wready):
            m.d.comb += [port.addr.eq(word), port.data.eq(self.s_axi_wdata),
                         port.en.eq(self.s_axi_wstrb)]
            m.d.sync += word.eq(word + 1)
            with m.If(self.s_axi_wlast):
                m.d.sync += [active.eq(0), self.s_axi_bvalid.eq(1)]
        with m.If(self.s_axi_bvalid & self.s_axi_bready):
            m.d.sync += self.s_axi_bvalid.eq(0)

    def _byte_port(self, m: Module, write: WritePort, read: ReadPort) -> None:
        low = self._bus_bytes.bit_length() - 1
        m.d.comb += [read.addr.eq(self.byte.addr[low:]), self.byte.ready.eq(1)]
        if low:  # the byte's lane in the word
            lane = self.byte.addr[:low]
            lane_read = Signal.like(lane)
            m.d.sync += lane_read.eq(lane)
            m.d.comb += self.byte.r_data.eq(read.data.word_select(lane_read, 8))
        else:  # a byte-wide bus: the word is the byte
            lane = Const(0, 1)
            m.d.comb += self.byte.r_data.eq(read.data)
        with m.If(self.byte.w_en):
            m.d.comb += [write.addr.eq(self.byte.addr[low:]),
                         write.data.eq(self.byte.w_data.replicate(self._bus_bytes)),
                         write.en.eq((Const(1, self._bus_bytes) << lane)[:self._bus_bytes])]

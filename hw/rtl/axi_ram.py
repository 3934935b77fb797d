"""On-chip RAM behind an AXI4 slave, with a byte-wide side port for the host bridge.

The SoC's "DRAM": one :class:`amaranth.lib.memory.Memory` of ``mem_bytes / bus_bytes``
words of ``bus_bytes`` bytes, with one write port (byte enables) shared by the AXI
write channel and the byte port, and two read ports (AXI, byte port), so it maps onto
two copies of a simple dual-port block RAM.  With ``single_port``, one address for
every access (a burst in either direction at a time, the byte port between bursts), so
that it maps onto a single-port RAM: the iCE40 UP5K's SPRAM (Yosys's ``synth_ice40
-spram``), leaving the block RAM to the accelerator.
"""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory, ReadPort, WritePort
from amaranth.lib.wiring import In, Out

from .memory import BEATS_SHAPE, axi_master_signature
from .params import refusing

__all__ = ["AxiRam", "SPRAM_MEMORY", "SPRAM_NO_INIT", "axi_slave_members", "byte_port_signature",
           "check_mem_bytes"]

MIN_MEM_BYTES = 1024
#: The name of a single-port AxiRam's memory in the netlist.
SPRAM_MEMORY = "openvta_spram"
#: The Yosys command, after reading the design, that lets the single-port memory map
#: onto the UP5K's SPRAM: an SPRAM has no initial contents, so the memory's (all zeros:
#: a board's DRAM holds whatever the host writes) are dropped.  (The port's reads are
#: also gated off in a write's cycle, visibly to Yosys, as an SPRAM's output keeps its
#: word then.)
SPRAM_NO_INIT = f"delete t:$meminit_v2 r:MEMID=*{SPRAM_MEMORY}* %i"


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
    ``ready`` is low waits: the user holds it.  :class:`AxiRam` with two ports is always
    ready, and its ``r_data`` is the byte at the ``addr`` of the previous cycle; a single-
    port one is ready between bursts, a memory behind a controller
    (:class:`~openvta.hw.rtl.host_port.ByteToAxi`) when it has served the access.
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

    With ``single_port``, one burst at a time in either direction (``ARREADY`` and
    ``AWREADY`` only while neither channel has a burst in flight, a read first when both
    ask), with the timing above otherwise; the byte port is ``ready`` only then too (no
    burst starts in a cycle where it writes; WREADY does not wait for it), and its read
    byte is kept from the cycle after the read, so a burst that starts while the bridge
    holds a read does not change it.  The cycle model's timing of this memory
    is its timing with ``dram_channels = 1`` (:func:`openvta.isa.spram_timing`).
    """

    @refusing
    def __init__(self, mem_bytes: int, bus_bytes: int, single_port: bool = False) -> None:
        self._mem_bytes = check_mem_bytes(mem_bytes)
        if not isinstance(bus_bytes, int) or isinstance(bus_bytes, bool) \
                or not 1 <= bus_bytes <= 128 or bus_bytes & (bus_bytes - 1):
            raise ValueError(f"bus_bytes must be a power of two between 1 and 128, "
                             f"not {bus_bytes!r}")
        self._bus_bytes, self.single_port = bus_bytes, bool(single_port)
        super().__init__({**axi_slave_members(bus_bytes * 8),
                          "byte": In(byte_port_signature(self.addr_width))})
        #: the memory, once elaborated (``memory.data[k]``: word ``k``, for simulations that
        #: load it directly)
        self.memory: Memory | None = None

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
        self.memory = mem = Memory(shape=self._bus_bytes * 8, depth=self._mem_bytes // self._bus_bytes,
                                   init=[])
        # (the single-port memory's name is how the bitstream build finds it: SPRAM_MEMORY)
        m.submodules[SPRAM_MEMORY if self.single_port else "mem"] = mem
        write = mem.write_port(granularity=8)
        if self.single_port:
            read = mem.read_port()
            self._single_port(m, read, write)
            return m
        axi_read = mem.read_port()
        byte_read = mem.read_port()
        word, _, advance = self._read(m, axi_read.data)
        m.d.comb += [axi_read.addr.eq(word), axi_read.en.eq(advance)]
        self._write(m, write, Signal(name="active"))
        self._byte_port(m, write, byte_read)
        return m

    def _single_port(self, m: Module, read: ReadPort, write: WritePort) -> None:
        """Both channels and the byte port on one address (a single-port RAM)."""
        depth = self._mem_bytes // self._bus_bytes
        writing = Signal()  # a write burst's data phase
        # a channel may start a burst only while the other has none and the byte port
        # does not write; a read first
        r_word, left, advance = self._read(m, read.data, allowed=~writing & ~self.s_axi_bvalid & ~self.byte.w_en)
        reading = (left != 0) | self.s_axi_rvalid
        w_word = self._write(m, write, writing, allowed=~reading & ~self.byte.w_en & ~self.s_axi_arvalid)
        idle = ~reading & ~writing & ~self.s_axi_bvalid
        addr = Signal(range(depth))
        read_en = Signal()  # (the port reads only in a cycle without a write, visibly so for
        # Yosys: an SPRAM's output keeps its word in a write's cycle)
        m.d.comb += [read.en.eq(read_en & ~write.en.any()), read.addr.eq(addr), write.addr.eq(addr)]
        low = self._bus_bytes.bit_length() - 1
        with m.If(writing):
            m.d.comb += addr.eq(w_word)
        with m.Elif(reading):
            m.d.comb += [addr.eq(r_word), read_en.eq(advance)]
        with m.Else():  # between bursts: the byte port
            m.d.comb += [addr.eq(self.byte.addr[low:]), read_en.eq(1), self.byte.ready.eq(1)]
        # the byte port's byte is kept once read, so that a burst starting while the bridge
        # still holds the read does not change it
        fresh = Signal()  # the port read for the byte port last cycle
        held = Signal(8)
        m.d.sync += fresh.eq(idle & ~self.byte.w_en)
        lane, byte = self._byte_lane(m, read.data)
        m.d.comb += self.byte.r_data.eq(Mux(fresh, byte, held))
        with m.If(fresh):
            m.d.sync += held.eq(byte)
        with m.If(idle & self.byte.w_en):
            self._byte_write(m, write, lane)

    def _word(self, addr: Value) -> Value:
        """Word index of a byte address, wrapped to the memory."""
        low = self._bus_bytes.bit_length() - 1
        return addr[low:self.addr_width]

    def _read(self, m: Module, data: Value, allowed: Value | None = None) -> tuple[Signal, Signal, Value]:
        """The R channel on a read port's ``data``, ``ARREADY`` also under ``allowed``;
        returns (the word to read, the beats left, whether to read it: the caller drives
        the port's address and enable)."""
        word = Signal(range(self._mem_bytes // self._bus_bytes))
        left = Signal(BEATS_SHAPE)  # beats still to read from the memory
        # The memory's output register is the R channel's data register: the port
        # reads the next beat whenever the current one is not stalled.
        advance = ~self.s_axi_rvalid | self.s_axi_rready
        ready = (left == 0) & ~self.s_axi_rvalid
        m.d.comb += [self.s_axi_rdata.eq(data), self.s_axi_arready.eq(ready if allowed is None else ready & allowed),
                     self.s_axi_rid.eq(0), self.s_axi_rresp.eq(0)]
        with m.If(advance):
            m.d.sync += [self.s_axi_rvalid.eq(left != 0), self.s_axi_rlast.eq(left == 1)]
            with m.If(left != 0):
                m.d.sync += [word.eq(word + 1), left.eq(left - 1)]
        with m.If(self.s_axi_arvalid & self.s_axi_arready):
            m.d.sync += [word.eq(self._word(self.s_axi_araddr)), left.eq(self.s_axi_arlen + 1)]
        return word, left, advance

    def _write(self, m: Module, port: WritePort, active: Signal, allowed: Value | None = None) -> Signal:
        """The AW, W and B channels on ``port`` (its address too, with two ports),
        ``AWREADY`` also under ``allowed``; ``active`` is high in a burst's data phase.
        Returns the word the next beat writes."""
        word = Signal(range(self._mem_bytes // self._bus_bytes))
        ready = ~active & ~self.s_axi_bvalid
        m.d.comb += [self.s_axi_awready.eq(ready if allowed is None else ready & allowed),
                     # (two ports: a byte written by the bridge takes the write port)
                     self.s_axi_wready.eq(active if self.single_port else active & ~self.byte.w_en),
                     self.s_axi_bid.eq(0), self.s_axi_bresp.eq(0)]
        with m.If(self.s_axi_awvalid & self.s_axi_awready):
            m.d.sync += [word.eq(self._word(self.s_axi_awaddr)), active.eq(1)]
        with m.If(self.s_axi_wvalid & self.s_axi_wready):
            if not self.single_port:  # (one port: one address for every access, the caller's)
                m.d.comb += port.addr.eq(word)
            m.d.comb += [port.data.eq(self.s_axi_wdata), port.en.eq(self.s_axi_wstrb)]
            m.d.sync += word.eq(word + 1)
            with m.If(self.s_axi_wlast):
                m.d.sync += [active.eq(0), self.s_axi_bvalid.eq(1)]
        with m.If(self.s_axi_bvalid & self.s_axi_bready):
            m.d.sync += self.s_axi_bvalid.eq(0)
        return word

    def _byte_lane(self, m: Module, data: Value) -> tuple[Value, Value]:
        """(the byte port's lane in a word now, the byte of ``data`` at its lane of the
        cycle before: a read port's output)."""
        low = self._bus_bytes.bit_length() - 1
        if not low:  # a byte-wide bus: the word is the byte
            return Const(0, 1), data
        lane = self.byte.addr[:low]
        lane_read = Signal.like(lane)
        m.d.sync += lane_read.eq(lane)
        return lane, data.word_select(lane_read, 8)

    def _byte_write(self, m: Module, write: WritePort, lane: Value) -> None:
        """Write the byte port's byte into its lane (the address is the caller's)."""
        m.d.comb += [write.data.eq(self.byte.w_data.replicate(self._bus_bytes)),
                     write.en.eq((Const(1, self._bus_bytes) << lane)[:self._bus_bytes])]

    def _byte_port(self, m: Module, write: WritePort, read: ReadPort) -> None:
        low = self._bus_bytes.bit_length() - 1
        m.d.comb += [read.addr.eq(self.byte.addr[low:]), self.byte.ready.eq(1)]
        lane, byte = self._byte_lane(m, read.data)
        m.d.comb += self.byte.r_data.eq(byte)
        with m.If(self.byte.w_en):
            m.d.comb += write.addr.eq(self.byte.addr[low:])
            self._byte_write(m, write, lane)

"""DMA engines: 2-D strided copies between DRAM bursts and one on-chip buffer.

:class:`DmaReader` executes a LOAD's data movement (docs/ISA.md §3): row by row, zero
elements for the padding (-128 in every byte with ``pad_min``; one buffer write per cycle),
DRAM rows read in bursts of at most ``max_burst`` beats and written one element per cycle as
they arrive.
:class:`DmaWriter` executes a STORE: buffer elements read ahead so that a beat leaves
every cycle the bus accepts one.  Both take their fields when ``start`` pulses and
pulse ``done`` when finished.  Elements are ``elem_bits`` wide, DRAM beats
``bus_bits``: an element spans whole beats, or a beat holds several elements.  A row
of elements narrower than a beat may start and end inside a beat: the reader skips the
bytes outside the row, the writer leaves them alone with AXI write strobes.  Either
way one element moves per cycle, so such a burst holds the bus one cycle per element.

A reader may also take elements of several widths (``DmaReader((32, 128), …)``), one
chosen per instruction by its ``sel`` input: a module whose LOADs fill buffers of
different widths then needs one engine instead of one per buffer
(:class:`DmaReaders`).  A module runs one instruction at a time, so the shared engine
moves the same beats as the separate ones would.

The field widths are the memory instruction's (:data:`openvta.isa.encoding.MEM_FIELDS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amaranth import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from openvta.isa import INT8_MIN, MemoryType
from openvta.isa.config import SRAM_BASE_WIDTH
from openvta.isa.encoding import MEM_FIELDS
from openvta.isa.timing import AXI_MAX_BURST_BEATS

from .memory import ADDR_WIDTH, BEATS_SHAPE, mem_port
from .memory import burst_beats as next_burst
from .fields import Decoded
from .params import check_bus_bits, refusing

__all__ = ["DmaReader", "DmaReaders", "DmaWriter", "READ_FIELDS", "WRITE_FIELDS", "dma_fields"]

#: The memory instruction's fields a DMA engine takes, with their widths.
_FIELDS = {name: width for name, width, _ in MEM_FIELDS if name != "memory_type"}
#: The fields of a LOAD (all of them) and of a STORE (no padding).
READ_FIELDS = tuple(_FIELDS)
WRITE_FIELDS = tuple(name for name in _FIELDS if "pad" not in name)


def _check(elem_bits: int, bus_bits: int, max_burst: int) -> None:
    if not isinstance(elem_bits, int) or isinstance(elem_bits, bool) or elem_bits < 8 \
            or elem_bits & (elem_bits - 1):
        raise ValueError(f"DMA element width must be a power of two of at least 8 bits, "
                         f"not {elem_bits!r}")
    check_bus_bits(bus_bits, "DMA bus width")
    if not isinstance(max_burst, int) or not 1 <= max_burst <= AXI_MAX_BURST_BEATS:
        raise ValueError(f"DMA burst length must be 1..{AXI_MAX_BURST_BEATS} beats, "
                         f"not {max_burst!r}")


def _widths(elem_bits: int | Sequence[int], bus_bits: int, max_burst: int) -> tuple[int, ...]:
    """The distinct element widths of ``elem_bits`` (one, or a sequence), checked, in
    increasing order."""
    widths = tuple(elem_bits) if isinstance(elem_bits, (tuple, list)) else (elem_bits,)
    if not widths:
        raise ValueError("a DMA engine needs at least one element width")
    for width in widths:
        _check(width, bus_bits, max_burst)
    return tuple(sorted(set(widths)))


def _row_beats_shape(elem_bits: int, bus_bits: int) -> range:
    """Beats of the longest row (``x_size`` elements, starting anywhere in a beat)."""
    elems_per_beat = max(1, bus_bits // elem_bits)
    row_bits = (elems_per_beat - 1 + (1 << _FIELDS["x_size"]) - 1) * elem_bits
    return range(-(-row_bits // bus_bits) + 1)


class _Dma(wiring.Component):
    """What both engines share: parameters, geometry, the first beat of a row.

    ``widths`` are the element widths the engine takes, in bits (checked, distinct, in
    increasing order: :func:`_widths`); with more than one, the ``sel`` input
    (``range(len(self.widths))``) names the current one.  ``elem_bits``, ``beats_per_elem``
    and ``elems_per_beat`` are the widest's, the widest's and the narrowest's: the
    registers' sizes.
    """

    @refusing
    def __init__(self, widths: tuple[int, ...], bus_bits: int, max_burst: int,
                 members: dict[str, wiring.Member]) -> None:
        self.widths = widths
        self.elem_bits, self.bus_bits, self.max_burst = self.widths[-1], bus_bits, max_burst
        self.e_bytes, self.b_bytes = self.elem_bits // 8, bus_bits // 8
        self.beats_per_elem = max(1, self.elem_bits // bus_bits)
        self.elems_per_beat = max(1, bus_bits // self.widths[0])
        members.update({"start": In(1), "busy": Out(1), "done": Out(1), "waiting": Out(1),
                         "mem": Out(mem_port(bus_bits))})
        if len(self.widths) > 1:
            members["sel"] = In(range(len(self.widths)))
        super().__init__(members)

    def _pick(self, values: Sequence[Any]) -> Any:
        """``values[i]`` for the selected width ``widths[i]``: a Python value when all agree."""
        if len(self.widths) == 1 or all(isinstance(v, int) and v == values[0] for v in values):
            return values[0]
        result = values[-1]
        for i in reversed(range(len(values) - 1)):
            result = Mux(self.sel == i, values[i], result)
        return result

    def _row_start(self, row_elem: Signal, x_size: Value) -> tuple[Value, Value | int, Value]:
        """(aligned burst address, first slot, beats) of a row of ``x_size`` elements at
        DRAM element ``row_elem``."""
        starts = [self._row_start_of(elem_bits, row_elem, x_size) for elem_bits in self.widths]
        addr, first_slot, beats = (self._pick([start[k] for start in starts]) for k in range(3))
        return addr, first_slot, beats

    def _row_start_of(self, elem_bits: int, row_elem: Signal, x_size: Value) -> tuple[Value, Value | int, Value]:
        e_bytes = elem_bits // 8
        log_e, log_b = e_bytes.bit_length() - 1, self.b_bytes.bit_length() - 1
        byte_addr = (row_elem << log_e)[:ADDR_WIDTH]
        if elem_bits >= self.bus_bits:  # elements are whole beats, so rows are beat-aligned
            return byte_addr, 0, (x_size << log_e) >> log_b
        first_slot = byte_addr[log_e:log_b]
        beats = (((first_slot + x_size) << log_e) + self.b_bytes - 1) >> log_b
        return Cat(Const(0, log_b), byte_addr[log_b:]), first_slot, beats


class DmaReader(_Dma):
    """LOAD data movement into a buffer write port (``wr_*``).

    ``elem_bits`` is one element width, or several (a sequence): then ``sel`` chooses
    the width of each LOAD (``widths[sel]``, the distinct widths in increasing order),
    held from ``start`` to ``done``, and an element narrower than ``wr_data`` is written
    in its low bits.

    The write port is registered: an element is written the cycle after it arrives, so
    the buffer's write data does not hang off the bus handshake and the arbiter (on the
    ECP5 that was `small`'s critical path).  ``done`` still pulses after the last write.
    """

    @refusing
    def __init__(self, elem_bits: int | Sequence[int], bus_bits: int, max_burst: int) -> None:
        widths = _widths(elem_bits, bus_bits, max_burst)
        members: dict[str, wiring.Member] = {name: In(_FIELDS[name]) for name in READ_FIELDS}
        members.update({"wr_en": Out(1), "wr_addr": Out(SRAM_BASE_WIDTH),
                        "wr_data": Out(widths[-1])})
        super().__init__(widths, bus_bits, max_burst, members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        f = {name: Signal(width, name=f"f_{name}") for name, width in _FIELDS.items()}
        pad_max = (1 << _FIELDS["y_pad_0"]) - 1
        width_max = 2 * ((1 << _FIELDS["x_pad_0"]) - 1) + (1 << _FIELDS["x_size"]) - 1
        row = Signal(range(2 * pad_max + (1 << _FIELDS["y_size"])))
        sram = Signal(SRAM_BASE_WIDTH)
        zeros = Signal(range(width_max + 1))  # zero elements left to write in the current run
        data_left = Signal(_FIELDS["x_size"])  # data elements left in the current row
        row_elem = Signal(_FIELDS["dram_base"])  # DRAM element address of the current data row
        beats_left = Signal(range(max(_row_beats_shape(w, self.bus_bits).stop  # not yet requested
                                      for w in self.widths)))
        burst_addr = Signal(ADDR_WIDTH)
        slot = Signal(range(self.elems_per_beat + 1))
        part = Signal(range(self.beats_per_elem + 1))
        shift = Signal(self.elem_bits)
        after = Signal()  # zeros written after the data (x_pad_1) rather than before
        rows = f["y_pad_0"] + f["y_size"] + f["y_pad_1"]
        width = f["x_pad_0"] + f["x_size"] + f["x_pad_1"]
        wr_en, wr_data = Signal(), Signal(self.elem_bits)  # registered into the write port
        pad_min = self._pick([int.from_bytes(bytes([INT8_MIN & 0xFF]) * (w // 8), "little") for w in self.widths])
        m.d.sync += [self.wr_en.eq(wr_en), self.wr_data.eq(wr_data), self.wr_addr.eq(sram)]
        m.d.comb += self.busy.eq(1)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.busy.eq(self.start)
                with m.If(self.start):
                    m.d.sync += [f[n].eq(getattr(self, n)) for n in READ_FIELDS]
                    m.d.sync += [row.eq(0), sram.eq(self.sram_base), row_elem.eq(self.dram_base)]
                    m.next = "ROW"
            with m.State("ROW"):
                with m.If(row == rows):
                    m.d.comb += self.done.eq(1)
                    m.next = "IDLE"
                with m.Elif((row < f["y_pad_0"]) | (row >= f["y_pad_0"] + f["y_size"])):
                    m.d.sync += [zeros.eq(width), after.eq(1)]
                    m.next = "ZEROS"
                with m.Else():
                    addr, first_slot, beats = self._row_start(row_elem, f["x_size"])
                    m.d.sync += [zeros.eq(f["x_pad_0"]), after.eq(0), data_left.eq(f["x_size"]),
                                 burst_addr.eq(addr), beats_left.eq(beats), slot.eq(first_slot),
                                 part.eq(0)]
                    m.next = "ZEROS"
            with m.State("ZEROS"):
                with m.If(zeros != 0):  # (-128 in every byte with pad_min: a LOAD INP's, §3)
                    m.d.comb += [wr_en.eq(1), wr_data.eq(Mux(f["pad_min"], pad_min, 0))]
                    m.d.sync += [zeros.eq(zeros - 1), sram.eq(sram + 1)]
                with m.Elif(after):
                    m.d.sync += [row.eq(row + 1)]
                    m.next = "ROW"
                with m.Else():
                    m.next = "REQ"
            with m.State("REQ"):
                beats = next_burst(burst_addr, beats_left, self.max_burst, self.b_bytes)
                m.d.comb += [self.mem.rreq.valid.eq(1), self.mem.rreq.payload.addr.eq(burst_addr),
                             self.mem.rreq.payload.beats.eq(beats), self.waiting.eq(1)]
                with m.If(self.mem.rreq.ready):
                    m.d.sync += [beats_left.eq(beats_left - beats),
                                 burst_addr.eq(burst_addr + beats * self.b_bytes)]
                    m.next = "DATA"
            with m.State("DATA"):
                self._receive(m, data_left, sram, slot, part, shift, wr_en, wr_data)
                m.d.comb += self.waiting.eq(~self.mem.rdata.valid)
                with m.If(self.mem.rdata.valid & self.mem.rdata.ready & self.mem.rdata.payload.last):
                    with m.If(beats_left == 0):
                        m.d.sync += [zeros.eq(f["x_pad_1"]), after.eq(1),
                                     row_elem.eq(row_elem + f["x_stride"])]
                        m.next = "ZEROS"
                    with m.Else():
                        m.next = "REQ"
        return m

    def _receive(self, m: Module, data_left: Signal, sram: Signal, slot: Signal, part: Signal,
                 shift: Signal, wr_en: Signal, wr_data: Signal) -> None:
        """The DATA state's buffer writes: several elements per beat for the widths
        narrower than a beat, one element per beat or per several for the others."""
        narrow = [elem_bits < self.bus_bits for elem_bits in self.widths]
        if all(narrow):
            self._receive_narrow(m, data_left, sram, slot, wr_en, wr_data)
        elif not any(narrow):
            self._receive_wide(m, data_left, sram, part, shift, wr_en, wr_data)
        else:
            with m.If(self._pick([int(n) for n in narrow])):
                self._receive_narrow(m, data_left, sram, slot, wr_en, wr_data)
            with m.Else():
                self._receive_wide(m, data_left, sram, part, shift, wr_en, wr_data)

    def _receive_narrow(self, m: Module, data_left: Signal, sram: Signal, slot: Signal,
                        wr_en: Signal, wr_data: Signal) -> None:
        # several elements per beat: write them one per cycle, then take the next beat
        beat = self.mem.rdata.payload.data
        per_beat = self._pick([max(1, self.bus_bits // w) for w in self.widths])
        element = self._pick([beat.word_select(slot, w) if w < self.bus_bits else beat
                              for w in self.widths])
        last_slot = (slot == per_beat - 1) | (data_left == 1)
        with m.If(self.mem.rdata.valid):
            with m.If(data_left != 0):
                m.d.comb += [wr_en.eq(1), wr_data.eq(element)]
                m.d.sync += [data_left.eq(data_left - 1), sram.eq(sram + 1), slot.eq(slot + 1)]
            m.d.comb += self.mem.rdata.ready.eq(last_slot | (data_left == 0))
            with m.If(self.mem.rdata.ready):
                m.d.sync += slot.eq(0)

    def _receive_wide(self, m: Module, data_left: Signal, sram: Signal, part: Signal,
                      shift: Signal, wr_en: Signal, wr_data: Signal) -> None:
        # an element is one beat or several: write it when its last beat arrives
        beat = self.mem.rdata.payload.data
        m.d.comb += self.mem.rdata.ready.eq(1)
        element = Cat(shift[self.bus_bits:], beat) if self.beats_per_elem > 1 else beat
        per_elem = self._pick([max(1, w // self.bus_bits) for w in self.widths])
        # a narrower element's beats are the last ones shifted in: the element's top bits
        last = self._pick([element if w >= len(element) else element[len(element) - w:]
                           for w in self.widths])
        with m.If(self.mem.rdata.valid):
            m.d.sync += shift.eq(element)
            with m.If(part == per_elem - 1):
                m.d.sync += part.eq(0)
                with m.If(data_left != 0):
                    m.d.comb += [wr_en.eq(1), wr_data.eq(last)]
                    m.d.sync += [data_left.eq(data_left - 1), sram.eq(sram + 1)]
            with m.Else():
                m.d.sync += part.eq(part + 1)


class DmaWriter(_Dma):
    """STORE data movement from a buffer read port (``rd_*``, one cycle latency).

    An element wider than a beat leaves in ``elem_bits / bus_bits`` consecutive beats.
    Elements narrower than a beat are gathered, one per cycle, into the beat that holds
    them; the beat leaves with the cycle of its last element, its strobes set for the
    bytes of this row only (a row may start and end inside a beat).

    With ``stream=True`` (machine v2's store, which also drains the accumulator through
    :class:`~.drain.DrainUnit`) the writer has two more members: ``rd_valid`` (in) says
    whether ``rd_data`` holds the next element yet, and ``rd_next`` (out) pulses when that
    element has been taken (the head of a stream is popped).  A beat waits for its
    element; ``rd_en``/``rd_addr`` still read the buffer as without it, and
    ``rd_valid`` held high gives the same beats as a writer built without ``stream``.
    """

    @refusing
    def __init__(self, elem_bits: int, bus_bits: int, max_burst: int, stream: bool = False) -> None:
        _check(elem_bits, bus_bits, max_burst)
        members: dict[str, wiring.Member] = {name: In(_FIELDS[name]) for name in WRITE_FIELDS}
        members.update({"rd_en": Out(1), "rd_addr": Out(SRAM_BASE_WIDTH),
                        "rd_data": In(elem_bits)})
        self.stream = bool(stream)
        if self.stream:
            members.update({"rd_valid": In(1), "rd_next": Out(1)})
        super().__init__((elem_bits,), bus_bits, max_burst, members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        y_size, x_size = Signal(_FIELDS["y_size"]), Signal(_FIELDS["x_size"])
        x_stride = Signal(_FIELDS["x_stride"])
        row = Signal(_FIELDS["y_size"])
        row_elem = Signal(_FIELDS["dram_base"])
        idx = Signal(SRAM_BASE_WIDTH)  # buffer index of the element in rd_data
        left = Signal(_FIELDS["x_size"])  # elements of the row not yet sent
        beats_left = Signal(_row_beats_shape(self.elem_bits, self.bus_bits))  # not yet requested
        burst_left = Signal(BEATS_SHAPE)  # beats of the current burst not yet sent
        slot = Signal(range(self.elems_per_beat + 1))
        part = Signal(range(self.beats_per_elem + 1))
        addr = Signal(ADDR_WIDTH)
        m.d.comb += [self.busy.eq(1), self.rd_addr.eq(idx)]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.busy.eq(self.start)
                with m.If(self.start):
                    m.d.sync += [y_size.eq(self.y_size), x_size.eq(self.x_size),
                                 x_stride.eq(self.x_stride), row.eq(0), idx.eq(self.sram_base),
                                 row_elem.eq(self.dram_base)]
                    m.next = "ROW"
            with m.State("ROW"):
                with m.If(row == y_size):
                    m.d.comb += self.done.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += self.rd_en.eq(1)  # the row's first element arrives next cycle
                    start, first_slot, beats = self._row_start(row_elem, x_size)
                    m.d.sync += [addr.eq(start), slot.eq(first_slot), part.eq(0),
                                 left.eq(x_size), beats_left.eq(beats)]
                    m.next = "REQ"
            with m.State("REQ"):
                beats = next_burst(addr, beats_left, self.max_burst, self.b_bytes)
                m.d.comb += [self.mem.wreq.valid.eq(1), self.mem.wreq.payload.addr.eq(addr),
                             self.mem.wreq.payload.beats.eq(beats), self.waiting.eq(1)]
                with m.If(self.mem.wreq.ready):
                    m.d.sync += [burst_left.eq(beats), beats_left.eq(beats_left - beats),
                                 addr.eq(addr + beats * self.b_bytes)]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += self.mem.wdata.payload.last.eq(burst_left == 1)
                sent = self._send(m, idx, left, slot, part)
                with m.If(sent):
                    m.d.sync += burst_left.eq(burst_left - 1)
                    with m.If(burst_left == 1):
                        m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += self.waiting.eq(1)
                with m.If(self.mem.wresp.valid):
                    with m.If(beats_left == 0):
                        m.d.sync += [row.eq(row + 1), row_elem.eq(row_elem + x_stride)]
                        m.next = "ROW"
                    with m.Else():
                        m.next = "REQ"
        return m

    def _next_element(self, m: Module, idx: Signal, left: Signal) -> None:
        """Read the next element now, so that it is in ``rd_data`` next cycle."""
        m.d.comb += [self.rd_en.eq(1), self.rd_addr.eq(idx + 1)]
        m.d.sync += [idx.eq(idx + 1), left.eq(left - 1)]
        if self.stream:
            m.d.comb += self.rd_next.eq(1)

    def _send(self, m: Module, idx: Signal, left: Signal, slot: Signal, part: Signal) -> Signal:
        """The DATA state's beats; returns the signal that is high when a beat is accepted."""
        sent = Signal()
        if self.elems_per_beat == 1:
            m.d.comb += [self.mem.wdata.payload.strb.eq(-1),
                         self.mem.wdata.payload.data.eq(self.rd_data.word_select(part, self.bus_bits))]
            if self.stream:  # the beat waits for its element
                m.d.comb += [self.mem.wdata.valid.eq(self.rd_valid), sent.eq(self.rd_valid & self.mem.wdata.ready),
                             self.waiting.eq(self.rd_valid & ~self.mem.wdata.ready)]
            else:
                m.d.comb += [self.mem.wdata.valid.eq(1), sent.eq(self.mem.wdata.ready),
                             self.waiting.eq(~self.mem.wdata.ready)]
            with m.If(sent):
                with m.If(part == self.beats_per_elem - 1):
                    self._next_element(m, idx, left)
                    m.d.sync += part.eq(0)
                with m.Else():
                    m.d.sync += part.eq(part + 1)
            return sent
        gathered = Signal(self.bus_bits)  # the beat's earlier elements
        gathered_strb = Signal(self.b_bytes)
        lane, lane_strb = Signal(self.bus_bits), Signal(self.b_bytes)
        m.d.comb += [lane.word_select(slot, self.elem_bits).eq(self.rd_data),
                     lane_strb.word_select(slot, self.e_bytes).eq((1 << self.e_bytes) - 1)]
        beat, strb = gathered | lane, gathered_strb | lane_strb
        complete = (slot == self.elems_per_beat - 1) | (left == 1)
        if self.stream:  # nothing moves until the element is there
            complete = complete & self.rd_valid
        m.d.comb += [self.mem.wdata.payload.data.eq(beat), self.mem.wdata.payload.strb.eq(strb),
                     self.mem.wdata.valid.eq(complete), sent.eq(complete & self.mem.wdata.ready)]
        gather = ~complete & self.rd_valid if self.stream else ~complete
        with m.If(gather):
            self._next_element(m, idx, left)
            m.d.sync += [gathered.eq(beat), gathered_strb.eq(strb), slot.eq(slot + 1)]
        with m.Elif(sent):
            self._next_element(m, idx, left)
            m.d.sync += [gathered.eq(0), gathered_strb.eq(0), slot.eq(0)]
        if self.stream:
            with m.Elif(complete):  # the element is there, the bus is not ready
                m.d.comb += self.waiting.eq(1)
        else:
            with m.Else():
                m.d.comb += self.waiting.eq(1)
        return sent


def dma_fields(m: Module, dma: _Dma, insn: Decoded, names: tuple[str, ...]) -> None:
    """Drive a DMA engine's field inputs from the latched instruction."""
    for name in names:
        m.d.comb += getattr(dma, name).eq(insn.mem(name))


class DmaReaders:
    """A module's LOAD engines, by memory type: one :class:`DmaReader` each, or with
    ``shared`` one reader of all their widths, its width chosen by the LOAD's memory type.

    A module runs one instruction at a time, so the shared reader moves the same beats as
    the separate ones: it saves the engines (and the arbiter's masters).  The cycles are
    the same too, but for a tie at the arbiter: its round-robin goes by module then, as
    the cycle model's does, rather than by buffer (docs/DECISIONS.md).  The module
    declares :meth:`members` (its burst ports: ``<type>_mem`` each, or one ``dma_mem``),
    calls :meth:`elaborate_into` once and :meth:`start` in its ``execute``, and writes
    each type's buffer from :meth:`write`.
    """

    def __init__(self, widths: dict[MemoryType, int], bus_bits: int, max_burst: int,
                 shared: bool = False) -> None:
        self.widths = dict(widths)
        self.shared = bool(shared) and len(widths) > 1
        if self.shared:
            engine = DmaReader(tuple(widths.values()), bus_bits, max_burst)
            self.engines = {"dma_reader": engine}
            self._of = dict.fromkeys(widths, engine)
            self._ports = ["dma_mem"]
        else:
            self.engines = {f"dma_{mt.name.lower()}": DmaReader(w, bus_bits, max_burst)
                            for mt, w in widths.items()}
            self._of = {mt: self.engines[f"dma_{mt.name.lower()}"] for mt in widths}
            self._ports = [f"{mt.name.lower()}_mem" for mt in widths]
        self.bus_bits = bus_bits

    def port_names(self) -> list[str]:
        """The burst ports' member names, in the arbiter's order."""
        return list(self._ports)

    def members(self) -> dict[str, wiring.Member]:
        return {name: Out(mem_port(self.bus_bits)) for name in self.port_names()}

    def elaborate_into(self, m: Module, unit: wiring.Component) -> Value:
        """Add the engines to ``m`` on ``unit``'s burst ports; returns "waiting for memory"."""
        waiting: Value = Const(0)
        for (name, engine), port in zip(self.engines.items(), self.port_names()):
            m.submodules[name] = engine
            wiring.connect(m, wiring.flipped(getattr(unit, port)), engine.mem)
            waiting = waiting | engine.waiting
        return waiting

    def start(self, m: Module, insn: Decoded, go: Value) -> Value:
        """Start the LOAD ``insn`` where ``go`` is high (on its first cycle, a LOAD of one
        of these memory types with elements to move); returns its done signal."""
        mt = insn.mem("memory_type")
        done: Value = Const(0)
        for engine in self.engines.values():
            dma_fields(m, engine, insn, READ_FIELDS)
            mine = [t for t, e in self._of.items() if e is engine]
            m.d.comb += engine.start.eq(go & Cat(*(mt == t for t in mine)).any())
            if len(engine.widths) > 1:
                sel: Value = Const(0)
                for t in mine:
                    sel = Mux(mt == t, engine.widths.index(self.widths[t]), sel)
                m.d.comb += engine.sel.eq(sel)
            done = done | engine.done
        return done

    def write(self, mt: MemoryType, insn: Decoded) -> tuple[Value, Value, Value]:
        """(enable, address, data) of ``mt``'s buffer writes; ``insn`` is the module's
        instruction register (a shared reader's writes are its memory type's)."""
        engine, width = self._of[mt], self.widths[mt]
        data = engine.wr_data if len(engine.wr_data) == width else engine.wr_data[:width]
        enable = engine.wr_en & (insn.mem("memory_type") == mt) if self.shared else engine.wr_en
        return enable, engine.wr_addr, data

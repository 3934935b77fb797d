"""DMA engines: 2-D strided copies between DRAM bursts and one on-chip buffer.

:class:`DmaReader` executes a LOAD's data movement (ISA.md §3): row by row, zero
elements for the padding (one buffer write per cycle), DRAM rows read in bursts of at
most ``max_burst`` beats and written one element per cycle as they arrive.
:class:`DmaWriter` executes a STORE: buffer elements read ahead so that a beat leaves
every cycle the bus accepts one.  Both take their fields when ``start`` pulses and
pulse ``done`` when finished.  Elements are ``elem_bits`` wide, DRAM beats
``bus_bits``; an element spans whole beats, or (micro-ops on a wide bus) a beat holds
several elements.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .memory import burst_beats as next_burst
from .memory import mem_port

__all__ = ["DmaReader", "DmaWriter"]

_FIELDS = {"sram_base": 16, "dram_base": 32, "y_size": 16, "x_size": 16, "x_stride": 16,
           "y_pad_0": 4, "y_pad_1": 4, "x_pad_0": 4, "x_pad_1": 4}


def _check(elem_bits: int, bus_bits: int, max_burst: int) -> None:
    for name, value in (("element width", elem_bits), ("bus width", bus_bits)):
        if value < 8 or value & (value - 1):
            raise ValueError(f"DMA {name} must be a power of two of at least 8 bits, not {value!r}")
    if not 1 <= max_burst <= 256:
        raise ValueError(f"DMA burst length must be 1..256 beats, not {max_burst!r}")


class DmaReader(wiring.Component):
    """LOAD data movement into a buffer write port (``wr_*``)."""

    def __init__(self, elem_bits: int, bus_bits: int, max_burst: int) -> None:
        _check(elem_bits, bus_bits, max_burst)
        self.elem_bits, self.bus_bits, self.max_burst = elem_bits, bus_bits, max_burst
        members = {name: In(width) for name, width in _FIELDS.items()}
        members.update({
            "start": In(1), "busy": Out(1), "done": Out(1), "waiting": Out(1),
            "wr_en": Out(1), "wr_addr": Out(16), "wr_data": Out(elem_bits),
            "mem": Out(mem_port(bus_bits)),
        })
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        e_bits, b_bits = self.elem_bits, self.bus_bits
        e_bytes, b_bytes = e_bits // 8, b_bits // 8
        beats_per_elem = max(1, e_bits // b_bits)
        elems_per_beat = max(1, b_bits // e_bits)
        f = {name: Signal(width, name=f"f_{name}") for name, width in _FIELDS.items()}
        row = Signal(17)
        sram = Signal(16)
        zeros = Signal(17)  # zero elements left to write in the current run
        data_left = Signal(16)  # data elements left in the current row
        row_elem = Signal(32)  # DRAM element address of the current data row
        beats_left = Signal(24)  # beats left to request in the row
        burst_addr = Signal(32)
        burst_beats = Signal(9)
        slot = Signal(range(elems_per_beat + 1))
        part = Signal(range(beats_per_elem + 1))
        shift = Signal(e_bits)
        after = Signal()  # zeros written after the data (x_pad_1) rather than before
        rows = f["y_pad_0"] + f["y_size"] + f["y_pad_1"]
        width = f["x_pad_0"] + f["x_size"] + f["x_pad_1"]
        m.d.comb += [self.wr_addr.eq(sram), self.busy.eq(1)]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.busy.eq(self.start)
                with m.If(self.start):
                    m.d.sync += [f[n].eq(getattr(self, n)) for n in _FIELDS]
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
                    byte_addr = row_elem * e_bytes
                    first_slot = (byte_addr % b_bytes) // e_bytes if elems_per_beat > 1 else 0
                    total = (first_slot + f["x_size"]) * e_bytes
                    m.d.sync += [zeros.eq(f["x_pad_0"]), after.eq(0), data_left.eq(f["x_size"]),
                                 burst_addr.eq(byte_addr - (byte_addr % b_bytes)),
                                 beats_left.eq((total + b_bytes - 1) // b_bytes),
                                 slot.eq(first_slot), part.eq(0)]
                    m.next = "ZEROS"
            with m.State("ZEROS"):
                with m.If(zeros != 0):
                    m.d.comb += [self.wr_en.eq(1), self.wr_data.eq(0)]
                    m.d.sync += [zeros.eq(zeros - 1), sram.eq(sram + 1)]
                with m.Elif(after):
                    m.d.sync += [row.eq(row + 1)]
                    m.next = "ROW"
                with m.Else():
                    m.next = "REQ"
            with m.State("REQ"):
                beats = next_burst(burst_addr, beats_left, self.max_burst, b_bytes)
                m.d.comb += [self.mem.rreq_valid.eq(1), self.mem.rreq_addr.eq(burst_addr),
                             self.mem.rreq_beats.eq(beats), self.waiting.eq(1)]
                with m.If(self.mem.rreq_ready):
                    m.d.sync += [burst_beats.eq(beats), beats_left.eq(beats_left - beats),
                                 burst_addr.eq(burst_addr + beats * b_bytes)]
                    m.next = "DATA"
            with m.State("DATA"):
                self._receive(m, data_left, sram, slot, part, shift, elems_per_beat, beats_per_elem)
                m.d.comb += self.waiting.eq(~self.mem.rdata_valid)
                with m.If(self.mem.rdata_valid & self.mem.rdata_ready & self.mem.rdata_last):
                    with m.If(beats_left == 0):
                        m.d.sync += [zeros.eq(f["x_pad_1"]), after.eq(1),
                                     row_elem.eq(row_elem + f["x_stride"])]
                        m.next = "ZEROS"
                    with m.Else():
                        m.next = "REQ"
        return m

    def _receive(self, m: Module, data_left: Signal, sram: Signal, slot: Signal, part: Signal,
                 shift: Signal, elems_per_beat: int, beats_per_elem: int) -> None:
        beat = self.mem.rdata
        if elems_per_beat > 1:
            # several elements per beat: write them one per cycle, then take the next beat
            last_slot = (slot == elems_per_beat - 1) | (data_left == 1)
            with m.If(self.mem.rdata_valid):
                with m.If(data_left != 0):
                    m.d.comb += [self.wr_en.eq(1), self.wr_data.eq(beat.word_select(slot, self.elem_bits))]
                    m.d.sync += [data_left.eq(data_left - 1), sram.eq(sram + 1), slot.eq(slot + 1)]
                m.d.comb += self.mem.rdata_ready.eq(last_slot | (data_left == 0))
                with m.If(self.mem.rdata_ready):
                    m.d.sync += slot.eq(0)
        else:
            m.d.comb += self.mem.rdata_ready.eq(1)
            element = Cat(shift[self.bus_bits:], beat) if beats_per_elem > 1 else beat
            with m.If(self.mem.rdata_valid):
                m.d.sync += shift.eq(element)
                with m.If(part == beats_per_elem - 1):
                    m.d.sync += part.eq(0)
                    with m.If(data_left != 0):
                        m.d.comb += [self.wr_en.eq(1), self.wr_data.eq(element)]
                        m.d.sync += [data_left.eq(data_left - 1), sram.eq(sram + 1)]
                with m.Else():
                    m.d.sync += part.eq(part + 1)


class DmaWriter(wiring.Component):
    """STORE data movement from a buffer read port (``rd_*``, one cycle latency)."""

    def __init__(self, elem_bits: int, bus_bits: int, max_burst: int) -> None:
        _check(elem_bits, bus_bits, max_burst)
        if elem_bits < bus_bits:
            raise ValueError("a STORE element must span whole bus beats "
                             f"({elem_bits} bits on a {bus_bits}-bit bus)")
        self.elem_bits, self.bus_bits, self.max_burst = elem_bits, bus_bits, max_burst
        members = {n: In(_FIELDS[n]) for n in ("sram_base", "dram_base", "y_size", "x_size", "x_stride")}
        members.update({
            "start": In(1), "busy": Out(1), "done": Out(1), "waiting": Out(1),
            "rd_en": Out(1), "rd_addr": Out(16), "rd_data": In(elem_bits),
            "mem": Out(mem_port(bus_bits)),
        })
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        b_bytes = self.bus_bits // 8
        beats_per_elem = self.elem_bits // self.bus_bits
        e_bytes = self.elem_bits // 8
        y_size, x_size, x_stride = Signal(16), Signal(16), Signal(16)
        row = Signal(16)
        row_elem = Signal(32)
        idx = Signal(16)  # buffer index of the element in rd_data
        beats_left = Signal(24)  # beats of the row not yet requested
        burst_left = Signal(9)  # beats of the current burst not yet sent
        beat = Signal(range(beats_per_elem + 1))
        addr = Signal(32)
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
                    m.d.sync += [addr.eq(row_elem * e_bytes), beat.eq(0),
                                 beats_left.eq(x_size * beats_per_elem)]
                    m.next = "REQ"
            with m.State("REQ"):
                beats = next_burst(addr, beats_left, self.max_burst, b_bytes)
                m.d.comb += [self.mem.wreq_valid.eq(1), self.mem.wreq_addr.eq(addr),
                             self.mem.wreq_beats.eq(beats), self.waiting.eq(1)]
                with m.If(self.mem.wreq_ready):
                    m.d.sync += [burst_left.eq(beats), beats_left.eq(beats_left - beats),
                                 addr.eq(addr + beats * b_bytes)]
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [self.mem.wdata_valid.eq(1),
                             self.mem.wdata.eq(self.rd_data.word_select(beat, self.bus_bits)),
                             self.mem.wdata_last.eq(burst_left == 1)]
                with m.If(self.mem.wdata_ready):
                    m.d.sync += burst_left.eq(burst_left - 1)
                    with m.If(beat == beats_per_elem - 1):
                        # fetch the next element now, so it is there for the next beat
                        m.d.comb += [self.rd_en.eq(1), self.rd_addr.eq(idx + 1)]
                        m.d.sync += [beat.eq(0), idx.eq(idx + 1)]
                    with m.Else():
                        m.d.sync += beat.eq(beat + 1)
                    with m.If(burst_left == 1):
                        m.next = "RESP"
                with m.Else():
                    m.d.comb += self.waiting.eq(1)
            with m.State("RESP"):
                m.d.comb += self.waiting.eq(1)
                with m.If(self.mem.wresp_valid):
                    with m.If(beats_left == 0):
                        m.d.sync += [row.eq(row + 1), row_elem.eq(row_elem + x_stride)]
                        m.next = "ROW"
                    with m.Else():
                        m.next = "REQ"
        return m

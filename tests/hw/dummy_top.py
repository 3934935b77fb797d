"""A stand-in for the accelerator top: same ports, trivial behaviour, for testing the harness.

When started it copies the ``insn_count · 16`` bytes at ``insn_addr`` to the bytes
right after them (``insn_addr + insn_count · 16``), one AXI4 read burst into a small
buffer then one write burst out of it, until done; then it raises ``done``.  Bursts
are at most ``max_burst_beats`` beats and never cross a ``max_burst_beats``-beat
boundary on either side, so never a 4 KiB one.  It counts its busy cycles in
``cycles`` and the bytes it moves in ``dram_read_bytes`` / ``dram_write_bytes``; the
other counters read 0.  With ``finish=False`` it copies and then stays busy forever.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.utils import exact_log2

from openvta.hw.cosim.runner import top_members
from openvta.hw.rtl.csr import ControlRegisters, connect_axil
from openvta.isa import INSN_BYTES, Counter
from openvta.isa.counters import HW_COUNTERS

__all__ = ["DummyTop"]


class DummyTop(wiring.Component):
    """Copies the instruction bytes behind themselves over ``m_axi``; see the module docstring.

    Parameters
    ----------
    bus_width : int
        AXI data width in bits, 8 to 128 (a power of two).
    max_burst_beats : int
        longest burst, a power of two from 1 to 256.
    finish : bool
        raise ``done`` after the copy (else stay busy: for cycle-bound tests).
    """

    def __init__(self, bus_width: int = 64, *, max_burst_beats: int = 8, finish: bool = True) -> None:
        if bus_width not in (8, 16, 32, 64, 128):
            raise ValueError(f"bus_width must be a power of two from 8 to 128, not {bus_width!r}")
        if max_burst_beats not in [1 << i for i in range(9)]:
            raise ValueError(f"max_burst_beats must be a power of two up to 256, not {max_burst_beats!r}")
        self.bus_width = bus_width
        self.max_burst_beats = max_burst_beats
        self.finish = finish
        super().__init__(top_members(bus_width))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.csr = csr = ControlRegisters(len(HW_COUNTERS))
        connect_axil(m, self, csr)

        beat_bytes = self.bus_width // 8
        log_beat, log_max = exact_log2(beat_bytes), exact_log2(self.max_burst_beats)
        src, dst = Signal(32), Signal(32)
        beats_left = Signal(33)
        burst, index = Signal(range(self.max_burst_beats + 1)), Signal(range(self.max_burst_beats + 1))
        buffer = Array(Signal(self.bus_width, name=f"buffer{i}") for i in range(self.max_burst_beats))
        cycles, read_bytes, write_bytes = Signal(64), Signal(64), Signal(64)

        def room(addr: Signal) -> Signal:
            """Beats from ``addr`` to the next ``max_burst_beats`` boundary."""
            beats = Signal(range(self.max_burst_beats + 1))
            m.d.comb += beats.eq(self.max_burst_beats - addr[log_beat:log_beat + log_max])
            return beats

        room_src, room_dst = room(src), room(dst)
        room_both = Mux(room_src < room_dst, room_src, room_dst)
        length = Signal.like(burst)
        m.d.comb += length.eq(Mux(beats_left < room_both, beats_left, room_both))

        for counter, value in ((Counter.CYCLES, cycles), (Counter.DRAM_READ_BYTES, read_bytes),
                               (Counter.DRAM_WRITE_BYTES, write_bytes)):
            m.d.comb += csr.counters[HW_COUNTERS.index(counter)].eq(value)
        m.d.comb += [
            self.m_axi_araddr.eq(src), self.m_axi_arlen.eq(length - 1),
            self.m_axi_arsize.eq(log_beat), self.m_axi_arburst.eq(1),
            self.m_axi_awaddr.eq(dst), self.m_axi_awlen.eq(burst - 1),
            self.m_axi_awsize.eq(log_beat), self.m_axi_awburst.eq(1),
            self.m_axi_wdata.eq(buffer[index]), self.m_axi_wstrb.eq((1 << beat_bytes) - 1),
            self.m_axi_wlast.eq(index == burst - 1),
        ]

        insn_bytes = csr.insn_count * INSN_BYTES
        with m.FSM() as fsm:
            for state in ("IDLE", "DONE"):
                with m.State(state):
                    m.d.comb += csr.done.eq(state == "DONE")
                    with m.If(csr.start):
                        m.d.sync += [
                            src.eq(csr.insn_addr), dst.eq(csr.insn_addr + insn_bytes),
                            beats_left.eq(insn_bytes >> log_beat),
                            cycles.eq(0), read_bytes.eq(0), write_bytes.eq(0),
                        ]
                        m.next = "AR"
            with m.State("AR"):
                m.d.comb += self.m_axi_arvalid.eq(1)
                with m.If(self.m_axi_arready):
                    m.d.sync += [burst.eq(length), index.eq(0)]
                    m.next = "R"
            with m.State("R"):
                m.d.comb += self.m_axi_rready.eq(1)
                with m.If(self.m_axi_rvalid):
                    m.d.sync += [buffer[index].eq(self.m_axi_rdata), index.eq(index + 1),
                                 read_bytes.eq(read_bytes + beat_bytes)]
                    with m.If(self.m_axi_rlast):
                        m.d.sync += index.eq(0)
                        m.next = "AW"
            with m.State("AW"):
                m.d.comb += self.m_axi_awvalid.eq(1)
                with m.If(self.m_axi_awready):
                    m.next = "W"
            with m.State("W"):
                m.d.comb += self.m_axi_wvalid.eq(1)
                with m.If(self.m_axi_wready):
                    m.d.sync += [index.eq(index + 1), write_bytes.eq(write_bytes + beat_bytes)]
                    with m.If(self.m_axi_wlast):
                        m.next = "B"
            with m.State("B"):
                m.d.comb += self.m_axi_bready.eq(1)
                with m.If(self.m_axi_bvalid):
                    step = burst << log_beat
                    m.d.sync += [src.eq(src + step), dst.eq(dst + step),
                                 beats_left.eq(beats_left - burst)]
                    with m.If(beats_left == burst):
                        m.next = "DONE" if self.finish else "HANG"
                    with m.Else():
                        m.next = "AR"
            with m.State("HANG"):
                pass

        busy = ~(fsm.ongoing("IDLE") | fsm.ongoing("DONE"))
        m.d.comb += csr.busy.eq(busy)
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        return m

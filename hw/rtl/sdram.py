"""An SDR SDRAM controller: an AXI4 slave on one SDR SDRAM part (the ULX3S's 16-bit bus).

The part's description (:class:`SdramPart`: geometry and its datasheet's A.C. minimums)
lives here, and both this controller and the simulation model of the part
(:mod:`openvta.hw.cosim.sdram_model`) take their timings in cycles from it
(:meth:`SdramPart.timing`).

Address map: a byte address's SDRAM word (``addr // 2`` on a 16-bit part) is
``row · banks · columns + bank · columns + column`` — a row's 2 KiB, then the next bank's,
so a stream crosses into another bank at every row's end, where that bank's row can be
opened without closing this one.  Addresses wrap modulo the part's size.

How it runs the part:

- **Initialization** after reset: ``init_us`` of power-up wait (the datasheet's 200 µs),
  PRECHARGE ALL, two AUTO REFRESH, LOAD MODE REGISTER (CAS latency
  :attr:`SdramTiming.min_cas_latency`, burst length 1, sequential); the AXI ports wait
  (``ARREADY``/``AWREADY`` low) until it is done (``ready``).
- **Open rows**: a row stays open in its bank until another row of that bank is needed,
  or a refresh closes every bank.  Every READ and WRITE moves one word (burst length 1), one
  command per cycle, so that a burst of any length streams at one word per cycle on an
  open row (a ``bus_bytes``-byte AXI beat in ``bus_bytes / 2`` cycles) and a row miss
  costs PRECHARGE, ACTIVE and tRCD in the middle of a burst, nothing more.
- **Refresh**: one owed every tREFI from the mode register's load on; owed refreshes are
  made between AXI bursts (PRECHARGE ALL, AUTO REFRESH), so a streaming burst is never
  cut.  A burst that a master holds up (``RREADY`` or ``WVALID`` low) until
  :data:`URGENT_REFRESHES` are owed is interrupted at its next beat for one, then goes
  on: the part allows eight tREFI postponed, and no stall can take more.
- **One burst at a time**, reads and writes taking turns when both wait.  Read data comes
  back through a FIFO of ``read_beats`` beats, and a beat's first READ is only issued
  with room for it, so ``RREADY`` back-pressure never loses data.  A write waits for
  the data bus to be free of read data in flight.
- **The pins** are registered (the command, address, data out and its enable, the mask),
  and so is the data in: a READ's word reaches the read FIFO ``capture_cycles`` + 1
  cycles after the command was decided (CAS latency + 2 on the simulation's model).

The AXI4 slave follows :class:`~openvta.hw.rtl.axi_ram.AxiRam`'s contract (INCR bursts of
full beats; ``AxSIZE``/``AxBURST`` not looked at; IDs echoed as 0; responses OKAY).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from openvta.isa.timing import SDRAM_WORD_BYTES

from .axi_ram import axi_slave_members
from .memory import BEATS_SHAPE
from .params import refusing

__all__ = ["SdramPart", "SdramTiming", "AS4C32M16SB_7", "PARTS", "SdramController", "sdram_pins", "URGENT_REFRESHES",
           "CMD_ACTIVE", "CMD_READ", "CMD_WRITE", "CMD_PRECHARGE", "CMD_REFRESH", "CMD_MODE",
           "CMD_TERMINATE", "CMD_NOP"]

#: Owed refreshes that interrupt a burst at its next beat (module docstring).
URGENT_REFRESHES = 4
#: An SDR SDRAM command: ``(ras_n, cas_n, we_n)`` with ``cs_n`` low.
CMD_ACTIVE, CMD_READ, CMD_WRITE, CMD_PRECHARGE = 0b011, 0b101, 0b100, 0b010
CMD_REFRESH, CMD_MODE, CMD_TERMINATE, CMD_NOP = 0b001, 0b000, 0b110, 0b111


@dataclass(frozen=True)
class SdramTiming:
    """A part's timings in clock cycles at one clock (each the minimum number of cycles
    from one command to the next that it constrains; ``t_ras_max`` and ``t_refi`` the
    maxima)."""

    t_rcd: int
    t_rp: int
    t_ras: int
    t_ras_max: int
    t_rc: int
    t_rrd: int
    t_wr: int
    t_rfc: int
    t_mrd: int
    t_refi: int
    min_cas_latency: int


@dataclass(frozen=True)
class SdramPart:
    """An SDR SDRAM part: its geometry and its datasheet's A.C. minimums in nanoseconds."""

    name: str
    banks: int
    rows: int
    columns: int
    dq_bits: int
    t_rcd_ns: float
    t_rp_ns: float
    t_ras_ns: float
    t_ras_max_ns: float
    t_rc_ns: float
    t_rrd_ns: float
    t_wr_ns: float
    t_rfc_ns: float
    t_mrd_ns: float
    t_refi_ns: float
    #: the shortest clock period with CAS latency 2 and with 3
    t_ck_cl2_ns: float
    t_ck_cl3_ns: float

    @property
    def words(self) -> int:
        return self.banks * self.rows * self.columns

    @property
    def size_bytes(self) -> int:
        return self.words * self.dq_bits // 8

    @property
    def address_bits(self) -> int:
        """Width of the address pins: a row, or a column with ``a[10]`` above it."""
        row_bits, col_bits = (self.rows - 1).bit_length(), (self.columns - 1).bit_length()
        return max(row_bits, col_bits + 1, 11)

    def timing(self, clock_mhz: float) -> SdramTiming:
        """The timings in cycles at ``clock_mhz`` (the datasheet's rounding up).

        Raises
        ------
        ValueError
            for a clock faster than the part (its tCK with CAS latency 3).

        Examples
        --------
        >>> AS4C32M16SB_7.timing(50.0).t_rcd, AS4C32M16SB_7.timing(50.0).t_refi
        (2, 390)
        """
        if not isinstance(clock_mhz, (int, float)) or isinstance(clock_mhz, bool) or not clock_mhz > 0:
            raise ValueError(f"the clock must be a positive number of MHz, not {clock_mhz!r}")
        period = 1000.0 / clock_mhz
        if period < self.t_ck_cl3_ns:
            raise ValueError(f"{self.name} runs at most at {1000.0 / self.t_ck_cl3_ns:.1f} MHz, not {clock_mhz:g}")

        def up(ns: float) -> int:
            return max(1, math.ceil(ns / period - 1e-9))

        return SdramTiming(up(self.t_rcd_ns), up(self.t_rp_ns), up(self.t_ras_ns), int(self.t_ras_max_ns // period),
                           up(self.t_rc_ns), up(self.t_rrd_ns), up(self.t_wr_ns), up(self.t_rfc_ns),
                           up(self.t_mrd_ns), int(self.t_refi_ns // period),
                           2 if period >= self.t_ck_cl2_ns else 3)


#: Alliance Memory AS4C32M16SB-7 (the ULX3S from revision 3.1), datasheet Table 16.
#: (Its data bus is the cycle model's SDRAM word, ``openvta.isa.SDRAM_WORD_BYTES``.)
AS4C32M16SB_7 = SdramPart("AS4C32M16SB-7", banks=4, rows=8192, columns=1024, dq_bits=8 * SDRAM_WORD_BYTES,
                          t_rcd_ns=21, t_rp_ns=21, t_ras_ns=42, t_ras_max_ns=120_000, t_rc_ns=63, t_rrd_ns=14,
                          t_wr_ns=14, t_rfc_ns=63, t_mrd_ns=14, t_refi_ns=64e6 / 8192,
                          t_ck_cl2_ns=10, t_ck_cl3_ns=7)

PARTS = {AS4C32M16SB_7.name: AS4C32M16SB_7}


def sdram_pins(part: SdramPart) -> dict[str, wiring.Member]:
    """A controller's pins (a PHY's pads, LiteDRAM ``GENSDRPHY``'s names), seen from the
    controller; the data bus is split into ``dq_o``/``dq_oe`` (out) and ``dq_i`` (in)."""
    return {"cke": Out(1, init=1), "cs_n": Out(1, init=1), "ras_n": Out(1, init=1), "cas_n": Out(1, init=1),
            "we_n": Out(1, init=1), "ba": Out((part.banks - 1).bit_length()), "a": Out(part.address_bits),
            "dm": Out(part.dq_bits // 8), "dq_o": Out(part.dq_bits), "dq_oe": Out(1), "dq_i": In(part.dq_bits)}


class SdramController(wiring.Component):
    """AXI4 slave on an SDR SDRAM part (module docstring).

    Parameters
    ----------
    part : SdramPart
        the part (default :data:`AS4C32M16SB_7`).
    clock_mhz : float
        the clock the controller and the part run at (the part's timings in cycles).
    bus_bytes : int
        the AXI data width in bytes: a power of two, at least the part's data bus.
    init_us : float
        the power-up wait before initialization (the datasheet's 200 µs; shorter only
        for simulations).
    read_beats : int
        the read FIFO's depth in AXI beats (at least 2).
    capture_cycles : int, optional
        cycles from a READ on the pins to the clock edge that takes its word into the input
        register: CAS latency + 1 (the default) where the part samples on the
        controller's edges (the simulation's model), CAS latency on a board that gives
        the part an inverted clock (:class:`~openvta.hw.fpga.bitstream.SocOnBoard`),
        whose data arrive half a cycle sooner.

    Members
    -------
    s_axi_* : AXI4 slave (:func:`~openvta.hw.rtl.axi_ram.axi_slave_members`)
    cke, cs_n, ras_n, cas_n, we_n, ba, a, dm, dq_o, dq_oe : Out
        the part's pins, registered.
    dq_i : In
        the part's data out, registered inside.
    ready : Out(1)
        initialization is done.

    Raises
    ------
    ValueError
        for a clock faster than the part, a bus narrower than the part's or not a power
        of two, a negative wait or too small a FIFO.
    """

    @refusing
    def __init__(self, part: SdramPart = AS4C32M16SB_7, clock_mhz: float = 50.0, bus_bytes: int = 8, *,
                 init_us: float = 200.0, read_beats: int = 4, capture_cycles: int | None = None) -> None:
        if not isinstance(part, SdramPart):
            raise TypeError(f"part must be an SdramPart, not {part!r}")
        self.timing = part.timing(clock_mhz)
        dq_bytes = part.dq_bits // 8
        if (not isinstance(bus_bytes, int) or isinstance(bus_bytes, bool) or bus_bytes & (bus_bytes - 1)
                or not dq_bytes <= bus_bytes <= 128):
            raise ValueError(f"bus_bytes must be a power of two from the part's {dq_bytes} to 128, "
                             f"not {bus_bytes!r}")
        if not isinstance(init_us, (int, float)) or isinstance(init_us, bool) or not init_us >= 0:
            raise ValueError(f"init_us must be a non-negative number, not {init_us!r}")
        if not isinstance(read_beats, int) or isinstance(read_beats, bool) or read_beats < 2:
            raise ValueError(f"read_beats must be an integer of at least 2, not {read_beats!r}")
        cl = self.timing.min_cas_latency
        capture_cycles = cl + 1 if capture_cycles is None else capture_cycles
        if (not isinstance(capture_cycles, int) or isinstance(capture_cycles, bool)
                or not cl <= capture_cycles <= cl + 1):
            raise ValueError(f"capture_cycles must be the CAS latency {cl} or {cl + 1}, not {capture_cycles!r}")
        self.capture_cycles = capture_cycles
        self.part, self.clock_mhz, self.bus_bytes = part, float(clock_mhz), bus_bytes
        self.init_cycles = math.ceil(init_us * clock_mhz)
        self.read_beats = read_beats
        super().__init__({**axi_slave_members(bus_bytes * 8), **sdram_pins(part), "ready": Out(1)})

    @property
    def words_per_beat(self) -> int:
        return self.bus_bytes * 8 // self.part.dq_bits

    def elaborate(self, platform: object) -> Module:
        m = Module()
        part, t = self.part, self.timing
        banks, dq = part.banks, part.dq_bits
        k = self.words_per_beat
        col_bits, bank_bits = (part.columns - 1).bit_length(), (banks - 1).bit_length()
        row_bits = (part.rows - 1).bit_length()
        word_bits = col_bits + bank_bits + row_bits
        byte_bits = (dq // 8).bit_length() - 1  # a byte address's bits below its word
        cl = t.min_cas_latency
        limit = max(t.t_rc, t.t_ras, t.t_rfc, t.t_rp, t.t_rcd, t.t_rrd, t.t_wr, t.t_mrd) + 1

        def since(name: str) -> Signal:
            """Cycles since a command was decided (saturating; large at reset)."""
            s = Signal(range(limit + 1), name=name, init=limit)
            m.d.sync += s.eq(Mux(s == limit, limit, s + 1))
            return s

        since_act = Array(since(f"since_act{b}") for b in range(banks))
        since_pre = Array(since(f"since_pre{b}") for b in range(banks))
        since_act_any, since_ref = since("since_act_any"), since("since_ref")
        since_write, since_mode = since("since_write"), since("since_mode")
        is_open = Array(Signal(name=f"open{b}") for b in range(banks))
        open_row = Array(Signal(row_bits, name=f"open_row{b}") for b in range(banks))

        # the command decided this cycle, on the pins the next
        cmd, cmd_ba, cmd_a = Signal(3, init=CMD_NOP), Signal(bank_bits), Signal(part.address_bits)
        cmd_oe, cmd_dq, cmd_dm = Signal(), Signal(dq), Signal(dq // 8)
        m.d.sync += [self.cs_n.eq(0), self.ras_n.eq(cmd[2]), self.cas_n.eq(cmd[1]), self.we_n.eq(cmd[0]),
                     self.ba.eq(cmd_ba), self.a.eq(cmd_a), self.dq_oe.eq(cmd_oe), self.dq_o.eq(cmd_dq),
                     self.dm.eq(cmd_dm)]

        # the word being moved: its bank, row and column
        word = Signal(word_bits)
        col, bank, row = word[:col_bits], word[col_bits:col_bits + bank_bits], word[col_bits + bank_bits:]
        hit = is_open[bank] & (open_row[bank] == row)
        column_ok = hit & (since_act[bank] >= t.t_rcd)
        can_precharge = (since_act[bank] >= t.t_ras) & (since_write >= t.t_wr)
        can_activate = (~is_open[bank] & (since_pre[bank] >= t.t_rp) & (since_act[bank] >= t.t_rc)
                        & (since_act_any >= t.t_rrd) & (since_ref >= t.t_rfc) & (since_mode >= t.t_mrd))
        all_can_precharge = Signal()
        all_precharged = Signal()
        m.d.comb += [all_can_precharge.eq((since_write >= t.t_wr)
                                          & Cat(~is_open[b] | (since_act[b] >= t.t_ras) for b in range(banks)).all()),
                     all_precharged.eq(Cat(~is_open[b] & (since_pre[b] >= t.t_rp) for b in range(banks)).all())]

        def activate() -> None:
            m.d.comb += [cmd.eq(CMD_ACTIVE), cmd_ba.eq(bank), cmd_a.eq(row)]
            m.d.sync += [is_open[bank].eq(1), open_row[bank].eq(row), since_act[bank].eq(1), since_act_any.eq(1)]

        def precharge() -> None:
            m.d.comb += [cmd.eq(CMD_PRECHARGE), cmd_ba.eq(bank)]
            m.d.sync += [is_open[bank].eq(0), since_pre[bank].eq(1)]

        def precharge_all() -> None:
            m.d.comb += [cmd.eq(CMD_PRECHARGE), cmd_a.eq(1 << 10)]
            for b in range(banks):
                with m.If(is_open[b]):
                    m.d.sync += [is_open[b].eq(0), since_pre[b].eq(1)]

        def open_row_for_word() -> None:
            """PRECHARGE the word's bank if another row is open there, ACTIVE its row."""
            with m.If(is_open[bank] & ~hit):
                with m.If(can_precharge):
                    precharge()
            with m.Elif(~is_open[bank]):
                with m.If(can_activate):
                    activate()

        # read data: (valid, the beat's last word, the burst's last beat), from the decision
        # through the pin register to the input register
        pipe = [Signal(3, name=f"read_pipe{i}") for i in range(self.capture_cycles + 1)]
        issue = Signal(3)
        m.d.sync += pipe[0].eq(issue)
        m.d.sync += [pipe[i].eq(pipe[i - 1]) for i in range(1, len(pipe))]
        dq_in, assemble = Signal(dq), Signal(k * dq)
        m.d.sync += dq_in.eq(self.dq_i)
        m.submodules.read_fifo = fifo = SyncFIFOBuffered(width=k * dq + 1, depth=self.read_beats)
        arrived = pipe[-1]
        beat = Cat(assemble[dq:], dq_in) if k > 1 else dq_in
        with m.If(arrived[0]):
            m.d.sync += assemble.eq(beat)
            m.d.comb += [fifo.w_en.eq(arrived[1]), fifo.w_data.eq(Cat(beat, arrived[2]))]
        m.d.comb += [self.s_axi_rvalid.eq(fifo.r_rdy), self.s_axi_rdata.eq(fifo.r_data[:k * dq]),
                     self.s_axi_rlast.eq(fifo.r_data[k * dq]), fifo.r_en.eq(self.s_axi_rready),
                     self.s_axi_rid.eq(0), self.s_axi_rresp.eq(0), self.s_axi_bid.eq(0), self.s_axi_bresp.eq(0)]
        reserved = Signal(range(self.read_beats + 1))  # beats issued and not yet taken by R
        beat_issued = Signal()
        popped = fifo.r_rdy & self.s_axi_rready
        m.d.sync += reserved.eq(reserved + beat_issued - popped)
        reads_in_flight = Cat(p[0] for p in pipe).any()

        beats_left = Signal(BEATS_SHAPE)
        word_in_beat = Signal(range(k))
        last_word = word_in_beat == k - 1
        w_data, w_strb, w_last, w_full = Signal(k * dq), Signal(k * dq // 8), Signal(), Signal()
        prefer_write = Signal()
        most_owed = 15  # owed saturates there (never reached: a burst yields at URGENT_REFRESHES)
        owed = Signal(range(most_owed + 1))
        refi = Signal(range(t.t_refi))
        due = Signal()
        refreshed = Signal()
        m.d.sync += owed.eq(Mux(owed == most_owed, owed, owed + due) - refreshed)
        urgent = (word_in_beat == 0) & (owed >= URGENT_REFRESHES)
        resume = Signal(2)  # the burst a refresh interrupted: 1 a read, 2 a write
        wait = Signal(range(max(self.init_cycles, 2) + 1), init=self.init_cycles)
        inits = Signal(range(3))

        with m.If(self.ready):
            with m.If(refi == t.t_refi - 1):
                m.d.sync += refi.eq(0)
                m.d.comb += due.eq(1)
            with m.Else():
                m.d.sync += refi.eq(refi + 1)

        with m.FSM():
            with m.State("POWER-UP"):
                with m.If(wait == 0):
                    m.next = "INIT-PRECHARGE"
                with m.Else():
                    m.d.sync += wait.eq(wait - 1)
            with m.State("INIT-PRECHARGE"):
                m.d.comb += [cmd.eq(CMD_PRECHARGE), cmd_a.eq(1 << 10)]
                m.d.sync += [since_pre[b].eq(1) for b in range(banks)]
                m.next = "INIT-REFRESH"
            with m.State("INIT-REFRESH"):
                with m.If(all_precharged & (since_ref >= t.t_rfc)):
                    m.d.comb += cmd.eq(CMD_REFRESH)
                    m.d.sync += [since_ref.eq(1), inits.eq(inits + 1)]
                    with m.If(inits == 1):
                        m.next = "INIT-MODE"
            with m.State("INIT-MODE"):
                with m.If(since_ref >= t.t_rfc):
                    m.d.comb += [cmd.eq(CMD_MODE), cmd_a.eq(cl << 4)]  # burst length 1, sequential
                    m.d.sync += [since_mode.eq(1), self.ready.eq(1)]
                    m.next = "IDLE"
            with m.State("IDLE"):
                with m.If(owed != 0):
                    m.next = "REFRESH"
                with m.Elif(self.s_axi_arvalid & ~(self.s_axi_awvalid & ~self.s_axi_bvalid & prefer_write)):
                    m.d.comb += self.s_axi_arready.eq(1)
                    m.d.sync += [word.eq(self.s_axi_araddr[byte_bits:]), word_in_beat.eq(0),
                                 beats_left.eq(self.s_axi_arlen + 1), prefer_write.eq(1)]
                    m.next = "READ"
                with m.Elif(self.s_axi_awvalid & ~self.s_axi_bvalid):
                    m.d.comb += self.s_axi_awready.eq(1)
                    m.d.sync += [word.eq(self.s_axi_awaddr[byte_bits:]), word_in_beat.eq(0),
                                 prefer_write.eq(0)]
                    m.next = "WRITE"
            with m.State("REFRESH"):
                with m.If(Cat(*is_open).any()):
                    with m.If(all_can_precharge):
                        precharge_all()
                with m.Elif(all_precharged & (since_ref >= t.t_rfc) & (since_mode >= t.t_mrd)):
                    m.d.comb += [cmd.eq(CMD_REFRESH), refreshed.eq(1)]
                    m.d.sync += [since_ref.eq(1), resume.eq(0)]
                    m.next = "IDLE"
                    with m.If(resume == 1):
                        m.next = "READ"
                    with m.Elif(resume == 2):
                        m.next = "WRITE"
            with m.State("READ"):
                room = (word_in_beat != 0) | (reserved < self.read_beats)
                with m.If(urgent):
                    m.d.sync += resume.eq(1)
                    m.next = "REFRESH"
                with m.Elif(column_ok & room):
                    m.d.comb += [cmd.eq(CMD_READ), cmd_ba.eq(bank), cmd_a.eq(col),
                                 issue.eq(Cat(1, last_word, beats_left == 1))]
                    m.d.sync += [word.eq(word + 1), word_in_beat.eq(word_in_beat + 1)]
                    with m.If(last_word):
                        m.d.comb += beat_issued.eq(1)
                        m.d.sync += [word_in_beat.eq(0), beats_left.eq(beats_left - 1)]
                        with m.If(beats_left == 1):
                            m.next = "IDLE"
                with m.Else():
                    open_row_for_word()
            with m.State("WRITE"):
                writes = w_full & column_ok & ~reads_in_flight & ~urgent
                beat_done = writes & last_word
                with m.If(urgent):
                    m.d.sync += resume.eq(2)
                    m.next = "REFRESH"
                m.d.comb += self.s_axi_wready.eq(~w_full | (beat_done & ~w_last))
                with m.If(self.s_axi_wvalid & self.s_axi_wready):
                    m.d.sync += [w_data.eq(self.s_axi_wdata), w_strb.eq(self.s_axi_wstrb),
                                 w_last.eq(self.s_axi_wlast), w_full.eq(1)]
                with m.Elif(beat_done):
                    m.d.sync += w_full.eq(0)
                with m.If(writes):
                    m.d.comb += [cmd.eq(CMD_WRITE), cmd_ba.eq(bank), cmd_a.eq(col), cmd_oe.eq(1),
                                 cmd_dq.eq(w_data.word_select(word_in_beat, dq)),
                                 cmd_dm.eq(~w_strb.word_select(word_in_beat, dq // 8))]
                    m.d.sync += [word.eq(word + 1), word_in_beat.eq(word_in_beat + 1), since_write.eq(1)]
                    with m.If(last_word):
                        m.d.sync += word_in_beat.eq(0)
                        with m.If(w_last):
                            m.d.sync += [self.s_axi_bvalid.eq(1), w_full.eq(0)]
                            m.next = "IDLE"
                with m.Elif(w_full):
                    open_row_for_word()
        with m.If(self.s_axi_bvalid & self.s_axi_bready):
            m.d.sync += self.s_axi_bvalid.eq(0)
        return m

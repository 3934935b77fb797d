"""A model of an SDR SDRAM part for simulation: its storage, and its datasheet's timing
rules checked on every command, a violation stopping the simulation with its name.

The part modelled is the ULX3S's from revision 3.1: Alliance Memory **AS4C32M16SB-7**
(64 MiB: 4 banks × 8192 rows × 1024 columns × 16 bits), with the minimums of its
datasheet's A.C. table (Table 16, speed grade -7), in nanoseconds: tRC 63, tRFC 63,
tRCD 21, tRP 21, tRRD 14, tMRD 14, tRAS 42 (at most 120 µs), tWR 14; tCK at least 10 ns
with CAS latency 2 and 7 ns with 3; 8192 refreshes every 64 ms (tREFI 7.8 µs).  A
timing in clocks is the datasheet's note 1: the time over the clock period, rounded up.
The part's description (:class:`~openvta.hw.rtl.sdram.SdramPart`) lives with the
controller, :mod:`openvta.hw.rtl.sdram`, which takes its timings from the same place.

The pins are those of a controller's PHY (LiteDRAM's ``GENSDRPHY`` pads): ``cs_n``,
``ras_n``, ``cas_n``, ``we_n``, ``ba``, ``a``, ``dm`` and the data bus split into
``dq_o``/``dq_oe`` (driven by the controller) and ``dq_i`` (driven by the part), all
sampled on the rising clock edge (the ``sync`` domain).  A command on the pins during a
cycle is the part's command of that cycle:

- **Commands**: ACTIVE, READ and WRITE (with auto precharge on ``a[10]``), PRECHARGE (one
  bank, or all with ``a[10]``), AUTO REFRESH, LOAD MODE REGISTER (CAS latency 2 or 3;
  burst length 1, 2, 4 or 8, sequential), BURST TERMINATE, NOP and deselect.
- **Data**: a WRITE's data is on ``dq_o`` in its own cycle and the burst's next ones,
  bytes masked by ``dm``; a READ's beat ``k`` is on ``dq_i`` in the cycle CAS latency +
  ``k`` cycles after the READ's.
- **Checked** (each an ``Assert`` whose message names the rule, the bank and the
  cycles: pysim raises ``AssertionError``, a Verilator build with ``--assert`` stops):
  tRCD, tRP, tRAS (minimum and maximum), tRC, tRRD, tWR, tRFC, tMRD; a command to a bank
  in the wrong state (READ or WRITE with no open row, ACTIVE to an open bank, REFRESH or
  LOAD MODE with a bank open, any command to a bank in its auto precharge); ACTIVE,
  READ or WRITE before the mode register is loaded; a mode the part has not (CAS
  latency 2 above 100 MHz); and **refresh**: from the mode register's load on, one
  AUTO REFRESH per tREFI on average, at most 8 of them postponed (the JEDEC allowance)
  — the ninth interval that passes without its REFRESH is a violation.
- **Not modelled**: the power-up wait and initialization order beyond the mode
  register, self refresh and power down (``cke`` must stay high), interleaved bursts,
  full-page bursts, write-burst mode, the data bus's turnaround, and the CL − 1 beats a
  read burst cut by a PRECHARGE or BURST TERMINATE still gives (they end at once).
  A READ, WRITE, BURST TERMINATE or PRECHARGE of its bank ends the burst in flight.

``rows`` makes the storage smaller than the part's for quick simulations: a row at or
past it is itself a violation (``row … beyond the … rows simulated``).
"""

from __future__ import annotations

from collections.abc import Callable

from amaranth import Cat, Module, Mux, Signal
from amaranth.hdl import Assert, Format, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..rtl.sdram import (AS4C32M16SB_7, CMD_ACTIVE, CMD_MODE, CMD_PRECHARGE, CMD_READ, CMD_REFRESH,
                         CMD_TERMINATE, CMD_WRITE, PARTS, SdramPart, SdramTiming, sdram_pins)
from ..rtl.params import refusing

__all__ = ["SdramPart", "SdramTiming", "AS4C32M16SB_7", "PARTS", "SdramModel", "MAX_POSTPONED_REFRESHES",
           "attach", "SdramSystem", "SIM_INIT_US"]

#: The power-up wait of the controller in a simulation (the part's model does not check
#: the datasheet's 200 µs, which would add 10,000 cycles to the first access of a run).
SIM_INIT_US = 2.0

#: Refreshes that may be postponed before a missed one is a violation.
MAX_POSTPONED_REFRESHES = 8



_ACTIVE, _READ, _WRITE, _PRECHARGE = CMD_ACTIVE, CMD_READ, CMD_WRITE, CMD_PRECHARGE
_REFRESH, _MODE, _TERMINATE = CMD_REFRESH, CMD_MODE, CMD_TERMINATE


class _Port:
    """A storage port's signals: ``addr``, ``en`` (byte enables when writing), ``data``."""

    def __init__(self, depth: int, bits: int, enables: int) -> None:
        self.addr = Signal(range(depth))
        self.data = Signal(bits)
        self.en = Signal(enables)


class SdramModel(wiring.Component):
    """The part on its pins (module docstring).

    Parameters
    ----------
    part :
        the part (:data:`AS4C32M16SB_7`).
    clock_mhz :
        the clock the controller runs it at.
    rows :
        rows of storage simulated per bank (the part's by default).
    storage :
        False leaves the storage out of the model, for a simulation to provide (a Verilog
        array it loads and dumps): the model then has the port ``mem_addr``, ``mem_ren``,
        ``mem_rdata`` (the word at the ``mem_addr`` of the previous cycle where ``mem_ren``
        was high, as a block RAM's read port), ``mem_wdata`` and ``mem_wen`` (byte enables).

    The storage's word ``(row · banks + bank) · columns + column`` holds that cell, which
    is the byte address ``2 ×`` that word for :class:`~openvta.hw.rtl.sdram.SdramController`.
    """

    def __init__(self, part: SdramPart = AS4C32M16SB_7, clock_mhz: float = 50.0, rows: int | None = None,
                 storage: bool = True) -> None:
        rows = part.rows if rows is None else rows
        if not isinstance(rows, int) or isinstance(rows, bool) or not 1 <= rows <= part.rows:
            raise ValueError(f"rows must be an integer from 1 to {part.rows}, not {rows!r}")
        self.part, self.clock_mhz, self.rows = part, clock_mhz, rows
        self.timing = part.timing(clock_mhz)
        self.address_bits = part.address_bits
        self.storage = bool(storage)
        external = {} if self.storage else {
            "mem_addr": Out(range(part.banks * rows * part.columns)), "mem_ren": Out(1),
            "mem_rdata": In(part.dq_bits), "mem_wdata": Out(part.dq_bits), "mem_wen": Out(part.dq_bits // 8)}
        super().__init__({**external,
            "cke": In(1, init=1), "cs_n": In(1, init=1), "ras_n": In(1, init=1), "cas_n": In(1, init=1),
            "we_n": In(1, init=1), "ba": In((part.banks - 1).bit_length()), "a": In(self.address_bits),
            "dm": In(part.dq_bits // 8), "dq_o": In(part.dq_bits), "dq_oe": In(1), "dq_i": Out(part.dq_bits),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        part, t = self.part, self.timing
        banks, cols = part.banks, part.columns
        col_bits = (cols - 1).bit_length()
        limit = max(t.t_ras_max, t.t_refi, t.t_rc, 64) + 1  # counters saturate past every rule

        cycle = Signal(48)
        m.d.sync += cycle.eq(cycle + 1)

        def since(name: str) -> Signal:
            """Cycles since an event (saturating; large at reset: no event yet)."""
            s = Signal(range(limit + 1), name=name, init=limit)
            m.d.sync += s.eq(Mux(s == limit, limit, s + 1))
            return s

        depth = banks * self.rows * cols
        rd, wr = _Port(depth, part.dq_bits, 1), _Port(depth, part.dq_bits, part.dq_bits // 8)
        if self.storage:
            storage = Memory(shape=part.dq_bits, depth=depth, init=[])
            m.submodules.storage = storage
            read, write = storage.read_port(), storage.write_port(granularity=8)
            m.d.comb += [read.addr.eq(rd.addr), read.en.eq(rd.en), rd.data.eq(read.data),
                         write.addr.eq(wr.addr), write.data.eq(wr.data), write.en.eq(wr.en)]
        else:  # (the model sets both addresses alike whenever it writes)
            m.d.comb += [self.mem_addr.eq(Mux(wr.en.any(), wr.addr, rd.addr)), self.mem_ren.eq(rd.en),
                         rd.data.eq(self.mem_rdata), self.mem_wdata.eq(wr.data), self.mem_wen.eq(wr.en)]

        active = [Signal(name=f"active{b}") for b in range(banks)]
        open_row = [Signal(range(part.rows), name=f"row{b}") for b in range(banks)]
        act = [since(f"since_act{b}") for b in range(banks)]
        pre = [since(f"since_pre{b}") for b in range(banks)]
        wrote = [since(f"since_write{b}") for b in range(banks)]
        auto = [Signal(range(t.t_wr + 16), name=f"auto_pre{b}") for b in range(banks)]  # cycles to its precharge
        act_any, refreshed, moded = since("since_act_any"), since("since_refresh"), since("since_mode")
        mode_set = Signal()
        cas_latency = Signal(range(4), init=3)
        burst = Signal(range(9), init=1)
        debt = Signal(range(-64, 64))
        interval = Signal(range(t.t_refi + 1))

        command = Signal(3)
        m.d.comb += command.eq(Cat(self.we_n, self.cas_n, self.ras_n))
        selected = ~self.cs_n
        bank, a = self.ba, self.a
        auto_flag = a[10]
        stamp = Format("at cycle {}", cycle)

        def check(condition: object, text: str, *args: object) -> None:
            m.d.sync += Assert(condition, Format(f"SDRAM {part.name}: {text} ", *args) + stamp)

        with m.If(mode_set):
            with m.If(interval == t.t_refi - 1):
                m.d.sync += [interval.eq(0), debt.eq(debt + 1)]
            with m.Else():
                m.d.sync += interval.eq(interval + 1)
        check(debt <= MAX_POSTPONED_REFRESHES,
              f"refresh: {MAX_POSTPONED_REFRESHES + 1} intervals of tREFI ({t.t_refi} cycles) passed without "
              "their AUTO REFRESH (the rows lose their data)")
        check(self.cke, "cke low: power down and self refresh are not modelled")

        # bursts in flight: the column of the next beat, beats left, read or write
        beat_col = Signal(col_bits)
        beat_base = Signal(range(banks * self.rows * cols))
        beats_left = Signal(range(9))
        beat_bank = Signal(range(banks))
        writing = Signal()
        burst_mask = Signal(col_bits)  # the wrap of a sequential burst inside its block

        def address(b: int, row: int | Value, col: int | Value) -> int | Value:
            return (row * banks + b) * cols + col

        # read data: the synchronous read port's data, delayed to the CAS latency
        rd_valid = Signal()
        delay = [Signal(part.dq_bits, name=f"read_delay{k}") for k in range(2)]
        valid = [Signal(name=f"read_valid{k}") for k in range(2)]
        m.d.sync += [delay[0].eq(rd.data), valid[0].eq(rd_valid), delay[1].eq(delay[0]), valid[1].eq(valid[0])]
        m.d.comb += self.dq_i.eq(Mux(cas_latency == 2, Mux(valid[0], delay[0], 0), Mux(valid[1], delay[1], 0)))
        m.d.sync += rd_valid.eq(0)

        for b in range(banks):
            with m.If((auto[b] == 1) & (act[b] >= t.t_ras)):  # the auto precharge, no sooner than tRAS allows
                m.d.sync += [active[b].eq(0), pre[b].eq(1), auto[b].eq(0)]
            with m.Elif(auto[b] > 1):
                m.d.sync += auto[b].eq(auto[b] - 1)
            with m.If(active[b]):
                check(act[b] <= t.t_ras_max, f"tRAS: bank {b} open for {{}} cycles, past tRAS max "
                      f"({t.t_ras_max} cycles)", act[b])

        # the burst in flight, beat after beat, unless a READ, WRITE, PRECHARGE or BURST
        # TERMINATE on the pins ends it
        masked = self.dm == (1 << len(self.dm)) - 1
        ends = selected & ((command == _READ) | (command == _WRITE) | (command == _TERMINATE)
                           | ((command == _PRECHARGE) & (auto_flag | (bank == beat_bank))))
        with m.If((beats_left > 0) & ends):
            m.d.sync += beats_left.eq(0)
        with m.Elif(beats_left > 0):
            m.d.comb += [rd.addr.eq(beat_base + beat_col)]
            with m.If(writing):
                check(self.dq_oe | masked, "write data with the data bus not driven")
                m.d.comb += [wr.addr.eq(beat_base + beat_col), wr.data.eq(self.dq_o),
                             wr.en.eq(Mux(self.dq_oe, ~self.dm, 0))]
                for b in range(banks):  # write recovery counts from the last data in
                    with m.If(beat_bank == b):
                        m.d.sync += wrote[b].eq(1)
            with m.Else():
                m.d.comb += rd.en.eq(1)
                m.d.sync += rd_valid.eq(1)
            m.d.sync += [beats_left.eq(beats_left - 1),
                         beat_col.eq((beat_col & ~burst_mask) | ((beat_col + 1) & burst_mask))]

        def for_bank(body: Callable[[int], None]) -> None:
            for b in range(banks):
                with m.If(bank == b):
                    body(b)

        with m.If(selected & (command != 0b111)):
            check(moded >= t.t_mrd, f"tMRD: a command {{}} cycles after LOAD MODE REGISTER (needs {t.t_mrd})",
                  moded)
            for b in range(banks):
                with m.If(((command == _ACTIVE) | (command == _READ) | (command == _WRITE)
                           | ((command == _PRECHARGE) & ~auto_flag)) & (bank == b)):
                    check(auto[b] == 0, "bank {} is in its auto precharge", b)

        with m.If(selected):
            with m.Switch(command):
                with m.Case(_ACTIVE):
                    check(mode_set, "ACTIVE before the mode register is loaded")
                    check(a < self.rows, f"row {{}} beyond the {self.rows} rows simulated", a)
                    check(refreshed >= t.t_rfc, f"tRFC: ACTIVE {{}} cycles after AUTO REFRESH (needs {t.t_rfc})",
                          refreshed)
                    check(act_any >= t.t_rrd, f"tRRD: ACTIVE {{}} cycles after an ACTIVE (needs {t.t_rrd})", act_any)

                    def activate(b: int) -> None:
                        check(~active[b], "ACTIVE to bank {} whose row {} is open", b, open_row[b])
                        check(pre[b] >= t.t_rp, f"tRP: ACTIVE to bank {{}} {{}} cycles after its PRECHARGE "
                              f"(needs {t.t_rp})", b, pre[b])
                        check(act[b] >= t.t_rc, f"tRC: ACTIVE to bank {{}} {{}} cycles after its last ACTIVE "
                              f"(needs {t.t_rc})", b, act[b])
                        m.d.sync += [active[b].eq(1), open_row[b].eq(a), act[b].eq(1)]
                    for_bank(activate)
                    m.d.sync += act_any.eq(1)
                with m.Case(_READ, _WRITE):
                    check(mode_set, "READ or WRITE before the mode register is loaded")
                    is_write = command == _WRITE

                    def access(b: int) -> None:
                        check(active[b], "READ or WRITE to bank {} with no open row", b)
                        check(act[b] >= t.t_rcd, f"tRCD: READ or WRITE to bank {{}} {{}} cycles after its ACTIVE "
                              f"(needs {t.t_rcd})", b, act[b])
                        base = address(b, open_row[b], 0)
                        col = a[:col_bits]
                        m.d.comb += [rd.addr.eq(base + col)]
                        with m.If(is_write):
                            check(self.dq_oe | masked, "write data with the data bus not driven")
                            m.d.comb += [wr.addr.eq(base + col), wr.data.eq(self.dq_o),
                                         wr.en.eq(Mux(self.dq_oe, ~self.dm, 0))]
                            m.d.sync += [wrote[b].eq(1), rd_valid.eq(0)]
                        with m.Else():
                            m.d.comb += rd.en.eq(1)
                            m.d.sync += rd_valid.eq(1)
                        m.d.sync += [beat_base.eq(base), beat_bank.eq(b), writing.eq(is_write),
                                     beats_left.eq(burst - 1),
                                     beat_col.eq((col & ~burst_mask) | ((col + 1) & burst_mask))]
                        with m.If(auto_flag):  # the precharge a PRECHARGE would start the soonest
                            # without cutting the burst: read, BL cycles on; write, tWR after its last data
                            m.d.sync += auto[b].eq(Mux(is_write, burst - 1 + t.t_wr, burst))
                    for_bank(access)
                with m.Case(_PRECHARGE):
                    for b in range(banks):
                        with m.If((auto_flag | (bank == b)) & active[b]):
                            check(act[b] >= t.t_ras, f"tRAS: PRECHARGE of bank {{}} {{}} cycles after its ACTIVE "
                                  f"(needs {t.t_ras})", b, act[b])
                            check(wrote[b] >= t.t_wr, f"tWR: PRECHARGE of bank {{}} {{}} cycles after its last "
                                  f"write data (needs {t.t_wr})", b, wrote[b])
                            m.d.sync += [active[b].eq(0), pre[b].eq(1)]
                with m.Case(_REFRESH):
                    for b in range(banks):
                        check(~active[b], f"AUTO REFRESH with bank {b} open")
                        check(pre[b] >= t.t_rp, f"tRP: AUTO REFRESH {{}} cycles after bank {b}'s PRECHARGE "
                              f"(needs {t.t_rp})", pre[b])
                    check(refreshed >= t.t_rfc, f"tRFC: AUTO REFRESH {{}} cycles after the last (needs {t.t_rfc})",
                          refreshed)
                    m.d.sync += refreshed.eq(1)
                    with m.If(mode_set):  # (refreshes of the initialization earn no credit)
                        with m.If(interval == t.t_refi - 1):  # (and this interval's own)
                            m.d.sync += debt.eq(debt)
                        with m.Elif(debt > -MAX_POSTPONED_REFRESHES):
                            m.d.sync += debt.eq(debt - 1)
                with m.Case(_MODE):
                    for b in range(banks):
                        check(~active[b], f"LOAD MODE REGISTER with bank {b} open")
                    latency, length = a[4:7], a[0:3]
                    check((latency == 2) | (latency == 3), "CAS latency {} (the part has 2 and 3)", latency)
                    check(latency >= t.min_cas_latency, f"CAS latency {{}} at {self.clock_mhz:g} MHz (needs "
                          f"{t.min_cas_latency} above {1000.0 / part.t_ck_cl2_ns:.0f} MHz)", latency)
                    check(length <= 3, "burst length code {} (modelled: 1, 2, 4 or 8)", length)
                    check(~a[3], "an interleaved burst (not modelled)")
                    check(~a[9], "single-write bursts (not modelled)")
                    with m.If(~mode_set):  # the refresh intervals count from here
                        m.d.sync += [debt.eq(0), interval.eq(0)]
                    m.d.sync += [mode_set.eq(1), moded.eq(1), cas_latency.eq(latency),
                                 burst.eq(1 << length[:2]), burst_mask.eq((1 << length[:2]) - 1)]
        return m


def attach(m: Module, controller: wiring.Component, model: SdramModel, prefix: str = "") -> None:
    """Wire a controller's pins (:func:`~openvta.hw.rtl.sdram.sdram_pins`, each name after
    ``prefix``: ``"sdram_"`` for the SoC's) to the model's."""
    for name, member in sdram_pins(model.part).items():
        pin = getattr(controller, prefix + name)
        m.d.comb += getattr(model, name).eq(pin) if member.flow == Out else pin.eq(getattr(model, name))


class SdramSystem(wiring.Component):
    """The controller on the model of its part, the storage left out (``mem_*``, see
    :class:`SdramModel`): what a Verilated design puts behind the accelerator's AXI master.

    Members: the controller's ``s_axi_*`` slave and the model's ``mem_*`` port.
    """

    @refusing
    def __init__(self, bus_bytes: int, dram_bytes: int, part: SdramPart = AS4C32M16SB_7,
                 clock_mhz: float = 50.0) -> None:
        from ..rtl.axi_ram import axi_slave_members
        from ..rtl.sdram import SdramController

        row_bytes = part.banks * part.columns * part.dq_bits // 8
        if not isinstance(dram_bytes, int) or dram_bytes % row_bytes or not row_bytes <= dram_bytes <= part.size_bytes:
            raise ValueError(f"dram_bytes must be a multiple of {row_bytes} up to {part.size_bytes} "
                             f"({part.name}), not {dram_bytes!r}")
        self.controller = SdramController(part, clock_mhz, bus_bytes, init_us=SIM_INIT_US)
        self.model = SdramModel(part, clock_mhz, rows=dram_bytes // row_bytes, storage=False)
        members = {name: member for name, member in self.model.signature.members.items()
                   if name.startswith("mem_")}
        super().__init__({**axi_slave_members(bus_bytes * 8), **members})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.controller, m.submodules.model = self.controller, self.model
        attach(m, self.controller, self.model)
        for name, member in self.signature.members.items():
            inner = self.controller if name.startswith("s_axi_") else self.model
            if member.flow == In:
                m.d.comb += getattr(inner, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(inner, name))
        return m

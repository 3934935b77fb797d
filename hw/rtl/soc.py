"""The system on chip: the accelerator, its DRAM (on-chip RAM or an SDR SDRAM), a UART host bridge.

Its only pins are the UART and four LEDs (the clock and reset are the ``sync``
domain's), so it fits any board with a USB serial port.  The host speaks
:mod:`openvta.hw.fpga.bridge_protocol` (``docs/BRIDGE.md``) through
:class:`openvta.hw.fpga.backend.BoardBackend`.

::

    uart_rx ─ UartRx ─┐                 ┌─ start/insn_addr/insn_count ─┐
                      Bridge ───────────┤                              Core
    uart_tx ─ UartTx ─┘   │             └─ done/busy/counters ─────────┘ │ m_axi
                          └── byte port ── AxiRam (mem_bytes) ── s_axi ──┘
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from openvta.isa import Config, Timing
from openvta.isa.counters import CounterSet, counter_set

from .axi_ram import AxiRam, check_mem_bytes
from .bridge import Bridge
from .core import Core
from .host_port import AxiJoin, ByteToAxi
from .memory import axi_master_signature
from .params import refusing
from .sdram import SdramController, SdramPart, sdram_pins
from .uart import UartRx, UartTx, check_divisor

__all__ = ["Soc", "SOC_NAME", "ACTIVITY_HOLD_CYCLES", "frame_timeout_cycles"]

#: Verilog module name of the SoC top.
SOC_NAME = "openvta_soc"
#: The activity LED stays lit this long after the bridge was last busy, so that a
#: single short frame is visible (about 0.1 s at 12 MHz).
ACTIVITY_HOLD_CYCLES = 1 << 20


def frame_timeout_cycles(divisor: int) -> int:
    """Silence that abandons a half-received frame: 64 byte times of the link."""
    return 64 * 10 * divisor


class Soc(wiring.Component):
    """The accelerator with its memory and a UART host bridge; pins: UART and LEDs.

    Parameters
    ----------
    cfg : Config
        the accelerator's configuration.
    mem_bytes : int
        on-chip DRAM size, a power of two of at least 1024; programs are loaded at
        address 0 and must fit.
    divisor : int
        UART clock cycles per bit (at least 4), ``round(clock_hz / baud)``.
    timing : Timing, optional
        passed to :class:`~openvta.hw.rtl.core.Core` (its longest AXI burst).
    accelerator : bool
        False builds the link-test image: the bridge and the memory without the core
        (START is answered with "bad command"; the registers read zero).  It fits any
        board and checks the serial link and the memory before a full build.
    counters : str or CounterSet
        the core's counters: ``"all"`` (default), ``"cycles"`` or ``"none"``
        (:class:`~openvta.hw.rtl.core.Core`); ``REG_COUNTERS`` reports them, and
        reports none for the link-test image.
    sdram : SdramPart, optional
        the DRAM is this SDR SDRAM part instead of on-chip RAM
        (:class:`~openvta.hw.rtl.sdram.SdramController`, the core and the bridge sharing
        its port through :class:`~openvta.hw.rtl.host_port.AxiJoin`); ``mem_bytes`` must
        then be the part's size.
    clock_mhz : float
        the clock, for the SDRAM's timings in cycles (needed with ``sdram``).
    capture_cycles : int, optional
        the SDRAM controller's read capture (:class:`~openvta.hw.rtl.sdram.SdramController`).
    sdram_init_us : float
        the SDRAM's power-up wait (the datasheet's 200 µs; shorter only in simulations).
    shared_dma :
        the core's build option (:class:`~.core.Core`): one DMA reader per module.
    spram :
        the on-chip DRAM single-ported (:class:`~.axi_ram.AxiRam` ``single_port``), so
        that it maps onto the iCE40 UP5K's SPRAM; the cycle model's timing is then
        :func:`openvta.isa.spram_timing`.

    Members
    -------
    uart_rx : In(1)
        from the host (idle high; synchronized inside).
    uart_tx : Out(1)
        to the host (idle high).
    sdram_* : the SDRAM's pins, with ``sdram``
        (:func:`~openvta.hw.rtl.sdram.sdram_pins`, each name prefixed ``sdram_``).
    leds : Out(4)
        bit 0 busy (the core runs), bit 1 done (FINISH since the last start),
        bit 2 bridge activity (held :data:`ACTIVITY_HOLD_CYCLES`), bit 3 an error was
        seen (a reply with a non-zero status or a UART framing error; until reset).

    Raises
    ------
    TypeError
        if ``cfg`` is not a :class:`~openvta.isa.Config`, or a size is not an integer.
    ValueError
        if ``mem_bytes`` or ``divisor`` is out of range, or ``counters`` names no
        counter set.
    """

    @refusing
    def __init__(self, cfg: Config, mem_bytes: int, divisor: int,
                 timing: Timing | None = None, accelerator: bool = True,
                 counters: str | CounterSet = "all", sdram: SdramPart | None = None,
                 clock_mhz: float | None = None, capture_cycles: int | None = None,
                 sdram_init_us: float = 200.0, shared_dma: bool = False, spram: bool = False) -> None:
        if not isinstance(cfg, Config):
            raise TypeError(f"cfg must be an openvta.isa.Config, not {cfg!r}")
        self._cfg = cfg
        self._mem_bytes = check_mem_bytes(mem_bytes)
        self._divisor = check_divisor(divisor)
        self._timing, self._shared_dma, self._spram = timing, bool(shared_dma), bool(spram)
        if self._spram and sdram is not None:
            raise ValueError("the DRAM is the SDRAM or the single-port on-chip RAM (spram), not both")
        self._accelerator = bool(accelerator)
        self._counters = counter_set(counters) if self._accelerator else CounterSet.NONE
        self._sdram: SdramController | None = None
        pins = {}
        if sdram is not None:
            if not isinstance(sdram, SdramPart):
                raise TypeError(f"sdram must be an SdramPart, not {sdram!r}")
            if mem_bytes != sdram.size_bytes:
                raise ValueError(f"mem_bytes must be the SDRAM's size, {sdram.size_bytes} ({sdram.name}), "
                                 f"not {mem_bytes!r}")
            if clock_mhz is None:
                raise ValueError("an SoC with SDRAM needs its clock_mhz (the SDRAM's timings in cycles)")
            self._sdram = SdramController(sdram, clock_mhz, cfg.bus_bytes, capture_cycles=capture_cycles,
                                          init_us=sdram_init_us)
            pins = {f"sdram_{name}": member for name, member in sdram_pins(sdram).items()}
        super().__init__({"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1), "leds": Out(4), **pins})

    @property
    def cfg(self) -> Config:
        return self._cfg

    @property
    def mem_bytes(self) -> int:
        return self._mem_bytes

    @property
    def divisor(self) -> int:
        return self._divisor

    @property
    def counter_set(self) -> CounterSet:
        """The counters built (``NONE`` for the link-test image)."""
        return self._counters

    @property
    def sdram(self) -> SdramController | None:
        """The SDRAM controller, or None for on-chip RAM."""
        return self._sdram

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bus_bits = self._cfg.bus_bytes * 8
        if self._sdram is None:
            m.submodules.ram = ram = AxiRam(self._mem_bytes, self._cfg.bus_bytes, single_port=self._spram)
            slave, byte_port = ram, ram.byte
        else:
            m.submodules.sdram = slave = self._sdram
            m.submodules.host = host = ByteToAxi(self._mem_bytes.bit_length() - 1, bus_bits)
            byte_port = host.byte
            for name, member in sdram_pins(self._sdram.part).items():
                if member.flow == Out:
                    m.d.comb += getattr(self, f"sdram_{name}").eq(getattr(slave, name))
                else:
                    m.d.comb += getattr(slave, name).eq(getattr(self, f"sdram_{name}"))
        m.submodules.rx = rx = UartRx(self._divisor)
        m.submodules.tx = tx = UartTx(self._divisor)
        m.submodules.bridge = bridge = Bridge(self._mem_bytes, len(self._counters.counters),
                                              frame_timeout_cycles(self._divisor),
                                              can_start=self._accelerator,
                                              counters=self._counters)
        busy, done = Signal(), Signal()
        if self._accelerator:
            m.submodules.core = core = Core(self._cfg, self._timing, self._counters, self._shared_dma)
            if self._sdram is None:
                _connect_axi(m, core, "m_axi_", slave, "s_axi_", bus_bits)
            else:  # the core and the bridge on the controller's one port
                m.submodules.join = join = AxiJoin(bus_bits)
                _connect_axi(m, core, "m_axi_", join, "m0_axi_", bus_bits)
                _connect_axi(m, host, "m_axi_", join, "m1_axi_", bus_bits)
                _connect_axi(m, join, "m_axi_", slave, "s_axi_", bus_bits)
            m.d.comb += [core.start.eq(bridge.start), core.insn_addr.eq(bridge.insn_addr),
                         core.insn_count.eq(bridge.insn_count), done.eq(core.done),
                         busy.eq(core.busy), bridge.counters.eq(core.counters)]
        wiring.connect(m, rx.o, bridge.rx)
        wiring.connect(m, bridge.tx, tx.i)
        if not self._accelerator and self._sdram is not None:
            _connect_axi(m, host, "m_axi_", slave, "s_axi_", bus_bits)
        wiring.connect(m, bridge.mem, byte_port)
        m.d.comb += [rx.rx.eq(self.uart_rx), self.uart_tx.eq(tx.tx), bridge.rx_error.eq(rx.error),
                     bridge.done.eq(done), bridge.busy.eq(busy)]
        hold = Signal(range(ACTIVITY_HOLD_CYCLES + 1))
        with m.If(bridge.active):
            m.d.sync += hold.eq(ACTIVITY_HOLD_CYCLES)
        with m.Elif(hold != 0):
            m.d.sync += hold.eq(hold - 1)
        error_seen = Signal()
        with m.If(bridge.error | rx.error):
            m.d.sync += error_seen.eq(1)
        m.d.comb += self.leds.eq(busy | (done << 1) | ((hold != 0) << 2)
                                 | (error_seen << 3))
        return m


def _connect_axi(m: Module, master: object, master_prefix: str, slave: object, slave_prefix: str,
                 bus_bits: int) -> None:
    """Wire the flat AXI4 ports ``master_prefix*`` of ``master`` to ``slave_prefix*`` of ``slave``."""
    for name, member in axi_master_signature(bus_bits).items():
        channel = name[len("m_axi_"):]
        out, inn = getattr(master, master_prefix + channel), getattr(slave, slave_prefix + channel)
        m.d.comb += inn.eq(out) if member.flow == Out else out.eq(inn)

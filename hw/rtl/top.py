"""The top level: the core behind an AXI4 master (``m_axi_*``) and AXI4-Lite registers (``s_axil_*``).

Ports are flat signals named as cocotbext-axi's ``from_prefix`` expects; the clock and
reset are Amaranth's ``clk`` and ``rst`` (active high).  The register map is
:mod:`openvta.isa.counters`' (start, status, instruction address and count, counters).
"""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring

from openvta.isa import Config, Timing
from openvta.isa.counters import CounterSet, counter_set

from .core import Core
from .csr import AXIL_MEMBERS as CSR_SIGNATURE_MEMBERS
from .csr import ControlRegisters
from .memory import axi_master_signature
from .params import refusing

__all__ = ["Top", "make_top"]


class Top(wiring.Component):
    """The accelerator as a system component: AXI4 master for memory, AXI4-Lite for control.

    ``counters`` (``"all"``, ``"cycles"`` or ``"none"``) and ``shared_dma`` are
    :class:`~.core.Core`'s build options; ``REG_COUNTERS`` reports the counters.
    """

    @refusing
    def __init__(self, cfg: Config, timing: Timing | None = None,
                 counters: str | CounterSet = "all", shared_dma: bool = False) -> None:
        self.counter_set = counter_set(counters)
        self.cfg, self.timing, self.shared_dma = cfg, timing, bool(shared_dma)
        members = dict(axi_master_signature(cfg.bus_bytes * 8))
        members.update(CSR_SIGNATURE_MEMBERS)
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.core = core = Core(self.cfg, self.timing, self.counter_set, self.shared_dma)
        m.submodules.csr = csr = ControlRegisters(len(self.counter_set.counters), self.counter_set)
        for part, names in ((core, axi_master_signature(self.cfg.bus_bytes * 8)),
                            (csr, CSR_SIGNATURE_MEMBERS)):
            for name in names:
                ours, theirs = getattr(self, name), getattr(part, name)
                if self.signature.members[name].flow == wiring.Out:
                    m.d.comb += ours.eq(theirs)
                else:
                    m.d.comb += theirs.eq(ours)
        m.d.comb += [core.start.eq(csr.start), core.insn_addr.eq(csr.insn_addr),
                     core.insn_count.eq(csr.insn_count), csr.done.eq(core.done),
                     csr.busy.eq(core.busy), csr.counters.eq(core.counters)]
        return m


def make_top(cfg: Config, timing: Timing | None = None) -> Top:
    """The top level for ``cfg`` (the factory the ``rtl`` back end builds: every counter,
    compared with the simulators')."""
    return Top(cfg, timing)

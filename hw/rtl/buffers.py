"""The on-chip buffers (docs/ISA.md §1): their geometry, and the signatures of their ports
as the modules that drive them see them.

One element per word: inp, wgt, acc, out and uop, and on machine v2 (docs/ISA.md §9)
the drain unit's epi buffer (words as wide as an acc tile).  :class:`~.core.Core` builds each as
an :class:`amaranth.lib.memory.Memory` and connects its ports to the modules' members
typed here (:func:`write_port`, :func:`read_port`), so both sides agree on every width.
"""

from __future__ import annotations

from amaranth import unsigned
from amaranth.utils import ceil_log2
from amaranth.lib import wiring
from amaranth.lib.memory import ReadPort, WritePort
from amaranth.lib.wiring import In

from openvta.isa import Config
from openvta.isa.config import UOP_WIDTH

__all__ = ["BUFFERS", "UNORDERED_READS", "UNORDERED_READS_SCRIPT", "buffer_geometry", "read_port",
           "write_port"]

#: The buffers, by name (``epi`` only with a drain unit).
BUFFERS = ("inp", "wgt", "acc", "out", "uop", "epi")
#: The buffers (``{name}_buffer`` in the netlist) of which no read whose data is used meets
#: a write of the same element in the same cycle, in a program the race checker accepts:
#: one written by one module and read by another is ordered by the dependency tokens; one
#: written and read by the same module (uop, epi) by its running one instruction at a
#: time, whose last write precedes its ``done``.  (Their read ports read every cycle, so an
#: unused read may collide; its data is dropped.)  Not ``acc``: compute reads the tile it
#: writes, and its read ports are transparent (forwarding relies on it).
UNORDERED_READS = ("inp", "wgt", "out", "uop", "epi")
#: The Yosys command, after reading the design, that leaves such a collision's result to
#: the block RAM (``COLLISION_X_MASK``).  Without it, Yosys keeps Amaranth's read-first
#: semantics with a registered copy of every write and a bypass multiplexer per read
#: port: 586 of the UP5K design's logic cells; 722 LUT4 and 1 389 flip-flops of the
#: ECP5's lean ``small`` (docs/FPGA_NOTES.md).
#: The same holds for the drain's cleared bits (``cleared_bits_*``, :class:`~.core.ClearedTiles`),
#: whose reads correct the writes still pending themselves.
_UNORDERED_MEMIDS = (*(f"*{name}_buffer" for name in UNORDERED_READS), "*cleared_bits_*")
UNORDERED_READS_SCRIPT = ("setparam -set COLLISION_X_MASK 1'1 t:$memrd_v2 "
                          + " ".join(f"r:MEMID={pattern}" for pattern in _UNORDERED_MEMIDS)
                          + " %u" * (len(_UNORDERED_MEMIDS) - 1) + " %i")


def buffer_geometry(cfg: Config) -> dict[str, tuple[int, int]]:
    """(element width in bits, depth in elements) of each buffer of ``cfg``."""
    geometry = {"inp": (cfg.inp_elem_bytes * 8, cfg.inp_depth), "wgt": (cfg.wgt_elem_bytes * 8, cfg.wgt_depth),
                "acc": (cfg.acc_elem_bytes * 8, cfg.acc_depth), "out": (cfg.out_elem_bytes * 8, cfg.out_depth),
                "uop": (UOP_WIDTH, cfg.uop_depth)}
    if cfg.has_drain:
        geometry["epi"] = (cfg.acc_elem_bytes * 8, cfg.epi_depth)
    return geometry


def write_port(cfg: Config, buffer: str) -> wiring.Member:
    """A member driving a write port of ``buffer`` (``en``, ``addr``, ``data`` out)."""
    width, depth = buffer_geometry(cfg)[buffer]
    return In(WritePort.Signature(addr_width=ceil_log2(depth), shape=unsigned(width)))


def read_port(cfg: Config, buffer: str) -> wiring.Member:
    """A member driving a read port of ``buffer`` (``en``, ``addr`` out; ``data`` in, a cycle
    after its address)."""
    width, depth = buffer_geometry(cfg)[buffer]
    return In(ReadPort.Signature(addr_width=ceil_log2(depth), shape=unsigned(width)))

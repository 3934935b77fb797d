"""Replicated registers: one control bit registered once per group of the bits it drives.

A register that selects between two tiles drives every bit of them: on the ECP5 the
select of the compute unit's forwarding multiplexers fans out to 512 LUTs across the
die, and its net alone took 5 to 7 ns of the 20 ns clock period (docs/FPGA_NOTES.md).
Registering the same bit once per lane, each copy driving its lane's 32 multiplexers
only, keeps every such net short, at no cycle: the copies hold the same value.

Yosys merges identical flip-flops (``opt_merge``) unless the cell is marked ``keep``,
and Amaranth's attributes go on the wire, not the cell: :data:`KEEP_REPLICAS` is the
command that marks the flip-flops driving the wires :func:`replicas` names, for the
bitstream build to run after reading the design.
"""

from __future__ import annotations

from amaranth import Module, Signal, Value

__all__ = ["KEEP_REPLICAS", "REPLICA_ATTR", "replicas"]

#: The wire attribute of every copy.
REPLICA_ATTR = "openvta_replica"
#: The flip-flop cells Yosys may read from Amaranth's RTLIL (``$dff`` in a domain with a
#: synchronous reset, ``$adff`` with an asynchronous one) or make of them before synthesis.
_FLIP_FLOPS = "$dff,$adff,$dffe,$adffe,$sdff,$sdffe,$sdffce,$aldff,$aldffe"
#: Yosys commands: the flip-flop cells driving a replica wire are kept (not merged).
KEEP_REPLICAS = f"setattr -set keep 1 a:{REPLICA_ATTR} %ci1:+{_FLIP_FLOPS}[Q] a:{REPLICA_ATTR} %d"


def replicas(m: Module, name: str, value: Value, copies: int) -> list[Signal]:
    """``copies`` registers of ``value`` (next cycle's value, each the same, of its
    shape), named ``{name}_{k}``."""
    regs = [Signal.like(value, name=f"{name}_{k}", attrs={REPLICA_ATTR: 1}) for k in range(copies)]
    m.d.sync += [reg.eq(value) for reg in regs]
    return regs

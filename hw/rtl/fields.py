"""Instruction and micro-op layouts as Amaranth ``data.StructLayout``s, derived from :mod:`openvta.isa`.

Every offset and width comes from :func:`openvta.isa.layouts_of` (the gaps the ISA
leaves become padding members); nothing here is typed in by hand.  :class:`Decoded`
views one latched 128-bit instruction through the layout of each format.
"""

from __future__ import annotations

from functools import cache

from amaranth import Shape, signed, unsigned
from amaranth.hdl import Value
from amaranth.lib import data

from openvta.isa import Config, Format, layouts_of

__all__ = ["struct_layout", "Decoded", "uop_fields"]


@cache
def struct_layout(cfg: Config, fmt: str) -> data.StructLayout:
    """The ``StructLayout`` of format ``fmt`` (``Format.MEM``, ``GEMM``, ``ALU``, ``UOP``)."""
    layout = layouts_of(cfg)[fmt]
    members: dict[str, Shape] = {}
    offset = 0
    for f in sorted(layout.fields, key=lambda f: f.offset):
        if f.offset > offset:
            members[f"_pad_{offset}"] = unsigned(f.offset - offset)
        members[f.name] = signed(f.width) if f.signed else unsigned(f.width)
        offset = f.offset + f.width
    if offset < layout.total_width:
        members[f"_pad_{offset}"] = unsigned(layout.total_width - offset)
    return data.StructLayout(members)


class Decoded:
    """Named access to every field of every format of one 128-bit instruction word."""

    def __init__(self, word: Value, cfg: Config) -> None:
        self.word = word
        self.cfg = cfg
        self.views = {fmt: data.View(struct_layout(cfg, fmt), word)
                      for fmt in (Format.MEM, Format.GEMM, Format.ALU)}

    def mem(self, name: str) -> Value:
        return Value.cast(self.views[Format.MEM][name])

    def gemm(self, name: str) -> Value:
        return Value.cast(self.views[Format.GEMM][name])

    def alu(self, name: str) -> Value:
        return Value.cast(self.views[Format.ALU][name])

    @property
    def opcode(self) -> Value:
        return self.mem("opcode")

    def flag(self, name: str) -> Value:
        return self.mem(name)


def uop_fields(word: Value, cfg: Config) -> tuple[Value, Value, Value]:
    """(dst_idx, src_idx, wgt_idx) of a 32-bit micro-op word."""
    view = data.View(struct_layout(cfg, Format.UOP), word)
    return view["dst_idx"], view["src_idx"], view["wgt_idx"]

"""Instruction and micro-op fields as slices of a word, derived from :mod:`openvta.isa`.

Every offset and width comes from :func:`openvta.isa.layouts_of`; nothing here is typed
in by hand.  :class:`Decoded` holds the fields of one latched instruction as Amaranth
values (slices of the 128-bit word).
"""

from __future__ import annotations

from amaranth.hdl import Value

from openvta.isa import Config, Format, layouts_of

__all__ = ["field", "Decoded", "uop_fields"]


def field(word: Value, cfg: Config, fmt: str, name: str) -> Value:
    """The bits of field ``name`` of format ``fmt`` in ``word`` (signed fields as signed)."""
    f = layouts_of(cfg)[fmt].field(name)
    bits = word[f.offset : f.offset + f.width]
    return bits.as_signed() if f.signed else bits


class Decoded:
    """Named access to every field of every format of one 128-bit instruction word."""

    def __init__(self, word: Value, cfg: Config) -> None:
        self.word = word
        self.cfg = cfg

    def mem(self, name: str) -> Value:
        return field(self.word, self.cfg, Format.MEM, name)

    def gemm(self, name: str) -> Value:
        return field(self.word, self.cfg, Format.GEMM, name)

    def alu(self, name: str) -> Value:
        return field(self.word, self.cfg, Format.ALU, name)

    @property
    def opcode(self) -> Value:
        return self.mem("opcode")

    def flag(self, name: str) -> Value:
        return self.mem(name)


def uop_fields(word: Value, cfg: Config) -> tuple[Value, Value, Value]:
    """(dst_idx, src_idx, wgt_idx) of a 32-bit micro-op word."""
    return tuple(field(word, cfg, Format.UOP, n) for n in ("dst_idx", "src_idx", "wgt_idx"))  # type: ignore[return-value]

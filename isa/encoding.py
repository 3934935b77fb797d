"""Bit layouts of instructions and micro-ops, derived from a :class:`Config`.

docs/ISA.md §2: fields are packed from bit 0 upward and a field never straddles bit 64
(it then starts at bit 64, the bits left in word 0 are zero padding).  This module
computes every offset from the field widths; scalar and vectorized (numpy) packing
share the same tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .widths import INSN_WIDTH, LOOP_ITER_WIDTH, SRAM_BASE_WIDTH, UOP_WIDTH, ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Field", "Layout", "ISAError", "layouts_of", "Format"]

WORD_BITS = 64


class ISAError(ValueError):
    """A value that the encoding cannot represent, or a word that is not a valid encoding."""


@dataclass(frozen=True)
class Field:
    """One bit field: ``width`` bits starting at ``offset`` of the 128-bit word."""

    name: str
    offset: int
    width: int
    signed: bool = False

    @property
    def word(self) -> int:
        """Which 64-bit word holds the field (0 or 1)."""
        return self.offset // WORD_BITS

    @property
    def shift(self) -> int:
        return self.offset % WORD_BITS

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    @property
    def low(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def high(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else self.mask

    def check(self, value: int, what: str) -> None:
        if not self.low <= value <= self.high:
            kind = "signed" if self.signed else "unsigned"
            raise ISAError(
                f"{what} field {self.name} ({self.width} bits, {kind}: {self.low}..{self.high}) "
                f"cannot hold {value!r}"
            )


class Format:
    """Names of the layouts (instruction formats) of docs/ISA.md §2."""

    MEM = "memory"
    GEMM = "gemm"
    ALU = "alu"
    UOP = "uop"


@dataclass(frozen=True)
class Layout:
    """An ordered set of fields packed into ``total_width`` bits."""

    name: str
    fields: tuple[Field, ...]
    total_width: int

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} layout has no field {name!r}")

    # -- scalar ----------------------------------------------------------------
    def pack(self, values: Mapping[str, int]) -> int:
        """Pack field values (missing ones are zero) into an integer word."""
        word = 0
        for f in self.fields:
            value = int(values.get(f.name, 0))
            f.check(value, self.name)
            word |= (value & f.mask) << f.offset
        return word

    def unpack(self, word: int) -> dict[str, int]:
        out = {}
        for f in self.fields:
            value = (word >> f.offset) & f.mask
            if f.signed and value >> (f.width - 1):
                value -= 1 << f.width
            out[f.name] = value
        return out

    def padding_bits(self, word: int) -> int:
        """The bits of ``word`` that no field covers (must be zero)."""
        covered = 0
        for f in self.fields:
            covered |= f.mask << f.offset
        return word & ~covered & ((1 << self.total_width) - 1)

    # -- vectorized ------------------------------------------------------------
    def pack_array(self, values: Mapping[str, np.ndarray], count: int) -> np.ndarray:
        """Pack arrays of field values into ``(count, words)`` uint64 words."""
        nwords = max(1, self.total_width // WORD_BITS)
        words = np.zeros((count, nwords), dtype=np.uint64)
        for f in self.fields:
            if f.name not in values:
                continue
            column = np.asarray(values[f.name], dtype=np.int64)
            bad = (column < f.low) | (column > f.high)
            if bad.any():
                index = int(np.flatnonzero(bad)[0])
                f.check(int(column[index]), f"{self.name} (entry {index})")
            bits = (column & f.mask).astype(np.uint64) << np.uint64(f.shift)
            words[:, f.word] |= bits
        return words

    def unpack_array(self, words: np.ndarray) -> dict[str, np.ndarray]:
        """Unpack ``(count, words)`` uint64 words into int64 arrays, one per field."""
        out = {}
        for f in self.fields:
            raw = (words[:, f.word] >> np.uint64(f.shift)) & np.uint64(f.mask)
            value = raw.astype(np.int64)
            if f.signed:
                value = np.where(value >> (f.width - 1), value - (1 << f.width), value)
            out[f.name] = value
        return out


def _pack_layout(name: str, spec: list[tuple[str, int, bool]], total_width: int) -> Layout:
    fields = []
    offset = 0
    for field_name, width, signed in spec:
        if width < 1:
            raise ConfigError(f"{name} field {field_name} must be at least 1 bit wide, not {width}")
        word_end = (offset // WORD_BITS + 1) * WORD_BITS
        if total_width > WORD_BITS and offset + width > word_end:
            offset = word_end  # a field never straddles bit 64
        if offset + width > total_width:
            raise ConfigError(
                f"{name} field {field_name} ({width} bits at bit {offset}) does not fit in "
                f"{total_width} bits; reduce the buffer sizes of the configuration"
            )
        fields.append(Field(field_name, offset, width, signed))
        offset += width
    return Layout(name, tuple(fields), total_width)


HEADER = [
    ("opcode", 3, False),
    ("pop_prev_dep", 1, False),
    ("pop_next_dep", 1, False),
    ("push_prev_dep", 1, False),
    ("push_next_dep", 1, False),
]

MEM_FIELDS = [
    ("memory_type", 3, False),
    ("sram_base", SRAM_BASE_WIDTH, False),
    ("dram_base", 32, False),
    # LOAD INP: padding elements hold -128 (the code of 0.0 at zero point -128), not 0;
    # in word 0's spare bits, so no other field moves (docs/ISA.md §3)
    ("pad_min", 1, False),
    ("y_size", 16, False),
    ("x_size", 16, False),
    ("x_stride", 16, False),
    ("y_pad_0", 4, False),
    ("y_pad_1", 4, False),
    ("x_pad_0", 4, False),
    ("x_pad_1", 4, False),
]


class BufferDepths(Protocol):
    """What the layouts depend on: the log2 depths of the four buffers a field indexes
    (a :class:`~openvta.isa.Config`, which imports this module to check its fields fit)."""

    @property
    def LOG_UOP_DEPTH(self) -> int: ...
    @property
    def LOG_ACC_DEPTH(self) -> int: ...
    @property
    def LOG_INP_DEPTH(self) -> int: ...
    @property
    def LOG_WGT_DEPTH(self) -> int: ...


@cache
def layouts_of(cfg: BufferDepths) -> dict[str, Layout]:
    """Every layout of ``cfg``: memory, GEMM (also FINISH), ALU and micro-op.

    Raises
    ------
    ConfigError
        naming the first field that does not fit its word.
    """
    uop = cfg.LOG_UOP_DEPTH
    acc = cfg.LOG_ACC_DEPTH
    inp = cfg.LOG_INP_DEPTH
    wgt = cfg.LOG_WGT_DEPTH
    loops = [
        ("reset_reg", 1, False),
        ("uop_bgn", uop, False),
        ("uop_end", uop + 1, False),
        ("iter_out", LOOP_ITER_WIDTH, False),
        ("iter_in", LOOP_ITER_WIDTH, False),
        ("dst_factor_out", acc, False),
        ("dst_factor_in", acc, False),
    ]
    gemm = HEADER + loops + [
        ("src_factor_out", inp, False),
        ("src_factor_in", inp, False),
        ("wgt_factor_out", wgt, False),
        ("wgt_factor_in", wgt, False),
    ]
    alu = HEADER + loops + [
        ("src_factor_out", acc, False),
        ("src_factor_in", acc, False),
        ("alu_opcode", 3, False),
        ("use_imm", 1, False),
        ("imm", 16, True),
    ]
    uop_spec = [
        ("dst_idx", acc, False),
        ("src_idx", max(acc, inp), False),
        ("wgt_idx", wgt, False),
    ]
    return {
        Format.MEM: _pack_layout("LOAD/STORE", HEADER + MEM_FIELDS, INSN_WIDTH),
        Format.GEMM: _pack_layout("GEMM", gemm, INSN_WIDTH),
        Format.ALU: _pack_layout("ALU", alu, INSN_WIDTH),
        Format.UOP: _pack_layout("micro-op", uop_spec, UOP_WIDTH),
    }

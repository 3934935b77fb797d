"""A deliberately naive model of docs/ISA.md §1–§2, written from the spec, not from ``isa/``.

The default-configuration bit tables are typed in straight from docs/ISA.md (``[hi:lo]``
per field, in table order): they are the contract the tests hold ``isa/`` to.  The
configuration-dependent widths are the formulas of the same tables, and
:func:`reference_pack` is the packing rule of §2 in its simplest form.
"""

from __future__ import annotations

from collections.abc import Mapping

WORD_BITS = 64
INSN_BITS = 128
UOP_BITS = 32

# -- docs/ISA.md §2, default configuration: (field, hi, lo) -----------------------------
HEADER_BITS = [
    ("opcode", 2, 0),
    ("pop_prev_dep", 3, 3),
    ("pop_next_dep", 4, 4),
    ("push_prev_dep", 5, 5),
    ("push_next_dep", 6, 6),
]

MEM_BITS = HEADER_BITS + [
    ("memory_type", 9, 7),
    ("sram_base", 25, 10),
    ("dram_base", 57, 26),
    ("pad_min", 58, 58),
    # [63:59] padding
    ("y_size", 79, 64),
    ("x_size", 95, 80),
    ("x_stride", 111, 96),
    ("y_pad_0", 115, 112),
    ("y_pad_1", 119, 116),
    ("x_pad_0", 123, 120),
    ("x_pad_1", 127, 124),
]

_LOOP_BITS = [
    ("reset_reg", 7, 7),
    ("uop_bgn", 20, 8),
    ("uop_end", 34, 21),
    ("iter_out", 48, 35),
    ("iter_in", 62, 49),
    # [63] padding
    ("dst_factor_out", 74, 64),
    ("dst_factor_in", 85, 75),
    ("src_factor_out", 96, 86),
    ("src_factor_in", 107, 97),
]

GEMM_BITS = HEADER_BITS + _LOOP_BITS + [
    ("wgt_factor_out", 117, 108),
    ("wgt_factor_in", 127, 118),
]

ALU_BITS = HEADER_BITS + _LOOP_BITS + [
    ("alu_opcode", 110, 108),
    ("use_imm", 111, 111),
    ("imm", 127, 112),
]

UOP_BITS_TABLE = [
    ("dst_idx", 10, 0),
    ("src_idx", 21, 11),
    ("wgt_idx", 31, 22),
]

#: Padding bits of the default layouts (docs/ISA.md §2: "[63:59] padding", "[63] padding").
MEM_PADDING_MASK = ((1 << 5) - 1) << 59
LOOP_PADDING_MASK = 1 << 63

SIGNED_FIELDS = {"imm"}
DEP_FLAGS = ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")

#: docs/ISA.md §2 enumerations.
OPCODES = {"LOAD": 0, "STORE": 1, "GEMM": 2, "FINISH": 3, "ALU": 4}
# EPI and EPI_8BIT (6, 7) are machine v2's (docs/ISA.md §9): valid only with a drain unit.
MEMORY_TYPES = {"UOP": 0, "WGT": 1, "INP": 2, "ACC": 3, "OUT": 4, "ACC_8BIT": 5, "EPI": 6, "EPI_8BIT": 7}
V2_MEMORY_TYPES = {"EPI": 6, "EPI_8BIT": 7}
ALU_OPCODES = {"MIN": 0, "MAX": 1, "ADD": 2, "SHR": 3, "MUL": 4}


def as_offsets(table: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """``(name, hi, lo)`` rows as ``(name, offset, width)``."""
    return [(name, lo, hi - lo + 1) for name, hi, lo in table]


# -- docs/ISA.md §1: derived depths ------------------------------------------------------
def log_depths(params: Mapping[str, int]) -> dict[str, int]:
    """LOG_*_DEPTH from the raw log2 parameters (int8 inp/wgt/out, int32 acc, 4-byte uop)."""
    batch, block = 1 << params["LOG_BATCH"], 1 << params["LOG_BLOCK"]
    tile_bytes = {
        "UOP": 4,
        "INP": batch * block * 1,
        "WGT": block * block * 1,
        "ACC": batch * block * 4,
    }
    out = {}
    for name, nbytes in tile_bytes.items():
        # depth = buffer bytes / tile bytes, kept as log2 (<= 0 for a buffer too small)
        out[f"LOG_{name}_DEPTH"] = params[f"LOG_{name}_BUFF_SIZE"] - (nbytes.bit_length() - 1)
    return out


def spec_widths(depths: Mapping[str, int]) -> dict[str, list[tuple[str, int]]]:
    """Field order and widths of every layout, from the docs/ISA.md §2 width column."""
    uop, acc = depths["LOG_UOP_DEPTH"], depths["LOG_ACC_DEPTH"]
    inp, wgt = depths["LOG_INP_DEPTH"], depths["LOG_WGT_DEPTH"]
    loops = {"uop_bgn": uop, "uop_end": uop + 1, "dst_factor_out": acc, "dst_factor_in": acc}
    gemm = {**loops, "src_factor_out": inp, "src_factor_in": inp,
            "wgt_factor_out": wgt, "wgt_factor_in": wgt}
    alu = {**loops, "src_factor_out": acc, "src_factor_in": acc}
    uops = {"dst_idx": acc, "src_idx": max(acc, inp), "wgt_idx": wgt}

    def widths(
        table: list[tuple[str, int, int]], variable: Mapping[str, int]
    ) -> list[tuple[str, int]]:
        return [(name, variable.get(name, width)) for name, _, width in as_offsets(table)]

    return {
        "memory": widths(MEM_BITS, {}),
        "gemm": widths(GEMM_BITS, gemm),
        "alu": widths(ALU_BITS, alu),
        "uop": widths(UOP_BITS_TABLE, uops),
    }


def reference_pack(widths: list[tuple[str, int]], total: int) -> list[tuple[str, int, int]] | str:
    """Pack upward from bit 0; a field that would straddle bit 64 starts at bit 64.

    Returns ``(name, offset, width)`` rows, or the name of the first field that does
    not fit in ``total`` bits.
    """
    rows = []
    offset = 0
    for name, width in widths:
        if total > WORD_BITS and offset < WORD_BITS < offset + width:
            offset = WORD_BITS
        if width < 1 or offset + width > total:
            return name
        rows.append((name, offset, width))
        offset += width
    return rows


TOTAL_BITS = {"memory": INSN_BITS, "gemm": INSN_BITS, "alu": INSN_BITS, "uop": UOP_BITS}

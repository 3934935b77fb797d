"""Bit layouts (docs/ISA.md §2): bit-exact tables, the straddle rule, known words, range errors."""

from __future__ import annotations

import pytest

from openvta.isa import (
    AluInsn,
    AluOp,
    Config,
    FinishInsn,
    Format,
    GemmInsn,
    ISAError,
    MemInsn,
    MemoryType,
    Opcode,
    Uop,
    layouts_of,
    preset,
)
from openvta.isa.instructions import valid_members

from isa_reference import (
    ALU_BITS,
    GEMM_BITS,
    LOOP_PADDING_MASK,
    MEM_BITS,
    MEM_PADDING_MASK,
    SIGNED_FIELDS,
    TOTAL_BITS,
    UOP_BITS_TABLE,
    as_offsets,
    reference_pack,
    spec_widths,
)

PRESET_NAMES = ("vta", "small", "tiny")
SPEC_TABLES = {"memory": MEM_BITS, "gemm": GEMM_BITS, "alu": ALU_BITS, "uop": UOP_BITS_TABLE}
FORMATS = ("memory", "gemm", "alu", "uop")


def _rows(cfg: Config, fmt: str) -> list[tuple[str, int, int]]:
    return [(f.name, f.offset, f.width) for f in layouts_of(cfg)[fmt].fields]


def _depths(cfg: Config) -> dict[str, int]:
    return {key: getattr(cfg, key) for key in
            ("LOG_UOP_DEPTH", "LOG_INP_DEPTH", "LOG_WGT_DEPTH", "LOG_ACC_DEPTH")}


def test_format_names():
    assert (Format.MEM, Format.GEMM, Format.ALU, Format.UOP) == FORMATS
    assert set(layouts_of(preset("vta"))) == set(FORMATS)


# -- vta configuration: bit-exact with the docs/ISA.md tables ---------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_vta_layout_is_the_spec_table(fmt):
    cfg = preset("vta")
    assert _rows(cfg, fmt) == as_offsets(SPEC_TABLES[fmt])
    layout = layouts_of(cfg)[fmt]
    assert layout.total_width == TOTAL_BITS[fmt]
    assert {f.name for f in layout.fields if f.signed} == SIGNED_FIELDS & set(layout.names)


@pytest.mark.parametrize(
    ("fmt", "padding"),
    [("memory", MEM_PADDING_MASK), ("gemm", LOOP_PADDING_MASK), ("alu", LOOP_PADDING_MASK),
     ("uop", 0)],
)
def test_vta_padding_bits(fmt, padding):
    layout = layouts_of(preset("vta"))[fmt]
    all_ones = (1 << layout.total_width) - 1
    assert layout.padding_bits(all_ones) == padding
    assert layout.padding_bits(all_ones & ~padding) == 0


@pytest.mark.parametrize("fmt", ("memory", "gemm", "alu"))
def test_vta_fields_walking_one(fmt):
    """Each field alone, set to 1 and then to all ones (the last enum member, -1 for imm),
    lands at its docs/ISA.md bits."""
    cfg = preset("vta")
    opcode = {"memory": Opcode.LOAD, "gemm": Opcode.GEMM, "alu": Opcode.ALU}[fmt]
    cls = {"memory": MemInsn, "gemm": GemmInsn, "alu": AluInsn}[fmt]
    for name, hi, lo in SPEC_TABLES[fmt]:
        if name == "opcode":
            continue
        base = {"memory_type": MemoryType.UOP} if fmt == "memory" else {}  # UOP = 0
        width = hi - lo + 1
        if name in ("memory_type", "alu_opcode"):
            # The last member valid on vta: ACC_8BIT (EPI, EPI_8BIT need a drain unit).
            values = [1, max(valid_members("memory_type", cfg).values() if name == "memory_type" else AluOp)]
        else:
            values = [1, -1 if name in SIGNED_FIELDS else (1 << width) - 1]
        for value in values:
            insn = cls(cfg=cfg, opcode=opcode, **{**base, name: value})
            bits = int(value) & ((1 << width) - 1)
            assert insn.encode() == int(opcode) | (bits << lo), (name, value)


def test_vta_uop_walking_one():
    cfg = preset("vta")
    for name, hi, lo in UOP_BITS_TABLE:
        for value in (1, (1 << (hi - lo + 1)) - 1):
            assert Uop(**{name: value}).encode(cfg) == value << lo


# -- every preset: widths from the §2 formulas, the straddle rule ---------------------


@pytest.mark.parametrize("name", PRESET_NAMES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_layout_matches_naive_packer(name, fmt):
    cfg = preset(name)
    widths = spec_widths(_depths(cfg))[fmt]
    assert [(f.name, f.width) for f in layouts_of(cfg)[fmt].fields] == widths
    assert _rows(cfg, fmt) == reference_pack(widths, TOTAL_BITS[fmt])


@pytest.mark.parametrize("name", PRESET_NAMES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_straddle_rule(name, fmt):
    fields = layouts_of(preset(name))[fmt].fields
    assert fields[0].offset == 0
    for before, after in zip(fields, fields[1:]):
        end = before.offset + before.width
        would_straddle = fmt != "uop" and end < 64 < end + after.width
        assert after.offset == (64 if would_straddle else end), after.name
    for f in fields:
        assert f.offset // 64 == (f.offset + f.width - 1) // 64, f.name
        assert f.offset + f.width <= TOTAL_BITS[fmt]
        assert f.word == f.offset // 64 and f.shift == f.offset % 64


def test_tiny_keeps_dst_factor_out_in_word_0():
    cfg = preset("tiny")
    for fmt in ("gemm", "alu"):
        layout = layouts_of(cfg)[fmt]
        iter_in, dst_out = layout.field("iter_in"), layout.field("dst_factor_out")
        assert dst_out.offset == iter_in.offset + iter_in.width
        assert dst_out.offset + dst_out.width <= 64
        assert layout.field("dst_factor_in").offset == 64


def test_small_moves_dst_factor_out_to_word_1():
    layout = layouts_of(preset("small"))["gemm"]
    iter_in, dst_out = layout.field("iter_in"), layout.field("dst_factor_out")
    assert iter_in.offset + iter_in.width + dst_out.width > 64
    assert dst_out.offset == 64


def test_layouts_are_cached_per_config():
    assert layouts_of(Config()) is layouts_of(preset("vta"))


# -- known words, by hand-shifting per docs/ISA.md ---------------------------------------------


def test_known_load_word():
    insn = MemInsn(
        cfg=preset("vta"), opcode=Opcode.LOAD, memory_type=MemoryType.INP,
        pop_next_dep=True, push_next_dep=True, sram_base=0x1234, dram_base=0xDEADBEEF,
        y_size=0x0102, x_size=0x0304, x_stride=0x0506, y_pad_0=1, y_pad_1=2, x_pad_0=3, x_pad_1=4,
    )
    expected = (
        0 | 1 << 4 | 1 << 6 | 2 << 7 | 0x1234 << 10 | 0xDEADBEEF << 26
        | 0x0102 << 64 | 0x0304 << 80 | 0x0506 << 96 | 1 << 112 | 2 << 116 | 3 << 120 | 4 << 124
    )
    assert insn.encode() == expected
    assert insn.to_bytes() == expected.to_bytes(16, "little")


def test_known_store_word():
    insn = MemInsn(cfg=preset("vta"), opcode=Opcode.STORE, memory_type=MemoryType.OUT,
                   pop_prev_dep=True, push_prev_dep=True, sram_base=7, dram_base=9,
                   y_size=1, x_size=2, x_stride=2)
    expected = 1 | 1 << 3 | 1 << 5 | 4 << 7 | 7 << 10 | 9 << 26 | 1 << 64 | 2 << 80 | 2 << 96
    assert insn.encode() == expected


def test_known_gemm_word():
    insn = GemmInsn(
        cfg=preset("vta"), pop_prev_dep=True, push_prev_dep=True, reset_reg=True,
        uop_bgn=3, uop_end=0x2001, iter_out=0x3FFF, iter_in=5, dst_factor_out=0x7FF,
        dst_factor_in=1, src_factor_out=16, src_factor_in=2, wgt_factor_out=0x3FF, wgt_factor_in=6,
    )
    expected = (
        2 | 1 << 3 | 1 << 5 | 1 << 7 | 3 << 8 | 0x2001 << 21 | 0x3FFF << 35 | 5 << 49
        | 0x7FF << 64 | 1 << 75 | 16 << 86 | 2 << 97 | 0x3FF << 108 | 6 << 118
    )
    assert insn.encode() == expected


def test_known_alu_word_with_negative_imm():
    insn = AluInsn(cfg=preset("vta"), alu_opcode=AluOp.SHR, use_imm=True, imm=-2,
                   uop_bgn=16, uop_end=17, iter_out=64, iter_in=1, dst_factor_out=1)
    expected = (
        4 | 16 << 8 | 17 << 21 | 64 << 35 | 1 << 49 | 1 << 64
        | 3 << 108 | 1 << 111 | 0xFFFE << 112
    )
    assert insn.encode() == expected


def test_known_finish_word():
    assert FinishInsn(cfg=preset("vta")).encode() == 3
    flagged = FinishInsn(cfg=preset("vta"), pop_prev_dep=True, pop_next_dep=True)
    assert flagged.encode() == 3 | 1 << 3 | 1 << 4


def test_known_uop_word():
    assert Uop(dst_idx=5, src_idx=7, wgt_idx=9).encode(preset("vta")) == 5 | 7 << 11 | 9 << 22


# -- range errors on encode -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("insn", "message"),
    [
        (MemInsn(cfg=Config(), sram_base=1 << 16),
         r"^LOAD/STORE field sram_base \(16 bits, unsigned: 0\.\.65535\) cannot hold 65536$"),
        (MemInsn(cfg=Config(), dram_base=-1),
         r"^LOAD/STORE field dram_base \(32 bits, unsigned: 0\.\.4294967295\) cannot hold -1$"),
        (MemInsn(cfg=Config(), x_pad_1=16),
         r"^LOAD/STORE field x_pad_1 \(4 bits, unsigned: 0\.\.15\) cannot hold 16$"),
        (GemmInsn(cfg=Config(), uop_bgn=8192),
         r"^GEMM field uop_bgn \(13 bits, unsigned: 0\.\.8191\) cannot hold 8192$"),
        (GemmInsn(cfg=Config(), iter_in=1 << 14),
         r"^GEMM field iter_in \(14 bits, unsigned: 0\.\.16383\) cannot hold 16384$"),
        (GemmInsn(cfg=preset("tiny"), wgt_factor_in=256),
         r"^GEMM field wgt_factor_in \(8 bits, unsigned: 0\.\.255\) cannot hold 256$"),
        (FinishInsn(cfg=Config(), uop_end=1 << 14),
         r"^GEMM field uop_end \(14 bits, unsigned: 0\.\.16383\) cannot hold 16384$"),
        (AluInsn(cfg=Config(), imm=32768),
         r"^ALU field imm \(16 bits, signed: -32768\.\.32767\) cannot hold 32768$"),
        (AluInsn(cfg=Config(), imm=-32769),
         r"^ALU field imm \(16 bits, signed: -32768\.\.32767\) cannot hold -32769$"),
        (AluInsn(cfg=preset("small"), src_factor_out=1024),
         r"^ALU field src_factor_out \(10 bits, unsigned: 0\.\.1023\) cannot hold 1024$"),
    ],
    ids=lambda value: getattr(value, "format", None),
)
def test_encode_out_of_range_field(insn, message):
    with pytest.raises(ISAError, match=message):
        insn.encode()


def test_imm_limits_encode():
    cfg = preset("vta")
    assert AluInsn(cfg=cfg, imm=32767).encode() >> 112 == 0x7FFF
    assert AluInsn(cfg=cfg, imm=-32768).encode() >> 112 == 0x8000


@pytest.mark.parametrize(
    ("uop", "message"),
    [
        (Uop(dst_idx=2048),
         r"^micro-op field dst_idx \(11 bits, unsigned: 0\.\.2047\) cannot hold 2048$"),
        (Uop(src_idx=-1),
         r"^micro-op field src_idx \(11 bits, unsigned: 0\.\.2047\) cannot hold -1$"),
        (Uop(wgt_idx=1024),
         r"^micro-op field wgt_idx \(10 bits, unsigned: 0\.\.1023\) cannot hold 1024$"),
    ],
)
def test_uop_encode_out_of_range(uop, message):
    with pytest.raises(ISAError, match=message):
        uop.encode(preset("vta"))


@pytest.mark.parametrize(
    ("insn", "message"),
    [
        # docs/ISA.md §2: memory_type 6-7, alu_opcode 5-7 and opcode 5-7 are not encodings.
        (MemInsn(cfg=Config(), memory_type=6), r"^.*\bmemory_type\b.*\b6\b"),
        (MemInsn(cfg=Config(), memory_type=7), r"^.*\bmemory_type\b.*\b7\b"),
        (AluInsn(cfg=Config(), alu_opcode=5), r"^.*\balu_opcode\b.*\b5\b"),
        (MemInsn(cfg=Config(), opcode=7), r"^.*\bopcode\b.*\b7\b"),
        # An opcode that is not its object's format would decode as another instruction.
        (MemInsn(cfg=Config(), opcode=Opcode.GEMM), r"^.*\bopcode\b"),
        (GemmInsn(cfg=Config(), opcode=Opcode.ALU), r"^.*\bopcode\b"),
    ],
    ids=["memory_type6", "memory_type7", "alu_opcode5", "opcode7", "mem_as_gemm", "gemm_as_alu"],
)
def test_encode_rejects_invalid_enumerated_values(insn, message):
    with pytest.raises(ISAError, match=message):
        insn.encode()


@pytest.mark.parametrize("memory_type", [MemoryType.EPI, MemoryType.EPI_8BIT])
def test_epi_memory_types_encode_only_with_a_drain_unit(memory_type):
    # docs/ISA.md §9: memory types 6-7 are encodings of machine v2 (a drain unit) only.
    insn = MemInsn(cfg=preset("v2"), opcode=Opcode.LOAD, memory_type=memory_type)
    assert insn.encode() == int(Opcode.LOAD) | (int(memory_type) << 7)
    for name in ("vta", "small", "tiny"):
        with pytest.raises(ISAError, match=rf"^field memory_type value {int(memory_type)} is not valid"):
            insn.replace(cfg=preset(name)).encode()


def test_isa_error_is_a_value_error():
    assert issubclass(ISAError, ValueError)


def test_layout_field_lookup():
    layout = layouts_of(preset("vta"))["memory"]
    assert layout.field("x_size").offset == 80
    with pytest.raises(KeyError, match=r"^\"LOAD/STORE layout has no field 'imm'\"$"):
        layout.field("imm")

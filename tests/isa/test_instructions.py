"""Instruction objects (docs/ISA.md §2): decode, encode round trips, micro-ops, streams, bytes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openvta.isa import (
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    ISAError,
    MemInsn,
    MemoryType,
    Opcode,
    Uop,
    decode,
    decode_stream,
    decode_table,
    decode_uop,
    decode_uops,
    encode_stream,
    encode_uops,
    layouts_of,
    preset,
    words_from_bytes,
    words_to_bytes,
)

import isa_strategies as strat
from isa_reference import ALU_BITS, GEMM_BITS, MEM_BITS, UOP_BITS_TABLE

PRESET_NAMES = ("vta", "v2", "small", "tiny")
EXAMPLES = settings(max_examples=100, deadline=None)
STREAM_EXAMPLES = settings(max_examples=40, deadline=None)  # each example is a whole stream

_OPCODE_LIST = r"\(LOAD=0, STORE=1, GEMM=2, FINISH=3, ALU=4\)"
_MEMORY_LIST = r"\(UOP=0, WGT=1, INP=2, ACC=3, OUT=4, ACC_8BIT=5\)"
_ALU_LIST = r"\(MIN=0, MAX=1, ADD=2, SHR=3, MUL=4\)"


def _names(table: list[tuple[str, int, int]]) -> list[str]:
    return [name for name, _, _ in table]


def _as_int(row: np.ndarray) -> int:
    """An ``(2,)`` uint64 row as the 128-bit integer: word 0 low, word 1 high."""
    return int(row[0]) | int(row[1]) << 64


# -- decode: objects named after docs/ISA.md ---------------------------------------------------


@pytest.mark.parametrize(
    ("opcode", "cls", "table"),
    [
        (Opcode.LOAD, MemInsn, MEM_BITS),
        (Opcode.STORE, MemInsn, MEM_BITS),
        (Opcode.GEMM, GemmInsn, GEMM_BITS),
        (Opcode.FINISH, FinishInsn, GEMM_BITS),
        (Opcode.ALU, AluInsn, ALU_BITS),
    ],
)
@pytest.mark.parametrize("name", PRESET_NAMES)
def test_decoded_attributes_are_the_spec_field_names(opcode, cls, table, name):
    insn = decode(int(opcode), preset(name))
    assert type(insn) is cls
    assert insn.opcode is opcode
    attributes = {f.name for f in dataclasses.fields(insn)} - {"cfg", "format"}
    assert attributes == set(_names(table))
    assert list(insn.fields()) == _names(table)
    assert insn.cfg is preset(name)


def test_decode_typed_values():
    word = 2 | 1 << 3 | 1 << 7 | 5 << 8  # GEMM, pop_prev_dep, reset_reg, uop_bgn=5
    insn = decode(word, preset("vta"))
    assert insn.pop_prev_dep is True and insn.pop_next_dep is False
    assert insn.reset_reg is True and insn.uop_bgn == 5
    alu = decode(4 | 2 << 108 | 1 << 111 | 0x8000 << 112, preset("vta"))
    assert alu.alu_opcode is AluOp.ADD and alu.use_imm is True and alu.imm == -32768
    load = decode(0 | 5 << 7, preset("vta"))
    assert load.memory_type is MemoryType.ACC_8BIT


def test_decode_known_load_fields():
    word = (
        1 << 4 | 1 << 6 | 2 << 7 | 0x1234 << 10 | 0xDEADBEEF << 26 | 3 << 64 | 4 << 80 | 5 << 96
        | 1 << 112 | 2 << 116 | 3 << 120 | 4 << 124
    )
    insn = decode(word, preset("vta"))
    assert insn == MemInsn(cfg=preset("vta"), opcode=Opcode.LOAD, memory_type=MemoryType.INP,
                           pop_next_dep=True, push_next_dep=True, sram_base=0x1234,
                           dram_base=0xDEADBEEF, y_size=3, x_size=4, x_stride=5,
                           y_pad_0=1, y_pad_1=2, x_pad_0=3, x_pad_1=4)


def test_is_sync():
    cfg = preset("vta")
    assert MemInsn(cfg=cfg, y_size=4).is_sync
    assert not MemInsn(cfg=cfg, x_size=1).is_sync


@pytest.mark.parametrize("opcode", [5, 6, 7])
@pytest.mark.parametrize("name", PRESET_NAMES)
def test_decode_invalid_opcode(opcode, name):
    message = rf"^field opcode value {opcode} is not valid {_OPCODE_LIST}$"
    with pytest.raises(ISAError, match=message):
        decode(opcode | 1 << 64, preset(name))


@pytest.mark.parametrize("memory_type", [6, 7])
@pytest.mark.parametrize("opcode", [Opcode.LOAD, Opcode.STORE])
def test_decode_invalid_memory_type(memory_type, opcode):
    offset = layouts_of(preset("vta"))["memory"].field("memory_type").offset
    message = rf"^field memory_type value {memory_type} is not valid {_MEMORY_LIST}$"
    with pytest.raises(ISAError, match=message):
        decode(int(opcode) | memory_type << offset, preset("vta"))


@pytest.mark.parametrize("alu_opcode", [5, 6, 7])
@pytest.mark.parametrize("name", PRESET_NAMES)
def test_decode_invalid_alu_opcode(alu_opcode, name):
    offset = layouts_of(preset(name))["alu"].field("alu_opcode").offset
    message = rf"^field alu_opcode value {alu_opcode} is not valid {_ALU_LIST}$"
    with pytest.raises(ISAError, match=message):
        decode(int(Opcode.ALU) | alu_opcode << offset, preset(name))


@pytest.mark.parametrize("word", [-1, 1 << 128, 1 << 200])
def test_decode_word_out_of_range(word):
    message = rf"^instruction word must be a 128-bit unsigned integer, not {word}$"
    with pytest.raises(ISAError, match=message):
        decode(word, preset("vta"))


def test_decode_accepts_the_largest_word():
    # opcode 7 is invalid, so the all-ones word fails on its opcode, not on its size.
    with pytest.raises(ISAError, match=r"^field opcode value 7 is not valid"):
        decode((1 << 128) - 1, preset("vta"))


# -- round trips (hypothesis) ---------------------------------------------------------------


@pytest.mark.parametrize("name", PRESET_NAMES)
@pytest.mark.parametrize(
    "kind", [strat.mem_insns, strat.gemm_insns, strat.alu_insns, strat.finish_insns],
    ids=["mem", "gemm", "alu", "finish"],
)
@EXAMPLES
@given(data=st.data())
def test_decode_encode_round_trip(name, kind, data):
    cfg = preset(name)
    insn = data.draw(kind(cfg))
    word = insn.encode()
    assert 0 <= word < 1 << 128
    back = decode(word, cfg)
    assert back == insn
    assert type(back) is type(insn)
    assert back.fields() == insn.fields()
    assert insn.to_bytes() == word.to_bytes(16, "little")


@pytest.mark.parametrize("name", PRESET_NAMES)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_encode_decode_round_trip_of_valid_words(name, data):
    cfg = preset(name)
    word, values = data.draw(strat.valid_words(cfg))
    insn = decode(word, cfg)
    assert insn.fields() == values
    assert insn.encode() == word


@pytest.mark.parametrize("name", PRESET_NAMES)
@EXAMPLES
@given(data=st.data())
def test_imm_is_signed_16_bit(name, data):
    cfg = preset(name)
    imm = data.draw(st.integers(-(1 << 15), (1 << 15) - 1))
    field = layouts_of(cfg)["alu"].field("imm")
    word = AluInsn(cfg=cfg, imm=imm).encode()
    assert (word >> field.offset) & 0xFFFF == imm % (1 << 16)
    assert decode(word, cfg).imm == imm


# -- micro-ops ------------------------------------------------------------------------------


def test_uop_attributes_are_the_spec_field_names():
    assert [f.name for f in dataclasses.fields(Uop)] == _names(UOP_BITS_TABLE)


@pytest.mark.parametrize("name", PRESET_NAMES)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_uop_round_trip(name, data):
    cfg = preset(name)
    uop = data.draw(strat.uops(cfg))
    word = uop.encode(cfg)
    assert 0 <= word < 1 << 32
    assert decode_uop(word, cfg) == uop
    assert decode_uop(word, cfg).encode(cfg) == word


@pytest.mark.parametrize("word", [-1, 1 << 32])
def test_decode_uop_word_out_of_range(word):
    message = rf"^micro-op word must be a 32-bit unsigned integer, not {word}$"
    with pytest.raises(ISAError, match=message):
        decode_uop(word, preset("vta"))


@pytest.mark.parametrize("name", PRESET_NAMES)
@EXAMPLES
@given(data=st.data())
def test_uops_vectorized_equal_scalar(name, data):
    cfg = preset(name)
    uops = data.draw(st.lists(strat.uops(cfg), max_size=40))
    words = encode_uops(uops, cfg)
    assert words.dtype == np.uint32 and words.shape == (len(uops),)
    assert [int(w) for w in words] == [u.encode(cfg) for u in uops]
    columns = decode_uops(words, cfg)
    assert set(columns) == set(_names(UOP_BITS_TABLE))
    for i, uop in enumerate(uops):
        from_columns = Uop(**{k: int(v[i]) for k, v in columns.items()})
        assert from_columns == uop == decode_uop(int(words[i]), cfg)


def test_encode_uops_out_of_range_names_the_entry():
    uops = [Uop(), Uop(), Uop(wgt_idx=1024)]
    with pytest.raises(
        ISAError,
        match=r"^micro-op \(entry 2\) field wgt_idx \(10 bits, unsigned: 0\.\.1023\) "
              r"cannot hold 1024$",
    ):
        encode_uops(uops, preset("vta"))


# -- streams --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PRESET_NAMES)
@STREAM_EXAMPLES
@given(data=st.data())
def test_encode_stream_equals_scalar_encode(name, data):
    cfg = preset(name)
    insns = data.draw(strat.streams(cfg))
    words = encode_stream(insns, cfg)
    assert words.dtype == np.uint64 and words.shape == (len(insns), 2)
    for row, insn in zip(words, insns):
        word = insn.encode()
        assert int(row[0]) == word & ((1 << 64) - 1)
        assert int(row[1]) == word >> 64


@pytest.mark.parametrize("name", PRESET_NAMES)
@STREAM_EXAMPLES
@given(data=st.data())
def test_decode_stream_and_table_equal_scalar_decode(name, data):
    cfg = preset(name)
    insns = data.draw(strat.streams(cfg))
    words = encode_stream(insns, cfg)
    assert decode_stream(words, cfg) == [decode(_as_int(row), cfg) for row in words] == insns
    table = decode_table(words, cfg)
    every_field = set(_names(MEM_BITS)) | set(_names(GEMM_BITS)) | set(_names(ALU_BITS))
    assert set(table) == every_field
    for i, insn in enumerate(insns):
        fields = insn.fields()
        for column_name, column in table.items():
            assert column.dtype == np.int64
            assert int(column[i]) == fields.get(column_name, 0), (i, column_name)


def test_empty_stream():
    cfg = preset("vta")
    words = encode_stream([], cfg)
    assert words.shape == (0, 2)
    assert decode_stream(words, cfg) == []
    assert words_to_bytes(words).size == 0


def test_decode_table_keeps_invalid_opcodes_unvalidated():
    cfg = preset("vta")
    words = np.array([[7 | 1 << 20, 1], [int(Opcode.FINISH), 0]], dtype=np.uint64)
    table = decode_table(words, cfg)
    assert table["opcode"].tolist() == [7, 3]
    assert all(int(column[0]) == 0 for name, column in table.items() if name != "opcode")


@pytest.mark.parametrize(
    ("bad_row", "message"),
    [
        ([6, 0], rf"^instruction 2: field opcode value 6 is not valid {_OPCODE_LIST}$"),
        ([0 | 7 << 7, 0],
         rf"^instruction 2: field memory_type value 7 is not valid {_MEMORY_LIST}$"),
        ([4, 5 << (108 - 64)],  # alu_opcode is bits [110:108], in word 1
         rf"^instruction 2: field alu_opcode value 5 is not valid {_ALU_LIST}$"),
    ],
)
def test_decode_stream_names_the_invalid_instruction(bad_row, message):
    cfg = preset("vta")
    good = encode_stream([GemmInsn(cfg=cfg), FinishInsn(cfg=cfg)], cfg)
    words = np.vstack([good, np.array([bad_row], dtype=np.uint64), good])
    with pytest.raises(ISAError, match=message):
        decode_stream(words, cfg)


def test_encode_stream_out_of_range_raises():
    cfg = preset("vta")
    with pytest.raises(ISAError, match=r"^instruction 0: GEMM field uop_bgn \(13 bits, unsigned: "
                                       r"0\.\.8191\) cannot hold 8192$"):
        encode_stream([GemmInsn(cfg=cfg, uop_bgn=8192)], cfg)


def test_encode_stream_error_names_the_stream_position():
    # The bad GEMM is instruction 1 of the stream (the first GEMM of it).
    cfg = preset("vta")
    insns = [MemInsn(cfg=cfg), GemmInsn(cfg=cfg, uop_bgn=8192)]
    with pytest.raises(ISAError, match=r"^instruction 1: GEMM field uop_bgn "):
        encode_stream(insns, cfg)


# -- byte images ------------------------------------------------------------------------------


def test_byte_order_is_little_endian_word_0_first():
    words = np.array([[0x0807060504030201, 0x100F0E0D0C0B0A09]], dtype=np.uint64)
    image = words_to_bytes(words)
    assert image.dtype == np.uint8
    assert image.tolist() == list(range(1, 17))
    assert np.array_equal(words_from_bytes(bytes(range(1, 17))), words)


@pytest.mark.parametrize("name", PRESET_NAMES)
@STREAM_EXAMPLES
@given(data=st.data())
def test_bytes_round_trip(name, data):
    cfg = preset(name)
    insns = data.draw(strat.streams(cfg))
    words = encode_stream(insns, cfg)
    image = words_to_bytes(words)
    assert image.tobytes() == b"".join(insn.to_bytes() for insn in insns)
    assert np.array_equal(words_from_bytes(image), words)
    assert np.array_equal(words_from_bytes(image.tobytes()), words)
    assert words_from_bytes(image).dtype == np.uint64


@pytest.mark.parametrize("size", [1, 15, 17, 31])
def test_words_from_bytes_needs_whole_instructions(size):
    message = rf"^instruction bytes must be a multiple of 16, not {size}$"
    with pytest.raises(ISAError, match=message):
        words_from_bytes(bytes(size))

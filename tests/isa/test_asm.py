"""The text assembler and disassembler: round trips, syntax, every error message."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openvta.isa import (
    AluInsn,
    AluOp,
    AsmError,
    FinishInsn,
    GemmInsn,
    MemInsn,
    MemoryType,
    Opcode,
    assemble,
    disassemble,
    format_insn,
    preset,
)

import isa_strategies as strat

PRESET_NAMES = ("vta", "v2", "small", "tiny")


@pytest.mark.parametrize("name", PRESET_NAMES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_assemble_disassemble_round_trip(name, data):
    cfg = preset(name)
    insns = data.draw(strat.streams(cfg))
    text = disassemble(insns)
    assert text.count("\n") == len(insns)
    back = assemble(text, cfg)
    assert back == insns
    assert [type(insn) for insn in back] == [type(insn) for insn in insns]
    assert all(insn.cfg is cfg for insn in back)


def test_assemble_known_lines():
    cfg = preset("vta")
    text = """
        LOAD INP sram_base=0 dram_base=8 y_size=1 x_size=16 x_stride=16 pop_next_dep
        GEMM uop_bgn=0 uop_end=16 iter_out=4 iter_in=1 dst_factor_out=1 src_factor_out=16
        ALU SHR use_imm imm=-8 uop_bgn=0x10 uop_end=17 iter_out=64 iter_in=1 dst_factor_out=1
        STORE OUT x_size=1 y_size=1 push_prev_dep=1
        FINISH pop_prev_dep
    """
    assert assemble(text, cfg) == [
        MemInsn(cfg=cfg, opcode=Opcode.LOAD, memory_type=MemoryType.INP, dram_base=8, y_size=1,
                x_size=16, x_stride=16, pop_next_dep=True),
        GemmInsn(cfg=cfg, uop_end=16, iter_out=4, iter_in=1, dst_factor_out=1, src_factor_out=16),
        AluInsn(cfg=cfg, alu_opcode=AluOp.SHR, use_imm=True, imm=-8, uop_bgn=16, uop_end=17,
                iter_out=64, iter_in=1, dst_factor_out=1),
        MemInsn(cfg=cfg, opcode=Opcode.STORE, memory_type=MemoryType.OUT, x_size=1, y_size=1,
                push_prev_dep=True),
        FinishInsn(cfg=cfg, pop_prev_dep=True),
    ]


def test_comments_and_blank_lines_are_ignored():
    cfg = preset("tiny")
    text = ("# a program\n\n   \nGEMM reset_reg  # zero the accumulator\n"
            "\t# indented comment\nFINISH\n#")
    assert assemble(text, cfg) == [GemmInsn(cfg=cfg, reset_reg=True), FinishInsn(cfg=cfg)]
    assert assemble("", cfg) == []
    assert assemble("# nothing\n\n", cfg) == []


def test_format_insn_writes_subtypes_and_non_zero_fields():
    cfg = preset("vta")
    assert format_insn(FinishInsn(cfg=cfg)) == "FINISH"
    assert format_insn(MemInsn(cfg=cfg, memory_type=MemoryType.UOP)) == "LOAD UOP"
    assert format_insn(AluInsn(cfg=cfg, alu_opcode=AluOp.MIN)) == "ALU MIN"
    assert format_insn(GemmInsn(cfg=cfg, reset_reg=True, uop_end=2)) == "GEMM reset_reg uop_end=2"
    assert format_insn(AluInsn(cfg=cfg, imm=-1, use_imm=True)) == "ALU MIN use_imm imm=-1"
    assert disassemble([]) == ""


_MNEMONICS = r"\(one of LOAD, STORE, GEMM, FINISH, ALU\)"
_TYPES = r"UOP, WGT, INP, ACC, OUT, ACC_8BIT"
_ALU_OPS = r"MIN, MAX, ADD, SHR, MUL"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("LOAF INP", rf"^line 1: unknown mnemonic 'LOAF' {_MNEMONICS}: 'LOAF INP'$"),
        ("NOP", rf"^line 1: unknown mnemonic 'NOP' {_MNEMONICS}: 'NOP'$"),
        ("LOAD", rf"^line 1: LOAD needs its memory type \({_TYPES}\): 'LOAD'$"),
        ("STORE  ", rf"^line 1: STORE needs its memory type \({_TYPES}\): 'STORE'$"),
        ("ALU", rf"^line 1: ALU needs its ALU opcode \({_ALU_OPS}\): 'ALU'$"),
        ("LOAD x_size=1",
         rf"^line 1: unknown memory_type 'x_size=1' \(one of {_TYPES}\): 'LOAD x_size=1'$"),
        ("ALU DIV", rf"^line 1: unknown alu_opcode 'DIV' \(one of {_ALU_OPS}\): 'ALU DIV'$"),
        ("GEMM imm=3", r"^line 1: GEMM has no field 'imm': 'GEMM imm=3'$"),
        ("ALU ADD wgt_factor_in=1",
         r"^line 1: ALU has no field 'wgt_factor_in': 'ALU ADD wgt_factor_in=1'$"),
        ("LOAD INP uop_bgn=1", r"^line 1: LOAD has no field 'uop_bgn': 'LOAD INP uop_bgn=1'$"),
        ("LOAD INP opcode=1", r"^line 1: LOAD has no field 'opcode': 'LOAD INP opcode=1'$"),
        ("LOAD INP memory_type=2",
         r"^line 1: LOAD has no field 'memory_type': 'LOAD INP memory_type=2'$"),
        ("ALU MAX alu_opcode=1",
         r"^line 1: ALU has no field 'alu_opcode': 'ALU MAX alu_opcode=1'$"),
        ("GEMM uop_bgn=abc",
         r"^line 1: field uop_bgn value 'abc' is not an integer: 'GEMM uop_bgn=abc'$"),
        ("GEMM uop_bgn=", r"^line 1: field uop_bgn value '' is not an integer: 'GEMM uop_bgn='$"),
        ("GEMM uop_bgn=1.5",
         r"^line 1: field uop_bgn value '1\.5' is not an integer: 'GEMM uop_bgn=1\.5'$"),
        ("GEMM uop_bgn=8192",
         r"^line 1: GEMM field uop_bgn \(13 bits, unsigned: 0\.\.8191\) cannot hold 8192: "
         r"'GEMM uop_bgn=8192'$"),
        ("GEMM reset_reg=2",
         r"^line 1: GEMM field reset_reg \(1 bits, unsigned: 0\.\.1\) cannot hold 2: "
         r"'GEMM reset_reg=2'$"),
        ("ALU ADD imm=40000",
         r"^line 1: ALU field imm \(16 bits, signed: -32768\.\.32767\) cannot hold "
         r"40000: 'ALU ADD imm=40000'$"),
        ("LOAD WGT sram_base=-1",
         r"^line 1: LOAD field sram_base \(16 bits, unsigned: 0\.\.65535\) cannot hold -1: "
         r"'LOAD WGT sram_base=-1'$"),
        ("GEMM uop_bgn=1 uop_bgn=2",
         r"^line 1: field uop_bgn is given twice: 'GEMM uop_bgn=1 uop_bgn=2'$"),
        ("GEMM reset_reg reset_reg=0",
         r"^line 1: field reset_reg is given twice: 'GEMM reset_reg reset_reg=0'$"),
        ("GEMM uop_end", r"^line 1: field uop_end needs a value \(uop_end=N\): 'GEMM uop_end'$"),
        ("ALU SHR imm", r"^line 1: field imm needs a value \(imm=N\): 'ALU SHR imm'$"),
    ],
)
def test_errors(line, message):
    with pytest.raises(AsmError, match=message):
        assemble(line, preset("vta"))


def test_error_names_the_line_number_counting_comments_and_blanks():
    text = "# header\n\nGEMM\n  FINISH  # done\nFOO bar=1  # oops\n"
    message = rf"^line 5: unknown mnemonic 'FOO' {_MNEMONICS}: 'FOO bar=1  # oops'$"
    with pytest.raises(AsmError, match=message):
        assemble(text, preset("vta"))


def test_range_errors_follow_the_config():
    # uop_bgn is LOG_UOP_DEPTH bits: 13 in vta, 9 in tiny.
    assert assemble("GEMM uop_bgn=511", preset("tiny"))[0].uop_bgn == 511
    message = r"^line 1: GEMM field uop_bgn \(9 bits, unsigned: 0\.\.511\) cannot hold 512: "
    with pytest.raises(AsmError, match=message):
        assemble("GEMM uop_bgn=512", preset("tiny"))


def test_asm_error_is_a_value_error():
    assert issubclass(AsmError, ValueError)

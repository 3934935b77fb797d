"""Every way the functional simulator refuses a program, each with its message."""

from __future__ import annotations

import numpy as np
import pytest

from openvta.isa import (INSN_BYTES, MemoryType, Module, Uop, assemble, decode_table, encode_stream, preset,
                         words_to_bytes)
from openvta.runtime import Device, Program, ProgramBuilder, ProgramError, UopKernel
from openvta.sim.functional import (
    DeadlockError,
    EncodingError,
    FinishError,
    MemoryAccessError,
    RaceError,
    run,
)
from openvta.sim.functional.validate import check_stream

TINY = preset("tiny")


def program_from_words(words: np.ndarray, cfg=TINY, dram_bytes: int = 4096) -> Program:
    """A program whose DRAM is ``dram_bytes`` of zeros followed by ``words``."""
    image = words_to_bytes(words)
    dram = np.zeros(dram_bytes + len(image), dtype=np.uint8)
    dram[dram_bytes:] = image
    return Program(cfg, dram, dram_bytes, len(words))


def program_from_asm(text: str, cfg=TINY, dram_bytes: int = 4096) -> Program:
    return program_from_words(encode_stream(assemble(text, cfg), cfg), cfg, dram_bytes)


def _with_word(text: str, index: int, word0_or: int = 0, word1_or: int = 0) -> Program:
    words = encode_stream(assemble(text, TINY), TINY)
    words[index, 0] |= np.uint64(word0_or)
    words[index, 1] |= np.uint64(word1_or)
    return program_from_words(words)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("LOAD INP pop_prev_dep\nFINISH",
         r"^instruction 0: a load-module instruction \(LOAD INP/WGT\) must not set pop_prev_dep"),
        ("LOAD WGT push_prev_dep\nFINISH", r"^instruction 0: a load-module instruction"),
        ("STORE OUT push_next_dep\nFINISH", r"^instruction 0: a STORE must not set pop_next_dep"),
        ("STORE ACC_8BIT\nFINISH",
         r"^instruction 0: a STORE must have memory_type OUT \(STORE ACC needs a drain unit, DRAIN_STAGES > 0\)$"),
        ("STORE OUT x_pad_0=1\nFINISH", r"^instruction 0: a STORE of OUT must have all pads zero$"),
        ("LOAD OUT\nFINISH", r"^instruction 0: LOAD of memory_type OUT is not an instruction$"),
        ("FINISH uop_end=1", r"^instruction 0: FINISH must have every field zero except"),
        ("LOAD UOP", r"^the program has no FINISH instruction"),
        ("FINISH\nLOAD UOP", r"^instruction 0: FINISH must be the last instruction, but 1 "),
    ],
)
def test_encoding_errors(text: str, message: str) -> None:
    with pytest.raises(EncodingError, match=message):
        run(program_from_asm(text))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("STORE INP\nFINISH", r"^instruction 0: a STORE must have memory_type OUT or ACC$"),
        ("STORE OUT y_pad_1=2\nFINISH", r"^instruction 0: a STORE of OUT must have all pads zero$"),
        ("LOAD EPI push_next_dep\nFINISH",
         r"^instruction 0: a store-module instruction \(LOAD EPI/EPI_8BIT\) must not set pop_next_dep "
         r"or push_next_dep$"),
        ("LOAD EPI_8BIT pop_next_dep\nFINISH", r"^instruction 0: a store-module instruction"),
    ],
)
def test_encoding_errors_with_a_drain_unit(text: str, message: str) -> None:
    """docs/ISA.md §9: on machine v2 a STORE is of OUT or (draining) ACC."""
    with pytest.raises(EncodingError, match=message):
        run(program_from_asm(text, preset("v2"), dram_bytes=1 << 16))


@pytest.mark.parametrize(
    ("text", "what"),
    [("STORE ACC\nFINISH", "STORE ACC"), ("LOAD UOP\nLOAD EPI\nFINISH", "LOAD EPI"),
     ("LOAD EPI_8BIT\nFINISH", "LOAD EPI_8BIT")],
)
def test_v2_instructions_are_refused_without_a_drain_unit(text: str, what: str) -> None:
    """docs/ISA.md §9: machine v2's instructions in a program for VTA's machine are a ProgramError."""
    index = text.split("\n").index(what)
    v2, vta = preset("v2"), preset("vta")  # the same instruction layout
    words = encode_stream(assemble(text, v2), v2)  # the assembler of `vta` refuses EPI
    with pytest.raises(ProgramError, match=rf"^instruction {index}: {what} is an instruction of machine v2 "
                                           r"\(the drain unit\), which configuration 'vta' does not have$"):
        program_from_words(words, vta)
    program_from_words(words, v2)


def test_invalid_opcode_memory_type_alu_opcode_and_padding() -> None:
    with pytest.raises(EncodingError, match=r"^instruction 0: invalid opcode \(5-7"):
        run(_with_word("GEMM\nFINISH", 0, word0_or=0b101))
    # memory_type 6 on a machine without a drain unit: the program refuses LOAD EPI ...
    with pytest.raises(ProgramError, match=r"^instruction 0: LOAD EPI is an instruction of machine v2"):
        _with_word("LOAD UOP\nFINISH", 0, word0_or=6 << 7)
    # ... and the simulator's stream check refuses it as an encoding.
    words = encode_stream(assemble("LOAD UOP\nSTORE OUT\nFINISH", TINY), TINY)
    words[1, 0] |= np.uint64(7 << 7)  # STORE OUT → STORE memory_type 7
    with pytest.raises(EncodingError, match=r"^instruction 1: invalid memory_type \(6-7 are not memory types "
                                            r"on a machine without a drain unit\)$"):
        check_stream(decode_table(words, TINY), words, TINY)
    alu = _with_word("ALU MIN\nFINISH", 0, word1_or=0)
    words = alu.words()
    field = __import__("openvta.isa", fromlist=["layouts_of"]).layouts_of(TINY)["alu"].field("alu_opcode")
    words[0, field.word] |= np.uint64(7 << field.shift)
    with pytest.raises(EncodingError, match=r"^instruction 0: invalid alu_opcode \(5-7"):
        run(program_from_words(words))
    # memory instructions leave bits 59..63 as padding
    with pytest.raises(EncodingError, match=r"^instruction 0: padding bits between fields must be zero$"):
        run(_with_word("LOAD UOP\nFINISH", 0, word0_or=1 << 60))
    # bit 58 is pad_min: a LOAD INP's, no other's (the cycle model decodes as the functional one)
    for backend in ("functional", "cycle"):
        with pytest.raises(EncodingError, match=r"^instruction 0: pad_min \(padding with -128\) is for a LOAD "
                                                r"of INP only$"):
            Device(backend).run(_with_word("LOAD WGT y_size=1 x_size=1 x_pad_0=1\nFINISH", 0, word0_or=1 << 58))
    with pytest.raises(EncodingError, match=r"^instruction 0: pad_min \(padding with -128\) is for a LOAD of "
                                            r"INP only$"):
        run(_with_word("STORE OUT y_size=1 x_size=1\nFINISH", 0, word0_or=1 << 58))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("LOAD INP sram_base=250 y_size=1 x_size=8 x_stride=8\nFINISH",
         r"^instruction 0 accesses inp buffer elements 250\.\.257, past its depth \(256\) \[LOAD INP"),
        ("LOAD ACC_8BIT sram_base=255 y_size=1 x_size=1 x_pad_1=1\nFINISH",
         r"^instruction 0 accesses acc buffer elements 255\.\.256, past its depth \(256\)"),
        ("LOAD INP dram_base=1000000 y_size=1 x_size=1\nFINISH",
         r"^instruction 0 accesses DRAM bytes up to 4000004, past the end of DRAM \(4\d+ bytes\)"),
        ("GEMM uop_bgn=0 uop_end=513 iter_out=1 iter_in=1\nFINISH",
         r"^instruction 0 uses micro-ops 0\.\.512, outside the micro-op buffer \(depth 512\)"),
        ("GEMM uop_bgn=0 uop_end=1 iter_out=300 iter_in=1 dst_factor_out=1\nFINISH",
         r"^instruction 0 reaches acc buffer element 299 through dst_idx, past its depth \(256\)"),
        ("ALU ADD uop_bgn=0 uop_end=1 iter_out=2 iter_in=1 src_factor_out=255\nFINISH",
         r"^instruction 0 reaches acc buffer element 255 through src_idx|^$"),
        ("STORE OUT push_prev_dep sram_base=255 y_size=1 x_size=2\nFINISH pop_next_dep",
         r"^instruction 0 accesses out buffer elements 255\.\.256, past its depth \(256\)"),
    ],
)
def test_out_of_range_accesses(text: str, message: str) -> None:
    if "src_factor_out=255" in text:  # 0 + 1*255 = 255 is inside: make it one further
        text = text.replace("iter_out=2", "iter_out=3")
        message = r"^instruction 0 reaches acc buffer element 510 through src_idx, past its depth \(256\)"
    with pytest.raises(MemoryAccessError, match=message):
        run(program_from_asm(text))


def test_deadlock_names_each_blocked_module_and_the_queues() -> None:
    b = ProgramBuilder(TINY)
    src = b.tensor("inp", shape=(4, 1, 4), dtype="int8")
    b.dep_pop(Module.LOAD, Module.COMPUTE)  # compute waits for load ...
    b.gemm(UopKernel((Uop(0, 0, 0),)))
    b.dep_push(Module.COMPUTE, Module.LOAD)
    b.dep_pop(Module.COMPUTE, Module.LOAD)  # ... which waits for compute
    b.load_2d(MemoryType.INP, 0, src, y_size=1, x_size=4)
    b.dep_push(Module.LOAD, Module.COMPUTE)
    program = b.finish()
    with pytest.raises(DeadlockError) as info:
        run(program)
    text = str(info.value)
    assert text.startswith("deadlock: no module can make progress and FINISH has not run")
    assert "  load: instruction 2 (LOAD INP pop_next_dep" in text
    assert "waits for a token on compute→load (empty)" in text
    assert "  compute: instruction 0 (LOAD UOP pop_prev_dep" in text
    assert "waits for a token on load→compute (empty)" in text
    assert "  store: no instruction to run" in text
    assert "token queues: load→compute 0, compute→load 0, compute→store 0, store→compute 0 (depth 16)" in text


def test_deadlock_from_a_full_command_queue() -> None:
    """Fetch stalls on the full load queue, so compute never receives the push load waits for."""
    cfg = TINY.replace(CMD_QUEUE_DEPTH=1)
    text = ("LOAD INP pop_next_dep\nLOAD INP\nLOAD UOP push_prev_dep\n"
            "LOAD INP push_next_dep\nLOAD UOP pop_prev_dep\nFINISH")
    with pytest.raises(DeadlockError, match=r"(?s)fetch: instruction 1 waits for room in the full "
                                            r"load command queue \(1 entries\)"):
        run(program_from_asm(text, cfg))
    # the same program with deeper command queues runs
    run(program_from_asm(text, TINY))


def _load_then_gemm(token: bool) -> Program:
    b = ProgramBuilder(TINY)
    src = b.tensor("inp", data=np.ones((4, 1, 4), dtype=np.int8))
    b.load_2d(MemoryType.INP, 0, src, y_size=1, x_size=4)
    if token:
        b.dep_push(Module.LOAD, Module.COMPUTE)
        b.dep_pop(Module.LOAD, Module.COMPUTE)
    b.gemm(UopKernel((Uop(0, 0, 0),)))
    return b.finish()


def test_missing_raw_token_is_a_race_even_when_the_numbers_are_right() -> None:
    run(_load_then_gemm(token=True))
    with pytest.raises(RaceError, match=(
            r"^race on inp buffer element 0: compute reads it in instruction 2 \(GEMM uop_end=1 "
            r"iter_out=1 iter_in=1\), but the write by load in instruction 0 \(LOAD INP .*\) is "
            r"not ordered before it by dependency tokens$")):
        run(_load_then_gemm(token=False))
    # without the checker the (lucky) schedule computes without complaint
    run(_load_then_gemm(token=False), check_races=False)


def test_missing_war_token_is_a_race() -> None:
    """Load overwrites a tile that compute reads, with no compute→load token in between."""
    b = ProgramBuilder(TINY)
    src = b.tensor("inp", data=np.ones((4, 1, 4), dtype=np.int8))
    b.load_2d(MemoryType.INP, 0, src, y_size=1, x_size=1)
    b.dep_push(Module.LOAD, Module.COMPUTE)
    b.dep_pop(Module.LOAD, Module.COMPUTE)
    b.gemm(UopKernel((Uop(0, 0, 0),)))
    b.load_2d(MemoryType.INP, 0, src, offset=1, y_size=1, x_size=1)  # WAR: needs pop(compute→load)
    with pytest.raises(RaceError, match=r"^race on inp buffer element 0: "):
        run(b.finish())


def test_store_to_load_through_dram_needs_tokens() -> None:
    """A load reading DRAM that a store writes must be ordered after it through compute."""
    b = ProgramBuilder(TINY)
    buf = b.tensor("buf", shape=(2, 1, 4), dtype="int8")
    b.alu(UopKernel((Uop(0, 0),)), __import__("openvta.isa", fromlist=["AluOp"]).AluOp.ADD, imm=1)
    b.dep_push(Module.COMPUTE, Module.STORE)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    b.store_2d(0, buf, y_size=1, x_size=1)
    b.load_2d(MemoryType.INP, 0, buf, y_size=1, x_size=1)  # no store→compute→load chain
    with pytest.raises(RaceError, match=r"^race on DRAM byte \d+: (load reads|store writes) it"):
        run(b.finish())


def test_finish_with_tokens_left_or_unordered_modules() -> None:
    with pytest.raises(FinishError, match=(r"^instruction 1: token queues are not empty at FINISH "
                                           r"\(load→compute: 1\)")):
        run(program_from_asm("LOAD INP push_next_dep\nFINISH"))
    with pytest.raises(FinishError, match=(r"^instruction 1: load instruction 0 \(LOAD INP\) is not "
                                           r"ordered before FINISH by tokens: 1 of 1 load")):
        run(program_from_asm("LOAD INP\nFINISH"))
    with pytest.raises(FinishError, match=r"^instruction 1: store instruction 0 \(STORE OUT\) is not"):
        run(program_from_asm("STORE OUT\nFINISH"))


def test_program_image_checks_happen_before_running() -> None:
    words = encode_stream(assemble("FINISH", TINY), TINY)
    with pytest.raises(ValueError, match=r"^instructions run past the DRAM image"):
        Program(TINY, np.zeros(INSN_BYTES, np.uint8), 0, 2)
    program_from_words(words)  # and the well-formed one is accepted

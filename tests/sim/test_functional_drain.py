"""Machine v2's drain unit on the functional simulator (docs/ISA.md §9).

A STORE ACC runs the descriptor's stages on every acc tile, writes the low 8 bits to
DRAM and zeroes the tile.  The reference below is written from the spec's pseudo-code
(its own ALU, its own reading of the descriptor), not with ``openvta.isa.drain``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openvta.isa import (
    AluOp,
    Config,
    DrainOp,
    DrainStage,
    MemoryType,
    Module,
    Uop,
    assemble,
    encode_header,
    parse_drain_ops,
    encode_stream,
    preset,
    words_to_bytes,
)
from openvta.runtime import Program, ProgramBuilder, ProgramError, UopKernel, UopLoop
from openvta.sim.functional import MemoryAccessError, RaceError, run

V2 = preset("v2")
TINY_V2 = preset("tiny").replace(LOG_EPI_BUFF_SIZE=10, DRAIN_STAGES=4)  # 4 lanes, 64 epi words
CONFIGS = {"v2": V2, "tiny-drain": TINY_V2}


# -- the reference: docs/ISA.md §3's ALU and §9's STORE ACC -------------------------------------


def _wrap32(v: np.ndarray) -> np.ndarray:
    return ((v + (1 << 31)) & 0xFFFF_FFFF) - (1 << 31)


def _alu(op: DrainOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One drain stage on int64 arrays holding int32 values: the ALU's five operations, RSHR
    (``SHR s-1, ADD 1, SHR 1`` for ``s >= 1``, else ``SHR s``) and CLIP (MIN by the word's high
    16 bits, MAX by its low 16 bits, signed)."""
    if op == DrainOp.RSHR:
        s = ((b & 63) ^ 32) - 32
        first = _alu(DrainOp.SHR, a, np.where(s >= 1, s - 1, s))
        return np.where(s >= 1, _alu(DrainOp.SHR, _alu(DrainOp.ADD, first, np.ones_like(first)), np.ones_like(first)),
                        first)
    if op == DrainOp.CLIP:
        word = b & 0xFFFF_FFFF
        high, low = ((word >> 16) ^ 0x8000) - 0x8000, ((word & 0xFFFF) ^ 0x8000) - 0x8000
        return np.maximum(np.minimum(a, high), low)
    if op == AluOp.MIN:
        return np.minimum(a, b)
    if op == AluOp.MAX:
        return np.maximum(a, b)
    if op == AluOp.ADD:
        return _wrap32(a + b)
    if op == AluOp.MUL:
        return _wrap32(a * b)
    shift = ((b & 63) ^ 32) - 32  # the signed low 6 bits
    right = a >> np.clip(shift, 0, 31)
    left = _wrap32(a << np.clip(-shift, 0, 32))
    return np.where(shift >= 0, right, left)


def _reference(acc: np.ndarray, residual: np.ndarray, stages: list[DrainStage], words: list[np.ndarray]) -> np.ndarray:
    """int8 tiles of a STORE ACC: ``acc``/``residual`` (tiles, lanes), ``words[k]`` stage k's word."""
    out = np.empty(acc.shape, np.int8)
    for e in range(len(acc)):
        x, r = acc[e].astype(np.int64), residual[e].astype(np.int64)
        for stage, word in zip(stages, words):
            b = r if stage.operand_residual else word.astype(np.int64)
            if stage.on_residual:
                r = _alu(stage.op, r, b)
            else:
                x = _alu(stage.op, x, b)
        out[e] = (((x + 128) & 0xFF) - 128).astype(np.int8)  # the low 8 bits
    return out


# -- random descriptors on random tiles ------------------------------------------------------------

_stage = st.builds(DrainStage, st.sampled_from(list(DrainOp)), st.booleans(), st.booleans())


@st.composite
def _cases(draw: st.DrawFn, cfg: Config) -> dict:
    lanes = cfg.BATCH * cfg.BLOCK_OUT
    y, x = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    count = y * x
    stages = draw(st.lists(_stage, max_size=cfg.DRAIN_STAGES))
    stride = draw(st.integers(1, 3))
    small = st.integers(-(1 << 12), 1 << 12)  # values a shift or a clip does not always erase
    value = st.one_of(small, st.integers(-(1 << 31), (1 << 31) - 1))

    def ints(shape: tuple[int, ...], elements: st.SearchStrategy[int] = value) -> np.ndarray:
        flat = draw(st.lists(elements, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
        return np.array(flat, np.int64).reshape(shape)

    eight_bit = draw(st.booleans())
    return {
        "y": y, "x": x, "x_stride": x + draw(st.integers(0, 2)), "stages": stages, "stride": stride,
        "d": draw(st.integers(0, 5)), "acc_base": draw(st.integers(0, 5)),
        "acc": ints((count, lanes)).astype(np.int32),
        # the descriptor's block: header, then n·stride words (other channel blocks' words between)
        "block": ints((1 + len(stages) * stride, lanes)).astype(np.int32),
        "eight_bit": eight_bit,
        "residual": ints((count, lanes), st.integers(-128, 127) if eight_bit else value).astype(np.int32),
    }


def _drain_program(cfg: Config, case: dict) -> tuple[Program, int]:
    """LOAD ACC on compute, a token, the epi words on store, STORE ACC; then a second STORE ACC
    of the same tiles through a descriptor adding 5 (so its output is 5 where the tiles are zero)."""
    lanes, batch = cfg.BLOCK_OUT, cfg.BATCH
    y, x, xs, d, stride = case["y"], case["x"], case["x_stride"], case["d"], case["stride"]
    count, stages = y * x, tuple(case["stages"])
    res_base = d + len(case["block"]) + 1
    d2 = res_base + count + 1
    block = case["block"].copy()
    block[0] = encode_header(cfg, stages, res_base=res_base, stride=stride)
    second = np.zeros((2, lanes * batch), np.int32)
    second[0] = encode_header(cfg, (DrainStage(AluOp.ADD),))
    second[1] = 5

    b = ProgramBuilder(cfg)
    acc = b.tensor("acc", data=case["acc"].reshape(count, batch, lanes), role="input")
    rtype = MemoryType.EPI_8BIT if case["eight_bit"] else MemoryType.EPI
    res = b.tensor("res", data=case["residual"].astype(np.int8 if case["eight_bit"] else np.int32)
                   .reshape(count, batch, lanes), role="input")
    out = b.tensor("out", shape=(y * xs, batch, lanes), dtype="int8", role="output")
    out2 = b.tensor("out2", shape=(count, batch, lanes), dtype="int8", role="output")
    b.load_2d(MemoryType.ACC, case["acc_base"], acc, y_size=1, x_size=count)
    b.dep_push(Module.COMPUTE, Module.STORE)
    b.load_epi_words(d, block)
    b.load_2d(rtype, res_base, res, y_size=1, x_size=count)
    b.load_epi_words(d2, second)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    b.store_2d(case["acc_base"], out, y_size=y, x_size=x, x_stride=xs, epi_base=d)
    b.store_2d(case["acc_base"], out2, y_size=1, x_size=count, epi_base=d2)
    return b.finish(), count


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_store_acc_equals_the_reference(name: str, data: st.DataObject) -> None:
    cfg = CONFIGS[name]
    case = data.draw(_cases(cfg))
    program, count = _drain_program(cfg, case)
    result = run(program)
    stride, block = case["stride"], case["block"]
    words = [block[(k + 1) * stride] for k in range(len(case["stages"]))]
    expected = _reference(case["acc"], case["residual"], case["stages"], words)
    y, x, xs = case["y"], case["x"], case["x_stride"]
    got = program.read("out", result.dram).reshape(y, xs, -1)
    assert (got[:, :x].reshape(count, -1) == expected).all()
    assert (got[:, x:] == 0).all()  # the stride's gaps are not written
    # the first drain zeroed the tiles: the second one writes 0 + 5
    assert (program.read("out2", result.dram) == 5).all()


def test_store_acc_of_no_stages_truncates() -> None:
    case = {"y": 1, "x": 3, "x_stride": 3, "stages": [], "stride": 1, "d": 0, "acc_base": 0,
            "acc": np.array([[300, -129, 127, 128] * 4, [-1] * 16, [1 << 30] * 16], np.int32),
            "block": np.zeros((1, 16), np.int32), "eight_bit": False, "residual": np.zeros((3, 16), np.int32)}
    program, _ = _drain_program(V2, case)
    got = program.read("out", run(program).dram).reshape(3, 16)
    assert got[0, :4].tolist() == [44, 127, 127, -128] and (got[1] == -1).all() and (got[2] == 0).all()


# -- the simulator's errors -----------------------------------------------------------------------------

_TAIL = r" \[STORE ACC pop_prev_dep push_prev_dep .*\]$"


def _one_store(header: np.ndarray, words: int = 3, epi_at: int = 10, epi_base: int = 10,
               cfg: Config = V2) -> Program:
    b = ProgramBuilder(cfg)
    acc = b.tensor("acc", data=np.ones((2, 1, 16), np.int32), role="input")
    out = b.tensor("out", shape=(2, 1, 16), dtype="int8", role="output")
    b.load_2d(MemoryType.ACC, 0, acc, y_size=1, x_size=2)
    b.dep_push(Module.COMPUTE, Module.STORE)
    block = np.zeros((words, 16), np.int32)
    block[0] = header
    b.load_epi_words(epi_at, block)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    b.store_2d(0, out, y_size=1, x_size=2, epi_base=epi_base)
    return b.finish()


def _header(stages: tuple[DrainStage, ...] = (DrainStage(AluOp.ADD),), **kwargs: int) -> np.ndarray:
    return encode_header(V2, stages, **kwargs)


def _bad_code() -> np.ndarray:
    header = _header((DrainStage(AluOp.ADD), DrainStage(AluOp.MAX)))
    header[3] = 0x27 << 8 | 0x02  # stage 1: op 7 (no operation) with operand_residual
    return header


def _nine_stages() -> np.ndarray:
    """A header of DRAIN_STAGES + 1 (13) stages, one more than v2's drain unit has."""
    header = _header((DrainStage(AluOp.ADD),) * 12)
    header[0], header[6] = 13, 0x02
    return header


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (lambda: _one_store(_bad_code()), r"^instruction 2: descriptor epi\[10\]: invalid drain stage code 0x27"),
        (lambda: _one_store(_nine_stages(), words=10),
         r"^instruction 2: descriptor epi\[10\] has 13 stages, more than the drain unit's 12 \(DRAIN_STAGES\)"),
        (lambda: _one_store(_header(), cfg=V2.replace(DRAIN_STAGES=2, DRAIN_OPS=parse_drain_ops("RSHR/ADD"))),
         r"^instruction 2: descriptor epi\[10\] has stage 0 ADD, which the drain unit's stage 0 does not have "
         r"\(DRAIN_OPS: it has RSHR\)"),
        (lambda: _one_store(_header(stride=300)),
         r"^instruction 2: descriptor epi\[10\] reads operand words up to epi\[310\], outside the epi buffer "
         r"\(256 words\)"),
        (lambda: _one_store(_header(stride=-2)),
         r"^instruction 2: descriptor epi\[10\] reads operand words up to epi\[8\], outside the epi buffer "
         r"\(256 words\)"),
        (lambda: _one_store(_header((DrainStage(AluOp.ADD, operand_residual=True),), res_base=255)),
         r"^instruction 2 \(its residual\) accesses epi buffer elements 255\.\.256, past its depth \(256\)"),
    ],
    ids=["bad-code", "too-many-stages", "op-not-in-stage", "operands-outside", "negative-stride", "residual-outside"],
)
def test_drain_errors(program, message: str) -> None:
    with pytest.raises(MemoryAccessError, match=message + ".*" + _TAIL):
        run(program())


def test_the_last_words_of_the_epi_buffer_are_inside() -> None:
    # the residual epi[254..255] and the operand words up to epi[255] are in range
    run(_one_store(_header((DrainStage(AluOp.ADD, operand_residual=True),), res_base=254)))
    run(_one_store(_header(stride=245)))


def _program_from_asm(text: str, cfg: Config, asm_cfg: Config | None = None) -> Program:
    words = encode_stream(assemble(text, asm_cfg or cfg), asm_cfg or cfg)
    image = words_to_bytes(words)
    dram = np.zeros(4096 + len(image), np.uint8)
    dram[4096:] = image
    return Program(cfg, dram, 4096, len(words))


def test_descriptor_header_outside_the_epi_buffer() -> None:
    # epi_base 300 = 0x12c: y_pad_0 = 0xc, y_pad_1 = 2, x_pad_0 = 1 (the builder refuses it)
    program = _program_from_asm("STORE ACC push_prev_dep y_size=1 x_size=1 y_pad_0=12 y_pad_1=2 x_pad_0=1\n"
                                "FINISH pop_next_dep", V2)
    with pytest.raises(MemoryAccessError, match=r"^instruction 0 \(its descriptor header\) accesses epi buffer "
                                                r"elements 300\.\.300, past its depth \(256\) \[STORE ACC"):
        run(program)


def test_a_sync_store_acc_reads_no_descriptor() -> None:
    # x_size 0 moves nothing: the descriptor index is not looked at
    run(_program_from_asm("STORE ACC push_prev_dep y_pad_0=12 y_pad_1=2 x_pad_0=1\nFINISH pop_next_dep", V2))


# -- without a drain unit ----------------------------------------------------------------------------


def test_a_program_for_vta_with_store_acc_is_refused() -> None:
    text = "LOAD UOP\nLOAD ACC\nSTORE ACC push_prev_dep y_pad_0=1\nLOAD EPI\nFINISH pop_next_dep"
    with pytest.raises(ProgramError, match=r"^instruction 2: STORE ACC is an instruction of machine v2 \(the drain "
                                           r"unit\), which configuration 'vta' does not have$"):
        _program_from_asm(text, preset("vta"), asm_cfg=V2)
    _program_from_asm(text, V2)  # the same words are a program of v2


def test_a_built_v2_program_for_vta_names_its_first_v2_instruction() -> None:
    built = _one_store(_header())
    with pytest.raises(ProgramError, match=r"^instruction 1: LOAD EPI is an instruction of machine v2 "):
        Program(preset("vta"), built.dram, built.insn_addr, built.insn_count)


# -- tokens: the race checker -------------------------------------------------------------------------


def _race_program(producer: str, token_before: bool, token_after: bool, reuser: str = "alu") -> Program:
    b = ProgramBuilder(V2)
    acc = b.tensor("acc", data=np.ones((2, 1, 16), np.int32), role="input")
    out = b.tensor("out", shape=(2, 1, 16), dtype="int8", role="output")
    b.load_epi_words(10, np.stack([_header(), np.full(16, 3, np.int32)]))
    kernel = UopKernel((Uop(0, 0),), (UopLoop(2, dst_factor=1, src_factor=1),))
    if producer == "alu":
        b.alu(kernel, AluOp.ADD, imm=7)
    else:
        b.load_2d(MemoryType.ACC, 0, acc, y_size=1, x_size=2)
    if token_before:
        b.dep_push(Module.COMPUTE, Module.STORE)
        b.dep_pop(Module.COMPUTE, Module.STORE)
    b.store_2d(0, out, y_size=1, x_size=2, epi_base=10)
    if token_after:
        b.dep_push(Module.STORE, Module.COMPUTE)
        b.dep_pop(Module.STORE, Module.COMPUTE)
    if reuser == "alu":
        b.alu(kernel, AluOp.ADD, imm=1)  # compute reuses the drained tiles
    else:
        b.gemm(kernel, reset=True)  # or zeroes them for the next accumulation
    return b.finish()


@pytest.mark.parametrize("producer", ["alu", "load"])
def test_store_acc_without_the_compute_to_store_token_is_a_race(producer: str) -> None:
    writer = "ALU" if producer == "alu" else "LOAD ACC"
    with pytest.raises(RaceError, match=r"^race on out buffer element 0: store writes it in instruction \d+ "
                                        rf"\(STORE ACC .*\), but the write by compute in instruction \d+ \({writer}"):
        run(_race_program(producer, token_before=False, token_after=True))


def test_reusing_drained_tiles_without_the_store_to_compute_token_is_a_race() -> None:
    # Either side may run first (nothing orders them): the race names both writes either way.
    store = r"store (?:writes it )?in instruction \d+ \(STORE ACC [^)]*\)"
    alu = r"compute (?:writes it )?in instruction \d+ \(ALU ADD [^)]*imm=1\)"
    with pytest.raises(RaceError, match=rf"^race on out buffer element 0: (?:{store}, but the write by {alu}|"
                                        rf"{alu}, but the write by {store}) is not ordered before it"):
        run(_race_program("load", token_before=True, token_after=False))


def test_a_gemm_reset_of_drained_tiles_without_the_store_to_compute_token_is_a_race() -> None:
    """A reset writes the accumulator the drain reads: shared, as an ALU write is (a reset
    inside batch_matmul's heads loop once cleared the tiles the previous head drained)."""
    store = r"store (?:writes it )?in instruction \d+ \(STORE ACC [^)]*\)"
    reset = r"compute (?:writes it )?in instruction \d+ \(GEMM reset_reg [^)]*\)"
    with pytest.raises(RaceError, match=rf"^race on out buffer element 0: (?:{store}, but the write by {reset}|"
                                        rf"{reset}, but the write by {store}) is not ordered before it"):
        run(_race_program("load", token_before=True, token_after=False, reuser="reset"))
    run(_race_program("load", token_before=True, token_after=True, reuser="reset"))


@pytest.mark.parametrize("producer", ["alu", "load"])
def test_both_tokens_order_the_drain(producer: str) -> None:
    program = _race_program(producer, token_before=True, token_after=True)
    result = run(program)
    # ALU: 0 + 7 (the acc starts zeroed), LOAD: 1; then the descriptor adds 3
    assert (program.read("out", result.dram) == (10 if producer == "alu" else 4)).all()

"""ProgramBuilder and machine v2's drain unit (docs/ISA.md §9): the epi LOADs, STORE ACC,
and the errors on a machine without a drain unit."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from openvta.isa import AluOp, DrainStage, MemoryType, Module, Opcode, encode_header, epi_base_of, preset
from openvta.runtime import BuildError, ProgramBuilder

V2 = preset("v2")
_NO_DRAIN = r"needs a drain unit \(machine v2: DRAIN_STAGES > 0\), which configuration '{}' does not have$"


def _with_tensors(cfg) -> tuple[ProgramBuilder, dict]:
    b = ProgramBuilder(cfg)
    lanes = cfg.BATCH * cfg.BLOCK_OUT
    return b, {
        "epi": b.tensor("epi", data=np.zeros((4, cfg.BATCH, cfg.BLOCK_OUT), np.int32)),
        "epi8": b.tensor("epi8", data=np.zeros((4, cfg.BATCH, cfg.BLOCK_OUT), np.int8)),
        "out": b.tensor("out", shape=(4, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8"),
        "words": np.zeros((2, lanes), np.int32),
    }


_V2_CALLS: dict[str, tuple[str, Callable[[ProgramBuilder, dict], None]]] = {
    "store_2d": ("store_2d with epi_base", lambda b, t: b.store_2d(0, t["out"], y_size=1, x_size=4, epi_base=0)),
    "load_epi_words": ("load_epi_words", lambda b, t: b.load_epi_words(0, t["words"])),
    "load_2d EPI": ("load_2d of EPI", lambda b, t: b.load_2d(MemoryType.EPI, 0, t["epi"], y_size=1, x_size=4)),
    "load_2d EPI_8BIT": ("load_2d of EPI_8BIT",
                         lambda b, t: b.load_2d(MemoryType.EPI_8BIT, 0, t["epi8"], y_size=1, x_size=4)),
}


@pytest.mark.parametrize("name", ["vta", "small", "tiny"])
@pytest.mark.parametrize("call", sorted(_V2_CALLS))
def test_v2_calls_need_a_drain_unit(name: str, call: str) -> None:
    what, emit = _V2_CALLS[call]
    b, tensors = _with_tensors(preset(name))
    with pytest.raises(BuildError, match=rf"^{what} {_NO_DRAIN.format(name)}"):
        emit(b, tensors)
    assert b.insns == []  # nothing was emitted


@pytest.mark.parametrize("call", sorted(_V2_CALLS))
def test_v2_calls_build_on_v2(call: str) -> None:
    b, tensors = _with_tensors(V2)
    _V2_CALLS[call][1](b, tensors)
    assert len(b.insns) == 1
    b.finish()


@pytest.mark.parametrize(
    ("emit", "message"),
    [
        (lambda b, t: b.store_2d(0, t["out"], y_size=1, x_size=4, epi_base=256),
         r"^store_2d descriptor of 1 EPI elements at sram_base 256 runs past the buffer \(256 elements\)$"),
        (lambda b, t: b.store_2d(0, t["out"], y_size=1, x_size=4, epi_base=-1),
         r"^store_2d descriptor of 1 EPI elements at sram_base -1 runs past the buffer \(256 elements\)$"),
        (lambda b, t: b.store_2d(2046, t["out"], y_size=1, x_size=4, epi_base=0),
         r"^store_2d of 4 ACC elements at sram_base 2046 runs past the buffer \(2048 elements\)$"),
        (lambda b, t: b.load_epi_words(255, t["words"]),
         r"^load_epi_words of 2 EPI elements at sram_base 255 runs past the buffer \(256 elements\)$"),
        (lambda b, t: b.load_2d(MemoryType.EPI_8BIT, 253, t["epi8"], y_size=1, x_size=4),
         r"^load_2d of 4 EPI_8BIT elements at sram_base 253 runs past the buffer \(256 elements\)$"),
    ],
    ids=["descriptor-past", "descriptor-negative", "acc-past", "epi-words-past", "epi8-past"],
)
def test_v2_range_errors(emit, message: str) -> None:
    b, tensors = _with_tensors(V2)
    with pytest.raises(BuildError, match=message):
        emit(b, tensors)


def test_store_2d_with_epi_base_is_a_store_acc_with_the_index_in_its_pads() -> None:
    cfg = V2.replace(LOG_EPI_BUFF_SIZE=20)  # 2**14 epi words: an index of all four pads
    b, tensors = _with_tensors(cfg)
    b.store_2d(1, tensors["out"], offset=1, y_size=1, x_size=3, epi_base=0x1234)
    (insn,) = b.insns
    assert (insn.opcode, insn.memory_type, insn.sram_base) == (Opcode.STORE, MemoryType.ACC, 1)
    assert (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1) == (4, 3, 2, 1)
    assert epi_base_of(insn) == 0x1234
    # DRAM is addressed in OUT elements (docs/ISA.md §4, §9)
    assert insn.dram_base == tensors["out"].addr // cfg.elem_bytes(MemoryType.OUT) + 1
    b.store_2d(0, tensors["out"], y_size=1, x_size=4)
    assert b.insns[-1].memory_type == MemoryType.OUT and epi_base_of(b.insns[-1]) == 0


def test_load_epi_words_share_their_dram() -> None:
    b = ProgramBuilder(V2)
    words = np.stack([encode_header(V2, (DrainStage(AluOp.MAX),)), np.zeros(16, np.int32)])
    b.load_epi_words(0, words)
    b.load_epi_words(40, words)  # the same words: the same DRAM
    b.load_epi_words(80, words[::-1])
    b.dep_push(Module.STORE, Module.COMPUTE)
    b.dep_pop(Module.STORE, Module.COMPUTE)
    program = b.finish()
    loads = [i for i in program.instructions() if getattr(i, "memory_type", None) == MemoryType.EPI]
    assert [i.module for i in loads] == [Module.STORE] * 3
    assert [i.sram_base for i in loads] == [0, 40, 80]
    assert loads[0].dram_base == loads[1].dram_base != loads[2].dram_base
    epi_bytes = V2.elem_bytes(MemoryType.EPI)
    start = loads[0].dram_base * epi_bytes
    image = program.dram[start : start + words.nbytes].view("<i4").reshape(words.shape)
    assert (image == words).all()

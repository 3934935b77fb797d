"""Encoding checks on a whole instruction stream, before anything runs (vectorized)."""

from __future__ import annotations

import numpy as np

from openvta.isa import AluOp, Config, MemoryType, Opcode, layouts_of
from openvta.isa.encoding import Format
from openvta.isa.instructions import valid_members

from ..errors import EncodingError

__all__ = ["check_stream"]

_GEMM_ONLY_FIELDS = (
    "reset_reg", "uop_bgn", "uop_end", "iter_out", "iter_in", "dst_factor_out",
    "dst_factor_in", "src_factor_out", "src_factor_in", "wgt_factor_out", "wgt_factor_in",
)


def _fail(mask: np.ndarray, message: str) -> None:
    if mask.any():
        index = int(np.flatnonzero(mask)[0])
        raise EncodingError(f"instruction {index}: {message}")


def _padding_set(words: np.ndarray, cfg: Config, fmt: str) -> np.ndarray:
    covered = np.zeros(2, dtype=np.uint64)
    for f in layouts_of(cfg)[fmt].fields:
        covered[f.word] |= np.uint64(f.mask) << np.uint64(f.shift)
    return ((words & ~covered[None, :]) != 0).any(axis=1)


def check_stream(table: dict[str, np.ndarray], words: np.ndarray, cfg: Config) -> None:
    """Raise :class:`EncodingError` for the first instruction that is not a valid encoding.

    Checks: opcode, memory type and ALU opcode values; no prev flags on load-module
    instructions and no next flags on stores; STORE only of OUT with zero padding (or,
    with a drain unit, of ACC, whose pads hold its descriptor's index); no
    LOAD of OUT; FINISH with every non-flag field zero, exactly once, last; and the
    padding bits between fields zero.
    """
    op = table["opcode"]
    _fail(op > max(Opcode), "invalid opcode (5-7 are not instructions)")
    is_load, is_store = op == Opcode.LOAD, op == Opcode.STORE
    is_mem = is_load | is_store
    mtype = table["memory_type"]
    # (only machine v2's may be missing: docs/ISA.md §9)
    _fail(is_mem & ~np.isin(mtype, list(valid_members("memory_type", cfg))),
          "invalid memory_type (6-7 are not memory types on a machine without a drain unit)")
    _fail((op == Opcode.ALU) & (table["alu_opcode"] > max(AluOp)), "invalid alu_opcode (5-7 are not ALU ops)")
    on_load = is_load & ((mtype == MemoryType.INP) | (mtype == MemoryType.WGT))
    _fail(on_load & ((table["pop_prev_dep"] | table["push_prev_dep"]) != 0),
          "a load-module instruction (LOAD INP/WGT) must not set pop_prev_dep or push_prev_dep")
    _fail(is_store & ((table["pop_next_dep"] | table["push_next_dep"]) != 0),
          "a STORE must not set pop_next_dep or push_next_dep")
    on_store = is_load & ((mtype == MemoryType.EPI) | (mtype == MemoryType.EPI_8BIT))
    _fail(on_store & ((table["pop_next_dep"] | table["push_next_dep"]) != 0),
          "a store-module instruction (LOAD EPI/EPI_8BIT) must not set pop_next_dep or push_next_dep")
    drains = is_store & (mtype == MemoryType.ACC)
    if cfg.has_drain:
        _fail(is_store & (mtype != MemoryType.OUT) & ~drains, "a STORE must have memory_type OUT or ACC")
    else:
        _fail(is_store & (mtype != MemoryType.OUT),
              "a STORE must have memory_type OUT (STORE ACC needs a drain unit, DRAIN_STAGES > 0)")
    pads = table["y_pad_0"] | table["y_pad_1"] | table["x_pad_0"] | table["x_pad_1"]
    _fail(is_store & ~drains & (pads != 0), "a STORE of OUT must have all pads zero")
    _fail(is_load & (mtype == MemoryType.OUT), "LOAD of memory_type OUT is not an instruction")
    _fail(is_mem & (mtype != MemoryType.INP) & (table["pad_min"] != 0),
          "pad_min (padding with -128) is for a LOAD of INP only")
    finish = op == Opcode.FINISH
    nonzero = np.zeros(len(op), dtype=bool)
    for name in _GEMM_ONLY_FIELDS:
        nonzero |= table[name] != 0
    _fail(finish & nonzero, "FINISH must have every field zero except the dependency flags")
    for fmt, mask in ((Format.MEM, is_mem), (Format.GEMM, (op == Opcode.GEMM) | finish),
                      (Format.ALU, op == Opcode.ALU)):
        _fail(mask & _padding_set(words, cfg, fmt), "padding bits between fields must be zero")
    finishes = np.flatnonzero(finish)
    if len(finishes) == 0:
        raise EncodingError("the program has no FINISH instruction (it must end with one)")
    if finishes[0] != len(op) - 1:
        raise EncodingError(
            f"instruction {int(finishes[0])}: FINISH must be the last instruction, but "
            f"{len(op) - 1 - int(finishes[0])} instructions follow it"
        )

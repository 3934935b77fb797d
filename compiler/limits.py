"""What a program must fit before it is generated: the DRAM address space and an instruction budget.

Both are checked up front, so an absurd size fails in a second with the numbers instead
of running for minutes: the operators check their tensors before planning a schedule,
:func:`~openvta.compiler.pipeline.build` checks the lowered program (tensors and the
instructions it will emit) before code generation.
"""

from __future__ import annotations

from collections.abc import Iterable
from math import prod

import numpy as np

from openvta.isa import INSN_BYTES, Config
from openvta.isa.counters import REG_WIDTH

from .ir import Block, Dma, Loop, LoweringError, Stmt, Threaded, UopInsn

__all__ = ["DRAM_LIMIT_BYTES", "MAX_INSNS", "check_dram", "check_insns", "count_insns", "format_bytes"]

#: The DRAM a program can use: the instruction stream is placed after every tensor and
#: its byte address goes into the REG_WIDTH-bit instruction-address register.
DRAM_LIMIT_BYTES = 1 << REG_WIDTH

#: The default bound on the instructions of one program: 16 MiB of instruction stream,
#: several minutes of code generation and far longer on any back end.
MAX_INSNS = 1 << 20


def format_bytes(count: int) -> str:
    """``4294967296`` → ``"4.0 GiB"``."""
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{count} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _aligned(nbytes: int, cfg: Config) -> int:
    align = cfg.max_elem_bytes
    return -(-nbytes // align) * align


def check_dram(owner: str, cfg: Config, tensors: Iterable[tuple[str, tuple[int, ...], str]],
               insns: int = 0) -> None:
    """Raise unless the ``(name, shape, dtype)`` tensors and ``insns`` instructions fit DRAM.

    Raises
    ------
    LoweringError
        ``"<owner>: the program needs at least 4297328640 bytes of DRAM (data 2.0 GiB, …),
        more than the 4294967296 bytes (4.0 GiB) that 32-bit DRAM addresses reach"``.
    """
    sizes = {name: _aligned(prod(shape) * np.dtype(dtype).itemsize, cfg) for name, shape, dtype in tensors}
    if insns:
        sizes["instructions"] = insns * INSN_BYTES
    total = sum(sizes.values())
    if total > DRAM_LIMIT_BYTES:
        parts = ", ".join(f"{name} {format_bytes(size)}" for name, size in sizes.items())
        raise LoweringError(owner, f"the program needs at least {total} bytes of DRAM ({parts}), "
                            f"more than the {DRAM_LIMIT_BYTES} bytes ({format_bytes(DRAM_LIMIT_BYTES)}) "
                            f"that {REG_WIDTH}-bit DRAM addresses reach")


def count_insns(stmt: Stmt) -> int:
    """Instructions that code generation emits for ``stmt`` (a lower bound: micro-op loads
    and token-only instructions come on top), counted without running the host loops."""
    if isinstance(stmt, Loop):
        return stmt.extent * count_insns(stmt.body)
    if isinstance(stmt, Block):
        return sum(count_insns(s) for s in stmt.stmts)
    if isinstance(stmt, Threaded):
        return count_insns(stmt.stmt)
    if isinstance(stmt, Dma):
        return prod(d.extent for d in stmt.dims[:-2])
    if isinstance(stmt, UopInsn):
        return 1
    return 0


def check_insns(count: int, max_insns: int | None) -> None:
    """Raise unless ``count`` instructions are within ``max_insns`` (None: no bound)."""
    if max_insns is not None and count > max_insns:
        raise LoweringError("check size", f"the program would have at least {count} instructions, "
                            f"more than max_insns={max_insns}; use a smaller shape or larger tiles, "
                            "or raise max_insns")


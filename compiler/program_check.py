"""The checks of a multi-kernel program before anything is lowered (see :mod:`.program`).

Each kernel must bind every symbol of its operator to a declared tensor of the same
layout, dtype and logical shape; a tensor is written by at most one kernel, and read only
after it is written unless the host supplies it (roles input, weight, bias); tensors
that share DRAM bytes must never be live at the same time.  A tensor is live from the
program's start (host-supplied) or from the kernel that writes it, to the last kernel
that reads it, or to the end for an output.  Every failure is a
:class:`~openvta.compiler.ir.LoweringError` of ``build_program`` naming the kernel, the
symbol and the tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openvta.isa import Config
from openvta.runtime import Role

from .ir import LoweringError
from .program_parts import HOST_ROLES, Kernel, ProgramTensor

__all__ = ["Dataflow", "check_program", "HOST_ROLES"]

_WHERE = "build_program"


def _fail(message: str) -> LoweringError:
    return LoweringError(_WHERE, message)


@dataclass(frozen=True)
class Dataflow:
    """Who writes and reads each tensor, and when it is live (kernel indices, inclusive)."""

    writer: dict[str, int]
    readers: dict[str, list[int]]
    live: dict[str, tuple[int, int]]


def label(kernels: Sequence[Kernel], index: int) -> str:
    return f"kernel {index} ({kernels[index].name})"


def check_program(kernels: Sequence[Kernel], cfg: Config, tensors: Sequence[ProgramTensor]) -> Dataflow:
    """Check bindings, dataflow and DRAM sharing (module docstring); the dataflow found."""
    if cfg.BLOCK_IN != cfg.BLOCK_OUT:
        raise _fail(f"chained kernels need BLOCK_IN == BLOCK_OUT (one kernel's NCHW{{B}}n{{BO}}c output is "
                    f"the next one's NCHW{{B}}n{{BI}}c input), not BLOCK_IN={cfg.BLOCK_IN} and "
                    f"BLOCK_OUT={cfg.BLOCK_OUT}")
    if not kernels:
        raise _fail("a program needs at least one kernel")
    by_name: dict[str, ProgramTensor] = {}
    for tensor in tensors:
        if tensor.name in by_name:
            raise _fail(f"tensor {tensor.name!r} is declared twice")
        if tensor.offset % cfg.max_elem_bytes:
            raise _fail(f"tensor {tensor.name!r} offset must be a multiple of {cfg.max_elem_bytes} bytes "
                        f"(the DRAM alignment of {cfg.name}), not {tensor.offset}")
        by_name[tensor.name] = tensor
    for index in range(len(kernels)):
        _check_binding(kernels, index, cfg, by_name)
    flow = _dataflow(kernels, by_name)
    _check_overlaps(kernels, by_name, flow)
    return flow


def _check_binding(kernels: Sequence[Kernel], index: int, cfg: Config, by_name: dict[str, ProgramTensor]) -> None:
    kernel, where = kernels[index], label(kernels, index)
    op = kernel.operator
    if op.cfg != cfg:
        raise _fail(f"{where} is scheduled for the {op.cfg.name} configuration, the program is for "
                    f"{cfg.name}")
    symbols = [*op.inputs, "out"]
    missing = [s for s in symbols if s not in kernel.bind]
    unknown = [s for s in kernel.bind if s not in symbols]
    if missing or unknown:
        raise _fail(f"{where} must bind exactly its symbols {', '.join(symbols)} "
                    f"(unbound: {', '.join(missing) or 'none'}; unknown: {', '.join(unknown) or 'none'})")
    out = kernel.bind["out"]
    for symbol in symbols:
        name = kernel.bind[symbol]
        if name not in by_name:
            raise _fail(f"{where} binds {symbol} to {name!r}, which is not a declared tensor")
        if symbol != "out" and name == out:
            raise _fail(f"{where} binds {name!r} to both its output and its input {symbol!r}")
        tensor = by_name[name]
        dtype = op.output.dtype if symbol == "out" else op.inputs[symbol].dtype
        expected = (op.layouts[symbol], dtype, op.logical_shapes[symbol])
        found = (tensor.layout, tensor.dtype, tensor.shape)
        if found != expected:
            raise _fail(f"{where} takes {symbol} as {_describe(*expected)}, but {name!r} is declared "
                        f"{_describe(*found)}")


def _describe(layout: str, dtype: str, shape: tuple[int, ...]) -> str:
    return f"{dtype} {shape} in {layout}"


def _dataflow(kernels: Sequence[Kernel], by_name: dict[str, ProgramTensor]) -> Dataflow:
    writer: dict[str, int] = {}
    readers: dict[str, list[int]] = {name: [] for name in by_name}
    for index, kernel in enumerate(kernels):
        where = label(kernels, index)
        for symbol, name in kernel.bind.items():
            if symbol != "out":
                readers[name].append(index)
                continue
            tensor = by_name[name]
            if tensor.role in HOST_ROLES:
                raise _fail(f"{where} writes {name!r}, a tensor of role {tensor.role} that the host supplies")
            if name in writer:
                raise _fail(f"{where} writes {name!r}, which {label(kernels, writer[name])} already writes")
            writer[name] = index
    for name, reads in readers.items():
        tensor = by_name[name]
        if tensor.role in HOST_ROLES or not reads:
            continue
        first = min(reads)
        if name not in writer:
            raise _fail(f"{label(kernels, first)} reads {name!r}, which no kernel writes (a {tensor.role} "
                        f"tensor; only {', '.join(HOST_ROLES[:-1])} and {HOST_ROLES[-1]} tensors come from "
                        "the host)")
        if writer[name] > first:
            raise _fail(f"{label(kernels, first)} reads {name!r} before {label(kernels, writer[name])} writes it")
    last = len(kernels) - 1
    live = {}
    for name, tensor in by_name.items():
        uses = readers[name] + ([writer[name]] if name in writer else [])
        if tensor.role is Role.OUTPUT and name not in writer:
            raise _fail(f"output tensor {name!r} is written by no kernel")
        if tensor.role in HOST_ROLES:
            live[name] = (0, max(uses, default=0))
        elif uses:
            live[name] = (writer[name], last if tensor.role is Role.OUTPUT else max(uses))
    return Dataflow(writer, readers, live)


def _check_overlaps(kernels: Sequence[Kernel], by_name: dict[str, ProgramTensor], flow: Dataflow) -> None:
    spans = sorted((by_name[name].offset, by_name[name].offset + by_name[name].nbytes, name)
                   for name in flow.live)
    for i, (start, end, name) in enumerate(spans):
        for other_start, other_end, other in spans[i + 1:]:
            if other_start >= end:
                break
            (a0, a1), (b0, b1) = flow.live[name], flow.live[other]
            if a0 <= b1 and b0 <= a1:
                raise _fail(f"tensors {name!r} (bytes {start}..{end - 1}, live in kernels {a0}..{a1}) and "
                            f"{other!r} (bytes {other_start}..{other_end - 1}, live in kernels {b0}..{b1}) "
                            f"share DRAM while both are live (in {label(kernels, max(a0, b0))})")

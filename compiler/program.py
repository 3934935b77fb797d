"""Several kernels in one program: one instruction stream, one DRAM arena.

The graph level lowers a region of consecutive accelerator kernels into one program, so
that a layer's output stays in DRAM for the next layer (no host round trip).  Each
:class:`Kernel` is a scheduled :class:`~openvta.compiler.ops.common.Operator` (conv2d or
dense with its epilogue, from the registry) and a binding of its symbols (``data``,
``weight``, ``bias``, epilogue operands, ``out``) to program tensors; each
:class:`ProgramTensor` is declared once with the byte offset the caller's memory planner
chose in the arena, its dtype, packed layout, logical shape, role and constant data.  A
kernel's output in ``NCHW{B}n{BO}c`` is the next kernel's input in ``NCHW{B}n{BI}c``
(the same bytes, as BLOCK_IN == BLOCK_OUT).

:func:`build_program` checks the program (:mod:`.program_check`: bindings, who writes
what before whom, no two live tensors sharing bytes), lowers every kernel, and emits
them in the order given, with a barrier (:meth:`~openvta.runtime.ProgramBuilder.barrier`)
between consecutive kernels: every instruction of kernel ``k`` happens before every
instruction of kernel ``k + 1``, so a load reads what the previous kernel stored and a
buffer may be reused as soon as its last reader is done.  :func:`program_reference` is
the chained numpy reference.

Examples
--------
>>> import numpy as np
>>> import openvta
>>> from openvta.compiler import conv2d
>>> cfg = openvta.preset("tiny")
>>> first = conv2d(cfg, ci=4, co=4, hw=4, kernel=3, pad=1, bias=False, shift=6)
>>> second = conv2d(cfg, ci=4, co=4, hw=4, kernel=1, bias=False, shift=6)
>>> rng = np.random.default_rng(0)
>>> w1, w2 = (rng.integers(-128, 128, (4, 4, k, k), dtype=np.int8) for k in (3, 1))
>>> act = dict(dtype="int8", layout="NCHW1n4c", shape=(1, 4, 4, 4))
>>> tensors = [ProgramTensor("x", 0, role="input", **act),
...            ProgramTensor("w1", 64, "int8", "OIHW4o4i", (4, 4, 3, 3), "weight", w1),
...            ProgramTensor("w2", 208, "int8", "OIHW4o4i", (4, 4, 1, 1), "weight", w2),
...            ProgramTensor("h", 224, **act),
...            ProgramTensor("y", 0, role="output", **act)]      # x is dead by then: reuse it
>>> kernels = [Kernel(first, {"data": "x", "weight": "w1", "out": "h"}),
...            Kernel(second, {"data": "h", "weight": "w2", "out": "y"})]
>>> program = build_program(kernels, cfg, tensors=tensors)
>>> x = rng.integers(-128, 128, (1, 4, 4, 4), dtype=np.int8)
>>> out = openvta.simulate(program, {"x": x}, backend="functional")["y"]
>>> bool((out == program_reference(kernels, tensors, {"x": x})["y"]).all())
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from openvta.isa import INSN_BYTES, Config
from openvta.runtime import Program, ProgramBuilder, Progress
from openvta.runtime.builder import BuildError

from .codegen import Ticker, emit
from .ir import LoweringError
from .layout import pack_by_layout
from .limits import DRAM_LIMIT_BYTES, MAX_INSNS, check_insns, count_insns, format_bytes
from .lower import Lowered
from .ops.common import as_operand
from .pipeline import lower, no_progress
from .program_check import check_program, label
from .program_parts import TENSOR_DTYPES, Kernel, ProgramTensor

__all__ = ["Kernel", "ProgramTensor", "build_program", "build_program_starts", "program_reference",
           "TENSOR_DTYPES"]


def build_program(kernels: Sequence[Kernel], cfg: Config, *, tensors: Sequence[ProgramTensor],
                  progress: Progress | None = None, max_insns: int | None = MAX_INSNS) -> Program:
    """One program running ``kernels`` in order on the tensors ``tensors`` (module docstring).

    Parameters
    ----------
    progress :
        ``progress(what, done, total)``: ``("lower <kernel>", k, len(kernels))`` before
        lowering kernel ``k``, then ``("codegen", instructions, total)`` as
        :func:`~openvta.compiler.pipeline.build` reports it.
    max_insns :
        refuse a program of more instructions than this (None: no bound).

    Returns
    -------
    Program
        every tensor is a symbol at its offset, with its layout, role and logical shape.

    Raises
    ------
    LoweringError
        ``"build_program: …"`` for bindings, dataflow or DRAM sharing (naming the kernel,
        the symbol and the tensors), ``"build_program kernel k (conv2d): <pass>: …"`` when a
        kernel does not lower, ``"check size: …"`` when the program does not fit.
    """
    return build_program_starts(kernels, cfg, tensors=tensors, progress=progress, max_insns=max_insns)[0]


def build_program_starts(kernels: Sequence[Kernel], cfg: Config, *, tensors: Sequence[ProgramTensor],
                         progress: Progress | None = None, max_insns: int | None = MAX_INSNS
                         ) -> tuple[Program, tuple[int, ...]]:
    """:func:`build_program`, and the index of each kernel's first instruction.

    Kernel ``k`` emits instructions ``starts[k]`` up to ``starts[k + 1] - 1`` (the barrier after
    it included); the last kernel's run to the end of the program (the drained tokens and
    FINISH included).  A caller cuts per-kernel figures from per-instruction ones with them
    (the graph level's per-kernel cycles on the cycle model).

    >>> import openvta
    >>> from openvta.compiler import conv2d
    >>> cfg = openvta.preset("tiny")
    >>> op = conv2d(cfg, ci=4, co=4, hw=4, kernel=1, bias=False)
    >>> act = dict(dtype="int8", layout="NCHW1n4c", shape=(1, 4, 4, 4))
    >>> tensors = [ProgramTensor("x", 0, role="input", **act), ProgramTensor("h", 64, **act),
    ...            ProgramTensor("y", 128, role="output", **act),
    ...            ProgramTensor("w", 192, "int8", "OIHW4o4i", (4, 4, 1, 1), "weight")]
    >>> kernels = [Kernel(op, {"data": "x", "weight": "w", "out": "h"}),
    ...            Kernel(op, {"data": "h", "weight": "w", "out": "y"})]
    >>> program, starts = build_program_starts(kernels, cfg, tensors=tensors)
    >>> starts[0] == 0 and 0 < starts[1] < program.insn_count
    True
    """
    kernels, tensors = list(kernels), list(tensors)
    for tensor in tensors:
        if not isinstance(tensor, ProgramTensor):
            raise TypeError(f"tensors must be ProgramTensor, not {type(tensor).__name__}")
    for kernel in kernels:
        if not isinstance(kernel, Kernel):
            raise TypeError(f"kernels must be Kernel, not {type(kernel).__name__}")
    check_program(kernels, cfg, tensors)
    report = progress or no_progress
    irs = []
    for index, kernel in enumerate(kernels):
        report(f"lower {label(kernels, index)}", index, len(kernels))
        if kernel.lowered is not None:  # (for its operator's configuration: the program's, checked above)
            irs.append(kernel.lowered)
            continue
        try:
            irs.append(lower(kernel.operator.schedule, cfg))
        except LoweringError as exc:
            raise LoweringError(f"build_program {label(kernels, index)}", str(exc)) from None
    insns = sum(count_insns(ir.body) for ir in irs)
    _check_size(tensors, insns)
    check_insns(insns, max_insns)
    return _generate(kernels, irs, cfg, tensors, Ticker(progress, insns) if progress else None)


def _check_size(tensors: list[ProgramTensor], insns: int) -> None:
    arena = max((t.offset + t.nbytes for t in tensors), default=0)
    total = arena + insns * INSN_BYTES
    if total > DRAM_LIMIT_BYTES:
        raise LoweringError("check size", f"the program needs at least {total} bytes of DRAM (arena "
                            f"{format_bytes(arena)}, instructions {format_bytes(insns * INSN_BYTES)}), more "
                            f"than the {DRAM_LIMIT_BYTES} bytes DRAM addresses reach")


def _generate(kernels: list[Kernel], irs: list[Lowered], cfg: Config, tensors: list[ProgramTensor],
              ticker: Ticker | None) -> tuple[Program, tuple[int, ...]]:
    builder = ProgramBuilder(cfg)
    for tensor in tensors:
        if tensor.data is None:
            builder.tensor(tensor.name, shape=tensor.packed_shape, dtype=tensor.dtype, layout=tensor.layout,
                           role=tensor.role, addr=tensor.offset)
        else:
            packed = pack_by_layout(tensor.data, tensor.layout, cfg).astype(tensor.dtype)
            builder.tensor(tensor.name, data=packed, layout=tensor.layout, role=tensor.role, addr=tensor.offset)
    starts = []
    for index, (kernel, ir) in enumerate(zip(kernels, irs)):
        starts.append(len(builder.insns))
        op = kernel.operator
        placed = {op.inputs[s]: builder.symbols[kernel.bind[s]] for s in op.inputs}
        placed[op.output] = builder.symbols[kernel.bind["out"]]
        try:
            emit(builder, ir, placed, ticker)
            if index + 1 < len(kernels):
                builder.barrier()
        except BuildError as exc:
            raise LoweringError(f"codegen {label(kernels, index)}", str(exc)) from None
    if ticker is not None:
        ticker.finish()
    program = builder.finish()
    for tensor in tensors:
        program.symbols[tensor.name] = program.symbols[tensor.name].with_logical_shape(tensor.shape)
    return program, tuple(starts)


def program_reference(kernels: Sequence[Kernel], tensors: Sequence[ProgramTensor],
                      inputs: Mapping[str, ArrayLike] | None = None) -> dict[str, np.ndarray]:
    """numpy: every kernel's reference in order, each reading what the earlier ones wrote.

    ``inputs`` are logical arrays of host-supplied tensors without data (missing: zeros).
    Returns every tensor's logical value by name (the constants and inputs included).
    """
    by_name = {t.name: t for t in tensors}
    values: dict[str, np.ndarray] = {t.name: t.data for t in tensors if t.data is not None}
    for name, value in (inputs or {}).items():
        if name not in by_name:
            raise ValueError(f"input {name!r} must be a declared tensor (tensors: {', '.join(by_name)})")
        tensor = by_name[name]
        values[name] = as_operand(name, value, tensor.shape, tensor.dtype)
    for kernel in kernels:
        op = kernel.operator
        given = {s: values[kernel.bind[s]] for s in op.inputs if kernel.bind[s] in values}
        values[kernel.bind["out"]] = op.reference(given)
    return values

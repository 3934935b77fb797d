"""What every operator shares: the compiled-operator record and the requantizing tail.

Every benchmark operator ends the same way (WORKLOADS.md): ``>> shift``, ``+ bias``,
``clip(0, 127)``, cast to int8 — element-wise stages computed in place in the
accumulator by the ALU, then stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from openvta.isa import Config, Format, layouts_of
from openvta.runtime import Program

from .. import te
from ..limits import MAX_INSNS, check_dram
from ..pipeline import Progress, build
from ..schedule import Schedule, Stage
from ..workloads import BIAS_BITS

__all__ = ["IMM_FIELD", "MAX_PAD", "Operator", "as_operand", "benchmark_operands", "check_tensors", "divisors",
           "reference_tail", "requantize_tail", "schedule_tail"]

# The memory and ALU fields below have the same widths in every configuration (ISA.md §2).
_MEM = layouts_of(Config())[Format.MEM]
#: The most zero rows or columns one DMA adds on a side (the pad fields of LOAD).
MAX_PAD = min(_MEM.field(name).high for name in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"))
#: The ALU's immediate field: clip bounds become MIN and MAX immediates.
IMM_FIELD = layouts_of(Config())[Format.ALU].field("imm")


@dataclass
class Operator:
    """A declared and scheduled operator, ready to compile.

    Members
    -------
    inputs :
        symbol name → placeholder (``data``, ``weight``, ``bias``).
    output :
        the output tensor (symbol ``out``).
    layouts, roles :
        per symbol, the packed layout name and the role recorded in the program file.
    pack :
        logical numpy inputs (NCHW, OIHW, (O,)) → packed arrays, per symbol.
    unpack :
        the packed output → the logical output.
    reference_fn :
        ``reference_fn(inputs, params)``: the registry's numpy reference of the operator
        (see :meth:`reference`).
    params :
        the factory's parameters, every one (defaults included), by name.
    """

    name: str
    cfg: Config
    schedule: Schedule
    inputs: dict[str, te.Tensor]
    output: te.Tensor
    layouts: dict[str, str]
    roles: dict[str, str]
    pack: Callable[[str, np.ndarray], np.ndarray]
    unpack: Callable[[np.ndarray], np.ndarray]
    reference_fn: Callable[[Mapping[str, np.ndarray], Mapping[str, Any]], np.ndarray]
    logical_shapes: dict[str, tuple[int, ...]]
    ops: int
    params: dict[str, Any] = field(default_factory=dict)
    plan: object = None
    notes: dict[str, object] = field(default_factory=dict)

    def operands(self, inputs: Mapping[str, ArrayLike] | None) -> dict[str, np.ndarray]:
        """``inputs`` checked and converted: known names, logical shapes, integers that fit
        each symbol's dtype (array-likes such as lists are accepted).

        Raises
        ------
        ValueError
            naming an unknown input, a wrong shape, or values outside the dtype's range.
        TypeError
            for a non-integer array (floats are refused even when integral).
        """
        inputs = inputs or {}
        unknown = set(inputs) - set(self.inputs)
        if unknown:
            raise ValueError(f"{self.name} has no input {sorted(unknown)[0]!r} "
                             f"(inputs: {', '.join(self.inputs)})")
        return {name: as_operand(name, inputs[name], self.logical_shapes[name], self.inputs[name].dtype)
                for name in self.inputs if name in inputs}

    def reference(self, inputs: Mapping[str, ArrayLike]) -> np.ndarray:
        """The expected logical output for ``inputs`` (missing ones are zeros, as in :meth:`build`)."""
        arrays = self.operands(inputs)
        for name, tensor in self.inputs.items():
            if name not in arrays:
                arrays[name] = np.zeros(self.logical_shapes[name], tensor.dtype)
        return self.reference_fn(arrays, self.params)

    def build(self, inputs: Mapping[str, ArrayLike] | None = None, *,
              progress: Progress | None = None, max_insns: int | None = MAX_INSNS) -> Program:
        """The program, with ``inputs`` (logical arrays, by symbol name) in its DRAM image.

        Inputs not given are zeros.  ``progress`` and ``max_insns`` are those of
        :func:`~openvta.compiler.pipeline.build`.
        """
        arrays = self.operands(inputs)
        symbols = {}
        for name, tensor in self.inputs.items():
            data = self.pack(name, arrays[name]) if name in arrays else None
            symbols[tensor] = (self.roles[name], self.layouts[name], data)
        symbols[self.output] = ("output", self.layouts["out"], None)
        program = build(self.schedule, self.cfg, symbols, progress=progress, max_insns=max_insns)
        for name, shape in self.logical_shapes.items():
            program.symbols[name] = program.symbols[name].with_logical_shape(shape)
        return program


def as_operand(name: str, value: ArrayLike, shape: tuple[int, ...] | None, dtype: str) -> np.ndarray:
    """``value`` as an array of ``dtype`` after checking that it holds integers that fit it.

    Raises
    ------
    TypeError
        if ``value`` is not an array of integers.
    ValueError
        for a shape other than ``shape`` (unless None), or values outside ``dtype``'s range:
        ``"input 'data' holds values in [-1280, 1270], outside int8's [-128, 127]"``.
    """
    try:
        array = np.asarray(value)
    except ValueError as exc:  # a ragged nesting of lists
        raise ValueError(f"input {name!r} must be a rectangular array of integers ({exc})") from None
    if array.dtype.kind not in "iu":
        raise TypeError(f"input {name!r} must be an array of integers, not of {array.dtype}")
    if shape is not None and array.shape != shape:
        raise ValueError(f"input {name!r} must have shape {shape}, not {array.shape}")
    info = np.iinfo(dtype)
    if array.size:
        low, high = int(array.min()), int(array.max())
        if low < info.min or high > info.max:
            raise ValueError(f"input {name!r} holds values in [{low}, {high}], outside {dtype}'s "
                             f"[{info.min}, {info.max}]")
    return array.astype(dtype)


def check_tensors(owner: str, cfg: Config, tensors: Sequence[te.Tensor]) -> None:
    """Refuse, before any planning, an operator whose tensors cannot fit the DRAM address space."""
    check_dram(owner, cfg, [(t.name, t.shape, t.dtype) for t in tensors])


def benchmark_operands(op: Operator, seed: int) -> dict[str, np.ndarray]:
    """Random operands as WORKLOADS.md's benchmarks draw them, from ``default_rng(seed)``.

    int8 inputs uniform in [-128, 128), int32 inputs (the bias) in [-2**14, 2**14), drawn
    in input order (``data``, ``weight``, ``bias``): the operands of
    :func:`~openvta.compiler.workloads.random_inputs` for the same shapes and seed.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for name, tensor in op.inputs.items():
        shape = op.logical_shapes[name]
        if tensor.dtype == "int8":
            out[name] = rng.integers(-128, 128, shape, dtype=np.int8)
        else:
            out[name] = rng.integers(-(1 << BIAS_BITS), 1 << BIAS_BITS, shape, dtype=np.int32)
    return out


def requantize_tail(
    acc: te.Tensor, shift: int | None, bias: te.Tensor | None,
    bias_index: Callable[..., tuple[te.Expr, ...]], clip: tuple[int, int] | None,
) -> tuple[list[te.Tensor], te.Tensor]:
    """``clip((acc >> shift) + bias, lo, hi)`` as int8: the element-wise stages and the output."""
    stages: list[te.Tensor] = []
    current = acc
    if shift is not None:
        prev = current
        current = te.compute(acc.shape, lambda *i: prev(*i) >> shift, "shift")
        stages.append(current)
    if bias is not None:
        prev = current
        current = te.compute(acc.shape, lambda *i: prev(*i) + bias[bias_index(*i)], "bias_add")
        stages.append(current)
    if clip is not None:
        prev = current
        current = te.compute(acc.shape, lambda *i: te.clip(prev(*i), clip[0], clip[1]), "clip")
        stages.append(current)
    last = current
    out = te.compute(acc.shape, lambda *i: last(*i).astype("int8"), "out")
    return stages, out


def schedule_tail(s: Schedule, out: te.Tensor, stages: list[te.Tensor], at: object) -> list[Stage]:
    """Put the element-wise stages in the accumulator, computed at the output's loop ``at``."""
    placed = []
    for tensor in stages:
        stage = s[tensor]
        stage.set_scope("acc")
        stage.compute_at(s[out], at)  # type: ignore[arg-type]
        stage.pragma(stage.leaf[0], "alu")
        placed.append(stage)
    return placed


def reference_tail(acc: np.ndarray, shift: int | None, bias: np.ndarray | None,
                   clip: tuple[int, int] | None) -> np.ndarray:
    """numpy: the requantizing tail on int32 accumulators with channels on axis 1."""
    value = acc.astype(np.int64)
    if shift is not None:
        value = value >> shift
    if bias is not None:
        per_channel = bias.astype(np.int64).reshape((1, -1) + (1,) * (value.ndim - 2))
        value = (value + per_channel).astype(np.int32).astype(np.int64)  # 32-bit wrap-around
    if clip is not None:
        value = np.clip(value, clip[0], clip[1])
    return value.astype(np.int32).astype(np.int8)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]

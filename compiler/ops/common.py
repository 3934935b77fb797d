"""What every operator shares: the compiled-operator record and the requantizing tail.

Every benchmark operator ends the same way (WORKLOADS.md): ``>> shift``, ``+ bias``,
``clip(0, 127)``, cast to int8 — element-wise stages computed in place in the
accumulator by the ALU, then stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from openvta.isa import Config
from openvta.runtime import Program

from .. import te
from ..pipeline import build
from ..schedule import Schedule, Stage

__all__ = ["Operator", "requantize_tail", "schedule_tail", "divisors", "reference_tail"]


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
    reference :
        logical inputs → the expected logical output, computed with numpy.
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
    reference: Callable[[dict[str, np.ndarray]], np.ndarray]
    logical_shapes: dict[str, tuple[int, ...]]
    ops: int
    plan: object = None
    notes: dict[str, object] = field(default_factory=dict)

    def build(self, inputs: dict[str, np.ndarray] | None = None) -> Program:
        """The program, with ``inputs`` (logical arrays, by symbol name) in its DRAM image."""
        inputs = inputs or {}
        unknown = set(inputs) - set(self.inputs)
        if unknown:
            raise ValueError(f"{self.name} has no input {sorted(unknown)[0]!r} "
                             f"(inputs: {', '.join(self.inputs)})")
        symbols = {}
        for name, tensor in self.inputs.items():
            data = None
            if name in inputs:
                array = np.asarray(inputs[name])
                if array.shape != self.logical_shapes[name]:
                    raise ValueError(f"input {name!r} must have shape {self.logical_shapes[name]}, "
                                     f"not {array.shape}")
                data = self.pack(name, array)
            symbols[tensor] = (self.roles[name], self.layouts[name], data)
        symbols[self.output] = ("output", self.layouts["out"], None)
        program = build(self.schedule, self.cfg, symbols)
        for name, shape in self.logical_shapes.items():
            program.symbols[name] = program.symbols[name].with_logical_shape(shape)
        return program


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

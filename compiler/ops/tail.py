"""An epilogue as tensor expressions and schedule: the operators' shared tail.

:func:`build_tail` turns an :class:`~openvta.compiler.epilogue.Epilogue` into one
element-wise stage per ALU stage after the accumulator (``acc``), a placeholder per DRAM
operand (packed: a channel operand is ``(C/BO, B, BO)`` int32 like a bias, a tensor
operand has the accumulator's packed shape), and the int8 output stage.  A tensor
operand's own stages read it from its accumulator copy and update that copy in place
(:mod:`~openvta.compiler.lower` computes a stage in the buffer of the tile it updates);
the main chain then reads the result.  :func:`schedule_tail` puts every stage in the
accumulator at the output's loop ``at``, computed by the ALU, and loads every operand
into the accumulator there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from openvta.isa import AluOp

from .. import te
from ..epilogue import AluStage, ChannelOperand, Epilogue, Operand, TensorOperand
from ..schedule import Schedule

__all__ = ["Tail", "build_tail", "operand_placeholders", "schedule_tail"]

_BUILD: dict[AluOp, Callable[[te.Expr, te.Expr | int], te.Expr]] = {
    AluOp.MIN: te.minimum,
    AluOp.MAX: te.maximum,
    AluOp.ADD: lambda a, b: a + b,
    AluOp.SHR: lambda a, b: a >> b,
    AluOp.MUL: lambda a, b: a * b,
}


@dataclass(frozen=True)
class Tail:
    """The tail's tensors.

    Members
    -------
    stages :
        the element-wise stages (accumulator scope), producers first.
    out :
        the int8 output.
    operands :
        a placeholder per DRAM operand, by symbol name, in order of first use.
    readers :
        per operand name, the stages that read it (its cache's readers).
    """

    stages: tuple[te.Tensor, ...]
    out: te.Tensor
    operands: dict[str, te.Tensor]
    readers: dict[str, tuple[te.Tensor, ...]]


def _placeholder(operand: ChannelOperand | TensorOperand, out_shape: tuple[int, ...],
                 channel_tiles: tuple[int, ...]) -> te.Tensor:
    if isinstance(operand, ChannelOperand):
        return te.placeholder(channel_tiles, "int32", operand.name)
    return te.placeholder(out_shape, operand.dtype, operand.name)


def operand_placeholders(epilogue: Epilogue, out_shape: tuple[int, ...],
                         channel_tiles: tuple[int, ...]) -> list[te.Tensor]:
    """A packed placeholder per operand of ``epilogue`` (to check sizes before scheduling)."""
    return [_placeholder(op, out_shape, channel_tiles) for op in epilogue.operands().values()]


class _Builder:
    def __init__(self, acc: te.Tensor, channel_index: Callable[..., tuple[te.Expr, ...]],
                 channel_tiles: tuple[int, ...]) -> None:
        self.shape = acc.shape
        self.channel_index = channel_index
        self.channel_tiles = channel_tiles
        self.stages: list[te.Tensor] = []
        self.operands: dict[str, te.Tensor] = {}
        self.readers: dict[str, list[te.Tensor]] = {}
        self.tensor_tails: dict[str, te.Tensor] = {}

    def placeholder(self, operand: ChannelOperand | TensorOperand) -> te.Tensor:
        if operand.name not in self.operands:
            self.operands[operand.name] = _placeholder(operand, self.shape, self.channel_tiles)
            self.readers[operand.name] = []
        return self.operands[operand.name]

    def operand(self, operand: Operand) -> tuple[Callable[..., te.Expr | int], str | None]:
        """The operand's value at an output index, and the operand whose cache it reads."""
        if isinstance(operand, int):
            return (lambda *i: operand), None
        if isinstance(operand, ChannelOperand):
            vector = self.placeholder(operand)
            return (lambda *i: vector[self.channel_index(*i)]), operand.name
        if operand.name not in self.tensor_tails:
            first = self.placeholder(operand)
            source = self.chain(first, operand.stages, operand.name, cast=True)
            self.tensor_tails[operand.name] = source
        source = self.tensor_tails[operand.name]
        return (lambda *i: source(*i)), operand.name if not operand.stages else None

    def chain(self, start: te.Tensor, stages: tuple[AluStage, ...], prefix: str, cast: bool = False) -> te.Tensor:
        current = start
        for index, stage in enumerate(stages):
            value, reads = self.operand(stage.operand)
            first = cast and index == 0
            current = _apply(current, stage.op, value, first, f"{prefix}{index}_{stage.op.name.lower()}")
            self.stages.append(current)
            if first:
                self.readers[start.name].append(current)
            if reads is not None:
                self.readers[reads].append(current)
        return current


def _apply(prev: te.Tensor, op: AluOp, value: Callable[..., te.Expr | int], cast: bool, name: str) -> te.Tensor:
    """``op(prev, value)`` per element (``prev`` cast to int32 first when ``cast``)."""
    build = _BUILD[op]
    return te.compute(prev.shape, lambda *i: build(prev(*i).astype("int32") if cast else prev(*i), value(*i)), name)


def build_tail(acc: te.Tensor, epilogue: Epilogue, channel_index: Callable[..., tuple[te.Expr, ...]],
               channel_tiles: tuple[int, ...]) -> Tail:
    """The stages of ``epilogue`` after ``acc`` and the int8 output (see the module docstring).

    ``channel_index(*i)`` maps an output index to the index of its channel operand tile
    element (``(o, j, m)`` for ``(C/BO, B, BO)`` tiles); ``channel_tiles`` is that shape.
    """
    builder = _Builder(acc, channel_index, channel_tiles)
    last = builder.chain(acc, epilogue.stages, "epilogue")
    out = te.compute(acc.shape, lambda *i: last(*i).astype("int8"), "out")
    return Tail(tuple(builder.stages), out, dict(builder.operands),
                {name: tuple(r) for name, r in builder.readers.items()})


def schedule_tail(s: Schedule, tail: Tail, at: te.IterVar) -> None:
    """Every stage in the accumulator, computed by the ALU at the output's loop ``at``; every
    operand loaded into the accumulator there."""
    out = s[tail.out]
    for tensor in tail.stages:
        stage = s[tensor]
        stage.set_scope("acc")
        stage.compute_at(out, at)
        stage.pragma(stage.leaf[0], "alu")
    for name, placeholder in tail.operands.items():
        cache = s.cache_read(placeholder, "acc", list(tail.readers[name]))
        s[cache].compute_at(out, at)
        s[cache].pragma(s[cache].leaf[0], "dma_copy")

"""Epilogues: the ALU stages applied to an int32 accumulator tile before it is stored.

A conv2d or dense operator ends with an :class:`Epilogue`: a tuple of :class:`AluStage`
applied in order, in place, to every int32 accumulator element, then the output cast to
int8 (the low 8 bits, which is what the out buffer holds and STORE writes, docs/ISA.md §3).
Each stage is one ALU operation (:class:`~openvta.isa.AluOp`) whose second operand is

- an **immediate** ``int`` (the ALU's 16-bit signed ``imm`` field; a SHR amount must be in
  −32…31, the signed 6 bits the ALU reads);
- a :class:`ChannelOperand`: a per-output-channel int32 vector, a DRAM symbol (logical
  shape ``(channels,)``, layout ``C{B}n{BO}c``) loaded into the accumulator like a bias
  and broadcast over batch and space — a bias ADD, per-channel MUL multipliers, SHR
  amounts, MIN/MAX bounds;
- a :class:`TensorOperand`: a whole tensor of the output's logical shape and packed
  layout, int8 (LOAD ACC_8BIT, sign-extended) or int32 (LOAD ACC) — a residual ADD.  Its
  own ``stages`` (immediates or per-channel operands) are applied to it first, in its own
  accumulator tile, so a residual input can be requantized before it is added.

The operators' ``shift``, ``bias`` and ``clip`` parameters are the epilogue
``SHR shift, ADD bias, MIN high, MAX low`` (:meth:`Epilogue.from_params`).

:func:`apply_epilogue` is the numpy reference: it runs the stages with the ALU's lane
semantics (:func:`openvta.isa.arith.alu_lanes`: MIN and MAX signed, ADD and MUL wrapping at 32 bits, SHR
arithmetic by the signed low 6 bits of B, left when negative).

Examples
--------
>>> import numpy as np
>>> from openvta.isa import AluOp
>>> epi = Epilogue((AluStage(AluOp.MUL, ChannelOperand("scale")), AluStage(AluOp.SHR, 2),
...                 AluStage(AluOp.ADD, TensorOperand("skip")), AluStage(AluOp.MAX, 0)))
>>> [name for name in epi.operands()]
['scale', 'skip']
>>> acc = np.array([[10, -20], [30, 40]], dtype=np.int32)          # (N, C)
>>> operands = {"scale": np.array([4, -1], np.int32), "skip": np.full((2, 2), 3, np.int8)}
>>> apply_epilogue(acc, epi, operands).tolist()
[[13, 8], [33, 0]]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Union

import numpy as np

from openvta.isa import AluOp, Config, Format, layouts_of
from openvta.isa.arith import MAX_SHR_AMOUNT, MIN_SHR_AMOUNT, alu_lanes

__all__ = ["AluStage", "ChannelOperand", "Epilogue", "IMM_FIELD", "Operand", "SHR_RANGE", "TensorOperand",
           "apply_epilogue", "apply_stages"]

#: The ALU's immediate field (the same width in every configuration, docs/ISA.md §2).
IMM_FIELD = layouts_of(Config())[Format.ALU].field("imm")
#: The SHR amounts the ALU reads from B: its low SHR_AMOUNT_WIDTH bits, signed (docs/ISA.md §3).
SHR_RANGE = (MIN_SHR_AMOUNT, MAX_SHR_AMOUNT)
#: The dtypes a whole-tensor operand may have, and how it is loaded.
TENSOR_DTYPES = ("int8", "int32")

_SYMBOL_NAMES = ("data", "weight", "out")


def _check_name(name: object, what: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or name in _SYMBOL_NAMES:
        raise ValueError(f"{what} name must be an identifier other than {', '.join(_SYMBOL_NAMES)}, "
                         f"not {name!r}")


@dataclass(frozen=True)
class ChannelOperand:
    """A per-output-channel int32 vector: the DRAM symbol ``name``, logical shape ``(channels,)``."""

    name: str

    def __post_init__(self) -> None:
        _check_name(self.name, "a channel operand's")


@dataclass(frozen=True)
class TensorOperand:
    """A whole tensor of the output's logical shape: the DRAM symbol ``name``.

    Parameters
    ----------
    name :
        the symbol.
    dtype :
        ``"int8"`` (loaded with LOAD ACC_8BIT, sign-extended) or ``"int32"`` (LOAD ACC).
    stages :
        stages applied to the loaded tensor before it is used (immediate or per-channel
        operands only), e.g. the requantization of a residual input.
    """

    name: str
    dtype: str = "int8"
    stages: tuple[AluStage, ...] = ()

    def __post_init__(self) -> None:
        _check_name(self.name, "a tensor operand's")
        if self.dtype not in TENSOR_DTYPES:
            raise ValueError(f"tensor operand {self.name!r} dtype must be one of "
                             f"{', '.join(TENSOR_DTYPES)}, not {self.dtype!r}")
        object.__setattr__(self, "stages", _stage_tuple(self.stages, f"tensor operand {self.name!r} stages"))
        for stage in self.stages:
            if isinstance(stage.operand, TensorOperand):
                raise ValueError(f"tensor operand {self.name!r} stages must take immediates or channel "
                                 f"operands, not the tensor {stage.operand.name!r}")


Operand = Union[int, ChannelOperand, TensorOperand]


@dataclass(frozen=True)
class AluStage:
    """One ALU operation on the accumulator: ``acc = op(acc, operand)`` in every lane."""

    op: AluOp
    operand: Operand

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "op", AluOp(self.op))
        except ValueError:
            raise ValueError(f"an ALU stage op must be one of {', '.join(o.name for o in AluOp)}, "
                             f"not {self.op!r}") from None
        value = self.operand
        if isinstance(value, (ChannelOperand, TensorOperand)):
            return
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
            raise ValueError(f"an ALU stage operand must be an int, a ChannelOperand or a TensorOperand, "
                             f"not {value!r}")
        low, high = SHR_RANGE if self.op is AluOp.SHR else (IMM_FIELD.low, IMM_FIELD.high)
        if not low <= value <= high:
            what = "a SHR amount" if self.op is AluOp.SHR else f"an {self.op.name} immediate"
            raise ValueError(f"{what} must be in {low}..{high}, not {value!r}")
        object.__setattr__(self, "operand", int(value))


def _stage_tuple(stages: object, what: str) -> tuple[AluStage, ...]:
    if not isinstance(stages, (tuple, list)) or not all(isinstance(s, AluStage) for s in stages):
        raise ValueError(f"{what} must be a sequence of AluStage, not {stages!r}")
    return tuple(stages)


@dataclass(frozen=True)
class Epilogue:
    """The ALU stages applied, in order, to the accumulator before the int8 output cast."""

    stages: tuple[AluStage, ...] = field(default=())
    #: The operands by name, set once by ``__post_init__`` (an instance value; ClassVar keeps
    #: it out of the dataclass's fields, so asdict, eq and repr ignore it).
    _operands: ClassVar[Mapping[str, ChannelOperand | TensorOperand]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", _stage_tuple(self.stages, "epilogue stages"))
        # checks that every name means one operand; kept (not a field: asdict, eq and repr
        # ignore it), since the planners ask for the operands of one epilogue many times
        object.__setattr__(self, "_operands", _operands_of(self.stages))

    @classmethod
    def from_params(cls, shift: int | None, bias: str | None, clip: tuple[int, int] | None) -> Epilogue:
        """``clip((acc >> shift) + bias, low, high)``: SHR, ADD (channel operand ``bias``), MIN, MAX.

        >>> Epilogue.from_params(8, "bias", (0, 127)).describe()
        'SHR 8, ADD bias[c], MIN 127, MAX 0'
        """
        stages = []
        if shift is not None:
            stages.append(AluStage(AluOp.SHR, shift))
        if bias is not None:
            stages.append(AluStage(AluOp.ADD, ChannelOperand(bias)))
        if clip is not None:
            stages += [AluStage(AluOp.MIN, clip[1]), AluStage(AluOp.MAX, clip[0])]
        return cls(tuple(stages))

    def __add__(self, other: Epilogue) -> Epilogue:
        """The stages of ``self``, then those of ``other``."""
        if not isinstance(other, Epilogue):
            return NotImplemented
        return Epilogue(self.stages + other.stages)

    def operands(self) -> dict[str, ChannelOperand | TensorOperand]:
        """Every DRAM operand by symbol name, in order of first use (tensor stages' operands
        before their tensor).

        Raises
        ------
        ValueError
            if one name stands for two different operands.
        """
        operands: dict[str, ChannelOperand | TensorOperand] = dict(self._operands)
        return operands

    @property
    def channel_operands(self) -> tuple[ChannelOperand, ...]:
        return tuple(o for o in self._operands.values() if isinstance(o, ChannelOperand))

    @property
    def tensor_operands(self) -> tuple[TensorOperand, ...]:
        return tuple(o for o in self._operands.values() if isinstance(o, TensorOperand))

    def describe(self) -> str:
        """One line: ``"SHR 8, ADD bias[c], MIN 127, MAX 0"``."""
        return ", ".join(_describe(stage) for stage in self.stages) or "(none)"

    def to_json(self) -> dict[str, Any]:
        """The epilogue as JSON values: ``{"stages": [{"op": 3, "operand": 8}, ...]}``.

        It is the form ``dataclasses.asdict`` gives (so a tuning record's parameters,
        written with it, already hold it): each stage's ``op`` by its
        :class:`~openvta.isa.AluOp` number, an immediate operand as an integer, a channel
        operand as ``{"name"}`` and a tensor operand as ``{"name", "dtype", "stages"}``.

        >>> Epilogue.from_params(8, "bias", None).to_json()
        {'stages': [{'op': 3, 'operand': 8}, {'op': 2, 'operand': {'name': 'bias'}}]}
        """
        return {"stages": [_stage_json(stage) for stage in self.stages]}

    @classmethod
    def from_json(cls, data: object) -> Epilogue:
        """The epilogue :meth:`to_json` wrote (read back from JSON: lists for tuples).

        Raises
        ------
        ValueError
            one line naming what is malformed (``"epilogue stage 1 operand must be an
            integer, {'name'} or {'name', 'dtype', 'stages'}, not ..."``) or the checks of
            the stages and operands themselves.
        """
        return cls(_stages_value(data, "epilogue"))


def _stage_json(stage: AluStage) -> dict[str, Any]:
    operand = stage.operand
    if isinstance(operand, ChannelOperand):
        value: object = {"name": operand.name}
    elif isinstance(operand, TensorOperand):
        value = {"name": operand.name, "dtype": operand.dtype,
                 "stages": [_stage_json(s) for s in operand.stages]}
    else:
        value = operand
    return {"op": int(stage.op), "operand": value}


def _stages_value(data: object, what: str) -> tuple[AluStage, ...]:
    if not isinstance(data, Mapping) or set(data) != {"stages"} or not isinstance(data["stages"], list):
        raise ValueError(f"{what} JSON must be an object {{'stages': [...]}}, not {data!r}")
    return tuple(_stage_value(stage, f"{what} stage {index}") for index, stage in enumerate(data["stages"]))


def _stage_value(data: object, what: str) -> AluStage:
    if not isinstance(data, Mapping) or set(data) != {"op", "operand"}:
        raise ValueError(f"{what} must be an object {{'op', 'operand'}}, not {data!r}")
    operand = data["operand"]
    value: Operand
    if isinstance(operand, Mapping) and set(operand) == {"name"}:
        value = ChannelOperand(operand["name"])
    elif isinstance(operand, Mapping) and set(operand) == {"name", "dtype", "stages"}:
        stages = _stages_value({"stages": operand["stages"]}, f"{what} tensor operand")
        value = TensorOperand(operand["name"], operand["dtype"], stages)
    elif isinstance(operand, int) and not isinstance(operand, bool):
        value = operand
    else:
        raise ValueError(f"{what} operand must be an integer, {{'name'}} or {{'name', 'dtype', 'stages'}}, "
                         f"not {operand!r}")
    if isinstance(data["op"], bool) or not isinstance(data["op"], int):
        raise ValueError(f"{what} op must be an ALU op number, not {data['op']!r}")
    return AluStage(data["op"], value)


def _operands_of(stages: tuple[AluStage, ...]) -> dict[str, ChannelOperand | TensorOperand]:
    found: dict[str, ChannelOperand | TensorOperand] = {}
    for operand in _walk_operands(stages):
        known = found.setdefault(operand.name, operand)
        if known != operand:
            raise ValueError(f"epilogue operand name {operand.name!r} must name one operand, not "
                             f"both {known!r} and {operand!r}")
    return found


def _walk_operands(stages: tuple[AluStage, ...]) -> list[ChannelOperand | TensorOperand]:
    out: list[ChannelOperand | TensorOperand] = []
    for stage in stages:
        if isinstance(stage.operand, TensorOperand):
            out += _walk_operands(stage.operand.stages)
        if isinstance(stage.operand, (ChannelOperand, TensorOperand)):
            out.append(stage.operand)
    return out


def _describe(stage: AluStage) -> str:
    operand = stage.operand
    if isinstance(operand, ChannelOperand):
        text = f"{operand.name}[c]"
    elif isinstance(operand, TensorOperand):
        inner = f" ({', '.join(_describe(s) for s in operand.stages)})" if operand.stages else ""
        text = f"{operand.name}:{operand.dtype}{inner}"
    else:
        text = str(operand)
    return f"{stage.op.name} {text}"


# -- the numpy reference -----------------------------------------------------------------------


def _operand_value(operand: Operand, operands: Mapping[str, np.ndarray], shape: tuple[int, ...]) -> np.ndarray | int:
    if isinstance(operand, int):
        return operand
    if operand.name not in operands:
        raise ValueError(f"epilogue operand {operand.name!r} must be given, and is not "
                         f"(given: {', '.join(operands) or 'none'})")
    array = np.asarray(operands[operand.name]).astype(np.int64)
    if isinstance(operand, ChannelOperand):
        if array.shape != (shape[1],):
            raise ValueError(f"channel operand {operand.name!r} must have shape {(shape[1],)}, "
                             f"not {array.shape}")
        return array.reshape((1, -1) + (1,) * (len(shape) - 2))
    if array.shape != shape:
        raise ValueError(f"tensor operand {operand.name!r} must have shape {shape}, not {array.shape}")
    return apply_stages(array.astype(operand.dtype).astype(np.int64), operand.stages, operands)


def apply_stages(value: np.ndarray, stages: tuple[AluStage, ...],
                 operands: Mapping[str, np.ndarray]) -> np.ndarray:
    """``stages`` on int32 values (channels on axis 1) as the ALU runs them; int64 out."""
    value = np.asarray(value).astype(np.int32).astype(np.int64)
    for stage in stages:
        value = alu_lanes(stage.op, value, _operand_value(stage.operand, operands, value.shape)).astype(np.int64)
    return value


def apply_epilogue(acc: np.ndarray, epilogue: Epilogue, operands: Mapping[str, np.ndarray]) -> np.ndarray:
    """numpy: ``epilogue`` on the int32 accumulators ``acc`` (channels on axis 1), as int8.

    ``operands`` holds each operand's logical array by name: ``(channels,)`` for a channel
    operand, ``acc.shape`` for a tensor operand.

    Raises
    ------
    ValueError
        for a missing operand or one of the wrong shape.
    """
    return apply_stages(acc, epilogue.stages, operands).astype(np.int32).astype(np.int8)

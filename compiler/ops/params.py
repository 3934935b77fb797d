"""Operator parameters as data: one table per operator, read by the API, the CLI and the tests.

A :class:`Param` names one keyword of an operator factory, says what it means (one line
of help), which values it accepts (a range, checked before anything is built), whether it
is part of the operator's *shape* (fixed by a named layer such as ``resnet18.C5``) and how
the command line spells it.  Its default and its type are read from the factory's
signature by :func:`describe_params`, so they are written once, in the signature.

>>> from openvta.compiler.ops.conv2d import CONV2D_PARAMS
>>> shift = next(p for p in CONV2D_PARAMS if p.name == "shift")
>>> shift.default, shift.constraint
(8, 'an integer in 0..31 or None')
>>> shift.check(99, "conv2d")
Traceback (most recent call last):
...
ValueError: conv2d shift must be an integer in 0..31 or None, not 99
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import UnionType
from typing import Any, TypeGuard

import numpy as np

from openvta.isa.config import MAX_SHR_AMOUNT

from ..epilogue import IMM_FIELD

__all__ = ["Param", "REQUIRED", "describe_params", "check_params", "tail_params"]


class _Required:
    """The default of a parameter that has none."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: The ``default`` of a parameter that must be given.
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Param:
    """One keyword parameter of an operator factory.

    Parameters
    ----------
    name :
        the factory's keyword.
    help :
        one line for ``openvta compile --help`` and the docs.
    low, high :
        inclusive bounds of an integer (or of both ends of a pair); None: unbounded.
    flag :
        the command-line option without its dashes, where it differs from ``name``
        (``dense``'s ``in_features`` is ``--in``).
    shape :
        part of the operator's shape: fixed by a named layer (``layer=``).
    cli :
        offered as an option of ``openvta compile``.
    sample :
        ``(low, high)``: the small values the generated tests draw from; None: the
        tests keep the default.
    default, kind, optional :
        filled from the factory's signature by :func:`describe_params`: the default
        (:data:`REQUIRED` if none), the type (``int``, ``bool``, ``tuple`` for a pair of
        integers, a class such as ``Epilogue`` whose instances are accepted, ``object`` for
        anything else) and whether None is accepted.
    """

    name: str
    help: str
    low: int | None = None
    high: int | None = None
    flag: str | None = None
    shape: bool = False
    cli: bool = True
    sample: tuple[int, int] | None = None
    default: Any = REQUIRED
    kind: type = object
    optional: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def option(self) -> str:
        """The command-line option, e.g. ``--in``."""
        return "--" + (self.flag or self.name).replace("_", "-")

    @property
    def constraint(self) -> str:
        """What the parameter accepts, in words: ``"an integer in 0..31 or None"``."""
        if self.kind is bool:
            text = "True or False"
        elif self.kind is tuple:
            text = f"a pair (low, high) of {self._integers()} with low <= high"
        elif self.kind is int:
            text = self._integer()
        elif self.kind is object:
            text = "any value"
        else:
            name = self.kind.__name__
            text = f"{'an' if name[0] in 'AEIOU' else 'a'} {name}"
        return f"{text} or None" if self.optional else text

    def _integer(self) -> str:
        if self.low is not None and self.high is not None:
            return f"an integer in {self.low}..{self.high}"
        if self.low == 1 and self.high is None:
            return "a positive integer"
        if self.low == 0 and self.high is None:
            return "a non-negative integer"
        if self.low is not None:
            return f"an integer >= {self.low}"
        return "an integer" if self.high is None else f"an integer <= {self.high}"

    def _integers(self) -> str:
        if self.low is not None and self.high is not None:
            return f"integers in {self.low}..{self.high}"
        return "integers"

    def accepts(self, value: object) -> bool:
        if value is None:
            return self.optional
        if self.kind is bool:
            return isinstance(value, (bool, np.bool_))
        if self.kind is int:
            return _is_int(value) and self._in_range(int(value))
        if self.kind is tuple:
            return isinstance(value, (tuple, list)) and len(value) == 2 \
                and all(_is_int(v) and self._in_range(int(v)) for v in value) and value[0] <= value[1]
        return isinstance(value, self.kind)

    def _in_range(self, value: int) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def check(self, value: object, owner: str) -> None:
        """Raise ``ValueError("<owner> <name> must be <constraint>, not <value>")`` unless accepted."""
        if not self.accepts(value):
            raise ValueError(f"{owner} {self.name} must be {self.constraint}, not {value!r}")


def _is_int(value: object) -> TypeGuard[int | np.integer]:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _kind(hint: object) -> tuple[type, bool]:
    """(kind, optional) of a type hint such as ``int | None`` or ``tuple[int, int]``."""
    union = isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union
    args = typing.get_args(hint) if union else (hint,)
    rest = [a for a in args if a is not type(None)]
    base = (typing.get_origin(rest[0]) or rest[0]) if len(rest) == 1 else object
    return (base if isinstance(base, type) else object), type(None) in args


def describe_params(factory: Callable[..., object], *params: Param) -> tuple[Param, ...]:
    """``params`` with their defaults and kinds read from ``factory``'s signature.

    Every keyword-only parameter of the factory must be described, and nothing else.

    Raises
    ------
    TypeError
        naming a keyword without a description, or a description without a keyword.
    """
    signature = inspect.signature(factory)
    hints = typing.get_type_hints(factory)
    keywords = [p for p in signature.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    described = {p.name: p for p in params}
    missing = [k.name for k in keywords if k.name not in described]
    extra = sorted(set(described) - {k.name for k in keywords})
    if missing or extra:
        raise TypeError(f"{factory.__name__}'s parameter table must describe exactly its keywords "
                        f"(undescribed: {missing}, unknown: {extra})")
    out = []
    for keyword in keywords:
        kind, optional = _kind(hints[keyword.name])
        default = REQUIRED if keyword.default is inspect.Parameter.empty else keyword.default
        out.append(replace(described[keyword.name], default=default, kind=kind, optional=optional))
    return tuple(out)


def check_params(params: tuple[Param, ...], owner: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``values`` (a factory's arguments, e.g. its ``locals()``) against ``params``.

    Returns
    -------
    dict
        the value of every parameter, in table order.

    Raises
    ------
    ValueError
        ``"<owner> <name> must be <constraint>, not <value>"`` for the first bad value.
    """
    for param in params:
        param.check(values[param.name], owner)
    return {param.name: values[param.name] for param in params}


def tail_params(bias_of: str) -> tuple[Param, ...]:
    """The requantizing tail's parameters, the same for conv2d and dense.

    ``bias_of`` is what one bias element belongs to (``"channel"``, ``"feature"``).
    """
    return (
        Param("shift", "arithmetic right shift of the accumulators before the bias add "
              "(None: no shift)", low=0, high=MAX_SHR_AMOUNT, sample=(0, MAX_SHR_AMOUNT)),
        Param("bias", f"add a per-{bias_of} int32 bias (input 'bias') after the shift", cli=False),
        Param("clip", "clip the result to [low, high] before the int8 cast (None: wrap to int8)",
              low=IMM_FIELD.low, high=IMM_FIELD.high, sample=(-200, 200)),
        Param("epilogue", "ALU stages (an Epilogue) after shift, bias and clip, before the int8 "
              "cast", cli=False),
    )

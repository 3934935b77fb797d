"""Tensor expressions: *what* to compute (TVM's ``te``, for static integer shapes).

>>> A = placeholder((4, 8), "int8", name="A")
>>> k = reduce_axis(8, name="k")
>>> B = compute((4,), lambda i: sum(A[i, k].astype("int32"), axis=k), name="B")
>>> B.shape, B.dtype
((4,), 'int32')

Expressions are frozen dataclasses: constants, index variables, tensor reads, binary
integer ops (``+ - * >> <<``, ``minimum``, ``maximum``), casts, a comparison-based
``select`` (used for padding) and sums over reduction axes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Union

__all__ = [
    "ArithOp", "CmpOp", "Expr", "Const", "Var", "IterVar", "Read", "BinOp", "Cast", "Select", "Reduce", "Cmp",
    "Tensor", "PlaceholderOp", "ComputeOp", "placeholder", "compute", "reduce_axis", "sum",
    "minimum", "maximum", "clip", "relu", "cast", "select", "less", "less_equal", "DTYPES",
    "TEError",
]

DTYPES = ("int8", "int32")
_WIDTH = {"int8": 8, "int32": 32}
_ids = itertools.count()


class TEError(ValueError):
    """A tensor expression that is malformed (wrong arity, dtype, shape)."""


class ArithOp(Enum):
    """The integer operation of a :class:`BinOp`; the value is how :func:`show` writes it.

    ``lower_alu`` maps the ones the ALU has onto :class:`openvta.isa.AluOp`
    (``SUB`` and ``SHL`` by negating the immediate); ``FLOORDIV`` and ``MOD`` only
    appear in index expressions.
    """

    ADD = "+"
    SUB = "-"
    MUL = "*"
    SHR = ">>"
    SHL = "<<"
    FLOORDIV = "//"
    MOD = "%"
    MIN = "min"
    MAX = "max"


class CmpOp(Enum):
    """The comparison of a :class:`Cmp`; the value is how it is written."""

    LE = "<="
    LT = "<"


ExprLike = Union["Expr", int]


def _wrap(value: ExprLike) -> Expr:
    if isinstance(value, IterVar):
        return value.var
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise TEError(f"expressions combine integers and expressions, not {value!r}")
    return Const(value)


class Expr:
    """Base of every expression; operators build :class:`BinOp` nodes."""

    if TYPE_CHECKING:  # a field of some expressions, a property of the others
        @property
        def dtype(self) -> str: ...

    def __add__(self, other: ExprLike) -> Expr:
        return BinOp(ArithOp.ADD, _wrap(self), _wrap(other))

    def __radd__(self, other: ExprLike) -> Expr:
        return BinOp(ArithOp.ADD, _wrap(other), _wrap(self))

    def __sub__(self, other: ExprLike) -> Expr:
        return BinOp(ArithOp.SUB, _wrap(self), _wrap(other))

    def __rsub__(self, other: ExprLike) -> Expr:
        return BinOp(ArithOp.SUB, _wrap(other), _wrap(self))

    def __mul__(self, other: ExprLike) -> Expr:
        return BinOp(ArithOp.MUL, _wrap(self), _wrap(other))

    def __rmul__(self, other: ExprLike) -> Expr:
        return BinOp(ArithOp.MUL, _wrap(other), _wrap(self))

    def __rshift__(self, other: ExprLike) -> Expr:
        return BinOp(ArithOp.SHR, _wrap(self), _wrap(other))

    def __lshift__(self, other: ExprLike) -> Expr:
        return BinOp(ArithOp.SHL, _wrap(self), _wrap(other))

    def __floordiv__(self, other: ExprLike) -> Expr:
        return BinOp(ArithOp.FLOORDIV, _wrap(self), _wrap(other))

    def __mod__(self, other: ExprLike) -> Expr:
        return BinOp(ArithOp.MOD, _wrap(self), _wrap(other))

    def astype(self, dtype: str) -> Expr:
        return cast(dtype, _wrap(self))


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int
    dtype: str = "int32"


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """An index variable (identity semantics: two vars with one name are different)."""

    name: str
    dtype: str = "int32"
    uid: int = field(default_factory=lambda: next(_ids), repr=False)


@dataclass(frozen=True, eq=False)
class IterVar(Expr):
    """A loop: ``var`` ranges over ``[0, extent)``; ``reduce`` marks a reduction axis.

    In expressions an iteration variable stands for its ``var``.
    """

    var: Var
    extent: int
    reduce: bool = False
    dtype: str = "int32"

    @property
    def name(self) -> str:
        return self.var.name


@dataclass(frozen=True, eq=False)
class Read(Expr):
    tensor: Tensor
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> str:
        return self.tensor.dtype


@dataclass(frozen=True, eq=False)
class BinOp(Expr):
    op: ArithOp
    a: Expr
    b: Expr

    def __post_init__(self) -> None:
        if not isinstance(self.op, ArithOp):
            raise TEError(f"a BinOp's op must be an ArithOp, not {self.op!r}")

    @property
    def dtype(self) -> str:
        if isinstance(self.a, Const):
            return self.b.dtype
        if isinstance(self.b, Const):
            return self.a.dtype
        return max(self.a.dtype, self.b.dtype, key=lambda d: _WIDTH[d])


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    dtype: str
    value: Expr


@dataclass(frozen=True, eq=False)
class Cmp(Expr):
    """``a <= b`` or ``a < b`` (a boolean condition for :func:`select`)."""

    op: CmpOp
    a: Expr
    b: Expr
    dtype: str = "bool"

    def __post_init__(self) -> None:
        if not isinstance(self.op, CmpOp):
            raise TEError(f"a Cmp's op must be a CmpOp, not {self.op!r}")


@dataclass(frozen=True, eq=False)
class Select(Expr):
    """``then`` where every condition holds, else ``otherwise``."""

    conditions: tuple[Cmp, ...]
    then: Expr
    otherwise: Expr

    @property
    def dtype(self) -> str:
        return self.then.dtype


@dataclass(frozen=True, eq=False)
class Reduce(Expr):
    """``sum(body)`` over ``axes``."""

    body: Expr
    axes: tuple[IterVar, ...]

    @property
    def dtype(self) -> str:
        return self.body.dtype


@dataclass(frozen=True, eq=False)
class PlaceholderOp:
    name: str


@dataclass(frozen=True, eq=False)
class ComputeOp:
    name: str
    axis: tuple[IterVar, ...]
    body: Expr

    @property
    def reduce_axis(self) -> tuple[IterVar, ...]:
        return self.body.axes if isinstance(self.body, Reduce) else ()

    @property
    def inputs(self) -> list[Tensor]:
        return list(dict.fromkeys(_reads(self.body)))


@dataclass(frozen=True, eq=False)
class Tensor:
    """A tensor: the output of a placeholder or compute op."""

    shape: tuple[int, ...]
    dtype: str
    op: PlaceholderOp | ComputeOp

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices: ExprLike | tuple[ExprLike, ...]) -> Read:
        items = indices if isinstance(indices, tuple) else (indices,)
        if len(items) != len(self.shape):
            raise TEError(f"{self.name} has {len(self.shape)} dimensions, indexed with {len(items)}")
        return Read(self, tuple(_wrap(i) for i in items))

    def __call__(self, *indices: ExprLike) -> Read:
        return self[tuple(indices)]

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.shape}, {self.dtype})"


def _reads(expr: Expr) -> list[Tensor]:
    if isinstance(expr, Read):
        return [expr.tensor] + [t for i in expr.indices for t in _reads(i)]
    children: list[Expr] = []
    if isinstance(expr, (BinOp, Cmp)):
        children = [expr.a, expr.b]
    elif isinstance(expr, Cast):
        children = [expr.value]
    elif isinstance(expr, Select):
        children = [*expr.conditions, expr.then, expr.otherwise]
    elif isinstance(expr, Reduce):
        children = [expr.body]
    return [t for c in children for t in _reads(c)]


def _check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise TEError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    return dtype


def _check_shape(shape: Sequence[int]) -> tuple[int, ...]:
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
        raise TEError(f"shape must be positive integers, not {tuple(shape)!r}")
    return tuple(shape)


def placeholder(shape: Sequence[int], dtype: str = "int8", name: str = "placeholder") -> Tensor:
    """An input tensor."""
    return Tensor(_check_shape(shape), _check_dtype(dtype), PlaceholderOp(name))


def compute(
    shape: Sequence[int], fcompute: Callable[..., Expr], name: str = "compute",
    axis_names: Sequence[str] | None = None,
) -> Tensor:
    """A tensor whose element at each index is ``fcompute(*index_vars)``."""
    shape = _check_shape(shape)
    names = axis_names or [f"{name}_i{d}" for d in range(len(shape))]
    axis = tuple(IterVar(Var(n), extent) for n, extent in zip(names, shape))
    body = _wrap(fcompute(*(a.var for a in axis)))
    if isinstance(body, Reduce) is False and any(isinstance(e, Reduce) for e in _subexprs(body)):
        raise TEError(f"{name}: a sum must be the whole body of a compute, not part of it")
    return Tensor(shape, _check_dtype(body.dtype), ComputeOp(name, axis, body))


def _subexprs(expr: Expr) -> list[Expr]:
    out: list[Expr] = [expr]
    if isinstance(expr, (BinOp, Cmp)):
        out += _subexprs(expr.a) + _subexprs(expr.b)
    elif isinstance(expr, Cast):
        out += _subexprs(expr.value)
    elif isinstance(expr, Select):
        out += _subexprs(expr.then) + _subexprs(expr.otherwise)
    return out


def reduce_axis(extent: int, name: str = "k") -> IterVar:
    if not isinstance(extent, int) or extent < 1:
        raise TEError(f"reduce_axis extent must be a positive integer, not {extent!r}")
    return IterVar(Var(name), extent, reduce=True)


def sum(expr: Expr, axis: IterVar | Sequence[IterVar]) -> Reduce:  # noqa: A001 - TVM's name
    """``Σ expr`` over the reduction axes ``axis``."""
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    if not axes or not all(isinstance(a, IterVar) and a.reduce for a in axes):
        raise TEError("sum needs reduction axes made by reduce_axis")
    return Reduce(expr, axes)


def cast(dtype: str, value: ExprLike) -> Expr:
    return Cast(_check_dtype(dtype), _wrap(value))


def minimum(a: ExprLike, b: ExprLike) -> Expr:
    return BinOp(ArithOp.MIN, _wrap(a), _wrap(b))


def maximum(a: ExprLike, b: ExprLike) -> Expr:
    return BinOp(ArithOp.MAX, _wrap(a), _wrap(b))


def clip(value: ExprLike, low: int, high: int) -> Expr:
    """``max(min(value, high), low)``, lowered to ALU MIN then MAX (docs/ISA.md §3)."""
    if low > high:
        raise TEError(f"clip bounds must satisfy low <= high, not {low} > {high}")
    return maximum(minimum(value, high), low)


def relu(value: ExprLike) -> Expr:
    return maximum(value, 0)


def select(conditions: Sequence[Cmp], then: ExprLike, otherwise: ExprLike) -> Expr:
    return Select(tuple(conditions), _wrap(then), _wrap(otherwise))


def less_equal(a: ExprLike, b: ExprLike) -> Cmp:
    return Cmp(CmpOp.LE, _wrap(a), _wrap(b))


def less(a: ExprLike, b: ExprLike) -> Cmp:
    return Cmp(CmpOp.LT, _wrap(a), _wrap(b))


def show(expr: Expr) -> str:
    """A readable rendering of an expression (``x*2 + kh``), dropping ``0 +`` and ``* 1``."""
    if isinstance(expr, IterVar):
        expr = expr.var
    if isinstance(expr, Var):
        return expr.name
    if isinstance(expr, Const):
        return str(expr.value)
    if isinstance(expr, BinOp):
        if expr.op is ArithOp.ADD and isinstance(expr.a, Const) and expr.a.value == 0:
            return show(expr.b)
        if expr.op in (ArithOp.ADD, ArithOp.SUB) and isinstance(expr.b, Const) and expr.b.value == 0:
            return show(expr.a)
        if expr.op is ArithOp.MUL and isinstance(expr.b, Const) and expr.b.value == 1:
            return show(expr.a)
        if expr.op in (ArithOp.MIN, ArithOp.MAX):
            return f"{expr.op.value}({show(expr.a)}, {show(expr.b)})"
        return f"({show(expr.a)} {expr.op.value} {show(expr.b)})"
    if isinstance(expr, Cast):
        return f"{expr.dtype}({show(expr.value)})"
    if isinstance(expr, Read):
        return f"{expr.tensor.name}[{', '.join(show(i) for i in expr.indices)}]"
    return type(expr).__name__

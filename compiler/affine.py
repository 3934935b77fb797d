"""Affine index arithmetic: ``Σ coeff·var + const`` over index variables.

Bound inference and micro-op generation need index expressions as affine maps of
loop variables; anything that is not affine (``//``, ``%``, products of variables)
is rejected where an affine map is required, and evaluated as a plain expression
where only a value is needed.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .te import ArithOp, BinOp, Cast, Const, Expr, IterVar, Var

__all__ = ["Affine", "affine", "evaluate"]


@dataclass(frozen=True)
class Affine:
    terms: tuple[tuple[Var, int], ...]
    const: int

    @staticmethod
    def of(terms: Mapping[Var, int], const: int) -> Affine:
        kept = tuple(sorted(((v, c) for v, c in terms.items() if c), key=lambda t: t[0].uid))
        return Affine(kept, const)

    def coeff(self, var: Var) -> int:
        for v, c in self.terms:
            if v is var:
                return c
        return 0

    def vars(self) -> list[Var]:
        return [v for v, _ in self.terms]

    def __add__(self, other: Affine) -> Affine:
        terms = dict(self.terms)
        for v, c in other.terms:
            terms[v] = terms.get(v, 0) + c
        return Affine.of(terms, self.const + other.const)

    def scale(self, factor: int) -> Affine:
        return Affine.of({v: c * factor for v, c in self.terms}, self.const * factor)

    def substitute(self, env: Mapping[Var, Affine]) -> Affine:
        out = Affine((), self.const)
        for v, c in self.terms:
            out = out + (env[v].scale(c) if v in env else Affine(((v, c),), 0))
        return out

    def split(self, inner: set[Var]) -> tuple[Affine, Affine]:
        """(the part over ``inner`` variables, the rest including the constant)."""
        a = Affine.of({v: c for v, c in self.terms if v in inner}, 0)
        b = Affine.of({v: c for v, c in self.terms if v not in inner}, self.const)
        return a, b

    def value(self, values: Mapping[Var, int]) -> int:
        return self.const + sum(c * values[v] for v, c in self.terms)


def affine(expr: Expr, env: Mapping[Var, Affine] | None = None) -> Affine | None:
    """``expr`` as an affine map (variables replaced through ``env``), or None."""
    env = env or {}
    if isinstance(expr, IterVar):
        expr = expr.var
    if isinstance(expr, Const):
        return Affine((), expr.value)
    if isinstance(expr, Var):
        return env.get(expr, Affine(((expr, 1),), 0))
    if isinstance(expr, Cast):
        return affine(expr.value, env)
    if isinstance(expr, BinOp) and expr.op in (ArithOp.ADD, ArithOp.SUB, ArithOp.MUL):
        a, b = affine(expr.a, env), affine(expr.b, env)
        if a is None or b is None:
            return None
        if expr.op is ArithOp.ADD:
            return a + b
        if expr.op is ArithOp.SUB:
            return a + b.scale(-1)
        if not a.terms:
            return b.scale(a.const)
        if not b.terms:
            return a.scale(b.const)
    return None


_EVALUATE: dict[ArithOp, Callable[[int, int], int]] = {
    ArithOp.ADD: operator.add, ArithOp.SUB: operator.sub, ArithOp.MUL: operator.mul,
    ArithOp.FLOORDIV: operator.floordiv, ArithOp.MOD: operator.mod, ArithOp.SHR: operator.rshift,
    ArithOp.SHL: operator.lshift, ArithOp.MIN: min, ArithOp.MAX: max,
}


def evaluate(expr: Expr, values: Mapping[Var, int]) -> int:
    """The integer value of an index expression under ``values``."""
    if isinstance(expr, IterVar):
        expr = expr.var
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Var):
        return values[expr]
    if isinstance(expr, Cast):
        return evaluate(expr.value, values)
    if isinstance(expr, BinOp):
        a, b = evaluate(expr.a, values), evaluate(expr.b, values)
        return _EVALUATE[expr.op](a, b)
    raise TypeError(f"cannot evaluate {type(expr).__name__} as an index")

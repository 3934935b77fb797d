"""Bound inference: loop extents of every stage and the region each attached stage covers.

A stage attached with ``compute_at(parent, axis)`` computes only the region its
consumers read inside ``parent``'s loop ``axis``.  Index expressions are split into
an affine part over the loops *inside* the attach point (whose range gives the
region's extent) and an arbitrary expression over the loops *outside* it (the
region's start, evaluated when code is generated).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .affine import Affine
from .ir import LoweringError
from .schedule import Fuse, Schedule, Split, Stage, read_of
from .te import ArithOp, BinOp, Cast, Cmp, ComputeOp, Const, Expr, IterVar, Read, Reduce, Select, Tensor, Var

__all__ = ["Region", "IndexParts", "split_index", "substitute", "same", "StageBounds", "Tail", "infer_bounds",
           "ragged_splits"]


@dataclass(frozen=True)
class IndexParts:
    """``inner + outer + const``: affine over inner loops, any expression over outer ones."""

    inner: Affine
    outer: Expr | None
    const: int


def split_index(expr: Expr, inner: set[Var]) -> IndexParts | None:
    """Split an index expression; None when it is not affine in the inner loops."""
    if isinstance(expr, IterVar):
        expr = expr.var
    if isinstance(expr, Const):
        return IndexParts(Affine((), 0), None, expr.value)
    if isinstance(expr, Var):
        if expr in inner:
            return IndexParts(Affine(((expr, 1),), 0), None, 0)
        return IndexParts(Affine((), 0), expr, 0)
    if isinstance(expr, Cast):
        return split_index(expr.value, inner)
    if isinstance(expr, BinOp):
        a, b = split_index(expr.a, inner), split_index(expr.b, inner)
        if a is None or b is None:
            return None
        if expr.op in (ArithOp.ADD, ArithOp.SUB):
            sign = 1 if expr.op is ArithOp.ADD else -1
            return IndexParts(a.inner + b.inner.scale(sign), _combine(expr.op, a.outer, b.outer),
                              a.const + sign * b.const)
        if not a.inner.terms and not b.inner.terms:
            return IndexParts(Affine((), 0), expr, 0)  # no inner loop: all of it is outer
        if expr.op is ArithOp.MUL:
            for const, other in ((a, b), (b, a)):
                if not const.inner.terms and const.outer is None:
                    k = const.const
                    outer = None if other.outer is None else BinOp(ArithOp.MUL, other.outer, Const(k))
                    return IndexParts(other.inner.scale(k), outer, other.const * k)
    return None


def _combine(op: ArithOp, a: Expr | None, b: Expr | None) -> Expr | None:
    if b is None:
        return a
    if a is None:
        return b if op is ArithOp.ADD else BinOp(ArithOp.MUL, b, Const(-1))
    return BinOp(op, a, b)


def substitute(expr: Expr, env: Mapping[Var, Expr]) -> Expr:
    """``expr`` with variables replaced through ``env``."""
    if isinstance(expr, IterVar):
        expr = expr.var
    if isinstance(expr, Var):
        return env.get(expr, expr)
    if isinstance(expr, Const):
        return expr
    if isinstance(expr, BinOp):
        return BinOp(expr.op, substitute(expr.a, env), substitute(expr.b, env))
    if isinstance(expr, Cmp):
        return Cmp(expr.op, substitute(expr.a, env), substitute(expr.b, env))
    if isinstance(expr, Cast):
        return Cast(expr.dtype, substitute(expr.value, env))
    if isinstance(expr, Read):
        return Read(expr.tensor, tuple(substitute(i, env) for i in expr.indices))
    if isinstance(expr, Select):
        return Select(tuple(Cmp(c.op, substitute(c.a, env), substitute(c.b, env)) for c in expr.conditions),
                      substitute(expr.then, env), substitute(expr.otherwise, env))
    if isinstance(expr, Reduce):
        return Reduce(substitute(expr.body, env), expr.axes)
    raise TypeError(f"cannot substitute into {type(expr).__name__}")


def same(a: Expr | None, b: Expr | None) -> bool:
    """Structural equality (variables by identity)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, Var) or isinstance(b, Var):
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, Const) and isinstance(b, Const):
        return a.value == b.value
    if isinstance(a, BinOp) and isinstance(b, BinOp):
        return a.op == b.op and same(a.a, b.a) and same(a.b, b.b)
    if isinstance(a, Cast) and isinstance(b, Cast):
        return same(a.value, b.value)
    return a is b


@dataclass(frozen=True)
class Region:
    """Per dimension: the start (outer expression + constant) and the extent."""

    outer: tuple[Expr | None, ...]
    const: tuple[int, ...]
    shape: tuple[int, ...]

    def start(self, dim: int) -> Expr:
        outer = self.outer[dim]
        return Const(self.const[dim]) if outer is None else BinOp(ArithOp.ADD, outer, Const(self.const[dim]))


@dataclass
class StageBounds:
    """Everything bound inference knows about one stage."""

    stage: Stage
    region: Region
    extents: dict[Var, int]  # every iteration variable of the stage
    root_env: dict[Var, Expr]  # root variable → expression of leaf loops (+ region start)
    outer_vars: set[Var]  # loops outside the stage's attach point


@dataclass(frozen=True)
class Tail:
    """A split that need not divide its loop (a tail tile), seen from one peeled copy of the
    loop nest: the outer loop's iteration starts at ``start`` and the inner loop runs
    ``extent`` times (the factor for the whole tiles, the remainder for the tail)."""

    start: int
    extent: int


def _leaf_extents(stage: Stage, root: Mapping[IterVar, int],
                  tails: Mapping[IterVar, Tail]) -> tuple[dict[IterVar, int], dict[Split, int]]:
    """Extents of every iteration variable, and each split's factor."""
    ext = dict(root)
    factors: dict[Split, int] = {}
    for rel in stage.relations:
        if isinstance(rel, Split):
            parent = ext[rel.parent]
            factor = rel.factor if rel.factor is not None else parent // (rel.nparts or 1)
            tail = tails.get(rel.outer)
            if factor < 1 or (parent % factor and tail is None) or (rel.nparts and parent % rel.nparts):
                amount = f"factor {rel.factor}" if rel.factor is not None else f"nparts {rel.nparts}"
                raise LoweringError("bound inference", f"split of {stage.name}.{rel.parent.name} "
                                    f"(extent {parent}) by {amount} does not divide it")
            factors[rel] = factor
            ext[rel.outer] = -(-parent // factor)
            ext[rel.inner] = factor if tail is None else tail.extent
        else:
            ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
    return ext, factors


def _root_env(stage: Stage, ext: Mapping[IterVar, int], factors: Mapping[Split, int],
              tails: Mapping[IterVar, Tail]) -> dict[IterVar, Expr]:
    env: dict[IterVar, Expr] = {}
    for leaf in stage.leaf:
        tail = tails.get(leaf)
        env[leaf] = leaf.var if tail is None or not tail.start else BinOp(ArithOp.ADD, leaf.var, Const(tail.start))
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            outer = BinOp(ArithOp.MUL, env[rel.outer], Const(factors[rel]))
            env[rel.parent] = BinOp(ArithOp.ADD, outer, env[rel.inner])
        elif isinstance(rel, Fuse):
            env[rel.outer] = BinOp(ArithOp.FLOORDIV, env[rel.fused], Const(ext[rel.inner]))
            env[rel.inner] = BinOp(ArithOp.MOD, env[rel.fused], Const(ext[rel.inner]))
    return env


def ragged_splits(stage: Stage) -> dict[IterVar, tuple[int, int]]:
    """The splits of an unattached stage that do not divide their loop: outer loop →
    (the split loop's extent, the factor)."""
    op = stage.op
    assert isinstance(op, ComputeOp)
    ext: dict[IterVar, int] = {a: n for a, n in zip(op.axis, stage.tensor.shape)}
    ext.update({a: a.extent for a in op.reduce_axis})
    ragged = {}
    for rel in stage.relations:
        if isinstance(rel, Split):
            parent = ext[rel.parent]
            factor = rel.factor if rel.factor is not None else parent // (rel.nparts or 1)
            if factor >= 1 and parent % factor:
                ragged[rel.outer] = (parent, factor)
            ext[rel.outer], ext[rel.inner] = -(-parent // max(factor, 1)), factor
        else:
            ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
    return ragged


def outer_vars(stage: Stage) -> set[Var]:
    """Loops enclosing ``stage``'s attach point, through every ancestor."""
    out: set[Var] = set()
    while stage.attach is not None:
        parent, axis = stage.attach
        out |= {leaf.var for leaf in parent.leaf[: parent.leaf.index(axis) + 1]}
        stage = parent
    return out


def infer_bounds(schedule: Schedule, order: list[Stage],
                 tails: Mapping[IterVar, Tail] | None = None) -> dict[Stage, StageBounds]:
    """Bounds of every compute stage in ``order`` (consumers before producers).

    ``tails`` maps the outer loop of each split that may leave a tail tile to the
    :class:`Tail` of the copy of the loop nest being lowered; every other split must
    divide its loop.
    """
    tails = tails or {}
    bounds: dict[Stage, StageBounds] = {}
    for stage in order:
        op = stage.op
        assert isinstance(op, ComputeOp)
        if stage.attach is None:
            region = Region((None,) * len(op.axis), (0,) * len(op.axis), stage.tensor.shape)
        else:
            region = _region(schedule, stage, bounds)
        root = {a: n for a, n in zip(op.axis, region.shape)}
        root.update({a: a.extent for a in op.reduce_axis})
        ext, factors = _leaf_extents(stage, root, tails)
        env = _root_env(stage, ext, factors, tails)
        root_env: dict[Var, Expr] = {}
        for d, axis in enumerate(op.axis):
            local = env[axis]
            root_env[axis.var] = local if stage.attach is None else BinOp(ArithOp.ADD, region.start(d), local)
        for axis in op.reduce_axis:
            root_env[axis.var] = env[axis]
        bounds[stage] = StageBounds(stage, region, {iv.var: n for iv, n in ext.items()}, root_env,
                                    outer_vars(stage))
    return bounds


def reads_of(schedule: Schedule, consumer: Stage, tensor: Tensor) -> list[tuple[Expr, ...]]:
    """Index tuples with which ``consumer`` reads ``tensor`` (after cache_read redirects)."""
    assert isinstance(consumer.op, ComputeOp)
    found: list[tuple[Expr, ...]] = []

    def visit(expr: Expr) -> None:
        if isinstance(expr, Read):
            source = schedule.stages.get(expr.tensor)
            redirected = read_of(schedule, consumer, expr.tensor) is not expr.tensor
            if not redirected and source is not None and source.inline \
                    and isinstance(source.op, ComputeOp):
                env = {a.var: i for a, i in zip(source.op.axis, expr.indices)}
                visit(substitute(source.op.body, env))  # an inlined stage reads on its behalf
                return
            if read_of(schedule, consumer, expr.tensor) is tensor:
                found.append(expr.indices)
            for i in expr.indices:
                visit(i)
        for child in _children(expr):
            visit(child)

    visit(consumer.op.body)
    return found


def _children(expr: Expr) -> list[Expr]:
    if isinstance(expr, (BinOp, Cmp)):
        return [expr.a, expr.b]
    if isinstance(expr, Cast):
        return [expr.value]
    if isinstance(expr, Select):
        return [*expr.conditions, expr.then, expr.otherwise]
    if isinstance(expr, Reduce):
        return [expr.body]
    return []


def _region(schedule: Schedule, stage: Stage, bounds: dict[Stage, StageBounds]) -> Region:
    outer = outer_vars(stage)
    dims = len(stage.tensor.shape)
    lo: dict[int, int] = {}  # per dimension, once a read sets it
    hi: dict[int, int] = {}
    starts: list[Expr | None] = [None] * dims
    consumers = [c for c in bounds if any(True for _ in reads_of(schedule, c, stage.tensor))]
    if not consumers:
        raise LoweringError("bound inference", f"{stage.name} is attached but nothing reads it")
    for consumer in consumers:
        info = bounds[consumer]
        inner = set(info.extents) - outer
        for indices in reads_of(schedule, consumer, stage.tensor):
            for d, index in enumerate(indices):
                parts = split_index(substitute(index, info.root_env), inner)
                if parts is None:
                    raise LoweringError("bound inference", f"{consumer.name} reads {stage.name} "
                                        f"with an index that is not affine in its inner loops")
                low = parts.const + sum(min(0, c * (info.extents[v] - 1)) for v, c in parts.inner.terms)
                high = parts.const + sum(max(0, c * (info.extents[v] - 1)) for v, c in parts.inner.terms)
                if d in lo and not same(starts[d], parts.outer):
                    raise LoweringError("bound inference", f"{stage.name} is read at offsets that "
                                        "differ between consumers; give each its own cache")
                starts[d] = parts.outer
                lo[d] = min(lo.get(d, low), low)
                hi[d] = max(hi.get(d, high), high)
    consts = tuple(int(lo[d]) for d in range(dims))
    shape = tuple(int(hi[d]) - c + 1 for d, c in enumerate(consts))
    return Region(tuple(starts), consts, shape)

"""Schedules: *how* to compute — loop transformations, buffer scopes, tensorize, vthreads.

In TVM's vocabulary: ``create_schedule(outputs)`` gives a :class:`Schedule`;
``s[tensor]`` is the tensor's :class:`Stage`; stages are split, tiled, reordered and
fused, attached with ``compute_at`` or inlined, their outputs placed in the
accelerator's buffer scopes (``inp``, ``wgt``, ``acc``, ``out``) by ``cache_read``,
``cache_write`` and ``set_scope``, marked with pragmas (``dma_copy``, ``alu``),
tensorized onto the GEMM intrinsic, and given a virtual-thread axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .intrin import Intrinsic
from .ir import Scope
from .te import ComputeOp, IterVar, PlaceholderOp, Read, Tensor, Var

__all__ = ["Schedule", "Stage", "Split", "Fuse", "create_schedule", "ScheduleError", "SCOPES"]

#: The scopes a schedule may name (the epi buffer is the drain pass's own, not a schedule's).
SCOPES = tuple(s for s in Scope if s is not Scope.EPI)
PRAGMAS = ("dma_copy", "alu")


class ScheduleError(ValueError):
    """A scheduling primitive applied where it cannot be."""


@dataclass(frozen=True, eq=False)
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | None
    nparts: int | None


@dataclass(frozen=True, eq=False)
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


@dataclass(eq=False)
class Stage:
    """The schedule of one tensor's computation."""

    tensor: Tensor
    op: ComputeOp | PlaceholderOp
    scope: Scope = Scope.GLOBAL
    leaf: list[IterVar] = field(default_factory=list)
    relations: list[Split | Fuse] = field(default_factory=list)
    attach: tuple[Stage, IterVar] | None = None
    inline: bool = False
    pragmas: dict[IterVar, str] = field(default_factory=dict)
    tensorize_axis: IterVar | None = None
    intrinsic: Intrinsic | None = None
    vthread_axis: IterVar | None = None
    unrolled: set[IterVar] = field(default_factory=set)

    def __post_init__(self) -> None:
        if isinstance(self.op, ComputeOp):
            self.leaf = list(self.op.axis) + list(self.op.reduce_axis)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def axis(self) -> tuple[IterVar, ...]:
        """The data-parallel root axes (``s[t].op.axis`` in TVM)."""
        return self.op.axis if isinstance(self.op, ComputeOp) else ()

    @property
    def reduce_axis(self) -> tuple[IterVar, ...]:
        return self.op.reduce_axis if isinstance(self.op, ComputeOp) else ()

    def _check_leaf(self, axis: IterVar, what: str) -> None:
        if not isinstance(self.op, ComputeOp):
            raise ScheduleError(f"{what}: {self.name} is a placeholder and has no loops")
        if axis not in self.leaf:
            raise ScheduleError(f"{what}: {axis.name} is not a loop of {self.name} "
                                f"(its loops: {', '.join(a.name for a in self.leaf)})")

    # -- loop transformations ----------------------------------------------------
    def split(self, axis: IterVar, factor: int | None = None,
              nparts: int | None = None) -> tuple[IterVar, IterVar]:
        """Split ``axis`` into (outer, inner): by the inner ``factor`` or into ``nparts``."""
        self._check_leaf(axis, "split")
        if (factor is None) == (nparts is None):
            raise ScheduleError("split takes exactly one of factor and nparts")
        amount = factor if factor is not None else nparts
        if not isinstance(amount, int) or amount < 1:
            raise ScheduleError(f"split {'factor' if factor else 'nparts'} must be a positive "
                                f"integer, not {amount!r}")
        outer = IterVar(Var(f"{axis.name}.outer"), 0, axis.reduce)
        inner = IterVar(Var(f"{axis.name}.inner"), 0, axis.reduce)
        self.relations.append(Split(axis, outer, inner, factor, nparts))
        at = self.leaf.index(axis)
        self.leaf[at : at + 1] = [outer, inner]
        return outer, inner

    def tile(self, x: IterVar, y: IterVar, x_factor: int,
             y_factor: int) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split ``x`` and ``y`` and order them (x.outer, y.outer, x.inner, y.inner)."""
        xo, xi = self.split(x, x_factor)
        yo, yi = self.split(y, y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def reorder(self, *axes: IterVar) -> None:
        """Put ``axes`` in this order, in the positions they occupy now."""
        for axis in axes:
            self._check_leaf(axis, "reorder")
        if len(set(axes)) != len(axes):
            raise ScheduleError("reorder: an axis is given twice")
        positions = sorted(self.leaf.index(a) for a in axes)
        for position, axis in zip(positions, axes):
            self.leaf[position] = axis

    def fuse(self, outer: IterVar, inner: IterVar) -> IterVar:
        """Fuse two adjacent loops (outer first) into one."""
        self._check_leaf(outer, "fuse")
        self._check_leaf(inner, "fuse")
        at = self.leaf.index(outer)
        if self.leaf.index(inner) != at + 1:
            raise ScheduleError(f"fuse: {outer.name} and {inner.name} must be adjacent, outer first")
        if outer.reduce != inner.reduce:
            raise ScheduleError("fuse: cannot fuse a reduction axis with a data-parallel one")
        fused = IterVar(Var(f"{outer.name}.{inner.name}.fused"), 0, outer.reduce)
        self.relations.append(Fuse(outer, inner, fused))
        self.leaf[at : at + 2] = [fused]
        return fused

    def unroll(self, axis: IterVar) -> None:
        """Unroll ``axis``: its iterations become separate instructions (never a micro-op loop)."""
        self._check_leaf(axis, "unroll")
        self.unrolled.add(axis)

    # -- placement -----------------------------------------------------------------
    def compute_at(self, parent: Stage, axis: IterVar) -> None:
        """Compute this stage inside ``parent``'s loop ``axis``, only the region it needs."""
        parent._check_leaf(axis, f"compute_at of {self.name}")
        if parent is self:
            raise ScheduleError(f"compute_at: {self.name} cannot be attached to itself")
        self.attach = (parent, axis)

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers."""
        if not isinstance(self.op, ComputeOp) or self.op.reduce_axis:
            raise ScheduleError(f"compute_inline: {self.name} must be an element-wise compute")
        self.inline = True

    def set_scope(self, scope: str | Scope) -> None:
        self.scope = _scope(scope, SCOPES, "scope")

    def pragma(self, axis: IterVar, name: str) -> None:
        """Mark ``axis``: ``dma_copy`` (lower the copy to DMA) or ``alu`` (lower to ALU)."""
        self._check_leaf(axis, "pragma")
        if name not in PRAGMAS:
            raise ScheduleError(f"pragma must be one of {', '.join(PRAGMAS)}, not {name!r}")
        self.pragmas[axis] = name

    def tensorize(self, axis: IterVar, intrinsic: Intrinsic) -> None:
        """Replace the loops from ``axis`` inward by ``intrinsic`` (checked when lowering)."""
        self._check_leaf(axis, "tensorize")
        self.tensorize_axis, self.intrinsic = axis, intrinsic

    def vthread(self, axis: IterVar) -> None:
        """Make ``axis`` a virtual-thread axis: its extent is the number of threads."""
        self._check_leaf(axis, "vthread")
        if axis.reduce:
            raise ScheduleError(f"vthread: {axis.name} is a reduction axis; virtual threads must "
                                "split data-parallel work")
        self.vthread_axis = axis

    bind = vthread


class Schedule:
    """The stages of every tensor an output depends on."""

    def __init__(self, outputs: Sequence[Tensor]) -> None:
        self.outputs = list(outputs)
        self.stages: dict[Tensor, Stage] = {}
        for tensor in _post_order(self.outputs):
            self.stages[tensor] = Stage(tensor, tensor.op)
        self.redirects: dict[tuple[Stage, Tensor], Tensor] = {}

    def __getitem__(self, tensor: Tensor) -> Stage:
        try:
            return self.stages[tensor]
        except KeyError:
            raise ScheduleError(f"{tensor.name} is not part of this schedule") from None

    def producers_first(self) -> list[Stage]:
        """Every stage after the stages it reads (cache redirects included)."""
        order: dict[Stage, None] = {}

        def visit(stage: Stage) -> None:
            if stage in order:
                return
            if isinstance(stage.op, ComputeOp):
                for tensor in _op_reads(self, stage):
                    visit(self[tensor])
            order[stage] = None

        for tensor in self.outputs:
            visit(self[tensor])
        return list(order)

    def consumers(self, tensor: Tensor) -> list[Stage]:
        return [s for s in self.stages.values() if isinstance(s.op, ComputeOp)
                and any(t is tensor for t in _op_reads(self, s))]

    def cache_read(self, tensor: Tensor, scope: str | Scope, readers: Sequence[Tensor]) -> Tensor:
        """A copy of ``tensor`` in ``scope``, read by ``readers`` instead of ``tensor``."""
        scope = _scope(scope, SCOPES[1:], "cache_read scope")
        names = [f"{tensor.name}_i{d}" for d in range(tensor.ndim)]
        from .te import compute

        cache = compute(tensor.shape, lambda *i: Read(tensor, tuple(i)), f"{tensor.name}.{scope}", names)
        stage = Stage(cache, cache.op, scope=scope)
        self.stages[cache] = stage
        for reader in readers:
            self.redirects[(self[reader], tensor)] = cache
        return cache

    def cache_write(self, tensor: Tensor, scope: str | Scope) -> Tensor:
        """Compute ``tensor`` into ``scope`` first; ``tensor`` becomes a copy of it."""
        scope = _scope(scope, SCOPES[1:], "cache_write scope")
        stage = self[tensor]
        if not isinstance(stage.op, ComputeOp):
            raise ScheduleError(f"cache_write: {tensor.name} is a placeholder")
        op = stage.op
        cache = Tensor(tensor.shape, tensor.dtype, ComputeOp(f"{tensor.name}.{scope}", op.axis, op.body))
        self.stages[cache] = Stage(cache, cache.op, scope=scope)
        names = [a.name for a in op.axis]
        from .te import compute

        copy = compute(tensor.shape, lambda *i: Read(cache, tuple(i)), tensor.name, names)
        assert isinstance(copy.op, ComputeOp)  # compute() makes one
        stage.op = copy.op
        stage.leaf = list(copy.op.axis)
        stage.relations = []
        return cache


def _post_order(outputs: Sequence[Tensor]) -> list[Tensor]:
    seen: dict[Tensor, None] = {}

    def visit(t: Tensor) -> None:
        if t in seen:
            return
        if isinstance(t.op, ComputeOp):
            for child in t.op.inputs:
                visit(child)
        seen[t] = None

    for t in outputs:
        visit(t)
    return list(seen)


def _op_reads(schedule: Schedule, stage: Stage) -> list[Tensor]:
    assert isinstance(stage.op, ComputeOp)
    return [schedule.redirects.get((stage, t), t) for t in stage.op.inputs]


def read_of(schedule: Schedule, stage: Stage, tensor: Tensor) -> Tensor:
    """What ``stage`` reads when its expression names ``tensor`` (after cache_read)."""
    return schedule.redirects.get((stage, tensor), tensor)


def create_schedule(outputs: Tensor | Sequence[Tensor]) -> Schedule:
    """A schedule computing ``outputs`` (a tensor or a list of tensors)."""
    return Schedule([outputs] if isinstance(outputs, Tensor) else list(outputs))



def _scope(scope: str | Scope, allowed: tuple[Scope, ...], what: str) -> Scope:
    if scope not in allowed:
        raise ScheduleError(f"{what} must be one of {', '.join(allowed)}, not {scope!r}")
    return Scope(scope)

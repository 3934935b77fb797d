"""The loop IR: frozen dataclasses from lowering to code generation.

Lowering (:mod:`.lower`) produces host loops, virtual-thread loops and *stage*
statements (:class:`Copy`, :class:`Reset`, :class:`Reduction`, :class:`Elementwise`).
The passes replace stage statements by *machine* statements (:class:`Dma`,
:class:`UopInsn`), interleave virtual threads (:class:`Threaded`) and add
dependency tokens (:class:`Dep`); code generation walks the result, running host
loops and emitting one instruction per machine statement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import NamedTuple, Union

from openvta.isa import AluOp, MemoryType, Module

from .affine import Affine
from .te import Expr, Read, Tensor, Var

__all__ = [
    "Buffer", "Loop", "Block", "Copy", "Reset", "Reduction", "Elementwise", "Dma", "DmaDim", "Drain",
    "UopLoopSpec", "UopInsn", "Dep", "Threaded", "Stmt", "LoweringError", "walk", "transform",
    "Scope", "LoopKind", "Direction", "UopKind", "DepAction", "MicroOp",
]


class _Tag(str, Enum):
    """A string-valued tag that prints as its value (``f"{Scope.ACC}"`` is ``"acc"``)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Scope(_Tag):
    """Where a tensor lives: DRAM (``global``) or one of the on-chip buffers."""

    GLOBAL = "global"
    INP = "inp"
    WGT = "wgt"
    ACC = "acc"
    OUT = "out"
    EPI = "epi"  # machine v2's epi buffer (the drain unit's descriptors)


class LoopKind(_Tag):
    HOST = "host"  # run by code generation: one copy of the body per iteration
    VTHREAD = "vthread"  # virtual threads: replicated and interleaved by inject_vthreads


class Direction(_Tag):
    LOAD = "load"  # DRAM → buffer
    STORE = "store"  # buffer → DRAM


class UopKind(_Tag):
    GEMM = "gemm"
    ALU = "alu"


class DepAction(_Tag):
    PUSH = "push"
    POP = "pop"


class MicroOp(NamedTuple):
    """One micro-op's buffer-local indices (before the per-thread buffer offsets are added)."""

    dst: int
    src: int
    wgt: int = 0


class LoweringError(ValueError):
    """A schedule that cannot be lowered: names the pass, the stage and the reason."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


@dataclass(frozen=True)
class Buffer:
    """A region of one on-chip buffer: ``elems`` elements at ``offset`` in each thread's slice."""

    name: str
    scope: Scope
    offset: int
    shape: tuple[int, ...]

    @property
    def elems(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def base(self, thread: int, slices: dict[Scope, int]) -> int:
        """The first element of virtual thread ``thread``'s copy (``slices``: elements per thread)."""
        return thread * slices[self.scope] + self.offset


@dataclass(frozen=True)
class Loop:
    var: Var
    extent: int
    body: Stmt
    kind: LoopKind = LoopKind.HOST
    #: a virtual-thread loop whose split leaves the last thread a tail tile: that thread's
    #: body (the same machine statements as ``body``, with the tail's extents)
    tail: Stmt | None = None


@dataclass(frozen=True)
class Block:
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True)
class Copy:
    """Copy a region between a global tensor and a buffer (becomes DMA)."""

    stage: str
    direction: Direction
    buffer: Buffer
    tensor: Tensor
    start: tuple[Expr, ...]  # region start per non-tile dimension, in the copy's coordinates
    shape: tuple[int, ...]
    source_offset: tuple[int, ...]  # copy coordinate − tensor coordinate (padding)
    pragma: bool = False
    #: tensor coordinate = step × copy coordinate per dimension (empty: all 1); a step > 1
    #: loads every step-th row (2-D strided DMA) and is never padded
    source_step: tuple[int, ...] = ()
    #: the padding's value: 0, or the int8 minimum (LOAD INP's ``pad_min``)
    pad_value: int = 0


@dataclass(frozen=True)
class Reset:
    """Zero a region of the accumulator (GEMM with reset_reg)."""

    stage: str
    buffer: Buffer


@dataclass(frozen=True)
class Reduction:
    """A tensorized reduction: kernel loops around the intrinsic's tile product."""

    stage: str
    loops: tuple[tuple[Var, int], ...]
    dst: tuple[Buffer, Affine]
    reads: tuple[tuple[Buffer, Affine, Read], ...]  # (buffer, local tile index, the read)
    body: Expr
    tensor_loops: tuple[tuple[Var, int], ...]
    dst_tile: tuple[Expr, ...] = ()  # the output's two tile indices
    unrolled: frozenset[Var] = frozenset()


@dataclass(frozen=True)
class Elementwise:
    """An element-wise stage over accumulator tiles (becomes ALU instructions)."""

    stage: str
    loops: tuple[tuple[Var, int], ...]
    dst: tuple[Buffer, Affine]
    body: Expr
    operands: dict[Tensor, tuple[Buffer, Affine]] = field(hash=False)
    lane_vars: tuple[Var, ...] = ()


@dataclass(frozen=True)
class DmaDim:
    """One dimension of a DMA region after merging contiguous dimensions."""

    extent: int
    stride: int  # tensor elements between consecutive indices
    start: Expr  # in the copy's coordinates
    valid: tuple[int, int]  # valid range of the copy's coordinate (padding outside it)


@dataclass(frozen=True)
class Dma:
    """LOAD or STORE instructions for one region: outer dims become separate instructions."""

    stage: str
    module: Module
    memory_type: MemoryType
    buffer: Buffer
    tensor: Tensor
    dims: tuple[DmaDim, ...]  # outermost first; the last two are y and x
    store: bool = False
    #: a LOAD EPI of these constant words (int32 lanes per word) instead of a tensor's region
    words: tuple[tuple[int, ...], ...] | None = None
    #: the lane of every word that holds an epi offset in the thread's slice (a header's
    #: residual base): code generation adds the slice's base
    slice_lane: int | None = None
    #: a draining STORE ACC (machine v2): where its descriptors are
    drain: Drain | None = None
    #: a LOAD's padding value: 0, or the int8 minimum (``pad_min``, INP only)
    pad_value: int = 0


@dataclass(frozen=True)
class Drain:
    """Where a draining STORE's descriptors are: ``blocks`` of them side by side from ``epi``
    (one per channel block of the accumulator tile), the tile's channel block of acc element
    ``a`` being ``((a - tile) // per_block) % blocks`` (``tile``: the stored buffer's base)."""

    epi: Buffer
    per_block: int
    blocks: int
    #: the residual: its tensor, the memory type it loads as (EPI_8BIT or EPI) and where
    #: each STORE's residual elements go (the headers' ``res_base`` is that buffer's offset
    #: in the thread's slice: code generation adds the slice's base)
    residual: tuple[Tensor, MemoryType, Buffer] | None = None


@dataclass(frozen=True)
class UopLoopSpec:
    extent: int
    dst: int
    src: int
    wgt: int = 0


@dataclass(frozen=True)
class UopInsn:
    """One GEMM or ALU instruction (before the per-thread buffer offsets are added)."""

    stage: str
    kind: UopKind
    loops: tuple[UopLoopSpec, ...]
    uops: tuple[MicroOp, ...]
    buffers: tuple[Buffer, Buffer, Buffer | None]  # dst, src, wgt
    reset: bool = False
    alu_op: AluOp | None = None
    imm: int | None = None
    unrolled: tuple[bool, ...] = ()  # per loop: never fold it into iter_out/iter_in


@dataclass(frozen=True)
class Dep:
    """A dependency token: ``push`` from ``src`` to ``dst`` or ``pop`` by ``dst``; ``thread``:
    the virtual thread whose run or tile it ends or starts (None: priming and draining)."""

    action: DepAction
    src: Module
    dst: Module
    thread: int | None = None


@dataclass(frozen=True)
class Threaded:
    """A statement of virtual thread ``thread`` (its vthread variable bound to it)."""

    thread: int
    var: Var | None
    stmt: Stmt


Stmt = Union[Loop, Block, Copy, Reset, Reduction, Elementwise, Dma, UopInsn, Dep, Threaded]


def children(stmt: Stmt) -> tuple[Stmt, ...]:
    if isinstance(stmt, Loop):
        return (stmt.body,) if stmt.tail is None else (stmt.body, stmt.tail)
    if isinstance(stmt, Block):
        return stmt.stmts
    if isinstance(stmt, Threaded):
        return (stmt.stmt,)
    return ()


def walk(stmt: Stmt) -> Iterator[Stmt]:
    """Every statement, pre-order."""
    yield stmt
    for child in children(stmt):
        yield from walk(child)


def transform(stmt: Stmt, leaf: Callable[[Stmt], Stmt]) -> Stmt:
    """Rebuild ``stmt`` with every leaf statement replaced by ``leaf(stmt)``."""
    if isinstance(stmt, Loop):
        tail = None if stmt.tail is None else transform(stmt.tail, leaf)
        return replace(stmt, body=transform(stmt.body, leaf), tail=tail)
    if isinstance(stmt, Block):
        return Block(tuple(transform(s, leaf) for s in stmt.stmts))
    if isinstance(stmt, Threaded):
        return replace(stmt, stmt=transform(stmt.stmt, leaf))
    return leaf(stmt)

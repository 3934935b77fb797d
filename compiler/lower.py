"""Lowering: a schedule becomes the loop IR of :mod:`.ir`.

The schedule must have the shape every accelerator program has (as in VTA): one
output tensor in DRAM; accumulator-scope stages attached at one loop ``A`` of the
output (a tensorized reduction, element-wise stages computed in place, caches of
bias-like and whole-tensor operands — a stage reading only such a tile-shaped cache
updates that cache in place); input and weight caches attached at ``A`` or at a reduction
loop of the reduction stage.  The output's loops down to ``A`` become host loops (one
set of instructions per iteration), the loops inside become DMA regions and micro-op
loops.  A split whose outer loop is a host loop (not split again, not the virtual-thread
axis) and whose inner loop is inside ``A`` need not divide its loop: the host loop is
peeled into a loop over the whole tiles and one iteration over the tail tile, each
lowered with its own extents and buffers (at the same addresses; each scope reserves
the larger).  The split that the virtual-thread axis divides may leave a tail tile too
when the threads divide its tiles: the tail is then the last tile of the last thread, so
the virtual-thread loop carries two bodies, the whole tiles' (threads ``0..V-2``) and the
last thread's (its :attr:`~.ir.Loop.tail`), both with the thread's last tile peeled off
so that the two have the same loops.  Anything else is refused with a
:class:`LoweringError` that says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from openvta.isa import INT8_MIN, Config

from .affine import Affine
from .bounds import Region, StageBounds, Tail, infer_bounds, ragged_splits, same, split_index, substitute
from .host_loops import HostLoops, uneven_threads
from .ir import (Block, Buffer, Copy, Direction, Elementwise, LoweringError, Loop, Reduction, Reset,
                 Scope, Stmt)
from .schedule import Schedule, Split, Stage, read_of
from .te import (BinOp, Cast, Cmp, CmpOp, ComputeOp, Const, Expr, IterVar, PlaceholderOp, Read, Reduce, Select, Tensor,
                 Var)

__all__ = ["Lowered", "lower_schedule", "BUFFER_SCOPES"]

BUFFER_SCOPES = (Scope.INP, Scope.WGT, Scope.ACC)
#: The values a DMA pads with: zeros, or the int8 minimum (LOAD INP's ``pad_min``: the code
#: of 0.0 in an activation whose zero point is -128).
PAD_VALUES = (0, INT8_MIN)

#: what a cache copies: the global tensor, per axis the offset (padding) and the step
_Source = tuple[Tensor, tuple[int, ...], tuple[int, ...], int]  # (tensor, offsets, steps, pad value)


@dataclass(frozen=True)
class Lowered:
    """The lowered loop nest and what code generation needs besides it."""

    body: Stmt
    buffers: tuple[Buffer, ...]
    slices: dict[Scope, int]  # elements of each scope that one virtual thread uses
    vthreads: int
    inputs: tuple[Tensor, ...]
    output: Tensor
    cfg: Config
    #: copies of each thread's inp and wgt slices that the loads alternate between (2: the
    #: next reduction step loads while the GEMM reads this one; machine v2, one thread)
    load_copies: int = 1
    #: copies of each thread's accumulator slice that its tiles alternate between (2: a
    #: tile's GEMMs run while the drain stores the thread's previous tile; machine v2)
    acc_copies: int = 1


def _where(stage: Stage) -> str:
    return f"lower {stage.name}"


def lower_schedule(schedule: Schedule, cfg: Config) -> Lowered:
    """Schedule → loop IR with bounds, buffers and host loops (see the module docstring)."""
    if len(schedule.outputs) != 1:
        raise LoweringError("lower", "a program computes exactly one output tensor")
    out = schedule[schedule.outputs[0]]
    if out.scope != Scope.GLOBAL or out.attach is not None:
        raise LoweringError(_where(out), "the output must stay in DRAM (global scope, not attached)")
    stages = [s for s in reversed(schedule.producers_first())
              if isinstance(s.op, ComputeOp) and not s.inline]
    at_a = [s for s in stages if s.attach is not None and s.attach[0] is out]
    axes = {s.attach[1] for s in at_a if s.attach is not None}
    if len(axes) != 1:
        raise LoweringError(_where(out), "every accelerator stage must be attached (compute_at) "
                            "at one loop of the output")
    a_axis = axes.pop()
    for s in stages:
        if s is not out and s.vthread_axis is not None:
            raise LoweringError(_where(s), "the virtual-thread axis must be a loop of the output")
        if s is not out and s.scope == Scope.GLOBAL:
            raise LoweringError(_where(s), "an intermediate stage must be in a buffer scope "
                                "(set_scope or cache_read/cache_write)")
    host = out.leaf[: out.leaf.index(a_axis) + 1] if a_axis in out.leaf else []
    inner_of = {rel.outer: rel.inner for rel in out.relations if isinstance(rel, Split)}
    # a split of a host loop whose inner loop is inside the attach point may leave a tail
    # tile: the host loop is peeled into the whole tiles and the tail, each lowered alone
    ragged = {axis: split for axis, split in ragged_splits(out).items()
              if axis in host and inner_of[axis] not in host and axis is not out.vthread_axis}
    whole = {axis: Tail(0, factor) for axis, (_, factor) in ragged.items()}
    uneven = uneven_threads(out, host)
    if uneven is not None:
        whole[uneven.parent] = Tail(0, uneven.factor)
    bounds = infer_bounds(schedule, stages, whole)
    vthreads = _vthreads(out, host, bounds[out])
    pieces: list[_Allocator] = []

    def lower_tile(tails: dict[IterVar, Tail]) -> Stmt:
        info = bounds if tails == whole else infer_bounds(schedule, stages, tails)
        tile = _tile_region(out, info[out], host)
        buffers = _Allocator(cfg)
        acc = buffers.add("acc", Scope.ACC, tile.shape[:-2])
        pieces.append(buffers)
        stmt = _body_at_a(schedule, out, at_a, info, acc, tile, buffers)
        buffers.check(vthreads)
        return stmt

    body = HostLoops(out, bounds[out], ragged, lower_tile, uneven).nest(host, whole)
    inputs = tuple(t for t in schedule.stages if isinstance(t.op, PlaceholderOp))
    used = {scope: max(p.used[scope] for p in pieces) for scope in BUFFER_SCOPES}
    return Lowered(body, tuple(b for p in pieces for b in p.buffers), used, vthreads, inputs, out.tensor, cfg)


def _vthreads(out: Stage, host: list, info: StageBounds) -> int:
    if out.vthread_axis is None:
        return 1
    if out.vthread_axis not in host:
        raise LoweringError(_where(out), f"the virtual-thread axis {out.vthread_axis.name} must "
                            "be outside the loop where the accelerator stages are attached")
    return info.extents[out.vthread_axis.var]


def _tile_region(out: Stage, info: StageBounds, host: list) -> Region:
    inner = set(info.extents) - {a.var for a in host}
    outer, const, shape = [], [], []
    for axis in out.axis:
        parts = split_index(info.root_env[axis.var], inner)
        if parts is None:
            raise LoweringError(_where(out), f"axis {axis.name} is not affine in the loops inside "
                                "the attach point (fuse only outside it)")
        outer.append(parts.outer)
        const.append(parts.const)
        shape.append(1 + sum(abs(c) * (info.extents[v] - 1) for v, c in parts.inner.terms))
    return Region(tuple(outer), tuple(const), tuple(shape))


class _Allocator:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.buffers: list[Buffer] = []
        self.used = {scope: 0 for scope in BUFFER_SCOPES}

    def add(self, name: str, scope: Scope, shape: tuple[int, ...]) -> Buffer:
        buffer = Buffer(name, scope, self.used[scope], tuple(shape))
        self.used[scope] += buffer.elems
        self.buffers.append(buffer)
        return buffer

    def check(self, vthreads: int) -> None:
        depth = {Scope.INP: self.cfg.inp_depth, Scope.WGT: self.cfg.wgt_depth,
                 Scope.ACC: self.cfg.acc_depth}
        for scope, used in self.used.items():
            if used * vthreads > depth[scope]:
                parts = ", ".join(f"{b.name} {b.elems}" for b in self.buffers if b.scope == scope)
                raise LoweringError("check buffers", f"the schedule does not fit: the {scope} "
                                    f"buffer needs {vthreads} × {used} elements ({parts}) but holds "
                                    f"{depth[scope]}; use smaller tiles or fewer virtual threads")


def _local(parts_index: Expr, inner: set[Var], region: Region, dim: int, where: str) -> Affine:
    parts = split_index(parts_index, inner)
    if parts is None or not same(parts.outer, region.outer[dim]):
        raise LoweringError(where, "an index does not stay inside the buffered region")
    return parts.inner + Affine((), parts.const - region.const[dim])


def _linear(locals_: list[Affine], shape: tuple[int, ...]) -> Affine:
    total, stride = Affine((), 0), 1
    for local, extent in reversed(list(zip(locals_, shape))):
        total = total + local.scale(stride)
        stride *= extent
    return total


def _body_at_a(schedule: Schedule, out: Stage, at_a: list[Stage], bounds: dict[Stage, StageBounds],
               acc: Buffer, tile: Region, buffers: _Allocator) -> Stmt:
    # accumulator caches first: they run on compute, inp/wgt caches then form one load run
    caches = sorted((s for s in at_a if _copy_source(schedule, s) is not None),
                    key=lambda s: s.scope != Scope.ACC)
    computes = [s for s in at_a if s not in caches]
    reductions = [s for s in computes if isinstance(s.op, ComputeOp) and isinstance(s.op.body, Reduce)]
    for s in computes:
        if s.scope != Scope.ACC:
            raise LoweringError(_where(s), f"a computing stage must be in the acc scope, not "
                                f"'{s.scope}'")
        if bounds[s].region.shape[:-2] != tile.shape[:-2]:
            raise LoweringError(_where(s), "its region differs from the output tile; element-wise "
                                "stages are computed in place and must cover the same tiles")
    if len(reductions) > 1:
        raise LoweringError(_where(reductions[1]), "one tensorized reduction per program")
    cache_buffers = {}
    for s in caches:
        # without a reduction, an accumulator cache of the tile's shape is the tile itself:
        # the element-wise stages then update it in place
        shared = s.scope == Scope.ACC and not reductions and bounds[s].region.shape[:-2] == tile.shape[:-2]
        cache_buffers[s.tensor] = acc if shared else buffers.add(s.name, s.scope,
                                                                  bounds[s].region.shape[:-2])
    located: dict[Tensor, tuple[Buffer, Region]] = {s.tensor: (cache_buffers[s.tensor], bounds[s].region)
                                                    for s in caches}
    for s in reversed(computes):  # producers first: a stage's home follows its inputs'
        located[s.tensor] = (_home(schedule, s, located, acc), bounds[s].region)
    stmts: list[Stmt] = [_copy(schedule, s, cache_buffers[s.tensor], bounds[s]) for s in caches]
    for s in reversed(computes):  # producers first
        if s in reductions:
            stmts.append(Reset(s.name, acc))
            stmts.append(_reduction_nest(schedule, s, bounds, acc, buffers, located))
        else:
            stmts.append(_elementwise(schedule, s, bounds[s], located, out))
    stmts.append(_store(schedule, out, bounds[out], tile, acc, computes))
    return Block(tuple(stmts))


def _home(schedule: Schedule, stage: Stage, located: dict[Tensor, tuple[Buffer, Region]],
          acc: Buffer) -> Buffer:
    """The buffer a computing stage updates in place: the output's accumulator tile, unless it
    reads tiles of exactly one other accumulator buffer of the tile's shape and not the
    accumulator tile (a stage on a whole-tensor operand's copy, e.g. a residual input)."""
    op = stage.op
    if not isinstance(op, ComputeOp) or isinstance(op.body, Reduce):
        return acc
    homes = {located[r.tensor][0] for r in _reads(_redirect(schedule, stage, op.body)) if r.tensor in located}
    tiles = {b for b in homes if b.scope == Scope.ACC and b.shape == acc.shape}
    return tiles.pop() if len(tiles) == 1 and acc not in tiles else acc


def _copy_source(schedule: Schedule, stage: Stage) -> _Source | None:
    """(global tensor, offsets, steps) when ``stage`` copies it (through an inlined padding or
    row-selecting stage)."""
    op = stage.op
    if not isinstance(op, ComputeOp) or not isinstance(op.body, Read):
        return None
    read = op.body
    source = schedule.stages.get(read.tensor)
    if source is not None and source.inline:
        return _padded_source(schedule, source, read)
    if not isinstance(read.tensor.op, PlaceholderOp):
        return None
    if any(not (isinstance(i, Var) and i is a.var) for i, a in zip(read.indices, op.axis)):
        raise LoweringError(_where(stage), "a cache must copy its source element for element")
    return read.tensor, (0,) * read.tensor.ndim, (1,) * read.tensor.ndim, 0


def _padded_source(schedule: Schedule, pad: Stage, read: Read) -> _Source:
    """Recognise ``select(lo <= i < hi, data[i - lo], v)`` (padding of ``data`` with ``v``: 0, or
    -128, which LOAD INP's ``pad_min`` writes) and ``data[step * i]`` (every step-th index of
    an axis, not padded)."""
    op = pad.op
    assert isinstance(op, ComputeOp)
    body = op.body
    inner = body.then if isinstance(body, Select) else body
    if not isinstance(inner, Read) or not isinstance(inner.tensor.op, PlaceholderOp):
        raise LoweringError(_where(pad), "an inlined stage copied by DMA must pad a placeholder")
    if isinstance(body, Select) and not (isinstance(body.otherwise, Const) and body.otherwise.value in PAD_VALUES):
        raise LoweringError(_where(pad), "padding must be 0 or -128 (the DMA pads with zeros, or with -128 "
                            "by pad_min)")
    offsets, steps = [], []
    for index, axis in zip(inner.indices, op.axis):
        parts = split_index(index, {axis.var})
        step = None if parts is None else parts.inner.coeff(axis.var)
        if parts is None or parts.outer is not None or step is None or step < 1 \
                or (step > 1 and parts.const != 0):
            raise LoweringError(_where(pad), "an inlined stage copied by DMA must index its source "
                                "as i - offset or step * i")
        offsets.append(-parts.const)
        steps.append(step)
    conditions = body.conditions if isinstance(body, Select) else ()
    _check_pad_conditions(pad, conditions, op, offsets, inner.tensor.shape)
    value = int(body.otherwise.value) if isinstance(body, Select) and isinstance(body.otherwise, Const) else 0
    return inner.tensor, tuple(offsets), tuple(steps), value


def _check_pad_conditions(pad: Stage, conditions: tuple[Cmp, ...], op: ComputeOp,
                          offsets: list[int], shape: tuple[int, ...]) -> None:
    expected = set()
    for axis, offset, size in zip(op.axis, offsets, shape):
        if offset:
            expected |= {(CmpOp.LE, offset, axis.var), (CmpOp.LT, axis.var, offset + size)}
    found = set()
    for cond in conditions:
        a = cond.a.value if isinstance(cond.a, Const) else cond.a
        b = cond.b.value if isinstance(cond.b, Const) else cond.b
        found.add((cond.op, a, b))
    if found != expected:
        raise LoweringError(_where(pad), "the padding condition must be exactly "
                            "offset <= i < offset + size on each padded axis")


def _copy(schedule: Schedule, stage: Stage, buffer: Buffer, info: StageBounds) -> Copy:
    source = _copy_source(schedule, stage)
    assert source is not None
    tensor, offsets, steps, value = source
    region = info.region
    if region.shape[-2:] != tensor.shape[-2:] or steps[-2:] != (1, 1):
        raise LoweringError(_where(stage), "a cache must hold whole tiles (its last two axes)")
    starts = tuple(region.start(d) for d in range(len(region.shape) - 2))
    return Copy(stage.name, Direction.LOAD, buffer, tensor, starts, region.shape[:-2], offsets[:-2],
                pragma="dma_copy" in stage.pragmas.values(), source_step=steps[:-2], pad_value=value)


def _reduction_nest(schedule: Schedule, stage: Stage, bounds: dict[Stage, StageBounds], acc: Buffer,
                    buffers: _Allocator, located: dict[Tensor, tuple[Buffer, Region]]) -> Stmt:
    info = bounds[stage]
    op = stage.op
    assert isinstance(op, ComputeOp) and isinstance(op.body, Reduce)
    if stage.tensorize_axis is None:
        raise LoweringError(_where(stage), "a reduction runs on the GEMM core: tensorize it")
    attached = [s for s in bounds if s.attach is not None and s.attach[0] is stage]
    points = {s.attach[1] for s in attached if s.attach is not None}
    if len(points) > 1:
        raise LoweringError(_where(stage), "its caches must be attached at one loop")
    split = stage.leaf.index(points.pop()) + 1 if points else 0
    host = stage.leaf[:split]
    if any(not axis.reduce for axis in host):
        raise LoweringError(_where(stage), "the loops outside its cache attach point must be "
                            "reduction loops (move the spatial loops inside)")
    t_at = stage.leaf.index(stage.tensorize_axis)
    if t_at < split:
        raise LoweringError(_where(stage), "the tensorize axis must be inside the cache attach point")
    kernel = stage.leaf[split:t_at]
    inner = {a.var for a in stage.leaf[split:]}
    cache_buffers = {}
    for s in attached:
        cache_buffers[s.tensor] = buffers.add(s.name, s.scope, bounds[s].region.shape[:-2])
        located[s.tensor] = (cache_buffers[s.tensor], bounds[s].region)
    dst = _linear([_local(info.root_env[a.var], inner, info.region, d, _where(stage))
                   for d, a in enumerate(op.axis[:-2])], acc.shape)
    reads = []
    for read in _reads(op.body.body):
        tensor = read_of(schedule, stage, read.tensor)
        if tensor not in located:
            raise LoweringError(_where(stage), f"{tensor.name} must be read through cache_read "
                                "into the inp or wgt scope")
        buffer, region = located[tensor]
        indices = [substitute(i, info.root_env) for i in read.indices]
        local = _linear([_local(i, inner, region, d, _where(stage)) for d, i in
                         enumerate(indices[:-2])], buffer.shape)
        reads.append((buffer, local, Read(tensor, tuple(indices))))
    body: Stmt = Reduction(stage.name, tuple((a.var, info.extents[a.var]) for a in kernel), (acc, dst),
                           tuple(reads), substitute(op.body.body, info.root_env),
                           tuple((a.var, info.extents[a.var]) for a in stage.leaf[t_at:]),
                           tuple(info.root_env[a.var] for a in op.axis[-2:]),
                           frozenset(a.var for a in stage.unrolled))
    copies = [_copy(schedule, s, cache_buffers[s.tensor], bounds[s]) for s in attached]
    body = Block((*copies, body))
    for axis in reversed(host):
        body = Loop(axis.var, info.extents[axis.var], body)
    return body


def _redirect(schedule: Schedule, stage: Stage, expr: Expr) -> Expr:
    """``expr`` reading the caches that cache_read put in front of its tensors, with the
    bodies of inlined stages substituted for their reads."""
    if isinstance(expr, Read):
        source = schedule.stages.get(expr.tensor)
        redirected = read_of(schedule, stage, expr.tensor) is not expr.tensor
        if not redirected and source is not None and source.inline and isinstance(source.op, ComputeOp):
            env = {a.var: i for a, i in zip(source.op.axis, expr.indices)}
            return _redirect(schedule, source, substitute(source.op.body, env))
        return Read(read_of(schedule, stage, expr.tensor), expr.indices)
    if isinstance(expr, BinOp):
        return BinOp(expr.op, _redirect(schedule, stage, expr.a), _redirect(schedule, stage, expr.b))
    if isinstance(expr, Cast):
        return Cast(expr.dtype, _redirect(schedule, stage, expr.value))
    return expr


def _reads(expr: Expr) -> list[Read]:
    if isinstance(expr, Read):
        return [expr]
    if isinstance(expr, BinOp):
        return _reads(expr.a) + _reads(expr.b)
    if isinstance(expr, Cast):
        return _reads(expr.value)
    return []


def _elementwise(schedule: Schedule, stage: Stage, info: StageBounds,
                 located: dict[Tensor, tuple[Buffer, Region]], out: Stage) -> Elementwise:
    op = stage.op
    assert isinstance(op, ComputeOp)
    lanes = op.axis[-2:]
    if stage.leaf[-2:] != list(lanes):
        raise LoweringError(_where(stage), "its last two axes are the ALU's lanes: do not split "
                            "or move them")
    loops = stage.leaf[:-2]
    inner = {a.var for a in stage.leaf}
    acc, region = located[stage.tensor]
    dst = _linear([_local(info.root_env[a.var], inner, region, d, _where(stage))
                   for d, a in enumerate(op.axis[:-2])], acc.shape)
    operands = {}
    for read in _reads(_redirect(schedule, stage, op.body)):
        tensor = read.tensor
        if tensor not in located or located[tensor][0].scope != Scope.ACC:
            raise LoweringError(_where(stage), f"{tensor.name} must be in the acc scope "
                                "(cache_read it into 'acc')")
        buffer, reg = located[tensor]
        indices = [substitute(i, info.root_env) for i in read.indices]
        operands[tensor] = (buffer, _linear([_local(i, inner, reg, d, _where(stage))
                                             for d, i in enumerate(indices[:-2])], buffer.shape))
    body = substitute(_redirect(schedule, stage, op.body), info.root_env)
    stored = read_of(schedule, out, stage.tensor) is stage.tensor and isinstance(out.op, ComputeOp) and any(
        t is stage.tensor for t in out.op.inputs)
    if isinstance(body, Cast) and body.dtype == "int8" and stored:
        body = body.value  # the out buffer holds the low 8 bits of the accumulator anyway
    return Elementwise(stage.name, tuple((a.var, info.extents[a.var]) for a in loops), (acc, dst),
                       body, operands, tuple(a.var for a in lanes))


def _store(schedule: Schedule, out: Stage, info: StageBounds, tile: Region, acc: Buffer,
           computes: list[Stage]) -> Copy:
    op = out.op
    assert isinstance(op, ComputeOp)
    body = op.body.value if isinstance(op.body, Cast) and op.body.dtype == "int8" else op.body
    if out.tensor.dtype != "int8" or not isinstance(body, Read):
        raise LoweringError(_where(out), "the output must be an int8 copy (cast) of an accumulator stage")
    if read_of(schedule, out, body.tensor) not in {s.tensor for s in computes}:
        raise LoweringError(_where(out), "the output must read an accumulator stage attached to it")
    if any(not (isinstance(i, Var) and i is a.var) for i, a in zip(body.indices, op.axis)):
        raise LoweringError(_where(out), "the output must copy its accumulator stage element for element")
    starts = tuple(tile.start(d) for d in range(len(tile.shape) - 2))
    return Copy(out.name, Direction.STORE, acc, out.tensor, starts, tile.shape[:-2], (0,) * len(starts),
                pragma="dma_copy" in out.pragmas.values())


"""Code generation: the final loop IR, run on the host, emits the program through ProgramBuilder.

Host loops execute here (like VTA's runtime running the host part of a schedule), so
every DMA instruction gets concrete addresses and padding; micro-op instructions are
constant per statement and their kernels are cached by the builder.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from itertools import product
from math import prod
from typing import cast

import numpy as np

from openvta.isa import Config, Format, MemoryType, Module, Uop, layouts_of
from openvta.runtime import Program, ProgramBuilder, Progress, Role, Symbol, UopKernel, UopLoop
from openvta.runtime.builder import BuildError

from .affine import evaluate
from .ir import Block, Dep, DepAction, Dma, Drain, Loop, LoweringError, Scope, Stmt, Threaded, UopInsn, UopKind, walk
from .limits import count_insns
from .lower import Lowered
from .te import Tensor, Var

__all__ = ["Ticker", "emit", "generate", "SymbolInfo"]

SymbolInfo = Mapping[Tensor, tuple[Role | str, str, np.ndarray | None]]  # role, layout, data


def generate(lowered: Lowered, symbols: SymbolInfo, *,
             progress: Progress | None = None,
             total: int | None = None) -> Program:
    """Emit ``lowered`` (after every pass) into a program; ``symbols`` gives DRAM contents.

    ``progress("codegen", done, total)`` is called about a thousand times at most, ``done``
    counting instructions as :func:`~openvta.compiler.limits.count_insns` does (``total``:
    its count, computed here when not given).
    """
    builder = ProgramBuilder(lowered.cfg)
    tensors: dict[Tensor, Symbol] = {}
    for tensor in (*lowered.inputs, lowered.output):
        role, layout, data = symbols.get(tensor, (Role.OUTPUT if tensor is lowered.output else Role.INPUT,
                                                  "", None))
        if data is None:
            tensors[tensor] = builder.tensor(tensor.name, shape=tensor.shape, dtype=tensor.dtype,
                                             layout=layout, role=role)
        else:
            if data.shape != tensor.shape:
                raise ValueError(f"{tensor.name} must have shape {tensor.shape}, not {data.shape}")
            tensors[tensor] = builder.tensor(tensor.name, data=data.astype(tensor.dtype),
                                             layout=layout, role=role)
    ticker = None if progress is None else \
        Ticker(progress, count_insns(lowered.body) if total is None else total)
    try:
        emit(builder, lowered, tensors, ticker)
        if ticker is not None:
            ticker.finish()
        return builder.finish()
    except BuildError as exc:
        raise LoweringError("codegen", str(exc)) from None


def emit(builder: ProgramBuilder, lowered: Lowered, tensors: Mapping[Tensor, Symbol],
         ticker: Ticker | None = None) -> None:
    """Emit ``lowered``'s instructions into ``builder``, each tensor at its DRAM symbol.

    The caller declares the tensors and finishes the program (several kernels can share
    one builder, with :meth:`~openvta.runtime.ProgramBuilder.barrier` between them).

    Raises
    ------
    BuildError
        from the builder (an instruction that does not encode, a region past a tensor).
    """
    if lowered.cfg.has_drain:  # machine v2: every GEMM kernel in one LOAD UOP, before the first;
        recorder = _Recorder()  # the inp and wgt slices that stay resident (:class:`_Resident`)
        _emit(cast(ProgramBuilder, recorder), lowered, tensors, ticker, _residents(lowered))
        recorder.replay(builder)  # it took the builder's calls
    else:
        _emit(builder, lowered, tensors, ticker, {})


def _residents(lowered: Lowered) -> dict[Scope, _Resident]:
    """Machine v2: the inp and wgt scopes no load run loads twice, whose slices stay in
    their buffers from one run to the next (:class:`_Resident`)."""
    depths = {Scope.INP: lowered.cfg.inp_depth, Scope.WGT: lowered.cfg.wgt_depth}
    return {scope: _Resident(depth // (lowered.vthreads * lowered.slices[scope]))
            for scope, depth in depths.items()
            if lowered.slices.get(scope) and _one_load_per_run(lowered.body, scope)}


def _emit(builder: ProgramBuilder, lowered: Lowered, tensors: Mapping[Tensor, Symbol], ticker: Ticker | None,
          resident: dict[Scope, _Resident]) -> None:
    """Emit ``lowered`` into ``builder``; with ``resident`` scopes, after a dry run of the
    host loops for the order of their loads."""
    emitter = _Emitter(builder, dict(tensors), lowered.cfg, lowered.slices)
    emitter.copies, emitter.threads = lowered.load_copies, lowered.vthreads
    emitter.acc_copies = lowered.acc_copies
    emitter.resident.update(resident)
    if emitter.resident:
        emitter.dry = True
        emitter.emit(lowered.body, {}, 0)
        emitter.dry = False
        for r in emitter.resident.values():
            r.seen.clear()
    emitter.ticker = ticker
    emitter.emit(lowered.body, {}, 0)


class _Recorder:
    """Stands in for the builder and records its calls, to replay them with the program's
    GEMM kernels loaded at once before its first GEMM (machine v2)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: self.calls.append((name, args, kwargs))

    def replay(self, builder: ProgramBuilder) -> None:
        kernels = [args[0].uops for name, args, _ in self.calls if name == "gemm"]
        preloaded = False
        for name, args, kwargs in self.calls:
            if name == "gemm" and not preloaded:  # after the tokens primed, before the resets
                builder.preload_kernels(kernels)
                preloaded = True
            getattr(builder, name)(*args, **kwargs)


def _one_load_per_run(body: Stmt, scope: Scope) -> bool:
    """Whether no load run (consecutive statements of one thread on the load module) loads
    into ``scope`` twice, the condition of :class:`_Resident`."""
    for block in walk(body):
        if not isinstance(block, Block):
            continue
        run, count = None, 0
        for s in block.stmts:
            dma = s.stmt if isinstance(s, Threaded) and isinstance(s.stmt, Dma) else None
            key = (s.thread, dma.module) if isinstance(s, Threaded) and dma is not None else None
            if key != run:
                run, count = key, 0
            if dma is not None and dma.module == Module.LOAD and dma.buffer.scope == scope:
                count += 1
                if count > 1:
                    return False
    return True


class _Resident:
    """The copies of each thread's slice of the inp or wgt buffer that its loads choose
    among on machine v2, so that what a thread loads stays resident while it is needed.

    A thread has as many copies of its slice as the buffer holds, and a load overwrites
    the copy whose contents the thread needs again last (Belady's choice: code generation
    runs the host loops once before, :meth:`record`, for the order of the loads), the next
    of the alternating copies when none is needed again (fewer distinct micro-op kernels),
    never the one its last GEMM reads.  That is safe: a load run waits for the thread's GEMM
    two runs back (one token per copy of the slices, ``load_copies``), or the last one (one
    copy).  So a thread whose tiles share their weights loads them once (a 1×1 conv2d
    whose tiles take every input channel), and one whose tiles share their input window
    (the channel tiles of one thread) loads it once, each reduction step's into a copy of
    its own.  A GEMM reads the copies its thread's last load run chose (:meth:`read`).
    """

    def __init__(self, copies: int) -> None:
        self.copies = copies
        #: per thread: what each copy holds, the loads' order (source → the indices of
        #: its loads), how many it has seen, the copy its next GEMM reads, the last one's
        self.held: dict[int, dict[int, tuple]] = {}
        self.future: dict[int, dict[tuple, list[int]]] = {}
        self.seen: dict[int, int] = {}
        self.next: dict[int, int] = {}
        self.last: dict[int, int] = {}

    def record(self, thread: int, source: tuple) -> None:
        """The dry run's: ``thread`` loads ``source`` next."""
        index = self.seen.get(thread, 0)
        self.future.setdefault(thread, {}).setdefault(source, []).append(index)
        self.seen[thread] = index + 1

    def place(self, thread: int, source: tuple, preferred: int) -> int | None:
        """The copy ``thread``'s load of ``source`` writes, or None when a copy holds it
        already (its next GEMM reads that copy); ``preferred``: the alternating copy."""
        held = self.held.setdefault(thread, {})
        now = self.seen.get(thread, 0)
        self.seen[thread] = now + 1
        for copy, what in held.items():
            if what == source:
                self.next[thread] = copy
                return None
        future = self.future.get(thread, {})

        def next_use(copy: int) -> float:
            if copy not in held:
                return math.inf
            return next((i for i in future.get(held[copy], ()) if i > now), math.inf)

        last = self.last.get(thread)
        free = [c for c in range(self.copies) if c != last or self.copies == 1]
        copy = max(free, key=lambda c: (next_use(c), c == preferred, -c))
        held[copy] = source
        self.next[thread] = copy
        return copy

    def read(self, thread: int, default: int) -> int:
        """The copy ``thread``'s GEMM reads (``default``: before any load of it)."""
        copy = self.last[thread] = self.next.get(thread, default)
        return copy


class Ticker:
    """Calls ``progress("codegen", done, total)`` about every ``total / 1000`` instructions."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress = progress
        self.total = total
        self.step = max(1, total // 1000)
        self.done = self.reported = 0
        progress("codegen", 0, total)

    def tick(self, count: int) -> None:
        self.done += count
        if self.done - self.reported >= self.step:
            self.finish()

    def finish(self) -> None:
        if self.done != self.reported:
            self.progress("codegen", self.done, self.total)
            self.reported = self.done


class _Emitter:
    ticker: Ticker | None = None

    def __init__(self, builder: ProgramBuilder, tensors: dict[Tensor, Symbol], cfg: Config,
                 slices: dict[Scope, int]) -> None:
        self.slices = slices
        self.builder = builder
        self.tensors = tensors
        self.cfg = cfg
        #: the copies of each thread's inp and wgt slices (Lowered.load_copies), which one its
        #: next load run writes and its next GEMM reads (they alternate), and the threads of
        #: the last load and GEMM (the token that follows them ends their run)
        self.copies = self.threads = 1
        #: what each epi word holds (the load that wrote it), to skip reloading a descriptor
        self.epi_words: dict[int, tuple] = {}
        #: machine v2: the copies of each thread's inp and wgt slices its loads choose among
        #: (VTA's programs stay as they were), and the dry run that orders their loads
        self.resident: dict[Scope, _Resident] = {}
        self.dry = False
        #: the copies of each thread's acc slice (Lowered.acc_copies), the one its GEMMs and
        #: its drain use (each moves on when its tile's token is pushed), and the threads of
        #: the last GEMM and store
        self.acc_copies = 1
        self.compute_acc: dict[int, int] = {}
        self.store_acc: dict[int, int] = {}
        self.last_compute = self.last_store = 0
        self.load_copy: dict[int, int] = {}
        self.gemm_copy: dict[int, int] = {}
        self.last_load = self.last_gemm = 0
        mem = layouts_of(cfg)[Format.MEM]
        self.pad_fields = {name: mem.field(name) for name in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")}

    def emit(self, stmt: Stmt, env: dict[Var, int], thread: int) -> None:
        if isinstance(stmt, Loop):
            for value in range(stmt.extent):
                env[stmt.var] = value
                self.emit(stmt.body, env, thread)
            del env[stmt.var]
        elif isinstance(stmt, Block):
            for s in stmt.stmts:
                self.emit(s, env, thread)
        elif isinstance(stmt, Threaded):
            if stmt.var is not None:
                env[stmt.var] = stmt.thread
            self.emit(stmt.stmt, env, stmt.thread)
        elif self.dry and not isinstance(stmt, Dma):
            return
        elif isinstance(stmt, Dep):
            (self.builder.dep_push if stmt.action == DepAction.PUSH else self.builder.dep_pop)(stmt.src, stmt.dst)
            if stmt.action == DepAction.PUSH:  # a load run, a GEMM, a tile or a store ends: next copy
                for (src, dst), t, copy, copies in (
                        ((Module.LOAD, Module.COMPUTE), self.last_load, self.load_copy, self.copies),
                        ((Module.COMPUTE, Module.LOAD), self.last_gemm, self.gemm_copy, self.copies),
                        ((Module.COMPUTE, Module.STORE), self.last_compute, self.compute_acc, self.acc_copies),
                        ((Module.STORE, Module.COMPUTE), self.last_store, self.store_acc, self.acc_copies)):
                    if (stmt.src, stmt.dst) == (src, dst):
                        t = t if stmt.thread is None else stmt.thread
                        copy[t] = (copy.get(t, 0) + 1) % copies
        elif isinstance(stmt, Dma):
            self._dma(stmt, env, thread)
        elif isinstance(stmt, UopInsn):
            self._uop(stmt, thread)
        else:
            raise LoweringError("codegen", f"{type(stmt).__name__} left after the passes")

    def _held(self, base: int, count: int, source: tuple) -> bool:
        """Whether epi words ``base … base + count − 1`` already hold what ``source`` loads
        (a descriptor a tile shares with the thread's previous one); if not, they will."""
        if all(self.epi_words.get(base + i) == (source, i) for i in range(count)):
            return True
        for i in range(count):
            self.epi_words[base + i] = (source, i)
        return False

    def _forget(self, base: int, count: int) -> None:
        for i in range(count):
            self.epi_words.pop(base + i, None)

    def _dma(self, stmt: Dma, env: dict[Var, int], thread: int) -> None:
        if stmt.words is not None and self.dry:
            return
        if stmt.module == Module.STORE:
            self.last_store = thread
        if stmt.words is not None:
            words = np.array(stmt.words, np.int64)
            if stmt.slice_lane is not None:
                words[:, stmt.slice_lane] += stmt.buffer.base(thread, self.slices) - stmt.buffer.offset
            base = stmt.buffer.base(thread, self.slices)
            if not self._held(base, len(words), ("words", words.tobytes())):
                self.builder.load_epi_words(base, words.astype(np.int32))
            if self.ticker is not None:
                self.ticker.tick(1)
            return
        *outer, ydim, xdim = stmt.dims
        starts = [evaluate(d.start, env) for d in stmt.dims]
        pads = []
        for dim, start, axis in ((ydim, starts[-2], "y"), (xdim, starts[-1], "x")):
            lo, hi = dim.valid
            before, after = max(0, lo - start), max(0, start + dim.extent - hi)
            for amount, field in ((before, self.pad_fields[f"{axis}_pad_0"]),
                                  (after, self.pad_fields[f"{axis}_pad_1"])):
                if amount > field.high:
                    raise LoweringError("codegen", f"{stmt.stage}: padding of {amount} exceeds the "
                                        f"DMA's {field.high}-element {field.name} field "
                                        f"({field.width} bits)")
            if before + after >= dim.extent:
                raise LoweringError("codegen", f"{stmt.stage}: a DMA region lies entirely in padding")
            pads.append((before, after))
        (y0, y1), (x0, x1) = pads
        block = ydim.extent * xdim.extent
        symbol = self.tensors[stmt.tensor]
        base = stmt.buffer.base(thread, self.slices)
        rows, cols = ydim.extent - y0 - y1, xdim.extent - x0 - x1
        offsets = [sum((starts[k] + i - d.valid[0]) * d.stride for k, (i, d) in enumerate(zip(point, outer)))
                   + (starts[-2] + y0 - ydim.valid[0]) * ydim.stride + (starts[-1] + x0 - xdim.valid[0])
                   for point in product(*(range(d.extent) for d in outer))]
        resident = self.resident.get(stmt.buffer.scope) if stmt.module == Module.LOAD else None
        if resident is not None:
            source = (base, id(symbol), tuple(offsets), rows, cols, ydim.stride, y0, y1, x0, x1, stmt.pad_value)
            if self.dry:
                resident.record(thread, source)
                return
            copy = resident.place(thread, source, self.load_copy.get(thread, 0))
            if copy is None:
                return  # what an earlier tile of the thread left in a copy of its slice
            base += self._copy_offset(copy, stmt.buffer.scope)
        elif stmt.module == Module.LOAD and self.copies > 1:
            base += self._copy_offset(self.load_copy.get(thread, 0), stmt.buffer.scope)
        if self.dry:
            return
        if stmt.module == Module.LOAD:
            self.last_load = thread
        for index, offset in enumerate(offsets):
            sram = base + index * block
            if stmt.drain is not None:
                offset_acc = self._copy_offset(self.store_acc.get(thread, 0), Scope.ACC)
                self._drain(stmt.drain, base + offset_acc, sram + offset_acc, symbol, offset, rows, cols,
                            ydim.stride, thread)
            elif stmt.store:
                self.builder.store_2d(sram, symbol, offset=offset, y_size=rows, x_size=cols,
                                      x_stride=ydim.stride)
            elif stmt.memory_type == MemoryType.EPI and self._held(
                    sram, block, ("tensor", id(symbol), offset, rows, cols, ydim.stride, y0, y1, x0, x1)):
                continue  # a descriptor's words the thread's previous tile loaded already
            else:
                self.builder.load_2d(stmt.memory_type, sram, symbol, offset=offset, y_size=rows,
                                     x_size=cols, x_stride=ydim.stride, y_pad_0=y0, y_pad_1=y1,
                                     x_pad_0=x0, x_pad_1=x1, pad_min=stmt.pad_value != 0)
        if self.ticker is not None:
            self.ticker.tick(prod(d.extent for d in outer))

    def _drain(self, drain: Drain, tile: int, sram: int, symbol: Symbol, offset: int, rows: int, cols: int,
               stride: int, thread: int) -> None:
        """Draining STOREs of ``rows × cols`` acc tiles from ``sram``, split where the tile's
        channel block (and so the descriptor) changes."""
        epi = drain.epi.base(thread, self.slices)

        def block_of(a: int) -> int:
            return ((a - tile) // drain.per_block) % drain.blocks

        residual = None
        if drain.residual is not None:
            tensor, memory_type, buffer = drain.residual
            residual = (self.tensors[tensor], memory_type, buffer.base(thread, self.slices), buffer.elems)

        def store(sram: int, offset: int, rows: int, cols: int, stride: int) -> None:
            if residual is None:
                self.builder.store_2d(sram, symbol, offset=offset, y_size=rows, x_size=cols, x_stride=stride,
                                      epi_base=epi + block_of(sram))
                return
            res_symbol, memory_type, res_base, chunk = residual
            self._forget(res_base, chunk)  # the residual's words are not a descriptor's
            # pieces of at most ``chunk`` elements, each after its residual elements' load
            # (the STORE's own geometry from the residual tensor)
            if cols > chunk:
                for r in range(rows):
                    for c in range(0, cols, chunk):
                        store(sram + r * cols + c, offset + r * stride + c, 1, min(chunk, cols - c), stride)
                return
            step = chunk // cols
            for r in range(0, rows, step):
                n = min(step, rows - r)
                self.builder.load_2d(memory_type, res_base, res_symbol, offset=offset + r * stride, y_size=n,
                                     x_size=cols, x_stride=stride)
                self.builder.store_2d(sram + r * cols, symbol, offset=offset + r * stride, y_size=n, x_size=cols,
                                      x_stride=stride, epi_base=epi + block_of(sram))

        whole = (sram - tile) // drain.per_block == (sram + rows * cols - 1 - tile) // drain.per_block
        if whole:
            store(sram, offset, rows, cols, stride)
            return
        for r in range(rows):
            a, end = sram + r * cols, sram + (r + 1) * cols
            while a < end:
                stop = min(end, tile + ((a - tile) // drain.per_block + 1) * drain.per_block)
                store(a, offset + r * stride + (a - sram - r * cols), 1, stop - a, stop - a)
                a = stop

    def _copy_offset(self, copy: int, scope: Scope) -> int:
        """Where copy ``copy`` of a thread's slice of ``scope`` starts, relative to copy 0:
        after every thread's copy 0 (a thread's slice at ``thread * slice``)."""
        return copy * self.threads * self.slices[scope]

    def _uop(self, stmt: UopInsn, thread: int) -> None:
        dst_buf, src_buf, wgt_buf = stmt.buffers
        d0 = dst_buf.base(thread, self.slices)
        s0 = 0 if stmt.reset else src_buf.base(thread, self.slices)
        w0 = 0 if stmt.reset or wgt_buf is None else wgt_buf.base(thread, self.slices)
        if stmt.kind == UopKind.GEMM and not stmt.reset:
            self.last_gemm = self.last_compute = thread
            d0 += self._copy_offset(self.compute_acc.get(thread, 0), dst_buf.scope)
            copy = self.gemm_copy.get(thread, 0)
            for buf, scope in ((src_buf, Scope.INP), (wgt_buf, Scope.WGT)):
                if buf is None:
                    continue
                resident = self.resident.get(scope)
                shift = self._copy_offset(copy if resident is None else resident.read(thread, copy), buf.scope)
                if scope == Scope.INP:
                    s0 += shift
                else:
                    w0 += shift
        uops = tuple(Uop(d0 + u.dst, s0 + u.src, w0 + u.wgt) for u in stmt.uops)
        loops = tuple(UopLoop(lp.extent, lp.dst, 0 if stmt.reset else lp.src,
                              0 if stmt.reset else lp.wgt) for lp in stmt.loops)
        kernel = UopKernel(uops, loops)
        if stmt.kind == UopKind.GEMM and stmt.reset and self.acc_copies > 1:
            for copy in range(self.acc_copies):  # every copy of the accumulator starts zeroed
                shift = self._copy_offset(copy, dst_buf.scope)
                self.builder.gemm(UopKernel(tuple(Uop(u.dst_idx + shift, u.src_idx, u.wgt_idx) for u in uops),
                                            loops), reset=True)
        elif stmt.kind == UopKind.GEMM:
            self.builder.gemm(kernel, reset=stmt.reset)
        else:
            assert stmt.alu_op is not None
            self.builder.alu(kernel, stmt.alu_op, imm=stmt.imm)
        if self.ticker is not None:
            self.ticker.tick(1)


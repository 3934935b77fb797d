"""ProgramBuilder: the equivalent of VTA's runtime (``vta_runtime.cc``).

It emits instructions in stream order, places micro-op kernels in the micro-op
buffer (caching the resident ones), lays out DRAM, and places dependency tokens:

* ``dep_pop(src, dst)`` marks a pop on the *next* instruction of ``dst``;
* ``dep_push(src, dst)`` sets the push flag on the previous instruction of ``src``,
  or emits a sync instruction (``x_size = 0``) when that one already pushes;
* ``barrier()`` orders every instruction so far, on every module, before every
  instruction after it (several kernels in one stream);
* ``finish()`` drains every token queue, orders the last load and store
  instructions before FINISH with tokens, and returns the :class:`Program`.

Tensors are laid out one after another, or at a byte address the caller chose
(``tensor(..., addr=...)``: a memory planner reusing buffers); the micro-ops and the
instructions go after the last tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from openvta.isa import (
    INSN_BYTES,
    UOP_BYTES,
    AluInsn,
    AluOp,
    Config,
    FinishInsn,
    GemmInsn,
    ISAError,
    Instruction,
    MemInsn,
    MemoryType,
    Module,
    Opcode,
    STORE_MODULE_TYPES,
    TokenQueue,
    Uop,
    encode_stream,
    encode_uops,
    with_epi_base,
    words_to_bytes,
)
from openvta.isa.config import LOOP_ITER_WIDTH

from .dram import DramAllocator
from .program import DTYPES, Program, Symbol
from .roles import ROLES, Role

__all__ = ["BuildError", "ProgramBuilder", "UopKernel", "UopLoop"]


class BuildError(ValueError):
    """A builder call that would produce an invalid or deadlocking program."""


@dataclass(frozen=True)
class UopLoop:
    """One micro-op loop: ``extent`` iterations, index strides per iteration."""

    extent: int
    dst_factor: int = 0
    src_factor: int = 0
    wgt_factor: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.extent < 1 << LOOP_ITER_WIDTH:
            raise BuildError(
                f"loop extent must be between 1 and {(1 << LOOP_ITER_WIDTH) - 1}, not {self.extent!r}"
            )
        for name in ("dst_factor", "src_factor", "wgt_factor"):
            if getattr(self, name) < 0:
                raise BuildError(f"loop {name} must be non-negative, not {getattr(self, name)!r}")


@dataclass(frozen=True)
class UopKernel:
    """Micro-ops and up to two loops around them (outer first)."""

    uops: tuple[Uop, ...]
    loops: tuple[UopLoop, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "uops", tuple(self.uops))
        object.__setattr__(self, "loops", tuple(self.loops))
        if not self.uops:
            raise BuildError("a micro-op kernel needs at least one micro-op")
        if len(self.loops) > 2:
            raise BuildError(f"a micro-op kernel has at most 2 loops, not {len(self.loops)}")

    @property
    def padded_loops(self) -> tuple[UopLoop, UopLoop]:
        loops = self.loops + (UopLoop(1),) * (2 - len(self.loops))
        return loops[0], loops[1]

    def max_index(self, name: str) -> int:
        """The largest ``dst``/``src``/``wgt`` index any iteration touches."""
        outer, inner = self.padded_loops
        base = max(getattr(u, f"{name}_idx") for u in self.uops)
        return (
            base
            + (outer.extent - 1) * getattr(outer, f"{name}_factor")
            + (inner.extent - 1) * getattr(inner, f"{name}_factor")
        )

    @property
    def executions(self) -> int:
        outer, inner = self.padded_loops
        return outer.extent * inner.extent * len(self.uops)


_SYNC: dict[Module, tuple[Opcode, MemoryType]] = {
    Module.LOAD: (Opcode.LOAD, MemoryType.INP),
    Module.COMPUTE: (Opcode.LOAD, MemoryType.UOP),
    Module.STORE: (Opcode.STORE, MemoryType.OUT),
}


class ProgramBuilder:
    """Builds a :class:`Program` instruction by instruction.

    Examples
    --------
    >>> from openvta.isa import preset
    >>> b = ProgramBuilder(preset("tiny"))
    >>> prog = b.finish()
    >>> [insn.opcode.name for insn in prog.instructions()]
    ['FINISH']
    """

    def __init__(self, cfg: Config) -> None:
        if not isinstance(cfg, Config):
            raise TypeError(f"cfg must be a Config, not {type(cfg).__name__}")
        self.cfg = cfg
        self.insns: list[Instruction] = []
        self.symbols: dict[str, Symbol] = {}
        self._alloc = DramAllocator(cfg)
        self._data: list[tuple[int, bytes]] = []
        self._last: dict[Module, int] = {}
        self._pending: dict[Module, set[TokenQueue]] = {m: set() for m in Module}
        self._tokens = {q: 0 for q in TokenQueue}
        self._uop_dram: dict[tuple[Uop, ...], int] = {}
        self._uop_segment: list[Uop] = []
        self._uop_resident: dict[tuple[Uop, ...], int] = {}
        self._uop_next = 0
        self._uop_fixups: list[tuple[int, int]] = []
        self._epi_dram: dict[bytes, int] = {}
        self._epi_segment: list[np.ndarray] = []
        self._epi_words = 0
        self._epi_fixups: list[tuple[int, int]] = []
        self._placed_end = 0
        self._finished = False

    # -- DRAM tensors --------------------------------------------------------------
    def tensor(
        self,
        name: str,
        *,
        data: np.ndarray | None = None,
        shape: tuple[int, ...] | None = None,
        dtype: str | None = None,
        layout: str = "",
        role: Role | str = Role.SCRATCH,
        addr: int | None = None,
    ) -> Symbol:
        """Allocate a named DRAM tensor, from ``data`` or zero-filled of ``shape``/``dtype``.

        ``addr`` places it at that byte address (a multiple of the configuration's DRAM
        alignment) instead of after the previous tensor.  Placed tensors may overlap: the
        caller says which tensors share memory (a planner reusing buffers by liveness);
        their data is written in the order they are declared.

        Examples
        --------
        >>> from openvta.isa import preset
        >>> b = ProgramBuilder(preset("tiny"))
        >>> b.tensor("x", shape=(64,), addr=32).addr, b.tensor("y", shape=(4,)).addr
        (32, 96)
        """
        self._check_open()
        if name.startswith("__"):
            raise BuildError(f"tensor names starting with '__' are reserved, not {name!r}")
        if name in self.symbols:
            raise BuildError(f"a DRAM segment named {name!r} already exists")
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        role = Role(role)
        if data is not None:
            array = np.asarray(data)
            if shape is not None and tuple(shape) != array.shape:
                raise ValueError(f"tensor {name!r} has data of shape {array.shape}, not {tuple(shape)}")
            shape = array.shape
            dtype = array.dtype.name
        if data is not None and dtype is not None and dtype != np.asarray(data).dtype.name:
            raise ValueError(f"tensor {name!r} has data of dtype {np.asarray(data).dtype.name}, not {dtype}")
        dtype = np.asarray(data).dtype.name if data is not None else (dtype or "int8")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
        if shape is None:
            raise ValueError(f"tensor {name!r} needs data or a shape")
        symbol = Symbol(0, tuple(int(d) for d in shape), dtype, layout, role)
        addr = self._allocate(name, symbol.nbytes, addr)
        symbol = Symbol(addr, symbol.shape, dtype, layout, role)
        self.symbols[name] = symbol
        if data is not None:
            le = np.asarray(data).astype(np.dtype(DTYPES[dtype]).newbyteorder("<"))
            self._data.append((addr, le.tobytes()))
        return symbol

    def _allocate(self, name: str, nbytes: int, addr: int | None) -> int:
        if addr is None:
            self._reserve_placed()
            try:
                return self._alloc.alloc(nbytes, name)
            except ValueError as exc:
                raise BuildError(str(exc)) from None
        align = self._alloc.align
        if isinstance(addr, bool) or not isinstance(addr, (int, np.integer)) or addr < 0 or addr % align:
            raise BuildError(f"tensor {name!r} addr must be a non-negative multiple of {align} bytes "
                             f"(the DRAM alignment), not {addr!r}")
        self._placed_end = max(self._placed_end, int(addr) + nbytes)
        return int(addr)

    def _reserve_placed(self) -> None:
        """Let the bump allocator continue after every tensor placed at a chosen address."""
        gap = self._placed_end - self._alloc.size
        if gap > 0:
            self._alloc.alloc(gap, f"__placed{len(self._alloc.segments)}__", align=1)

    def elem_addr(self, symbol: Symbol, memory_type: MemoryType, offset: int = 0) -> int:
        """``symbol``'s DRAM address in elements of ``memory_type``, plus ``offset``."""
        elem = self.cfg.elem_bytes(memory_type)
        if symbol.addr % elem:
            raise BuildError(
                f"tensor at byte {symbol.addr} is not aligned to {memory_type.name} elements "
                f"({elem} bytes)"
            )
        return symbol.addr // elem + offset

    # -- memory instructions -----------------------------------------------------
    def load_2d(
        self,
        memory_type: MemoryType,
        sram_base: int,
        src: Symbol,
        *,
        offset: int = 0,
        y_size: int,
        x_size: int,
        x_stride: int | None = None,
        y_pad_0: int = 0,
        y_pad_1: int = 0,
        x_pad_0: int = 0,
        x_pad_1: int = 0,
        pad_min: bool = False,
    ) -> None:
        """Load ``y_size`` rows of ``x_size`` elements from ``src`` (element ``offset``) to a buffer.

        Pads add zero rows before/after and zero elements before/after each row; with
        ``pad_min`` (INP only) the padding elements hold -128, the code of 0.0 at zero point
        -128, instead of 0.
        """
        memory_type = MemoryType(memory_type)
        if memory_type in STORE_MODULE_TYPES:
            self._check_drain(f"load_2d of {memory_type.name}")
        if memory_type in (MemoryType.UOP, MemoryType.OUT):
            raise BuildError(
                f"load_2d cannot load {memory_type.name}: micro-ops are placed by gemm()/alu(), "
                "and the out buffer is written by compute"
            )
        if pad_min and memory_type != MemoryType.INP:
            raise BuildError(f"load_2d of {memory_type.name} cannot pad with -128 (pad_min): only INP can")
        x_stride = x_size if x_stride is None else x_stride
        rows = y_pad_0 + y_size + y_pad_1
        cols = x_pad_0 + x_size + x_pad_1
        self._check_sram(memory_type, sram_base, rows * cols, "load_2d")
        self._check_dram(src, memory_type, offset, y_size, x_size, x_stride, "load_2d")
        self._emit(
            MemInsn(
                cfg=self.cfg,
                opcode=Opcode.LOAD,
                memory_type=memory_type,
                sram_base=sram_base,
                dram_base=self.elem_addr(src, memory_type, offset),
                y_size=y_size,
                x_size=x_size,
                x_stride=x_stride,
                y_pad_0=y_pad_0,
                y_pad_1=y_pad_1,
                x_pad_0=x_pad_0,
                x_pad_1=x_pad_1,
                pad_min=int(pad_min),
            )
        )

    def store_2d(
        self,
        sram_base: int,
        dst: Symbol,
        *,
        offset: int = 0,
        y_size: int,
        x_size: int,
        x_stride: int | None = None,
        epi_base: int | None = None,
    ) -> None:
        """Store ``y_size × x_size`` out tiles from ``sram_base`` to ``dst`` (element ``offset``).

        With ``epi_base`` (machine v2), drain accumulator tiles instead: a STORE ACC that runs
        the drain unit's descriptor at epi word ``epi_base`` on each tile and zeroes it
        (docs/ISA.md §9).
        """
        x_stride = x_size if x_stride is None else x_stride
        drains = epi_base is not None
        if drains:
            self._check_drain("store_2d with epi_base")
            self._check_sram(MemoryType.EPI, int(epi_base or 0), 1, "store_2d descriptor")
        self._check_sram(MemoryType.ACC if drains else MemoryType.OUT, sram_base, y_size * x_size, "store_2d")
        self._check_dram(dst, MemoryType.OUT, offset, y_size, x_size, x_stride, "store_2d")
        insn = MemInsn(
            cfg=self.cfg,
            opcode=Opcode.STORE,
            memory_type=MemoryType.ACC if drains else MemoryType.OUT,
            sram_base=sram_base,
            dram_base=self.elem_addr(dst, MemoryType.OUT, offset),
            y_size=y_size,
            x_size=x_size,
            x_stride=x_stride,
        )
        self._emit(with_epi_base(insn, int(epi_base)) if epi_base is not None else insn)

    def load_epi_words(self, sram_base: int, words: np.ndarray) -> None:
        """Load constant epi words (int32, ``(count, BATCH·BLOCK_OUT)``: descriptor headers,
        immediates broadcast over the lanes) into the epi buffer at ``sram_base``: a LOAD EPI
        from a segment of DRAM the builder lays out itself, like the micro-ops."""
        self._check_drain("load_epi_words")
        lanes = self.cfg.BATCH * self.cfg.BLOCK_OUT
        array = np.ascontiguousarray(np.asarray(words, dtype=np.int32).reshape(-1, lanes))
        count = len(array)
        self._check_sram(MemoryType.EPI, sram_base, count, "load_epi_words")
        key = array.tobytes()
        if key not in self._epi_dram:
            self._epi_dram[key] = self._epi_words
            self._epi_segment.append(array)
            self._epi_words += count
        self._epi_fixups.append((len(self.insns), self._epi_dram[key]))
        self._emit(MemInsn(cfg=self.cfg, opcode=Opcode.LOAD, memory_type=MemoryType.EPI,
                           sram_base=sram_base, y_size=1, x_size=count, x_stride=count))

    def _check_drain(self, what: str) -> None:
        if not self.cfg.has_drain:
            raise BuildError(f"{what} needs a drain unit (machine v2: DRAIN_STAGES > 0), which "
                             f"configuration {self.cfg.name!r} does not have")

    def _check_sram(self, memory_type: MemoryType, base: int, count: int, what: str) -> None:
        depth = self.cfg.buffer_depth(memory_type)
        if base < 0 or base + count > depth:
            raise BuildError(
                f"{what} of {count} {memory_type.name} elements at sram_base {base} runs past "
                f"the buffer ({depth} elements)"
            )

    def _check_dram(
        self, symbol: Symbol, memory_type: MemoryType, offset: int,
        y_size: int, x_size: int, x_stride: int, what: str,
    ) -> None:
        if y_size < 0 or x_size < 0 or x_stride < x_size:
            raise BuildError(
                f"{what} needs non-negative sizes and x_stride >= x_size, not "
                f"y_size={y_size} x_size={x_size} x_stride={x_stride}"
            )
        if x_size and y_size:
            last = offset + (y_size - 1) * x_stride + x_size
            elems = symbol.nbytes // self.cfg.elem_bytes(memory_type)
            if offset < 0 or last > elems:
                verb = "writes" if what == "store_2d" else "reads"
                raise BuildError(
                    f"{what} {verb} {memory_type.name} elements {offset}..{last - 1} of a tensor "
                    f"of {elems} elements"
                )

    # -- compute instructions ----------------------------------------------------
    def gemm(self, kernel: UopKernel, *, reset: bool = False) -> None:
        """Run ``kernel`` on the GEMM core (``reset``: zero the destination tiles)."""
        self._check_kernel(kernel, ("dst", self.cfg.acc_depth), ("src", self.cfg.inp_depth),
                           ("wgt", self.cfg.wgt_depth))
        bgn = self._place_kernel(kernel.uops)
        outer, inner = kernel.padded_loops
        self._emit(
            GemmInsn(
                cfg=self.cfg,
                reset_reg=reset,
                uop_bgn=bgn,
                uop_end=bgn + len(kernel.uops),
                iter_out=outer.extent,
                iter_in=inner.extent,
                dst_factor_out=outer.dst_factor,
                dst_factor_in=inner.dst_factor,
                src_factor_out=outer.src_factor,
                src_factor_in=inner.src_factor,
                wgt_factor_out=outer.wgt_factor,
                wgt_factor_in=inner.wgt_factor,
            )
        )

    def alu(self, kernel: UopKernel, op: AluOp, *, imm: int | None = None) -> None:
        """Run ``kernel`` on the ALU: ``acc[dst] = op(acc[dst], imm if given else acc[src])``."""
        op = AluOp(op)
        self._check_kernel(kernel, ("dst", self.cfg.acc_depth), ("src", self.cfg.acc_depth))
        if any(loop.wgt_factor for loop in kernel.loops):
            raise BuildError("an ALU kernel has no weight index: wgt_factor must be 0")
        bgn = self._place_kernel(kernel.uops)
        outer, inner = kernel.padded_loops
        self._emit(
            AluInsn(
                cfg=self.cfg,
                uop_bgn=bgn,
                uop_end=bgn + len(kernel.uops),
                iter_out=outer.extent,
                iter_in=inner.extent,
                dst_factor_out=outer.dst_factor,
                dst_factor_in=inner.dst_factor,
                src_factor_out=outer.src_factor,
                src_factor_in=inner.src_factor,
                alu_opcode=op,
                use_imm=imm is not None,
                imm=0 if imm is None else imm,
            )
        )

    def _check_kernel(self, kernel: UopKernel, *limits: tuple[str, int]) -> None:
        for name, depth in limits:
            top = kernel.max_index(name)
            if top >= depth:
                raise BuildError(
                    f"micro-op kernel reaches {name} index {top}, past the buffer "
                    f"({depth} elements)"
                )

    def preload_kernels(self, kernels: Sequence[tuple[Uop, ...]]) -> None:
        """Make the micro-op kernels ``kernels`` resident with one LOAD UOP, as many of them
        (in order, those not resident yet) as fit the micro-op buffer's free entries.

        A compiler that knows a program's kernels loads them at once instead of one LOAD
        UOP before each kernel's first run (each a DRAM round trip on the compute module).
        """
        fresh = [k for k in dict.fromkeys(kernels) if k not in self._uop_resident]
        room = self.cfg.uop_depth - self._uop_next
        chosen: list[tuple[Uop, ...]] = []
        for kernel in fresh:
            if len(kernel) > room:
                break
            chosen.append(kernel)
            room -= len(kernel)
        if not chosen:
            return
        self._load_uops(self._uop_next, len(self._uop_segment), sum(len(k) for k in chosen))
        for kernel in chosen:
            self._uop_dram.setdefault(kernel, len(self._uop_segment))
            self._uop_segment.extend(kernel)
            self._uop_resident[kernel] = self._uop_next
            self._uop_next += len(kernel)

    def _load_uops(self, base: int, offset: int, count: int) -> None:
        """A LOAD UOP of ``count`` micro-ops from ``offset`` in the micro-op segment to ``base``."""
        self._uop_fixups.append((len(self.insns), offset))
        self._emit(MemInsn(cfg=self.cfg, opcode=Opcode.LOAD, memory_type=MemoryType.UOP,
                           sram_base=base, y_size=1, x_size=count, x_stride=count))

    def _place_kernel(self, uops: tuple[Uop, ...]) -> int:
        """Make ``uops`` resident in the micro-op buffer; return their base index."""
        if uops in self._uop_resident:
            return self._uop_resident[uops]
        count, depth = len(uops), self.cfg.uop_depth
        if count > depth:
            raise BuildError(
                f"micro-op kernel of {count} micro-ops does not fit the micro-op buffer "
                f"({depth} entries)"
            )
        if self._uop_next + count > depth:
            # Compute runs in order, so overwriting earlier kernels is safe.
            self._uop_resident.clear()
            self._uop_next = 0
        if uops not in self._uop_dram:
            self._uop_dram[uops] = len(self._uop_segment)
            self._uop_segment.extend(uops)
        base = self._uop_next
        self._load_uops(base, self._uop_dram[uops], count)
        self._uop_resident[uops] = base
        self._uop_next += count
        return base

    # -- dependency tokens -------------------------------------------------------
    def dep_pop(self, src: Module, dst: Module) -> None:
        """``dst`` waits for a token from ``src`` before its next instruction."""
        self._check_open()
        queue = TokenQueue.between(Module(src), Module(dst))
        if queue in self._pending[queue.consumer]:
            self._commit_pops(queue.consumer)
        self._pending[queue.consumer].add(queue)
        self._tokens[queue] -= 1

    def dep_push(self, src: Module, dst: Module) -> None:
        """``src`` sends a token to ``dst`` once its previous instruction is done."""
        self._check_open()
        queue = TokenQueue.between(Module(src), Module(dst))
        module = queue.producer
        flag = "push_next_dep" if queue.consumer > module else "push_prev_dep"
        self._commit_pops(module)
        index = self._last.get(module)
        if index is not None and not getattr(self.insns[index], flag):
            self.insns[index] = self.insns[index].replace(**{flag: True})
        else:
            self._emit(self._sync(module).replace(**{flag: True}))
        self._tokens[queue] += 1

    def _commit_pops(self, module: Module) -> None:
        if self._pending[module]:
            self._emit(self._sync(module))

    def _sync(self, module: Module) -> MemInsn:
        opcode, memory_type = _SYNC[module]
        return MemInsn(cfg=self.cfg, opcode=opcode, memory_type=memory_type)

    def _emit(self, insn: Instruction) -> None:
        self._check_open()
        try:
            insn.encode()
        except ISAError as exc:
            raise BuildError(f"{insn.opcode.name} cannot be encoded: {exc}") from None
        module = insn.module
        for queue in self._pending[module]:
            flag = "pop_prev_dep" if queue.producer < module else "pop_next_dep"
            insn = insn.replace(**{flag: True})
        self._pending[module] = set()
        self._last[module] = len(self.insns)
        self.insns.append(insn)

    def _check_open(self) -> None:
        if self._finished:
            raise BuildError("the program is finished; start a new ProgramBuilder")

    @property
    def tokens(self) -> dict[TokenQueue, int]:
        """Tokens each queue will hold after the instructions so far (pushes − pops)."""
        return dict(self._tokens)

    def barrier(self) -> None:
        """Order every instruction emitted so far before every instruction emitted after.

        Load and store each send compute a token, compute waits for both, then sends load
        and store a token each, which they wait for before their next instruction: the
        next load comes after the last store (read after write through DRAM), the next
        store after the last load and compute (write after read), whatever the modules.

        Raises
        ------
        BuildError
            if a token queue holds tokens (they would be popped in place of the barrier's).
        """
        self._check_open()
        held = [f"{queue.label} ({count:+d})" for queue, count in self._tokens.items() if count]
        if held:
            raise BuildError(f"a barrier needs every token queue empty, not {', '.join(held)}")
        for module in (Module.LOAD, Module.STORE):
            self.dep_push(module, Module.COMPUTE)
            self.dep_pop(module, Module.COMPUTE)
        for module in (Module.LOAD, Module.STORE):
            self.dep_push(Module.COMPUTE, module)
            self.dep_pop(Module.COMPUTE, module)

    # -- finish ------------------------------------------------------------------
    def finish(self) -> Program:
        """Drain the token queues, append FINISH, lay out DRAM and return the program."""
        self._check_open()
        self._drain()
        self._emit(FinishInsn(cfg=self.cfg))
        self._finished = True
        return self._layout()

    def _drain(self) -> None:
        for queue, count in self._tokens.items():
            if count < 0:
                raise BuildError(
                    f"token queue {queue.label} is popped {-count} more times than it is "
                    "pushed: the program would deadlock"
                )
        for module, back in ((Module.LOAD, TokenQueue.COMPUTE_TO_LOAD),
                             (Module.STORE, TokenQueue.COMPUTE_TO_STORE)):
            for _ in range(self._tokens[back]):
                self.dep_pop(Module.COMPUTE, module)
            if module in self._last or self._pending[module]:
                self.dep_push(module, Module.COMPUTE)
        for queue in (TokenQueue.LOAD_TO_COMPUTE, TokenQueue.STORE_TO_COMPUTE):
            for _ in range(self._tokens[queue]):
                self.dep_pop(queue.producer, Module.COMPUTE)
        self._commit_pops(Module.COMPUTE)

    def _layout(self) -> Program:
        self._reserve_placed()
        uop_addr = self._alloc.alloc(len(self._uop_segment) * UOP_BYTES, "__uops__")
        insn_addr = self._alloc.alloc(len(self.insns) * INSN_BYTES, "__insns__",
                                      align=max(INSN_BYTES, self._alloc.align))
        for index, offset in self._uop_fixups:
            self.insns[index] = self.insns[index].replace(dram_base=uop_addr // UOP_BYTES + offset)
        epi_bytes = self.cfg.elem_bytes(MemoryType.EPI)
        epi_addr = self._alloc.alloc(self._epi_words * epi_bytes, "__epi__") if self._epi_words else 0
        for index, offset in self._epi_fixups:
            self.insns[index] = self.insns[index].replace(dram_base=epi_addr // epi_bytes + offset)
        dram = np.zeros(self._alloc.size, dtype=np.uint8)
        for addr, blob in self._data:
            dram[addr : addr + len(blob)] = np.frombuffer(blob, dtype=np.uint8)
        if self._epi_segment:
            epi = np.concatenate(self._epi_segment).astype("<i4")
            dram[epi_addr : epi_addr + epi.nbytes] = epi.view(np.uint8).reshape(-1)
        if self._uop_segment:
            uops = encode_uops(self._uop_segment, self.cfg).astype("<u4")
            dram[uop_addr : uop_addr + uops.nbytes] = uops.view(np.uint8)
        image = words_to_bytes(encode_stream(self.insns, self.cfg))
        dram[insn_addr : insn_addr + len(image)] = image
        return Program(self.cfg, dram, insn_addr, len(self.insns), dict(self.symbols))

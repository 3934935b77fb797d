"""Hypothesis strategies for random legal programs.

A generated program is a random sequence of LOAD (INP, WGT, ACC, ACC_8BIT), GEMM,
ALU and STORE instructions over random DRAM data, with every field drawn within the
configuration's buffers.  Whenever consecutive instructions run on different modules
a token chain orders them (load→compute→store and back), so the program is race-free
and its token order agrees with the stream order: the naive reference model
(``tests/reference.py``), which runs in stream order, is then its exact meaning.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from openvta.isa import AluOp, Config, MemoryType, Module, Uop
from openvta.runtime import Program, ProgramBuilder, UopKernel, UopLoop

_OPS = ("load_inp", "load_wgt", "load_acc", "load_acc8", "gemm", "alu", "store")
_MODULE = {"load_inp": Module.LOAD, "load_wgt": Module.LOAD, "store": Module.STORE}
_TENSOR_ELEMS = 24


def _chain(b: ProgramBuilder, src: Module, dst: Module) -> None:
    """Order everything ``src`` did before everything ``dst`` does next."""
    path = [src, Module.COMPUTE, dst] if Module.COMPUTE not in (src, dst) else [src, dst]
    for a, c in zip(path, path[1:]):
        b.dep_push(a, c)
        b.dep_pop(a, c)


@st.composite
def loads(draw: st.DrawFn, cfg: Config, memory_type: MemoryType) -> dict:
    depth = cfg.buffer_depth(memory_type)
    y_size = draw(st.integers(1, 3))
    x_size = draw(st.integers(1, 4))
    x_stride = x_size + draw(st.integers(0, 2))
    pads = draw(st.lists(st.sampled_from([0, 0, 1, 2, 15]), min_size=4, max_size=4))
    footprint = (pads[0] + y_size + pads[1]) * (pads[2] + x_size + pads[3])
    if footprint > depth:
        pads = [0, 0, 0, 0]
        footprint = y_size * x_size
    sram = draw(st.integers(0, depth - footprint))
    last = (y_size - 1) * x_stride + x_size
    offset = draw(st.integers(0, _TENSOR_ELEMS - last))
    extra = {"pad_min": draw(st.booleans())} if memory_type == MemoryType.INP else {}
    return dict(sram_base=sram, offset=offset, y_size=y_size, x_size=x_size, x_stride=x_stride,
                y_pad_0=pads[0], y_pad_1=pads[1], x_pad_0=pads[2], x_pad_1=pads[3], **extra)


@st.composite
def kernels(draw: st.DrawFn, cfg: Config, alu: bool) -> UopKernel:
    """A kernel of 1-3 micro-ops in 0-2 loops, every index inside its buffer."""
    loops = []
    for _ in range(draw(st.integers(0, 2))):
        loops.append(UopLoop(draw(st.integers(1, 3)), dst_factor=draw(st.integers(0, 3)),
                             src_factor=draw(st.integers(0, 3)),
                             wgt_factor=0 if alu else draw(st.integers(0, 3))))
    spans = {name: sum((lp.extent - 1) * getattr(lp, f"{name}_factor") for lp in loops)
             for name in ("dst", "src", "wgt")}
    src_depth = cfg.acc_depth if alu else cfg.inp_depth
    limit = {"dst": cfg.acc_depth, "src": src_depth, "wgt": cfg.wgt_depth}
    # keep indices low so that micro-ops often hit the same tiles (no-hazard rule)
    uops = [Uop(*(draw(st.integers(0, min(6, limit[n] - 1 - spans[n]))) if n != "wgt" or not alu
                  else 0 for n in ("dst", "src", "wgt")))
            for _ in range(draw(st.integers(1, 3)))]
    return UopKernel(tuple(uops), tuple(loops))


@st.composite
def random_programs(draw: st.DrawFn, cfg: Config, max_ops: int = 10) -> Program:
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    b = ProgramBuilder(cfg)
    bi, bo, bt = cfg.BLOCK_IN, cfg.BLOCK_OUT, cfg.BATCH
    tensors = {
        MemoryType.INP: b.tensor("inp", data=rng.integers(-128, 128, (_TENSOR_ELEMS, bt, bi), dtype=np.int8)),
        MemoryType.WGT: b.tensor("wgt", data=rng.integers(-128, 128, (_TENSOR_ELEMS, bo, bi), dtype=np.int8)),
        MemoryType.ACC: b.tensor("acc", data=rng.integers(-(2**31), 2**31, (_TENSOR_ELEMS, bt, bo), dtype=np.int32)),
        MemoryType.ACC_8BIT: b.tensor("acc8", data=rng.integers(-128, 128, (_TENSOR_ELEMS, bt, bo), dtype=np.int8)),
    }
    out = b.tensor("out", shape=(_TENSOR_ELEMS, bt, bo), dtype="int8", role="output")
    previous: Module | None = None
    for op in draw(st.lists(st.sampled_from(_OPS), min_size=1, max_size=max_ops)):
        module = _MODULE.get(op, Module.COMPUTE)
        if previous is not None and previous != module:
            _chain(b, previous, module)
        previous = module
        if op.startswith("load"):
            mt = {"load_inp": MemoryType.INP, "load_wgt": MemoryType.WGT,
                  "load_acc": MemoryType.ACC, "load_acc8": MemoryType.ACC_8BIT}[op]
            args = draw(loads(cfg, mt))
            b.load_2d(mt, args.pop("sram_base"), tensors[mt], **args)
        elif op == "gemm":
            b.gemm(draw(kernels(cfg, alu=False)), reset=draw(st.booleans()))
        elif op == "alu":
            kernel = draw(kernels(cfg, alu=True))
            alu_op = draw(st.sampled_from(list(AluOp)))
            imm_range = (-40, 40) if alu_op in (AluOp.SHR, AluOp.MUL) else (-(2**15), 2**15 - 1)
            imm = draw(st.one_of(st.none(), st.integers(*imm_range)))
            b.alu(kernel, alu_op, imm=imm)
        else:
            y_size, x_size = draw(st.integers(1, 3)), draw(st.integers(1, 4))
            x_stride = x_size + draw(st.integers(0, 2))
            sram = draw(st.integers(0, min(8, cfg.acc_depth - y_size * x_size)))
            offset = draw(st.integers(0, _TENSOR_ELEMS - (y_size - 1) * x_stride - x_size))
            b.store_2d(sram, out, offset=offset, y_size=y_size, x_size=x_size, x_stride=x_stride)
    return b.finish()

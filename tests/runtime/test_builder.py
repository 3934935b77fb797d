"""ProgramBuilder: tensors, memory instructions, micro-op kernels and the finished layout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from openvta.isa import (
    INSN_BYTES,
    UOP_BYTES,
    AluOp,
    Config,
    ISAError,
    MemInsn,
    MemoryType,
    Module,
    Opcode,
    Uop,
    decode_uops,
    disassemble,
    format_insn,
)
from openvta.runtime import (
    BuildError,
    Device,
    Program,
    ProgramBuilder,
    Symbol,
    UopKernel,
    UopLoop,
)

L, C, S = Module.LOAD, Module.COMPUTE, Module.STORE
K0 = UopKernel((Uop(0, 0, 0),))


def uop_loads(program: Program) -> list[MemInsn]:
    return [i for i in program.instructions()
            if isinstance(i, MemInsn) and i.memory_type == MemoryType.UOP and not i.is_sync]


def uops_in_dram(program: Program, insn: MemInsn) -> list[Uop]:
    start = insn.dram_base * UOP_BYTES
    raw = np.ascontiguousarray(program.dram[start : start + insn.x_size * UOP_BYTES])
    table = decode_uops(raw.view("<u4"), program.config)
    return [Uop(int(d), int(s), int(w))
            for d, s, w in zip(table["dst_idx"], table["src_idx"], table["wgt_idx"])]


# -- construction and tensors --------------------------------------------------------------


def test_builder_needs_a_config() -> None:
    with pytest.raises(TypeError, match=r"^cfg must be a Config, not str$"):
        ProgramBuilder("tiny")


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint32"])
def test_tensor_data_lands_in_the_image(cfg: Config, dtype: str) -> None:
    info = np.iinfo(dtype)
    data = np.linspace(info.min, info.max, 15, dtype=np.float64).astype(dtype).reshape(3, 5)
    b = ProgramBuilder(cfg)
    first = b.tensor("first", shape=(3,), dtype="int8")
    sym = b.tensor("t", data=data, role="input", layout="RC")
    assert first.addr == 0
    assert sym == Symbol(cfg.max_elem_bytes, (3, 5), dtype, "RC", "input")
    assert b.symbols == {"first": first, "t": sym}
    program = b.finish()
    assert program.symbols == {"first": first, "t": sym}
    got = program.read("t")
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, data)
    assert bytes(program.dram[sym.addr : sym.addr + sym.nbytes]) == data.astype(
        np.dtype(dtype).newbyteorder("<")).tobytes()
    assert not program.read("first").any()


def test_tensors_are_aligned(cfg: Config) -> None:
    b = ProgramBuilder(cfg)
    syms = [b.tensor(f"t{i}", shape=(n,), dtype="int8") for i, n in enumerate([1, 0, 17, 3])]
    assert [s.addr % cfg.max_elem_bytes for s in syms] == [0, 0, 0, 0]
    assert [s.addr for s in syms] == sorted(s.addr for s in syms)
    assert syms[3].addr == syms[2].addr + -(-17 // cfg.max_elem_bytes) * cfg.max_elem_bytes


def test_tensor_of_a_shape_defaults_to_int8_scratch(tiny: Config) -> None:
    sym = ProgramBuilder(tiny).tensor("z", shape=(2, 3))
    assert sym == Symbol(0, (2, 3), "int8", "", "scratch")


@pytest.mark.parametrize("kwargs, error, message", [
    ({"data": np.zeros(3)}, ValueError,
     r"^dtype must be one of int8, uint8, int32, uint32, not 'float64'$"),
    ({"data": np.zeros(3, dtype=np.int16)}, ValueError,
     r"^dtype must be one of int8, uint8, int32, uint32, not 'int16'$"),
    ({"shape": (3,), "dtype": "float32"}, ValueError,
     r"^dtype must be one of int8, uint8, int32, uint32, not 'float32'$"),
    ({"shape": (3,), "role": "weights"}, ValueError,
     r"^role must be one of input, weight, bias, output, scratch, not 'weights'$"),
    ({}, ValueError, r"^tensor 'x' needs data or a shape$"),
], ids=["float-data", "int16-data", "float-dtype", "role", "no-shape"])
def test_tensor_errors(tiny: Config, kwargs: dict[str, Any], error: type, message: str) -> None:
    b = ProgramBuilder(tiny)
    with pytest.raises(error, match=message):
        b.tensor("x", **kwargs)
    assert b.symbols == {}


def test_tensor_duplicate_name(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.tensor("x", shape=(4,))
    with pytest.raises(BuildError, match=r"^a DRAM segment named 'x' already exists$"):
        b.tensor("x", shape=(4,))


def test_elem_addr(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.tensor("pad", shape=(16,))
    sym = b.tensor("x", shape=(64,))
    assert sym.addr == 16
    assert b.elem_addr(sym, MemoryType.INP) == 16 // tiny.inp_elem_bytes
    assert b.elem_addr(sym, MemoryType.WGT, 2) == 16 // tiny.wgt_elem_bytes + 2
    assert b.elem_addr(sym, MemoryType.UOP) == 16 // UOP_BYTES
    with pytest.raises(BuildError, match=r"^tensor at byte 2 is not aligned to INP elements \(4 bytes\)$"):
        b.elem_addr(Symbol(2, (4,), "int8"), MemoryType.INP)


# -- load_2d / store_2d -----------------------------------------------------------------------


@pytest.mark.parametrize("memory_type, module", [
    (MemoryType.INP, L), (MemoryType.WGT, L), (MemoryType.ACC, C), (MemoryType.ACC_8BIT, C),
])
def test_load_2d_encoding(tiny: Config, memory_type: MemoryType, module: Module) -> None:
    b = ProgramBuilder(tiny)
    b.tensor("pad", shape=(16,))
    elem = tiny.elem_bytes(memory_type)
    src = b.tensor("src", shape=(8 * elem,))
    b.load_2d(memory_type, 3, src, offset=2, y_size=2, x_size=2, x_stride=3,
              y_pad_0=1, y_pad_1=1, x_pad_0=1, x_pad_1=2)
    insn = b.insns[0]
    assert insn.module == module
    assert format_insn(insn) == (
        f"LOAD {memory_type.name} sram_base=3 dram_base={16 // elem + 2} y_size=2 x_size=2 "
        "x_stride=3 y_pad_0=1 y_pad_1=1 x_pad_0=1 x_pad_1=2"
    )


def test_store_2d_encoding(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.tensor("pad", shape=(32,))
    dst = b.tensor("dst", shape=(10, 1, 4))
    b.store_2d(5, dst, offset=1, y_size=3, x_size=2, x_stride=3)
    assert disassemble(b.insns) == (
        "STORE OUT sram_base=5 dram_base=9 y_size=3 x_size=2 x_stride=3\n"
    )
    assert b.insns[0].module == S


def test_loads_and_stores_move_the_data(tiny: Config) -> None:
    """LOAD ACC, ALU copy acc → out, STORE: the tensor comes back unchanged."""
    rng = np.random.default_rng(5)
    data = rng.integers(-128, 128, (6, 1, 4)).astype(np.int32)
    b = ProgramBuilder(tiny)
    src = b.tensor("src", data=data)
    dst = b.tensor("dst", shape=(6, 1, 4), role="output")
    b.load_2d(MemoryType.ACC, 10, src, y_size=2, x_size=3)
    b.alu(UopKernel((Uop(10, 10),), (UopLoop(6, dst_factor=1, src_factor=1),)), AluOp.SHR, imm=0)
    b.dep_push(C, S)
    b.dep_pop(C, S)
    b.store_2d(10, dst, y_size=1, x_size=6)
    program = b.finish()
    result = Device("functional").run(program)
    np.testing.assert_array_equal(result.read("dst"), data.astype(np.int8))
    np.testing.assert_array_equal(program.read("dst"), np.zeros((6, 1, 4)))


@pytest.mark.parametrize("memory_type", [MemoryType.UOP, MemoryType.OUT])
def test_load_2d_rejects_uop_and_out(tiny: Config, memory_type: MemoryType) -> None:
    b = ProgramBuilder(tiny)
    src = b.tensor("src", shape=(64,))
    with pytest.raises(BuildError, match=rf"^load_2d cannot load {memory_type.name}: "):
        b.load_2d(memory_type, 0, src, y_size=1, x_size=1)
    assert b.insns == []


@pytest.mark.parametrize("memory_type", [MemoryType.WGT, MemoryType.ACC, MemoryType.ACC_8BIT])
def test_load_2d_pads_with_minus_128_only_into_inp(tiny: Config, memory_type: MemoryType) -> None:
    b = ProgramBuilder(tiny)
    src = b.tensor("src", shape=(64,))
    with pytest.raises(BuildError, match=rf"^load_2d of {memory_type.name} cannot pad with -128 \(pad_min\): "
                                         r"only INP can$"):
        b.load_2d(memory_type, 0, src, y_size=1, x_size=1, x_pad_0=1, pad_min=True)
    assert b.insns == []


@pytest.mark.parametrize("memory_type", [MemoryType.INP, MemoryType.WGT, MemoryType.ACC])
def test_load_2d_sram_range(tiny: Config, memory_type: MemoryType) -> None:
    depth = tiny.buffer_depth(memory_type)
    b = ProgramBuilder(tiny)
    src = b.tensor("src", shape=(4 * tiny.elem_bytes(memory_type),))
    b.load_2d(memory_type, depth - 2, src, y_size=1, x_size=2)  # exactly fits
    name = memory_type.name
    for base, kwargs, count in [
        (depth - 1, {"y_size": 1, "x_size": 2}, 2),
        (depth - 2, {"y_size": 1, "x_size": 1, "y_pad_1": 1, "x_pad_0": 1}, 4),
        (-1, {"y_size": 1, "x_size": 1}, 1),
    ]:
        with pytest.raises(BuildError, match=(
            rf"^load_2d of {count} {name} elements at sram_base {base} runs past the buffer "
            rf"\({depth} elements\)$"
        )):
            b.load_2d(memory_type, base, src, **kwargs)
    assert len(b.insns) == 1


def test_load_2d_dram_range(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    src = b.tensor("src", shape=(4, 1, 4))  # 4 INP elements
    b.load_2d(MemoryType.INP, 0, src, offset=1, y_size=2, x_size=1, x_stride=2)  # elements 1, 3
    for kwargs, span in [
        ({"offset": 3, "y_size": 1, "x_size": 2}, "3..4"),
        ({"offset": 0, "y_size": 2, "x_size": 2, "x_stride": 3}, "0..4"),
        ({"offset": -1, "y_size": 1, "x_size": 1}, "-1..-1"),
    ]:
        with pytest.raises(BuildError, match=(
            rf"^load_2d reads INP elements {span} of a tensor of 4 elements$"
        )):
            b.load_2d(MemoryType.INP, 0, src, **kwargs)
    with pytest.raises(BuildError, match=(
        r"^load_2d needs non-negative sizes and x_stride >= x_size, not "
        r"y_size=1 x_size=2 x_stride=1$"
    )):
        b.load_2d(MemoryType.INP, 0, src, y_size=1, x_size=2, x_stride=1)
    with pytest.raises(BuildError, match=r"^load_2d needs non-negative sizes"):
        b.load_2d(MemoryType.INP, 0, src, y_size=-1, x_size=1)
    assert len(b.insns) == 1


def test_store_2d_ranges(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    dst = b.tensor("dst", shape=(4, 1, 4))  # 4 OUT elements
    depth = tiny.out_depth
    b.store_2d(depth - 4, dst, y_size=2, x_size=2)
    with pytest.raises(BuildError, match=(
        rf"^store_2d of 3 OUT elements at sram_base {depth - 2} runs past the buffer "
        rf"\({depth} elements\)$"
    )):
        b.store_2d(depth - 2, dst, y_size=1, x_size=3)
    with pytest.raises(BuildError, match=r"^store_2d \w+ OUT elements 2\.\.4 of a tensor of 4 elements$"):
        b.store_2d(0, dst, offset=2, y_size=1, x_size=3)
    with pytest.raises(BuildError, match=r"^store_2d needs non-negative sizes and x_stride >= x_size"):
        b.store_2d(0, dst, y_size=2, x_size=2, x_stride=1)
    assert len(b.insns) == 1


# Fields that do not fit their encoding should be refused by the call that sets them,
# not by finish() (BuildError: "a builder call that would produce an invalid program").
FIELD_OVERFLOWS: dict[str, tuple[str, Callable[[ProgramBuilder, Symbol], None]]] = {
    "x_pad_0": ("x_pad_0", lambda b, s: b.load_2d(MemoryType.INP, 0, s, y_size=1, x_size=1,
                                                  x_pad_0=16)),
    "alu imm": ("imm", lambda b, s: b.alu(UopKernel((Uop(0, 0),)), AluOp.ADD, imm=1 << 16)),
    "dst_factor": ("dst_factor_out", lambda b, s: b.gemm(
        UopKernel((Uop(0, 0, 0),), (UopLoop(1, dst_factor=1 << 8),)))),
}


@pytest.mark.parametrize("name", list(FIELD_OVERFLOWS))
def test_field_overflow_is_refused_by_the_call(tiny: Config, name: str) -> None:
    field, call = FIELD_OVERFLOWS[name]
    b = ProgramBuilder(tiny)
    src = b.tensor("src", shape=(64,))
    with pytest.raises((BuildError, ISAError), match=field):
        call(b, src)


# -- micro-op kernels ----------------------------------------------------------------------


def test_uop_loop_and_kernel_arguments() -> None:
    for extent in (0, -1, 1 << 14):
        with pytest.raises(BuildError, match=rf"^loop extent must be between 1 and 16383, not {extent}$"):
            UopLoop(extent)
    assert UopLoop((1 << 14) - 1).extent == 16383
    for name in ("dst_factor", "src_factor", "wgt_factor"):
        with pytest.raises(BuildError, match=rf"^loop {name} must be non-negative, not -2$"):
            UopLoop(2, **{name: -2})
    with pytest.raises(BuildError, match=r"^a micro-op kernel needs at least one micro-op$"):
        UopKernel(())
    with pytest.raises(BuildError, match=r"^a micro-op kernel has at most 2 loops, not 3$"):
        UopKernel((Uop(),), (UopLoop(1),) * 3)
    kernel = UopKernel([Uop(1, 2, 3)], [UopLoop(4, 1, 0, 2)])  # lists become tuples
    assert kernel.uops == (Uop(1, 2, 3),) and kernel.loops == (UopLoop(4, 1, 0, 2),)
    assert kernel.padded_loops == (UopLoop(4, 1, 0, 2), UopLoop(1))
    assert (kernel.max_index("dst"), kernel.max_index("src"), kernel.max_index("wgt")) == (4, 2, 9)
    assert kernel.executions == 4


def test_gemm_and_alu_encoding(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.gemm(UopKernel((Uop(1, 2, 3), Uop(4, 5, 6)),
                     (UopLoop(3, 10, 20, 30), UopLoop(2, 1, 2, 3))), reset=True)
    b.alu(UopKernel((Uop(7, 8),), (UopLoop(5, 1, 1),)), AluOp.MAX, imm=-128)
    b.alu(UopKernel((Uop(7, 8),)), AluOp.ADD)
    lines = disassemble(b.insns).splitlines()
    assert lines[1] == ("GEMM reset_reg uop_end=2 iter_out=3 iter_in=2 dst_factor_out=10 "
                        "dst_factor_in=1 src_factor_out=20 src_factor_in=2 wgt_factor_out=30 "
                        "wgt_factor_in=3")
    assert lines[3] == ("ALU MAX uop_bgn=2 uop_end=3 iter_out=5 iter_in=1 dst_factor_out=1 "
                        "src_factor_out=1 use_imm imm=-128")
    assert lines[4] == "ALU ADD uop_bgn=2 uop_end=3 iter_out=1 iter_in=1"


def test_kernels_are_placed_and_reused(tiny: Config) -> None:
    k1 = UopKernel((Uop(0, 0, 0), Uop(1, 1, 1)))
    k2 = UopKernel((Uop(2, 2, 2), Uop(3, 3, 3), Uop(4, 4, 4)))
    k1_looped = UopKernel(k1.uops, (UopLoop(2, dst_factor=2),))
    b = ProgramBuilder(tiny)
    b.gemm(k1)
    b.gemm(k2)
    b.gemm(k1)          # resident: no second LOAD UOP
    b.gemm(k1_looped)   # same micro-ops, other loops: still resident
    b.alu(k2, AluOp.ADD, imm=1)
    program = b.finish()
    loads = uop_loads(program)
    assert [(i.sram_base, i.x_size, i.y_size, i.x_stride) for i in loads] == [(0, 2, 1, 2), (2, 3, 1, 3)]
    assert uops_in_dram(program, loads[0]) == list(k1.uops)
    assert uops_in_dram(program, loads[1]) == list(k2.uops)
    ranges = [(i.uop_bgn, i.uop_end) for i in program.instructions()
              if i.opcode in (Opcode.GEMM, Opcode.ALU)]
    assert ranges == [(0, 2), (2, 5), (0, 2), (0, 2), (2, 5)]
    assert program.instructions()[2].opcode == Opcode.LOAD  # k2's load follows k1's gemm
    Device("functional").run(program)


def test_uop_buffer_wraps_when_full(tiny: Config) -> None:
    """200-uop ALU kernels in a 512-entry buffer; checked end to end on the simulator."""
    assert tiny.uop_depth == 512
    k1 = UopKernel(tuple(Uop(j, j) for j in range(200)))
    k2 = UopKernel(tuple(Uop(j, j) for j in reversed(range(200))))
    k3 = UopKernel(tuple(Uop(j, j) for j in range(50, 250)))
    steps = [(k1, 1), (k2, 2), (k3, 3), (k1, 4), (k3, 5), (k2, 6)]
    rng = np.random.default_rng(7)
    init = rng.integers(-1000, 1000, (256, 1, 4)).astype(np.int32)
    b = ProgramBuilder(tiny)
    acc = b.tensor("acc", data=init)
    out = b.tensor("out", shape=(250, 1, 4), role="output")
    b.load_2d(MemoryType.ACC, 0, acc, y_size=1, x_size=256)
    for kernel, imm in steps:
        b.alu(kernel, AluOp.ADD, imm=imm)
    b.dep_push(C, S)
    b.dep_pop(C, S)
    b.store_2d(0, out, y_size=1, x_size=250)
    program = b.finish()

    loads = uop_loads(program)
    assert [(i.sram_base, i.x_size) for i in loads] == [(0, 200), (200, 200), (0, 200),
                                                         (200, 200), (0, 200)]
    # the DRAM copy of a kernel is written once and reloaded from there
    assert loads[3].dram_base == loads[0].dram_base and loads[4].dram_base == loads[1].dram_base
    assert len({i.dram_base for i in loads}) == 3
    assert [uops_in_dram(program, i) for i in loads] == [
        list(k.uops) for k in (k1, k2, k3, k1, k2)]
    assert [i.uop_bgn for i in program.instructions() if i.opcode == Opcode.ALU] == [
        0, 200, 0, 200, 0, 0]

    expected = init[:250].astype(np.int64)
    for kernel, imm in steps:
        for uop in kernel.uops:
            expected[uop.dst_idx] += imm
    result = Device("functional").run(program)
    np.testing.assert_array_equal(result.read("out"), expected.astype(np.int8))


def test_kernel_filling_the_buffer(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.gemm(UopKernel(tuple(Uop(j % 7, j % 5, j % 3) for j in range(tiny.uop_depth))))
    program = b.finish()
    gemm = program.instructions()[1]
    assert (gemm.uop_bgn, gemm.uop_end) == (0, tiny.uop_depth)
    assert Device("functional").run(program).counters["gemm_uops"] == tiny.uop_depth


def test_kernel_bigger_than_the_buffer(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    with pytest.raises(BuildError, match=(
        r"^micro-op kernel of 513 micro-ops does not fit the micro-op buffer \(512 entries\)$"
    )):
        b.gemm(UopKernel((Uop(),) * (tiny.uop_depth + 1)))
    assert b.insns == []


@pytest.mark.parametrize("kernel, name, top", [
    (UopKernel((Uop(256, 0, 0),)), "dst", 256),
    (UopKernel((Uop(0, 256, 0),)), "src", 256),
    (UopKernel((Uop(0, 0, 256),)), "wgt", 256),
    (UopKernel((Uop(),), (UopLoop(3, dst_factor=100), UopLoop(2, dst_factor=60))), "dst", 260),
    (UopKernel((Uop(0, 5, 0),), (UopLoop(2, src_factor=251),)), "src", 256),
    (UopKernel((Uop(0, 0, 1),), (UopLoop(16, wgt_factor=17),)), "wgt", 256),
])
def test_gemm_kernel_index_past_a_buffer(tiny: Config, kernel: UopKernel, name: str, top: int) -> None:
    assert tiny.acc_depth == tiny.inp_depth == tiny.wgt_depth == 256
    b = ProgramBuilder(tiny)
    with pytest.raises(BuildError, match=(
        rf"^micro-op kernel reaches {name} index {top}, past the buffer \(256 elements\)$"
    )):
        b.gemm(kernel)
    assert b.insns == []


def test_gemm_kernel_reaching_the_last_index(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.gemm(UopKernel((Uop(0, 0, 0),), (UopLoop(3, 100, 100, 100), UopLoop(2, 55, 55, 55))))
    assert b.insns[-1].opcode == Opcode.GEMM


def test_alu_kernel_errors(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    with pytest.raises(BuildError, match=r"^micro-op kernel reaches src index 256, past the buffer \(256 elements\)$"):
        b.alu(UopKernel((Uop(0, 256),)), AluOp.ADD)
    with pytest.raises(BuildError, match=r"^micro-op kernel reaches dst index 300, past the buffer"):
        b.alu(UopKernel((Uop(0, 0),), (UopLoop(4, dst_factor=100),)), AluOp.ADD, imm=1)
    with pytest.raises(BuildError, match=r"^an ALU kernel has no weight index: wgt_factor must be 0$"):
        b.alu(UopKernel((Uop(0, 0),), (UopLoop(2, wgt_factor=1),)), AluOp.ADD)
    assert b.insns == []


# -- the finished program ----------------------------------------------------------------------


def test_finished_layout(cfg: Config) -> None:
    b = ProgramBuilder(cfg)
    b.tensor("x", shape=(3,))
    b.gemm(UopKernel((Uop(0, 0, 0), Uop(1, 1, 1))))
    program = b.finish()
    assert program.insn_addr % INSN_BYTES == 0 and program.insn_addr % cfg.max_elem_bytes == 0
    assert program.insn_addr + program.insn_count * INSN_BYTES == len(program.dram)
    assert program.instructions() == b.insns
    (load,) = uop_loads(program)
    assert load.dram_base * UOP_BYTES % cfg.max_elem_bytes == 0
    assert load.dram_base * UOP_BYTES >= cfg.max_elem_bytes  # after the tensor
    assert program.config is cfg


FINISHED_CALLS: dict[str, Callable[[ProgramBuilder, Symbol], object]] = {
    "tensor": lambda b, s: b.tensor("y", shape=(1,)),
    "load_2d": lambda b, s: b.load_2d(MemoryType.INP, 0, s, y_size=1, x_size=1),
    "store_2d": lambda b, s: b.store_2d(0, s, y_size=1, x_size=1),
    "gemm": lambda b, s: b.gemm(UopKernel((Uop(5, 5, 5),))),
    "gemm-resident": lambda b, s: b.gemm(K0),
    "alu": lambda b, s: b.alu(UopKernel((Uop(3, 3),)), AluOp.ADD, imm=1),
    "dep_push": lambda b, s: b.dep_push(C, L),
    "dep_pop": lambda b, s: b.dep_pop(L, C),
    "finish": lambda b, s: b.finish(),
}


@pytest.mark.parametrize("name", list(FINISHED_CALLS))
def test_builder_is_closed_after_finish(tiny: Config, name: str) -> None:
    b = ProgramBuilder(tiny)
    sym = b.tensor("x", shape=(16,))
    b.gemm(K0)
    program = b.finish()
    count = len(b.insns)
    with pytest.raises(BuildError, match=r"^the program is finished; start a new ProgramBuilder$"):
        FINISHED_CALLS[name](b, sym)
    assert len(b.insns) == count == program.insn_count


@pytest.mark.parametrize("name", ["__uops__", "__insns__"])
def test_tensor_names_do_not_clash_with_the_layout(tiny: Config, name: str) -> None:
    b = ProgramBuilder(tiny)
    try:
        b.tensor(name, data=np.arange(4, dtype=np.int8))
    except BuildError as exc:  # refusing the name up front is fine too
        assert name in str(exc)
    else:
        b.gemm(K0)
        program = b.finish()
        np.testing.assert_array_equal(program.read(name), np.arange(4))


def test_preloaded_kernels_take_one_uop_load_and_run_as_loaded_one_by_one(cfg: Config) -> None:
    """``preload_kernels`` makes several kernels resident with one LOAD UOP (a repeated one
    once): the GEMMs then load none, and the program computes what it computes without."""
    kernels = [UopKernel((Uop(0, 0, 0), Uop(1, 1, 1))), UopKernel((Uop(2, 0, 1),)), UopKernel((Uop(0, 0, 0),
                                                                                                Uop(1, 1, 1)))]
    results = []
    for preload in (False, True):
        b = ProgramBuilder(cfg)
        rng = np.random.default_rng(0)
        inp = b.tensor("inp", data=rng.integers(-8, 8, (2, cfg.BATCH * cfg.BLOCK_IN)).astype(np.int8))
        wgt = b.tensor("wgt", data=rng.integers(-8, 8, (2, cfg.BLOCK_OUT * cfg.BLOCK_IN)).astype(np.int8))
        out = b.tensor("out", shape=(3, cfg.BATCH * cfg.BLOCK_OUT), dtype="int8", role="output")
        b.load_2d(MemoryType.INP, 0, inp, y_size=1, x_size=2, x_stride=2)
        b.load_2d(MemoryType.WGT, 0, wgt, y_size=1, x_size=2, x_stride=2)
        b.dep_push(L, C)
        b.dep_pop(L, C)
        if preload:
            b.preload_kernels([k.uops for k in kernels])
        b.gemm(UopKernel((Uop(0, 0, 0), Uop(1, 0, 0), Uop(2, 0, 0))), reset=True)
        for kernel in kernels:
            b.gemm(kernel)
        b.dep_push(C, S)
        b.dep_pop(C, S)
        b.store_2d(0, out, y_size=1, x_size=3, x_stride=3)
        program = b.finish()
        loads = uop_loads(program)
        if preload:
            assert [i.x_size for i in loads] == [3, 3]  # the two distinct kernels, then the reset's
            assert uops_in_dram(program, loads[0]) == [*kernels[0].uops, *kernels[1].uops]
        results.append(Device("functional").run(program).read("out"))
    np.testing.assert_array_equal(results[0], results[1])

"""Several kernels in one program: chains run on both simulators exactly as the chained numpy
references, the race checker passes on the whole stream, buffers are reused by liveness,
and every malformed program is refused naming the kernel, the symbol and the tensors."""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import openvta
import openvta.compiler.program as program_module
from openvta.compiler import LoweringError, conv2d, create_schedule, dense, lower
from openvta.compiler.epilogue import AluStage, Epilogue, TensorOperand
from openvta.compiler.program import Kernel, ProgramTensor, build_program, program_reference
from openvta.isa import AluOp, Config, preset

CLIP = (-128, 127)


class Arena:
    """A bump allocator for the tests' tensors; ``at=`` reuses an earlier tensor's bytes."""

    def __init__(self, cfg: Config) -> None:
        self.cfg, self.end = cfg, 0
        self.tensors: dict[str, ProgramTensor] = {}

    def add(self, name: str, op, symbol: str, *, role: str = "scratch", data=None, at: str | None = None) -> str:
        tensor = ProgramTensor(name, 0, op.output.dtype if symbol == "out" else op.inputs[symbol].dtype,
                               op.layouts[symbol], op.logical_shapes[symbol], role, data)
        offset = self.tensors[at].offset if at else self.end
        self.tensors[name] = replace(tensor, offset=offset)
        align = self.cfg.max_elem_bytes
        self.end = max(self.end, -(-(offset + tensor.nbytes) // align) * align)
        return name

    def weights(self, op, prefix: str, rng: np.random.Generator) -> dict[str, str]:
        bind = {}
        for symbol in op.inputs:
            if symbol in ("weight", "bias"):
                shape = op.logical_shapes[symbol]
                data = rng.integers(-127, 128, shape, dtype=np.int8) if symbol == "weight" else \
                    rng.integers(-64, 64, shape, dtype=np.int32)
                bind[symbol] = self.add(f"{prefix}.{symbol}", op, symbol, role=symbol, data=data)
        return bind


def _run(kernels: list[Kernel], arena: Arena, inputs: dict[str, np.ndarray], outputs: list[str]) -> None:
    tensors = list(arena.tensors.values())
    program = build_program(kernels, arena.cfg, tensors=tensors)
    expected = program_reference(kernels, tensors, inputs)
    for name in outputs:
        assert len(np.unique(expected[name])) > 5, name  # not saturated: the numbers matter
    for backend in ("functional", "cycle"):  # functional: the race checker is on
        result = openvta.simulate(program, inputs, backend=backend)
        for name in outputs:
            np.testing.assert_array_equal(result[name], expected[name], err_msg=f"{name} on {backend}")


@pytest.mark.parametrize("vthreads", [1, 2])
def test_conv_conv_with_a_residual_and_a_reused_buffer(cfg: Config, vthreads: int) -> None:
    """x → conv3x3 → a → conv3x3 + x → b → conv1x1/2 → c, with c in a's bytes (a is dead)."""
    rng = np.random.default_rng(cfg.LOG_BLOCK + vthreads)
    ch, hw = 2 * cfg.BLOCK_IN, 6
    threads = vthreads if cfg.name != "tiny" else 1
    extra = cfg.LOG_BLOCK // 2  # more channels, larger sums
    first = conv2d(cfg, ci=ch, co=ch, hw=hw, kernel=3, pad=1, shift=8 + extra, clip=CLIP, vthreads=threads)
    residual = Epilogue((AluStage(AluOp.ADD, TensorOperand("skip")), AluStage(AluOp.MIN, 127),
                         AluStage(AluOp.MAX, -128)))
    second = conv2d(cfg, ci=ch, co=ch, hw=hw, kernel=3, pad=1, shift=9 + extra, clip=None, epilogue=residual,
                    vthreads=threads)
    third = conv2d(cfg, ci=ch, co=ch - 3, hw=hw, kernel=1, stride=2, shift=7 + extra, clip=(0, 127))
    arena = Arena(cfg)
    x = arena.add("x", first, "data", role="input")
    a = arena.add("a", first, "out")
    b = arena.add("b", second, "out")
    c = arena.add("c", third, "out", role="output", at="a")
    kernels = [Kernel(first, {"data": x, "out": a, **arena.weights(first, "k0", rng)}),
               Kernel(second, {"data": a, "skip": x, "out": b, **arena.weights(second, "k1", rng)}, "block"),
               Kernel(third, {"data": b, "out": c, **arena.weights(third, "k2", rng)})]
    assert arena.tensors["c"].offset == arena.tensors["a"].offset
    _run(kernels, arena, {"x": rng.integers(-128, 128, (1, ch, hw, hw), dtype=np.int8)}, ["c"])


def test_dense_dense_with_a_requantized_int32_residual(cfg: Config) -> None:
    rng = np.random.default_rng(3)
    features = 3 * cfg.BLOCK_IN - 1
    first = dense(cfg, batch=4, in_features=features, out_features=features, shift=8, clip=CLIP)
    wide = TensorOperand("skip", "int32", (AluStage(AluOp.SHR, 4),))
    second = dense(cfg, batch=4, in_features=features, out_features=features, shift=9, clip=(0, 127),
                   epilogue=Epilogue((AluStage(AluOp.ADD, wide),)))
    arena = Arena(cfg)
    x = arena.add("x", first, "data", role="input")
    wide_in = arena.add("wide", second, "skip", role="input")
    h = arena.add("h", first, "out")
    y = arena.add("y", second, "out", role="output", at="x")
    assert arena.tensors["y"].offset == 0  # x's bytes: x is read by the first kernel only
    kernels = [Kernel(first, {"data": x, "out": h, **arena.weights(first, "d0", rng)}),
               Kernel(second, {"data": h, "skip": wide_in, "out": y, **arena.weights(second, "d1", rng)})]
    inputs: dict[str, np.ndarray] = {"x": rng.integers(-128, 128, (4, features), dtype=np.int8),
                                     "wide": rng.integers(-(2**14), 2**14, (4, features), dtype=np.int32)}
    _run(kernels, arena, inputs, ["y"])


def test_the_kernels_run_in_the_given_order_and_one_output_is_kept() -> None:
    """Two kernels read x; the second overwrites the first one's input once it is dead."""
    cfg = preset("small")
    rng = np.random.default_rng(9)
    op = conv2d(cfg, ci=8, co=8, hw=5, kernel=3, pad=1, shift=8, clip=CLIP)
    arena = Arena(cfg)
    x = arena.add("x", op, "data", role="input")
    h = arena.add("h", op, "out", role="output")
    g = arena.add("g", op, "out")
    y = arena.add("y", op, "out", role="output", at="g")
    weights = arena.weights(op, "w", rng)
    kernels = [Kernel(op, {"data": x, "out": g, **weights}), Kernel(op, {"data": g, "out": h, **weights}),
               Kernel(op, {"data": x, "out": y, **weights})]
    _run(kernels, arena, {"x": rng.integers(-128, 128, (1, 8, 5, 5), dtype=np.int8)}, ["h", "y"])


def test_progress_names_each_kernel_then_codegen() -> None:
    cfg = preset("tiny")
    op = dense(cfg, batch=1, in_features=4, out_features=4, bias=False)
    arena = Arena(cfg)
    kernels = [Kernel(op, {"data": arena.add("x", op, "data", role="input"), "weight": arena.add(
        "w", op, "weight", role="weight"), "out": arena.add("y", op, "out", role="output")}, "fc")]
    calls: list[tuple] = []
    build_program(kernels, cfg, tensors=list(arena.tensors.values()),
                  progress=lambda what, done, total: calls.append((what, done, total)))
    assert calls[0] == ("lower kernel 0 (fc)", 0, 1)
    assert calls[1][0] == "codegen" and calls[-1][0] == "codegen" and calls[-1][1] == calls[-1][2]


# -- refusals ----------------------------------------------------------------------------------


def _chain(cfg: Config | None = None):
    """x → k0 → h → k1 → y on tiny, every tensor in its own bytes."""
    cfg = cfg or preset("tiny")
    op = conv2d(cfg, ci=4, co=4, hw=4, kernel=1, bias=False)
    arena = Arena(cfg)
    for name, symbol, role in (("x", "data", "input"), ("w", "weight", "weight"), ("h", "out", "scratch"),
                               ("y", "out", "output")):
        arena.add(name, op, symbol, role=role)
    kernels = [Kernel(op, {"data": "x", "weight": "w", "out": "h"}),
               Kernel(op, {"data": "h", "weight": "w", "out": "y"})]
    return op, kernels, arena.tensors


def _refused(kernels, tensors: dict, message: str, cfg: Config | None = None) -> None:
    with pytest.raises(LoweringError, match=f"^build_program: {message}$"):
        build_program(kernels, cfg or preset("tiny"), tensors=list(tensors.values()))


def test_live_tensors_sharing_bytes_are_named() -> None:
    _, kernels, tensors = _chain()
    tensors["y"] = replace(tensors["y"], offset=tensors["h"].offset + 16)
    _refused(kernels, tensors, r"tensors 'h' \(bytes 80..143, live in kernels 0..1\) and 'y' \(bytes "
                               r"96..159, live in kernels 1..1\) share DRAM while both are live \(in kernel 1 "
                               r"\(conv2d\)\)")


def test_a_kernel_reading_what_nobody_wrote_or_before_it_is_written() -> None:
    _, kernels, tensors = _chain()
    _refused(kernels[1:], tensors, r"kernel 0 \(conv2d\) reads 'h', which no kernel writes \(a scratch tensor; "
                                   r"only input, weight and bias tensors come from the host\)")
    _refused(kernels[::-1], tensors, r"kernel 0 \(conv2d\) reads 'h' before kernel 1 \(conv2d\) writes it")


def test_layout_dtype_and_shape_mismatches_are_named() -> None:
    _, kernels, tensors = _chain()
    tensors["h"] = replace(tensors["h"], layout="NCHW1n8c")
    _refused(kernels, tensors, r"kernel 0 \(conv2d\) takes out as int8 \(1, 4, 4, 4\) in NCHW1n4c, but 'h' is "
                               r"declared int8 \(1, 4, 4, 4\) in NCHW1n8c")
    _, kernels, tensors = _chain()
    tensors["h"] = replace(tensors["h"], shape=(1, 4, 5, 5))
    _refused(kernels, tensors, r"kernel 0 \(conv2d\) takes out as int8 \(1, 4, 4, 4\) in NCHW1n4c, but 'h' is "
                               r"declared int8 \(1, 4, 5, 5\) in NCHW1n4c")


@pytest.mark.parametrize(("change", "message"), [
    (lambda k, t: ([Kernel(k[0].operator, {"data": "x", "out": "h"})], t),
     r"kernel 0 \(conv2d\) must bind exactly its symbols data, weight, out \(unbound: weight; unknown: none\)"),
    (lambda k, t: ([Kernel(k[0].operator, {**k[0].bind, "bias": "w"})], t),
     r"kernel 0 \(conv2d\) must bind exactly its symbols data, weight, out \(unbound: none; unknown: bias\)"),
    (lambda k, t: ([Kernel(k[0].operator, {**k[0].bind, "out": "z"})], t),
     r"kernel 0 \(conv2d\) binds out to 'z', which is not a declared tensor"),
    (lambda k, t: ([Kernel(k[0].operator, {**k[0].bind, "out": "x"})], t),
     r"kernel 0 \(conv2d\) binds 'x' to both its output and its input 'data'"),
    (lambda k, t: ([k[0], Kernel(k[1].operator, {**k[1].bind, "out": "h"}, "again")], t),
     r"kernel 1 \(again\) binds 'h' to both its output and its input 'data'"),
    (lambda k, t: ([k[0], Kernel(k[1].operator, {**k[0].bind}, "again")], t),
     r"kernel 1 \(again\) writes 'h', which kernel 0 \(conv2d\) already writes"),
    (lambda k, t: ([Kernel(k[0].operator, {**k[0].bind, "out": "b"})], t | {"b": replace(t["h"], name="b",
                                                                                          role="bias")}),
     r"kernel 0 \(conv2d\) writes 'b', a tensor of role bias that the host supplies"),
    (lambda k, t: (k[:1], t), r"output tensor 'y' is written by no kernel"),
    (lambda k, t: (k, t | {"x": replace(t["x"], offset=8)}),
     r"tensor 'x' offset must be a multiple of 16 bytes \(the DRAM alignment of tiny\), not 8"),
    (lambda k, t: ([], t), r"a program needs at least one kernel"),
])
def test_malformed_programs_are_refused(change, message: str) -> None:
    _, kernels, tensors = _chain()
    kernels, tensors = change(kernels, tensors)
    _refused(kernels, tensors, message)


def test_a_tensor_declared_twice_and_foreign_kernels() -> None:
    _, kernels, tensors = _chain()
    with pytest.raises(LoweringError, match=r"^build_program: tensor 'x' is declared twice$"):
        build_program(kernels, preset("tiny"), tensors=[*tensors.values(), tensors["x"]])
    spread = {name: replace(t, offset=1024 * i) for i, (name, t) in enumerate(tensors.items())}
    _refused(kernels, spread, r"kernel 0 \(conv2d\) is scheduled for the tiny configuration, the program is for "
                              r"small", cfg=preset("small"))
    with pytest.raises(TypeError, match=r"^kernels must be Kernel, not dict$"):
        build_program([{}], preset("tiny"), tensors=list(tensors.values()))
    with pytest.raises(TypeError, match=r"^tensors must be ProgramTensor, not str$"):
        build_program(kernels, preset("tiny"), tensors=["x"])
    with pytest.raises(TypeError, match=r"^a kernel's operator must be an Operator, not str$"):
        Kernel("conv2d", {})


def test_block_in_must_equal_block_out() -> None:
    """Every preset has one LOG_BLOCK for both; a configuration that split them is refused."""
    wide = SimpleNamespace(BLOCK_IN=4, BLOCK_OUT=8)
    _, kernels, tensors = _chain()
    _refused(kernels, tensors, r"chained kernels need BLOCK_IN == BLOCK_OUT \(one kernel's NCHW\{B\}n\{BO\}c "
                               r"output is the next one's NCHW\{B\}n\{BI\}c input\), not BLOCK_IN=4 and "
                               r"BLOCK_OUT=8", cfg=wide)


def test_a_kernel_that_does_not_lower_is_named() -> None:
    op, kernels, tensors = _chain()
    unscheduled = replace(op, schedule=create_schedule(op.output))
    kernels[1] = Kernel(unscheduled, kernels[1].bind, "raw")
    with pytest.raises(LoweringError, match=r"^build_program kernel 1 \(raw\): lower "):
        build_program(kernels, preset("tiny"), tensors=list(tensors.values()))


def test_a_kernel_given_lowered_is_not_lowered_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller that lowered a kernel to check it hands the loop IR over: the same program."""
    op, kernels, tensors = _chain()
    cfg = preset("tiny")
    fresh = build_program(kernels, cfg, tensors=list(tensors.values()))
    ir = lower(op.schedule, cfg)

    def no_lowering(schedule, cfg):
        raise AssertionError("lowered again")

    monkeypatch.setattr(program_module, "lower", no_lowering)
    given = build_program([replace(k, lowered=ir) for k in kernels], cfg, tensors=list(tensors.values()))
    assert np.array_equal(given.dram, fresh.dram) and given.insn_count == fresh.insn_count


def test_a_lowered_schedule_must_be_the_kernels_own() -> None:
    op, kernels, _ = _chain()
    other = conv2d(preset("tiny"), ci=4, co=4, hw=4, kernel=1, bias=False)
    with pytest.raises(TypeError, match=r"^a kernel's lowered schedule must be its operator's \(a Lowered of its "
                                        r"output tensor\), not Lowered$"):
        Kernel(op, kernels[0].bind, lowered=lower(other.schedule, other.cfg))
    with pytest.raises(TypeError, match=r"^a kernel's lowered schedule must be its operator's \(a Lowered of its "
                                        r"output tensor\), not str$"):
        Kernel(op, kernels[0].bind, lowered="ir")
    with pytest.raises(ValueError, match=r"^a kernel's lowered schedule must be for its operator's configuration "
                                         r"'tiny', not 'small'$"):
        Kernel(op, kernels[0].bind, lowered=replace(lower(op.schedule, op.cfg), cfg=preset("small")))


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(name="__x"), r"a tensor name must be a non-empty string not starting with '__', not '__x'"),
    (dict(offset=-1), r"tensor 't' offset must be a non-negative integer, not -1"),
    (dict(dtype="int16"), r"tensor 't' dtype must be one of int8, int32, not 'int16'"),
    (dict(role="temp"), r"tensor 't' role must be one of input, weight, bias, output, scratch, not 'temp'"),
    (dict(layout="NHWC"), r"tensor 't': layout must be a packed layout such as NCHW1n16c, not 'NHWC'"),
    (dict(shape=(4, 4)), r"tensor 't': a NCHW1n4c tensor must have 4 dimensions \(NCHW\), not shape \(4, 4\)"),
    (dict(data=np.zeros((1, 4, 2, 2), np.int8)), r"tensor 't' has data, so its role must be one of input, "
                                                 r"weight, bias, not 'scratch'"),
    (dict(role="input", data=np.zeros((1, 4, 2, 3), np.int8)), r"input 't' must have shape \(1, 4, 2, 2\), "
                                                               r"not \(1, 4, 2, 3\)"),
])
def test_a_bad_tensor_declaration(kwargs: dict, message: str) -> None:
    fields = dict(name="t", offset=0, dtype="int8", layout="NCHW1n4c", shape=(1, 4, 2, 2)) | kwargs
    with pytest.raises(ValueError, match=f"^{message}$"):
        ProgramTensor(**fields)


def test_program_reference_refuses_an_unknown_input() -> None:
    _, kernels, tensors = _chain()
    with pytest.raises(ValueError, match=re.escape("input 'q' must be a declared tensor (tensors: x, w, h, y)")):
        program_reference(kernels, list(tensors.values()), {"q": np.zeros(1)})


@pytest.mark.rtl
@pytest.mark.slow
def test_a_chain_with_a_residual_on_the_rtl() -> None:
    cfg = preset("tiny")
    rng = np.random.default_rng(1)
    first = conv2d(cfg, ci=4, co=4, hw=4, kernel=3, pad=1, shift=8, clip=CLIP)
    residual = Epilogue((AluStage(AluOp.ADD, TensorOperand("skip")), AluStage(AluOp.MIN, 127),
                         AluStage(AluOp.MAX, -128)))
    second = conv2d(cfg, ci=4, co=4, hw=4, kernel=1, shift=7, clip=None, epilogue=residual)
    arena = Arena(cfg)
    x, a = arena.add("x", first, "data", role="input"), arena.add("a", first, "out")
    y = arena.add("y", second, "out", role="output")
    kernels = [Kernel(first, {"data": x, "out": a, **arena.weights(first, "k0", rng)}),
               Kernel(second, {"data": a, "skip": x, "out": y, **arena.weights(second, "k1", rng)})]
    tensors = list(arena.tensors.values())
    inputs = {"x": rng.integers(-128, 128, (1, 4, 4, 4), dtype=np.int8)}
    result = openvta.simulate(build_program(kernels, cfg, tensors=tensors), inputs, backend="rtl")
    np.testing.assert_array_equal(result["y"], program_reference(kernels, tensors, inputs)["y"])

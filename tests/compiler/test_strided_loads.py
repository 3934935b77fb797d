"""Strided 1×1 convolutions load only the rows they use (2-D strided DMA), exactly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import openvta
import pytest

from openvta.compiler import LoweringError, Schedule, conv2d, create_schedule, te
from openvta.compiler.intrin import gemm_intrinsic
from openvta.compiler.ops.conv2d import Conv2dPlan
from openvta.compiler.pipeline import build
from openvta.isa import Config, MemInsn, MemoryType, Opcode, preset
from openvta.runtime import Device


def _run(op, rng, backend: str = "functional"):
    ci, co, hw = op.params["ci"], op.params["co"], op.params["hw"]
    inputs = {"data": rng.integers(-128, 128, (1, ci, hw, hw), dtype=np.int8),
              "weight": rng.integers(-128, 128, (co, ci, 1, 1), dtype=np.int8),
              "bias": rng.integers(-(2**14), 2**14, (co,), dtype=np.int32)}
    program = op.build(inputs)
    result = Device(backend).run(program)  # functional: race checker on
    np.testing.assert_array_equal(op.unpack(program.read("out", result.dram)), op.reference(inputs))
    return program


def _inp_loads(program) -> list[MemInsn]:
    return [i for i in program.instructions() if isinstance(i, MemInsn) and i.opcode == Opcode.LOAD
            and i.memory_type == MemoryType.INP and i.x_size]


@pytest.mark.parametrize("hw", [1, 2, 3, 5, 7, 8, 13, 14])
@pytest.mark.parametrize("stride", [2, 3])
def test_strided_1x1_conv2d_loads_only_used_rows(cfg, hw: int, stride: int) -> None:
    op = conv2d(cfg, ci=2 * cfg.BLOCK_IN, co=cfg.BLOCK_OUT, hw=hw, kernel=1, stride=stride)
    program = _run(op, np.random.default_rng(hw * stride))
    oh = (hw - 1) // stride + 1
    loads = _inp_loads(program)
    # each used row of each input channel block once per column tile, nothing else
    assert sum(i.y_size for i in loads) == 2 * oh * (oh // op.plan.xb)
    assert {i.x_size for i in loads} == {(op.plan.xb - 1) * stride + 1}
    for insn in loads:
        if insn.y_size > 1:
            assert insn.x_stride == stride * hw
        assert insn.y_pad_0 == insn.y_pad_1 == insn.x_pad_0 == insn.x_pad_1 == 0


@pytest.mark.parametrize("vthreads", [1, 2])
@pytest.mark.parametrize("plan", [Conv2dPlan(1, 1, 1, 1, 1, "co"), Conv2dPlan(2, 2, 8, 2, 1, "co"),
                                  Conv2dPlan(1, 4, 2, 1, 1, "y")])
def test_strided_1x1_conv2d_with_forced_plans_on_both_backends(plan: Conv2dPlan, vthreads: int) -> None:
    cfg = preset("default")
    plan = replace(plan, vthreads=vthreads)
    op = conv2d(cfg, ci=4 * cfg.BLOCK_IN, co=4 * cfg.BLOCK_OUT, hw=15, kernel=1, stride=2,
                vthreads=vthreads, plan=plan)
    for backend in ("functional", "cycle"):
        _run(op, np.random.default_rng(15), backend)


def _dense_through(index) -> tuple[Schedule, Config]:
    """A hand-written dense layer whose data cache copies ``data[i, index(ko)]`` (inlined)."""
    cfg = preset("tiny")
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    data = te.placeholder((2, 7, b, bi), "int8", "data")
    picked = te.compute((2, 3, b, bi), lambda i, c, j, k: data[i, index(c), j, k], "picked")
    return _dense_schedule(cfg, picked, te.placeholder((2, 3, bo, bi), "int8", "weight"), picked), cfg


def _dense_schedule(cfg: Config, data: te.Tensor, weight: te.Tensor, inlined: te.Tensor) -> Schedule:
    """A dense layer of ``data`` ``(2, 3, B, BI)`` by ``weight`` ``(2, 3, BO, BI)``, each read through
    its cache, ``inlined`` (one of them, a stage over a placeholder) inlined into its cache."""
    ko, k = te.reduce_axis(3, "ko"), te.reduce_axis(cfg.BLOCK_IN, "k")
    acc = te.compute((2, 2, cfg.BATCH, cfg.BLOCK_OUT), lambda i, o, j, m: te.sum(
        data[i, ko, j, k].astype("int32") * weight[o, ko, m, k].astype("int32"), axis=[ko, k]), "acc")
    out = te.compute(acc.shape, lambda *i: acc(*i).astype("int8"), "out")
    s = create_schedule(out)
    _, o, _, _ = s[out].axis
    s[acc].set_scope("acc")
    s[acc].compute_at(s[out], o)
    ko_, k_ = s[acc].reduce_axis
    s[acc].reorder(ko_, *s[acc].axis, k_)
    for t, scope in ((data, "inp"), (weight, "wgt")):
        s[s.cache_read(t, scope, [acc])].compute_at(s[out], o)
    s[inlined].compute_inline()
    s[acc].tensorize(s[acc].axis[2], gemm_intrinsic(cfg))
    return s


@pytest.mark.parametrize(("index", "message"), [
    (lambda c: c * 2, r"^inject_dma: picked\.inp: a DMA row is contiguous: the innermost axis "
                      r"cannot be read with a step$"),
    (lambda c: c * 2 + 1, r"^lower picked: an inlined stage copied by DMA must index its source as "
                          r"i - offset or step \* i$"),
])
def test_steps_dma_cannot_do_are_refused(index, message: str) -> None:
    s, cfg = _dense_through(index)
    with pytest.raises(LoweringError, match=message):
        build(s, cfg)


@pytest.mark.rtl
def test_a_strided_1x1_conv2d_on_the_rtl() -> None:
    cfg = preset("tiny")
    op = conv2d(cfg, ci=2 * cfg.BLOCK_IN, co=2 * cfg.BLOCK_OUT, hw=7, kernel=1, stride=2, vthreads=2)
    rng = np.random.default_rng(7)
    inputs = {"data": rng.integers(-128, 128, (1, op.params["ci"], 7, 7), dtype=np.int8),
              "weight": rng.integers(-128, 128, (op.params["co"], op.params["ci"], 1, 1), dtype=np.int8),
              "bias": rng.integers(-(2**14), 2**14, (op.params["co"],), dtype=np.int32)}
    result = openvta.simulate(op.build(inputs), backend="rtl")
    np.testing.assert_array_equal(result["out"], op.reference(inputs))


def test_padding_a_weight_cache_with_minus_128_is_refused() -> None:
    """LOAD's pad_min is INP's only: a weight cache padded with -128 is a lowering error."""
    cfg = preset("tiny")
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    weight = te.placeholder((2, 1, bo, bi), "int8", "weight")
    padded = te.compute((2, 3, bo, bi), lambda o, c, m, k: te.select(
        (te.less_equal(1, c), te.less(c, 2)), weight[o, c - 1, m, k], -128), "weight_pad")
    s = _dense_schedule(cfg, te.placeholder((2, 3, b, bi), "int8", "data"), padded, padded)
    with pytest.raises(LoweringError, match=r"^inject_dma: weight_pad\.wgt: only the inp buffer can be padded "
                                            r"with -128 \(LOAD INP's pad_min\); pad the wgt buffer with 0$"):
        build(s, cfg)

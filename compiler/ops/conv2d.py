"""conv2d on packed layouts, with the requantizing tail, and its default schedule.

``out = clip((conv2d(data, weight) >> shift) + bias, 0, 127)`` as int8 (WORKLOADS.md),
data ``NCHW{B}n{BI}c``, kernel ``OIHW{BO}o{BI}i``, bias ``C{B}n{BO}c``, out
``NCHW{B}n{BO}c``.  Padding is a zero-padding stage inlined into the input cache, so
the DMA pads rows and columns itself.

The default schedule tiles the output into ``(cob channel blocks) × (yb rows) ×
(xb columns)`` tiles, one set of instructions per tile; the reduction over input
channel blocks runs in steps of ``icb`` blocks, each step loading its input window and
weights; virtual threads split the output channel (or row) tiles.  :func:`plan_conv2d`
picks the largest tiles whose buffers fit the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openvta.isa import Config

from .. import reference, te
from ..intrin import gemm_intrinsic
from ..ir import LoweringError
from ..layout import bias_layout, data_layout, kernel_layout, out_layout, pack_by_layout, unpack_data
from ..schedule import create_schedule
from .common import Operator, divisors, reference_tail, requantize_tail, schedule_tail

__all__ = ["Conv2dPlan", "plan_conv2d", "conv2d"]


@dataclass(frozen=True)
class Conv2dPlan:
    """Tile sizes: output channel blocks, rows, columns; input channel blocks per step."""

    cob: int
    yb: int
    xb: int
    icb: int
    vthreads: int
    split: str  # the axis the virtual threads divide: "co" or "y"


def plan_conv2d(cfg: Config, n: int, ci: int, co: int, hw: int, kernel: int, pad: int,
                stride: int, vthreads: int = 1) -> Conv2dPlan:
    """The tiling that fits ``cfg``'s buffers with the most work per tile."""
    ci_t, co_t = -(-ci // cfg.BLOCK_IN), -(-co // cfg.BLOCK_OUT)
    oh = (hw + 2 * pad - kernel) // stride + 1
    best = None
    for cob in divisors(co_t):
        for yb in divisors(oh):
            for xb in divisors(oh):
                for icb in divisors(ci_t):
                    for split in ("co", "y"):
                        parts = co_t // cob if split == "co" else oh // yb
                        if parts % vthreads:
                            continue
                        rows, cols = (yb - 1) * stride + kernel, (xb - 1) * stride + kernel
                        inp = icb * rows * cols * n
                        wgt = cob * icb * kernel * kernel
                        acc = cob * yb * xb * n + cob
                        if inp * vthreads > cfg.inp_depth or wgt * vthreads > cfg.wgt_depth \
                                or acc * vthreads > cfg.acc_depth:
                            continue
                        uops = _uops(cob, yb, xb, icb, kernel)
                        if uops > cfg.uop_depth // 2:
                            continue
                        # most output per tile, then the longest reduction step, then fewest uops
                        score = (cob * yb * xb, icb, -uops, split == "co")
                        if best is None or score > best[0]:
                            best = (score, Conv2dPlan(cob, yb, xb, icb, vthreads, split))
    if best is None:
        raise LoweringError("plan conv2d", f"no tiling of this conv2d fits the buffers with "
                            f"{vthreads} virtual threads")
    return best[1]


def _uops(cob: int, yb: int, xb: int, icb: int, kernel: int) -> int:
    """Micro-ops of the kernel after folding its two largest loops (rows and columns)."""
    loops = sorted([cob, yb, xb, icb, kernel, kernel], reverse=True)
    count = 1
    for extent in loops[2:]:
        count *= extent
    return count


def conv2d(cfg: Config, *, n: int = 1, ci: int, co: int, hw: int, kernel: int, pad: int = 0,
           stride: int = 1, shift: int | None = 8, bias: bool = True,
           clip: tuple[int, int] | None = (0, 127), vthreads: int = 1,
           plan: Conv2dPlan | None = None) -> Operator:
    """The fused conv2d layer (see the module docstring) with its default schedule."""
    for name, value in (("n", n), ("ci", ci), ("co", co), ("hw", hw), ("kernel", kernel),
                        ("stride", stride), ("vthreads", vthreads)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"conv2d {name} must be a positive integer, not {value!r}")
    if pad < 0 or hw + 2 * pad < kernel:
        raise ValueError(f"conv2d pad must be >= 0 and leave room for the kernel, not {pad!r}")
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    n_t, ci_t, co_t = -(-n // b), -(-ci // bi), -(-co // bo)
    oh = (hw + 2 * pad - kernel) // stride + 1
    plan = plan or plan_conv2d(cfg, n_t, ci, co, hw, kernel, pad, stride, vthreads)
    data = te.placeholder((n_t, ci_t, hw, hw, b, bi), "int8", "data")
    weight = te.placeholder((co_t, ci_t, kernel, kernel, bo, bi), "int8", "weight")
    bias_t = te.placeholder((co_t, b, bo), "int32", "bias") if bias else None
    padded = data
    if pad:
        size = hw + 2 * pad
        padded = te.compute(
            (n_t, ci_t, size, size, b, bi),
            lambda i, c, y, x, j, k: te.select(
                (te.less_equal(pad, y), te.less(y, hw + pad), te.less_equal(pad, x),
                 te.less(x, hw + pad)), data[i, c, y - pad, x - pad, j, k], 0),
            "data_pad")
    ic = te.reduce_axis(ci_t, "ic")
    kh, kw = te.reduce_axis(kernel, "kh"), te.reduce_axis(kernel, "kw")
    k = te.reduce_axis(bi, "k")
    acc = te.compute(
        (n_t, co_t, oh, oh, b, bo),
        lambda i, o, y, x, j, m: te.sum(
            padded[i, ic, y * stride + kh, x * stride + kw, j, k].astype("int32")
            * weight[o, ic, kh, kw, m, k].astype("int32"), axis=[ic, kh, kw, k]),
        "conv")
    stages, out = requantize_tail(acc, shift, bias_t, lambda i, o, y, x, j, m: (o, j, m), clip)
    s = create_schedule(out)
    i, o, y, x, j, m = s[out].axis
    o_o, o_i = s[out].split(o, factor=plan.cob)
    y_o, y_i = s[out].split(y, factor=plan.yb)
    x_o, x_i = s[out].split(x, factor=plan.xb)
    s[out].reorder(i, o_o, y_o, x_o, o_i, y_i, x_i, j, m)
    if plan.vthreads > 1:
        thread, rest = s[out].split(o_o if plan.split == "co" else y_o, nparts=plan.vthreads)
        s[out].reorder(thread, i)
        s[out].vthread(thread)
    s[out].pragma(o_i, "dma_copy")
    s[acc].set_scope("acc")
    s[acc].compute_at(s[out], x_o)
    schedule_tail(s, out, stages, x_o)
    cached = s.cache_read(padded, "inp", [acc])
    wcached = s.cache_read(weight, "wgt", [acc])
    if pad:
        s[padded].compute_inline()
    if bias_t is not None:
        bcached = s.cache_read(bias_t, "acc", [t for t in stages if t.name == "bias_add"])
        s[bcached].compute_at(s[out], x_o)
        s[bcached].pragma(s[bcached].leaf[0], "dma_copy")
    ci_, co_, yc, xc, jc, mc = s[acc].axis
    ic_, kh_, kw_, k_ = s[acc].reduce_axis
    ic_o, ic_i = s[acc].split(ic_, factor=plan.icb)
    s[acc].reorder(ic_o, ic_i, kh_, kw_, ci_, co_, yc, xc, jc, mc, k_)
    for cache in (cached, wcached):
        s[cache].compute_at(s[acc], ic_o)
        s[cache].pragma(s[cache].leaf[0], "dma_copy")
    s[acc].tensorize(jc, gemm_intrinsic(cfg))
    inputs = {"data": data, "weight": weight}
    layouts = {"data": data_layout(cfg), "weight": kernel_layout(cfg), "out": out_layout(cfg)}
    shapes: dict[str, tuple[int, ...]] = {"data": (n, ci, hw, hw), "weight": (co, ci, kernel, kernel),
                                          "out": (n, co, oh, oh)}
    if bias_t is not None:
        inputs["bias"] = bias_t
        layouts["bias"] = bias_layout(cfg)
        shapes["bias"] = (co,)

    def reference_fn(arrays: dict[str, np.ndarray]) -> np.ndarray:
        result = reference.conv2d_nchw(arrays["data"], arrays["weight"], stride, pad)
        return reference_tail(result, shift, arrays.get("bias"), clip)

    return Operator(
        name="conv2d", cfg=cfg, schedule=s, inputs=inputs, output=out, layouts=layouts,
        roles={"data": "input", "weight": "weight", "bias": "bias"},
        pack=lambda name, array: pack_by_layout(array, layouts[name], cfg),
        unpack=lambda packed: unpack_data(packed, n, co), reference=reference_fn,
        logical_shapes=shapes, ops=2 * n * oh * oh * kernel * kernel * co * ci, plan=plan)


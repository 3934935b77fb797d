"""conv2d on packed layouts, with its epilogue, and its default schedule.

``out = clip((conv2d(data, weight) >> shift) + bias, 0, 127)`` as int8 (docs/WORKLOADS.md),
then the stages of ``epilogue`` (an :class:`~openvta.compiler.epilogue.Epilogue`)
before the cast; data ``NCHW{B}n{BI}c``, kernel ``OIHW{BO}o{BI}i``, bias and channel
operands ``C{B}n{BO}c``, out and tensor operands ``NCHW{B}n{BO}c``.  Padding is a
zero-padding stage inlined into the input cache, so the DMA pads rows and columns itself;
a strided 1×1 conv2d reads its input through an inlined stage that keeps every
``stride``-th row, so the DMA loads only the rows it uses (a LOAD whose row stride is
``stride`` rows).  Columns are still loaded whole, as one contiguous DMA row per input
row: a DMA row per used column would cost a row's overhead per element.

The default schedule tiles the output into ``(cob channel blocks) × (yb rows) ×
(xb columns)`` tiles, one set of instructions per tile; the reduction over input
channel blocks runs in steps of ``icb`` blocks, each step loading its input window and
weights; virtual threads split the output channel (or row) tiles.  :func:`plan_conv2d`
picks the fewest tiles whose buffers fit the configuration; a tile size need not divide
its loop (the last tile is a smaller tail tile), except on the axis the threads split.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from openvta.isa import Config

from .. import reference, te
from ..epilogue import Epilogue, apply_epilogue
from ..intrin import gemm_intrinsic
from ..ir import LoweringError
from ..layout import data_layout, kernel_layout, out_layout, pack_by_layout, unpack_data
from ..schedule import create_schedule
from ..workloads import workload
from .common import (MAX_PAD, Operator, check_tensors, divisors, epilogue_operands, operator_epilogue,
                     tile_sizes)
from .params import Param, check_params, describe_params, tail_params
from .tail import build_tail, operand_placeholders, schedule_tail

__all__ = ["CONV2D_PARAMS", "Conv2dPlan", "check_conv2d_plan", "conv2d", "conv2d_layer", "conv2d_reference",
           "conv2d_used_input_elems", "plan_conv2d"]


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
                stride: int, vthreads: int = 1, *, epilogue: Epilogue | None = None) -> Conv2dPlan:
    """The tiling that fits ``cfg``'s buffers with the fewest tiles.

    Tile sizes need not divide their loop (the last tile is a smaller tail tile), except
    on the axis the virtual threads split.

    The accumulator holds the output tile, a tile per tensor operand of ``epilogue`` and a
    channel block per channel operand (at least one: room for a bias when ``epilogue`` is
    None).
    """
    ci_t, co_t = -(-ci // cfg.BLOCK_IN), -(-co // cfg.BLOCK_OUT)
    oh = (hw + 2 * pad - kernel) // stride + 1
    best = None
    for cob in tile_sizes(co_t):
        for yb in tile_sizes(oh):
            for xb in tile_sizes(oh):
                for icb in divisors(ci_t):
                    for split in ("co", "y"):
                        plan = Conv2dPlan(cob, yb, xb, icb, vthreads, split)
                        if check_conv2d_plan(cfg, n, ci, co, hw, kernel, pad, stride, plan, epilogue=epilogue):
                            continue
                        # fewest tiles (most output per tile), the longest reduction step, fewest uops
                        count = -(-co_t // cob) * -(-oh // yb) * -(-oh // xb)
                        score = (-count, icb, -_uops(cob, yb, xb, icb, kernel), split == "co")
                        if best is None or score > best[0]:
                            best = (score, plan)
    if best is None:
        raise LoweringError("plan conv2d", f"no tiling of this conv2d fits the buffers with "
                            f"{vthreads} virtual threads")
    return best[1]


def check_conv2d_plan(cfg: Config, n: int, ci: int, co: int, hw: int, kernel: int, pad: int,
                      stride: int, plan: Conv2dPlan, *, epilogue: Epilogue | None = None) -> list[str]:
    """Why ``plan`` cannot tile this conv2d on ``cfg``: one ``"<kind>: <detail>"`` per reason.

    The one truth of what fits, for :func:`plan_conv2d` and the tuner's schedule space
    (``openvta.tune``): the threads split whole tiles of their axis; the input window,
    weights and accumulator tiles of every thread fit their buffers; the kernel's
    micro-ops fit half the micro-op buffer.  ``n`` is in batch tiles, ``ci`` and ``co``
    in channels.  An empty list: the plan fits (lowering may still refuse it).

    Examples
    --------
    >>> from openvta.isa import preset
    >>> plan = Conv2dPlan(cob=4, yb=8, xb=8, icb=2, vthreads=2, split="co")
    >>> for reason in check_conv2d_plan(preset("tiny"), 1, 16, 16, 8, 3, 1, 1, plan):
    ...     print(reason)
    thread split: 2 threads must divide the whole tiles of co (4 in tiles of 4)
    inp buffer overflow: 2 threads × 200 = 400 entries > 256
    acc buffer overflow: 2 threads × 260 = 520 entries > 256
    """
    co_t = -(-co // cfg.BLOCK_OUT)
    tiles, vectors = _acc_operands(epilogue)
    oh = (hw + 2 * pad - kernel) // stride + 1
    threads = plan.vthreads
    reasons = []
    # the threads split whole tiles of their axis: it has no tail tile
    extent, size = (co_t, plan.cob) if plan.split == "co" else (oh, plan.yb)
    if threads > 1 and (extent % size or (extent // size) % threads):
        reasons.append(f"thread split: {threads} threads must divide the whole tiles of {plan.split} "
                       f"({extent} in tiles of {size})")
    rows, cols = _window(plan.yb, kernel, stride), (plan.xb - 1) * stride + kernel
    needs = {"inp": (plan.icb * rows * cols * n, cfg.inp_depth),
             "wgt": (plan.cob * plan.icb * kernel * kernel, cfg.wgt_depth),
             "acc": (plan.cob * plan.yb * plan.xb * n * tiles + plan.cob * vectors, cfg.acc_depth)}
    for buffer, (entries, depth) in needs.items():
        if entries * threads > depth:
            reasons.append(f"{buffer} buffer overflow: {threads} thread{'s' * (threads > 1)} × {entries} "
                           f"= {entries * threads} entries > {depth}")
    uops = _uops(plan.cob, plan.yb, plan.xb, plan.icb, kernel)
    if uops > cfg.uop_depth // 2:
        reasons.append(f"micro-op buffer: {uops} micro-ops > {cfg.uop_depth // 2} (half the buffer)")
    return reasons


def _window(yb: int, kernel: int, stride: int) -> int:
    """Input rows a tile of ``yb`` output rows loads (a strided 1×1 conv2d: only those it uses)."""
    return yb if kernel == 1 else (yb - 1) * stride + kernel


def _acc_operands(epilogue: Epilogue | None) -> tuple[int, int]:
    """(output-shaped tiles, channel vectors) an epilogue keeps in the accumulator per tile."""
    if epilogue is None:
        return 1, 1
    return 1 + len(epilogue.tensor_operands), max(1, len(epilogue.channel_operands))


def _uops(cob: int, yb: int, xb: int, icb: int, kernel: int) -> int:
    """Micro-ops of the kernel after folding its two largest loops (rows and columns)."""
    loops = sorted([cob, yb, xb, icb, kernel, kernel], reverse=True)
    count = 1
    for extent in loops[2:]:
        count *= extent
    return count


def conv2d(cfg: Config, *, n: int = 1, ci: int, co: int, hw: int, kernel: int, pad: int = 0,
           stride: int = 1, shift: int | None = 8, bias: bool = True,
           clip: tuple[int, int] | None = (0, 127), epilogue: Epilogue | None = None,
           vthreads: int = 1, plan: Conv2dPlan | None = None) -> Operator:
    """The fused conv2d layer (see the module docstring) with its default schedule.

    The parameters are described in :data:`CONV2D_PARAMS` (``openvta compile conv2d --help``).

    Raises
    ------
    ValueError
        for a parameter outside its range (``"conv2d shift must be an integer in 0..31 or
        None, not 99"``), a kernel larger than the padded input, a pad not smaller than the
        kernel, an epilogue operand name that means two operands, or tensors that cannot
        fit the DRAM address space.
    LoweringError
        when no tiling fits the buffers with ``vthreads`` threads.
    """
    params = check_params(CONV2D_PARAMS, "conv2d", locals())
    if kernel > hw + 2 * pad:
        raise ValueError(f"conv2d kernel must fit the padded input (hw + 2*pad = {hw} + 2*{pad} = "
                         f"{hw + 2 * pad}), not {kernel}")
    if pad >= kernel:
        raise ValueError(f"conv2d pad must be less than the kernel ({kernel}), not {pad}")
    full = operator_epilogue("conv2d", shift, bias, clip, epilogue)
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    n_t, ci_t, co_t = -(-n // b), -(-ci // bi), -(-co // bo)
    oh = (hw + 2 * pad - kernel) // stride + 1
    data = te.placeholder((n_t, ci_t, hw, hw, b, bi), "int8", "data")
    weight = te.placeholder((co_t, ci_t, kernel, kernel, bo, bi), "int8", "weight")
    out_shape = (n_t, co_t, oh, oh, b, bo)
    check_tensors("conv2d", cfg, [data, weight, *operand_placeholders(full, out_shape, (co_t, b, bo)),
                                  te.placeholder(out_shape, "int8", "out")])
    plan = plan or plan_conv2d(cfg, n_t, ci, co, hw, kernel, pad, stride, vthreads, epilogue=full)
    padded = data
    rows_only = kernel == 1 and stride > 1  # pad < kernel: no padding
    if rows_only:
        # a strided 1×1 conv2d reads every stride-th row: the DMA loads only those
        padded = te.compute((n_t, ci_t, oh, hw, b, bi),
                            lambda i, c, y, x, j, k: data[i, c, y * stride, x, j, k], "data_rows")
    elif pad:
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
            padded[i, ic, y + kh if rows_only else y * stride + kh, x * stride + kw, j, k].astype("int32")
            * weight[o, ic, kh, kw, m, k].astype("int32"), axis=[ic, kh, kw, k]),
        "conv")
    tail = build_tail(acc, full, lambda i, o, y, x, j, m: (o, j, m), (co_t, b, bo))
    out = tail.out
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
    cached = s.cache_read(padded, "inp", [acc])
    wcached = s.cache_read(weight, "wgt", [acc])
    if padded is not data:
        s[padded].compute_inline()
    schedule_tail(s, tail, x_o)
    ci_, co_, yc, xc, jc, mc = s[acc].axis
    ic_, kh_, kw_, k_ = s[acc].reduce_axis
    ic_o, ic_i = s[acc].split(ic_, factor=plan.icb)
    s[acc].reorder(ic_o, ic_i, kh_, kw_, ci_, co_, yc, xc, jc, mc, k_)
    for cache in (cached, wcached):
        s[cache].compute_at(s[acc], ic_o)
        s[cache].pragma(s[cache].leaf[0], "dma_copy")
    s[acc].tensorize(jc, gemm_intrinsic(cfg))
    extra_layouts, extra_roles, extra_shapes = epilogue_operands(cfg, full, co, (n, co, oh, oh), out_layout(cfg))
    inputs = {"data": data, "weight": weight, **tail.operands}
    layouts = {"data": data_layout(cfg), "weight": kernel_layout(cfg), "out": out_layout(cfg), **extra_layouts}
    shapes: dict[str, tuple[int, ...]] = {"data": (n, ci, hw, hw), "weight": (co, ci, kernel, kernel),
                                          "out": (n, co, oh, oh), **extra_shapes}
    return Operator(
        name="conv2d", cfg=cfg, schedule=s, inputs=inputs, output=out, layouts=layouts,
        roles={"data": "input", "weight": "weight", **extra_roles},
        pack=lambda name, array: pack_by_layout(array, layouts[name], cfg),
        unpack=lambda packed: unpack_data(packed, n, co), reference_fn=conv2d_reference,
        logical_shapes=shapes, ops=2 * n * oh * oh * kernel * kernel * co * ci, params=params,
        plan=plan, epilogue=full,
        used_elems={"data": conv2d_used_input_elems(n, ci, hw, kernel, pad, stride)})


def conv2d_used_input_elems(n: int, ci: int, hw: int, kernel: int, pad: int, stride: int) -> int:
    """Elements of the ``(n, ci, hw, hw)`` input that some output of the conv2d reads.

    Rows and columns are independent: an input row is read if a kernel row of some output
    row lands on it (padding rows are not input).  A 1×1 stride-2 conv2d reads every other
    row and column, a quarter of its input.

    Examples
    --------
    >>> conv2d_used_input_elems(1, 64, 56, kernel=1, pad=0, stride=2) * 4 == 1 * 64 * 56 * 56
    True
    >>> conv2d_used_input_elems(1, 1, 5, kernel=3, pad=1, stride=1)
    25
    >>> conv2d_used_input_elems(1, 1, 6, kernel=2, pad=0, stride=3)   # rows and columns 0, 1, 3, 4
    16
    """
    oh = (hw + 2 * pad - kernel) // stride + 1
    lines = {y * stride + k - pad for y in range(oh) for k in range(kernel)}
    used = sum(1 for line in lines if 0 <= line < hw)
    return n * ci * used * used


def conv2d_reference(inputs: Mapping[str, np.ndarray], params: Mapping[str, Any]) -> np.ndarray:
    """numpy: the fused conv2d layer on logical ``data``, ``weight`` (and ``bias``) arrays."""
    result = reference.conv2d_nchw(inputs["data"], inputs["weight"], params["stride"], params["pad"])
    epilogue = operator_epilogue("conv2d", params["shift"], params["bias"], params["clip"], params["epilogue"])
    return apply_epilogue(result, epilogue, inputs)


def conv2d_layer(name: str) -> dict[str, int]:
    """The shape parameters of the ResNet-18 layer ``name`` (``"resnet18.C5"`` or ``"C5"``)."""
    wl = workload(name)
    return {"n": wl.batch, "ci": wl.in_channels, "co": wl.out_channels, "hw": wl.hw,
            "kernel": wl.kernel, "pad": wl.pad, "stride": wl.stride}


#: The parameters of :func:`conv2d` (defaults and types from its signature).
CONV2D_PARAMS = describe_params(
    conv2d,
    Param("n", "batch size N of the data (NCHW)", low=1, flag="batch", shape=True, sample=(1, 2)),
    Param("ci", "input channels C", low=1, shape=True, sample=(1, 24)),
    Param("co", "output channels (filters)", low=1, shape=True, sample=(1, 24)),
    Param("hw", "height = width of the data", low=1, shape=True, sample=(1, 12)),
    Param("kernel", "kernel height = width", low=1, shape=True, sample=(1, 5)),
    Param("pad", "zero padding on each side (less than the kernel)", low=0, high=MAX_PAD,
          shape=True, sample=(0, 3)),
    Param("stride", "stride in height and width", low=1, shape=True, sample=(1, 3)),
    *tail_params("channel"),
    Param("vthreads", "virtual threads (latency hiding): they split the output channels or rows",
          low=1, sample=(1, 3)),
    Param("plan", "tile sizes (a Conv2dPlan) instead of plan_conv2d's choice", cli=False),
)


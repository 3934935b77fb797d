"""conv2d on packed layouts, with its epilogue, and its default schedule.

``out = clip((conv2d(data, weight) >> shift) + bias, 0, 127)`` as int8 (docs/WORKLOADS.md),
then the stages of ``epilogue`` (an :class:`~openvta.compiler.epilogue.Epilogue`)
before the cast; data ``NCHW{B}n{BI}c``, kernel ``OIHW{BO}o{BI}i``, bias and channel
operands ``C{B}n{BO}c``, out and tensor operands ``NCHW{B}n{BO}c``.  The data is ``hw`` rows of
``w`` columns (``w`` None: square), the kernel square, with one stride and one padding.  Padding is a
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
its loop (the last tile is a smaller tail tile).  On the axis the threads split, the
threads must divide the tiles, and a tail tile is used only when no plan without one
fits: it is then the last thread's last tile (an uneven split).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from dataclasses import dataclass
from typing import Any

import numpy as np

from openvta.isa import Config, timing_for
from openvta.runtime import Role

from .. import reference, te
from ..epilogue import Epilogue, apply_epilogue
from ..intrin import gemm_intrinsic
from ..ir import LoweringError
from ..layout import data_layout, kernel_layout, out_layout, pack_by_layout, unpack_data
from ..schedule import create_schedule
from ..workloads import RESNET18, workload
from .common import (MAX_PAD, Operator, acc_operands, benchmark_operands, buffer_refusals, check_pad_value,
                     check_tensors, check_window, divisors, epilogue_operands, operator_epilogue, out_size,
                     pad_value_param, padded_data, params_epilogue, schedule_conv_tiles, thread_split_refusals,
                     tile_sizes)
from .costs import INT32_BYTES, THREADS, common_features, loaded_lines, tiles
from .descriptor import (Anchor, Knob, Knobs, Matched, OperatorDescriptor, OperatorKind, PlanSpace, default_knobs,
                         plan_knobs)
from .params import Param, check_params, describe_params, tail_params
from .tail import build_tail, operand_placeholders, schedule_tail

__all__ = ["CONV2D_PARAMS", "Conv2dPlan", "DESCRIPTOR", "check_conv2d_plan", "conv2d", "conv2d_layer",
           "conv2d_reference", "conv2d_used_input_elems", "plan_conv2d"]


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
                stride: int, vthreads: int = 1, *, epilogue: Epilogue | None = None,
                w: int | None = None) -> Conv2dPlan:
    """The tiling that fits ``cfg``'s buffers with the fewest tiles.

    ``hw`` is the data's height, ``w`` its width (None: ``hw``, square data).

    Tile sizes need not divide their loop (the last tile is a smaller tail tile).  On the
    axis the virtual threads split, a plan whose tiles divide the axis is chosen when one
    fits; only when none does may that axis have a tail tile, the last thread's last tile
    (``check_conv2d_plan(..., uneven=True)``).

    The accumulator holds the output tile, a tile per tensor operand of ``epilogue`` and a
    channel block per channel operand (at least one: room for a bias when ``epilogue`` is
    None).
    """
    for uneven in (False, True):
        plan = _best_plan(cfg, n, ci, co, hw, kernel, pad, stride, vthreads, epilogue, uneven, w)
        if plan is not None:
            return plan
    raise LoweringError("plan conv2d", _no_plan(cfg, n, ci, co, hw, kernel, pad, stride, vthreads, epilogue))


def _best_plan(cfg: Config, n: int, ci: int, co: int, hw: int, kernel: int, pad: int, stride: int, vthreads: int,
               epilogue: Epilogue | None, uneven: bool, w: int | None) -> Conv2dPlan | None:
    ci_t, co_t = -(-ci // cfg.BLOCK_IN), -(-co // cfg.BLOCK_OUT)
    oh, ow = out_size(hw, kernel, pad, stride), out_size(hw if w is None else w, kernel, pad, stride)
    best = None
    for cob in tile_sizes(co_t):
        for yb in tile_sizes(oh):
            for xb in tile_sizes(ow):
                for icb in divisors(ci_t):
                    for split in ("co", "y"):
                        plan = Conv2dPlan(cob, yb, xb, icb, vthreads, split)
                        if check_conv2d_plan(cfg, n, ci, co, hw, kernel, pad, stride, plan, epilogue=epilogue,
                                             uneven=uneven):
                            continue
                        # fewest tiles (most output per tile), the longest reduction step, fewest uops;
                        # on machine v2, the fewest estimated cycles first (docs/DECISIONS.md)
                        count = -(-co_t // cob) * -(-oh // yb) * -(-ow // xb)
                        cost = _estimate(cfg, n, ci_t, co_t, oh, ow, kernel, stride, plan) if cfg.has_drain else 0.0
                        score = (-cost, -count, icb, -_uops(cob, yb, xb, icb, kernel), split == "co")
                        if best is None or score > best[0]:
                            best = (score, plan)
    return None if best is None else best[1]


def _no_plan(cfg: Config, n: int, ci: int, co: int, hw: int, kernel: int, pad: int, stride: int, vthreads: int,
             epilogue: Epilogue | None) -> str:
    """Why no tiling fits: the refusals of the smallest tiles (on the split axis, the smallest
    the threads can split, unevenly if need be), on the axis that fares best — more tiles
    cannot help, so these are the real reasons."""
    co_t, oh = -(-co // cfg.BLOCK_OUT), out_size(hw, kernel, pad, stride)
    found = {}
    for split, extent in (("co", co_t), ("y", oh)):
        size = min((t for t in tile_sizes(extent) if -(-extent // t) % vthreads == 0), default=1)
        plan = Conv2dPlan(size if split == "co" else 1, size if split == "y" else 1, 1, 1, vthreads, split)
        found[split] = check_conv2d_plan(cfg, n, ci, co, hw, kernel, pad, stride, plan, epilogue=epilogue,
                                         uneven=True)
    if all(any(r.startswith("thread split") for r in reasons) for reasons in found.values()):
        return (f"no axis of this conv2d splits among {vthreads} virtual threads, evenly or with the "
                f"last thread taking the tail tile (output channels: {co_t} block{'s' * (co_t > 1)} of "
                f"{cfg.BLOCK_OUT}, rows: {oh})")
    reasons = min(found.values(), key=lambda r: (any(x.startswith("thread split") for x in r), len(r)))
    return (f"no tiling of this conv2d fits the buffers with {vthreads} virtual "
            f"thread{'s' * (vthreads > 1)}: {'; '.join(reasons)}")


def check_conv2d_plan(cfg: Config, n: int, ci: int, co: int, hw: int, kernel: int, pad: int,
                      stride: int, plan: Conv2dPlan, *, epilogue: Epilogue | None = None,
                      uneven: bool = False) -> list[str]:
    """Why ``plan`` cannot tile this conv2d on ``cfg``: one ``"<kind>: <detail>"`` per reason.

    The one truth of what fits, for :func:`plan_conv2d` and the tuner's schedule space
    (``openvta.tune``): the threads split whole tiles of their axis; the input window,
    weights and accumulator tiles of every thread fit their buffers; the kernel's
    micro-ops fit half the micro-op buffer.  ``n`` is in batch tiles, ``ci`` and ``co``
    in channels.  With ``uneven`` (only :func:`plan_conv2d`'s fallback: the tuner's space
    keeps the strict rule) the split axis may end in a tail tile, the last thread's last
    tile, as long as the threads divide its tiles.  An empty list: the plan fits (lowering
    may still refuse it).  ``hw`` is the data's height: the data's width changes nothing
    here (a tile's buffers hold its window whatever the width; the threads never split
    columns), so a rectangular conv2d's plan is checked with its height alone.

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
    tiles, vectors = acc_operands(epilogue)
    oh = out_size(hw, kernel, pad, stride)
    threads = plan.vthreads
    # the threads split whole tiles of their axis: it has no tail tile (uneven: but the last thread's)
    extent, size = (co_t, plan.cob) if plan.split == "co" else (oh, plan.yb)
    reasons = thread_split_refusals(threads, f"tiles of {plan.split}", extent, size, uneven)
    rows, cols = _window(plan.yb, kernel, stride), (plan.xb - 1) * stride + kernel
    needs = {"inp": (plan.icb * rows * cols * n, cfg.inp_depth),
             "wgt": (plan.cob * plan.icb * kernel * kernel, cfg.wgt_depth),
             "acc": (plan.cob * plan.yb * plan.xb * n * tiles + plan.cob * vectors, cfg.acc_depth)}
    reasons += buffer_refusals(needs, threads)
    uops = _uops(plan.cob, plan.yb, plan.xb, plan.icb, kernel)
    if uops > cfg.uop_depth // 2:
        reasons.append(f"micro-op buffer: {uops} micro-ops > {cfg.uop_depth // 2} (half the buffer)")
    return reasons


def _estimate(cfg: Config, n: int, ci_t: int, co_t: int, oh: int, ow: int, kernel: int, stride: int,
              plan: Conv2dPlan) -> float:
    """Cycles of ``plan`` as a pipeline of reduction steps (machine v2's default planner).

    Each step loads its input window (a DMA row per input row and channel block) and its
    weights, and runs its GEMM micro-ops (one per cycle); each tile drains its output (a
    DMA row per output row and channel block, after its descriptors' loads).  Bytes move
    at the bus rate, and every instruction and DMA row costs the overheads of
    :func:`openvta.isa.timing_for`.  The threads run in rounds, one step each: a round
    lasts the threads' GEMMs, or a GEMM and the loads its thread's next step waits for
    (one buffer slice per thread), or the loads of every thread, whichever is longest; the
    round that starts a tile waits for the thread's store too.  Threads whose inp and
    wgt slices fit twice load beside their own GEMM (the v2 pipeline's ``load_copies``).  It
    ranks plans; it does not predict cycles exactly.
    """
    t = timing_for(cfg)
    tiles = -(-co_t // plan.cob) * -(-oh // plan.yb) * -(-ow // plan.xb)
    steps = ci_t // plan.icb
    rows, cols = _window(plan.yb, kernel, stride), (plan.xb - 1) * stride + kernel
    row_cost = t.dma_row_cycles + t.request_cycles + t.dram_read_latency_cycles
    load = ((plan.icb * rows * cols * n * cfg.inp_elem_bytes
             + plan.cob * plan.icb * kernel * kernel * cfg.wgt_elem_bytes) / cfg.bus_bytes
            + (plan.icb * n + 1) * t.issue_cycles + (plan.icb * rows * n + plan.cob) * row_cost)
    gemm = plan.cob * plan.yb * plan.xb * n * plan.icb * kernel * kernel + t.gemm_pipeline_cycles + 2 * t.issue_cycles
    store_rows = plan.cob * n * plan.yb
    store = (plan.cob * plan.yb * plan.xb * n * cfg.out_elem_bytes / cfg.bus_bytes
             + plan.cob * n * t.issue_cycles + store_rows * (t.store_row_cycles + t.request_cycles
                                                               + t.dram_write_latency_cycles + 1)
             + _EPI_LOADS * (t.issue_cycles + row_cost + plan.cob * cfg.acc_elem_bytes / cfg.bus_bytes))
    # rounds of one step of every thread: a thread's next step waits for its loads, which
    # wait for its GEMM (one buffer slice per thread); a tile's first step for its store too
    v = plan.vthreads
    within = max(v * gemm, gemm + load, v * load)
    boundary = max(v * gemm, gemm + max(load, store), v * load, v * store)
    inp, wgt = plan.icb * rows * cols * n, plan.cob * plan.icb * kernel * kernel
    if 2 * v * inp <= cfg.inp_depth and 2 * v * wgt <= cfg.wgt_depth:
        # each thread's loads alternate between two copies of its slices (load_copies): a
        # step's loads run beside the thread's previous GEMM, a tile's beside its store
        within = max(v * gemm, v * load)
        boundary = max(v * gemm, gemm + store, v * load, v * store)
    return load + tiles / v * ((steps - 1) * within + boundary) + store


#: The descriptor loads a drained tile starts with, as :func:`_estimate` counts them (a
#: header and the four stages of a requantizing epilogue).
_EPI_LOADS = 5


def _window(yb: int, kernel: int, stride: int) -> int:
    """Input rows a tile of ``yb`` output rows loads (a strided 1×1 conv2d: only those it uses)."""
    return yb if kernel == 1 else (yb - 1) * stride + kernel


def _uops(cob: int, yb: int, xb: int, icb: int, kernel: int) -> int:
    """Micro-ops of the kernel after folding its two largest loops (rows and columns)."""
    loops = sorted([cob, yb, xb, icb, kernel, kernel], reverse=True)
    count = 1
    for extent in loops[2:]:
        count *= extent
    return count


def conv2d(cfg: Config, *, n: int = 1, ci: int, co: int, hw: int, w: int | None = None, kernel: int,
           pad: int = 0, stride: int = 1, pad_value: int | None = None, shift: int | None = 8, bias: bool = True,
           clip: tuple[int, int] | None = (0, 127), epilogue: Epilogue | None = None,
           vthreads: int = 1, plan: Conv2dPlan | None = None) -> Operator:
    """The fused conv2d layer (see the module docstring) with its default schedule.

    The parameters are described in :data:`CONV2D_PARAMS` (``openvta compile conv2d --help``).
    The data is ``hw`` rows of ``w`` columns (``w`` None or ``hw``: square, recorded as None).

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
    w, width = check_window("conv2d", hw, w, kernel, pad)
    value = check_pad_value("conv2d", pad_value)
    params["w"], params["pad_value"] = w, value or None  # (0 is None: left out of the kernel key)
    full = operator_epilogue("conv2d", shift, bias, clip, epilogue)
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    n_t, ci_t, co_t = -(-n // b), -(-ci // bi), -(-co // bo)
    oh, ow = out_size(hw, kernel, pad, stride), out_size(width, kernel, pad, stride)
    data = te.placeholder((n_t, ci_t, hw, width, b, bi), "int8", "data")
    weight = te.placeholder((co_t, ci_t, kernel, kernel, bo, bi), "int8", "weight")
    out_shape = (n_t, co_t, oh, ow, b, bo)
    check_tensors("conv2d", cfg, [data, weight, *operand_placeholders(full, out_shape, (co_t, b, bo)),
                                  te.placeholder(out_shape, "int8", "out")])
    plan = plan or plan_conv2d(cfg, n_t, ci, co, hw, kernel, pad, stride, vthreads, epilogue=full, w=w)
    rows_only = kernel == 1 and stride > 1  # pad < kernel: no padding
    # a strided 1×1 conv2d reads every stride-th row: the DMA loads only those
    padded = te.compute((n_t, ci_t, oh, width, b, bi), lambda i, c, y, x, j, k: data[i, c, y * stride, x, j, k],
                        "data_rows") if rows_only else padded_data(data, pad, value)
    ic = te.reduce_axis(ci_t, "ic")
    kh, kw = te.reduce_axis(kernel, "kh"), te.reduce_axis(kernel, "kw")
    k = te.reduce_axis(bi, "k")
    acc = te.compute(
        out_shape,
        lambda i, o, y, x, j, m: te.sum(
            padded[i, ic, y + kh if rows_only else y * stride + kh, x * stride + kw, j, k].astype("int32")
            * weight[o, ic, kh, kw, m, k].astype("int32"), axis=[ic, kh, kw, k]),
        "conv")
    tail = build_tail(acc, full, lambda i, o, y, x, j, m: (o, j, m), (co_t, b, bo))
    out = tail.out
    s = create_schedule(out)
    x_o = schedule_conv_tiles(s, out, acc, plan.cob, plan.yb, plan.xb, plan.vthreads, plan.split)
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
    extra_layouts, extra_roles, extra_shapes = epilogue_operands(cfg, full, co, (n, co, oh, ow), out_layout(cfg))
    inputs = {"data": data, "weight": weight, **tail.operands}
    layouts = {"data": data_layout(cfg), "weight": kernel_layout(cfg), "out": out_layout(cfg), **extra_layouts}
    shapes: dict[str, tuple[int, ...]] = {"data": (n, ci, hw, width), "weight": (co, ci, kernel, kernel),
                                          "out": (n, co, oh, ow), **extra_shapes}
    return Operator(
        name="conv2d", cfg=cfg, schedule=s, inputs=inputs, output=out, layouts=layouts,
        roles={"data": Role.INPUT, "weight": Role.WEIGHT, **extra_roles},
        pack=lambda name, array: pack_by_layout(array, layouts[name], cfg),
        unpack=lambda packed: unpack_data(packed, n, co), reference_fn=conv2d_reference,
        logical_shapes=shapes, ops=2 * n * oh * ow * kernel * kernel * co * ci, params=params,
        plan=plan, epilogue=full,
        used_elems={"data": conv2d_used_input_elems(n, ci, hw, kernel, pad, stride, w=w)})


def conv2d_used_input_elems(n: int, ci: int, hw: int, kernel: int, pad: int, stride: int, *,
                            w: int | None = None) -> int:
    """Elements of the ``(n, ci, hw, w)`` input (``w`` None: ``hw``) that some output of the
    conv2d reads.

    Rows and columns are independent: an input row is read if a kernel row of some output
    row lands on it (padding rows are not input), a column likewise.  A 1×1 stride-2 conv2d
    reads every other row and column, a quarter of its input.

    Examples
    --------
    >>> conv2d_used_input_elems(1, 64, 56, kernel=1, pad=0, stride=2) * 4 == 1 * 64 * 56 * 56
    True
    >>> conv2d_used_input_elems(1, 1, 5, kernel=3, pad=1, stride=1)
    25
    >>> conv2d_used_input_elems(1, 1, 6, kernel=2, pad=0, stride=3)   # rows and columns 0, 1, 3, 4
    16
    >>> conv2d_used_input_elems(1, 1, 6, kernel=2, pad=0, stride=3, w=8)   # columns 0, 1, 3, 4, 6, 7
    24
    """
    def used(size: int) -> int:
        lines = {y * stride + k - pad for y in range(out_size(size, kernel, pad, stride)) for k in range(kernel)}
        return sum(1 for line in lines if 0 <= line < size)

    return n * ci * used(hw) * used(hw if w is None else w)


def conv2d_reference(inputs: Mapping[str, np.ndarray], params: Mapping[str, Any]) -> np.ndarray:
    """numpy: the fused conv2d layer on logical ``data``, ``weight`` (and ``bias``) arrays."""
    result = reference.conv2d_nchw(inputs["data"], inputs["weight"], params["stride"], params["pad"],
                                   pad_value=params.get("pad_value") or 0)
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
    Param("hw", "height of the data (and its width unless w is given)", low=1, shape=True, sample=(1, 12)),
    Param("w", "width of the data when it differs from its height (None: hw, square data)", low=1,
          shape=True, sample=(1, 12)),
    Param("kernel", "kernel height = width", low=1, shape=True, sample=(1, 5)),
    Param("pad", "zero padding on each side (less than the kernel)", low=0, high=MAX_PAD,
          shape=True, sample=(0, 3)),
    Param("stride", "stride in height and width", low=1, shape=True, sample=(1, 3)),
    Param("pad_value", "what the padding holds: 0 (None), or -128 (data whose zero point is -128)",
          low=-128, high=0, shape=True),
    *tail_params("channel"),
    Param("vthreads", "virtual threads (latency hiding): they split the output channels or rows",
          low=1, sample=(1, 3)),
    Param("plan", "tile sizes (a Conv2dPlan) instead of plan_conv2d's choice", cli=False),
)



# -- the descriptor: tuning space, cost features, graph matcher -------------------------------------


#: The whole epilogue :func:`conv2d` computes for its parameters (``epilogue`` may be JSON).
conv2d_epilogue = params_epilogue("conv2d")


def conv2d_dims(cfg: Config, params: Mapping[str, Any]) -> dict[str, int]:
    """Tile counts of a conv2d: batch, input and output channel blocks, output rows and columns;
    the data's width (``w``, else ``hw``)."""
    p = params
    width = p["hw"] if p.get("w") is None else p["w"]
    return {"n_t": tiles(p["n"], cfg.BATCH), "ci_t": tiles(p["ci"], cfg.BLOCK_IN),
            "co_t": tiles(p["co"], cfg.BLOCK_OUT), "oh": out_size(p["hw"], p["kernel"], p["pad"], p["stride"]),
            "ow": out_size(width, p["kernel"], p["pad"], p["stride"]), "width": width}


def _knobs(cfg: Config, params: Mapping[str, Any]) -> tuple[Knob, ...]:
    dims = conv2d_dims(cfg, params)
    return (Knob("cob", tuple(tile_sizes(dims["co_t"]))), Knob("yb", tuple(tile_sizes(dims["oh"]))),
            Knob("xb", tuple(tile_sizes(dims["ow"]))), Knob("icb", tuple(divisors(dims["ci_t"]))),
            Knob("vthreads", THREADS), Knob("split", ("co", "y")))


def _shape(cfg: Config, params: Mapping[str, Any]) -> tuple[Config, int, int, int, int, int, int, int]:
    p = params
    return (cfg, tiles(p["n"], cfg.BATCH), p["ci"], p["co"], p["hw"], p["kernel"], p["pad"], p["stride"])


def _check(cfg: Config, params: Mapping[str, Any], knobs: Knobs) -> list[str]:
    return check_conv2d_plan(*_shape(cfg, params), Conv2dPlan(**knobs), epilogue=conv2d_epilogue(params))


def _default(cfg: Config, params: Mapping[str, Any]) -> Knobs | None:
    """The default plan of a kernel the graph level compiles: on machine v2 the one of 1 or
    2 virtual threads with the fewer estimated cycles (:func:`_estimate`), else 1 thread."""
    shape, epilogue, w = _shape(cfg, params), conv2d_epilogue(params), params.get("w")
    if not cfg.has_drain:
        return default_knobs(lambda: plan_conv2d(*shape, epilogue=epilogue, w=w))
    best: tuple[float, Knobs] | None = None
    d = conv2d_dims(cfg, params)
    for threads in (1, 2):
        knobs = default_knobs(partial(plan_conv2d, *shape, threads, epilogue=epilogue, w=w))
        if knobs is None:
            continue
        plan = Conv2dPlan(**knobs)
        cost = _estimate(cfg, shape[1], d["ci_t"], d["co_t"], d["oh"], d["ow"], params["kernel"], params["stride"],
                         plan)
        if best is None or cost < best[0]:
            best = (cost, knobs)
    return None if best is None else best[1]


def _features(cfg: Config, params: Mapping[str, Any], k: Mapping[str, Any]) -> dict[str, float]:
    d = conv2d_dims(cfg, params)
    kernel, stride, v = params["kernel"], params["stride"], k["vthreads"]
    tc, ty, tx = tiles(d["co_t"], k["cob"]), tiles(d["oh"], k["yb"]), tiles(d["ow"], k["xb"])
    count, steps = d["n_t"] * tc * ty * tx, d["ci_t"] // k["icb"]  # one batch tile per tile
    inp = k["icb"] * _window(k["yb"], kernel, stride) * ((k["xb"] - 1) * stride + kernel) * d["n_t"]
    rows_only = kernel == 1 and stride > 1
    rows = loaded_lines(d["oh"], k["yb"], 1 if rows_only else kernel, stride, params["pad"], params["hw"],
                        rows_only)
    cols = loaded_lines(d["ow"], k["xb"], kernel, stride, params["pad"], d["width"], False)
    wgt = k["cob"] * k["icb"] * kernel * kernel
    acc = k["cob"] * k["yb"] * k["xb"] * d["n_t"]
    uops = _uops(k["cob"], k["yb"], k["xb"], k["icb"], kernel)
    inp_elem, wgt_elem = cfg.BATCH * cfg.BLOCK_IN, cfg.BLOCK_OUT * cfg.BLOCK_IN
    out_elems = d["co_t"] * d["oh"] * d["ow"] * d["n_t"] * cfg.BATCH * cfg.BLOCK_OUT
    epilogue = conv2d_epilogue(params)
    channels, stages = len(epilogue.channel_operands), len(epilogue.stages)
    moved = {"inp": tc * d["ci_t"] * d["n_t"] * rows * cols * inp_elem,
             "wgt": d["n_t"] * ty * tx * d["ci_t"] * d["co_t"] * kernel * kernel * wgt_elem,
             "acc": d["n_t"] * ty * tx * d["co_t"] * channels * cfg.BATCH * cfg.BLOCK_OUT * INT32_BYTES,
             "out": out_elems}
    macs = d["n_t"] * cfg.BATCH * d["ci_t"] * cfg.BLOCK_IN * out_elems // cfg.BATCH * kernel * kernel
    waste = tc * ty * tx * k["cob"] * k["yb"] * k["xb"] / (d["co_t"] * d["oh"] * d["ow"])
    occupancy = {"inp": v * inp / cfg.inp_depth, "wgt": v * wgt / cfg.wgt_depth,
                 "acc": v * acc / cfg.acc_depth, "uop": uops / cfg.uop_depth}
    return {"cob": k["cob"], "yb": k["yb"], "xb": k["xb"], "icb": k["icb"], "split_co": float(k["split"] == "co"),
            "ci_t": d["ci_t"], "co_t": d["co_t"], "oh": d["oh"], "ow": d["ow"], "kernel": kernel, "stride": stride,
            "tiles": count, "steps": steps, "tail_waste": waste, "uops": uops,
            "loads_per_step_bytes": inp * inp_elem + wgt * wgt_elem,
            **common_features(cfg, macs, out_elems // (cfg.BATCH * cfg.BLOCK_OUT) * stages, moved,
                              count * (3 * steps + 6), v, occupancy)}


def _match(anchor: Anchor, cfg: Config) -> Matched | None:
    """A Conv (one group) of int8 data and constant int8 weights: a square kernel, one stride and
    padding (the data may be rectangular)."""
    if anchor.op != "Conv" or int(anchor.attrs.get("group", 1)) != 1:
        return None  # a grouped convolution is another operator's
    if anchor.dtypes[0] != "int8":
        return f"not quantized ({anchor.dtypes[0]} data)"
    if not anchor.constant[1]:
        return "its weight is not a constant"
    strides = tuple(anchor.attrs.get("strides", (1, 1)))
    pads = tuple(anchor.attrs.get("pads", (0, 0, 0, 0)))
    _, channels, height, width = anchor.shapes[0]
    out_ch, _, kh, kw = anchor.shapes[1]
    if kh != kw or strides[0] != strides[1] or len(set(pads)) != 1:
        return "the accelerator's conv2d needs a square kernel, one stride and the same padding on every side"
    if 2 * channels < cfg.BLOCK_IN:
        return f"{channels} input channels fill less than half of a {cfg.BLOCK_IN}-lane input block"
    return ({"n": cfg.BATCH, "ci": channels, "co": out_ch, "hw": height, **({} if width == height else {"w": width}),
             "kernel": kh, "pad": pads[0], "stride": strides[0], **pad_value_param(anchor.attrs),
             "bias": len(anchor.shapes) > 2},
            f"int8 conv2d {kh}x{kw}/{strides[0]}, {channels}->{out_ch} channels")


DESCRIPTOR = OperatorDescriptor(
    kind=OperatorKind.CONV2D,
    summary="clip((conv2d(data, weight) >> shift) + bias, 0, 127) as int8 (NCHW, OIHW)",
    factory=conv2d, params=CONV2D_PARAMS, reference=conv2d_reference, random_operands=benchmark_operands,
    epilogue=conv2d_epilogue,
    plans=PlanSpace(names=("cob", "yb", "xb", "icb", "vthreads", "split"), keywords=("vthreads", "plan"),
                    knobs=_knobs, check=_check, default=_default,
                    kwargs=lambda k: {"vthreads": k["vthreads"], "plan": Conv2dPlan(**k)},
                    of_operator=plan_knobs(Conv2dPlan), features=_features),
    match=_match,
    layers=tuple(f"resnet18.{name}" for name in RESNET18), layer=conv2d_layer,
    example={"hw": 8, "ci": 8, "co": 8, "kernel": 3, "pad": 1})

"""depthwise_conv2d: one filter per channel (or per group of a few channels), as
block-diagonal GEMMs, with its epilogue.

``out[c] = clip((conv2d(data[c], weight[c]) >> shift) + bias[c], 0, 127)`` as int8 for every
channel ``c`` (ONNX's Conv with ``group`` equal to the channels and one filter per group,
MobileNet's depthwise layers), then the stages of ``epilogue`` before the cast; data
``NCHW{B}n{BI}c``, out and tensor operands ``NCHW{B}n{BO}c``, bias and channel operands
``C{B}n{BO}c``.  With ``group_size = c > 1`` it is a grouped convolution of ``C/c`` groups of
``c`` channels in and ``c`` out (ShuffleNet's, ResNeXt's), ``c`` dividing ``BLOCK_IN``.  The data is
``hw`` rows of ``w`` columns (``w`` None: square), the kernel square, as conv2d's.

The mapping: the GEMM core multiplies a ``[B][BI]`` input tile by a ``[BO][BI]`` weight
tile, so channel block ``c``'s taps are weight tiles that are diagonal — ``weight[c, kh,
kw, m, k]`` is the filter's tap of channel ``c·BO + m`` where ``m = k``, zero elsewhere
(for groups of ``c`` channels: ``c×c`` blocks on the diagonal) — and output channel block
``c`` reads input channel block ``c`` (there is no reduction over channel blocks, since a
group never straddles one).  The kernel ``(C, c, KH, KW)`` is packed into that layout,
``O1HW{BO}o{BI}i`` (shape ``(C/BO, KH, KW, BO, BI)``), by :func:`pack_depthwise_kernel`.
A GEMM cycle does ``c·BI`` useful multiplications of ``BO·BI``: the taps are few and the
layer is cheap, and this mapping needs no change of the machine (``BLOCK_IN`` must equal
``BLOCK_OUT``).

The default schedule tiles the output into ``(cob channel blocks) × (yb rows) × (xb
columns)`` tiles, each loading its input window and its taps once; virtual threads split
the channel (or row) tiles; padding is the DMA's, as conv2d's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from openvta.isa import Config
from openvta.runtime import Role, ceil_div

from .. import reference, te
from ..epilogue import Epilogue, apply_epilogue
from ..intrin import gemm_intrinsic
from ..ir import LoweringError
from ..layout import LayoutKind, data_layout, out_layout, pack_by_layout, register_layout, unpack_data
from ..schedule import create_schedule
from .common import (MAX_PAD, Operator, acc_operands, benchmark_operands, buffer_refusals, check_pad_value,
                     check_tensors, check_window, epilogue_operands, operator_epilogue, out_size, pad_value_param,
                     padded_data, params_epilogue, schedule_conv_tiles, thread_split_refusals, tile_sizes)
from .conv2d import conv2d_used_input_elems
from .costs import INT32_BYTES, THREADS, common_features, loaded_lines, tiles
from .descriptor import (Anchor, Knob, Knobs, Matched, OperatorDescriptor, OperatorKind, PlanSpace, default_knobs,
                         plan_knobs)
from .params import Param, check_params, describe_params, tail_params
from .tail import build_tail, operand_placeholders, schedule_tail

__all__ = ["DEPTHWISE_PARAMS", "DESCRIPTOR", "DepthwisePlan", "check_depthwise_plan", "depthwise_conv2d",
           "depthwise_kernel_layout", "depthwise_reference", "pack_depthwise_kernel", "plan_depthwise"]


# -- the kernel's layout ----------------------------------------------------------------------------


def depthwise_kernel_layout(cfg: Config) -> str:
    """``"O1HW16o16i"``: a ``(C, c, KH, KW)`` kernel (``c`` channels per group: 1, depthwise)
    as block-diagonal weight tiles."""
    return f"O1HW{cfg.BLOCK_OUT}o{cfg.BLOCK_IN}i"


def _same_group(bo: int, group_size: int) -> np.ndarray:
    """``[m, k]``: output lane ``m`` and input lane ``k`` of a block are in one group."""
    lane = np.arange(bo) // group_size
    return lane[:, None] == lane[None, :]


def pack_depthwise_kernel(w: np.ndarray, cfg: Config) -> np.ndarray:
    """Pack a ``(C, c, KH, KW)`` kernel of groups of ``c`` channels (``c`` dividing
    ``BLOCK_OUT``; 1: depthwise) into block-diagonal tiles ``(C/BO, KH, KW, BO, BI)``: tap
    ``[o, kh, kw, m, k]`` is ``w[o·BO + m, k mod c, kh, kw]`` where lanes ``m`` and ``k``
    are in one group, zero elsewhere.

    Examples
    --------
    >>> from openvta.isa import preset
    >>> packed = pack_depthwise_kernel(np.arange(1, 6, dtype=np.int8).reshape(5, 1, 1, 1), preset("tiny"))
    >>> packed.shape, packed[1, 0, 0].tolist()
    ((2, 1, 1, 4, 4), [[5, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    >>> pack_depthwise_kernel(np.arange(1, 9, dtype=np.int8).reshape(4, 2, 1, 1), preset("tiny"))[0, 0, 0].tolist()
    [[1, 2, 0, 0], [3, 4, 0, 0], [0, 0, 5, 6], [0, 0, 7, 8]]
    """
    w = np.asarray(w)
    bo = cfg.BLOCK_OUT
    if w.ndim != 4 or bo % w.shape[1] or w.shape[0] % w.shape[1]:
        raise ValueError(f"depthwise kernel must have shape (C, c, KH, KW) with c dividing C and {bo}, "
                         f"not {w.shape}")
    channels, group_size, kh, kw = w.shape
    taps = np.zeros((ceil_div(channels, bo) * bo, group_size, kh, kw), w.dtype)
    taps[:channels] = w
    blocks = taps.reshape(-1, bo, group_size, kh, kw).transpose(0, 3, 4, 1, 2)  # (C/BO, KH, KW, BO, c)
    lanes = np.arange(bo) % group_size
    full = blocks[..., lanes]  # (C/BO, KH, KW, BO, BI): input lane k reads the group's channel k mod c
    return np.where(_same_group(bo, group_size), full, np.zeros((), w.dtype))


def _unpack_depthwise_kernel(packed: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    packed = np.asarray(packed)
    bo, group_size = packed.shape[-2], shape[1]
    first = (np.arange(bo) // group_size) * group_size  # the first input lane of each lane's group
    lanes = first[:, None] + np.arange(group_size)[None, :]  # (BO, c)
    taps = np.take_along_axis(packed, np.broadcast_to(lanes, packed.shape[:-1] + (group_size,)), axis=-1)
    return taps.transpose(0, 3, 4, 1, 2).reshape(-1, group_size, *taps.shape[1:3])[: shape[0]]


register_layout(LayoutKind("O1HW", pack_depthwise_kernel, _unpack_depthwise_kernel,
                           lambda shape, bo, bi: (ceil_div(shape[0], bo), shape[2], shape[3], bo, bi)))


# -- the plan ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DepthwisePlan:
    """Tile sizes: channel blocks, rows, columns; threads and the axis they split."""

    cob: int
    yb: int
    xb: int
    vthreads: int
    split: str  # the axis the virtual threads divide: "co" or "y"


def _window(size: int, kernel: int, stride: int) -> int:
    return (size - 1) * stride + kernel


def _uops(cob: int, yb: int, xb: int, kernel: int) -> int:
    """Micro-ops of the kernel after folding its two largest loops."""
    loops = sorted([cob, yb, xb, kernel, kernel], reverse=True)
    return int(np.prod(loops[2:]))


def check_depthwise_plan(cfg: Config, n: int, channels: int, hw: int, kernel: int, pad: int, stride: int,
                         plan: DepthwisePlan, *, epilogue: Epilogue | None = None,
                         uneven: bool = False) -> list[str]:
    """Why ``plan`` cannot tile this depthwise layer on ``cfg`` (``"<kind>: <detail>"`` each;
    empty: it fits): the planner's and the tuner's one truth.  ``n`` is in batch tiles.
    With ``uneven`` (only :func:`plan_depthwise`'s fallback) the split axis may end in a
    tail tile, the last thread's last tile, as long as the threads divide its tiles.  ``hw`` is
    the data's height; its width changes nothing here (a tile's buffers hold its window, and
    the threads never split columns).

    >>> from openvta.isa import preset
    >>> for reason in check_depthwise_plan(preset("tiny"), 1, 8, 8, 3, 1, 1, DepthwisePlan(2, 8, 8, 2, "co")):
    ...     print(reason)
    thread split: 2 threads must divide the whole tiles of co (2 in tiles of 2)
    inp buffer overflow: 2 threads × 200 = 400 entries > 256
    acc buffer overflow: 2 threads × 130 = 260 entries > 256
    """
    c_t = ceil_div(channels, cfg.BLOCK_OUT)
    oh = out_size(hw, kernel, pad, stride)
    operands, vectors = acc_operands(epilogue)
    threads = plan.vthreads
    extent, size = (c_t, plan.cob) if plan.split == "co" else (oh, plan.yb)
    reasons = thread_split_refusals(threads, f"tiles of {plan.split}", extent, size, uneven)
    window = _window(plan.yb, kernel, stride) * _window(plan.xb, kernel, stride)
    needs = {"inp": (plan.cob * window * n, cfg.inp_depth), "wgt": (plan.cob * kernel * kernel, cfg.wgt_depth),
             "acc": (plan.cob * plan.yb * plan.xb * n * operands + plan.cob * vectors, cfg.acc_depth)}
    reasons += buffer_refusals(needs, threads)
    uops = _uops(plan.cob, plan.yb, plan.xb, kernel)
    if uops > cfg.uop_depth // 2:
        reasons.append(f"micro-op buffer: {uops} micro-ops > {cfg.uop_depth // 2} (half the buffer)")
    return reasons


def plan_depthwise(cfg: Config, n: int, channels: int, hw: int, kernel: int, pad: int, stride: int,
                   vthreads: int = 1, *, epilogue: Epilogue | None = None, w: int | None = None) -> DepthwisePlan:
    """The tiling that fits ``cfg``'s buffers with the fewest tiles (then the fewest micro-ops);
    a tail tile on the axis the threads split (the last thread's) only when no plan without
    one fits.  ``hw`` is the data's height, ``w`` its width (None: ``hw``)."""
    c_t = ceil_div(channels, cfg.BLOCK_OUT)
    oh, ow = out_size(hw, kernel, pad, stride), out_size(hw if w is None else w, kernel, pad, stride)
    for uneven in (False, True):
        best = None
        for cob in tile_sizes(c_t):
            for yb in tile_sizes(oh):
                for xb in tile_sizes(ow):
                    for split in ("co", "y"):
                        plan = DepthwisePlan(cob, yb, xb, vthreads, split)
                        if check_depthwise_plan(cfg, n, channels, hw, kernel, pad, stride, plan, epilogue=epilogue,
                                                uneven=uneven):
                            continue
                        count = -(-c_t // cob) * -(-oh // yb) * -(-ow // xb)
                        score = (-count, -_uops(cob, yb, xb, kernel), split == "co")
                        if best is None or score > best[0]:
                            best = (score, plan)
        if best is not None:
            return best[1]
    reasons = min((check_depthwise_plan(cfg, n, channels, hw, kernel, pad, stride,
                                        DepthwisePlan(1, 1, 1, vthreads, split), epilogue=epilogue)
                   for split in ("co", "y")), key=len)
    raise LoweringError("plan depthwise_conv2d", f"no tiling of this depthwise conv2d fits with {vthreads} "
                        f"virtual thread{'s' * (vthreads > 1)}: {'; '.join(reasons)}")


# -- the operator -----------------------------------------------------------------------------------


def depthwise_conv2d(cfg: Config, *, n: int = 1, channels: int, hw: int, w: int | None = None, kernel: int,
                     pad: int = 0, stride: int = 1, pad_value: int | None = None, group_size: int = 1,
                     shift: int | None = 8, bias: bool = True,
                     clip: tuple[int, int] | None = (0, 127), epilogue: Epilogue | None = None,
                     vthreads: int = 1, plan: DepthwisePlan | None = None) -> Operator:
    """The fused depthwise conv2d layer (module docstring) with its default schedule.

    The parameters are described in :data:`DEPTHWISE_PARAMS`.  The data is ``hw`` rows of ``w``
    columns (``w`` None or ``hw``: square, recorded as None).

    Raises
    ------
    ValueError
        for a parameter outside its range, a kernel larger than the padded input, a pad not
        smaller than the kernel, a configuration whose ``BLOCK_IN`` is not its
        ``BLOCK_OUT``, a ``group_size`` that does not divide the channels and ``BLOCK_IN``,
        or tensors that cannot fit the DRAM address space.
    LoweringError
        when no tiling fits the buffers with ``vthreads`` threads.
    """
    params = check_params(DEPTHWISE_PARAMS, "depthwise_conv2d", locals())
    if cfg.BLOCK_IN != cfg.BLOCK_OUT:
        raise ValueError(f"depthwise_conv2d needs BLOCK_IN = BLOCK_OUT (diagonal weight tiles), not "
                         f"{cfg.BLOCK_IN} and {cfg.BLOCK_OUT}")
    w, width = check_window("depthwise_conv2d", hw, w, kernel, pad)
    value = check_pad_value("depthwise_conv2d", pad_value)
    params["w"], params["pad_value"] = w, value or None  # (0 is None: left out of the kernel key)
    if channels % group_size or cfg.BLOCK_IN % group_size:
        raise ValueError(f"depthwise_conv2d group_size must divide the {channels} channels and BLOCK_IN "
                         f"({cfg.BLOCK_IN}), not {group_size}")
    full = operator_epilogue("depthwise_conv2d", shift, bias, clip, epilogue)
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    n_t, c_t = ceil_div(n, b), ceil_div(channels, bo)
    oh, ow = out_size(hw, kernel, pad, stride), out_size(width, kernel, pad, stride)
    data = te.placeholder((n_t, c_t, hw, width, b, bi), "int8", "data")
    weight = te.placeholder((c_t, kernel, kernel, bo, bi), "int8", "weight")
    out_shape = (n_t, c_t, oh, ow, b, bo)
    check_tensors("depthwise_conv2d", cfg, [data, weight, *operand_placeholders(full, out_shape, (c_t, b, bo)),
                                            te.placeholder(out_shape, "int8", "out")])
    plan = plan or plan_depthwise(cfg, n_t, channels, hw, kernel, pad, stride, vthreads, epilogue=full, w=w)
    padded = padded_data(data, pad, value)
    kh, kw, k = te.reduce_axis(kernel, "kh"), te.reduce_axis(kernel, "kw"), te.reduce_axis(bi, "k")
    acc = te.compute(
        out_shape,
        lambda i, o, y, x, j, m: te.sum(
            padded[i, o, y * stride + kh, x * stride + kw, j, k].astype("int32")
            * weight[o, kh, kw, m, k].astype("int32"), axis=[kh, kw, k]),
        "depthwise")
    tail = build_tail(acc, full, lambda i, o, y, x, j, m: (o, j, m), (c_t, b, bo))
    out = tail.out
    s = create_schedule(out)
    x_o = schedule_conv_tiles(s, out, acc, plan.cob, plan.yb, plan.xb, plan.vthreads, plan.split)
    cached, wcached = s.cache_read(padded, "inp", [acc]), s.cache_read(weight, "wgt", [acc])
    if padded is not data:
        s[padded].compute_inline()
    schedule_tail(s, tail, x_o)
    ia, oa, ya, xa, ja, ma = s[acc].axis
    kh_, kw_, k_ = s[acc].reduce_axis
    s[acc].reorder(kh_, kw_, ia, oa, ya, xa, ja, ma, k_)
    for cache in (cached, wcached):
        s[cache].compute_at(s[out], x_o)
        s[cache].pragma(s[cache].leaf[0], "dma_copy")
    s[acc].tensorize(ja, gemm_intrinsic(cfg))
    extra_layouts, extra_roles, extra_shapes = epilogue_operands(cfg, full, channels, (n, channels, oh, ow),
                                                                 out_layout(cfg))
    layouts = {"data": data_layout(cfg), "weight": depthwise_kernel_layout(cfg), "out": out_layout(cfg),
               **extra_layouts}
    shapes: dict[str, tuple[int, ...]] = {"data": (n, channels, hw, width),
                                          "weight": (channels, group_size, kernel, kernel),
                                          "out": (n, channels, oh, ow), **extra_shapes}
    return Operator(
        name="depthwise_conv2d", cfg=cfg, schedule=s, inputs={"data": data, "weight": weight, **tail.operands},
        output=out, layouts=layouts, roles={"data": Role.INPUT, "weight": Role.WEIGHT, **extra_roles},
        pack=lambda name, array: pack_by_layout(array, layouts[name], cfg),
        unpack=lambda packed: unpack_data(packed, n, channels), reference_fn=depthwise_reference,
        logical_shapes=shapes, ops=2 * n * oh * ow * kernel * kernel * channels * group_size, params=params, plan=plan,
        epilogue=full, used_elems={"data": conv2d_used_input_elems(n, channels, hw, kernel, pad, stride, w=w)})


def depthwise_reference(inputs: Mapping[str, np.ndarray], params: Mapping[str, Any]) -> np.ndarray:
    """numpy: the fused depthwise (grouped) layer on logical ``data``, ``weight`` ``(C, c, KH, KW)``
    (and ``bias``)."""
    data, weight = inputs["data"], inputs["weight"]
    c = weight.shape[1]
    result = np.concatenate([reference.conv2d_nchw(data[:, g:g + c], weight[g:g + c], params["stride"],
                                                   params["pad"], pad_value=params.get("pad_value") or 0)
                             for g in range(0, data.shape[1], c)], axis=1)
    return apply_epilogue(result, depthwise_epilogue(params), inputs)


#: The parameters of :func:`depthwise_conv2d` (defaults and types from its signature).
DEPTHWISE_PARAMS = describe_params(
    depthwise_conv2d,
    Param("n", "batch size N of the data (NCHW)", low=1, flag="batch", shape=True, sample=(1, 2)),
    Param("channels", "channels C (one filter each)", low=1, shape=True, sample=(1, 24)),
    Param("hw", "height of the data (and its width unless w is given)", low=1, shape=True, sample=(1, 12)),
    Param("w", "width of the data when it differs from its height (None: hw, square data)", low=1,
          shape=True, sample=(1, 12)),
    Param("kernel", "kernel height = width", low=1, shape=True, sample=(1, 5)),
    Param("pad", "zero padding on each side (less than the kernel)", low=0, high=MAX_PAD, shape=True,
          sample=(0, 3)),
    Param("stride", "stride in height and width", low=1, shape=True, sample=(1, 2)),
    Param("pad_value", "what the padding holds: 0 (None), or -128 (data whose zero point is -128)",
          low=-128, high=0, shape=True),
    Param("group_size", "channels per group (1: depthwise; a divisor of BLOCK_IN: a grouped convolution of "
          "channels/group_size groups)", low=1, shape=True, sample=(1, 1)),
    *tail_params("channel"),
    Param("vthreads", "virtual threads (latency hiding): they split the channels or rows", low=1, sample=(1, 3)),
    Param("plan", "tile sizes (a DepthwisePlan) instead of plan_depthwise's choice", cli=False),
)


# -- the descriptor: tuning space, cost features, graph matcher -------------------------------------


#: The whole epilogue :func:`depthwise_conv2d` computes for its parameters (``epilogue`` may be JSON).
depthwise_epilogue = params_epilogue("depthwise_conv2d")


def _dims(cfg: Config, params: Mapping[str, Any]) -> dict[str, int]:
    p = params
    width = p["hw"] if p.get("w") is None else p["w"]
    return {"n_t": tiles(p["n"], cfg.BATCH), "c_t": tiles(p["channels"], cfg.BLOCK_OUT),
            "oh": out_size(p["hw"], p["kernel"], p["pad"], p["stride"]),
            "ow": out_size(width, p["kernel"], p["pad"], p["stride"]), "width": width}


def _shape(cfg: Config, params: Mapping[str, Any]) -> tuple[Config, int, int, int, int, int, int]:
    p = params
    return (cfg, tiles(p["n"], cfg.BATCH), p["channels"], p["hw"], p["kernel"], p["pad"], p["stride"])


def _knobs(cfg: Config, params: Mapping[str, Any]) -> tuple[Knob, ...]:
    d = _dims(cfg, params)
    return (Knob("cob", tuple(tile_sizes(d["c_t"]))), Knob("yb", tuple(tile_sizes(d["oh"]))),
            Knob("xb", tuple(tile_sizes(d["ow"]))), Knob("vthreads", THREADS), Knob("split", ("co", "y")))


def _check(cfg: Config, params: Mapping[str, Any], knobs: Knobs) -> list[str]:
    return check_depthwise_plan(*_shape(cfg, params), DepthwisePlan(**knobs), epilogue=depthwise_epilogue(params))


def _default(cfg: Config, params: Mapping[str, Any]) -> Knobs | None:
    return default_knobs(lambda: plan_depthwise(*_shape(cfg, params), epilogue=depthwise_epilogue(params),
                                                w=params.get("w")))


def _features(cfg: Config, params: Mapping[str, Any], k: Mapping[str, Any]) -> dict[str, float]:
    d = _dims(cfg, params)
    kernel, stride, pad, hw, v = params["kernel"], params["stride"], params["pad"], params["hw"], k["vthreads"]
    tc, ty, tx = tiles(d["c_t"], k["cob"]), tiles(d["oh"], k["yb"]), tiles(d["ow"], k["xb"])
    count = d["n_t"] * tc * ty * tx
    inp = k["cob"] * _window(k["yb"], kernel, stride) * _window(k["xb"], kernel, stride) * d["n_t"]
    rows = loaded_lines(d["oh"], k["yb"], kernel, stride, pad, hw, False)
    cols = loaded_lines(d["ow"], k["xb"], kernel, stride, pad, d["width"], False)
    wgt, acc = k["cob"] * kernel * kernel, k["cob"] * k["yb"] * k["xb"] * d["n_t"]
    uops = _uops(k["cob"], k["yb"], k["xb"], kernel)
    vector = cfg.BATCH * cfg.BLOCK_OUT
    out_elems = d["c_t"] * d["oh"] * d["ow"] * d["n_t"] * vector
    epilogue = depthwise_epilogue(params)
    channels, stages = len(epilogue.channel_operands), len(epilogue.stages)
    moved = {"inp": d["c_t"] * d["n_t"] * rows * cols * cfg.BATCH * cfg.BLOCK_IN,
             "wgt": d["n_t"] * ty * tx * d["c_t"] * kernel * kernel * cfg.BLOCK_OUT * cfg.BLOCK_IN,
             "acc": d["n_t"] * ty * tx * d["c_t"] * channels * vector * INT32_BYTES, "out": out_elems}
    # the GEMM core's MACs, diagonal tiles included: what bounds its cycles
    macs = out_elems // vector * kernel * kernel * cfg.BATCH * cfg.BLOCK_IN * cfg.BLOCK_OUT
    occupancy = {"inp": v * inp / cfg.inp_depth, "wgt": v * wgt / cfg.wgt_depth, "acc": v * acc / cfg.acc_depth,
                 "uop": uops / cfg.uop_depth}
    return {"cob": k["cob"], "yb": k["yb"], "xb": k["xb"], "split_co": float(k["split"] == "co"),
            "c_t": d["c_t"], "oh": d["oh"], "ow": d["ow"], "kernel": kernel, "stride": stride, "tiles": count,
            "uops": uops,
            **common_features(cfg, macs, out_elems // vector * stages, moved, count * 9, v, occupancy)}


def _match(anchor: Anchor, cfg: Config) -> Matched | None:
    """A Conv of groups of ``c`` channels in and out (``c`` dividing ``BLOCK_IN``; 1: depthwise),
    int8, a square kernel, one stride and padding (the data may be rectangular)."""
    if anchor.op != "Conv" or int(anchor.attrs.get("group", 1)) == 1:
        return None
    _, channels, height, width = anchor.shapes[0]
    out_ch, per_group, kh, kw = anchor.shapes[1]
    group = int(anchor.attrs["group"])
    if anchor.dtypes[0] != "int8":
        return f"not quantized ({anchor.dtypes[0]} data)"
    if not anchor.constant[1]:
        return "its weight is not a constant"
    if out_ch != channels:
        per = f"{per_group} channel{'s' * (per_group > 1)}"
        return (f"a grouped convolution with {out_ch // group} filters per group of {per} runs on the CPU (the "
                "accelerator's keep the channels)")
    if cfg.BLOCK_IN % per_group:
        return (f"grouped convolution (group={group}) of {per_group} channels per group runs on the CPU (the "
                f"accelerator's group sizes divide BLOCK_IN, {cfg.BLOCK_IN})")
    strides = tuple(anchor.attrs.get("strides", (1, 1)))
    pads = tuple(anchor.attrs.get("pads", (0, 0, 0, 0)))
    if kh != kw or strides[0] != strides[1] or len(set(pads)) != 1:
        return "the accelerator's depthwise conv2d needs a square kernel, one stride and the same padding on every side"
    if cfg.BLOCK_IN != cfg.BLOCK_OUT:
        return f"depthwise conv2d needs BLOCK_IN = BLOCK_OUT, not {cfg.BLOCK_IN} and {cfg.BLOCK_OUT}"
    what = f"{channels} channels" if per_group == 1 else f"{group} groups of {per_group} channels"
    return ({"n": cfg.BATCH, "channels": channels, "hw": height, **({} if width == height else {"w": width}),
             "kernel": kh, "pad": pads[0], "stride": strides[0], **pad_value_param(anchor.attrs),
             "group_size": per_group, "bias": len(anchor.shapes) > 2},
            f"int8 {'depthwise' if per_group == 1 else 'grouped'} conv2d {kh}x{kw}/{strides[0]}, {what}")


DESCRIPTOR = OperatorDescriptor(
    kind=OperatorKind.DEPTHWISE_CONV2D,
    summary="clip((depthwise conv2d(data, weight) >> shift) + bias, 0, 127) as int8 (NCHW, (C, c, KH, KW): "
            "groups of c channels, 1 for depthwise)",
    factory=depthwise_conv2d, params=DEPTHWISE_PARAMS, reference=depthwise_reference,
    random_operands=benchmark_operands, epilogue=depthwise_epilogue,
    plans=PlanSpace(names=("cob", "yb", "xb", "vthreads", "split"), keywords=("vthreads", "plan"),
                    knobs=_knobs, check=_check, default=_default,
                    kwargs=lambda k: {"vthreads": k["vthreads"], "plan": DepthwisePlan(**k)},
                    of_operator=plan_knobs(DepthwisePlan), features=_features),
    match=_match,
    example={"channels": 8, "hw": 6, "kernel": 3, "pad": 1})

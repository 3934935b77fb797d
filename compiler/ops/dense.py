"""dense (a fully connected layer) on packed layouts, and element-wise requantization.

``dense``: ``out = clip((data · weightᵀ >> shift) + bias, 0, 127)`` as int8, data
``NC{B}n{BI}c`` (``[N][I]`` in inp tiles), weight ``OI{BO}o{BI}i``, out
``NC{B}n{BO}c``.  ``elementwise``: the same tail alone on an int32 tensor loaded into
the accumulator (``shift``, ``bias``, ``clip`` or ``relu`` — each optional).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openvta.isa import Config
from openvta.runtime import unpack_out

from .. import reference, te
from ..intrin import gemm_intrinsic
from ..ir import LoweringError
from ..layout import pack_by_layout
from ..schedule import create_schedule
from .common import Operator, divisors, reference_tail, requantize_tail, schedule_tail

__all__ = ["DensePlan", "plan_dense", "dense", "elementwise"]


@dataclass(frozen=True)
class DensePlan:
    nb: int
    ob: int
    kb: int
    vthreads: int


def plan_dense(cfg: Config, n_t: int, i_t: int, o_t: int, vthreads: int = 1) -> DensePlan:
    best = None
    for nb in divisors(n_t):
        for ob in divisors(o_t):
            if (o_t // ob) % vthreads:
                continue
            for kb in divisors(i_t):
                if vthreads * nb * kb > cfg.inp_depth or vthreads * ob * kb > cfg.wgt_depth \
                        or vthreads * (nb * ob + ob) > cfg.acc_depth or min(nb, ob) > cfg.uop_depth:
                    continue
                score = (nb * ob, kb)
                if best is None or score > best[0]:
                    best = (score, DensePlan(nb, ob, kb, vthreads))
    if best is None:
        raise LoweringError("plan dense", f"{vthreads} virtual threads must divide the {o_t} "
                            "output blocks and every tile must fit the buffers")
    return best[1]


def _formats(cfg: Config) -> dict[str, str]:
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    return {"data": f"NC{b}n{bi}c", "weight": f"OI{bo}o{bi}i", "bias": f"C{b}n{bo}c",
            "out": f"NC{b}n{bo}c"}


def dense(cfg: Config, *, batch: int, in_features: int, out_features: int, shift: int | None = 8,
          bias: bool = True, clip: tuple[int, int] | None = (0, 127), vthreads: int = 1,
          plan: DensePlan | None = None) -> Operator:
    """The dense layer (see the module docstring) with its default schedule."""
    for name, value in (("batch", batch), ("in_features", in_features),
                        ("out_features", out_features), ("vthreads", vthreads)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"dense {name} must be a positive integer, not {value!r}")
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    n_t, i_t, o_t = -(-batch // b), -(-in_features // bi), -(-out_features // bo)
    plan = plan or plan_dense(cfg, n_t, i_t, o_t, vthreads)
    data = te.placeholder((n_t, i_t, b, bi), "int8", "data")
    weight = te.placeholder((o_t, i_t, bo, bi), "int8", "weight")
    bias_t = te.placeholder((o_t, b, bo), "int32", "bias") if bias else None
    ko, k = te.reduce_axis(i_t, "ko"), te.reduce_axis(bi, "k")
    acc = te.compute((n_t, o_t, b, bo), lambda i, o, j, m: te.sum(
        data[i, ko, j, k].astype("int32") * weight[o, ko, m, k].astype("int32"), axis=[ko, k]),
        "dense")
    stages, out = requantize_tail(acc, shift, bias_t, lambda i, o, j, m: (o, j, m), clip)
    s = create_schedule(out)
    i, o, j, m = s[out].axis
    i_o, i_i = s[out].split(i, factor=plan.nb)
    o_o, o_i = s[out].split(o, factor=plan.ob)
    s[out].reorder(i_o, o_o, i_i, o_i, j, m)
    if plan.vthreads > 1:
        thread, o_o = s[out].split(o_o, nparts=plan.vthreads)
        s[out].reorder(thread, i_o)
        s[out].vthread(thread)
    s[out].pragma(i_i, "dma_copy")
    s[acc].set_scope("acc")
    s[acc].compute_at(s[out], o_o)
    schedule_tail(s, out, stages, o_o)
    if bias_t is not None:
        cached = s.cache_read(bias_t, "acc", [t for t in stages if t.name == "bias_add"])
        s[cached].compute_at(s[out], o_o)
    dcache, wcache = s.cache_read(data, "inp", [acc]), s.cache_read(weight, "wgt", [acc])
    ia, oa, ja, ma = s[acc].axis
    ko_, k_ = s[acc].reduce_axis
    ko_o, ko_i = s[acc].split(ko_, factor=plan.kb)
    s[acc].reorder(ko_o, ko_i, ia, oa, ja, ma, k_)
    for cache in (dcache, wcache):
        s[cache].compute_at(s[acc], ko_o)
        s[cache].pragma(s[cache].leaf[0], "dma_copy")
    s[acc].tensorize(ja, gemm_intrinsic(cfg))
    layouts = _formats(cfg)
    inputs = {"data": data, "weight": weight}
    shapes: dict[str, tuple[int, ...]] = {"data": (batch, in_features),
                                          "weight": (out_features, in_features),
                                          "out": (batch, out_features)}
    if bias_t is not None:
        inputs["bias"] = bias_t
        shapes["bias"] = (out_features,)

    def reference_fn(arrays: dict[str, np.ndarray]) -> np.ndarray:
        value = reference.dense(arrays["data"], arrays["weight"])
        return reference_tail(value, shift, arrays.get("bias"), clip)

    return Operator(
        name="dense", cfg=cfg, schedule=s, inputs=inputs, output=out, layouts=layouts,
        roles={"data": "input", "weight": "weight", "bias": "bias"},
        pack=lambda name, array: pack_by_layout(array, layouts[name], cfg),
        unpack=lambda packed: unpack_out(packed, batch, out_features), reference=reference_fn,
        logical_shapes=shapes, ops=2 * batch * in_features * out_features, plan=plan)


def elementwise(cfg: Config, *, batch: int, channels: int, shift: int | None = None,
                bias: bool = False, clip: tuple[int, int] | None = None, relu: bool = False,
                vthreads: int = 1, block: int = 0) -> Operator:
    """Requantize an int32 ``[batch][channels]`` tensor: shift, bias add, clip or relu, int8."""
    b, bo = cfg.BATCH, cfg.BLOCK_OUT
    n_t, c_t = -(-batch // b), -(-channels // bo)
    if relu:
        clip = (0, 127) if clip is None else clip
    block = block or max(d for d in divisors(c_t) if vthreads * (n_t * d + d) <= cfg.acc_depth)
    if c_t % (block * vthreads):
        raise LoweringError("elementwise", f"{vthreads} virtual threads must divide the "
                            f"{c_t // block} channel tiles")
    if shift is None and not bias and clip is None:
        raise LoweringError("elementwise", "nothing to compute: give a shift, a bias, clip or relu")
    data = te.placeholder((n_t, c_t, b, bo), "int32", "data")
    bias_t = te.placeholder((c_t, b, bo), "int32", "bias") if bias else None
    stages, out = requantize_tail(data, shift, bias_t, lambda i, c, j, m: (c, j, m), clip)
    s = create_schedule(out)
    i, c, j, m = s[out].axis
    c_o, c_i = s[out].split(c, factor=block)
    s[out].reorder(c_o, i, c_i, j, m)
    if vthreads > 1:
        thread, _ = s[out].split(c_o, nparts=vthreads)
        s[out].vthread(thread)
    at = s[out].leaf[s[out].leaf.index(i) - 1]
    cached = s.cache_read(data, "acc", [stages[0]])
    s[cached].compute_at(s[out], at)
    schedule_tail(s, out, stages, at)
    if bias_t is not None:
        bcached = s.cache_read(bias_t, "acc", [t for t in stages if t.name == "bias_add"])
        s[bcached].compute_at(s[out], at)
    layouts = {"data": f"NC{b}n{bo}c", "bias": f"C{b}n{bo}c", "out": f"NC{b}n{bo}c"}
    inputs = {"data": data} | ({"bias": bias_t} if bias_t is not None else {})
    shapes: dict[str, tuple[int, ...]] = {"data": (batch, channels), "out": (batch, channels)}
    if bias_t is not None:
        shapes["bias"] = (channels,)
    return Operator(
        name="elementwise", cfg=cfg, schedule=s, inputs=inputs, output=out, layouts=layouts,
        roles={"data": "input", "bias": "bias"},
        pack=lambda name, array: _pack_acc(array, name, cfg),
        unpack=lambda packed: unpack_out(packed, batch, channels),
        reference=lambda arrays: reference_tail(arrays["data"], shift, arrays.get("bias"), clip),
        logical_shapes=shapes, ops=0)


def _pack_acc(array: np.ndarray, name: str, cfg: Config) -> np.ndarray:
    from openvta.runtime import pack_acc

    from ..layout import pack_bias

    return pack_bias(array, cfg) if name == "bias" else pack_acc(array, cfg)


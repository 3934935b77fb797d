"""dense (a fully connected layer) on packed layouts, with its epilogue.

``out = clip((data · weightᵀ >> shift) + bias, 0, 127)`` as int8, then the stages of
``epilogue`` (:class:`~openvta.compiler.epilogue.Epilogue`) before the cast; data
``NC{B}n{BI}c`` (``[N][I]`` in inp tiles), weight ``OI{BO}o{BI}i``, bias and channel
operands ``C{B}n{BO}c``, out and tensor operands ``NC{B}n{BO}c``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from openvta.isa import Config
from openvta.runtime import Role, unpack_out

from .. import reference, te
from ..epilogue import Epilogue, apply_epilogue
from ..intrin import gemm_intrinsic
from ..ir import LoweringError
from ..layout import pack_by_layout
from ..schedule import Schedule, create_schedule
from ..workloads import DENSE, UnknownWorkloadError
from .common import (Operator, acc_operands, benchmark_operands, buffer_refusals, check_tensors, divisors,
                     epilogue_operands, operator_epilogue, params_epilogue, thread_split_refusals, tile_sizes)
from .costs import INT32_BYTES, THREADS, common_features, tiles
from .descriptor import (Anchor, Knob, Knobs, Matched, OperatorDescriptor, OperatorKind, PlanSpace, default_knobs,
                         plan_knobs)
from .params import Param, check_params, describe_params, tail_params
from .tail import Tail, build_tail, operand_placeholders, schedule_tail

__all__ = ["DENSE_PARAMS", "DESCRIPTOR", "DensePlan", "check_dense_plan", "dense", "dense_layer", "dense_reference",
           "plan_dense", "schedule_products"]


@dataclass(frozen=True)
class DensePlan:
    nb: int
    ob: int
    kb: int
    vthreads: int


def plan_dense(cfg: Config, n_t: int, i_t: int, o_t: int, vthreads: int = 1, *,
               epilogue: Epilogue | None = None) -> DensePlan:
    """The tiling that fits ``cfg``'s buffers with the fewest tiles (the last tile of a
    loop may be a smaller tail tile; on the output blocks the threads split, only when no
    plan without one fits: it is then the last thread's last tile).

    The accumulator holds the output tile, a tile per tensor operand of ``epilogue`` and a
    block per channel operand (at least one: room for a bias when ``epilogue`` is None).
    """
    for uneven in (False, True):
        best = None
        for nb in tile_sizes(n_t):
            for ob in tile_sizes(o_t):
                for kb in divisors(i_t):
                    plan = DensePlan(nb, ob, kb, vthreads)
                    if check_dense_plan(cfg, n_t, i_t, o_t, plan, epilogue=epilogue, uneven=uneven):
                        continue
                    score = (-(-(-n_t // nb) * -(-o_t // ob)), kb)  # fewest tiles, longest step
                    if best is None or score > best[0]:
                        best = (score, plan)
        if best is not None:
            return best[1]
    ob = min((t for t in tile_sizes(o_t) if -(-o_t // t) % vthreads == 0), default=1)
    reasons = check_dense_plan(cfg, n_t, i_t, o_t, DensePlan(1, ob, 1, vthreads), epilogue=epilogue, uneven=True)
    if any(r.startswith("thread split") for r in reasons):
        raise LoweringError("plan dense", f"{vthreads} virtual threads must divide the {o_t} output blocks, "
                            "evenly or with the last thread taking the tail tile")
    raise LoweringError("plan dense", f"no tiling of this dense layer fits the buffers with {vthreads} "
                        f"virtual thread{'s' * (vthreads > 1)}: {'; '.join(reasons)}")


def check_dense_plan(cfg: Config, n_t: int, i_t: int, o_t: int, plan: DensePlan, *,
                     epilogue: Epilogue | None = None, uneven: bool = False) -> list[str]:
    """Why ``plan`` cannot tile this dense layer on ``cfg``: one ``"<kind>: <detail>"`` per reason.

    The one truth of what fits, for :func:`plan_dense` and the tuner's schedule space
    (``openvta.tune``): the threads split whole output tiles; each thread's data, weight
    and accumulator tiles fit their buffers; a micro-op loop fits the micro-op buffer.
    Sizes are in tiles (batch, input and output blocks).  With ``uneven`` (only
    :func:`plan_dense`'s fallback: the tuner's space keeps the strict rule) the output
    blocks may end in a tail tile, the last thread's last tile, as long as the threads
    divide the tiles.  An empty list: the plan fits.

    Examples
    --------
    >>> from openvta.isa import preset
    >>> check_dense_plan(preset("tiny"), 1, 8, 6, DensePlan(1, 4, 8, 2))
    ['thread split: 2 threads must divide the whole output tiles (6 in tiles of 4)']
    """
    tiles, vectors = acc_operands(epilogue)
    nb, ob, kb, threads = plan.nb, plan.ob, plan.kb, plan.vthreads
    reasons = thread_split_refusals(threads, "output tiles", o_t, ob, uneven)
    needs = {"inp": (nb * kb, cfg.inp_depth), "wgt": (ob * kb, cfg.wgt_depth),
             "acc": (nb * ob * tiles + ob * vectors, cfg.acc_depth)}
    reasons += buffer_refusals(needs, threads)
    if min(nb, ob) > cfg.uop_depth:
        reasons.append(f"micro-op buffer: {min(nb, ob)} micro-ops > {cfg.uop_depth}")
    return reasons


def _formats(cfg: Config) -> dict[str, str]:
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    return {"data": f"NC{b}n{bi}c", "weight": f"OI{bo}o{bi}i", "bias": f"C{b}n{bo}c",
            "out": f"NC{b}n{bo}c"}


def dense(cfg: Config, *, batch: int, in_features: int, out_features: int, shift: int | None = 8,
          bias: bool = True, clip: tuple[int, int] | None = (0, 127), epilogue: Epilogue | None = None,
          vthreads: int = 1, plan: DensePlan | None = None) -> Operator:
    """The dense layer (see the module docstring) with its default schedule.

    The parameters are described in :data:`DENSE_PARAMS` (``openvta compile dense --help``).

    Raises
    ------
    ValueError
        for a parameter outside its range, an epilogue operand name that means two operands,
        or tensors that cannot fit the DRAM address space.
    LoweringError
        when ``vthreads`` does not divide the output blocks or no tiling fits the buffers.
    """
    params = check_params(DENSE_PARAMS, "dense", locals())
    full = operator_epilogue("dense", shift, bias, clip, epilogue)
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    n_t, i_t, o_t = -(-batch // b), -(-in_features // bi), -(-out_features // bo)
    data = te.placeholder((n_t, i_t, b, bi), "int8", "data")
    weight = te.placeholder((o_t, i_t, bo, bi), "int8", "weight")
    out_shape = (n_t, o_t, b, bo)
    check_tensors("dense", cfg, [data, weight, *operand_placeholders(full, out_shape, (o_t, b, bo)),
                                 te.placeholder(out_shape, "int8", "out")])
    plan = plan or plan_dense(cfg, n_t, i_t, o_t, vthreads, epilogue=full)
    s, out, tail = schedule_products(cfg, data, weight, full, plan, "dense")
    formats = _formats(cfg)
    extra_layouts, extra_roles, extra_shapes = epilogue_operands(cfg, full, out_features,
                                                                 (batch, out_features), formats["out"])
    layouts = {name: formats[name] for name in ("data", "weight", "out")} | extra_layouts
    inputs = {"data": data, "weight": weight, **tail.operands}
    shapes: dict[str, tuple[int, ...]] = {"data": (batch, in_features),
                                          "weight": (out_features, in_features),
                                          "out": (batch, out_features), **extra_shapes}
    return Operator(
        name="dense", cfg=cfg, schedule=s, inputs=inputs, output=out, layouts=layouts,
        roles={"data": Role.INPUT, "weight": Role.WEIGHT, **extra_roles},
        pack=lambda name, array: pack_by_layout(array, layouts[name], cfg),
        unpack=lambda packed: unpack_out(packed, batch, out_features), reference_fn=dense_reference,
        logical_shapes=shapes, ops=2 * batch * in_features * out_features, params=params, plan=plan,
        epilogue=full)


def schedule_products(cfg: Config, data: te.Tensor, weight: te.Tensor, full: Epilogue, plan: DensePlan,
                      name: str) -> tuple[Schedule, te.Tensor, Tail]:
    """The products ``data · weightᵀ`` with ``full`` after them, scheduled by ``plan``: data
    ``(*lead, N/B, I/BI, B, BI)``, weight ``(*lead, O/BO, I/BI, BO, BI)``; the leading axes
    (batch_matmul's heads) loop outermost, each a dense layer's schedule."""
    lead = len(data.shape) - 4
    i_t, bi = data.shape[lead + 1], data.shape[lead + 3]
    o_t, bo = weight.shape[lead], weight.shape[lead + 2]
    ko, k = te.reduce_axis(i_t, "ko"), te.reduce_axis(bi, "k")
    acc = te.compute((*data.shape[:lead + 1], o_t, data.shape[lead + 2], bo), lambda *x: te.sum(
        data[tuple(x[:lead + 1]) + (ko, x[lead + 2], k)].astype("int32")
        * weight[tuple(x[:lead]) + (x[lead + 1], ko, x[lead + 3], k)].astype("int32"), axis=[ko, k]), name)
    tail = build_tail(acc, full, lambda *x: tuple(x[lead + 1:]), (o_t, data.shape[lead + 2], bo))
    out = tail.out
    s = create_schedule(out)
    *heads, i, o, j, m = s[out].axis
    i_o, i_i = s[out].split(i, factor=plan.nb)
    o_o, o_i = s[out].split(o, factor=plan.ob)
    s[out].reorder(*heads, i_o, o_o, i_i, o_i, j, m)
    if plan.vthreads > 1:
        thread, o_o = s[out].split(o_o, nparts=plan.vthreads)
        s[out].reorder(*heads, thread, i_o)
        s[out].vthread(thread)
    s[out].pragma(i_i, "dma_copy")
    s[acc].set_scope("acc")
    s[acc].compute_at(s[out], o_o)
    schedule_tail(s, tail, o_o)
    dcache, wcache = s.cache_read(data, "inp", [acc]), s.cache_read(weight, "wgt", [acc])
    *ha, ia, oa, ja, ma = s[acc].axis
    ko_, k_ = s[acc].reduce_axis
    ko_o, ko_i = s[acc].split(ko_, factor=plan.kb)
    s[acc].reorder(ko_o, ko_i, *ha, ia, oa, ja, ma, k_)  # (one head at the caches' attach point)
    for cache in (dcache, wcache):
        s[cache].compute_at(s[acc], ko_o)
        s[cache].pragma(s[cache].leaf[0], "dma_copy")
    s[acc].tensorize(ja, gemm_intrinsic(cfg))
    return s, out, tail


def dense_reference(inputs: Mapping[str, np.ndarray], params: Mapping[str, Any]) -> np.ndarray:
    """numpy: the dense layer on logical ``data`` ``(N, I)``, ``weight`` ``(O, I)`` (and ``bias``)."""
    value = reference.dense(inputs["data"], inputs["weight"])
    epilogue = operator_epilogue("dense", params["shift"], params["bias"], params["clip"], params["epilogue"])
    return apply_epilogue(value, epilogue, inputs)


def dense_layer(name: str) -> dict[str, int]:
    """The shape of docs/WORKLOADS.md's dense layer ``name``, e.g. ``"dense_128x128x128"``."""
    for wl in DENSE:
        if wl.name == name:
            return {"batch": wl.batch, "in_features": wl.in_features, "out_features": wl.out_features}
    raise UnknownWorkloadError(f"dense layer must be one of {', '.join(w.name for w in DENSE)}, "
                               f"not {name!r}")


#: The parameters of :func:`dense` (defaults and types from its signature).
DENSE_PARAMS = describe_params(
    dense,
    Param("batch", "batch size N (rows of the data)", low=1, shape=True, sample=(1, 6)),
    Param("in_features", "input features I", low=1, flag="in", shape=True, sample=(1, 40)),
    Param("out_features", "output features O", low=1, flag="out", shape=True, sample=(1, 40)),
    *tail_params("feature"),
    Param("vthreads", "virtual threads (latency hiding): they split the output blocks",
          low=1, sample=(1, 3)),
    Param("plan", "tile sizes (a DensePlan) instead of plan_dense's choice", cli=False),
)


# -- the descriptor: tuning space, cost features, graph matcher -------------------------------------


#: The whole epilogue :func:`dense` computes for its parameters (``epilogue`` may be JSON).
dense_epilogue = params_epilogue("dense")


def dense_dims(cfg: Config, params: Mapping[str, Any]) -> dict[str, int]:
    """Tile counts of a dense layer: batch, input and output blocks."""
    return {"n_t": tiles(params["batch"], cfg.BATCH), "i_t": tiles(params["in_features"], cfg.BLOCK_IN),
            "o_t": tiles(params["out_features"], cfg.BLOCK_OUT)}


def _knobs(cfg: Config, params: Mapping[str, Any]) -> tuple[Knob, ...]:
    dims = dense_dims(cfg, params)
    return (Knob("nb", tuple(tile_sizes(dims["n_t"]))), Knob("ob", tuple(tile_sizes(dims["o_t"]))),
            Knob("kb", tuple(divisors(dims["i_t"]))), Knob("vthreads", THREADS))


def _check(cfg: Config, params: Mapping[str, Any], knobs: Knobs) -> list[str]:
    dims = dense_dims(cfg, params)
    return check_dense_plan(cfg, dims["n_t"], dims["i_t"], dims["o_t"], DensePlan(**knobs),
                            epilogue=dense_epilogue(params))


def _default(cfg: Config, params: Mapping[str, Any]) -> Knobs | None:
    dims = dense_dims(cfg, params)
    epilogue = dense_epilogue(params)
    return default_knobs(lambda: plan_dense(cfg, dims["n_t"], dims["i_t"], dims["o_t"], epilogue=epilogue))


def _features(cfg: Config, params: Mapping[str, Any], k: Mapping[str, Any]) -> dict[str, float]:
    d = dense_dims(cfg, params)
    v = k["vthreads"]
    tn, to = tiles(d["n_t"], k["nb"]), tiles(d["o_t"], k["ob"])
    count, steps = tn * to, d["i_t"] // k["kb"]
    inp_elem, wgt_elem = cfg.BATCH * cfg.BLOCK_IN, cfg.BLOCK_OUT * cfg.BLOCK_IN
    out_elems = d["n_t"] * d["o_t"] * cfg.BATCH * cfg.BLOCK_OUT
    epilogue = dense_epilogue(params)
    channels, stages = len(epilogue.channel_operands), len(epilogue.stages)
    # every tile of outputs loads its rows of data and its columns of weights (tails included)
    moved = {"inp": to * d["n_t"] * d["i_t"] * inp_elem, "wgt": tn * d["o_t"] * d["i_t"] * wgt_elem,
             "acc": tn * d["o_t"] * channels * cfg.BATCH * cfg.BLOCK_OUT * INT32_BYTES, "out": out_elems}
    macs = out_elems * d["i_t"] * cfg.BLOCK_IN
    occupancy = {"inp": v * k["nb"] * k["kb"] / cfg.inp_depth, "wgt": v * k["ob"] * k["kb"] / cfg.wgt_depth,
                 "acc": v * k["nb"] * k["ob"] / cfg.acc_depth, "uop": k["nb"] * k["ob"] / cfg.uop_depth}
    return {"nb": k["nb"], "ob": k["ob"], "kb": k["kb"], "n_t": d["n_t"], "i_t": d["i_t"], "o_t": d["o_t"],
            "tiles": count, "steps": steps, "uops": k["nb"] * k["ob"],
            **common_features(cfg, macs, out_elems // (cfg.BATCH * cfg.BLOCK_OUT) * stages, moved,
                              count * (3 * steps + 6), v, occupancy)}


def _match(anchor: Anchor, cfg: Config) -> Matched | None:
    """A Gemm of int8 data and a constant int8 ``(O, I)`` weight (transB=1), alpha = beta = 1,
    with no bias or a bias of one value per output feature."""
    if anchor.op != "Gemm":
        return None
    if anchor.dtypes[0] != "int8":
        return f"not quantized ({anchor.dtypes[0]} data)"
    if not anchor.constant[1]:
        return "its weight is not a constant"
    if int(anchor.attrs.get("transA", 0)) or not int(anchor.attrs.get("transB", 0)):
        return "dense needs transA=0 and transB=1 (legalize makes constant weights so)"
    if any(float(anchor.attrs.get(name, 1.0)) != 1.0 for name in ("alpha", "beta")):
        return "dense needs alpha = beta = 1"
    out_features, in_features = anchor.shapes[1]
    bias = len(anchor.shapes) > 2
    if bias and anchor.shapes[2] != (out_features,):
        return f"dense needs a bias of shape ({out_features},), not {anchor.shapes[2]}"
    if 2 * in_features < cfg.BLOCK_IN:
        return f"{in_features} input features fill less than half of a {cfg.BLOCK_IN}-lane input block"
    batch = cfg.BATCH
    if anchor.batched and not anchor.batched[0]:  # static rows (tokens): all of them in one program run
        batch = -(-anchor.shapes[0][0] // cfg.BATCH) * cfg.BATCH
    rows = f", {batch} rows a run" if batch > cfg.BATCH else ""
    return ({"batch": batch, "in_features": in_features, "out_features": out_features, "bias": bias},
            f"int8 dense, {in_features}->{out_features} features{rows}")


DESCRIPTOR = OperatorDescriptor(
    kind=OperatorKind.DENSE,
    summary="clip((data · weightᵀ >> shift) + bias, 0, 127) as int8 ((N, I), (O, I))",
    factory=dense, params=DENSE_PARAMS, reference=dense_reference, random_operands=benchmark_operands,
    epilogue=dense_epilogue,
    plans=PlanSpace(names=("nb", "ob", "kb", "vthreads"), keywords=("vthreads", "plan"),
                    knobs=_knobs, check=_check, default=_default,
                    kwargs=lambda k: {"vthreads": k["vthreads"], "plan": DensePlan(**k)},
                    of_operator=plan_knobs(DensePlan), features=_features),
    match=_match,
    layers=tuple(wl.name for wl in DENSE), layer=dense_layer,
    example={"batch": 2, "in_features": 20, "out_features": 12})

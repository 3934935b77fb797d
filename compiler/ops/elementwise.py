"""Element-wise requantization of int32 accumulators: shift, bias add, clip or relu, int8.

``out = clip((data >> shift) + bias, low, high)`` as int8 on an int32 ``[batch][channels]``
tensor loaded into the accumulator (``NC{B}n{BO}c``); each step is optional.  It is the
tail of :mod:`.conv2d` and :mod:`.dense` on its own, computed in place by the ALU.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from openvta.isa import INT8_MAX, Config
from openvta.isa.config import MAX_SHR_AMOUNT
from openvta.runtime import Role, pack_acc, unpack_out

from .. import te
from ..epilogue import Epilogue, apply_epilogue
from ..ir import LoweringError
from ..layout import pack_bias
from ..schedule import create_schedule
from .common import IMM_FIELD, Operator, check_tensors, divisors
from .costs import INT32_BYTES, THREADS, common_features, tiles
from .descriptor import Knob, Knobs, OperatorDescriptor, OperatorKind, PlanSpace
from .params import Param, check_params, describe_params
from .tail import build_tail, schedule_tail

__all__ = ["DESCRIPTOR", "ELEMENTWISE_PARAMS", "check_elementwise_block", "elementwise", "elementwise_operands",
           "elementwise_reference"]

#: ``relu`` is a clip to int8's non-negative half (ReLU, then saturation to int8).
RELU_CLIP = (0, INT8_MAX)


def elementwise(cfg: Config, *, batch: int, channels: int, shift: int | None = None,
                bias: bool = False, clip: tuple[int, int] | None = None, relu: bool = False,
                vthreads: int = 1, block: int = 0) -> Operator:
    """Requantize an int32 ``[batch][channels]`` tensor (see the module docstring).

    The parameters are described in :data:`ELEMENTWISE_PARAMS`.

    Raises
    ------
    ValueError
        for a parameter outside its range, both ``relu`` and ``clip``, nothing to compute,
        or tensors that cannot fit the DRAM address space.
    LoweringError
        when the virtual threads do not divide the channel tiles or a tile does not fit.
    """
    params = check_params(ELEMENTWISE_PARAMS, "elementwise", locals())
    if relu and clip is not None:
        raise ValueError(f"elementwise takes relu (a clip to {RELU_CLIP}) or clip, not both")
    clip = _clip(params)
    if shift is None and not bias and clip is None:
        raise ValueError("elementwise has nothing to compute: give a shift, a bias, clip or relu")
    b, bo = cfg.BATCH, cfg.BLOCK_OUT
    n_t, c_t = -(-batch // b), -(-channels // bo)
    data = te.placeholder((n_t, c_t, b, bo), "int32", "data")
    bias_t = te.placeholder((c_t, b, bo), "int32", "bias") if bias else None
    check_tensors("elementwise", cfg, [data, *([bias_t] if bias_t else []),
                                       te.placeholder((n_t, c_t, b, bo), "int8", "out")])
    block = block or _block(cfg, n_t, c_t, vthreads)
    if c_t % (block * vthreads):
        raise LoweringError("elementwise", f"{vthreads} virtual threads must divide the "
                            f"{c_t // block} channel tiles")
    epilogue = Epilogue.from_params(shift, "bias" if bias else None, clip)
    tail = build_tail(data, epilogue, lambda i, c, j, m: (c, j, m), (c_t, b, bo))
    out = tail.out
    s = create_schedule(out)
    i, c, j, m = s[out].axis
    c_o, c_i = s[out].split(c, factor=block)
    s[out].reorder(c_o, i, c_i, j, m)
    if vthreads > 1:
        thread, _ = s[out].split(c_o, nparts=vthreads)
        s[out].vthread(thread)
    at = s[out].leaf[s[out].leaf.index(i) - 1]
    cached = s.cache_read(data, "acc", [tail.stages[0]])
    s[cached].compute_at(s[out], at)
    schedule_tail(s, tail, at)
    layouts = {"data": f"NC{b}n{bo}c", "bias": f"C{b}n{bo}c", "out": f"NC{b}n{bo}c"}
    inputs = {"data": data, **tail.operands}
    shapes: dict[str, tuple[int, ...]] = {"data": (batch, channels), "out": (batch, channels)}
    if bias_t is not None:
        shapes["bias"] = (channels,)
    return Operator(
        name="elementwise", cfg=cfg, schedule=s, inputs=inputs, output=out, layouts=layouts,
        roles={"data": Role.INPUT, "bias": Role.BIAS},
        pack=lambda name, array: pack_bias(array, cfg) if name == "bias" else pack_acc(array, cfg),
        unpack=lambda packed: unpack_out(packed, batch, channels),
        reference_fn=elementwise_reference, logical_shapes=shapes, ops=0, params=params,
        epilogue=epilogue)


def _clip(params: Mapping[str, Any]) -> tuple[int, int] | None:
    return RELU_CLIP if params["relu"] else params["clip"]


def _block(cfg: Config, n_t: int, c_t: int, vthreads: int) -> int:
    """The most channel tiles per step whose accumulator tiles fit and that the threads divide."""
    if c_t % vthreads:
        raise LoweringError("elementwise", f"{vthreads} virtual threads must divide the {c_t} "
                            "channel tiles")
    fits = [d for d in divisors(c_t) if not check_elementwise_block(cfg, n_t, c_t, d, vthreads)]
    if not fits:
        raise LoweringError("elementwise", f"{vthreads} × {n_t + 1} accumulator tiles (the batch "
                            f"tiles and a bias tile of one channel tile) exceed the {cfg.acc_depth} "
                            "the accumulator holds")
    return max(fits)


def check_elementwise_block(cfg: Config, n_t: int, c_t: int, block: int, vthreads: int) -> list[str]:
    """Why ``block`` channel tiles per step with ``vthreads`` threads cannot run on ``cfg``: one
    ``"<kind>: <detail>"`` per reason (the planner's and the tuner's one truth; sizes in tiles).

    >>> from openvta.isa import preset
    >>> check_elementwise_block(preset("tiny"), 1, 6, 2, 2)
    ['thread split: 2 threads must divide the whole channel steps (6 in steps of 2)']
    """
    reasons = []
    if c_t % block or (c_t // block) % vthreads:
        reasons.append(f"thread split: {vthreads} threads must divide the whole channel steps "
                       f"({c_t} in steps of {block})")
    entries = n_t * block + block
    if vthreads * entries > cfg.acc_depth:
        reasons.append(f"acc buffer overflow: {vthreads} thread{'s' * (vthreads > 1)} × {entries} "
                       f"= {vthreads * entries} entries > {cfg.acc_depth}")
    return reasons


def elementwise_reference(inputs: Mapping[str, np.ndarray], params: Mapping[str, Any]) -> np.ndarray:
    """numpy: the requantization of the int32 ``data`` (and ``bias``)."""
    epilogue = Epilogue.from_params(params["shift"], "bias" if params["bias"] else None, _clip(params))
    return apply_epilogue(inputs["data"], epilogue, inputs)


def elementwise_operands(op: Operator, seed: int) -> dict[str, np.ndarray]:
    """Random int32 accumulators and bias in [-2**20, 2**20) from ``default_rng(seed)``: wide
    enough that a shift of 8 and a clip to int8 both matter."""
    rng = np.random.default_rng(seed)
    return {name: rng.integers(-(1 << 20), 1 << 20, op.logical_shapes[name], dtype=np.int32)
            for name in op.inputs}


#: The parameters of :func:`elementwise` (defaults and types from its signature).
ELEMENTWISE_PARAMS = describe_params(
    elementwise,
    Param("batch", "batch size N (rows)", low=1, shape=True, sample=(1, 6)),
    Param("channels", "channels C (columns)", low=1, shape=True, sample=(1, 40)),
    Param("shift", "arithmetic right shift (None: no shift)", low=0, high=MAX_SHR_AMOUNT,
          sample=(0, MAX_SHR_AMOUNT)),
    Param("bias", "add a per-channel int32 bias (input 'bias') after the shift"),
    Param("clip", "clip to [low, high] before the int8 cast (None: wrap to int8)",
          low=IMM_FIELD.low, high=IMM_FIELD.high, sample=(-200, 200)),
    Param("relu", f"clip to {RELU_CLIP} (ReLU saturated to int8) instead of clip"),
    Param("vthreads", "virtual threads: they split the channel tiles", low=1, sample=(1, 3)),
    Param("block", "channel tiles per step (0: the most that fit)", low=0),
)


# -- the descriptor: tuning space and cost features -------------------------------------------------


def elementwise_epilogue(params: Mapping[str, Any]) -> Epilogue:
    """The epilogue :func:`elementwise` computes for ``params``."""
    return Epilogue.from_params(params["shift"], "bias" if params["bias"] else None, _clip(params))


def elementwise_dims(cfg: Config, params: Mapping[str, Any]) -> dict[str, int]:
    """Tile counts of an element-wise operator: batch and channel tiles."""
    return {"n_t": tiles(params["batch"], cfg.BATCH), "c_t": tiles(params["channels"], cfg.BLOCK_OUT)}


def _knobs(cfg: Config, params: Mapping[str, Any]) -> tuple[Knob, ...]:
    return (Knob("block", tuple(divisors(elementwise_dims(cfg, params)["c_t"]))), Knob("vthreads", THREADS))


def _check(cfg: Config, params: Mapping[str, Any], knobs: Knobs) -> list[str]:
    dims = elementwise_dims(cfg, params)
    return check_elementwise_block(cfg, dims["n_t"], dims["c_t"], knobs["block"], knobs["vthreads"])


def _default(cfg: Config, params: Mapping[str, Any]) -> Knobs | None:
    dims = elementwise_dims(cfg, params)
    fits = [d for d in divisors(dims["c_t"]) if not check_elementwise_block(cfg, dims["n_t"], dims["c_t"], d, 1)]
    return {"block": max(fits), "vthreads": 1} if fits else None


def _of_operator(op: Operator) -> Knobs | None:
    if not op.params["block"]:  # the factory's own choice
        return None
    return {"block": op.params["block"], "vthreads": op.params["vthreads"]}


def _features(cfg: Config, params: Mapping[str, Any], k: Mapping[str, Any]) -> dict[str, float]:
    d = elementwise_dims(cfg, params)
    v, steps = k["vthreads"], d["c_t"] // k["block"]
    elems = d["n_t"] * d["c_t"] * cfg.BATCH * cfg.BLOCK_OUT
    stages = len(elementwise_epilogue(params).stages)
    moved = {"acc": elems * INT32_BYTES * (1 + float(params["bias"]) / d["n_t"]), "out": elems}
    occupancy = {"acc": v * (d["n_t"] + 1) * k["block"] / cfg.acc_depth}
    return {"block": k["block"], "n_t": d["n_t"], "c_t": d["c_t"], "steps": steps, "stages": stages,
            **common_features(cfg, 0, elems // (cfg.BATCH * cfg.BLOCK_OUT) * stages, moved, steps * (3 + stages),
                              v, occupancy)}


DESCRIPTOR = OperatorDescriptor(
    kind=OperatorKind.ELEMENTWISE,
    summary="clip((data >> shift) + bias, low, high) as int8 on int32 (N, C) accumulators",
    factory=elementwise, params=ELEMENTWISE_PARAMS, reference=elementwise_reference,
    random_operands=elementwise_operands, epilogue=elementwise_epilogue,
    plans=PlanSpace(names=("block", "vthreads"), keywords=("block", "vthreads"),
                    knobs=_knobs, check=_check, default=_default,
                    kwargs=lambda k: {"block": k["block"], "vthreads": k["vthreads"]},
                    of_operator=_of_operator, features=_features),
    example={"batch": 2, "channels": 12, "shift": 4, "bias": True, "relu": True})

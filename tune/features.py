"""Features of a configuration for the cost model, and the roofline bound it is scaled by.

A configuration's features are its knobs and what its program will do, computed from
the plan the way the lowering emits it — tile counts (tail tiles included), reduction
steps, DRAM bytes per module (inputs, weights, accumulators, outputs: for conv2d the
bytes its loads and stores move, tail tiles and padding included, equal to the run's
counters — tests/tune/test_features.py), micro-ops per kernel, instructions (an
estimate), threads, buffer occupancy, arithmetic intensity, the epilogue's ALU cycles and
the roofline bound: the compute module's cycles — the MACs at the peak rate *plus* the
epilogue's ALU cycles (one per output vector and stage: the compute module runs the GEMM
and the ALU micro-ops one after the other) — or the bytes at the bus rate, whichever is
slower.  Without the ALU term the bound of a short 1×1 layer (ResNet-18 C4, C7, C10) is
the bytes, which fall as tiles grow while the cycles, held up by the epilogue, fall far
less: the target below then moves against the cycles and misleads the model.  They are
computed rather than read from a lowered program because the search scores thousands
of configurations per batch and lowering one takes tens of milliseconds.  The shape is
among the features, so that records of other shapes of an operator transfer.

The cost model learns ``log(cycles / roofline)`` (:func:`target`): how far from its own
bound a configuration lands, comparable across shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from openvta.compiler.ops.conv2d import _uops, _window
from openvta.isa import Config

from .knobs import conv2d_dims, dense_dims, elementwise_dims, epilogue_of

__all__ = ["features", "roofline_cycles", "target"]

_INT32_BYTES = 4


def _tiles(n: int, size: int) -> int:
    return -(-n // size)


def _common(cfg: Config, macs: float, alu: float, moved: dict[str, float], insns: float, threads: int,
            occupancy: dict[str, float]) -> dict[str, float]:
    """``alu``: the epilogue's ALU cycles (one per output vector and stage), which the compute
    module runs after the GEMM, not beside it."""
    nbytes = sum(moved.values())
    compute = macs / (cfg.BATCH * cfg.BLOCK_IN * cfg.BLOCK_OUT) + alu
    return {**{f"{name}_bytes": value for name, value in moved.items()}, "bytes": nbytes, "macs": macs,
            "alu_cycles": alu, "insns": insns, "threads": threads,
            **{f"{k}_occupancy": v for k, v in occupancy.items()},
            "intensity": macs / max(nbytes, 1.0), "roofline": max(compute, nbytes / cfg.bus_bytes, 1.0),
            "compute_bound": float(compute >= nbytes / cfg.bus_bytes)}


def _loaded(out: int, size: int, kernel: int, stride: int, pad: int, hw: int, used_only: bool) -> int:
    """Input rows (or columns) the tiles of ``size`` outputs of a loop of ``out`` load, added
    up: each tile's window clipped to the input (the DMA adds the padding itself); a strided
    1×1 conv2d loads only the rows it uses."""
    total = 0
    for start in range(0, out, size):
        extent = min(size, out - start)
        if used_only:
            total += extent
            continue
        low, high = start * stride - pad, (start + extent - 1) * stride - pad + kernel - 1
        total += max(0, min(high, hw - 1) - max(low, 0) + 1)
    return total


def _conv2d(cfg: Config, params: Mapping[str, Any], k: Mapping[str, Any]) -> dict[str, float]:
    d = conv2d_dims(cfg, params)
    kernel, stride, v = params["kernel"], params["stride"], k["vthreads"]
    tc, ty, tx = _tiles(d["co_t"], k["cob"]), _tiles(d["oh"], k["yb"]), _tiles(d["oh"], k["xb"])
    tiles, steps = d["n_t"] * tc * ty * tx, d["ci_t"] // k["icb"]  # one batch tile per tile
    inp = k["icb"] * _window(k["yb"], kernel, stride) * ((k["xb"] - 1) * stride + kernel) * d["n_t"]
    rows_only = kernel == 1 and stride > 1
    rows = _loaded(d["oh"], k["yb"], 1 if rows_only else kernel, stride, params["pad"], params["hw"], rows_only)
    cols = _loaded(d["oh"], k["xb"], kernel, stride, params["pad"], params["hw"], False)
    wgt = k["cob"] * k["icb"] * kernel * kernel
    acc = k["cob"] * k["yb"] * k["xb"] * d["n_t"]
    uops = _uops(k["cob"], k["yb"], k["xb"], k["icb"], kernel)
    inp_elem, wgt_elem = cfg.BATCH * cfg.BLOCK_IN, cfg.BLOCK_OUT * cfg.BLOCK_IN
    out_elems = d["co_t"] * d["oh"] ** 2 * d["n_t"] * cfg.BATCH * cfg.BLOCK_OUT
    epilogue = epilogue_of("conv2d", params)
    channels, stages = len(epilogue.channel_operands), len(epilogue.stages)
    moved = {"inp": tc * d["ci_t"] * d["n_t"] * rows * cols * inp_elem,
             "wgt": d["n_t"] * ty * tx * d["ci_t"] * d["co_t"] * kernel * kernel * wgt_elem,
             "acc": d["n_t"] * ty * tx * d["co_t"] * channels * cfg.BATCH * cfg.BLOCK_OUT * _INT32_BYTES,
             "out": out_elems}
    macs = d["n_t"] * cfg.BATCH * d["ci_t"] * cfg.BLOCK_IN * out_elems // cfg.BATCH * kernel * kernel
    waste = tc * ty * tx * k["cob"] * k["yb"] * k["xb"] / (d["co_t"] * d["oh"] ** 2)
    occupancy = {"inp": v * inp / cfg.inp_depth, "wgt": v * wgt / cfg.wgt_depth,
                 "acc": v * acc / cfg.acc_depth, "uop": uops / cfg.uop_depth}
    return {"cob": k["cob"], "yb": k["yb"], "xb": k["xb"], "icb": k["icb"], "split_co": float(k["split"] == "co"),
            "ci_t": d["ci_t"], "co_t": d["co_t"], "oh": d["oh"], "kernel": kernel, "stride": stride,
            "tiles": tiles, "steps": steps, "tail_waste": waste, "uops": uops,
            "loads_per_step_bytes": inp * inp_elem + wgt * wgt_elem,
            **_common(cfg, macs, out_elems // (cfg.BATCH * cfg.BLOCK_OUT) * stages, moved, tiles * (3 * steps + 6), v,
                      occupancy)}


def _dense(cfg: Config, params: Mapping[str, Any], k: Mapping[str, Any]) -> dict[str, float]:
    d = dense_dims(cfg, params)
    v = k["vthreads"]
    tn, to = _tiles(d["n_t"], k["nb"]), _tiles(d["o_t"], k["ob"])
    tiles, steps = tn * to, d["i_t"] // k["kb"]
    inp_elem, wgt_elem = cfg.BATCH * cfg.BLOCK_IN, cfg.BLOCK_OUT * cfg.BLOCK_IN
    out_elems = d["n_t"] * d["o_t"] * cfg.BATCH * cfg.BLOCK_OUT
    epilogue = epilogue_of("dense", params)
    channels, stages = len(epilogue.channel_operands), len(epilogue.stages)
    # every tile of outputs loads its rows of data and its columns of weights (tails included)
    moved = {"inp": to * d["n_t"] * d["i_t"] * inp_elem, "wgt": tn * d["o_t"] * d["i_t"] * wgt_elem,
             "acc": tn * d["o_t"] * channels * cfg.BATCH * cfg.BLOCK_OUT * _INT32_BYTES, "out": out_elems}
    macs = out_elems * d["i_t"] * cfg.BLOCK_IN
    occupancy = {"inp": v * k["nb"] * k["kb"] / cfg.inp_depth, "wgt": v * k["ob"] * k["kb"] / cfg.wgt_depth,
                 "acc": v * k["nb"] * k["ob"] / cfg.acc_depth, "uop": k["nb"] * k["ob"] / cfg.uop_depth}
    return {"nb": k["nb"], "ob": k["ob"], "kb": k["kb"], "n_t": d["n_t"], "i_t": d["i_t"], "o_t": d["o_t"],
            "tiles": tiles, "steps": steps, "uops": k["nb"] * k["ob"],
            **_common(cfg, macs, out_elems // (cfg.BATCH * cfg.BLOCK_OUT) * stages, moved, tiles * (3 * steps + 6), v,
                      occupancy)}


def _elementwise(cfg: Config, params: Mapping[str, Any], k: Mapping[str, Any]) -> dict[str, float]:
    d = elementwise_dims(cfg, params)
    v, steps = k["vthreads"], d["c_t"] // k["block"]
    elems = d["n_t"] * d["c_t"] * cfg.BATCH * cfg.BLOCK_OUT
    stages = len(epilogue_of("elementwise", params).stages)
    moved = {"acc": elems * _INT32_BYTES * (1 + float(params["bias"]) / d["n_t"]), "out": elems}
    occupancy = {"acc": v * (d["n_t"] + 1) * k["block"] / cfg.acc_depth}
    return {"block": k["block"], "n_t": d["n_t"], "c_t": d["c_t"], "steps": steps, "stages": stages,
            **_common(cfg, 0, elems // (cfg.BATCH * cfg.BLOCK_OUT) * stages, moved, steps * (3 + stages), v, occupancy)}


_FEATURES: dict[str, Callable[[Config, Mapping[str, Any], Mapping[str, Any]], dict[str, float]]] = {
    "conv2d": _conv2d, "dense": _dense, "elementwise": _elementwise}


def _named(operator: str, cfg: Config, params: Mapping[str, Any], knobs: Mapping[str, Any]) -> dict[str, float]:
    return _FEATURES[operator](cfg, params, knobs)


def features(operator: str, cfg: Config, params: Mapping[str, Any], knobs: Mapping[str, Any]) -> np.ndarray:
    """The feature vector of one configuration (the same names, in the same order, for
    every configuration of ``operator``); sizes enter as ``log2(1 + x)``."""
    values = _named(operator, cfg, params, knobs)
    return np.array([math.log2(1.0 + max(float(x), 0.0)) for x in values.values()], dtype=np.float64)


def roofline_cycles(operator: str, cfg: Config, params: Mapping[str, Any], knobs: Mapping[str, Any]) -> float:
    """The roofline bound of a configuration's estimated MACs, epilogue and bytes, in cycles."""
    return _named(operator, cfg, params, knobs)["roofline"]


def target(cycles: float, roofline: float) -> float:
    """What the cost model learns: ``log(cycles / roofline)`` (0 on the bound)."""
    return math.log(cycles / roofline)

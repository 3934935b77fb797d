"""batch_matmul: a product of two activations per head, with its epilogue (attention's
``Q·Kᵀ`` and ``P·V``).

``out[h] = epilogue(a[h] · b[h])`` as int8 for ``h < heads``: ``a`` (symbol ``data``) is
``(heads, rows, inner)``, ``b`` (symbol ``weight``) ``(heads, inner, cols)`` — MatMul's own
operands, both run-time inputs. ``b`` is the GEMM's weight: the host lays it out as weight
tiles when it packs the region's inputs (layout ``HKN{BO}o{BI}i``: per head, ``cols/BO``
by ``inner/BI`` tiles of ``bᵀ``), so no transpose runs anywhere else; ``a`` is packed as
``HNC{B}n{BI}c`` and the result comes back as ``HNC{B}n{BO}c``. Each head is a dense layer
(:mod:`.dense`) with the same plan space (rows, column and inner blocks, virtual threads
over the column blocks), looped over the heads; a channel operand (a bias) is per column,
the same for every head.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from openvta.isa import Config
from openvta.runtime import Role

from .. import te
from ..epilogue import Epilogue, apply_epilogue
from ..ir import LoweringError
from ..layout import LayoutKind, ceil_div, pack_by_layout, register_layout
from .common import Operator, benchmark_operands, check_tensors, epilogue_operands, operator_epilogue, params_epilogue
from .dense import DESCRIPTOR as DENSE
from .dense import DensePlan, plan_dense, schedule_products
from .descriptor import Anchor, Matched, OperatorDescriptor, OperatorKind, PlanSpace
from .params import Param, check_params, describe_params, tail_params
from .tail import operand_placeholders

__all__ = ["BATCH_MATMUL_PARAMS", "DESCRIPTOR", "batch_matmul", "batch_matmul_reference"]


# -- layouts: per head, a dense layer's -------------------------------------------------------------

def _pack_rows(array: np.ndarray, cfg: Config) -> np.ndarray:
    """``(H, M, C)`` → ``(H, M/B, C/BL, B, BL)`` (BL the block of the last axis), zero-padded."""
    array = np.asarray(array)
    h, m, c = array.shape
    b, bl = cfg.BATCH, cfg.BLOCK_IN
    padded = np.zeros((h, ceil_div(m, b) * b, ceil_div(c, bl) * bl), array.dtype)
    padded[:, :m, :c] = array
    return np.ascontiguousarray(padded.reshape(h, -1, b, padded.shape[2] // bl, bl).transpose(0, 1, 3, 2, 4))


def _unpack_rows(packed: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    packed = np.asarray(packed)
    h, mt, ct, b, bl = packed.shape
    return packed.transpose(0, 1, 3, 2, 4).reshape(h, mt * b, ct * bl)[:, : shape[1], : shape[2]]


def _pack_columns(array: np.ndarray, cfg: Config) -> np.ndarray:
    """``(H, K, N)`` → ``(H, N/BO, K/BI, BO, BI)``: each head's ``bᵀ`` as weight tiles."""
    array = np.asarray(array)
    h, k, n = array.shape
    bo, bi = cfg.BLOCK_OUT, cfg.BLOCK_IN
    padded = np.zeros((h, ceil_div(n, bo) * bo, ceil_div(k, bi) * bi), array.dtype)
    padded[:, :n, :k] = array.transpose(0, 2, 1)
    return np.ascontiguousarray(padded.reshape(h, -1, bo, padded.shape[2] // bi, bi).transpose(0, 1, 3, 2, 4))


def _unpack_columns(packed: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    packed = np.asarray(packed)
    h, nt, kt, bo, bi = packed.shape
    return packed.transpose(0, 1, 3, 2, 4).reshape(h, nt * bo, kt * bi)[:, : shape[2], : shape[1]].transpose(0, 2, 1)


register_layout(LayoutKind("HNC", _pack_rows, _unpack_rows,
                           lambda shape, outer, inner: (shape[0], ceil_div(shape[1], outer), ceil_div(shape[2], inner),
                                                        outer, inner)))
register_layout(LayoutKind("HKN", _pack_columns, _unpack_columns,
                           lambda shape, outer, inner: (shape[0], ceil_div(shape[2], outer), ceil_div(shape[1], inner),
                                                        outer, inner)))


def _formats(cfg: Config) -> dict[str, str]:
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    return {"data": f"HNC{b}n{bi}c", "weight": f"HKN{bo}o{bi}i", "out": f"HNC{b}n{bo}c"}


# -- the operator -----------------------------------------------------------------------------------

def batch_matmul(cfg: Config, *, heads: int, rows: int, inner: int, cols: int, shift: int | None = 8,
                 bias: bool = False, clip: tuple[int, int] | None = (-128, 127), epilogue: Epilogue | None = None,
                 vthreads: int = 1, plan: DensePlan | None = None) -> Operator:
    """The per-head product (see the module docstring) with its default schedule.

    The parameters are described in :data:`BATCH_MATMUL_PARAMS`.

    Raises
    ------
    ValueError
        for a parameter outside its range, or tensors that cannot fit the DRAM address space.
    LoweringError
        when ``vthreads`` does not divide the column blocks or no tiling fits the buffers.
    """
    params = check_params(BATCH_MATMUL_PARAMS, "batch_matmul", locals())
    full = operator_epilogue("batch_matmul", shift, bias, clip, epilogue)
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    n_t, i_t, o_t = -(-rows // b), -(-inner // bi), -(-cols // bo)
    data = te.placeholder((heads, n_t, i_t, b, bi), "int8", "data")
    weight = te.placeholder((heads, o_t, i_t, bo, bi), "int8", "weight")
    out_shape = (heads, n_t, o_t, b, bo)
    check_tensors("batch_matmul", cfg, [data, weight, *operand_placeholders(full, out_shape, (o_t, b, bo)),
                                        te.placeholder(out_shape, "int8", "out")])
    if plan is None:
        try:
            plan = plan_dense(cfg, n_t, i_t, o_t, vthreads, epilogue=full)
        except LoweringError as exc:  # each head is a dense layer's plan: say whose
            raise LoweringError("plan batch_matmul", str(exc).split(": ", 1)[1].replace("output blocks", "column "
                                                                                           "blocks")) from None
    s, out, tail = schedule_products(cfg, data, weight, full, plan, "batch_matmul")
    formats = _formats(cfg)
    extra_layouts, extra_roles, extra_shapes = epilogue_operands(cfg, full, cols, (heads, rows, cols), formats["out"])
    layouts = {name: formats[name] for name in ("data", "weight", "out")} | extra_layouts
    inputs = {"data": data, "weight": weight, **tail.operands}
    shapes: dict[str, tuple[int, ...]] = {"data": (heads, rows, inner), "weight": (heads, inner, cols),
                                          "out": (heads, rows, cols), **extra_shapes}
    return Operator(
        name="batch_matmul", cfg=cfg, schedule=s, inputs=inputs, output=out, layouts=layouts,
        roles={"data": Role.INPUT, "weight": Role.INPUT, **extra_roles},
        pack=lambda name, array: pack_by_layout(array, layouts[name], cfg),
        unpack=lambda packed: _unpack_rows(packed, (heads, rows, cols)), reference_fn=batch_matmul_reference,
        logical_shapes=shapes, ops=2 * heads * rows * inner * cols, params=params, plan=plan, epilogue=full)


def batch_matmul_reference(inputs: Mapping[str, np.ndarray], params: Mapping[str, Any]) -> np.ndarray:
    """numpy: ``data`` ``(H, M, K)`` times ``weight`` ``(H, K, N)`` per head, then the epilogue."""
    a, b = np.asarray(inputs["data"]), np.asarray(inputs["weight"])
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"batch_matmul operands must be (H, M, K) and (H, K, N), not {a.shape} and {b.shape}")
    value = np.einsum("hmk,hkn->hmn", a.astype(np.int64), b.astype(np.int64)).astype(np.int32)
    epilogue = operator_epilogue("batch_matmul", params["shift"], params["bias"], params["clip"], params["epilogue"])
    heads, rows, cols = value.shape
    flat = {name: (array.reshape(heads * rows, cols) if np.ndim(array) == 3 else array)
            for name, array in inputs.items() if name not in ("data", "weight")}
    return apply_epilogue(value.reshape(heads * rows, cols), epilogue, flat).reshape(heads, rows, cols)


#: The parameters of :func:`batch_matmul` (defaults and types from its signature).
BATCH_MATMUL_PARAMS = describe_params(
    batch_matmul,
    Param("heads", "heads H (independent products)", low=1, shape=True, sample=(1, 4)),
    Param("rows", "rows M of each head's left operand", low=1, shape=True, sample=(1, 12)),
    Param("inner", "the reduced size K", low=1, shape=True, sample=(1, 40)),
    Param("cols", "columns N of each head's right operand", low=1, shape=True, sample=(1, 40)),
    *tail_params("column"),
    Param("vthreads", "virtual threads (latency hiding): they split the column blocks", low=1, sample=(1, 3)),
    Param("plan", "tile sizes (a DensePlan) instead of plan_dense's choice", cli=False),
)

batch_matmul_epilogue = params_epilogue("batch_matmul")


def _as_dense(params: Mapping[str, Any]) -> dict[str, Any]:
    """A head's parameters as dense's: its plan space, refusals and features are dense's."""
    return {**params, "batch": params["rows"], "in_features": params["inner"], "out_features": params["cols"]}


_DENSE = DENSE.plans


def _match(anchor: Anchor, cfg: Config) -> Matched | None:
    """A MatMul of two int8 activations, ``(H, M, K)`` by ``(H, K, N)`` (legalize makes
    attention's 4-D products so)."""
    if anchor.op != "MatMul":
        return None
    if any(anchor.constant[:2]):
        return "one operand is a constant (dense computes those)"
    if anchor.dtypes[:2] != ("int8", "int8"):
        return f"not quantized ({anchor.dtypes[0]} and {anchor.dtypes[1]} operands)"
    (a, b) = anchor.shapes[:2]
    if len(a) != 3 or len(b) != 3 or a[0] != b[0] or a[2] != b[1]:
        return f"batch_matmul needs (H, M, K) by (H, K, N) operands, not {a} by {b}"
    if anchor.batched and any(anchor.batched[:2]):
        return "its heads are the graph's batch"
    if 2 * a[2] < cfg.BLOCK_IN:
        return f"{a[2]} inner elements fill less than half of a {cfg.BLOCK_IN}-lane input block"
    return ({"heads": a[0], "rows": a[1], "inner": a[2], "cols": b[2], "bias": False},
            f"int8 batch_matmul, {a[0]} heads of {a[1]}x{a[2]} by {a[2]}x{b[2]}")


DESCRIPTOR = OperatorDescriptor(
    kind=OperatorKind.BATCH_MATMUL,
    summary="clip(data[h] · weight[h] >> shift, -128, 127) as int8 ((H, M, K), (H, K, N)), both run-time inputs",
    factory=batch_matmul, params=BATCH_MATMUL_PARAMS, reference=batch_matmul_reference,
    random_operands=benchmark_operands, epilogue=batch_matmul_epilogue,
    plans=PlanSpace(names=_DENSE.names, keywords=_DENSE.keywords,
                    knobs=lambda cfg, p: _DENSE.knobs(cfg, _as_dense(p)),
                    check=lambda cfg, p, k: _DENSE.check(cfg, _as_dense(p), k),
                    default=lambda cfg, p: _DENSE.default(cfg, _as_dense(p)), kwargs=_DENSE.kwargs,
                    of_operator=_DENSE.of_operator,
                    features=lambda cfg, p, k: {**_DENSE.features(cfg, _as_dense(p), k), "heads": p["heads"]}),
    match=_match,
    example={"heads": 2, "rows": 3, "inner": 8, "cols": 6})

"""GEMM micro-op loops as matrix products (the vectorized core of the simulator).

A GEMM instruction executes ``acc[D] += inp[S] · wgt[W]ᵀ`` for every point of a
3-D iteration space: the outer loop, the inner loop and the micro-ops.  Each of the
three axes plays one of three roles, read off the index grids:

* **K** (reduction): the destination does not vary along it;
* **R** (rows): the destination varies, the weight index does not;
* **C** (columns): the destination and the weight index vary, the input does not.

When every axis has a role, the instruction is one matrix product
``(rows·BATCH, K·BLOCK_IN) @ (K·BLOCK_IN, cols·BLOCK_OUT)`` — exactly how blocked
GEMMs and convolutions are written.  When the micro-op axis has none (micro-ops that
differ in destination, input and weight at once) the micro-ops are grouped by
destination offset, each group being a K axis.  Anything else falls back to one
product per micro-op execution.  Products are exact in float64 (|sum| < 2**53).
"""

from __future__ import annotations

import numpy as np

__all__ = ["gemm_products"]

_ROW, _COL, _RED = "R", "C", "K"
_CHUNK_MACS = 1 << 22


def _varies(index: np.ndarray, axis: int) -> bool:
    return index.shape[axis] > 1 and bool((index != index.take([0], axis=axis)).any())


def _role(dst: np.ndarray, src: np.ndarray, wgt: np.ndarray, axis: int) -> str | None:
    if not _varies(dst, axis):
        return _RED
    s, w = _varies(src, axis), _varies(wgt, axis)
    if s and w:
        return None
    return _COL if w else _ROW


def gemm_products(
    inp: np.ndarray, wgt: np.ndarray, dst: np.ndarray, src: np.ndarray, wgt_idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Tile products of one GEMM instruction, summed per destination where it is cheap.

    Parameters
    ----------
    inp, wgt :
        the inp ``(depth, BATCH, BLOCK_IN)`` and wgt ``(depth, BLOCK_OUT, BLOCK_IN)`` buffers.
    dst, src, wgt_idx :
        index grids of shape ``(iter_out, iter_in, micro-ops)``.

    Returns
    -------
    (targets, products)
        accumulator indices ``(N,)`` (possibly repeated) and int64 products
        ``(N, BATCH, BLOCK_OUT)`` to add into them.
    """
    roles = [_role(dst, src, wgt_idx, axis) for axis in range(3)]
    if roles[0] is None or roles[1] is None:
        return _per_execution(inp, wgt, dst, src, wgt_idx)
    if roles[2] is not None:
        return _matmul(inp, wgt, dst, src, wgt_idx, roles)
    offsets = dst[0, 0, :]
    targets, products = [], []
    for offset in np.unique(offsets):
        sel = np.flatnonzero(offsets == offset)
        t, p = _matmul(inp, wgt, dst[:, :, sel], src[:, :, sel], wgt_idx[:, :, sel],
                       roles[:2] + [_RED])
        targets.append(t)
        products.append(p)
    return np.concatenate(targets), np.concatenate(products)


def _matmul(
    inp: np.ndarray, wgt: np.ndarray, dst: np.ndarray, src: np.ndarray, wgt_idx: np.ndarray,
    roles: list[str | None],
) -> tuple[np.ndarray, np.ndarray]:
    order = [a for a in range(3) if roles[a] == _ROW] + \
            [a for a in range(3) if roles[a] == _COL] + [a for a in range(3) if roles[a] == _RED]
    n_rows, n_cols, n_red = (
        int(np.prod([dst.shape[a] for a in range(3) if roles[a] == r], dtype=np.int64))
        for r in (_ROW, _COL, _RED)
    )
    shape = (n_rows, n_cols, n_red)
    s = src.transpose(order).reshape(shape)[:, 0, :]  # inputs do not vary along columns
    w = wgt_idx.transpose(order).reshape(shape)[0, :, :]  # weights do not vary along rows
    d = dst.transpose(order).reshape(shape)[:, :, 0]  # destinations do not vary along K
    x = inp[s]  # (R, K, B, BI)
    y = wgt[w]  # (C, K, BO, BI)
    b, bi, bo = x.shape[2], x.shape[3], y.shape[2]
    lhs = x.transpose(0, 2, 1, 3).reshape(n_rows * b, n_red * bi).astype(np.float64)
    rhs = y.transpose(1, 3, 0, 2).reshape(n_red * bi, n_cols * bo).astype(np.float64)
    product = (lhs @ rhs).reshape(n_rows, b, n_cols, bo).transpose(0, 2, 1, 3)
    return d.reshape(-1), product.reshape(n_rows * n_cols, b, bo).astype(np.int64)


def _per_execution(
    inp: np.ndarray, wgt: np.ndarray, dst: np.ndarray, src: np.ndarray, wgt_idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    s, w, d = src.reshape(-1), wgt_idx.reshape(-1), dst.reshape(-1)
    chunk = max(1, _CHUNK_MACS // (inp.shape[1] * inp.shape[2] * wgt.shape[1]))
    parts = []
    for lo in range(0, len(d), chunk):
        x = inp[s[lo : lo + chunk]].astype(np.float64)
        y = wgt[w[lo : lo + chunk]].astype(np.float64)
        parts.append(np.einsum("ubk,uok->ubo", x, y).astype(np.int64))
    return d, np.concatenate(parts)

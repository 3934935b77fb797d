"""GEMM micro-op loops as matrix products (the vectorized core of the simulator).

A GEMM instruction executes ``acc[D] += inp[S] · wgt[W]ᵀ`` for every point of a
3-D iteration space: the outer loop, the inner loop and the micro-ops.  Each axis
plays one of three roles, read off the index grids:

* **K** (reduction): the destination does not vary along it;
* **R** (rows): the destination varies, the weight index does not;
* **C** (columns): the destination and the weight index vary, the input does not.

When every axis has a role, the instruction is one matrix product
``(rows·BATCH, K·BLOCK_IN) @ (K·BLOCK_IN, cols·BLOCK_OUT)`` — exactly how blocked
GEMMs and convolutions are written.  When the micro-op axis has none (micro-ops that
differ in destination, input and weight at once, as a convolution's micro-ops over
several output rows or channel blocks do) the micro-ops are grouped by destination
offset and the axis is split in two, group × micro-op within the group; when both
halves get a role that is still one product, otherwise one product per group.
Anything else falls back to one product per micro-op execution.

Exactness: every term is an int8 × int8 product, ``|x·w| ≤ 128·128 = 2**14``, so any
partial sum over at most ``n`` terms is an integer of magnitude at most ``n·2**14``.
float32 holds every integer up to ``2**24`` exactly, so a product summed over at most
1024 terms is exact in float32 *in any summation order* (BLAS blocking and FMA
included).  Longer reductions are cut into equal chunks of at most 1024 terms, each
exact in float32, and the chunks summed in int64.

Everything but the products depends on the indices alone: :func:`plan_gemm` works it
out once (a :class:`GemmPlan`), and the executor reuses the plan whenever an
instruction's fields and micro-ops come back.
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = ["Grid", "GemmPlan", "plan_gemm", "exact_product", "FLOAT32_EXACT_TERMS"]

_ROW, _COL, _RED = "R", "C", "K"
_CHUNK_MACS = 1 << 22
#: Largest integer below which float32 represents every integer (inclusive).
_FLOAT32_EXACT = 1 << 24
#: Terms of an int8 × int8 sum that float32 adds exactly in any order (2**24 / 2**14).
FLOAT32_EXACT_TERMS = _FLOAT32_EXACT // (128 * 128)


class Grid(NamedTuple):
    """Buffer indices ``base[u…] + i·outer + j·inner`` of a micro-op loop, not expanded.

    Axes: the outer loop, the inner loop, then the micro-op axes of ``base`` (one, or two
    once split); only the planes a product needs are ever expanded.
    """

    base: np.ndarray  # int64 micro-op fields, over the micro-op axes
    outer: int  # factor of the outer loop
    inner: int  # factor of the inner loop
    iters: tuple[int, int]  # iter_out, iter_in

    @property
    def shape(self) -> tuple[int, ...]:
        return self.iters + self.base.shape

    def full(self) -> np.ndarray:
        """Every index, shape :attr:`shape`."""
        i = np.arange(self.iters[0], dtype=np.int64) * self.outer
        j = np.arange(self.iters[1], dtype=np.int64) * self.inner
        extra = (1,) * self.base.ndim
        return self.base[None, None] + i.reshape((-1, 1) + extra) + j.reshape((1, -1) + extra)

    def varies(self, axis: int) -> bool:
        """Whether the index changes along ``axis`` (anywhere: it is affine in the loops)."""
        if self.shape[axis] <= 1:
            return False
        if axis < 2:
            return (self.outer, self.inner)[axis] != 0
        return bool((self.base != self.base.take([0], axis=axis - 2)).any())

    def select(self, sel: np.ndarray) -> Grid:
        """The micro-ops ``sel`` (one micro-op axis)."""
        return self._replace(base=self.base[sel])

    def split(self, order: np.ndarray | None, shape: tuple[int, int]) -> Grid:
        """The micro-op axis, reordered by ``order``, as two axes of ``shape``."""
        return self._replace(base=(self.base if order is None else self.base[order]).reshape(shape))

    def plane(self, constant: list[int], keep: list[int], shape: tuple[int, ...]) -> np.ndarray:
        """The index at position 0 of the axes in ``constant`` (it does not vary along
        them), the other axes in order ``keep``, reshaped to ``shape``."""
        n = 2 + self.base.ndim
        remaining = [a for a in range(n) if a not in constant]
        value = self.base[tuple(0 if a + 2 in constant else slice(None) for a in range(n - 2))]
        value = value.reshape((1,) * sum(a < 2 for a in remaining) + value.shape)
        for loop, factor in ((0, self.outer), (1, self.inner)):
            if loop in remaining:
                where = [1] * len(remaining)
                where[remaining.index(loop)] = -1
                value = value + (np.arange(self.iters[loop], dtype=np.int64) * factor).reshape(where)
        return value.transpose([remaining.index(a) for a in keep]).reshape(shape)


class _Part(NamedTuple):
    """One matrix product (``src`` ``(R, K)``, ``wgt`` ``(C, K)``), a batch of them
    (``(G, R, K)``, ``(G, C, K)``) or, when not ``matmul``, one tile product per execution
    (``src``, ``wgt`` ``(N,)``)."""

    matmul: bool
    src: np.ndarray
    wgt: np.ndarray
    #: the product's working arrays, kept between runs of the plan: fresh ones of a
    #: megabyte cost more in page faults than the copies into them
    scratch: dict[str, np.ndarray]


class GemmPlan(NamedTuple):
    """How to compute one GEMM instruction's tile products: a function of its indices only.

    ``products(inp, wgt)`` gives the ``(N, BATCH, BLOCK_OUT)`` values to add
    into ``targets``; a plan is reused whenever the same indices come back.
    """

    parts: tuple[_Part, ...]
    targets: np.ndarray  # accumulator indices (N,), possibly repeated
    inputs: np.ndarray  # every inp index read (with repeats)
    weights: np.ndarray  # every wgt index read (with repeats)

    def products(self, inp: np.ndarray, wgt: np.ndarray) -> np.ndarray:
        """The int32 ``(N, BATCH, BLOCK_OUT)`` products, wrapped to 32 bits like the accumulator."""
        values = [_matmul(inp, wgt, part.src, part.wgt, part.scratch) if part.matmul
                  else _per_execution(inp, wgt, part.src, part.wgt) for part in self.parts]
        return values[0] if len(values) == 1 else np.concatenate(values)


def _role(dst: Grid, src: Grid, wgt: Grid, axis: int) -> str | None:
    if not dst.varies(axis):
        return _RED
    s, w = src.varies(axis), wgt.varies(axis)
    if s and w:
        return None
    return _COL if w else _ROW


def plan_gemm(dst: Grid, src: Grid, wgt_idx: Grid) -> GemmPlan:
    """The :class:`GemmPlan` of the index grids of a GEMM's micro-op loops."""
    roles = [_role(dst, src, wgt_idx, axis) for axis in range(3)]
    if roles[0] is None or roles[1] is None:
        return _plan([_per_execution_part(dst, src, wgt_idx)])
    if roles[2] is not None:
        return _plan([_matmul_part(dst, src, wgt_idx, roles)])
    offsets = dst.base
    groups, inverse, counts = np.unique(offsets, return_inverse=True, return_counts=True)
    if (counts == counts[0]).all():
        split = _split_uops(dst, src, wgt_idx, len(groups), inverse)
        if split is not None:
            grids, split_roles = split
            return _plan([_matmul_part(*grids, roles[:2] + split_roles)])
    parts = [_matmul_part(dst.select(sel), src.select(sel), wgt_idx.select(sel), roles[:2] + [_RED])
             for sel in (np.flatnonzero(offsets == offset) for offset in groups)]
    if len({(p.src.shape, p.wgt.shape) for p, _ in parts}) == 1:
        # groups of one shape: one batched product, (G, R, K) by (G, C, K)
        batched = _Part(True, np.stack([p.src for p, _ in parts]), np.stack([p.wgt for p, _ in parts]), {})
        return _plan([(batched, np.concatenate([d for _, d in parts]))])
    return _plan(parts)


def _plan(parts: list[tuple[_Part, np.ndarray]]) -> GemmPlan:
    """Parts with their destinations ``(N,)`` as one plan."""
    return GemmPlan(tuple(p for p, _ in parts), np.concatenate([d for _, d in parts]),
                    np.concatenate([p.src.reshape(-1) for p, _ in parts]),
                    np.concatenate([p.wgt.reshape(-1) for p, _ in parts]))


def _split_uops(
    dst: Grid, src: Grid, wgt_idx: Grid, n_groups: int, group: np.ndarray
) -> tuple[tuple[Grid, Grid, Grid], list[str | None]] | None:
    """The micro-op axis as two, (group, position in group), when both get a role.

    Micro-ops laid out group-minor or group-major split as views (no copy); any other
    layout is sorted by group first.
    """
    n = len(dst.base)
    per_group = n // n_groups
    position = np.arange(n)
    order: np.ndarray | None = None
    if n_groups > 1 and (group == position % n_groups).all():
        shape = (per_group, n_groups)
    else:
        shape = (n_groups, per_group)
        if not (group == position // per_group).all():
            order = np.argsort(group, kind="stable")
    d4, s4, w4 = (a.split(order, shape) for a in (dst, src, wgt_idx))
    roles = [_role(d4, s4, w4, axis) for axis in (2, 3)]
    if roles[0] is None or roles[1] is None:
        return None
    return (d4, s4, w4), roles


def _matmul_part(
    dst: Grid, src: Grid, wgt_idx: Grid, roles: list[str | None]
) -> tuple[_Part, np.ndarray]:
    axes = range(len(dst.shape))
    rows, cols, red = ([a for a in axes if roles[a] == r] for r in (_ROW, _COL, _RED))
    n_rows, n_cols, n_red = (int(np.prod([dst.shape[a] for a in group], dtype=np.int64))
                             for group in (rows, cols, red))
    s = src.plane(cols, rows + red, (n_rows, n_red))  # inputs do not vary along columns
    w = wgt_idx.plane(rows, cols + red, (n_cols, n_red))  # weights do not vary along rows
    d = dst.plane(red, rows + cols, (n_rows * n_cols,))  # destinations do not vary along K
    return _Part(True, np.ascontiguousarray(s), np.ascontiguousarray(w), {}), d


def _matmul(inp: np.ndarray, wgt: np.ndarray, s: np.ndarray, w: np.ndarray,
            scratch: dict[str, np.ndarray]) -> np.ndarray:
    """Products ``(G·R·C, B, BO)`` of inputs ``s`` ``([G,] R, K)`` and weights ``w`` ``([G,] C, K)``."""
    s, w = (s, w) if s.ndim == 3 else (s[None], w[None])
    n_batch, n_rows, n_red = s.shape
    n_cols = w.shape[1]
    b, bi, bo = inp.shape[1], inp.shape[2], wgt.shape[1]
    # (R, K, B, BI) -> (R·B, K·BI) and (C, K, BO, BI) -> (C·BO, K·BI): whole rows gathered
    # and transposed as wide items, then converted to float32 contiguously (numpy converts
    # a transposed int8 view an order of magnitude slower)
    lhs = _gather(inp, s, scratch, "lhs").reshape(n_batch, n_rows * b, n_red * bi)
    rhs = _gather(wgt, w, scratch, "rhs").reshape(n_batch, n_cols * bo, n_red * bi)
    x, y = _buffer(scratch, "x", lhs.shape, np.float32), _buffer(scratch, "y", rhs.shape, np.float32)
    np.copyto(x, lhs, casting="unsafe")
    np.copyto(y, rhs, casting="unsafe")
    out = _buffer(scratch, "xy", (n_batch, n_rows * b, n_cols * bo), np.float32)
    product = _float32_product(x, y, np.int32, out)
    product = product.reshape(n_batch, n_rows, b, n_cols, bo).transpose(0, 1, 3, 2, 4)
    return product.reshape(n_batch * n_rows * n_cols, b, bo)


def _buffer(scratch: dict[str, np.ndarray], name: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """The working array ``name`` of ``scratch``, made on first use."""
    buffer = scratch.get(name)
    if buffer is None:
        buffer = scratch[name] = np.empty(shape, dtype)
    return buffer


def _gather(buffer: np.ndarray, index: np.ndarray, scratch: dict[str, np.ndarray], name: str) -> np.ndarray:
    """``buffer[index]`` of an int8 ``(depth, A, B)`` buffer and ``(G, N, K)`` indices, as
    int8 ``(G, N, A, K, B)``: moved as the widest items (up to 16 bytes) that divide its
    rows, as numpy moves one wide item much faster than many bytes."""
    items = buffer
    for dtype in (np.complex128, np.int64, np.int32, np.int16):
        if buffer.shape[2] % np.dtype(dtype).itemsize == 0:
            items = buffer.view(dtype)
            break
    taken = _buffer(scratch, name, (index.size,) + items.shape[1:], items.dtype)
    items.take(index.reshape(-1), axis=0, out=taken, mode="clip")  # indices checked in range
    moved = taken.reshape(index.shape + items.shape[1:]).transpose(0, 1, 3, 2, 4)
    if not moved.flags.c_contiguous:  # (a size-1 A needs no copy)
        np.copyto(transposed := _buffer(scratch, name + "_t", moved.shape, items.dtype), moved)
        moved = transposed
    return moved.view(np.int8)


def exact_product(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``lhs @ rhs.T`` of int8 matrices ``(M, N)`` and ``(P, N)`` as int64, exactly (see above)."""
    return _float32_product(lhs.astype(np.float32), rhs.astype(np.float32), np.int64)


def _openblas_threads() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """The thread count getter and setter of the OpenBLAS numpy's wheels bundle (None
    with any other BLAS: then the products run as that BLAS sees fit)."""
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas*"))):
        try:
            lib = ctypes.CDLL(path)  # (loaded already by numpy: the same library)
        except OSError:
            continue
        for suffix in ("64_", ""):
            get = getattr(lib, f"scipy_openblas_get_num_threads{suffix}", None)
            put = getattr(lib, f"scipy_openblas_set_num_threads{suffix}", None)
            if get is not None and put is not None:
                put.argtypes = [ctypes.c_int]
                return get, put
    return None


_OPENBLAS = _openblas_threads()


def _float32_product(x: np.ndarray, y: np.ndarray, dtype: type,
                     out: np.ndarray | None = None) -> np.ndarray:
    """``x @ yᵀ`` of float32 matrices (or stacks of them) holding int8 values, as a new
    ``dtype`` array.

    int64 gives the exact integers; int32 gives them modulo ``2**32`` (wrapped, as the
    accumulator adds them), as exact for the simulator and cheaper.  ``out``: a float32
    array for the products in float32.

    On one BLAS thread: an instruction's products are small, and OpenBLAS's other
    threads, on a machine whose cores are busy, make each wait for a core (measured ten
    times slower end to end on two shared cores; no faster on idle ones).
    """
    if _OPENBLAS is None:
        return _float32_product_here(x, y, dtype, out)
    get, put = _OPENBLAS
    threads = get()
    if threads == 1:
        return _float32_product_here(x, y, dtype, out)
    put(1)
    try:
        return _float32_product_here(x, y, dtype, out)
    finally:
        put(threads)


def _float32_product_here(x: np.ndarray, y: np.ndarray, dtype: type,
                          out: np.ndarray | None) -> np.ndarray:
    """:func:`_float32_product` on the BLAS threads set."""
    terms = x.shape[-1]
    if terms <= FLOAT32_EXACT_TERMS:
        return np.matmul(x, y.swapaxes(-1, -2), out=out).astype(dtype)
    # equal chunks of at most FLOAT32_EXACT_TERMS terms, each exact, summed in dtype
    chunks = -(-terms // FLOAT32_EXACT_TERMS)
    size = -(-terms // chunks)
    total = np.zeros(x.shape[:-1] + y.shape[-2:-1], dtype=dtype)
    for lo in range(0, terms, size):
        chunk = np.matmul(x[..., lo : lo + size], y[..., lo : lo + size].swapaxes(-1, -2), out=out)
        total += chunk.astype(dtype)
    return total


def _per_execution_part(dst: Grid, src: Grid, wgt_idx: Grid) -> tuple[_Part, np.ndarray]:
    return _Part(False, src.full().reshape(-1), wgt_idx.full().reshape(-1), {}), dst.full().reshape(-1)


def _per_execution(inp: np.ndarray, wgt: np.ndarray, s: np.ndarray, w: np.ndarray) -> np.ndarray:
    chunk = max(1, _CHUNK_MACS // (inp.shape[1] * inp.shape[2] * wgt.shape[1]))
    # one tile product sums BLOCK_IN terms: exact in float32 up to 1024 of them
    dtype = np.float32 if inp.shape[2] <= FLOAT32_EXACT_TERMS else np.float64
    parts = []
    for lo in range(0, len(s), chunk):
        x = inp[s[lo : lo + chunk]].astype(dtype)
        y = wgt[w[lo : lo + chunk]].astype(dtype)
        # int64 first: a float64 sum may not fit int32, its low 32 bits are what counts
        parts.append(np.einsum("ubk,uok->ubo", x, y).astype(np.int64).astype(np.int32))
    return np.concatenate(parts)

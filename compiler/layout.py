"""VTA's packed tensor layouts: the operator library's packing and unpacking helpers.

A packed tensor is cut into the tiles the accelerator loads whole (docs/ISA.md §1): the
outer axes count tiles, the inner two axes are one tile.  Data ``NCHW`` becomes
``NCHW{B}n{BI}c`` — shape ``(N/B, C/BI, H, W, B, BI)`` — so that ``packed[n, c, y, x]``
is one inp tile ``[BATCH][BLOCK_IN]``; a kernel ``OIHW`` becomes ``OIHW{BO}o{BI}i``,
``(O/BO, I/BI, KH, KW, BO, BI)``, one wgt tile per ``[o, i, ky, kx]``.  Blocked axes
are zero-padded up to whole tiles, which leaves every product unchanged.

An operator's file may add a layout of its own (:func:`register_layout`).  The 2-D (dense)
layouts are the runtime's :func:`~openvta.runtime.pack_inp` and
:func:`~openvta.runtime.pack_wgt`; the functions here call them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from openvta.isa import INT32_MAX, INT32_MIN, Config
from openvta.runtime import ceil_div, pack_inp, pack_wgt, unpack_out

__all__ = [
    "bias_layout", "data_layout", "kernel_layout", "out_layout",
    "pack_bias", "pack_data", "pack_kernel", "pack_matrix_data", "pack_matrix_weight",
    "unpack_data", "unpack_kernel", "unpack_matrix", "pack_by_layout", "unpack_by_layout",
    "packed_shape", "LayoutKind", "register_layout",
]

# -- layout names (TVM's spelling) ------------------------------------------------------


def data_layout(cfg: Config) -> str:
    """The packed data layout, e.g. ``"NCHW1n16c"`` for the default configuration."""
    return f"NCHW{cfg.BATCH}n{cfg.BLOCK_IN}c"


def kernel_layout(cfg: Config) -> str:
    """The packed kernel layout, e.g. ``"OIHW16o16i"``."""
    return f"OIHW{cfg.BLOCK_OUT}o{cfg.BLOCK_IN}i"


def out_layout(cfg: Config) -> str:
    """The packed output layout, e.g. ``"NCHW1n16c"`` (blocked by BLOCK_OUT)."""
    return f"NCHW{cfg.BATCH}n{cfg.BLOCK_OUT}c"


def bias_layout(cfg: Config) -> str:
    """The packed bias layout, e.g. ``"C1n16c"``: one acc tile per channel block."""
    return f"C{cfg.BATCH}n{cfg.BLOCK_OUT}c"


# -- shared checks and the 4-D blocking ---------------------------------------------------


def _check_ndim(array: np.ndarray, ndim: int, subject: str, axes: str) -> None:
    if array.ndim != ndim:
        raise ValueError(f"{subject} must be {ndim}-D {axes}, not shape {array.shape!r}")


def _check_extent(value: int, capacity: int, subject: str, holds: str) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise TypeError(f"{subject} must be an integer, not {value!r}")
    if not 0 <= value <= capacity:
        raise ValueError(
            f"{subject} must be between 0 and {capacity} (the packed tensor holds {capacity} "
            f"{holds}), not {value!r}"
        )


def _block2(array: np.ndarray, outer: int, inner: int) -> np.ndarray:
    """``(A, B, *rest)`` → ``(A/outer, B/inner, *rest, outer, inner)``, zero-padded."""
    a, b, *rest = array.shape
    a_tiles, b_tiles = ceil_div(a, outer), ceil_div(b, inner)
    widths = [(0, a_tiles * outer - a), (0, b_tiles * inner - b)] + [(0, 0)] * len(rest)
    padded = np.pad(array, widths)
    split = padded.reshape(a_tiles, outer, b_tiles, inner, *rest)
    order = (0, 2, *range(4, 4 + len(rest)), 1, 3)
    return np.ascontiguousarray(split.transpose(order))


def _unblock2(packed: np.ndarray, a: int, b: int) -> np.ndarray:
    """The inverse of :func:`_block2`, cropped to ``(a, b, *rest)``."""
    a_tiles, b_tiles, *rest, outer, inner = packed.shape
    n_rest = len(rest)
    order = (0, 2 + n_rest, 1, 3 + n_rest, *range(2, 2 + n_rest))
    merged = packed.transpose(order).reshape(a_tiles * outer, b_tiles * inner, *rest)
    return np.ascontiguousarray(merged[:a, :b])


# -- conv2d data, kernels and bias ----------------------------------------------------------


def pack_data(x: np.ndarray, cfg: Config) -> np.ndarray:
    """Pack ``(N, C, H, W)`` data into ``NCHW{B}n{BI}c``: ``(N/B, C/BI, H, W, B, BI)``.

    Parameters
    ----------
    x :
        the data, any dtype (kept).
    cfg :
        the configuration giving BATCH and BLOCK_IN.

    Returns
    -------
    numpy.ndarray
        N and C zero-padded to multiples of BATCH and BLOCK_IN.

    Raises
    ------
    ValueError
        if ``x`` is not 4-D.

    Examples
    --------
    >>> from openvta.isa import preset
    >>> pack_data(np.ones((1, 20, 5, 5), np.int8), preset("default")).shape
    (1, 2, 5, 5, 1, 16)
    """
    x = np.asarray(x)
    _check_ndim(x, 4, "data", "(N, C, H, W)")
    return _block2(x, cfg.BATCH, cfg.BLOCK_IN)


def unpack_data(packed: np.ndarray, n: int, c: int) -> np.ndarray:
    """Unpack ``(N/B, C/BLOCK, H, W, B, BLOCK)`` into ``(n, c, H, W)``, dropping padding.

    Works for data (BLOCK = BLOCK_IN) and for outputs (BLOCK = BLOCK_OUT): the tile
    shape is read from the last two axes.

    Raises
    ------
    ValueError
        if ``packed`` is not 6-D, or ``n`` or ``c`` exceed what it holds.

    Examples
    --------
    >>> from openvta.isa import preset
    >>> x = np.arange(2 * 3 * 4 * 4).reshape(2, 3, 4, 4)
    >>> bool((unpack_data(pack_data(x, preset("tiny")), 2, 3) == x).all())
    True
    """
    packed = np.asarray(packed)
    _check_ndim(packed, 6, "packed data", "(N/B, C/BLOCK, H, W, B, BLOCK)")
    _check_extent(n, packed.shape[0] * packed.shape[4], "n", "batch rows")
    _check_extent(c, packed.shape[1] * packed.shape[5], "c", "channels")
    return _unblock2(packed, n, c)


def pack_kernel(w: np.ndarray, cfg: Config) -> np.ndarray:
    """Pack an ``(O, I, KH, KW)`` kernel into ``OIHW{BO}o{BI}i``: ``(O/BO, I/BI, KH, KW, BO, BI)``.

    Raises
    ------
    ValueError
        if ``w`` is not 4-D.

    Examples
    --------
    >>> from openvta.isa import preset
    >>> pack_kernel(np.ones((64, 3, 7, 7), np.int8), preset("default")).shape
    (4, 1, 7, 7, 16, 16)
    """
    w = np.asarray(w)
    _check_ndim(w, 4, "kernel", "(O, I, KH, KW)")
    return _block2(w, cfg.BLOCK_OUT, cfg.BLOCK_IN)


def unpack_kernel(packed: np.ndarray, o: int, i: int) -> np.ndarray:
    """Unpack ``(O/BO, I/BI, KH, KW, BO, BI)`` into the ``(o, i, KH, KW)`` kernel.

    Raises
    ------
    ValueError
        if ``packed`` is not 6-D, or ``o`` or ``i`` exceed what it holds.
    """
    packed = np.asarray(packed)
    _check_ndim(packed, 6, "packed kernel", "(O/BO, I/BI, KH, KW, BO, BI)")
    _check_extent(o, packed.shape[0] * packed.shape[4], "o", "output channels")
    _check_extent(i, packed.shape[1] * packed.shape[5], "i", "input channels")
    return _unblock2(packed, o, i)


def pack_bias(b: np.ndarray, cfg: Config) -> np.ndarray:
    """Pack an ``(O,)`` bias into acc tiles ``(O/BO, B, BO)`` of int32.

    Each channel's value is repeated down the BATCH rows, so tile ``k`` can be loaded
    into the accumulator and added to output-channel block ``k`` of every batch row.

    Raises
    ------
    ValueError
        if ``b`` is not 1-D or holds values outside int32.
    TypeError
        if ``b`` is not of an integer dtype.

    Examples
    --------
    >>> from openvta.isa import preset
    >>> pack_bias(np.array([1, 2, 3, 4, 5]), preset("tiny"))[:, 0]
    array([[1, 2, 3, 4],
           [5, 0, 0, 0]], dtype=int32)
    """
    b = np.asarray(b)
    _check_ndim(b, 1, "bias", "(O,)")
    if b.dtype.kind not in "iu":
        raise TypeError(f"bias must be of an integer dtype, not {b.dtype}")
    if b.size and (int(b.min()) < INT32_MIN or int(b.max()) > INT32_MAX):
        raise ValueError(
            f"bias must hold int32 values, not values in [{int(b.min())}, {int(b.max())}]"
        )
    bo = cfg.BLOCK_OUT
    padded = np.zeros(ceil_div(b.shape[0], bo) * bo, dtype=np.int32)
    padded[: b.shape[0]] = b
    return np.repeat(padded.reshape(-1, 1, bo), cfg.BATCH, axis=1)


# -- dense (2-D) operands: the runtime's tile packing ---------------------------------------


def pack_matrix_data(x: np.ndarray, cfg: Config) -> np.ndarray:
    """Pack ``(N, I)`` data into inp tiles ``(N/B, I/BI, B, BI)`` of int8 (:func:`pack_inp`).

    Raises
    ------
    ValueError
        if ``x`` is not 2-D.
    """
    x = np.asarray(x)
    _check_ndim(x, 2, "data", "(N, I)")
    return pack_inp(x, cfg)


def pack_matrix_weight(w: np.ndarray, cfg: Config) -> np.ndarray:
    """Pack ``(O, I)`` weights into wgt tiles ``(O/BO, I/BI, BO, BI)`` of int8 (:func:`pack_wgt`).

    Raises
    ------
    ValueError
        if ``w`` is not 2-D.
    """
    w = np.asarray(w)
    _check_ndim(w, 2, "weight", "(O, I)")
    return pack_wgt(w, cfg)


def unpack_matrix(packed: np.ndarray, n: int, o: int) -> np.ndarray:
    """Unpack out (or acc) tiles ``(N/B, O/BO, B, BO)`` into the ``(n, o)`` matrix.

    Raises
    ------
    ValueError
        if ``packed`` is not 4-D, or ``n`` or ``o`` exceed what it holds.
    """
    packed = np.asarray(packed)
    _check_ndim(packed, 4, "packed matrix", "(N/B, O/BO, B, BO)")
    _check_extent(n, packed.shape[0] * packed.shape[2], "n", "rows")
    _check_extent(o, packed.shape[1] * packed.shape[3], "o", "columns")
    return np.ascontiguousarray(unpack_out(packed, n, o))


# -- by layout name (for program files) --------------------------------------------------

_KINDS = ("NCHW", "OIHW", "NC", "OI", "C")


@dataclass(frozen=True)
class LayoutKind:
    """A packed layout an operator's file adds (:func:`register_layout`): its letters (``O1HW``
    in ``O1HW16o16i``), how a logical array is packed and unpacked, and the packed shape."""

    kind: str
    pack: Callable[[np.ndarray, Config], np.ndarray]
    unpack: Callable[[np.ndarray, tuple[int, ...]], np.ndarray]
    shape: Callable[[tuple[int, ...], int, int], tuple[int, ...]]


_REGISTERED: dict[str, LayoutKind] = {}


def register_layout(layout: LayoutKind) -> LayoutKind:
    """Make ``layout`` known to :func:`pack_by_layout`, :func:`unpack_by_layout` and
    :func:`packed_shape` (an operator's file calls it once, at import).

    Raises
    ------
    ValueError
        for letters that are not capitals and digits starting with a capital, or that are
        already a layout's.
    """
    if not re.fullmatch(r"[A-Z][A-Z0-9]*[A-Z]", layout.kind) or layout.kind in _KINDS:
        raise ValueError(f"layout kind must be new capital letters (and digits), not {layout.kind!r}")
    held = _REGISTERED.setdefault(layout.kind, layout)
    if held is not layout:
        raise ValueError(f"layout kind must be new capital letters (and digits), not {layout.kind!r}")
    return layout


def _parse(layout: str) -> tuple[str, int, int]:
    kinds = sorted((*_KINDS, *_REGISTERED), key=len, reverse=True)
    match = re.match(rf"^({'|'.join(kinds)})(\d+)([no])(\d+)([ci])$", layout)
    if match is None:
        raise ValueError(f"layout must be a packed layout such as NCHW1n16c, not {layout!r}")
    return match.group(1), int(match.group(2)), int(match.group(4))


def unpack_by_layout(packed: np.ndarray, layout: str, logical_shape: tuple[int, ...]) -> np.ndarray:
    """The logical array of a packed tensor named by its layout (``NCHW1n16c``, ``NC1n16c``…)."""
    kind, _, _ = _parse(layout)
    if kind in _REGISTERED:
        return _REGISTERED[kind].unpack(packed, logical_shape)
    if kind in ("NCHW", "OIHW"):
        unpack = unpack_data if kind == "NCHW" else unpack_kernel
        return unpack(packed, logical_shape[0], logical_shape[1])
    if kind in ("NC", "OI"):
        return unpack_matrix(packed, logical_shape[0], logical_shape[1])
    return packed[:, 0, :].reshape(-1)[: logical_shape[0]]


def packed_shape(layout: str, logical_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of a logical tensor packed into ``layout``.

    Raises
    ------
    ValueError
        for a layout that is not a packed one, or a shape of another rank than the layout's.

    Examples
    --------
    >>> packed_shape("NCHW1n16c", (1, 20, 5, 5)), packed_shape("C1n16c", (20,))
    ((1, 2, 5, 5, 1, 16), (2, 1, 16))
    """
    kind, outer, inner = _parse(layout)
    if len(logical_shape) != len(kind):
        raise ValueError(f"a {layout} tensor must have {len(kind)} dimensions ({kind}), not shape "
                         f"{tuple(logical_shape)!r}")
    if kind in _REGISTERED:
        return _REGISTERED[kind].shape(tuple(logical_shape), outer, inner)
    if kind == "C":
        return (ceil_div(logical_shape[0], inner), outer, inner)
    first, second, *rest = logical_shape
    return (ceil_div(first, outer), ceil_div(second, inner), *rest, outer, inner)


def pack_by_layout(array: np.ndarray, layout: str, cfg: Config) -> np.ndarray:
    """Pack a logical array into the layout named ``layout`` (keeping its dtype; a 2-D int8
    matrix goes through :func:`pack_matrix_data` or :func:`pack_matrix_weight`).

    >>> from openvta.isa import preset
    >>> pack_by_layout(np.array([[70000, -1]], np.int32), "NC1n4c", preset("tiny")).tolist()
    [[[[70000, -1, 0, 0]]]]
    """
    kind, rows, cols = _parse(layout)
    array = np.asarray(array)
    if kind in _REGISTERED:
        return _REGISTERED[kind].pack(array, cfg)
    if kind == "NC" and array.dtype != np.int8:  # an int32 tensor operand of a dense epilogue
        _check_ndim(array, 2, "data", "(N, C)")
        return _block2(array, rows, cols)
    packers = {"NCHW": pack_data, "OIHW": pack_kernel, "NC": pack_matrix_data,
               "OI": pack_matrix_weight, "C": pack_bias}
    return packers[kind](array, cfg)

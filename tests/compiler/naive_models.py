"""Deliberately naive models of the compiler's layouts and golden references.

One element at a time, in plain Python integers, sharing no code with
``openvta.compiler``: the packing is written from the layout strings (``NCHW{B}n{BI}c``:
element ``[n][c][y][x]`` goes to tile ``[n//B][c//BI][y][x]``, lane ``[n%B][c%BI]``), the
convolution from its definition, the requantization from docs/WORKLOADS.md.
"""

from __future__ import annotations

import itertools

import numpy as np

from openvta.isa import Config, preset

# A batch of 2 with the default buffers, so the BATCH axis is exercised (every preset has 1).
BATCH2 = Config(LOG_BATCH=1)
CONFIGS = {"tiny": preset("tiny"), "small": preset("small"), "default": preset("default"),
           "batch2": BATCH2}


def edge_sizes(block: int) -> list[int]:
    """Channel counts around a block edge: 1, 15, 16, 17, 33 for a block of 16."""
    return sorted({1, block - 1, block, block + 1, 2 * block + 1})


def wrap32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >> 31 else value


# -- packing ------------------------------------------------------------------------------


def tile4(array: np.ndarray, outer: int, inner: int) -> np.ndarray:
    """``(A, B, H, W)`` → ``(A/outer, B/inner, H, W, outer, inner)``, zero-padded."""
    a, b, h, w = array.shape
    out = np.zeros((-(-a // outer), -(-b // inner), h, w, outer, inner), dtype=array.dtype)
    for i, j, y, x in itertools.product(range(a), range(b), range(h), range(w)):
        out[i // outer, j // inner, y, x, i % outer, j % inner] = array[i, j, y, x]
    return out


def untile4(tiles: np.ndarray, a: int, b: int) -> np.ndarray:
    _, _, h, w, outer, inner = tiles.shape
    out = np.zeros((a, b, h, w), dtype=tiles.dtype)
    for i, j, y, x in itertools.product(range(a), range(b), range(h), range(w)):
        out[i, j, y, x] = tiles[i // outer, j // inner, y, x, i % outer, j % inner]
    return out


def tile2(matrix: np.ndarray, rows: int, cols: int, dtype: type) -> np.ndarray:
    """``(M, K)`` → ``(M/rows, K/cols, rows, cols)``, zero-padded."""
    m, k = matrix.shape
    out = np.zeros((-(-m // rows), -(-k // cols), rows, cols), dtype=dtype)
    for i, j in itertools.product(range(m), range(k)):
        out[i // rows, j // cols, i % rows, j % cols] = matrix[i, j]
    return out


def tile_bias(bias: np.ndarray, batch: int, block: int) -> np.ndarray:
    """``(O,)`` → ``(O/block, batch, block)`` int32, every batch row a copy."""
    out = np.zeros((-(-len(bias) // block), batch, block), dtype=np.int32)
    for o, r in itertools.product(range(len(bias)), range(batch)):
        out[o // block, r, o % block] = bias[o]
    return out


# -- arithmetic -----------------------------------------------------------------------------


def conv2d(x: np.ndarray, w: np.ndarray, stride: int | tuple[int, int], pad: int | tuple[int, int, int, int],
           groups: int = 1) -> np.ndarray:
    """The seven nested loops, Python integers, wrapped to int32 at the end.

    ``stride`` is one or ``(height, width)``, ``pad`` one or ``(top, left, bottom, right)``;
    output channel ``o`` reads the data channels of group ``o // (O / groups)``.
    """
    sh, sw = stride if isinstance(stride, tuple) else (stride, stride)
    top, left, bottom, right = pad if isinstance(pad, tuple) else (pad,) * 4
    n_, _, h, wd = x.shape
    o_, c_, kh, kw = w.shape
    oh, ow = (h + top + bottom - kh) // sh + 1, (wd + left + right - kw) // sw + 1
    out = np.zeros((n_, o_, oh, ow), dtype=np.int32)
    for n in range(n_):
        for o in range(o_):
            first = o // (o_ // groups) * c_
            for y in range(oh):
                for xx in range(ow):
                    total = 0
                    for c in range(c_):
                        for ky in range(kh):
                            for kx in range(kw):
                                iy, ix = y * sh + ky - top, xx * sw + kx - left
                                if 0 <= iy < h and 0 <= ix < wd:
                                    total += int(x[n, first + c, iy, ix]) * int(w[o, c, ky, kx])
                    out[n, o, y, xx] = wrap32(total)
    return out


def dense(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    out = np.zeros((x.shape[0], w.shape[0]), dtype=np.int32)
    for n, o in itertools.product(range(x.shape[0]), range(w.shape[0])):
        out[n, o] = wrap32(sum(int(a) * int(b) for a, b in zip(x[n], w[o])))
    return out


def shift_bias_clip(acc: np.ndarray, shift: int, bias: np.ndarray | None,
               lo: int = 0, hi: int = 127) -> np.ndarray:
    """WORKLOADS.md per element: int32 ``>> shift``, ``+ bias`` wrapped, clip, int8."""
    out = np.zeros(acc.shape, dtype=np.int8)
    for index in np.ndindex(*acc.shape):
        value = wrap32(int(acc[index])) >> shift  # Python's >> is arithmetic
        if bias is not None:
            value = wrap32(value + int(bias[index[1]]))
        out[index] = min(max(value, lo), hi)
    return out


# -- epilogues (docs/ISA.md §3's ALU, one lane at a time) -----------------------------------------


def alu(op: str, a: int, b: int) -> int:
    """One ALU lane from docs/ISA.md §3's text: ``op`` is the operation's name."""
    if op == "MIN":
        return min(a, b)
    if op == "MAX":
        return max(a, b)
    if op == "ADD":
        return wrap32(a + b)
    if op == "MUL":
        return wrap32(a * b)
    amount = b & 0x3F
    amount = amount - 64 if amount >= 32 else amount  # the signed low 6 bits
    return wrap32(a >> amount if amount >= 0 else a << -amount)


def _stages(value: int, stages: tuple, operands: dict, index: tuple[int, ...]) -> int:
    for stage in stages:
        operand = stage.operand
        if isinstance(operand, int):
            b = operand
        elif hasattr(operand, "stages"):  # a whole tensor, with its own stages
            b = _stages(int(operands[operand.name][index]), operand.stages, operands, index)
        else:  # one value per channel (axis 1)
            b = int(operands[operand.name][index[1]])
        value = alu(stage.op.name, value, b)
    return value


def epilogue(acc: np.ndarray, stages: tuple, operands: dict) -> np.ndarray:
    """An epilogue's stages per element of int32 ``acc`` (channels on axis 1), then int8."""
    out = np.zeros(acc.shape, dtype=np.int8)
    for index in np.ndindex(*acc.shape):
        value = _stages(int(acc[index]), stages, operands, index)
        out[index] = ((value & 0xFF) ^ 0x80) - 0x80
    return out


def graph_requantize(acc: np.ndarray, pre: int, multiplier: tuple[int, ...], post: tuple[int, ...],
                     clip: tuple[int, int] | None) -> np.ndarray:
    """The graph level's requantization per element: ``x = acc >> pre``, ``y = wrap32(x * m[c])``,
    ``z = ((y >> (s-1)) + 1) >> 1`` for ``s >= 1`` (``y`` for 0, ``wrap32(y << -s)`` below),
    then ``clip`` if given; int64 out."""
    out = np.zeros(acc.shape, dtype=np.int64)
    for index in np.ndindex(*acc.shape):
        c = index[1]
        m = multiplier[c if len(multiplier) > 1 else 0]
        s = post[c if len(post) > 1 else 0]
        y = wrap32((int(acc[index]) >> pre) * m)
        z = ((y >> (s - 1)) + 1) >> 1 if s >= 1 else wrap32(y << -s)
        out[index] = z if clip is None else min(max(z, clip[0]), clip[1])
    return out

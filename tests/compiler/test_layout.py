"""Packed layouts: against naive element-by-element packing, round trips, the GEMM tiles."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import naive_models as naive
from openvta.compiler.layout import (
    bias_layout,
    data_layout,
    kernel_layout,
    out_layout,
    pack_bias,
    pack_data,
    pack_kernel,
    pack_matrix_data,
    pack_matrix_weight,
    unpack_data,
    unpack_kernel,
    unpack_matrix,
)
from openvta.compiler.reference import conv2d_nchw
from openvta.runtime import pack_inp, pack_wgt

CONFIGS = naive.CONFIGS
# (config, size) for every config and every channel count around its block edge.
CFG_SIZES = [(name, size) for name, cfg in CONFIGS.items()
             for size in naive.edge_sizes(cfg.BLOCK_IN)]


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(list(key))


def _int8(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-128, 128, shape, dtype=np.int8)


@pytest.mark.parametrize(("cfg_name", "expected"), [
    ("tiny", ("NCHW1n4c", "OIHW4o4i", "NCHW1n4c", "C1n4c")),
    ("small", ("NCHW1n8c", "OIHW8o8i", "NCHW1n8c", "C1n8c")),
    ("default", ("NCHW1n16c", "OIHW16o16i", "NCHW1n16c", "C1n16c")),
    ("batch2", ("NCHW2n16c", "OIHW16o16i", "NCHW2n16c", "C2n16c")),
])
def test_layout_names(cfg_name: str, expected: tuple[str, ...]) -> None:
    cfg = CONFIGS[cfg_name]
    assert (data_layout(cfg), kernel_layout(cfg), out_layout(cfg), bias_layout(cfg)) == expected


# -- conv2d data and kernels ---------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize(("cfg_name", "c"), CFG_SIZES)
def test_pack_data_matches_naive(cfg_name: str, c: int, n: int) -> None:
    cfg = CONFIGS[cfg_name]
    x = _int8(_rng(n, c), (n, c, 3, 2))
    packed = pack_data(x, cfg)
    assert packed.dtype == np.int8 and packed.flags.c_contiguous
    np.testing.assert_array_equal(packed, naive.tile4(x, cfg.BATCH, cfg.BLOCK_IN))
    np.testing.assert_array_equal(unpack_data(packed, n, c), x)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.float32])
def test_pack_data_keeps_dtype(dtype: type) -> None:
    x: np.ndarray = np.arange(2 * 5 * 2 * 2).reshape(2, 5, 2, 2).astype(dtype)
    packed = pack_data(x, naive.BATCH2)
    assert packed.dtype == dtype
    np.testing.assert_array_equal(unpack_data(packed, 2, 5), x)


@pytest.mark.parametrize(("cfg_name", "o"), CFG_SIZES)
def test_unpack_data_reads_outputs(cfg_name: str, o: int) -> None:
    # Outputs are blocked by BLOCK_OUT: unpack_data takes the block from the tile shape.
    cfg = CONFIGS[cfg_name]
    out = _rng(o).integers(-2**31, 2**31, (3, o, 2, 3), dtype=np.int32)
    tiles = naive.tile4(out, cfg.BATCH, cfg.BLOCK_OUT)
    np.testing.assert_array_equal(unpack_data(tiles, 3, o), out)
    np.testing.assert_array_equal(unpack_data(tiles, 1, 1), out[:1, :1])


@pytest.mark.parametrize(("cfg_name", "size"), CFG_SIZES)
def test_pack_kernel_matches_naive(cfg_name: str, size: int) -> None:
    cfg = CONFIGS[cfg_name]
    for o, i, k in ((size, 3, 1), (2, size, 3)):
        w = _int8(_rng(o, i, k), (o, i, k, k))
        packed = pack_kernel(w, cfg)
        assert packed.dtype == np.int8
        np.testing.assert_array_equal(packed, naive.tile4(w, cfg.BLOCK_OUT, cfg.BLOCK_IN))
        np.testing.assert_array_equal(unpack_kernel(packed, o, i), w)


@pytest.mark.parametrize(("cfg_name", "o"), CFG_SIZES)
def test_pack_bias_matches_naive(cfg_name: str, o: int) -> None:
    cfg = CONFIGS[cfg_name]
    bias = _rng(o).integers(-2**31, 2**31, o, dtype=np.int64)
    packed = pack_bias(bias, cfg)
    assert packed.dtype == np.int32 and packed.flags.c_contiguous and packed.flags.writeable
    np.testing.assert_array_equal(packed, naive.tile_bias(bias, cfg.BATCH, cfg.BLOCK_OUT))


@pytest.mark.parametrize("cfg_name", list(CONFIGS))
def test_packed_tiles_compute_the_conv(cfg_name: str) -> None:
    # Each GEMM intrinsic acc[B][BO] += inp[B][BI] · wgt[BO][BI]ᵀ over the packed tiles
    # (stride 1, pad 0) must give the packed conv2d, bias tile included.
    cfg = CONFIGS[cfg_name]
    n, c, o, h, k = 3, cfg.BLOCK_IN + 1, 2 * cfg.BLOCK_OUT - 1, 4, 2
    rng = _rng(7)
    x, w = _int8(rng, (n, c, h, h)), _int8(rng, (o, c, k, k))
    bias = rng.integers(-2**14, 2**14, o, dtype=np.int32)
    xp, wp, bp = pack_data(x, cfg), pack_kernel(w, cfg), pack_bias(bias, cfg)
    oh = h - k + 1
    acc = np.zeros((xp.shape[0], wp.shape[0], oh, oh, cfg.BATCH, cfg.BLOCK_OUT), np.int64)
    for nb, ob, y, xx in np.ndindex(*acc.shape[:4]):
        acc[nb, ob, y, xx] = bp[ob]
        for ib, ky, kx in np.ndindex(xp.shape[1], k, k):
            acc[nb, ob, y, xx] += xp[nb, ib, y + ky, xx + kx].astype(np.int64) @ \
                wp[ob, ib, ky, kx].astype(np.int64).T
    expected = conv2d_nchw(x, w) + bias[None, :, None, None]
    np.testing.assert_array_equal(unpack_data(acc, n, o), expected)


# -- dense (2-D) operands -------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize(("cfg_name", "size"), CFG_SIZES)
def test_pack_matrices_match_naive(cfg_name: str, size: int, n: int) -> None:
    cfg = CONFIGS[cfg_name]
    rng = _rng(n, size)
    x, w = _int8(rng, (n, size)), _int8(rng, (size + 2, size))
    px, pw = pack_matrix_data(x, cfg), pack_matrix_weight(w, cfg)
    np.testing.assert_array_equal(px, naive.tile2(x, cfg.BATCH, cfg.BLOCK_IN, np.int8))
    np.testing.assert_array_equal(pw, naive.tile2(w, cfg.BLOCK_OUT, cfg.BLOCK_IN, np.int8))
    np.testing.assert_array_equal(px, pack_inp(x, cfg))
    np.testing.assert_array_equal(pw, pack_wgt(w, cfg))
    # A 1x1 image packs exactly like the matrix.
    np.testing.assert_array_equal(pack_data(x[:, :, None, None], cfg)[:, :, 0, 0], px)
    np.testing.assert_array_equal(pack_kernel(w[:, :, None, None], cfg)[:, :, 0, 0], pw)


@pytest.mark.parametrize(("cfg_name", "o"), CFG_SIZES)
def test_unpack_matrix(cfg_name: str, o: int) -> None:
    cfg = CONFIGS[cfg_name]
    out = _rng(o).integers(-2**31, 2**31, (3, o), dtype=np.int32)
    tiles = naive.tile2(out, cfg.BATCH, cfg.BLOCK_OUT, np.int32)
    np.testing.assert_array_equal(unpack_matrix(tiles, 3, o), out)
    assert unpack_matrix(tiles, 0, o).shape == (0, o)


# -- errors ----------------------------------------------------------------------------------

DEFAULT = CONFIGS["default"]
PACKED = np.zeros((1, 2, 3, 3, 1, 16), np.int8)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: pack_data(np.zeros((3, 4)), DEFAULT),
     r"^data must be 4-D \(N, C, H, W\), not shape \(3, 4\)$"),
    (lambda: pack_kernel(np.zeros((3, 4, 1)), DEFAULT),
     r"^kernel must be 4-D \(O, I, KH, KW\), not shape \(3, 4, 1\)$"),
    (lambda: pack_bias(np.zeros((2, 2), np.int32), DEFAULT),
     r"^bias must be 1-D \(O,\), not shape \(2, 2\)$"),
    (lambda: pack_bias(np.array([0, 2**31]), DEFAULT),
     r"^bias must hold int32 values, not values in \[0, 2147483648\]$"),
    (lambda: pack_matrix_data(np.zeros(4), DEFAULT),
     r"^data must be 2-D \(N, I\), not shape \(4,\)$"),
    (lambda: pack_matrix_weight(np.zeros((1, 1, 1)), DEFAULT),
     r"^weight must be 2-D \(O, I\), not shape \(1, 1, 1\)$"),
    (lambda: unpack_data(np.zeros((1, 2, 3, 16)), 1, 1),
     r"^packed data must be 6-D \(N/B, C/BLOCK, H, W, B, BLOCK\), not shape \(1, 2, 3, 16\)$"),
    (lambda: unpack_data(PACKED, 2, 1),
     r"^n must be between 0 and 1 \(the packed tensor holds 1 batch rows\), not 2$"),
    (lambda: unpack_data(PACKED, 1, 33),
     r"^c must be between 0 and 32 \(the packed tensor holds 32 channels\), not 33$"),
    (lambda: unpack_kernel(np.zeros((1, 1, 1, 1, 16, 16)), -1, 1),
     r"^o must be between 0 and 16 \(the packed tensor holds 16 output channels\), not -1$"),
    (lambda: unpack_kernel(np.zeros(3), 1, 1),
     r"^packed kernel must be 6-D \(O/BO, I/BI, KH, KW, BO, BI\), not shape \(3,\)$"),
    (lambda: unpack_matrix(np.zeros((1, 1, 1, 16)), 1, 17),
     r"^o must be between 0 and 16 \(the packed tensor holds 16 columns\), not 17$"),
    (lambda: unpack_matrix(np.zeros((1, 16)), 1, 1),
     r"^packed matrix must be 4-D \(N/B, O/BO, B, BO\), not shape \(1, 16\)$"),
])
def test_value_errors(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(("call", "message"), [
    (lambda: pack_bias(np.array([1.5]), DEFAULT),
     r"^bias must be of an integer dtype, not float64$"),
    (lambda: unpack_data(PACKED, 1.0, 1), r"^n must be an integer, not 1\.0$"),
    (lambda: unpack_matrix(np.zeros((1, 1, 1, 16)), True, 1), r"^n must be an integer, not True$"),
])
def test_type_errors(call: Callable[[], object], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call()



def test_a_layout_kind_is_registered_once_with_new_letters() -> None:
    from openvta.compiler.layout import LayoutKind, register_layout

    def kind(letters: str) -> LayoutKind:
        return LayoutKind(letters, lambda a, cfg: a, lambda p, shape: p, lambda shape, o, i: shape)

    for letters in ("NCHW", "nchw", "1X", "C"):
        with pytest.raises(ValueError, match=rf"^layout kind must be new capital letters \(and digits\), "
                                             rf"not '{letters}'$"):
            register_layout(kind(letters))

"""Golden references against the naive loops: conv2d, dense, requantization, fused layers."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naive_models as naive
from openvta.compiler.reference import conv2d_nchw, dense, fused_dense, fused_layer, shift_bias_clip

# (N, C, H, W, O, K, stride, pad): 1x1 and 7x7 kernels, strides 1-3, pads 0/1/3, a
# kernel larger than the data that fits once padded, non-square data.
CONV_CASES = [
    (1, 1, 1, 1, 1, 1, 1, 0),
    (1, 1, 5, 5, 1, 3, 1, 0),
    (1, 2, 5, 5, 3, 3, 1, 1),
    (2, 3, 7, 7, 2, 3, 2, 1),
    (1, 3, 9, 9, 2, 7, 2, 3),
    (1, 2, 3, 3, 2, 7, 1, 3),
    (1, 4, 4, 4, 3, 1, 1, 0),
    (1, 4, 6, 6, 3, 1, 2, 0),
    (2, 2, 5, 5, 2, 5, 1, 0),
    (1, 2, 4, 4, 2, 3, 3, 1),
    (1, 2, 5, 7, 2, 3, 2, 1),
]
CONV_IDS = ["n{}c{}h{}w{}o{}k{}s{}p{}".format(*case) for case in CONV_CASES]


def _operands(case: tuple[int, ...], low: int, high: int, dtype: type,
              seed: int) -> tuple[np.ndarray, np.ndarray]:
    n, c, h, w, o, k, _, _ = case
    rng = np.random.default_rng(seed)
    return (rng.integers(low, high, (n, c, h, w), dtype=dtype),
            rng.integers(low, high, (o, c, k, k), dtype=dtype))


@pytest.mark.parametrize("case", CONV_CASES, ids=CONV_IDS)
def test_conv2d_matches_naive(case: tuple[int, ...]) -> None:
    x, w = _operands(case, -128, 128, np.int8, seed=sum(case))
    stride, pad = case[6:]
    got = conv2d_nchw(x, w, stride, pad)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, naive.conv2d(x, w, stride, pad))


@pytest.mark.parametrize("case", CONV_CASES[2:6], ids=CONV_IDS[2:6])
def test_conv2d_wraps_to_32_bits(case: tuple[int, ...]) -> None:
    x, w = _operands(case, -2**31, 2**31, np.int32, seed=1)
    stride, pad = case[6:]
    expected = naive.conv2d(x, w, stride, pad)
    np.testing.assert_array_equal(conv2d_nchw(x, w, stride, pad), expected)


def test_conv2d_wraps_a_single_product() -> None:
    x, w = np.full((1, 1, 1, 1), 1 << 16, np.int32), np.full((1, 1, 1, 1), 1 << 15, np.int32)
    assert conv2d_nchw(x, w)[0, 0, 0, 0] == -(1 << 31)


@pytest.mark.parametrize(("stride", "pad", "groups"), [
    ((2, 1), (1, 0, 2, 1), 1), (1, (0, 2, 1, 0), 2), ((1, 3), 1, 4), (2, 0, 4)])
def test_conv2d_groups_and_asymmetric_geometry_match_naive(stride: int | tuple[int, int],
                                                           pad: int | tuple[int, int, int, int],
                                                           groups: int) -> None:
    rng = np.random.default_rng(groups)
    x = rng.integers(-128, 128, (2, 4, 5, 6), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 4 // groups, 3, 2), dtype=np.int8)
    np.testing.assert_array_equal(conv2d_nchw(x, w, stride, pad, groups),
                                  naive.conv2d(x, w, stride, pad, groups))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_depthwise_conv2d_matches_naive(data: st.DataObject) -> None:
    # one data channel per group (MobileNet's depthwise layers): every group in one einsum
    groups, multiplier = data.draw(st.integers(2, 6)), data.draw(st.integers(1, 3))
    kh, kw = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    stride = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    top, left, bottom, right = (data.draw(st.integers(0, 2)) for _ in range(4))
    pad = (top, left, bottom, right)
    h = data.draw(st.integers(max(1, kh - pad[0] - pad[2]), 8))
    w_ = data.draw(st.integers(max(1, kw - pad[1] - pad[3]), 8))
    wide = data.draw(st.booleans())  # int32 operands: the int64 path, wrapped to 32 bits
    low, high, dtype = (-2**31, 2**31, np.int32) if wide else (-128, 128, np.int8)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.integers(low, high, (2, groups, h, w_), dtype=dtype)
    w = rng.integers(low, high, (groups * multiplier, 1, kh, kw), dtype=dtype)
    np.testing.assert_array_equal(conv2d_nchw(x, w, stride, pad, groups), naive.conv2d(x, w, stride, pad, groups))


def test_conv2d_of_floats_is_float64() -> None:
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2) / 4
    w = np.full((2, 1, 1, 1), 0.5, np.float32)
    got = conv2d_nchw(x, w, groups=2)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, x.astype(np.float64) / 2)


def test_conv2d_resnet18_c2_spot_checks() -> None:
    # Full size: the im2col formulation must make this cheap; check border and inner pixels.
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, (1, 64, 56, 56), dtype=np.int8)
    w = rng.integers(-128, 128, (64, 64, 3, 3), dtype=np.int8)
    got = conv2d_nchw(x, w, stride=1, pad=1)
    assert got.shape == (1, 64, 56, 56)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for o, y, xx in ((0, 0, 0), (63, 55, 55), (5, 0, 30), (17, 28, 55), (40, 31, 12)):
        patch = xp[0, :, y : y + 3, xx : xx + 3]
        assert got[0, o, y, xx] == int((patch * w[o].astype(np.int64)).sum())


@pytest.mark.parametrize(("n", "i", "o"), [(1, 1, 1), (1, 16, 16), (3, 17, 5), (4, 33, 2)])
def test_dense_matches_naive(n: int, i: int, o: int) -> None:
    rng = np.random.default_rng(n * 100 + i)
    x = rng.integers(-128, 128, (n, i), dtype=np.int8)
    w = rng.integers(-128, 128, (o, i), dtype=np.int8)
    np.testing.assert_array_equal(dense(x, w), naive.dense(x, w))
    big_x = rng.integers(-2**31, 2**31, (n, i), dtype=np.int32)
    big_w = rng.integers(-2**31, 2**31, (o, i), dtype=np.int32)
    np.testing.assert_array_equal(dense(big_x, big_w), naive.dense(big_x, big_w))


@pytest.mark.parametrize("shift", [0, 1, 8, 17, 31])
@pytest.mark.parametrize(("lo", "hi"), [(0, 127), (-128, 127), (5, 5)])
def test_shift_bias_clip_matches_formula(shift: int, lo: int, hi: int) -> None:
    rng = np.random.default_rng(shift)
    acc = rng.integers(-2**31, 2**31, (2, 5, 3, 3), dtype=np.int32)
    acc.flat[:4] = [-2**31, 2**31 - 1, -1, 0]
    # A full-range bias makes the int32 add wrap for some elements.
    bias = rng.integers(-2**31, 2**31, 5, dtype=np.int32)
    bias[:2] = [2**31 - 1, -2**31]
    for b in (bias, None):
        got = shift_bias_clip(acc, shift, b, lo, hi)
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, naive.shift_bias_clip(acc, shift, b, lo, hi))


def test_shift_bias_clip_bias_add_wraps() -> None:
    acc = np.array([[2**31 - 1]], np.int32)
    # (2**31 - 1) + 1 wraps to -2**31, which clips to lo.
    assert shift_bias_clip(acc, 0, np.array([1], np.int32), -128, 127)[0, 0] == -128


@pytest.mark.parametrize("case", CONV_CASES, ids=CONV_IDS)
def test_fused_layer_matches_formula(case: tuple[int, ...]) -> None:
    x, w = _operands(case, -128, 128, np.int8, seed=3)
    stride, pad = case[6:]
    bias = np.random.default_rng(4).integers(-2**14, 2**14, case[4], dtype=np.int32)
    acc = naive.conv2d(x, w, stride, pad)
    for shift in (0, 8):
        expected = naive.shift_bias_clip(acc, shift, bias)
        np.testing.assert_array_equal(fused_layer(x, w, bias, shift, stride, pad), expected)


@pytest.mark.parametrize(("n", "i", "o"), [(1, 16, 16), (3, 17, 5)])
def test_fused_dense_matches_formula(n: int, i: int, o: int) -> None:
    rng = np.random.default_rng(i)
    x = rng.integers(-128, 128, (n, i), dtype=np.int8)
    w = rng.integers(-128, 128, (o, i), dtype=np.int8)
    bias = rng.integers(-2**14, 2**14, o, dtype=np.int32)
    acc = naive.dense(x, w)
    for b in (bias, None):
        got = fused_dense(x, w, b, 8)
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, naive.shift_bias_clip(acc, 8, b))


# -- errors ----------------------------------------------------------------------------------

X = np.zeros((1, 2, 3, 3), np.int8)
W = np.zeros((4, 2, 3, 3), np.int8)
ACC = np.zeros((1, 4), np.int32)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: conv2d_nchw(X[0], W), r"^data must be 4-D \(N, C, H, W\), not shape \(2, 3, 3\)$"),
    (lambda: conv2d_nchw(X, W[0]), r"^kernel must be 4-D \(O, I, KH, KW\), not shape \(2, 3, 3\)$"),
    (lambda: conv2d_nchw(X, W[:, :1]), r"^kernel input channels must equal the data's 2, not 1$"),
    (lambda: conv2d_nchw(X, W, groups=2), r"^kernel input channels must equal the data's 2 / 2 groups, not 2$"),
    (lambda: conv2d_nchw(X, W[:, :1], groups=3),
     r"^groups must divide the data's 2 and the kernel's 4 channels, not 3$"),
    (lambda: conv2d_nchw(X, W, groups=0), r"^groups must be at least 1, not 0$"),
    (lambda: conv2d_nchw(X, W, stride=(1, 0)), r"^stride must be at least 1, not 0$"),
    (lambda: conv2d_nchw(X, W, pad=(1, 1)), r"^pad must be an integer or 4 integers, not \(1, 1\)$"),
    (lambda: conv2d_nchw(X, W, stride=0), r"^stride must be at least 1, not 0$"),
    (lambda: conv2d_nchw(X, W, pad=-1), r"^pad must be at least 0, not -1$"),
    (lambda: conv2d_nchw(X, np.zeros((1, 2, 7, 7), np.int8), pad=1),
     r"^kernel size must be between 1x1 and the padded data's 5x5, not 7x7$"),
    (lambda: conv2d_nchw(X, np.zeros((1, 2, 0, 1), np.int8)),
     r"^kernel size must be between 1x1 and the padded data's 3x3, not 0x1$"),
    (lambda: dense(ACC, ACC[0]), r"^weight must be 2-D \(O, I\), not shape \(4,\)$"),
    (lambda: dense(ACC, np.zeros((2, 3), np.int8)),
     r"^weight input features must equal the data's 4, not 3$"),
    (lambda: shift_bias_clip(ACC, 32), r"^shift must be between 0 and 31, not 32$"),
    (lambda: shift_bias_clip(ACC, -1), r"^shift must be between 0 and 31, not -1$"),
    (lambda: shift_bias_clip(ACC, 8, lo=-129), r"^lo must be between -128 and 127, not -129$"),
    (lambda: shift_bias_clip(ACC, 8, lo=5, hi=4), r"^hi must be between 5 and 127, not 4$"),
    (lambda: shift_bias_clip(ACC, 8, np.zeros(3, np.int32)),
     r"^bias must have one value per channel \(axis 1 of accumulator shape \(1, 4\)\), "
     r"not shape \(3,\)$"),
    (lambda: shift_bias_clip(ACC, 8, np.zeros((1, 4), np.int32)),
     r"^bias must be 1-D \(O,\), not shape \(1, 4\)$"),
    (lambda: fused_layer(X, W, np.zeros(2, np.int32), 8, 1, 1),
     r"^bias must have one value per channel \(axis 1 of accumulator shape \(1, 4, 3, 3\)\), "
     r"not shape \(2,\)$"),
])
def test_value_errors(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(("call", "message"), [
    (lambda: conv2d_nchw(X.astype(np.complex64), W),
     r"^data must be of an integer or float dtype, not complex64$"),
    (lambda: dense(ACC, ACC.astype(np.float64)),
     r"^weight must be of an integer dtype, not float64$"),
    (lambda: conv2d_nchw(X, W, stride=True), r"^stride must be an integer, not True$"),
    (lambda: conv2d_nchw(X, W, pad=1.0), r"^pad must be an integer, not 1\.0$"),
    (lambda: shift_bias_clip(ACC.astype(np.float32), 8),
     r"^accumulator must be of an integer dtype, not float32$"),
    (lambda: shift_bias_clip(ACC, 8, np.zeros(4)), r"^bias must be of an integer dtype, not float64$"),
])
def test_type_errors(call: Callable[[], object], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call()

"""DRAM layout: the aligned bump allocator and the tile packing helpers against naive models."""

from __future__ import annotations

import numpy as np
import pytest

from openvta.isa import Config, preset
from openvta.runtime import DramAllocator, ceil_div, pack_acc, pack_inp, pack_wgt, unpack_out
from openvta.runtime.dram import Segment

# A batch of 4 so that the BATCH axis of the tiles is exercised too (every preset has BATCH 1).
BATCH4 = Config(LOG_BATCH=2, LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=11, LOG_INP_BUFF_SIZE=10,
                LOG_WGT_BUFF_SIZE=12, LOG_ACC_BUFF_SIZE=12)
CONFIGS = {"tiny": preset("tiny"), "small": preset("small"), "default": preset("default"),
           "batch4": BATCH4}


@pytest.fixture(params=list(CONFIGS))
def any_cfg(request: pytest.FixtureRequest) -> Config:
    return CONFIGS[request.param]


# -- naive models: one element at a time ---------------------------------------------------


def naive_tiles(matrix: np.ndarray, rows: int, cols: int, dtype: type) -> np.ndarray:
    """``matrix`` cut into zero-padded ``rows × cols`` tiles, ``[R][C][rows][cols]``."""
    m, n = matrix.shape
    out = np.zeros((-(-m // rows), -(-n // cols), rows, cols), dtype=dtype)
    for i in range(m):
        for j in range(n):
            out[i // rows, j // cols, i % rows, j % cols] = matrix[i, j]
    return out


def naive_untile(tiles: np.ndarray, m: int, n: int) -> np.ndarray:
    rows, cols = tiles.shape[2:]
    out = np.zeros((m, n), dtype=tiles.dtype)
    for i in range(m):
        for j in range(n):
            out[i, j] = tiles[i // rows, j // cols, i % rows, j % cols]
    return out


def _sizes(block: int) -> list[int]:
    return sorted({1, 2, 3, block - 1, block, block + 1, 2 * block + 3} - {0})


# -- ceil_div ---------------------------------------------------------------------------


@pytest.mark.parametrize("b", [1, 2, 3, 16])
def test_ceil_div(b: int) -> None:
    for a in range(0, 40):
        assert ceil_div(a, b) == len(range(0, a, b))


# -- the allocator ---------------------------------------------------------------------


def test_default_alignment_is_the_largest_element(any_cfg: Config) -> None:
    align = max(any_cfg.elem_bytes(t) for t in range(6))
    assert DramAllocator(any_cfg).align == align == any_cfg.max_elem_bytes


def test_allocations_are_aligned(any_cfg: Config) -> None:
    alloc = DramAllocator(any_cfg)
    a = alloc.align
    sizes = [1, 0, a + 1, 3, a, 2 * a - 1]
    addrs = [alloc.alloc(size, f"s{i}") for i, size in enumerate(sizes)]
    assert addrs == [0, a, a, 3 * a, 4 * a, 5 * a]
    assert alloc.segments == [Segment(f"s{i}", addr, size)
                              for i, (addr, size) in enumerate(zip(addrs, sizes))]
    assert alloc.size == 7 * a - 1


def test_base_address(tiny: Config) -> None:
    alloc = DramAllocator(tiny, base=5)
    assert alloc.size == 5
    assert alloc.alloc(4, "x") == 16
    assert DramAllocator(tiny, base=32).alloc(4, "x") == 32


def test_explicit_alignment(tiny: Config) -> None:
    alloc = DramAllocator(tiny)
    assert alloc.alloc(3, "a") == 0
    assert alloc.alloc(1, "b", align=1) == 3
    assert alloc.alloc(1, "c", align=4) == 4
    assert alloc.alloc(1, "d", align=64) == 64
    assert alloc.alloc(1, "e") == 80
    assert alloc.size == 81


@pytest.mark.parametrize("align", [0, -4, 3, 12, 48])
def test_alignment_must_be_a_power_of_two(tiny: Config, align: int) -> None:
    with pytest.raises(ValueError, match=rf"^alignment must be a power of two, not {align}$"):
        DramAllocator(tiny).alloc(4, "x", align=align)


def test_negative_size(tiny: Config) -> None:
    with pytest.raises(ValueError, match=r"^segment size must be non-negative, not -1$"):
        DramAllocator(tiny).alloc(-1, "x")


def test_negative_base(tiny: Config) -> None:
    with pytest.raises(ValueError, match=r"^DRAM base must be non-negative, not -16$"):
        DramAllocator(tiny, base=-16)


def test_duplicate_name(tiny: Config) -> None:
    alloc = DramAllocator(tiny)
    alloc.alloc(4, "x")
    with pytest.raises(ValueError, match=r"^a DRAM segment named 'x' already exists$"):
        alloc.alloc(4, "x")
    assert alloc.size == 4 and len(alloc.segments) == 1


# -- packing ---------------------------------------------------------------------------


def test_pack_inp(any_cfg: Config) -> None:
    rng = np.random.default_rng(1)
    for m in _sizes(any_cfg.BATCH):
        for k in _sizes(any_cfg.BLOCK_IN):
            matrix = rng.integers(-128, 128, (m, k), dtype=np.int8)
            got = pack_inp(matrix, any_cfg)
            assert got.dtype == np.int8
            want = naive_tiles(matrix, any_cfg.BATCH, any_cfg.BLOCK_IN, np.int8)
            np.testing.assert_array_equal(got, want, err_msg=f"m={m} k={k}")
            assert got.shape == (ceil_div(m, any_cfg.BATCH), ceil_div(k, any_cfg.BLOCK_IN),
                                 any_cfg.BATCH, any_cfg.BLOCK_IN)
            assert got.nbytes == got.shape[0] * got.shape[1] * any_cfg.inp_elem_bytes


def test_pack_wgt(any_cfg: Config) -> None:
    rng = np.random.default_rng(2)
    for n in _sizes(any_cfg.BLOCK_OUT):
        for k in _sizes(any_cfg.BLOCK_IN):
            matrix = rng.integers(-128, 128, (n, k), dtype=np.int8)
            got = pack_wgt(matrix, any_cfg)
            assert got.dtype == np.int8
            want = naive_tiles(matrix, any_cfg.BLOCK_OUT, any_cfg.BLOCK_IN, np.int8)
            np.testing.assert_array_equal(got, want, err_msg=f"n={n} k={k}")
            assert got.nbytes == got.shape[0] * got.shape[1] * any_cfg.wgt_elem_bytes


def test_pack_acc(any_cfg: Config) -> None:
    rng = np.random.default_rng(3)
    for m in _sizes(any_cfg.BATCH):
        for n in _sizes(any_cfg.BLOCK_OUT):
            matrix = rng.integers(-(2**31), 2**31, (m, n), dtype=np.int64).astype(np.int32)
            got = pack_acc(matrix, any_cfg)
            assert got.dtype == np.int32
            want = naive_tiles(matrix, any_cfg.BATCH, any_cfg.BLOCK_OUT, np.int32)
            np.testing.assert_array_equal(got, want, err_msg=f"m={m} n={n}")
            assert got.nbytes == got.shape[0] * got.shape[1] * any_cfg.acc_elem_bytes


def test_pack_acc_as_int8_out_tiles(any_cfg: Config) -> None:
    matrix = np.arange(-50, 50, dtype=np.int64).reshape(4, 25)
    got = pack_acc(matrix, any_cfg, dtype=np.int8)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(
        got, naive_tiles(matrix.astype(np.int8), any_cfg.BATCH, any_cfg.BLOCK_OUT, np.int8))
    assert got.nbytes == got.shape[0] * got.shape[1] * any_cfg.out_elem_bytes


def test_unpack_out(any_cfg: Config) -> None:
    rng = np.random.default_rng(4)
    for m in _sizes(any_cfg.BATCH):
        for n in _sizes(any_cfg.BLOCK_OUT):
            tiles = rng.integers(-128, 128, (ceil_div(m, any_cfg.BATCH),
                                             ceil_div(n, any_cfg.BLOCK_OUT),
                                             any_cfg.BATCH, any_cfg.BLOCK_OUT), dtype=np.int8)
            got = unpack_out(tiles, m, n)
            assert got.dtype == np.int8 and got.shape == (m, n)
            np.testing.assert_array_equal(got, naive_untile(tiles, m, n), err_msg=f"m={m} n={n}")


def test_unpack_inverts_pack_acc(any_cfg: Config) -> None:
    matrix = np.arange(7 * 11, dtype=np.int32).reshape(7, 11) - 40
    np.testing.assert_array_equal(unpack_out(pack_acc(matrix, any_cfg), 7, 11), matrix)


def test_padding_is_zero(tiny: Config) -> None:
    tiles = pack_inp(np.full((1, 1), -1, dtype=np.int8), tiny)
    assert tiles.shape == (1, 1, 1, 4)
    np.testing.assert_array_equal(tiles.reshape(-1), [-1, 0, 0, 0])
    tiles = pack_wgt(np.full((1, 5), 7, dtype=np.int8), tiny)
    assert tiles.shape == (1, 2, 4, 4)
    assert tiles.sum() == 35 and (tiles[0, :, 1:, :] == 0).all()
    np.testing.assert_array_equal(tiles[0, 1, 0], [7, 0, 0, 0])

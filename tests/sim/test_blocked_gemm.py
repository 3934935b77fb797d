"""The hand-built blocked GEMM: numpy's answer with 1, 2 and 4 virtual threads, on every preset."""

from __future__ import annotations

import numpy as np
import pytest

from openvta.blocked_gemm import GemmBlocks, build_blocked_gemm, read_gemm_output, reference_gemm
from openvta.isa import Counter, preset
from openvta.runtime import BuildError, ceil_div
from openvta.sim.functional import run

SHAPES = [(1, 1, 1), (16, 16, 16), (5, 7, 9), (33, 20, 47), (64, 48, 80)]


def _matrices(m: int, n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.integers(-128, 128, (m, k), dtype=np.int8),
            rng.integers(-128, 128, (n, k), dtype=np.int8))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("shift", [None, 6])
def test_blocked_gemm_matches_numpy_and_vthreads_agree(cfg, shape, shift) -> None:
    m, n, k = shape
    a, w = _matrices(m, n, k, seed=m * n + k)
    expected = reference_gemm(a, w, shift)
    images = []
    for vthreads in (1, 2, 4):
        program = build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=shift)
        result = run(program)
        output = read_gemm_output(program, result.dram, m, n)
        np.testing.assert_array_equal(output, expected)
        images.append(output)
    np.testing.assert_array_equal(images[0], images[1])
    np.testing.assert_array_equal(images[0], images[2])


def test_counters_of_a_blocked_gemm() -> None:
    cfg = preset("default")
    a, w = _matrices(64, 32, 48)
    program = build_blocked_gemm(cfg, a, w, vthreads=2, blocks=GemmBlocks(mb=16, nb=2, kb=3))
    counters = run(program).counters
    kt, nt, mt = 3, 2, 64
    assert counters[Counter.MACS] == mt * nt * kt * cfg.macs_per_uop
    assert counters[Counter.GEMM_UOPS] == mt * nt * kt + mt * nt  # products + resets
    assert counters[Counter.INP_LOAD_BYTES] == mt * kt * cfg.inp_elem_bytes
    assert counters[Counter.WGT_LOAD_BYTES] == (mt // 16) * nt * kt * cfg.wgt_elem_bytes
    assert counters[Counter.OUT_STORE_BYTES] == mt * nt * cfg.out_elem_bytes
    assert counters[Counter.FETCH_INSNS] == program.insn_count
    assert counters[Counter.TOKEN_PUSHES] == counters[Counter.TOKEN_POPS]
    assert counters[Counter.LOAD_INSNS] + counters[Counter.COMPUTE_INSNS] \
        + counters[Counter.STORE_INSNS] == program.insn_count


@pytest.mark.parametrize("depths", [(1, 1), (2, 1), (1, 4)])
def test_back_pressure_from_small_queues_keeps_results(depths) -> None:
    """Tiny command and token queues stall modules but must not change results."""
    cmd, dep = depths
    cfg = preset("tiny").replace(CMD_QUEUE_DEPTH=cmd, DEP_QUEUE_DEPTH=dep)
    a, w = _matrices(24, 12, 20, seed=3)
    for vthreads in (1, 2):
        if vthreads > dep:
            continue  # priming pushes one token per thread into a queue of `dep` entries
        program = build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=4)
        result = run(program)
        np.testing.assert_array_equal(read_gemm_output(program, result.dram, 24, 12),
                                      reference_gemm(a, w, 4))


def test_blocks_that_do_not_fit_are_refused() -> None:
    cfg = preset("tiny")
    a, w = _matrices(8, 8, 8)
    with pytest.raises(BuildError, match=r"^blocks GemmBlocks\(mb=64, nb=4, kb=4\) × 2 virtual threads do not fit"):
        build_blocked_gemm(cfg, a, w, vthreads=2, blocks=GemmBlocks(64, 4, 4))
    with pytest.raises(ValueError, match=r"^vthreads must be at least 1, not 0$"):
        build_blocked_gemm(cfg, a, w, vthreads=0)
    with pytest.raises(ValueError, match=r"^A is 8×8 and W is 8×7: the reduction sizes differ$"):
        build_blocked_gemm(cfg, a, w[:, :7])
    for shift in (32, -1, 99):
        with pytest.raises(ValueError, match=rf"^shift must be an integer in 0\.\.31 or None, not {shift}$"):
            build_blocked_gemm(cfg, a, w, shift=shift)
    a[0, :2] = (-128, 127)
    with pytest.raises(ValueError, match=r"^input 'A' holds values in \[-1280, 1270\], outside int8's "
                                         r"\[-128, 127\]$"):
        build_blocked_gemm(cfg, a.astype(np.int32) * 10, w)


def test_the_largest_shift_agrees_with_numpy() -> None:
    cfg = preset("tiny")
    a, w = _matrices(4, 4, 64, seed=3)
    a[:], w[:] = -128, 127  # every accumulator at -2**20: the shift's sign bits matter
    program = build_blocked_gemm(cfg, a, w, shift=31)
    np.testing.assert_array_equal(read_gemm_output(program, run(program).dram, 4, 4),
                                  reference_gemm(a, w, 31))


def test_token_pattern_of_two_threads_follows_isa_example() -> None:
    """Priming one compute→load token per thread; the drain pops them back before FINISH."""
    cfg = preset("tiny")
    a, w = _matrices(8, 4, 4)
    program = build_blocked_gemm(cfg, a, w, vthreads=2, blocks=GemmBlocks(1, 1, 1))
    insns = program.instructions()
    pushes_to_load = [i.push_prev_dep for i in insns[:4] if i.module.name == "COMPUTE"]
    assert pushes_to_load == [True, True]
    assert insns[-1].opcode.name == "FINISH"
    assert ceil_div(8, cfg.BATCH) == 8

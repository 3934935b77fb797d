"""The vectorized GEMM (float32 products, split micro-op axes) against the naive reference.

Operands are drawn at the edges: every value -128 (the largest product, 2**14), every
value 127, a mix of the two, or uniform; reductions reach 1024 terms (a float32 sum is
exact up to 2**24 = 1024 · 128 · 128) and go past it, where the simulator must fall
back to exact chunks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import ReferenceMachine

from openvta.isa import PRESETS, Config, GemmInsn, Uop
from openvta.sim.functional import gemm
from openvta.sim.functional.gemm import FLOAT32_EXACT_TERMS, exact_product
from openvta.sim.functional.semantics import MachineState, execute_gemm

_EDGES = ("min", "max", "extremes", "uniform")


def _values(rng: np.random.Generator, kind: str, shape: tuple[int, ...]) -> np.ndarray:
    if kind == "min":
        return np.full(shape, -128, dtype=np.int8)
    if kind == "max":
        return np.full(shape, 127, dtype=np.int8)
    if kind == "extremes":
        return rng.choice(np.array([-128, 127], dtype=np.int8), shape)
    return rng.integers(-128, 128, shape, dtype=np.int8)


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(_EDGES),
       terms=st.sampled_from([1, 16, FLOAT32_EXACT_TERMS - 1, FLOAT32_EXACT_TERMS,
                              FLOAT32_EXACT_TERMS + 1, 2 * FLOAT32_EXACT_TERMS + 16]),
       rows=st.integers(1, 3), cols=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_exact_product_at_the_float32_edge(kind: str, terms: int, rows: int, cols: int,
                                           seed: int) -> None:
    rng = np.random.default_rng(seed)
    lhs = _values(rng, kind, (rows, terms))
    rhs = _values(rng, kind, (cols, terms))
    expected = lhs.astype(np.int64) @ rhs.astype(np.int64).T
    np.testing.assert_array_equal(exact_product(lhs, rhs), expected)


def test_float32_exact_terms_is_the_proven_bound() -> None:
    assert FLOAT32_EXACT_TERMS * 128 * 128 == 1 << 24


@st.composite
def gemm_cases(draw: st.DrawFn, cfg: Config, long_sums: bool) -> tuple[GemmInsn, list[Uop]]:
    """A GEMM instruction and its micro-ops; ``long_sums`` reduces into one tile."""
    n_uops = draw(st.integers(1, 8))
    iter_out, iter_in = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    if long_sums:
        # iter_out · iter_in · uops executions of BLOCK_IN terms each into few tiles
        n_uops = draw(st.sampled_from([4, 8]))
        iter_out, iter_in = draw(st.sampled_from([(4, 4), (2, 8), (8, 2), (16, 1)]))
    factor = st.integers(0, 3)
    index = st.integers(0, 15)
    dst = st.integers(0, draw(st.integers(0, 1))) if long_sums else index
    uops = [Uop(draw(dst), draw(index), draw(index))
            for _ in range(n_uops)]
    dst_factors = (0, 0) if long_sums else (draw(factor), draw(factor))
    insn = GemmInsn(cfg=cfg, uop_bgn=0, uop_end=n_uops, iter_out=iter_out, iter_in=iter_in,
                    dst_factor_out=dst_factors[0], dst_factor_in=dst_factors[1],
                    src_factor_out=draw(factor), src_factor_in=draw(factor),
                    wgt_factor_out=draw(factor), wgt_factor_in=draw(factor))
    return insn, uops


def _check_against_reference(cfg: Config, insn: GemmInsn, uops: list[Uop], kind: str,
                             seed: int) -> None:
    rng = np.random.default_rng(seed)
    state = MachineState(cfg, np.zeros(64, dtype=np.uint8))
    n = 64  # every index the cases draw is below 15 + 3·7 + 3·7
    state.inp[:n] = _values(rng, kind, state.inp[:n].shape)
    state.wgt[:n] = _values(rng, kind, state.wgt[:n].shape)
    state.acc[:n] = rng.integers(-(2**31), 2**31, state.acc[:n].shape, dtype=np.int32)
    state.uop[: len(uops)] = [u.encode(cfg) for u in uops]
    reference = ReferenceMachine(cfg, state.dram)
    reference.inp, reference.wgt = state.inp.tolist(), state.wgt.tolist()
    reference.acc, reference.out = state.acc.tolist(), state.out.tolist()
    reference.uop = state.uop.tolist()
    execute_gemm(state, insn, "instruction 0")
    reference.gemm(insn)
    np.testing.assert_array_equal(state.acc, np.array(reference.acc, dtype=np.int32))
    np.testing.assert_array_equal(state.out, np.array(reference.out, dtype=np.int8))


@pytest.mark.parametrize("name", ["tiny", "small", "default"])
def test_gemm_instructions_match_reference(name: str) -> None:
    cfg = PRESETS[name]

    @settings(max_examples={"tiny": 60, "small": 30, "default": 10}[name], deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(case=gemm_cases(cfg, long_sums=False), kind=st.sampled_from(_EDGES),
           seed=st.integers(0, 2**32 - 1))
    def check(case: tuple[GemmInsn, list[Uop]], kind: str, seed: int) -> None:
        _check_against_reference(cfg, *case, kind, seed)

    check()


def test_gemm_long_sums_match_reference() -> None:
    """Default preset: up to 128 executions of 16 terms (2048) summed into one or two tiles."""
    cfg = PRESETS["default"]

    @settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(case=gemm_cases(cfg, long_sums=True), kind=st.sampled_from(_EDGES),
           seed=st.integers(0, 2**32 - 1))
    def check(case: tuple[GemmInsn, list[Uop]], kind: str, seed: int) -> None:
        _check_against_reference(cfg, *case, kind, seed)

    check()


def test_products_run_on_one_blas_thread_and_leave_the_count_as_it_was(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if gemm._OPENBLAS is None:
        pytest.skip("numpy's BLAS is not the OpenBLAS its wheels bundle")
    get, put = gemm._OPENBLAS
    seen: list[int] = []
    here = gemm._float32_product_here

    def spy(*args: Any) -> np.ndarray:
        seen.append(get())
        return here(*args)

    monkeypatch.setattr(gemm, "_float32_product_here", spy)
    rng = np.random.default_rng(0)
    x, y = (rng.integers(-128, 128, (40, 30), dtype=np.int8) for _ in range(2))
    before = get()
    put(2)
    try:
        np.testing.assert_array_equal(gemm.exact_product(x, y), x.astype(np.int64) @ y.T.astype(np.int64))
        assert seen == [1] and get() == 2
    finally:
        put(before)

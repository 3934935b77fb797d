"""The graph level's requantization as epilogue stages: exact against a naive model of the
graph's formula and against ``openvta.graph``'s own integer reference, in numpy and on the
accelerator (conv2d and dense, per tensor and per channel, with a residual add)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import naive_models as naive
import openvta
from openvta.compiler import conv2d, dense
from openvta.compiler.epilogue import AluStage, Epilogue, TensorOperand, apply_epilogue, apply_stages
from openvta.compiler.requantize import POST_SHIFT_RANGE, requantize_stages
from openvta.isa import AluOp, preset

CLIPS = [(-128, 127), (0, 127)]


@st.composite
def _requant(draw: st.DrawFn, channels: int) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """Parameters in the graph's domain: |acc >> pre| <= 2**16 and |m| < 2**15, so that no
    step overflows int32 (see ``openvta.graph.quantization``)."""
    pre = draw(st.integers(0, 15))
    count = st.sampled_from([1, channels])
    mul = draw(count.flatmap(lambda n: st.lists(st.integers(-(2**15) + 1, 2**15 - 1), min_size=n, max_size=n)))
    post = draw(count.flatmap(lambda n: st.lists(st.integers(-4, 31), min_size=n, max_size=n)))
    return pre, tuple(mul), tuple(post)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), channels=st.integers(1, 6), clip=st.sampled_from([None, *CLIPS]))
def test_the_stages_compute_the_graphs_requantization(data: st.DataObject, channels: int,
                                                        clip: tuple[int, int] | None) -> None:
    pre, mul, post = data.draw(_requant(channels))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    acc = rng.integers(-(2**16) << pre, 2**16 << pre, (2, channels), dtype=np.int64).astype(np.int32)
    stages, vectors = requantize_stages(pre, mul, post, channels=channels, clip=clip)
    note(Epilogue(stages).describe())
    expected = naive.graph_requantize(acc, pre, mul, post, clip)
    np.testing.assert_array_equal(apply_stages(acc, stages, vectors), expected)


def test_the_stages_match_the_graphs_own_reference() -> None:
    """``openvta.graph.ops.quant.requantize`` is the contract: the same numbers, per channel."""
    quant = pytest.importorskip("openvta.graph.ops.quant")
    from openvta.graph.ir import DType

    rng = np.random.default_rng(7)
    acc = rng.integers(-(2**20), 2**20, (3, 5, 2, 2), dtype=np.int32)
    for mul, post in (((20000,), (15,)), ((1,), (3, 0, -2, 1, 5)), ((300, -7, 12000, 1, 5), (9,)),
                      ((1,), (0,)), ((5, 6, 7, 8, 9), (1, 2, 3, 0, -1))):
        expected = quant.requantize(acc, 4, mul, post, 1, DType.INT8)
        stages, vectors = requantize_stages(4, mul, post, channels=5)
        np.testing.assert_array_equal(apply_epilogue(acc, Epilogue(stages), vectors), expected)
        wide = quant.requantize(acc, 4, mul, post, 1, DType.INT32)
        stages, vectors = requantize_stages(4, mul, post, channels=5, clip=None)
        np.testing.assert_array_equal(apply_stages(acc, stages, vectors), wide)


def test_the_only_difference_from_unbounded_rounding_is_an_overflow_the_graph_excludes() -> None:
    """round_shift(2**31 - 1, 1): the ALU's ADD 1 wraps (as docs/ISA.md §3 says); the graph's bounds
    (|x * m| < 2**31 with m < 2**15) never produce it."""
    stages, _ = requantize_stages(0, (1,), (1,), channels=1, clip=None)
    top = np.array([[2**31 - 1]], np.int32)
    assert apply_stages(top, stages, {}).item() == -(2**30)
    assert naive.graph_requantize(top, 0, (1,), (1,), None).item() == 2**30


def test_per_tensor_values_are_immediates_and_wide_ones_vectors() -> None:
    stages, vectors = requantize_stages(0, (1,), (0,), channels=4, clip=None)
    assert stages == () and vectors == {}
    stages, vectors = requantize_stages(0, (70000,), (-3,), channels=2, clip=(0, 127), prefix="q")
    assert Epilogue(stages).describe() == "MUL q_mul[c], SHR -3, MIN 127, MAX 0"
    assert vectors["q_mul"].tolist() == [70000, 70000] and vectors["q_mul"].dtype == np.int32
    stages, vectors = requantize_stages(3, (2, 3), (2, 0, ), channels=2, clip=None, prefix="q")
    assert Epilogue(stages).describe() == "SHR 3, MUL q_mul[c], SHR q_shift[c], ADD q_round[c], SHR q_round[c]"
    assert (vectors["q_shift"].tolist(), vectors["q_round"].tolist()) == ([1, 0], [1, 0])


@pytest.mark.parametrize(("args", "message"), [
    ((32, (1,), (1,)), r"requantization pre_shift must be an integer in 0..31, not 32"),
    ((True, (1,), (1,)), r"requantization pre_shift must be an integer in 0..31, not True"),
    ((0, (1, 2), (1,)), r"requantization multiplier must hold 1 value or one per channel \(3\), not 2"),
    ((0, (2**31,), (1,)), r"requantization multiplier must be in -2147483648..2147483647, not 2147483648"),
    ((0, (1,), (POST_SHIFT_RANGE[1] + 1,)), rf"requantization post_shift must be in "
                                            rf"{POST_SHIFT_RANGE[0]}..{POST_SHIFT_RANGE[1]}, not 33"),
])
def test_bad_requantization_parameters_are_refused(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        requantize_stages(*args, channels=3)


def _conv_inputs(rng: np.random.Generator, ci: int, co: int, hw: int) -> dict[str, np.ndarray]:
    return {"data": rng.integers(-128, 128, (1, ci, hw, hw), dtype=np.int8),
            "weight": rng.integers(-127, 128, (co, ci, 3, 3), dtype=np.int8),
            "bias": rng.integers(-(2**12), 2**12, (co,), dtype=np.int32)}


@pytest.mark.parametrize("config", ["tiny", "small", "default"])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("clip", CLIPS)
def test_a_requantized_conv2d_on_both_simulators(config: str, per_channel: bool, clip: tuple[int, int]) -> None:
    cfg = preset(config)
    co = 2 * cfg.BLOCK_OUT - 1
    rng = np.random.default_rng(co)
    # |acc| < 2**20 here, so a pre-shift of 4 keeps |x| <= 2**16 (the graph's domain)
    mul = tuple(int(v) for v in rng.integers(2**13, 2**15, co)) if per_channel else (23000,)
    post = tuple(int(v) for v in rng.integers(15, 21, co)) if per_channel else (19,)
    if per_channel:
        mul, post = (1, *mul[1:]), (-1, 0, *post[2:])  # a left shift and no rounding too
    stages, vectors = requantize_stages(4, mul, post, channels=co, clip=clip)
    op = conv2d(cfg, ci=cfg.BLOCK_IN + 3, co=co, hw=5, kernel=3, pad=1, shift=None, clip=None,
                epilogue=Epilogue(stages), vthreads=2 if config != "tiny" else 1)
    inputs = _conv_inputs(rng, cfg.BLOCK_IN + 3, co, 5) | vectors
    acc = naive.conv2d(inputs["data"], inputs["weight"], 1, 1).astype(np.int64) + inputs["bias"].reshape(1, -1, 1, 1)
    expected = naive.graph_requantize(acc, 4, mul, post, clip).astype(np.int8)
    assert len(np.unique(expected)) > 20
    np.testing.assert_array_equal(op.reference(inputs), expected)
    program = op.build(inputs)
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], expected)


@pytest.mark.parametrize("config", ["tiny", "small"])
def test_a_fused_residual_group_on_both_simulators(config: str) -> None:
    """The graph's fused group conv + requantize + Add(requantize(conv), requantize(skip)) + clip:
    the skip's requantization runs on its own accumulator copy before the add."""
    cfg = preset(config)
    co, hw = cfg.BLOCK_OUT + 2, 4
    rng = np.random.default_rng(11)
    own, own_vectors = requantize_stages(3, (21000,), (19,), channels=co, clip=(-128, 127), prefix="own")
    into, _ = requantize_stages(0, (4000,), (13,), channels=co, clip=None, prefix="into")
    skip_mul = tuple(int(v) for v in rng.integers(2000, 8000, co))
    skip, skip_vectors = requantize_stages(0, skip_mul, (14,), channels=co, clip=None, prefix="skipq")
    epilogue = Epilogue(own + into + (AluStage(AluOp.ADD, TensorOperand("skip", "int8", skip)),
                                      AluStage(AluOp.MIN, 127), AluStage(AluOp.MAX, 0)))
    op = dense(cfg, batch=8, in_features=2 * cfg.BLOCK_IN, out_features=co, shift=None, clip=None,
               epilogue=epilogue) if config == "tiny" else \
        conv2d(cfg, ci=cfg.BLOCK_IN, co=co, hw=hw, kernel=3, pad=1, shift=None, clip=None, epilogue=epilogue)
    inputs = {name: rng.integers(-128, 128, shape, dtype=np.int8) for name, shape in op.logical_shapes.items()
              if name in ("data", "weight", "skip")}
    inputs |= {"bias": rng.integers(-(2**12), 2**12, (co,), dtype=np.int32), **own_vectors, **skip_vectors}
    acc = (naive.conv2d(inputs["data"], inputs["weight"], 1, 1) if op.name == "conv2d"
           else naive.dense(inputs["data"], inputs["weight"])).astype(np.int64)
    acc += inputs["bias"].reshape((1, -1) + (1,) * (acc.ndim - 2))
    left = naive.graph_requantize(naive.graph_requantize(acc, 3, (21000,), (19,), (-128, 127)),
                                  0, (4000,), (13,), None)
    right = naive.graph_requantize(inputs["skip"], 0, skip_mul, (14,), None)
    expected = np.clip(left + right, 0, 127).astype(np.int8)
    assert len(np.unique(expected)) > 10
    np.testing.assert_array_equal(op.reference(inputs), expected)
    program = op.build(inputs)
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], expected)


@pytest.mark.rtl
@pytest.mark.slow
def test_per_channel_requantization_and_a_requantized_residual_on_the_rtl() -> None:
    cfg = preset("tiny")
    rng = np.random.default_rng(5)
    co = 6
    own, vectors = requantize_stages(4, tuple(range(9000, 9000 + 6 * 700, 700)), (18, 17, 0, -1, 19, 16),
                                     channels=co, clip=(-128, 127), prefix="own")
    skip, skip_vectors = requantize_stages(0, (3, 5, 7, 9, 11, 13), (2, 3, 1, 0, -1, 4), channels=co,
                                           clip=None, prefix="skipq")
    epilogue = Epilogue(own + (AluStage(AluOp.ADD, TensorOperand("skip", "int8", skip)),
                               AluStage(AluOp.MIN, 127), AluStage(AluOp.MAX, 0)))
    op = conv2d(cfg, ci=5, co=co, hw=4, kernel=3, pad=1, shift=None, clip=None, epilogue=epilogue)
    inputs = _conv_inputs(rng, 5, co, 4) | vectors | skip_vectors
    inputs["skip"] = rng.integers(-128, 128, (1, co, 4, 4), dtype=np.int8)
    expected = op.reference(inputs)
    assert len(np.unique(expected)) > 10
    np.testing.assert_array_equal(openvta.simulate(op.build(inputs), backend="rtl")["out"], expected)

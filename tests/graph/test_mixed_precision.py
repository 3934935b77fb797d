"""Mixed precision: 16-bit activations computed by int8 passes of the accelerator.

The byte split is exact over the wide range (hypothesis); a product with a 16-bit input and
output at K = 1536, the FFN's width, at the range's extremes, equals its exact product up
to the output's rounding, and every back end equals the reference; ``mixed`` picks the
tensors int8 loses on; the options' errors are one line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import openvta
from openvta.graph.ir import Attrs, DType, Node, Op, TensorType
from openvta.graph.errors import OpError
from openvta.graph.ops.quant import DEFS
from openvta.isa import WIDE_MAX, WIDE_MIN, join_wide, wide_high, wide_low

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "minilm"))
import minilm_model  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.integers(-2**20, 2**20))
def test_the_byte_split_is_exact_over_the_wide_range(value: int) -> None:
    high, low = wide_high(np.array([value])), wide_low(np.array([value]))
    assert high.dtype == np.int8 and low.dtype == np.int8
    assert join_wide(high, low)[0] == min(max(value, WIDE_MIN), WIDE_MAX)


def test_the_wide_range_extremes_split_into_int8() -> None:
    values = np.array([WIDE_MIN, WIDE_MIN + 1, -129, -128, 127, 128, WIDE_MAX - 1, WIDE_MAX])
    np.testing.assert_array_equal(join_wide(wide_high(values), wide_low(values)), values)
    assert wide_high(np.array([WIDE_MAX, WIDE_MIN])).tolist() == [127, -128]


def _product(k: int, n: int, weight: np.ndarray, bias: np.ndarray) -> object:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y0"]), helper.make_node("Add", ["y0", "b"], ["y"])]
    graph = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, n])],
                              [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_16_bit_product_at_k_1536_at_the_range_extremes_is_exact_on_every_back_end() -> None:
    """Weights ±1 (int8 ±127), inputs at ±range, in sign with the weights and against them:
    ``x·W`` with a 16-bit ``x`` would reach 2**15·2**7·1536 > 2**31 in one accumulator."""
    k, n = 1536, 16
    rng = np.random.default_rng(0)
    weight = rng.choice([-1.0, 1.0], (k, n)).astype(np.float32)
    bias = rng.normal(size=n).astype(np.float32)
    top = 4.0
    rows = [np.full(k, top), np.full(k, -top), top * weight[:, 0], -top * weight[:, 1],
            top * np.sign(rng.normal(size=k)), rng.uniform(-top, top, k), rng.uniform(-top, top, k) / 50,
            np.zeros(k)]
    x = np.array(rows, dtype=np.float32)
    model = openvta.compile_model(_product(k, n, weight, bias), x, precision="int16")
    products = [node for node in model.graph.nodes if node.op is Op.GEMM]
    assert len(products) == 4
    assert all(node.precision is not None and node.precision.passes == 4 for node in products)
    reference = model.reference(x)["y"]
    exact = x.astype(np.float64) @ weight.astype(np.float64) + bias
    reach = np.abs(exact).max()
    assert reach > top * k * 0.99  # the worst case is among the rows: the accumulators' extremes
    # 16 bits of the output's range (its step), the input's rounding on 1536 terms, the bias's
    step = reach / WIDE_MAX
    assert np.abs(reference - exact).max() <= 2 * step + k * (top / WIDE_MAX) / 2 + 1e-3 * reach
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(model.run(x, backend=backend)["y"], reference)
    line = next(line for line in model.summary().splitlines() if line.startswith("MACs"))
    assert "100.0% with a 16-bit activation in int8 passes" in line


def test_a_mixed_model_file_round_trips(tmp_path: Path) -> None:
    from openvta.graph.compiled_model import load_model

    rng = np.random.default_rng(2)
    weight = rng.normal(size=(64, 8)).astype(np.float32)
    x = rng.normal(size=(4, 64)).astype(np.float32)
    model = openvta.compile_model(_product(64, 8, weight, np.zeros(8, np.float32)), x, precision="int16")
    model.save(tmp_path / "wide.ovta")
    loaded = load_model(tmp_path / "wide.ovta")
    np.testing.assert_array_equal(loaded.run(x, backend="functional")["y"], model.reference(x)["y"])


def test_int8_at_the_same_extremes_is_coarser() -> None:
    k, n = 1536, 16
    rng = np.random.default_rng(1)
    weight = (rng.integers(-127, 128, (k, n)) / 127).astype(np.float32)
    weight[0] = 1.0  # every column's peak 1: int8 weights exact, the activations' error alone
    x = rng.normal(size=(8, k)).astype(np.float32)
    x[:, 3] *= 200  # an outlier channel: int8 per tensor flattens the others
    model8 = openvta.compile_model(_product(k, n, weight, np.zeros(n, np.float32)), x, precision="int8")
    mixed = openvta.compile_model(_product(k, n, weight, np.zeros(n, np.float32)), x, precision="mixed")
    assert any(n.precision for n in mixed.graph.nodes)
    exact = x.astype(np.float64) @ weight
    err8 = np.abs(model8.reference(x)["y"] - exact).max()
    err16 = np.abs(mixed.reference(x)["y"] - exact).max()
    assert err16 < err8 / 4
    np.testing.assert_array_equal(mixed.run(x, backend="functional")["y"], mixed.reference(x)["y"])


def test_mixed_is_the_default_and_int8_is_asked_for() -> None:
    k, n = 1536, 8
    rng = np.random.default_rng(3)
    weight = rng.normal(size=(k, n)).astype(np.float32)
    x = rng.normal(size=(8, k)).astype(np.float32)
    x[:, 3] *= 300  # an outlier channel among 1536: int8 loses on this input (13 dB)
    proto = _product(k, n, weight, np.zeros(n, np.float32))
    assert any(n.precision for n in openvta.compile_model(proto, x).graph.nodes)
    assert not any(n.precision for n in openvta.compile_model(proto, x, precision="int8").graph.nodes)


@pytest.mark.parametrize("kwargs, message", [
    ({"precision": "int4"}, "precision must be one of int8, mixed, mixed:<dB>, auto, auto:<budget>, int16, "
                            "not 'int4'"),
    ({"precision": "mixed:loud"}, "precision must be one of int8, mixed, mixed:<dB>, auto, auto:<budget>, int16, "
                                  "not 'mixed:loud'"),
    ({"precision": "mixed", "quantize": "exact"},
     "precision 'mixed' needs calibrated scales (quantize 'fixed' or 'pow2'); an exact QDQ model keeps its own "
     "int8 scales"),
])
def test_precision_errors_are_one_line(kwargs: dict, message: str) -> None:
    weight = np.ones((4, 2), np.float32)
    with pytest.raises(ValueError) as info:
        openvta.compile_model(_product(4, 2, weight, np.zeros(2, np.float32)), np.ones((1, 4), np.float32), **kwargs)
    assert str(info.value) == message


def _infer(op: Op, types: list[TensorType], attrs: dict) -> TensorType:
    entry = next(d for d in DEFS if d.op is op)
    return entry.infer(types, Attrs(attrs))


@pytest.mark.parametrize("op, types, attrs, message", [
    (Op.WIDE_BYTE, [TensorType((2,), DType.INT8)], {"part": "high"}, "WideByte input must be int32, not int8"),
    (Op.WIDE_BYTE, [TensorType((2,), DType.INT32)], {"part": "middle"},
     "WideByte part must be one of high, low, not 'middle'"),
    (Op.JOIN_WIDE, [TensorType((2,), DType.INT8), TensorType((3,), DType.INT8)], {},
     "JoinWide operands must be two int8 tensors of one shape, not int8[2] and int8[3]"),
    (Op.QUANTIZE, [TensorType((2,), DType.FLOAT32)], {"scale": 0.5, "bits": 12},
     "Quantize bits must be one of 8, 16, 32, not 12"),
])
def test_wide_op_errors_name_the_problem(op: Op, types: list, attrs: dict, message: str) -> None:
    with pytest.raises(OpError) as info:
        _infer(op, types, attrs)
    assert str(info.value) == message


def test_a_wide_quantize_is_int32_in_the_wide_range() -> None:
    assert _infer(Op.QUANTIZE, [TensorType((2,), DType.FLOAT32)], {"scale": 0.5, "bits": 16}).dtype is DType.INT32
    node = Node("q", Op.QUANTIZE, ("x",), ("y",), Attrs({"scale": 1.0, "bits": 16}))
    entry = next(d for d in DEFS if d.op is Op.QUANTIZE)
    out = entry.float_ref([np.array([1e6, -1e6, 3.4], np.float32)], node.attrs)
    assert out.tolist() == [WIDE_MAX, WIDE_MIN, 3]


def test_minilm_mixed_precision_reaches_the_float_embeddings_on_every_back_end() -> None:
    try:
        path = minilm_model.model_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    calibration, evaluation = minilm_model.protocol()
    model = openvta.compile_model(str(path), calibration, precision="mixed")
    wide = {n.name for n in model.graph.nodes if n.op is Op.GEMM and n.precision}
    assert wide and all("layer.0/output/dense" in name for name in wide)
    embedding = minilm_model.EMBEDDING
    feeds = evaluation[1]
    reference = model.reference(feeds)
    assert minilm_model.cosine(reference[embedding], model.float_reference(feeds)[embedding]) > 0.98
    functional = model.run(feeds, backend="functional")
    for name, value in reference.items():
        np.testing.assert_array_equal(functional[name], value)

"""The transformer's integer kernels: Softmax, LayerNorm, the tables of GELU/Erf/Tanh/
Sigmoid, the requantizing Div/Mul by a constant, the integer Transpose, and the fusion of
GELU's Erf form.

Each integer reference equals its float op on the int8 values to its output's rounding
(hypothesis over values and scales); a graph of them quantizes to integer nodes only and
every back end equals the reference; malformed attributes are one line.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from graphs import build, node
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from openvta.graph.errors import OpError
from openvta.graph.execute import execute
from openvta.graph.ir import Attrs, DType, Op, RequantMode, TensorType
from openvta.graph.ops.elementwise import EXP_BITS, softmax_int
from openvta.graph.ops.transformer import isqrt, layer_norm_int
from openvta.graph.passes.calibrate import calibrate
from openvta.graph.passes.quantize import quantize
from openvta.graph.passes.canonicalize import canonicalize
from openvta.graph.passes.legalize import legalize
from openvta.graph.registry import op_def
from openvta.graph.verify import verify_graph


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**62))
def test_isqrt_is_the_exact_floor(value: int) -> None:
    assert isqrt(np.array([value]))[0] == math.isqrt(value)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-128, 127), min_size=2, max_size=40), st.floats(0.005, 0.5))
def test_integer_softmax_is_the_float_softmax_to_rounding(row: list[int], scale: float) -> None:
    q = np.array([row], np.int8)
    table = np.rint((1 << EXP_BITS) * np.exp(-np.arange(256) * scale)).astype(np.int64)
    out_scale = 1 / 127
    got = softmax_int(q, table, int(round(2**16 / out_scale)), -1)
    x = q.astype(np.float64) * scale
    expected = np.exp(x - x.max()) / np.exp(x - x.max()).sum() / out_scale
    assert np.abs(got - expected).max() <= 1.0  # the table's and the output's roundings


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-128, 127), st.booleans()), min_size=2, max_size=40), st.floats(0.005, 0.5),
       st.sampled_from([-(2**30), -10000]))
def test_masked_scores_weigh_nothing(row: list[tuple[int, bool]], scale: float, mask: int) -> None:
    """int32 scores plus a mask far below them (the quantize pass saturates -3.4e38 at
    -2**30): the table that runs until it rounds to 0 gives masked positions 0 and the
    others exactly what the int8 kernel gives them over the unmasked positions alone."""
    scores = np.array([v for v, _ in row], np.int64)
    masked = np.array([m for _, m in row])
    assume(not masked.all())
    length = math.ceil(math.log(2 ** (EXP_BITS + 1)) / scale) + 1
    table = np.rint((1 << EXP_BITS) * np.exp(-np.arange(max(length, 256)) * scale)).astype(np.int64)
    multiplier = int(round(2**16 * 127))
    got = softmax_int((scores + np.where(masked, mask, 0)).astype(np.int32)[None], table[:length], multiplier, -1)[0]
    alone = softmax_int(scores[~masked].astype(np.int8)[None], table[:256], multiplier, -1)[0]
    assert (got[masked] == 0).all()
    np.testing.assert_array_equal(got[~masked], alone)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-128, 127), min_size=4, max_size=64), st.floats(0.01, 1.0), st.floats(0.02, 0.5))
def test_integer_layer_norm_is_the_float_one_to_rounding(row: list[int], in_scale: float, out_scale: float) -> None:
    q = np.array([row], np.int8)
    n = q.shape[1]
    rng = np.random.default_rng(len(row))
    gamma, beta = rng.uniform(0.5, 1.5, n), rng.uniform(-0.5, 0.5, n)
    gain = np.rint(gamma * 2**16 / out_scale).astype(np.int64)
    offset = np.rint(beta * 2**16 / out_scale).astype(np.int64)
    eps = 1e-5
    got = layer_norm_int(q, gain, offset, int(round(2**16 * n * n * eps / in_scale**2)))
    x = q[0].astype(np.float64) * in_scale
    expected = ((x - x.mean()) / np.sqrt(x.var() + eps) * gamma + beta) / out_scale
    assert np.abs(got[0] - np.clip(expected, -128, 127)).max() <= 1.0


def _encoder_graph(erf_form: str) -> tuple:
    """LayerNorm → Gemm → GELU (Erf form) → Gemm → Softmax over 8 tokens of 16 features."""
    rng = np.random.default_rng(0)
    consts = {"g": rng.uniform(0.5, 1.5, 16).astype(np.float32), "b": rng.uniform(-0.2, 0.2, 16).astype(np.float32),
              "w1": (rng.standard_normal((16, 32)) / 4).astype(np.float32),
              "w2": (rng.standard_normal((32, 16)) / 6).astype(np.float32),
              "root2": np.array(math.sqrt(2.0), np.float32), "inv_root2": np.array(1 / math.sqrt(2.0), np.float32),
              "one": np.array(1.0, np.float32), "half": np.array(0.5, np.float32),
              "two": np.array(2.0, np.float32)}
    scale = node("scale", Op.DIV, ("h", "root2"), "d") if erf_form == "div" else \
        node("scale", Op.MUL, ("inv_root2", "h"), "d")
    tail = [node("times", Op.MUL, ("h", "p"), "m"), node("halve", Op.MUL, ("m", "half"), "a")] \
        if erf_form == "div" else [node("halve", Op.MUL, ("half", "h"), "m"), node("times", Op.MUL, ("p", "m"), "a")]
    nodes = [node("ln", Op.LAYER_NORM, ("x", "g", "b"), "n", axis=-1, epsilon=1e-5),
             node("fc1", Op.MATMUL, ("n", "w1"), "h"), scale, node("erf", Op.ERF, ("d",), "e"),
             node("plus", Op.ADD, ("e", "one"), "p"), *tail,
             node("fc2", Op.MATMUL, ("a", "w2"), "o"), node("div", Op.DIV, ("o", "two"), "s"),
             node("soft", Op.SOFTMAX, ("s",), "y", axis=-1)]
    return build(nodes, {"x": (8, 16)}, ("y",), consts), rng.standard_normal((8, 16)).astype(np.float32) * 3


@pytest.mark.parametrize("erf_form", ["div", "mul"])
def test_an_encoder_layer_quantizes_to_integer_kernels(erf_form: str) -> None:
    g, x = _encoder_graph(erf_form)
    simple = legalize(canonicalize(g))
    assert [n.op for n in simple.nodes].count(Op.GELU) == 1 and Op.ERF not in [n.op for n in simple.nodes]
    q = verify_graph(quantize(calibrate(simple, [{"x": x}], RequantMode.FIXED), RequantMode.FIXED))
    floats = [n.op for n in q.nodes if q.types[n.outputs[0]].dtype is DType.FLOAT32]
    assert floats == [Op.DEQUANTIZE]  # the output, and nothing else in float
    ops = {n.op: q.types[n.inputs[0]].dtype for n in q.nodes}
    assert ops[Op.LAYER_NORM] is DType.INT8 and ops[Op.SOFTMAX] is DType.INT8 and Op.TABLE in ops
    expected = execute(g, {"x": x})["y"]
    got = execute(q, {"x": x})["y"]
    assert np.abs(got - expected).max() < 0.08  # probabilities to about 10 int8 steps


@pytest.mark.parametrize("gelu, layernorm", [("erf", "decomposed"), ("tanh", "op"), ("tanh", "decomposed"),
                                             ("op", "op")])
def test_every_exporter_form_reaches_the_integer_kernels(gelu: str, layernorm: str) -> None:
    """GELU's Erf and tanh forms and the Gelu operator, LayerNorm as one op or decomposed:
    one Gelu and two LayerNorms after canonicalize, computed by the integer kernels, equal on
    the functional back end."""
    import openvta
    from transformer_models import encoder_layer

    x = np.random.default_rng(0).standard_normal((1, 16, 32)).astype(np.float32)
    model = openvta.compile_model(encoder_layer(gelu=gelu, layernorm=layernorm, opset=20 if gelu == "op" else 17), x)
    ops = [n.op for n in model.float_graph.nodes]
    assert ops.count(Op.GELU) == 1 and ops.count(Op.LAYER_NORM) == 2
    assert not {Op.ERF, Op.TANH, Op.POW, Op.SQRT, Op.REDUCE_MEAN} & set(ops)
    kernels = [n for n in model.graph.nodes if n.op in (Op.LAYER_NORM, Op.TABLE, Op.SOFTMAX)]
    # (a LayerNorm read by a residual sum has a 16-bit version too; each reads int8 or 16-bit values)
    assert {n.op.value for n in kernels} == {"LayerNormalization", "Softmax", "Table"}
    assert len({n.name.removesuffix(".wide") for n in kernels if n.op is Op.LAYER_NORM}) == 2
    assert all(model.graph.types[n.inputs[0]].dtype in (DType.INT8, DType.INT32) for n in kernels)
    name = model.graph.outputs[0]
    np.testing.assert_array_equal(model.run(x, backend="functional")[name], model.reference(x)[name])
    expected = model.float_reference(x)[name]
    assert np.abs(model.reference(x)[name] - expected).max() < 0.06 * np.abs(expected).max()


def test_a_near_gelu_is_left_alone() -> None:
    g, _ = _encoder_graph("div")
    consts = dict(g.constants)
    consts["root2"] = np.array(1.5, np.float32)  # not x / sqrt(2): not GELU
    g = g.replace(constants=consts)
    assert Op.GELU not in [n.op for n in canonicalize(g).nodes]


def test_a_division_by_a_negative_constant_stays_float() -> None:
    g = build([node("div", Op.DIV, ("x", "c"), "y")], {"x": (4, 4)}, ("y",), {"c": np.array(-2.0, np.float32)})
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    q = quantize(calibrate(g, [{"x": x}], RequantMode.FIXED), RequantMode.FIXED)
    assert q.types[q.node("div").inputs[0]].dtype is DType.FLOAT32


@pytest.mark.parametrize("op, types, attrs, message", [
    (Op.TABLE, [TensorType((2,), DType.INT8)], {"table": (1, 2), "out_dtype": DType.INT8},
     "Table table must hold 256 integers, one per int8 code"),
    (Op.TABLE, [TensorType((2,), DType.INT8)], {"table": (300,) * 256, "out_dtype": DType.INT8},
     "Table values must lie within -128..127 for int8"),
    (Op.TABLE, [TensorType((2,), DType.FLOAT32)], {"table": (0,) * 256, "out_dtype": DType.INT8},
     "Table input must be int8, not float32"),
    (Op.SOFTMAX, [TensorType((2, 3), DType.INT8)], {"exp_table": (0, 1), "multiplier": 5},
     "an integer Softmax's exp_table must hold 1 to 65536 integers in 0..2**15, the first positive"),
    (Op.SOFTMAX, [TensorType((2, 3), DType.INT32)], {"exp_table": (), "multiplier": 5},
     "an integer Softmax's exp_table must hold 1 to 65536 integers in 0..2**15, the first positive"),
    (Op.SOFTMAX, [TensorType((2, 3), DType.INT8)], {"exp_table": (1,), "multiplier": 0},
     "an integer Softmax's multiplier must be a positive integer below 2**40, not 0"),
    (Op.LAYER_NORM, [TensorType((2, 3), DType.INT8)], {"gain": (1, 2), "offset": (0, 0, 0)},
     "an integer LayerNormalization's gain must hold 3 integers, one per channel"),
    (Op.LAYER_NORM, [TensorType((2, 3), DType.INT8)], {"axis": 0, "gain": (1, 2, 3), "offset": (0, 0, 0)},
     "an integer LayerNormalization normalizes the last axis only"),
])
def test_integer_kernel_attributes_are_checked(op: Op, types: list, attrs: dict, message: str) -> None:
    with pytest.raises(OpError) as info:
        op_def(op).infer(types, Attrs(attrs))
    assert str(info.value) == message


def test_a_causal_mask_constant_reaches_the_integer_softmax() -> None:
    """Scores plus a constant causal mask of -inf: the mask as int32 saturated at -2**30, the
    integer Softmax reads the int32 sum; masked positions are exactly 0, the rest the float
    Softmax's to a few output steps, and the functional back end equals the reference."""
    import openvta

    rng = np.random.default_rng(3)
    causal = np.triu(np.full((8, 8), -np.inf, np.float32), 1)
    g = build([node("scores", Op.MATMUL, ("x", "w"), "s"), node("mask", Op.ADD, ("s", "causal"), "m"),
               node("soft", Op.SOFTMAX, ("m",), "y", axis=-1)], {"x": (8, 16)}, ("y",),
              {"w": (rng.standard_normal((16, 8)) / 4).astype(np.float32), "causal": causal})
    x = rng.standard_normal((8, 16)).astype(np.float32)
    model = openvta.compile_model(g, x, config="default")
    softmax, = (n for n in model.graph.nodes if n.op is Op.SOFTMAX)
    assert model.graph.types[softmax.inputs[0]].dtype is DType.INT32
    mask = next(v for name, v in model.graph.constants.items() if name.startswith("causal"))
    assert mask.dtype == np.int32 and mask.min() == -(2**30) and mask.max() == 0
    reference = model.reference(x)["y"]
    assert (reference[np.isinf(causal)] == 0).all()
    expected = model.float_reference(x)["y"]
    assert np.abs(reference - expected).max() < 0.03
    np.testing.assert_array_equal(model.run(x, backend="functional")["y"], reference)


def test_a_causal_and_a_padding_mask_one_after_the_other() -> None:
    """Scores + a causal constant of -3.4e38 + a padding mask given as a float input (0 or
    -inf): the first sum saturated at ±2**30 before the second, both int32, the integer
    Softmax; every masked position exactly 0, equal on the functional back end."""
    import openvta

    rng = np.random.default_rng(5)
    causal = np.triu(np.full((8, 8), np.finfo(np.float32).min, np.float32), 1)
    g = build([node("scores", Op.MATMUL, ("x", "w"), "s"), node("causal_mask", Op.ADD, ("s", "causal"), "c"),
               node("pad_mask", Op.ADD, ("pad", "c"), "m"), node("soft", Op.SOFTMAX, ("m",), "y", axis=-1)],
              {"x": (8, 16), "pad": (1, 8)}, ("y",),
              {"w": (rng.standard_normal((16, 8)) / 4).astype(np.float32), "causal": causal})
    pad = np.zeros((1, 8), np.float32)
    pad[0, 6:] = -np.inf
    feeds = [{"x": rng.standard_normal((8, 16)).astype(np.float32), "pad": pad} for _ in range(2)]
    model = openvta.compile_model(g, feeds, config="default")
    clip, = (n for n in model.graph.nodes if n.op is Op.CLIP)
    assert clip.attrs["min"] == -(2**30) and model.graph.types[clip.outputs[0]].dtype is DType.INT32
    softmax, = (n for n in model.graph.nodes if n.op is Op.SOFTMAX)
    assert model.graph.types[softmax.inputs[0]].dtype is DType.INT32
    reference = model.reference(feeds[0])["y"]
    masked = (causal < 0) | np.isinf(pad)
    assert (reference[masked] == 0).all() and (reference[~masked] > 0).any()
    assert np.abs(reference - model.float_reference(feeds[0])["y"]).max() < 0.03
    np.testing.assert_array_equal(model.run(feeds[0], backend="functional")["y"], reference)

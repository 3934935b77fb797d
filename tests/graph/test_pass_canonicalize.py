"""canonicalize: identities removed, constants and BatchNormalization folded; its steps,
one pipeline step each."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import RNG, build, node

from openvta.graph.errors import PassError
from openvta.graph.execute import execute
from openvta.graph.verify import verify_graph
from openvta.graph.ir import DType, Graph, Op, RequantMode, TensorType
from openvta.graph.passes.canonicalize import STEPS, canonicalize, fold_batch_norms
from openvta.graph.pipeline import PASSES, CompileOptions
from openvta.isa import preset


def _same_function(before: Graph, after: Graph, x: np.ndarray) -> None:
    expected = execute(before, {"x": x})
    got = execute(after, {"x": x})
    for name in before.outputs:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)


def test_identity_and_dropout_are_removed_keeping_output_names() -> None:
    g = build([node("i", Op.IDENTITY, ("x",), "a"), node("r", Op.RELU, ("a",), "b"),
               node("d", Op.DROPOUT, ("b",), "c"), node("i2", Op.IDENTITY, ("c",), "y")],
              {"x": (2, 3)}, ("y",))
    s = verify_graph(canonicalize(g))
    assert [(n.op, n.inputs, n.outputs) for n in s.nodes] == [(Op.RELU, ("x",), ("y",))]
    _same_function(g, s, RNG.standard_normal((2, 3)).astype(np.float32))


def test_an_identity_copying_an_input_to_an_output_stays() -> None:
    g = build([node("i", Op.IDENTITY, ("x",), "y")], {"x": (2,)}, ("y",))
    assert [n.op for n in canonicalize(g).nodes] == [Op.IDENTITY]


def test_constant_subgraphs_fold() -> None:
    k = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    g = build([node("r", Op.RELU, ("k",), "rk"), node("f", Op.RESHAPE, ("rk",), "fk", shape=(3, 2)),
               node("mm", Op.MATMUL, ("x", "fk"), "y")], {"x": (4, 3)}, ("y",), {"k": k})
    s = verify_graph(canonicalize(g))
    assert [(n.op, n.inputs[1] in s.constants) for n in s.nodes] == [(Op.MATMUL, True)]
    _same_function(g, s, RNG.standard_normal((4, 3)).astype(np.float32))


def test_batch_norm_folds_into_the_conv_before_it() -> None:
    c = 3
    consts = {"w": RNG.standard_normal((c, 2, 3, 3)).astype(np.float32),
              "b": RNG.standard_normal(c).astype(np.float32),
              "g": RNG.uniform(0.5, 2, c).astype(np.float32), "beta": RNG.standard_normal(c).astype(np.float32),
              "m": RNG.standard_normal(c).astype(np.float32), "v": RNG.uniform(0.1, 2, c).astype(np.float32)}
    g = build([node("conv", Op.CONV, ("x", "w", "b"), "c", pads=(1, 1, 1, 1)),
               node("bn", Op.BATCH_NORM, ("c", "g", "beta", "m", "v"), "y", epsilon=1e-3)],
              {"x": ("N", 2, 5, 5)}, ("y",), consts)
    s = verify_graph(canonicalize(g))
    assert [(n.op, n.outputs) for n in s.nodes] == [(Op.CONV, ("y",))]
    assert set(s.constants) == {"conv.weight", "conv.bias"}
    _same_function(g, s, RNG.standard_normal((2, 2, 5, 5)).astype(np.float32))


def test_batch_norm_stays_when_the_conv_output_is_shared() -> None:
    c = 2
    consts = {"w": np.ones((c, c, 1, 1), np.float32), **{k: np.ones(c, np.float32)
                                                         for k in ("g", "beta", "m", "v")}}
    g = build([node("conv", Op.CONV, ("x", "w"), "c"),
               node("bn", Op.BATCH_NORM, ("c", "g", "beta", "m", "v"), "n"),
               node("add", Op.ADD, ("n", "c"), "y")], {"x": (1, c, 2, 2)}, ("y",), consts)
    assert [n.op for n in canonicalize(g).nodes] == [Op.CONV, Op.BATCH_NORM, Op.ADD]


def test_a_hard_sigmoid_after_a_conv_is_its_clip() -> None:
    """SE's gate: Conv → HardSigmoid becomes the Conv scaled by alpha, shifted by beta, and a
    Clip to [0, 1], the same function; with another reader of the Conv, it stays."""
    consts = {"w": RNG.standard_normal((4, 3, 1, 1)).astype(np.float32), "b": RNG.standard_normal(4).astype(np.float32)}
    g = build([node("conv", Op.CONV, ("x", "w", "b"), "c"),
               node("gate", Op.HARD_SIGMOID, ("c",), "y", alpha=1 / 6, beta=0.5)],
              {"x": ("N", 3, 1, 1)}, ("y",), consts)
    s = verify_graph(canonicalize(g))
    assert [(n.op, dict(n.attrs)) for n in s.nodes][1:] == [(Op.CLIP, {"min": 0.0, "max": 1.0})]
    _same_function(g, s, 4 * RNG.standard_normal((5, 3, 1, 1)).astype(np.float32))
    shared = build([node("conv", Op.CONV, ("x", "w", "b"), "c"), node("gate", Op.HARD_SIGMOID, ("c",), "h"),
                    node("add", Op.ADD, ("h", "c"), "y")], {"x": ("N", 3, 1, 1)}, ("y",), consts)
    assert [n.op for n in canonicalize(shared).nodes] == [Op.CONV, Op.HARD_SIGMOID, Op.ADD]


def test_canonicalize_errors() -> None:
    q = Graph("g", ("x",), ("y",), (node("q", Op.QUANTIZE, ("x",), "y", scale=0.1),), {},
              {"x": TensorType((2,), DType.FLOAT32), "y": TensorType((2,), DType.INT8)})
    with pytest.raises(PassError, match=r"^canonicalize: node 'q' \(Quantize\) belongs to a quantized "
                                        r"graph; canonicalize runs on the float graph$"):
        canonicalize(q)
    # an unverified graph whose constant Clip has float bounds on integer data
    bad = Graph("g", ("x",), ("x",), (node("c", Op.CLIP, ("k",), "y", min=-1000.0),),
                {"k": np.zeros(2, np.int32)}, {"x": TensorType((2,), DType.FLOAT32),
                                              "y": TensorType((2,), DType.INT8)})
    with pytest.raises(PassError, match=r"^canonicalize: node 'c' \(Clip\) cannot be folded: "
                                        r"attribute 'min' must be an integer, not -1000\.0$"):
        canonicalize(bad)
    options = CompileOptions(preset("tiny"), RequantMode.FIXED, frozenset(), ())
    with pytest.raises(PassError, match=r"^canonicalize: node 'q' \(Quantize\) belongs to a quantized "):
        dict(PASSES)["canonicalize: drop identities"](q, options)  # the pipeline checks it first


def test_each_step_is_a_named_pipeline_step_in_order() -> None:
    names = [name for name, _ in PASSES]
    steps = [name for name in names if name.startswith("canonicalize: ")]
    assert steps == [f"canonicalize: {step.__name__.replace('_', ' ')}" for step in STEPS]
    assert names[names.index(steps[0]):names.index(steps[-1]) + 1] == steps
    assert names[names.index(steps[0]) - 1] == "infer shapes"
    assert names[names.index(steps[-1]) + 1].startswith("legalize: ")


def test_a_step_types_its_constants_and_keeps_what_it_replaced() -> None:
    """Each step leaves a valid graph (the pipeline verifies it), with the values it replaced
    still there: only legalize's last step drops them, so that fresh names do not depend on
    where the drop happens."""
    c = 2
    consts = {"w": np.ones((c, c, 1, 1), np.float32), **{k: np.full(c, 0.5, np.float32)
                                                         for k in ("g", "beta", "m", "v")}}
    g = build([node("conv", Op.CONV, ("x", "w"), "c"), node("bn", Op.BATCH_NORM, ("c", "g", "beta", "m", "v"), "y")],
              {"x": (1, c, 2, 2)}, ("y",), consts)
    folded = verify_graph(fold_batch_norms(g))
    assert set(folded.constants) == set(consts) | {"conv.weight", "conv.bias"}
    assert set(canonicalize(g).constants) == {"conv.weight", "conv.bias"}
    _same_function(g, folded, RNG.standard_normal((1, c, 2, 2)).astype(np.float32))

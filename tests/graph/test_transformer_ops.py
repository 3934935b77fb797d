"""Transformer encoder layers as exporters write them (``graph/ops/transformer.py``, the
encoders' import): their float path equals onnxruntime, and compiled to int8 the six linear
layers run on the accelerator's dense (an N-D activation's MatMul flattened to a Gemm)
while attention, Softmax, LayerNorm and GELU are float islands, every back end equal to
the integer reference; and each refusal is one line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from onnx import ModelProto, helper
from onnx_models import make_model, run_onnxruntime
from transformer_models import encoder_layer

import openvta
from openvta.graph.errors import ModelError
from openvta.graph.frontends.onnx import import_onnx
from openvta.graph.ir import Device, Op
from openvta.graph.passes.canonicalize import canonicalize
from openvta.graph.passes.legalize import legalize

RNG = np.random.default_rng(23)


@pytest.mark.parametrize(("gelu", "layernorm", "opset"), [("erf", "op", 17), ("tanh", "decomposed", 17),
                                                          ("op", "op", 20)])
def test_an_encoder_layer_compiles_with_its_linear_layers_on_the_accelerator(gelu: str, layernorm: str,
                                                                              opset: int) -> None:
    proto = encoder_layer(gelu=gelu, layernorm=layernorm, opset=opset)
    samples = [{"x": RNG.standard_normal((1, 16, 32)).astype(np.float32)} for _ in range(3)]
    model = openvta.compile_model(proto, samples, config="default")
    x = samples[0]["x"]
    float_out = model.float_reference(x)["y"]
    expected = run_onnxruntime(proto, {"x": x})[0]
    assert np.abs(float_out - expected).max() <= 1e-5 * np.abs(expected).max()
    accel = sorted(n.name for n in model.graph.nodes if n.op is Op.GEMM and n.placement.device is Device.ACCEL)
    assert accel == ["attn", "f0", "f2", "k", "q0", "v"]
    reference = model.reference(x)["y"]
    for backend in ("functional", "cycle"):
        assert np.array_equal(model.run(x, backend=backend)["y"], reference)
    assert np.abs(reference - float_out).max() < 0.1 * np.abs(float_out).max()


def test_a_matmul_of_tokens_by_a_matrix_becomes_a_flattened_gemm_with_its_bias() -> None:
    weight = RNG.standard_normal((8, 6)).astype(np.float32)
    bias = RNG.standard_normal(6).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="proj"),
             helper.make_node("Add", ["b", "m"], ["y"], name="bias")]
    proto = make_model(nodes, {"x": [3, 5, 8]}, ["y"], {"w": weight, "b": bias})
    graph = legalize(canonicalize(import_onnx(proto)))
    assert [(n.name, n.op) for n in graph.nodes] == [("proj.flatten", Op.RESHAPE), ("proj", Op.GEMM),
                                                     ("proj.unflatten", Op.RESHAPE)]
    assert graph.nodes[-1].attrs["shape"] == (3, 5, 6) and graph.types["y"].shape == (3, 5, 6)
    x = RNG.standard_normal((3, 5, 8)).astype(np.float32)
    model = openvta.compile_model(proto, x, config="tiny")
    assert next(n for n in model.graph.nodes if n.name == "proj").placement.device is Device.ACCEL
    np.testing.assert_allclose(model.float_reference(x)["y"], x @ weight + bias, rtol=1e-5, atol=1e-5)
    assert np.array_equal(model.run(x, backend="functional")["y"], model.reference(x)["y"])
    # with a symbolic batch the rows are no static count: a float island, which compiles all the same
    free = make_model(nodes, {"x": ["N", 5, 8]}, ["y"], {"w": weight, "b": bias})
    model = openvta.compile_model(free, x, config="tiny")
    proj = next(n for n in model.graph.nodes if n.name == "proj")
    assert proj.op is Op.MATMUL and proj.placement.device is Device.CPU
    assert np.array_equal(model.run(x, backend="functional")["y"], model.reference(x)["y"])


def _one(op: str, inputs: dict, constants: dict | None = None, opset: int = 17, **attrs: Any) -> ModelProto:
    node = helper.make_node(op, [*inputs, *(constants or {})], ["y"], name="n", **attrs)
    return make_model([node], inputs, ["y"], constants, opset=opset)


@pytest.mark.parametrize(("model", "reason"), [
    (lambda: _one("Gelu", {"x": [2, 3]}, opset=20, approximate="fast"),
     "Gelu approximate must be 'none' or 'tanh', not 'fast'"),
    (lambda: _one("LayerNormalization", {"x": [2, 3]}, {"s": np.ones(3, np.float32)}, stash_type=0),
     "attribute stash_type must be 1 (float32), not 0"),
    (lambda: _one("LayerNormalization", {"x": [2, 3]}, {"s": np.ones(4, np.float32)}),
     "LayerNormalization Scale must broadcast to the normalized shape (3,), not (4,)"),
])
def test_a_transformer_node_openvtas_kernel_declines_runs_on_onnxs_reference(model: Callable[[], ModelProto],
                                                                              reason: str) -> None:
    (node,) = import_onnx(model()).nodes
    assert node.op is Op.ONNX_REFERENCE
    assert node.attrs["reason"] == f"openvta's {node.op_name} kernel does not take it ({reason})"


def test_a_transformer_node_onnx_refuses_is_one_line() -> None:
    with pytest.raises(ModelError, match=r"^node 'n' \(ReduceMean\): ONNX's shape inference refuses it: axis must be "
                                         r"in \[-rank, rank-1\]\. Input rank was 2$"):
        import_onnx(_one("ReduceMean", {"x": [2, 3]}, axes=[2]))


def test_a_layer_norms_mean_and_inv_std_dev_are_its_functions_outputs() -> None:
    """Read by a model, LayerNormalization's Mean and InvStdDev come from its ONNX function's
    ops (the IR's nodes have one output each)."""
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv"], name="ln", axis=1,
                            epsilon=1e-3)
    constants = {"s": RNG.uniform(0.5, 1.5, (3, 4)).astype(np.float32),
                 "b": RNG.standard_normal((3, 4)).astype(np.float32)}
    proto = make_model([node], {"x": [2, 3, 4]}, ["y", "mean", "inv"], constants)
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    graph = import_onnx(proto)
    from openvta.graph.execute import execute

    got = execute(graph, {"x": x})
    for name, want in zip(("y", "mean", "inv"), run_onnxruntime(proto, {"x": x})):
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6)
    free = make_model([node], {"x": ["N", 3, 4]}, ["y", "mean", "inv"], constants)
    with pytest.raises(ModelError, match=r"^node 'ln' \(LayerNormalization\) reads Mean or InvStdDev of an input "
                                         r"whose rank is not known$"):
        import_onnx(free)


@pytest.mark.parametrize(("a", "b", "placed"), [
    ((1, 2, 4, 16), (1, 2, 16, 8), True),     # attention's form: heads flattened, per-head products
    ((2, 4, 16), (2, 16, 8), True),           # already (H, M, K) by (H, K, N)
    ((1, 2, 4, 16), (1, 1, 16, 8), False),    # broadcast over the heads: a float island
])
def test_products_of_two_activations_run_per_head_on_the_accelerator(a: tuple, b: tuple, placed: bool) -> None:
    rng = np.random.default_rng(0)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": list(a), "b": list(b)}, ["y"])
    feeds = [{"a": rng.standard_normal(a).astype(np.float32), "b": rng.standard_normal(b).astype(np.float32)}
             for _ in range(2)]
    compiled = openvta.compile_model(model, feeds, config="default")
    matmul = next(n for n in compiled.graph.nodes if n.op is Op.MATMUL)
    assert (matmul.placement.device is Device.ACCEL) == placed, matmul.placement
    reference = compiled.reference(feeds[0])["y"]
    np.testing.assert_array_equal(compiled.run(feeds[0], backend="functional")["y"], reference)
    expected = compiled.float_reference(feeds[0])["y"]
    assert np.abs(reference - expected).max() <= 0.05 * np.abs(expected).max()

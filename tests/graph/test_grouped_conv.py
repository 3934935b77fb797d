"""Convolutions as exporters write them, run on the accelerator: groups whose size divides
the block on the grouped mapping (``depthwise_conv2d``'s block-diagonal tiles, any group
count), other groups (AlexNet's 2 of 48 channels) as a dense one with block-diagonal
weights, exactly (``passes/legalize.py``); a per-channel Mul and Add after a conv folded
into it (``passes/canonicalize.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import ModelProto, helper
from onnx_models import make_model, run_onnxruntime

import openvta
from openvta.graph.ir import Device, Op

RNG = np.random.default_rng(11)


def _grouped(group: int, channels: int = 32) -> ModelProto:
    weight = (RNG.standard_normal((channels, channels // group, 3, 3)) * 0.2).astype(np.float32)
    bias = (RNG.standard_normal(channels) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=group, pads=[1, 1, 1, 1], name="grouped"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return make_model(nodes, {"x": ["N", channels, 6, 6]}, ["y"], {"w": weight, "b": bias})


@pytest.mark.parametrize("group", [2, 4, 16])
def test_groups_run_on_the_accelerator_exactly(group: int) -> None:
    """On ``tiny`` (blocks of 4): 2 groups of 16 channels as a dense conv, 4 groups of 8 too,
    16 groups of 2 on the grouped mapping (4-lane tiles of two 2x2 blocks)."""
    proto = _grouped(group)
    x = RNG.standard_normal((2, 32, 6, 6)).astype(np.float32)
    model = openvta.compile_model(proto, x, config="tiny")
    conv = next(n for n in model.graph.nodes if n.op is Op.CONV)
    assert conv.placement.device is Device.ACCEL
    if group == 16:
        assert conv.attrs["group"] == 16 and model.graph.notes == ()
        assert conv.placement.reason == "int8 grouped conv2d 3x3/1, 16 groups of 2 channels"
    else:
        assert conv.attrs["group"] == 1
        assert model.graph.notes == (f"node grouped: a convolution of {group} groups as a dense one with "
                                     f"block-diagonal weights ({group}x its MACs)",)
    np.testing.assert_allclose(model.float_reference(x)["y"], run_onnxruntime(proto, {"x": x})[0],
                               rtol=1e-5, atol=1e-5)
    assert np.array_equal(model.run(x, backend="cycle")["y"], model.reference(x)["y"])


def test_grouped_convolutions_stay_grouped_where_convolutions_run_on_the_cpu() -> None:
    x = RNG.standard_normal((2, 32, 6, 6)).astype(np.float32)
    model = openvta.compile_model(_grouped(4), x, config="tiny", cpu_ops=["Conv"])
    conv = next(n for n in model.graph.nodes if n.op is Op.CONV)
    assert conv.placement.device is Device.CPU and conv.attrs["group"] == 4 and model.graph.notes == ()


def test_a_per_channel_mul_and_add_after_a_conv_fold_into_it() -> None:
    """Inception v2 and DenseNet-121 write a BatchNormalization's scale and shift as a Mul
    and an Add of ``(C, 1, 1)`` constants after it (canonicalize folds them into the Conv)."""
    weight = (RNG.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32)
    scale = RNG.uniform(0.5, 1.5, (16, 1, 1)).astype(np.float32)
    shift = (RNG.standard_normal((16, 1, 1)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Mul", ["c", "s"], ["m"], name="scale"),
             helper.make_node("Add", ["t", "m"], ["a"], name="shift"),  # the constant first
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    proto = make_model(nodes, {"x": ["N", 8, 6, 6]}, ["y"], {"w": weight, "s": scale, "t": shift})
    x = RNG.standard_normal((2, 8, 6, 6)).astype(np.float32)
    model = openvta.compile_model(proto, x, config="tiny")
    assert not [n.name for n in model.graph.nodes if n.name in ("scale", "shift")]
    assert next(n for n in model.graph.nodes if n.op is Op.CONV).placement.device is Device.ACCEL
    np.testing.assert_allclose(model.float_reference(x)["y"], run_onnxruntime(proto, {"x": x})[0],
                               rtol=1e-5, atol=1e-5)
    assert np.array_equal(model.run(x, backend="cycle")["y"], model.reference(x)["y"])


def test_a_mul_and_add_after_a_batch_norm_join_it() -> None:
    """DenseNet-121's pre-activation BatchNormalization after a Concat (no Conv to fold
    into): its Mul and Add join it, one CPU island instead of three."""
    c = 8
    params = {"s": RNG.uniform(0.5, 1.5, c), "b": RNG.standard_normal(c) * 0.1, "mu": RNG.standard_normal(c) * 0.1,
              "var": RNG.uniform(0.5, 1.5, c), "m": RNG.uniform(0.5, 1.5, (c, 1, 1)),
              "t": RNG.standard_normal((c, 1, 1)) * 0.1, "w": RNG.standard_normal((c, c, 1, 1)) * 0.3}
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["n"], name="bn"),
             helper.make_node("Mul", ["n", "m"], ["nm"], name="scale"),
             helper.make_node("Add", ["nm", "t"], ["na"], name="shift"),
             helper.make_node("Relu", ["na"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w"], ["y"], name="conv")]
    proto = make_model(nodes, {"x": ["N", c, 4, 4]}, ["y"], {k: v.astype(np.float32) for k, v in params.items()})
    x = RNG.standard_normal((2, c, 4, 4)).astype(np.float32)
    model = openvta.compile_model(proto, x, config="tiny")
    assert [n.name for n in model.graph.nodes if n.name in ("bn", "scale", "shift")] == ["bn"]
    np.testing.assert_allclose(model.float_reference(x)["y"], run_onnxruntime(proto, {"x": x})[0],
                               rtol=1e-5, atol=1e-5)
    assert np.array_equal(model.run(x, backend="cycle")["y"], model.reference(x)["y"])


def _bn_after_concat() -> ModelProto:
    """DenseNet's pattern: a BatchNormalization after a Concat, where no Conv precedes it."""
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Concat", ["x", "a"], ["cat"], axis=1, name="cat"),
             helper.make_node("BatchNormalization", ["cat", "s", "b", "m", "v"], ["bn"], name="bn"),
             helper.make_node("Relu", ["bn"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w2"], ["y"], name="conv2")]
    constants = {"w1": (rng.standard_normal((16, 24, 3, 3)) * 0.2).astype(np.float32),
                 "s": rng.uniform(0.5, 1.5, 40).astype(np.float32),
                 "b": (rng.standard_normal(40) * 0.1).astype(np.float32),
                 "m": (rng.standard_normal(40) * 0.1).astype(np.float32),
                 "v": rng.uniform(0.5, 2.0, 40).astype(np.float32),
                 "w2": (rng.standard_normal((16, 40, 1, 1)) * 0.2).astype(np.float32)}
    return make_model(nodes, {"x": ["N", 24, 8, 8]}, ["y"], constants)


def test_a_batch_norm_after_a_concat_runs_on_the_accelerator_as_a_depthwise_conv() -> None:
    proto = _bn_after_concat()
    x = RNG.standard_normal((2, 24, 8, 8)).astype(np.float32)
    model = openvta.compile_model(proto, x, config="default")
    bn = next(n for n in model.graph.nodes if n.name == "bn")
    assert bn.op is Op.CONV and bn.placement.device is Device.ACCEL
    assert bn.placement.reason == "int8 depthwise conv2d 1x1/1, 40 channels"
    assert model.graph.notes == ("node bn: a BatchNormalization as a 1x1 depthwise convolution (its per-channel "
                                 "affine on the accelerator)",)
    np.testing.assert_allclose(model.float_reference(x)["y"], run_onnxruntime(proto, {"x": x})[0],
                               rtol=1e-5, atol=1e-5)
    expected = model.reference(x)["y"]
    for backend in ("functional", "cycle"):
        assert np.array_equal(model.run(x, backend=backend)["y"], expected)


@pytest.mark.parametrize("where", [{"cpu_nodes": ["bn"]}, {"cpu_ops": ["Conv"]}])
def test_a_batch_norm_placed_on_the_cpu_gives_the_same_numbers(where: dict) -> None:
    """The rewrite does not depend on the placement, so neither do the integer results."""
    x = RNG.standard_normal((2, 24, 8, 8)).astype(np.float32)
    placed = openvta.compile_model(_bn_after_concat(), x, config="default", **where)
    bn = next(n for n in placed.graph.nodes if n.name == "bn")
    assert bn.op is Op.CONV and bn.placement.device is Device.CPU
    default = openvta.compile_model(_bn_after_concat(), x, config="default")
    assert np.array_equal(placed.run(x, backend="functional")["y"], default.reference(x)["y"])

"""A depthwise-separable block (MobileNet's) through compile_model: the depthwise Conv runs on
the accelerator as ``depthwise_conv2d``, fused with its requantization and ReLU, and every
back end equals the integer reference."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx_models import make_model

from openvta.graph.ir import Device, Op
from openvta.graph.pipeline import compile_model

RNG = np.random.default_rng(3)
C = 16


def _block(stride: int) -> object:
    weights = {"w_dw": RNG.standard_normal((C, 1, 3, 3)).astype(np.float32) * 0.3,
               "b_dw": RNG.standard_normal(C).astype(np.float32) * 0.1,
               "w_pw": RNG.standard_normal((32, C, 1, 1)).astype(np.float32) * 0.2,
               "b_pw": RNG.standard_normal(32).astype(np.float32) * 0.1}
    nodes = [helper.make_node("Conv", ["x", "w_dw", "b_dw"], ["dw"], name="dw", group=C, pads=[1, 1, 1, 1],
                              strides=[stride, stride]),
             helper.make_node("Relu", ["dw"], ["dwr"], name="dw_relu"),
             helper.make_node("Conv", ["dwr", "w_pw", "b_pw"], ["pw"], name="pw"),
             helper.make_node("Relu", ["pw"], ["y"], name="pw_relu")]
    return make_model(nodes, {"x": ["N", C, 10, 10]}, ["y"], weights)


@pytest.mark.parametrize(("stride", "config"), [(1, "tiny"), (2, "default")])
def test_a_depthwise_separable_block_runs_on_the_accelerator(stride: int, config: str) -> None:
    x = RNG.standard_normal((4, C, 10, 10)).astype(np.float32)
    model = compile_model(_block(stride), x, config=config)
    placed = {n.name: n.placement for n in model.graph.nodes if n.placement is not None}
    assert placed["dw"].device is Device.ACCEL and "depthwise conv2d 3x3" in placed["dw"].reason
    kinds = sorted(k.operator for k in model.graph.kernels.values())
    assert kinds == ["conv2d", "depthwise_conv2d"]
    expected = model.reference(x[:2])["y"]
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(model.run(x[:2], backend=backend)["y"], expected)
    float_out = model.float_reference(x[:2])["y"]
    assert np.abs(expected - float_out).max() < 0.1 * np.abs(float_out).max()


def test_two_filters_per_channel_run_dense_on_the_accelerator() -> None:
    weights = {"w": RNG.standard_normal((2 * C, 1, 3, 3)).astype(np.float32)}
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="g", group=C, pads=[1, 1, 1, 1])
    x = RNG.standard_normal((2, C, 6, 6)).astype(np.float32)
    model = compile_model(make_model([node], {"x": ["N", C, 6, 6]}, ["y"], weights), x, config="default")
    conv = next(n for n in model.graph.nodes if n.op is Op.CONV)
    assert conv.placement is not None and conv.placement.device is Device.ACCEL and conv.attrs["group"] == 1
    assert model.graph.notes == (f"node g: a convolution of {C} groups as a dense one with block-diagonal "
                                 f"weights ({C}x its MACs)",)
    np.testing.assert_array_equal(model.run(x, backend="functional")["y"], model.reference(x)["y"])


@pytest.mark.parametrize(("weight", "config", "reason"), [
    ((32, 1, 3, 3), "tiny", "a grouped convolution with 2 filters per group of 1 channel runs on the CPU (the "
                            "accelerator's keep the channels)"),
    ((16, 8, 3, 3), "tiny", "grouped convolution (group=2) of 8 channels per group runs on the CPU (the "
                            "accelerator's group sizes divide BLOCK_IN, 4)"),
    ((16, 2, 3, 3), "tiny", "its weight is not a constant"),
])
def test_the_grouped_mapping_says_why_not(weight: tuple[int, ...], config: str, reason: str) -> None:
    from openvta.compiler.ops.depthwise_conv2d import DESCRIPTOR
    from openvta.compiler.ops.descriptor import Anchor
    from openvta.isa import preset

    group = 16 // weight[1]
    anchor = Anchor("Conv", {"group": group, "strides": (1, 1), "pads": (1, 1, 1, 1)}, ((1, 16, 6, 6), weight),
                    ("int8", "int8"), (True, reason != "its weight is not a constant"))
    assert DESCRIPTOR.match(anchor, preset(config)) == reason

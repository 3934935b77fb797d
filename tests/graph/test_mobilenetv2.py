"""The MobileNetV2 example: the builder makes torchvision's graph, deterministically, and the
compiled small variant runs every convolution (the stem packed, the depthwise ones) and
the residual adds on the accelerator, equal to its integer reference on the cycle model."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from onnx_models import run_onnxruntime

import openvta
from openvta.graph.ir import Device, Op

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenetv2"
sys.path.insert(0, str(EXAMPLE))
from make_mobilenetv2 import build_mobilenetv2, make_divisible, random_images  # noqa: E402

TORCHVISION_PARAMETERS = 3_504_872  # sum(p.numel() for p in mobilenet_v2().parameters())


def test_the_graph_is_torchvisions() -> None:
    model = build_mobilenetv2()
    ops = Counter(n.op_type for n in model.graph.node)
    assert ops == {"Conv": 52, "BatchNormalization": 52, "Clip": 35, "Add": 10, "GlobalAveragePool": 1,
                   "Flatten": 1, "Gemm": 1}
    groups = [next((a.i for a in n.attribute if a.name == "group"), 1) for n in model.graph.node
              if n.op_type == "Conv"]
    assert sum(g > 1 for g in groups) == 17
    parameters = sum(int(np.prod(i.dims)) for i in model.graph.initializer
                     if "running" not in i.name and not i.name.startswith("relu6"))
    assert parameters == TORCHVISION_PARAMETERS
    assert build_mobilenetv2().SerializeToString() == model.SerializeToString()  # seeded


def test_channels_round_as_torchvision_does() -> None:
    assert [make_divisible(c * 0.25) for c in (32, 16, 24, 96, 1280)] == [8, 8, 8, 24, 320]
    assert make_divisible(32 * 0.35) == 16  # never below 90 % of the value


@pytest.mark.parametrize("kwargs, message", [
    ({"size": 16}, "size must be an integer of at least 32, not 16"),
    ({"width": 0}, "width must be a positive number, not 0"),
    ({"classes": 0}, "classes must be a positive integer, not 0"),
])
def test_bad_arguments_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        build_mobilenetv2(**kwargs)


def test_the_small_variant_runs_on_the_accelerator_equal_to_its_reference() -> None:
    proto = build_mobilenetv2(size=32, width=0.25)
    model = openvta.compile_model(proto, random_images(4, 32, seed=1))
    x = random_images(2, 32, seed=2)
    np.testing.assert_allclose(model.float_reference(x)["logits"], run_onnxruntime(proto, {"image": x})[0],
                               rtol=1e-4, atol=1e-4)
    convs = [n for n in model.graph.nodes if n.op is Op.CONV]
    assert len(convs) == 52
    depthwise = [n for n in convs if int(n.attrs.get("group", 1)) > 1]
    assert len(depthwise) == 17 and all(n.placement.device is Device.ACCEL for n in convs)
    adds = [n for n in model.graph.nodes if n.op is Op.ADD and n.name.endswith(".add")]
    residuals = sum(n.op_type == "Add" for n in proto.graph.node)  # (11 at this width: features.1 too)
    assert len(adds) == residuals and all(n.placement.device is Device.ACCEL for n in adds)  # x + conv(x)
    out = model.run(x, backend="cycle")
    assert np.array_equal(out["logits"], model.reference(x)["logits"])
    assert out.report.cycles

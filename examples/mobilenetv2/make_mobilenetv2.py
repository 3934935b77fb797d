"""Build MobileNetV2 as an ONNX graph from seeded random weights (no download, no torch).

    python examples/mobilenetv2/make_mobilenetv2.py -o mobilenetv2.onnx          # 224x224, ~14 MB
    python examples/mobilenetv2/make_mobilenetv2.py --size 32 --width 0.25 -o small.onnx

The graph is torchvision's ``mobilenet_v2`` node for node, as its ONNX export (opset 13)
has it::

    image (N, 3, 224, 224)
    features.0   conv 3x3/2, 3 -> 32, BatchNormalization, ReLU6 (Clip 0..6)
    features.1-17  inverted residual blocks (t, c, n, s):
                   (1, 16, 1, 1) (6, 24, 2, 2) (6, 32, 3, 2) (6, 64, 4, 2)
                   (6, 96, 3, 1) (6, 160, 3, 2) (6, 320, 1, 1)
        expand 1x1 (t > 1), BN, ReLU6; depthwise 3x3/s (group = channels), BN, ReLU6;
        project 1x1, BN; + the block's input when s = 1 and the channels agree
    features.18  conv 1x1, 320 -> 1280, BN, ReLU6                 (N, 1280, 7, 7)
    GlobalAveragePool, Flatten, Gemm 1280 -> 1000 (transB=1)      logits (N, 1000)

(The classifier's Dropout is not in an export of the model in evaluation mode.)

52 convolutions (17 of them depthwise), 10 residual Adds, 3,504,872 parameters.
Convolutions have no bias (BatchNormalization follows each); weights are He-initialized
(``kaiming_normal_``, fan-out, as torchvision does) and each BatchNormalization has random
but plausible statistics, the projections' smaller so that the residual sums keep their
scale.  ``width`` multiplies the channel counts (torchvision's ``width_mult``, rounded to
multiples of 8 as it does) and ``size`` the input: a small variant for tests runs in
seconds.  The same arguments give the same bytes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["build_mobilenetv2", "random_images", "SEED", "BLOCKS"]

SEED = 0
OPSET = 13
#: torchvision's inverted residual settings: expansion t, channels c, repeats n, stride s
BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
          (6, 320, 1, 1))


def make_divisible(value: float, divisor: int = 8) -> int:
    """torchvision's ``_make_divisible``: the nearest multiple of ``divisor``, never below
    90 % of ``value``."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class _Builder:
    """Nodes and initializers appended in order, weights drawn from one generator."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.six: str | None = None

    def constant(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def conv(self, name: str, x: str, c_in: int, c_out: int, kernel: int, stride: int, group: int = 1) -> str:
        fan_out = c_out // group * kernel * kernel  # kaiming_normal_(mode="fan_out")
        weight = self.rng.standard_normal((c_out, c_in // group, kernel, kernel)) * np.sqrt(2.0 / fan_out)
        w = self.constant(f"{name}.weight", weight)
        pad = kernel // 2
        self.nodes.append(helper.make_node(
            "Conv", [x, w], [f"{name}.out"], name=name, kernel_shape=[kernel, kernel],
            strides=[stride, stride], pads=[pad] * 4, dilations=[1, 1], group=group))
        return f"{name}.out"

    def batch_norm(self, name: str, x: str, channels: int, scale: float = 1.0) -> str:
        rng = self.rng
        params = [self.constant(f"{name}.{key}", value) for key, value in (
            ("weight", rng.uniform(0.8, 1.2, channels) * scale),
            ("bias", rng.normal(0.0, 0.1, channels)),
            ("running_mean", rng.normal(0.0, 0.1, channels)),
            ("running_var", rng.uniform(0.5, 1.5, channels)))]
        self.nodes.append(helper.make_node("BatchNormalization", [x, *params], [f"{name}.out"],
                                           name=name, epsilon=1e-5, momentum=0.9))
        return f"{name}.out"

    def relu6(self, name: str, x: str) -> str:
        if self.six is None:  # torch exports ReLU6 as Clip with constant bounds
            self.six = self.constant("relu6.max", np.array(6.0))
            self.constant("relu6.min", np.array(0.0))
        return self.op("Clip", name, [x, "relu6.min", self.six])

    def op(self, op_type: str, name: str, inputs: list[str], **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [f"{name}.out"], name=name, **attrs))
        return f"{name}.out"

    def conv_bn_relu6(self, name: str, x: str, c_in: int, c_out: int, kernel: int, stride: int,
                      group: int = 1) -> str:
        y = self.batch_norm(f"{name}.1", self.conv(f"{name}.0", x, c_in, c_out, kernel, stride, group), c_out)
        return self.relu6(f"{name}.2", y)

    def inverted_residual(self, name: str, x: str, c_in: int, c_out: int, stride: int, expand: int) -> str:
        hidden = c_in * expand
        y, k = x, 0
        if expand != 1:
            y = self.conv_bn_relu6(f"{name}.conv.{k}", y, c_in, hidden, 1, 1)
            k += 1
        y = self.conv_bn_relu6(f"{name}.conv.{k}", y, hidden, hidden, 3, stride, group=hidden)
        y = self.conv(f"{name}.conv.{k + 1}", y, hidden, c_out, 1, 1)
        y = self.batch_norm(f"{name}.conv.{k + 2}", y, c_out, scale=0.5)
        if stride == 1 and c_in == c_out:
            y = self.op("Add", f"{name}.add", [x, y])
        return y


def build_mobilenetv2(size: int = 224, width: float = 1.0, classes: int = 1000,
                      seed: int = SEED) -> onnx.ModelProto:
    """MobileNetV2 on ``(N, 3, size, size)`` images, channels times ``width``.

    Raises
    ------
    ValueError
        for a size that the five stride-2 stages do not reduce to at least 1x1, or a
        non-positive width or class count.
    """
    if not isinstance(size, int) or isinstance(size, bool) or size < 32:
        raise ValueError(f"size must be an integer of at least 32, not {size!r}")
    if not isinstance(width, (int, float)) or isinstance(width, bool) or not width > 0:
        raise ValueError(f"width must be a positive number, not {width!r}")
    if not isinstance(classes, int) or isinstance(classes, bool) or classes < 1:
        raise ValueError(f"classes must be a positive integer, not {classes!r}")
    b = _Builder(seed)
    c_in = make_divisible(32 * width)
    last = make_divisible(1280 * max(1.0, width))
    x = b.conv_bn_relu6("features.0", "image", 3, c_in, 3, 2)
    index = 1
    for expand, channels, repeats, stride in BLOCKS:
        c_out = make_divisible(channels * width)
        for i in range(repeats):
            x = b.inverted_residual(f"features.{index}", x, c_in, c_out, stride if i == 0 else 1, expand)
            c_in, index = c_out, index + 1
    x = b.conv_bn_relu6(f"features.{index}", x, c_in, last, 1, 1)
    x = b.op("Flatten", "flatten", [b.op("GlobalAveragePool", "avgpool", [x])], axis=1)
    w = b.constant("classifier.1.weight", b.rng.normal(0.0, 0.01, (classes, last)))  # nn.init.normal_(0, 0.01)
    bias = b.constant("classifier.1.bias", np.zeros(classes))
    b.nodes.append(helper.make_node("Gemm", [x, w, bias], ["logits"], name="classifier.1",
                                    alpha=1.0, beta=1.0, transB=1))
    graph = helper.make_graph(
        b.nodes, "mobilenetv2",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])],
        b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="openvta examples/mobilenetv2")
    onnx.checker.check_model(model)
    return model


def random_images(count: int, size: int = 224, seed: int = SEED) -> np.ndarray:
    """``count`` images ``(count, 3, size, size)``, ImageNet-normalized pixels (about N(0, 1))."""
    return np.random.default_rng(seed).standard_normal((count, 3, size, size)).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", type=Path, default=Path("mobilenetv2.onnx"))
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    parser.add_argument("--width", type=float, default=1.0, help="width multiplier (torchvision's width_mult)")
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    model = build_mobilenetv2(args.size, args.width, args.classes, args.seed)
    onnx.save(model, str(args.output))
    print(f"{args.output}: {args.output.stat().st_size:,} bytes, {len(model.graph.node)} nodes")


if __name__ == "__main__":
    main()

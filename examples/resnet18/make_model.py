"""Build ResNet-18 as an ONNX graph from seeded random weights (no download, no torch).

    python examples/resnet18/make_model.py -o resnet18.onnx            # 224x224, ~45 MB
    python examples/resnet18/make_model.py --size 32 --width 16 -o small.onnx

The graph is torchvision's ``resnet18`` node for node, as its ONNX export has it::

    image (N, 3, 224, 224)
    conv1  7x7/2, pad 3, 3 -> 64, BatchNormalization, Relu
    maxpool 3x3/2, pad 1                                       (N, 64, 56, 56)
    layer1..layer4: two BasicBlocks each, 64, 128, 256, 512 channels
        conv 3x3/s, BN, Relu, conv 3x3, BN, (+ downsample: conv 1x1/s, BN), Add, Relu
    GlobalAveragePool, Flatten, Gemm 512 -> 1000 (transB=1)    logits (N, 1000)

Convolutions have no bias (BatchNormalization follows each); weights are He-initialized
(``kaiming_normal_``, fan-out as torchvision does) and each BatchNormalization has random
but plausible statistics, so activations keep their scale through the network.  ``width``
scales the channel counts (64 is torchvision's) and ``size`` the input: a small variant
for tests runs in seconds.  The same arguments give the same bytes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["build_resnet18", "random_images", "SEED"]

SEED = 0
OPSET = 13
LAYERS = (("layer1", 1, 1), ("layer2", 2, 2), ("layer3", 4, 2), ("layer4", 8, 2))  # name, ×width, stride


class _Builder:
    """Nodes and initializers appended in order, weights drawn from one generator."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def constant(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def conv(self, name: str, x: str, c_in: int, c_out: int, kernel: int, stride: int) -> str:
        fan_out = c_out * kernel * kernel  # kaiming_normal_(mode="fan_out", nonlinearity="relu")
        weight = self.rng.standard_normal((c_out, c_in, kernel, kernel)) * np.sqrt(2.0 / fan_out)
        w = self.constant(f"{name}.weight", weight)
        pad = kernel // 2
        self.nodes.append(helper.make_node(
            "Conv", [x, w], [f"{name}.out"], name=name, kernel_shape=[kernel, kernel],
            strides=[stride, stride], pads=[pad] * 4, dilations=[1, 1], group=1))
        return f"{name}.out"

    def batch_norm(self, name: str, x: str, channels: int) -> str:
        rng = self.rng
        params = [self.constant(f"{name}.{key}", value) for key, value in (
            ("weight", rng.uniform(0.8, 1.2, channels)),
            ("bias", rng.normal(0.0, 0.1, channels)),
            ("running_mean", rng.normal(0.0, 0.1, channels)),
            ("running_var", rng.uniform(0.5, 1.5, channels)))]
        self.nodes.append(helper.make_node("BatchNormalization", [x, *params], [f"{name}.out"],
                                           name=name, epsilon=1e-5, momentum=0.9))
        return f"{name}.out"

    def op(self, op_type: str, name: str, inputs: list[str], **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [f"{name}.out"], name=name, **attrs))
        return f"{name}.out"

    def basic_block(self, name: str, x: str, c_in: int, c_out: int, stride: int) -> str:
        y = self.conv(f"{name}.conv1", x, c_in, c_out, 3, stride)
        y = self.op("Relu", f"{name}.relu1", [self.batch_norm(f"{name}.bn1", y, c_out)])
        y = self.batch_norm(f"{name}.bn2", self.conv(f"{name}.conv2", y, c_out, c_out, 3, 1), c_out)
        if stride != 1 or c_in != c_out:
            x = self.conv(f"{name}.downsample.0", x, c_in, c_out, 1, stride)
            x = self.batch_norm(f"{name}.downsample.1", x, c_out)
        return self.op("Relu", f"{name}.relu2", [self.op("Add", f"{name}.add", [y, x])])


def build_resnet18(size: int = 224, width: int = 64, classes: int = 1000,
                   seed: int = SEED) -> onnx.ModelProto:
    """ResNet-18 on ``(N, 3, size, size)`` images with ``width`` channels in ``conv1``.

    Raises
    ------
    ValueError
        for a size that the five stride-2 stages do not reduce to at least 1x1, or a
        non-positive width or class count.
    """
    if not isinstance(size, int) or size < 32:
        raise ValueError(f"size must be an integer of at least 32, not {size!r}")
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be a positive integer, not {width!r}")
    if not isinstance(classes, int) or classes < 1:
        raise ValueError(f"classes must be a positive integer, not {classes!r}")
    b = _Builder(seed)
    x = b.conv("conv1", "image", 3, width, 7, 2)
    x = b.op("Relu", "relu", [b.batch_norm("bn1", x, width)])
    x = b.op("MaxPool", "maxpool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = width
    for layer, scale, stride in LAYERS:
        c_out = width * scale
        x = b.basic_block(f"{layer}.0", x, c_in, c_out, stride)
        x = b.basic_block(f"{layer}.1", x, c_out, c_out, 1)
        c_in = c_out
    x = b.op("Flatten", "flatten", [b.op("GlobalAveragePool", "avgpool", [x])], axis=1)
    bound = 1.0 / np.sqrt(c_in)  # nn.Linear's default init
    w = b.constant("fc.weight", b.rng.uniform(-bound, bound, (classes, c_in)))
    bias = b.constant("fc.bias", b.rng.uniform(-bound, bound, classes))
    b.nodes.append(helper.make_node("Gemm", [x, w, bias], ["logits"], name="fc",
                                    alpha=1.0, beta=1.0, transB=1))
    graph = helper.make_graph(
        b.nodes, "resnet18",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])],
        b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="openvta examples/resnet18")
    onnx.checker.check_model(model)
    return model


def random_images(count: int, size: int = 224, seed: int = SEED) -> np.ndarray:
    """``count`` images ``(count, 3, size, size)``, ImageNet-normalized pixels (about N(0, 1))."""
    return np.random.default_rng(seed).standard_normal((count, 3, size, size)).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", type=Path, default=Path("resnet18.onnx"))
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    parser.add_argument("--width", type=int, default=64, help="conv1's output channels")
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    model = build_resnet18(args.size, args.width, args.classes, args.seed)
    onnx.save(model, str(args.output))
    print(f"{args.output}: {args.output.stat().st_size:,} bytes, {len(model.graph.node)} nodes")


if __name__ == "__main__":
    main()

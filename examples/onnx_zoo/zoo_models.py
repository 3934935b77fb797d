"""The nine classic CNNs of the ONNX model zoo as the ``onnx`` package ships them, and the
same graphs with seeded He-normal weights.

``onnx`` ships the zoo's AlexNet, DenseNet-121, Inception v1 and v2, ResNet-50, ShuffleNet,
SqueezeNet, VGG-19 and ZFNet-512 in its backend test data (``onnx/backend/test/data/light``):
the real graphs (opset 9), their weights written as ``ConstantOfShape`` fills, and one
expected output each, computed by ``onnx.reference`` on inputs its backend test generates.

:func:`model` loads one as shipped; :func:`with_weights` makes its weights seeded He-normal
(every float initializer of two or more dimensions, once the fills are folded:
``N(0, 2 / fan_in)``), so that its activations are not uniform and a wrong convolution
shows.  Nothing is downloaded.

    >>> sorted(MODELS)[:3]
    ['bvlc_alexnet', 'densenet121', 'inception_v1']
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ["LIGHT", "MODELS", "expected_output", "input_shape", "model", "random_inputs", "shipped_input",
           "with_weights"]

#: Where the ``onnx`` package keeps the light models.
LIGHT = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
          "squeezenet", "vgg19", "zfnet512")


def model(name: str) -> onnx.ModelProto:
    """The model as shipped (``light_<name>.onnx``)."""
    if name not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, not {name!r}")
    return onnx.load(str(LIGHT / f"light_{name}.onnx"))


def expected_output(name: str) -> np.ndarray:
    """The output the ``onnx`` package ships with the model (``light_<name>_output_0.pb``)."""
    tensor = onnx.TensorProto()
    tensor.ParseFromString((LIGHT / f"light_{name}_output_0.pb").read_bytes())
    return numpy_helper.to_array(tensor)


def shipped_input(proto: onnx.ModelProto) -> np.ndarray:
    """The input the shipped output was computed on: ONNX's backend test feeds a light model
    ``arange(n) / n`` in its input's shape (``generate_dummy_data(..., random=False)``)."""
    _, shape = input_shape(proto)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def input_shape(proto: onnx.ModelProto) -> tuple[str, tuple[int, ...]]:
    """The name and shape of the model's one input."""
    constants = {i.name for i in proto.graph.initializer}
    value = next(v for v in proto.graph.input if v.name not in constants)
    return value.name, tuple(d.dim_value for d in value.type.tensor_type.shape.dim)


def random_inputs(proto: onnx.ModelProto, count: int, seed: int = 0) -> np.ndarray:
    """``count`` inputs of the model's shape (its batch replaced), about N(0, 1)."""
    _, shape = input_shape(proto)
    return np.random.default_rng(seed).standard_normal((count, *shape[1:])).astype(np.float32)


def with_weights(name: str, seed: int = 0) -> onnx.ModelProto:
    """The model with its fills folded and its weights seeded He-normal (module docstring);
    opset, nodes and every other constant as shipped."""
    from openvta.graph.frontends.onnx_prepare import prepare

    proto = model(name)
    input_name, shape = input_shape(proto)
    folded, _ = prepare(proto, {input_name: shape})
    rng = np.random.default_rng(seed)
    for init in folded.graph.initializer:
        array = numpy_helper.to_array(init)
        if array.dtype == np.float32 and array.ndim >= 2:
            fan_in = int(np.prod(array.shape[1:]))
            weights = rng.standard_normal(array.shape) * np.sqrt(2.0 / fan_in)
            init.CopyFrom(numpy_helper.from_array(weights.astype(np.float32), init.name))
    return folded

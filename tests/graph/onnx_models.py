"""Small ONNX models for the graph tests, built with the ``onnx`` helper API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from openvta.graph.ir import Op
from openvta.graph.ops.base import OnnxExample

__all__ = ["make_model", "example_model", "run_onnxruntime", "tensor_input"]


def tensor_input(name: str, shape: Sequence[int | str] | None,
                 elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def make_model(nodes: Sequence[onnx.NodeProto], inputs: Mapping[str, Sequence[int | str]],
               outputs: Sequence[str], initializers: Mapping[str, object] | None = None,
               opset: int = 13, name: str = "test") -> onnx.ModelProto:
    """A model of ``nodes`` with float32 ``inputs`` (name → shape) and untyped outputs;
    ``initializers`` are arrays or anything else :func:`numpy.asarray` takes (a scalar)."""
    graph = helper.make_graph(
        list(nodes), name, [tensor_input(k, v) for k, v in inputs.items()],
        [tensor_input(k, None) for k in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # onnxruntime 1.32 reads IR versions up to 10
    return model


def _constant(value: float | tuple[float, ...] | tuple[int, ...]) -> np.ndarray:
    items = value if isinstance(value, tuple) else (value,)
    dtype = np.int64 if all(isinstance(v, int) for v in items) else np.float32
    return np.asarray(value, dtype=dtype)


def example_model(op: Op, example: OnnxExample,
                  rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The one-node model of a registry example, and random feeds for it."""
    count = max(len(example.inputs), max(example.constants, default=-1) + 1)
    names, feeds, inits = [], {}, {}
    for index in range(count):
        name = f"in{index}"
        if index in example.constants:
            inits[name] = _constant(example.constants[index])
        elif index < len(example.inputs) and example.inputs[index] is not None:
            data = rng.standard_normal(example.inputs[index]).astype(np.float32)
            feeds[name] = np.abs(data) + 0.1 if index in example.positive else data
        else:
            name = ""
        names.append(name)
    node = helper.make_node(op.value, names, ["out"], name="node", **example.attrs)
    shapes = {k: v.shape for k, v in feeds.items()}
    model = make_model([node], shapes, ["out"], inits, opset=example.opset)
    model.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.UNDEFINED  # (IsNaN's is bool)
    out = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph.output[0]
    model.graph.output[0].CopyFrom(out)
    return model, feeds


def run_onnxruntime(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The model's float outputs as onnxruntime computes them, on one thread.

    Why the tests' tolerances against these hold on any CPU: onnxruntime's float kernels
    (MLAS, chosen by instruction set) and numpy's BLAS sum float32 products in orders that
    depend on the CPU, and each order's sum is off by at most a few ulps of the sum of the
    terms' magnitudes (measured: 1.6e-7 to 1.9e-6 of the largest output on the zoo's
    CNNs); the tests allow 1e-5 relative (1e-4 for models dozens of layers deep), a
    margin of five to fifty. One thread fixes onnxruntime's own partial sums. Integer
    results are never compared with onnxruntime's int8 kernels without ``ort_probe``.
    """
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return session.run(None, dict(feeds))

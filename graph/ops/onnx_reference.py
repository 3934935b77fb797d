"""The CPU fallback: a node openvta has no kernel for, run by ONNX's reference implementation.

An ONNX node whose operator (or whose tensor types) no :class:`~.base.OpDef` of the
registry takes is imported as one ``OnnxReference`` node per output it makes
(:mod:`openvta.graph.frontends.onnx_fallback` builds them).  Each holds, as plain data, a
one-node ONNX model of the original node at its model's opset — its inputs those of the
graph node in order (with the outer-scope values its subgraphs read, for ``If``, ``Loop``
and ``Scan``), its outputs the node's — and which of the outputs it gives, with the type
ONNX's shape inference gives that output.  Its kernel runs the model with
``onnx.reference.ReferenceEvaluator``, which expands the operators ONNX defines as
functions (HardSwish, …) and runs subgraphs; every back end and ``model.reference`` run
the same kernel, so results are the same everywhere.  Several outputs of one node run it
once: the last inputs and outputs of each model are kept and reused while the inputs are
the same arrays.

The node never runs on the accelerator (its placement says why), and in an int8 model it is a
float island: the quantize pass dequantizes its inputs and quantizes its output where an
int8 kernel reads it.
"""

from __future__ import annotations

import base64
import functools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import OpError
from ..ir import Attrs, Dim, DType, Graph, Node, Op, TensorType
from .base import OpDef, PatternKind

__all__ = ["DEFS", "MODEL_ATTR", "op_type", "encode_model", "parse_shape", "shape_text", "run_reference"]

#: The attribute that holds the one-node ONNX model (base64 of its protobuf bytes).
MODEL_ATTR = "onnx_model"
_lock = threading.Lock()
_last: dict[str, tuple[tuple[np.ndarray, ...], list[np.ndarray]]] = {}


def op_type(attrs: Attrs) -> str:
    """The ONNX operator a fallback node runs."""
    value = attrs.get("op_type")
    return value if isinstance(value, str) else "?"


def encode_model(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def shape_text(shape: Sequence[Dim]) -> str:
    """A shape as the attribute's text: sizes and symbolic names by commas."""
    return ",".join(str(d) for d in shape)


def parse_shape(text: str) -> tuple[Dim, ...]:
    return tuple(int(d) if d.lstrip("-").isdigit() else d for d in text.split(",")) if text else ()


@functools.lru_cache(maxsize=1024)
def _evaluator(model: str) -> Any:
    import onnx
    from onnx.reference import ReferenceEvaluator

    proto = onnx.ModelProto()
    proto.ParseFromString(base64.b64decode(model))
    return ReferenceEvaluator(proto)


def _one_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


def run_reference(inputs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    """Every output of the fallback node's ONNX model on ``inputs`` (``OpError`` with
    onnx.reference's own message, one line, when it fails)."""
    model = attrs.get(MODEL_ATTR)
    if not isinstance(model, str):
        raise OpError(f"a fallback node must hold its ONNX model in {MODEL_ATTR!r}")
    key = tuple(inputs)
    with _lock:
        last = _last.get(model)
    if last is not None and len(last[0]) == len(key) and all(a is b for a, b in zip(last[0], key)):
        return last[1]
    try:
        session = _evaluator(model)
        outputs = session.run(None, dict(zip(session.input_names, inputs)))
    except Exception as exc:  # onnx.reference raises whatever numpy raises inside an op
        raise OpError(f"ONNX's reference kernel for {op_type(attrs)} failed: {_one_line(exc)}") from None
    results = [np.asarray(o) for o in outputs]
    if attrs.get("outputs", 1) != 1:  # the node's other outputs read them again
        with _lock:
            _last[model] = (key, results)
    return results


def _kernel(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    index = attrs.get("output", 0)
    result = run_reference(inputs, attrs)[index if isinstance(index, int) else 0]
    dtype, shape = attrs.get("out_dtype"), parse_shape(str(attrs.get("out_shape", "")))
    if len(shape) != result.ndim or any(isinstance(d, int) and d != n for d, n in zip(shape, result.shape)):
        raise OpError(f"ONNX's reference kernel for {op_type(attrs)} made a tensor of shape {result.shape}, "
                      f"not the ({shape_text(shape)}) shape inference gave: its shape depends on the data")
    if isinstance(dtype, DType) and result.dtype != dtype.numpy:
        result = result.astype(dtype.numpy)
    return result


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    dtype, shape = attrs.get("out_dtype"), attrs.get("out_shape", "")
    if not isinstance(dtype, DType) or not isinstance(shape, str):
        raise OpError("a fallback node must record its output's type (out_dtype, out_shape)")
    return TensorType(parse_shape(shape), dtype)


def _accel(node: Node, graph: Graph, cfg: Any) -> tuple[bool, str]:
    why = node.attrs.get("reason")
    if isinstance(why, str):
        return False, f"{why}, ONNX's reference kernel"
    return False, f"no openvta kernel for {op_type(node.attrs)}, ONNX's reference kernel"


DEFS = (
    OpDef(Op.ONNX_REFERENCE, PatternKind.OPAQUE, (0, 1 << 16), _infer, _kernel, _kernel, _accel),
)

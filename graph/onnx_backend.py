"""An ONNX backend (``onnx.backend.base.Backend``) over openvta's float path, so that ONNX's
own backend tests run against openvta's operators.

``prepare(model)`` imports the model (:func:`~openvta.graph.frontends.onnx.import_onnx`:
an older opset upgraded, shapes fixed, constants folded by ``onnx.reference`` — compile
time) and simplifies it as ``compile_model`` does; ``run(inputs)`` executes it with
openvta's own numpy references (:func:`~openvta.graph.execute.execute`), never
``onnx.reference`` nor onnxruntime.  A node test feeds as inputs what a model holds as
constants (a Reshape's shape, Clip's bounds): a model that does not import with those as
inputs is imported again, without folding anything, with its inputs that are not
float32 made constants, or else every input but the first; once per set of values.

A model of integer tensors (int8 to int32, uint8 to uint64: ``Add`` of two ``uint16``)
runs on the float path exactly: its tensors are widened to float32 (int64 stays, as
shapes and pads), every value the run makes is checked to be an integer float32 holds
exactly (``|v| <= 2**24``, else a one-line :class:`ModelError`), and each output is cast
back to its type with the integer type's wrap-around.  Only operators whose float result
on integers is the integer result are widened (not AveragePool's mean, not Softmax).

Examples
--------
>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> node = helper.make_node("Relu", ["x"], ["y"])
>>> graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
...                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
>>> rep = OpenvtaBackend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
>>> rep.run([np.array([-1.0, 2.0], np.float32)])[0].tolist()
[0.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx.backend.base import Backend, BackendRep

from .errors import ModelError
from .execute import execute
from .frontends.onnx import import_onnx
from .ir import Graph
from .ops.indexing import ROUNDING_CASTS
from .passes.infer_shapes import infer_shapes
from .passes.simplify import simplify

__all__ = ["OpenvtaBackend", "OpenvtaRep", "prepare", "run_model", "supports_device"]

#: The largest integer magnitude below which float32 holds every integer exactly.
EXACT_INTEGER = 2 ** 24
#: Operators whose float32 result on integer values is the integer result (while exact).
_INTEGER_EXACT_OPS = frozenset({"Add", "Clip", "Concat", "Constant", "Dropout", "Flatten", "Identity",
                                "MaxPool", "Mul", "Pad", "Pow", "Relu", "Reshape", "Squeeze", "Sub",
                                "Transpose", "Unsqueeze"})


#: Operators whose float32 result on values of a narrower float type is exact (they move
#: or pick values, or round them: Cast).
_NARROW_EXACT_OPS = frozenset({"Cast", "Clip", "Concat", "Constant", "Dropout", "Flatten", "Identity", "MaxPool",
                               "Pad", "Relu", "Reshape", "Squeeze", "Transpose", "Unsqueeze"})


def _widened_types() -> dict[int, np.dtype]:
    """numpy's integer types but int64, and the narrower types Cast rounds to (FLOAT16,
    BFLOAT16, the FLOAT8s, FLOAT4E2M1, FLOAT8E8M0, the 4- and 2-bit integers: float32 holds
    each of their values exactly), by ONNX type number."""
    from onnx import TensorProto, helper

    integers = (TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.UINT8, TensorProto.UINT16,
                TensorProto.UINT32, TensorProto.UINT64)
    return {t: np.dtype(helper.tensor_dtype_to_np_dtype(t)) for t in (*integers, *sorted(ROUNDING_CASTS))}


def _widen(proto: Any) -> tuple[Any, dict[str, np.dtype], bool]:
    """``proto`` with its integer and narrow-float data tensors made float32, the type of
    every output widened, and whether any was an integer (``proto`` itself when none was)."""
    from onnx import TensorProto, numpy_helper

    widened = _widened_types()
    copy = type(proto)()
    copy.CopyFrom(proto)
    graph = copy.graph
    values = [v for v in [*graph.input, *graph.output, *graph.value_info] if v.type.tensor_type.elem_type in widened]
    tensors = [t for t in [*graph.initializer, *(a.t for n in graph.node for a in n.attribute if a.HasField("t"))]
               if t.data_type in widened]
    if not values and not tensors:
        return proto, {}, False
    integer = any(widened[v.type.tensor_type.elem_type].kind in "iu" for v in values) \
        or any(widened[t.data_type].kind in "iu" for t in tensors)
    exact = _INTEGER_EXACT_OPS | {"Cast"} if integer else _NARROW_EXACT_OPS
    for node in graph.node:
        if node.op_type not in exact:
            which = "integer" if integer else "narrow float"
            raise ModelError(f"node {node.name or node.op_type!r} ({node.op_type}) on {which} tensors is not "
                             f"supported; such models run only {', '.join(sorted(exact))}")
    outputs = {v.name: widened[v.type.tensor_type.elem_type] for v in graph.output
               if v.type.tensor_type.elem_type in widened}
    for value in values:
        value.type.tensor_type.elem_type = TensorProto.FLOAT
    for tensor in tensors:
        tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float32), tensor.name))
    return copy, outputs, integer


def _check_exact(name: str, value: np.ndarray) -> None:
    if value.dtype == np.float32 and value.size and (
            np.abs(value).max() > EXACT_INTEGER or not np.array_equal(value, np.round(value))):
        raise ModelError(f"integer model value {name!r} leaves the integers float32 holds exactly "
                         f"(|v| <= 2**24), so the float path cannot run it exactly")


def _array(value: Any) -> np.ndarray:
    """An input as an array (ONNX's test data holds the narrow types as ``TensorProto``)."""
    from onnx import TensorProto, numpy_helper

    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


class OpenvtaRep(BackendRep):
    """A prepared model: ``run`` executes it on openvta's float references."""

    def __init__(self, proto: Any) -> None:
        self.proto, self._integer_outputs, self._integer = _widen(proto)
        proto = self.proto
        constants = {init.name for init in proto.graph.initializer}
        self.inputs = [v.name for v in proto.graph.input if v.name not in constants]
        self.outputs = [v.name for v in proto.graph.output]
        self._graphs: dict[tuple, Graph] = {}
        try:
            self._static: Graph | None = self._import({}, fold=True)
        except ModelError as exc:  # perhaps it needs some inputs' values: run() tries
            self._static, self._error = None, exc

    def _import(self, constants: dict[str, np.ndarray], fold: bool) -> Graph:
        from onnx import numpy_helper

        proto = type(self.proto)()
        proto.CopyFrom(self.proto)
        if constants:
            proto.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in constants.items())
            inputs = [v for v in proto.graph.input if v.name not in constants]
            del proto.graph.input[:]
            proto.graph.input.extend(inputs)
        return infer_shapes(simplify(import_onnx(proto, fold=fold)))

    def _graph(self, feeds: dict[str, np.ndarray]) -> Graph:
        if self._static is not None:
            return self._static
        error = self._error
        for chosen in ({k: v for k, v in feeds.items() if v.dtype != np.float32},
                       {k: v for k, v in feeds.items() if k != self.inputs[0]}):
            if not chosen:
                continue
            key = tuple((k, v.dtype.str, v.shape, v.tobytes()) for k, v in sorted(chosen.items()))
            if key not in self._graphs:
                try:
                    self._graphs[key] = self._import(chosen, fold=False)
                except ModelError as exc:
                    error = exc
                    continue
            return self._graphs[key]
        raise error

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """The model's outputs for ``inputs`` (a list in the model's input order, or a
        mapping by name), in its output order."""
        if isinstance(inputs, dict):
            feeds = {k: _array(v) for k, v in inputs.items()}
        else:
            given = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            feeds = {name: _array(v) for name, v in zip(self.inputs, given)}
        if self._integer_outputs:
            feeds = {k: v.astype(np.float32) if (v.dtype.kind in "iuV" or v.dtype == np.float16)
                     and v.dtype != np.int64 else v for k, v in feeds.items()}
        graph = self._graph(feeds)
        values = execute(graph, {k: v for k, v in feeds.items() if k in graph.inputs},
                         observe=_check_exact if self._integer else None)
        return tuple(self._typed(name, np.asarray(values[name])) for name in self.outputs)

    def _typed(self, name: str, value: np.ndarray) -> np.ndarray:
        dtype = self._integer_outputs.get(name)
        if dtype is None:
            return value
        return value.astype(np.int64).astype(dtype) if dtype.kind in "iu" else value.astype(dtype)


class OpenvtaBackend(Backend):
    """``onnx.backend.base.Backend`` for ONNX's backend tests (the CPU device only)."""

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        return device == "CPU"

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> OpenvtaRep:
        return OpenvtaRep(model)

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU", outputs_info: Sequence[Any] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        raise NotImplementedError("openvta runs models, not single nodes: use prepare or run_model")

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


prepare = OpenvtaBackend.prepare
run_model = OpenvtaBackend.run_model
supports_device = OpenvtaBackend.supports_device

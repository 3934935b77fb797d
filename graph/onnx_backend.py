"""An ONNX backend (``onnx.backend.base.Backend``) over openvta's float path, so that ONNX's
own backend tests run against openvta's operators.

``prepare(model)`` imports the model (:func:`~openvta.graph.frontends.onnx.import_onnx`:
an older opset upgraded, shapes fixed, constants folded by ``onnx.reference`` — compile
time), canonicalizes and legalizes it as ``compile_model`` does (without a configuration:
no convolution rewritten for the accelerator); ``run(inputs)`` executes it with
openvta's own numpy references (:func:`~openvta.graph.execute.execute`), and the nodes it
has no kernel for with ONNX's reference kernels (the fallback, as a compiled model runs them
on the CPU); never onnxruntime.  A node test feeds as inputs what a model holds as
constants (a Reshape's shape, Clip's bounds): a model that does not import with those as
inputs, or whose openvta kernels decline a node with them (then ONNX's reference runs it),
is imported again, without folding anything, with its inputs that are not float32 made
constants, or else every input but the first; once per set of values, and kept if it
imports with fewer nodes declined.

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
from .ir import Graph, Op
from .passes.infer_shapes import infer_shapes
from .passes.canonicalize import canonicalize
from .passes.legalize import legalize

__all__ = ["OpenvtaBackend", "OpenvtaRep", "prepare", "run_model", "supports_device"]

def _array(value: Any) -> np.ndarray:
    """An input as an array (ONNX's test data holds the narrow types as ``TensorProto``)."""
    from onnx import TensorProto, numpy_helper

    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


def _declined(graph: Graph) -> int:
    """How many nodes an openvta kernel declined (run on ONNX's reference kernel instead)."""
    return sum(n.op is Op.ONNX_REFERENCE and "reason" in n.attrs for n in graph.nodes)


class OpenvtaRep(BackendRep):
    """A prepared model: ``run`` executes it on openvta's float references."""

    def __init__(self, proto: Any) -> None:
        self.proto = proto
        constants = {init.name for init in proto.graph.initializer}
        self.inputs = [v.name for v in proto.graph.input if v.name not in constants]
        self.outputs = [v.name for v in proto.graph.output]
        self._graphs: dict[tuple, Graph] = {}
        self._error = ModelError("the model does not import")
        try:
            self._static: Graph | None = self._import({}, fold=True)
        except ModelError as exc:  # perhaps it needs some inputs' values: run() tries
            self._static, self._error = None, exc
        # an openvta kernel that did not take a node (Clip's bounds as inputs) may take it
        # with those inputs' values: run() tries, and keeps this graph if it cannot
        self._declined = self._static is not None and any(
            n.op is Op.ONNX_REFERENCE and "reason" in n.attrs for n in self._static.nodes)

    def _import(self, constants: dict[str, np.ndarray], fold: bool) -> Graph:
        from onnx import numpy_helper

        proto = type(self.proto)()
        proto.CopyFrom(self.proto)
        if constants:
            proto.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in constants.items())
            inputs = [v for v in proto.graph.input if v.name not in constants]
            del proto.graph.input[:]
            proto.graph.input.extend(inputs)
        return infer_shapes(legalize(canonicalize(import_onnx(proto, fold=fold))))

    def graph_for(self, inputs: Any) -> Graph:
        """The graph :meth:`run` executes for ``inputs`` (as ``run`` takes them)."""
        return self._graph(self._feeds(inputs))

    def _graph(self, feeds: dict[str, np.ndarray]) -> Graph:
        if self._static is not None and not self._declined:
            return self._static
        error = self._error
        if any(v.dtype.kind in "OSU" for v in feeds.values()):
            raise error  # a sequence, an optional or strings: no constant makes it importable
        candidates = [] if self._static is None else [self._static]
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
            candidates.append(self._graphs[key])
            if not _declined(candidates[-1]):
                break
        if not candidates:
            raise error
        return min(candidates, key=_declined)  # (the first of the fewest declined)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """The model's outputs for ``inputs`` (a list in the model's input order, or a
        mapping by name), in its output order."""
        feeds = self._feeds(inputs)
        graph = self._graph(feeds)
        values = execute(graph, {k: v for k, v in feeds.items() if k in graph.inputs})
        return tuple(np.asarray(values[name]) for name in self.outputs)


    def _feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        given = inputs if isinstance(inputs, dict) else dict(
            zip(self.inputs, [inputs] if isinstance(inputs, np.ndarray) else list(inputs)))
        if any(isinstance(v, (list, tuple)) or v is None for v in given.values()):  # a sequence, an optional
            if self._static is None:
                raise self._error
            raise ModelError("the model's inputs must be tensors, not sequences or optionals")
        return {k: _array(v) for k, v in given.items()}


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

"""QDQ models: fold QuantizeLinear/DequantizeLinear into a float model with its own scales.

onnxruntime's ``quantize_static`` (``QuantFormat.QDQ``) writes a float graph whose
activations pass through ``QuantizeLinear → DequantizeLinear`` pairs and whose weights
and biases are ``DequantizeLinear`` of int8 / int32 initializers.  :func:`fold_qdq`
turns such a model into the float model it stands for, keeping the model's
quantization on the value types:

- a ``DequantizeLinear`` of a constant becomes that constant dequantized in float32
  (``(q - zero_point) * scale``, as onnxruntime computes it), typed with the model's
  scale (per tensor, or per channel along ``axis``); a weight zero point other than 0
  is refused (the accelerator multiplies int8 weights as they are);
- a ``QuantizeLinear → DequantizeLinear`` pair on an activation disappears: the
  activation is typed with the pair's scale and int8 zero point.  A pair with a zero
  point other than 0 becomes a ``Clip`` to its range ``[(-128 - z) s, (127 - z) s]``:
  ``quantize_static`` removes a ReLU (or Clip) whose output range makes it redundant,
  so the saturation of an asymmetric pair is part of the function (``fixed`` and
  ``pow2`` mode recalibrate this float model; ``exact`` mode drops the no-op Clip).

Anything else (a lone ``QuantizeLinear``, uint8 data, a pair whose two halves disagree)
is refused with one line naming the node.  The ``exact`` requantization mode then
quantizes the folded model with these parameters instead of calibrated ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from openvta.isa import INT8_MAX, INT8_MIN

from ..errors import ModelError
from ..ir import QuantParams

__all__ = ["fold_qdq", "QDQ_OPS"]

QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})


def _params(node: Any, name: str, consts: dict[str, np.ndarray],
            data: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, int]:
    """(scale float32, zero point int64, axis) of a Q/DQ node, its constants checked."""
    if len(node.input) < 2 or node.input[1] not in consts:
        raise ModelError(f"node {name!r} ({node.op_type}) must have a constant scale")
    scale = np.asarray(consts[node.input[1]], dtype=np.float32)
    zp_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
    if zp_name is not None and zp_name not in consts:
        raise ModelError(f"node {name!r} ({node.op_type}) must have a constant zero point")
    zp = consts[zp_name] if zp_name is not None else np.zeros(scale.shape, np.int8)
    kind = data.dtype if data is not None else zp.dtype
    if kind not in (np.int8, np.int32):
        raise ModelError(f"node {name!r} ({node.op_type}) must quantize to int8 (or int32 "
                         f"for a bias), not {kind}")
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    return scale.reshape(-1), np.asarray(zp, dtype=np.int64).reshape(-1), int(axis)


def _dequantize_constant(node: Any, name: str, consts: dict[str, np.ndarray]
                         ) -> tuple[np.ndarray, QuantParams]:
    q = consts[node.input[0]]
    scale, zp, axis = _params(node, name, consts, q)
    if np.any(zp != 0):
        what = "weight" if q.dtype == np.int8 else "bias"
        raise ModelError(f"node {name!r} (DequantizeLinear): {what} zero point must be 0, "
                         f"not {zp.tolist()!r}")
    axis %= max(q.ndim, 1)
    shape = [1] * q.ndim
    if len(scale) > 1:
        shape[axis] = len(scale)
    real = (q.astype(np.int32).astype(np.float32) * scale.reshape(shape)).astype(np.float32)
    per_channel = len(scale) > 1
    return real, QuantParams(tuple(float(s) for s in scale), 0, axis if per_channel else None)


def _activation(node: Any, name: str, consts: dict[str, np.ndarray]) -> QuantParams:
    scale, zp, _ = _params(node, name, consts, None)
    if len(scale) != 1:
        raise ModelError(f"node {name!r} ({node.op_type}) must have one scale for an "
                         f"activation, not {len(scale)}")
    return QuantParams((float(scale[0]),), int(zp[0]))


def _rename(node: Any, mapping: dict[str, str]) -> Any:
    import onnx

    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    for index, value in enumerate(copy.input):
        copy.input[index] = mapping.get(value, value)
    for index, value in enumerate(copy.output):
        copy.output[index] = mapping.get(value, value)
    return copy


class _Folder:
    """One run of :func:`fold_qdq` over a model's nodes."""

    def __init__(self, consts: dict[str, np.ndarray]) -> None:
        self.consts = consts
        self.alias: dict[str, str] = {}  # DQ output → the activation its Q read
        self.pending: dict[str, tuple[str, QuantParams]] = {}  # Q output → (activation, params)
        self.quantizers: dict[str, str] = {}  # Q output → the Q node's name
        self.quant: dict[str, QuantParams] = {}
        self.folded: dict[str, np.ndarray] = {}
        self.kept: list[Any] = []

    def visit(self, node: Any, name: str) -> None:
        inputs = [self.alias.get(v, v) for v in node.input]
        if node.op_type == "DequantizeLinear" and inputs[0] in self.consts:
            real, params = _dequantize_constant(node, name, self.consts)
            self.folded[node.output[0]] = real
            self.quant[node.output[0]] = params
        elif node.op_type == "QuantizeLinear":
            params = _activation(node, name, self.consts)
            if self.quant.get(inputs[0], params) != params:
                raise ModelError(f"node {name!r} (QuantizeLinear) quantizes {inputs[0]!r} "
                                 "with other parameters than an earlier one")
            self.quant[inputs[0]] = params
            self.pending[node.output[0]] = (inputs[0], params)
            self.quantizers[node.output[0]] = name
        elif node.op_type == "DequantizeLinear":
            if inputs[0] not in self.pending:
                raise ModelError(f"node {name!r} (DequantizeLinear) must read a constant or "
                                 f"a QuantizeLinear output, not {inputs[0]!r}")
            source, params = self.pending[inputs[0]]
            if _activation(node, name, self.consts) != params:
                raise ModelError(f"node {name!r} (DequantizeLinear) must use its "
                                 "QuantizeLinear's scale and zero point")
            if params.zero_point == 0:
                self.alias[node.output[0]] = source
            else:
                self.kept.append(self._saturate(name, source, node.output[0], params))
                self.quant[node.output[0]] = params
        else:
            self.kept.append(_rename(node, self.alias))

    def _saturate(self, name: str, source: str, out: str, params: QuantParams) -> Any:
        """A Clip to the pair's dequantized int8 range: the activation it stands for."""
        from onnx import helper

        scale = np.float32(params.scale[0])
        bounds = []
        for end, code in (("min", INT8_MIN), ("max", INT8_MAX)):
            self.folded[f"{name}.{end}"] = np.asarray(np.float32(code - params.zero_point) * scale)
            bounds.append(f"{name}.{end}")
        return helper.make_node("Clip", [source, *bounds], [out], name=name)


def fold_qdq(proto: Any, names: list[str]) -> tuple[Any, dict[str, QuantParams]]:
    """The float model a QDQ model stands for, and its values' quantization (module doc).

    ``names`` are the nodes' names as the importer reports them.  A model without
    Q/DQ nodes is returned as it is, with no parameters.
    """
    import onnx
    from onnx import numpy_helper

    if not any(node.op_type in QDQ_OPS for node in proto.graph.node):
        return proto, {}
    consts = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    folder = _Folder(consts)
    for node, name in zip(proto.graph.node, names):
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
        folder.visit(node, name)
    outputs = {folder.alias[o.name]: o.name for o in proto.graph.output if o.name in folder.alias}
    inputs = {v.name for v in proto.graph.input}
    for inner, outer in outputs.items():
        if inner in inputs:
            raise ModelError(f"model output {outer!r} must be computed, not a graph input")
        if inner in folder.quant:
            folder.quant[outer] = folder.quant.pop(inner)
    nodes = [_rename(node, outputs) for node in folder.kept]
    used = {v for n in nodes for v in n.input}
    for value, name in folder.quantizers.items():
        if value in used or value in {o.name for o in proto.graph.output}:
            raise ModelError(f"node {name!r} (QuantizeLinear) must be read by DequantizeLinear "
                             f"nodes only, and {value!r} is not")
    nodes = [n for n in nodes if n.op_type != "Constant" or n.output[0] in used]
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    kept = [i for i in proto.graph.initializer if i.name in used and i.name not in folder.folded]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept + [numpy_helper.from_array(a, k)
                                           for k, a in folder.folded.items() if k in used])
    return model, folder.quant

"""The ONNX frontend: a float32 ONNX model (opset 7 or newer) → a typed :class:`Graph`.

The model is first made what the converters read (:mod:`.onnx_prepare`: an opset older
than 13 upgraded, input shapes fixed, computations on constants folded by
``onnx.reference``), then checked before anything is converted, each problem one line
naming what is wrong: an unreadable or non-ONNX file, an opset older than 7, a model quantized
with other ops than QuantizeLinear/DequantizeLinear, an unsupported op, a non-float32
input, an input dimension other than the first that is not fixed.  A QDQ model is
folded into the float model it stands for, its values typed with the model's own
scales and zero points (``onnx_qdq``).  Nodes are then converted one by one
(``onnx_ops``), each output typed through the op registry as it is made; ``Constant``
nodes become constants.

Examples
--------
>>> from onnx import TensorProto, helper
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
>>> model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])],
...                           "g", [x], [y]), opset_imports=[helper.make_opsetid("", 13)])
>>> print(import_onnx(model).dump())
graph g
  input x: float32[N,4]
  y: float32[N,4] = Relu(x)  # Relu_0
  output y
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError, OpError
from ..ir import Attrs, DType, Graph, Node, QuantParams, TensorType
from ..passes.infer_shapes import infer_node
from ..registry import ONNX_OPS
from ..verify import verify_graph
from .onnx_fallback import fallback_nodes, subgraph_reads, value_type
from .onnx_ops import CONVERTERS, OnnxNode
from .onnx_prepare import OLDEST_OPSET, TARGET_OPSET, node_names, prepare
from .onnx_qdq import fold_qdq

__all__ = ["import_onnx", "load_onnx", "calibration_shapes", "check_input_shapes", "SUPPORTED_OPS", "MIN_OPSET"]

#: The oldest opset imported (older than 13: upgraded by onnx.version_converter first).
MIN_OPSET = OLDEST_OPSET
SUPPORTED_OPS = tuple(sorted([op.value for op in ONNX_OPS] + ["Constant"]))
_ONNX_OPS = {op.value: op for op in ONNX_OPS}


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def load_onnx(model: Any) -> Any:
    """The ``onnx.ModelProto`` of a path or a ``ModelProto`` (one-line :class:`ModelError`
    for a file that is missing, unreadable or not an ONNX model)."""
    return _load(model)


def check_input_shapes(input_shapes: object, proto: Any) -> dict[str, tuple[int, ...]]:
    """``input_shapes`` as input name → shape, checked against the inputs of ``proto``
    (one-line ``ValueError``)."""
    if input_shapes is None:
        return {}
    if not isinstance(input_shapes, Mapping):
        raise ValueError(f"input_shapes must be a mapping of input name to shape, not {type(input_shapes).__name__}")
    checked = {}
    for name, shape in input_shapes.items():
        dims = tuple(shape) if isinstance(shape, (tuple, list)) else None
        if not isinstance(name, str) or dims is None or not dims or not all(
                isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0 for d in dims):
            raise ValueError(f"input_shapes[{name!r}] must be a tuple of positive integers, not {shape!r}")
        checked[name] = tuple(int(d) for d in dims)
    constants = {init.name for init in proto.graph.initializer}
    names = [v.name for v in proto.graph.input if v.name not in constants]
    for name in checked:
        if name not in names:
            raise ValueError(f"input_shapes names {name!r}, which is not an input of the model "
                             f"(its inputs: {', '.join(names)})")
    return checked


def calibration_shapes(proto: Any, calibration: object) -> dict[str, tuple[int, ...]]:
    """The input shapes the calibration samples have (an array for the single input, a
    mapping, or the first of an iterable of mappings); ``{}`` when they say nothing.  A
    shape that contradicts the model's is left out: the calibration check names it."""
    constants = {init.name for init in proto.graph.initializer}
    inputs = {v.name: v for v in proto.graph.input if v.name not in constants}
    first: object = calibration
    if isinstance(calibration, (list, tuple)) and calibration:
        first = calibration[0]
    if isinstance(first, np.ndarray):
        given = {next(iter(inputs)): first.shape} if len(inputs) == 1 else {}
    elif isinstance(first, Mapping):
        given = {k: np.shape(v) for k, v in first.items() if k in inputs}
    else:
        return {}
    shapes = {}
    for name, shape in given.items():
        shape = tuple(int(n) for n in shape)
        dims = inputs[name].type.tensor_type.shape.dim
        batch = dims[0].dim_value if len(dims) and dims[0].HasField("dim_value") else 0
        if shape and batch > 0 and shape[0] % batch == 0:  # runs of a fixed batch (calibration_batches splits)
            shape = (batch, *shape[1:])
        if agrees(inputs[name], shape):
            shapes[name] = shape
    return shapes


def agrees(value: Any, shape: Sequence[int]) -> bool:
    """Whether ``shape`` fits the declared shape of the model input ``value`` (its rank, and
    each fixed size)."""
    dims = value.type.tensor_type.shape.dim
    return len(dims) == len(shape) and all(not (d.HasField("dim_value") and d.dim_value > 0) or d.dim_value == n
                                           for d, n in zip(dims, shape))


def _load(model: Any) -> Any:
    import onnx

    if isinstance(model, onnx.ModelProto):
        _check_external(model, None)
        return model
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model must be a path or an onnx.ModelProto, not {type(model).__name__}")
    path = Path(model)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ModelError(f"model file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise ModelError(f"model file {str(path)!r} cannot be read: {_one_line(exc)}") from None
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError, and RuntimeError from the C++ parser
        raise ModelError(f"model file {str(path)!r} is not an ONNX model "
                         f"(truncated or another format: {_one_line(exc)})") from None
    if proto.ir_version == 0 or not proto.HasField("graph"):
        raise ModelError(f"model file {str(path)!r} is not an ONNX model (no IR version or graph)")
    _check_external(proto, path)
    return proto


def _external_tensors(proto: Any) -> list[Any]:
    from onnx import TensorProto
    from onnx.external_data_helper import _get_all_tensors

    return [t for t in _get_all_tensors(proto) if t.HasField("data_location")
            and t.data_location == TensorProto.EXTERNAL]


def _check_external(proto: Any, path: Path | None) -> None:
    """Load the external data of ``path``'s tensors from beside it (one-line
    :class:`ModelError` for a file that is missing or short); a ``ModelProto`` handed in
    must carry its external data already."""
    from onnx import helper
    from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_tensor

    for tensor in _external_tensors(proto):
        location = ExternalDataInfo(tensor).location
        if path is None:
            raise ModelError(f"tensor {tensor.name!r} keeps its data in the external file {location!r}: give the "
                             "model's path, or load it with its external data (onnx.load)")
        try:
            load_external_data_for_tensor(tensor, str(path.parent))
        except Exception as exc:  # onnx raises ValidationError, FileNotFoundError, ValueError
            raise ModelError(f"model file {str(path)!r}: the external data {location!r} of tensor "
                             f"{tensor.name!r} cannot be read ({_one_line(exc)})") from None
        tensor.data_location = 0  # DEFAULT: the data is in raw_data now
        del tensor.external_data[:]
        want = int(np.prod(tensor.dims)) * helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        if len(tensor.raw_data) != want:
            raise ModelError(f"model file {str(path)!r}: the external data {location!r} of tensor "
                             f"{tensor.name!r} holds {len(tensor.raw_data)} bytes, not {want}")


def _check_model(proto: Any) -> None:
    versions = [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        other = next((n for n in proto.graph.node if n.domain not in ("", "ai.onnx")), None)
        if other is not None:
            raise ModelError(f"node {other.name or other.op_type!r} ({other.domain}.{other.op_type}) is of the "
                             f"domain {other.domain!r}; openvta runs ONNX's default domain only")
        raise ModelError("model must import the default ONNX opset, not none")


def _static_shape(node: Any, name: str, types: Mapping[str, TensorType]) -> np.ndarray:
    """The constant a ``Shape`` or ``Size`` of a value of known shape is."""
    from onnx import helper

    t = types.get(node.input[0])
    if t is None:
        raise ModelError(f"node {name!r} ({node.op_type}) reads {node.input[0]!r} before it is defined")
    if not all(isinstance(d, int) for d in t.shape):
        raise ModelError(f"node {name!r} ({node.op_type}) reads the shape of {node.input[0]!r}, which is "
                         "not known when the model is compiled: give the input shapes (input_shapes=, "
                         "--input-shape)")
    shape = np.array(t.shape, np.int64)
    if node.op_type == "Size":
        return np.array(np.prod(shape), np.int64)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return shape[slice(attrs.get("start", 0), attrs.get("end"))]


def _own_kernel(node: Any, types: Mapping[str, TensorType], opset: int) -> bool:
    """Whether an openvta kernel may take ``node``: an op of the registry, at an opset the
    converters read, on float32 and int64 tensors (and flags: a bool constant)."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in _ONNX_OPS or opset < TARGET_OPSET:
        return False
    return all(types[v].dtype in (DType.FLOAT32, DType.INT64, DType.BOOL) for v in node.input if v and v in types)


def _constant_array(name: str, array: np.ndarray) -> np.ndarray:
    if array.dtype == object or array.dtype.kind in "SU":
        raise ModelError(f"constant {name!r} holds strings; openvta holds numbers and booleans")
    try:
        DType.of(array.dtype)
    except ValueError as exc:
        raise ModelError(f"constant {name!r}: {exc}") from None
    return np.asarray(array, order="C")  # (ascontiguousarray would make a 0-D one 1-D)


def _constant_types(constants: dict[str, np.ndarray]) -> dict[str, TensorType]:
    return {k: TensorType(a.shape, DType.of(a.dtype)) for k, a in constants.items()}


def _constant_node(node: Any, name: str) -> np.ndarray:
    from onnx import helper, numpy_helper

    if len(node.attribute) != 1:
        raise ModelError(f"node {name!r} (Constant) must have one value attribute")
    attr = node.attribute[0]
    value = helper.get_attribute_value(attr)
    if attr.name == "value":
        return numpy_helper.to_array(value)
    if attr.name in ("value_float", "value_floats"):
        return np.asarray(value, dtype=np.float32)
    if attr.name in ("value_int", "value_ints"):
        return np.asarray(value, dtype=np.int64)
    raise ModelError(f"node {name!r} (Constant) attribute {attr.name!r} is not supported")


def _attributes(node: Any) -> dict[str, object]:
    from onnx import helper

    attrs: dict[str, object] = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        attrs[attr.name] = value.decode() if isinstance(value, bytes) else value
    return attrs


def _convert(node: Any, name: str, types: dict[str, TensorType],
             constants: dict[str, np.ndarray]) -> Node:
    """``node`` as the node of openvta's own kernel (one-line :class:`ModelError` for a form
    the converter or the kernel does not take: the fallback runs it then)."""
    op = _ONNX_OPS[node.op_type]
    view = OnnxNode(name, node.op_type, tuple(node.input), _attributes(node), types, constants)
    if len([o for o in node.output if o]) != 1 or not node.output[0]:
        raise view.fail(f"must have one output, not {list(node.output)!r}")
    inputs, attrs = CONVERTERS[op](view)
    for value in inputs:
        if types[value].dtype is DType.BOOL:
            raise view.fail(f"input {value!r} must be float32 (or int64 for shapes), not bool")
    converted = Node(name, op, inputs, (node.output[0],), Attrs(attrs))
    try:
        types[node.output[0]] = infer_node(converted, types)
    except OpError as exc:
        raise view.fail(str(exc)) from None
    return converted


def _reads(node: Any) -> list[str]:
    return [v for v in node.input if v] + subgraph_reads(node)


def _fold_qdq(proto: Any) -> tuple[Any, dict[str, QuantParams]]:
    """A QDQ model folded into the float model it stands for (``onnx_qdq``); a model with no
    dequantized weight nor QuantizeLinear → DequantizeLinear pair (a lone quantizer, a
    dequantized input) keeps its QuantizeLinear and DequantizeLinear nodes as nodes of their
    own, which ONNX's reference runs."""
    try:
        return fold_qdq(proto, node_names(proto))
    except ModelError:
        made = {o for n in proto.graph.node if n.op_type in ("QuantizeLinear", "Constant") for o in n.output} \
            | {i.name for i in proto.graph.initializer}
        if any(n.op_type == "DequantizeLinear" and n.input[0] in made for n in proto.graph.node):
            raise  # a QDQ model (quantized weights, or pairs) with something it cannot fold
        return proto, {}


def import_onnx(model: str | os.PathLike[str] | Any,
                input_shapes: Mapping[str, Sequence[int]] | None = None, fold: bool = True) -> Graph:
    """Import a float32 ONNX model (a path or an ``onnx.ModelProto``) as a verified graph.

    A model older than opset 13 is upgraded first, its inputs' unknown dimensions are fixed
    from ``input_shapes`` (input name → shape), and every computation on constants is
    folded (:func:`~.onnx_prepare.prepare`; not with ``fold=False``); the graph's ``notes``
    say what was done.

    Raises
    ------
    ModelError
        one line naming what cannot be imported (module docstring).
    TypeError
        for a ``model`` that is neither a path nor a ``ModelProto``.
    """
    from onnx import numpy_helper

    proto = _load(model)
    _check_model(proto)
    proto, notes = prepare(proto, input_shapes, fold)
    proto, quant = _fold_qdq(proto)
    g = proto.graph
    opset = next(int(o.version) for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    constants = {init.name: _constant_array(init.name, numpy_helper.to_array(init))
                 for init in g.initializer}
    inputs = [v for v in g.input if v.name not in constants]
    types = {v.name: value_type(v, "input", fixed_only=True) for v in inputs}
    types.update(_constant_types(constants))
    outputs = tuple(v.name for v in g.output)
    read = {v for node in g.node for v in _reads(node)} | set(outputs)
    nodes: list[Node] = []
    for node, name in zip(g.node, node_names(proto)):
        for value in _reads(node):
            if value not in types:
                raise ModelError(f"node {name!r} ({node.op_type}) reads {value!r} before it is defined")
        if node.op_type in ("Constant", "Shape", "Size") and node.domain in ("", "ai.onnx") \
                and not set(node.output) & set(outputs):
            array = _constant_node(node, name) if node.op_type == "Constant" else _static_shape(node, name, types)
            array = _constant_array(node.output[0], array)
            constants[node.output[0]] = array
            types.update(_constant_types({node.output[0]: array}))
            continue
        reason = ""
        if _own_kernel(node, types, opset):
            try:
                nodes.append(_convert(node, name, types, constants))
                continue
            except ModelError as exc:  # a form openvta's kernel does not take: ONNX's runs it
                why = str(exc).removeprefix(f"node {name!r} ({node.op_type}) ")  # (OnnxNode.fail's prefix)
                reason = f"openvta's {node.op_type} kernel does not take it ({why})"
        nodes.extend(fallback_nodes(node, name, proto.opset_import, types, constants, read, reason))
    for name in outputs:
        if name not in types:
            raise ModelError(f"model output {name!r} is never computed")
    used = {v for n in nodes for v in n.inputs} | set(outputs)
    unused = {k for k in constants if k not in used}
    graph = Graph(g.name or "model", tuple(v.name for v in inputs), outputs, tuple(nodes),
                  {k: a for k, a in constants.items() if k not in unused},
                  {k: t.with_quant(quant.get(k)) for k, t in types.items() if k not in unused},
                  notes=tuple(notes))
    return verify_graph(graph)

"""ONNX node → fallback nodes: what openvta has no kernel for, run by ONNX's reference.

:func:`fallback_nodes` makes the ``OnnxReference`` nodes (:mod:`..ops.onnx_reference`) of
one ONNX node: one per output the graph reads, each holding the one-node model of the
node at the model's opset, its inputs those of the node (and the outer-scope values its
subgraphs read), its output typed by ONNX's shape inference on the types openvta gave the
inputs (with the small constants' values, so that a shape or a count read from an input
is known).  Where shape inference leaves a size unknown and every input is a constant, or
the node is control flow (``If``, ``Loop``, ``Scan``) on inputs of static shapes, the node is
run once to learn it (the control flow on zeros, its shapes then checked at every run);
otherwise the size depends on the data and the node is refused.

What cannot run is refused in one line naming the node and why (:func:`refusal`): an
operator of another domain than ONNX's default one, a random generator (no reference
can be bit-exact), an operator ONNX does not define or its reference implementation
lacks, a sequence, an optional, a map or a string, and an output whose shape depends on
the data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ModelError
from ..ir import Attrs, Dim, DType, Node, Op, TensorType
from ..ops.onnx_reference import MODEL_ATTR, encode_model, shape_text

__all__ = ["fallback_nodes", "refusal", "subgraph_reads", "RANDOM_OPS", "onnx_dtype", "value_type"]

#: Operators that draw random numbers: no reference run can be bit-exact, so none runs.
RANDOM_OPS = frozenset({"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
                        "RandomUniformLike"})
#: Control flow whose output shapes ONNX's shape inference leaves open (a Loop's carried
#: values): on static inputs the node is run once, on zeros, to learn them, and the kernel
#: checks every run's shapes against them (a shape that does depend on the data is then one
#: line at run time, never a wrong answer).
CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
#: Constants up to this many elements go into the shape inference model as values (a
#: shape, a count, pads): what data propagation reads.
_PROPAGATED = 4096


def onnx_dtype(elem_type: int) -> DType | None:
    """The IR type of an ONNX tensor element type (None for a string or an unknown one)."""
    from onnx import TensorProto, helper

    if elem_type in (TensorProto.UNDEFINED, TensorProto.STRING):
        return None
    try:
        return DType.of(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        return None


def _elem_type(dtype: DType) -> int:
    from onnx import helper

    return int(helper.np_dtype_to_tensor_dtype(dtype.numpy))


def value_type(value: Any, what: str, fixed_only: bool = False) -> TensorType:
    """The IR type of an ONNX ``ValueInfoProto`` (one-line :class:`ModelError` for a
    sequence, an optional, a map, a string or a tensor without a type).  ``fixed_only``:
    every dimension but the first must be a fixed size."""
    from onnx import TensorProto

    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        name = {"sequence_type": "sequence", "optional_type": "optional", "map_type": "map",
                "sparse_tensor_type": "sparse tensor"}.get(kind or "", kind or "value without a type")
        article = "an" if name[0] in "aeiou" else "a"
        raise ModelError(f"{what} {value.name!r} is {article} {name}; openvta's graphs hold tensors only")
    elem = value.type.tensor_type.elem_type
    dtype = onnx_dtype(elem)
    if dtype is None:
        kind_name = TensorProto.DataType.Name(elem).lower() if elem in TensorProto.DataType.values() else str(elem)
        raise ModelError(f"{what} {value.name!r} is a tensor of {kind_name}; openvta holds numbers and booleans "
                         "(no strings)")
    if not value.type.tensor_type.HasField("shape"):
        raise ModelError(f"{what} {value.name!r} must have a shape, not none")
    shape: list[Dim] = []
    for axis, dim in enumerate(value.type.tensor_type.shape.dim):
        if dim.HasField("dim_value") and dim.dim_value >= 0 and not (fixed_only and dim.dim_value == 0 and axis == 0):
            shape.append(int(dim.dim_value))
        elif axis == 0 or not fixed_only:
            shape.append(dim.dim_param or "N")
        else:
            raise ModelError(f"{what} {value.name!r} dimension {axis} must be a fixed size, "
                             f"not {dim.dim_param or 'unknown'!r} (only the batch may vary)")
    return TensorType(tuple(shape), dtype)


def subgraph_reads(node: Any) -> list[str]:
    """The outer-scope names the subgraphs of ``node`` read (If, Loop, Scan), in order."""
    from onnx import AttributeProto

    reads: list[str] = []

    def visit(graph: Any, outer: set[str]) -> None:
        defined = set(outer) | {v.name for v in graph.input} | {i.name for i in graph.initializer} \
            | {i.values.name for i in graph.sparse_initializer}
        for inner in graph.node:
            for name in inner.input:
                if name and name not in defined and name not in reads:
                    reads.append(name)
            for attr in inner.attribute:
                for sub in ([attr.g] if attr.type == AttributeProto.GRAPH else
                            list(attr.graphs) if attr.type == AttributeProto.GRAPHS else []):
                    visit(sub, defined)
            defined |= set(inner.output)

    for attr in node.attribute:
        for sub in ([attr.g] if attr.type == AttributeProto.GRAPH else
                    list(attr.graphs) if attr.type == AttributeProto.GRAPHS else []):
            visit(sub, set())
    return reads


def refusal(node: Any, name: str, opset: int) -> str | None:
    """Why ``node`` cannot run on the fallback, or None."""
    import onnx

    op_type = node.op_type
    if node.domain not in ("", "ai.onnx"):
        return (f"node {name!r} ({node.domain}.{op_type}) is of the domain {node.domain!r}; openvta runs ONNX's "
                "default domain only")
    if op_type in RANDOM_OPS:
        return (f"node {name!r} ({op_type}) draws random numbers: no reference can be bit-exact, so openvta "
                "does not run it")
    try:
        onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return f"node {name!r} ({op_type}) is not an operator of ONNX's default domain at opset {opset}"
    return None


def _tensor_info(name: str, t: TensorType) -> Any:
    from onnx import helper

    return helper.make_tensor_value_info(name, _elem_type(t.dtype), list(t.shape))


def _one_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message without onnx's tags (``[ShapeInferenceError]``,
    ``(op_type:Conv, node name: c):``), which the error names already."""
    import re

    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    text = re.sub(r"\[\w+\]\s*|Inference error\(s\):\s*|\(op_type:[^)]*\):\s*", "", text).strip()
    return (text or type(exc).__name__)[:300]


def _inferred(node: Any, name: str, inputs: Sequence[str], types: Mapping[str, TensorType],
              constants: Mapping[str, np.ndarray], opset_imports: Iterable[Any]) -> dict[str, Any]:
    """Output name → its ``TypeProto`` by ONNX's shape inference of the one-node model."""
    import onnx
    from onnx import helper, numpy_helper

    known = [v for v in inputs if v in constants and constants[v].size <= _PROPAGATED]
    graph = helper.make_graph([node], "infer", [_tensor_info(v, types[v]) for v in inputs if v not in known],
                              [], [numpy_helper.from_array(np.asarray(constants[v]), v) for v in known])
    model = helper.make_model(graph, opset_imports=list(opset_imports))
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except Exception as exc:  # onnx's InferenceError, ValidationError and C++ errors
        raise ModelError(f"node {name!r} ({node.op_type}): ONNX's shape inference refuses it: "
                         f"{_one_line(exc)}") from None
    return {v.name: v.type for v in inferred.graph.value_info}


def _output_type(out: str, proto_type: Any, node: Any, name: str, inputs: Sequence[str],
                 types: Mapping[str, TensorType]) -> TensorType | None:
    """The IR type of output ``out`` (None where a size is unknown)."""
    from onnx import helper

    if proto_type is None or (proto_type.HasField("tensor_type") and not proto_type.tensor_type.HasField("shape")):
        return None
    info = helper.make_value_info(out, proto_type)
    result = value_type(info, f"node {name!r} ({node.op_type}) output")
    names = {d for v in inputs for d in types[v].shape if isinstance(d, str)}
    dims = proto_type.tensor_type.shape.dim if proto_type.HasField("tensor_type") else []
    if any(not d.HasField("dim_value") and d.dim_param not in names for d in dims):
        return None
    return result


def _run_once(model: Any, inputs: Sequence[str], values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, {v: values[v] for v in inputs})]


def _as_reference_runs(node: Any) -> tuple[Any, list[Any]]:
    """``node`` in the form ``onnx.reference`` runs as ONNX specifies it, and the constants
    that form adds: a Loop without its optional condition gets the condition ``true``
    (the specification's meaning; ``onnx.reference`` runs no iteration without one)."""
    from onnx import numpy_helper

    if node.op_type != "Loop" or (len(node.input) > 1 and node.input[1]):
        return node, []
    copy = type(node)()
    copy.CopyFrom(node)
    inputs = list(node.input) + [""] * (2 - len(node.input))
    inputs[1] = f"{node.output[0]}.cond"
    del copy.input[:]
    copy.input.extend(inputs)
    return copy, [numpy_helper.from_array(np.array(True), inputs[1])]


def fallback_nodes(node: Any, name: str, opset_imports: Sequence[Any], types: dict[str, TensorType],
                   constants: Mapping[str, np.ndarray], used: set[str], reason: str = "") -> list[Node]:
    """The fallback nodes of ONNX ``node`` (named ``name``), their outputs' types added to
    ``types``; ``used``: the values later nodes or the graph's outputs read; ``reason``:
    why openvta's own kernel does not take it, if it has one.

    Raises
    ------
    ModelError
        one line naming the node and why it cannot run (module docstring).
    """
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    opset = next(int(o.version) for o in opset_imports if o.domain in ("", "ai.onnx"))
    refused = refusal(node, name, opset)
    if refused:
        raise ModelError(refused)
    inputs = list(dict.fromkeys([v for v in node.input if v] + subgraph_reads(node)))
    for value in inputs:
        if value not in types:
            raise ModelError(f"node {name!r} ({node.op_type}) reads {value!r} before it is defined")
    inferred = _inferred(node, name, inputs, types, constants, opset_imports)
    outputs = [o for o in node.output if o]
    out_types = {o: _output_type(o, inferred.get(o), node, name, inputs, types) for o in outputs}
    node, own = _as_reference_runs(node)
    graph = helper.make_graph([node], node.op_type, [_tensor_info(v, types[v]) for v in inputs],
                              [helper.make_value_info(o, inferred[o]) if o in inferred
                               else helper.make_empty_tensor_value_info(o) for o in outputs], own)
    model = helper.make_model(graph, opset_imports=list(opset_imports))
    try:
        ReferenceEvaluator(model)
    except Exception as exc:  # onnx.reference's missing implementations and bad attributes
        raise ModelError(f"node {name!r} ({node.op_type}) cannot run on ONNX's reference implementation: "
                         f"{_one_line(exc)}") from None
    if any(t is None for t in out_types.values()):
        static = all(isinstance(d, int) for v in inputs for d in types[v].shape)
        if not all(v in constants for v in inputs) and not (node.op_type in CONTROL_FLOW and static):
            unknown = next(o for o, t in out_types.items() if t is None)
            raise ModelError(f"node {name!r} ({node.op_type}) output {unknown!r} has a shape that ONNX's shape "
                             "inference cannot give without the data: openvta compiles static shapes only")
        probe = {v: constants[v] if v in constants else np.zeros(types[v].concrete(), types[v].dtype.numpy)
                 for v in inputs}
        try:
            results = _run_once(model, inputs, probe)
        except Exception as exc:  # onnx.reference's own errors
            raise ModelError(f"node {name!r} ({node.op_type}) could not be run to learn its outputs' shapes: "
                             f"{_one_line(exc)}") from None
        out_types = {o: TensorType(r.shape, DType.of(r.dtype)) for o, r in zip(outputs, results)}
    data = encode_model(model.SerializeToString())
    kept = [(i, o) for i, o in enumerate(outputs) if o in used] or [(0, outputs[0])]
    nodes = []
    for count, (index, out) in enumerate(kept):
        t = out_types[out]
        assert t is not None  # every size known: checked above
        attrs: dict[str, object] = {"op_type": node.op_type, "opset": opset, "output": index,
                                    "outputs": len(kept), "out_dtype": t.dtype, "out_shape": shape_text(t.shape),
                                    MODEL_ATTR: data}
        if reason:
            attrs["reason"] = reason
        nodes.append(Node(name if count == 0 else f"{name}:{index}", Op.ONNX_REFERENCE, tuple(inputs), (out,),
                          Attrs(attrs)))
        types[out] = t
    return nodes

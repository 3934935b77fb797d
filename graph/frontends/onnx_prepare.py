"""What exporters write, made what the ONNX frontend reads: the opset upgraded, the input
shapes fixed, every computation on constants folded.

:func:`prepare` runs before the frontend converts nodes (:mod:`.onnx`):

1. **opset** — a model of opset 7 … 12 is upgraded to :data:`TARGET_OPSET` with
   ``onnx.version_converter`` (the notes say so).  An older one, one the converter fails
   on, or one with an operator openvta has no kernel for whose meaning changed by then
   (the converter would have to rewrite it, and gets some wrong) is kept at its own opset:
   every node then runs on ONNX's reference kernels, and the notes say why.
2. **input shapes** — an input dimension that is not fixed takes its size from
   ``input_shapes`` (the caller's, or the calibration samples'); the batch (dimension 0)
   stays symbolic where the shape computations allow it: the model is folded with two
   batches (:data:`_PROBES`), and when the only constants that differ are the first
   entries of Reshape or Expand shapes applied to batch-first data (a flatten's
   ``[N, -1]``), they become ``0`` ("the input's") or ``1`` ("broadcast").  Otherwise the
   batch is fixed too, and the notes say so (a run with another batch is refused).
3. **folding** — ONNX's shape inference gives each tensor its shape; a ``Shape`` or
   ``Size`` of a tensor whose shape is known becomes a constant, and every node whose
   inputs are all constants is evaluated by ONNX's own reference implementation
   (``onnx.reference``), its outputs made initializers — weights written as
   ``ConstantOfShape`` fills, the ``Shape → Gather → Unsqueeze → Concat → Reshape`` of a
   flatten, a mask built from ``Equal``/``Where``/``Expand``/``Cast``.  Repeated until
   nothing more folds.  Random generators are not folded (they are refused later, by name).

Examples
--------
>>> import numpy as np
>>> from onnx import TensorProto, helper, numpy_helper
>>> nodes = [helper.make_node("Shape", ["x"], ["s"]),
...          helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
...          helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
...          helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
...          helper.make_node("Reshape", ["x", "shape"], ["y"])]
>>> graph = helper.make_graph(nodes, "flatten",
...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3])],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
...     [numpy_helper.from_array(np.array(0), "zero"), numpy_helper.from_array(np.array([0]), "axes"),
...      numpy_helper.from_array(np.array([-1]), "minus1")])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
>>> prepared, notes = prepare(model, {"x": (4, 2, 3)})
>>> [n.op_type for n in prepared.graph.node], notes
(['Reshape'], [])
>>> numpy_helper.to_array(prepared.graph.initializer[0]).tolist()  # the batch stays free
[0, -1]
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ModelError

__all__ = ["TARGET_OPSET", "OLDEST_OPSET", "node_names", "prepare"]

#: The opset the converters are written for: older models are upgraded to it.
TARGET_OPSET = 13
#: The IR version of opset 13's release: an upgraded model gets it at least.
_TARGET_IR = 7
#: The oldest opset ``onnx.version_converter`` upgrades from here.
OLDEST_OPSET = 7
#: Operators never folded, whatever their inputs: random generators (their results are
#: not functions of them), and the quantizers, which the QDQ import reads (``onnx_qdq``).
_NOT_FOLDED = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                         "Bernoulli", "Multinomial", "QuantizeLinear", "DequantizeLinear"})
_ROUNDS = 8
#: Operators folded by openvta's own kernel, not ``onnx.reference``'s, which is wrong for
#: them: GatherElements from 64 entries on its axis (a BERT's ``token_type_ids`` buffer
#: gathered by position; docs/DECISIONS.md).
_FOLDED_BY_OPENVTA = frozenset({"GatherElements"})
#: The batches a model with shape computations is folded with, to find what the batch reaches.
_PROBES = (11, 13)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _opset(proto: Any) -> int:
    versions = [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise ModelError("model must import the default ONNX opset, not none")
    return int(versions[0])


def _upgrade(proto: Any, notes: list[str]) -> Any:
    from onnx import version_converter

    version = _opset(proto)
    if version >= TARGET_OPSET:
        return proto
    changed = _changed_ops(proto, version)
    why = None
    if version < OLDEST_OPSET:
        why = f"onnx.version_converter upgrades from opset {OLDEST_OPSET} on"
    elif changed:
        why = f"{', '.join(changed)} changed meaning by opset {TARGET_OPSET} and openvta has no kernel for it"
    else:
        try:
            upgraded = version_converter.convert_version(proto, TARGET_OPSET)
        except Exception as exc:  # the converter's C++ errors arrive as RuntimeError and others
            why = f"onnx.version_converter fails: {_one_line(exc)}"
    if why is not None:  # ONNX's reference kernels run every node at the model's own opset
        notes.append(f"opset {version} kept ({why}): every node runs on ONNX's reference kernels, on the CPU")
        return proto
    notes.append(f"opset {version} upgraded to {TARGET_OPSET} with onnx.version_converter")
    upgraded.ir_version = max(upgraded.ir_version, _TARGET_IR)  # (initializers need not be inputs)
    return upgraded


def _changed_ops(proto: Any, version: int) -> list[str]:
    """The operators of ``proto`` that openvta has no kernel for and whose definition at
    :data:`TARGET_OPSET` is another than at ``version``: ``onnx.version_converter`` would have
    to rewrite them (and gets some wrong: Scan 8's batch axis)."""
    import onnx

    from ..registry import ONNX_OPS

    own = {op.value for op in ONNX_OPS} | {"Constant", "Shape", "Size", "Sum"}  # (Sum: as Adds, _canonical)
    changed = []
    for op_type in dict.fromkeys(n.op_type for n in proto.graph.node if n.domain in ("", "ai.onnx")):
        if op_type in own:
            continue
        try:
            old = onnx.defs.get_schema(op_type, version, "")
            new = onnx.defs.get_schema(op_type, TARGET_OPSET, "")
        except onnx.defs.SchemaError:
            continue  # not an operator of that opset: the frontend names it
        if old.since_version != new.since_version and _signature(old) != _signature(new) \
                and not (old.since_version >= _CONVERTED_FROM.get(op_type, TARGET_OPSET + 1)
                         and not (op_type == "Resize" and _tf_resize(proto))):
            changed.append(op_type)
    return changed


#: Operators whose new signature by opset 13 the converter's adapters rewrite to the same
#: meaning, from the version given: Split 11's attribute ``split`` becomes its input, Resize
#: 11's ``roi`` optional (but for ``tf_half_pixel_for_nn``, which 13 removed).
_CONVERTED_FROM = {"Split": 11, "Resize": 11}


def _tf_resize(proto: Any) -> bool:
    """Whether a Resize uses the mode opset 13 removed (``tf_half_pixel_for_nn``): Resize 11's
    other forms are Resize 13's, its ``roi`` made optional (what the converter's adapter does)."""
    return any(n.op_type == "Resize" and any(a.name == "coordinate_transformation_mode"
                                             and a.s == b"tf_half_pixel_for_nn" for a in n.attribute)
               for n in proto.graph.node)


def _signature(schema: Any) -> tuple[object, ...]:
    """What a new version of an operator can change but its types: its inputs (names and
    optionality), outputs and attributes (names and defaults).  Two versions with one
    signature differ in the types they take (Slice 11 and 13: bfloat16), which the version
    converter's adapters bump without rewriting the node."""
    return (tuple((i.name, i.option) for i in schema.inputs), tuple(o.name for o in schema.outputs),
            tuple(sorted((name, str(a.default_value)) for name, a in schema.attributes.items())))


def _initializer_names(proto: Any) -> set[str]:
    return {init.name for init in proto.graph.initializer}


def _fix_inputs(proto: Any, shapes: Mapping[str, Sequence[int]], batch: bool) -> list[str]:
    """Fix the unknown dimensions of the graph inputs from ``shapes`` (dimension 0 too when
    ``batch``); the inputs named in the notes."""
    fixed: list[str] = []
    constants = _initializer_names(proto)
    for value in proto.graph.input:
        if value.name in constants or value.name not in shapes:
            continue
        given = tuple(int(d) for d in shapes[value.name])
        dims = value.type.tensor_type.shape.dim
        if len(dims) != len(given):
            raise ModelError(f"input {value.name!r} has {len(dims)} dimensions, but its shape is given as "
                             f"{given} ({len(given)} dimensions)")
        for axis, (dim, size) in enumerate(zip(dims, given)):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                if dim.dim_value != size:
                    model = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0
                                  else (d.dim_param or "?") for d in dims)
                    raise ModelError(f"input {value.name!r} has shape {model} in the model, but its shape "
                                     f"is given as {given}")
                continue
            if axis == 0 and not batch:
                continue
            dim.Clear()
            dim.dim_value = size
            if axis == 0:
                fixed.append(f"input {value.name}: the batch fixed at {size} (a shape computation reads it)")
    return fixed


def _shapes(proto: Any) -> dict[str, tuple[int, ...] | None]:
    """Every tensor's static shape by ONNX's shape inference (None where any dimension is
    unknown)."""
    from onnx import shape_inference

    try:
        inferred = shape_inference.infer_shapes(_without_weights(proto), strict_mode=False)
    except Exception:  # an op shape inference does not know: its shapes stay unknown
        inferred = _without_weights(proto)
    shapes: dict[str, tuple[int, ...] | None] = {}
    graph = inferred.graph
    for value in [*graph.input, *graph.value_info, *graph.output]:
        t = value.type.tensor_type
        if not t.HasField("shape"):
            continue
        known = all(d.HasField("dim_value") and d.dim_value > 0 for d in t.shape.dim)
        shapes[value.name] = tuple(int(d.dim_value) for d in t.shape.dim) if known else None
    for init in proto.graph.initializer:
        shapes[init.name] = tuple(int(d) for d in init.dims)
    return shapes


def _without_weights(proto: Any) -> Any:
    """``proto`` with its large initializers as graph inputs of the same type and shape:
    what shape inference needs, without copying the weights through protobuf.  The
    exporter's own ``value_info`` is left out: shapes are inferred from the inputs' alone
    (PaddlePaddle's exporter writes ``-1`` for the batch there, which contradicts a batch
    given and stops ONNX's inference of every tensor after the first)."""
    from onnx import helper

    graph = proto.graph
    keep = [init for init in graph.initializer if _elements(init) <= 64]
    listed = {v.name for v in graph.input}
    heavy = [helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
             for init in graph.initializer if _elements(init) > 64 and init.name not in listed]
    return helper.make_model(
        helper.make_graph(graph.node, graph.name, [*graph.input, *heavy], graph.output, keep),
        opset_imports=proto.opset_import, ir_version=proto.ir_version)


def _elements(init: Any) -> int:
    return int(np.prod(init.dims)) if len(init.dims) else 1


def _evaluate(node: Any, values: dict[str, np.ndarray], opset: Any) -> list[np.ndarray]:
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    inputs = [name for name in node.input if name]
    if node.op_type in _FOLDED_BY_OPENVTA and node.domain in ("", "ai.onnx"):
        from ..ir import Attrs, Op
        from ..registry import op_def

        kernel = op_def(Op(node.op_type)).float_ref
        assert kernel is not None  # (every op of _FOLDED_BY_OPENVTA has one)
        attrs = Attrs({k: tuple(v) if isinstance(v, list) else v for k, v in _attrs(node).items()})
        return [np.asarray(kernel([values[n] for n in inputs], attrs))]
    graph = helper.make_graph(
        [node], "fold",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(values[n].dtype), values[n].shape)
         for n in dict.fromkeys(inputs)],
        [helper.make_tensor_value_info(o, 0, None) for o in node.output if o])
    model = helper.make_model(graph, opset_imports=opset)
    outputs = ReferenceEvaluator(model).run(None, {n: values[n] for n in dict.fromkeys(inputs)})
    return [np.asarray(o) for o in outputs]


def _fold(proto: Any, names: list[str]) -> tuple[Any, int]:
    """One round: the constants folded into initializers; the count of nodes folded."""
    from onnx import helper, numpy_helper

    graph = proto.graph
    values = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    shapes = _shapes(proto)
    outputs = {v.name for v in graph.output}
    kept, folded = [], 0
    new: dict[str, np.ndarray] = {}
    for node, name in zip(graph.node, names):
        results: list[np.ndarray] | None = None
        if node.domain in ("", "ai.onnx") and not (set(node.output) & outputs):
            if node.op_type == "Constant":
                results = _evaluate(node, values, proto.opset_import)
            elif node.op_type in ("Shape", "Size") and shapes.get(node.input[0]) is not None:
                shape = np.array(shapes[node.input[0]], np.int64)
                if node.op_type == "Size":
                    results = [np.array(np.prod(shape), np.int64)]
                else:
                    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                    results = [shape[slice(attrs.get("start", 0), attrs.get("end"))]]
            elif node.op_type not in _NOT_FOLDED and any(node.input) \
                    and all(i in values for i in node.input if i):
                try:
                    results = _evaluate(node, values, proto.opset_import)
                except Exception as exc:
                    raise ModelError(f"node {name!r} ({node.op_type}) on constants could not be folded by "
                                     f"onnx.reference: {_one_line(exc)}") from None
        if results is None:
            kept.append(node)
            continue
        folded += 1
        for out, array in zip(node.output, results):
            if out:
                values[out] = new[out] = array
    if not folded:
        return proto, 0
    used = {i for n in kept for i in n.input} | outputs
    initializers = [init for init in graph.initializer if init.name in used]
    initializers += [numpy_helper.from_array(np.asarray(a, order="C"), n) for n, a in new.items() if n in used]
    inputs = [v for v in graph.input if v.name in used or v.name not in values]
    return _with(proto, kept, initializers, inputs), folded


def node_names(proto: Any) -> list[str]:
    """Each node's name, or ``<op_type>_<index>`` for a node without one, made unique."""
    names: list[str] = []
    for index, node in enumerate(proto.graph.node):
        name = node.name or f"{node.op_type}_{index}"
        names.append(name if name not in names else f"{name}_{index}")
    return names


def prepare(proto: Any, input_shapes: Mapping[str, Sequence[int]] | None = None,
            fold: bool = True) -> tuple[Any, list[str]]:
    """The model upgraded, its input shapes fixed and its constants folded (module
    docstring; ``fold=False``: nothing evaluated, only the canonical forms), and notes on
    what was done.

    Raises
    ------
    ModelError
        for an opset older than 7, a failed conversion, an input shape that contradicts the
        model's, or a node on constants that ``onnx.reference`` cannot evaluate.
    """
    notes: list[str] = []
    proto = _inline_functions(proto, notes)
    proto = _upgrade(proto, notes)
    shapes = {name: tuple(int(d) for d in shape) for name, shape in (input_shapes or {}).items()}
    proto = _constants_not_inputs(proto)
    work = _copy(proto)
    _fix_inputs(work, shapes, batch=False)
    if not fold:
        return _canonical(work), notes
    if not any(n.op_type in ("Shape", "Size") for n in work.graph.node):
        return _fold_all(work), notes
    free = _batch_free(work)
    if free is not None:
        return free, notes
    if shapes:
        work = _copy(proto)
        notes += _fix_inputs(work, shapes, batch=True)
    return _fold_all(work), notes


def _inline_functions(proto: Any, notes: list[str]) -> Any:
    """``proto`` with its model-local functions (what the dynamo exporter's onnxscript leaves
    when it does not inline, a ``pkg.…`` domain per library) replaced by their bodies, by
    ``onnx.inliner``; the notes say which."""
    if not len(proto.functions):
        return proto
    from onnx import inliner

    names = sorted({f"{f.domain}.{f.name}" for f in proto.functions})
    try:
        inlined = inliner.inline_local_functions(proto)
    except Exception as exc:  # the inliner's C++ errors
        raise ModelError(f"the model's local functions ({', '.join(names)}) cannot be inlined: "
                         f"{_one_line(exc)}") from None
    notes.append(f"{len(names)} local function{'s' * (len(names) > 1)} inlined ({', '.join(names)})")
    return inlined


def _constants_not_inputs(proto: Any) -> Any:
    """``proto`` without the graph inputs that are initializers (IR 3 lists every weight as
    an input; the frontend takes them as constants either way)."""
    constants = _initializer_names(proto)
    if not any(v.name in constants for v in proto.graph.input):
        return proto
    return _with(proto, inputs=[v for v in proto.graph.input if v.name not in constants])


def _copy(proto: Any) -> Any:
    copy = type(proto)()
    copy.CopyFrom(proto)
    return copy


def _with(proto: Any, nodes: list | None = None, initializers: list | None = None,
          inputs: list | None = None) -> Any:
    """A copy of ``proto`` whose graph holds the given nodes, initializers and inputs (the
    others as they were)."""
    result = _copy(proto)
    for field, items in (("node", nodes), ("initializer", initializers), ("input", inputs)):
        if items is not None:
            repeated = getattr(result.graph, field)
            del repeated[:]
            repeated.extend(items)
    return result


def _with_batch(proto: Any, batch: int) -> Any:
    """``proto`` with every symbolic first dimension of its inputs set to ``batch``."""
    work = _copy(proto)
    constants = _initializer_names(work)
    for value in work.graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.name not in constants and dims and not (dims[0].HasField("dim_value") and dims[0].dim_value > 0):
            dims[0].Clear()
            dims[0].dim_value = batch
    return work


def _batch_free(proto: Any) -> Any | None:
    """The model folded with its batch left symbolic, or None if a folded constant depends
    on the batch other than as the first entry of a Reshape's or an Expand's shape whose
    data's first dimension is the batch (which becomes 0, "copy the input's", or 1,
    "broadcast").

    The model is folded twice, with batches :data:`_PROBES`; the constants that differ
    between the two are what the batch reaches."""
    from onnx import numpy_helper

    folded = [_fold_all(_with_batch(proto, b)) for b in _PROBES]
    nodes = [[(n.op_type, tuple(n.input), tuple(n.output)) for n in f.graph.node] for f in folded]
    if nodes[0] != nodes[1]:
        return None
    arrays = [{init.name: numpy_helper.to_array(init) for init in f.graph.initializer} for f in folded]
    if arrays[0].keys() != arrays[1].keys():
        return None
    changed = {name for name, a in arrays[0].items()
               if a.shape != arrays[1][name].shape or not np.array_equal(a, arrays[1][name])}
    if not changed:
        return _restore_batch(folded[0], proto, {})
    shapes = _shapes(folded[0])
    patched: dict[str, np.ndarray] = {}
    zero_means_copy: set[str] = set()  # Reshapes whose allowzero=1 a patched 0 would change
    uses = {name: [(n, k) for n in folded[0].graph.node for k, i in enumerate(n.input) if i == name]
            for name in changed}
    for name in changed:
        a, b = arrays[0][name], arrays[1][name]
        if a.ndim != 1 or a.shape != b.shape or not np.array_equal(a[1:], b[1:]) \
                or (int(a[0]), int(b[0])) != _PROBES:
            return None
        ops = set()
        for node, k in uses[name]:
            data = shapes.get(node.input[0])
            if k != 1 or node.op_type not in ("Reshape", "Expand") or not data or data[0] != _PROBES[0]:
                return None
            if any(attr.name == "allowzero" and attr.i for attr in node.attribute):
                if 0 in a:  # (a real 0 entry: allowzero=1 means an empty dimension there)
                    return None
                zero_means_copy.add(node.output[0])  # without a 0 in its shape, the same as allowzero=0
            ops.add(node.op_type)
        if len(ops) != 1:
            return None
        value = a.copy()
        value[0] = 0 if ops == {"Reshape"} else 1
        patched[name] = value
    return _restore_batch(folded[0], proto, patched, zero_means_copy)


def _restore_batch(folded: Any, original: Any, patched: Mapping[str, np.ndarray],
                   zero_means_copy: Collection[str] = ()) -> Any:
    """``folded`` with the inputs' first dimensions as in ``original`` and the ``patched``
    constants in place of the batch's; the Reshapes making ``zero_means_copy`` lose their
    ``allowzero=1`` (their shapes hold no other 0: the patched one means "the input's")."""
    from onnx import numpy_helper

    result = _copy(folded)
    for node in result.graph.node:
        if node.output and node.output[0] in zero_means_copy:
            kept = [attr for attr in node.attribute if attr.name != "allowzero"]
            del node.attribute[:]
            node.attribute.extend(kept)
    dims = {v.name: v.type.tensor_type.shape.dim for v in original.graph.input}
    for value in result.graph.input:
        if value.name in dims and len(dims[value.name]):
            value.type.tensor_type.shape.dim[0].CopyFrom(dims[value.name][0])
    for init in result.graph.initializer:
        if init.name in patched:
            init.CopyFrom(numpy_helper.from_array(patched[init.name], init.name))
    return result


def _fold_all(proto: Any) -> Any:
    for _ in range(_ROUNDS):
        proto, folded = _fold(proto, node_names(proto))
        if not folded:
            break
    return _canonical(proto)


def _canonical(proto: Any) -> Any:
    """Nodes written as the converters read them: ``Sum`` as a chain of ``Add`` (one input:
    ``Identity``), a ``Dropout`` without a training mode as the ``Identity`` it is at
    inference (its mask output, if any, read by nothing), and a ``LayerNormalization`` whose
    ``Mean`` or ``InvStdDev`` is read as the ops of its ONNX function (one output each)."""
    from onnx import helper

    from onnx import numpy_helper

    graph = proto.graph
    read = {i for n in graph.node for i in n.input} | {v.name for v in graph.output}
    nodes = []
    changed = False
    shapes: dict[str, tuple[int, ...] | None] | None = None
    weights = {init.name: init for init in graph.initializer}
    added: dict[str, np.ndarray] = {}  # the rewrites' new initializers
    for node, name in zip(graph.node, node_names(proto)):
        default = node.domain in ("", "ai.onnx")
        if default and node.op_type == "Sum" and len(node.input) != 2:
            changed = True
            inputs = list(node.input)
            if len(inputs) == 1:
                nodes.append(helper.make_node("Identity", inputs, list(node.output), name=name))
                continue
            acc = inputs[0]
            for k, value in enumerate(inputs[1:], 1):
                out = node.output[0] if k == len(inputs) - 1 else f"{name}.sum{k}"
                nodes.append(helper.make_node("Add", [acc, value], [out], name=name if out == node.output[0]
                                              else f"{name}.{k}"))
                acc = out
            continue
        if default and node.op_type == "Sum":
            changed = True
            nodes.append(helper.make_node("Add", list(node.input), list(node.output), name=name))
            continue
        if default and node.op_type == "Dropout" and (len(node.output) == 1 or node.output[1] not in read) \
                and len(node.input) < 3:  # (no training_mode: inference, where it is the identity)
            changed = True
            nodes.append(helper.make_node("Identity", [node.input[0]], [node.output[0]], name=name))
            continue
        if default and node.op_type == "LayerNormalization" and any(o in read for o in node.output[1:] if o):
            changed = True
            nodes += _layer_norm_function(proto, node, name)
            continue
        if default and node.op_type in _REWRITES:
            shapes = shapes if shapes is not None else _shapes(_with_batch(proto, 1))  # (they copy the batch)
            rewritten = _REWRITES[node.op_type](node, name, shapes, weights, added)
            if rewritten is not None:
                changed = True
                nodes += rewritten
                continue
        nodes.append(node)
    if not changed:
        return proto
    used = {i for n in nodes for i in n.input} | {v.name for v in graph.output}
    unused = {init.name for init in graph.initializer if init.name not in used}
    initializers = [init for init in graph.initializer if init.name not in unused]
    initializers += [numpy_helper.from_array(a, n) for n, a in added.items()]
    return _with(proto, nodes, initializers, [v for v in graph.input if v.name not in unused])


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _depth_to_space(name: str, source: str, out: str, channels: int, block: int, height: int, width: int,
                    added: dict[str, np.ndarray]) -> list:
    """``source`` ``(N, C·b·b, H, W)`` → ``out`` ``(N, C, H·b, W·b)``, channel ``c·b² + i·b + j``
    to pixel ``(h·b + i, w·b + j)`` (DepthToSpace's CRD order), as Reshape → Transpose →
    Reshape: moves of int8 codes in the integer graph."""
    from onnx import helper

    split, joined = f"{name}.split_shape", f"{name}.joined_shape"
    added[split] = np.array([0, channels, block, block, height, width], np.int64)  # (0: the batch, copied)
    added[joined] = np.array([0, channels, height * block, width * block], np.int64)
    return [helper.make_node("Reshape", [source, split], [f"{name}.blocks"], name=f"{name}.blocks"),
            helper.make_node("Transpose", [f"{name}.blocks"], [f"{name}.interleaved"], perm=[0, 1, 4, 2, 5, 3],
                             name=f"{name}.interleaved"),
            helper.make_node("Reshape", [f"{name}.interleaved", joined], [out], name=name)]


def _conv_transpose(node: Any, name: str, shapes: Mapping[str, tuple[int, ...] | None], weights: Mapping[str, Any],
                    added: dict[str, np.ndarray]) -> list | None:
    """A 2-D ConvTranspose (one group, constant weights) as the sub-pixel convolution it is:
    output pixel ``o' = q·s + r`` of the unpadded transpose sums ``x[q − m]·w[r + m·s]`` over
    ``m < M = ⌈k/s⌉``, so one Conv of ``M×M`` taps (padded ``M − 1``) to ``C_out·s·s``
    channels computes every phase ``r`` at once, a depth to space interleaves them, and a
    Slice crops the ConvTranspose's pads.  The accelerator's conv2d then computes its
    products without zero insertion (exactly them when ``s`` divides ``k``: DB's 2×2 stride
    2 is a 1×1 Conv, no crop).  None for a form it does not cover (groups, dilation, an
    ``output_shape``, ``auto_pad``, output padding beyond the end pads): ONNX's reference
    kernel runs it."""
    from onnx import helper, numpy_helper

    attrs = _attrs(node)
    data = shapes.get(node.input[0])
    weight = weights.get(node.input[1]) if len(node.input) > 1 else None
    bias = weights.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if weight is None or data is None or len(data) != 4 or len(weight.dims) != 4 \
            or (len(node.input) > 2 and node.input[2] and bias is None):
        return None
    kernel = tuple(int(d) for d in weight.dims[2:])
    strides = tuple(int(v) for v in attrs.get("strides", (1, 1)))
    pads = tuple(int(v) for v in attrs.get("pads", (0, 0, 0, 0)))
    extra = tuple(int(v) for v in attrs.get("output_padding", (0, 0)))
    if attrs.get("group", 1) != 1 or kernel[0] != kernel[1] or strides[0] != strides[1] or strides[0] < 2 \
            or any(d != 1 for d in attrs.get("dilations", (1, 1))) or "output_shape" in attrs \
            or attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET") or len(pads) != 4 \
            or any(e > pads[2 + axis] for axis, e in enumerate(extra)):
        return None
    k, s, (c_in, c_out) = kernel[0], strides[0], tuple(int(d) for d in weight.dims[:2])
    taps = -(-k // s)
    w = numpy_helper.to_array(weight)  # (C_in, C_out, k, k)
    full = np.zeros((c_in, c_out, taps * s, taps * s), w.dtype)
    full[:, :, :k, :k] = w
    # V[(co, rh, rw), ci, jh, jw] = w[ci, co, rh + (M−1−jh)·s, rw + (M−1−jw)·s]
    phases = full.reshape(c_in, c_out, taps, s, taps, s)[:, :, ::-1, :, ::-1, :]
    added[f"{name}.weight"] = np.ascontiguousarray(phases.transpose(1, 3, 5, 0, 2, 4).reshape(
        c_out * s * s, c_in, taps, taps))
    inputs = [node.input[0], f"{name}.weight"]
    if bias is not None:
        added[f"{name}.bias"] = np.repeat(numpy_helper.to_array(bias), s * s).astype(np.float32)
        inputs.append(f"{name}.bias")
    rows, cols = data[2] + taps - 1, data[3] + taps - 1
    conv = helper.make_node("Conv", inputs, [f"{name}.taps"], kernel_shape=[taps, taps], pads=[taps - 1] * 4,
                            name=f"{name}.taps")
    out_rows = (data[2] - 1) * s + k - pads[0] - pads[2] + extra[0]
    out_cols = (data[3] - 1) * s + k - pads[1] - pads[3] + extra[1]
    if (pads[0], pads[1], out_rows, out_cols) == (0, 0, rows * s, cols * s):
        return [conv, *_depth_to_space(name, f"{name}.taps", node.output[0], c_out, s, rows, cols, added)]
    added[f"{name}.crop_starts"] = np.array([pads[0], pads[1]], np.int64)
    added[f"{name}.crop_ends"] = np.array([pads[0] + out_rows, pads[1] + out_cols], np.int64)
    added[f"{name}.crop_axes"] = np.array([2, 3], np.int64)
    crop = helper.make_node("Slice", [f"{name}.full", f"{name}.crop_starts", f"{name}.crop_ends",
                                      f"{name}.crop_axes"], [node.output[0]], name=f"{name}.crop")
    return [conv, *_depth_to_space(name, f"{name}.taps", f"{name}.full", c_out, s, rows, cols, added), crop]


def _resize(node: Any, name: str, shapes: Mapping[str, tuple[int, ...] | None], weights: Mapping[str, Any],
            added: dict[str, np.ndarray]) -> list | None:
    """A nearest-neighbour Resize of NCHW data by a whole factor in height and width (FPN's and
    DB's upsampling) as the repetition it is: Reshape → Expand → Reshape, moves of int8 codes
    in the integer graph.  Only the coordinate modes that make it a repetition: ``asymmetric``
    with ``floor``, ``half_pixel``/``pytorch_half_pixel`` with a rounding ``nearest_mode``.
    Any other Resize: None (ONNX's reference kernel runs it)."""
    from onnx import helper

    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in _attrs(node).items()}
    data = shapes.get(node.input[0])
    out = shapes.get(node.output[0])
    mode, coords = attrs.get("mode", "nearest"), attrs.get("coordinate_transformation_mode", "half_pixel")
    rounding = attrs.get("nearest_mode", "round_prefer_floor")
    repeats = (coords == "asymmetric" and rounding == "floor") or (
        coords in ("half_pixel", "pytorch_half_pixel") and rounding in ("round_prefer_floor", "round_prefer_ceil"))
    if mode != "nearest" or not repeats or data is None or out is None or len(data) != 4 \
            or data[:2] != out[:2] or attrs.get("antialias", 0) or "axes" in attrs \
            or out[2] % data[2] or out[3] % data[3]:
        return None
    fh, fw = out[2] // data[2], out[3] // data[3]
    n, c, h, w = data
    grid, target, joined = f"{name}.grid", f"{name}.repeated_shape", f"{name}.joined_shape"
    added[grid] = np.array([0, c, h, 1, w, 1], np.int64)
    added[target] = np.array([1, 1, 1, fh, 1, fw], np.int64)
    added[joined] = np.array([0, c, h * fh, w * fw], np.int64)
    return [helper.make_node("Reshape", [node.input[0], grid], [f"{name}.pixels"], name=f"{name}.pixels"),
            helper.make_node("Expand", [f"{name}.pixels", target], [f"{name}.repeated"], name=f"{name}.repeated"),
            helper.make_node("Reshape", [f"{name}.repeated", joined], [node.output[0]], name=name)]


def _split(node: Any, name: str, shapes: Mapping[str, tuple[int, ...] | None], weights: Mapping[str, Any],
           added: dict[str, np.ndarray]) -> list | None:
    """A Split as one Slice per output (openvta's graph has one output per node; a Slice moves
    int8 codes); the sizes from its constant ``split`` input or attribute, or ``num_outputs``
    (the last part the smaller), or equal parts.  None where the sizes are not known."""
    from onnx import helper, numpy_helper

    attrs = _attrs(node)
    data = shapes.get(node.input[0])
    if data is None:
        return None
    axis = int(attrs.get("axis", 0)) % len(data)
    outputs = list(node.output)
    if len(node.input) > 1 and node.input[1]:
        if node.input[1] not in weights:
            return None
        sizes = [int(v) for v in numpy_helper.to_array(weights[node.input[1]]).reshape(-1)]
    elif "split" in attrs:
        sizes = [int(v) for v in attrs["split"]]
    else:
        parts = int(attrs.get("num_outputs", len(outputs)))
        step = -(-data[axis] // parts) if "num_outputs" in attrs else data[axis] // parts
        sizes = [min(step, data[axis] - k * step) for k in range(parts)]
    if len(sizes) != len(outputs) or sum(sizes) != data[axis] or min(sizes) < 1:
        return None  # (ONNX's own checks name it when the reference kernel runs it)
    nodes, start = [], 0
    for index, (out, size) in enumerate(zip(outputs, sizes)):
        bounds = f"{name}.part{index}"
        added[f"{bounds}.starts"], added[f"{bounds}.ends"] = np.array([start], np.int64), np.array([start + size],
                                                                                                    np.int64)
        added[f"{bounds}.axes"] = np.array([axis], np.int64)
        start += size
        if out:
            nodes.append(helper.make_node("Slice", [node.input[0], f"{bounds}.starts", f"{bounds}.ends",
                                                    f"{bounds}.axes"], [out], name=bounds))
    return nodes


#: Rewrites into what openvta's kernels compute: upsampling into the accelerator's conv2d
#: and int8 moves, a Split into Slices.
_REWRITES = {"ConvTranspose": _conv_transpose, "Resize": _resize, "Split": _split}


def _layer_norm_function(proto: Any, node: Any, name: str) -> list:
    """LayerNormalization as its ONNX function's ops, so that ``Mean`` (the mean over the
    axes from ``axis`` on, kept) and ``InvStdDev`` (``1 / sqrt(var + epsilon)``) are outputs
    of their own nodes."""
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    axis = int(attrs.get("axis", -1))
    if axis < 0:
        axes = list(range(axis, 0))
    else:
        shape = _shapes(proto).get(node.input[0])
        if shape is None:
            raise ModelError(f"node {name!r} (LayerNormalization) reads Mean or InvStdDev of an input whose "
                             "rank is not known")
        axes = list(range(axis, len(shape)))
    epsilon = float(attrs.get("epsilon", 1e-5))
    out = list(node.output) + [""] * (3 - len(node.output))
    mean, inv = out[1] or f"{name}.mean", out[2] or f"{name}.inv_std_dev"
    x, scale = node.input[0], node.input[1]
    t = {k: f"{name}.{k}" for k in ("d", "dd", "var", "eps", "std", "one", "norm", "scaled", "axes")}
    opset = _opset(proto)

    def reduce_mean(data: str, output: str) -> Any:
        if opset >= 18:  # the axes an input
            return helper.make_node("ReduceMean", [data, t["axes"]], [output], keepdims=1, name=output)
        return helper.make_node("ReduceMean", [data], [output], axes=axes, keepdims=1, name=output)

    nodes = [helper.make_node("Constant", [], [t["axes"]], value=helper.make_tensor("axes", 7, [len(axes)], axes)),
             helper.make_node("Constant", [], [t["eps"]], value=helper.make_tensor("eps", 1, [], [epsilon])),
             helper.make_node("Constant", [], [t["one"]], value=helper.make_tensor("one", 1, [], [1.0])),
             reduce_mean(x, mean),
             helper.make_node("Sub", [x, mean], [t["d"]], name=t["d"]),
             helper.make_node("Mul", [t["d"], t["d"]], [t["dd"]], name=t["dd"]),
             reduce_mean(t["dd"], t["var"]),
             helper.make_node("Add", [t["var"], t["eps"]], [f"{name}.ve"], name=f"{name}.ve"),
             helper.make_node("Sqrt", [f"{name}.ve"], [t["std"]], name=t["std"]),
             helper.make_node("Div", [t["one"], t["std"]], [inv], name=inv),
             helper.make_node("Mul", [t["d"], inv], [t["norm"]], name=t["norm"])]
    y = out[0] if len(node.input) < 3 or not node.input[2] else t["scaled"]
    nodes.append(helper.make_node("Mul", [t["norm"], scale], [y], name=name))
    if y != out[0]:
        nodes.append(helper.make_node("Add", [y, node.input[2]], [out[0]], name=f"{name}.bias"))
    return nodes

"""Graphs as plain data: a JSON header and numpy arrays, for the ``.ovta`` model file.

The file is an npz archive (read with ``allow_pickle=False``: opening a model someone
sent you never runs code) holding

- ``format``: the string ``openvta-model/2`` (``openvta-model/1``, written before the graph
  kept its kernels, still loads: its kernels are matched again);
- ``header``: JSON — ``{"config": {...}, "mode": "fixed", "graphs": {"float": G, "int": G}}``
  where each graph ``G`` lists its inputs, outputs, nodes (op, inputs, outputs,
  attributes, placement, group), value types, memory plan and accelerator regions (kernels,
  tensors with layouts, roles and offsets, arena sizes, each kernel's first instruction),
  and each accelerator group's kernel (operator, parameters, epilogue, operand binding:
  ``Graph.kernels``), and names the array entry of each constant, program and channel vector;
- one array entry per channel vector of a kernel, ``<graph>.k<group>.v<index>``;
- one array entry per constant, ``<graph>.c<index>``;
- one entry per accelerator region's program, ``<graph>.r<index>.program``: the program
  file's own bytes (an npz, ``openvta.runtime.program_bytes``) as a uint8 array, read back
  with ``Program.load`` and its checks — built once, at compile time, and stored rather
  than rebuilt at load: loading needs no compiler work, and a model runs exactly the
  program it was compiled to.  ``load_model`` checks each program against its region
  (``regions.check_program``).

Anything else — not an npz, another format string, malformed JSON, a missing array, a
graph that does not verify — is a one-line :class:`ModelError`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, BinaryIO

import numpy as np

from openvta.runtime import Program, ProgramError
from openvta.runtime.npz import read_npz
from openvta.runtime.program import program_bytes

from openvta.compiler import Epilogue, operator_spec

from .errors import GraphError, ModelError
from .ir import (Attrs, AttrValue, Device, DType, Graph, Node, Op, Placement, Precision, QuantParams,
                 RequantMode, TensorType)
from .kernel import KernelMatch, PlanSource
from .regions import MemoryPlan, Region, RegionKernel, RegionTensor, Role
from .verify import verify_graph

__all__ = ["MODEL_FORMAT", "READ_FORMATS", "graph_to_json", "graph_from_json", "write_archive", "read_archive"]

MODEL_FORMAT = "openvta-model/2"
#: The formats this version reads: format 1 has no kernels (they are matched again on load).
READ_FORMATS = ("openvta-model/1", MODEL_FORMAT)
_ENUMS: dict[str, type[DType] | type[RequantMode]] = {"dtype": DType, "requant_mode": RequantMode}


def _attr_json(value: AttrValue) -> object:
    if isinstance(value, DType):
        return {"dtype": value.value}
    if isinstance(value, RequantMode):
        return {"requant_mode": value.value}
    if isinstance(value, tuple):
        return list(value)
    return value


def _attr_value(value: object) -> object:
    if isinstance(value, dict) and len(value) == 1:
        ((kind, text),) = value.items()
        if kind in _ENUMS:
            return _ENUMS[kind](text)
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, (int, float, str)):
        return value
    raise ModelError(f"attribute value must be a number, string, list or enum, not {value!r}")


def _type_json(t: TensorType) -> dict[str, object]:
    quant = None if t.quant is None else {"scale": list(t.quant.scale),
                                          "zero_point": t.quant.zero_point, "axis": t.quant.axis}
    return {"shape": list(t.shape), "dtype": t.dtype.value, "quant": quant}


def _type_value(data: Mapping[str, Any]) -> TensorType:
    q = data["quant"]
    quant = None if q is None else QuantParams(tuple(q["scale"]), q["zero_point"], q["axis"])
    return TensorType(tuple(data["shape"]), DType(data["dtype"]), quant)


def _node_json(node: Node) -> dict[str, object]:
    placement = None if node.placement is None else {"device": node.placement.device.value,
                                                     "reason": node.placement.reason}
    return {"name": node.name, "op": node.op.value, "inputs": list(node.inputs),
            "outputs": list(node.outputs), "attrs": {k: _attr_json(v) for k, v in node.attrs.items()},
            "placement": placement, "group": node.group,
            "precision": None if node.precision is None else [node.precision.input_bits, node.precision.output_bits,
                                                              node.precision.passes]}


#: The attribute older files give each int8 pass of a wide product (now ``Node.precision``).
_WIDE_PASSES = "wide_passes"


def _node_value(data: Mapping[str, Any]) -> Node:
    p = data["placement"]
    placement = None if p is None else Placement(Device(p["device"]), str(p["reason"]))
    attrs = {k: _attr_value(v) for k, v in data["attrs"].items()}
    given = data.get("precision")
    precision = None if given is None else Precision(*(int(v) for v in given))
    passes = attrs.pop(_WIDE_PASSES, None)  # a file written before precision was a field
    if isinstance(passes, int) and precision is None:
        precision = Precision(16 if passes > 2 else 8, 16 if passes % 2 == 0 else 8, passes)
    return Node(data["name"], Op(data["op"]), tuple(data["inputs"]), tuple(data["outputs"]), Attrs(attrs),
                placement, data["group"], precision)


def _region_json(region: Region, key: str) -> dict[str, object]:
    kernels = [{"name": k.name, "group": k.group, "operator": k.operator, "bind": dict(k.bind),
                "epilogue": k.epilogue, "macs": k.macs} for k in region.kernels]
    tensors = [{"name": t.name, "layout": t.layout, "shape": list(t.shape), "dtype": t.dtype.value,
                "role": t.role.value, "value": t.value, "offset": t.offset} for t in region.tensors]
    return {"index": region.index, "kernels": kernels, "tensors": tensors,
            "arena_bytes": region.arena_bytes, "no_reuse_bytes": region.no_reuse_bytes,
            "kernel_starts": list(region.kernel_starts),
            "program": key if region.program is not None else None}


def _region_value(data: Mapping[str, Any], arrays: Mapping[str, np.ndarray], what: str) -> Region:
    kernels = tuple(RegionKernel(str(k["name"]), int(k["group"]), str(k["operator"]), dict(k["bind"]),
                                 str(k["epilogue"]), int(k["macs"])) for k in data["kernels"])
    tensors = tuple(RegionTensor(str(t["name"]), str(t["layout"]), tuple(t["shape"]), DType(t["dtype"]),
                                 Role(t["role"]), t["value"], t["offset"]) for t in data["tensors"])
    program = None
    if data["program"] is not None:
        blob = np.asarray(arrays[data["program"]])
        if blob.dtype != np.uint8 or blob.ndim != 1:
            raise ModelError(f"{what} region {data['index']} program must be a byte array, not "
                             f"{blob.dtype}{list(blob.shape)}")
        try:
            program = Program.load(io.BytesIO(blob.tobytes()))
        except ProgramError as exc:
            raise ModelError(f"{what} region {data['index']} program is malformed: "
                             f"{_first_line(exc)}") from None
    return Region(int(data["index"]), kernels, tensors, int(data["arena_bytes"]),
                  int(data["no_reuse_bytes"]), program, tuple(data["kernel_starts"]))


def _kernel_json(kernel: KernelMatch, prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, object]:
    vectors = {}
    for index, (name, array) in enumerate(kernel.vectors.items()):
        key = vectors[name] = f"{prefix}.k{kernel.group}.v{index}"
        arrays[key] = np.asarray(array)
    return {"group": kernel.group, "name": kernel.name, "operator": kernel.operator, "params": dict(kernel.params),
            "epilogue": kernel.epilogue.to_json(), "bind": dict(kernel.bind), "vectors": vectors,
            "macs": kernel.macs, "adds": list(kernel.adds), "anchor": kernel.anchor,
            "plan": None if kernel.plan is None else dict(kernel.plan),
            "tuning": None if kernel.tuning is None else kernel.tuning.value, "tuning_reason": kernel.tuning_reason}


def _kernel_value(data: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> KernelMatch:
    operator = operator_spec(str(data["operator"])).name
    params = {str(k): v for k, v in data["params"].items()}
    if not all(isinstance(v, int) for v in params.values()):
        raise ValueError(f"kernel {data['name']!r} parameters must be integers, not {params!r}")
    vectors = {str(name): np.asarray(arrays[key]) for name, key in data["vectors"].items()}
    return KernelMatch(int(data["group"]), str(data["name"]), operator, MappingProxyType(params),
                       Epilogue.from_json(data["epilogue"]), MappingProxyType(dict(data["bind"])),
                       MappingProxyType(vectors), int(data["macs"]), tuple(map(str, data["adds"])),
                       str(data["anchor"]), None if data["plan"] is None else MappingProxyType(dict(data["plan"])),
                       None if data["tuning"] is None else PlanSource(data["tuning"]), str(data["tuning_reason"]))


def graph_to_json(graph: Graph, prefix: str) -> tuple[dict[str, object], dict[str, np.ndarray]]:
    """The JSON description of ``graph`` and its constants as ``<prefix>.c<i>`` arrays."""
    keys = {name: f"{prefix}.c{index}" for index, name in enumerate(graph.constants)}
    memory = None
    if graph.memory is not None:
        m = graph.memory
        memory = {"offsets": dict(m.offsets), "sizes": dict(m.sizes), "arena_bytes": m.arena_bytes,
                  "no_reuse_bytes": m.no_reuse_bytes, "batch": m.batch, "alignment": m.alignment}
    data: dict[str, object] = {"name": graph.name, "inputs": list(graph.inputs),
                                 "outputs": list(graph.outputs),
                                 "nodes": [_node_json(n) for n in graph.nodes], "constants": keys,
                                 "types": {k: _type_json(t) for k, t in graph.types.items()},
                                 "memory": memory, "notes": list(graph.notes)}
    arrays = {keys[name]: np.asarray(array) for name, array in graph.constants.items()}
    regions = []
    for region in graph.regions:
        key = f"{prefix}.r{region.index}.program"
        regions.append(_region_json(region, key))
        if region.program is not None:
            arrays[key] = np.frombuffer(program_bytes(region.program), np.uint8)
    data["regions"] = regions
    data["kernels"] = [_kernel_json(kernel, prefix, arrays) for kernel in graph.kernels.values()]
    return data, arrays


def _typed(array: np.ndarray, t: TensorType | None) -> np.ndarray:
    if t is not None and array.dtype.kind == "V" and array.dtype.itemsize == t.dtype.itemsize:
        return array.view(t.dtype.numpy)
    return array


def graph_from_json(data: Mapping[str, Any], arrays: Mapping[str, np.ndarray], what: str) -> Graph:
    """The graph described by ``data`` (one-line :class:`ModelError` if it is malformed)."""
    try:
        types = {k: _type_value(t) for k, t in data["types"].items()}
        # (npz keeps the ml_dtypes types, bfloat16 and the float8s, as raw bytes: viewed back)
        constants = {name: _typed(arrays[key], types.get(name)) for name, key in data["constants"].items()}
        memory = None if data["memory"] is None else MemoryPlan(**data["memory"])
        regions = tuple(_region_value(r, arrays, what) for r in data["regions"])
        kernels = [_kernel_value(k, arrays) for k in data.get("kernels", ())]  # format 1 has none
        graph = Graph(str(data["name"]), tuple(data["inputs"]), tuple(data["outputs"]),
                      tuple(_node_value(n) for n in data["nodes"]), constants,
                      types, memory, regions,
                      {k.group: k for k in kernels}, tuple(str(n) for n in data.get("notes", ())))
    except KeyError as exc:
        raise ModelError(f"{what} lacks the entry {exc.args[0]!r}") from None
    except ModelError:
        raise
    except (TypeError, ValueError, AttributeError) as exc:
        raise ModelError(f"{what} is malformed: {_first_line(exc)}") from None
    try:
        return verify_graph(graph)
    except GraphError as exc:
        raise ModelError(f"{what} holds an invalid graph: {exc}") from None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def write_archive(path: str | BinaryIO, header: Mapping[str, object],
                  arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``format``, the JSON ``header`` and ``arrays`` to exactly ``path``."""
    entries = {"format": np.array(MODEL_FORMAT), "header": np.array(json.dumps(header)),
               **arrays}
    if isinstance(path, str):
        with open(path, "wb") as handle:
            np.savez(handle, allow_pickle=False, **entries)
    else:
        np.savez(path, allow_pickle=False, **entries)


def read_archive(path: str | BinaryIO) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The JSON header and the arrays of a model file (one-line :class:`ModelError` if not one)."""
    what = f"model file {path!r}" if isinstance(path, str) else "model file"
    entries = read_npz(path, "model", "an openvta model", ModelError)
    found = entries.pop("format", None)
    if found is None or found.ndim != 0 or str(found) not in READ_FORMATS:
        shown = None if found is None else str(found)
        raise ModelError(f"{what} format must be {' or '.join(map(repr, READ_FORMATS))}, not {shown!r}")
    try:
        header = json.loads(str(entries.pop("header")))
    except KeyError:
        raise ModelError(f"{what} lacks its header") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"{what} header is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ModelError(f"{what} header must be a JSON object, not {type(header).__name__}")
    return header, entries

"""The graph IR: frozen values, verify()'s invariants (each error tested), the text dump."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from openvta.graph.errors import GraphError
from openvta.graph.verify import verify_graph
from openvta.graph.ir import (Attrs, DType, Graph, Node, Op, Placement, Device, QuantParams,
                              RequantMode, TensorType)

F = DType.FLOAT32


def _graph(nodes, types=None, constants=None, inputs=("x",), outputs=("y",)) -> Graph:
    base = {"x": TensorType(("N", 4), F), "y": TensorType(("N", 4), F),
            "z": TensorType(("N", 4), F)}
    return Graph("g", inputs, outputs, tuple(nodes), constants or {}, {**base, **(types or {})})


def test_a_valid_graph_verifies_and_dumps() -> None:
    w = np.ones((4, 4), np.float32)
    g = _graph([Node("mm", Op.MATMUL, ("x", "w"), ("z",)), Node("r", Op.RELU, ("z",), ("y",))],
               {"w": TensorType((4, 4), F)}, {"w": w})
    assert verify_graph(g) is g
    assert str(g) == g.dump() == "\n".join([
        "graph g",
        "  const w: float32[4,4]",
        "  input x: float32[N,4]",
        "  z: float32[N,4] = MatMul(x, w)  # mm",
        "  y: float32[N,4] = Relu(z)  # r",
        "  output y",
    ])


def test_dump_shows_attributes_placement_group_and_quantization() -> None:
    q = TensorType(("N", 4), DType.INT8, QuantParams((0.5,)))
    node = Node("c", Op.CLIP, ("x",), ("y",), {"min": 0.0, "max": 6.0},
                Placement(Device.CPU, "forced"), 3)
    g = _graph([node], {"y": TensorType(("N", 4), F), "x": TensorType(("N", 4), F)})
    line = g.dump().splitlines()[2]
    assert line == "  y: float32[N,4] = Clip(x) max=6 min=0  # c · cpu (forced) · group 3"
    assert str(q) == "int8[N,4] {scale=0.5}"


@pytest.mark.parametrize(("nodes", "types", "message"), [
    ([Node("r", Op.RELU, ("x",), ("x",))], {},
     r"^graph 'g': value 'x' is defined twice \(again by node 'r' \(Relu\)\)$"),
    ([Node("r", Op.RELU, ("z",), ("y",)), Node("s", Op.RELU, ("x",), ("z",))], {},
     r"^node 'r' \(Relu\) reads 'z' before it is defined$"),
    ([Node("a", Op.ADD, ("x",), ("y",))], {},
     r"^node 'a' \(Add\) must have 2 inputs, not 1$"),
    ([Node("c", Op.CONV, ("x",), ("y",))], {},
     r"^node 'c' \(Conv\) must have 2 to 3 inputs, not 1$"),
    ([Node("r", Op.RELU, ("x",), ("y", "z"))], {},
     r"^node 'r' \(Relu\) must have one output, not 2$"),
    ([Node("r", Op.RELU, ("x",), ("z",))], {},
     r"^graph 'g': output 'y' is never defined$"),
    ([Node("r", Op.RELU, ("x",), ("y",))], {"y": TensorType(("N", 5), F)},
     r"^node 'r' \(Relu\) output 'y' is typed float32\[N,5\], but its inputs give float32\[N,4\]$"),
    ([Node("r", Op.RELU, ("x",), ("z",)), Node("r", Op.RELU, ("z",), ("y",))], {},
     r"^graph 'g': node name 'r' is used twice$"),
    ([Node("s", Op.SOFTMAX, ("x",), ("y",), {"axis": 2})], {},
     r"^node 's' \(Softmax\): Softmax axis must lie within the 2 dimensions, not 2$"),
])
def test_verify_names_the_broken_invariant(nodes, types, message) -> None:
    with pytest.raises(GraphError, match=message):
        verify_graph(_graph(nodes, types))


def test_verify_checks_types_exist_and_constants_match() -> None:
    g = Graph("g", ("x",), ("y",), (Node("r", Op.RELU, ("x",), ("y",)),), {},
              {"x": TensorType((4,), F)})
    with pytest.raises(GraphError, match=r"^graph 'g': output of node 'r' \(Relu\) 'y' has no type$"):
        verify_graph(g)
    with pytest.raises(GraphError, match=r"^graph 'g': input 'x' has no type$"):
        verify_graph(Graph("g", ("x",), ("x",), (), {}, {}))
    bad = _graph([Node("a", Op.ADD, ("x", "w"), ("y",))], {"w": TensorType((4,), DType.INT32)},
                 {"w": np.zeros(4, np.float32)})
    with pytest.raises(GraphError, match=r"^graph 'g': constant 'w' is typed int32\[4\] but "
                                         r"holds float32\[4\]$"):
        verify_graph(bad)
    with pytest.raises(GraphError, match=r"^graph 'g' must have at least one output$"):
        verify_graph(_graph([], outputs=()))


def test_values_are_frozen() -> None:
    node = Node("r", Op.RELU, ["x"], ["y"], {"k": [1, 2]})
    assert node.inputs == ("x",) and node.attrs["k"] == (1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.name = "s"
    g = _graph([Node("r", Op.RELU, ("x",), ("y",))], constants={"w": np.zeros(3, np.float32)},
               types={"w": TensorType((3,), F)})
    with pytest.raises(ValueError, match="read-only"):
        g.constants["w"][0] = 1.0
    with pytest.raises(TypeError):
        g.types["x"] = TensorType((1,), F)


def test_attrs_are_an_immutable_hashable_mapping() -> None:
    a = Attrs({"b": 2, "a": (1.0, 2.0), "mode": RequantMode.FIXED, "flag": True})
    assert list(a) == ["a", "b", "flag", "mode"] and a["flag"] == 1
    assert hash(a) == hash(Attrs(dict(a))) and a == Attrs(dict(a))
    assert a.replace(b=None, c="x") == Attrs({"a": (1.0, 2.0), "flag": 1, "mode": RequantMode.FIXED,
                                             "c": "x"})
    assert a.text() == "a=(1,2) b=2 flag=1 mode=fixed"
    with pytest.raises(TypeError, match=r"^attribute 'w' must be a number, a string, an enum or "
                                        r"a tuple of numbers, not \{\}$"):
        Attrs({"w": {}})


def test_parameter_errors() -> None:
    with pytest.raises(ValueError, match=r"^quantization scale must be positive and finite, "
                                         r"not \(0\.0,\)$"):
        QuantParams((0.0,))
    with pytest.raises(ValueError, match=r"^per-channel quantization scales must name their "
                                         r"axis, not None$"):
        QuantParams((1.0, 2.0))
    with pytest.raises(ValueError, match=r"^tensor shape must hold non-negative sizes, "
                                         r"not \(-1, 2\)$"):
        TensorType((-1, 2), F)
    with pytest.raises(ValueError, match=r"^node name must be a non-empty string, not ''$"):
        Node("", Op.RELU, ("x",), ("y",))
    with pytest.raises(ValueError, match=r"^tensor dtype must be one of float32, int8, int32, "
                                         r"int64, float64, .*, complex128, not 'bytes32'$"):
        DType.of(np.dtype("S4"))


def test_tensor_type_sizes_and_per_channel_scales() -> None:
    t = TensorType(("N", 3, 2), DType.INT32)
    assert t.concrete(5) == (5, 3, 2) and t.nbytes(2) == 48 and t.ndim == 3
    q = QuantParams((1.0, 2.0, 4.0), axis=1)
    assert q.array(3).shape == (1, 3, 1) and str(q) == "scale[3]@axis1"
    assert QuantParams((0.25,)).array(4).shape == ()

"""Shape and type inference."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import build, node

from openvta.graph.errors import PassError
from openvta.graph.ir import DType, Graph, Op, QuantParams, TensorType
from openvta.graph.passes.infer_shapes import infer_shapes

F = DType.FLOAT32


def test_types_follow_from_the_inputs_and_keep_quantization() -> None:
    g = build([node("c", Op.CONV, ("x", "w"), "y", strides=(2, 2), pads=(1, 1, 1, 1))],
              {"x": ("N", 2, 7, 7)}, ("y",), {"w": np.ones((3, 2, 3, 3), np.float32)})
    assert g.types["y"] == TensorType(("N", 3, 4, 4), F)
    quant = QuantParams((0.5,))
    stale = g.replace(types={**g.types, "y": TensorType((1,), F, quant),
                             "gone": TensorType((2,), F)})
    again = infer_shapes(stale)
    assert again.types["y"] == TensorType(("N", 3, 4, 4), F, quant)
    assert "gone" not in again.types and again.types["w"].dtype is F


def test_errors_name_the_node() -> None:
    g = Graph("g", ("x",), ("y",), (node("c", Op.CONV, ("x", "w"), "y"),),
              {"w": np.ones((3, 5, 3, 3), np.float32)}, {"x": TensorType(("N", 2, 7, 7), F)})
    with pytest.raises(PassError, match=r"^infer shapes: node 'c' \(Conv\): Conv weight "
                                        r"\(3, 5, 3, 3\) with group 1 must match 2 data channels$"):
        infer_shapes(g)
    with pytest.raises(PassError, match=r"^infer shapes: graph input 'x' has no type$"):
        infer_shapes(Graph("g", ("x",), ("x",), (), {}, {}))
    orphan = Graph("g", ("x",), ("y",), (node("r", Op.RELU, ("z",), "y"),), {},
                   {"x": TensorType((2,), F)})
    with pytest.raises(PassError, match=r"^infer shapes: node 'r' \(Relu\): input 'z' is not "
                                        r"defined before the node$"):
        infer_shapes(orphan)
    bad_const = Graph("g", ("x",), ("x",), (), {"k": np.zeros(2, "S4")},
                      {"x": TensorType((2,), F)})
    with pytest.raises(PassError, match=r"^infer shapes: constant 'k': tensor dtype must be one "
                                        r"of float32, int8, int32, int64, .*, not 'bytes32'$"):
        infer_shapes(bad_const)


def test_pooling_of_any_rank_and_its_errors() -> None:
    g = build([node("p", Op.MAX_POOL, ("x",), "y", kernel_shape=(2, 2, 2), strides=(1, 1, 2),
                    pads=(0, 0, 0, 0, 0, 1), dilations=(2, 1, 1))], {"x": ("N", 2, 5, 4, 6)}, ("y",))
    assert g.types["y"] == TensorType(("N", 2, 3, 3, 3), F)
    flat = Graph("g", ("x",), ("y",), (node("p", Op.AVERAGE_POOL, ("x",), "y", kernel_shape=(2,)),), {},
                 {"x": TensorType((2, 8), F)})
    with pytest.raises(PassError, match=r"^infer shapes: node 'p' \(AveragePool\): pooling data must be "
                                        r"N-D \(N, C, spatial\.\.\.\), not 2-D float32\[2,8\]$"):
        infer_shapes(flat)
    wide = Graph("g", ("x",), ("y",), (node("p", Op.MAX_POOL, ("x",), "y", kernel_shape=(2,), dilations=(2,),
                                            pads=(3, 0)),), {}, {"x": TensorType((1, 2, 8), F)})
    with pytest.raises(PassError, match=r"^infer shapes: node 'p' \(MaxPool\): pooling kernel \(2,\), strides "
                                        r"\(1,\), dilations \(2,\) and pads \(3, 0\) must be positive, and each "
                                        r"pad smaller than the \(dilated\) kernel$"):
        infer_shapes(wide)

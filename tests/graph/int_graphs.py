"""Hand-built integer graphs (int8 inputs, Requantize with chosen parameters) and the passes
from partition on, for the lowering tests."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from openvta.graph.executor import ModelReport, run_graph
from openvta.graph.verify import verify_graph
from openvta.graph.ir import DType, Graph, Node, RequantMode, TensorType
from openvta.graph.passes.infer_shapes import infer_shapes
from openvta.graph.pipeline import PASSES, CompileOptions
from openvta.isa import Config
from openvta.runtime import Device

__all__ = ["int_graph", "compile_int", "run_int", "requant", "AFTER_QUANTIZE"]

#: The passes an integer graph goes through, in the pipeline's order.
AFTER_QUANTIZE = [name for name, _ in PASSES][[name for name, _ in PASSES].index("partition"):]


def int_graph(nodes: Sequence[Node], inputs: Mapping[str, tuple[int | str, ...]],
              outputs: Sequence[str], constants: Mapping[str, np.ndarray]) -> Graph:
    """A graph of int8 ``inputs`` (name → shape); every other type inferred, then verified."""
    types = {k: TensorType(v, DType.INT8) for k, v in inputs.items()}
    graph = Graph("int", tuple(inputs), tuple(outputs), tuple(nodes), dict(constants), types)
    return verify_graph(infer_shapes(graph))


def requant(pre: int, multiplier: Sequence[int], post: Sequence[int],
            out: DType = DType.INT8) -> dict[str, object]:
    """Requantize attributes."""
    return {"mode": RequantMode.FIXED, "pre_shift": pre, "multiplier": tuple(multiplier),
            "post_shift": tuple(post), "axis": 1, "out_dtype": out}


def compile_int(graph: Graph, cfg: Config, cpu_nodes: Collection[str] = (),
                until: str = "lower") -> Graph:
    """``graph`` through the pipeline's passes from partition to ``until``, verified after each."""
    options = CompileOptions(cfg, RequantMode.FIXED, frozenset(), (), frozenset(cpu_nodes))
    steps = dict(PASSES)
    for name in AFTER_QUANTIZE[:AFTER_QUANTIZE.index(until) + 1]:
        graph = verify_graph(steps[name](graph, options))
    return graph


def run_int(graph: Graph, cfg: Config, feeds: Mapping[str, np.ndarray],
            backend: str = "functional") -> tuple[dict[str, np.ndarray], ModelReport]:
    """The lowered ``graph`` run on ``backend`` (the executor, without the float front)."""
    return run_graph(graph, cfg, feeds, Device(backend))

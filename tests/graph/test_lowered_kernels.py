"""Lowered kernels compute their groups' integer references exactly: hypothesis draws conv and
dense layers with any requantization (pre-shifts, per-tensor or per-channel multipliers up to
int32, post-shifts from left shifts to 31, so every wrap and rounding path), ReLU and clip
tails, residual adds (int8 from an earlier kernel, int32 from the CPU) and random CPU
placements; the executor's outputs must equal the interpreter's, bit for bit."""

from __future__ import annotations

from typing import cast

import numpy as np
from graphs import node
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from int_graphs import compile_int, int_graph, requant, run_int

from openvta.graph.execute import execute
from openvta.graph.ir import Device, DType, Graph, Op
from openvta.isa import Config, preset

CONFIGS = [preset("tiny"), preset("small"), preset("default")]


def _requant(data: st.DataObject, channels: int, out: DType = DType.INT8) -> dict[str, object]:
    wide = data.draw(st.booleans())
    values = st.integers(-2 ** 31, 2 ** 31 - 1) if wide else st.integers(-2 ** 15, 2 ** 15 - 1)
    count = channels if data.draw(st.booleans()) else 1
    multiplier = data.draw(st.lists(values, min_size=count, max_size=count))
    posts = data.draw(st.lists(st.integers(-4, 31), min_size=1, max_size=1) | st.lists(
        st.integers(-4, 31), min_size=channels, max_size=channels))
    return requant(data.draw(st.integers(0, 12)), multiplier, posts, out)


class _Layer:
    """Draws one anchor (conv or dense) with its weights and bias; ``same``: a conv whose output
    has its input's shape."""

    def __init__(self, data: st.DataObject, cfg: Config, rng: np.random.Generator, same: bool) -> None:
        self.dense = not same and data.draw(st.booleans())
        low = max(1, cfg.BLOCK_IN // 2)
        self.ci = data.draw(st.integers(low, 2 * cfg.BLOCK_IN + 1))
        self.co = self.ci if same else data.draw(st.integers(1, 2 * cfg.BLOCK_OUT + 1))
        self.k = data.draw(st.sampled_from([1, 3]))
        self.hw = data.draw(st.integers(self.k, 5))
        self.pad = self.k // 2 if same else data.draw(st.integers(0, self.k // 2))
        self.stride = 1 if same else data.draw(st.sampled_from([1, 2]))
        shape = (self.co, self.ci) if self.dense else (self.co, self.ci, self.k, self.k)
        self.constants: dict[str, np.ndarray] = {"w": rng.integers(-127, 128, shape, dtype=np.int8),
                                                 "b": rng.integers(-2 ** 20, 2 ** 20, self.co, dtype=np.int32)}

    @property
    def input_shape(self) -> tuple[int | str, ...]:
        return ("N", self.ci) if self.dense else ("N", self.ci, self.hw, self.hw)

    def anchor(self, data_in: str, out: str, suffix: str = "") -> tuple:
        if self.dense:
            return node(f"fc{suffix}", Op.GEMM, (data_in, f"w{suffix}", f"b{suffix}"), out, transB=1)
        return node(f"conv{suffix}", Op.CONV, (data_in, f"w{suffix}", f"b{suffix}"), out,
                    pads=(self.pad,) * 4, strides=(self.stride,) * 2)


def _tail(data: st.DataObject, value: str, nodes: list) -> str:
    if data.draw(st.booleans()):
        nodes.append(node("relu", Op.RELU, (value,), "t.relu"))
        value = "t.relu"
    if data.draw(st.booleans()):
        low = data.draw(st.integers(-128, 0))
        nodes.append(node("clip", Op.CLIP, (value,), "t.clip", min=low,
                          max=data.draw(st.integers(low, 127))))
        value = "t.clip"
    return value


def _residual(data: st.DataObject, layer: _Layer, value: str, skip: str, nodes: list) -> str:
    nodes += [node("in0", Op.REQUANTIZE, (value,), "s0", **_requant(data, layer.co, DType.INT32)),
              node("in1", Op.REQUANTIZE, (skip,), "s1", **_requant(data, layer.co, DType.INT32)),
              node("add", Op.ADD, ("s0", "s1"), "sum"),
              node("saturate", Op.CLIP, ("sum",), "sat", min=-128, max=127)]
    return "sat"


def _model(data: st.DataObject, cfg: Config) -> tuple[Graph, dict[str, np.ndarray]]:
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    kind = data.draw(st.sampled_from(["none", "from the cpu", "from a kernel"]))
    layer = _Layer(data, cfg, rng, same=kind != "none")
    nodes = [layer.anchor("x", "acc"), node("rq", Op.REQUANTIZE, ("acc",), "q", **_requant(data, layer.co))]
    inputs: dict[str, tuple[int | str, ...]] = {"x": layer.input_shape}
    value = _tail(data, "q", nodes)
    if kind != "none":
        if kind == "from the cpu":
            inputs["r"] = layer.input_shape
            skip = "r"
        else:  # x → first kernel → a; a → second kernel → add(a) (the residual requantized on the ALU)
            layer.constants |= {"w2": layer.constants["w"].copy(), "b2": layer.constants["b"] // 2}
            nodes += [layer.anchor(value, "acc2", "2"),
                      node("rq2", Op.REQUANTIZE, ("acc2",), "q2", **_requant(data, layer.co))]
            skip, value = value, "q2"
        value = _residual(data, layer, value, skip, nodes)
    graph = int_graph(nodes, inputs, (value,), layer.constants)
    batch = data.draw(st.integers(1, 3))
    feeds = {name: rng.integers(-128, 128, (batch, *cast(tuple[int, ...], shape[1:])), dtype=np.int8)  # N first
             for name, shape in inputs.items()}
    return graph, feeds


def _check(graph: Graph, cfg: Config, feeds: dict[str, np.ndarray], cpu_nodes: list[str]) -> Graph:
    lowered = compile_int(graph, cfg, cpu_nodes)
    expected = execute(lowered, feeds)
    got, report = run_int(lowered, cfg, feeds)
    for name, value in expected.items():
        assert got[name].dtype == value.dtype and np.array_equal(got[name], value), name
    assert {k.placement for k in report.kernels} >= ({Device.ACCEL} if lowered.regions else set())
    return lowered


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_lowered_kernel_equals_its_reference(data: st.DataObject) -> None:
    cfg = data.draw(st.sampled_from(CONFIGS))
    graph, feeds = _model(data, cfg)
    _check(graph, cfg, feeds, [])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_placements_give_the_same_numbers(data: st.DataObject) -> None:
    cfg = data.draw(st.sampled_from(CONFIGS))
    graph, feeds = _model(data, cfg)
    forced = data.draw(st.lists(st.sampled_from([n.name for n in graph.nodes]), unique=True))
    _check(graph, cfg, feeds, forced)

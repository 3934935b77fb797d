"""plan memory: buffers at group boundaries, liveness, greedy offsets that never collide."""

from __future__ import annotations

from typing import Any

from dataclasses import replace

import numpy as np
import pytest
from graphs import conv_relu_graph, residual_graph
from hypothesis import given
from hypothesis import strategies as st

from openvta.graph.errors import PassError
from openvta.graph.verify import verify_graph
from openvta.graph.ir import Graph, RequantMode
from openvta.graph.passes.calibrate import calibrate
from openvta.graph.passes.fuse import fuse
from openvta.graph.passes.partition import partition
from openvta.graph.passes.plan_memory import (Buffer, assign_offsets, buffers_of, plan_memory,
                                              plan_region)
from openvta.graph.passes.quantize import quantize
from openvta.graph.compiled_model import CompiledModel
from openvta.graph.pipeline import compile_model as compile_graph
from openvta.isa import Config, preset


def compile_model(*args: Any, **kwargs: Any) -> CompiledModel:
    """The graph level's ``compile_model`` with symmetric activations: these tests reason about
    the integer graph's ReLU nodes and kernel names (at the default zero points a ReLU is the
    requantization's clip, no node of its own; tests/graph/test_zero_points.py)."""
    return compile_graph(*args, **{"activations": "symmetric", **kwargs})


def _fused(g: Graph, shape: tuple[int, ...]) -> Graph:
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    q = quantize(calibrate(g, [{"x": x}], RequantMode.FIXED), RequantMode.FIXED)
    return fuse(partition(q, preset("default")))


def _no_collisions(buffers: list[Buffer], offsets: dict[str, int]) -> None:
    for i, a in enumerate(buffers):
        for b in buffers[i + 1:]:
            if a.start <= b.end and b.start <= a.end:
                assert offsets[a.name] + a.size <= offsets[b.name] or \
                    offsets[b.name] + b.size <= offsets[a.name], (a, b)


def test_buffers_are_the_tensors_between_groups() -> None:
    g = _fused(conv_relu_graph(), (2, 16, 6, 6))
    buffers = {b.name: b for b in buffers_of(g, batch=2)}
    assert set(buffers) == {"x", "x.q", "r.q", "f.q", "y.q", "y"}
    assert buffers["x"] == Buffer("x", 2 * 16 * 36 * 4, -1, 0)
    assert buffers["r.q"] == Buffer("r.q", 2 * 16 * 36, 1, 2)
    assert buffers["y"].end == 5  # graph outputs live to the end


@pytest.mark.parametrize("make", [conv_relu_graph, residual_graph])
def test_the_arena_reuses_memory_without_collisions(make) -> None:
    g = make()
    fused = _fused(g, (2,) + tuple(g.types["x"].shape[1:]))
    planned = verify_graph(plan_memory(fused, alignment=64))
    plan = planned.memory
    assert plan is not None and plan.arena_bytes <= plan.no_reuse_bytes
    assert all(offset % 64 == 0 for offset in plan.offsets.values())
    _no_collisions(buffers_of(fused), dict(plan.offsets))
    assert planned.nodes == fused.nodes


@given(st.lists(st.tuples(st.integers(1, 500), st.integers(-1, 6), st.integers(0, 4)),
                min_size=1, max_size=12), st.sampled_from([1, 16, 64]))
def test_greedy_offsets_never_collide(specs, alignment: int) -> None:
    buffers = [Buffer(f"t{i}", size, start, start + length)
               for i, (size, start, length) in enumerate(specs)]
    offsets = assign_offsets(buffers, alignment)
    assert set(offsets) == {b.name for b in buffers}
    assert all(v % alignment == 0 for v in offsets.values())
    _no_collisions(buffers, offsets)


def test_plan_memory_errors() -> None:
    with pytest.raises(PassError, match=r"^plan memory: node 'conv' \(Conv\) has no fused group; "
                                        r"run fuse first$"):
        plan_memory(conv_relu_graph())
    with pytest.raises(ValueError, match=r"^plan_memory needs a positive batch and a power-of-two "
                                         r"alignment, not 1 and 48$"):
        plan_memory(conv_relu_graph(), alignment=48)


def _region_graph(cfg: Config, make=residual_graph) -> Graph:
    g = make()
    x = np.random.default_rng(0).standard_normal((2,) + tuple(g.types["x"].shape[1:])).astype(np.float32)
    return compile_model(g, x, config=cfg).graph


def test_each_region_gets_an_arena_by_the_compilers_liveness(cfg: Config) -> None:
    g = _region_graph(cfg)
    (region,) = g.regions
    live = region.live()
    assert live["x.q"] == (0, 0) and live["a.q"] == (0, 2) and live["r1.q"] == (1, 2)
    assert live["y.q"] == (2, 2) and live["conv2.weight.q"] == (0, 2)
    buffers = [Buffer(t.name, t.nbytes, *live[t.name]) for t in region.tensors]
    offsets = {t.name: t.offset for t in region.tensors}
    assert all(o is not None and o % cfg.max_elem_bytes == 0 for o in offsets.values())
    _no_collisions(buffers, offsets)
    ends = [o + t.nbytes for t, o in zip(region.tensors, offsets.values())]
    assert max(ends) <= region.arena_bytes < region.no_reuse_bytes  # three kernels: bytes are reused
    assert region.no_reuse_bytes == sum(-(-t.nbytes // cfg.max_elem_bytes) * cfg.max_elem_bytes
                                        for t in region.tensors)


def test_values_inside_a_region_get_no_host_buffer() -> None:
    g = _region_graph(preset("default"))
    assert g.memory is not None
    assert {"a.q", "r1.q"}.isdisjoint(g.memory.sizes) and {"x.q", "y.q"} <= set(g.memory.sizes)


def test_a_region_tensor_no_kernel_uses_is_an_error() -> None:
    (region,) = _region_graph(preset("tiny")).regions
    stray = replace(region.tensor("a.q"), name="stray")  # scratch that no kernel writes
    with pytest.raises(PassError, match=r"^plan memory: region 0 tensor 'stray' is used by no "
                                        r"kernel$"):
        plan_region(replace(region, tensors=region.tensors + (stray,)), 16)

"""fuse: groups decided by pattern kinds, residual adds, demotion, ordering."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import build, conv_relu_graph, node, residual_graph

from openvta.graph.errors import PassError
from openvta.graph.verify import verify_graph
from openvta.graph.ir import Device, Graph, Op, RequantMode
from openvta.graph.ops.base import PatternKind as K
from openvta.graph.passes.calibrate import calibrate
from openvta.graph.passes.fuse import fusable, fuse
from openvta.graph.passes.partition import partition
from openvta.graph.passes.quantize import quantize
from openvta.graph.registry import op_def
from openvta.isa import preset

CFG = preset("default")


def _compiled(g: Graph, shape: tuple[int, ...], cpu_ops: tuple[str, ...] = ()) -> Graph:
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    q = quantize(calibrate(g, [{"x": x}], RequantMode.FIXED), RequantMode.FIXED)
    return verify_graph(fuse(partition(q, CFG, cpu_ops)))


def _groups(g: Graph) -> list[list[str]]:
    groups: dict[int, list[str]] = {}
    for n in g.nodes:
        groups.setdefault(n.group, []).append(n.name)
    return [groups[k] for k in sorted(groups)]


def _check_invariants(g: Graph) -> None:
    seen: list[int] = []
    for n in g.nodes:
        if not seen or seen[-1] != n.group:
            assert n.group not in seen, "a group's nodes must be contiguous"
            seen.append(n.group)
    assert seen == sorted(seen)
    for gid in seen:
        members = [n for n in g.nodes if n.group == gid]
        devices = {n.placement.device for n in members}
        assert len(devices) == 1
        if devices == {Device.ACCEL}:
            anchors = [n for n in members if op_def(n.op).kind is K.OUT_ELEMWISE_FUSABLE]
            assert len(anchors) == 1


@pytest.mark.parametrize(("group", "node", "ok"), [
    (K.OUT_ELEMWISE_FUSABLE, K.ELEMWISE, True), (K.OUT_ELEMWISE_FUSABLE, K.BROADCAST, True),
    (K.OUT_ELEMWISE_FUSABLE, K.INJECTIVE, False), (K.OUT_ELEMWISE_FUSABLE, K.OUT_ELEMWISE_FUSABLE, False),
    (K.ELEMWISE, K.INJECTIVE, True), (K.INJECTIVE, K.REDUCTION, True), (K.REDUCTION, K.ELEMWISE, True),
    (K.REDUCTION, K.INJECTIVE, False), (K.OPAQUE, K.ELEMWISE, False), (K.ELEMWISE, K.OPAQUE, False),
])
def test_fusion_rules_by_kind(group: K, node: K, ok: bool) -> None:
    assert fusable(group, node) is ok


def test_conv_takes_its_requantize_and_relu() -> None:
    g = _compiled(conv_relu_graph(), (2, 16, 6, 6))
    assert _groups(g) == [["x.quantize"], ["conv", "conv.requantize", "relu"], ["flat"],
                          ["fc", "fc.requantize"], ["y.dequantize"]]
    _check_invariants(g)


def test_residual_add_joins_the_conv_group_with_both_requantizations() -> None:
    g = _compiled(residual_graph(), (2, 16, 4, 4))
    groups = _groups(g)
    assert ["conv2", "conv2.requantize", "add.in0.requantize", "add.in1.requantize", "add",
            "add.saturate", "relu2"] in [sorted(grp, key=[n.name for n in g.nodes].index)
                                         for grp in groups]
    assert all(n.placement.device is Device.ACCEL for n in g.nodes if n.name.startswith("add"))
    _check_invariants(g)


def test_cpu_nodes_fuse_by_the_same_rules() -> None:
    g = _compiled(conv_relu_graph(), (2, 16, 6, 6), cpu_ops=("Conv", "Gemm"))
    assert _groups(g) == [["x.quantize"], ["conv", "conv.requantize", "relu"], ["flat"],
                          ["fc", "fc.requantize", "y.dequantize"]]
    _check_invariants(g)


def test_an_accelerator_tail_without_an_anchor_moves_to_the_cpu() -> None:
    w = np.random.default_rng(1).standard_normal((16, 16, 1, 1)).astype(np.float32)
    g = build([node("conv", Op.CONV, ("x", "w"), "c"), node("r1", Op.RELU, ("c",), "a"),
               node("r2", Op.CLIP, ("c",), "b", min=0.0, max=1.0), node("add", Op.ADD, ("a", "b"), "y")],
              {"x": ("N", 16, 2, 2)}, ("y",), {"w": w})
    fused = _compiled(g, (2, 16, 2, 2))
    r1 = fused.node("r1")
    assert r1.placement.device is Device.CPU
    assert r1.placement.reason == "no conv or dense in its fused group to run with"
    _check_invariants(fused)


def test_fuse_needs_placements() -> None:
    with pytest.raises(PassError, match=r"^fuse: node 'conv' \(Conv\) has no placement; run "
                                        r"partition first$"):
        fuse(conv_relu_graph())


def _downsample_block(pool_first: bool) -> Graph:
    """A residual block whose skip input is a 1x1 conv (or a MaxPool, on the CPU)."""
    consts = {f"w{i}": np.random.default_rng(i).standard_normal(shape).astype(np.float32) / 4
              for i, shape in enumerate([(16, 16, 3, 3), (16, 16, 3, 3), (16, 16, 1, 1)])}
    first = node("pool", Op.MAX_POOL, ("x",), "a", kernel_shape=(1, 1), strides=(1, 1),
                 pads=(0, 0, 0, 0)) if pool_first else node("relu0", Op.RELU, ("x",), "a")
    skip = [] if pool_first else [node("down", Op.CONV, ("a", "w2"), "d")]
    nodes = [first, node("conv1", Op.CONV, ("a", "w0"), "c1", pads=(1, 1, 1, 1)),
             node("relu1", Op.RELU, ("c1",), "r1"),
             node("conv2", Op.CONV, ("r1", "w1"), "c2", pads=(1, 1, 1, 1)), *skip,
             node("add", Op.ADD, ("c2", "a" if pool_first else "d"), "s"),
             node("relu2", Op.RELU, ("s",), "y")]
    return build(nodes, {"x": ("N", 16, 4, 4)}, ("y",), consts)


def _group_of(g: Graph, name: str) -> list[str]:
    return [n.name for n in g.nodes if n.group == g.node(name).group]


def test_a_downsample_conv_ends_on_int8_and_the_add_rescales_its_output() -> None:
    g = _compiled(_downsample_block(pool_first=False), (2, 16, 4, 4))
    assert _group_of(g, "down") == ["down", "down.requantize"]
    assert "add.in1.requantize" in _group_of(g, "add")
    assert "conv2" in _group_of(g, "add")
    assert all(n.placement.device is Device.ACCEL for n in g.nodes
               if n.name.startswith(("conv", "down", "add")))
    _check_invariants(g)


def test_a_residual_input_from_the_cpu_is_rescaled_in_the_add_kernel() -> None:
    g = _compiled(_downsample_block(pool_first=True), (2, 16, 4, 4))
    rescale = g.node("add.in1.requantize")
    assert rescale.placement.device is Device.ACCEL
    assert rescale.placement.reason == ("element-wise op run in the kernel of the accelerator "
                                        "nodes that read it")
    assert _group_of(g, "add")[0] == "conv2" and "add.in1.requantize" in _group_of(g, "add")
    _check_invariants(g)

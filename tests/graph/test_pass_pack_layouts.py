"""pack layouts: regions of consecutive accelerator groups, tensors packed only at their edges,
in the layouts the compiler's operators declare, with the right roles."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from graphs import conv_relu_graph, residual_graph

from openvta.compiler.layout import bias_layout, data_layout, kernel_layout, out_layout
from openvta.graph.errors import GraphError
from openvta.graph.verify import verify_graph
from openvta.graph.ir import Graph
from openvta.graph.compiled_model import CompiledModel
from openvta.graph.pipeline import compile_model as compile_graph
from openvta.graph.regions import Region, Role, accelerator_runs
from openvta.isa import Config

X = np.random.default_rng(3).standard_normal((4, 16, 4, 4)).astype(np.float32)


def compile_model(*args: Any, **kwargs: Any) -> CompiledModel:
    """The graph level's ``compile_model`` with symmetric activations: these tests reason about
    the integer graph's ReLU nodes and kernel names (at the default zero points a ReLU is the
    requantization's clip, no node of its own; tests/graph/test_zero_points.py)."""
    return compile_graph(*args, **{"activations": "symmetric", **kwargs})


def _graph(cfg: Config, **options) -> Graph:
    return compile_model(residual_graph(), X, config=cfg, **options).graph


def _roles(region: Region) -> dict[str, tuple[str, str | None]]:
    return {t.name: (t.role.value, t.value) for t in region.tensors}


def test_one_region_holds_the_three_kernels_packed_only_at_its_edges(cfg: Config) -> None:
    g = _graph(cfg)
    (region,) = g.regions
    assert region.groups == (1, 2, 3) and accelerator_runs(g) == [[1, 2, 3]]
    roles = _roles(region)
    assert {k for k, (role, _) in roles.items() if role in ("input", "output", "scratch")} == {
        "x.q", "a.q", "r1.q", "y.q"}
    assert roles["x.q"] == ("input", "x.q") and roles["y.q"] == ("output", "y.q")
    assert roles["a.q"][0] == roles["r1.q"][0] == "scratch"  # never leave the accelerator
    assert roles["conv1.weight.q"] == ("weight", "conv1.weight.q")
    assert roles["conv1.rq1_mul"] == ("bias", None)  # an epilogue vector: the program's only
    for t in region.tensors:
        layout = {Role.WEIGHT: kernel_layout(cfg), Role.BIAS: bias_layout(cfg)}.get(
            t.role, data_layout(cfg) if t.role is Role.INPUT else out_layout(cfg))
        assert t.layout == layout and t.offset is not None
        if t.role in (Role.INPUT, Role.OUTPUT, Role.SCRATCH):
            assert t.shape == (cfg.BATCH, 16, 4, 4)
    assert [k.operator for k in region.kernels] == ["conv2d"] * 3
    assert region.kernels[2].bind["res0"] == "a.q"


def test_a_value_the_cpu_reads_leaves_the_region_and_cpu_groups_split_regions(cfg: Config) -> None:
    g = _graph(cfg, cpu_nodes=["conv1"])
    assert [r.groups for r in g.regions] == [(1,), (3,)]
    first, second = (_roles(r) for r in g.regions)
    assert first["a.q"] == ("output", "a.q")  # read by conv1 on the CPU and by the next region
    assert second["a.q"] == ("input", "a.q") and second["r1.q"] == ("input", "r1.q")


def test_dense_inputs_are_in_the_compilers_nc_layout(cfg: Config) -> None:
    x = np.random.default_rng(0).standard_normal((3, 16, 6, 6)).astype(np.float32)
    g = compile_model(conv_relu_graph(), x, config=cfg).graph
    fc = g.regions[-1]
    assert fc.kernels[0].operator == "dense"
    data = fc.tensor(fc.kernels[0].bind["data"])
    assert data.layout == f"NC{cfg.BATCH}n{cfg.BLOCK_IN}c" and data.shape == (cfg.BATCH, 576)
    assert fc.tensor("fc.weight.q").layout == f"OI{cfg.BLOCK_OUT}o{cfg.BLOCK_IN}i"


def test_no_accelerator_no_region() -> None:
    g = compile_model(residual_graph(), X, cpu_ops=["Conv"]).graph
    assert g.regions == () and accelerator_runs(g) == []


def test_regions_are_checked_against_the_groups() -> None:
    g = _graph("tiny")
    (region,) = g.regions
    with pytest.raises(GraphError, match=r"^graph 'residual': regions must run the accelerator "
                                         r"groups \[\(1, 2, 3\)\], not \[\(1, 2, 3\), \(1, 2, 3\)\]$"):
        verify_graph(g.replace(regions=(region, region)))
    bad = Region(0, region.kernels, tuple(t if t.name != "x.q" else type(t)(
        "x.q", t.layout, t.shape, t.dtype, t.role, "nothing") for t in region.tensors))
    with pytest.raises(GraphError, match=r"^graph 'residual': region 0 tensor 'x.q' holds "
                                         r"'nothing', which is not a value of the graph$"):
        verify_graph(g.replace(regions=(bad,)))
    with pytest.raises(KeyError, match=r"region 0 has no tensor 'z'"):
        region.tensor("z")

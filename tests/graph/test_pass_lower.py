"""lower: one program per region, its constants packed into the image at compile time, every
region tensor a symbol at its planned offset; and the checks a loaded program must pass."""

from __future__ import annotations

from typing import Any

from dataclasses import replace

import numpy as np
import pytest
from graphs import residual_graph

import openvta.graph.passes.lower as lower_pass
from openvta.compiler import LoweringError
from openvta.compiler.layout import unpack_by_layout
from openvta.graph.errors import GraphError, PassError
from openvta.graph.ir import Graph
from openvta.graph.passes.lower import lower_regions
from openvta.graph.passes.match_kernels import group_kernels
from openvta.graph.compiled_model import CompiledModel
from openvta.graph.pipeline import compile_model as compile_graph
from openvta.graph.regions import Role, check_program
from openvta.isa import Config, Opcode, preset

X = np.random.default_rng(5).standard_normal((4, 16, 4, 4)).astype(np.float32)


def compile_model(*args: Any, **kwargs: Any) -> CompiledModel:
    """The graph level's ``compile_model`` with symmetric activations: these tests reason about
    the integer graph's ReLU nodes and kernel names (at the default zero points a ReLU is the
    requantization's clip, no node of its own; tests/graph/test_zero_points.py)."""
    return compile_graph(*args, **{"activations": "symmetric", **kwargs})


def _graph(cfg: Config | str) -> Graph:
    return compile_model(residual_graph(), X, config=cfg).graph


def test_one_program_per_region_with_its_constants_packed(cfg: Config) -> None:
    g = _graph(cfg)
    (region,) = g.regions
    program = region.program
    assert program is not None and program.config == cfg
    check_program(region, cfg)
    vectors = {name: v for k in group_kernels(g, cfg).values() for name, v in k.vectors.items()}
    for t in region.tensors:
        if t.role in (Role.WEIGHT, Role.BIAS):
            stored = unpack_by_layout(program.read(t.name), t.layout, t.shape)
            expected = g.constants[t.value] if t.value else vectors[t.name]
            assert np.array_equal(stored, expected), t.name
    starts = [*region.kernel_starts, program.insn_count]
    gemms = [sum(i.opcode is Opcode.GEMM for i in program.instructions()[a:b])
             for a, b in zip(starts, starts[1:])]
    assert len(gemms) == 3 and min(gemms) > 0  # one stream: the three kernels, in order


def test_lowering_needs_planned_offsets_and_unchanged_kernels() -> None:
    g = _graph("tiny")
    (region,) = g.regions
    unplanned = replace(region, tensors=tuple(replace(t, offset=None) for t in region.tensors))
    with pytest.raises(PassError, match=r"^lower: region 0 tensor 'x\.q' has no offset; run plan "
                                        r"memory first$"):
        lower_regions(g.replace(regions=(unplanned,)), preset("tiny"))
    stale = replace(region, kernels=(replace(region.kernels[0], bind={"data": "x.q"}),
                                     *region.kernels[1:]))
    with pytest.raises(PassError, match=r"^lower: region 0 kernel 'conv0\+conv0\.requantize\+relu0' no "
                                        r"longer matches its group 1; run pack layouts again$"):
        lower_regions(g.replace(regions=(stale,)), preset("tiny"))
    assert lower_regions(g.replace(regions=()), preset("tiny")).regions == ()


def test_a_program_the_compiler_refuses_is_a_pass_error(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise LoweringError("check size", "the program needs too much DRAM")

    g = _graph("tiny")
    monkeypatch.setattr(lower_pass, "build_program_starts", refuse)
    with pytest.raises(PassError, match=r"^lower: region 0 \(conv0\+.*relu2\): check size: the "
                                        r"program needs too much DRAM$"):
        lower_regions(g, preset("tiny"))


def test_check_program_refuses_a_program_that_does_not_fit_its_region() -> None:
    (region,) = _graph("tiny").regions
    with pytest.raises(GraphError, match=r"^region 0 program is for the tiny configuration, the "
                                         r"model for small$"):
        check_program(region, preset("small"))
    moved = replace(region, tensors=tuple(replace(t, offset=(t.offset or 0) + 16) if t.name == "y.q"
                                          else t for t in region.tensors))
    with pytest.raises(GraphError, match=r"^region 0 program must hold 'y\.q' at \d+ in NCHW1n4c as "
                                         r"\(1, 16, 4, 4\), not \(\d+, 'NCHW1n4c', \(1, 16, 4, 4\)\)$"):
        check_program(moved, preset("tiny"))
    with pytest.raises(GraphError, match=r"^region 0 program must have one increasing instruction "
                                         r"start per kernel below \d+, not \[0, 5\]$"):
        check_program(replace(region, kernel_starts=(0, 5)), preset("tiny"))
    with pytest.raises(GraphError, match=r"^region 0 program is missing; lower the region first$"):
        check_program(replace(region, program=None), preset("tiny"))

"""match kernels: each accelerator group as one compiler kernel (its epilogue, stage by stage),
and every group that cannot be one moved to the CPU with its reason."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from graphs import node, residual_graph
from int_graphs import compile_int, int_graph, requant

import openvta.compiler.program as program_module
import openvta.graph.kernel as kernel_module
import openvta.graph.passes.match_kernels as match_pass
from openvta.compiler import LoweringError, operator_spec
from openvta.graph.kernel import KernelMatch
from openvta.graph.errors import PassError
from openvta.graph.ir import DType, Graph, Op
from openvta.graph.passes.match_kernels import accelerator_groups, group_kernels
from openvta.graph.compiled_model import CompiledModel
from openvta.graph.pipeline import compile_model as compile_graph
from openvta.isa import preset

CFG = preset("tiny")
RNG = np.random.default_rng(11)
W = RNG.integers(-127, 128, (8, 8, 3, 3), dtype=np.int8)
B = RNG.integers(-999, 999, (8,), dtype=np.int32)


def compile_model(*args: Any, **kwargs: Any) -> CompiledModel:
    """The graph level's ``compile_model`` with symmetric activations: these tests reason about
    the integer graph's ReLU nodes and kernel names (at the default zero points a ReLU is the
    requantization's clip, no node of its own; tests/graph/test_zero_points.py)."""
    return compile_graph(*args, **{"activations": "symmetric", **kwargs})


def _conv(*tail, rq: dict | None = None) -> Graph:
    """conv 3x3 (8 → 8 channels) → requantize → ``tail`` nodes (each reading the previous)."""
    nodes = [node("conv", Op.CONV, ("x", "w", "b"), "acc", pads=(1, 1, 1, 1)),
             node("rq", Op.REQUANTIZE, ("acc",), "q", **(rq or requant(2, [3000] * 8, [16])))]
    value = "q"
    for index, (op, attrs) in enumerate(tail):
        nodes.append(node(f"t{index}", op, (value,), f"v{index}", **attrs))
        value = f"v{index}"
    return int_graph(nodes, {"x": ("N", 8, 4, 4)}, (value,), {"w": W, "b": B})


def _reasons(g: Graph) -> dict[str, tuple[str, str]]:
    return {n.name: (n.placement.device.value, n.placement.reason) for n in g.nodes}


def _epilogues(g: Graph) -> list[str]:
    return [k.epilogue.describe() for k in group_kernels(g, CFG).values()]


def test_requantize_relu_clip_become_stages_and_clips_merge() -> None:
    g = compile_int(_conv((Op.RELU, {}), (Op.CLIP, {"min": 3, "max": 90})), CFG, until="match kernels")
    assert _epilogues(g) == ["SHR 2, MUL 3000, SHR 15, ADD 1, SHR 1, MIN 90, MAX 3"]
    per_channel = requant(0, list(range(1000, 1008)), [0, 1, 2, 3, -1, -2, 5, 20])
    g = compile_int(_conv((Op.RELU, {}), rq=per_channel), CFG, until="match kernels")
    assert _epilogues(g) == ["MUL rq1_mul[c], SHR rq1_shift[c], ADD rq1_round[c], SHR rq1_round[c], "
                             "MIN 127, MAX 0"]
    kernel = group_kernels(g, CFG)[0]
    assert kernel.bind["rq1_mul"] == "conv.rq1_mul" and kernel.vectors["conv.rq1_shift"].tolist() == [
        0, 0, 1, 2, -1, -2, 4, 19]
    assert kernel.name == "conv+rq+t0" and kernel.operator == "conv2d" and kernel.macs == 16 * 8 * 72


def test_the_residual_add_is_a_tensor_operand_with_its_requantization() -> None:
    x = RNG.standard_normal((4, 16, 4, 4)).astype(np.float32)
    g = compile_model(residual_graph(), x, config="tiny").graph
    last = group_kernels(g, CFG)[3]
    assert last.name == ("conv2+conv2.requantize+add.in0.requantize+add.in1.requantize+add+"
                         "add.saturate+relu2")
    assert last.adds == ("add",) and last.bind["res0"] == "a.q"
    inner = next(s.operand for s in last.epilogue.stages if s.op.name == "ADD" and not isinstance(
        s.operand, int) and s.operand.name == "res0")
    assert inner.dtype == "int8" and [s.op.name for s in inner.stages] == ["MUL", "SHR", "ADD", "SHR"]
    assert last.epilogue.describe().endswith(", MIN 127, MAX 0")  # saturate, then ReLU: merged


@pytest.mark.parametrize(("graph", "cpu_nodes", "expected"), [
    (_conv((Op.RELU, {})), ["rq"], {
        "conv": "its int32 accumulator cannot leave the accelerator (STORE writes int8) and no "
                "Requantize follows it in its group",
        "t0": "element-wise op with no accelerator node before it"}),
    (_conv(rq=requant(0, [2 ** 20], [1])), [], {
        "rq": "its rounding shift by 1 could see 2**31 - 1, where the ALU's ADD 1 wraps and the "
              "reference does not",
        "conv": "its int32 accumulator cannot leave the accelerator (STORE writes int8) and no "
                "Requantize follows it in its group"}),
    (_conv((Op.REQUANTIZE, requant(0, [3], [1], DType.INT32))), [], {
        "t0": "its int32 result cannot leave the accelerator (STORE writes int8)"}),
    (_conv(rq=requant(1, [5, 6, 7, 8], [12]) | {"axis": 2}), [], {
        "rq": "a per-channel requantization along another axis than the channels"}),
])
def test_what_cannot_be_one_kernel_moves_to_the_cpu(graph: Graph, cpu_nodes: list[str],
                                                     expected: dict[str, str]) -> None:
    placed = _reasons(compile_int(graph, CFG, cpu_nodes, until="match kernels"))
    for name, reason in expected.items():
        assert placed[name] == ("cpu", reason)
    assert all(d == "cpu" or name not in expected for name, (d, _) in placed.items())


def test_a_value_added_to_itself_moves_the_group() -> None:
    nodes = [node("conv", Op.CONV, ("x", "w", "b"), "acc", pads=(1, 1, 1, 1)),
             node("rq", Op.REQUANTIZE, ("acc",), "q", **requant(2, [3000], [16])),
             node("r0", Op.REQUANTIZE, ("q",), "s0", **requant(0, [3], [1], DType.INT32)),
             node("add", Op.ADD, ("s0", "s0"), "s"), node("sat", Op.CLIP, ("s",), "y")]
    g = compile_int(int_graph(nodes, {"x": ("N", 8, 4, 4)}, ("y",), {"w": W, "b": B}), CFG,
                    until="match kernels")
    assert set(_reasons(g).values()) == {
        ("cpu", "value 's0' is read twice in the group; a kernel is one chain of stages")}


def test_a_kernel_the_compiler_refuses_loses_its_residual_add_first(monkeypatch) -> None:
    real = KernelMatch.lowered

    def refuse_tensor_operands(match, cfg):  # as if the residual tile did not fit the buffers
        if match.epilogue.tensor_operands:
            raise LoweringError("plan conv2d", "too big")
        return real(match, cfg)

    monkeypatch.setattr(KernelMatch, "lowered", refuse_tensor_operands)
    x = RNG.standard_normal((4, 16, 4, 4)).astype(np.float32)
    placed = _reasons(compile_model(residual_graph(), x, config="tiny").graph)
    assert placed["add"][0] == "cpu" and placed["add"][1].endswith(") does not lower: plan conv2d: too big")
    assert placed["add.in0.requantize"] == ("cpu", "its int32 result cannot leave the accelerator "
                                                   "(STORE writes int8)")
    assert placed["add.saturate"][0] == placed["relu2"][0] == placed["add.in1.requantize"][0] == "cpu"
    assert placed["conv2"][0] == placed["conv2.requantize"][0] == "accel"


def test_the_compilers_refusal_is_the_reason(monkeypatch) -> None:
    def refuse(schedule, cfg):
        raise LoweringError("plan conv2d", "no tiling fits the buffers")

    monkeypatch.setattr(kernel_module, "lower", refuse)
    placed = _reasons(compile_int(_conv((Op.RELU, {})), CFG, until="match kernels"))
    assert set(placed.values()) == {("cpu", "the fused conv2d (bias, then SHR 2, MUL 3000, SHR 15, "
                                            "ADD 1, SHR 1, MIN 127, MAX 0) does not lower: plan "
                                            "conv2d: no tiling fits the buffers")}


def test_errors() -> None:
    g = compile_int(_conv(rq=requant(0, [2 ** 20], [1])), CFG, until="fuse")
    with pytest.raises(PassError, match=r"^match kernels: group 0 \('conv' \(Conv\), …\) is not one "
                                        r"kernel: its rounding shift .*; run match kernels first$"):
        group_kernels(g, CFG)
    with pytest.raises(PassError, match=r"^match kernels: node 'conv' \(Conv\) has no group or "
                                        r"placement; run fuse first$"):
        accelerator_groups(_conv())
    assert accelerator_groups(compile_int(_conv(), CFG, ["conv"], until="match kernels")) == {}


def test_each_kernel_is_matched_once_per_compile_and_read_from_the_graph_after(monkeypatch) -> None:
    import importlib
    import sys
    from pathlib import Path

    tune_model = importlib.import_module("openvta.tune.tune_model")

    calls: list[tuple[str, ...]] = []
    real = match_pass.match_group

    def counted(graph, nodes, cfg):
        calls.append(tuple(n.name for n in nodes))
        return real(graph, nodes, cfg)

    monkeypatch.setattr(match_pass, "match_group", counted)
    digits = Path(__file__).resolve().parents[2] / "examples" / "digits"
    sys.path.insert(0, str(digits))
    from digits_data import load_split

    x = load_split()[0][:16]
    model = compile_model(digits / "digits.onnx", x, config="default")
    assert model.graph.kernels and len(calls) == len(model.graph.kernels) == len(set(calls))
    model.run(x[:2], backend="cycle")  # the executor's figures read the kernels too
    assert set(tune_model.model_kernels(model)) and len(calls) == len(model.graph.kernels)


def test_each_kernel_is_built_and_lowered_once_per_compile(monkeypatch) -> None:
    """match kernels builds and lowers each kernel (its default plan, the descriptor's); pack
    layouts, lower and the executor read that build from the graph."""
    built: list[str] = []
    lowered: list[str] = []
    real_build, real_lower = kernel_module.kernel_operator, kernel_module.lower

    def counted_build(descriptor, params, cfg, epilogue, **schedule):
        built.append(epilogue.describe())
        return real_build(descriptor, params, cfg, epilogue, **schedule)

    def counted_lower(schedule, cfg):
        lowered.append(cfg.name)
        return real_lower(schedule, cfg)

    def no_lowering(schedule, cfg):
        raise AssertionError("the program lowered a kernel again")

    monkeypatch.setattr(kernel_module, "kernel_operator", counted_build)
    monkeypatch.setattr(kernel_module, "lower", counted_lower)
    monkeypatch.setattr(program_module, "lower", no_lowering)
    x = RNG.standard_normal((4, 16, 4, 4)).astype(np.float32)
    model = compile_model(residual_graph(), x, config="tiny")
    kernels = list(model.graph.kernels.values())
    assert len(kernels) == 3 and len(built) == len(lowered) == len(kernels)
    for k in kernels:
        descriptor = operator_spec(k.operator)
        params = {**k.params, "shift": None, "clip": None, "epilogue": k.epilogue}
        assert k.built is not None and k.plan is not None
        assert dict(k.plan) == descriptor.default_plan(CFG, params) == descriptor.plans.of_operator(k.built.operator)
    model.run(x[:1], backend="cycle")  # the executor's figures read the operators
    assert len(built) == len(kernels)

"""compile_model(plans=): tuned plans as plain data applied per kernel, checked first, and
noted in the summary; kernels without one keep the default plan, with a note."""

from __future__ import annotations

from openvta.graph.kernel import PlanSource

import io
import re
from dataclasses import asdict, replace
from typing import Any

import numpy as np
import pytest
from graphs import residual_graph

import openvta.compiler.program as program_module
import openvta.graph.kernel as kernel_module
from openvta.compiler import LoweringError
from openvta.compiler.kernel_key import kernel_key, plan_refusals
from openvta.graph.compiled_model import CompiledModel, load_model
from openvta.graph.passes import lower as lower_pass
from openvta.graph.passes.match_kernels import group_kernels
from openvta.graph.pipeline import compile_model
from openvta.graph.summary import kernel_plans, plans_line
from openvta.isa import preset

TINY = preset("tiny")
X = np.random.default_rng(3).standard_normal((4, 16, 4, 4)).astype(np.float32)
IMAGE = np.random.default_rng(4).standard_normal((1, 16, 4, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def default() -> CompiledModel:
    return compile_model(residual_graph(), X, config="tiny")


def _other_plan(op: Any) -> dict[str, Any]:
    """A plan of ``op`` that fits and differs from its default one."""
    plan = op.plan
    for change in ({"vthreads": 2}, {"icb": 1}, {"cob": 1}, {"yb": 1}):
        other = replace(plan, **change)
        if other != plan and not plan_refusals(replace(op, plan=other)):
            return asdict(other)
    raise AssertionError(f"no other plan for {op.name}")


@pytest.fixture(scope="module")
def plans(default: CompiledModel) -> dict[str, dict[str, Any]]:
    ops = [m.build(TINY) for m in group_kernels(default.graph, TINY).values()]
    return {kernel_key(op): _other_plan(op) for op in ops}


def _anchors(model: CompiledModel) -> list[str]:
    return [m.anchor for m in group_kernels(model.graph, model.config).values()]


def test_without_plans_a_model_has_no_plan_notes(default: CompiledModel) -> None:
    assert kernel_plans(default.graph) == {} and plans_line(default.graph) is None
    assert "plan" not in default.summary()


def test_each_kernel_gets_its_tuned_plan(default: CompiledModel, plans: dict[str, dict[str, Any]]) -> None:
    tuned = compile_model(residual_graph(), X, config="tiny", plans=plans)
    notes = kernel_plans(tuned.graph)
    assert list(notes) == _anchors(tuned)
    for knobs, note in zip(plans.values(), notes.values()):
        assert note == "tuned plan from records (" + ", ".join(f"{k}={v}" for k, v in knobs.items()) + ")"
    assert plans_line(tuned.graph) == "plans: 3 kernels tuned from records, 0 default (no record: 0, refused: 0)"
    out = tuned.run(IMAGE, backend="cycle")
    assert np.array_equal(out["y"], tuned.reference(IMAGE)["y"])
    assert np.array_equal(out["y"], default.reference(IMAGE)["y"])
    assert out.report.cycles != default.run(IMAGE, backend="cycle").report.cycles
    groups = tuned.kernel_plans()
    assert list(groups.values()) == list(notes.values()) and all(a in g.split("+") for a, g in zip(notes, groups))
    rows = out.report.format(plans=groups).splitlines()
    assert rows[0].split()[-1] == "plan"
    assert [row.split()[-1] for row in rows[1:1 + len(out.report.kernels)]
            if " accel " in row] == ["tuned"] * 3
    assert default.kernel_plans() == {} and "plan" not in default.run(IMAGE).report.format(plans={})


def test_a_kernel_without_a_record_keeps_the_default_plan(default: CompiledModel,
                                                         plans: dict[str, dict[str, Any]]) -> None:
    first = next(iter(plans))
    partial = compile_model(residual_graph(), X, config="tiny", plans={first: plans[first]})
    notes = list(kernel_plans(partial.graph).values())
    assert notes[0].startswith("tuned plan from records (") and notes[1:] == ["default plan (no record)"] * 2
    assert plans_line(partial.graph) == "plans: 1 kernel tuned from records, 2 default (no record: 2, refused: 0)"
    anchor = _anchors(partial)[1]
    row = next(line for line in partial.summary().splitlines() if re.match(rf"\s*\d+\s+{anchor}\s", line))
    assert row.endswith("; default plan (no record)")
    out = partial.run(IMAGE, backend="cycle")
    assert np.array_equal(out["y"], partial.reference(IMAGE)["y"])
    base = default.run(IMAGE, backend="cycle").report.kernels
    assert [k.cycles for k in out.report.kernels][-2:] == [k.cycles for k in base][-2:]
    rows = out.report.format(plans=partial.kernel_plans()).splitlines()
    assert [row.split()[-1] for row in rows if " accel " in row] == ["tuned", "default", "default"]


def test_a_tuned_plan_that_does_not_fit_is_refused_with_the_reason(default: CompiledModel) -> None:
    ops = [m.build(TINY) for m in group_kernels(default.graph, TINY).values()]
    bad = {**asdict(ops[0].plan), "vthreads": 3}
    malformed = {"cob": 1}
    refused = compile_model(residual_graph(), X, config="tiny",
                            plans={kernel_key(ops[0]): bad, kernel_key(ops[1]): malformed})
    notes = list(kernel_plans(refused.graph).values())
    shown = ", ".join(f"{k}={v}" for k, v in bad.items())
    assert re.fullmatch(rf"default plan \(the tuned plan {shown} is refused: thread split: 3 threads must "
                        r"divide .*\)", notes[0])
    assert notes[1] == ("default plan (the tuned plan cob=1 is refused: a conv2d plan sets exactly the knobs "
                        "cob, yb, xb, icb, vthreads, split, not cob)")
    assert plans_line(refused.graph) == "plans: 0 kernels tuned from records, 3 default (no record: 1, refused: 2)"
    cycles = refused.run(IMAGE, backend="cycle").report.cycles
    assert cycles == default.run(IMAGE, backend="cycle").report.cycles


def test_a_region_that_does_not_build_with_its_tuned_plans_is_built_with_the_default_ones(
        default: CompiledModel, plans: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    build = lower_pass.build_program_starts

    def refuse_tuned(kernels: Any, cfg: Any, **options: Any) -> Any:
        if any(asdict(k.operator.plan) == plans.get(kernel_key(k.operator)) for k in kernels):
            raise LoweringError("check size", "too many instructions")
        return build(kernels, cfg, **options)

    monkeypatch.setattr(lower_pass, "build_program_starts", refuse_tuned)
    model = compile_model(residual_graph(), X, config="tiny", plans=plans)
    notes = set(kernel_plans(model.graph).values())
    assert notes == {"default plan (the region's program does not build with its tuned plans: check size: "
                     "too many instructions)"}
    assert model.run(IMAGE, backend="cycle").report.cycles == default.run(IMAGE, backend="cycle").report.cycles


def test_the_plan_notes_survive_the_model_file(plans: dict[str, dict[str, Any]]) -> None:
    first = next(iter(plans))
    model = compile_model(residual_graph(), X, config="tiny", plans={first: plans[first]})
    buffer = io.BytesIO()
    model.save(buffer)
    buffer.seek(0)
    loaded = load_model(buffer)
    assert loaded.summary() == model.summary()
    assert kernel_plans(loaded.graph) == kernel_plans(model.graph)


@pytest.mark.parametrize("plans", [["a"], {"key": 3}, {3: {}}])
def test_plans_must_be_kernel_keys_to_knobs(plans: object) -> None:
    with pytest.raises(ValueError, match=r"^plans must map kernel keys to knobs \(\{str: \{knob: value\}\}\), "
                                         r"not .*$"):
        compile_model(residual_graph(), X, config="tiny", plans=plans)


def test_the_plan_and_its_source_are_fields_of_the_kernel(default: CompiledModel,
                                                         plans: dict[str, dict[str, Any]]) -> None:
    first = next(iter(plans))
    model = compile_model(residual_graph(), X, config="tiny", plans={first: plans[first]})
    kernels = list(model.graph.kernels.values())
    assert [k.tuning for k in kernels] == [PlanSource.TUNED, PlanSource.NO_RECORD, PlanSource.NO_RECORD]
    assert dict(kernels[0].plan or {}) == plans[first] and all(k.plan for k in kernels)
    assert all(k.tuning is None and k.plan for k in default.graph.kernels.values())
    assert not any("plan" in n.placement.reason for n in model.graph.nodes if n.placement is not None)


def test_a_tuned_plan_is_built_and_lowered_once_and_that_build_is_the_programs(
        plans: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    lowered: list[Any] = []
    real = kernel_module.lower

    def counted(schedule: Any, cfg: Any) -> Any:
        ir = real(schedule, cfg)
        lowered.append(ir)
        return ir

    def no_lowering(schedule: Any, cfg: Any) -> Any:
        raise AssertionError("the program lowered a kernel again")

    monkeypatch.setattr(kernel_module, "lower", counted)
    monkeypatch.setattr(program_module, "lower", no_lowering)
    model = compile_model(residual_graph(), X, config="tiny", plans=plans)
    kernels = list(model.graph.kernels.values())
    assert [k.tuning for k in kernels] == [PlanSource.TUNED] * 3
    assert len(lowered) == 2 * len(kernels)  # the default plan (match kernels), the tuned one (lower)
    assert all(k.built is not None and dict(k.plan or {}) == plans[kernel_key(k.built.operator)]
               and any(k.built.lowered is ir for ir in lowered) for k in kernels)

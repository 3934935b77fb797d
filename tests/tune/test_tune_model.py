"""tune_model: every kernel of a model tuned into one log; the compiler's kernel keys and
plan keywords (what the graph applies) against the tuner's; the epilogue's JSON form."""

from __future__ import annotations

from openvta.compiler.ops import REGISTRY

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import openvta
from openvta import tune
from openvta.compiler import AluStage, ChannelOperand, Epilogue, TensorOperand, conv2d, dense, elementwise
from openvta.compiler.kernel_key import PLAN_KNOBS, kernel_key, plan_kwargs, plan_refusals
from openvta.compiler.ops.dense import DensePlan
from openvta.graph.passes.match_kernels import group_kernels
from openvta.graph.pipeline import compile_model
from openvta.graph.summary import plans_line
from openvta.isa import AluOp, preset
from openvta.tune.records import kernel_key as records_kernel_key
from openvta.tune.records import plan_kwargs as records_plan_kwargs
from openvta.tune.records import RecordError, read_records
from openvta.tune.tune_model import ModelTuning, kernel_space, tune_model
from openvta.tune.tuner import TuneError

sys.path.insert(0, str(Path(__file__).parents[1] / "graph"))
sys.path.insert(0, str(Path(__file__).parents[1] / "compiler"))
from epilogue_strategies import epilogues  # noqa: E402
from graphs import residual_graph  # noqa: E402

TINY = preset("tiny")
X = np.random.default_rng(3).standard_normal((4, 16, 4, 4)).astype(np.float32)
RESIDUAL = Epilogue((AluStage(AluOp.MUL, ChannelOperand("scale")), AluStage(AluOp.SHR, 6),
                     AluStage(AluOp.ADD, TensorOperand("res0", "int8", (AluStage(AluOp.SHR, 1),))),
                     AluStage(AluOp.MIN, 127), AluStage(AluOp.MAX, 0)))


def _operators() -> list:
    model = compile_model(residual_graph(), X, config="tiny")
    graph_kernels = [m.build(TINY) for m in group_kernels(model.graph, TINY).values()]
    return [conv2d(TINY, ci=8, co=8, hw=4, kernel=3, pad=1), conv2d(TINY, ci=8, co=8, hw=4, kernel=3, pad=1,
                                                                     vthreads=2, epilogue=RESIDUAL),
            dense(TINY, batch=1, in_features=16, out_features=12, shift=None, clip=None, epilogue=RESIDUAL),
            elementwise(TINY, batch=2, channels=12, shift=4, bias=True, relu=True), *graph_kernels]


def test_the_compilers_kernel_key_is_the_tuners() -> None:
    ops = _operators()
    keys = [kernel_key(op) for op in ops]
    assert keys == [records_kernel_key(op) for op in ops]
    assert len(set(keys)) == len(keys)
    assert any("res0:int8" in key for key in keys[4:])  # a graph kernel with its residual add


def test_the_compilers_plan_keywords_are_the_tuners() -> None:
    for op in _operators():
        space = kernel_space(op)
        assert [knob.name for knob in space.knobs] == list(PLAN_KNOBS[op.name])
        for index in space.valid_indices()[:5]:
            knobs = space.get(index)
            assert plan_kwargs(op.name, knobs) == records_plan_kwargs(op.name, knobs)


def test_plan_kwargs_refuses_another_operator_or_other_knobs() -> None:
    with pytest.raises(ValueError, match=rf"^a tuned plan is for {', '.join(REGISTRY)}, not 'pool'$"):
        plan_kwargs("pool", {})
    with pytest.raises(ValueError, match=r"^a dense plan sets exactly the knobs nb, ob, kb, vthreads, not nb, ob$"):
        plan_kwargs("dense", {"nb": 1, "ob": 1})


def test_plan_refusals_are_the_planners_checks_of_a_given_plan() -> None:
    assert plan_refusals(conv2d(TINY, ci=8, co=8, hw=4, kernel=3, pad=1)) == []
    assert plan_refusals(dense(TINY, batch=1, in_features=16, out_features=16, plan=DensePlan(1, 4, 4, 3),
                               vthreads=3)) == ["thread split: 3 threads must divide the whole output tiles "
                                                "(4 in tiles of 4)"]
    assert plan_refusals(elementwise(TINY, batch=2, channels=12, relu=True)) == []  # the factory's choice
    big = elementwise(TINY, batch=2, channels=768, relu=True, block=192)
    assert plan_refusals(big) == ["acc buffer overflow: 1 thread × 576 = 576 entries > 256"]


@settings(max_examples=60, deadline=None)
@given(epilogues())
def test_an_epilogue_survives_its_json_form(epilogue: Epilogue) -> None:
    text = json.dumps(epilogue.to_json())
    assert Epilogue.from_json(json.loads(text)) == epilogue


@pytest.mark.parametrize(("data", "message"), [
    ([], r"^epilogue JSON must be an object \{'stages': \[\.\.\.\]\}, not \[\]$"),
    ({"stages": [{"op": 3}]}, r"^epilogue stage 0 must be an object \{'op', 'operand'\}, not \{'op': 3\}$"),
    ({"stages": [{"op": 3, "operand": 1.5}]},
     r"^epilogue stage 0 operand must be an integer, \{'name'\} or \{'name', 'dtype', 'stages'\}, not 1\.5$"),
    ({"stages": [{"op": "SHR", "operand": 1}]}, r"^epilogue stage 0 op must be an ALU op number, not 'SHR'$"),
    ({"stages": [{"op": 3, "operand": 99}]}, r"^a SHR amount must be in -32\.\.31, not 99$"),
])
def test_a_malformed_epilogue_json_is_one_line(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Epilogue.from_json(data)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModelTuning, Path]:
    log = tmp_path_factory.mktemp("tune") / "residual.jsonl"
    return tune_model(residual_graph(), X, config="tiny", trials_per_kernel=5, tuner="random", log=log,
                      seed=1), log


def test_tune_model_tunes_each_distinct_kernel_into_one_log(tuned: tuple[ModelTuning, Path]) -> None:
    tuning, log = tuned
    kernels = group_kernels(tuning.model.graph, TINY)
    assert [k.names for k in tuning.kernels] == [(m.name,) for m in kernels.values()]
    assert [k.key for k in tuning.kernels] == [kernel_key(m.build(TINY)) for m in kernels.values()]
    records = read_records(log)
    assert [r.kernel for r in records] == [r.kernel for k in tuning.kernels for r in k.result.records]
    assert all(len(k.result.records) == 5 for k in tuning.kernels)
    for kernel in tuning.kernels:
        assert kernel.default_cycles is not None and kernel.tuned_cycles <= kernel.default_cycles
        assert kernel.tuned_cycles == min(r.cycles for r in kernel.result.records if r.ok)
    residual = [r for r in records if "res0" in r.kernel][0]
    assert Epilogue.from_json(residual.params["epilogue"]) == kernels[max(kernels)].epilogue
    assert tune.best_plans(log) == {k.key: k.knobs for k in tuning.kernels}


def test_tune_model_resumes_from_its_log(tuned: tuple[ModelTuning, Path]) -> None:
    tuning, log = tuned
    again = tune_model(tuning.model, config="tiny", trials_per_kernel=5, tuner="random", log=log, seed=1)
    assert [k.result.jobs for k in again.kernels] == [0] * len(tuning.kernels)
    assert [k.knobs for k in again.kernels] == [k.knobs for k in tuning.kernels]


def test_compile_model_with_the_records_is_not_slower_and_computes_the_same(
        tuned: tuple[ModelTuning, Path]) -> None:
    tuning, log = tuned
    model = openvta.compile_model(residual_graph(), X, config="tiny", records=log)
    assert plans_line(model.graph) == "plans: 3 kernels tuned from records, 0 default (no record: 0, refused: 0)"
    image = np.random.default_rng(5).standard_normal((1, 16, 4, 4)).astype(np.float32)
    before, after = tuning.model.run(image, backend="cycle"), model.run(image, backend="cycle")
    assert np.array_equal(after["y"], model.reference(image)["y"])
    assert np.array_equal(after["y"], tuning.model.reference(image)["y"])
    assert after.report.cycles <= before.report.cycles


def test_compile_model_records_must_be_a_tuning_log(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match=rf"^records file {re.escape(str(tmp_path))}/none\.jsonl does not exist$"):
        openvta.compile_model(residual_graph(), X, config="tiny", records=tmp_path / "none.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"kernel": 1}\n')
    with pytest.raises(RecordError, match=rf"^{re.escape(str(tmp_path))}/bad\.jsonl line 1: not a tuning record "
                                          r"\(a record needs .*\)$"):
        openvta.compile_model(residual_graph(), X, config="tiny", records=tmp_path / "bad.jsonl")


def test_tune_model_table(tuned: tuple[ModelTuning, Path]) -> None:
    lines = tuned[0].format().splitlines()
    assert lines[0].split() == ["kernel", "x", "trials", "default", "tuned", "speed-up", "knobs"]
    assert len(lines) == 2 + len(tuned[0].kernels)
    assert re.fullmatch(r"kernels alone: [\d,]+ cycles with the default plans, [\d,]+ tuned \(\d\.\d{3}x\)",
                        lines[-1])


def test_tune_model_reports_progress_per_kernel() -> None:
    compiled = compile_model(residual_graph(), X, config="tiny")
    seen: list[tuple[str, int, int | None]] = []
    after: list[tuple[str, int, int]] = []
    tuning = tune_model(compiled, trials_per_kernel=2, tuner="grid", progress=lambda *a: seen.append(a),
                        on_kernel=lambda k, i, n: after.append((k.names[0], i, n)))
    names = [k.names[0] for k in tuning.kernels]
    assert after == [(name, index, 3) for index, name in enumerate(names)]
    assert [what.split(":")[0] for what, _, _ in seen] == [f"kernel {i + 1}/3 {name.split('+')[0]} "
                                                          f"+{name.count('+')}" for i, name in enumerate(names)]
    assert all(re.fullmatch(r"trials, best [\d,]+ cycles", what.split(": ")[1]) and total == 2
               for what, _, total in seen)


def test_tune_model_needs_calibration_for_a_model_to_compile_only() -> None:
    with pytest.raises(TuneError, match=r"^tune_model needs calibration data to compile the model "
                                        r"\(or a compiled model\)$"):
        tune_model(residual_graph(), config="tiny")
    compiled = compile_model(residual_graph(), X, config="tiny")
    with pytest.raises(TuneError, match=r"^tune_model takes calibration data with a model to compile, not "
                                        r"with a compiled model$"):
        tune_model(compiled, X)
    cpu = compile_model(residual_graph(), X, config="tiny", cpu_ops=["Conv"])
    with pytest.raises(TuneError, match=r"^model residual has no accelerator kernel to tune$"):
        tune_model(cpu)


DIGITS = Path(__file__).parents[2] / "examples" / "digits"


def test_the_tune_model_command_then_compile_with_its_records(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from openvta.cli import main

    sys.path.insert(0, str(DIGITS))
    from digits_data import load_split

    np.savez(tmp_path / "calib.npz", image=load_split()[0][:32])
    log = tmp_path / "digits.jsonl"
    args = ["tune", "model", str(DIGITS / "digits.onnx"), "--calibration", str(tmp_path / "calib.npz"),
            "--config", "tiny", "--trials-per-kernel", "3", "--tuner", "random", "--log", str(log)]
    assert main(args) == 0
    printed = capsys.readouterr().out.splitlines()
    kernels = [line for line in printed if line.startswith("kernel ") and " trials, " in line]
    assert kernels and all(re.fullmatch(r"kernel \d/\d \S+ \(x1\): 3 trials, 3 measured in [\d.]+ s; "
                                        r"default [\d,]+, tuned [\d,]+ cycles", line) for line in kernels)
    assert printed[-1] == f"records written to {log}; openvta model compile ... --records {log} uses them"
    assert main([*args, "--quiet"]) == 0 and capsys.readouterr().out == ""  # resumed: nothing measured
    out = tmp_path / "digits.ovta"
    assert main(["model", "compile", str(DIGITS / "digits.onnx"), "--calibration", str(tmp_path / "calib.npz"),
                 "--config", "tiny", "--records", str(log), "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        f"plans: {len(kernels)} kernels tuned from records, 0 default (no record: 0, refused: 0) ({log})"
    assert main(["model", "compile", str(DIGITS / "digits.onnx"), "--calibration", str(tmp_path / "calib.npz"),
                 "--records", str(tmp_path / "none.jsonl"), "-o", str(out)]) == 1
    assert capsys.readouterr().err == f"openvta: error: records file {tmp_path / 'none.jsonl'} does not exist\n"


def test_a_model_log_trains_the_cost_model_of_another_kernel(tuned: tuple[ModelTuning, Path]) -> None:
    # records of fused kernels hold their epilogue as JSON: features read it back
    tuning, log = tuned
    space = tuning.kernels[-1].result.space
    learnt = tune.tuner._transfer(space, [log])
    assert learnt is not None
    assert len(learnt[1]) == sum(r.ok for r in read_records(log) if r.operator == space.operator)

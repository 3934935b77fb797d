"""Measurement jobs: the same cycles as the facade, and every kind of error recorded."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import openvta
from openvta import tune
from openvta.runtime import Result, register_backend
from openvta.tune.measure import OPERAND_SEED, MeasureJob, run_job

SPACE = tune.space("conv2d", config="tiny", hw=8, ci=16, co=16, kernel=3, pad=1)
DEFAULT = {"cob": 4, "yb": 4, "xb": 8, "icb": 4, "vthreads": 1, "split": "co"}  # the planner's choice


def _job(knobs: dict[str, object], **options: object) -> MeasureJob:
    return MeasureJob("conv2d", SPACE.params, SPACE.cfg.to_dict(), knobs, **options)


def test_a_job_measures_what_the_facade_measures() -> None:
    knobs = {"cob": 2, "yb": 4, "xb": 8, "icb": 2, "vthreads": 2, "split": "co"}
    outcome = run_job(_job(knobs))
    op = SPACE.operator_for(SPACE.index_of(knobs))
    inputs = openvta.api.random_operands(op, OPERAND_SEED)
    result = openvta.simulate(op.build(inputs), backend="cycle")
    assert np.array_equal(result["out"], op.reference(inputs))
    assert result.report is not None
    assert outcome == tune.Outcome(cycles=result.report.cycles, utilization=result.report.utilization)


def test_the_planners_choice_is_the_default() -> None:
    assert SPACE.get(SPACE.default_index()) == DEFAULT


def test_a_job_pickles_as_plain_data() -> None:
    job = _job({"cob": 2, "yb": 4, "xb": 8, "icb": 2, "vthreads": 1, "split": "co"}, max_cycles=10)
    assert pickle.loads(pickle.dumps(job)) == job


def test_a_run_past_the_budget_is_a_timeout() -> None:
    outcome = run_job(_job({"cob": 2, "yb": 4, "xb": 8, "icb": 2, "vthreads": 1, "split": "co"}, max_cycles=100))
    assert outcome == tune.Outcome(error={"kind": "timeout", "message": "more than 100 cycles (the budget)"})


def test_a_program_over_the_instruction_budget_is_refused_when_lowered() -> None:
    outcome = run_job(_job({"cob": 1, "yb": 1, "xb": 1, "icb": 1, "vthreads": 1, "split": "co"}, max_insns=100))
    assert outcome.cycles is None and outcome.error is not None
    assert outcome.error["kind"] == "instruction budget"
    assert outcome.error["message"].startswith("check size: the program would have at least ")


class _Corrupting:
    """The functional back end, with one output byte flipped: a wrong answer."""

    def __init__(self, **options: object) -> None:
        from openvta.sim.functional import FunctionalBackend

        self.inner = FunctionalBackend()

    def run(self, program: openvta.Program) -> Result:
        result = self.inner.run(program)
        out = program.symbols["out"]
        result.dram[out.addr] ^= 0x5A
        result.counters["cycles"] = 1
        return result


def test_a_wrong_answer_is_an_error_never_a_measurement() -> None:
    register_backend("corrupting", _Corrupting)
    outcome = run_job(_job(DEFAULT, backend="corrupting"))
    assert outcome == tune.Outcome(error={"kind": "wrong answer",
                                          "message": "1 of 1024 output elements differ from the reference"})


def test_a_back_end_without_a_cycle_count_is_a_run_error() -> None:
    outcome = run_job(_job(DEFAULT, backend="functional"))
    assert outcome == tune.Outcome(error={"kind": "run error",
                                          "message": "back end functional reports no cycle count"})


def test_a_configuration_the_space_refuses_is_refused_by_lowering_too() -> None:
    knobs = {"cob": 4, "yb": 8, "xb": 8, "icb": 4, "vthreads": 1, "split": "co"}
    assert SPACE.check(SPACE.index_of(knobs)) == ["inp buffer overflow: 1 thread × 400 = 400 entries > 256",
                                                  "acc buffer overflow: 1 thread × 260 = 260 entries > 256"]
    outcome = run_job(_job(knobs))
    assert outcome.error is not None and outcome.error["kind"] == "buffer overflow"
    assert outcome.error["message"].startswith("check buffers: the schedule does not fit: the inp buffer needs ")


@pytest.mark.rtl
@pytest.mark.slow
def test_a_job_measures_on_the_rtl_too() -> None:
    space = tune.space("dense", layer="dense_1x16x16", config="tiny")
    knobs = space.get(space.default_index())
    jobs = {backend: MeasureJob("dense", space.params, space.cfg.to_dict(), knobs, backend=backend,
                                max_cycles=10_000) for backend in ("cycle", "rtl")}
    model, rtl = run_job(jobs["cycle"]), run_job(jobs["rtl"])
    assert rtl.error is None and model.cycles is not None and rtl.cycles is not None
    assert abs(rtl.cycles - model.cycles) <= 0.05 * rtl.cycles  # the stated model-vs-RTL tolerance


class _Failing:
    def __init__(self, **options: object) -> None:
        pass

    def run(self, program: openvta.Program) -> Result:
        raise RuntimeError("the board stopped answering\nsecond line")


def test_a_failing_back_end_is_a_run_error() -> None:
    register_backend("failing", _Failing)
    outcome = run_job(_job(DEFAULT, backend="failing"))
    assert outcome == tune.Outcome(error={"kind": "run error",
                                          "message": "RuntimeError: the board stopped answering"})



class _CyclesOnly:
    """The cycle model, reporting only the cycle counter (a board image built with
    ``counters=cycles``)."""

    def __init__(self, **options: object) -> None:
        from openvta.sim.cycle import CycleBackend

        self.inner = CycleBackend(**options)

    def run(self, program: openvta.Program) -> Result:
        result = self.inner.run(program)
        result.counters = {"cycles": result.counters["cycles"]}
        return result


def test_an_image_without_a_mac_counter_has_unknown_utilization() -> None:
    register_backend("cycles-only", _CyclesOnly)
    outcome = run_job(_job(DEFAULT, backend="cycles-only"))
    assert outcome.error is None and outcome.cycles == run_job(_job(DEFAULT)).cycles
    assert outcome.utilization is None  # unknown, not 0

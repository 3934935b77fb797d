"""Records: JSON lines round trip, the best plan per kernel, malformed files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import openvta
from openvta import tune
from openvta.compiler.ops.conv2d import Conv2dPlan
from openvta.tune.records import OPENVTA_VERSION, Record, append_records, best_plans, plan_kwargs, read_records

SPACE = tune.space("dense", layer="dense_1x16x16", config="tiny")


def _record(index: int, cycles: int | None, *, backend: str = "cycle", error: str | None = None,
            openvta_version: str = OPENVTA_VERSION) -> Record:
    return Record(SPACE.kernel, "dense", SPACE.params, SPACE.cfg.to_dict(), backend, SPACE.get(index), index,
                  cycles, None if cycles is None else 0.5,
                  None if error is None else {"kind": error, "message": "m"}, openvta=openvta_version)


def test_a_record_is_one_json_line_that_reads_back_equal(tmp_path: Path) -> None:
    records = [_record(8, 298), _record(4, None, error="timeout")]
    append_records(tmp_path / "a" / "log.jsonl", records)
    lines = (tmp_path / "a" / "log.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["knobs"] == {"nb": 1, "ob": 4, "kb": 4, "vthreads": 1}
    assert json.loads(lines[0])["params"]["clip"] == [0, 127]
    assert read_records(tmp_path / "a" / "log.jsonl") == records  # clip reads back as a tuple


def test_best_plans_takes_the_fewest_cycles_with_the_right_answer(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    append_records(log, [_record(8, 298), _record(5, 200, error="wrong answer"), _record(7, 250),
                         _record(2, 250), _record(1, 100, backend="rtl"), _record(3, 90, openvta_version="0.0.1")])
    assert best_plans(log, backend="cycle") == {SPACE.kernel: SPACE.get(2)}  # a tie: the lower id
    assert best_plans(log) == {SPACE.kernel: SPACE.get(1)}
    assert best_plans(log, backend="board") == {}


def test_plan_kwargs_build_the_planners_types() -> None:
    knobs = {"cob": 2, "yb": 4, "xb": 8, "icb": 1, "vthreads": 2, "split": "y"}
    assert plan_kwargs("conv2d", knobs) == {"vthreads": 2, "plan": Conv2dPlan(2, 4, 8, 1, 2, "y")}
    assert plan_kwargs("elementwise", {"block": 2, "vthreads": 1}) == {"block": 2, "vthreads": 1}


def test_the_kernel_key_of_an_operator_ignores_its_schedule() -> None:
    one = openvta.operator("conv2d", config="tiny", hw=8, ci=16, co=16, kernel=3, pad=1)
    two = openvta.operator("conv2d", config="tiny", hw=8, ci=16, co=16, kernel=3, pad=1, vthreads=2)
    other = openvta.operator("conv2d", config="tiny", hw=8, ci=16, co=16, kernel=3, pad=1, shift=7)
    assert tune.kernel_key(one) == tune.kernel_key(two) != tune.kernel_key(other)
    assert tune.kernel_key(one) != tune.kernel_key(openvta.operator("conv2d", config="small", hw=8, ci=16,
                                                                     co=16, kernel=3, pad=1))


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", r"^.*log\.jsonl line 2: not a tuning record \(Expecting property name enclosed in double "
                  r"quotes: line 1 column 2 \(char 1\)\)$"),
    ("[1, 2]", r"^.*log\.jsonl line 2: not a tuning record \(a record is a JSON object, not list\)$"),
    ('{"kernel": "k"}', r"^.*log\.jsonl line 2: not a tuning record \(a record needs operator, params, "
                        r"hardware, backend, knobs, index, cycles, utilization, error, version, openvta\)$"),
])
def test_a_malformed_line_is_one_error_naming_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    log = tmp_path / "log.jsonl"
    append_records(log, [_record(8, 298)])
    with open(log, "a") as handle:
        handle.write(line + "\n")
    with pytest.raises(tune.RecordError, match=message):
        best_plans(log)


def test_a_record_with_an_unknown_field_or_a_bad_object_is_refused(tmp_path: Path) -> None:
    value = json.loads(_record(8, 298).to_json())
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({**value, "colour": 1}) + "\n")
    with pytest.raises(tune.RecordError, match=r"line 1: not a tuning record \(a record has no field 'colour'\)$"):
        read_records(log)
    log.write_text(json.dumps({**value, "knobs": [1]}) + "\n")
    with pytest.raises(tune.RecordError, match=r"line 1: not a tuning record \(a record's knobs is a JSON "
                                               r"object, not list\)$"):
        read_records(log)


def test_a_missing_records_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(tune.RecordError, match=r"^records file .*nowhere\.jsonl does not exist$"):
        best_plans(tmp_path / "nowhere.jsonl")
    assert read_records(tmp_path / "nowhere.jsonl", missing_ok=True) == []

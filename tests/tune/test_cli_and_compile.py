"""``openvta tune``, ``compile(records=)`` and ``openvta compile --records``."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

import openvta
from openvta import tune
from openvta.cli import main
from openvta.progress import ProgressDisplay
from openvta.tune.records import best_plans, plan_kwargs, read_records

SHAPE: dict[str, Any] = {"batch": 4, "in_features": 64, "out_features": 64}
ARGS = ["--batch", "4", "--in", "64", "--out", "64", "--config", "tiny"]


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tune") / "logs" / "dense.jsonl"
    assert main(["tune", "dense", *ARGS, "--trials", "12", "--tuner", "random", "--log", str(path),
                 "--quiet"]) == 0
    return path


def test_the_command_writes_what_the_api_writes(log: Path, tmp_path: Path) -> None:
    space = tune.space("dense", config="tiny", **SHAPE)
    tune.tune(space, trials=12, tuner="random", log=tmp_path / "api.jsonl")
    assert log.read_text() == (tmp_path / "api.jsonl").read_text()


def test_the_command_prints_a_table_against_the_default(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "dense", *ARGS, "--trials", "12", "--tuner", "random", "--log", str(log)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("tuned dense(batch=4, in_features=64, out_features=64; SHR 8, ADD bias[c], "
                               "MIN 127, MAX 0) on tiny@") and ": 12 trials, 0 measured in " in lines[0]
    assert lines[1].split() == ["rank", "nb", "ob", "kb", "vthreads", "cycles", "util", "speed-up"]
    records = read_records(log)
    best = min((r for r in records if r.ok), key=lambda r: (r.cycles, r.index))
    assert lines[2].split()[:6] == ["1", *(str(v) for v in best.knobs.values()), f"{best.cycles:,}"]
    assert lines[-3].split()[0] == "default" and lines[-3].split()[-1] == "1.000x"
    assert lines[-2] == f"errors: timeout {sum(not r.ok for r in records)}"
    assert lines[-1] == f"records written to {log}"


def test_the_progress_line_shows_trials_and_the_best() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    with ProgressDisplay("tune dense", console=console, delay_s=0) as show:
        tune.tune(tune.space("dense", config="tiny", **SHAPE), trials=9, tuner="grid", batch_size=4,
                  progress=show)
    drawn = screen.getvalue()
    assert "tune dense: trials, best " in drawn and " cycles" in drawn and "/ 9" in drawn


def test_compile_applies_the_best_plan_of_the_log(log: Path) -> None:
    op = openvta.operator("dense", config="tiny", **SHAPE)
    knobs = best_plans(log)[tune.kernel_key(op)]
    tuned = openvta.operator("dense", config="tiny", records=log, **SHAPE)
    assert tuned.plan == plan_kwargs("dense", knobs)["plan"] and tuned.notes["tuning"] == f"tuned plan from {log}"
    program = openvta.compile("dense", config="tiny", records=log, seed=0, **SHAPE)
    inputs = openvta.api.random_operands(tuned, 0)
    assert np.array_equal(openvta.simulate(program, backend="functional")["out"], tuned.reference(inputs))
    assert program.insn_count == tuned.build(inputs).insn_count


def test_compile_without_a_record_for_the_kernel_keeps_the_default_and_warns(log: Path) -> None:
    with pytest.warns(tune.TuningNote, match=r"^.*dense\.jsonl has no valid record for dense\(batch=4, in_features=64, "
                                             r"out_features=64; SHR 7, .*\) on tiny@[0-9a-f]{8}: the default plan is "
                                             r"used$"):
        op = openvta.operator("dense", config="tiny", records=log, shift=7, **SHAPE)
    assert op.plan == openvta.operator("dense", config="tiny", shift=7, **SHAPE).plan


def test_records_and_a_schedule_are_exclusive(log: Path) -> None:
    with pytest.raises(TypeError, match=r"^dense takes records= or the schedule \(vthreads\), not both$"):
        openvta.operator("dense", config="tiny", records=log, vthreads=2, **SHAPE)
    op = openvta.operator("dense", config="tiny", **SHAPE)
    with pytest.raises(TypeError, match=r"^compile takes operator parameters with an operator name, not with an "
                                        r"Operator \(records\)$"):
        openvta.compile(op, records=log)


def test_compile_command_with_records(log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tuned.npz"
    assert main(["compile", "dense", *ARGS, "--records", str(log), "-o", str(out), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    tuned = openvta.operator("dense", config="tiny", records=log, **SHAPE)
    assert openvta.load_program(out).insn_count == tuned.build().insn_count
    assert main(["compile", "dense", *ARGS, "--shift", "7", "--records", str(log), "-o", str(out), "--quiet"]) == 0
    assert capsys.readouterr().err.startswith("openvta: note: ")


@pytest.mark.parametrize(("argv", "message"), [
    (["tune", "dense", "--batch", "4"], "openvta: error: tune dense needs --in, --out (or --layer)\n"),
    (["tune", "dense", *ARGS, "--trials", "0"], "openvta: error: trials must be a positive integer, not 0\n"),
    (["tune", "dense", *ARGS, "--executor", "gpu"],
     "openvta: error: executor must be 'serial', 'local[:N]', 'dask://host:port' or a "
     "concurrent.futures.Executor, not 'gpu'\n"),
    (["tune", "dense", *ARGS, "--backend", "board"],
     "openvta: error: --backend board needs --port (the board's serial port)\n"),
    (["tune", "dense", *ARGS, "--port", "/dev/ttyUSB0"], "openvta: error: --port needs --backend board\n"),
    (["compile", "dense", *ARGS, "--records", "nowhere.jsonl", "-o", "x.npz"],
     "openvta: error: records file nowhere.jsonl does not exist\n"),
])
def test_command_errors_are_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    assert capsys.readouterr().err == message


def test_a_malformed_log_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    assert main(["tune", "dense", *ARGS, "--log", str(bad)]) == 1
    assert capsys.readouterr().err == (f"openvta: error: {bad} line 1: not a tuning record (a record needs kernel, "
                                       "operator, params, hardware, backend, knobs, index, cycles, utilization, "
                                       "error, version, openvta)\n")


def test_the_knobs_are_not_options_of_tune(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["tune", "dense", *ARGS, "--vthreads", "2"])
    assert "unrecognized arguments: --vthreads 2" in capsys.readouterr().err

"""The command line as a tool people trust: help, version, folders, Ctrl-C, read, progress."""

from __future__ import annotations

import argparse
import io
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

import openvta
from openvta.cli import _parser, main
from openvta.progress import ProgressDisplay
from openvta.runtime import Device, load_result


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("openvta has no subcommands")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"openvta {openvta.__version__}\n"


def _all_commands(parser: argparse.ArgumentParser, prefix: str) -> dict[str, argparse.ArgumentParser]:
    found = {prefix: parser}
    if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
        for name, sub in _subparsers(parser).items():
            found.update(_all_commands(sub, f"{prefix} {name}"))
    return found


def test_every_option_of_every_subcommand_has_a_help_line() -> None:
    from openvta.compiler.ops import REGISTRY

    commands = _all_commands(_parser(), "openvta")
    expected = {"run", "read", "disasm", "compile", "verilog", "bitstream", "config"}
    assert {f"openvta {c}" for c in expected} <= set(commands)
    assert {f"openvta compile {name}" for name in REGISTRY} <= set(commands)
    for name, sub in commands.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name} {'/'.join(action.option_strings) or action.dest}"


@pytest.fixture
def dense_file(tmp_path: Path) -> Path:
    path = tmp_path / "d.npz"
    openvta.compile("dense", batch=1, in_features=8, out_features=8, config="tiny", seed=1).save(path)
    return path


def test_missing_output_folders_are_created(dense_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    assert main(["run", str(dense_file), "--backend", "cycle", "--quiet", "-o", str(out / "r.npz"),
                 "--trace", str(out / "t" / "c.json"), "--timeline", str(out / "p" / "c.png")]) == 0
    assert (out / "r.npz").is_file() and (out / "t" / "c.json").is_file()
    assert (out / "p" / "c.png").is_file()
    assert main(["compile", "dense", "--batch", "1", "--in", "8", "--out", "8", "--config",
                 "tiny", "--quiet", "-o", str(tmp_path / "new" / "p.npz")]) == 0
    assert (tmp_path / "new" / "p.npz").is_file()


def test_an_output_that_is_a_folder_is_one_line(dense_file: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(dense_file), "-o", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"openvta: error: output {tmp_path} is a folder; give a file name\n"


def test_an_output_folder_that_cannot_be_made_is_one_line(dense_file: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    assert main(["run", str(dense_file), "-o", str(tmp_path / "file" / "r.npz")]) == 1
    err = capsys.readouterr().err
    assert re.fullmatch(rf"openvta: error: cannot write {re.escape(str(tmp_path / 'file'))}: .+\n", err)


def test_ctrl_c_ends_with_one_line_and_status_130(dense_file: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(self: Device, program: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Device, "run", interrupted)
    assert main(["run", str(dense_file)]) == 130
    assert capsys.readouterr().err == "openvta: interrupted\n"


@pytest.mark.parametrize("value", ["-5", "0"])
def test_max_cycles_must_be_positive(dense_file: Path, value: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(dense_file), "--backend", "cycle", "--max-cycles", value])
    assert exit_.value.code == 2
    assert f"argument --max-cycles: must be a positive integer, not {value}" in capsys.readouterr().err


def test_layer_and_shape_flags_conflict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "conv2d", "--layer", "resnet18.C5", "--hw", "8", "--ci", "8",
                 "-o", str(tmp_path / "x.npz")]) == 1
    assert capsys.readouterr().err == ("openvta: error: --layer resnet18.C5 fixes the shape; give "
                                       "either --layer or --ci, --hw, not both\n")
    assert not (tmp_path / "x.npz").exists()


def test_read_gives_the_logical_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    op = openvta.operator("conv2d", ci=8, co=8, hw=4, kernel=3, pad=1, config="tiny")
    rng = np.random.default_rng(3)
    inputs = {"data": rng.integers(-128, 128, (1, 8, 4, 4), dtype=np.int8),
              "weight": rng.integers(-128, 128, (8, 8, 3, 3), dtype=np.int8),
              "bias": rng.integers(-100, 100, (8,), dtype=np.int32)}
    op.build(inputs).save(tmp_path / "p.npz")
    assert main(["run", str(tmp_path / "p.npz"), "--quiet", "-o", str(tmp_path / "r.npz")]) == 0
    assert main(["read", str(tmp_path / "r.npz"), "out", "-o", str(tmp_path / "o" / "out.npy")]) == 0
    assert capsys.readouterr().out == f"out: int8[1, 8, 4, 4] written to {tmp_path / 'o' / 'out.npy'}\n"
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "out.npy"), op.reference(inputs))
    assert main(["read", str(tmp_path / "r.npz"), "out", "--packed", "-o", str(tmp_path / "p.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), load_result(tmp_path / "r.npz").read("out"))
    capsys.readouterr()
    assert main(["read", str(tmp_path / "r.npz"), "out"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("[[[[") and printed.count("\n") > 8


def test_read_names_the_symbols_that_exist(dense_file: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(dense_file), "--quiet", "-o", str(tmp_path / "r.npz")]) == 0
    assert main(["read", str(tmp_path / "r.npz"), "nope"]) == 1
    assert capsys.readouterr().err == ("openvta: error: result has no symbol 'nope' "
                                       "(symbols: bias, data, out, weight)\n")


def test_progress_is_drawn_on_a_terminal_only() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    program = openvta.compile("conv2d", layer="resnet18.C11", config="default", seed=0)
    with ProgressDisplay("cycle", console=console, delay_s=0) as show:
        Device("cycle", progress=show).run(program)
    drawn = screen.getvalue()
    assert "cycle: cycles" in drawn
    silent = io.StringIO()
    quiet = Console(file=silent, force_terminal=True)
    with ProgressDisplay("cycle", console=quiet, enabled=False, delay_s=0) as show:
        show("cycles", 10, None)
    assert silent.getvalue() == ""


def test_progress_waits_before_showing() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True)
    with ProgressDisplay("run", console=console, delay_s=3600) as show:
        show("instructions", 1, 2)
    assert screen.getvalue() == ""


def test_backends_report_progress_in_order() -> None:
    program = openvta.compile("conv2d", layer="resnet18.C11", config="default", seed=0)
    for backend, what, total in (("functional", "instructions", program.insn_count),
                                 ("cycle", "cycles", None)):
        calls: list[tuple[str, int, int | None]] = []
        Device(backend, progress=lambda *c, into=calls: into.append(c)).run(program)
        assert calls and {c[0] for c in calls} == {what} and {c[2] for c in calls} == {total}
        done = [c[1] for c in calls]
        assert done == sorted(done) and done[-1] > 0

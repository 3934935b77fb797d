"""The ``openvta`` command line: run, disasm, config (in-process and as a real process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openvta.blocked_gemm import read_gemm_output, reference_gemm
from openvta.cli import main
from openvta.isa import (
    Config,
    MemInsn,
    MemoryType,
    Module,
    Uop,
    assemble,
    encode_stream,
    format_insn,
    preset,
    words_to_bytes,
)
from openvta.runtime import (
    Device,
    Program,
    ProgramBuilder,
    Result,
    UopKernel,
    load_program,
    load_result,
    register_backend,
)

VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def gemm_file(tiny: Config, make_gemm: Any, tmp_path: Path) -> tuple[Path, Program, Any, Any]:
    program, a, w = make_gemm(tiny, 5, 6, 11, vthreads=2, shift=3, seed=11)
    path = tmp_path / "gemm.npz"
    program.save(path)
    return path, program, a, w


def _handmade(cfg: Config, text: str, path: Path) -> Path:
    image = words_to_bytes(encode_stream(assemble(text, cfg), cfg))
    Program(cfg, image.copy(), 0, len(image) // 16).save(path)
    return path


def _counter_lines(stdout: str) -> dict[str, int]:
    return {line.split()[0]: int(line.split()[1]) for line in stdout.splitlines()
            if line.startswith("  ")}


# -- run -----------------------------------------------------------------------------------


def test_run_writes_the_result(gemm_file: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, program, a, w = gemm_file
    out = tmp_path / "res.npz"
    assert main(["run", str(path), "--backend", "functional", "-o", str(out)]) == 0
    expected = Device("functional").run(program)
    result = load_result(out)
    np.testing.assert_array_equal(result.dram, expected.dram)
    assert result.counters == expected.counters
    np.testing.assert_array_equal(read_gemm_output(program, result.dram, 5, 6),
                                  reference_gemm(a, w, 3))
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = captured.out.splitlines()
    assert lines[0] == f"ran {program.insn_count} instructions on the functional back end"
    assert lines[-1] == f"result written to {out}"
    assert _counter_lines(captured.out) == expected.counters
    assert list(_counter_lines(captured.out)) == list(expected.counters)


def test_run_without_output(gemm_file: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, program, _, _ = gemm_file
    assert main(["run", str(path)]) == 0
    captured = capsys.readouterr()
    assert "result written" not in captured.out
    assert _counter_lines(captured.out) == Device("functional").run(program).counters
    assert list(tmp_path.iterdir()) == [path]


def test_run_quiet(gemm_file: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _, _, _ = gemm_file
    assert main(["run", str(path), "--quiet", "--output", str(tmp_path / "r.npz")]) == 0
    assert capsys.readouterr() == ("", "")
    assert (tmp_path / "r.npz").exists()


def _racy_file(cfg: Config, path: Path) -> Path:
    b = ProgramBuilder(cfg)
    x = b.tensor("x", data=np.ones((2, 1, 4), np.int8))
    b.load_2d(MemoryType.INP, 0, x, y_size=1, x_size=2)
    b.gemm(UopKernel((Uop(0, 0, 0),)))  # no token orders the load before it
    b.finish().save(path)
    return path


def test_run_reports_a_race_unless_disabled(tiny: Config, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = _racy_file(tiny, tmp_path / "racy.npz")
    assert main(["run", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("openvta: error: RaceError: race on inp buffer element 0: ")
    assert main(["run", str(path), "--no-race-check", "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")


def test_run_deadlocking_program(tiny: Config, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = _handmade(tiny, "LOAD UOP pop_prev_dep\nFINISH\n", tmp_path / "dead.npz")
    assert main(["run", str(path), "-o", str(tmp_path / "r.npz")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(
        "openvta: error: DeadlockError: deadlock: no module can make progress and FINISH "
        "has not run\n")
    assert "compute: instruction 0 (LOAD UOP pop_prev_dep) waits for a token on load→compute" \
        in captured.err
    assert not (tmp_path / "r.npz").exists()


def test_run_unfinished_program(tiny: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _handmade(tiny, "LOAD UOP push_prev_dep\nFINISH\n", tmp_path / "left.npz")
    assert main(["run", str(path)]) == 1
    assert capsys.readouterr().err == (
        "openvta: error: FinishError: instruction 1: token queues are not empty at FINISH "
        "(compute→load: 1)\n")


def test_run_invalid_encoding(tiny: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _handmade(tiny, "GEMM uop_end=1 iter_out=1 iter_in=1\n", tmp_path / "nofinish.npz")
    assert main(["run", str(path)]) == 1
    assert capsys.readouterr().err == (
        "openvta: error: EncodingError: the program has no FINISH instruction "
        "(it must end with one)\n")


def test_run_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "absent.npz"
    assert main(["run", str(path)]) == 1
    assert capsys.readouterr() == ("", f"openvta: error: program file {str(path)!r} does not exist\n")


def test_run_malformed_file(tiny: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = ProgramBuilder(tiny).finish()
    np.savez(tmp_path / "bad.npz", format=np.array("openvta-program/1"),
             config=np.array(tiny.to_json()), dram=program.dram,
             insn_addr=np.array(8, dtype=np.uint64), insn_count=np.array(1, dtype=np.uint64),
             symbols=np.array("{}"))
    assert main(["run", str(tmp_path / "bad.npz")]) == 1
    assert capsys.readouterr() == ("", "openvta: error: insn_addr must be a multiple of 16, not 8\n")


def test_run_garbage_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "junk.npz").write_bytes(b"\x00junk" * 10)
    assert main(["run", str(tmp_path / "junk.npz")]) == 1
    assert capsys.readouterr().err == (f"openvta: error: program file {str(tmp_path / 'junk.npz')!r} "
                                       "is not an openvta program (not an npz archive)\n")


def test_run_npy_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "a.npy", np.zeros(4, np.uint8))
    assert main(["run", str(tmp_path / "a.npy")]) == 1
    assert capsys.readouterr().err == (f"openvta: error: program file {str(tmp_path / 'a.npy')!r} is not an "
                                       "openvta program (a single numpy array, not an npz archive)\n")


def test_run_unknown_backend(gemm_file: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path, _, _, _ = gemm_file
    assert main(["run", str(path), "--backend", "quantum"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("openvta: error: unknown back end 'quantum'; available: ")
    assert "functional" in captured.err


class _Silent:
    """A back end without performance counters."""

    def __init__(self, **options: Any) -> None:
        pass

    def run(self, program: Program) -> Result:
        return Result(dram=program.dram.copy(), counters={})


def test_run_on_a_backend_without_counters(registry: None, gemm_file: Any, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    register_backend("silent", _Silent)
    path, program, _, _ = gemm_file
    assert main(["run", str(path), "--backend", "silent", "-o", str(tmp_path / "r.npz")]) == 0
    assert load_result(tmp_path / "r.npz").counters == {}
    assert capsys.readouterr().out.startswith(
        f"ran {program.insn_count} instructions on the silent back end\n")


def test_bad_command_lines_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["run"], ["frobnicate"], ["disasm"]):  # (a machine that does not exist: one line, status 1)
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2, argv
        assert "usage: openvta" in capsys.readouterr().err


# -- disasm ------------------------------------------------------------------------------------


def test_disasm_prints_one_line_per_instruction(gemm_file: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path, program, _, _ = gemm_file
    assert main(["disasm", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"# {program.insn_count} instructions at byte {program.insn_addr}, "
                        "config tiny")
    insns = program.instructions()
    assert len(lines) == 1 + len(insns)
    assert lines[1:] == [f"{i:6d}  {format_insn(insn)}" for i, insn in enumerate(insns)]


def test_disasm_uops(tiny: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = ProgramBuilder(tiny)
    b.dep_push(Module.COMPUTE, Module.LOAD)  # a sync LOAD UOP: no micro-ops listed
    b.gemm(UopKernel((Uop(1, 2, 3), Uop(0, 7, 255))))
    b.gemm(UopKernel((Uop(9, 8, 0),)))
    b.gemm(UopKernel((Uop(1, 2, 3), Uop(0, 7, 255))))  # resident: no LOAD UOP
    program = b.finish()
    program.save(tmp_path / "p.npz")
    assert main(["disasm", str(tmp_path / "p.npz"), "--uops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    uop_lines = [line for line in lines if line.startswith("          uop[")]
    assert uop_lines == [
        "          uop[0] dst_idx=1 src_idx=2 wgt_idx=3",
        "          uop[1] dst_idx=0 src_idx=7 wgt_idx=255",
        "          uop[2] dst_idx=9 src_idx=8 wgt_idx=0",
    ]
    insns = program.instructions()
    assert len(lines) == 1 + len(insns) + 3
    # each micro-op listing follows its LOAD UOP
    loads = [i for i, insn in enumerate(insns) if isinstance(insn, MemInsn)
             and insn.memory_type == MemoryType.UOP and insn.x_size]
    first = lines.index(f"{loads[0]:6d}  {format_insn(insns[loads[0]])}")
    assert lines[first + 1 : first + 3] == uop_lines[:2]
    second = lines.index(f"{loads[1]:6d}  {format_insn(insns[loads[1]])}")
    assert lines[second + 1] == uop_lines[2]
    # without --uops there are none
    main(["disasm", str(tmp_path / "p.npz")])
    assert "uop[" not in capsys.readouterr().out


def test_disasm_custom_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = preset("tiny").replace(DEP_QUEUE_DEPTH=4)
    ProgramBuilder(cfg).finish().save(tmp_path / "p.npz")
    assert main(["disasm", str(tmp_path / "p.npz")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith(", config custom")
    assert out.splitlines()[1] == "     0  FINISH"


def test_disasm_invalid_opcode(tiny: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dram = np.zeros(32, np.uint8)
    dram[0] = 7  # opcode 7 is not an instruction
    Program(tiny, dram, 0, 2).save(tmp_path / "p.npz")
    assert main(["disasm", str(tmp_path / "p.npz")]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("openvta: error: instruction 0: field opcode value 7 is not valid")


def test_disasm_malformed_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Result(np.zeros(4, np.uint8), {}).save(tmp_path / "r.npz")
    assert main(["disasm", str(tmp_path / "r.npz")]) == 1
    assert capsys.readouterr() == ("", (
        "openvta: error: program file format must be 'openvta-program/1', "
        "not 'openvta-result/1'\n"))


# -- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tiny", "small", "vta", "v2"])
def test_config_prints_the_preset(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", name]) == 0
    out = capsys.readouterr().out
    cfg = Config.from_json(out)
    assert cfg == preset(name) and cfg.to_dict() == preset(name).to_dict()
    assert cfg.name == name


def test_config_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config"]) == 0
    assert json.loads(capsys.readouterr().out) == preset("default").to_dict()


# -- real processes ---------------------------------------------------------------------------


def test_console_script_run_and_disasm(gemm_file: Any, tmp_path: Path) -> None:
    path, program, a, w = gemm_file
    out = tmp_path / "res.npz"
    proc = subprocess.run([str(VENV_BIN / "openvta"), "run", str(path), "-o", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (0, "")
    result = load_result(out)
    expected = Device("functional").run(load_program(path))
    np.testing.assert_array_equal(result.dram, expected.dram)
    assert result.counters == expected.counters
    np.testing.assert_array_equal(read_gemm_output(program, result.dram, 5, 6),
                                  reference_gemm(a, w, 3))
    proc = subprocess.run([sys.executable, "-m", "openvta", "disasm", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == 1 + program.insn_count


def test_console_script_error_status(tiny: Config, tmp_path: Path) -> None:
    path = _handmade(tiny, "LOAD UOP pop_prev_dep\nFINISH\n", tmp_path / "dead.npz")
    proc = subprocess.run([str(VENV_BIN / "openvta"), "run", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("openvta: error: DeadlockError: deadlock")
    proc = subprocess.run([sys.executable, "-m", "openvta", "config", "tiny"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and Config.from_json(proc.stdout) == preset("tiny")
    proc = subprocess.run([sys.executable, "-m", "openvta", "run"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage: openvta" in proc.stderr


def test_run_writes_the_output_path_it_names(gemm_file: Any, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path, _, _, _ = gemm_file
    out = tmp_path / "result"
    assert main(["run", str(path), "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"result written to {out}"
    assert out.exists()
    assert load_result(out).counters["fetch_insns"] > 0


def test_disasm_uops_outside_the_image(tiny: Config, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The listing goes on, saying where the micro-ops would be."""
    path = _handmade(tiny, "LOAD UOP dram_base=1000 y_size=1 x_size=2 x_stride=2\nFINISH\n",
                     tmp_path / "p.npz")
    assert main(["disasm", str(path)]) == 0  # without --uops the listing works
    capsys.readouterr()
    assert main(["disasm", str(path), "--uops"]) == 0
    assert ("micro-ops at bytes 4000..4007 lie outside the DRAM image (32 bytes)"
            in capsys.readouterr().out)


def test_board_back_end_needs_a_port(gemm_file: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path, _, _, _ = gemm_file
    assert main(["run", str(path), "--backend", "board"]) == 1
    assert capsys.readouterr().err == ("openvta: error: --backend board needs --port (the "
                                       "board's serial port)\n")
    assert main(["run", str(path), "--port", "/dev/null"]) == 1
    assert capsys.readouterr().err == "openvta: error: --port needs --backend board\n"


def test_run_on_the_sdram_memory(gemm_file: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``--memory sdram`` runs the cycle model with the board's SDRAM timing (slower than
    on-chip RAM, the same counters otherwise), and is refused where it means nothing."""
    path, _, _, _ = gemm_file
    assert main(["run", str(path), "--backend", "cycle"]) == 0
    on_chip = _counter_lines(capsys.readouterr().out)
    assert main(["run", str(path), "--backend", "cycle", "--memory", "sdram"]) == 0
    sdram = _counter_lines(capsys.readouterr().out)
    assert sdram["cycles"] > on_chip["cycles"]
    assert {k: v for k, v in sdram.items() if "cycles" not in k and not k.endswith("_wait")} == \
        {k: v for k, v in on_chip.items() if "cycles" not in k and not k.endswith("_wait")}
    assert main(["run", str(path), "--memory", "sdram"]) == 1
    assert capsys.readouterr().err == "openvta: error: --memory sdram needs --backend cycle or rtl\n"
    # the UP5K image's single-port DRAM: one burst at a time, never faster than two ports
    assert main(["run", str(path), "--backend", "cycle", "--memory", "spram"]) == 0
    spram = _counter_lines(capsys.readouterr().out)
    assert spram["cycles"] >= on_chip["cycles"]
    assert main(["run", str(path), "--backend", "rtl", "--memory", "spram"]) == 1
    assert capsys.readouterr().err == "openvta: error: --memory spram needs --backend cycle\n"


def test_run_with_a_lean_build(gemm_file: Any, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """The lean build's options give the cycle model a lean image's timing, exactly as
    ``LeanBuild.timing`` (with the memory's on top), and the rtl back end that image's
    RTL; elsewhere they are refused, as is a fold that does not divide the tile."""
    from openvta.isa import LeanBuild
    from openvta.hw.cosim.backend import _lean_top
    from openvta.hw.rtl.top import Top
    from openvta.isa import spram_timing, timing_for
    from openvta.sim.cycle import simulate_cycles

    path, program, _, _ = gemm_file
    cfg = program.config
    assert main(["run", str(path), "--backend", "cycle"]) == 0
    full = _counter_lines(capsys.readouterr().out)
    lean = LeanBuild(gemm_ii=2, alu_ii=2, acc_ports=1, insn_words=2)
    assert main(["run", str(path), "--backend", "cycle", "--gemm-ii", "2", "--alu-ii", "2",
                 "--acc-ports", "1", "--insn-words", "2"]) == 0
    folded = _counter_lines(capsys.readouterr().out)
    assert folded["cycles"] == simulate_cycles(program, lean.timing(timing_for(cfg))).counters["cycles"]
    assert folded["cycles"] > full["cycles"]
    assert main(["run", str(path), "--backend", "cycle", "--memory", "spram", "--gemm-ii", "2",
                 "--alu-ii", "2", "--acc-ports", "1", "--insn-words", "2"]) == 0
    on_spram = _counter_lines(capsys.readouterr().out)
    expected = simulate_cycles(program, spram_timing(cfg, lean.timing(timing_for(cfg)))).counters["cycles"]
    assert on_spram["cycles"] == expected >= folded["cycles"]
    # the rtl back end builds the lean image's RTL (its Verilator build is another test's)
    seen: dict[str, Any] = {}

    class Capture:
        def __init__(self, backend: str, **options: Any) -> None:
            seen.update(options, backend=backend)

        def run(self, program: Any) -> Any:
            seen["program"] = program
            raise SystemExit(0)

    monkeypatch.setattr("openvta.cli.Device", Capture)
    with pytest.raises(SystemExit):
        main(["run", str(path), "--backend", "rtl", "--gemm-ii", "4", "--shared-dma"])
    build = seen["program"].target.build  # the program runs on the machine it records
    assert build == LeanBuild(gemm_ii=4, shared_dma=1)
    top = _lean_top(build)(cfg)  # what the rtl back end builds for it
    assert isinstance(top, Top) and top.shared_dma
    assert top.timing == LeanBuild(gemm_ii=4).timing(timing_for(cfg))
    monkeypatch.undo()
    assert main(["run", str(path), "--gemm-ii", "2"]) == 1
    assert capsys.readouterr().err == ("openvta: error: the lean build's options (gemm_ii=2) need "
                                       "--backend cycle or rtl\n")
    assert main(["run", str(path), "--backend", "cycle", "--gemm-ii", "3"]) == 1
    assert capsys.readouterr().err == ("openvta: error: gemm_ii (the GEMM core's fold) must be a "
                                       "positive integer dividing BLOCK_OUT (4), not 3\n")

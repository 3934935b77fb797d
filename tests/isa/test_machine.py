"""One description of a machine (:mod:`openvta.isa.machine`): its text, its JSON, the timing
derived from it, and a program file that records it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import openvta
from openvta.cli import main
from openvta.isa import (MACHINES, MEMORIES, PRESETS, ConfigError, CounterSet, LeanBuild, Machine, parse_machine,
                         sdram_timing, spram_timing, timing_for)
from openvta.isa.timing import INSN_MOVE_CHOICES
from openvta.runtime import Device, ProgramError, load_program


@st.composite
def machines(draw: st.DrawFn) -> Machine:
    cfg = PRESETS[draw(st.sampled_from(sorted(PRESETS)))]
    if draw(st.booleans()) and not cfg.DRAIN_STAGES:
        cfg = cfg.replace(LOG_EPI_BUFF_SIZE=12, DRAIN_STAGES=draw(st.integers(1, 4)))
    lanes = cfg.BATCH * cfg.BLOCK_OUT
    build = LeanBuild(gemm_ii=draw(st.sampled_from([d for d in (1, 2, 4) if cfg.BLOCK_OUT % d == 0])),
                      alu_ii=draw(st.sampled_from([d for d in (1, 2, 4) if lanes % d == 0])),
                      acc_ports=draw(st.sampled_from((1, 2))), mul_cycles=draw(st.sampled_from((1, 2))),
                      uop_stage=draw(st.sampled_from((0, 1))), shared_dma=draw(st.sampled_from((0, 1))),
                      insn_words=draw(st.sampled_from(INSN_MOVE_CHOICES)))
    return Machine(cfg, build, draw(st.sampled_from(list(CounterSet))), draw(st.sampled_from(MEMORIES)))


@given(machines())
@settings(max_examples=150, deadline=None)
def test_text_and_json_give_back_the_same_machine(machine: Machine) -> None:
    assert parse_machine(machine.spec) == machine
    assert Machine.from_json(machine.to_json()) == machine
    assert parse_machine(machine.to_json()) == machine
    assert json.loads(machine.to_json())["config"] == machine.config.to_dict()


@given(machines())
@settings(max_examples=150, deadline=None)
def test_the_timing_is_the_builds_on_the_memorys(machine: Machine) -> None:
    lean = machine.build.timing(timing_for(machine.config))
    expected = {"on-chip": lean, "sdram": sdram_timing(machine.config, lean),
                "spram": spram_timing(machine.config, lean)}[machine.memory]
    assert machine.timing == expected
    assert LeanBuild.of(machine.config, machine.timing) == machine.build.__class__(
        **{**machine.build.to_dict(), "shared_dma": 0})  # the build the timing describes (shared_dma has none)


def test_presets_are_machines_and_the_board_machines_are_named() -> None:
    for name, cfg in PRESETS.items():
        assert MACHINES[name] == Machine(cfg) and MACHINES[name].is_plain
    board, v2 = MACHINES["ulx3s"], MACHINES["ulx3s-v2"]
    assert board.name == "ulx3s" and board.spec == "ulx3s" and not board.is_plain
    assert board.config == PRESETS["small"] and board.memory == "sdram" and board.counters is CounterSet.NONE
    assert board.build == LeanBuild(alu_ii=2, acc_ports=1, mul_cycles=2, uop_stage=1)
    assert v2.config.replace(LOG_EPI_BUFF_SIZE=0, DRAIN_STAGES=0, DRAIN_OPS=0) == board.config
    assert (v2.build, v2.counters, v2.memory) == (board.build, board.counters, board.memory)
    assert parse_machine("ulx3s:gemm_ii=2").spec == "ulx3s:gemm_ii=2"
    assert parse_machine("small:DRAIN_OPS=ADD/SHR/MUL/RSHR/CLIP,LOG_EPI_BUFF_SIZE=12,DRAIN_STAGES=5,alu_ii=2,"
                         "acc_ports=1,mul_cycles=2,uop_stage=1,counters=none,memory=sdram") == v2


def test_a_json_file_is_a_machine(tmp_path: Path) -> None:
    path = tmp_path / "board.json"
    path.write_text(MACHINES["ulx3s"].to_json())
    assert parse_machine(str(path)) == MACHINES["ulx3s"]
    path.write_text(json.dumps({"config": PRESETS["tiny"].to_dict()}))
    assert parse_machine(str(path)) == MACHINES["tiny"]  # build, counters and memory default


@pytest.mark.parametrize("text, message", [
    ("huge", "machine must be one of default, vta, v2, small, tiny, ulx3s, ulx3s-v2, not 'huge'"),
    ("tiny:FOO=1", "machine 'tiny:FOO=1': 'FOO=1' is not KEY=VALUE with a key of LOG_INP_WIDTH"),
    ("tiny:LOG_BLOCK=x", "machine 'tiny:LOG_BLOCK=x': LOG_BLOCK must be an integer, not 'x'"),
    ("tiny:LOG_BLOCK=9", "machine 'tiny:LOG_BLOCK=9': LOG_BLOCK must be between 1 and 6, not 9"),
    ("tiny:alu_ii=3", "machine 'tiny:alu_ii=3': alu_ii (the ALU's fold) must be a positive integer dividing "
                      "BATCH·BLOCK_OUT (4), not 3"),
    ("tiny:acc_ports=3", "machine 'tiny:acc_ports=3': acc_ports must be 1 or 2, not 3"),
    ("tiny:memory=ddr", "machine 'tiny:memory=ddr': memory must be one of on-chip, sdram, spram, not 'ddr'"),
    ("tiny:counters=few", "machine 'tiny:counters=few': counters must be one of 'all', 'cycles', 'none', not 'few'"),
    ("small:DRAIN_OPS=FOO", "machine 'small:DRAIN_OPS=FOO': DRAIN_OPS 'FOO': 'FOO' is not a drain operation"),
    ("missing.json", "machine file missing.json: No such file or directory"),
    ('{"config": 1}', "configuration must be a JSON object, not int"),
    ('{"config": {}, "colour": 1}', "a machine has no entry 'colour' (entries: config, build, counters, memory)"),
    ('{"config": {}, "build": {"speed": 2}}', "a machine's build has no option 'speed'"),
    ('{"build": {}}', "a machine needs its config"),
    ("{not json", "machine is not valid JSON"),
])
def test_a_malformed_machine_is_one_line_naming_it(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_machine(text)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_program_records_its_machine_and_runs_on_it() -> None:
    program = openvta.compile("dense", batch=1, in_features=16, out_features=16, config="ulx3s", seed=0)
    assert program.machine == MACHINES["ulx3s"] and program.target == MACHINES["ulx3s"]
    buffer = io.BytesIO()
    program.save(buffer)
    buffer.seek(0)
    loaded = load_program(buffer)
    assert loaded.machine == MACHINES["ulx3s"]
    own = Device("cycle").run(loaded)
    assert own.counters == Device("cycle", timing=MACHINES["ulx3s"].timing).run(loaded).counters
    plain = Device("cycle").run(loaded.on(Machine(loaded.config)))
    assert own.counters["cycles"] > plain.counters["cycles"]  # the SDRAM and the folded ALU cost cycles
    assert np.array_equal(own.dram, plain.dram)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_program_for_a_preset_keeps_todays_entries(name: str) -> None:
    """A preset's program records no machine: its file is byte for byte what it was."""
    by_name = openvta.compile("dense", batch=1, in_features=16, out_features=16, config=name, seed=0)
    by_config = openvta.compile("dense", batch=1, in_features=16, out_features=16, config=PRESETS[name], seed=0)
    assert by_name.machine is None
    files = []
    for program in (by_name, by_config):
        buffer = io.BytesIO()
        program.save(buffer)
        files.append(buffer.getvalue())
    assert files[0] == files[1]
    assert sorted(np.load(io.BytesIO(files[0])).files) == ["config", "dram", "format", "insn_addr", "insn_count",
                                                          "symbols"]


def test_a_recorded_machine_must_be_the_programs_configuration() -> None:
    program = openvta.compile("dense", batch=1, in_features=8, out_features=8, config="tiny", seed=0)
    with pytest.raises(ProgramError, match=r"^machine small has another configuration than the program's \(tiny\)$"):
        program.on(MACHINES["small"])
    buffer = io.BytesIO()
    program.on(parse_machine("tiny:alu_ii=2")).save(buffer)
    entries = dict(np.load(io.BytesIO(buffer.getvalue())))
    entries["machine"] = np.array(MACHINES["ulx3s"].to_json())
    forged = io.BytesIO()
    np.savez(forged, **entries)
    forged.seek(0)
    with pytest.raises(ProgramError, match=r"^the program's machine \(ulx3s\) has another configuration than the "
                                           r"program's \(tiny\)$"):
        load_program(forged)
    entries["machine"] = np.array('{"config": {}, "memory": "ddr"}')
    forged = io.BytesIO()
    np.savez(forged, **entries)
    forged.seek(0)
    with pytest.raises(ProgramError, match=r"^program machine is invalid: memory must be one of on-chip, sdram, "
                                           r"spram, not 'ddr'$"):
        load_program(forged)


def test_the_command_line_compiles_for_a_machine_and_runs_on_it(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    prog = tmp_path / "d.npz"
    assert main(["compile", "dense", "--batch", "1", "--in", "16", "--out", "16", "--machine", "ulx3s",
                 "-o", str(prog), "--quiet"]) == 0
    assert load_program(prog).machine == MACHINES["ulx3s"]
    assert main(["run", str(prog), "--backend", "cycle", "--quiet"]) == 0
    cycles = Device("cycle", timing=MACHINES["ulx3s"].timing).run(load_program(prog)).counters["cycles"]
    assert main(["run", str(prog), "--backend", "cycle"]) == 0
    assert ["cycles", str(cycles)] in [line.split() for line in capsys.readouterr().out.splitlines()]
    # another machine of the same configuration; the configuration itself cannot change
    assert main(["run", str(prog), "--backend", "cycle", "--machine", "ulx3s:memory=on-chip", "--quiet"]) == 0
    assert main(["run", str(prog), "--backend", "cycle", "--machine", "small", "--quiet"]) == 0  # the full build
    assert main(["run", str(prog), "--backend", "cycle", "--machine", "tiny", "--quiet"]) == 1
    assert capsys.readouterr().err == ("openvta: error: --machine tiny has another configuration than the "
                                       "program's (small); a program runs on the configuration it was compiled "
                                       "for\n")
    assert main(["run", str(prog), "--machine", "ulx3s"]) == 1
    assert "--machine needs --backend cycle or rtl" in capsys.readouterr().err
    assert main(["compile", "dense", "--batch", "1", "--in", "16", "--out", "16", "--machine", "small:alu_ii=3",
                 "-o", str(prog)]) == 1
    assert capsys.readouterr().err == ("openvta: error: machine 'small:alu_ii=3': alu_ii (the ALU's fold) must be a "
                                       "positive integer dividing BATCH·BLOCK_OUT (8), not 3\n")


def test_openvta_config_prints_and_lists_machines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == list(MACHINES)
    assert main(["config", "tiny"]) == 0
    assert json.loads(capsys.readouterr().out) == PRESETS["tiny"].to_dict()  # a configuration alone, as before
    assert main(["config", "ulx3s"]) == 0
    assert Machine.from_json(capsys.readouterr().out) == MACHINES["ulx3s"]
    assert main(["config", "nope"]) == 1
    assert capsys.readouterr().err == ("openvta: error: machine must be one of default, vta, v2, small, tiny, ulx3s, "
                                       "ulx3s-v2, not 'nope'\n")

"""The program file (docs/PROGRAM.md): round trips, and every malformed file rejected by name."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openvta.isa import INSN_BYTES, Config, preset
from openvta.runtime import (
    PROGRAM_FORMAT,
    RESULT_FORMAT,
    Device,
    Program,
    ProgramBuilder,
    ProgramError,
    Result,
    Role,
    Symbol,
    load_program,
    load_result,
)
from openvta.runtime.roles import HOST_ROLES, ROLES
from openvta.runtime.program import program_bytes

DROP = object()  # an entry to leave out of the archive


def _sample_program(cfg: Config) -> Program:
    """A small program with an int8 input, an int32 bias and an output symbol."""
    b = ProgramBuilder(cfg)
    b.tensor("A", data=np.arange(-6, 6, dtype=np.int8).reshape(3, 4), role="input", layout="MK")
    b.tensor("B", data=np.array([-(2**31), -1, 0, 2**31 - 1], dtype=np.int32), role="bias")
    b.tensor("C", shape=(2, 3), dtype="uint32", role="output")
    return b.finish()


def _entries(program: Program) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(program_bytes(program)), allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}


def _write(path: Path, base: dict[str, np.ndarray], **changes: Any) -> Path:
    entries: dict[str, Any] = dict(base)  # and whatever the test writes
    for key, value in changes.items():
        if value is DROP:
            del entries[key]
        else:
            entries[key] = value
    np.savez(path, **entries)
    return path


def _symbols(**values: Any) -> np.ndarray:
    return np.array(json.dumps(values))


def _assert_same_program(got: Program, want: Program) -> None:
    assert got.config == want.config
    assert got.config.to_dict() == want.config.to_dict()  # extras are not part of ==
    assert got.dram.dtype == np.uint8
    np.testing.assert_array_equal(got.dram, want.dram)
    assert (got.insn_addr, got.insn_count) == (want.insn_addr, want.insn_count)
    assert got.symbols == want.symbols


# -- round trips ------------------------------------------------------------------------


def test_round_trip_through_a_path(cfg: Config, tmp_path: Path) -> None:
    program = _sample_program(cfg)
    program.save(tmp_path / "prog.npz")
    _assert_same_program(load_program(tmp_path / "prog.npz"), program)
    _assert_same_program(load_program(str(tmp_path / "prog.npz")), program)


def test_round_trip_through_a_file_object(tiny: Config) -> None:
    program = _sample_program(tiny)
    _assert_same_program(load_program(io.BytesIO(program_bytes(program))), program)


def test_round_trip_keeps_config_extras(tmp_path: Path) -> None:
    cfg = preset("small").replace(extras={"TARGET": "sim", "HW_VER": "0.0.2", "NESTED": [1, 2]})
    program = _sample_program(cfg)
    program.save(tmp_path / "prog.npz")
    loaded = load_program(tmp_path / "prog.npz")
    assert dict(loaded.config.extras) == {"TARGET": "sim", "HW_VER": "0.0.2", "NESTED": [1, 2]}
    assert loaded.config.name == "small"
    _assert_same_program(loaded, program)


def test_round_trip_keeps_symbols_exactly(tiny: Config, tmp_path: Path) -> None:
    program = _sample_program(tiny)
    program.save(tmp_path / "prog.npz")
    symbols = load_program(tmp_path / "prog.npz").symbols
    assert list(symbols) == ["A", "B", "C"]
    assert symbols["A"] == Symbol(program.symbols["A"].addr, (3, 4), "int8", "MK", "input")
    assert symbols["B"] == Symbol(program.symbols["B"].addr, (4,), "int32", "", "bias")
    assert symbols["C"] == Symbol(program.symbols["C"].addr, (2, 3), "uint32", "", "output")


def test_file_entries_follow_the_spec(tiny: Config) -> None:
    program = _sample_program(tiny)
    entries = _entries(program)
    assert sorted(entries) == ["config", "dram", "format", "insn_addr", "insn_count", "symbols"]
    assert str(entries["format"]) == "openvta-program/1" == PROGRAM_FORMAT
    assert Config.from_json(str(entries["config"])) == tiny
    assert entries["dram"].dtype == np.uint8 and entries["dram"].ndim == 1
    assert entries["insn_addr"].dtype == np.uint64 and int(entries["insn_addr"]) % INSN_BYTES == 0
    assert entries["insn_count"].dtype == np.uint64
    assert json.loads(str(entries["symbols"]))["B"] == {
        "addr": program.symbols["B"].addr, "shape": [4], "dtype": "int32", "layout": "",
        "role": "bias",
    }


def test_loaded_program_runs_like_the_original(tiny: Config, make_gemm: Any, tmp_path: Path) -> None:
    program, _, _ = make_gemm(tiny, 5, 6, 7, vthreads=2, shift=3)
    program.save(tmp_path / "gemm.npz")
    loaded = load_program(tmp_path / "gemm.npz")
    assert loaded.instructions() == program.instructions()
    want, got = Device("functional").run(program), Device("functional").run(loaded)
    np.testing.assert_array_equal(got.dram, want.dram)
    assert got.counters == want.counters


# -- malformed files: the file itself ------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.npz"
    with pytest.raises(ProgramError, match=rf"^program file {re.escape(repr(str(path)))} does not exist$"):
        load_program(path)


@pytest.mark.parametrize(("content", "reason"), [
    (b"", r"an empty file"),
    (b"garbage bytes, not an archive", r"not an npz archive"),
    (b"PK\x03\x04broken", r"a truncated or damaged npz archive"),
], ids=["empty", "garbage", "broken-zip"])
def test_garbage_bytes(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    with pytest.raises(ProgramError, match=rf"^program file '.*bad\.npz' is not an openvta program \({reason}\)$"):
        load_program(path)


def test_a_npy_file_is_not_an_npz_archive(tmp_path: Path) -> None:
    path = tmp_path / "array.npy"
    np.save(path, np.arange(4, dtype=np.uint8))
    with pytest.raises(ProgramError, match=r"^program file '.*array\.npy' is not an openvta program "
                                          r"\(a single numpy array, not an npz archive\)$"):
        load_program(path)


def test_pickled_entries_are_refused(tiny: Config, tmp_path: Path) -> None:
    path = _write(tmp_path / "p.npz", _entries(_sample_program(tiny)),
                  symbols=np.array({"A": 1}, dtype=object))
    with pytest.raises(ProgramError, match=r"^program file '.*p\.npz' holds pickled object data "
                                          r"\(entry 'symbols'\), which openvta never loads$"):
        load_program(path)


# -- malformed files: the entries ---------------------------------------------------------------

_BASE_CFG = preset("tiny")


def _bad_config(**changes: Any) -> np.ndarray:
    values = _BASE_CFG.to_dict()
    values.update(changes)
    return np.array(json.dumps(values))


ENTRY_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("format-missing", {"format": DROP},
     r"^program file has no 'format' entry \(expected 'openvta-program/1'\)$"),
    ("format-wrong", {"format": np.array(RESULT_FORMAT)},
     r"^program file format must be 'openvta-program/1', not 'openvta-result/1'$"),
    ("format-version", {"format": np.array("openvta-program/2")},
     r"^program file format must be 'openvta-program/1', not 'openvta-program/2'$"),
    ("format-not-string", {"format": np.array(1)},
     r"^entry 'format' must be a string, not int64\[\]$"),
    ("config-missing", {"config": DROP}, r"^program file lacks the entries config$"),
    ("dram-missing", {"dram": DROP}, r"^program file lacks the entries dram$"),
    ("insn_addr-missing", {"insn_addr": DROP}, r"^program file lacks the entries insn_addr$"),
    ("insn_count-missing", {"insn_count": DROP}, r"^program file lacks the entries insn_count$"),
    ("symbols-missing", {"symbols": DROP}, r"^program file lacks the entries symbols$"),
    ("two-missing", {"dram": DROP, "symbols": DROP},
     r"^program file lacks the entries dram, symbols$"),
    ("config-not-json", {"config": np.array("{not json")},
     r"^program config is invalid: configuration is not valid JSON: "),
    ("config-not-object", {"config": np.array("[3, 3, 5]")},
     r"^program config is invalid: configuration must be a JSON object, not list$"),
    ("config-log-block", {"config": _bad_config(LOG_BLOCK=9)},
     r"^program config is invalid: LOG_BLOCK must be between 1 and 6, not 9$"),
    ("config-width", {"config": _bad_config(LOG_INP_WIDTH=4)},
     r"^program config is invalid: LOG_INP_WIDTH must be 3 .*, not 4$"),
    ("config-type", {"config": _bad_config(LOG_BATCH="0")},
     r"^program config is invalid: LOG_BATCH must be an integer, not '0'$"),
    ("config-bytes", {"config": np.array(b"{}")},
     r"^entry 'config' must be a string, not \|S2\[\]$"),
    ("insn_addr-misaligned", {"insn_addr": np.array(8, dtype=np.uint64)},
     r"^insn_addr must be a multiple of 16, not 8$"),
    ("insn_addr-float", {"insn_addr": np.array(16.0)},
     r"^entry 'insn_addr' must be an integer, not float64\[\]$"),
    ("insn_addr-array", {"insn_addr": np.array([16], dtype=np.uint64)},
     r"^entry 'insn_addr' must be an integer, not uint64\[1\]$"),
    ("insn_count-zero", {"insn_count": np.array(0, dtype=np.uint64)},
     r"^insn_count must be at least 1, not 0$"),
    ("dram-int8", {"dram": np.zeros(512, dtype=np.int8)},
     r"^dram must be a one-dimensional uint8 array, not int8\[512\]$"),
    ("dram-2d", {"dram": np.zeros((256, 2), dtype=np.uint8)},
     r"^dram must be a one-dimensional uint8 array, not uint8\[256, 2\]$"),
    ("symbols-not-json", {"symbols": np.array("{'A': 1}")},
     r"^program symbols are not valid JSON: "),
    ("symbols-not-object", {"symbols": np.array("[]")},
     r"^program symbols must be a JSON object of name → symbol$"),
    ("symbol-not-object", {"symbols": _symbols(A=3)},
     r"^symbol 'A' must be a JSON object, not 3$"),
    ("symbol-no-addr", {"symbols": _symbols(A={"shape": [1], "dtype": "int8"})},
     r"^symbol 'A' lacks addr$"),
    ("symbol-no-shape-dtype", {"symbols": _symbols(A={"addr": 0})},
     r"^symbol 'A' lacks shape, dtype$"),
    ("symbol-negative-addr", {"symbols": _symbols(A={"addr": -1, "shape": [1], "dtype": "int8"})},
     r"^symbol 'A' addr must be a non-negative integer, not -1$"),
    ("symbol-bool-addr", {"symbols": _symbols(A={"addr": True, "shape": [1], "dtype": "int8"})},
     r"^symbol 'A' addr must be a non-negative integer, not True$"),
    ("symbol-shape", {"symbols": _symbols(A={"addr": 0, "shape": 4, "dtype": "int8"})},
     r"^symbol 'A' shape must be a list of non-negative integers, not 4$"),
    ("symbol-shape-negative", {"symbols": _symbols(A={"addr": 0, "shape": [2, -1], "dtype": "int8"})},
     r"^symbol 'A' shape must be a list of non-negative integers, not \[2, -1\]$"),
    ("symbol-dtype", {"symbols": _symbols(A={"addr": 0, "shape": [1], "dtype": "float32"})},
     r"^symbol 'A' dtype must be one of int8, uint8, int32, uint32, not 'float32'$"),
    ("symbol-role", {"symbols": _symbols(A={"addr": 0, "shape": [1], "dtype": "int8",
                                            "role": "param"})},
     r"^symbol 'A' role must be one of input, weight, bias, output, scratch, not 'param'$"),
    ("symbol-layout", {"symbols": _symbols(A={"addr": 0, "shape": [1], "dtype": "int8",
                                              "layout": 5})},
     r"^symbol 'A' layout must be a string, not 5$"),
    ("symbol-used-bytes-negative", {"symbols": _symbols(A={"addr": 0, "shape": [1], "dtype": "int8",
                                                          "used_bytes": -1})},
     r"^symbol 'A' used_bytes must be a non-negative integer, not -1$"),
    ("symbol-used-bytes-bool", {"symbols": _symbols(A={"addr": 0, "shape": [1], "dtype": "int8",
                                                      "used_bytes": True})},
     r"^symbol 'A' used_bytes must be a non-negative integer, not True$"),
    ("symbol-used-bytes-float", {"symbols": _symbols(A={"addr": 0, "shape": [1], "dtype": "int8",
                                                       "used_bytes": 1.0})},
     r"^symbol 'A' used_bytes must be a non-negative integer, not 1.0$"),
    ("symbol-used-bytes-too-many", {"symbols": _symbols(A={"addr": 0, "shape": [3], "dtype": "int32",
                                                          "used_bytes": 13})},
     r"^symbol 'A' used_bytes must be at most its 12 bytes, not 13$"),
]


@pytest.mark.parametrize("changes, message", [c[1:] for c in ENTRY_CASES],
                         ids=[c[0] for c in ENTRY_CASES])
def test_malformed_entry(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    path = _write(tmp_path / "p.npz", _entries(_sample_program(_BASE_CFG)), **changes)
    with pytest.raises(ProgramError, match=message):
        load_program(path)


def _image_case(tmp_path: Path, **changes: Any) -> tuple[Path, Program]:
    program = _sample_program(_BASE_CFG)
    return _write(tmp_path / "p.npz", _entries(program), **changes), program


def test_insn_addr_past_the_image(tmp_path: Path) -> None:
    size = len(_sample_program(_BASE_CFG).dram)
    path, _ = _image_case(tmp_path, insn_addr=np.array(size, dtype=np.uint64))
    with pytest.raises(ProgramError, match=rf"^insn_addr {size} is past the DRAM image \({size} bytes\)$"):
        load_program(path)


def test_instructions_past_the_image(tmp_path: Path) -> None:
    program = _sample_program(_BASE_CFG)
    size, addr = len(program.dram), program.insn_addr
    assert addr + program.insn_count * INSN_BYTES == size  # the builder puts them last
    count = program.insn_count + 1
    path, _ = _image_case(tmp_path, insn_count=np.array(count, dtype=np.uint64))
    with pytest.raises(ProgramError, match=(
        rf"^instructions run past the DRAM image: {count} instructions at {addr} end at byte "
        rf"{addr + count * INSN_BYTES}, the image has {size} bytes$"
    )):
        load_program(path)


def test_truncated_image(tmp_path: Path) -> None:
    program = _sample_program(_BASE_CFG)
    path, _ = _image_case(tmp_path, dram=program.dram[:-1])
    with pytest.raises(ProgramError, match=r"^instructions run past the DRAM image: "):
        load_program(path)


def test_symbol_outside_the_image(tmp_path: Path) -> None:
    size = len(_sample_program(_BASE_CFG).dram)
    path, _ = _image_case(tmp_path, symbols=_symbols(
        A={"addr": size - 4, "shape": [2], "dtype": "int32"}))
    with pytest.raises(ProgramError, match=(
        rf"^symbol 'A' \(8 bytes at {size - 4}\) lies outside the DRAM image \({size} bytes\)$"
    )):
        load_program(path)


def test_symbol_ending_at_the_image_end_is_accepted(tmp_path: Path) -> None:
    size = len(_sample_program(_BASE_CFG).dram)
    path, _ = _image_case(tmp_path, symbols=_symbols(
        A={"addr": size - 8, "shape": [2], "dtype": "int32"}))
    assert load_program(path).symbols == {"A": Symbol(size - 8, (2,), "int32")}


def test_program_constructor_checks_the_config(tiny: Config) -> None:
    program = _sample_program(tiny)
    with pytest.raises(ProgramError, match=r"^config must be a Config, not str$"):
        Program("tiny", program.dram, program.insn_addr, program.insn_count)


# -- result files -------------------------------------------------------------------------------


def test_result_round_trip(tmp_path: Path) -> None:
    dram = np.arange(300, dtype=np.int64).astype(np.uint8)
    counters = {"fetch_insns": 7, "macs": 2**40, "sync_insns": 0}
    Result(dram, counters).save(tmp_path / "res.npz")
    loaded = load_result(tmp_path / "res.npz")
    assert loaded.dram.dtype == np.uint8
    np.testing.assert_array_equal(loaded.dram, dram)
    assert loaded.counters == counters
    with np.load(tmp_path / "res.npz") as archive:
        assert sorted(archive.files) == ["counters", "dram", "format", "symbols"]
        assert str(archive["format"]) == "openvta-result/1" == RESULT_FORMAT


def test_result_of_a_run_round_trips(tiny: Config, make_gemm: Any, tmp_path: Path) -> None:
    program, _, _ = make_gemm(tiny, 3, 5, 9)
    result = Device("functional").run(program)
    result.save(tmp_path / "res.npz")
    loaded = load_result(tmp_path / "res.npz")
    np.testing.assert_array_equal(loaded.dram, result.dram)
    assert loaded.counters == result.counters
    np.testing.assert_array_equal(loaded.read("C"), result.read("C"))


def test_load_result_rejects_a_program_file(tiny: Config, tmp_path: Path) -> None:
    _sample_program(tiny).save(tmp_path / "prog.npz")
    with pytest.raises(ProgramError, match=(
        r"^result file format must be 'openvta-result/1', not 'openvta-program/1'$"
    )):
        load_result(tmp_path / "prog.npz")


def test_load_program_rejects_a_result_file(tmp_path: Path) -> None:
    Result(np.zeros(4, np.uint8), {}).save(tmp_path / "res.npz")
    with pytest.raises(ProgramError, match=(
        r"^program file format must be 'openvta-program/1', not 'openvta-result/1'$"
    )):
        load_program(tmp_path / "res.npz")


def test_result_file_without_format(tmp_path: Path) -> None:
    np.savez(tmp_path / "r.npz", dram=np.zeros(4, np.uint8), counters=np.array("{}"))
    with pytest.raises(ProgramError, match=(
        r"^result file has no 'format' entry \(expected 'openvta-result/1'\)$"
    )):
        load_result(tmp_path / "r.npz")


@pytest.mark.parametrize("key", ["dram", "counters"])
def test_result_file_missing_entry(tmp_path: Path, key: str) -> None:
    entries = {"format": np.array(RESULT_FORMAT), "dram": np.zeros(4, np.uint8),
               "counters": np.array("{}")}
    del entries[key]
    np.savez(tmp_path / "r.npz", allow_pickle=False, **entries)
    with pytest.raises(ProgramError, match=rf"^result file lacks the entry '{key}'$"):
        load_result(tmp_path / "r.npz")


def test_missing_result_file(tmp_path: Path) -> None:
    with pytest.raises(ProgramError, match=r"^result file '.*none\.npz' does not exist$"):
        load_result(tmp_path / "none.npz")


@pytest.mark.parametrize("counters", ["{not json", "[1, 2]"], ids=["not-json", "not-object"])
def test_result_file_with_malformed_counters(tmp_path: Path, counters: str) -> None:
    np.savez(tmp_path / "r.npz", format=np.array(RESULT_FORMAT), dram=np.zeros(4, np.uint8),
             counters=np.array(counters))
    with pytest.raises(ProgramError, match=r"counters"):
        load_result(tmp_path / "r.npz")


# -- reading and writing symbols -------------------------------------------------------


def test_read_symbols_from_the_image(tiny: Config) -> None:
    program = _sample_program(tiny)
    a = program.read("A")
    assert a.dtype == np.int8 and a.shape == (3, 4)
    np.testing.assert_array_equal(a, np.arange(-6, 6).reshape(3, 4))
    bias = program.read("B")
    assert bias.dtype == np.int32
    np.testing.assert_array_equal(bias, [-(2**31), -1, 0, 2**31 - 1])
    addr = program.symbols["B"].addr  # little-endian in DRAM
    assert bytes(program.dram[addr : addr + 16]) == np.array(
        [-(2**31), -1, 0, 2**31 - 1], dtype="<i4").tobytes()
    c = program.read("C")
    assert c.dtype == np.uint32 and c.shape == (2, 3) and not c.any()


def test_write_then_read(tiny: Config) -> None:
    program = _sample_program(tiny)
    before = program.dram.copy()
    value = np.array([[0, 1, 2], [2**32 - 1, 2**31, 7]], dtype=np.uint32)
    program.write("C", value)
    np.testing.assert_array_equal(program.read("C"), value)
    sym = program.symbols["C"]
    assert bytes(program.dram[sym.addr : sym.addr + sym.nbytes]) == value.astype("<u4").tobytes()
    outside = np.ones(len(before), dtype=bool)
    outside[sym.addr : sym.addr + sym.nbytes] = False
    np.testing.assert_array_equal(program.dram[outside], before[outside])


def test_write_a_loaded_program(tiny: Config, tmp_path: Path) -> None:
    _sample_program(tiny).save(tmp_path / "p.npz")
    program = load_program(tmp_path / "p.npz")
    program.write("A", np.full((3, 4), -5, dtype=np.int8))
    np.testing.assert_array_equal(program.read("A"), np.full((3, 4), -5))


def test_read_from_another_image(tiny: Config) -> None:
    program = _sample_program(tiny)
    other = program.dram.copy()
    sym = program.symbols["A"]
    other[sym.addr : sym.addr + 12] = 0xFF
    np.testing.assert_array_equal(program.read("A", other), np.full((3, 4), -1))
    np.testing.assert_array_equal(program.read("A"), np.arange(-6, 6).reshape(3, 4))
    result = Result(other, {}, symbols=program.symbols)
    np.testing.assert_array_equal(result.read("A"), np.full((3, 4), -1))
    with pytest.raises(KeyError, match=r"result has no symbol 'nope' \(symbols: A, B, C\)"):
        result.read("nope")
    with pytest.raises(ProgramError, match=r"^symbol 'A' \(12 bytes at \d+\) lies outside the "
                       r"result's DRAM image \(4 bytes\)$"):
        Result(other[:4], {}, symbols=program.symbols).read("A")


def test_write_with_a_wrong_shape(tiny: Config) -> None:
    program = _sample_program(tiny)
    with pytest.raises(ValueError, match=r"^symbol 'A' has shape \(3, 4\), not \(4, 3\)$"):
        program.write("A", np.zeros((4, 3), dtype=np.int8))


def test_read_an_unknown_symbol(tiny: Config) -> None:
    program = _sample_program(tiny)
    with pytest.raises(KeyError) as info:
        program.read("D")
    assert info.value.args == ("program has no symbol 'D' (symbols: A, B, C)",)


def test_read_from_a_program_without_symbols(tiny: Config) -> None:
    program = ProgramBuilder(tiny).finish()
    with pytest.raises(KeyError) as info:
        program.read("C")
    assert info.value.args == ("program has no symbol 'C' (symbols: none)",)


def test_write_an_unknown_symbol(tiny: Config) -> None:
    program = _sample_program(tiny)
    with pytest.raises(KeyError) as info:
        program.write("D", np.zeros(1))
    assert info.value.args == ("program has no symbol 'D' (symbols: A, B, C)",)


def test_save_writes_exactly_the_given_path(tiny: Config, tmp_path: Path) -> None:
    program = _sample_program(tiny)
    program.save(tmp_path / "prog.bin")
    Result(program.dram, {"x": 1}).save(tmp_path / "result")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.bin", "result"]
    _assert_same_program(load_program(tmp_path / "prog.bin"), program)
    assert load_result(tmp_path / "result").counters == {"x": 1}


def test_a_forged_array_header_is_refused_before_allocating(tiny: Config, tmp_path: Path) -> None:
    """A header declaring 10**12 bytes in a file of a few kilobytes: one line, no allocation."""
    import re
    import zipfile

    _sample_program(tiny).save(tmp_path / "p.npz")
    with zipfile.ZipFile(tmp_path / "p.npz") as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    raw = entries["dram.npy"]
    end = raw.index(b"\n") + 1
    header = re.sub(rb"'shape': \(\d+,\)", b"'shape': (1000000000000,)", raw[:end - 1])
    entries["dram.npy"] = header.ljust(end - 1, b" ") + b"\n" + raw[end:]
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    with pytest.raises(ProgramError, match=r"^program file '.*bad\.npz' entry 'dram' declares 1000000000000 "
                       r"bytes \(uint8\[1000000000000\]\) but holds only \d+$"):
        load_program(tmp_path / "bad.npz")


def test_result_files_without_symbols_still_load(tmp_path: Path) -> None:
    np.savez(tmp_path / "old.npz", format=np.array(RESULT_FORMAT), dram=np.zeros(4, np.uint8),
             counters=np.array("{}"))
    loaded = load_result(tmp_path / "old.npz")
    assert loaded.symbols == {}
    with pytest.raises(KeyError, match=r"result has no symbol 'out' \(symbols: none\)"):
        loaded.read("out")


# -- compulsory bytes (symbols' used_bytes) -------------------------------------------------


def _with_used_bytes(program: Program, **used: int) -> Program:
    symbols = {name: s.with_used_bytes(used[name]) if name in used else s
               for name, s in program.symbols.items()}
    return Program(program.config, program.dram, program.insn_addr, program.insn_count, symbols)


def test_used_bytes_round_trip_and_add_up_by_direction(tiny: Config) -> None:
    program = _with_used_bytes(_sample_program(tiny), A=12, B=16, C=24)
    loaded = load_program(io.BytesIO(program_bytes(program)))
    _assert_same_program(loaded, program)
    assert loaded.symbol("A").used_bytes == 12
    assert loaded.compulsory_bytes() == (12 + 16, 24)


def test_a_file_without_used_bytes_still_loads_and_names_no_compulsory_bytes(tiny: Config) -> None:
    program = _sample_program(tiny)
    symbols = json.loads(str(_entries(program)["symbols"]))
    assert all("used_bytes" not in value for value in symbols.values())
    loaded = load_program(io.BytesIO(program_bytes(program)))
    assert loaded.symbol("A").used_bytes is None
    assert loaded.compulsory_bytes() is None


def test_compulsory_bytes_need_every_host_symbol_but_not_scratch(tiny: Config) -> None:
    b = ProgramBuilder(tiny)
    b.tensor("A", shape=(8,), dtype="int8", role="input")
    b.tensor("T", shape=(8,), dtype="int8", role="scratch")
    b.tensor("C", shape=(8,), dtype="int8", role="output")
    program = b.finish()
    assert _with_used_bytes(program, A=4).compulsory_bytes() is None
    assert _with_used_bytes(program, A=4, C=8).compulsory_bytes() == (4, 8)
    assert _with_used_bytes(program, T=8).compulsory_bytes() is None


def test_a_program_without_host_symbols_names_no_compulsory_bytes(tiny: Config) -> None:
    assert ProgramBuilder(tiny).finish().compulsory_bytes() is None


def test_used_bytes_are_kept_by_with_logical_shape() -> None:
    symbol = Symbol(0, (1, 4), "int8", role="input").with_used_bytes(2)
    assert symbol.with_logical_shape((4,)) == Symbol(0, (1, 4), "int8", role="input",
                                                     logical_shape=(4,), used_bytes=2)


# -- roles -----------------------------------------------------------------------------------


def test_roles_are_one_str_valued_enum_that_the_file_keeps_as_strings(tiny: Config, tmp_path: Path) -> None:
    program = _sample_program(tiny)
    assert program.symbols["A"].role is Role.INPUT and program.symbols["C"].role is Role.OUTPUT
    assert json.loads(str(_entries(program)["symbols"]))["A"]["role"] == "input"
    program.save(tmp_path / "p.npz")
    loaded = load_program(tmp_path / "p.npz")
    assert {n: s.role for n, s in loaded.symbols.items()} == {"A": Role.INPUT, "B": Role.BIAS, "C": Role.OUTPUT}
    assert all(isinstance(s.role, Role) for s in loaded.symbols.values())
    assert Role.WEIGHT == "weight" and f"{Role.WEIGHT}" == str(Role.WEIGHT) == "weight"
    assert ROLES == tuple(Role) and HOST_ROLES == {Role.INPUT, Role.WEIGHT, Role.BIAS}


def test_a_symbol_takes_a_role_or_its_string_and_nothing_else() -> None:
    assert Symbol(0, (1,), "int8", role="weight").role is Role.WEIGHT
    with pytest.raises(ValueError, match=r"^symbol role must be one of input, weight, bias, output, scratch, "
                                         r"not 'param'$"):
        Symbol(0, (1,), "int8", role="param")


def test_the_graph_uses_the_runtimes_roles() -> None:
    from openvta.graph.regions import HOST_ROLES as GRAPH_HOST_ROLES
    from openvta.graph import Role as GraphRole

    assert GraphRole is Role and GRAPH_HOST_ROLES is HOST_ROLES

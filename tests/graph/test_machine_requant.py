"""``compile_model`` on a machine: the requantization its drain unit runs, chosen when not
given, and said in the summary; the epilogues drained where the unit's stages allow."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import openvta
from openvta.graph.ir import RequantMode
from openvta.isa import MACHINES, MemInsn, MemoryType, Opcode, parse_machine

DIGITS = Path(__file__).parents[2] / "examples" / "digits"
NO_MUL = "small:LOG_EPI_BUFF_SIZE=12,DRAIN_STAGES=3,DRAIN_OPS=RSHR+SHR/ADD/CLIP"


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    sys.path.insert(0, str(DIGITS))
    try:
        from digits_data import load_split
    finally:
        sys.path.remove(str(DIGITS))
    train, _, test, _ = load_split()
    return train[:16], test[:8]


def _drained(model: openvta.CompiledModel) -> int:
    """The draining STOREs (STORE ACC) of the model's programs."""
    return sum(isinstance(insn, MemInsn) and insn.opcode == Opcode.STORE and insn.memory_type == MemoryType.ACC
               for region in model.graph.regions for insn in region.program.instructions())


def test_a_drain_unit_without_mul_gets_pow2_and_the_summary_says_so(digits: tuple[np.ndarray, ...]) -> None:
    calibration, _ = digits
    model = openvta.compile_model(DIGITS / "digits.onnx", calibration, config=NO_MUL)
    assert model.mode is RequantMode.POW2
    notes = [line for line in model.summary().splitlines() if "requantization pow2" in line]
    assert notes == ["note: requantization pow2 (shifts only): the machine's drain unit has no MUL stage "
                     "(DRAIN_OPS SHR+RSHR/ADD/CLIP), so fixed's multiply would keep every epilogue on the ALU; "
                     "quantize='fixed' chooses it anyway"]
    asked = openvta.compile_model(DIGITS / "digits.onnx", calibration, config=NO_MUL, quantize="fixed")
    assert asked.mode is RequantMode.FIXED and "requantization pow2" not in asked.summary()


@pytest.mark.parametrize("machine", ["v2", "ulx3s-v2", "small"])
def test_a_machine_with_a_mul_stage_or_no_drain_keeps_fixed(machine: str, digits: tuple[np.ndarray, ...]) -> None:
    calibration, _ = digits
    model = openvta.compile_model(DIGITS / "digits.onnx", calibration, config=machine)
    assert model.mode is RequantMode.FIXED and "requantization pow2" not in model.summary()


def test_the_board_machine_drains_the_default_epilogue_exactly(digits: tuple[np.ndarray, ...]) -> None:
    """``ulx3s-v2``'s five stages run every convolution's and the dense layer's epilogue of the
    default requantization, and the result is the integer reference's."""
    calibration, images = digits
    board = MACHINES["ulx3s-v2"]
    model = openvta.compile_model(DIGITS / "digits.onnx", calibration, config=board)
    plain = openvta.compile_model(DIGITS / "digits.onnx", calibration, config=parse_machine("small"))
    assert _drained(model) > 0 and _drained(plain) == 0
    expected = model.reference(images)
    for backend in ("functional", "cycle"):
        got = model.run(images, backend=backend)
        assert all(np.array_equal(got[name], value) for name, value in expected.items())
    assert all(np.array_equal(plain.reference(images)[k], v) for k, v in expected.items())


def test_the_model_runs_on_its_machine_and_its_file_keeps_it(digits: tuple[np.ndarray, ...], tmp_path: Path) -> None:
    """The programs record the machine: the cycle back end charges its timing (the SDRAM, the
    folded ALU), and a saved model reads back with it."""
    from openvta.graph.compiled_model import load_model

    calibration, images = digits
    board = MACHINES["ulx3s-v2"]
    model = openvta.compile_model(DIGITS / "digits.onnx", calibration, config=board)
    assert all(region.program.machine == board for region in model.graph.regions)
    on_board = model.run(images[:1], backend="cycle").report.cycles
    on_chip_timing = parse_machine("ulx3s-v2:memory=on-chip").timing
    on_chip = model.run(images[:1], backend="cycle", timing=on_chip_timing).report.cycles
    assert on_board is not None and on_chip is not None and on_board > on_chip
    model.save(tmp_path / "m.npz")
    again = load_model(tmp_path / "m.npz")
    assert all(region.program.machine == board for region in again.graph.regions)
    assert again.run(images[:1], backend="cycle").report.cycles == on_board

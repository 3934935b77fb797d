"""openvta.compile / openvta.simulate and the ``openvta compile`` command."""

from __future__ import annotations

from openvta.compiler.ops import REGISTRY

import numpy as np
import pytest

import openvta
from openvta.cli import main
from openvta.compiler.workloads import random_inputs
from openvta.runtime import load_program


def test_compile_and_simulate_a_layer_with_inputs() -> None:
    operands = random_inputs("C11", seed=4)
    inputs = {k: operands[k] for k in ("data", "weight", "bias")}
    op = openvta.operator("conv2d", layer="resnet18.C11", vthreads=2)
    program = op.build(inputs)
    functional = openvta.simulate(program)
    cycle = openvta.simulate(program, backend="cycle")
    expected = op.reference(inputs)
    np.testing.assert_array_equal(functional["out"], expected)
    np.testing.assert_array_equal(cycle["out"], expected)
    assert functional.report is not None and cycle.report is not None
    assert functional.report.units == {} and functional.report.measured_cycles is None  # no time
    assert cycle.report.cycles > 0
    assert set(cycle) == {"out"}


def test_simulate_writes_new_inputs_into_a_compiled_program() -> None:
    program = openvta.compile("dense", batch=2, in_features=20, out_features=12, config="tiny",
                              seed=0)
    rng = np.random.default_rng(9)
    inputs: dict[str, np.ndarray] = {"data": rng.integers(-128, 128, (2, 20), dtype=np.int8),
                                     "weight": rng.integers(-128, 128, (12, 20), dtype=np.int8),
                                     "bias": rng.integers(-100, 100, (12,), dtype=np.int32)}
    op = openvta.operator("dense", batch=2, in_features=20, out_features=12, config="tiny")
    np.testing.assert_array_equal(openvta.simulate(program, inputs)["out"], op.reference(inputs))
    with pytest.raises(ValueError, match=r"^input 'data' must have shape \(2, 20\), not \(3, 20\)$"):
        openvta.simulate(program, {"data": np.zeros((3, 20), np.int8)})


def test_operator_errors() -> None:
    with pytest.raises(ValueError, match=rf"^operator must be one of {', '.join(REGISTRY)}, "
                                         r"not 'pool'$"):
        openvta.operator("pool")
    with pytest.raises(ValueError, match=r"^conv2d ci must be a positive integer, not 0$"):
        openvta.operator("conv2d", ci=0, co=16, hw=8, kernel=3)
    with pytest.raises(ValueError, match=r"^dense has no input 'bogus'"):
        openvta.compile("dense", batch=1, in_features=16, out_features=16, inputs={"bogus": 1})


def test_cli_compile_conv2d_and_run(tmp_path, capsys) -> None:
    path = tmp_path / "c.npz"
    assert main(["compile", "conv2d", "--hw", "8", "--ci", "16", "--co", "16", "--kernel", "3",
                 "--pad", "1", "--vthreads", "2", "--config", "small", "--seed", "3",
                 "-o", str(path)]) == 0
    assert "program written to" in capsys.readouterr().out
    program = load_program(path)
    assert {s: program.symbols[s].role for s in ("data", "weight", "bias", "out")} == {
        "data": "input", "weight": "weight", "bias": "bias", "out": "output"}
    assert program.symbols["data"].layout == "NCHW1n8c"
    assert program.symbols["weight"].layout == "OIHW8o8i"
    expected = random_inputs(
        openvta.compiler.workloads.Conv2dWorkload("x", 8, 16, 16, 3, 0, 1), seed=3)
    op = openvta.operator("conv2d", hw=8, ci=16, co=16, kernel=3, pad=1, config="small")
    got = openvta.simulate(program)["out"]
    np.testing.assert_array_equal(got, op.reference(expected))
    assert main(["run", str(path), "--backend", "cycle", "--quiet"]) == 0


def test_cli_compile_rectangular_conv2d(tmp_path, capsys) -> None:
    path = tmp_path / "r.npz"
    assert main(["compile", "conv2d", "--hw", "6", "--w", "10", "--ci", "8", "--co", "8", "--kernel", "3",
                 "--pad", "1", "--stride", "2", "--config", "tiny", "--seed", "5", "-o", str(path)]) == 0
    program = load_program(path)
    op = openvta.operator("conv2d", hw=6, w=10, ci=8, co=8, kernel=3, pad=1, stride=2, config="tiny")
    inputs = REGISTRY["conv2d"].random_operands(op, 5)
    assert program.symbols["data"].logical_shape == (1, 8, 6, 10)
    np.testing.assert_array_equal(openvta.simulate(program)["out"], op.reference(inputs))
    capsys.readouterr()
    assert main(["compile", "conv2d", "--layer", "resnet18.C5", "--w", "10", "-o", str(tmp_path / "x.npz")]) == 1
    assert capsys.readouterr().err == ("openvta: error: --layer resnet18.C5 fixes the shape; give either --layer "
                                       "or --w, not both\n")


def test_cli_compile_dense_layer_and_errors(tmp_path, capsys) -> None:
    assert main(["compile", "dense", "--batch", "4", "--in", "32", "--out", "16", "--config",
                 "tiny", "-o", str(tmp_path / "d.npz")]) == 0
    assert main(["compile", "conv2d", "--layer", "resnet18.C9", "--vthreads", "2",
                 "-o", str(tmp_path / "c9.npz")]) == 0
    capsys.readouterr()
    assert main(["compile", "conv2d", "--hw", "8", "-o", str(tmp_path / "x.npz")]) == 1
    assert capsys.readouterr().err == ("openvta: error: compile conv2d needs --ci, --co, --kernel "
                                       "(or --layer)\n")
    with pytest.raises(SystemExit) as exit_:
        main(["compile", "conv2d", "--layer", "resnet18.C99", "-o", str(tmp_path / "y.npz")])
    assert exit_.value.code == 2
    assert "argument --layer: invalid choice: 'resnet18.C99' (choose from 'resnet18.C1'," \
        in capsys.readouterr().err

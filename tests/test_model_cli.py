"""``openvta model compile|run|show`` and the facade's compile_model/load_model."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import openvta
from openvta.cli import main

DIGITS = Path(__file__).parent.parent / "examples" / "digits"
sys.path.insert(0, str(DIGITS))
from digits_data import load_split  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("digits")
    x_train, _, x_test, y_test = load_split()
    np.savez(folder / "calib.npz", image=x_train[:64])
    np.savez(folder / "x.npz", image=x_test[:12])
    np.save(folder / "y.npy", y_test[:12])
    return folder


def test_compile_show_run(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model_path = data / "out" / "digits.ovta"
    assert main(["model", "compile", str(DIGITS / "digits.onnx"), "--calibration",
                 str(data / "calib.npz"), "--config", "tiny", "-o", str(model_path)]) == 0
    assert capsys.readouterr().out.startswith(f"compiled {DIGITS / 'digits.onnx'} (")
    assert main(["model", "show", str(model_path)]) == 0
    shown = capsys.readouterr().out
    assert "conv1" in shown and "fc" in shown
    assert main(["model", "run", str(model_path), "--inputs", str(data / "x.npz"),
                 "-o", str(data / "y.npz")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("logits: float32[12, 10]\ncycles: ")
    model = openvta.load_model(model_path)
    with np.load(data / "y.npz") as outputs:
        logits = outputs["logits"]
    x = dict(np.load(data / "x.npz"))
    np.testing.assert_array_equal(logits, model.reference(x)["logits"])


def test_a_calibration_method_and_auto_precision_from_the_command_line(data: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    model_path = data / "mse.ovta"
    assert main(["model", "compile", str(DIGITS / "digits.onnx"), "--calibration", str(data / "calib.npz"),
                 "--calibration-method", "mse", "--precision", "auto", "--activations", "asymmetric",
                 "-o", str(model_path)]) == 0
    model = openvta.load_model(model_path)
    assert any(t.quant is not None and t.quant.zero_point == -128 for t in model.graph.types.values())
    x = np.load(data / "x.npz")["image"]
    np.testing.assert_array_equal(model.run({"image": x}, backend="functional")["logits"],
                                  model.reference({"image": x})["logits"])


def test_the_facade_is_the_graph_level(data: Path) -> None:
    x_train, _, x_test, _ = load_split()
    model = openvta.compile_model(DIGITS / "digits.onnx", calibration=x_train[:32], config="tiny",
                                  quantize="pow2")
    assert isinstance(model, openvta.CompiledModel)
    path = data / "pow2.ovta"
    model.save(path)
    again = openvta.load_model(path)
    np.testing.assert_array_equal(again.reference(x_test[:4])["logits"],
                                  model.reference(x_test[:4])["logits"])


@pytest.mark.parametrize("argv, message", [
    (["model", "compile", "nothere.onnx", "--calibration", "CALIB", "-o", "m.ovta"],
     r"openvta: error: .*nothere\.onnx.*"),
    (["model", "compile", "DIGITS", "--calibration", "nothere.npz", "-o", "m.ovta"],
     r"openvta: error: calibration file 'nothere\.npz' does not exist"),
    (["model", "compile", "GARBAGE", "--calibration", "CALIB", "-o", "m.ovta"],
     r"openvta: error: .*GARBAGE.*"),
    (["model", "show", "GARBAGE"],
     r"openvta: error: model file 'GARBAGE' is not an openvta model \(not an npz archive\)"),
    (["model", "run", "GARBAGE", "--inputs", "CALIB"],
     r"openvta: error: model file 'GARBAGE' is not an openvta model \(not an npz archive\)"),
    (["model", "compile", "DIGITS", "--calibration", "/dev/null", "-o", "m.ovta"],
     r"openvta: error: calibration file '/dev/null' is not a calibration set \(an empty file\)"),
    (["model", "compile", "DIGITS", "--calibration", "GARBAGE", "-o", "m.ovta"],
     r"openvta: error: calibration file 'GARBAGE' is not a calibration set \(not an npz archive\)"),
    (["model", "compile", "DIGITS", "--calibration", "CALIB", "--calibration-method", "kl", "-o", "m.ovta"],
     r"openvta: error: calibration_method must be one of minmax, percentile, percentile:<p>, mse, entropy, "
     r"not 'kl'"),
    (["model", "compile", "DIGITS", "--calibration", "CALIB", "--activations", "signed", "-o", "m.ovta"],
     r"openvta: error: activations must be one of 'asymmetric', 'symmetric', not 'signed'"),
    (["model", "compile", "DIGITS", "--calibration", "CALIB", "--precision", "auto:0", "-o", "m.ovta"],
     r"openvta: error: precision auto:<budget> needs a budget of at least 1 \(the all-int8 model's cycles\), "
     r"not 'auto:0'"),
])
def test_bad_input_is_one_line(data: Path, tmp_path: Path, argv: list[str], message: str,
                               capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.bin").write_bytes(b"not a model at all")
    names = {"CALIB": str(data / "calib.npz"), "DIGITS": str(DIGITS / "digits.onnx"),
             "GARBAGE": str(tmp_path / "garbage.bin")}
    argv = [names.get(a, a) for a in argv]
    message = message.replace("GARBAGE", re.escape(str(tmp_path / "garbage.bin")))
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.fullmatch(message + "\n", err), err


def test_inputs_of_the_wrong_shape(data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model_path = tmp_path / "m.ovta"
    assert main(["model", "compile", str(DIGITS / "digits.onnx"), "--calibration",
                 str(data / "calib.npz"), "--config", "tiny", "-o", str(model_path)]) == 0
    np.savez(tmp_path / "bad.npz", image=np.zeros((2, 1, 7, 7), np.float32))
    capsys.readouterr()
    assert main(["model", "run", str(model_path), "--inputs", str(tmp_path / "bad.npz")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("openvta: error: ") and "image" in err and err.count("\n") == 1

"""``openvta model evaluate``: the table and the report end to end, and every user error in one line."""

from __future__ import annotations

import json
import re
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
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from PIL import Image

    folder = tmp_path_factory.mktemp("evaluate-cli")
    x_train, _, x_test, y_test = load_split()
    openvta.compile_model(DIGITS / "digits.onnx", calibration=x_train[:64], config="tiny").save(folder / "d.ovta")
    np.savez(folder / "d.npz", image=x_test[:16], labels=y_test[:16])
    np.savez(folder / "unlabelled.npz", image=x_test[:16])
    np.savez(folder / "short.npz", image=x_test[:16], labels=y_test[:15])
    np.save(folder / "labels.npy", y_test[:16])
    images = folder / "images"
    images.mkdir()
    for i in range(6):
        Image.fromarray(np.round(x_test[i, 0] * 255).astype(np.uint8)).save(images / f"{i}.png")
    (images / "labels.csv").write_text("".join(f"{i}.png,{y_test[i]}\n" for i in range(6)))
    broken = folder / "broken"
    broken.mkdir()
    (broken / "a.png").write_bytes(b"not an image")
    (broken / "labels.txt").write_text("a.png,3\n")
    badline = folder / "badline"
    badline.mkdir()
    (badline / "labels.csv").write_text("a.png;3\n")
    (folder / "metric_module.py").write_text(
        "def first_logit(outputs, label):\n    return float(outputs['logits'][0])\n")
    return folder


def test_evaluate_prints_int8_and_float_side_by_side_and_writes_the_report(
        files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = files / "out" / "report.json"
    argv = ["model", "evaluate", str(files / "d.ovta"), "--dataset", str(files / "d.npz"), "--backend", "cycle",
            "--chunk-size", "8", "--report", str(report)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    model = openvta.load_model(files / "d.ovta")
    expected = model.evaluate(files / "d.npz", backend="cycle", chunk_size=8)
    assert re.fullmatch(r"evaluated .*d\.ovta on 16 samples of .*d\.npz on the cycle back end in [\d.]+ s "
                        r"\(serial\)", lines[0])
    assert lines[1].split() == ["int8", "float"]
    assert lines[2].split() == ["top-1", "accuracy", f"{100 * expected.int8_score:.2f}", "%",
                                f"{100 * expected.float_score:.2f}", "%"]
    assert lines[3].split() == ["cycles", "per", "sample", f"{expected.cycles_per_sample:,.0f}"]
    assert lines[4] == f"report written to {report}"
    written = json.loads(report.read_text())
    assert written["result"] == expected.to_json() and written["options"]["backend"] == "cycle"
    assert [c["int8"] for c in written["chunks"]] == [list(expected.int8_values[:8]), list(expected.int8_values[8:])]
    assert main([*argv, "--quiet"]) == 0  # resumed: every chunk from the report
    assert capsys.readouterr().out == ""


def test_images_labels_files_and_a_function(files: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["model", "evaluate", str(files / "d.ovta"), "--dataset", str(files / "images"), "--metric",
                 "cosine", "--size", "8", "--crop", "8x8", "--scale", "1/255", "--mean", "0", "--std", "1"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[2].split()[:3] == ["cosine", "to", "float"] and table[2].split()[-1] == "reference"
    assert table[3].split()[-2:] == ["not", "counted"]
    assert main(["model", "evaluate", str(files / "d.ovta"), "--dataset", str(files / "unlabelled.npz"),
                 "--labels", str(files / "labels.npy"), "--metric", "top5", "--limit", "4"]) == 0
    assert "on 4 samples" in capsys.readouterr().out
    monkeypatch.chdir(files)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command puts the current folder on it
    assert main(["model", "evaluate", "d.ovta", "--dataset", "d.npz", "--metric", "metric_module:first_logit"]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("metric_module:first_logit ")


@pytest.mark.parametrize(("argv", "message"), [
    (["--dataset", "nothere.npz"], r"dataset 'nothere\.npz' does not exist"),
    (["--dataset", "short.npz"], r"dataset '.*short\.npz' has 16 samples and 15 labels"),
    (["--dataset", "unlabelled.npz", "--labels", "labels.npy", "--limit", "x"],
     r"--limit must be a positive integer, not 'x'"),
    (["--dataset", "images", "--mean", "0.5,x"],
     r"--mean must be one number or one per channel, comma-separated \(e\.g\. 0\.485,0\.456,0\.406\), "
     r"not '0\.5,x'"),
    (["--dataset", "images", "--mean", "0.5,0.5"],
     r"mean must have 1 value \(input 'image' has 1 channel\), not 2"),
    (["--dataset", "images", "--layout", "NWHC"], r"layout must be 'NCHW' or 'NHWC', not 'NWHC'"),
    (["--dataset", "images", "--crop", "0"], r"--crop must be N or HxW in positive pixels, e\.g\. 224 or 32x100, "
                                             r"not '0'"),
    (["--dataset", "images", "--crop", "9"], r"image '.*0\.png' is 8x8 after resizing, smaller than the crop 9x9"),
    (["--dataset", "images", "--scale", "1/0"], r"--scale must be a number or a fraction such as 1/255, not '1/0'"),
    (["--dataset", "d.npz", "--size", "8"],
     r"image preprocessing \(size, crop, mean, std, scale, channel order, layout\) applies to a folder of images, "
     r"not to '.*d\.npz'"),
    (["--dataset", "broken"], r"image '.*a\.png' cannot be read: cannot identify image file '.*a\.png'"),
    (["--dataset", "badline"], r"labels file '.*labels\.csv' line 1 must be 'file,label' with a non-negative integer "
                               r"label, not 'a\.png;3'"),
    (["--dataset", "d.npz", "--executor", "gpu"],
     r"executor must be 'serial', 'local\[:N\]', 'dask://host:port' or a concurrent\.futures\.Executor, not 'gpu'"),
    (["--dataset", "d.npz", "--executor", "local:0"], r"executor local:N needs a positive number of workers, not '0'"),
    (["--dataset", "unlabelled.npz"],
     r"metric top1 needs labels, and dataset '.*unlabelled\.npz' has none \(an \.npz's 'labels', a labels file, "
     r"or \(inputs, label\) pairs\); cosine needs none"),
    (["--dataset", "d.npz", "--metric", "top3"],
     r"metric must be top1, top5, cosine, a function or 'module:function', not 'top3'"),
    (["--dataset", "d.npz", "--metric", "nomodule:f"], r"metric nomodule:f: cannot import 'nomodule' \(.*\)"),
    (["--dataset", "d.npz", "--backend", "gpu"], r"backend must be one of .*, not 'gpu'"),
    (["--dataset", "d.npz", "--chunk-size", "3", "--batch-size", "2"],
     r"chunk size must be a positive multiple of the batch size \(2\), not 3"),
    (["--dataset", "d.npz", "--report", "REPORT", "--chunk-size", "4"],
     r"report '.*report\.json' is of another run \(other options: chunk_size 8 there, 4 here\); give another "
     r"report file or remove it to start again"),
])
def test_user_errors_are_one_line(files: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    if "REPORT" in argv:
        assert main(["model", "evaluate", str(files / "d.ovta"), "--dataset", str(files / "d.npz"),
                     "--chunk-size", "8", "--report", str(report), "--quiet"]) == 0
    monkeypatch.chdir(files)
    argv = [str(report) if a == "REPORT" else a for a in argv]
    assert main(["model", "evaluate", "d.ovta", *argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.fullmatch("openvta: error: " + message + "\n", err), err

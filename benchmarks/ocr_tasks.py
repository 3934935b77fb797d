"""PaddleOCR's pretrained models on tasks with ground truth: onnxruntime float against openvta.

For the two tasks of ``examples/ocr/tasks.py`` (text direction on ``--lines`` rendered
lines, text detection on ``--pages`` rendered pages, from ``EVALUATION_SEED``), print one
row each: the metric of onnxruntime's float model (the anchor), of openvta's float path
(``model.float_reference``) and of its int8 model on the ``functional`` simulator, the
int8 model's difference from the anchor in points, compile time and run times; and
whether int8 ``functional`` equals ``model.reference`` on the first sample.

Each model is compiled with ``openvta.compile_model(path, {"x": calibration},
config="vta", input_shapes=...)`` on ``--calib`` samples from ``CALIBRATION_SEED``
(never an evaluation sample): the classifier at a batch of ``--batch`` (it runs any batch),
the detector at 1×3×320×640 (its calibration pages split into single runs).
``--option key=value`` passes more keyword arguments to ``compile_model`` (values read
as Python literals where they parse, else strings), e.g. ``--option precision=int16``.

Targets (issue 42): int8 within 1 point of onnxruntime float, direction on >= 200 lines
and detection on >= 16 pages; int8 ``functional`` equal to ``model.reference``.

    .venv/bin/python benchmarks/ocr_tasks.py --lines 200 --pages 16 --calib 16
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "ocr"))
import tasks  # noqa: E402

import openvta  # noqa: E402


@dataclass(frozen=True)
class Row:
    """One task's figures: metric values (0..1) and times in seconds."""

    task: str
    metric: str
    samples: int
    ort_float: float
    openvta_float: float
    openvta_int8: float
    compile_s: float
    float_s: float
    int8_s: float
    reference_equal: bool


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``["precision=int16", "quantize='pow2'"]`` → ``{"precision": "int16", "quantize": "pow2"}``."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"--option must be key=value, not {pair!r}")
        try:
            options[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            options[key] = text
    return options


def run_batches(run: Callable[[np.ndarray], np.ndarray], inputs: np.ndarray, batch: int) -> tuple[np.ndarray, float]:
    """``run`` on ``inputs`` ``batch`` samples at a time; the outputs joined, and the seconds taken."""
    start = time.perf_counter()
    outputs = np.concatenate([run(inputs[i:i + batch]) for i in range(0, len(inputs), batch)])
    return outputs, time.perf_counter() - start


def measure(task: str, inputs: np.ndarray, truth: np.ndarray, calibration: np.ndarray, batch: int,
            options: dict[str, Any]) -> Row:
    """Compile ``task``'s model on ``calibration`` and score the three models on ``inputs``."""
    score: Callable[[np.ndarray, np.ndarray], float] = \
        tasks.direction_accuracy if task == "direction" else tasks.pixel_f1
    name = tasks.INPUT_NAME
    start = time.perf_counter()
    kwargs = {"input_shapes": {name: (batch, *inputs.shape[1:])}, **options}
    model = openvta.compile_model(tasks.model_path(task), {name: calibration}, config="vta", **kwargs)
    compile_s = time.perf_counter() - start
    (out,) = model.outputs
    anchor = tasks.run_onnxruntime(task, inputs, batch)
    floats, float_s = run_batches(lambda x: model.float_reference({name: x})[out], inputs, batch)
    ints, int8_s = run_batches(lambda x: model.run({name: x}, backend="functional")[out], inputs, batch)
    reference = model.reference({name: inputs[:1]})[out]
    return Row(task, "accuracy" if task == "direction" else "pixel F1", len(inputs), score(anchor, truth),
               score(floats, truth), score(ints, truth), compile_s, float_s, int8_s,
               bool(np.array_equal(reference, ints[:1])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200, help="direction task: evaluation lines (200)")
    parser.add_argument("--pages", type=int, default=16, help="detection task: evaluation pages (16)")
    parser.add_argument("--calib", type=int, default=16, help="calibration samples per task (16)")
    parser.add_argument("--batch", type=int, default=8, help="the classifier's compiled and run batch (8)")
    parser.add_argument("--task", choices=sorted(tasks.MODEL_FILES), action="append",
                        help="only this task (repeatable; default both)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a keyword argument of openvta.compile_model, e.g. precision=int16")
    args = parser.parse_args(argv)
    options = parse_options(args.option)
    rows = []
    print(HEADER)
    for task in args.task or ["direction", "detection"]:
        if task == "direction":
            evaluation = tasks.direction_task(args.lines, tasks.EVALUATION_SEED)
            calibration = tasks.direction_task(args.calib, tasks.CALIBRATION_SEED).inputs
            rows.append(measure(task, evaluation.inputs, evaluation.labels, calibration, args.batch, options))
        else:
            pages = tasks.detection_task(args.pages, tasks.EVALUATION_SEED)
            calibration = tasks.detection_task(args.calib, tasks.CALIBRATION_SEED).inputs
            rows.append(measure(task, pages.inputs, pages.masks, calibration, 1, options))
        print_row(rows[-1])
    print(f"options: config='default' {options or ''}; calibration {args.calib} samples (seed "
          f"{tasks.CALIBRATION_SEED}), evaluation seed {tasks.EVALUATION_SEED}; int8 on 'functional'")
    return 0


HEADER = (f"{'task':<10} {'metric':<9} {'n':>4} {'ort float':>9} {'ovta float':>10} {'ovta int8':>9} "
          f"{'int8-ort':>8} {'compile s':>9} {'float s':>7} {'int8 s':>6}  int8 == reference")


def print_row(row: Row) -> None:
    """Metrics in points (percent), differences in points, times in seconds."""
    print(f"{row.task:<10} {row.metric:<9} {row.samples:>4} {100 * row.ort_float:>9.2f} "
          f"{100 * row.openvta_float:>10.2f} {100 * row.openvta_int8:>9.2f} "
          f"{100 * (row.openvta_int8 - row.ort_float):>+8.2f} {row.compile_s:>9.1f} {row.float_s:>7.1f} "
          f"{row.int8_s:>6.1f}  {row.reference_equal}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())

"""The digits CNN end to end (issue [2/5]): compile time, accuracy, cycles, arena, wall time.

For scikit-learn's bundled 8x8 digits and the CNN of ``examples/digits`` (held-out split of
360 images), print side by side:

- top-1 accuracy of the float model on onnxruntime (if installed) and on openvta's own
  float reference, and of the int8 model (``fixed`` and ``pow2``) on the integer reference;
- that ``run`` on each back end equals ``model.reference`` exactly (on ``--images`` images;
  ``rtl`` on the ``tiny`` preset and a couple of images with ``--rtl``);
- compile time, cycles per image on the cycle model, arena bytes against no reuse, and
  wall time per image on the functional simulator and the cycle model.

Targets: int8 within 1.0 point of float (aim 0.3); every back end equal to the reference;
compile under 5 s.

    .venv/bin/python benchmarks/models.py [--config default] [--images 20] [--rtl]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import openvta

DIGITS = Path(__file__).parent.parent / "examples" / "digits"
sys.path.insert(0, str(DIGITS))
from digits_data import load_split  # noqa: E402


def _top1(logits: np.ndarray, labels: np.ndarray) -> float:
    return float((logits.argmax(1) == labels).mean())


def _onnxruntime_top1(x: np.ndarray, labels: np.ndarray) -> str:
    try:
        import onnxruntime
    except ImportError:
        return "n/a (onnxruntime not installed)"
    session = onnxruntime.InferenceSession(str(DIGITS / "digits.onnx"),
                                           providers=["CPUExecutionProvider"])
    logits = session.run(None, {session.get_inputs()[0].name: x})[0]
    return f"{_top1(logits, labels):.2%}"


def _backend_rows(model: openvta.CompiledModel, x: np.ndarray, backends: list[str]) -> list[str]:
    expected = model.reference(x)
    rows = []
    for backend in backends:
        start = time.perf_counter()
        out = model.run(x, backend=backend)
        wall = (time.perf_counter() - start) / len(x)
        equal = all(np.array_equal(out[k], expected[k]) for k in expected)
        cycles = (out.report.cycles or 0) / len(x)  # None: the back end counts no time
        rows.append(f"  {backend:<11} equal to reference: {equal}   {wall * 1e3:8.1f} ms/image"
                    + (f"   {cycles:,.0f} cycles/image" if cycles else ""))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="default", help="preset (default default)")
    parser.add_argument("--images", type=int, default=20, help="images run on each back end")
    parser.add_argument("--rtl", action="store_true", help="also run 2 images on the rtl back end (tiny)")
    args = parser.parse_args()
    x_train, _, x_test, y_test = load_split()
    calibration = x_train[:256]
    print(f"digits CNN ({DIGITS / 'digits.onnx'}), {len(x_test)} held-out images, "
          f"config {args.config}")
    models = {}
    for mode in ("fixed", "pow2"):
        start = time.perf_counter()
        models[mode] = openvta.compile_model(DIGITS / "digits.onnx", calibration=calibration,
                                             config=args.config, quantize=mode)
        print(f"compile ({mode}): {time.perf_counter() - start:.2f} s (target < 5 s)")
    fixed = models["fixed"]
    float_top1 = _top1(fixed.float_reference(x_test)["logits"], y_test)
    print("\naccuracy (top-1 on the test split)")
    print(f"  float, onnxruntime          {_onnxruntime_top1(x_test, y_test)}")
    print(f"  float, openvta reference    {float_top1:.2%}")
    for mode, model in models.items():
        top1 = _top1(model.reference(x_test)["logits"], y_test)
        print(f"  int8 {mode:<6} reference      {top1:.2%}   ({(top1 - float_top1) * 100:+.2f} points;"
              " target within 1.0)")
    plan = fixed.graph.memory
    if plan is not None:
        print(f"\narena: {plan.arena_bytes:,} bytes with reuse, {plan.no_reuse_bytes:,} without "
              f"(batch {plan.batch})")
    images = x_test[:args.images]
    print(f"\nback ends on {len(images)} images (fixed)")
    for row in _backend_rows(fixed, images, ["functional", "cycle"]):
        print(row)
    if args.rtl:
        tiny = openvta.compile_model(DIGITS / "digits.onnx", calibration=calibration,
                                     config="tiny", quantize="fixed")
        for row in _backend_rows(tiny, x_test[:2], ["rtl"]):
            print(row + "   (tiny)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The models as PyTorch exports them today, compiled as they come.

For every ``.onnx`` file of a folder made by ``benchmarks/export_models.py`` (torchvision's
resnet18, squeezenet1_1, mobilenet_v3_small, efficientnet_b0 and a 3-layer ViT, Hugging
Face's ViTModel and BertModel with its attention mask, each from ``torch.onnx.export`` with
``dynamo=True`` (opset 20) and ``dynamo=False, opset_version=17``; resnet18 with a dynamic
batch, the BERT with a dynamic sequence), print one row: compile time (median of
``--repeats``), the share of the model's MACs on the accelerator, the float reference
against onnxruntime (largest difference relative to the largest output), the int8 model's
cosine to the float output, whether ``functional`` (and ``cycle`` with ``--cycle``) equals
``model.reference``, and the cycles of one sample.

Targets (issue [3/5]): every export compiles with no rewriting, float within 1e-4,
int8 equal to the reference on every back end, >= 95 % of MACs on the accelerator,
compile < 60 s.  Calibration: 8 seeded samples given as one batch (a batch-1 export's
are split into 8 runs).

The exports need torch; make them in a separate environment (the ``exporters`` extra):

    pip install -e ".[exporters]"
    python benchmarks/export_models.py --out /tmp/exports
    python benchmarks/exporters.py /tmp/exports --cycle
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto

from openvta.graph import compile_model
from openvta.graph.ir import Device


def feeds(model: onnx.ModelProto, batch: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs: images, or 32 token ids with a mask whose last 8 are padding."""
    rng = np.random.default_rng(seed)
    result: dict[str, np.ndarray] = {}
    for value in model.graph.input:
        dims = [d.dim_value if d.dim_value > 0 else None for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == TensorProto.INT64:
            shape = (batch, dims[1] or 32)
            if "mask" in value.name:
                result[value.name] = np.ones(shape, np.int64)
                result[value.name][:, -8:] = 0
            elif "type" in value.name:
                result[value.name] = np.zeros(shape, np.int64)
            else:
                result[value.name] = rng.integers(0, 1000, shape).astype(np.int64)
        else:
            result[value.name] = rng.standard_normal((batch, *[int(d or 1) for d in dims[1:]])).astype(np.float32)
    return result


def measure(path: Path, repeats: int, cycle: bool) -> str:
    import onnxruntime as ort

    proto = onnx.load(path)
    calibration = feeds(proto, 8, seed=0)
    sample = {k: v[:1] for k, v in feeds(proto, 1, seed=1).items()}
    times, model = [], None
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            model = compile_model(proto, calibration, config="vta")
            times.append(time.perf_counter() - start)
    except Exception as exc:  # a refusal is a row of the table, with its one line
        return f"| {path.stem} | refused: {str(exc).splitlines()[0][:160]} | | | | | |"
    assert model is not None
    rows = model.nodes()
    share = sum(r.macs for r in rows if r.device is Device.ACCEL) / max(1, sum(r.macs for r in rows))
    expected = ort.InferenceSession(path.as_posix()).run(None, sample)
    got = model.float_reference(sample)
    error = max(float(np.abs(got[n] - e).max() / np.abs(e).max()) for n, e in zip(model.outputs, expected))
    reference = model.reference(sample)
    out = model.outputs[0]
    a, b = reference[out].ravel().astype(np.float64), got[out].ravel().astype(np.float64)
    cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    backends = ["functional"] + (["cycle"] if cycle else [])
    equal, cycles = [], 0
    for backend in backends:
        run = model.run(sample, backend=backend)
        equal.append(all(np.array_equal(run[n], reference[n]) for n in model.outputs))
        cycles = run.report.cycles or cycles
    return (f"| {path.stem} | {statistics.median(times):.1f} s | {100 * share:.1f} % | {error:.1e} | {cosine:.4f} "
            f"| {'yes' if all(equal) else 'NO'} ({', '.join(backends)}) | {cycles:,} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the exports (benchmarks/export_models.py --out)")
    parser.add_argument("--repeats", type=int, default=3, help="compiles to take the median of (3)")
    parser.add_argument("--cycle", action="store_true", help="also run on the cycle model (slow for full sizes)")
    args = parser.parse_args(argv)
    files = sorted(args.folder.glob("*.onnx"))
    if not files:
        print(f"no .onnx files in {args.folder}: make them with benchmarks/export_models.py", file=sys.stderr)
        return 1
    print("| export | compile | MACs on the accelerator | float vs onnxruntime | int8 cosine | int8 = reference "
          "| cycles |")
    print("|---|---|---|---|---|---|---|")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in files:
            print(measure(path, args.repeats, args.cycle), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

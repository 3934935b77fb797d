"""Post-training int8 on seeded torchvision models against onnxruntime's quantizer (issue 42).

The protocol of issue 42's "Targets", in two stages because torch and openvta live in
two environments:

    /work/exp-venv/bin/python benchmarks/ptq_protocol.py export --out /work/exports/ptq
    .venv/bin/python benchmarks/ptq_protocol.py measure --models /work/exports/ptq [--cycles]

``export`` (the ``exporters`` extra): for resnet18, mobilenet_v3_small and efficientnet_b0,
``torch.manual_seed(0)``, ``torchvision.models.<name>(weights=None)``; every BatchNorm gets
``reset_running_stats()``, ``momentum=None`` (a cumulative average) and ``train()``, then
four ``no_grad`` passes of ``torch.randn(8, 3, 224, 224,
generator=torch.Generator().manual_seed(123))``, then ``eval()``.  The expression is taken
literally: it is evaluated at each pass, with a fresh generator seeded 123, so the four
passes see the same tensor (the statistics are those of one batch of 8).  The ViT:
``torch.manual_seed(0)``, ``VisionTransformer(224, 16, 3, 3, 192, 768)`` (image size, patch,
layers, heads, hidden, MLP) with its zero-initialized head weight re-drawn
``normal_(std=0.05)``.  Each is exported with ``torch.onnx.export(..., dynamo=False,
opset_version=17)``, input ``image`` (1, 3, 224, 224), HardSwish as the exporter writes it.

``measure`` (openvta and onnxruntime, no torch): calibration is 8 successive draws of
``np.random.default_rng(0).standard_normal((1, 3, 224, 224), np.float32)``; evaluation is 64
successive draws from ``default_rng(1)``, whose first 16 are the 16-set.  Against
onnxruntime's float output of the same file: mean cosine per input (float64), centered
cosine (each side minus its mean over the evaluation set, since random weights give every
input a large common component) and top-1 agreement.  openvta: ``compile_model(file,
{"image": the 8 calibration inputs as one batch}, config="vta", **options)`` run on
``functional``.  The anchor, in the same run: ``quant_pre_process(skip_symbolic_shape=True)``
then ``quantize_static`` (QDQ, MinMax, QInt8 activations and weights), per-tensor and
per-channel, run by onnxruntime.  The anchor of each metric is the better of the two
quantizations on that metric, and the verdict is "holds" where openvta's int8 is at least
the anchor on both cosines.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

MODELS = ("resnet18", "mobilenet_v3_small", "efficientnet_b0", "vit")
INPUT = "image"
SHAPE = (1, 3, 224, 224)
CALIBRATION_SAMPLES = 8
EVALUATION_SIZES = (16, 64)


# --------------------------------------------------------------------------- export (torch)


def build(name: str) -> Any:
    """The seeded float model ``name`` in eval mode, its BatchNorm statistics re-estimated."""
    import torch
    import torchvision

    torch.manual_seed(0)
    if name == "vit":
        model = torchvision.models.VisionTransformer(224, 16, 3, 3, 192, 768)
        torch.nn.init.normal_(model.heads.head.weight, std=0.05)
        return model.eval()
    model = getattr(torchvision.models, name)(weights=None)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, 3, 224, 224, generator=torch.Generator().manual_seed(123)))
    return model.eval()


def export(out: Path, names: list[str], force: bool) -> int:
    """Write ``out/<name>.onnx`` for each model, skipping existing files unless ``force``."""
    import onnxruntime as ort
    import torch

    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = out / f"{name}.onnx"
        if path.exists() and not force:
            print(f"{name}: {path} exists (--force to export again)", flush=True)
            continue
        start = time.perf_counter()
        model = build(name)
        x = torch.from_numpy(np.random.default_rng(1).standard_normal(SHAPE, np.float32))
        torch.onnx.export(model, (x,), path.as_posix(), dynamo=False, opset_version=17,
                          input_names=[INPUT], output_names=["logits"])
        with torch.no_grad():
            expected = model(x).numpy()
        got = ort.InferenceSession(path.as_posix()).run(None, {INPUT: x.numpy()})[0]
        error = float(np.abs(got - expected).max() / np.abs(expected).max())
        print(f"{name}: {path} {path.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s, "
              f"onnxruntime vs torch {error:.1e}", flush=True)
    return 0


# --------------------------------------------------------------------------- measure (openvta, onnxruntime)


def draws(seed: int, count: int) -> list[np.ndarray]:
    """``count`` successive ``standard_normal((1, 3, 224, 224), float32)`` draws of one generator."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPE, np.float32) for _ in range(count)]


@dataclass(frozen=True)
class Figures:
    """One quantized model's agreement with the float model over an evaluation set."""

    cosine: float
    centered: float
    top1: int
    samples: int

    def __str__(self) -> str:
        return f"{self.cosine:.4f} / {self.centered:.4f} / {self.top1} of {self.samples}"


def figures(quantized: np.ndarray, reference: np.ndarray) -> Figures:
    """The metrics of the protocol for (samples, classes) outputs, in float64."""
    q, f = quantized.astype(np.float64), reference.astype(np.float64)

    def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.mean(np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))))

    return Figures(mean_cosine(q, f), mean_cosine(q - q.mean(0), f - f.mean(0)),
                   int(np.sum(q.argmax(1) == f.argmax(1))), len(q))


def ort_outputs(path: Path, inputs: list[np.ndarray]) -> np.ndarray:
    """The first output of onnxruntime's CPU session on each input, stacked (samples, classes)."""
    import onnxruntime as ort

    session = ort.InferenceSession(path.as_posix(), providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {INPUT: x})[0].reshape(1, -1) for x in inputs])


def ort_quantized(path: Path, calibration: list[np.ndarray], per_channel: bool, folder: Path) -> Path:
    """onnxruntime's ``quantize_static`` of ``path`` (QDQ, MinMax, QInt8/QInt8) after its pre-processing."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = folder / f"{path.stem}.pre.onnx"
    if not prepared.exists():
        quant_pre_process(path.as_posix(), prepared.as_posix(), skip_symbolic_shape=True)

    class Reader:
        def __init__(self) -> None:
            self.feeds: Iterator[dict[str, np.ndarray]] = iter([{INPUT: x} for x in calibration])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    out = folder / f"{path.stem}.{'per_channel' if per_channel else 'per_tensor'}.onnx"
    quantize_static(prepared.as_posix(), out.as_posix(), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=per_channel, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax)
    return out


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = action()
    return result, time.perf_counter() - start


def measure_model(path: Path, options: Mapping[str, Any], evaluation: list[np.ndarray],
                  calibration: list[np.ndarray], cycles: bool) -> dict[str, Any]:
    """Float, the two onnxruntime anchors and openvta's int8 outputs of one model, with timings."""
    from openvta import compile_model

    row: dict[str, Any] = {"model": path.stem, "options": dict(options)}
    reference, row["float_s"] = timed(lambda: ort_outputs(path, evaluation))
    outputs = {"float": reference}
    with tempfile.TemporaryDirectory() as tmp:
        for per_channel in (False, True):
            kind = "per_channel" if per_channel else "per_tensor"
            qdq, row[f"ort_{kind}_quantize_s"] = timed(
                lambda: ort_quantized(path, calibration, per_channel, Path(tmp)))  # noqa: B023 - called at once
            outputs[f"ort_{kind}"] = ort_outputs(qdq, evaluation)
    batch = {INPUT: np.concatenate(calibration)}
    try:
        model, row["compile_s"] = timed(lambda: compile_model(path.as_posix(), batch, config="vta", **options))
    except Exception as exc:  # a refusal is a row of the table, with its first line
        row["refused"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        return {"row": row, "outputs": outputs}
    out = model.outputs[0]
    int8, run_s = timed(lambda: np.concatenate(
        [model.run({INPUT: x}, backend="functional")[out].reshape(1, -1) for x in evaluation]))
    outputs["openvta"] = int8
    row["functional_s_per_sample"] = run_s / len(evaluation)
    if cycles:
        vta, row["vta_compile_s"] = timed(lambda: compile_model(path.as_posix(), batch, config="vta", **options))
        run, row["cycle_s"] = timed(lambda: vta.run({INPUT: evaluation[0]}, backend="cycle"))
        row["vta_cycles"] = run.report.cycles
    return {"row": row, "outputs": outputs}


def verdict(ours: Figures, anchor: tuple[float, float]) -> str:
    below = [name for name, mine, theirs in (("cosine", ours.cosine, anchor[0]),
                                             ("centered", ours.centered, anchor[1])) if mine < theirs]
    return "holds" if not below else f"below on {' and '.join(below)}"


def table(results: list[dict[str, Any]], size: int) -> tuple[str, dict[str, Any]]:
    """The markdown table on the first ``size`` evaluation inputs, and its figures."""
    lines = [f"evaluation: {size} inputs (cosine / centered cosine / top-1 agreement)",
             "| model | openvta int8 | ort per-tensor | ort per-channel | verdict |", "|---|---|---|---|---|"]
    data: dict[str, Any] = {}
    for result in results:
        name, outputs = result["row"]["model"], result["outputs"]
        got = {k: figures(v[:size], outputs["float"][:size]) for k, v in outputs.items() if k != "float"}
        data[name] = {k: asdict(v) for k, v in got.items()}
        ort = (got["ort_per_tensor"], got["ort_per_channel"])
        anchor = (max(f.cosine for f in ort), max(f.centered for f in ort))
        data[name]["anchor"] = {"cosine": anchor[0], "centered": anchor[1]}
        mine = str(got["openvta"]) if "openvta" in got else f"refused: {result['row']['refused']}"
        decision = verdict(got["openvta"], anchor) if "openvta" in got else "refused"
        data[name]["verdict"] = decision
        lines.append(f"| {name} | {mine} | {ort[0]} | {ort[1]} | {decision} |")
    return "\n".join(lines), data


def timings(results: list[dict[str, Any]], cycles: bool) -> str:
    head = "| model | compile | functional / sample | ort float (all) | ort quantize tensor / channel |"
    lines = [head + (" vta compile | cycle run | vta cycles |" if cycles else ""),
             "|---" * (head.count("|") - 1 + (3 if cycles else 0)) + "|"]
    for result in results:
        r = result["row"]
        cells = [r["model"], f"{r.get('compile_s', float('nan')):.1f} s",
                 f"{r.get('functional_s_per_sample', float('nan')):.2f} s", f"{r['float_s']:.1f} s",
                 f"{r['ort_per_tensor_quantize_s']:.1f} / {r['ort_per_channel_quantize_s']:.1f} s"]
        if cycles and "vta_cycles" in r:
            cells += [f"{r['vta_compile_s']:.1f} s", f"{r['cycle_s']:.1f} s", f"{r['vta_cycles']:,}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_option(text: str) -> tuple[str, Any]:
    """``key=value`` with the value an int, a float, a tuple (commas) or a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"option must be key=value, not {text!r}")

    def scalar(v: str) -> Any:
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
        return v

    return key, tuple(scalar(v) for v in value.split(",")) if "," in value else scalar(value)


def measure(args: argparse.Namespace) -> int:
    names = args.models_only.split(",") if args.models_only else list(MODELS)
    paths = [args.models / f"{name}.onnx" for name in names]
    missing = [p.as_posix() for p in paths if not p.exists()]
    if missing:
        print(f"missing exports {', '.join(missing)}: make them with the export stage", file=sys.stderr)
        return 1
    options = dict(args.option)
    sizes = sorted(set(args.eval or EVALUATION_SIZES))
    calibration, evaluation = draws(0, CALIBRATION_SAMPLES), draws(1, max(sizes))
    print(f"options {options or '(defaults)'}; calibration 8 from default_rng(0), evaluation {sizes} from "
          "default_rng(1)", flush=True)
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in paths:
            result, seconds = timed(lambda: measure_model(path, options, evaluation, calibration, args.cycles))  # noqa: B023
            result["row"]["total_s"] = seconds
            print(f"{path.stem}: {seconds:.0f} s", flush=True)
            results.append(result)
    report: dict[str, Any] = {"options": options, "runs": [r["row"] for r in results], "figures": {}}
    for size in sizes:
        text, report["figures"][size] = table(results, size)
        print("\n" + text)
    print("\n" + timings(results, args.cycles))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


def run_all(args: argparse.Namespace, rest: list[str]) -> int:
    """Both stages, each under its own interpreter."""
    script = Path(__file__).resolve().as_posix()
    force = ["--force"] if args.force else []
    code = subprocess.call([args.export_python, script, "export", "--out", str(args.models), *force])
    return code or subprocess.call([args.measure_python, script, "measure", "--models", str(args.models), *rest])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    stages = parser.add_subparsers(dest="stage", required=True)
    ex = stages.add_parser("export", help="export the four models (needs torch: the exporters extra)")
    ex.add_argument("--out", type=Path, required=True, help="folder for <name>.onnx")
    ex.add_argument("--force", action="store_true", help="export again where the file exists")
    ex.add_argument("--models-only", help=f"comma-separated subset of {','.join(MODELS)}")
    me = stages.add_parser("measure", help="the anchor and openvta's figures (openvta and onnxruntime)")
    me.add_argument("--models", type=Path, required=True, help="the export stage's folder")
    me.add_argument("--models-only", help=f"comma-separated subset of {','.join(MODELS)}")
    me.add_argument("--eval", type=int, action="append", choices=EVALUATION_SIZES,
                    help="evaluation size, repeatable (default: 16 and 64)")
    me.add_argument("--option", type=parse_option, action="append", default=[], metavar="KEY=VALUE",
                    help="extra keyword argument of openvta.compile_model (int, float, a,b tuple or str)")
    me.add_argument("--cycles", action="store_true", help="also one sample's cycles on 'cycle', config 'vta'")
    me.add_argument("--json", type=Path, help="write the figures and timings there")
    both = stages.add_parser("all", help="export then measure, each with its interpreter; other "
                                         "arguments go to measure")
    both.add_argument("--models", type=Path, required=True, help="the exports' folder")
    both.add_argument("--force", action="store_true", help="export again where the file exists")
    both.add_argument("--export-python", default="/work/exp-venv/bin/python", help="an interpreter with torch")
    both.add_argument("--measure-python", default=sys.executable, help="an interpreter with openvta")
    args, rest = parser.parse_known_args(argv)
    if args.stage == "all":
        return run_all(args, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.stage == "export":
        names = args.models_only.split(",") if args.models_only else list(MODELS)
        unknown = sorted(set(names) - set(MODELS))
        if unknown:
            parser.error(f"models must be among {', '.join(MODELS)}, not {unknown!r}")
        return export(args.out, names, args.force)
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())

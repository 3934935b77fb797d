"""``openvta model evaluate``: a compiled model measured on a dataset.

    openvta model evaluate MODEL.ovta --dataset DATA.npz|FOLDER [--labels FILE]
                           [--size N] [--crop N|HxW] [--mean A,B,C] [--std A,B,C] [--scale 1/255]
                           [--channel-order RGB|BGR] [--layout NCHW|NHWC]
                           [--metric top1|top5|cosine|MODULE:FUNCTION] [--backend functional]
                           [--batch-size N] [--executor serial|local[:N]|dask://HOST:PORT]
                           [--chunk-size N] [--report REPORT.json] [--limit N] [--quiet]

It prints the metric for the int8 and the float model side by side, with the
accelerator's cycles per sample; ``--report`` is written as chunks finish and resumed
from (``CompiledModel.evaluate``, :mod:`openvta.graph.evaluate`).  Every option is
checked here, so a bad one is one line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from openvta.graph.datasets import Preprocess
from openvta.graph.evaluate import Evaluation
from openvta.runtime import backends

from .progress import ProgressDisplay

__all__ = ["add_evaluate_parser", "parse_preprocess", "run_evaluate_command"]

_PREPROCESS = ("size", "crop", "mean", "std", "scale", "channel_order", "layout")
_LABELS = {"top1": "top-1 accuracy", "top5": "top-5 accuracy", "cosine": "cosine to float"}


def add_evaluate_parser(verbs: Any) -> None:
    ev = verbs.add_parser("evaluate", help="measure a compiled model on a dataset (top-1, top-5, cosine to "
                                           "float), int8 and float side by side, with cycles per sample")
    ev.add_argument("model", help="the compiled model (.ovta)")
    ev.add_argument("--dataset", required=True,
                    help="an .npz (one array per model input, by name, samples first; 'labels': one integer "
                         "class per sample) or a folder of images (with labels.csv or labels.txt: lines "
                         "file,label)")
    ev.add_argument("--labels", help="the labels: for an .npz, a .npy array or a text file of one integer a line; "
                                     "for a folder, a file of lines file,label")
    prep = ev.add_argument_group("image preprocessing", "a folder of images, in this order: grey or RGB as the "
                                 "model's input has 1 or 3 channels, --size, --crop, --scale, --channel-order, "
                                 "(x - mean) / std, --layout")
    prep.add_argument("--size", help="resize the shorter side to N pixels (bilinear; default: not resized)")
    prep.add_argument("--crop", help="centre crop, N or HxW pixels (default: not cropped)")
    prep.add_argument("--mean", help="subtracted per channel, one value or one per channel, e.g. 0.485,0.456,0.406 "
                                     "(default 0)")
    prep.add_argument("--std", help="divided by per channel, as --mean (default 1)")
    prep.add_argument("--scale", help="the pixels (0-255) multiplied by it first, a number or a fraction "
                                      "(default 1/255)")
    prep.add_argument("--channel-order", help="RGB (default) or BGR")
    prep.add_argument("--layout", help="NCHW (default) or NHWC")
    ev.add_argument("--metric", default="top1",
                    help="top1, top5 (need labels), cosine (int8 outputs to the float model's) or MODULE:FUNCTION, "
                         "a function (outputs, label) -> float of each sample (default top1)")
    ev.add_argument("--backend", default="functional",
                    help=f"where the int8 model runs: {', '.join(backends())} (default functional)")
    ev.add_argument("--batch-size", help="samples per run (default 1, or the model's fixed batch)")
    ev.add_argument("--executor", default="serial",
                    help="serial, local[:N] (N processes) or dask://HOST:PORT (default serial)")
    ev.add_argument("--chunk-size", help="samples per job (default 32, a multiple of the batch size)")
    ev.add_argument("--report", help="the JSON report: written as chunks finish, resumed from if it exists")
    ev.add_argument("--limit", help="the first N samples only")
    ev.add_argument("--quiet", action="store_true", help="print nothing but errors")


def _positive(value: str | None, option: str) -> int | None:
    if value is None:
        return None
    if not value.strip().isdigit() or int(value) < 1:
        raise ValueError(f"{option} must be a positive integer, not {value!r}")
    return int(value)


def _numbers(value: str, option: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in value.split(","))
    except ValueError:
        raise ValueError(f"{option} must be one number or one per channel, comma-separated "
                         f"(e.g. 0.485,0.456,0.406), not {value!r}") from None


def _scale(value: str) -> float:
    top, slash, bottom = value.partition("/")
    try:
        scale = float(top) / float(bottom) if slash else float(value)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"--scale must be a number or a fraction such as 1/255, not {value!r}") from None
    return scale


def _crop(value: str) -> tuple[int, int]:
    parts = value.lower().split("x")
    if len(parts) not in (1, 2) or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--crop must be N or HxW in positive pixels, e.g. 224 or 32x100, not {value!r}")
    return (int(parts[0]), int(parts[-1]))


def parse_preprocess(args: argparse.Namespace) -> Preprocess | None:
    """The preprocessing the options give (None: none given), or a one-line ``ValueError``."""
    if all(getattr(args, name) is None for name in _PREPROCESS):
        return None
    given: dict[str, Any] = {}
    if args.size is not None:
        given["size"] = _positive(args.size, "--size")
    if args.crop is not None:
        given["crop"] = _crop(args.crop)
    for name in ("mean", "std"):
        if getattr(args, name) is not None:
            given[name] = _numbers(getattr(args, name), f"--{name}")
    if args.scale is not None:
        given["scale"] = _scale(args.scale)
    if args.channel_order is not None:
        given["channel_order"] = args.channel_order.upper()
    if args.layout is not None:
        given["layout"] = args.layout.upper()
    return Preprocess(**given)


def run_evaluate_command(args: argparse.Namespace, output: Any) -> int:
    """Run ``openvta model evaluate``; ``output(path)`` makes an output path's folder."""
    from openvta.graph.compiled_model import load_model
    from openvta.graph.metrics import resolve_metric
    from openvta.runtime.executors import check_executor

    preprocess = parse_preprocess(args)
    batch_size = _positive(args.batch_size, "--batch-size")
    chunk_size = _positive(args.chunk_size, "--chunk-size")
    limit = _positive(args.limit, "--limit")
    check_executor(args.executor)
    if ":" in args.metric and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # MODULE:FUNCTION from the current folder, here and on local workers
    metric = resolve_metric(args.metric)
    if not os.path.exists(args.dataset):
        raise ValueError(f"dataset {args.dataset!r} does not exist")
    model = load_model(args.model)
    report = output(args.report)
    start = time.perf_counter()
    with ProgressDisplay(f"evaluate {os.path.basename(args.model)} on {args.backend}",
                         enabled=False if args.quiet else None) as show:
        result = model.evaluate(args.dataset, metric=metric, backend=args.backend, batch_size=batch_size,
                                executor=args.executor, chunk_size=chunk_size, report=report, limit=limit,
                                labels=args.labels, preprocess=preprocess, progress=show, model_name=args.model)
    if not args.quiet:
        _print(args, result, time.perf_counter() - start)
    return 0


def _print(args: argparse.Namespace, result: Evaluation, seconds: float) -> None:
    reused = f", {result.reused_chunks} from the report" if result.reused_chunks else ""
    print(f"evaluated {args.model} on {result.samples} samples of {args.dataset} on the {result.backend} back end "
          f"in {seconds:.1f} s ({args.executor}{reused})")
    if result.retried_chunks:
        print(f"note: chunk{'s' if len(result.retried_chunks) > 1 else ''} "
              f"{', '.join(map(str, result.retried_chunks))} ran again: the worker running it was lost")
    name = _LABELS.get(result.metric, result.metric)
    width = max(len(name), len("cycles per sample"))
    print(f"{'':<{width}}  {'int8':>10}  {'float':>10}")
    float_text = "reference" if result.float_score is None else _value(result.metric, result.float_score)
    print(f"{name:<{width}}  {_value(result.metric, result.int8_score):>10}  {float_text:>10}")
    cycles = "not counted" if result.cycles_per_sample is None else f"{result.cycles_per_sample:,.0f}"
    print(f"{'cycles per sample':<{width}}  {cycles:>10}")
    if args.report:
        print(f"report written to {args.report}")


def _value(metric: str, value: float) -> str:
    if metric in ("top1", "top5"):
        return f"{100 * value:.2f} %"
    return f"{value:.6f}" if metric == "cosine" else f"{value:.6g}"

"""``openvta model``: compile an ONNX model, run it, show it, evaluate it on a dataset.

    openvta model compile MODEL.onnx --calibration CALIB.npz [--machine default]
                          [--quantize fixed|pow2|exact] [--precision int8|mixed|mixed:DB|auto[:B]|int16]
                          [--calibration-method minmax|percentile[:P]|mse|entropy]
                          [--activations asymmetric|symmetric] [--cpu-ops Conv,Gemm]
                          [--records LOG.jsonl] -o MODEL.ovta
    openvta model run MODEL.ovta --inputs X.npz [--backend functional] [-o Y.npz] [--quiet]
    openvta model show MODEL.ovta
    openvta model evaluate MODEL.ovta --dataset DATA.npz|FOLDER [--metric top1|top5|cosine] ...
                                         (see openvta/evaluate_cli.py)

``CALIB.npz`` and ``X.npz`` hold one array per graph input, by name (any batch size);
``Y.npz`` gets one float32 array per graph output.  ``--records`` takes a tuning log
(``openvta tune model``): each kernel with a record gets its best plan, the others the
default one, and the summary says which.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from openvta.graph.quantization import ACTIVATIONS
from openvta.runtime import ProgramError, backends
from openvta.runtime.npz import read_npz as read_arrays

from .evaluate_cli import add_evaluate_parser, run_evaluate_command
from .machine_option import add_machine_option, machine_of

__all__ = ["add_model_parser", "parse_input_shapes", "read_npz", "run_model_command"]


def add_model_parser(sub: Any) -> None:
    model = sub.add_parser("model", help="compile an ONNX model to int8, run it, show it, evaluate it")
    verbs = model.add_subparsers(dest="verb", required=True, metavar="VERB",
                                 help="compile, run, show or evaluate")
    comp = verbs.add_parser("compile", help="quantize, partition and fuse a float ONNX model")
    comp.add_argument("model", help="the float32 ONNX model (opset 7 or newer; older than 13 upgraded)")
    comp.add_argument("--calibration", required=True,
                      help="calibration samples: an .npz with one array per graph input")
    add_machine_option(comp)
    comp.add_argument("--quantize", choices=("fixed", "pow2", "exact"),
                      help="requantization: fixed (integer multiply and rounding shift), pow2 "
                           "(shifts only, VTA's) or exact (an already-quantized QDQ model's own "
                           "scales and onnxruntime's rounding, on the CPU); default fixed, or pow2 on a "
                           "machine whose drain unit has no MUL stage (the summary says so)")
    comp.add_argument("--precision", default=None,
                      help="activations: mixed (the default with fixed and pow2: a Conv's or Gemm's "
                           "input or output whose int8 SQNR on the calibration samples is below 20 dB, "
                           "or mixed:DB, is 16-bit, in int8 passes of the accelerator); auto[:BUDGET] (16-bit "
                           "where the output feels int8 most, measured on the calibration samples, within "
                           "BUDGET times the all-int8 MAC-passes, default 1.25); int8 (every one "
                           "int8; the default with exact); int16 (every one 16-bit)")
    comp.add_argument("--calibration-method", default="minmax",
                      help="the range each activation's int8 scale covers: minmax (the largest magnitude "
                           "seen), percentile[:P] (P %% of the values below it, default 99.99), mse (the clip "
                           "with the least squared int8 error) or entropy (TensorRT's KL divergence); "
                           "default minmax")
    comp.add_argument("--activations", default=ACTIVATIONS[0], metavar="|".join(ACTIVATIONS),
                      help="asymmetric (a non-negative activation, such as a ReLU's, on all 256 codes with "
                           "the zero point -128, where its readers can take it) or symmetric (every int8 "
                           "activation's zero point 0); default asymmetric")
    comp.add_argument("--cpu-ops", default="",
                      help="comma-separated ONNX op types forced to the CPU, e.g. Conv,Gemm")
    comp.add_argument("--records", help="a tuning log (openvta tune model --log): the best plan found "
                                        "for each kernel that has one, the default plan for the others")
    comp.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                      help="an input's shape for the shape computations folded at compile time, e.g. "
                           "image=1,3,224,224 (repeat for several inputs; default: the calibration "
                           "samples' shapes)")
    comp.add_argument("-o", "--output", required=True, help="the compiled model file (.ovta)")
    run = verbs.add_parser("run", help="run a compiled model on a back end")
    run.add_argument("model", help="the compiled model (.ovta)")
    run.add_argument("--inputs", required=True, help="an .npz with one array per graph input")
    run.add_argument("--backend", default="functional",
                     help=f"where to run it: {', '.join(backends())} (default functional)")
    run.add_argument("-o", "--output", help="write the outputs (.npz, one array per graph output)")
    run.add_argument("--quiet", action="store_true", help="print nothing but errors")
    show = verbs.add_parser("show", help="print every node: op, placement and why, group, MACs")
    show.add_argument("model", help="the compiled model (.ovta)")
    add_evaluate_parser(verbs)


def parse_input_shapes(values: list[str]) -> dict[str, tuple[int, ...]]:
    """``--input-shape NAME=D1,D2,...`` values as input name → shape (one-line ``ValueError``)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for value in values:
        name, sep, dims = value.partition("=")
        parts = dims.replace("x", ",").split(",")
        if not sep or not name.strip() or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"--input-shape {value!r} must be NAME=D1,D2,... with positive integer sizes, "
                             "e.g. image=1,3,224,224")
        if name.strip() in shapes:
            raise ValueError(f"--input-shape gives input {name.strip()!r} twice")
        shapes[name.strip()] = tuple(int(p) for p in parts)
    return shapes


def read_npz(path: str, what: str) -> dict[str, np.ndarray]:
    """The arrays of the .npz at ``path`` by name (``what``: ``"calibration"`` or
    ``"inputs"``), or a one-line ``ProgramError`` naming the file and why it is not one."""
    kind = "a calibration set" if what == "calibration" else f"a set of {what}"
    return read_arrays(path, what, kind, ProgramError)


def run_model_command(args: argparse.Namespace, output: Any) -> int:
    """Run ``openvta model VERB``; ``output(path)`` makes an output path's folder."""
    from openvta import compile_model
    from openvta.graph.compiled_model import load_model
    from openvta.graph.summary import plans_line

    if args.verb == "compile":
        shapes = parse_input_shapes(args.input_shape)
        calibration = read_npz(args.calibration, "calibration")
        cpu_ops = [op.strip() for op in args.cpu_ops.split(",") if op.strip()]
        target = output(args.output)
        start = time.perf_counter()
        model = compile_model(args.model, calibration, config=machine_of(args).config,
                              quantize=args.quantize, cpu_ops=cpu_ops, records=args.records,
                              input_shapes=shapes or None, precision=args.precision,
                              calibration_method=args.calibration_method, activations=args.activations)
        model.save(target)
        print(f"compiled {args.model} ({len(model.graph.nodes)} nodes, "
              f"{len(model.accelerator_groups())} accelerator kernels) in "
              f"{time.perf_counter() - start:.2f} s; model written to {args.output}")
        for note in model.graph.notes:
            print(f"note: {note}")
        plans = plans_line(model.graph)
        if plans:
            print(f"{plans} ({args.records})")
        return 0
    if args.verb == "evaluate":
        return run_evaluate_command(args, output)
    model = load_model(args.model)
    if args.verb == "show":
        print(model.summary())
        return 0
    outputs = model.run(read_npz(args.inputs, "inputs"), backend=args.backend)
    out: Path | None = output(args.output)
    if out is not None:
        with open(out, "wb") as handle:
            np.savez(handle, **dict(outputs))
    if not args.quiet:
        for name, value in outputs.items():
            print(f"{name}: float32{list(value.shape)}")
        cycles = outputs.report.cycles
        print(f"cycles: {'not counted on this back end' if cycles is None else cycles}")
        print(outputs.report.format(plans=model.kernel_plans()))
        if out is not None:
            print(f"outputs written to {args.output}")
    return 0

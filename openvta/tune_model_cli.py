"""``openvta tune model``: tune every accelerator kernel of an ONNX model into one log.

    openvta tune model MODEL.onnx --calibration CALIB.npz [--trials-per-kernel 100]
                       [--log LOG.jsonl] [--tuner xgb|anneal|random|grid]
                       [--executor serial|local[:N]|dask://HOST:PORT] [--machine default]
                       [--quantize fixed|pow2] [--cpu-ops Conv,Gemm] [--backend cycle]
                       [--seed 0] [--batch-size 8] [--budget 2] [--cost-model auto|xgb|numpy]
                       [--quiet]

The model is compiled as ``openvta model compile`` does, then each distinct kernel tuned
(:func:`openvta.tune.tune_model.tune_model`): a line per kernel as it is done (its
default and tuned cycles), then the table.  ``openvta model compile ... --records
LOG.jsonl`` builds the model with the best plans.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from .machine_option import add_machine_option, machine_of

from .progress import ProgressDisplay
from .tune_options import add_search_options

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``model`` to ``openvta tune``'s sub-commands; returns its parser."""
    p = subparsers.add_parser("model", help="tune every accelerator kernel of an ONNX model into one log",
                              description="tune every accelerator kernel of an ONNX model into one log")
    p.add_argument("model", help="the float32 ONNX model (opset 7 or newer; older than 13 upgraded)")
    p.add_argument("--calibration", required=True,
                   help="calibration samples: an .npz with one array per graph input")
    p.add_argument("--trials-per-kernel", type=int, default=100,
                   help="configurations to measure per kernel, its default plan included (default 100)")
    add_machine_option(p)
    p.add_argument("--quantize", default="fixed", choices=("fixed", "pow2"),
                   help="requantization, as openvta model compile (default fixed)")
    p.add_argument("--cpu-ops", default="", help="comma-separated ONNX op types forced to the CPU, e.g. Conv,Gemm")
    add_search_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``openvta tune model`` (errors propagate to ``openvta.cli.main``: one line each)."""
    from openvta.tune.tune_model import KernelTuning, tune_model

    from .model_cli import read_npz

    calibration = read_npz(args.calibration, "calibration")
    cpu_ops = [op.strip() for op in args.cpu_ops.split(",") if op.strip()]
    start = time.perf_counter()
    with ProgressDisplay("tune model", enabled=False if args.quiet else None) as show:
        def done(kernel: KernelTuning, index: int, count: int) -> None:
            if not args.quiet:
                default = f"{kernel.default_cycles:,}" if kernel.default_cycles else "-"
                print(f"kernel {index + 1}/{count} {kernel.names[0]} (x{len(kernel.names)}): "
                      f"{len(kernel.result.records)} trials, {kernel.result.jobs} measured in "
                      f"{kernel.seconds:.1f} s; default {default}, tuned {kernel.tuned_cycles:,} cycles",
                      flush=True)

        tuning = tune_model(args.model, calibration, config=machine_of(args).config, quantize=args.quantize,
                            cpu_ops=cpu_ops,
                            trials_per_kernel=args.trials_per_kernel, tuner=args.tuner, executor=args.executor,
                            log=args.log, seed=args.seed, backend=args.backend, batch_size=args.batch_size,
                            budget=args.budget, cost_model=args.cost_model, progress=show, on_kernel=done)
    if not args.quiet:
        print(f"tuned {len(tuning.kernels)} kernels of {args.model} in {time.perf_counter() - start:.1f} s")
        print(tuning.format())
        if args.log:
            print(f"records written to {args.log}; openvta model compile ... --records {args.log} uses them")
    return 0

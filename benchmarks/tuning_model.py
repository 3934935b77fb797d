"""Whole ResNet-18 (examples/resnet18) tuned end to end: total cycles before and after.

Builds the model from seeded random weights, compiles it (default plans, calibrated on
four random images), tunes every distinct accelerator kernel on the cycle model
(``openvta.tune.tune_model.tune_model``: the xgb tuner by default, one log), compiles it
again with ``records=`` the log, and runs one image on the cycle model both ways.  It
prints the per-kernel table of the tuning (each kernel alone: default and tuned cycles,
the tuned knobs), the per-kernel cycles inside the whole model before and after, and the
whole-network totals; both runs' logits are checked equal to ``model.reference(x)`` (the
script fails otherwise).

    .venv/bin/python benchmarks/tuning_model.py [--size 224] [--width 64] [--trials-per-kernel 32]
                                                [--tuner xgb] [--executor serial|local:N]
                                                [--log resnet18.jsonl] [--seed 0]
    .venv/bin/python benchmarks/tuning_model.py --size 32 --width 16 --trials-per-kernel 16

Without ``--log`` the records go to a temporary folder; with it, a rerun resumes (what
is in the log is not measured again).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import openvta
from openvta.graph.ir import Device
from openvta.graph.compiled_model import CompiledModel, ModelOutputs
from openvta.graph.summary import plans_line
from openvta.tune.tune_model import KernelTuning, tune_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "resnet18"))
from make_model import build_resnet18, random_images  # noqa: E402


def run_checked(model: CompiledModel, x: np.ndarray, what: str) -> ModelOutputs:
    start = time.perf_counter()
    out = model.run(x, backend="cycle")
    equal = all(np.array_equal(out[name], value) for name, value in model.reference(x).items())
    print(f"{what}: {out.report.cycles:,} cycles on the cycle model ({time.perf_counter() - start:.1f} s wall); "
          f"outputs equal to the reference: {equal}")
    if not equal:
        raise SystemExit(f"{what}: the outputs differ from model.reference(x)")
    return out


def print_kernels(before: ModelOutputs, after: ModelOutputs) -> None:
    rows = [(k.name.split("+")[0], k.cycles, t.cycles) for k, t in zip(before.report.kernels, after.report.kernels)
            if k.placement is Device.ACCEL]
    width = max(len(r[0]) for r in rows)
    print(f"{'kernel (in the model)':<{width}} {'default':>11} {'tuned':>11} {'speed-up':>9}")
    for name, default, tuned in rows:
        print(f"{name:<{width}} {default:>11,} {tuned:>11,} {default / tuned:>8.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--config", default="default")
    parser.add_argument("--trials-per-kernel", type=int, default=32)
    parser.add_argument("--tuner", default="xgb")
    parser.add_argument("--executor", default="serial")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", help="the records file (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        log = args.log or str(Path(folder) / "resnet18.jsonl")
        proto, calibration = build_resnet18(args.size, args.width), random_images(4, args.size, seed=1)
        x = random_images(1, args.size, seed=2)
        start = time.perf_counter()
        model = openvta.compile_model(proto, calibration, config=args.config)
        print(f"ResNet-18 {args.size}x{args.size}, width {args.width}, {args.config}: compiled in "
              f"{time.perf_counter() - start:.1f} s, {len(model.accelerator_groups())} accelerator kernels")

        def done(kernel: KernelTuning, index: int, count: int) -> None:
            print(f"  kernel {index + 1}/{count} {kernel.names[0].split('+')[0]} (x{len(kernel.names)}): "
                  f"{kernel.result.jobs} measured in {kernel.seconds:.1f} s, default {kernel.default_cycles:,}, "
                  f"tuned {kernel.tuned_cycles:,}", flush=True)

        start = time.perf_counter()
        tuning = tune_model(model, trials_per_kernel=args.trials_per_kernel, tuner=args.tuner,
                            executor=args.executor, log=log, seed=args.seed, on_kernel=done)
        print(f"tuned {len(tuning.kernels)} distinct kernels, {args.trials_per_kernel} trials each, "
              f"{args.tuner} tuner, {args.executor} executor: {time.perf_counter() - start:.1f} s")
        print(tuning.format())
        start = time.perf_counter()
        tuned = openvta.compile_model(proto, calibration, config=args.config, records=log)
        print(f"compiled with records= in {time.perf_counter() - start:.1f} s; {plans_line(tuned.graph)}")
        before = run_checked(model, x, "default plans")
        after = run_checked(tuned, x, "tuned plans")
        print_kernels(before, after)
        print(f"whole network: {before.report.cycles:,} cycles with the default plans, {after.report.cycles:,} "
              f"tuned ({before.report.cycles / after.report.cycles:.3f}x, "
              f"{1 - after.report.cycles / before.report.cycles:.1%} fewer)")


if __name__ == "__main__":
    main()

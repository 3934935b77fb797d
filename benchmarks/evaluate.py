"""``openvta model evaluate`` on local processes against the serial run: time and equality.

The target: an evaluation of at least 60 s serial, run with ``--executor local:2``, takes
at most 60 % of the serial time on a 2-core machine, and its figures and per-sample values
are the serial run's.  The run: the digits CNN (``examples/digits/digits.onnx``) compiled
for ``--config`` (``default``) with 256 calibration images, evaluated for top-1 at batch 1
on the ``cycle`` back end over ``--samples`` images (default 7,200: scikit-learn's 1,797
digits, in order, repeated), in chunks of 32.  Both runs are the command itself, in a
subprocess, timed from start to exit (process start, imports and the workers' spawn
included); their reports are compared entry for entry.

    .venv/bin/python benchmarks/evaluate.py [--samples 7200] [--config default]
        [--executor local:2] [--out build/evaluate-bench]

It prints both times with the CPU time each used (the command's and its workers') and so
the cores it had on average, their ratio, whether the reports are equal, the figures, and
the load average before and after: other work on the machine takes cores from both runs,
and more from the parallel one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits"
TARGET_RATIO = 0.60
TARGET_SERIAL_S = 60.0


def prepare(out: Path, samples: int, config: str) -> tuple[Path, Path]:
    """The compiled model and the dataset (.npz with labels) in ``out``."""
    from sklearn.datasets import load_digits

    import openvta

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    labels = digits.target.astype(np.int64)
    repeat = -(-samples // len(images))
    out.mkdir(parents=True, exist_ok=True)
    model, data = out / f"digits-{config}.ovta", out / f"digits-{samples}.npz"
    openvta.compile_model(DIGITS / "digits.onnx", calibration=images[:256], config=config).save(model)
    np.savez(data, image=np.tile(images, (repeat, 1, 1, 1))[:samples], labels=np.tile(labels, repeat)[:samples])
    return model, data


def timed_run(model: Path, data: Path, executor: str, report: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the command's and its workers') of ``openvta model
    evaluate`` on ``executor`` (a fresh report each time)."""
    report.unlink(missing_ok=True)
    command = [str(Path(sys.executable).parent / "openvta"), "model", "evaluate", str(model), "--dataset",
               str(data), "--backend", "cycle", "--batch-size", "1", "--chunk-size", "32", "--executor", executor,
               "--report", str(report), "--quiet"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=7200, help="images evaluated (default 7200)")
    parser.add_argument("--config", default="default", help="the accelerator preset (default default)")
    parser.add_argument("--executor", default="local:2", help="the parallel run's executor (default local:2)")
    parser.add_argument("--out", default=str(ROOT / "build" / "evaluate-bench"), help="where the files go")
    args = parser.parse_args(argv)
    out = Path(args.out)
    model, data = prepare(out, args.samples, args.config)
    load_before = os.getloadavg()[0]
    serial_s, serial_cpu = timed_run(model, data, "serial", out / "serial.json")
    parallel_s, parallel_cpu = timed_run(model, data, args.executor, out / "parallel.json")
    serial: dict[str, Any] = json.loads((out / "serial.json").read_text())
    parallel: dict[str, Any] = json.loads((out / "parallel.json").read_text())
    equal = serial["chunks"] == parallel["chunks"] and serial["result"] == parallel["result"]
    ratio = parallel_s / serial_s
    result = serial["result"]
    print(f"digits CNN, config {args.config}, {args.samples:,} samples at batch 1 on cycle, chunks of 32")
    short = "" if serial_s >= TARGET_SERIAL_S else "  (below 60 s: raise --samples)"
    print(f"serial            {serial_s:8.1f} s   {serial_cpu:6.1f} CPU s, {serial_cpu / serial_s:.2f} cores{short}")
    print(f"{args.executor:<17} {parallel_s:8.1f} s   {parallel_cpu:6.1f} CPU s, {parallel_cpu / parallel_s:.2f} cores")
    verdict = "met" if ratio <= TARGET_RATIO else "missed"
    print(f"ratio             {ratio:8.3f}   (target <= {TARGET_RATIO:.2f}: {verdict})")
    print(f"reports equal     {equal}   (per-sample values of every chunk, and the figures)")
    print(f"top-1 int8 {100 * result['int8']:.2f} %, float {100 * result['float']:.2f} %, "
          f"{result['cycles_per_sample']:,.0f} cycles per sample")
    print(f"load average      {load_before:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} cores)")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())

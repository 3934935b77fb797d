"""Whole ResNet-18 (examples/resnet18) compile time: the median of several compiles.

Builds the 224x224 model from seeded random weights once, in memory, then times
``openvta.compile_model`` on it (calibrated on four random images, as
``benchmarks/resnet18_model.py`` compiles it) ``--runs`` times and prints each run's
seconds and their median.  Every run compiles the same model to the same programs, so the
median is the figure to compare between two versions of the compiler, measured in the
same session on the same machine:

    .venv/bin/python benchmarks/compile_time.py [--runs 5] [--size 224] [--width 64] [--config default]
    .venv/bin/python benchmarks/compile_time.py --size 32 --width 16 --config small --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import openvta

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "resnet18"))
from make_model import build_resnet18, random_images  # noqa: E402


def compile_seconds(runs: int, size: int, width: int, config: str) -> list[float]:
    """The wall time of each of ``runs`` compiles of the same ResNet-18."""
    model = build_resnet18(size, width)
    images = random_images(4, size, seed=1)
    seconds = []
    for run in range(runs):
        start = time.perf_counter()
        compiled = openvta.compile_model(model, images, config=config)
        seconds.append(time.perf_counter() - start)
        print(f"run {run + 1}: {seconds[-1]:.2f} s ({len(compiled.graph.regions)} accelerator regions)",
              flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--config", default="default")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, not {args.runs}")
    seconds = compile_seconds(args.runs, args.size, args.width, args.config)
    print(f"median of {len(seconds)}: {statistics.median(seconds):.2f} s")


if __name__ == "__main__":
    main()

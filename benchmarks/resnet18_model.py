"""Whole ResNet-18 (examples/resnet18) through ``openvta.compile_model``: the figures.

Builds the 224x224 model from seeded random weights into a temporary folder, compiles it
(calibrated on four random images), prints the placement counts, the compile time, the
wall time of one image on ``functional`` and ``cycle`` (each checked equal to the integer
reference), the total cycles and milliseconds at the timing's nominal clock, the share of
non-zero int8 activations in the last layers and the per-group cycles.

    .venv/bin/python benchmarks/resnet18_model.py [--size 224] [--width 64] [--config default]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx

import openvta
from openvta.graph.execute import execute
from openvta.graph.feeds import as_feeds
from openvta.graph.ir import Device, Op
from openvta.isa import timing_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "resnet18"))
from make_model import build_resnet18, random_images  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--config", default="default")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "resnet18.onnx"
        onnx.save(build_resnet18(args.size, args.width), str(path))
        print(f"model file {path.stat().st_size:,} bytes")
        start = time.perf_counter()
        model = openvta.compile_model(path, random_images(4, args.size, seed=1), config=args.config)
        print(f"compile {time.perf_counter() - start:.2f} s")
    nodes = model.graph.nodes
    placed = Counter((n.op.value, n.placement.device.value) for n in nodes if n.placement)
    for (op, device), count in sorted(placed.items()):
        print(f"  {op:<18}{device:<6}{count:>4}")
    cpu_convs = [n.name for n in nodes if n.op is Op.CONV and n.placement
                 and n.placement.device is Device.CPU]
    print(f"convolutions on the CPU: {', '.join(cpu_convs) or 'none'}; "
          f"{len(model.graph.regions)} accelerator regions")
    x = random_images(1, args.size, seed=2)
    expected = model.reference(x)["logits"]
    clock_mhz = timing_for(model.config).clock_mhz
    for backend in ("functional", "cycle"):
        start = time.perf_counter()
        out = model.run(x, backend=backend)
        wall = time.perf_counter() - start
        same = np.array_equal(out["logits"], expected)
        print(f"{backend:<11}{wall:7.2f} s wall, equal to the reference: {same}")
    cycles = out.report.cycles
    print(f"total cycles {cycles:,} = {cycles / clock_mhz / 1000:.2f} ms at {clock_mhz:g} MHz")
    wanted = {n.outputs[0]: n.name for n in nodes if n.name.startswith("layer4") and n.op is Op.RELU}
    execute(model.graph, as_feeds(model.graph, x), lambda value, array: print(
        f"  {wanted[value]:<16} {np.count_nonzero(array) / array.size:6.1%} non-zero int8")
        if value in wanted else None)
    print(f"{'group':<36}{'placement':>10}{'cycles':>12}{'util':>8}")
    for kernel in out.report.kernels:
        util = "" if kernel.utilization is None else f"{kernel.utilization:.1%}"
        print(f"{kernel.name:<36}{kernel.placement.value:>10}{kernel.cycles:>12,}{util:>8}")


if __name__ == "__main__":
    main()

"""Whole ResNet-18 (examples/resnet18) through ``openvta.compile_model``: the figures.

Builds the 224x224 model from seeded random weights into a temporary folder, compiles it
(calibrated on four random images), prints the placement counts, the compile time, the
wall time of one image on ``functional`` and ``cycle`` (each checked equal to the integer
reference), the total cycles and milliseconds at the timing's nominal clock, the share of
non-zero int8 activations in the last layers and the per-group cycles.

With ``--rtl`` every accelerator region's program also runs on the RTL (Verilator): the
script prints the Verilator build time (or that it was cached), the simulation's wall time and
simulated cycles per second, the RTL's cycles against the cycle model's, whether the
logits equal the reference, and the RTL's cycles per region (it counts whole programs, so
the per-group table stays the cycle model's; no RTL figure is made up per kernel).  With the
DRAM inside the Verilated design (the ``rtl`` back end's default) the
224x224 model takes about 45 s (10.2 million cycles at some 235,000 cycles/s, plus a
60-80 s first build of ``default``; 11 minutes through cocotbext-axi's AxiRam); the tests'
small variant on ``small`` a few seconds, plus 25-40 s for a first build:

    .venv/bin/python benchmarks/resnet18_model.py [--size 224] [--width 64] [--config default]
    .venv/bin/python benchmarks/resnet18_model.py --size 32 --width 16 --config small --rtl
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
from openvta.graph.compiled_model import CompiledModel, ModelOutputs
from openvta.isa import timing_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "resnet18"))
from make_model import build_resnet18, random_images  # noqa: E402

def compile_from_file(size: int, width: int, config: str) -> CompiledModel:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "resnet18.onnx"
        onnx.save(build_resnet18(size, width), str(path))
        print(f"model file {path.stat().st_size:,} bytes")
        start = time.perf_counter()
        model = openvta.compile_model(path, random_images(4, size, seed=1), config=config)
        print(f"compile {time.perf_counter() - start:.2f} s (target: under 60 s)")
    return model


def print_placement(model: CompiledModel) -> None:
    nodes = model.graph.nodes
    placed = Counter((n.op.value, n.placement.device.value) for n in nodes if n.placement)
    for (op, device), count in sorted(placed.items()):
        print(f"  {op:<18}{device:<6}{count:>4}")
    cpu_convs = [n.name for n in nodes if n.op is Op.CONV and n.placement
                 and n.placement.device is Device.CPU]
    print(f"convolutions on the CPU: {', '.join(cpu_convs) or 'none'}; "
          f"{len(model.graph.regions)} accelerator regions")


def run_timed(model: CompiledModel, x: np.ndarray, backend: str, expected: np.ndarray,
              **options: object) -> tuple[ModelOutputs, float]:
    start = time.perf_counter()
    out = model.run(x, backend=backend, **options)
    wall = time.perf_counter() - start
    same = np.array_equal(out["logits"], expected)
    print(f"{backend:<11}{wall:7.2f} s wall, equal to the reference: {same}")
    return out, wall


def run_rtl(model: CompiledModel, x: np.ndarray, expected: np.ndarray,
            modelled: int) -> ModelOutputs:
    """Every region on the RTL: the build's and the simulation's wall time, the cycles."""
    from openvta.hw.cosim.runner import BUILDING  # loads Amaranth: only for --rtl

    build: list[float] = []

    def progress(what: str, done: int, total: int | None) -> None:
        if what == BUILDING:
            build.append(time.perf_counter())

    out, wall = run_timed(model, x, "rtl", expected, progress=progress,
                          max_cycles=max(2_000_000, 2 * modelled))
    built = build[-1] - build[0] if len(build) == 2 else 0.0
    simulated = wall - built
    cycles = out.report.cycles
    print(f"rtl: Verilator build {f'{built:.1f} s' if build else 'cached'}, the rest "
          f"(elaborating, when not cached, and the runs) {simulated:.1f} s "
          f"= {cycles / simulated:,.0f} cycles/s (with each simulator's start)")
    print(f"rtl cycles {cycles:,}, the cycle model's {modelled:,} "
          f"({(modelled - cycles) / cycles:+.2%})")
    measured = {r.index: r.cycles or 0 for r in out.report.regions}  # the RTL's counters
    for region in model.graph.regions:
        print(f"  region {region.index}: {len(region.kernels):>2} kernels, "
              f"{measured.get(region.index, 0):>12,} rtl cycles")
    return out


def print_last_activations(model: CompiledModel, x: np.ndarray) -> None:
    nodes = model.graph.nodes
    wanted = {n.outputs[0]: n.name for n in nodes if n.name.startswith("layer4") and n.op is Op.RELU}
    execute(model.graph, as_feeds(model.graph, x), lambda value, array: print(
        f"  {wanted[value]:<16} {np.count_nonzero(array) / array.size:6.1%} non-zero int8")
        if value in wanted else None)


def print_groups(out: ModelOutputs, rtl: ModelOutputs | None) -> None:
    print(f"{'group':<36}{'placement':>10}{'cycles':>12}{'util':>8}")
    for kernel in out.report.kernels:
        util = "" if kernel.utilization is None else f"{kernel.utilization:.1%}"
        cycles = "" if kernel.cycles is None else f"{kernel.cycles:,}"
        print(f"{kernel.name:<36}{kernel.placement.value:>10}{cycles:>12}{util:>8}")
    if rtl is not None:  # the RTL counts whole programs: its cycles per region, not per kernel
        for region in rtl.report.regions:
            print(f"region {region.index}: {region.cycles or 0:,} rtl cycles over {region.runs} run(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--config", default="default")
    parser.add_argument("--rtl", action="store_true",
                        help="also run every accelerator region on the RTL (Verilator)")
    args = parser.parse_args()
    model = compile_from_file(args.size, args.width, args.config)
    print_placement(model)
    x = random_images(1, args.size, seed=2)
    expected = model.reference(x)["logits"]
    clock_mhz = timing_for(model.config).clock_mhz
    run_timed(model, x, "functional", expected)
    out, _ = run_timed(model, x, "cycle", expected)
    cycles = out.report.cycles
    print(f"total cycles {cycles:,} = {cycles / clock_mhz / 1000:.2f} ms at {clock_mhz:g} MHz")
    rtl = run_rtl(model, x, expected, cycles) if args.rtl else None
    print_last_activations(model, x)
    print_groups(out, rtl)


if __name__ == "__main__":
    main()

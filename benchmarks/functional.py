"""Simulated MAC/s of the functional simulator on a blocked GEMM and on ResNet-18's layers.

Target: at least 1e9 simulated MAC/s on ``--config`` (``default`` unless given), on
the project's 2-core machine, for a blocked 256×256×256 int8 GEMM.  Prints the best of
several runs, with the race checker on (the default) and off, for 1, 2 and 4 virtual
threads.

Then the compiled ResNet-18 layers C2–C11 (the same preset, 1 and 2 virtual threads):
MAC/s of each with the checker on and off, and the total of the eight programs C2, C5,
C8, C11 × 1, 2 threads compared with VTA's fsim (on ``vta``'s programs: 0.175 s on the
project's machine; target at most half of it, 0.0875 s, with the checker on), in wall
time and in CPU time (the shared machine's load shows in the first, less in the second).

Last, the whole 224×224 ResNet-18 of ``examples/resnet18`` (built in memory, compiled
with ``openvta.compile_model`` on four calibration images): the wall time of one image
on ``functional`` with the checker on and off, best of three, its logits checked equal
to the integer reference (about 30 s in all, most of it building and compiling).

One BLAS thread, as VTA's fsim is one thread: the script sets ``OPENBLAS_NUM_THREADS=1``
unless the environment sets it.  The simulator's products are small (at most some tens
of millions of MACs each), and on the shared machine OpenBLAS's second thread mostly
waits for a core: with two, the eight programs took 2-4x longer (and varied wildly)
under load.

    .venv/bin/python benchmarks/functional.py [--size 256] [--repeat 7] [--skip-gemm] [--skip-model]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read once, when numpy loads OpenBLAS

import numpy as np  # noqa: E402

import openvta  # noqa: E402
from openvta.blocked_gemm import build_blocked_gemm, read_gemm_output, reference_gemm  # noqa: E402
from openvta.isa import preset  # noqa: E402
from openvta.runtime.program import Program  # noqa: E402
from openvta.sim.functional import run  # noqa: E402

#: The programs timed against VTA's fsim, and fsim's time for them (s).
FSIM_PROGRAMS = [(layer, vthreads) for layer in (2, 5, 8, 11) for vthreads in (1, 2)]
FSIM_SECONDS = 0.175


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--config", default="default")
    parser.add_argument("--skip-gemm", action="store_true", help="no blocked GEMM")
    parser.add_argument("--skip-model", action="store_true", help="no whole ResNet-18")
    args = parser.parse_args()
    print(f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}")
    if not args.skip_gemm:
        blocked_gemm(args)
    resnet18_layers(args.repeat, args.config)
    if not args.skip_model:
        whole_resnet18(args.config)


def _best_seconds(program: Program, check: bool, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run(program, check_races=check)
        best = min(best, time.perf_counter() - start)
    return best


def resnet18_layers(repeat: int, config: str) -> None:
    """MAC/s on ResNet-18 C2–C11 and the eight-program total against VTA's fsim (whose
    programs are ``vta``'s)."""
    print(f"\nResNet-18 layers, {config} config, best of {repeat} runs")
    print(f"{'layer':>6} {'vthreads':>8} {'MACs':>10} {'ms on':>8} {'MAC/s on':>10} "
          f"{'ms off':>8} {'MAC/s off':>10}")
    programs = {}
    for layer in range(2, 12):
        for vthreads in (1, 2):
            program = openvta.compile("conv2d", layer=f"resnet18.C{layer}", vthreads=vthreads, seed=0,
                                      config=config)
            programs[layer, vthreads] = program
            macs = run(program, check_races=False).counters["macs"]
            on, off = (_best_seconds(program, check, repeat) for check in (True, False))
            print(f"{'C' + str(layer):>6} {vthreads:>8} {macs:>10} {on * 1e3:>8.2f} "
                  f"{macs / on:>10.3g} {off * 1e3:>8.2f} {macs / off:>10.3g}")
    for check in (True, False):
        best = best_cpu = float("inf")
        for _ in range(repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            for key in FSIM_PROGRAMS:
                run(programs[key], check_races=check)
            best = min(best, time.perf_counter() - start)
            best_cpu = min(best_cpu, time.process_time() - start_cpu)
        print(f"C2, C5, C8, C11 x 1, 2 threads, race checker {'on' if check else 'off'}: "
              f"{best:.4f} s ({FSIM_SECONDS / best:.2f}x VTA fsim's {FSIM_SECONDS} s); "
              f"CPU time {best_cpu:.4f} s")
    print(f"target: <= {FSIM_SECONDS / 2} s (2x fsim) with the race checker on")
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: wall time above the "
          "CPU time is waiting for a core)")


def whole_resnet18(config: str, repeat: int = 3) -> None:
    """Wall time of one 224×224 image through the whole ResNet-18 on ``functional``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "resnet18"))
    from make_model import build_resnet18, random_images

    start = time.perf_counter()
    model = openvta.compile_model(build_resnet18(), random_images(4, 224, seed=1), config=config)
    print(f"\nwhole ResNet-18 (224x224, {config} config): built and compiled in "
          f"{time.perf_counter() - start:.1f} s")
    x = random_images(1, 224, seed=2)
    expected = model.reference(x)["logits"]
    for check in (True, False):
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            out = model.run(x, backend="functional", check_races=check)
            best = min(best, time.perf_counter() - start)
            assert np.array_equal(out["logits"], expected)
        print(f"one image on functional, race checker {'on' if check else 'off'}: {best:.2f} s "
              f"wall, best of {repeat} (logits equal to the reference)")


def blocked_gemm(args: argparse.Namespace) -> None:
    """MAC/s on a blocked ``size``³ GEMM."""
    cfg = preset(args.config)
    n = args.size
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (n, n), dtype=np.int8)
    w = rng.integers(-128, 128, (n, n), dtype=np.int8)
    expected = reference_gemm(a, w, 8)
    macs = n * n * n
    print(f"blocked GEMM {n}x{n}x{n} int8 on the {args.config} config, best of {args.repeat} runs")
    print(f"{'vthreads':>8} {'insns':>6} {'races':>6} {'ms':>8} {'MAC/s':>10}")
    for vthreads in (1, 2, 4):
        program = build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=8)
        for check in (True, False):
            best = float("inf")
            for _ in range(args.repeat):
                start = time.perf_counter()
                result = run(program, check_races=check)
                best = min(best, time.perf_counter() - start)
            assert np.array_equal(read_gemm_output(program, result.dram, n, n), expected)
            print(f"{vthreads:>8} {program.insn_count:>6} {'on' if check else 'off':>6} "
                  f"{best * 1e3:>8.2f} {macs / best:>10.3g}")
    print("target: >= 1e9 simulated MAC/s (race checker on)")


if __name__ == "__main__":
    main()

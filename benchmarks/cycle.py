"""Cycle model speed and latency hiding on a blocked 256×256×256 int8 GEMM.

Targets (issue [2/6]): at least 1e6 simulated cycles per wall-clock second; a table of
cycles and GEMM utilization with 1, 2 and 4 virtual threads.

    .venv/bin/python benchmarks/cycle.py [--size 256] [--config default] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from openvta.blocked_gemm import build_blocked_gemm, read_gemm_output, reference_gemm
from openvta.isa import preset
from openvta.sim.cycle import simulate_cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--config", default="default")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cfg, n = preset(args.config), args.size
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (n, n), dtype=np.int8)
    w = rng.integers(-128, 128, (n, n), dtype=np.int8)
    expected = reference_gemm(a, w, 8)
    print(f"blocked GEMM {n}x{n}x{n} int8, {args.config} config, cycle model "
          f"(best of {args.repeat} runs, race checker on)")
    print(f"{'vthreads':>8} {'cycles':>9} {'util':>7} {'roofline':>9} {'reached':>8} "
          f"{'GOPS@100MHz':>12} {'wall ms':>9} {'cycles/s':>10}")
    for vthreads in (1, 2, 4):
        program = build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=8)
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = simulate_cycles(program)
            best = min(best, time.perf_counter() - start)
        assert np.array_equal(read_gemm_output(program, result.dram, n, n), expected)
        r = result.report
        print(f"{vthreads:>8} {r.cycles:>9} {r.utilization:>7.1%} {r.roofline_cycles:>9.0f} "
              f"{r.roofline_fraction:>8.1%} {r.gops:>12.2f} {best * 1e3:>9.1f} "
              f"{r.cycles / best:>10.3g}")
    print("target: >= 1e6 simulated cycles per second")


if __name__ == "__main__":
    main()

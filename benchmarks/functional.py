"""Simulated MAC/s of the functional simulator on a blocked 256×256×256 int8 GEMM.

Target (issue [1/6]): at least 1e9 simulated MAC/s on the default configuration, on
the project's 2-core machine.  Prints the best of several runs, with the race checker
on (the default) and off, for 1, 2 and 4 virtual threads.

    .venv/bin/python benchmarks/functional.py [--size 256] [--repeat 7]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from openvta.blocked_gemm import build_blocked_gemm, read_gemm_output, reference_gemm
from openvta.isa import preset
from openvta.sim.functional import run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--config", default="default")
    args = parser.parse_args()
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

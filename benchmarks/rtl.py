"""RTL figures: Verilator build time, simulated cycles per second through cocotb, and the
cycle model's error against the RTL on every RTL test program.

Targets (issue [4/6]): at least 20k simulated cycles/s on ``default``; model error at
most 5 % on every program and 2 % on the blocked GEMM.

    .venv/bin/python benchmarks/rtl.py [--presets tiny,small,default] [--fresh]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests" / "hw"))

from openvta.blocked_gemm import build_blocked_gemm  # noqa: E402
from openvta.hw.backend import RtlBackend  # noqa: E402
from openvta.isa import preset  # noqa: E402
from openvta.sim.cycle import simulate_cycles  # noqa: E402
from openvta.sim.functional import run  # noqa: E402


def _programs(cfg):  # the programs of tests/hw/test_rtl.py
    from test_rtl import _alu_program, _gemm_program, _load_program

    return {"alu": _alu_program(cfg), "load": _load_program(cfg),
            "gemm 1 vthread": _gemm_program(cfg, 1), "gemm 2 vthreads": _gemm_program(cfg, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", default="tiny,small,default")
    parser.add_argument("--fresh", action="store_true", help="time a build in an empty cache")
    args = parser.parse_args()
    for name in args.presets.split(","):
        cfg = preset(name)
        root = Path(tempfile.mkdtemp()) if args.fresh else None
        backend = RtlBackend(build_root=root, max_cycles=20_000_000)
        start = time.perf_counter()
        backend.build_dir(cfg)
        build_s = time.perf_counter() - start
        rng = np.random.default_rng(0)
        size = {"tiny": 64, "small": 96, "default": 128}[name]
        big, small = (build_blocked_gemm(cfg, rng.integers(-128, 128, (n, n), dtype=np.int8),
                                         rng.integers(-128, 128, (n, n), dtype=np.int8),
                                         vthreads=2, shift=8) for n in (size * 2, size // 4))
        timings = []
        for program in (small, big):
            start = time.perf_counter()
            result = backend.run(program)
            timings.append((result.counters["cycles"], time.perf_counter() - start))
        ok = np.array_equal(result.dram, run(big).dram)
        (c0, t0), (c1, t1) = timings
        print(f"{name}: Verilator build {build_s:.1f} s{' (fresh)' if args.fresh else ' (cache)'}; "
              f"{2 * size}^3 GEMM: {c1} cycles in {t1:.1f} s through cocotb "
              f"({c1 / t1:,.0f} cycles/s with the simulator's start-up, "
              f"{(c1 - c0) / (t1 - t0):,.0f} cycles/s steady); "
              f"{'matches' if ok else 'DOES NOT MATCH'} functional", flush=True)
        print(f"  {'program':<18}{'RTL cycles':>11}{'model':>9}{'error':>8}")
        for label, program in {**_programs(cfg), f"gemm {2 * size}^3": big}.items():
            rtl = c1 if program is big else backend.run(program).counters["cycles"]
            model = simulate_cycles(program).counters["cycles"]
            print(f"  {label:<18}{rtl:>11}{model:>9}{(model - rtl) / rtl:>+8.2%}")
    print("targets: >= 20k cycles/s on default (steady); model error <= 5 % (2 % on the blocked GEMM)")


if __name__ == "__main__":
    main()

"""``make demo``: a blocked int8 GEMM built by hand, with 1 and 2 virtual threads.

Builds ``C = saturate_int8((A @ Wᵀ) >> 8)`` for 128×128×128 on the default (VTA)
configuration with :class:`~openvta.runtime.ProgramBuilder`, runs both programs on
the functional simulator (with the race checker on) and on the cycle model, checks
them against numpy and prints the result, the counters and where the cycles went.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from openvta.blocked_gemm import build_blocked_gemm, read_gemm_output, reference_gemm
from openvta.isa import preset
from openvta.runtime import Device
from openvta.sim.cycle import simulate_cycles


def main(size: int = 128, shift: int = 8) -> int:
    cfg = preset("default")
    rng = np.random.default_rng(2026)
    a = rng.integers(-128, 128, (size, size), dtype=np.int8)
    w = rng.integers(-128, 128, (size, size), dtype=np.int8)
    expected = reference_gemm(a, w, shift)
    device = Device("functional")
    print(f"openvta demo: C = saturate_int8((A @ W.T) >> {shift}), {size}x{size}x{size} int8, "
          f"config default (1x{cfg.BLOCK_IN}x{cfg.BLOCK_OUT} GEMM core)")
    outputs = []
    for vthreads in (1, 2):
        program = build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=shift)
        start = time.perf_counter()
        result = device.run(program)
        seconds = time.perf_counter() - start
        c = read_gemm_output(program, result.dram, size, size)
        ok = np.array_equal(c, expected)
        outputs.append(c)
        print(f"\n{vthreads} virtual thread{'s' if vthreads > 1 else ''}: {program.insn_count} "
              f"instructions, functional simulator {seconds * 1e3:.1f} ms, "
              f"{'matches numpy' if ok else 'DOES NOT MATCH numpy'}")
        for name in ("load_insns", "compute_insns", "store_insns", "gemm_uops", "macs",
                     "inp_load_bytes", "wgt_load_bytes", "out_store_bytes", "token_pushes"):
            print(f"  {name:<16} {result.counters[name]}")
        report = simulate_cycles(program).report
        print(f"  cycle model: {report.cycles} cycles, GEMM utilization {report.utilization:.1%}, "
              f"{report.gops:.1f} GOPS at {report.clock_mhz:g} MHz")
        if not ok:
            return 1
    same = np.array_equal(outputs[0], outputs[1])
    print(f"\n1 and 2 virtual threads give {'identical' if same else 'DIFFERENT'} results")
    print("C[:4, :8] =")
    print(outputs[0][:4, :8])
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

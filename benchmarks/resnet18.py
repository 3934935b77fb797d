"""ResNet-18 conv layers C2–C11 on the cycle model (default preset), 1 and 2 virtual threads.

For each layer: cycles, GOPS at the nominal 100 MHz, GEMM utilization, the roofline
bound of the bytes the schedule moves and the fraction of it reached, the ideal bound
(the MACs at the peak rate or the compulsory DRAM bytes — each input element the layer
uses, each weight, bias and output once — whichever is slower) and the fraction of it
reached, compile time, and where the cycles go (the load, store and ALU busy cycles, and
the compute module's waits for tokens); every output is
checked against numpy.  Targets: on
the ideal bound, at least 90 % on average with virtual threads and no layer below 75 %;
under 2 s to compile a layer.

    .venv/bin/python benchmarks/resnet18.py [--layers C2,C5] [--vthreads 1,2] [--config default]
    .venv/bin/python benchmarks/resnet18.py --whole [resnet18_model.py's options]

``--whole`` runs the whole network instead (``benchmarks/resnet18_model.py``: compile time,
functional and cycle wall times, total cycles and the per-layer table, ``--rtl`` too).
"""

from __future__ import annotations

import argparse
import runpy
import sys
import time
from pathlib import Path

import numpy as np

import openvta
from openvta.compiler.workloads import RESNET18, random_inputs


def main() -> None:
    if "--whole" in sys.argv[1:]:
        sys.argv = [sys.argv[0], *(arg for arg in sys.argv[1:] if arg != "--whole")]
        runpy.run_path(str(Path(__file__).with_name("resnet18_model.py")), run_name="__main__")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", default=",".join(f"C{i}" for i in range(2, 12)))
    parser.add_argument("--vthreads", default="1,2")
    parser.add_argument("--config", default="default")
    args = parser.parse_args()
    threads = [int(t) for t in args.vthreads.split(",")]
    print(f"ResNet-18 on the cycle model, {args.config} config "
          f"(GOPS at the timing's nominal clock)")
    print(f"{'layer':<6}{'vt':>3}{'cycles':>11}{'GOPS':>8}{'util':>8}{'roofline':>10}"
          f"{'reached':>9}{'bound':>9}{'ideal':>9}{'reached':>9}{'bound':>9}{'GEMM+ALU':>10}"
          f"{'reached':>9}{'compile s':>11}{'insns':>7}  check   where the cycles go (busy: load, store, ALU; "
          f"compute waiting for tokens)")
    fractions: dict[int, list[float]] = {t: [] for t in threads}
    ideal_fractions: dict[int, list[float]] = {t: [] for t in threads}
    machine_fractions: dict[int, list[float]] = {t: [] for t in threads}
    compile_times = []
    for name in args.layers.split(","):
        wl = RESNET18[name]
        operands = random_inputs(wl, seed=0)
        for vt in threads:
            start = time.perf_counter()
            op = openvta.operator("conv2d", layer=name, config=args.config, vthreads=vt)
            program = op.build({k: operands[k] for k in ("data", "weight", "bias")})
            compile_s = time.perf_counter() - start
            compile_times.append(compile_s)
            result = openvta.simulate(program, backend="cycle")
            r = result.report
            assert r is not None  # the cycle back end reports
            ok = np.array_equal(result["out"], op.reference(operands))
            fractions[vt].append(r.roofline_fraction)
            ideal_fractions[vt].append(r.ideal_fraction)
            # the compute module runs GEMM and ALU micro-ops one after the other: their
            # busy cycles are a bound the MAC/byte roofline does not see
            machine = max(r.roofline_cycles, r.counters["gemm_busy_cycles"]
                          + r.counters["alu_busy_cycles"])
            machine_fractions[vt].append(machine / r.cycles)
            print(f"{name:<6}{vt:>3}{r.cycles:>11}{r.gops:>8.1f}{r.utilization:>8.1%}"
                  f"{r.roofline_cycles:>10.0f}{r.roofline_fraction:>9.1%}{r.bound:>9}"
                  f"{r.ideal_cycles:>9.0f}{r.ideal_fraction:>9.1%}{r.ideal_bound:>9}"
                  f"{machine:>10.0f}{machine / r.cycles:>9.1%}"
                  f"{compile_s:>11.2f}{program.insn_count:>7}  {'ok' if ok else 'MISMATCH':<8}"
                  f"load {r.counters['load_busy_cycles']:>7} store {r.counters['store_busy_cycles']:>7} "
                  f"ALU {r.counters['alu_busy_cycles']:>7} waits {r.counters['compute_wait_token_cycles']:>7}",
                  flush=True)
    for vt, values in fractions.items():
        ideal = ideal_fractions[vt]
        print(f"average fraction reached with {vt} virtual thread(s): ideal bound "
              f"{np.mean(ideal):.1%} (lowest {min(ideal):.1%}), roofline of the bytes moved "
              f"{np.mean(values):.1%}, GEMM+ALU bound {np.mean(machine_fractions[vt]):.1%}")
    print(f"slowest compile: {max(compile_times):.2f} s (target < 2 s); target: on the ideal "
          "bound, >= 90 % on average with virtual threads and no layer below 75 %")


if __name__ == "__main__":
    main()

"""RTL figures: Verilator build time, simulated cycles per second through cocotb, and the
cycle model's error against the RTL on every RTL test program; then one ResNet-18 layer
on both DRAMs of the ``rtl`` back end, in one run.

Targets: at least 20k simulated cycles/s on ``vta``; model error at
most 5 % on every program and 2 % on the blocked GEMM; C11 (``vta``, 2
virtual threads) at 200k simulated cycles/s or more with the DRAM inside the design
(``memory="native"``), with the same final DRAM and counters as cocotbext-axi's AxiRam
(``memory="cocotb"``).  Wall times include each run's simulator start, image files and
result; CPU times are the simulator process's.

    .venv/bin/python benchmarks/rtl.py [--presets tiny,small,vta] [--fresh]
                                       [--memory native|cocotb] [--layer C11|''] [--v2-layers C4,C5,C11]

Machine v2: C4, C5 and C11 (``--v2-layers``), the RTL with its drain unit
equal to the functional simulator and within 2 % of the cycle model.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests" / "hw"))

from openvta.blocked_gemm import build_blocked_gemm  # noqa: E402
from openvta.hw.cosim.backend import RtlBackend  # noqa: E402
from openvta.isa import preset  # noqa: E402
from openvta.sim.cycle import simulate_cycles  # noqa: E402
from openvta.sim.functional import run  # noqa: E402


def _programs(cfg):  # the programs of tests/hw/test_rtl.py
    from test_rtl import _alu_program, _gemm_program, _load_program

    return {"alu": _alu_program(cfg), "load": _load_program(cfg),
            "gemm 1 vthread": _gemm_program(cfg, 1), "gemm 2 vthreads": _gemm_program(cfg, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", default="tiny,small,vta")
    parser.add_argument("--fresh", action="store_true", help="time a build in an empty cache")
    parser.add_argument("--memory", default="native", choices=["native", "cocotb"])
    parser.add_argument("--layer", default="C11", help="ResNet-18 layer on both DRAMs ('' for none)")
    parser.add_argument("--v2-layers", default="C4,C5,C11",
                        help="ResNet-18 layers on machine v2's RTL ('' for none)")
    args = parser.parse_args()
    for name in filter(None, args.presets.split(",")):
        cfg = preset(name)
        root = Path(tempfile.mkdtemp()) if args.fresh else None
        backend = RtlBackend(build_root=root, max_cycles=20_000_000, memory=args.memory)
        start = time.perf_counter()
        backend.build_dir(cfg)
        build_s = time.perf_counter() - start
        rng = np.random.default_rng(0)
        size = {"tiny": 64, "small": 96, "vta": 128}[name]
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
        print(f"{name} ({args.memory} DRAM): Verilator build {build_s:.1f} s"
              f"{' (fresh)' if args.fresh else ' (cache)'}; "
              f"{2 * size}^3 GEMM: {c1} cycles in {t1:.1f} s through cocotb "
              f"({c1 / t1:,.0f} cycles/s with the simulator's start-up, "
              f"{(c1 - c0) / (t1 - t0):,.0f} cycles/s steady); "
              f"{'matches' if ok else 'DOES NOT MATCH'} functional", flush=True)
        print(f"  {'program':<18}{'RTL cycles':>11}{'model':>9}{'error':>8}")
        for label, program in {**_programs(cfg), f"gemm {2 * size}^3": big}.items():
            rtl = c1 if program is big else backend.run(program).counters["cycles"]
            model = simulate_cycles(program).counters["cycles"]
            print(f"  {label:<18}{rtl:>11}{model:>9}{(model - rtl) / rtl:>+8.2%}")
    if args.layer:
        compare_drams(args.layer)
    if args.v2_layers:
        machine_v2(args.v2_layers.split(","))
    print("targets: >= 20k cycles/s on vta (steady); model error <= 5 % (2 % on the blocked GEMM); "
          "a layer at >= 200k cycles/s with the native DRAM, identical on both")


def compare_drams(layer: str) -> None:
    """One ResNet-18 layer on ``vta`` (2 virtual threads) on both DRAMs, then the checks."""
    import openvta
    from openvta.compiler.workloads import RESNET18, random_inputs

    operands = random_inputs(RESNET18[layer], seed=0)
    op = openvta.operator("conv2d", layer=layer, config="vta", vthreads=2)
    program = op.build({k: operands[k] for k in ("data", "weight", "bias")})
    results, rates = {}, {}
    print(f"{layer} on vta, 2 virtual threads ({len(program.dram):,} bytes of DRAM):")
    for memory in ("native", "cocotb"):
        backend = RtlBackend(max_cycles=20_000_000, memory=memory)
        backend.build_dir(program.config, len(program.dram))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        results[memory] = result = backend.run(program)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        cycles = result.counters["cycles"]
        rates[memory] = cycles / wall
        print(f"  {memory:<7}{cycles:>10,} cycles in {wall:6.1f} s wall ({cycles / wall:>9,.0f} cycles/s), "
              f"{cpu:6.1f} s CPU ({cycles / cpu:>9,.0f} cycles per CPU second)", flush=True)
    native, cocotb = results["native"], results["cocotb"]
    print(f"  native / cocotb: {rates['native'] / rates['cocotb']:.1f}x wall; final DRAM "
          f"{'identical' if np.array_equal(native.dram, cocotb.dram) else 'DIFFERENT'}, counters "
          f"{'identical' if native.counters == cocotb.counters else 'DIFFERENT'}, DRAM "
          f"{'equal to' if np.array_equal(native.dram, run(program).dram) else 'DIFFERENT from'} "
          f"the functional simulator's")


def machine_v2(layers: list[str]) -> None:
    """ResNet-18 layers on machine v2 (preset ``v2``, 2 virtual threads) on the RTL with its
    drain unit (native DRAM): the final DRAM against the functional simulator's, the cycles
    against the cycle model's (targets: equal, and within 2 %)."""
    import openvta
    from openvta.compiler.workloads import RESNET18, random_inputs

    print("machine v2 (preset v2, 2 virtual threads) on the RTL with its drain unit:")
    for layer in layers:
        operands = random_inputs(RESNET18[layer], seed=0)
        op = openvta.operator("conv2d", layer=layer, config="v2", vthreads=2)
        program = op.build({k: operands[k] for k in ("data", "weight", "bias")})
        backend = RtlBackend(max_cycles=20_000_000, memory="native")
        start = time.perf_counter()
        result = backend.run(program)
        wall = time.perf_counter() - start
        rtl, model = result.counters["cycles"], simulate_cycles(program).counters["cycles"]
        equal = np.array_equal(result.dram, run(program).dram)
        error = (model - rtl) / rtl
        print(f"  {layer:<4}{rtl:>10,} RTL cycles, model {model:>10,} ({error:+.2%}); DRAM "
              f"{'equal to' if equal else 'DIFFERENT from'} the functional simulator's; {wall:.1f} s wall "
              f"(target: equal, within 2 %: {'yes' if equal and abs(error) <= 0.02 else 'NO'})", flush=True)


if __name__ == "__main__":
    main()

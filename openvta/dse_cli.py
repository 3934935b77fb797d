"""``openvta dse``: hardware design-space exploration on a board (:mod:`openvta.dse`).

    openvta dse --board ulx3s-85f --workload resnet18 [--configs SPEC [SPEC ...]] -o DIR
                [--layers C2,C5] [--records LOG.jsonl] [--no-build] [--freq MHZ]
                [--timeout S] [--executor serial|local:N|dask://HOST:PORT] [--quiet]

A SPEC is a preset or a preset with changed keys: ``tiny``, ``tiny:LOG_BUS_WIDTH=6``,
``small:LOG_INP_BUFF_SIZE=11,LOG_ACC_BUFF_SIZE=13``, machine v2's drain unit
``small:LOG_EPI_BUFF_SIZE=12,DRAIN_STAGES=4``.  Each configuration is estimated,
built (synthesis, place and route) and run on the cycle model; the table, ``DIR/dse.json``
and ``DIR/pareto.png`` follow.  Running it again on the same ``DIR`` resumes.  With
``--executor local:N`` or ``dask://HOST:PORT`` the configurations' builds and cycles run
on N worker processes or a Dask cluster's workers (the same table).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_dse_parser", "run_dse_command"]


def add_dse_parser(sub: Any, boards: list[str]) -> None:
    """Add ``dse`` to ``openvta``'s sub-commands."""
    from openvta.dse import WORKLOADS

    p = sub.add_parser("dse", help="hardware design-space exploration: fit, Fmax, resources and "
                       "cycles of several configurations",
                       description="Explore hardware configurations on a board: the fit estimate, "
                       "synthesis and place and route (resources, Fmax), the workload's cycles on "
                       "the cycle model, latency = cycles / Fmax and the Pareto fronts; writes "
                       "DIR/dse.json and DIR/pareto.png, and resumes from DIR (docs/DSE.md).")
    p.add_argument("--board", required=True, choices=boards, help="the FPGA board")
    p.add_argument("--workload", default="resnet18", choices=sorted(WORKLOADS),
                   help="the layers run on the cycle model (default resnet18: C2-C11)")
    p.add_argument("--machines", "--configs", dest="configs", nargs="+", metavar="MACHINE",
                   help="the machines explored: PRESET or PRESET:KEY=VALUE,... (KEY a Config key, machine "
                   "v2's LOG_EPI_BUFF_SIZE, DRAIN_STAGES and DRAIN_OPS (RSHR+SHR/ADD/CLIP) included, a lean build "
                   "option, counters or memory; docs/PRESETS.md); default: the board's set, see docs/DSE.md; "
                   "--configs is its older name")
    p.add_argument("-o", "--output", required=True, help="output folder (resumed if it holds a dse.json)")
    p.add_argument("--layers", help="a subset of the workload's layers, e.g. C2,C5")
    p.add_argument("--records", help="a tuning log: layers use its best plans where it has them")
    p.add_argument("--no-build", action="store_true",
                   help="skip synthesis and place and route (fit estimate and cycles only)")
    p.add_argument("--freq", type=float, help="Fmax target for nextpnr in MHz (default: the board's)")
    p.add_argument("--timeout", type=float, default=3600.0,
                   help="seconds each tool may run per configuration (default 3600)")
    p.add_argument("--executor", default="serial",
                   help="where the configurations' builds and cycles run: serial (default), local:N "
                   "(N processes) or dask://HOST:PORT (a Dask scheduler; pip install 'openvta[tune]'); "
                   "a job whose worker is lost runs once more")
    p.add_argument("--quiet", action="store_true", help="print only the final table and errors")


def run_dse_command(args: argparse.Namespace) -> int:
    """Run ``openvta dse`` (errors propagate to ``openvta.cli.main``: one line each)."""
    from openvta.dse import DSE_FILE, PLOT_FILE, format_table, run_dse

    if args.timeout <= 0:
        raise ValueError(f"--timeout must be a positive number of seconds, not {args.timeout:g}")
    layers = [x.strip() for x in args.layers.split(",") if x.strip()] if args.layers else None
    points = run_dse(args.board, args.output, configs=args.configs, workload=args.workload,
                     layers=layers, records=args.records, build=not args.no_build,
                     target_mhz=args.freq, timeout_s=args.timeout, executor=args.executor,
                     progress=(lambda line: None) if args.quiet else None)
    print(format_table(points))
    plotted = any(p.latency_ms is not None for p in points)
    print(f"written: {args.output}/{DSE_FILE}" + (f", {args.output}/{PLOT_FILE}" if plotted else ""))
    return 0

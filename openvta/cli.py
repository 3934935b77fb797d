"""The ``openvta`` command line.

    openvta run PROGRAM.npz [--backend functional|cycle] [-o RESULT.npz] [--no-race-check]
                [--trace TRACE.json] [--timeline TIMELINE.png] [--max-cycles N]
    openvta disasm PROGRAM.npz [--uops]
    openvta config [PRESET]

Errors in the program (a malformed file, a deadlock, a race…) exit with status 1
and the message on stderr; a bad command line exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import numpy as np

from openvta.isa import PRESETS, ConfigError, ISAError, MemInsn, MemoryType, decode_uops, format_insn
from openvta.runtime import BackendError, Device, ProgramError, backends, load_program

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openvta", description=__doc__.split("\n")[1].strip())
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a program file on a back end")
    run.add_argument("program", help="program file (.npz)")
    run.add_argument("--backend", default="functional", help=f"one of {', '.join(backends())}")
    run.add_argument("-o", "--output", help="write the result file (.npz) here")
    run.add_argument("--no-race-check", action="store_true",
                     help="functional back end: skip the token race checker (faster)")
    run.add_argument("--quiet", action="store_true", help="print nothing but errors")
    run.add_argument("--trace", help="cycle back end: write a Chrome/Perfetto trace (JSON) here")
    run.add_argument("--timeline", help="cycle back end: write a timeline figure (PNG) here")
    run.add_argument("--max-cycles", type=int, help="cycle back end: stop past this many cycles")
    dis = sub.add_parser("disasm", help="print a program's instructions as assembly")
    dis.add_argument("program", help="program file (.npz)")
    dis.add_argument("--uops", action="store_true", help="also list the micro-ops each LOAD UOP brings in")
    cfg = sub.add_parser("config", help="print a preset configuration as JSON")
    cfg.add_argument("preset", nargs="?", default="default", choices=sorted(PRESETS))
    return parser


def _run(args: argparse.Namespace) -> int:
    program = load_program(args.program)
    options: dict[str, object] = {}
    if args.no_race_check and args.backend in ("functional", "cycle"):
        options["check_races"] = False
    timed = args.trace or args.timeline or args.max_cycles is not None
    if timed and args.backend != "cycle":
        raise ProgramError("--trace, --timeline and --max-cycles need --backend cycle")
    if args.max_cycles is not None:
        options["max_cycles"] = args.max_cycles
    result = Device(args.backend, **options).run(program)
    if args.output:
        result.save(args.output)
    if args.trace:
        result.report.write_trace(args.trace)
    if args.timeline:
        result.report.write_timeline(args.timeline, title=str(args.program))
    if not args.quiet:
        print(f"ran {program.insn_count} instructions on the {args.backend} back end")
        if hasattr(result.report, "format"):
            print(result.report.format())
            print()
        width = max((len(k) for k in result.counters), default=0)
        for name, value in result.counters.items():
            print(f"  {name:<{width}}  {value}")
        for what, path in (("result", args.output), ("trace", args.trace),
                           ("timeline", args.timeline)):
            if path:
                print(f"{what} written to {path}")
    return 0


def _disasm(args: argparse.Namespace) -> int:
    program = load_program(args.program)
    cfg = program.config
    print(f"# {program.insn_count} instructions at byte {program.insn_addr}, config {cfg.name}")
    for index, insn in enumerate(program.instructions()):
        print(f"{index:6d}  {format_insn(insn)}")
        if args.uops and isinstance(insn, MemInsn) and insn.memory_type == MemoryType.UOP \
                and insn.x_size:
            start = insn.dram_base * cfg.uop_elem_bytes
            end = start + insn.x_size * cfg.uop_elem_bytes
            if end > len(program.dram):
                print(f"          micro-ops at bytes {start}..{end - 1} lie outside the DRAM "
                      f"image ({len(program.dram)} bytes)")
                continue
            raw = program.dram[start:end]
            uops = decode_uops(np.ascontiguousarray(raw).view("<u4"), cfg)
            for k in range(insn.x_size):
                print(f"          uop[{insn.sram_base + k}] dst_idx={uops['dst_idx'][k]} "
                      f"src_idx={uops['src_idx'][k]} wgt_idx={uops['wgt_idx'][k]}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "disasm":
            return _disasm(args)
        print(json.dumps(PRESETS[args.preset].to_dict(), indent=2))
        return 0
    except (ProgramError, BackendError, ConfigError, ISAError) as exc:
        print(f"openvta: error: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # SimulationError and back-end failures
        print(f"openvta: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

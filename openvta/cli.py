"""The ``openvta`` command line.

    openvta run PROGRAM.npz [--backend functional|cycle|rtl|board] [-o RESULT.npz] [--no-race-check]
                [--trace TRACE.json] [--timeline TIMELINE.png] [--max-cycles N]
    openvta disasm PROGRAM.npz [--uops]
    openvta compile conv2d --hw H --ci CI --co CO --kernel K [--pad P] [--stride S] ... -o PROG.npz
    openvta compile conv2d --layer resnet18.C5 ... -o PROG.npz
    openvta compile dense --batch N --in I --out O ... -o PROG.npz
    openvta verilog [--config PRESET] -o FILE.v [--lint]
    openvta bitstream --board icebreaker|ulx3s-85f [--config PRESET] [-o DIR] [--mem-kib N]
                      [--link-test]
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

from openvta.hw.boards import BOARDS
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
    run.add_argument("--max-cycles", type=int, help="cycle and rtl back ends: stop past this many cycles")
    run.add_argument("--waves", help="rtl back end: write the waveform (VCD) of the run here")
    run.add_argument("--port", help="board back end: the serial port of the board (e.g. /dev/ttyUSB0)")
    run.add_argument("--baud", type=int, default=115200, help="board back end: serial speed")
    dis = sub.add_parser("disasm", help="print a program's instructions as assembly")
    dis.add_argument("program", help="program file (.npz)")
    dis.add_argument("--uops", action="store_true", help="also list the micro-ops each LOAD UOP brings in")
    comp = sub.add_parser("compile", help="compile a benchmark operator with random operands")
    comp.add_argument("operator", choices=["conv2d", "dense"])
    comp.add_argument("--layer", help="a ResNet-18 layer of WORKLOADS.md, e.g. resnet18.C5")
    for flag in ("--hw", "--ci", "--co", "--kernel", "--batch", "--in", "--out"):
        comp.add_argument(flag, type=int)
    comp.add_argument("--pad", type=int, default=0)
    comp.add_argument("--stride", type=int, default=1)
    comp.add_argument("--shift", type=int, default=8)
    comp.add_argument("--vthreads", type=int, default=1)
    comp.add_argument("--config", default="default", choices=sorted(PRESETS))
    comp.add_argument("--seed", type=int, default=0)
    comp.add_argument("-o", "--output", required=True, help="program file to write (.npz)")
    ver = sub.add_parser("verilog", help="export the accelerator's Verilog (module openvta_top)")
    ver.add_argument("--config", default="default", choices=sorted(PRESETS))
    ver.add_argument("-o", "--output", required=True, help="Verilog file to write")
    ver.add_argument("--lint", action="store_true",
                     help="also run verilator --lint-only -Wall (documented waivers only)")
    bit = sub.add_parser("bitstream", help="build the SoC's FPGA bitstream with Yosys and nextpnr")
    bit.add_argument("--board", required=True, choices=sorted(BOARDS))
    bit.add_argument("--config", default="tiny", choices=sorted(PRESETS))
    bit.add_argument("-o", "--output", help="build directory (default build/BOARD-PRESET)")
    bit.add_argument("--mem-kib", type=int, help="on-chip DRAM of the SoC in KiB (a power of two; "
                     "default 4 on icebreaker, 64 on ulx3s-85f)")
    bit.add_argument("--baud", type=int, default=115200, help="UART speed of the host bridge")
    bit.add_argument("--freq", type=float, help="Fmax target for nextpnr in MHz "
                     "(default 24 on icebreaker, 50 on ulx3s-85f)")
    bit.add_argument("--link-test", action="store_true",
                     help="build the link-test image: UART bridge and memory, no accelerator")
    bit.add_argument("--timeout", type=float, default=7200.0,
                     help="seconds each tool may run before the build is abandoned")
    cfg = sub.add_parser("config", help="print a preset configuration as JSON")
    cfg.add_argument("preset", nargs="?", default="default", choices=sorted(PRESETS))
    return parser


def _run(args: argparse.Namespace) -> int:
    program = load_program(args.program)
    options: dict[str, object] = {}
    if args.no_race_check and args.backend in ("functional", "cycle"):
        options["check_races"] = False
    if (args.trace or args.timeline) and args.backend != "cycle":
        raise ProgramError("--trace and --timeline need --backend cycle")
    if args.max_cycles is not None:
        if args.backend not in ("cycle", "rtl"):
            raise ProgramError("--max-cycles needs --backend cycle or rtl")
        options["max_cycles"] = args.max_cycles
    if args.waves:
        if args.backend != "rtl":
            raise ProgramError("--waves needs --backend rtl")
        options["waves"] = args.waves
    if args.backend == "board":
        if not args.port:
            raise ProgramError("--backend board needs --port (the board's serial port)")
        options.update(port=args.port, baud=args.baud)
    elif args.port:
        raise ProgramError("--port needs --backend board")
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


def _compile(args: argparse.Namespace) -> int:
    import time

    from openvta.api import compile as compile_operator

    common = {"config": args.config, "seed": args.seed, "shift": args.shift,
              "vthreads": args.vthreads}
    if args.operator == "dense":
        missing = [f for f, v in (("--batch", args.batch), ("--in", getattr(args, "in")),
                                  ("--out", args.out)) if v is None]
        if missing:
            raise ValueError(f"compile dense needs {', '.join(missing)}")
        params = {"batch": args.batch, "in_features": getattr(args, "in"),
                  "out_features": args.out}
    elif args.layer:
        params = {"layer": args.layer}
    else:
        missing = [f for f, v in (("--hw", args.hw), ("--ci", args.ci), ("--co", args.co),
                                  ("--kernel", args.kernel)) if v is None]
        if missing:
            raise ValueError(f"compile conv2d needs {', '.join(missing)} (or --layer)")
        params = {"hw": args.hw, "ci": args.ci, "co": args.co, "kernel": args.kernel,
                  "pad": args.pad, "stride": args.stride}
    start = time.perf_counter()
    program = compile_operator(args.operator, **params, **common)
    program.save(args.output)
    print(f"compiled {args.operator} into {program.insn_count} instructions in "
          f"{time.perf_counter() - start:.2f} s; program written to {args.output}")
    return 0


def _verilog(args: argparse.Namespace) -> int:
    from pathlib import Path

    from openvta.hw.export import export_verilog, lint

    text = export_verilog(PRESETS[args.config])
    Path(args.output).write_text(text)
    print(f"wrote {len(text.splitlines())} lines of Verilog (module openvta_top, config "
          f"{args.config}) to {args.output}")
    if args.lint:
        findings = lint(text)
        for line in findings:
            print(line, file=sys.stderr)
        print(f"verilator --lint-only -Wall: {len(findings)} warnings beyond the documented waivers")
        return 1 if findings else 0
    return 0


def _bitstream(args: argparse.Namespace) -> int:
    from openvta.hw.bitstream import build_bitstream

    out = args.output or f"build/{args.board}-{'link-test' if args.link_test else args.config}"
    mem = None if args.mem_kib is None else args.mem_kib * 1024
    report = build_bitstream(args.board, PRESETS[args.config], out, preset_name=args.config,
                             mem_bytes=mem, baud=args.baud, target_mhz=args.freq,
                             timeout_s=args.timeout, link_test=args.link_test)
    res = report["resources"]
    print(json.dumps({"fmax_mhz": report["fmax_mhz"], "timing_met": report["timing_met"],
                      **{k: f"{v['used']}/{v['available']}" for k, v in res.items()}}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "disasm":
            return _disasm(args)
        if args.command == "compile":
            return _compile(args)
        if args.command == "verilog":
            return _verilog(args)
        if args.command == "bitstream":
            return _bitstream(args)
        print(json.dumps(PRESETS[args.preset].to_dict(), indent=2))
        return 0
    except (ProgramError, BackendError, ConfigError, ISAError, ValueError) as exc:
        print(f"openvta: error: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # SimulationError and back-end failures
        print(f"openvta: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `openvta disasm prog.npz | head`: the reader has enough
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
